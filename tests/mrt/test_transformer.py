"""A BERT-style sentence encoder in integers: a one-layer encoder written with onnx.helper as torch exports
BertModel (token ids and an attention mask as int64 inputs, Gather embeddings, LayerNormalization, Q/K/V
dense layers, masked softmax with (1 - mask) * finfo.min, GELU in its Erf form, mean pooling over the mask,
ReduceL2 normalisation), converted by MRT to opset 2 and compared with onnxruntime; and the real
all-MiniLM-L6-v2 when scripts/models/minilm_export.py has put it in .cache/models/minilm."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.pipeline import convert

L, D, H, F, V = 8, 16, 2, 32, 50  # sequence, hidden, heads, feed-forward, vocabulary
MINILM = Path(__file__).resolve().parents[2] / ".cache" / "models" / "minilm"


def _encoder(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, ins, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def dense(x, n_in, n_out):
        w = const(f"w{len(inits)}", (rng.normal(0, 1 / np.sqrt(n_in), (n_in, n_out))).astype(np.float32))
        return node("Add", [node("MatMul", [x, w]), const(f"b{len(inits)}", rng.normal(0, 0.1, n_out).astype(np.float32))])

    def layer_norm(x):
        g = const(f"g{len(inits)}", (1 + rng.normal(0, 0.2, D)).astype(np.float32))
        return node("LayerNormalization", [x, g, const(f"be{len(inits)}", rng.normal(0, 0.1, D).astype(np.float32))],
                    axis=-1, epsilon=1e-12)

    emb = node("Gather", [const("word", rng.normal(0, 1, (V, D)).astype(np.float32)), "input_ids"])
    h = layer_norm(node("Add", [emb, const("pos", rng.normal(0, 0.3, (1, L, D)).astype(np.float32))]))
    m = node("Cast", [node("Unsqueeze", ["attention_mask", const("ax12", np.array([1, 2], np.int64))])], to=1)
    bias = node("Mul", [node("Sub", [const("one", np.float32(1)), m]), const("fmin", np.float32(-3.4028234663852886e38))])
    heads = []
    for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]):
        r = node("Reshape", [dense(h, D, D), const(f"s{len(inits)}", np.array([0, L, H, D // H], np.int64))])
        heads.append(node("Transpose", [r], perm=perm))
    q, kt, v = heads
    scores = node("Div", [node("MatMul", [q, kt]), const("sqrt_dh", np.float32(np.sqrt(D // H)))])
    p = node("Softmax", [node("Add", [scores, bias])], axis=-1)
    ctx = node("Reshape", [node("Transpose", [node("MatMul", [p, v])], perm=[0, 2, 1, 3]),
                           const("merge", np.array([0, L, D], np.int64))])
    h = layer_norm(node("Add", [dense(ctx, D, D), h]))
    u = dense(h, D, F)
    gelu = node("Mul", [node("Mul", [u, node("Add", [node("Erf", [node("Div", [u, const("r2", np.float32(np.sqrt(2)))])]),
                                                      const("one_b", np.float32(1))])]), const("half", np.float32(0.5))])
    h = layer_norm(node("Add", [dense(gelu, F, D), h]))
    mf = node("Cast", [node("Unsqueeze", ["attention_mask", const("ax2", np.array([2], np.int64))])], to=1)
    axis1 = const("ax1", np.array([1], np.int64))
    mean = node("Div", [node("ReduceSum", [node("Mul", [h, mf]), axis1], keepdims=0),
                        node("Clip", [node("ReduceSum", [mf, axis1], keepdims=0), const("tiny", np.float32(1e-9))])])
    norm = node("Clip", [node("ReduceL2", [mean], axes=[1], keepdims=1), const("eps", np.float32(1e-12))])
    nodes.append(helper.make_node("Div", [mean, norm], ["embedding"]))
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["N", L]) for n in ("input_ids", "attention_mask")]
    graph = helper.make_graph(nodes, "encoder", ins, [helper.make_tensor_value_info("embedding", 1, ["N", D])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _text(n: int, seed: int) -> dict[str, np.ndarray]:
    """Token ids with a [CLS]-like first token and padded tails of random lengths."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, L + 1, n)
    mask = (np.arange(L)[None, :] < lengths[:, None]).astype(np.int64)
    ids = np.where(mask == 1, rng.integers(1, V, (n, L)), 0)
    ids[:, 0] = 1
    return {"input_ids": ids, "attention_mask": mask}


