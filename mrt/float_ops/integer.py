"""Float ops (filled in by the work on issue 30/31): {name: (run, shape, attrs, arity)}."""
from __future__ import annotations

INTEGER: dict = {}
