"""A harder model than the fixtures for fidelity work: a deeper CIFAR-size ResNet (widths 32/64/128,
3/3/3 BasicBlocks) with random weights and random BatchNorm statistics, so channel ranges differ
by orders of magnitude as in real pretrained networks. Not trained, not committed (7 MB): written to
.cache/fidelity/ by scripts/fidelity/setup.sh. Run with a torch interpreter (.venv-fhe has one):

    .venv-fhe/bin/python scripts/fidelity/resnet_deep_random.py OUT_DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures" / "train"))
from resnet_cifar import ResNetCifar  # noqa: E402

SEED = 7


def randomize_batchnorm(model: torch.nn.Module, rng: np.random.Generator) -> None:
    """Running statistics and affine parameters drawn per channel over orders of magnitude."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.tensor(rng.normal(0, 0.5, c), dtype=torch.float32))
            m.running_var.copy_(torch.tensor(10 ** rng.uniform(-1.5, 1.0, c), dtype=torch.float32))
            m.weight.data.copy_(torch.tensor(10 ** rng.uniform(-1.0, 0.5, c), dtype=torch.float32))
            m.bias.data.copy_(torch.tensor(rng.normal(0, 0.3, c), dtype=torch.float32))


def main(out: Path) -> Path:
    torch.manual_seed(SEED)
    model = ResNetCifar(blocks=(3, 3, 3)).eval()
    randomize_batchnorm(model, np.random.default_rng(SEED))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "resnet_deep_random.onnx"
    torch.onnx.export(model, torch.zeros(1, 3, 32, 32), str(path), input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}}, opset_version=17, dynamo=False)
    return path


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))
