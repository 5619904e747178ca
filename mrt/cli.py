"""`mrt` command line: convert and evaluate (a thin layer over mrt.convert / mrt.evaluate)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

import cvm
from cvm.clikit import HelpFormatter, OneLineParser, read_arrays, run_guarded
from cvm.model import BACKENDS
from cvm.report import table

# Evaluation runs the whole evaluation set; the FHE backend is far too slow for that.
EVAL_BACKENDS = sorted(set(BACKENDS) - {"fhe"})


def _pct(v):
    return "-" if v is None else f"{100 * v:.2f}%"


def _input_shape(text: str) -> tuple:
    """--input-shape [NAME=]3x224x224 -> (NAME or "x", (3, 224, 224))."""
    name, _, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not [NAME=]DxDxD (e.g. x=3x224x224)") from None
    return name or "x", shape


def check_writable(path: str) -> None:
    """Refuse an output that cannot be written before calibration (minutes on a large model), not after it."""
    from mrt.errors import BadInput
    p = Path(path)
    folder = p.parent
    if p.is_dir():
        raise BadInput(f"-o {path} is a directory: name the file to write (e.g. {p / 'model.cvm'})")
    if not folder.is_dir():
        raise BadInput(f"cannot write {path}: directory {folder} does not exist (create it first)")
    if not os.access(folder, os.W_OK):
        raise BadInput(f"cannot write {path}: directory {folder} is not writable")


def cmd_convert(args) -> int:
    from mrt.pipeline import convert, loadable, read_calibration
    from mrt.quantize.config import QuantConfig
    check_writable(args.output)
    calib = read_calibration(args.calib)  # a truncated file is bad input now, before the import
    options = dict(target=args.target, bits=args.bits, calibration_method=args.calibration, softmax=args.softmax,
                   input_shapes=dict(args.input_shape or []) or None, batch_size=args.calib_batch_size,
                   equalize=args.equalize, wide=args.wide or (), recurrent=not args.narrow_recurrent)
    if args.weight_bits is not None:
        options["weight_bits"] = args.weight_bits
    if args.lookup_range is not None:
        options["lookup_range"] = args.lookup_range
    if args.mixed_precision is not None:
        from mrt import mixed
        result = mixed.convert_mixed(args.model, calib, args.mixed_precision, **options)
        print(mixed.report(result))
        model = result.model
    else:
        model = convert(args.model, calib, dump=args.dump, **options)
    if args.opset is not None:
        from cvm.repricing import repriced
        model = loadable(repriced(model, args.opset))  # what is written loads back: verified as a node loads it
    model.save(args.output)
    q = model.meta.get("quantization", {})
    wide = f" ({len(q['wide_tensors'])} tensors at {QuantConfig.wide_bits})" if q.get("wide_tensors") else ""
    print(f"wrote {args.output}: hash {model.hash_hex}, {len(model.graph.nodes)} nodes, gas {model.gas}, "
          f"largest accumulator {model.analysis.max_accumulator_bits} bits, {q.get('bits')}-bit activations{wide}, "
          f"{q.get('weight_bits')}-bit weights")
    return 0


def cmd_stages(args) -> int:
    from mrt.pipeline import describe
    print(describe())
    return 0


def _eval_table(r, o: dict | None) -> str:
    """float, cvm and (o) onnxruntime int8 rows: top-1 figures for a classifier, mean absolute error against the
    labels for a regression (one output value per sample), the outputs' distance to float's for both."""
    ort_name = "onnxruntime int8 (QDQ u8s8 per-channel)"
    if r.regression:
        rows = [["float (onnx)", f"{r.float_mae:.6g}", "0"], ["cvm integer", f"{r.int_mae:.6g}", f"{r.rel_l2:.5f}"]]
        rows += [[ort_name, f"{o['mae']:.6g}", f"{o['rel_l2']:.5f}"]] if o else []
        return table(["model", "mean abs error to labels", "relative L2 to float"], rows, "lrr")
    rows = [["float (onnx)", _pct(r.float_accuracy), "100.00%", "1.0000", "0"],
            ["cvm integer", _pct(r.int_accuracy), _pct(r.agreement), f"{r.cosine:.4f}", f"{r.rel_l2:.5f}"]]
    rows += [[ort_name, _pct(o["int_accuracy"]), _pct(o["agreement"]), f"{o['cosine']:.4f}", f"{o['rel_l2']:.5f}"]] \
        if o else []
    return table(["model", "top-1 accuracy", "top-1 agreement with float", "cosine to float", "relative L2 to float"],
                 rows, "lrrrr")


def cmd_eval(args) -> int:
    from mrt.evaluate import evaluate, numeric_labels, ort_int8_accuracy
    from mrt.progress import ticker
    model = cvm.load(args.cvm)
    x, y = _eval_data(args.data, model)
    r = evaluate(args.model, model, x, y, backend=args.backend)
    o = None
    if args.compare_ort:
        if not args.calib:
            raise ValueError("--compare-ort needs --calib CALIB.npz")
        with ticker("eval: onnxruntime int8 (quantize_static, then a run)"):
            o = ort_int8_accuracy(args.model, _eval_data(args.calib, model)[0], x, y)
    print(f"{r.n} samples")
    if y is not None and numeric_labels(y) is None:
        print(STRING_LABELS)
    print(_eval_table(r, o))
    if r.layer_errors:
        _report_layers(r.layer_errors, args.plot or Path(args.cvm).with_suffix(".layers.png"), Path(args.cvm).name)
    return 0


STRING_LABELS = ("the labels (y) are strings, not class numbers: top-1 accuracy does not apply (a text model's outputs "
                 "need its own decoder; the PP-OCR recogniser's decoded strings: scripts/models/ocr_table.py rec). "
                 "Below: the integer outputs against float's.")


def _eval_data(path, model: cvm.Model):
    """(x, y) from an .npz: x the array `x` (a float one-input model), or {input name: array} when it
    holds arrays named after the model's inputs (token ids and masks stay integers); y if present."""
    from mrt.errors import BadInput
    d = read_arrays(path, BadInput)
    if not isinstance(d, dict):
        raise BadInput(f"{path} is an .npy: evaluation data is an .npz holding x (and y, the labels)")
    names = [s.name for s in model.inputs]
    y = d.get("y")
    if all(n in d for n in names):
        return {n: d[n] if d[n].dtype.kind in "iu" else d[n].astype(np.float32) for n in names}, y
    if "x" not in d:
        raise BadInput(f"{path} must hold 'x' or arrays named {names}; it has {sorted(d)}")
    return d["x"].astype(np.float32), y


