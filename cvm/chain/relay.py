"""The committee's message board for BatchedOracle: nodes post their signed commits and, once the reveal
phase is open on chain, their signed openings; the committee's aggregator (cvm/chain/batch_node.py)
reads them and submits them together in one transaction each.

    python -m cvm.chain.relay --rpc URL --oracle ADDR [--oracle ADDR ...] [--host 127.0.0.1] [--port 8600]

    POST /commit  {"oracle", "chainId", "requestId", "operator", "commitment", "v", "r", "s"}
    POST /open    {"oracle", "chainId", "requestId", "operator", "outputHash", "traceRoot", "salt", "output",
                   "v", "r", "s"}                                   (batch.sign_opening)
    GET  /round?oracle=0x..&requestId=N  ->  {"commits": [...], "openings": [...]}

The relay holds no key and trusts nobody: every message is signed by the operator it names and checked
against the chain before it is kept (cvm/chain/relay_gate.py: a commit's signer is drawn for the
request; an opening's signer holds a seat and the opening opens its commitment), so throwaway keys
cannot fill a request's slots and nobody can post or replace a message under another's name. The
board keeps one commit and one opening per operator and request (the operator's latest), at most
MAX_ENTRIES per request and kind, MAX_REQUESTS requests (the oldest dropped first), each key in at
most MAX_PER_KEY of them, for KEEP_SECONDS. A node that sees its commit or opening left out by the
deadline's margin sends it itself.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from web3 import Web3

from cvm.chain.protocol import MAX_COMMITTEE
from cvm.chain.relay_gate import Gate, Refused

log = logging.getLogger("cvm.relay")

MAX_ENTRIES = MAX_COMMITTEE  # messages of one kind per request: one per seat
MAX_REQUESTS = 4096  # requests on the board at once
MAX_PER_KEY = 256  # requests one operator's messages may occupy at once
MAX_BODY = 1 << 20  # bytes of one posted message (an opening carries the output)
KEEP_SECONDS = 3600.0
SIGNATURE = ("v", "r", "s")
COMMIT_FIELDS = ("oracle", "chainId", "requestId", "operator", "commitment", *SIGNATURE)
OPEN_FIELDS = ("oracle", "chainId", "requestId", "operator", "outputHash", "traceRoot", "salt", "output", *SIGNATURE)


class Board:
    """Signed commits and openings by (oracle, request id), one of each per operator (its latest), each
    let in by the gate."""

    def __init__(self, gate: Gate):
        self.gate = gate
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, int], dict] = {}

    def _expire(self) -> None:
        now = time.monotonic()
        for k in [k for k, v in self._entries.items() if now - v["at"] > KEEP_SECONDS]:
            del self._entries[k]
        while len(self._entries) >= MAX_REQUESTS:
            del self._entries[min(self._entries, key=lambda k: self._entries[k]["at"])]

    def _held_by(self, operator: str) -> int:
        return sum(operator in v["commits"] or operator in v["openings"] for v in self._entries.values())

    def post(self, kind: str, msg: dict) -> None:
        fields = COMMIT_FIELDS if kind == "commits" else OPEN_FIELDS
        missing = [f for f in fields if f not in msg]
        if missing:
            raise Refused(f"missing fields {missing}")
        operator = self.gate.check(kind, msg)
        key = (Web3.to_checksum_address(msg["oracle"]), int(msg["requestId"]))
        with self._lock:
            self._expire()
            slot = self._entries.get(key)
            if slot is None and self._held_by(operator) >= MAX_PER_KEY:
                raise Refused(f"{operator} already has messages on {MAX_PER_KEY} requests")
            slot = self._entries.setdefault(key, {"at": time.monotonic(), "commits": {}, "openings": {}})
            entries = slot[kind]
            if operator not in entries and len(entries) >= MAX_ENTRIES:
                raise Refused(f"request already has {MAX_ENTRIES} {kind}")
            entries[operator] = {k: msg[k] for k in fields} | {"operator": operator}

    def get(self, oracle: str, request_id: int) -> dict:
        with self._lock:
            slot = self._entries.get((Web3.to_checksum_address(oracle), int(request_id)))
            if slot is None:
                return {"commits": [], "openings": []}
            return {"commits": list(slot["commits"].values()), "openings": list(slot["openings"].values())}


def make_handler(board: Board) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802 (http.server's name)
            kind = {"/commit": "commits", "/open": "openings"}.get(urlparse(self.path).path)
            if kind is None:
                return self._reply(404, {"error": f"no such endpoint {self.path}"})
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                return self._reply(413, {"error": f"message of {length} bytes, at most {MAX_BODY}"})
            try:
                board.post(kind, json.loads(self.rfile.read(length)))
            except (ValueError, TypeError, KeyError, AttributeError) as e:  # Refused is a ValueError
                return self._reply(400, {"error": str(e) or type(e).__name__})
            except Exception as e:  # the chain could not be read (RPC down, a call reverted): try again later
                log.warning("%s: could not check a message: %s: %s", self.path, type(e).__name__, e)
                return self._reply(503, {"error": f"could not check the message against the chain: {type(e).__name__}"})
            self._reply(200, {"ok": True})

        def do_GET(self):  # noqa: N802
            url = urlparse(self.path)
            if url.path == "/health":
                return self._reply(200, {"ok": True})
            if url.path != "/round":
                return self._reply(404, {"error": f"no such endpoint {self.path}"})
            q = parse_qs(url.query)
            try:
                self._reply(200, board.get(q["oracle"][0], int(q["requestId"][0])))
            except (KeyError, ValueError) as e:
                self._reply(400, {"error": f"bad query: {e}"})

        def log_message(self, fmt, *args):
            log.debug("%s %s", self.address_string(), fmt % args)

    return Handler


def serve(w3: Web3, oracles: list[str], host: str = "127.0.0.1", port: int = 8600) -> ThreadingHTTPServer:
    """A started relay server for these oracles on w3's chain (serve_forever in a daemon thread);
    .shutdown() stops it."""
    server = ThreadingHTTPServer((host, port), make_handler(Board(Gate(w3, oracles))))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cvm.chain.relay", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8600)
    p.add_argument("--rpc", required=True, help="the chain's JSON-RPC URL: every message is checked against it")
    p.add_argument("--oracle", action="append", required=True, help="a BatchedOracle this relay serves (repeatable)")
    args = p.parse_args(argv)
    from cvm.chain.shutdown import Shutdown

    Shutdown().install()  # the first SIGTERM/SIGINT leaves serve_forever; nothing to keep but memory
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    gate = Gate(Web3(Web3.HTTPProvider(args.rpc)), args.oracle)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(Board(gate)))
    server.daemon_threads, server.block_on_close = True, False  # a handler mid-request does not hold the exit
    log.info("relay listening on http://%s:%d", args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    log.info("relay stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
