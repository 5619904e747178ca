"""The verification-cost cases of `cvm bench-verify` build the files they claim (small sizes here;
the command reports seconds per MB at full size, and no test asserts a time)."""
import pytest

import cvm
from cvm.tools import bench_verify
from cvm.cli import main


@pytest.mark.parametrize("build,accepted", [
    (lambda: bench_verify.many_constants(500), True),
    (lambda: bench_verify.shared_weight_dense(1 << 10, 64), True),
    (lambda: bench_verify.wide_concat(1000), True),
    (lambda: bench_verify.big_lut_chain(20), True),
    (lambda: bench_verify.big_constant(1 << 14), True),
    (bench_verify.memory_chain, False),
    (lambda: bench_verify.random_bytes(1000), False),
])
def test_cases_load_as_described(build, accepted):
    data = build()
    if accepted:
        cvm.loads(data)
    else:
        with pytest.raises(cvm.CVMError):
            cvm.loads(data)


def test_memory_chain_stops_where_the_limit_is_crossed():
    with pytest.raises(cvm.LimitError, match="node 'p128'.*limits.memory"):
        cvm.loads(bench_verify.memory_chain())


def test_command_prints_the_table(capsys):
    assert main(["bench-verify", "--repeat", "1", "--only", "memory_chain", "big_lut_chain"]) == 0
    out = capsys.readouterr().out
    assert "s/MB" in out and "worst:" in out
