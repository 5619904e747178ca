"""A zoo of real transformer / timm architectures, random weights, small configs, exported to ONNX the way a user
would (torch.onnx.export with its default options), for scripts/models/zoo_convert.py to convert with MRT.

Each architecture is built offline from its transformers config class (small: 2 layers, hidden 64) or with
timm.create_model(name, pretrained=False) (the smallest variant, a small image), seeded, in eval mode, and exported
twice: at a fixed batch 1 (NAME_b1.onnx) and with a symbolic batch axis (NAME_dyn.onnx; the batch dim only, the
sequence / image / audio length fixed). The default exporter (dynamo) is tried first; where it raises, or its
model does not run in onnxruntime, or disagrees with torch, the legacy exporter (dynamo=False) is used, and the
manifest records which and why. Writes to .cache/models/zoo/ (not committed):

    NAME_b1.onnx, NAME_dyn.onnx   the two exports
    NAME_data.npz                 calib_INPUT (32 samples), held_INPUT (8 others), held_out_OUTPUT (torch's float
                                  outputs of the held-out samples); samples stacked on ONNX axis 0 (the batch)
    manifest.json                 per model: inputs, outputs, exporter used per variant, opset, node count, ops

Text models take input_ids and attention_mask (int64, masks all ones, ids uniform in [5, vocab): no pad or
special ids, so RoBERTa's padding-derived positions are all real); images are standard normal; Whisper's
input_features are standard normal; wav2vec2's raw waveform is 0.1 * standard normal.

Run with an interpreter that has torch, transformers 5, timm and onnxscript (not the main venv), e.g.

    .venv-fhe/bin/python -m venv .cache/venv-export
    echo "$PWD/.venv-fhe/lib/python3.11/site-packages" > .cache/venv-export/lib/python3.11/site-packages/fhe.pth
    .cache/venv-export/bin/pip install "transformers>=5" timm onnxscript
    nice -n 19 .cache/venv-export/bin/python scripts/models/zoo_export.py [NAME ...]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import re
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch

# The torchvision wheel next to .venv-fhe's CPU torch is a CUDA build whose C++ ops do not load; its Python side
# registers fake kernels for these schemas at import (timm imports torchvision), so define them first
# (as scripts/models/export_torchvision.py does). No model here uses either op.
for _op in ("nms", "qnms"):
    try:
        torch.library.define(f"torchvision::{_op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    except RuntimeError:
        pass

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".cache" / "models" / "zoo"
SEED = 0
CALIB, HELD = 32, 8
SEQ = 16  # tokens
VOCAB = 1000
TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
            max_position_embeddings=64, vocab_size=VOCAB)
IMG = 128  # pixels, square
WAV = 8000  # samples of raw audio at 16 kHz (0.5 s)
MELS, FRAMES = 80, 100  # Whisper: 80 mel bins x 100 frames (1 s at a 10 ms hop)


class Wrap(torch.nn.Module):
    """The model's chosen outputs as a tuple, with named forward arguments (dynamic_shapes is keyed by them)."""

    def __init__(self, model, outputs):
        super().__init__()
        self.model, self.outputs = model, outputs

    def pick(self, out):
        if isinstance(out, torch.Tensor):
            return out
        return tuple(out[k] for k in self.outputs) if len(self.outputs) > 1 else out[self.outputs[0]]


class TextWrap(Wrap):
    def forward(self, input_ids, attention_mask):
        return self.pick(self.model(input_ids=input_ids, attention_mask=attention_mask))


class ImageWrap(Wrap):
    def forward(self, pixel_values):
        return self.pick(self.model(pixel_values))


class FeaturesWrap(Wrap):
    def forward(self, input_features):
        return self.pick(self.model(input_features=input_features))


class WaveWrap(Wrap):
    def forward(self, input_values):
        return self.pick(self.model(input_values=input_values))


def _text(cls_name, config_name, outputs, **config):
    def build():
        import transformers
        cfg = getattr(transformers, config_name)(**config)
        return TextWrap(getattr(transformers, cls_name)(cfg), outputs)
    return {"kind": "text", "build": build, "outputs": outputs}


def _whisper():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    cfg = WhisperConfig(vocab_size=VOCAB, num_mel_bins=MELS, d_model=64, encoder_layers=2, encoder_attention_heads=2,
                        encoder_ffn_dim=128, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=128,
                        max_source_positions=FRAMES // 2, max_target_positions=32)
    return FeaturesWrap(WhisperEncoder(cfg), ["last_hidden_state"])


def _wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    cfg = Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                         conv_dim=(32,) * 7, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                         vocab_size=32)
    return WaveWrap(Wav2Vec2Model(cfg), ["last_hidden_state"])


