"""Helpers shared by the passes: who reads a tensor, per-channel constants, fresh names, and
rebuilding a graph from edited nodes and constants."""
import numpy as np

from mrt.graph import fresh_name, toposort


def sole_consumer(graph, name):
    """The one node reading `name` if exactly one does and it is not a graph output; only then
    may a pass merge that node into the producer of `name`."""
    readers = graph.consumers(name)
    if len(readers) == 1 and name not in graph.outputs:
        return readers[0]
    return None


def channel_axis(graph, node):
    """The output-channel axis of a conv or conv_transpose (1) or dense (last) node's output."""
    return 1 if node.op in ("conv", "conv_transpose") else len(graph.full_shape(node.outputs[0])) - 1


def channel_vector(const, full_shape, axis):
    """If `const` broadcast against a tensor of `full_shape` varies at most along `axis`, its
    values along that axis as a float64 vector; otherwise None."""
    rank = len(full_shape)
    if const.ndim > rank:
        return None
    shape = (1,) * (rank - const.ndim) + const.shape
    if any(d != 1 for i, d in enumerate(shape) if i != axis) or \
            shape[axis] not in (1, full_shape[axis]):
        return None
    return np.broadcast_to(const.reshape(-1).astype(np.float64), (full_shape[axis],)).copy()


class Constants:
    """The constants of a graph being rewritten: fresh names for new ones, float32 storage."""

    def __init__(self, graph):
        self.values = dict(graph.initializers)
        self._taken = graph.tensor_names()

    def add(self, hint, value):
        name = fresh_name(hint, self._taken)
        self._taken.add(name)
        self.values[name] = np.asarray(value, dtype=np.float32)
        return name

    def release(self, name):
        """`name` is no longer read or written: a later fresh name may take it (as a rebuilt graph's would)."""
        self._taken.discard(name)

    def fresh(self, hint):
        """A fresh tensor name for an intermediate result."""
        name = fresh_name(hint, self._taken)
        self._taken.add(name)
        return name


def rebuild(graph, nodes, constants):
    """The graph with new nodes (re-sorted topologically) and only the constants still read."""
    nodes = toposort(nodes, [s.name for s in graph.inputs] + list(constants))
    used = {i for n in nodes for i in n.inputs} | set(graph.outputs)
    return graph.replace(nodes=nodes, initializers={k: v for k, v in constants.items()
                                                    if k in used})
