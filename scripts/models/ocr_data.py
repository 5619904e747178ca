"""Real text images for the three PP-OCR models of rapidocr-onnxruntime 1.4.4, and the
preprocessing RapidOCR applies before each (read from the wheel's own source:
ch_ppocr_det/utils.py DetPreProcess, ch_ppocr_cls/text_cls.py and ch_ppocr_rec/text_recognize.py
resize_norm_img, config.yaml).

Text: lines of the docstrings of stdlib modules (offline, fixed order), rendered with PIL in the six
fonts of the Debian package fonts-dejavu-core (scripts/setup.sh installs it), loaded by explicit path
and checked against pinned hashes, never whatever else the machine has under /usr/share/fonts: the
same data, and so the same accuracies, on every machine. Dark text on a light background, mildly
rotated, with Gaussian noise. Images are uint8 HxWx3 in BGR order, as
RapidOCR's LoadImage hands them to the models. Everything is a function of its seed.

    .venv/bin/python scripts/models/ocr_data.py [--out .cache/models/ocr]   # writes the .npz sets
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import importlib
import inspect
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from mrt.progress import ticker

ROOT = Path(__file__).resolve().parents[2]
DOC_MODULES = ("string", "textwrap", "json", "collections", "functools", "itertools", "pathlib", "random",
               "re", "os", "shutil", "argparse", "logging", "datetime", "decimal", "fractions", "heapq", "bisect")
FONT_PACKAGE = "fonts-dejavu-core"  # DejaVu 2.37, Debian 12's 2.37-6
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONTS = {  # file -> sha256: other bytes would render other test data
    "DejaVuSans.ttf": "abdc775b21b1bc470d50c97e790d276f2054b7504e56e5bd3e64f48d68582322",
    "DejaVuSans-Bold.ttf": "0d977336a6d5fba34eab8e3199eb218327161b5143749f802982c2bc34df0c96",
    "DejaVuSansMono.ttf": "0f5db4f1749979d961019838b160bec74abdf7f9eca69553fe1aa856bbff49a4",
    "DejaVuSansMono-Bold.ttf": "2964f6dac8e6e9d71613928340f17bf868e9ea51692cca333c79e74962f02233",
    "DejaVuSerif.ttf": "13e61509f5c81d7c3132810f4f903e3523df89c802bf6e0674621e8f659cdfe1",
    "DejaVuSerif-Bold.ttf": "e2fd85eba2de65ac270d1cdb1685e252eb827f600850cf62af2d20c41b22e945",
}
LINE_CHARS = (8, 40)  # a rendered line holds this many characters
WORD_CHARS = 18  # a recogniser sample at most this many (48x320 holds about that many at RapidOCR's scale)

# RapidOCR config.yaml
DET_LIMIT_SIDE_LEN, DET_LIMIT_TYPE = 736, "min"
DET_MEAN, DET_STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
DET_THRESH = 0.3
CLS_SHAPE = (3, 48, 192)
CLS_LABELS = ("0", "180")
REC_SHAPE = (3, 48, 320)


# -- text -------------------------------------------------------------------------------------------

def doc_lines() -> list[str]:
    """Every distinct docstring line of DOC_MODULES and their public members, in a fixed order."""
    seen, lines = set(), []
    for name in DOC_MODULES:
        module = importlib.import_module(name)
        docs = [inspect.getdoc(module)] + [inspect.getdoc(getattr(module, m)) for m in sorted(dir(module))
                                           if not m.startswith("_")]
        for doc in docs:
            for line in (doc or "").splitlines():
                line = " ".join(line.split())
                ok = LINE_CHARS[0] <= len(line) <= LINE_CHARS[1] and line.isascii() and line.isprintable()
                if ok and sum(c.isalpha() for c in line) >= len(line) // 2 and line not in seen:
                    seen.add(line)
                    lines.append(line)
    return lines


def text_lines(n: int, seed: int) -> list[str]:
    lines = doc_lines()
    rng = np.random.default_rng(seed)
    return [lines[i] for i in rng.choice(len(lines), size=n, replace=n > len(lines))]


def short_text(line: str, rng: np.random.Generator) -> str:
    """A run of whole words of at most WORD_CHARS characters (the recogniser's samples)."""
    words = line.split()
    start = int(rng.integers(len(words)))
    out = words[start][:WORD_CHARS]
    for w in words[start + 1:]:
        if len(out) + 1 + len(w) > WORD_CHARS:
            break
        out += " " + w
    return out


# -- rendering --------------------------------------------------------------------------------------

@functools.cache
def font_files() -> tuple[Path, ...]:
    """FONTS from FONT_PACKAGE, in FONTS' order, each checked once against its pinned hash."""
    files = tuple(FONT_DIR / name for name in FONTS)
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the OCR test lines are drawn in {FONT_PACKAGE} "
                                    f"(scripts/setup.sh installs it: apt-get install {FONT_PACKAGE})")
        if hashlib.sha256(path.read_bytes()).hexdigest() != FONTS[path.name]:
            raise ValueError(f"{path} is not the pinned DejaVu 2.37 file ({FONT_PACKAGE} 2.37-6): "
                             "it would render other test data than the accuracy margins were measured on")
    return files


