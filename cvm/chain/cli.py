"""`cvm demo` and `cvm node`: registered into the main `cvm` command by cvm/cli.py.

The handlers import the chain modules when they run, so `cvm --help` stays fast (cvm/chain/serve.py, the
arguments and the loop of an operator process, imports none).
"""

from __future__ import annotations

import argparse
import logging
import sys

from cvm.chain.serve import add_node_arguments, serve_operator


def cmd_demo(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    from cvm.chain.demo import run_demo

    try:
        return run_demo(model_path=args.model, data_path=args.data, index=args.index, backend=args.backend)
    except Exception as e:  # a failed step: say which, clearly; -v shows the traceback
        if args.verbose:
            raise
        print(f"demo: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def cmd_node(args: argparse.Namespace) -> int:
    return run_node(args)


def run_node(args: argparse.Namespace) -> int:
    """`cvm node`: one operator against a JSON-RPC chain until stopped (Ctrl-C or SIGTERM)."""
    from cvm.chain.node import Operator

    return serve_operator(args, Operator)


def register(subparsers) -> None:
    s = subparsers.add_parser("demo", help="end-to-end demo on the embedded chain: oracle consensus and precompile")
    s.add_argument("--model", help="a .cvm digit classifier (default: the committed fixture)")
    s.add_argument("--data", help=".npz test data with x (float images) and y (labels)")
    s.add_argument("--index", type=int, default=0, help="which test image to classify")
    s.add_argument("--backend", default="numba", choices=["numba", "reference"])
    s.add_argument("-v", "--verbose", action="store_true", help="show the operators' logs")
    s.set_defaults(func=cmd_demo)

    s = subparsers.add_parser("node", help="run an oracle node operator against a JSON-RPC chain")
    add_node_arguments(s)
    s.set_defaults(func=cmd_node)
