"""MRT, the Model Representation Tool: turns a trained float model (ONNX) into an integer-only
CVM model. The float side lives here: `onnx_import` -> `graph` (the float IR) -> `passes`, with
`float_exec` as the reference float interpreter used for checking and calibration."""
