"""An STFT-magnitude (optionally log) spectrogram front end as an ONNX graph of constant-kernel convolutions, the way
audio models export it (silero-vad's stft/Conv; torch.stft rewritten for export): the real and imaginary parts are
two Conv1d with the windowed cosine and sine kernels at stride hop, then Pow 2, Add, Sqrt, and for the log form
Add eps and Log. MRT fuses Pow/Add/Sqrt into `magnitude` (exact integer squares and isqrt) and the log into a
table (univariate fusion).

    spectrogram_model(n_fft=256, hop=128, length=4096, log=False) -> onnx.ModelProto   # x [N, length] -> [N, F, T]
    reference(x, n_fft, hop, log) -> the same with numpy's rfft
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from scipy.signal import get_window

LOG_EPS = 1e-3


def kernels(n_fft: int, window: str = "hann") -> tuple[np.ndarray, np.ndarray]:
    """The real and imaginary rfft kernels [n_fft // 2 + 1, 1, n_fft] with the (periodic) window folded in:
    sum_n x[n] w[n] cos(2 pi k n / n_fft) and -sum_n x[n] w[n] sin(2 pi k n / n_fft)."""
    w = get_window(window, n_fft)
    k = np.arange(n_fft // 2 + 1)[:, None]
    n = np.arange(n_fft)[None, :]
    angle = 2 * np.pi * k * n / n_fft
    return ((w * np.cos(angle))[:, None, :].astype(np.float32), (-w * np.sin(angle))[:, None, :].astype(np.float32))


def spectrogram_model(n_fft: int = 256, hop: int = 128, length: int = 4096, log: bool = False):
    re, im = kernels(n_fft)
    two = np.array(2.0, np.float32)
    nodes = [helper.make_node("Unsqueeze", ["x", "axis1"], ["x3"]),
             helper.make_node("Conv", ["x3", "w_re"], ["re"], strides=[hop]),
             helper.make_node("Conv", ["x3", "w_im"], ["im"], strides=[hop]),
             helper.make_node("Pow", ["re", "two"], ["re2"]), helper.make_node("Pow", ["im", "two"], ["im2"]),
             helper.make_node("Add", ["re2", "im2"], ["power"]),
             helper.make_node("Sqrt", ["power"], ["mag" if log else "y"])]
    inits = {"axis1": np.array([1], np.int64), "w_re": re, "w_im": im, "two": two}
    if log:
        nodes += [helper.make_node("Add", ["mag", "eps"], ["mag_eps"]), helper.make_node("Log", ["mag_eps"], ["y"])]
        inits["eps"] = np.array(LOG_EPS, np.float32)
    graph = helper.make_graph(nodes, "spectrogram", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", length])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reference(x: np.ndarray, n_fft: int = 256, hop: int = 128, log: bool = False) -> np.ndarray:
    """|rfft(window * frame)| of every full frame, [N, n_fft // 2 + 1, frames] (float64), log(. + eps) if log."""
    frames = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), n_fft, axis=1)[:, ::hop]
    mag = np.abs(np.fft.rfft(frames * get_window("hann", n_fft), axis=2)).transpose(0, 2, 1)
    return np.log(mag + LOG_EPS) if log else mag
