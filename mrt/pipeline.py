"""convert(onnx, calibration data, target) -> cvm.Model: CONVERSION, the named list of stages, in order
(`describe()` prints it, `mrt stages` too):

    import -> passes -> output_transform -> calibrate -> quantize (+ MAC splits) -> verify
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
from eth_hash.auto import keccak

import cvm
from cvm.clikit import read_arrays
from cvm.arith import bits_max
from cvm.limits import MAX_BITS
from cvm.model import numeric
from mrt import bias_choice, width_choice
from mrt.progress import ticker
from mrt.calibrate import calibrate, data_hash
from mrt.containment import contained
from mrt.errors import BadInput
from mrt.limits import check_import
from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, dumper, run_pipeline, strip_output_transform
from mrt.passes.equalize import equalize
from mrt.quantize import QuantizeError, config_for, emit, verify

CALIB_PREFIX = "calib_"  # a file of several splits (scripts/models/minilm_export.py: calib_*, held_*)


def read_calibration(path) -> dict[str, np.ndarray]:
    """The arrays of a calibration file: an .npy is `x`; an .npz holding CALIB_PREFIX arrays gives those,
    the prefix dropped, so the MiniLM export's text_L64.npz (calib_input_ids, ...) is used as it is."""
    arrays = read_arrays(path, BadInput)
    if isinstance(arrays, np.ndarray):
        return {"x": arrays}
    return {k[len(CALIB_PREFIX):]: v for k, v in arrays.items() if k.startswith(CALIB_PREFIX)} or arrays


def load_data(data, graph) -> dict[str, np.ndarray]:
    """Calibration data as {input name: float32 array}: an array, a dict, or an .npz path
    (holding `x`, or arrays named after the graph inputs, or those names prefixed with CALIB_PREFIX)."""
    if isinstance(data, (str, os.PathLike)):
        data = read_calibration(data)
    if isinstance(data, np.ndarray):
        data = {graph.inputs[0].name: data}
    names = [s.name for s in graph.inputs]
    if all(n in data for n in names):
        arrays = {n: data[n] for n in names}
    elif len(names) == 1 and "x" in data:
        arrays = {names[0]: data["x"]}
    else:
        raise BadInput(f"calibration data must hold 'x' or arrays named {names} (or {CALIB_PREFIX}NAME); "
                       f"it has {sorted(data)}")
    discrete = discrete_inputs(graph)
    return {n: _calibration_array(n, a, continuous=n not in discrete) for n, a in arrays.items()}


# how an op reads an input that is an index or a mask, never a continuous value: {op: input positions}
INDEX_OR_MASK = {"embed": (0,), "masked_softmax": (1,)}


def discrete_inputs(graph) -> set[str]:
    """The graph inputs that are integers (token ids, masks) or that every reader takes as an index or a mask
    (INDEX_OR_MASK): a client may send the same value for every sample (an all-ones attention mask at a fixed
    length, all-zero segment ids), so their calibration data may be constant."""
    def index_or_mask(name):
        readers = graph.consumers(name)
        return bool(readers) and all(
            all(n.inputs[k] != name for k in range(len(n.inputs)) if k not in INDEX_OR_MASK.get(n.op, ()))
            for n in readers)
    return {s.name for s in graph.inputs if s.dtype != "float32" or index_or_mask(s.name)}


def _calibration_array(name: str, a, continuous: bool = True) -> np.ndarray:
    """Calibration sets the ranges every scale comes from: NaN or infinity would make them NaN, and
    one sample repeated (e.g. all zeros) gives ranges that fit no real input. An index or mask input
    (`continuous` False) has no range to calibrate: it may be constant."""
    try:
        a = numeric(np.asarray(a))  # float8, int4 ...: the float32 or int8 values they hold exactly
    except ValueError as e:
        raise BadInput(f"calibration data {name!r} is not a rectangular array ({e})") from None
    if a.dtype.kind not in "iufb" or a.ndim == 0 or len(a) == 0:
        raise BadInput(f"calibration data {name!r} must be a non-empty numeric array with a batch axis, "
                       f"got dtype {a.dtype} shape {a.shape}")
    top = bits_max(MAX_BITS)
    if a.dtype.kind in "iu" and not continuous and a.size and (int(a.min()) < -top or int(a.max()) > top):
        raise BadInput(f"calibration data {name!r} holds integers in [{int(a.min())}, {int(a.max())}], beyond the "
                       f"[{-top}, {top}] of a CVM integer input ({MAX_BITS} bits)")
    a = a.astype(np.float32, copy=False)
    bad = int(np.count_nonzero(~np.isfinite(a)))
    if bad:
        raise BadInput(f"calibration data {name!r} holds {bad} NaN or infinite values")
    if not continuous:
        return a
    if not a.any():
        raise BadInput(f"calibration data {name!r} is all zeros: calibration needs real samples")
    if len(a) > 1 and (a == a[:1]).all():
        raise BadInput(f"calibration data {name!r} is {len(a)} copies of one sample: calibration needs real samples")
    return a


