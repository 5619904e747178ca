"""Importers for ONNX conv, dense (Gemm/MatMul), pooling and batch-norm ops.

Padding conventions are resolved here, once: auto_pad (SAME_UPPER/SAME_LOWER/VALID) becomes
explicit pads and ceil_mode becomes extra end padding, so the IR ops only know explicit pads.
"""
import numpy as np

from cvm.arith import window_out
from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import optional_input, where


def _window_attrs(ctx, node, attrs, kernel):
    """strides, dilations and explicit pads of a windowed op (Conv, MaxPool, AveragePool)."""
    x = ctx.shape(node.input[0], node)
    nd = len(kernel)
    if len(x) != nd + 2:
        raise UnsupportedOp(f"{where(node)}: input {x} and kernel {kernel} ranks do not match")
    strides = attrs.get("strides", [1] * nd)
    dilations = attrs.get("dilations", [1] * nd)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    pads = attrs.get("pads", [0] * 2 * nd)
    if len(strides) != nd or len(dilations) != nd or len(pads) != 2 * nd:
        raise UnsupportedOp(f"{where(node)}: strides/dilations/pads lengths do not fit "
                            f"{nd} spatial axes")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * 2 * nd
        for i in range(nd):
            out = -(-x[2 + i] // strides[i])
            total = max(0, (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - x[2 + i])
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads[i], pads[nd + i] = begin, total - begin
    elif auto_pad == "VALID":
        pads = [0] * 2 * nd
    elif auto_pad != "NOTSET":
        raise UnsupportedOp(f"{where(node)}: auto_pad {auto_pad!r} is not supported")
    return x, list(strides), list(dilations), list(pads), auto_pad


def _ceil_pads(node, x, kernel, strides, dilations, pads):
    """Extra end padding that makes floor-mode windows give ceil_mode's output size; as in ONNX
    and PyTorch, a last window that would start in the end padding is dropped."""
    nd = len(kernel)
    extra = []
    for i in range(nd):
        size, span = x[2 + i] + pads[i] + pads[nd + i], dilations[i] * (kernel[i] - 1) + 1
        out = window_out(x[2 + i], kernel[i], strides[i], dilations[i], pads[i], pads[nd + i], ceil=True)
        if (out - 1) * strides[i] >= x[2 + i] + pads[i]:
            out -= 1
        extra.append(max(0, (out - 1) * strides[i] + span - size))
    return extra


def conv(ctx, node, attrs):
    w = ctx.const(node.input[1], node, "Conv weight")
    kernel = list(w.shape[2:])
    if attrs.get("kernel_shape", kernel) != kernel:
        raise UnsupportedOp(f"{where(node)}: kernel_shape differs from the weight's shape")
    _, strides, dilations, pads, _ = _window_attrs(ctx, node, attrs, kernel)
    inputs = [ctx.tensor(node.input[0], node), ctx.tensor(node.input[1], node)]
    if optional_input(node, 2):
        ctx.const(node.input[2], node, "Conv bias")
        inputs.append(ctx.tensor(node.input[2], node))
    ctx.emit("conv", inputs, {"strides": strides, "pads": pads, "dilations": dilations,
                              "groups": attrs.get("group", 1)}, node, out=node.output[0])


def _pool_attrs(ctx, node, attrs):
    kernel = attrs.get("kernel_shape")
    if not kernel:
        raise UnsupportedOp(f"{where(node)}: kernel_shape is required")
    x, strides, dilations, pads, auto_pad = _window_attrs(ctx, node, attrs, kernel)
    ceil_pads = [0] * len(kernel)
    if attrs.get("ceil_mode", 0):
        if auto_pad != "NOTSET":
            raise UnsupportedOp(f"{where(node)}: ceil_mode with auto_pad={auto_pad} is not "
                                "supported")
        ceil_pads = _ceil_pads(node, x, kernel, strides, dilations, pads)
    return {"kernel": kernel, "strides": strides, "pads": pads, "dilations": dilations}, \
        ceil_pads


def max_pool(ctx, node, attrs):
    if len(node.output) > 1 and node.output[1]:
        raise UnsupportedOp(f"{where(node)}: the MaxPool Indices output is not supported")
    attrs.ignore("storage_order")  # only affects the Indices output
    ir_attrs, ceil_pads = _pool_attrs(ctx, node, attrs)
    nd = len(ceil_pads)
    ir_attrs["pads"] = ir_attrs["pads"][:nd] + [p + e for p, e in
                                                 zip(ir_attrs["pads"][nd:], ceil_pads)]
    ctx.emit("max_pool", [ctx.tensor(node.input[0], node)], ir_attrs, node, out=node.output[0])


def average_pool(ctx, node, attrs):
    ir_attrs, ceil_pads = _pool_attrs(ctx, node, attrs)
    ir_attrs.update(count_include_pad=bool(attrs.get("count_include_pad", 0)),
                    ceil_pads=ceil_pads)
    ctx.emit("avg_pool", [ctx.tensor(node.input[0], node)], ir_attrs, node, out=node.output[0])


def global_average_pool(ctx, node, attrs):
    ctx.emit("global_avg_pool", [ctx.tensor(node.input[0], node)], {}, node,
             out=node.output[0])


def batch_normalization(ctx, node, attrs):
    attrs.ignore("momentum")  # only used for training
    if attrs.get("training_mode", 0) or any(node.output[1:]):
        raise UnsupportedOp(f"{where(node)}: BatchNormalization in training mode (or with "
                            "running-statistics outputs) is not supported")
    for name, what in zip(node.input[1:], ("scale", "bias", "mean", "var")):
        ctx.const(name, node, f"BatchNormalization {what}")
    ctx.emit("batch_norm", [ctx.tensor(n, node) for n in node.input],
             {"eps": float(attrs.get("epsilon", 1e-5))}, node, out=node.output[0])


def gemm(ctx, node, attrs):
    """Gemm(A, B, C) -> dense(x, w[O, K], b[O]), with transB, alpha and beta folded into w, b."""
    a = node.input[0]
    if attrs.get("transA", 0):
        raise UnsupportedOp(f"{where(node)}: Gemm transA=1 would transpose the batch axis")
    b = ctx.const(node.input[1], node, "Gemm B")
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    w = alpha * (b if attrs.get("transB", 0) else b.T).astype(np.float64)
    inputs = [ctx.tensor(a, node), ctx.add_const(f"{node.input[1]}/w", w)]
    if optional_input(node, 2):
        c = ctx.const(node.input[2], node, "Gemm C").astype(np.float64)
        if c.ndim > 2 or (c.ndim == 2 and c.shape[0] != 1):
            raise UnsupportedOp(f"{where(node)}: a Gemm bias C of shape {c.shape} varies along "
                                "the batch axis")
        bias = np.broadcast_to(beta * c.reshape(-1) if c.ndim else beta * c, (w.shape[0],))
        inputs.append(ctx.add_const(f"{node.input[2]}/b", bias))
    ctx.emit("dense", inputs, {}, node, out=node.output[0])


def matmul(ctx, node, attrs):
    """MatMul by a constant matrix is a dense layer without bias; anything else stays matmul (a constant on the
    left, or a stack of constant matrices, becomes dense layers in the pass mrt.passes.matmul_as_dense, which also
    sees the constants that only fold later)."""
    a, b = node.input
    if not ctx.is_const(a) and ctx.is_const(b) and ctx.consts[b].ndim == 2 and \
            len(ctx.shape(a, node)) >= 2:
        w = ctx.add_const(f"{b}/w", ctx.consts[b].T)
        ctx.emit("dense", [ctx.tensor(a, node), w], {}, node, out=node.output[0])
    else:
        ctx.emit("matmul", [ctx.tensor(a, node), ctx.tensor(b, node)], {}, node,
                 out=node.output[0])

