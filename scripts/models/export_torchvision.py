"""torchvision classifiers exported to ONNX for conversion measurements (not committed: written to
.cache/models/, which git ignores), with random weights and BatchNorm statistics set from a forward
pass in training mode on random images (so activations stay normalised, as in a trained network),
plus random calibration images. Run with a torch interpreter (.venv-fhe has torch; torchvision
installs with `.venv-fhe/bin/python -m pip install --no-deps torchvision`):

    .venv-fhe/bin/python scripts/models/export_torchvision.py [--size 224] [--samples 64] [NAME ...]

NAME is a torchvision.models builder (default: resnet50 densenet121 efficientnet_b0 vgg16).
Writes .cache/models/NAME_SIZE.onnx and .cache/models/calib_SIZE_SAMPLES.npz (x: float32
(SAMPLES, 3, SIZE, SIZE), standard normal: what ImageNet normalisation gives roughly).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

# The torchvision wheel here is a CUDA build whose C++ ops do not load on a CPU-only torch; its
# Python side registers fake kernels for these two schemas at import, so define them first.
# Classification models use neither op.
for _op in ("nms", "qnms"):
    torch.library.define(f"torchvision::{_op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
import torchvision  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from sidebyside import TORCHVISION as ALL  # noqa: E402

torch.backends.mha.set_fastpath_enabled(False)  # ViT's attention exports only on the slow path

OUT = Path(__file__).resolve().parents[2] / ".cache" / "models"
DEFAULT = ("resnet50", "densenet121", "efficientnet_b0", "vgg16")
SEED = 0


def set_batchnorm_stats(model: torch.nn.Module, size: int, samples: int = 8) -> None:
    """Running statistics = the exact mean/variance of the model's own activations on random images
    (momentum None: a cumulative average over the passes)."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(samples, 3, size, size))
    model.eval()


def randomize_zero_init(model: torch.nn.Module) -> None:
    """torchvision initialises some parameters to zero (ViT's class token and classifier head), which
    makes every logit exactly 0: give those seeded random values (std 0.02, or 1/sqrt(fan_in) for a
    weight), so fidelity figures compare non-trivial outputs."""
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() >= 1 and not p.any() and not pname.endswith("bias"):
                p.normal_(0.0, 1 / p.shape[-1] ** 0.5 if pname.endswith("weight") else 0.02)


def export(name: str, size: int, out: Path) -> Path:
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, name)(weights=None).eval()
    set_batchnorm_stats(model, size)
    randomize_zero_init(model)
    path = out / f"{name}_{size}.onnx"
    torch.onnx.export(model, torch.zeros(1, 3, size, size), str(path), input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}}, opset_version=17, dynamo=False)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", default=DEFAULT, help=f"torchvision builders, or 'all': {' '.join(ALL)}")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--samples", type=int, default=64)
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    calib = OUT / f"calib_{args.size}_{args.samples}.npz"
    if not calib.exists():
        x = np.random.default_rng(SEED).standard_normal((args.samples, 3, args.size, args.size), np.float32)
        np.savez(calib, x=x)
    print(f"{calib}")
    for name in ALL if args.names == ["all"] else args.names:
        path = export(name, args.size, OUT)
        params = sum(p.numel() for p in getattr(torchvision.models, name)(weights=None).parameters())
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB  {params / 1e6:.1f}M parameters")


if __name__ == "__main__":
    main()
