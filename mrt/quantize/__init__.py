"""Float graph + calibration thresholds + config -> integer cvm.Model (one rule per op)."""
from __future__ import annotations

import numpy as np

import cvm
from mrt.quantize.config import TARGETS, QuantConfig, config_for
from mrt.quantize.axes import per_sample
from mrt.quantize import rules, rules_audio, rules_compare, rules_ml, rules_select, rules_text, rules_trees, rules_vision
from mrt.quantize import rules_integer, rules_tail
from cvm.arith import bits_for, bits_max
from cvm.limits import MAX_BITS
from mrt.quantize.state import QT, QuantizeError, Quantizer, choose_multiplier, safe_name

RULES = {**rules.RULES, **rules_select.RULES, **rules_vision.RULES, **rules_trees.RULES, **rules_text.RULES, **rules_ml.RULES,
         **rules_audio.RULES, **rules_compare.RULES,
         **rules_integer.RULES, **rules_tail.RULES}  # float op -> quantization rule

__all__ = ["QuantConfig", "QuantizeError", "TARGETS", "config_for", "quantize", "emit", "verify"]


def quantize(graph, thresholds: dict[str, float], config: QuantConfig, meta: dict | None = None,
             feature_thresholds: dict[str, np.ndarray] | None = None) -> cvm.Model:
    """The quantize and verify stages together: the integer model, verified."""
    return verify(emit(graph, thresholds, config, meta, feature_thresholds), config)


def emit(graph, thresholds: dict[str, float], config: QuantConfig, meta: dict | None = None,
         feature_thresholds: dict[str, np.ndarray] | None = None,
         means: dict[str, np.ndarray] | None = None) -> tuple[cvm.Graph, dict]:
    """The integer graph (MAC splits included) and its metadata, not yet verified as a whole (each
    node was, as it was emitted). `feature_thresholds`: per-feature ranges of 1-D inputs (tabular
    data), which then get one scale per feature instead of one per tensor. `means`: the calibration
    means of the MAC inputs, for bias correction (QuantConfig.bias_correction)."""
    qz = Quantizer(graph, thresholds, config, means)
    input_thresholds = rules_trees.declare_inputs(qz, graph)  # tree-ensemble inputs: threshold codes
    input_scales = {}
    for spec in (s for s in graph.inputs if s.name not in qz.q):
        name = qz.fresh(spec.name)
        feat = (feature_thresholds or {}).get(spec.name)
        if spec.dtype == "int64":  # token ids, masks: scale 1, declared bits (rules_text.integer_input)
            qz.input(name, spec.shape, rules_text.integer_input(qz, spec, thresholds))
            qz.q[spec.name], input_scales[name] = QT(name=name, scale=np.asarray(1.0), narrow=True, exact=True), 1.0
            continue
        qz.input(name, spec.shape, qz.act_bits(spec.name) if feat is None else config.feature_input_bits)
        if feat is not None:
            scale = np.where(feat > 0, feat, 1.0).astype(np.float64) / bits_max(config.feature_input_bits)
            qz.q[spec.name] = QT(name=name, scale=scale, axis=0)
            input_scales[name] = scale.tolist()
        else:
            scale = qz.scale_of(spec.name)
            qz.q[spec.name] = QT(name=name, scale=np.asarray(scale), narrow=True)
            input_scales[name] = scale
    for node in graph.nodes:
        rule = RULES.get(node.op)
        if rule is None:
            raise QuantizeError(f"node {node.name!r}: op {node.op!r} has no quantization rule "
                                f"(supported: {sorted(RULES)})")
        qz.q[node.outputs[0]] = rule(qz, per_sample(node))
    outputs, output_scales = [], {}
    for fname in graph.outputs:
        exact = qz.q[fname].exact or fname in graph.integer_outputs  # an index or an integer stays one: scale 1
        scale = 1.0 if exact else qz.scale_of(fname, config.output_bits) * 2 ** config.output_headroom_bits
        bits = _integer_output_bits(qz, qz.q[fname], config) if exact else config.output_bits
        t = qz.requant(qz.q[fname], scale, bits, name=f"{safe_name(fname)}.out")
        outputs.append(t.name)
        output_scales[t.name] = scale
    tensor_map = {f: [t.name, np.atleast_1d(t.scale).astype(float).tolist(), t.axis]
                  for f, t in qz.q.items()}
    meta = dict(meta or {})
    meta.update({"input_thresholds": input_thresholds} if input_thresholds else {})
    meta.update({"input_scales": input_scales, "output_scales": output_scales, "tensor_map": tensor_map,
                 "quantization": _recorded(config)})
    return qz.b.graph(outputs, footprint=qz.bounds.footprint()), meta


def _integer_output_bits(qz: Quantizer, t: QT, config: QuantConfig) -> int:
    """The bits of an output at scale 1 (an integer, an index): as many as its proven interval needs at that scale,
    never under output_bits (so an output within them keeps its bytes), and never over the target's accumulator
    budget (int32 for cvm), beyond which the requant clips."""
    lo, hi = qz.interval(t.name)
    m, s = choose_multiplier(np.asarray(t.scale, np.float64), max(-lo, hi))  # as requant will rescale it
    reach = (max(-lo, hi) * int(m.max()) + (1 << s >> 1)) >> s
    return max(config.output_bits, min(bits_for(-reach, reach), MAX_BITS, config.acc_bits))


def _recorded(config: QuantConfig) -> dict:
    """The config as the model's metadata records it; fields that only some models use are written only there,
    so that every other model's metadata stays as it was: wide_weight_bits when set, lookup_range with lookups."""
    skip = {"wide_weight_bits"} if config.wide_weight_bits is None else set()
    skip |= {"lookup_range"} if config.lut_input_bits is None else set()
    return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(config).items() if k not in skip}


def verify(emitted: tuple[cvm.Graph, dict], config: QuantConfig) -> cvm.Model:
    """The verified model (cvm.Model verifies the whole graph), within the target's accumulator budget."""
    graph, meta = emitted
    model = cvm.Model(graph, meta)
    check_accumulators(model, config)
    return model


def check_accumulators(model: cvm.Model, config: QuantConfig) -> None:
    """The accumulator width the verifier proved is within the target's budget: MAC splits plan with
    the verifier's own bound, so a model over budget is a bug in the quantizer, never a user error."""
    proven = model.analysis.max_accumulator_bits
    if proven > config.acc_bits:
        raise QuantizeError(f"internal: the verifier proves {proven}-bit accumulators, over the "
                            f"{config.acc_bits}-bit budget of target {config.target!r}")
