"""One quantization rule per float op: read the inputs' integer tensors, emit cvm nodes, record
the output's integer tensor and scale. A rule sees its node's axes already per sample (CVM's
convention): mrt.quantize.axes converts them before the rule runs."""
from __future__ import annotations

import numpy as np

from mrt.float_ops.unary import run_program
from mrt.quantize.split import emit_mac
from cvm.arith import bits_max
from cvm.limits import MAX_BITS, MAX_LUT_SIZE
from mrt.quantize.state import QT, QuantizeError, Quantizer, safe_name


def _const(qz: Quantizer, name: str):
    return qz.fgraph.initializers.get(name)


def _operand(qz: Quantizer, c: np.ndarray, act: str) -> np.ndarray:
    """A constant operand of an element-wise op on activation `act`, in CVM's per-sample axes: a
    constant with as many axes as the full (batched) tensor has a leading 1 where the batch axis is."""
    if c.ndim == len(qz.fgraph.full_shape(act)):
        return c.reshape(c.shape[1:])
    return c


def _node_name(node) -> str:
    return safe_name(node.outputs[0])


# ---------------------------------------------------------------- multiply-accumulate

def _weights_and_bias(qz, w, b, x_scale, x_mean=None, groups: int = 1, bits: int | None = None):
    """Per-output-channel weights; the bias at the accumulator scale. A channel whose weights are
    tiny next to its bias gets a coarser weight scale, so its bias stays a small part of the
    accumulator budget (1 / bias_share of it). With bias correction and the input's calibration
    mean per input channel (`x_mean`), the bias also takes away the mean shift that rounding the
    weights adds to each output: sum_k (qw*sw - w)[o, k] * mean[k]."""
    qw, sw = qz.weights(w, axis=0, bits=bits)
    if b is not None:
        cap = bits_max(qz.cfg.acc_bits) // qz.cfg.bias_share
        floor = np.abs(b).astype(np.float64) / (x_scale * cap)
        if np.any(floor > sw):
            qw, sw = qz.weights(w, axis=0, min_scale=floor, bits=bits)
    if qz.cfg.bias_correction and x_mean is not None:
        shift = _rounding_shift(qw * sw.reshape((-1,) + (1,) * (w.ndim - 1)) - w, x_mean, groups)
        b = (np.zeros(len(w)) if b is None else b.astype(np.float64)) - shift
    acc_scale = x_scale * sw
    qb = None if b is None else np.round(b / acc_scale).astype(np.int64)
    return qw, qb, acc_scale


