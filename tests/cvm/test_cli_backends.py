"""`cvm run --backend` offers exactly the backends cvm.model.BACKENDS registers: a new backend needs no
CLI edit."""
import argparse

from cvm.cli import build_parser
from cvm.model import BACKENDS


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_run_backend_choices_are_the_registered_backends():
    backend = next(a for a in _subcommand(build_parser(), "run")._actions if a.dest == "backend")
    assert sorted(backend.choices) == sorted(BACKENDS)
    assert backend.default in BACKENDS