def font(index: int, size: int):
    files = font_files()
    return ImageFont.truetype(str(files[index % len(files)]), size)


def _colors(rng: np.random.Generator):
    paper = tuple(int(v) for v in rng.integers(190, 256, 3))
    ink = tuple(int(v) for v in rng.integers(0, 90, 3))
    return paper, ink


def _finish(img: Image.Image, rng: np.random.Generator, paper, max_angle: float) -> np.ndarray:
    """Mild rotation, Gaussian noise, RGB -> BGR."""
    angle = float(rng.uniform(-max_angle, max_angle))
    img = img.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=paper)
    a = np.asarray(img, dtype=np.float32)
    a = a + rng.normal(0.0, float(rng.uniform(2.0, 8.0)), a.shape)
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)[:, :, ::-1].copy()


def render_line(text: str, rng: np.random.Generator, sizes=(16, 40), max_angle: float = 2.0) -> np.ndarray:
    """One text line, cropped with a small margin as a detector box would be (uint8 HxWx3, BGR)."""
    f = font(int(rng.integers(1 << 16)), int(rng.integers(*sizes)))
    left, top, right, bottom = f.getbbox(text)
    mx, my = int(rng.integers(2, 10)), int(rng.integers(2, 8))
    paper, ink = _colors(rng)
    img = Image.new("RGB", (right - left + 2 * mx, bottom - top + 2 * my), paper)
    ImageDraw.Draw(img).text((mx - left, my - top), text, font=f, fill=ink)
    return _finish(img, rng, paper, max_angle)


def render_page(lines: list[str], rng: np.random.Generator, height: int, width: int,
                max_angle: float = 1.5) -> np.ndarray:
    """A page of text lines at random sizes and indents (uint8 HxWx3, BGR, height x width)."""
    paper, ink = _colors(rng)
    img = Image.new("RGB", (width, height), paper)
    draw, y = ImageDraw.Draw(img), int(rng.integers(4, 30))
    for text in lines:
        f = font(int(rng.integers(1 << 16)), int(rng.integers(14, 44)))
        left, top, right, bottom = f.getbbox(text)
        if y + bottom - top > height - 4:
            break
        if right - left > width - 8:
            continue
        x = int(rng.integers(4, width - (right - left) - 3))
        draw.text((x - left, y - top), text, font=f, fill=ink)
        y += bottom - top + int(rng.integers(6, 40))
    out = _finish(img, rng, paper, max_angle)
    return resize_linear(out, width, height)


# -- RapidOCR's preprocessing ----------------------------------------------------------------------

def _linear_taps(src: int, dst: int):
    """cv2.INTER_LINEAR's map along one axis: half-pixel centres, clamped at the borders."""
    f = (np.arange(dst) + 0.5) * (src / dst) - 0.5
    i0 = np.floor(f).astype(np.int64)
    w = f - i0
    w[i0 < 0], i0[i0 < 0] = 0.0, 0
    last = i0 >= src - 1
    w[last], i0[last] = 0.0, src - 1
    return i0, np.minimum(i0 + 1, src - 1), w


