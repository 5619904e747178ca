"""Importers for ONNX's recurrent ops (LSTM, GRU, RNN), unrolled over the fixed sequence length.

Every step becomes IR ops MRT already quantizes exactly: a dense layer for the input and one for the
hidden state (their sum is the gates' pre-activation), a lookup table per activation (sigmoid, tanh,
...), multiplications of two activations for the gate products, additions. No loop op is needed: the
sequence length is fixed at conversion (a per-sample dim of the input), and each step's cell and hidden
state get their own calibrated range, which a requantization with clipping then proves at every step.

Layouts: the IR keeps the batch axis first, so the sequence-first ONNX layout (layout=0: X is
[seq, batch, input], Y [seq, dirs, batch, hidden], states [dirs, batch, hidden]) is stored as the
batch-first one (layout=1: [batch, seq, input], [batch, seq, dirs, hidden], [batch, dirs, hidden]);
mrt.onnx_import.batch_major records which ONNX axis is the batch so that the ops around the cell read
these tensors correctly. Forward, reverse and bidirectional; initial states as inputs (or zeros);
`sequence_lens` only when it is a constant equal to the sequence length.
"""
from __future__ import annotations

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import optional_input, where
from mrt.onnx_import.batch_major import batch_axis, set_batch_axis

# ONNX activation name -> (IR op, [(attribute, ONNX default)] read from activation_alpha / activation_beta)
ACTIVATIONS = {
    "Sigmoid": ("sigmoid", []), "Tanh": ("tanh", []), "Relu": ("relu", []), "Softsign": ("softsign", []),
    "Softplus": ("softplus", []), "HardSigmoid": ("hard_sigmoid", [("alpha", 0.2), ("beta", 0.5)]),
    "LeakyRelu": ("leaky_relu", [("alpha", 0.01)]), "Elu": ("elu", [("alpha", 1.0)]),
    "ThresholdedRelu": ("thresholded_relu", [("alpha", 1.0)]),
}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}  # blocks of hidden_size rows in W and R (ONNX order iofc, zrh, -)


def _activations(node, attrs, directions):
    """Per direction, the (IR op, attrs) of each activation, alpha/beta consumed in order as onnxruntime does."""
    per_dir = len(DEFAULT_ACTIVATIONS[node.op_type])
    names = [n.decode() if isinstance(n, bytes) else n for n in attrs.get("activations") or []] or \
        DEFAULT_ACTIVATIONS[node.op_type] * directions
    if len(names) != per_dir * directions:
        raise UnsupportedOp(f"{where(node)}: {len(names)} activations for {directions} direction(s), need "
                            f"{per_dir * directions}")
    alphas, betas = list(attrs.get("activation_alpha") or []), list(attrs.get("activation_beta") or [])
    out = []
    for name in names:
        if name not in ACTIVATIONS:
            raise UnsupportedOp(f"{where(node)}: activation {name!r} is not supported ({sorted(ACTIVATIONS)})")
        op, params = ACTIVATIONS[name]
        values = {}
        for attr, default in params:
            source = alphas if attr == "alpha" else betas
            values[attr] = float(source.pop(0)) if source else default
        out.append((op, values))
    return [out[d * per_dir:(d + 1) * per_dir] for d in range(directions)]