@dataclass(frozen=True)
class Options:
    """What the caller chose (convert's keyword arguments)."""
    target: str = "cvm"
    bits: int | None = None
    calibration_method: str = "mse"
    softmax: str = "client"
    batch_size: int = 64
    progress: bool = True
    per_feature_inputs: bool = True
    input_shapes: dict | None = None  # {input name (or "x"): per-sample shape} fixing symbolic dims
    equalize: bool = False  # cross-layer equalization of conv/dense pairs (mrt.passes.equalize)
    wide: str | tuple = ()  # encoder tensors given wide activations (mrt.text_precision: "encoder" or parts)
    recurrent: bool = True  # cvm target: recurrent cells keep wide activations and weights (mrt.recurrent_precision)
    overrides: dict = field(default_factory=dict)


@dataclass
class Conversion:
    """What the stages hand on: each stage reads what earlier ones filled in and adds its part."""
    source: object  # the ONNX model: a path, bytes or an onnx.ModelProto
    calibration: object
    options: Options
    source_bytes: bytes = b""
    graph: object = None  # the float IR (mrt.graph.Graph)
    dropped: list = field(default_factory=list)  # output transforms left to the client
    data: dict = field(default_factory=dict)  # calibration arrays by input name
    thresholds: dict = field(default_factory=dict)
    means: dict = field(default_factory=dict)  # per-sample means of the MAC inputs (bias correction)
    emitted: tuple | None = None  # (integer cvm.Graph, metadata), before whole-graph verification
    width: object = None  # mrt.width_choice.WidthChoice, where the activation width was measured
    model: cvm.Model | None = None


def _import(c: Conversion):
    src = c.source
    c.source_bytes = (Path(src).read_bytes() if isinstance(src, (str, os.PathLike))
                      else src if isinstance(src, bytes) else src.SerializeToString())
    given = c.options.input_shapes
    shapes = given or calibration_shapes(c.calibration)
    c.graph = import_onnx(_onnx_from_bytes(src) if isinstance(src, bytes) else src, shapes,
                          shapes_from_data=not given)
    check_import(c.graph)  # a model too large for the format fails here, not after calibration
    return c.graph


def _default_wide(graph, o: Options) -> dict:
    """The cvm target's wide tensors unless the caller chose them: recurrent cells (mrt.recurrent_precision,
    unless recurrent=False) and a spectrogram front end (mrt.spectral_precision)."""
    from mrt import recurrent_precision, spectral_precision
    if "wide_tensors" in o.overrides:
        return {}
    out = recurrent_precision.overrides(graph, o.overrides) if o.recurrent else {}
    spectral = spectral_precision.wide_tensors(graph)
    if spectral:
        out = {**out, "wide_tensors": tuple(sorted(set(out.get("wide_tensors", ())) | set(spectral)))}
    return out


def calibration_shapes(data) -> dict:
    """{name: per-sample shape} of calibration data (array, dict or .npz path): the shape symbolic
    input dims are fixed to when the caller gives none. Unreadable data gives {} here and its own
    error at the calibrate stage."""
    try:
        if isinstance(data, (str, os.PathLike)):
            data = read_calibration(data)
        if isinstance(data, np.ndarray):
            return {"x": data.shape[1:]}
        return {k: np.shape(v)[1:] for k, v in dict(data).items()}
    except (OSError, ValueError, TypeError):
        return {}


def _passes(c: Conversion, dump=None):
    passes = DEFAULT_PIPELINE + ((("equalize", equalize),) if c.options.equalize else ())
    c.graph = run_pipeline(c.graph, passes, dump=dump)
    return c.graph


def _output_transform(c: Conversion):
    if c.options.softmax == "client":
        c.graph, c.dropped = strip_output_transform(c.graph)
    return c.graph


def _calibrate(c: Conversion):
    if c.options.wide:  # named parts -> the tensors of this graph, now that the passes have run
        from mrt.text_precision import encoder_wide_tensors, parse_parts
        tensors = encoder_wide_tensors(c.graph, parse_parts(c.options.wide))
        c.options = replace(c.options, overrides={**c.options.overrides, "wide_tensors": tensors})
    elif c.options.target == "cvm":
        c.options = replace(c.options, overrides={**c.options.overrides, **_default_wide(c.graph, c.options)})
    o = c.options
    c.data = load_data(c.calibration, c.graph)
    cfg = _config(o)
    c.thresholds = _calibrated(c, cfg.bits, cfg.wide_tensors, progress=o.progress, means=c.means)
    return "\n".join(f"{name}: {float(t):.6g}" for name, t in c.thresholds.items())