def resize_linear(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """cv2.resize(img, (width, height)) (INTER_LINEAR, no antialiasing) on uint8 HxWxC, in float
    and rounded: within one grey level of cv2's 11-bit fixed point (opencv is not a dependency)."""
    h, w = img.shape[:2]
    if (h, w) == (height, width):
        return img.copy()
    y0, y1, wy = _linear_taps(h, height)
    x0, x1, wx = _linear_taps(w, width)
    a = img.astype(np.float64)
    rows = a[y0] * (1 - wy)[:, None, None] + a[y1] * wy[:, None, None]
    out = rows[:, x0] * (1 - wx)[None, :, None] + rows[:, x1] * wx[None, :, None]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def det_input(img: np.ndarray, limit_side_len: int = DET_LIMIT_SIDE_LEN, limit_type: str = DET_LIMIT_TYPE):
    """DetPreProcess: scale so the short side reaches limit_side_len (type 'min'; 'max': the long
    side at most it), both sides rounded to multiples of 32, (x/255 - mean)/std, CHW float32."""
    h, w = img.shape[:2]
    if limit_type == "max":
        ratio = limit_side_len / max(h, w) if max(h, w) > limit_side_len else 1.0
    else:
        ratio = limit_side_len / min(h, w) if min(h, w) < limit_side_len else 1.0
    rh, rw = int(round(int(h * ratio) / 32) * 32), int(round(int(w * ratio) / 32) * 32)
    x = resize_linear(img, rw, rh).astype(np.float32) * np.float32(1 / 255.0)
    x = (x - np.array(DET_MEAN)) / np.array(DET_STD)
    return x.transpose(2, 0, 1).astype(np.float32)


def _resize_norm_pad(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """resize_norm_img of the classifier and the recogniser: keep the aspect ratio at `height`
    (at most `width` wide), x/255 normalised to [-1, 1], zero-padded on the right."""
    h, w = img.shape[:2]
    rw = width if math.ceil(height * w / h) > width else int(math.ceil(height * w / h))
    x = resize_linear(img, rw, height).astype(np.float32).transpose(2, 0, 1) / 255
    x = (x - 0.5) / 0.5
    out = np.zeros((3, height, width), dtype=np.float32)
    out[:, :, :rw] = x
    return out


def cls_input(img: np.ndarray) -> np.ndarray:
    return _resize_norm_pad(img, CLS_SHAPE[1], CLS_SHAPE[2])


def rec_input(img: np.ndarray, max_wh_ratio: float = REC_SHAPE[2] / REC_SHAPE[1]) -> np.ndarray:
    """The recogniser's width is height x the batch's widest aspect ratio (at least 320/48)."""
    return _resize_norm_pad(img, REC_SHAPE[1], int(REC_SHAPE[1] * max(max_wh_ratio, REC_SHAPE[2] / REC_SHAPE[1])))


# -- data sets ------------------------------------------------------------------------------------

def cls_set(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n classifier inputs (N, 3, 48, 192) and labels (index into CLS_LABELS): every other line
    turned by 180 degrees (cv2.rotate(img, ROTATE_180) = np.rot90 twice)."""
    rng = np.random.default_rng(seed)
    x, y = [], []
    for i, text in enumerate(text_lines(n, seed)):
        img = render_line(text, rng)
        label = i % 2
        x.append(cls_input(np.rot90(img, 2) if label else img))
        y.append(label)
    return np.stack(x), np.array(y, dtype=np.int64)


def rec_set(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """n recogniser inputs (N, 3, 48, 320) and their texts."""
    rng = np.random.default_rng(seed)
    texts = [short_text(t, rng) for t in text_lines(n, seed)]
    return np.stack([rec_input(render_line(t, rng, sizes=(20, 44), max_angle=1.0)) for t in texts]), texts


def det_set(n: int, seed: int, height: int = 480, width: int = 640, **det_kw) -> np.ndarray:
    """n detector inputs: pages of height x width, through DetPreProcess (736 x 992 by default)."""
    rng = np.random.default_rng(seed)
    lines = text_lines(24 * n, seed)
    return np.stack([det_input(render_page(lines[24 * i:24 * (i + 1)], rng, height, width), **det_kw)
                     for i in range(n)])


def ctc_decode(probs: np.ndarray, characters: list[str]) -> list[str]:
    """CTCLabelDecode: argmax per step, repeats merged, blanks (index 0) dropped; the dictionary is
    the model's 'character' metadata with 'blank' in front and ' ' at the end."""
    table = ["blank", *characters, " "]
    out = []
    for idx in probs.argmax(axis=2):
        keep = np.ones(len(idx), dtype=bool)
        keep[1:] = idx[1:] != idx[:-1]
        keep &= idx != 0
        out.append("".join(table[i] for i in idx[keep]))
    return out


SETS = {  # name -> (builder, calibration samples, test samples, seeds)
    "cls": (cls_set, 64, 256),
    "rec": (rec_set, 32, 64),
    "det": (det_set, 8, 8),
}


def write_sets(out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, (build, n_calib, n_test) in SETS.items():
        for part, n, seed in (("calib", n_calib, 1), ("test", n_test, 2)):
            with ticker(f"ocr_data: {name} {part}, {n} samples"):  # minutes in all: elapsed time on a terminal
                made = build(n, seed)
            x, extra = (made, None) if isinstance(made, np.ndarray) else made
            arrays = {"x": x} if extra is None else {"x": x, "y": np.asarray(extra)}
            paths[f"{name}_{part}"] = out / f"{name}_{part}.npz"
            np.savez_compressed(paths[f"{name}_{part}"], **arrays)
            print(f"{paths[f'{name}_{part}']}: x {x.shape}")
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / ".cache" / "models" / "ocr")
    write_sets(p.parse_args().out)


if __name__ == "__main__":
    main()
