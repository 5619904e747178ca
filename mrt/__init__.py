"""MRT, the Model Representation Tool: turns a trained float model (ONNX) into an integer-only
CVM model. The float side lives here: `onnx_import` -> `graph` (the float IR) -> `passes`, with
`float_exec` as the reference float interpreter used for checking and calibration; then
`calibrate` -> `quantize` (one rule per op, MAC splits) -> a verified `cvm.Model`.

    model = mrt.convert("model.onnx", calibration_x, target="cvm")   # -> cvm.Model
"""


def convert(*args, **kwargs):
    """See mrt.pipeline.convert (imported lazily: `import mrt` stays light)."""
    from mrt.pipeline import convert as _convert
    return _convert(*args, **kwargs)
