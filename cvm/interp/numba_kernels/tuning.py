"""Tuning: every choice of the numba backend that a measurement made, not the arithmetic, in one frozen record.

`cvm.interp.numba.prepare(graph, analysis, tuning=Tuning(...))` hands it to the planner (Planner.tuning:
kernel paths, fusion limits, how calls split between threads), to each bound batch size (numba._Bound:
buffer placement, the whole-plan program and the twins it picks) and to the runner (its buffer cache, batch
parts). Nothing reads a tuning value from a module global: a module's own constants are the facts of its
kernels (block rows, vector widths, alignment, slack), which compiled code reads and the cache key covers.

Every field selects among kernels, placements or splits that compute the same values: outputs are the
reference's bit for bit on either side. No field reaches compiled code (a choice is made in Python, at plan
or bind time), so no field changes what numba compiles or caches. Each switch runs both ways against the
reference in tests/numba/test_tuning.py; scripts/perf/ab_flags.py times any field's two values in one
process. Measurements below are from docs/performance.md or the commit named, one thread, thread CPU.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

_PAGE = 4096


@dataclass(frozen=True)
class Tuning:
    # ---- switches: True is the measured winner; False is the path it replaces, which stays in use wherever
    # the winner does not apply (so neither side is dead code); the A/B numbers are off -> on.
    pack: bool = True  # buffers.place: buffers whose lifetimes do not meet share bytes (False: end to end, as
    # past max_meeting_pairs). On/off at batch 1/8: ConvNeXt-Tiny 0.89/1.00, EfficientNet-B0 0.87/0.88,
    # DenseNet-121 0.93/0.91; ConvNeXt-Tiny's batch-8 set 1,090 -> 147 MiB
    direct: bool = True  # lower_mac: vnni_direct's kernels (output step on the accumulators) for the VNNI convs
    # they run (False: conv_vnni, its int32 scratch and out_rows pass). Whole runs 0.951x MobileNetV2 batch 1,
    # 0.97x MobileNetV3 and EfficientNet-B0 (98e6673); ResNet-50's residual convs 0.85-0.95x
    dw_in_place: bool = True  # lower_mac: dw_vnni.conv_dw_vnni_in_place, tap quads read from the stored 8-bit
    # input of 16k channels (False: conv_dw_vnni on the padded uint8 copy). Whole runs 0.916x / 0.864x (5e513a3)
    lean: bool = True  # whole-plan program: rows_lean's one-pass twins of the row kernels and small dense
    # layers (False: the per-step path's kernels). LSTM fixture, vnni: 27.6 -> 18.6 us batch 1, 98.5 -> 70.2 batch 8
    gather: bool = True  # whole-plan program on AVX-512: lut_gather's vpgatherdd lookups for a requant -> lut
    # row chain (False: rows_lean's scalar lookups). LSTM: 19.7 -> 16.8 us batch 1, 77.3 -> 59.6 batch 8
    special: bool = True  # whole-plan program: rows_case's kernels specialized by output step, flat operands
    # (False: rows_lean's general loops). LSTM: 17.2 -> 11.8 us batch 1, 55.1 -> 45.3 batch 8
    rowwise: bool = True  # rows_case: dense layers of row_width-multiple widths run the output step row by
    # row, multipliers untiled (False: flat, tiled). LSTM: 11.5 -> 11.2 us batch 1, 44.0 -> 40.8 batch 8

    # ---- the runner: its buffer cache (one for the process; a runner keeps it within its own budget when it
    # returns a set) and how a batch is cut into parts
    max_bound_bytes: int = 1 << 30  # idle buffer sets kept, all runners and threads together (a set over it
    # serves its call and is not kept)
    max_bound_sets: int = 64  # and in number (a set also holds a few Python objects per step)
    hot_max_bytes: int = 64 << 20  # a runner keeps its last set up to this size in its own slot, taken without
    # the cache's lock (0.8 us a call saved, 2% of the LSTM fixture's batch-8 call); counted in max_bound_bytes
    batch_part_min: int = 8  # samples a part before a batch is cut into more parts than threads
    max_parts_per_thread: int = 2  # parts taken in turn: a thread the OS does not schedule delays one part
    # (resnet_cifar batch 64, two quiet cores: 4 parts 1.79-1.84x, 2: 1.84-1.86x, 1: 1.79-1.83x)
    chunks_per_thread: int = 4  # threads.Pool: a split call's rows in this many chunks a thread, taken in turn
    wholeplan_max_bytes: int = 512 << 20  # wholeplan="auto": a bound set runs as one program up to this size
    # (faster on every model tried: recurrent fixtures 0.2-0.5x, ImageNet models 0.88-0.99x, up to
    # DenseNet-121 at batch 8, 487 MiB); it bounds the one-time copy into the arena
    fuse_scan: int = 64  # wholeplan_fuse: calls looked at past a slice for its reader (bind time linear)

    # ---- buffer placement (buffers.place)
    color_min_bytes: int = 4 * _PAGE  # buffers of this size and more are staggered within a page (4K
    # aliasing: ResNet-50 batch 8, sum of step times 79.4-80.4 -> 77.0-78.9 ms); smaller ones packed as they come
    max_meeting_pairs: int = 1 << 21  # packing looks at every pair of buffers alive together: above this many
    # they go end to end (16,383 relus alive until a concat: first call 44 s -> 2.1 s; real models: a few a buffer)

    # ---- the least work worth a thread when a kernel call is split (order of magnitude: below it, handing
    # the work over costs more than it saves)
    par_min_macs: int = 1 << 24  # conv2d / dense: multiply-accumulates a thread
    par_min_pad_bytes: int = 1 << 20  # the VNNI paths' padded uint8 copy: bytes a thread
    par_min_elements: int = 1 << 18  # lower_fused's row kernels (mul, chains, concat): output elements a thread
    par_min_taps: int = 1 << 20  # max_pool2d: output elements x window taps a thread
    resize_par_min_elements: int = 1 << 18  # resize2d: output elements (x taps) a thread
    transpose_par_min_macs: int = 1 << 22  # conv_transpose2d: multiply-accumulates a thread
    lut_par_min_blocks: int = 16  # lut_vbmi: blocks of lut_vbmi.BLOCK elements a thread
    to_nhwc_par_min_rows: int = 64  # elementwise.to_channels_last: image rows a thread

    # ---- kernel choices
    vnni_pad_factor: int = 4  # lower_mac.vnni_buffers_paid: the VNNI padded uint8 input, bytes a sample per
    # paid element at most (pads go up to 2^20 a side: a 1x1 conv could copy GiBs for ~100 gas)
    vnni_pack_factor: int = 32  # and the packed weights, bytes per paid element of a sample (an int8 dense
    # layer with one output needs 16 to 32)
    dw_rows_max_channels: int = 64  # conv_depthwise_rows (stride 1) up to this many channels: 1.7-2x faster
    # at 32 channels, equal at 144
    dw_rows_max_values: int = 1 << 16  # and up to this many weights repeated along a row (256 KiB)
    channels_last_loop_max_c: int = 64  # to NHWC by elementwise.to_channels_last up to this many channels (3:
    # 5x faster than numpy's strided copy, 24: 1.35x), numpy's above (116-464 channels: 1.1-1.4x faster)
    max_fused_table: int = 1 << 16  # a lut's table is copied into an output step's parameters up to this size
    gemv_max_rows: int = 8  # whole-plan program: gemv_vnni / gemv_i32 for calls of at most this many rows (the
    # planner keeps such convs on conv_vnni for them). LSTM at 8 pixels 89 -> 86.5 us; at 16 slower (145 -> 147-153)
    lean_max_rows: int = 1  # rows_lean's one-pass row twins up to this many rows, its scratch twins above (at
    # batch 8 those, whose requant pass vectorizes, were as fast or faster)
    max_dense_k: int = 4  # rows_lean.dense_rows_l up to this many inputs (K = 1: 250 -> 160 ns for 128
    # outputs; K = 32, its weight reads strided: 410 -> 1180 ns)
    row_width: int = 64  # rowwise: widths of multiples of this (a row this wide runs in LLVM's vector loop,
    # not its scalar remainder)
    narrow_max_domain: int = 1 << 17  # narrow_mult: values checked at most for an int32-lane requant (a 16-bit
    # residual plus a 13-bit requant fits)
    narrow_shifts_tried: int = 8  # narrower shifts tried below the widest that fits (each loses a bit)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "bool" and not isinstance(v, bool):
                raise ValueError(f"Tuning.{f.name} must be a bool, got {v!r}")
            if f.type == "int" and (isinstance(v, bool) or not isinstance(v, int) or v < (f.name in _POSITIVE)):
                raise ValueError(f"Tuning.{f.name} must be an int of at least {int(f.name in _POSITIVE)}, got {v!r}")

    @classmethod
    def switches(cls) -> tuple[str, ...]:
        """The boolean fields."""
        return tuple(f.name for f in fields(cls) if f.type == "bool")


_POSITIVE = frozenset({"batch_part_min", "max_parts_per_thread", "chunks_per_thread", "row_width",
                       "narrow_shifts_tried"})  # divisors or loop counts: 0 is no meaningful choice
DEFAULT_TUNING = Tuning()
