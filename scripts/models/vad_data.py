"""SYNTHETIC speech-like and non-speech audio for measuring silero-vad's integer conversion (no real recording is
shipped offline in any wheel here: the only .wav files on the machine are a plucked string and an IPython
test tone). These signals are not speech; they are used to compare the integer model with the float model on
inputs that drive its speech probability across its whole range, and labels are what was synthesized.

Speech-like: words of 1-4 syllables, each a vowel (a glottal pulse train at a drifting f0 of 85-260 Hz with
jitter, through three formant resonators of one of five vowels) with a raised-cosine envelope, between
consonant-like noise bursts, words separated by short pauses, in mild background noise. Non-speech: white, pink
or brown noise, mains hum with harmonics, tone sweeps, clicks, near-silence. Every function is one of its seed.

Streams are cut into silero-vad's 16 kHz chunks: 512 new samples with the previous 64 in front (576).
"""
from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

RATE = 16000
CHUNK, CONTEXT = 512, 64
VOWELS = {  # formant frequencies (Hz) and bandwidths, adult averages (Peterson & Barney)
    "a": ((730, 1090, 2440), (90, 110, 170)), "e": ((530, 1840, 2480), (60, 100, 170)),
    "i": ((270, 2290, 3010), (50, 100, 170)), "o": ((570, 840, 2410), (70, 90, 170)),
    "u": ((300, 870, 2240), (50, 90, 170)),
}


def _resonator(x, freq, bw):
    """A two-pole resonator at `freq` with bandwidth `bw`, unit gain at DC removed by normalisation."""
    r = np.exp(-np.pi * bw / RATE)
    a = [1.0, -2 * r * np.cos(2 * np.pi * freq / RATE), r * r]
    return lfilter([1 - r], a, x)


def _vowel(n, rng):
    f0 = rng.uniform(85, 260) * (1 + 0.15 * np.sin(np.linspace(0, rng.uniform(1, 3), n)))
    phase = np.cumsum(f0 * (1 + rng.normal(0, 0.01, n)) / RATE)
    pulses = np.diff(np.floor(phase), prepend=0.0)  # one impulse per glottal period
    source = lfilter([1.0], [1.0, -0.95], pulses)  # glottal roll-off
    formants, bws = VOWELS[rng.choice(list(VOWELS))]
    out = sum(_resonator(source, f, b) * g for f, b, g in zip(formants, bws, (1.0, 0.5, 0.25)))
    return out * np.sin(np.linspace(0, np.pi, n)) ** 2


def _consonant(n, rng):
    noise = rng.normal(0, 1, n)
    return _resonator(noise, rng.uniform(2500, 6000), rng.uniform(800, 2500)) * np.hanning(n) * rng.uniform(0.2, 0.6)


def speech_like(n: int, rng: np.random.Generator) -> np.ndarray:
    parts, total = [], 0
    while total < n:
        for _ in range(int(rng.integers(1, 5))):
            if rng.random() < 0.6:
                parts.append(_consonant(int(rng.uniform(0.03, 0.08) * RATE), rng))
            parts.append(_vowel(int(rng.uniform(0.10, 0.28) * RATE), rng))
        parts.append(np.zeros(int(rng.uniform(0.04, 0.2) * RATE)))
        total = sum(len(p) for p in parts)
    x = np.concatenate(parts)[:n]
    x = x / (np.abs(x).max() + 1e-9) * rng.uniform(0.1, 0.8)
    return x + rng.normal(0, rng.uniform(1e-4, 3e-3), n)


def non_speech(n: int, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(n) / RATE
    kind = int(rng.integers(6))
    if kind == 0:  # white noise
        x = rng.normal(0, 1, n)
    elif kind == 1:  # pink-ish noise
        x = lfilter([0.049922, -0.095993, 0.050612, -0.004408], [1, -2.494956, 2.017265, -0.522189], rng.normal(0, 1, n))
    elif kind == 2:  # brown noise
        x = np.cumsum(rng.normal(0, 1, n))
        x -= lfilter([1.0], [1.0, -0.999], x) * 0.001
    elif kind == 3:  # mains hum with harmonics
        base = rng.choice([50.0, 60.0])
        x = sum(np.sin(2 * np.pi * base * k * t + rng.uniform(0, 6.3)) / k for k in range(1, 6))
    elif kind == 4:  # a tone sweep
        f = np.linspace(rng.uniform(200, 1000), rng.uniform(1000, 6000), n)
        x = np.sin(2 * np.pi * np.cumsum(f) / RATE)
    else:  # clicks in near-silence
        x = rng.normal(0, 0.01, n)
        x[rng.integers(0, n, int(rng.integers(2, 20)))] += rng.uniform(-1, 1)
    x = x - x.mean()
    return x / (np.abs(x).max() + 1e-9) * rng.uniform(0.01, 0.6)


def stream(seconds: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 audio of alternating speech-like and non-speech segments (0.5-2 s each) and a 0/1 label per
    CHUNK samples (1 where more than half of the chunk was speech-like)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    audio, label = np.zeros(n), np.zeros(n)
    pos, speech = 0, bool(rng.integers(2))
    while pos < n:
        m = min(n - pos, int(rng.uniform(0.5, 2.0) * RATE))
        audio[pos:pos + m] = speech_like(m, rng) if speech else non_speech(m, rng)
        label[pos:pos + m] = speech
        pos, speech = pos + m, not speech
    chunks = n // CHUNK
    labels = label[:chunks * CHUNK].reshape(chunks, CHUNK).mean(axis=1) > 0.5
    return np.clip(audio, -1, 1).astype(np.float32), labels


def chunks(audio: np.ndarray) -> np.ndarray:
    """[chunks, CONTEXT + CHUNK]: each chunk with the previous CONTEXT samples in front (zeros before the start),
    as silero-vad's OnnxWrapper feeds the model."""
    n = len(audio) // CHUNK
    padded = np.concatenate([np.zeros(CONTEXT, audio.dtype), audio[:n * CHUNK]])
    return np.stack([padded[i * CHUNK:i * CHUNK + CONTEXT + CHUNK] for i in range(n)])


def streams(count: int, seconds: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """count streams as chunks [count, chunks, 576] and labels [count, chunks]."""
    made = [stream(seconds, seed * 1000 + i) for i in range(count)]
    return np.stack([chunks(a) for a, _ in made]), np.stack([lab for _, lab in made])