def _cosine(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _run(model, data, backend):
    ints = {spec.name: model.quantize_input(data[spec.name], spec.name) for spec in model.inputs}
    y = model.run(ints, backend=backend)
    return y, y.astype(np.float64) * float(next(iter(model.meta["output_scales"].values())))


@pytest.fixture(scope="module")
def converted():
    onnx_model = _encoder()
    return onnx_model, convert(onnx_model.SerializeToString(), _text(256, 1), progress=False)


def test_encoder_converts_to_opset_2_with_integer_inputs(converted):
    _, model = converted
    assert model.graph.opset == 2
    ops = {n.op for n in model.graph.nodes}
    assert {"gather", "isqrt", "matmul", "div", "lut"} <= ops
    bits = {spec.name: spec.bits for spec in model.inputs}
    assert bits == {"input_ids": 7, "attention_mask": 2}  # bits_for(0, V-1), the mask's 0..1
    assert model.meta["input_scales"] == {"input_ids": 1.0, "attention_mask": 1.0}


def test_encoder_matches_onnxruntime_and_numba_matches_reference(converted):
    onnx_model, model = converted
    held = _text(64, 2)
    want = ort.InferenceSession(onnx_model.SerializeToString()).run(None, held)[0]
    ref, got = _run(model, held, "reference")
    fast, _ = _run(model, held, "numba")
    assert np.array_equal(ref, fast)
    cos = _cosine(got, want)
    assert cos.min() > 0.98 and cos.mean() > 0.995, (cos.min(), cos.mean())


def test_padded_tokens_do_not_change_a_single_output_bit(converted):
    """Masked positions get exactly 0 attention and 0 pooling weight: whatever token ids the padding holds,
    the integer output is the same."""
    _, model = converted
    held = _text(16, 3)
    other = dict(held, input_ids=np.where(held["attention_mask"] == 1, held["input_ids"], 7))
    assert np.array_equal(_run(model, held, "numba")[0], _run(model, other, "numba")[0])


def test_token_ids_beyond_the_vocabulary_are_refused_at_calibration():
    data = _text(32, 4)
    data["input_ids"][0, 1] = 4 * V
    with pytest.raises(Exception, match="outside the table"):
        convert(_encoder().SerializeToString(), data, progress=False)


@pytest.mark.skipif(not (MINILM / "minilm_L64.onnx").exists(),
                    reason="all-MiniLM-L6-v2 not exported: run scripts/models/minilm_export.py with a torch venv")
@pytest.mark.parametrize("widened", ["encoder", "every tensor"])
def test_minilm_l64_converts_and_embeds_held_out_text(widened):
    """With the encoder's wide tensors (mrt.text_precision) the issue's cosine target holds: 0.9993 mean on
    all 256 held-out sentences with 64 calibration ones (scripts/models/minilm_eval.py). With every tensor
    wide it holds too (it was 0.776 while div_tensor took a raw quotient proven within 2^30 as the L2
    normalisation's numerator)."""
    from mrt.onnx_import import import_onnx
    from mrt.passes import DEFAULT_PIPELINE, run_pipeline
    from mrt.text_precision import encoder_wide_tensors
    data = np.load(MINILM / "text_L64.npz")
    calib = {k: data[f"calib_{k}"][:32] for k in ("input_ids", "attention_mask")}
    graph = run_pipeline(import_onnx(str(MINILM / "minilm_L64.onnx")), DEFAULT_PIPELINE)
    wide = encoder_wide_tensors(graph) if widened == "encoder" else \
        tuple(sorted({n.outputs[0] for n in graph.nodes} - set(graph.outputs)))
    model = convert(str(MINILM / "minilm_L64.onnx"), calib, progress=False, wide_tensors=wide)
    held = {k: data[f"held_{k}"][:16] for k in ("input_ids", "attention_mask")}
    want = ort.InferenceSession(str(MINILM / "minilm_L64.onnx")).run(None, held)[0]
    _, got = _run(model, held, "numba")
    assert _cosine(got, want).min() > 0.99
