"""Where silero-vad's quantization error enters (docs/fidelity.md, mrt/spectral_precision.py): decisions and
probabilities of the integer model against float on synthetic streams when, beside its recurrent cells (always
wide), one part more is at 12 bits: none, the STFT front end (the waveform up to the magnitude and its hand-over
to the first conv: what the converter now does by default), the encoder convs, the decoder, everything.

    .venv/bin/python scripts/models/vad_fetch.py
    .venv/bin/python scripts/fidelity/vad_subsets.py [--streams 8]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "models"))

import onnx  # noqa: E402

import vad_data as V  # noqa: E402
import vad_fetch  # noqa: E402
import vad_measure as VM  # noqa: E402
from mrt import pipeline, recurrent_precision, spectral_precision  # noqa: E402
from mrt.onnx_import.bind import bind_inputs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=8)
    n = ap.parse_args().streams
    path = vad_fetch.fetch()
    float_s = VM.session(path)
    x, labels = V.streams(n, 10.0, VM.TEST_SEED)
    want, _ = VM.ort_stream(float_s, x)
    model = bind_inputs(onnx.load(str(path)), {"sr": 16000})
    graph = pipeline.prepare(model, VM.calibration(float_s), progress=False, per_feature_inputs=False).graph
    cells = recurrent_precision.wide_tensors(graph)
    c = pipeline.prepare(model, VM.calibration(float_s), progress=False, per_feature_inputs=False,
                         wide_tensors=cells, wide_weight_bits=recurrent_precision.WEIGHT_BITS)
    acts = [s.name for s in c.graph.inputs] + [nd.outputs[0] for nd in c.graph.nodes if nd.outputs[0] in c.thresholds]
    parts = {"cells only": (), "+ STFT front end": spectral_precision.wide_tensors(c.graph),
             "+ encoder": [t for t in acts if "/encoder/" in t], "+ decoder": [t for t in acts if "/decoder/" in t],
             "everything": acts}
    wide_thr = pipeline.wide_thresholds(c, acts)
    print(f"float: label accuracy {100 * ((want > 0.5) == labels).mean():.2f}%")
    for name, extra in parts.items():
        tensors = tuple(sorted(set(cells) | set(extra)))
        m = pipeline.finish(replace(c, thresholds={**c.thresholds, **{t: wide_thr[t] for t in tensors if t in wide_thr}}),
                            wide_tensors=tensors)
        f = VM.fidelity(VM.mrt_stream(m, x), want, labels)
        print(f"{name:18s} {len(tensors):4d} wide: decisions = float {100 * f['agree']:.2f}%, mean |p - float| "
              f"{f['mean_abs']:.3f}, label accuracy {100 * f['label_acc']:.2f}%", flush=True)


if __name__ == "__main__":
    main()