def wide_thresholds(c: Conversion, tensors) -> dict[str, float]:
    """The thresholds of `tensors` calibrated as wide (QuantConfig.wide_bits) activations, for tools that widen
    tensors after calibration (mrt.mixed's trials): a threshold chosen for 8 bits clips what 12 bits would keep."""
    thr = _calibrated(c, _config(c.options).bits, tuple(tensors))
    return {t: thr[t] for t in tensors if t in thr}


def _calibrated(c: Conversion, bits: int, wide: tuple = (), progress: bool = False, means=None) -> dict[str, float]:
    """A threshold per tensor at `bits` (`wide` ones at QuantConfig.wide_bits), with the conversion's method and
    settings: the calibrate stage's, and the later calibrations of mixed precision and the measured width."""
    o, cfg = c.options, _config(c.options)
    return calibrate(c.graph, c.data, method=o.calibration_method, batch_size=o.batch_size, bits=bits,
                     progress=progress, means=means, wide=wide, wide_bits=cfg.wide_bits,
                     unsigned=cfg.unsigned_activations, output_bits=cfg.output_bits)


def _quantize(c: Conversion):
    o, cfg = c.options, _config(c.options)
    if c.graph.recurrent or not width_choice.applies(o.target, o.bits, o.overrides):  # recurrences: their own rule
        c.emitted, _ = _emit(c, cfg, c.thresholds)
        return c.emitted[0]
    ref = bias_choice.reference(c.graph, c.data)
    c.emitted, error8 = _emit(c, cfg, c.thresholds, ref)
    wide = {}

    def error12() -> float:
        with ticker("measure width: 12-bit activations, 10-bit weights", o.progress):
            wide["thresholds"] = _calibrated(c, width_choice.WIDE_BITS, progress=o.progress)
            wide["emitted"], err = _emit(c, width_choice.wide_config(cfg), wide["thresholds"], ref)
        return err

    c.width = width_choice.choose(width_choice.macs(c.graph), error8, error12)
    if c.width.chosen != 8:
        c.emitted, c.thresholds = wide["emitted"], wide["thresholds"]
        c.options = replace(o, bits=width_choice.WIDE_BITS,
                            overrides={**o.overrides, "weight_bits": width_choice.WIDE_WEIGHT_BITS})
    return f"# {c.width.describe()}\n{c.emitted[0]}"


SIGNAL_READERS = {"reshape", "flatten", "transpose", "pad", "slice", "concat", "conv", "max_pool", "sum_pool"}


def _tabular(graph, name: str) -> bool:
    """A 1-D input is tabular features (one scale each) unless it is read as a signal: reshaped, sliced or
    convolved (a raw waveform, whose positions share one range; per-position scales clipped wav2vec2's)."""
    return not any(n.op in SIGNAL_READERS for n in graph.consumers(name))


def _emit(c: Conversion, cfg, thresholds: dict, ref=None) -> tuple[tuple, float | None]:
    """(integer graph, metadata) at cfg, with bias correction chosen by measurement on the cvm target
    unless the caller set it (mrt.bias_choice), and its output error when `ref` asks for it."""
    features = {s.name: np.abs(c.data[s.name]).max(axis=0) for s in c.graph.inputs
                if len(s.shape) == 1 and c.options.per_feature_inputs and _tabular(c.graph, s.name)}

    def emit_with(bc: bool):
        return emit(c.graph, thresholds, replace(cfg, bias_correction=bc), _meta(c), feature_thresholds=features,
                    means=c.means)

    if cfg.target == "cvm" and "bias_correction" not in c.options.overrides:
        on, emitted, errors = bias_choice.choose(c.graph, c.data, emit_with, ref)
        return emitted, errors[on]
    emitted = emit(c.graph, thresholds, cfg, _meta(c), feature_thresholds=features, means=c.means)
    return emitted, (None if ref is None else bias_choice.output_error(cvm.Model(*emitted), *ref))


def _verify(c: Conversion):
    c.model = loadable(verify(c.emitted, _config(c.options)))
    m = c.model
    return (f"hash {m.hash_hex}\ngas {m.gas} per sample\nnodes {len(m.graph.nodes)}\n"
            f"largest accumulator {m.analysis.max_accumulator_bits} bits")