def _rounding_shift(err: np.ndarray, mean: np.ndarray, groups: int) -> np.ndarray:
    """Per output channel, the expected output error sum_k err[o, k...] * mean[channel of k] (conv:
    err (O, C/groups, kh, kw) and the channel means; dense: err (O, K) and the feature means)."""
    if err.ndim == 2:
        return err @ mean
    per_group = err.sum(axis=(2, 3)).reshape(groups, len(err) // groups, -1)  # (g, og, cg)
    return np.einsum("goc,gc->go", per_group, mean.reshape(groups, -1)).reshape(-1)


def _input_mean(qz, node, channel_axis: int):
    """The calibration mean of the node's float input per input channel (None without one, or for a graph
    input where the target does not correct the layers reading its inputs: QuantConfig.bias_correction_at_inputs)."""
    if not qz.cfg.bias_correction_at_inputs and node.inputs[0] in qz.graph_inputs:
        return None
    m = qz.means.get(node.inputs[0])
    if m is None:
        return None
    m = np.asarray(m, np.float64)
    return m.reshape(m.shape[0], -1).mean(axis=1) if channel_axis == 0 else m.reshape(-1, m.shape[-1]).mean(axis=0)


def conv(qz, node):
    x = qz.narrow(node.inputs[0])
    w = _const(qz, node.inputs[1])
    if w is None or w.ndim != 4:
        raise QuantizeError(f"node {node.name!r}: only 2-D convolutions with constant weights are supported")
    b = _const(qz, node.inputs[2]) if len(node.inputs) > 2 else None
    wbits = qz.weight_bits_of(node.inputs[0])
    qw, qb, acc_scale = _weights_and_bias(qz, w, b, float(x.scale), _input_mean(qz, node, 0), node.attrs["groups"], wbits)
    out, factor = emit_mac(qz, "conv2d", x.name, qw, qb, _node_name(node), weight_bits=wbits, strides=node.attrs["strides"],
                           pads=node.attrs["pads"], dilations=node.attrs["dilations"], groups=node.attrs["groups"])
    return QT(name=out, scale=acc_scale * factor, axis=0)


def dense(qz, node):
    w = _const(qz, node.inputs[1])
    b = _const(qz, node.inputs[2]) if len(node.inputs) > 2 else None
    x, wbits = qz.q[node.inputs[0]], qz.weight_bits_of(node.inputs[0])
    if x.per_channel and x.axis == len(qz.shape_of(x.name)) - 1:
        # per-feature input scales fold into the weights' columns
        mean = _input_mean(qz, node, -1)
        qw, qb, acc_scale = _weights_and_bias(qz, w * x.scale[None, :], b, 1.0, None if mean is None else mean / x.scale,
                                              bits=wbits)
    else:
        x = qz.narrow(node.inputs[0])
        qw, qb, acc_scale = _weights_and_bias(qz, w, b, float(x.scale), _input_mean(qz, node, -1), bits=wbits)
    out, factor = emit_mac(qz, "dense", x.name, qw, qb, _node_name(node), share=node.inputs[1],  # recurrent steps
                           weight_bits=wbits)
    return QT(name=out, scale=acc_scale * factor, axis=len(qz.fgraph.shapes[node.outputs[0]]) - 1)


def matmul(qz, node):
    if any(qz.fgraph.is_constant(i) for i in node.inputs):
        raise QuantizeError(f"node {node.name!r}: matmul with a constant operand should be a dense layer")
    a, b = qz.narrow(node.inputs[0]), qz.narrow(node.inputs[1])
    out = qz.op("matmul", a.name, b.name, name=_node_name(node))
    return QT(name=out, scale=np.asarray(float(a.scale) * float(b.scale)))


# ---------------------------------------------------------------- elementwise arithmetic

def _common(qz, node, fname, scale):
    """The activation `fname` rescaled to the common fine `scale` (wide bits, no clipping)."""
    t = qz.q[fname]
    need = int(np.ceil(float(qz.thr.get(fname, 0.0)) / scale)) + 1
    bits = min(MAX_BITS, max(need, 1).bit_length() + qz.cfg.add_headroom_bits)
    return qz.requant(t, scale, bits, name=f"{_node_name(node)}.{fname}.q")


def _per_feature(qz, act: str, const: np.ndarray):
    """(QT, per-feature vector) when `act` holds tabular features at per-feature scales (a graph input, or
    such features after add / sub / mul by per-feature constants) and `const` is one value per feature:
    then the op keeps the per-feature scales (a Scaler / StandardScaler not folded into a dense layer, e.g.
    in front of a Normalizer) instead of one scale for features whose ranges differ by orders of magnitude."""
    t = qz.q[act]
    features = qz.__dict__.setdefault("per_feature_tensors", {s.name for s in qz.fgraph.inputs})
    shape = qz.fgraph.shapes[act]
    if act not in features or not t.per_channel or t.axis != len(shape) - 1 or const.size not in (1, shape[-1]):
        return None
    return t, np.broadcast_to(const.reshape(-1).astype(np.float64), (shape[-1],))


def add_sub(qz, node):
    op = node.op
    a, b = node.inputs
    ca, cb = _const(qz, a), _const(qz, b)
    feat = None if (ca is None) == (cb is None) else \
        _per_feature(qz, a if cb is not None else b, _operand(qz, cb if cb is not None else ca, a if cb is not None else b))
    if feat is not None:   # q + round(c / s) per feature, at the features' own scales
        t, c = feat
        qc = qz.const(np.round(c / t.scale).astype(np.int64), dtype="int32")
        out = qz.op(op, *((t.name, qc) if cb is not None else (qc, t.name)), name=_node_name(node))
        qz.per_feature_tensors.add(node.outputs[0])
        return QT(name=out, scale=t.scale, axis=t.axis)
    out_scale = qz.scale_of(node.outputs[0]) / 2 ** qz.cfg.add_extra_bits
    if ca is None and cb is None:
        qa, qb = _common(qz, node, a, out_scale), _common(qz, node, b, out_scale)
        return QT(name=qz.op(op, qa.name, qb.name, name=_node_name(node)), scale=np.asarray(out_scale))
    act, const = (a, cb) if cb is not None else (b, ca)
    const = _operand(qz, const, act)
    qa = _common(qz, node, act, out_scale)
    qc = qz.const(np.round(const / out_scale).astype(np.int64), dtype="int32")
    args = (qa.name, qc) if cb is not None else (qc, qa.name)
    return QT(name=qz.op(op, *args, name=_node_name(node)), scale=np.asarray(out_scale))


def mul(qz, node):
    a, b = node.inputs
    ca, cb = _const(qz, a), _const(qz, b)
    if ca is None and cb is None:
        qa, qb = qz.narrow(a), qz.narrow(b)
        out = qz.op("mul", qa.name, qb.name, name=_node_name(node))
        return QT(name=out, scale=np.asarray(float(qa.scale) * float(qb.scale)))
    act, c = (a, cb) if cb is not None else (b, ca)
    return _mul_const(qz, node, act, c, const_first=cb is None)


def _mul_const(qz, node, act: str, c: np.ndarray, const_first: bool = False) -> QT:
    """act * c, c a constant (ONNX's full-rank form or broadcasting to the activation's per-sample axes)."""
    c = _operand(qz, c, act)
    feat = _per_feature(qz, act, c)
    if feat is not None and np.all(feat[1] != 0):   # per-feature factors are new per-feature scales (and signs)
        t, v = feat
        out = t.name if np.all(v > 0) else qz.op("mul", t.name, qz.const(np.sign(v).astype(np.int64)),
                                                 name=_node_name(node))
        qz.per_feature_tensors.add(node.outputs[0])
        return QT(name=out, scale=t.scale * np.abs(v), axis=t.axis)
    t = qz.q[act]
    if c.size == 1 and float(c.reshape(())) > 0:  # a positive scalar is just a new scale
        return QT(name=t.name, scale=t.scale * float(c.reshape(())), axis=t.axis)
    t = qz.narrow(act)
    wmax = bits_max(qz.cfg.weight_bits)
    sc = float(np.abs(c).max()) / wmax or 1.0
    qc = qz.const(np.round(c / sc).astype(np.int64))
    args = (qc, t.name) if const_first else (t.name, qc)
    return QT(name=qz.op("mul", *args, name=_node_name(node)), scale=np.asarray(float(t.scale) * sc))


def div(qz, node):
    """x / c: a positive scalar c is a new scale; any other constant is a multiplication by 1 / c (in float64,
    so 1 / c rounds once, at the weight scale). A divisor that is not a constant has its own rule (div_tensor)."""
    c = _const(qz, node.inputs[1])
    if c is None or np.any(c == 0) or not np.all(np.isfinite(c)):
        raise QuantizeError(f"node {node.name!r}: division needs a finite, non-zero constant divisor")
    t = qz.q[node.inputs[0]]
    if c.size == 1 and float(c.reshape(())) > 0:
        return QT(name=t.name, scale=t.scale / float(c.reshape(())), axis=t.axis)
    return _mul_const(qz, node, node.inputs[0], 1.0 / c.astype(np.float64))


# ---------------------------------------------------------------- activations

def _non_negative(qz, node) -> QT:
    """The input of an op whose output is >= 0 (relu, a clip at 0 or above), rescaled to the output's
    calibrated scale. With unsigned activations, a wide input is rescaled to bits + 1: after the op
    it holds 0..2^bits - 1, a bits-wide unsigned range where a signed one would waste its sign bit
    (stored int16; the numba backend reads it as uint8)."""
    t = qz.q[node.inputs[0]]
    if qz.cfg.unsigned_activations and not t.narrow:
        bits = qz.act_bits(node.outputs[0]) + 1
        return qz.requant(t, qz.scale_of(node.outputs[0], bits), bits, name=f"{t.name}.q")
    return qz.narrow(node.inputs[0], target=node.outputs[0])


def _reach(qz, t: QT) -> int:
    """The largest magnitude t's integer values may take (its proven interval)."""
    lo, hi = qz.interval(t.name)
    return max(-lo, hi)


def relu(qz, node):
    t = _non_negative(qz, node)
    return QT(name=qz.op("relu", t.name, name=_node_name(node)), scale=t.scale, narrow=True)


def clip(qz, node):
    t = _non_negative(qz, node) if node.attrs["min"] >= 0 else qz.narrow(node.inputs[0], target=node.outputs[0])
    s, m = float(t.scale), _reach(qz, t)
    lo = -m if node.attrs["min"] == -np.inf else int(np.clip(np.round(node.attrs["min"] / s), -m, m))
    hi = m if node.attrs["max"] == np.inf else int(np.clip(np.round(node.attrs["max"] / s), -m, m))
    return QT(name=qz.op("clip", t.name, lo=lo, hi=hi, name=_node_name(node)), scale=t.scale, narrow=True)


def _table(qz, node, fn) -> QT:
    """A lookup table of float function `fn` over every integer value the input may hold (its proven
    interval: 0..2^bits - 1 when unsigned). Where fn is undefined there (a log or square root of a value
    the float model never produces) the entry is 0; infinities clamp to the output range."""
    t, whole = _table_input(qz, node, fn)
    lo, hi = qz.interval(t.name)
    with np.errstate(all="ignore"):
        values = np.nan_to_num(fn(np.arange(lo, hi + 1, dtype=np.float64) * float(t.scale)), nan=0.0)
        bits = qz.act_bits(node.outputs[0]) + (qz.cfg.unsigned_activations and bool(values.min() >= 0))  # sigmoid
        m, out_scale = bits_max(bits), 1.0 if whole else qz.scale_of(node.outputs[0], bits)
        table = np.clip(np.round(values / out_scale), -m, m).astype(np.int64)
    out = qz.op("lut", t.name, qz.const(table), offset=lo, name=_node_name(node))
    return QT(name=out, scale=np.asarray(out_scale), narrow=True)


def _table_input(qz, node, fn) -> tuple[QT, bool]:
    """(the table's input, whether fn is integer-valued on the calibrated range: floor, round, sign). Such a table
    keeps its values as integers at scale 1 (floor 1.0 at 8 bits was 1.008), and a wider input (16-bit features)
    is narrowed to a power-of-two scale finer than the calibrated one (integers and round's ties exact, one bit
    more: an mse threshold just under 2.0 made floor(2.0) 1); an 8-bit input is read as it is (no second rounding)."""
    thr, bits = float(qz.thr.get(node.inputs[0], 0.0)), qz.act_bits(node.inputs[0])
    with np.errstate(all="ignore"):
        probe = fn(np.linspace(-thr, thr, 4 * bits_max(bits) + 1))
    if thr > 0 and np.isfinite(probe).all() and (probe == np.round(probe)).all() and \
            np.abs(probe).max() <= bits_max(qz.act_bits(node.outputs[0])):
        if qz.q[node.inputs[0]].narrow or 2 * bits_max(bits + 1) + 1 > MAX_LUT_SIZE:  # (one bit more: too long)
            return qz.narrow(node.inputs[0]), True
        scale = 2.0 ** -np.ceil(np.log2(bits_max(bits) / thr))
        return qz.rescale_to(node.inputs[0], scale, f"{safe_name(node.inputs[0])}.q", bits + 1), True
    return qz.narrow(node.inputs[0]), False


def _lut(fn):
    def rule(qz, node):
        return _table(qz, node, lambda x: fn(x, **node.attrs))
    return rule


def univariate(qz, node):
    """A fused chain of element-wise ops (mrt.passes.fuse_univariate): one table, computed with the
    float model's own float32 ops."""
    program = node.attrs["program"]
    return _table(qz, node, lambda x: run_program(x.astype(np.float32), program).astype(np.float64))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


LUT_FUNCTIONS = {
    "sigmoid": lambda x: _sigmoid(x),
    "tanh": lambda x: np.tanh(x),
    "leaky_relu": lambda x, alpha: np.where(x >= 0, x, alpha * x),
    "hard_sigmoid": lambda x, alpha, beta: np.clip(alpha * x + beta, 0, 1),
}


def softmax(qz, node):
    """Integer softmax: lookup of exp(x - max) (scale 2^-softmax_exp_bits), sum, integer division."""
    axis = node.attrs["axis"]
    t = qz.narrow(node.inputs[0])
    lo, hi = qz.interval(t.name)
    exp_bits, prob_bits = qz.cfg.softmax_exp_bits, qz.cfg.output_bits - 1
    mx = qz.op("max", t.name, axes=[axis], keepdims=1, name=f"{_node_name(node)}.max")
    # x - max(x) is <= 0, but the bound analysis only knows [lo - hi, hi - lo]: the table covers that domain
    # (exp(0) for d > 0) and never holds 0, so the sum is proven >= 1 and the division is safe.
    d = qz.op("sub", t.name, mx, name=f"{_node_name(node)}.shifted")
    domain = np.minimum(np.arange(lo - hi, hi - lo + 1), 0) * float(t.scale)
    table = np.maximum(np.round(np.exp(domain) * 2 ** exp_bits), 1).astype(np.int64)
    e = qz.op("lut", d, qz.const(table), offset=lo - hi, name=f"{_node_name(node)}.exp")
    total = qz.op("sum", e, axes=[axis], keepdims=1, name=f"{_node_name(node)}.sum")
    num = qz.op("mul", e, qz.const([2 ** prob_bits], dtype="int32"), name=f"{_node_name(node)}.scaled")
    out = qz.op("div", num, total, name=_node_name(node))
    return QT(name=out, scale=np.asarray(2.0 ** -prob_bits))


# ---------------------------------------------------------------- pooling and reductions

def _pool_2d(node) -> dict:
    """A pool's attributes; CVM pools over two spatial axes (mrt.passes.pool1d_as_2d makes 1-D pools 2-D)."""
    if len(node.attrs["kernel"]) != 2:
        raise QuantizeError(f"node {node.name!r}: {node.op} over {len(node.attrs['kernel'])} spatial axes; "
                            "only 1-D and 2-D pools are supported")
    return node.attrs


def max_pool(qz, node):
    a = _pool_2d(node)
    t = qz.narrow(node.inputs[0])
    out = qz.op("max_pool2d", t.name, kernel=a["kernel"], strides=a["strides"], pads=a["pads"],
                  dilations=a["dilations"], name=_node_name(node))
    return QT(name=out, scale=t.scale, narrow=True)


def sum_pool(qz, node):
    a = _pool_2d(node)
    t = qz.narrow(node.inputs[0])
    c = qz.shape_of(t.name)[0]
    ones = qz.const(np.ones((c, 1) + tuple(a["kernel"]), np.int64), dtype="int8")
    out = qz.op("conv2d", t.name, ones, strides=a["strides"], pads=a["pads"], dilations=a["dilations"],
                  groups=c, name=_node_name(node))
    return QT(name=out, scale=t.scale)


def neg(qz, node):
    """-x: a multiplication by the constant -1, same scale (the interval mirrors)."""
    t = qz.narrow(node.inputs[0]) if qz.q[node.inputs[0]].per_channel else qz.q[node.inputs[0]]
    out = qz.op("mul", t.name, qz.const([-1], dtype="int8"), name=_node_name(node))
    return QT(name=out, scale=t.scale, narrow=t.narrow)


# ---------------------------------------------------------------- layout

def slice_(qz, node):
    """The float slice's axes (per sample after mrt.quantize.axes) as CVM's full starts/ends/steps."""
    t = qz.narrow(node.inputs[0]) if qz.q[node.inputs[0]].per_channel else qz.q[node.inputs[0]]
    shape = qz.shape_of(t.name)
    starts, ends, steps = [0] * len(shape), list(shape), [1] * len(shape)
    a = node.attrs
    for axis, s, e, k in zip(a["axes"], a["starts"], a["ends"], a["steps"]):
        starts[axis], ends[axis], steps[axis] = s, e, k
    out = qz.op("slice", t.name, starts=starts, ends=ends, steps=steps, name=_node_name(node))
    return QT(name=out, scale=t.scale, narrow=t.narrow)


def _passthrough(cvm_op, attrs_fn):
    def rule(qz, node):
        t = qz.narrow(node.inputs[0]) if qz.q[node.inputs[0]].per_channel else qz.q[node.inputs[0]]
        out = qz.op(cvm_op, t.name, name=_node_name(node), **attrs_fn(node.attrs))
        return QT(name=out, scale=t.scale, narrow=t.narrow)
    return rule


def pad(qz, node):
    t = qz.narrow(node.inputs[0])
    m = _reach(qz, t)
    value = int(np.clip(np.round(node.attrs["value"] / float(t.scale)), -m, m))
    out = qz.op("pad", t.name, pads=list(node.attrs["pads"]), value=value, name=_node_name(node))
    return QT(name=out, scale=t.scale, narrow=True)


def identity(qz, node):
    """identity and dropout move no value: the input's integer tensor, at its scale. (mrt.passes.remove_identity
    drops them except where the input is a graph input, a constant or another graph output.)"""
    return qz.q[node.inputs[0]]


def concat(qz, node):
    scale, bits = qz.scale_of(node.outputs[0]), qz.act_bits(node.outputs[0])
    parts = [qz.rescale_to(i, scale, f"{_node_name(node)}.in{k}", bits).name for k, i in enumerate(node.inputs)]
    out = qz.op("concat", *parts, axis=node.attrs["axis"], name=_node_name(node))
    return QT(name=out, scale=np.asarray(scale), narrow=True)


RULES = {
    "conv": conv, "dense": dense, "matmul": matmul,
    "add": add_sub, "sub": add_sub, "mul": mul, "div": div,
    "relu": relu, "clip": clip, "softmax": softmax, "univariate": univariate,
    **{name: _lut(fn) for name, fn in LUT_FUNCTIONS.items()},
    "max_pool": max_pool, "sum_pool": sum_pool, "neg": neg, "slice": slice_,
    "flatten": _passthrough("flatten", lambda a: {}),
    "reshape": _passthrough("reshape", lambda a: {"shape": list(a["shape"])}),
    "transpose": _passthrough("transpose", lambda a: {"perm": list(a["perm"])}),
    "pad": pad, "concat": concat, "identity": identity, "dropout": identity,
}
