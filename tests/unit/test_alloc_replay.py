"""The caching-allocator model of bench/alloc_replay.py (a diagnostic) follows the rules it cites from
c10/cuda/CUDACachingAllocator.cpp: 512 B rounding, 2 MiB small and 20 MiB large segments, best fit, the split
thresholds, merging within a segment only. No torch needed: the model is plain Python."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "alloc_replay", Path(__file__).resolve().parents[2] / "bench" / "alloc_replay.py")
assert _spec and _spec.loader
replay = importlib.util.module_from_spec(_spec)
sys.modules["alloc_replay"] = replay  # dataclasses resolve their module's annotations through sys.modules
_spec.loader.exec_module(replay)
MiB = 1 << 20


def test_small_requests_round_to_512_bytes_in_2_mib_segments():
    a = replay.Allocator()
    b = a.malloc(1)
    assert (b.size, a.reserved, a.allocated) == (512, 2 * MiB, 512)
    a.malloc(513)  # rounded to 1024, carved from the same segment
    assert (a.reserved, a.allocated) == (2 * MiB, 1536)


def test_a_mid_sized_request_takes_a_20_mib_segment_that_later_requests_share():
    a = replay.Allocator()
    a.malloc(MiB + MiB // 2)
    a.malloc(MiB + MiB // 2)
    assert a.reserved == 20 * MiB and a.allocated == 3 * MiB and len(a.segments) == 1


def test_a_large_block_is_not_split_when_at_most_1_mib_would_remain():
    a = replay.Allocator()
    a.free(a.malloc(12 * MiB))
    b = a.malloc(11 * MiB + MiB // 2)  # 0.5 MiB would remain: the whole 12 MiB block is handed out
    assert b.size == 12 * MiB and a.reserved == 12 * MiB


def test_best_fit_takes_the_smallest_cached_block_that_holds_the_request():
    a = replay.Allocator()
    x, y = a.malloc(16 * MiB), a.malloc(12 * MiB)
    a.free(x)
    a.free(y)
    assert a.malloc(11 * MiB).seg == y.seg


def test_freed_neighbours_merge_within_a_segment_never_across_segments():
    a = replay.Allocator()
    x, y = a.malloc(2 * MiB), a.malloc(2 * MiB)  # both from one 20 MiB segment
    a.free(x)
    a.free(y)
    a.malloc(20 * MiB)  # the whole segment again, merged
    assert a.reserved == 20 * MiB
    b = replay.Allocator()
    p, q = b.malloc(12 * MiB), b.malloc(12 * MiB)  # two segments
    b.free(p)
    b.free(q)
    b.malloc(24 * MiB)  # no coalescing across segments: a third
    assert b.reserved == 48 * MiB and b.peak_reserved == 48 * MiB and b.peak_allocated == 24 * MiB
