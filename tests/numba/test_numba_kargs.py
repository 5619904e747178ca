"""The kernels' argument layouts are built by name: a missing or unknown field is an error, and the
named indices read back what was packed."""
from __future__ import annotations

import pytest

from cvm.interp.numba_kernels import kargs


@pytest.mark.parametrize("layout", [kargs.GEO, kargs.VGEO, kargs.OST, kargs.WINDOW])
def test_pack_reads_back_by_name(layout):
    values = {name: 10 + i for i, name in enumerate(layout)}
    arr = kargs.pack(layout, **values)
    prefix = "V_" if layout is kargs.VGEO else ""
    for name, v in values.items():
        assert arr[getattr(kargs, prefix + name.upper())] == v


def test_pack_refuses_missing_and_unknown_fields():
    with pytest.raises(TypeError, match="missing or unknown"):
        kargs.pack(kargs.WINDOW, kh=1)
    with pytest.raises(TypeError, match="missing or unknown"):
        kargs.pack(kargs.OST, **{n: 0 for n in kargs.OST}, extra=1)
