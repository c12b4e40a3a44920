"""Barriers the kernel initialises itself (`explicit_init=True`), reduced to barriers that start
initialised, when the init is published to every user before any use.

model/init_visibility.py states who sees an init (BP147): the initialising thread at once,
another thread of the block through a CTA-wide sync in which the initialiser arrived after the
init, the async proxy (TMA landings, tcgen05 commits) after a proxy fence. The prover's counter
abstraction counts threads of a role and keeps no per-thread view of an init, so instead of
encoding visibility this module recognises the shape every CUTLASS pipeline has (init in one
thread, `fence_barrier_init()`, `__syncthreads()`) and proves, statically, that it publishes
every init to every user before any use:

- the kernel's body is a prologue, then an unconditional `syncthreads()` at the top level, then
  the rest; one block (no cluster: a peer block learns an init only through the cluster
  barrier) and no warp regions;
- the prologue holds only `mbarrier_init`, `fence_mbarrier_init` and `fence_proxy_async`, all
  under the same conditions, which select exactly one existing thread (`thread == c`), with a
  fence after the last init; nothing of it can block, so every thread reaches the sync;
- every instance of every explicitly initialised barrier is initialised there exactly once: a
  scalar barrier by one init outside loops, a 1-D array of n barriers by one init
  `bar.at[s]` in a loop over s of n iterations (n as an expression: for every value);
- no init, fence or sync after the prologue's sync.

Then every state of the kernel after the sync is a state of the rest run on barriers that start
initialised (every instance was initialised once and is seen by every thread and the async
proxy: no BP147), with the same steps; the prologue and the sync break no rule and cannot
deadlock. So the prover proves the rest, with the barriers declared initialised. A kernel of
another shape raises `Unsupported` with the reason, and its neighbours that break BP147 are
never rewritten (each misses a fence, a sync or an init).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import z3

from ...model import primitives as K
from ...model.init_visibility import INIT_KINDS
from ...model.ir import (BarrierRef, Const, Kernel, Loop, Op, Var, WarpRegion, When, free_vars,
                         map_ops, walk)
from .terms import Solver, Unsupported, z_bool, z_int

SYNC = K.BAR_SYNC


def publish_inits(kernel: Kernel, symbolic: Sequence[str],
                  fixed: Mapping[str, int]) -> tuple[Kernel, str | None]:
    """(the kernel with its init prologue and sync dropped and its barriers initialised, a note
    saying so), or (kernel, None) when no barrier is initialised by the kernel."""
    explicit = [b for b in kernel.barriers if b.explicit_init]
    if not explicit:
        return kernel, None
    env = {n: (z3.Int(n) if n in symbolic else z3.IntVal(int(fixed[n]))) for n in kernel.params}
    solver = Solver([z_bool(a, env) for a in kernel.assumptions])
    where = explicit[0].loc
    if any(True for _ in _warp_regions(kernel.body)):
        raise Unsupported("explicitly initialised barriers in a kernel with warp regions: init "
                          "visibility is outside the prover's fragment", where)
    for axis, size in kernel.cluster:
        if not solver.valid(z_int(size, env) == 1):
            raise Unsupported(f"explicitly initialised barriers in a cluster (along {axis}): "
                              "a peer block's view of an init is outside the prover's fragment",
                              where)
    body = list(kernel.body)
    sync = next((n for n, s in enumerate(body) if isinstance(s, Op) and s.kind == SYNC), None)
    if sync is not None and not _whole_block(body[sync]):
        raise Unsupported(f"`{body[sync].describe()}` before the first use is not a "
                          "syncthreads() of the whole block", body[sync].loc)
    if sync is None:
        raise Unsupported("the barriers the kernel initialises are not published by an "
                          "unconditional syncthreads() at the top level of the kernel", where)
    prologue, rest = body[:sync], body[sync + 1:]
    for s in walk(tuple(rest)):
        if isinstance(s, Op) and (s.kind in INIT_KINDS or s.kind == SYNC):
            raise Unsupported(f"`{s.describe()}` after the sync that publishes the inits: "
                              "only an init prologue before one sync is in the prover's "
                              "fragment", s.loc)
    ops = list(_prologue_ops(prologue, []))
    if not ops:
        raise Unsupported("no mbarrier_init before the first syncthreads()", body[sync].loc)
    conds = ops[0][1]
    for op, c, _ in ops:
        if op.kind not in INIT_KINDS:
            raise Unsupported(f"`{op.describe()}` before the sync that publishes the inits: "
                              "the prologue may only initialise and fence", op.loc)
        if not _same_conds(c, conds):
            raise Unsupported(f"`{op.describe()}` runs under other conditions than the other "
                              "inits: one thread must initialise and fence", op.loc)
    _one_thread(kernel, conds, env, solver, ops[0][0].loc)
    last_init = max(n for n, (op, _, _) in enumerate(ops) if op.kind == K.MBARRIER_INIT)
    if not any(op.kind in (K.FENCE_MBARRIER_INIT, K.FENCE_PROXY_ASYNC)
               for op, _, _ in ops[last_init + 1:]):
        raise Unsupported("no fence_mbarrier_init after the last mbarrier_init: the async "
                          "proxy may not see the inits (BP147 is left to the explorer)",
                          ops[last_init][0].loc)
    for alloc in explicit:
        _initialised_once(alloc, [(op, loops) for op, _, loops in ops
                                  if op.kind == K.MBARRIER_INIT], env, solver)
    for op, _, _ in ops:
        if op.kind == K.MBARRIER_INIT and not op.barrier.alloc.explicit_init:
            raise Unsupported(f"`{op.describe()}` initialises a barrier that starts "
                              "initialised", op.loc)
    started = {b.name: dataclasses.replace(b, explicit_init=False) for b in explicit}
    new = kernel.replace(body=_rebind(tuple(rest), started),
                         barriers=tuple(started.get(b.name, b) for b in kernel.barriers))
    names = ", ".join(f"`{b.name}`" for b in explicit)
    return new, (f"{names}: initialised by one thread, fenced and published by the syncthreads() "
                 f"at {body[sync].loc} before any use (checked statically), so proved as "
                 "barriers that start initialised")


def _whole_block(op: Op) -> bool:
    """`bar.sync 0` with no thread count: every thread of the block (a named barrier with a
    count syncs only some)."""
    return isinstance(op.count, Const) and op.count.value == 0


def _warp_regions(body):
    return (s for s in walk(body) if isinstance(s, WarpRegion))


def _prologue_ops(stmts, conds, loops=()):
    """(op, its When conditions, the loops around it) in program order."""
    for s in stmts:
        if isinstance(s, Op):
            yield s, conds, loops
        elif isinstance(s, When):
            yield from _prologue_ops(s.then, conds + [(s.cond, True)], loops)
            yield from _prologue_ops(s.orelse, conds + [(s.cond, False)], loops)
        elif isinstance(s, Loop):
            if conds and any(s.var in free_vars(c) for c, _ in conds):
                raise Unsupported("a loop variable in the init thread's condition", s.loc)
            yield from _prologue_ops(s.body, conds, loops + (s,))
        else:
            raise Unsupported("only inits and fences may precede the sync that publishes the "
                              "inits", getattr(s, "loc", None))


def _same_conds(a, b) -> bool:
    return len(a) == len(b) and all(x is y or (repr(x[0]) == repr(y[0]) and x[1] == y[1])
                                    for x, y in zip(a, b))


def _one_thread(kernel: Kernel, conds, env, solver: Solver, loc) -> None:
    """The conditions select exactly one thread that exists, whatever the parameters."""
    axis = kernel.thread_axis
    t, u = z3.Int("init!t"), z3.Int("init!u")
    n = z_int(kernel.num_threads, env)

    def holds(x):
        e = {**env, axis: x}
        return z3.And([z_bool(c, e) if pos else z3.Not(z_bool(c, e)) for c, pos in conds]
                      or [z3.BoolVal(True)])

    for c, _ in conds:
        if free_vars(c) - {axis} - set(kernel.params):
            raise Unsupported(f"the init thread's condition `{c}` depends on more than the "
                              "thread index and the parameters", loc)
    exists = solver.valid(z3.Exists([t], z3.And(t >= 0, t < n, holds(t))))
    unique = solver.valid(z3.ForAll([t, u], z3.Implies(
        z3.And(t >= 0, t < n, u >= 0, u < n, holds(t), holds(u)), t == u)))
    if not (exists and unique):
        raise Unsupported("the inits are not run by exactly one thread of the block for every "
                          "parameter value", loc)


def _initialised_once(alloc, inits, env, solver: Solver) -> None:
    """Every instance of `alloc` is initialised exactly once by the prologue."""
    mine = [(op, loops) for op, loops in inits if op.barrier.alloc.name == alloc.name]
    if len(mine) != 1:
        raise Unsupported(f"`{alloc.name}` is initialised by {len(mine)} mbarrier_init "
                          "operations in the prologue: one (in a loop over its barriers) is in "
                          "the prover's fragment", alloc.loc)
    op, loops = mine[0]
    ref = op.barrier
    if ref.block is not None:
        raise Unsupported(f"`{op.describe()}` initialises another block's barrier", op.loc)
    shape = list(alloc.shape)
    if alloc.scalar or all(_is_one(d, env, solver) for d in shape):
        if loops:
            raise Unsupported(f"`{op.describe()}` initialises one barrier in a loop (once per "
                              "iteration)", op.loc)
        return
    if len(shape) != 1 or len(loops) != 1 or len(ref.index) != 1:
        raise Unsupported(f"`{op.describe()}`: an array of barriers is initialised by one loop "
                          "over its barriers (`with k.loop(n) as s: mbarrier_init(bar.at[s])`) "
                          "in the prover's fragment", op.loc)
    loop = loops[0]
    index = ref.index[0]
    if not (isinstance(index, Var) and index.name == loop.var):
        raise Unsupported(f"`{op.describe()}` is not indexed by its loop's variable", op.loc)
    if not solver.valid(z_int(loop.trip, env) == z_int(shape[0], env)):
        raise Unsupported(f"the loop that initialises `{alloc.name}` does not run once per "
                          "barrier of the array", loop.loc)


def _is_one(d, env, solver: Solver) -> bool:
    return solver.valid(z_int(d, env) == 1)


def _rebind(stmts, started: dict) -> tuple:
    """The statements with references to the replaced allocations rebound."""
    def ref(r):
        if r is None or r.alloc.name not in started:
            return r
        return BarrierRef(started[r.alloc.name], r.index, r.block)
    return map_ops(stmts, lambda op: dataclasses.replace(op, barrier=ref(op.barrier)))
