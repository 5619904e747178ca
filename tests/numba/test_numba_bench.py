"""cvm.tools.bench runs end to end on small settings and prints its table (no timing is asserted)."""
import io

import numpy as np

from cvm.tools import bench


def test_run_bench_small_rows_and_table():
    rows = bench.run_bench(["lenet_int8"], batches=(1, 2), threads=1, backends=("numba", "reference"),
                           startup=False, gemm=False, min_seconds=0.0, log=lambda s: None)
    lat = [r for r in rows if r["kind"] == "latency"]
    assert {(r["batch"], r["backend"]) for r in lat} == {(1, "numba"), (1, "reference"), (2, "numba"), (2, "reference")}
    assert all(r["median_ms"] > 0 and r["per_second"] > 0 for r in lat)
    out = io.StringIO()
    bench.print_table(rows, out)
    assert "lenet_int8" in out.getvalue() and "numba" in out.getvalue()


def test_hand_built_models_agree_with_the_reference():
    for build in (bench.lenet_int8, bench.resnet_int8):
        model = build()
        x = np.random.default_rng(0).integers(-127, 128, (2,) + model.inputs[0].shape[1:]).astype(np.int8)
        a, b = model.run(x, backend="numba"), model.run(x, backend="reference")
        assert a.dtype == b.dtype and np.array_equal(a, b)
        assert len(np.unique(a)) > 2  # the shifts keep values alive through the layers


def test_gemm_row_and_peak():
    rows = bench.bench_gemm(threads=1, m=64, k=64, n=64, min_seconds=0.0)
    assert rows and all(r["gops"] > 0 for r in rows)