class Cell:
    """Emits one recurrent node's IR: the constants of one direction and the ops of its steps."""

    def __init__(self, ctx, node, attrs):
        self.ctx, self.node = ctx, node
        self._consts = {}
        self.hidden = attrs.get("hidden_size")
        self.direction = attrs.get("direction", "forward")
        self.layout = attrs.get("layout", 0)
        self.clip_value = attrs.get("clip")
        self.lbr = attrs.get("linear_before_reset", 0) if node.op_type == "GRU" else 0
        self.input_forget = attrs.get("input_forget", 0) if node.op_type == "LSTM" else 0
        if self.direction not in ("forward", "reverse", "bidirectional"):
            raise UnsupportedOp(f"{where(node)}: direction {self.direction!r} is not supported")
        self.dirs = 2 if self.direction == "bidirectional" else 1
        self.acts = _activations(node, attrs, self.dirs)
        self.x = self._batched(node.input[0], "X", seq=True)
        full = ctx.full[self.x]
        if len(full) != 3:
            raise UnsupportedOp(f"{where(node)}: X must have rank 3, got {len(full)}")
        self.steps, self.features = full[1], full[2]
        g = GATES[node.op_type] * (self.hidden or 0)
        self.w = ctx.const(node.input[1], node, f"{node.op_type} W").astype(np.float64)
        self.r = ctx.const(node.input[2], node, f"{node.op_type} R").astype(np.float64)
        if self.w.shape != (self.dirs, g, self.features) or self.r.shape != (self.dirs, g, self.hidden):
            raise UnsupportedOp(f"{where(node)}: W {self.w.shape} / R {self.r.shape} do not fit {self.dirs} "
                                f"direction(s), hidden_size {self.hidden}, {self.features} input features")
        b = optional_input(node, 3)
        self.b = (np.zeros((self.dirs, 2 * g)) if b is None else
                  ctx.const(b, node, f"{node.op_type} B").astype(np.float64).reshape(self.dirs, 2 * g))
        self._check_lengths()

    def _batched(self, name, what, seq=False):
        """The IR name of a batched input in the batch-first layout, checking where its batch axis is."""
        want = 1 if self.layout == 0 else 0
        if self.ctx.is_const(name):
            raise UnsupportedOp(f"{where(self.node)}: {what} ({name!r}) must depend on the graph input")
        if batch_axis(self.ctx, name) != want:
            raise UnsupportedOp(
                f"{where(self.node)}: {what} ({name!r}) has its batch on ONNX axis {batch_axis(self.ctx, name)}, "
                f"but layout={self.layout} puts it on axis {want}" +
                (" (a sequence-first input whose axis 0 is the batch: give the model layout=1 or a "
                 "transposed input)" if seq else ""))
        return self.ctx.tensor(name, self.node)

    def _check_lengths(self):
        name = optional_input(self.node, 4)
        if name is None:
            return
        lengths = np.asarray(self.ctx.const(name, self.node, "sequence_lens"))
        if lengths.size and np.any(lengths != self.steps):
            raise UnsupportedOp(f"{where(self.node)}: sequence_lens {lengths.tolist()} differ from the sequence "
                                f"length {self.steps}; the length is fixed at conversion")

    def initial(self, k, what):
        """Per direction, the IR name of the initial state (N, 1, H), or None for zeros."""
        name = optional_input(self.node, k)
        if name is None:
            return [None] * self.dirs
        if self.ctx.is_const(name):
            if np.any(self.ctx.consts[name]):
                raise UnsupportedOp(f"{where(self.node)}: a non-zero constant {what} is not supported "
                                    "(give it as a graph input)")
            return [None] * self.dirs
        full = self.ctx.full[self._batched(name, what)]
        if tuple(full[1:]) != (self.dirs, self.hidden):
            raise UnsupportedOp(f"{where(self.node)}: {what} has shape {full[1:]} per sample, want "
                                f"{(self.dirs, self.hidden)}")
        return [self.slice(name, 1, d, d + 1) for d in range(self.dirs)]

    # -- emitting -------------------------------------------------------------------------------

    def emit(self, op, inputs, attrs=None, out=None):
        """An IR op of the recurrence; it and the batched tensors it reads are recorded as recurrent (Graph.recurrent)."""
        result = self.ctx.emit(op, inputs, attrs or {}, self.node, out=out)
        self.ctx.recurrent.update([result, *(i for i in inputs if i in self.ctx.full)])
        return result

    def const(self, hint, value):
        """One IR constant per hint (a direction's W, R, bias, ...), shared by every step that reads it."""
        if hint not in self._consts:
            self._consts[hint] = self.ctx.add_const(f"{self.node.output[0] or self.node.name}/{hint}", value)
        return self._consts[hint]

    def slice(self, x, axis, start, end):
        return self.emit("slice", [x], {"axes": (axis,), "starts": (start,), "ends": (end,), "steps": (1,)})

    def dense(self, x, w, b=None, hint="w"):
        inputs = [x, self.const(hint, w)] + ([] if b is None else [self.const(f"{hint}_b", b)])
        return self.emit("dense", inputs)

    def gates(self, x_t, h, w, r, b, hint):
        """x_t W^T + b (+ h R^T): the pre-activation of a block of gates."""
        pre = self.dense(x_t, w, b, hint=f"W{hint}")
        if h is not None:
            pre = self.emit("add", [pre, self.dense(h, r, hint=f"R{hint}")])
        return pre

    def act(self, spec, x, clip=True):
        """An activation; `clip` bounds its input first (onnxruntime clips the gates' pre-activations, not the
        cell state before h)."""
        if clip and self.clip_value is not None:
            c = float(self.clip_value)
            x = self.emit("clip", [x], {"min": -c, "max": c})
        op, attrs = spec
        return self.emit(op, [x], attrs)

    def blocks(self, value, n):
        h = self.hidden
        return [self.slice(value, 2, k * h, (k + 1) * h) for k in range(n)]

    # -- the recurrence -------------------------------------------------------------------------

    def run(self, step, states):
        """Run `step(x_t, states) -> states` over the sequence for each direction; states[0] is the
        hidden state. Returns the hidden states per direction in time order and the final states."""
        hs, finals = [], []
        for d in range(self.dirs):
            reverse = self.direction == "reverse" or d == 1
            state, seq = [s[d] for s in states], {}
            for t in (range(self.steps - 1, -1, -1) if reverse else range(self.steps)):
                state = step(d, self.slice(self.x, 1, t, t + 1), state)
                seq[t] = state[0]
            hs.append([seq[t] for t in range(self.steps)])
            finals.append(state)
        return hs, finals

    def outputs(self, hs, finals):
        """Y (N, T, D, H), Y_h (N, D, H) and, for LSTM, Y_c (N, D, H); each ONNX output in use is defined
        and marked with its ONNX batch axis."""
        node, layout0 = self.node, self.layout == 0
        if node.output[0]:
            per_dir = [self.emit("reshape", [self._cat(seq, 1)], {"shape": (self.steps, 1, self.hidden)})
                       for seq in hs]
            self._define(self._cat(per_dir, 2), node.output[0], 2 if layout0 else 0)
        for k in range(1, len(node.output)):
            if node.output[k]:
                self._define(self._cat([f[k - 1] for f in finals], 1), node.output[k], 1 if layout0 else 0)

    def _cat(self, parts, axis):
        return parts[0] if len(parts) == 1 else self.emit("concat", parts, {"axis": axis})

    def _define(self, value, out, axis):
        self.emit("identity", [value], out=out)
        set_batch_axis(self.ctx, out, axis)


