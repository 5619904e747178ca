"""The state of one import: ONNX constants, activations and the IR nodes emitted so far.

Handlers read ONNX tensor names through it and emit IR nodes into it; each emitted node's shape
is inferred at once with the float op table, so a node MRT cannot represent fails at its own
ONNX node, with that node's name in the message.
"""
import numpy as np

from cvm.model import NARROW_FLOATS  # ml_dtypes' float types, each value a float32 value

from mrt import limits
from mrt.errors import GraphError, UnsupportedOp
from mrt.float_ops import BATCH
from mrt.graph import Node, fresh_name, infer_node_shape
from mrt.onnx_import.attrs import where


# what a constant infinity (an attention mask's "minus infinity") becomes: far beyond any calibrated value, as the
# masks exporters write with float32's lowest are, yet a sum of many such masks stays finite
MASK_INFINITY = np.float32(2.0 ** 100)


class ImportContext:
    def __init__(self, consts):
        self.consts = dict(consts)   # ONNX name -> np.ndarray: initializers, Constant, folded
        self.full = {}               # IR name of an activation -> full shape (the CVM batch axis BATCH at 0)
        self.dropped = {}            # ONNX name -> why it has no IR counterpart
        self.optional_outputs = set()  # dropped names that may silently leave the graph outputs
        self.nodes = []              # (a property: an assignment re-indexes the node names and producers)
        self.initializers = {}       # IR constants referenced by emitted nodes
        self.integer_tensors = set()  # ONNX tensors of an integer element type (importer.integer_tensors)
        self.batch_axes = {}         # ONNX name -> its unit axis where not 0 (one_sample.py, batch_major.py)
        self.whole = set()           # ONNX names stored whole, every ONNX axis a per-sample axis (one_sample.py)
        self.aliases = {}            # (ONNX name, form) -> the name of its copy stored in that form (one_sample.py)
        self.recurrent = set()       # IR tensors of unrolled recurrences and the sequences they read (ops_rnn.py)
        self.onnx_model = None       # the model imported: functions.py infers element types from it once, if asked
        self.elem_types = None       # ONNX name -> element type, where a function body needed them (functions.py)

    def mark(self):
        """A point to roll the import back to (one_sample tries a node's unit-axis import first)."""
        sizes = {k: len(getattr(self, k)) for k in ("consts", "full", "dropped", "initializers", "batch_axes",
                                                     "aliases")}
        sets = {k: set(getattr(self, k)) for k in ("optional_outputs", "whole", "recurrent")}
        return len(self._nodes), sizes, sets

    def rollback(self, mark):
        """Forget everything recorded since `mark`: dicts keep insertion order, so the new keys are the last ones."""
        n_nodes, sizes, sets = mark
        for k, n in sizes.items():
            table = getattr(self, k)
            for key in list(table)[n:]:
                del table[key]
        for k, value in sets.items():
            setattr(self, k, value)
        if len(self._nodes) != n_nodes:
            self.nodes = self._nodes[:n_nodes]

    def onnx_shape(self, name, node):
        """One sample's ONNX shape of a tensor: a constant's own; an activation's from its IR shape and form."""
        full = self.shape(name, node)
        if self.is_const(name) or name in self.whole:
            return tuple(full) if self.is_const(name) else tuple(full[1:])
        k = self.batch_axes.get(name, 0)
        return (*full[1:k + 1], 1, *full[k + 1:])

    @property
    def nodes(self):
        return self._nodes

    @nodes.setter
    def nodes(self, nodes):
        self._nodes = list(nodes)
        self._node_names = {n.name for n in self._nodes}
        self._producers = {o: n for n in self._nodes for o in n.outputs}

    def producer(self, name):
        """The IR node emitted so far that writes `name`, or None."""
        return self._producers.get(name)

    def taken(self):
        """Every name a new IR tensor or constant must avoid: a view of the three name tables, not their union
        (a union per emitted node made the import quadratic in the nodes)."""
        return _Names(self.full, self.initializers, self.consts)

    # -- reading ONNX tensors ----------------------------------------------------------------

    def is_const(self, name):
        return name in self.consts

    def _check_known(self, name, node):
        if name in self.dropped:
            raise UnsupportedOp(f"{where(node)}: reads {name!r}: {self.dropped[name]}")
        if not (self.is_const(name) or name in self.full):
            raise UnsupportedOp(f"{where(node)}: input {name!r} is not defined")

    def const(self, name, node, what):
        """The value of a constant input; a batched one is an error naming `what`."""
        self._check_known(name, node)
        if not self.is_const(name):
            raise UnsupportedOp(f"{where(node)}: the {what} ({name!r}) must be a constant")
        return self.consts[name]

    def shape(self, name, node):
        """IR full shape: (BATCH, *per_sample) for an activation, the array shape for a const."""
        self._check_known(name, node)
        if self.is_const(name):
            return self.consts[name].shape
        return self.full[name]

    def tensor(self, name, node):
        """The IR name for an input; a constant becomes an IR initializer."""
        self._check_known(name, node)
        if not self.is_const(name):
            return name
        value = self.consts[name]
        if value.dtype != np.float32 or np.isinf(value).any():
            value = self._as_float32(name, value, node)
        if name not in self.initializers:
            self.initializers[self._free(name)] = value
        return name

    @staticmethod
    def _as_float32(name, value, node):
        """A constant MRT computes with, as float32: other floats rounded to it (MRT quantizes them anyway);
        integers and booleans where float32 holds them exactly (|v| <= 2^24). An infinity (the "minus infinity"
        of an attention mask) becomes MASK_INFINITY of its sign."""
        if value.dtype.kind == "f" or value.dtype.name in NARROW_FLOATS:
            return np.asarray(np.nan_to_num(value.astype(np.float32), nan=np.nan, posinf=MASK_INFINITY,
                                            neginf=-MASK_INFINITY))
        if value.dtype.kind in "iub" and (not value.size or np.abs(value.astype(np.float64)).max() <= 2 ** 24):
            return value.astype(np.float32)
        raise UnsupportedOp(f"{where(node)}: constant {name!r} has dtype {value.dtype} with values float32 does "
                            "not hold exactly; MRT computes in float32")

    def drop(self, name, reason, optional_output=False):
        """Record an ONNX output MRT does not compute; reading it is an error naming `reason`.
        An optional output is also silently left out of the graph outputs."""
        self.dropped[name] = reason
        if optional_output:
            self.optional_outputs.add(name)

    # -- emitting IR -------------------------------------------------------------------------

    def _free(self, name):
        if name in self.full or name in self.initializers:
            raise UnsupportedOp(f"tensor name {name!r} is defined twice")
        return name

    def add_const(self, hint, value):
        """A new IR constant (e.g. folded Gemm weights) under a fresh name."""
        name = fresh_name(hint, self.taken())
        self.initializers[name] = np.ascontiguousarray(value, dtype=np.float32)
        return name

    def emit(self, op, inputs, attrs, node, out=None):
        """Append IR node `op`; `out` is the ONNX output it defines (None: an intermediate)."""
        if len(self._nodes) >= limits.max_nodes():  # unrolled recurrences: refused before the next one grows the graph
            raise GraphError(f"{where(node)}: the float graph grows past {limits.node_limit_text()}")
        ir_out = self._free(out) if out else fresh_name(f"{node.output[0]}/{op}", self.taken())
        ir_node = Node(op, inputs, (ir_out,), attrs, name=fresh_name(node.name or node.output[0], self._node_names))
        ins = [self.full[i] if i in self.full else self.initializers[i].shape for i in inputs]
        try:
            shape = infer_node_shape(ir_node, ins)
        except GraphError as e:
            raise UnsupportedOp(f"{where(node)}: {e}") from None
        if not shape or shape[0] is not BATCH:
            raise UnsupportedOp(f"{where(node)}: result does not depend on the graph input")
        self.full[ir_out] = shape
        self._nodes.append(ir_node)
        self._node_names.add(ir_node.name)
        self._producers[ir_out] = ir_node
        return ir_out

    def emit_chain(self, steps, first, node, out):
        """Emit single-input ops [(op, other inputs, attrs), ...] in a chain from IR tensor
        `first`; the last one defines ONNX output `out`."""
        value = first
        for k, (op, extra, attrs) in enumerate(steps):
            value = self.emit(op, [value, *extra], attrs, node,
                              out=out if k == len(steps) - 1 else None)
        return value


class _Names:
    """Membership in any of several name tables."""

    def __init__(self, *tables):
        self.tables = tables

    def __contains__(self, name):
        return any(name in t for t in self.tables)
