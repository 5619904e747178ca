"""Text-line images and labels for the `rnn_ocr_bilstm` fixture (a small CNN + bidirectional LSTM + CTC recogniser).

The text and the rendering are scripts/models/ocr_data.py's (stdlib docstring lines drawn with PIL in the system
fonts, mild rotation and noise) and so is the recogniser-style preprocessing (aspect kept at a fixed height,
x/255 to [-1, 1], zero padding on the right). What differs, to keep the model small enough to train on a CPU
in minutes: lines are lower-cased and cut to at most MAX_CHARS characters of CHARSET, and images are grey
(the mean of the three channels) at HEIGHT x WIDTH. Everything is a function of the seed; the test set is
rendered at test time, as the PP-OCR fixture's is, so it follows the fonts installed on the machine.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ocr_data  # noqa: E402

CHARSET = "abcdefghijklmnopqrstuvwxyz0123456789 .,'-()"  # class k+1 is CHARSET[k]; class 0 is the CTC blank
MAX_CHARS = 12
HEIGHT, WIDTH = 32, 192
STEPS = WIDTH // 4  # the CNN halves the width twice: one LSTM step per 4 pixel columns
CALIB_SEED, TEST_SEED = 101, 202  # training uses seeds 0..; these two are never drawn by it


def clean(line: str) -> str:
    """Lower-case, characters outside CHARSET dropped, runs of spaces merged."""
    return " ".join("".join(c for c in line.lower() if c in CHARSET).split())


def cut(line: str, rng: np.random.Generator) -> str:
    """A run of whole words of at most MAX_CHARS characters, from a random word on (a word longer than that
    is cut)."""
    words = line.split()
    start = int(rng.integers(len(words)))
    out = words[start][:MAX_CHARS]
    for w in words[start + 1:]:
        if len(out) + 1 + len(w) > MAX_CHARS:
            break
        out += " " + w
    return out


def image(text: str, rng: np.random.Generator) -> np.ndarray:
    """One rendered line as the model reads it: float32 [1, HEIGHT, WIDTH] in [-1, 1] (0 is the padding)."""
    img = ocr_data.render_line(text, rng, sizes=(20, 44), max_angle=1.0)
    return ocr_data._resize_norm_pad(img, HEIGHT, WIDTH).mean(axis=0, keepdims=True)


def texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed + 7919)
    out = []
    for line in ocr_data.text_lines(2 * n + 16, seed):
        line = clean(line)
        if line:
            out.append(cut(line, rng))
        if len(out) == n:
            return out
    raise ValueError(f"only {len(out)} usable lines for {n} samples")


def dataset(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """n images float32 [n, 1, HEIGHT, WIDTH] and their texts."""
    rng = np.random.default_rng(seed)
    words = texts(n, seed)
    return np.stack([image(t, rng) for t in words]).astype(np.float32), words


def encode(text: str) -> list[int]:
    return [CHARSET.index(c) + 1 for c in text]


def decode(logits: np.ndarray) -> list[str]:
    """Greedy CTC: argmax per step [N, STEPS, classes], repeats merged, blanks dropped."""
    out = []
    for idx in np.asarray(logits).argmax(axis=-1):
        keep = np.ones(len(idx), dtype=bool)
        keep[1:] = idx[1:] != idx[:-1]
        keep &= idx != 0
        out.append("".join(CHARSET[i - 1] for i in idx[keep]))
    return out


def edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def cer(pred: list[str], truth: list[str]) -> float:
    """Character error rate: total edit distance over total reference characters."""
    return sum(edit_distance(p, t) for p, t in zip(pred, truth)) / max(1, sum(len(t) for t in truth))


def exact(pred: list[str], truth: list[str]) -> float:
    return float(np.mean([p == t for p, t in zip(pred, truth)]))


def random_dataset(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """n lines of random CHARSET text (1-3 'words' of 2-6 characters, at most MAX_CHARS): text the training lines
    (drawn from a vocabulary of about 1,600 docstring runs) never held, to measure reading beyond that vocabulary."""
    rng = np.random.default_rng(seed)
    letters = CHARSET.replace(" ", "")
    words = []
    for _ in range(n):
        parts = ["".join(rng.choice(list(letters), int(rng.integers(2, 7)))) for _ in range(int(rng.integers(1, 4)))]
        words.append(" ".join(parts)[:MAX_CHARS].strip())
    return np.stack([image(t, rng) for t in words]).astype(np.float32), words