def _report_layers(layers, plot_path, title: str) -> None:
    from mrt.layer_report import WORST_NAMED, plot, worst
    print(f"per layer: {len(layers)} layers vs float (SQNR: higher is better)")
    print(table(["worst layers", "SQNR (dB)", "relative L2"],
                [[e.name, f"{e.sqnr_db:.1f}", f"{e.rel_l2:.4f}"] for e in worst(layers, WORST_NAMED)], "lrr"))
    print(f"wrote {plot(layers, plot_path, title)}")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="mrt", description="Convert float ONNX models into integer CVM models")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("convert", help="ONNX + calibration data -> .cvm", formatter_class=HelpFormatter)
    s.add_argument("model", help="the float model, an .onnx file (opsets 7-25)")
    s.add_argument("--calib", required=True, help="CALIB.npz holding x, or arrays named after the inputs (or "
                   "calib_NAME), real samples with the batch axis first; an .npy is x")
    s.add_argument("-o", "--output", required=True, help="the .cvm file to write (its folder must exist)")
    s.add_argument("--target", choices=["cvm", "fhe"], default="cvm",
                   help="cvm: int32 accumulators, the VM's backends; fhe: 16-bit accumulators and small lookup "
                        "inputs for the concrete-python backend (docs/fhe.md)")
    s.add_argument("--bits", type=int, default=None,
                   help="activation bits (cvm default: 8, or 12 with 10-bit weights where a small model "
                        "measurably needs them, mrt/width_choice.py; fhe: 6)")
    s.add_argument("--calibration", choices=["absmax", "percentile", "mse"], default="mse",
                   help="how each tensor's clipping threshold is chosen from the calibration data: its largest "
                        "value, its 99.99th percentile, or the threshold of least squared quantization error")
    s.add_argument("--softmax", choices=["client", "integer"], default="client",
                   help="a final softmax (or sigmoid): left to the client or computed in integers")
    s.add_argument("--mixed-precision", type=float, metavar="BUDGET",
                   help="widen the activations that add the most error while numba latency stays within "
                        "(1 + BUDGET) x the 8-bit model's (e.g. 0.25); prints what each step cost; default: off")
    s.add_argument("--input-shape", action="append", type=_input_shape, metavar="[NAME=]DxDxD",
                   help="per-sample shape of an input, fixing symbolic dims (default: the calibration data's)")
    s.add_argument("--calib-batch-size", type=int, default=64, metavar="N",
                   help="calibration samples run at once: memory holds one batch's live activations")
    s.add_argument("--equalize", action="store_true",
                   help="cross-layer equalization of conv/dense pairs joined by a ReLU (docs/fidelity.md)")
    s.add_argument("--wide", metavar="PARTS",
                   help="12-bit activations for a transformer encoder's sensitive tensors: 'encoder' (all of them: "
                        "what all-MiniLM-L6-v2 needs for cosine >= 0.99, docs/models.md) or a comma list of "
                        "activations, layer_norm, residual, dense (mrt/text_precision.py); default: none")
    s.add_argument("--narrow-recurrent", action="store_true",
                   help="quantize recurrent cells (LSTM/GRU/RNN) at --bits like the rest (default: their states 12-bit, "
                        "their dense weights 10-bit: mrt/recurrent_precision.py, docs/fidelity.md)")
    s.add_argument("--weight-bits", type=int, metavar="N", help="weight bits (default 8; 10 with --wide encoder "
                   "is docs/models.md's best MiniLM row)")
    s.add_argument("--lookup-range", choices=["proven", "calibrated", "channels"],
                   help="fhe: size the rounding before each table lookup from the verifier's proven range (the "
                        "default), the calibrated one or per channel, clamping beyond it exactly (docs/fhe.md)")
    s.add_argument("--dump", metavar="DIR", help="write what each stage produced to DIR/NN_stage.txt (`mrt stages`); "
                   "default: nothing")
    s.add_argument("--opset", type=int, choices=[3, 4], default=None,
                   help="write the model in opset 3 (gas schedule v2, by time) or 4 (v3: v2 plus memory-bound work, "
                        "edges, loading; spec sections 16-17); default: the lowest opset of its ops (schedule v1)")
    s.set_defaults(func=cmd_convert)
    s = sub.add_parser("stages", help="list the conversion's stages in order", formatter_class=HelpFormatter)
    s.set_defaults(func=cmd_stages)
    s = sub.add_parser("eval", help="float vs integer accuracy and agreement", formatter_class=HelpFormatter)
    s.add_argument("model", help="the float model (.onnx)")
    s.add_argument("cvm", help="the converted model (.cvm)")
    s.add_argument("--data", required=True, help="TEST.npz holding x (or arrays named after the inputs) and "
                   "optionally y, the labels (class numbers; strings give no top-1 accuracy)")
    s.add_argument("--calib", help="calibration data, for --compare-ort (default: none)")
    s.add_argument("--compare-ort", action="store_true", help="also onnxruntime quantize_static int8")
    s.add_argument("--backend", default="numba", choices=EVAL_BACKENDS, help="the CVM backend that runs the "
                   "integer model")
    s.add_argument("--plot", help="per-layer error plot (PNG; default: next to the .cvm, NAME.layers.png)")
    s.set_defaults(func=cmd_eval)
    return p


def main(argv=None) -> int:
    """Every failure is one line on stderr: exit 2 for bad input, 3 for a bug (cvm/clikit.py)."""
    args = build_parser().parse_args(argv)
    from mrt.errors import MrtError
    return run_guarded(lambda: args.func(args), (MrtError, cvm.CVMError, ValueError), "mrt")


if __name__ == "__main__":
    sys.exit(main())
