"""The claim the FHE lowering rests on: concrete's round_bit_pattern is the spec's rounding shift.

round_bit_pattern(x, r) = floor((x + 2^(r-1)) / 2^r) * 2^r, round half up (toward +inf), for
negative values too, exactly as cvm.ops.rescale.round_shift(x, r) * 2^r. Checked over whole
domains in clear evaluation, in simulation, and once encrypted.
"""
import numpy as np
import pytest
from concrete import fhe

from cvm.arith import round_shift


def _circuit(width: int, r: int, table: bool):
    domain = np.arange(-(1 << (width - 1)), 1 << (width - 1), dtype=np.int64)

    def f(x):
        v = fhe.round_bit_pattern(x, r, exactness=fhe.Exactness.EXACT)
        return fhe.univariate(lambda u: u >> r)(v) if table else v

    circuit = fhe.Compiler(f, {"x": "encrypted"}).compile([domain, -domain[::-1] - 1], fhe.Configuration())
    return circuit, domain


@pytest.mark.parametrize("r", [1, 2, 3, 5])
def test_evaluator_matches_round_shift(r):
    xs = np.arange(-300, 301, dtype=np.int64)
    assert np.array_equal(fhe.round_bit_pattern(xs, r), round_shift(xs, r) << r)


@pytest.mark.parametrize("width,r,table", [(7, 2, False), (7, 3, True), (9, 4, True)])
def test_clear_and_simulated_circuit_match_round_shift(width, r, table):
    circuit, domain = _circuit(width, r, table)
    want = round_shift(domain, r) if table else round_shift(domain, r) << r
    assert np.array_equal(circuit.graph(domain), want)
    circuit.enable_fhe_simulation()
    assert np.array_equal(circuit.simulate(domain), want)


def test_encrypted_rounding_matches_round_shift():
    circuit, domain = _circuit(5, 2, True)  # every 5-bit value, halves included (x = 2 mod 4)
    circuit.keygen()
    assert np.array_equal(circuit.encrypt_run_decrypt(domain), round_shift(domain, 2))
