"""A small ViT written with onnx.helper as torch 2.x exports torchvision's VisionTransformer (dynamo=False):
the class token expanded to the batch through Shape -> Equal/Where -> Expand and concatenated before the
patch tokens, and nn.MultiheadAttention's sequence-first path, which reshapes [L, N, E] to [L, N*heads,
head_dim] (the batch merged with the heads, sizes computed from Shape), transposes for its batched matmuls,
splits N*heads back to [N, heads, L, head_dim], and runs the output projection as a Gemm on [L*N, E] rows.
The import must equal onnxruntime in float at several batch sizes, and the conversion must keep the logits;
and the real torchvision ViT-B/16 when scripts/models/export_torchvision.py has put it in .cache/models."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt.float_exec import run_float
from mrt.onnx_import.importer import import_onnx
from mrt.pipeline import convert

C, S, P, E, H, F, K = 3, 8, 4, 16, 2, 32, 5  # channels, image side, patch side, width, heads, MLP, classes
L = (S // P) ** 2 + 1                          # tokens: patches and the class token
VIT = Path(__file__).resolve().parents[2] / ".cache" / "models" / "vit_b_16_224.onnx"


class _Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.inits, self.nodes = [], []

    def const(self, value, dtype=None):
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def weight(self, *shape, scale=None):
        scale = 1 / np.sqrt(shape[0]) if scale is None else scale
        return self.const(self.rng.normal(0, scale, shape).astype(np.float32))

    def node(self, op, ins, out=None, **attrs):
        out = out or f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def dim(self, x, axis):
        """torch's x.size(axis): Shape, Gather of a scalar index, then Unsqueeze to a 1-vector."""
        g = self.node("Gather", [self.node("Shape", [x]), self.const(np.int64(axis))], axis=0)
        return g

    def vec(self, *parts):
        """Concat of 1-vectors: ints are constants, strings scalar shape entries (Unsqueezed)."""
        items = [self.const(np.array([p], np.int64)) if isinstance(p, int) else
                 self.node("Unsqueeze", [p, self.const(np.array([0], np.int64))]) for p in parts]
        return self.node("Concat", items, axis=0)

    def layer_norm(self, x):
        return self.node("LayerNormalization", [x, self.const((1 + self.rng.normal(0, 0.1, E)).astype(np.float32)),
                                                self.const(self.rng.normal(0, 0.1, E).astype(np.float32))],
                         axis=-1, epsilon=1e-6)


