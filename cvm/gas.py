"""Every cost constant, named once. A node's cost is a formula of shapes alone (docs/spec.md, "Cost")."""

GAS_PER_NODE = 100  # fixed overhead of dispatching any node
GAS_PER_MAC = 1  # one multiply-accumulate in conv2d / dense / matmul
GAS_PER_ELEMENT = 1  # one output element written (every op)
GAS_PER_COMPARE = 1  # one comparison in max_pool2d / max
GAS_PER_REQUANT = 3  # multiply, rounding shift, clip
GAS_PER_LOOKUP = 2  # table lookup
GAS_PER_DIVISION = 8  # integer division
GAS_PER_IO_BYTE = 3  # a call pays per byte of input and output it moves (the identity precompile's word charge / 32 * 3)
CALL_BASE_GAS = 3000  # a call's fixed cost, once per call whatever the model: checking the inputs, taking
# buffers, copying the outputs take ~7 us on numba (docs/performance.md, "Adversarial models"), ~2,800 gas at
# the fixture models' median gas/s; Ethereum prices its precompiles' fixed cost the same way (ecrecover: 3000)
