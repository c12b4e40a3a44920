"""The bytes an access covers, exactly: the union over the active lanes of each lane's
elements (its first byte plus the layout's element offsets), as sorted disjoint byte ranges,
each widened to whole swizzle blocks (a swizzle permutes bytes within its block). A lane that
writes a strided row of a tile then covers its row's elements, not the range between them
where other warps' elements lie."""

from __future__ import annotations

from functools import lru_cache

from .layouts import _leaves

# elements per lane and ranges per access enumerated; past them the caller takes the range
# covering the lanes (coarser, and said in the notes)
MAX_ELEMENTS = 1 << 14
MAX_RANGES = 32
# A kernel's MMAs and copies go through a few layouts, each thousands of times (one per unrolled
# K step of every run the frontend reads): both functions are pure, so each question is
# answered once per process.
CACHED = 1024


@lru_cache(maxsize=CACHED)
def element_offsets(shape, stride) -> tuple[int, ...] | None:
    """The element offsets of a layout (every coordinate's index), or None past
    MAX_ELEMENTS."""
    sizes, steps = _leaves(shape), _leaves(stride)
    count = 1
    for n in sizes:
        count *= n
    if count > MAX_ELEMENTS or len(sizes) != len(steps):
        return None
    # the indices sum i * d over the modes: the set of sums, one mode at a time (equal
    # indices merge early instead of enumerating every coordinate)
    reach = {0}
    for n, d in zip(sizes, steps):
        reach = {o + i * d for o in reach for i in range(n)}
    return tuple(sorted(reach))


def byte_ranges(starts, offsets, size: int, block: int) -> tuple[tuple[int, int], ...] | None:
    """The disjoint byte ranges [lo, hi) that elements of `size` bytes at `start + offset *
    size` (every start, every offset) cover, in whole blocks; None past MAX_RANGES."""
    return _byte_ranges(tuple(sorted(set(starts))), tuple(offsets), size, block)


@lru_cache(maxsize=CACHED)
def _byte_ranges(starts: tuple, offsets: tuple, size: int, block: int):
    pieces = sorted({(b - b % block, -(-(b + size) // block) * block)
                     for b in (s + e * size for s in starts for e in offsets)})
    out: list[list[int]] = []
    for lo, hi in pieces:
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            if len(out) == MAX_RANGES:
                return None
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)