# -- the three cells --------------------------------------------------------------------------------

def _lstm_step(cell, peep):
    """i, o, f = f(.), g = g(.), c = f*c + i*g, h = o*h(c) (ONNX gate order iofc; peepholes P = [Pi, Po, Pf])."""
    h_, w, r, b = cell.hidden, cell.w, cell.r, cell.b

    def step(d, x_t, state):
        h, c = state
        pre = cell.gates(x_t, h, w[d], r[d], b[d, :4 * h_] + b[d, 4 * h_:], f"{d}")
        f_act, g_act, h_act = cell.acts[d]
        if peep is None and not cell.input_forget:
            i, o, f = cell.blocks(cell.act(f_act, cell.slice(pre, 2, 0, 3 * h_)), 3)
        else:
            pi, po, pf, pg = cell.blocks(pre, 4)
            i = cell.act(f_act, _peephole(cell, pi, c, peep, d, 0))
            f = (cell.emit("sub", [cell.const("one", np.ones(1)), i]) if cell.input_forget else
                 cell.act(f_act, _peephole(cell, pf, c, peep, d, 2)))
        g = cell.act(g_act, cell.slice(pre, 2, 3 * h_, 4 * h_))
        c_new = cell.emit("mul", [i, g])
        if c is not None:
            c_new = cell.emit("add", [cell.emit("mul", [f, c]), c_new])
        if peep is not None or cell.input_forget:
            o = cell.act(f_act, _peephole(cell, po, c_new, peep, d, 1))
        return [cell.emit("mul", [o, cell.act(h_act, c_new, clip=False)]), c_new]
    return step