def loadable(model: cvm.Model) -> cvm.Model:
    """The model, once the bytes `save` writes load back (cvm.loads: canonical encoding, the whole verifier) as
    this very model: a converted model is never one that a node would refuse to load."""
    if cvm.loads(model.to_bytes()).hash != model.hash:
        raise QuantizeError("the written model would load with another hash")
    return model


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable  # (Conversion) -> what the dump hook shows after it
    doc: str


CONVERSION = (
    Stage("import", _import, "ONNX -> float IR, shapes per sample (mrt.onnx_import)"),
    Stage("passes", _passes, "float rewrites: DEFAULT_PIPELINE (mrt.passes)"),
    Stage("output_transform", _output_transform, "drop an output softmax/sigmoid when softmax='client'"),
    Stage("calibrate", _calibrate, "float run over the calibration data -> a threshold per tensor"),
    Stage("quantize", _quantize, "one rule per float op -> integer nodes, MAC splits to the accumulator budget"),
    Stage("verify", _verify, "the whole graph verified; accumulators proven within the target's budget"),
)


def describe() -> str:
    """The conversion's stages, in order, one line each."""
    return "\n".join(f"{i}. {s.name:<17} {s.doc}" for i, s in enumerate(CONVERSION, 1))


def _config(o: Options):
    return config_for(o.target, bits=o.bits, softmax=o.softmax, **o.overrides)


def _meta(c: Conversion) -> dict:
    src, o = c.source, c.options
    meta = {
        "calibration_hash": data_hash(c.data),
        "calibration": {"method": o.calibration_method, "samples": int(len(next(iter(c.data.values()))))},
        "provenance": {"tool": "mrt", "source": str(src) if isinstance(src, (str, os.PathLike)) else "<onnx>",
                       "onnx_keccak256": "0x" + keccak(c.source_bytes).hex(), "target": o.target},
    }
    if c.dropped:
        meta["output_transform"] = c.dropped[0] if len(set(c.dropped)) == 1 else c.dropped
    return meta


def convert(model, calibration, *, target: str = "cvm", bits: int | None = None,
            calibration_method: str = "mse", softmax: str = "client", batch_size: int = 64,
            progress: bool = True, per_feature_inputs: bool = True, input_shapes: dict | None = None,
            dump=None, equalize: bool = False, wide: str | tuple = (), recurrent: bool = True,
            **overrides) -> cvm.Model:
    """Convert an ONNX model (path, bytes or onnx.ModelProto) into a verified integer cvm.Model by
    running CONVERSION's stages in order. dump (as mrt.passes.run_pipeline's): None, True to print
    what each stage produced, a directory for one NN_stage.txt each (the passes' own stages go in
    its passes/ folder), or a callable(number, name, printable)."""
    c = Conversion(model, calibration, Options(target, bits, calibration_method, softmax, batch_size, progress,
                                               per_feature_inputs, input_shapes, equalize, wide, recurrent,
                                               overrides))
    show = dumper(dump)
    for number, stage in enumerate(CONVERSION, 1):
        if stage.run is _passes and isinstance(dump, (str, os.PathLike)):
            out = _run_stage(c, stage, lambda c: _passes(c, dump=Path(dump) / "passes"))
        else:
            out = _run_stage(c, stage)
        show(number, stage.name, out)
    return c.model


def _run_stage(c: Conversion, stage: Stage, run: Callable | None = None):
    """One stage, with its name and elapsed time on the terminal while it runs (mrt.progress), failing only
    with UnsupportedOp, BadInput or QuantizeError on one line naming the node (mrt.containment)."""
    with ticker(f"convert: {stage.name}", c.options.progress), contained(stage.name):
        return (run or stage.run)(c)


FRONT = ("import", "passes", "output_transform", "calibrate")  # the stages that do not depend on the quantization config


def prepare(model, calibration, **options) -> Conversion:
    """The stages before quantization (FRONT), run once: tools that try several quantization
    configs on one model (mrt.mixed) quantize the result many times with `finish`."""
    overrides = {k: options.pop(k) for k in list(options) if k not in Options.__dataclass_fields__}
    c = Conversion(model, calibration, Options(**options, overrides=overrides))
    for stage in CONVERSION:
        if stage.name in FRONT:
            _run_stage(c, stage)
    return c


def finish(c: Conversion, **overrides) -> cvm.Model:
    """The quantize and verify stages on a prepared conversion, with config `overrides` added."""
    trial = replace(c, options=replace(c.options, overrides={**c.options.overrides, **overrides}))
    for stage in CONVERSION:
        if stage.name not in FRONT:
            _run_stage(trial, stage)
    return trial.model


def _onnx_from_bytes(data: bytes):
    import onnx
    return onnx.load_from_string(data)
