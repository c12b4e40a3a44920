"""Smaller classes for concrete barriers: hand-off pairs analysed apart.

Any partition of the barrier instances into classes is sound (prove.py, point 1: each class
system over-approximates the kernel on its instances, rules are per instance, and each class
proves its own waits enabled in tau). One class for every concrete barrier is the most precise
and the largest; a pipeline of two slots fed by one producer (`full[c]`, `empty[c]` for c = 0, 1,
FlashAttention-3's ping-pong) makes a system whose invariants do not close in time, while each
slot's pair alone closes at once. So `prove` first tries classes of hand-off pairs:

- `split_constant_arrays`: a concrete, non-cluster barrier array indexed only by constants is
  the same program as one scalar barrier per index (`full[0]`, `full[1]`);
- `handoff_components`: barriers joined when a thread waits on one and its next barrier operation
  signals the other (the consumer's `wait(full[c]); arrive(empty[c])`, the producer's
  `wait(empty[c]); copy(full[c])`); each component is a class.

When that proof fails, `prove` falls back to one class for all of them.

Before the one class of concrete barriers beside rings analysed at one slot, `prove` tries its
halves (`role_components`): a ping-pong attention gives each half of its query tile a softmax
partition and nine barriers, which the MMA and correction partitions serve in turn. The
hand-off pairs joined by the roles that use them, fewest first, each role unless it would join
everything (the partitions serving both halves), are one class per half. Again any partition is sound; this one keeps what a half needs together.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from ...model import kinds
from ...model.ir import (BarrierRef, Const, Kernel, Loop, MemAlloc, MemRef, ModelError, evaluate,
                         free_vars, iter_ops, map_ops, walk)

WAIT_KINDS = kinds.blocking_waits("phase")


def _rewrite(body, ref) -> tuple:
    return map_ops(body, lambda op: dataclasses.replace(op, barrier=ref(op.barrier)))


def split_constant_arrays(kernel: Kernel, fixed: Mapping[str, int], dims: int = 1,
                          looped: bool = False) -> Kernel:
    """The kernel with each concrete barrier array of at most `dims` dimensions (not a cluster
    barrier, not a semaphore) whose every use names constant indices split into scalar
    barriers, one per index (`slot_of` names the array of each). `looped`: only the arrays a
    loop uses (a ring strip-mined to whole laps, its slots numbers: stride_split.py); an array
    used in no loop (a Q ring taken once per tile) stays whole, a ring at one slot."""
    parts: dict[str, dict[tuple, object]] = {}
    ops = list(iter_ops(kernel.body))
    in_loops = {op.barrier.alloc.name for loop in walk(kernel.body) if isinstance(loop, Loop)
                for op in iter_ops(loop.body) if op.barrier is not None}
    for alloc in kernel.barriers:
        if looped and alloc.name not in in_loops:
            continue
        if alloc.cluster or alloc.semaphore or alloc.scalar or not 1 <= len(alloc.shape) <= dims \
                or any(free_vars(d) - set(fixed) for d in alloc.shape):
            continue
        uses = [op for op in ops if op.barrier is not None and op.barrier.alloc is alloc]
        try:
            n = [evaluate(d, fixed) for d in alloc.shape]
            idx = [tuple(evaluate(e, fixed) for e in op.barrier.index) for op in uses
                   if len(op.barrier.index) == len(n)
                   and not any(free_vars(e) - set(fixed) for e in op.barrier.index)]
        except ModelError:
            continue
        if len(idx) != len(uses) or not uses or \
                not all(0 <= i < d for ix in idx for i, d in zip(ix, n)):
            continue
        parts[alloc.name] = {ix: dataclasses.replace(
            alloc, name=f"{alloc.name}[{','.join(map(str, ix))}]", shape=(Const(1),),
            scalar=True) for ix in sorted(set(idx))}
    if not parts:
        return kernel

    def ref(r):
        if r is None or r.alloc.name not in parts:
            return r
        ix = tuple(evaluate(e, fixed) for e in r.index)
        return BarrierRef(parts[r.alloc.name][ix], (), r.block)

    barriers = []
    for alloc in kernel.barriers:
        barriers += list(parts[alloc.name].values()) if alloc.name in parts else [alloc]
    return kernel.replace(body=_rewrite(kernel.body, ref), barriers=tuple(barriers))


def split_constant_buffers(kernel: Kernel, fixed: Mapping[str, int]) -> Kernel:
    """The kernel with each buffer whose every access names a constant leading slot (`q[0]`,
    `q[1]`: a ping-pong's two halves) split into one buffer per slot, of the remaining
    dimensions. The cells are the same (a slot's cells are its own), so every race is one of
    the split kernel; what changes is that each slot is judged by the class of the barriers
    guarding it, beside barrier arrays split by `split_constant_arrays` (the Q ring's
    `ready[0]` guarding `q[0]`). That holds only while no access reaches past its slot: every
    further index and region of every access must lie inside its dimension at the values in
    `fixed`; one that reads anything else (a loop position, a parameter left symbolic) may
    reach past it, and the buffer stays whole."""
    ops = list(iter_ops(kernel.body))
    parts: dict[str, dict[int, MemAlloc]] = {}
    for alloc in kernel.buffers:
        refs = [r for op in ops for r in op.reads + op.writes if r.alloc is alloc]
        try:
            n = evaluate(alloc.shape[0], fixed)
            slots = [evaluate(r.index[0], fixed) for r in refs
                     if r.index and not free_vars(r.index[0]) - set(fixed)]
        except ModelError:
            continue
        if alloc.scalar or not refs or len(slots) != len(refs) or \
                not all(0 <= c < n for c in slots) or \
                not all(_inside_slot(r, alloc, fixed) for r in refs):
            continue
        rest = alloc.shape[1:]
        parts[alloc.name] = {c: dataclasses.replace(
            alloc, name=f"{alloc.name}[{c}]", shape=rest or (Const(1),), scalar=not rest,
            granule=tuple(alloc.granule[1:])) for c in sorted(set(slots))}
    if not parts:
        return kernel

    def mem(r):
        if r.alloc.name not in parts:
            return r
        return MemRef(parts[r.alloc.name][evaluate(r.index[0], fixed)], r.index[1:], r.region)

    def rewrite(op):
        return dataclasses.replace(op, reads=tuple(mem(r) for r in op.reads),
                                   writes=tuple(mem(r) for r in op.writes))

    buffers = []
    for alloc in kernel.buffers:
        buffers += list(parts[alloc.name].values()) if alloc.name in parts else [alloc]
    return kernel.replace(body=map_ops(kernel.body, rewrite), buffers=tuple(buffers))


def _inside_slot(ref: MemRef, alloc: MemAlloc, fixed: Mapping[str, int]) -> bool:
    """Whether every index after the leading one and every region of `ref` stays inside its
    dimension of `alloc` at the values in `fixed` (False when any of them reads anything else:
    it may reach past the slot)."""
    runs = [(i, Const(1), Const(1)) for i in ref.index[1:]] + [s.exprs() for s in ref.region]
    dims = alloc.shape[len(ref.index[:1]):]
    if len(runs) > len(dims):
        return False
    for (start, size, stride), extent in zip(runs, dims):
        exprs = (start, size, stride, extent)
        if any(free_vars(e) - set(fixed) for e in exprs):
            return False
        try:
            a, k, d, n = (evaluate(e, fixed) for e in exprs)
        except ModelError:
            return False
        if k < 1 or d < 1 or a < 0 or a + (k - 1) * d >= n:
            return False
    return True


def slot_of(alloc) -> str | None:
    """The array a barrier was split from (`split_constant_arrays`: `empty2[1]` is slot 1 of
    `empty2`), or None for a barrier declared as it is (a source name has no bracket)."""
    name = alloc.name
    return name[:name.index("[")] if name.endswith("]") and "[" in name else None


def role_components(roles, names: list[str]) -> dict[str, int] | None:
    """Component number per barrier name: hand-off components (`handoff_components`) joined
    by the roles that use them, the roles touching fewest components first, each one unless
    it would join everything (a role serving every half); None when all are one component or
    no role joined two."""
    comp = handoff_components(roles, names, alike=True)
    if comp is None:
        return None
    parent = {c: c for c in set(comp.values())}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    # a ring's slots (an array, its slots numbered by stride_split.py, or each such slot split
    # into a barrier of its own) stay classes of their own: every role that fills or reads a
    # tile touches them, so joined they join the halves
    allocs = {bop.op.barrier.alloc.name: bop.op.barrier.alloc for role in roles
              for item in role.items for bop in item.ops if bop.op.barrier is not None}
    rings = {comp[n] for n in names if n in allocs
             and (not _one(allocs[n]) or slot_of(allocs[n]) is not None)}
    uses = [sorted({comp[bop.op.barrier.alloc.name] for item in role.items
                    for bop in item.ops if bop.op.barrier is not None
                    and bop.op.barrier.alloc.name in comp} - rings) for role in roles]
    for used in sorted(uses, key=len):
        joined = {find(c) for c in used}
        if len(joined) < len({find(c) for c in parent if c not in rings}):
            for c in used[1:]:
                parent[find(c)] = find(used[0])
    roots = sorted({find(c) for c in parent})
    if len(roots) <= 1 or len(roots) == len(parent):
        return None     # one class, or the hand-off pairs themselves (their own partition)
    return {n: roots.index(find(comp[n])) for n in names}


def _one(alloc) -> bool:
    """Is the allocation one barrier (not an array of several)?"""
    return alloc.scalar or all(isinstance(d, Const) and d.value == 1 for d in alloc.shape)


def _shape(alloc) -> tuple:
    """What `alike` compares: the declared shape, and whether the barrier is a split slot (a
    K/V slot's `empty2[1]` is not like the scalar `o_fixed` waited before its release)."""
    return slot_of(alloc) is not None, repr(alloc.shape)


def handoff_components(roles, names: list[str], alike: bool = False) -> dict[str, int] | None:
    """Component number per barrier name (`names`: the concrete class's allocations), joining a
    waited barrier with the next barrier its thread signals; None when all are one component.
    `alike`: only barriers of one shape (a ring's `ready[j]` and `empty[j]`; a K/V ring's slot,
    numbered by stride_split.py, whole or split, not the `o_fixed` waited last before its MMA
    releases it)."""
    parent = {n: n for n in names}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for role in roles:
        waited = None
        for item in role.items:
            for bop in item.ops:
                ref = bop.op.barrier
                if ref is None or ref.alloc.name not in parent:
                    continue
                if bop.op.kind in WAIT_KINDS:
                    waited = ref.alloc
                elif waited is not None and (not alike or _shape(waited) == _shape(ref.alloc)):
                    parent[find(waited.name)] = find(ref.alloc.name)
                    waited = None
    roots = sorted({find(n) for n in names})
    if len(roots) <= 1:
        return None
    return {n: roots.index(find(n)) for n in names}