def _timm(name, **kwargs):
    def build():
        import timm
        return ImageWrap(timm.create_model(name, pretrained=False, **kwargs), ["logits"])
    return {"kind": "image", "build": build, "outputs": ["logits"], "timm": name, "timm_kwargs": kwargs}


LH, PO = "last_hidden_state", "pooler_output"
MODELS = {
    "bert": _text("BertModel", "BertConfig", [LH, PO], **TEXT),
    "distilbert": _text("DistilBertModel", "DistilBertConfig", [LH], vocab_size=VOCAB, dim=64, n_layers=2, n_heads=2,
                        hidden_dim=128, max_position_embeddings=64),
    "roberta": _text("RobertaModel", "RobertaConfig", [LH, PO], **{**TEXT, "max_position_embeddings": SEQ + 48}),
    "albert": _text("AlbertModel", "AlbertConfig", [LH, PO], embedding_size=32, **TEXT),
    "electra": _text("ElectraModel", "ElectraConfig", [LH], embedding_size=32, **TEXT),
    "gpt2": _text("GPT2LMHeadModel", "GPT2Config", ["logits"], vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2,
                  n_head=2, use_cache=False),
    "t5_encoder": _text("T5EncoderModel", "T5Config", [LH], vocab_size=VOCAB, d_model=64, d_kv=32, d_ff=128,
                        num_layers=2, num_heads=2, use_cache=False),
    "clip_text": _text("CLIPTextModel", "CLIPTextConfig", [LH, PO], eos_token_id=VOCAB - 1, bos_token_id=VOCAB - 2,
                       pad_token_id=0, **TEXT),
    "whisper_encoder": {"kind": "features", "build": _whisper, "outputs": [LH]},
    "wav2vec2": {"kind": "wave", "build": _wav2vec2, "outputs": [LH]},
    # window 4 at 128 px: stage resolutions 32, 16, 8, 4, each a whole number of windows
    "swin": _timm("swin_tiny_patch4_window7_224", img_size=IMG, window_size=4),
    "levit": _timm("levit_128s", img_size=IMG),
    "mobilevit": _timm("mobilevit_xxs", img_size=IMG),
    "edgenext": _timm("edgenext_xx_small"),
}


def samples(name: str, kind: str, n: int, rng) -> dict[str, np.ndarray]:
    """n ONNX samples of each input, stacked on axis 0."""
    if kind == "text":
        ids = rng.integers(5, VOCAB, size=(n, SEQ), dtype=np.int64)
        if name == "clip_text":  # CLIP's token sequence ends with its end-of-text id, whose state is the pooled one
            ids[:, -1] = VOCAB - 1
        return {"input_ids": ids, "attention_mask": np.ones((n, SEQ), np.int64)}
    if kind == "image":
        return {"pixel_values": rng.standard_normal((n, 3, IMG, IMG)).astype(np.float32)}
    if kind == "features":
        return {"input_features": rng.standard_normal((n, MELS, FRAMES)).astype(np.float32)}
    return {"input_values": (0.1 * rng.standard_normal((n, WAV))).astype(np.float32)}


def as_tuple(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def first_line(e: BaseException) -> str:
    """The exception's first line, and its root cause's (the exporters wrap the real error), without colours."""
    def one(x):
        lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(x)).strip().splitlines() if ln.strip()]
        return f"{type(x).__name__}: {lines[0] if lines else ''}"[:300]
    root = e
    while root.__cause__ is not None or (root.__context__ is not None and not root.__suppress_context__):
        root = root.__cause__ or root.__context__
    return one(e) if root is e else f"{one(e)} <- {one(root)}"


def export(model, feeds: dict, outputs: list, path: Path, dynamic: bool, dynamo: bool):
    """torch.onnx.export with its defaults, the batch axis of every input symbolic where `dynamic`."""
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    names = list(feeds)
    kw = dict(input_names=names, output_names=outputs)
    if dynamic and dynamo:
        batch = torch.export.Dim("batch")
        kw["dynamic_shapes"] = {k: {0: batch} for k in names}
    elif dynamic:
        kw["dynamic_axes"] = {**{k: {0: "batch"} for k in names}, **{k: {0: "batch"} for k in outputs}}
    for f in (path, path.with_name(path.name + ".data")):
        f.unlink(missing_ok=True)
    if dynamo:
        torch.onnx.export(model, args, str(path), **kw)  # dynamo=True is the default
    else:
        torch.onnx.export(model, args, str(path), dynamo=False, **kw)


