"""Nested tiles x K-step loops with per-tile operations, proved as two projections.

The MMA warp of a persistent GEMM runs

    loop t < T: [wait acc_empty[t % 2]]; loop kk < K: B; commit acc_full[t % 2]

where B (the K steps: wait full, MMA, commit empty) reads t and kk through t*K + kk and the
operations beside the inner loop (per-tile operations) use other barriers. nested.py takes the
nest only without those. Here the barriers are split into class A (every barrier an operation
of an inner loop touches) and class B (the barriers of the per-tile operations), which must be
disjoint; the barriers neither touches go to A, else to B, whichever passes step 2 below (any
split is sound). Two kernels are proved:

- projection A: every operation on a B barrier deleted. Its nests have nothing beside their
  inner loop, so nested.py makes them one loop over P = T*K (its own Z3 checks).
- projection B: every operation on an A barrier (and every barrier-less operation of an inner
  loop) deleted, the emptied inner loops dropped: loops over T, K no longer read.

Why both proofs prove the kernel (for every T and K the projections are proved for):

1. Deleting the operations on the other class's barriers leaves that class's barrier state and
   every wait on it as they were, so each run of the kernel, with the other class's operations
   left out, is a run of each projection: a rule broken on a class-X barrier (a phase passed
   unobserved, an arrival too many, a completion left at exit) is broken in projection X.
2. A deadlock of the kernel is a state where every unfinished agent (thread, or warp of a warp
   region) waits. Let W_A (W_B) be the agents waiting on an A (B) barrier. Restricted to A, the
   state is reachable in projection A, whose agents in W_A are still stuck; projection A is
   deadlock-free, so some agent not in W_A performs an A operation later: not a finished agent,
   not a warpgroup waiting for its warps (no barrier operation may follow a warp region, see
   below), so an agent of W_B, after its B wait. Symmetrically an agent of W_A performs a B
   operation after its A wait. Those are two different agents, each touching both classes.
   So when at most one agent of a block touches both classes (Z3 proves it below from the
   guards on the thread and warp indices, loop variables left free), no deadlock exists, and
   with one empty W the projection's own deadlock freedom applies directly.

Blocks interact through barriers only when an operation names another block's barrier or
multicasts (or the barrier is a cluster barrier); then the mixing agent must be one for the
whole grid. Operations with memory effects are refused (races are not split here), and so are
hardware barriers, cluster syncs, semaphores and anything unmodelled: the steps above speak of
mbarrier phases only. The verdict then stays `unknown` and names the operation.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping

import z3

from ...model import kinds
from ...model.ir import Kernel, Loop, Op, WarpRegion, When, free_vars, walk
from .nested import _term
from .proofs import Proof
from .queue_tail import CLOSED, QUEUED
from .terms import Unsupported

TIMEOUT_MS = 10000


@dataclasses.dataclass
class Split:
    inner: Kernel           # projection A
    tile: Kernel            # projection B
    note: str               # what a proof rests on
    split: str              # the two classes


def _barrier(op: Op) -> str | None:
    return None if op.barrier is None else op.barrier.alloc.name


def _nests(body) -> list[Loop]:
    return [s for s in walk(body) if isinstance(s, Loop) and
            any(isinstance(x, Loop) for x in walk(s.body))]


def _classes(kernel: Kernel) -> tuple[set[str], set[str], set[str]]:
    """Barriers of the inner loops, of the per-tile operations, and the others."""
    inner_ids, tile_ops = set(), []
    for outer in _nests(kernel.body):
        loops = [s for s in outer.body if isinstance(s, Loop)]
        if len(loops) != 1 or any(isinstance(x, (Loop, WarpRegion))
                                  for x in walk(loops[0].body)):
            raise Unsupported("per-tile operations: the outer loop must hold exactly one inner "
                              "loop, itself without loops", outer.loc)
        inner_ids |= {id(x) for x in walk(loops[0].body) if isinstance(x, Op)}
        for s in outer.body:
            if s is loops[0]:
                continue
            if any(isinstance(x, (Loop, WarpRegion)) for x in walk((s,))):
                raise Unsupported("per-tile operations: a loop beside the inner loop", s.loc)
            tile_ops += [x for x in walk((s,)) if isinstance(x, Op)]
    inner = {_barrier(x) for x in walk(kernel.body) if isinstance(x, Op) and id(x) in inner_ids}
    for op in tile_ops:
        if op.barrier is None or op.bar_id is not None:
            raise Unsupported(f"per-tile operations: `{op.describe()}` names no mbarrier",
                              op.loc)
    if not tile_ops:
        raise Unsupported("per-tile operations: the outer loop's other statements run no "
                          "operation")
    tile = {_barrier(op) for op in tile_ops}
    both = sorted(n for n in tile & inner if n is not None)
    if both:
        raise Unsupported("per-tile operations on a barrier the inner loop uses too: "
                          + ", ".join(f"`{n}`" for n in both))
    inner = {n for n in inner if n is not None}
    return inner, tile, {b.name for b in kernel.barriers} - inner - tile


def _project(body, drop: Callable[[Op, bool], bool], in_inner: bool = False,
             inner_loops: frozenset = frozenset()) -> tuple:
    """`body` without the operations `drop` names (given whether they sit in an inner loop);
    emptied loops, branches and warp regions go too."""
    out = []
    for s in body:
        if isinstance(s, Op):
            if not drop(s, in_inner):
                out.append(s)
        elif isinstance(s, Loop):
            b = _project(s.body, drop, in_inner or id(s) in inner_loops, inner_loops)
            if b:
                out.append(Loop(s.var, s.trip, b, s.loc))
        elif isinstance(s, When):
            then = _project(s.then, drop, in_inner, inner_loops)
            orelse = _project(s.orelse, drop, in_inner, inner_loops)
            if then or orelse:
                out.append(When(s.cond, then, orelse, s.loc))
        elif isinstance(s, WarpRegion):
            b = _project(s.body, drop, in_inner, inner_loops)
            if b:
                out.append(WarpRegion(s.axis, b, s.loc))
        else:
            out.append(s)
    return tuple(out)


def _guarded_ops(kernel: Kernel):
    """(op, guard expressions, loop variables, warp axis or None) of every operation."""
    found = []

    def go(body, guards, loops, warp):
        for s in body:
            if isinstance(s, Op):
                found.append((s, tuple(guards), tuple(loops), warp))
            elif isinstance(s, Loop):
                go(s.body, guards + [("loop", s.var, s.trip)], loops + [s.var], warp)
            elif isinstance(s, When):
                go(s.then, guards + [("if", s.cond, True)], loops, warp)
                go(s.orelse, guards + [("if", s.cond, False)], loops, warp)
            elif isinstance(s, WarpRegion):
                go(s.body, guards, loops, s.axis)
    go(kernel.body, [], [], None)
    return found


def _one_mixing_agent(kernel: Kernel, a: set[str], b: set[str],
                      fixed: Mapping[str, int]) -> None:
    """Z3: at most one agent (of a block, when blocks only meet through their own barriers)
    runs operations on both classes (module doc, step 2)."""
    ops = [g for g in _guarded_ops(kernel) if g[0].barrier is not None]
    in_region = {g[3] is not None for g in ops}
    if len(in_region) > 1:
        raise Unsupported("per-tile operations: barrier operations both inside and outside "
                          "warp regions (a warpgroup waiting for its warps is not modelled in "
                          "the split)")
    remote = any(g[0].barrier.block is not None or g[0].collective_axes or
                 g[0].barrier.alloc.cluster for g in ops)
    blocks = [n for n, _ in kernel.cluster + kernel.grid]
    sizes = {n: e for n, e in kernel.cluster + kernel.grid}
    facts = [_term(x, {}) != 0 for x in kernel.assumptions] + \
        [z3.Int(n) == v for n, v in fixed.items()]
    counter = iter(range(10 ** 9))

    def agent(tag: str):
        env = {kernel.thread_axis: z3.Int(f"{tag}!thread"), "!warp": z3.Int(f"{tag}!warp")}
        for n in blocks:
            env[n] = z3.Int(n) if not remote else z3.Int(f"{tag}!{n}")
            facts.append(z3.And(env[n] >= 0, env[n] < _term(sizes[n], {})))
        facts.append(z3.And(env[kernel.thread_axis] >= 0,
                            env[kernel.thread_axis] < _term(kernel.num_threads, {})))
        facts.append(z3.And(env["!warp"] >= -1, env["!warp"] < kernel.num_warps))
        return env

    def runs(env, g) -> z3.BoolRef:
        op, guards, loops, warp = g
        local = dict(env)
        n = next(counter)
        for v in loops:
            local[v] = z3.Int(f"{v}!{n}")
        conds = [env["!warp"] == -1] if warp is None else \
            [env["!warp"] >= 0]
        if warp is not None:
            local[warp] = env["!warp"]
        for kind, x, y in guards:
            stray = free_vars(y if kind == "loop" else x) - set(local) - set(kernel.params)
            if stray:       # a name both agents would share: refuse rather than assume
                raise Unsupported("per-tile operations: a guard reads "
                                  + ", ".join(f"`{n}`" for n in sorted(stray))
                                  + ", neither a parameter nor the agent's index", op.loc)
            if kind == "loop":
                conds += [local[x] >= 0, local[x] < _term(y, local)]
            else:
                c = _term(x, local) != 0
                conds.append(c if y else z3.Not(c))
        return z3.And(conds)

    x, y = agent("x"), agent("y")

    def on(env, cls) -> z3.BoolRef:
        return z3.Or([runs(env, g) for g in ops if g[0].barrier.alloc.name in cls])

    same = z3.And(x[kernel.thread_axis] == y[kernel.thread_axis], x["!warp"] == y["!warp"],
                  *[x[n] == y[n] for n in blocks])
    s = z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    s.add(*facts, on(x, a), on(x, b), on(y, a), on(y, b), z3.Not(same))
    answer = s.check()
    if answer != z3.unsat:
        raise Unsupported("per-tile operations: two agents (threads or warps) may each run "
                          "operations on both the per-tile barriers and the K-loop barriers"
                          + (" (Z3 unknown)" if answer == z3.unknown else "")
                          + ", so a wait on one class may hold up the other")


def split_per_tile(kernel: Kernel, fixed: Mapping[str, int] | None = None) -> Split:
    """The two projections of a kernel whose nests have per-tile operations (module doc), or
    Unsupported naming what keeps the split from being sound."""
    fixed = dict(fixed or {})
    for op in kernel.ops():
        if op.reads or op.writes or op.signals:
            raise Unsupported("per-tile operations: an operation with memory effects or "
                              "semaphore signals (races are not split by barrier class)", op.loc)
        prim = kinds.lookup(op.kind)
        if op.bar_id is not None or prim is None or prim.unmodelled or prim.cluster_wide or \
                prim.waits_for not in ("", "phase") or op.kind.startswith("semaphore"):
            # hardware barriers, cluster syncs and semaphores are not split by class here
            raise Unsupported(f"per-tile operations: `{op.describe()}` is not an mbarrier "
                              "operation", op.loc)
    inner, tile, rest = _classes(kernel)
    for a, b in ((inner | rest, tile), (inner, tile | rest)):   # either split is sound
        try:
            _one_mixing_agent(kernel, a, b, fixed)
            break
        except Unsupported as err:
            refused = err
    else:
        raise refused
    inner_loops = frozenset(id(s.body[i]) for s in _nests(kernel.body)
                            for i in range(len(s.body)) if isinstance(s.body[i], Loop))
    proj_a = _project(kernel.body, lambda op, _: _barrier(op) in b)
    proj_b = _project(kernel.body, lambda op, inner: _barrier(op) in a or
                      (inner and op.barrier is None), inner_loops=inner_loops)
    keep = lambda names: tuple(x for x in kernel.barriers if x.name in names)  # noqa: E731
    split = ("per-tile operations: the barriers split into the K loop's ("
             + ", ".join(sorted(a)) + ") and the per-tile ones (" + ", ".join(sorted(b)) + ")")
    note = (split + ", each proved in a projection of its own (checker/symbolic/pertile.py); "
            "Z3 shows at most one agent touches both, so a wait on one cannot hold up the other")
    return Split(kernel.replace(body=proj_a, barriers=keep(a)),
                 kernel.replace(body=proj_b, barriers=keep(b)), note, split)


def closing_tail(kernel: Kernel) -> frozenset:
    """Source locations of the inner loop's tcgen05 ops when a per-tile tcgen05 op closes their
    queue: every tcgen05 op of the kernel is in one nest, the last one of the outer loop's body
    is a per-tile op directly in it (after the inner loop, unconditional, one barrier, not
    multicast). On every run its last tile's instance is then the newest op of each queue that
    issued anything, and projection B (which keeps it) proves it landed at every exit (its own
    loop tail, queue_tail.py); the queue completing in order, nothing of it is in flight at any
    exit of the kernel, so projection A, where that op is deleted, may take its inner loop's
    tcgen05 ops as landed at exit (queue_tail.CLOSED). Empty when the shape differs."""
    queued = [x for x in walk(kernel.body) if isinstance(x, Op) and x.kind in QUEUED]
    for outer in _nests(kernel.body):
        mine = [x for x in walk(outer.body) if isinstance(x, Op) and x.kind in QUEUED]
        if len(mine) != len(queued):
            continue
        direct = [x for x in outer.body if isinstance(x, Op) and x.kind in QUEUED]
        inner = [s for s in outer.body if isinstance(s, Loop)]
        if not direct or len(inner) != 1 or direct[-1] is not mine[-1]:
            continue
        tail = direct[-1]
        if tail.barrier is None or tail.collective_axes or \
                outer.body.index(tail) < outer.body.index(inner[0]):
            continue
        return frozenset(x.loc for x in walk(inner[0].body)
                         if isinstance(x, Op) and x.kind in QUEUED)
    return frozenset()


def prove_per_tile(kernel: Kernel, symbolic, fixed, budget, start: float,
                   refused: Unsupported, prove: Callable[..., Proof]):
    """A nest with per-tile operations: each barrier class proved in its projection, both
    needed; anything short of two proofs is unknown (a projection runs more schedules, so its
    violation need not be the kernel's: the bounded search decides those). `prove` is
    prove.py's entry, passed in so that this module does not import its caller."""

    try:
        split = split_per_tile(kernel, fixed)
    except Unsupported as err:
        return Proof("unknown", time.perf_counter() - start,
                     f"outside the supported fragment: {refused}; not split by barrier class: "
                     f"{err}")
    parts = []
    carried = 0         # what the first projection left of its half, added to the second's
    closed = closing_tail(kernel)
    for name, part in (("the K loop's barriers", split.inner),
                       ("the per-tile barriers", split.tile)):
        token = CLOSED.set(closed if part is split.inner else frozenset())
        try:
            half = budget.share(1 / 2, carried)
            proof = prove(part, symbolic, fixed, budget=half)
        finally:
            CLOSED.reset(token)
        carried = half.unused()
        if proof.status != "proved":
            return Proof("unknown", time.perf_counter() - start,
                         f"{split.split}; the projection on {name} is not proved: "
                         f"{proof.reason}")
        parts.append(proof)
    inner, tile = parts
    return dataclasses.replace(
        inner, seconds=time.perf_counter() - start, classes=inner.classes + tile.classes,
        side_conditions=inner.side_conditions + tile.side_conditions,
        roles=inner.roles + tile.roles, tau=f"{inner.tau}; per-tile projection: {tile.tau}",
        cases=[split.note] + inner.cases + tile.cases)


__all__ = ["Split", "prove_per_tile", "split_per_tile"]
