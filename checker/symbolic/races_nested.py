"""Races in nested tiles x K-step loops: the kernels whose race proofs prove the kernel's.

The barrier proof takes a persistent kernel's nest `loop t < T: loop kk < K: B` as one loop over
the running position P = T*K (nested.py), or, with operations beside the inner loop on
barriers of their own, as two projections (pertile.py). Races are judged the same way, on the
same rewrites, so that each race proof stands beside a barrier proof of the same program
(races.py rests on the barrier rules of the program it is given):

- Flattened. nested.py now rewrites memory references too (their slots and regions are
  expressions of the running position, each proved equal by Z3 like the barrier slots), so the
  flattened kernel has the same accesses at the same positions: a race of the kernel at (t, kk)
  is a race of the flattened one at p = t*K + kk.
- Projections. The barriers split as pertile.split_per_tile splits them (the split whose two
  projections the barrier proof proved). A buffer is judged in a projection that keeps every
  operation touching it; the other projection does not see it. Why that is sound: the deleted
  operations touch neither the projection's barriers nor the buffer, so every run of the kernel
  with them left out is a run of the projection, and each access of the buffer is live there
  at least as long (a thread's gap between its kept synchronization instructions holds its gap
  in the kernel; a deleted barrier-less wait retires nothing in the projection and a deleted
  issue leaves a wait(n) retiring fewer, both only longer). So a race on the buffer in the
  kernel is a race in the projection. Projection B also keeps the K loop's barrier-less loads,
  stores and tcgen05 MMAs (an MMA into the per-tile accumulator), which have no barrier effect,
  so its barrier behaviour is the barrier proof's projection B; their inner loop is then taken
  once (_collapse). A buffer touched on both sides (a K-loop MMA's
  accumulator read per tile with no barrier between them in one class) is refused, named.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from ...model import kinds, primitives
from ...model.ir import Kernel, Loop, Op, WarpRegion, When, free_vars, walk, without_memory
from .nested import PerTileOps, flatten_nested
from .opaque_counts import opaque_trip_counts
from .pertile import _nests, _project, split_per_tile
from .proofs import Proof
from .ring_rows import ring_rows
from .terms import Unsupported


# barrier-less accesses whose repetition within one loop is covered by one run (_collapse)
REPEATABLE = kinds.kinds_where(lambda p: p.memory == "thread") | {primitives.TCGEN05_MMA}


@dataclasses.dataclass
class RaceKernel:
    kernel: Kernel
    symbolic: list[str]
    note: str | None


def race_kernels(kernel: Kernel, symbolic: Sequence[str],
                 fixed: Mapping[str, int]) -> list[RaceKernel]:
    """The kernels whose race-freedom, all proved, proves `kernel`'s (module doc); Unsupported
    naming the construct otherwise. A flat buffer indexed stage by stage is first a ring's
    stages of rows, judged at one ring slot (ring_rows.py)."""
    kernel, rows = ring_rows(kernel, fixed)
    try:
        flat = flatten_nested(kernel, symbolic, fixed)
    except PerTileOps as err:
        parts = _projections(kernel, symbolic, fixed, err)
    else:
        parts = [RaceKernel(kernel, list(symbolic), None) if flat is None else
                 RaceKernel(flat.kernel, flat.symbolic, flat.note)]
    return [dataclasses.replace(p, note="; ".join(rows + ([p.note] if p.note else [])) or None)
            for p in parts]


def _barriers(k: Kernel) -> set[str]:
    return {b.name for b in k.barriers}


def _projections(kernel: Kernel, symbolic, fixed, refused: PerTileOps) -> list[RaceKernel]:
    try:
        split = split_per_tile(without_memory(kernel), fixed)
    except Unsupported as err:
        raise Unsupported(f"{refused}; not split by barrier class: {err}") from None
    a, b = _barriers(split.inner), _barriers(split.tile)

    def bar(op: Op):
        return None if op.barrier is None else op.barrier.alloc.name

    inner_loops = frozenset(id(s.body[i]) for s in _nests(kernel.body)
                            for i in range(len(s.body)) if isinstance(s.body[i], Loop))
    inner_ids = {id(x) for s in walk(kernel.body) if isinstance(s, Loop) and id(s) in
                 inner_loops for x in walk(s.body) if isinstance(x, Op)}
    # a K-loop operation without a barrier that touches memory (an MMA into the accumulator)
    # is kept in projection B too, where its inner loop then collapses (_collapse)
    repeated = lambda op, inner: inner and op.barrier is None and \
        op.kind in REPEATABLE and bool(op.reads + op.writes)                   # noqa: E731
    drop_a = lambda op, _: bar(op) in b                                       # noqa: E731
    drop_b = lambda op, inner: bar(op) in a or (inner and op.barrier is None and  # noqa: E731
                                                not repeated(op, inner))
    kept = {"a": _kept(kernel.body, drop_a, inner_loops), "b": _kept(kernel.body, drop_b,
                                                                     inner_loops)}
    home: dict[str, str] = {}
    for alloc in kernel.buffers:
        users = [id(op) for op in kernel.ops()
                 if any(m.alloc is alloc for m in op.reads + op.writes)]
        # a buffer only the K loops touch is judged with the K loop's barriers; one per-tile
        # operations touch too, with the per-tile barriers (any home keeping every user is
        # sound; this is the one whose barriers order them)
        per_tile = any(u not in inner_ids for u in users)
        order = ("b", "a") if per_tile else ("a", "b")
        side = next((s for s in order if all(u in kept[s] for u in users)), None)
        if side is None:
            raise Unsupported(f"{split.split}: buffer `{alloc.name}` is touched by operations "
                              "of both projections (the K loop's and the per-tile ones), so "
                              "neither projection judges its races", alloc.loc)
        home[alloc.name] = side
    out = []
    for side, drop, barriers in (("a", drop_a, a), ("b", drop_b, b)):
        mine = {n for n, s in home.items() if s == side}
        body = _only_buffers(_project(kernel.body, drop, inner_loops=inner_loops), mine)
        if side == "b":
            body = _collapse(body, {x.var for x in walk(kernel.body)
                                    if isinstance(x, Loop) and id(x) in inner_loops})
        part = kernel.replace(body=body,
                              barriers=tuple(x for x in kernel.barriers if x.name in barriers),
                              buffers=tuple(m for m in kernel.buffers if m.name in mine))
        if not mine:
            continue
        what = "the K loop's barriers" if side == "a" else "the per-tile barriers"
        note = (f"{split.split}; races on {', '.join(sorted(mine))} judged in the projection "
                f"on {what}, which keeps every operation touching them "
                "(checker/symbolic/races_nested.py)")
        for sub in race_kernels(part, symbolic, fixed) if side == "a" else \
                [RaceKernel(part, list(symbolic), None)]:
            if sub.kernel is part:
                out.append(RaceKernel(part, list(symbolic), note))
            else:
                out.append(RaceKernel(sub.kernel, sub.symbolic, f"{note}; {sub.note}"))
    return out


def _collapse(body, inner_vars: set[str]) -> tuple:
    """Projection B's inner loops, which hold only barrier-less accesses (REPEATABLE) whose
    references and guards do not read the K-step index, replaced by one run of their body,
    unguarded. Sound for races: the same accesses repeated within one gap of their thread
    (loads and stores), or queued one after another on its tensor core until a later arrival
    (tcgen05 MMAs, completed in issue order), are live over the interval of one run, and one
    run where the loop may run none only adds accesses. Anything else stays a loop (and the
    projection is then refused as nested)."""
    out = []
    for s in body:
        if isinstance(s, Loop) and s.var in inner_vars:
            ops = [x for x in walk(s.body)]
            if all(not isinstance(x, Loop) and not isinstance(x, WarpRegion) for x in ops) and \
                    all(x.barrier is None and x.kind in REPEATABLE for x in ops
                        if isinstance(x, Op)) and \
                    s.var not in _reads(s.body):
                out.extend(s.body)
                continue
            out.append(s)
        elif isinstance(s, Loop):
            out.append(Loop(s.var, s.trip, _collapse(s.body, inner_vars), s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, _collapse(s.then, inner_vars),
                            _collapse(s.orelse, inner_vars), s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _collapse(s.body, inner_vars), s.loc))
        else:
            out.append(s)
    return tuple(out)


def _reads(body) -> set[str]:
    """Every variable the statements read."""
    names: set[str] = set()
    for x in walk(body):
        if isinstance(x, Op):
            for e in [x.count, x.bytes] + [e for m in x.reads + x.writes for e in m.exprs()]:
                if e is not None:
                    names |= free_vars(e)
        elif isinstance(x, When):
            names |= free_vars(x.cond)
    return names


def _kept(body, drop, inner_loops) -> set[int]:
    """ids of the operations a projection keeps (the same walk as pertile._project)."""
    out: set[int] = set()

    def go(stmts, inner):
        for s in stmts:
            if isinstance(s, Op):
                if not drop(s, inner):
                    out.add(id(s))
            elif isinstance(s, Loop):
                go(s.body, inner or id(s) in inner_loops)
            elif isinstance(s, When):
                go(s.then, inner)
                go(s.orelse, inner)
            elif isinstance(s, WarpRegion):
                go(s.body, inner)
    go(body, False)
    return out


def _only_buffers(body, names: set[str]) -> tuple:
    """`body` with the memory effects on buffers outside `names` removed (judged elsewhere)."""
    out = []
    for s in body:
        if isinstance(s, Op):
            if any(m.alloc.name not in names for m in s.reads + s.writes):
                s = dataclasses.replace(
                    s, reads=tuple(m for m in s.reads if m.alloc.name in names),
                    writes=tuple(m for m in s.writes if m.alloc.name in names))
            out.append(s)
        elif isinstance(s, Loop):
            out.append(Loop(s.var, s.trip, _only_buffers(s.body, names), s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, _only_buffers(s.then, names),
                            _only_buffers(s.orelse, names), s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _only_buffers(s.body, names), s.loc))
        else:
            out.append(s)
    return tuple(out)


__all__ = ["RaceKernel", "race_kernels"]


def joined_race_proofs(parts: list[RaceKernel], fixed, prove_one) -> Proof:
    """Each part proved by `prove_one(kernel, symbolic)`; proved only when all are, the notes
    of the rewrites among the proof's cases (a flattened count is proved for every product)."""
    proofs = []
    for part in parts:
        # a schedule's non-linear tile count read only as a trip count: a parameter of its
        # own, as in the barrier proof (opaque_counts.py; every value of it covers every count)
        kernel, symbolic, opaque = opaque_trip_counts(part.kernel, part.symbolic, fixed)
        if opaque:
            part = RaceKernel(kernel, symbolic, "; ".join(([part.note] if part.note else [])
                                                          + opaque))
        proof = prove_one(part.kernel, part.symbolic)
        if proof.status != "proved":
            if part.note:
                proof = dataclasses.replace(proof, reason=f"{proof.reason} (after {part.note})")
            return proof
        proofs.append(proof)
    if len(proofs) == 1 and parts[0].note is None:
        return proofs[0]
    first = proofs[0]
    return dataclasses.replace(
        first, seconds=max(p.seconds for p in proofs),
        classes=[c for p in proofs for c in p.classes],
        side_conditions=list(dict.fromkeys(x for p in proofs for x in p.side_conditions)),
        reason="; ".join(r for r in dict.fromkeys(p.reason for p in proofs) if r),
        cases=list(dict.fromkeys([c for p in proofs for c in p.cases] +
                                 [x.note for x in parts if x.note])))