def check(path: Path, feeds: dict, want: tuple, dynamic: bool) -> float:
    """Runs the export in onnxruntime (per sample at batch 1, the whole batch where dynamic) and returns the largest
    relative difference from torch's outputs."""
    import onnxruntime as ort
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    n = len(next(iter(feeds.values())))
    if dynamic:
        got = s.run(None, feeds)
    else:
        rows = [s.run(None, {k: v[i:i + 1] for k, v in feeds.items()}) for i in range(n)]
        got = [np.concatenate(parts) for parts in zip(*rows)]
    if len(got) != len(want):
        raise ValueError(f"onnxruntime gives {len(got)} outputs, torch {len(want)}")
    return max(float(np.abs(g - w).max() / (np.abs(w).max() + 1e-12)) for g, w in zip(got, want))


def graph_info(path: Path) -> dict:
    import onnx
    m = onnx.load(str(path), load_external_data=False)
    ops = sorted({n.op_type for n in m.graph.node})
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    ext = path.with_name(path.name + ".data").exists()
    return {"opset": opset, "nodes": len(m.graph.node), "ops": ops, "external_data": ext,
            "inputs": {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                       for i in m.graph.input},
            "outputs": {o.name: [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]
                        for o in m.graph.output}}


TOLERANCE = 1e-3  # largest relative difference of onnxruntime's outputs from torch's that counts as a correct export


def export_one(name: str) -> dict:
    spec = MODELS[name]
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    model = spec["build"]().eval()
    params = sum(p.numel() for p in model.parameters())
    calib = samples(name, spec["kind"], CALIB, rng)
    held = samples(name, spec["kind"], HELD, rng)
    with torch.no_grad():
        want = tuple(t.numpy() for t in as_tuple(model(*(torch.from_numpy(v) for v in held.values()))))
    outputs = spec["outputs"]
    np.savez(OUT / f"{name}_data.npz", **{f"calib_{k}": v for k, v in calib.items()},
             **{f"held_{k}": v for k, v in held.items()}, **{f"held_out_{k}": v for k, v in zip(outputs, want)})
    entry = {"kind": spec["kind"], "params": params, "inputs": list(held), "outputs": outputs,
             "input_shapes": {k: list(v.shape[1:]) for k, v in held.items()},
             "output_shapes": {k: list(v.shape[1:]) for k, v in zip(outputs, want)}}
    if "timm" in spec:
        entry["timm"] = {"name": spec["timm"], **spec["timm_kwargs"]}
    for variant, dynamic in (("b1", False), ("dyn", True)):
        path = OUT / f"{name}_{variant}.onnx"
        example = {k: v[:2 if dynamic else 1] for k, v in held.items()}  # batch 2: a size-1 dim would be specialized
        tried = {}
        for dynamo in (True, False):
            label = "dynamo" if dynamo else "legacy (dynamo=False)"
            t = time.perf_counter()
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    export(model, example, outputs, path, dynamic, dynamo)
                diff = check(path, held, want, dynamic)
                if not diff < TOLERANCE:
                    raise ValueError(f"onnxruntime's outputs differ from torch's by {diff:.3g} (relative)")
            except Exception as e:  # noqa: BLE001 - any exporter failure falls back to the other exporter
                tried[label] = first_line(e)
                if "--trace" in sys.argv:
                    traceback.print_exc()
                continue
            entry[variant] = {"exporter": label, "export_s": round(time.perf_counter() - t, 1),
                              "ort_vs_torch_rel": diff, **graph_info(path)}
            if tried:
                entry[variant]["default_exporter_error"] = tried["dynamo"]
            break
        else:
            path.unlink(missing_ok=True)
            entry[variant] = {"exporter": None, "errors": tried}
        print(f"{name:16s} {variant:3s} {entry[variant].get('exporter')}  "
              f"{entry[variant].get('default_exporter_error') or entry[variant].get('errors') or ''}", flush=True)
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", default=list(MODELS), help=f"default: all of {' '.join(MODELS)}")
    ap.add_argument("--trace", action="store_true", help="print the exporters' tracebacks")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    import onnxruntime
    import timm
    import transformers
    manifest["_versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                             "timm": timm.__version__, "onnxruntime": onnxruntime.__version__}
    torch.set_num_threads(1)
    for name in a.names:
        try:
            manifest[name] = export_one(name)
        except Exception as e:  # noqa: BLE001 - a model that does not build is recorded, the rest go on
            manifest[name] = {"error": first_line(e)}
            print(f"{name:16s} build failed: {first_line(e)}", flush=True)
        manifest_path.write_text(json.dumps(manifest, indent=1))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
