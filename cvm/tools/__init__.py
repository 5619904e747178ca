"""Benchmarks and tools, above the runtime (issue 29, item 5): nothing in cvm's core, cvm.interp or
cvm.chain imports them (the import-linter contract in pyproject.toml holds it).

    bench, bench_models, timing   `cvm bench`: CVM against onnxruntime, start-up, the int8 GEMM
    bench_adversarial             `cvm bench --adversarial`: gas per second of models cheap in gas
    adversarial, adversarial_memory   the catalogue of those models
    bench_verify                  `cvm bench-verify`: verification cost per MB
    fhe_bench                     what an encrypted inference costs (the fhe extra)
"""
