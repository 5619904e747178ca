"""fold_input_affine: a StandardScaler in front of a dense layer folds into it, outputs unchanged."""
from pathlib import Path

import numpy as np

from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.passes.fold_input_affine import fold_input_affine

FIX = Path(__file__).parents[2] / "fixtures"


def test_scaler_folds_into_dense():
    for name in ("cancer_linear", "cancer_linear_gemm"):
        g = import_onnx(FIX / "models" / f"{name}.onnx")
        folded = fold_input_affine(g)
        assert [n.op for n in folded.nodes][0] == "dense"
        assert not {"sub", "mul"} & {n.op for n in folded.nodes}
        with np.load(FIX / "data" / "cancer_linear_test.npz") as d:
            x = d["x"]
        a, b = run_float(g, x), run_float(folded, x)
        for k in a:
            assert np.allclose(a[k], b[k], rtol=1e-5, atol=1e-5)


def test_nothing_to_fold_is_unchanged():
    g = import_onnx(FIX / "models" / "digits_mlp.onnx")
    assert [n.op for n in fold_input_affine(g).nodes] == [n.op for n in g.nodes]
