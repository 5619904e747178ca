"""The committee's message board for BatchedOracle: nodes post their signed commits and, once the reveal
phase is open on chain, their openings; the committee's aggregator (cvm/chain/batch_node.py) reads
them and submits them together in one transaction each.

    python -m cvm.chain.relay [--host 127.0.0.1] [--port 8600]

    POST /commit  {"oracle", "chainId", "requestId", "operator", "commitment", "v", "r", "s"}
    POST /open    {"oracle", "requestId", "operator", "outputHash", "traceRoot", "salt", "output"}
    GET  /round?oracle=0x..&requestId=N  ->  {"commits": [...], "openings": [...]}

The relay holds no key and is trusted with nothing: a commit whose signature does not recover to its
operator is refused (the contract checks it again), an opening proves itself against the commitment
on chain, and a node that sees its commit or opening left out by the deadline's margin sends it
itself. Openings reach the relay only after the committee's commitments are on chain, so reading
them gives nobody an answer to commit to. Entries are kept in memory, at most MAX_ENTRIES per
request and kind, for KEEP_SECONDS.
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

from cvm.chain.batch import signer_of

log = logging.getLogger("cvm.relay")

MAX_ENTRIES = 16  # BatchedOracle's largest committee (MAX_COMMITTEE)
MAX_BODY = 1 << 20  # bytes of one posted message (an opening carries the output)
KEEP_SECONDS = 3600.0
COMMIT_FIELDS = ("oracle", "chainId", "requestId", "operator", "commitment", "v", "r", "s")
OPEN_FIELDS = ("oracle", "requestId", "operator", "outputHash", "traceRoot", "salt", "output")


class Board:
    """Signed commits and openings by (oracle, request id), one of each per operator (the latest)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, int], dict] = {}

    def _slot(self, oracle: str, request_id: int) -> dict:
        key = (Web3.to_checksum_address(oracle), int(request_id))
        now = time.monotonic()
        for k in [k for k, v in self._entries.items() if now - v["at"] > KEEP_SECONDS]:
            del self._entries[k]
        return self._entries.setdefault(key, {"at": now, "commits": {}, "openings": {}})

    def post(self, kind: str, msg: dict) -> None:
        fields = COMMIT_FIELDS if kind == "commits" else OPEN_FIELDS
        missing = [f for f in fields if f not in msg]
        if missing:
            raise ValueError(f"missing fields {missing}")
        operator = Web3.to_checksum_address(msg["operator"])
        if kind == "commits":
            signer = signer_of(int(msg["chainId"]), Web3.to_checksum_address(msg["oracle"]), int(msg["requestId"]), msg)
            if signer != operator:
                raise ValueError(f"the signature is {signer}'s, not {operator}'s")
        with self._lock:
            entries = self._slot(msg["oracle"], msg["requestId"])[kind]
            if operator not in entries and len(entries) >= MAX_ENTRIES:
                raise ValueError(f"request already has {MAX_ENTRIES} {kind}")
            entries[operator] = {k: msg[k] for k in fields} | {"operator": operator}

    def get(self, oracle: str, request_id: int) -> dict:
        with self._lock:
            slot = self._slot(oracle, request_id)
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
            except (ValueError, TypeError, KeyError) as e:
                return self._reply(400, {"error": str(e)})
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


def serve(host: str = "127.0.0.1", port: int = 8600) -> ThreadingHTTPServer:
    """A started relay server (serve_forever in a daemon thread); .shutdown() stops it."""
    server = ThreadingHTTPServer((host, port), make_handler(Board()))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cvm.chain.relay", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8600)
    args = p.parse_args(argv)
    from cvm.chain.shutdown import Shutdown

    Shutdown().install()  # the first SIGTERM/SIGINT leaves serve_forever; nothing to keep but memory
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = ThreadingHTTPServer((args.host, args.port), make_handler(Board()))
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
