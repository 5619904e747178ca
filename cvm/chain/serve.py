"""An operator process from the command line: its arguments, its key, and the loop that runs it until
told to stop. `cvm node` (cvm/chain/cli.py), `python -m cvm.chain.node` and `python -m cvm.chain.batch_node`
share it; it imports the chain modules only when an operator starts, so `cvm --help` stays fast."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount


def read_key(value: str) -> LocalAccount:
    """A private key given as hex, as env:NAME (an environment variable) or as a file path."""
    from eth_account import Account

    if value.startswith("env:"):
        value = os.environ[value[4:]]
    elif Path(value).is_file():
        value = Path(value).read_text().strip()
    return Account.from_key(value)


def serve_operator(args: argparse.Namespace, operator_class: type, **kw) -> int:
    """Builds an operator of `operator_class` (node.Operator or a subclass) from the node arguments
    and runs it until the first SIGTERM or SIGINT (cvm/chain/shutdown.py), which ends it within a
    few seconds whatever it is doing, at start-up too; its SQLite rows let a restart resume."""
    from cvm.chain.shutdown import Shutdown

    stop = Shutdown().install()  # before anything slow: reading the chain, loading a model
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("cvm.node")
    try:
        op = _build_operator(args, operator_class, **kw)
        op.run(poll_interval=args.poll, stop=stop.event)
    except KeyboardInterrupt:
        pass
    log.info("stopped")
    return 0


def _build_operator(args: argparse.Namespace, operator_class: type, **kw):
    from web3 import Web3

    from cvm.chain.store import ModelStore

    account = read_key(args.key)
    w3 = Web3(Web3.HTTPProvider(args.rpc))
    db = args.db or str(Path(args.models) / f"node-{account.address}.sqlite")
    return operator_class(w3, account, args.oracle, ModelStore(args.models), db, backend=args.backend,
                          from_block=args.from_block, confirmations=args.confirmations, **kw)


def add_node_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rpc", required=True, help="JSON-RPC URL of the chain")
    p.add_argument("--key", required=True, help="operator private key: hex, env:NAME or a file path")
    p.add_argument("--oracle", required=True, help="InferenceOracle address")
    p.add_argument("--models", required=True, help="model store directory (files named by model hash)")
    p.add_argument("--db", help="SQLite file for pending work (default: node-<address>.sqlite in --models)")
    p.add_argument("--backend", default="numba", choices=["numba", "reference"])
    p.add_argument("--poll", type=float, default=1.0, help="seconds between polls")
    p.add_argument("--from-block", type=int, default=0, help="first block to scan on a new database")
    p.add_argument("--confirmations", type=int, default=0,
                   help="blocks on top of a request before it is taken (reorg safety; 0 on a dev chain)")
    p.add_argument("-v", "--verbose", action="store_true")
