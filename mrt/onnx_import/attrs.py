"""Reading ONNX node attributes so that none goes unnoticed: every attribute a handler does not
read (or explicitly ignore) is reported as unsupported after the handler ran; and the node helpers every
handler module shares (where, optional_input)."""
from onnx import helper

from mrt.errors import UnsupportedOp


def where(node):
    return f"{node.op_type} node {node.name or node.output[0]!r}"


def optional_input(node, k):
    """The name of the node's k-th input, or None where it is absent or empty (an omitted optional input)."""
    return node.input[k] if len(node.input) > k and node.input[k] else None


class Attrs:
    def __init__(self, node):
        self.node = node
        self._values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self._seen = set()

    def get(self, name, default=None):
        self._seen.add(name)
        value = self._values.get(name, default)
        if isinstance(value, bytes):
            return value.decode()
        return list(value) if isinstance(value, (list, tuple)) else value

    def ignore(self, *names):
        """Attributes with no effect on inference (e.g. a dropout seed)."""
        self._seen.update(names)

    def check_all_read(self):
        unread = sorted(set(self._values) - self._seen)
        if unread:
            raise UnsupportedOp(f"{where(self.node)}: unsupported attribute(s) {unread}")
