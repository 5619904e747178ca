"""matmul of two activations: int32 accumulation, proven by the op's bound (it hulls both inputs with
0, so every partial sum lies in [k*min product, k*max product], which the verifier fit in int32)."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def matmul_i32(a, b, out):
    """a: (P, M, K), b: (P, K, N), out: (P, M, N); any integer dtypes."""
    p_, m_, k_ = a.shape
    n_ = b.shape[2]
    acc = np.empty(n_, np.int32)
    for p in range(p_):
        for m in range(m_):
            for n in range(n_):
                acc[n] = 0
            for k in range(k_):
                x = np.int32(a[p, m, k])
                for n in range(n_):
                    acc[n] = np.int32(acc[n] + x * np.int32(b[p, k, n]))
            for n in range(n_):
                out[p, m, n] = acc[n]
