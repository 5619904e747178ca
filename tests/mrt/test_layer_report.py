"""`mrt eval`: per-layer error against float, its plot, and cosine similarity to the float outputs."""
from pathlib import Path

import numpy as np

import cvm
from mrt.cli import main as mrt_main
from mrt.evaluate import client_transform, cosine, evaluate

FIX = Path(__file__).parents[2] / "fixtures"
ONNX, CVM = FIX / "models" / "digits_mlp.onnx", FIX / "models" / "digits_mlp.cvm"


def _test_data():
    with np.load(FIX / "data" / "digits_mlp_test.npz") as d:
        return d["x"].astype(np.float32), d["y"]


def test_layers_in_graph_order_with_sqnr():
    x, y = _test_data()
    r = evaluate(ONNX, cvm.load(CVM), x[:64], y[:64])
    names = [e.name for e in r.layer_errors]
    assert names[-1] == "logits" and len(names) == len(set(names)) >= 4
    assert all(0 <= e.rel_l2 < 0.1 and e.sqnr_db > 20 for e in r.layer_errors)
    assert 0.99 < r.cosine <= 1.0 + 1e-9


def test_cli_writes_the_plot_and_the_cosine_column(tmp_path, capsys):
    x, y = _test_data()
    np.savez(tmp_path / "t.npz", x=x[:32], y=y[:32])
    png = tmp_path / "layers.png"
    assert mrt_main(["eval", str(ONNX), str(CVM), "--data", str(tmp_path / "t.npz"), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "cosine to float" in out and "worst layers" in out and f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cosine_and_client_transform():
    a = np.array([[1.0, 2.0, 3.0]])
    assert abs(cosine(a, 2 * a) - 1) < 1e-12
    p = client_transform({"output_transform": "softmax"}, a)
    assert abs(p.sum() - 1) < 1e-12 and client_transform({}, a) is a


def _layers(n: int):
    from mrt.layer_report import LayerError
    return [LayerError(f"/backbone/stage{i // 10}/block{i % 10}/conv/BatchNormalization_output_0",
                       0.001 * (1 + (i * 37) % 101)) for i in range(n)]


def test_plot_has_one_size_at_any_layer_count(tmp_path):
    from PIL import Image

    from mrt.layer_report import plot
    sizes = {Image.open(plot(_layers(n), tmp_path / f"{n}.png")).size for n in (8, 138, 1000)}
    assert len(sizes) == 1 and next(iter(sizes))[0] < 1400


def test_plot_names_the_worst_in_full_and_summarises_the_rest():
    from mrt.layer_report import WORST_NAMED, legend_lines, worst
    layers = _layers(138)
    text = "\n".join(legend_lines(layers))
    assert all(e.name in text for e in worst(layers, WORST_NAMED))
    assert text.count(" dB  layer ") == WORST_NAMED
    assert f"the other {138 - WORST_NAMED} layers" in text


def test_table_and_plot_name_the_same_layers(tmp_path, capsys):
    from mrt.layer_report import WORST_NAMED
    x, y = _test_data()
    np.savez(tmp_path / "t.npz", x=x[:32], y=y[:32])
    assert mrt_main(["eval", str(ONNX), str(CVM), "--data", str(tmp_path / "t.npz"),
                     "--plot", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    table = out.split("worst layers", 1)[1].split("wrote", 1)[0].strip().splitlines()[2:]  # past the header and its rule
    assert len(table) == min(WORST_NAMED, 6)
