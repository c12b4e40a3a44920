"""Regions each thread owns in a buffer split by the thread index, for every group size.

A buffer of a symbolic number of slots that threads split by their own index
(`acc.at[k.ds(k.thread * H, H)]`, `w.at[k.thread]`) and others use whole is one cell of the
class systems (races.py: `private` buffers). Two accesses to it by threads of one role are then
judged by a lemma Z3 checks once, over the kernel: for any two distinct threads t1 != t2 (of
the block's threads, a symbolic number), any values of the loop indices each side is at, and
every parameter value the assumptions allow, the regions the two references name never share a
slot (the threads of a reference: those of the roles whose programs hold it). Per dimension both
name, a shared slot is x with x = index, or x = start + j * stride for some 0 <= j < size; the regions overlap iff every such dimension has one (dimensions one of
them leaves whole always meet). The query is Presburger arithmetic where strides and sizes are
numbers or products with numbers; in a group of a concrete number of threads, a query Z3 does
not decide is asked again for each pair of thread indices (numbers: a start `wg * half` with
`half` symbolic is linear again). Anything Z3 does not decide leaves the references unowned,
so their accesses conflict as before (coarser, never a missed race).
"""

from __future__ import annotations

import itertools

import z3

from ...model.ir import free_vars
from .terms import Unsupported, z_int


def ref_key(ref) -> str:
    """References are compared by what they name (MemRef compares by identity)."""
    return f"{ref.alloc.name}:{ref!r}"


def _side(frag, ref, thread, tag: str):
    """The reference's per-dimension terms with the thread index `thread` and a fresh integer
    for every other variable that is not a parameter (loop indices: any value, coarser)."""
    kernel = frag.kernel
    env = dict(frag.base_env)
    env[kernel.thread_axis] = thread
    for e in ref.exprs():
        for name in free_vars(e):
            if name not in env:
                env[name] = z3.Int(f"{name}!{tag}")
    index = [z_int(i, env) for i in ref.index]
    region = [tuple(z_int(x, env) for x in s.exprs()) for s in ref.region]
    return index, region


def _slot(x, dim, tag: str):
    """x lies in the dimension's index or run, with a fresh position j in the run."""
    if not isinstance(dim, tuple):
        return [x == dim]
    start, size, stride = dim
    j = z3.Int(f"j!{tag}")
    return [j >= 0, j < size, x == start + j * stride]


# A group of at most this many threads is also judged pair by pair of concrete indices, where
# the symbolic query is not decided (a start `wg * half` with `half` symbolic is a product of
# two unknowns: outside Presburger arithmetic, linear again once `wg` is a number).
PAIRWISE_THREADS = 16


def disjoint_between_threads(frag, refs) -> bool:
    """Whether Z3 proves that no two distinct threads' regions of `refs` (pairwise, each with
    itself too) share a slot, for all parameter values and loop positions. The threads of a
    reference are those of the roles whose programs hold it (`frag.roles`, when built), else
    every thread of the block."""
    nthreads = z3.simplify(z_int(frag.kernel.num_threads, frag.base_env))
    everyone = [(z3.IntVal(0), nthreads)]
    ranges = _thread_ranges(frag)
    t1, t2 = z3.Int("thread!1"), z3.Int("thread!2")
    numbered = z3.is_int_value(nthreads) and nthreads.as_long() <= PAIRWISE_THREADS
    for a, b in itertools.combinations_with_replacement(refs, 2):
        ra, rb = ranges.get(ref_key(a), everyone), ranges.get(ref_key(b), everyone)
        bounds = [_within(t1, ra), _within(t2, rb), t1 != t2]
        if _never_meet(frag, a, b, t1, t2, bounds):
            continue
        if not numbered:
            return False
        pairs = [(x, y) for x in _members(ra, nthreads) for y in _members(rb, nthreads)
                 if x != y]
        if not all(_never_meet(frag, a, b, z3.IntVal(x), z3.IntVal(y), []) for x, y in pairs):
            return False
    return True


def _thread_ranges(frag) -> dict:
    """ref_key -> the (first thread, count) of every role whose program holds the reference."""
    out: dict = {}
    for role in getattr(frag, "roles", None) or ():
        for item in role.items:
            for bop in item.ops:
                for ref in bop.op.reads + bop.op.writes:
                    out.setdefault(ref_key(ref), []).append((role.lo, role.size))
    return out


def _within(t, ranges):
    return z3.Or([z3.And(t >= lo, t < lo + size) for lo, size in ranges])


def _members(ranges, nthreads) -> list[int]:
    """The thread indices of `ranges` (a range of symbolic bounds: every thread)."""
    out = set()
    for lo, size in ranges:
        lo, end = z3.simplify(lo), z3.simplify(lo + size)
        if z3.is_int_value(lo) and z3.is_int_value(end):
            out |= set(range(lo.as_long(), end.as_long()))
        else:
            out |= set(range(nthreads.as_long()))
    return sorted(x for x in out if x < nthreads.as_long())


def _never_meet(frag, a, b, t1, t2, bounds) -> bool:
    """Z3 proves that `a` of thread t1 and `b` of thread t2 share no slot."""
    try:
        ia, ra = _side(frag, a, t1, "a")
        ib, rb = _side(frag, b, t2, "b")
    except Unsupported:
        return False
    meet = []
    for d, (x, y) in enumerate(zip(ia + ra, ib + rb)):
        slot = z3.Int(f"slot!{d}")
        meet += _slot(slot, x, f"a{d}") + _slot(slot, y, f"b{d}")
    s = z3.Solver()
    s.set("timeout", int(frag.solver.timeout * 1000))
    s.add(*frag.solver.facts, *bounds, *meet)
    return s.check() == z3.unsat


def own_region_keys(frag, alloc) -> set[str]:
    """The references to `alloc` (a buffer its threads split by their index) that each thread
    owns: every reference naming part of it, when the lemma holds for all of them together;
    none otherwise."""
    refs, seen = [], set()
    for op in frag.kernel.ops():
        for ref in op.reads + op.writes:
            if ref.alloc is alloc and (ref.index or ref.region) and ref_key(ref) not in seen:
                seen.add(ref_key(ref))
                refs.append(ref)
    thread = frag.kernel.thread_axis
    if not refs or not all(thread in set().union(*[free_vars(e) for e in r.exprs()])
                           for r in refs):
        return set()
    return seen if disjoint_between_threads(frag, refs) else set()
