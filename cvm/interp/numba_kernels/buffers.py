"""Activation buffers of one bound batch size, packed by liveness into one byte pool.

A bound set used to hold one buffer per step output for the whole run: ConvNeXt-Tiny at batch 8 needs
1,119 MiB that way, over the buffer cache's bound (Tuning.max_bound_bytes, so every call allocated and
faulted in a fresh gigabyte) and over the whole-plan runner's (Tuning.wholeplan_max_bytes, so it ran
per step). A value is only needed from the step that writes it to the last step that reads it (or a
view of it), so buffers whose lifetimes do not meet can share bytes: here each gets an offset in one
pool, placed greedily by size (largest first, at the lowest offset free over its whole lifetime: the
usual arena planner of inference runtimes).

Exactness: a kernel writes every element of its output before a later step reads it, so what a buffer
held before (another value's bytes instead of np.empty's garbage) is never read; the tests and
scripts/perf/check_equal.py hold the packed sets to the reference.
"""
from __future__ import annotations

import bisect

import numpy as np

from .tuning import DEFAULT_TUNING, Tuning

ALIGN = 64  # every buffer starts on a cache line (the kernels' aligned loads, as with np.empty)
PAGE = 4096  # large buffers are staggered within a page: buffer j starts COLOR_STEP * j bytes into it (mod PAGE)
COLOR_STEP = 17 * ALIGN  # coprime with PAGE / ALIGN, so 64 buffers in a row take 64 different offsets
# Packing looks at every placed buffer whose lifetime meets the new one's: cost ~ pairs of meeting lifetimes.
# Real models have a few per buffer (ConvNeXt-Tiny: ~6); a model built to keep 16k values alive at once has
# 1.3e8, 44 s of planning on its first call that its gas never paid. Above Tuning.max_meeting_pairs the
# buffers go end to end instead (what the verifier's activation limit already admits: batch x activation
# bytes <= run_bytes); Tuning.pack = False does so always (A/B).


def pack(steps, inputs: dict, keep, batch: int, tuning: Tuning = DEFAULT_TUNING) -> tuple[dict, int]:
    """steps: the plan's steps in run order (each with its output's stored shape and dtype); inputs: the
    graph inputs' arrays by name (not packed: a run copies into them); keep: names read after the run
    (the outputs). Returns ({step output name: array in the pool}, the pool's bytes) for the outputs
    that are not views of their input."""
    env = dict(inputs)
    root, spans, order = {}, {}, []  # value -> the buffer it lives in; buffer -> [first, last, bytes]
    for i, step in enumerate(steps):
        ins = [env[n] for n in step.inputs]
        for n in step.inputs:
            if (r := root.get(n)) is not None:
                spans[r][1] = i
        shape = (batch,) + tuple(step.value.stored)
        dtype = np.dtype(step.value.dtype)
        if (v := step.bound_view(ins)) is not None:  # (the views' layout, seen on untouched np.empty pages)
            env[step.output] = v
            if (r := root.get(step.inputs[0])) is not None:
                root[step.output] = r
            continue
        env[step.output] = np.empty(shape, dtype)
        root[step.output] = step.output
        spans[step.output] = [i, i, int(np.prod(shape)) * dtype.itemsize, shape, dtype]
        order.append(step.output)
    for n in keep:
        if (r := root.get(n)) is not None:
            spans[r][1] = len(steps)
    offsets, size = place([(spans[n][0], spans[n][1], spans[n][2]) for n in order], tuning)
    pool = np.empty(size + ALIGN, np.uint8)
    start = (-pool.ctypes.data) % ALIGN
    arrays = {n: np.ndarray(spans[n][3], spans[n][4], buffer=pool, offset=start + off)
              for n, off in zip(order, offsets)}
    return arrays, size


def place(buffers: list[tuple[int, int, int]], tuning: Tuning = DEFAULT_TUNING) -> tuple[list[int], int]:
    """buffers: (first step, last step, bytes), lifetimes inclusive. Returns each one's offset (a
    multiple of ALIGN) such that no two whose lifetimes meet share a byte, and the bytes spanned."""
    color = tuning.color_min_bytes
    if not tuning.pack or meeting_pairs(buffers) > tuning.max_meeting_pairs:
        offsets = [0] * len(buffers)
        end = 0
        for j, (_, _, nbytes) in enumerate(buffers):
            offsets[j] = colored(end, j, nbytes, color)
            end = offsets[j] + -(-nbytes // ALIGN) * ALIGN
        return offsets, end
    offsets = [0] * len(buffers)
    placed = []  # (offset, end, first, last)
    for j in sorted(range(len(buffers)), key=lambda k: (-buffers[k][2], k)):
        first, last, nbytes = buffers[j]
        busy = sorted((o, e) for o, e, f, l in placed if f <= last and first <= l)
        off = colored(0, j, nbytes, color)
        for o, e in busy:
            if off + nbytes <= o:
                break
            off = max(off, colored(-(-e // ALIGN) * ALIGN, j, nbytes, color))
        offsets[j] = off
        placed.append((off, off + nbytes, first, last))
    return offsets, max((e for _, e, _, _ in placed), default=0)


def meeting_pairs(buffers: list[tuple[int, int, int]]) -> int:
    """How many pairs of buffers have lifetimes that meet (both alive at some step), in O(n log n): all
    pairs less those where one ends before the other begins."""
    firsts = sorted(f for f, _, _ in buffers)
    n = len(buffers)
    apart = sum(n - bisect.bisect_right(firsts, last) for _, last, _ in buffers)
    return n * (n - 1) // 2 - apart


def colored(off: int, j: int, nbytes: int, min_bytes: int) -> int:
    """For a buffer of at least min_bytes (Tuning.color_min_bytes), the first offset at or after `off` that is COLOR_STEP * j
    bytes into a page (mod PAGE); `off` itself for a smaller one. Activation tensors are mostly whole
    pages (56 x 56 x 256 bytes), so buffers packed end to end all started at the same page offset, and a
    kernel's loads from one and stores to another then agree in their low 12 bits, which the CPU's memory
    disambiguation takes for a possible dependence (4K aliasing). Staggered: ResNet-50 at batch 8, the
    sum of its steps' times 79.4-80.4 -> 77.0-78.9 ms (three processes each; most of its convs 3-7%
    faster, scripts/perf/profile.py's steps with the runner's buffers)."""
    return off + (COLOR_STEP * j - off) % PAGE if nbytes >= min_bytes else off