def _attention(b, x):
    """torch.nn.functional.multi_head_attention_forward on x [L, N, E] (sequence-first), as torch exports it."""
    n = b.dim(x, 1)
    qkv = b.node("Add", [b.weight(3 * E, scale=0.1), b.node("MatMul", [x, b.weight(E, 3 * E)])])
    # unflatten(-1, (3, E)): the target is Shape[:-1] ++ [3, E]
    qkv_shape = b.node("Shape", [qkv])
    head = b.node("Slice", [qkv_shape, b.const(np.array([0], np.int64)), b.const(np.array([-1], np.int64))])
    qkv = b.node("Reshape", [qkv, b.node("Concat", [head, b.const(np.array([3, E], np.int64))], axis=0)])
    qkv = b.node("Squeeze", [b.node("Transpose", [b.node("Unsqueeze", [qkv, b.const(np.array([0], np.int64))])],
                                    perm=[3, 1, 2, 0, 4]), b.const(np.array([-2], np.int64))])
    nh = b.node("Mul", [n, b.const(np.int64(H))])
    heads = []
    for k in range(3):
        t = b.node("Gather", [qkv, b.const(np.int64(k))], axis=0)
        first = -1 if k else b.dim(x, 0)
        t = b.node("Transpose", [b.node("Reshape", [t, b.vec(first, nh, E // H)])], perm=[1, 0, 2])
        heads.append(b.node("Reshape", [t, b.vec(n, H, b.dim(t, 1), E // H)]))
    q, key, v = heads
    scale = b.const(np.float32((E // H) ** -0.25))
    scores = b.node("MatMul", [b.node("Mul", [q, scale]),
                               b.node("Mul", [b.node("Transpose", [key], perm=[0, 1, 3, 2]), scale])])
    ctx = b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v])
    ctx = b.node("Transpose", [ctx], perm=[2, 0, 1, 3])
    rows = b.node("Mul", [b.dim(x, 0), n])
    out = b.node("Gemm", [b.node("Reshape", [ctx, b.vec(rows, E)]), b.weight(E, E), b.weight(E, scale=0.1)],
                 transB=1)
    return b.node("Reshape", [out, b.vec(b.dim(x, 0), n, b.dim(out, 1))])


def _vit(seed: int = 0) -> onnx.ModelProto:
    b = _Builder(seed)
    patches = b.node("Conv", ["x", b.weight(E, C, P, P, scale=0.2), b.weight(E, scale=0.1)],
                     kernel_shape=[P, P], strides=[P, P])
    n = b.dim("x", 0)
    tokens = b.node("Transpose", [b.node("Reshape", [patches, b.vec(n, E, -1)])], perm=[0, 2, 1])
    # class_token.expand(n, -1, -1): Where(Equal(shape, -1), 1, shape), as torch writes expand's -1 entries
    target = b.node("Reshape", [b.vec(b.dim(tokens, 0), -1, -1), b.const(np.array([-1], np.int64))])
    ones = b.node("ConstantOfShape", [b.node("Shape", [target])], value=numpy_helper.from_array(np.array([1], np.int64)))
    minus = b.node("Mul", [ones, b.const(np.array(-1, np.int64))])
    shape = b.node("Where", [b.node("Equal", [target, minus]), ones, target])
    cls = b.node("Expand", [b.weight(1, 1, E, scale=0.5), shape])
    h = b.node("Add", [b.node("Concat", [cls, tokens], axis=1), b.weight(1, L, E, scale=0.5)])
    for _ in range(2):
        a = b.node("Transpose", [_attention(b, b.node("Transpose", [b.layer_norm(h)], perm=[1, 0, 2]))],
                   perm=[1, 0, 2])
        h = b.node("Add", [a, h])
        u = b.node("Add", [b.weight(F, scale=0.1), b.node("MatMul", [b.layer_norm(h), b.weight(E, F)])])
        gelu = b.node("Mul", [b.node("Mul", [u, b.node("Add", [b.node("Erf", [b.node("Div", [u, b.const(np.float32(np.sqrt(2)))])]),
                                                                b.const(np.float32(1))])]), b.const(np.float32(0.5))])
        h = b.node("Add", [h, b.node("Add", [b.weight(E, scale=0.1), b.node("MatMul", [gelu, b.weight(F, E)])])])
    first = b.node("Gather", [b.layer_norm(h), b.const(np.int64(0))], axis=1)
    b.node("Gemm", [first, b.weight(K, E), b.weight(K, scale=0.1)], out="logits", transB=1)
    graph = helper.make_graph(b.nodes, "vit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C, S, S])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", K])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _images(n, seed):
    return np.random.default_rng(seed).standard_normal((n, C, S, S)).astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_import_equals_onnxruntime_in_float(n):
    model = _vit()
    x = _images(n, n)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = run_float(import_onnx(model), {"x": x})["logits"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_attention_keeps_heads_per_sample():
    """No IR node of the attention may mix samples: the IR is batch-first throughout and every transpose keeps
    axis 0 (shape inference refuses any other), and one sample's logits do not depend on its neighbours."""
    model = _vit(1)
    g = import_onnx(model)
    x = _images(4, 9)
    alone = run_float(g, {"x": x[2:3]})["logits"]
    together = run_float(g, {"x": x})["logits"][2:3]
    np.testing.assert_allclose(alone, together, rtol=1e-5, atol=1e-6)
    assert {node.op for node in g.nodes} >= {"matmul", "softmax", "dense", "pad", "layer_norm"}


def test_converted_vit_keeps_the_logits_and_numba_matches_reference():
    model = _vit()
    cvm_model = convert(model.SerializeToString(), _images(64, 11), progress=False)
    held = _images(32, 12)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": held})[0]
    ints = cvm_model.quantize_input(held, "x")
    ref = cvm_model.run(ints, backend="reference")
    fast = cvm_model.run(ints, backend="numba")
    assert np.array_equal(ref, fast)
    got = ref.astype(np.float64) * float(next(iter(cvm_model.meta["output_scales"].values())))
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.98, cos.min()
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.9


def test_a_reshape_mixing_the_heads_computes_one_samples_result():
    """[L, 1, E] -> [E, L]: one sample's rows are mixed as ONNX says (before, with axis 0 taken for the batch, the
    [N*E, L] target was refused as mixing samples)."""
    b = _Builder(0)
    x = b.node("Transpose", ["x"], perm=[1, 0, 2])
    rows = b.node("Mul", [b.dim(x, 1), b.const(np.int64(E))])
    b.node("Reshape", [x, b.vec(rows, -1)], out="y")
    graph = helper.make_graph(b.nodes, "mix", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", L, E])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    g = import_onnx(model)
    x = np.random.default_rng(2).standard_normal((3, L, E)).astype(np.float32)
    got = run_float(g, {"x": x})["y"]
    for i in range(3):
        want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x[i:i + 1]})[0]
        np.testing.assert_allclose(got[i], want.reshape(got[i].shape), rtol=1e-6)
    assert g.shapes["y"] == (E, L)


@pytest.mark.skipif(not VIT.exists(), reason="ViT-B/16 not exported: run scripts/models/export_torchvision.py vit_b_16")
def test_torchvision_vit_b_16_imports_and_equals_onnxruntime_in_float():
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
    model = onnx.load(str(VIT))
    rng = np.random.default_rng(1)
    for t in model.graph.initializer:  # torchvision zero-initialises the head and class token: make them matter
        if t.name in ("heads.head.weight", "class_token"):
            shape = tuple(t.dims)
            t.CopyFrom(numpy_helper.from_array(rng.normal(0, 0.05, shape).astype(np.float32), t.name))
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    g = import_onnx(model)
    got = run_float(g, {g.inputs[0].name: x})[g.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
