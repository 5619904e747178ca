"""Hard limits on untrusted models, checked before any allocation (docs/spec.md, "Limits")."""

from .arith import INT32_MAX, INT32_MIN

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_NODES = 4096
MAX_RANK = 6
MAX_DIM = 1 << 20
MAX_TENSOR_ELEMENTS = 1 << 24  # per sample, any tensor
MAX_CONSTANT_ELEMENTS = 1 << 26  # all constants together
MAX_ACTIVATION_BYTES = 1 << 28  # per sample, sum of all activation tensors
MAX_BATCH = 1 << 16
MAX_RUN_BYTES = 1 << 31  # batch x per-sample activation bytes, checked before a run allocates
MAX_NAME_LENGTH = 128
MAX_LUT_SIZE = 1 << 16
MAX_SHIFT = 62
MAX_BITS = 32  # every tensor must fit int32

# Attribute bounds (docs/spec.md, "Attribute bounds"): every value an implementation must hold while
# evaluating an accepted model then fits int64 (index arithmetic) or int32 (values).
MAX_GEOMETRY = MAX_DIM  # any stride, dilation, pad, pooling-kernel extent or slice step
MIN_CLIP, MAX_CLIP = INT32_MIN, INT32_MAX  # clip bounds lie in the int32 range
MAX_AXIS = MAX_RANK - 1  # an axis attribute that is not checked against a rank (requant per tensor)