def _peephole(cell, pre, c, peep, d, k):
    if peep is None or c is None or not np.any(peep[d, k]):
        return pre
    p = peep[d, k * cell.hidden:(k + 1) * cell.hidden]
    return cell.emit("add", [pre, cell.emit("mul", [c, cell.const(f"P{d}_{k}", p)])])


def _gru_step(cell):
    """z, r = f(.), h~ = g(x Wh + (r*h) Rh + b) or, linear_before_reset, g(x Wh + r*(h Rh + Rbh) + Wbh);
    h = (1 - z) h~ + z h, computed as h~ + z (h - h~)."""
    h_, w, r, b = cell.hidden, cell.w, cell.r, cell.b

    def step(d, x_t, state):
        (h,) = state
        wb, rb = b[d, :3 * h_], b[d, 3 * h_:]
        f_act, g_act = cell.acts[d]
        pre = cell.gates(x_t, h, w[d, :2 * h_], r[d, :2 * h_], wb[:2 * h_] + rb[:2 * h_], f"zr{d}")
        z, reset = cell.blocks(cell.act(f_act, pre), 2)
        xh = cell.dense(x_t, w[d, 2 * h_:], wb[2 * h_:] + (0 if cell.lbr else rb[2 * h_:]), hint=f"Wh{d}")
        if h is None:
            extra = cell.emit("mul", [reset, cell.const(f"Rbh{d}", rb[2 * h_:])]) if cell.lbr and np.any(rb[2 * h_:]) \
                else None
        elif cell.lbr:
            extra = cell.emit("mul", [reset, cell.dense(h, r[d, 2 * h_:], rb[2 * h_:], hint=f"Rh{d}")])
        else:
            extra = cell.dense(cell.emit("mul", [reset, h]), r[d, 2 * h_:], hint=f"Rh{d}")
        cand = cell.act(g_act, xh if extra is None else cell.emit("add", [xh, extra]))
        if h is None:
            return [cell.emit("sub", [cand, cell.emit("mul", [z, cand])])]
        return [cell.emit("add", [cand, cell.emit("mul", [z, cell.emit("sub", [h, cand])])])]
    return step


def _rnn_step(cell):
    def step(d, x_t, state):
        (h,) = state
        pre = cell.gates(x_t, h, cell.w[d], cell.r[d], cell.b[d, :cell.hidden] + cell.b[d, cell.hidden:], f"{d}")
        return [cell.act(cell.acts[d][0], pre)]
    return step


def lstm(ctx, node, attrs):
    cell = Cell(ctx, node, attrs)
    peep = None
    if optional_input(node, 7):
        peep = ctx.const(node.input[7], node, "LSTM P").astype(np.float64).reshape(cell.dirs, 3 * cell.hidden)
        peep = peep if np.any(peep) else None
    hs, finals = cell.run(_lstm_step(cell, peep), [cell.initial(5, "initial_h"), cell.initial(6, "initial_c")])
    cell.outputs(hs, finals)


def gru(ctx, node, attrs):
    cell = Cell(ctx, node, attrs)
    hs, finals = cell.run(_gru_step(cell), [cell.initial(5, "initial_h")])
    cell.outputs(hs, finals)


def rnn(ctx, node, attrs):
    cell = Cell(ctx, node, attrs)
    hs, finals = cell.run(_rnn_step(cell), [cell.initial(5, "initial_h")])
    cell.outputs(hs, finals)


HANDLERS = {
    "LSTM": (lstm, {7, 14, 22}),
    "GRU": (gru, {7, 14, 22}),
    "RNN": (rnn, {7, 14, 22}),
}
