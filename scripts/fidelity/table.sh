#!/usr/bin/env bash
# The fidelity table of docs/fidelity.md: every fixture classifier (and the deeper random-weight
# ResNet when a torch interpreter can build it) under each calibration method, beside onnxruntime
# int8 on the same calibration and test data.   ./scripts/fidelity/table.sh [--methods absmax,mse]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
for m in digits_mlp cancer_linear mnist_cnn resnet_cifar; do
  $PY scripts/fidelity/compare.py fixtures/models/$m.onnx fixtures/data/${m}_calib.npz fixtures/data/${m}_test.npz "$@"
done
$PY scripts/fidelity/compare.py fixtures/models/digits_mlp.onnx fixtures/data/digits_mlp_calib.npz \
  fixtures/data/digits_mlp_test.npz --set target=fhe --no-ort "$@"
DEEP=.cache/fidelity/resnet_deep_random.onnx
if [ ! -f "$DEEP" ] && [ -x .venv-fhe/bin/python ]; then
  .venv-fhe/bin/python scripts/fidelity/resnet_deep_random.py .cache/fidelity >/dev/null 2>&1 || true
fi
if [ -f "$DEEP" ]; then
  $PY scripts/fidelity/compare.py "$DEEP" fixtures/data/resnet_cifar_calib.npz fixtures/data/resnet_cifar_test.npz "$@"
else
  echo "skipped $DEEP: no torch interpreter (.venv-fhe, scripts/setup_fhe.sh) to build it"
fi
