"""What audio models wrap around their recurrent cell: inputs bound to constants before import (bind_inputs), 1-D
convolutions (conv1d_as_2d), a reflect pad longer than concat's input limit, reductions to [N] read back by a
reshape (keep_reduced_axes); and silero-vad, a pretrained LSTM voice-activity detector from its PyPI wheel, end to
end (skipped unless scripts/models/vad_fetch.py ran)."""
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.onnx_import.bind import bind_inputs
from mrt.onnx_import.importer import import_onnx
from mrt.passes import run_pipeline
from mrt.float_exec import run_float
from mrt.pipeline import convert

ROOT = Path(__file__).resolve().parents[2]
VAD = ROOT / ".cache" / "models" / "vad" / "silero_vad.onnx"


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _audio_model():
    """rate (int64 input) == 16000 selects reflect pad 64 -> conv1d (8 taps, stride 4) -> relu -> mean over all
    per-sample axes -> unsqueeze; the other branch doubles the input."""
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.3, (6, 1, 8)).astype(np.float32)
    then = helper.make_graph([
        helper.make_node("Unsqueeze", ["x", "ax1"], ["x3"]),
        helper.make_node("Pad", ["x3", "pads"], ["xp"], mode="reflect"),
        helper.make_node("Conv", ["xp", "w"], ["c"], strides=[4]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("ReduceMean", ["r", "ax12"], ["m"], keepdims=0),
        helper.make_node("Unsqueeze", ["m", "ax1"], ["t_out"]),
    ], "then", [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Add", ["x", "x"], ["e_out"])], "else", [],
                              [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Equal", ["rate", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["y"], then_branch=then, else_branch=other)]
    inits = [("k16", np.array(16000, np.int64)), ("ax1", np.array([1], np.int64)),
             ("ax12", np.array([1, 2], np.int64)), ("pads", np.array([0, 0, 64, 0, 0, 64], np.int64)), ("w", w)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 96]),
                          helper.make_tensor_value_info("rate", TensorProto.INT64, [])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)


def test_bound_input_selects_the_branch_and_the_audio_ops_convert():
    model = _audio_model()
    bound = bind_inputs(model, {"rate": 16000})
    assert [i.name for i in bound.graph.input] == ["x"]
    x = np.random.default_rng(1).normal(0, 0.5, (64, 96)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x, "rate": np.array(16000)})[0]
    g = run_pipeline(import_onnx(bound, input_shapes={"x": (96,)}))
    assert not any(n.op == "conv" and len(g.full_shape(n.inputs[0])) == 3 for n in g.nodes)  # conv1d_as_2d
    conv = next(n for n in g.nodes if n.op == "conv")  # its relu reads it before the reshape back (unsigned scale)
    assert [n.op for n in g.nodes if conv.outputs[0] in n.inputs] == ["relu"]
    np.testing.assert_allclose(run_float(g, {"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    m = convert(bound, x, progress=False)
    q = m.quantize_input(x)
    out = m.run(q, backend="numba")
    np.testing.assert_array_equal(out, m.run(q, backend="reference"))
    got = m.dequantize_output(out)
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()


def test_bind_refusals():
    model = _audio_model()
    with pytest.raises(UnsupportedOp, match="not graph inputs"):
        bind_inputs(model, {"sr": 16000})
    with pytest.raises(UnsupportedOp, match="does not fit the declared shape"):
        bind_inputs(model, {"rate": [16000, 8000]})
    with pytest.raises(UnsupportedOp, match="every graph input"):
        bind_inputs(model, {"rate": 16000, "x": np.zeros((1, 96))})


def test_unbound_rate_is_refused_by_name():
    """A scalar setting input left unbound is an input like any other, so the If it chooses a branch by is refused
    by name (bind it instead)."""
    with pytest.raises(UnsupportedOp, match="If condition .* must be a constant"):
        import_onnx(_audio_model(), input_shapes={"x": (96,), "rate": ()})


@pytest.mark.skipif(not VAD.exists(), reason="silero-vad not fetched (scripts/models/vad_fetch.py)")
def test_silero_vad_converts_and_streams_close_to_float():
    """16 kHz, 12-bit activations, 4 synthetic streams x 4 s (vad_data.py), each model carrying its own state.
    Measured by scripts/models/vad_measure.py on 16 x 10 s: decisions equal to float's on 95.5% of chunks (8-bit
    activations: 71.5%; onnxruntime int8: 53.5%); here the floor is 90%, with numba == reference."""
    sys.path.insert(0, str(ROOT / "scripts" / "models"))
    import vad_data
    import vad_measure

    float_s = vad_measure.session(VAD)
    m = vad_measure.convert_vad(VAD, float_s, wide=True)
    assert m.graph.opset == 2 and any(n.op == "isqrt" for n in m.graph.nodes)  # the STFT magnitude, fused
    x, _ = vad_data.streams(4, 4.0, vad_measure.TEST_SEED)
    want, states = vad_measure.ort_stream(float_s, x)
    first = {"input": m.quantize_input(x[:, 5], "input"), "state": m.quantize_input(states[5], "state")}
    ref, fast = m.run(first, backend="reference"), m.run(first, backend="numba")
    assert all(np.array_equal(ref[k], fast[k]) for k in ref)
    ours = vad_measure.mrt_stream(m, x)
    assert ((ours > 0.5) == (want > 0.5)).mean() >= 0.9


def test_wide_concat_keeps_its_range():
    """A concat given wide bits (mixed precision) rescales its parts to those bits, not to the default 8 (which
    clipped them at 1/16 of the range: 80% error on this graph before the fix)."""
    from mrt.pipeline import finish, prepare

    x = np.random.default_rng(1).normal(0, 0.5, (64, 96)).astype(np.float32)
    want = ort.InferenceSession(_audio_model().SerializeToString()).run(None, {"x": x, "rate": np.array(16000)})[0]
    c = prepare(bind_inputs(_audio_model(), {"rate": 16000}), x, progress=False)
    m = finish(c, wide_tensors=tuple(n.outputs[0] for n in c.graph.nodes if n.op == "concat"))
    got = m.dequantize_output(m.run(m.quantize_input(x)))
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
