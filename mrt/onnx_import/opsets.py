"""Which ONNX opsets MRT reads, and how an older model is brought up to the oldest one it implements.

MRT's handlers implement the op schemas of default-domain opsets MIN_OPSET..MAX_OPSET. A model from
OLDEST_OPSET up to MIN_OPSET - 1 (exporters of 2019-2021 wrote opsets 7 to 12) is first rewritten to
MIN_OPSET by onnx.version_converter, which knows every schema change between them (Upsample -> Resize,
Clip's min/max attributes -> inputs, Squeeze/Unsqueeze axes -> inputs, Softmax's 2-D coercion, ...).
"""
from __future__ import annotations

import onnx
from onnx import version_converter

from mrt.errors import UnsupportedOp
from mrt.onnx_import import softmax_upgrade

OLDEST_OPSET = 7  # the oldest default-domain opset onnx.version_converter upgrades reliably
MIN_OPSET = 13  # Softmax/Clip/Reshape semantics MRT implements start here
MAX_OPSET = 28  # newest opset checked (onnx 1.23): 26-28 change no supported op but Cast and Celu, which only gain types
ML_DOMAIN = "ai.onnx.ml"
MAX_ML_OPSET = 5


def default_opset(model: onnx.ModelProto) -> int | None:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return max(versions) if versions else None


def upgrade(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model itself when its opset is one MRT implements; rewritten to MIN_OPSET when it is older,
    or an UnsupportedOp naming the opset and what the converter could not do."""
    opset = default_opset(model)
    if opset is None or MIN_OPSET <= opset <= MAX_OPSET:
        return model
    if opset > MAX_OPSET:
        raise UnsupportedOp(f"model opset {opset}: MRT imports opsets {OLDEST_OPSET}..{MAX_OPSET}")
    if opset < OLDEST_OPSET:
        raise UnsupportedOp(f"model opset {opset}: MRT imports opsets {OLDEST_OPSET}..{MAX_OPSET} "
                            f"(older models: re-export them at opset {MIN_OPSET} or newer)")
    try:
        upgraded = version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter raises many types; each is the model's limit
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsupportedOp(f"model opset {opset}: onnx.version_converter could not upgrade it to opset "
                            f"{MIN_OPSET} ({first})") from None
    if opset < 11:
        _keep_asymmetric(model, upgraded)
    softmax_upgrade.last_axis_normalisers(model, upgraded)
    return upgraded


def _keep_asymmetric(old: onnx.ModelProto, new: onnx.ModelProto) -> None:
    """Upsample and Resize-10 sample at asymmetric coordinates (x_in = x_out / scale; nearest floors it).
    The converter's Resize 10 -> 11 step leaves the new defaults (half_pixel, round_prefer_floor), which
    move every linear sample and, at fractional scales, nearest ones; set what the old model meant on
    each Resize it made from one of them (found by output name)."""
    old_resizes = {n.output[0] for n in old.graph.node if n.op_type in ("Upsample", "Resize")}
    for node in new.graph.node:
        if node.op_type == "Resize" and node.output[0] in old_resizes:
            mode = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "mode"), b"nearest")
            meant = {"coordinate_transformation_mode": "asymmetric"}
            if mode == b"nearest":
                meant["nearest_mode"] = "floor"
            for a in [a for a in node.attribute if a.name in meant]:
                node.attribute.remove(a)
            node.attribute.extend(onnx.helper.make_attribute(k, v) for k, v in meant.items())


def opsets(model: onnx.ModelProto) -> dict[str, int]:
    """{domain: version} of an (upgraded) model; "" is the default domain."""
    found: dict[str, int] = {}
    for o in model.opset_import:
        domain = "" if o.domain == "ai.onnx" else o.domain
        found[domain] = max(found.get(domain, 0), o.version)
    if not MIN_OPSET <= found.get("", MIN_OPSET) <= MAX_OPSET:
        raise UnsupportedOp(f"model opset {found['']}: MRT imports opsets {OLDEST_OPSET}..{MAX_OPSET}")
    if found.get(ML_DOMAIN, 1) > MAX_ML_OPSET:
        raise UnsupportedOp(f"model {ML_DOMAIN} opset {found[ML_DOMAIN]}: MRT imports up to {MAX_ML_OPSET}")
    found.setdefault("", MAX_OPSET)
    return found
