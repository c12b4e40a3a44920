"""Cells of a buffer of a symbolic number of slots: one per pair of regions that may meet.

A buffer whose size is symbolic cannot be cut into the explorer's cells (model/memory.py), so
races.py judges it as one cell, and every two accesses to it conflict, however far apart their
regions lie (`stage.at[k.ds(0, half)]` filled by one TMA copy while the issuing thread zeroes
the padding `stage.at[k.ds(rows, 2)]`). Races are a relation between two accesses, so the cells
need only tell those pairs apart: Z3 decides, once per pair of the buffer's references, whether
the two regions can share a slot for some parameter values the assumptions allow, some loop
positions and some threads (any two, the same one included); each pair that may, and each
reference with itself, is one cell, which holds exactly those references. Two accesses then
share a cell iff their regions may meet, for every parameter value at once.

Coarser than the regions themselves (a pair that meets at one loop position shares its cell at
all of them), never finer: a pair Z3 does not prove disjoint (unknown, or outside what
terms.py encodes) shares a cell. When no pair is disjoint the buffer keeps its one cell.
"""

from __future__ import annotations

import itertools

import z3

from ...model.ir import MemRef, free_vars
from .own_regions import _never_meet, ref_key
from .terms import z_int

Pair = tuple[str, int, int]        # ("pair", i, j): references i <= j of the buffer


def buffer_refs(kernel, alloc) -> list[MemRef]:
    """Every distinct reference to `alloc` (whole, indexed or a region), in program order."""
    refs, seen = [], set()
    for op in kernel.ops():
        for ref in op.reads + op.writes:
            if ref.alloc is alloc and ref_key(ref) not in seen:
                seen.add(ref_key(ref))
                refs.append(ref)
    return refs


def may_meet(frag, a: MemRef, b: MemRef) -> bool:
    """Whether the regions of `a` and `b` can share a slot for some parameter values, loop
    positions and threads of the block (False only when Z3 proves they never do)."""
    nthreads = z_int(frag.kernel.num_threads, frag.base_env)
    t1, t2 = z3.Int("thread!1"), z3.Int("thread!2")
    bounds = [t1 >= 0, t1 < nthreads, t2 >= 0, t2 < nthreads]
    return not _never_meet(frag, a, b, t1, t2, bounds)


def region_cells(frag, alloc) -> tuple[list[tuple[Pair, str]], dict[str, list[Pair]]] | None:
    """The cells of `alloc` (key, name) and, per reference (ref_key), the cells it touches; None
    when every pair of its references may meet (one cell for the buffer, as before)."""
    refs = buffer_refs(frag.kernel, alloc)
    pairs = [(i, j) for i, j in itertools.combinations(range(len(refs)), 2)]
    apart = {p for p in pairs if not may_meet(frag, refs[p[0]], refs[p[1]])}
    if not apart:
        return None
    cells, of_ref = [], {ref_key(r): [] for r in refs}
    for i, j in itertools.combinations_with_replacement(range(len(refs)), 2):
        if (i, j) in apart:
            continue
        key = ("pair", i, j)
        cells.append((key, repr(refs[i]) if i == j else f"{refs[i]!r} & {refs[j]!r}"))
        of_ref[ref_key(refs[i])].append(key)
        if j != i:
            of_ref[ref_key(refs[j])].append(key)
    return cells, of_ref


def within_buffer(frag, ref, ctx) -> None:
    """A region of a buffer of symbolic size judged by the pairs that may meet lies within the
    buffer and is not empty, as the explorer requires (proved, or a side condition the verdict
    states): a proof for sizes where the kernel is no kernel would claim too much. Regions that
    depend on the thread index are left to own_regions.py's lemma, as before."""
    if frag.kernel.thread_axis in set().union(*[free_vars(e) for e in ref.exprs()]):
        return
    shape = ref.alloc.shape[len(ref.index):]
    for s, n in zip(ref.region, shape):
        start, size, stride = ctx.int(s.start), ctx.int(s.size), z3.simplify(ctx.int(s.stride))
        if not z3.is_int_value(stride):
            return                      # nonlinear: the pair lemma alone, as for whole cells
        frag.require_always(z3.And(size >= 1, stride >= 1, start >= 0,
                                   start + (size - 1) * stride < ctx.int(n)),
                            f"the region of `{ref}` is within the buffer", ctx)
