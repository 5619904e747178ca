"""Every error the runtime raises: one base class, so callers can catch untrusted-input failures."""


class CVMError(Exception):
    """Base of every error CVM raises on bad input."""


class FormatError(CVMError):
    """The model file is not a well-formed canonical .cvm file."""


class VerifyError(CVMError):
    """The model is well-formed but breaks a rule of the spec (shapes, bits, limits, ops)."""

    def __init__(self, rule: str, message: str, node: str | None = None):
        self.rule = rule
        self.node = node
        where = f"node {node!r}: " if node else ""
        super().__init__(f"{where}{message} [rule: {rule}]")


class LimitError(VerifyError):
    """A dimension, element count, node count or memory figure exceeds its hard limit."""


class InputError(CVMError):
    """Run-time inputs do not match the model's input specification."""


class GasLimitExceeded(CVMError):
    """The static cost of a run exceeds the caller's gas limit (checked before running)."""

    def __init__(self, needed: int, limit: int):
        self.needed = needed
        self.limit = limit
        super().__init__(f"run needs {needed} gas but the gas limit is {limit}")
