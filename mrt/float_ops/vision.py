"""Float ops of vision models that map to CVM opset-2 ops (resize, transposed conv)."""

# name: (run, shape rule, attribute names, (min inputs, max inputs))
VISION: dict = {}
