"""The converter's failure contract (issue 30, item 3): a conversion fails only with UnsupportedOp, BadInput or
QuantizeError, on one line, naming the node it was at. `contained(stage)` wraps each stage of
mrt.pipeline.CONVERSION:

* those three pass through; one whose message names no node gets the node it was raised at (if any) put first;
* GraphError (a float graph breaking an IR rule) becomes UnsupportedOp at import, QuantizeError after it;
* cvm's errors (the verifier refusing the integer graph) become QuantizeError: a model the verifier rejects is
  never returned, so never written;
* a plain ValueError raised away from any node is the caller's option or data: BadInput (still a ValueError);
* anything else is a converter bug: UnsupportedOp at import, QuantizeError after it, saying "internal error".

The node is the one the stage was processing: the outermost frame of the traceback holding an IR node
(mrt.graph.Node) or an ONNX NodeProto, i.e. the stage's own loop over the graph. The original exception stays
as __cause__, so a test (or MRT_DEBUG's traceback) still shows the real bug. MemoryError and
KeyboardInterrupt pass untouched.
"""
from __future__ import annotations

from contextlib import contextmanager

from cvm.clikit import one_line
from cvm.errors import CVMError
from mrt.errors import BadInput, GraphError, UnsupportedOp
from mrt.graph import Node
from mrt.quantize.state import QuantizeError

OWN = (UnsupportedOp, BadInput, QuantizeError)


def node_in_traceback(tb) -> tuple[str, str] | None:
    """(name, op) of the node the outermost frame of traceback `tb` holds, or None."""
    from onnx import NodeProto
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, Node):
                return value.name or value.outputs[0], value.op
            if isinstance(value, NodeProto):
                return value.name or value.output[0], value.op_type
        tb = tb.tb_next
    return None


def _where(e: BaseException, stage: str) -> str:
    node = node_in_traceback(e.__traceback__)
    return f"node {node[0]!r} ({node[1]})" if node else f"stage {stage}"


def _names_a_node(message: str) -> bool:
    return "node " in message or "node(s) " in message


@contextmanager
def contained(stage: str):
    """Run one conversion stage under the failure contract (module docstring)."""
    try:
        yield
    except OWN as e:
        message, node = str(e), node_in_traceback(e.__traceback__)
        if node is not None and not _names_a_node(message):
            message = f"node {node[0]!r} ({node[1]}): {message}"
        if message != str(e) or "\n" in message:
            e.args = (one_line(message),)
        raise
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 - every other failure becomes one of the three, the original as __cause__
        raise _translated(e, stage) from e


def _translated(e: Exception, stage: str) -> Exception:
    where, at_import = _where(e, stage), stage == "import"
    if isinstance(e, GraphError):
        return (UnsupportedOp if at_import else QuantizeError)(one_line(f"{where}: {e}" if not _names_a_node(str(e))
                                                                        else str(e)))
    if isinstance(e, CVMError):
        return QuantizeError(one_line(f"{where}: the integer graph fails CVM's verification: {e}"))
    if type(e) is ValueError and where.startswith("stage "):
        return BadInput(one_line(f"{stage}: {e}"))
    return (UnsupportedOp if at_import else QuantizeError)(
        one_line(f"{where}: internal error in stage {stage}: {type(e).__name__}: {e}"))
