"""Named barriers (`bar.sync` / `bar.arrive`, `syncthreads`) as barrier classes of the prover.

model/hw_barriers.py states their step rules: 16 instances per block; an arrival adds the
arriving agent's hardware threads (a warpgroup: num_warps x 32, a warp of a warp region: 32) to
the open phase, which completes when the phase's count is reached; `bar.sync` arrives, then waits
for the completion of the phase it arrived in. `lower_named_barriers` rewrites each named
barrier into an mbarrier of the same count (in warps) before the fragment is built:

    bar.arrive(id, n)   ->  arrive(named_bar[id], count=threads/32)
    bar.sync(id, n)     ->  arrive(named_bar[id], count=threads/32) (a *sync arrival*)
                            barrier_wait(named_bar[id])

Why a proof of the rewritten program is a proof of the original (every reachable state of
model/hw_barriers.py maps to one of the rewritten program while the latter breaks no rule):
- completions: the same counts of the same arrivals, so phases complete at the same steps; an
  arrival past the count (BP142 on hardware) is an arrival past `pending` (a rule error here);
- waits: the hardware wait passes once the barrier has moved past the phase the thread arrived
  in, barrier_wait once the completion after the last one the thread observed happened. They
  agree when, at each sync arrival, the thread has observed every completion so far (or has never
  waited and the barrier is in its first phase) and no second completion happens before its wait
  passes. The first is an error condition the class systems check at every sync arrival
  (encode.py, `COp.sync`), the second is BP101, checked as for any barrier_wait;
- rules: BP142 by count mismatch cannot happen (every operation on one id must state the same
  count, else `Unsupported`); BP141 cannot (all blocking aligned syncs of one id are one
  instruction, and none is reached from a branch on the lane); BP140/BP143 are checked here on
  the concrete ids and counts; BP144 is a deadlock. An open phase at exit is legal on hardware,
  so BP104 is not checked for these instances (`CInst.hw`); BP103 still is (a stronger claim).
The cluster barrier in arrive-wait pairs is lowered by cluster_sync.py.
"""

from __future__ import annotations

from typing import Mapping

from ...model import primitives as K
from ...model.hw_barriers import ALL_THREADS, LANE, NAMED_BARRIERS, WARP_SIZE
from ...model.ir import (BarrierAlloc, BarrierRef, Const, Kernel, Loop, ModelError, Op,
                         WarpRegion, When, evaluate, free_vars, map_ops)
from .terms import Unsupported

NAMED_KINDS = (K.BAR_SYNC, K.BAR_ARRIVE)
# Op.name of the arrival half of a lowered bar.sync: program.py marks its COp `sync`.
SYNC_ARRIVAL = "bar.sync arrival"
PREFIX = "named_bar["


def is_named_barrier(alloc: BarrierAlloc) -> bool:
    """Is this allocation a lowered named barrier? (Its name is no identifier, so no
    allocation of a protocol can carry it.)"""
    return alloc.name.startswith(PREFIX)


def _walk_ops(body, in_region=False, lane=False):
    for stmt in body:
        if isinstance(stmt, Op):
            yield stmt, in_region, lane
        elif isinstance(stmt, Loop):
            yield from _walk_ops(stmt.body, in_region, lane)
        elif isinstance(stmt, When):
            split = lane or LANE in free_vars(stmt.cond)
            yield from _walk_ops(stmt.then, in_region, split)
            yield from _walk_ops(stmt.orelse, in_region, split)
        elif isinstance(stmt, WarpRegion):
            yield from _walk_ops(stmt.body, True, lane)


def lower_named_barriers(kernel: Kernel, fixed: Mapping[str, int]) -> Kernel:
    """The kernel with its named barriers rewritten into mbarriers (module docstring); the
    kernel itself when it has none. Raises Unsupported for what the rewrite cannot carry."""
    named = [(op, region, lane) for op, region, lane in _walk_ops(kernel.body)
             if op.kind in NAMED_KINDS]
    if not named:
        return kernel

    def concrete(e, what, op) -> int:
        if free_vars(e) - set(fixed):
            raise Unsupported(f"`{op.describe()}`: its {what} `{e}` depends on symbolic "
                              "parameters, loop variables or the thread", op.loc)
        try:
            return evaluate(e, fixed)
        except ModelError as err:
            raise Unsupported(f"`{op.describe()}`: its {what} cannot be evaluated ({err})",
                              op.loc) from None

    block = concrete(kernel.num_threads, "number of threads per block", named[0][0]) \
        * kernel.num_warps * WARP_SIZE
    counts: dict[int, tuple[int, Op]] = {}
    sync_sites: dict[int, list[Op]] = {}
    lowered: dict[int, tuple[int, int, bool]] = {}     # id(op) -> (bar id, count, in region)
    for op, region, lane in named:
        if lane:
            raise Unsupported(f"`{op.describe()}` is reached from a branch on the lane index "
                              "(BP141 is left to the explorer)", op.loc)
        bar = concrete(op.bar_id, "barrier id", op)
        count = block if op.name == ALL_THREADS else concrete(op.count, "thread count", op)
        if not 0 <= bar < NAMED_BARRIERS or count <= 0 or count % WARP_SIZE or count > block:
            raise Unsupported(f"`{op.describe()}`: id {bar} or thread count {count} is out of "
                              "range (BP140/BP143, left to the explorer)", op.loc)
        first = counts.setdefault(bar, (count, op))
        if first[0] != count:
            raise Unsupported(f"named barrier {bar} is used with thread counts {first[0]} "
                              f"({first[1].loc}) and {count} (BP142 is left to the explorer)",
                              op.loc)
        if op.kind == K.BAR_SYNC and op.aligned:
            sites = sync_sites.setdefault(bar, [])
            if not any(s is op for s in sites):
                sites.append(op)
            if len(sites) > 1:
                raise Unsupported(f"named barrier {bar} is synced at two aligned bar.sync "
                                  f"instructions ({sites[0].loc} and {op.loc}): whether they "
                                  "meet in one phase (BP141) is left to the explorer", op.loc)
        lowered[id(op)] = (bar, count, region)
    allocs = {bar: BarrierAlloc(f"{PREFIX}{bar}]", Const(count // WARP_SIZE), loc=first_op.loc)
              for bar, (count, first_op) in counts.items()}
    per_agent = {False: kernel.num_warps, True: 1}      # arrivals in warps

    def lower(op: Op):
        if id(op) not in lowered:
            return op
        bar, _, region = lowered[id(op)]
        ref = BarrierRef(allocs[bar])
        amount = Const(per_agent[region])
        if op.kind == K.BAR_ARRIVE:
            return Op(K.ARRIVE, ref, count=amount, loc=op.loc)
        return (Op(K.ARRIVE, ref, count=amount, name=SYNC_ARRIVAL, loc=op.loc),
                Op(K.BARRIER_WAIT, ref, loc=op.loc))

    def rewrite(body) -> tuple:
        return map_ops(body, lower)

    return kernel.replace(body=rewrite(kernel.body),
                          barriers=tuple(kernel.barriers) + tuple(allocs.values()))


def legal_at_exit(system, violation) -> bool:
    """An open phase of a lowered named barrier at exit: BP104 of the rewritten program, legal
    for the hardware barrier it stands for (for replays of candidate orders, order.py)."""
    return violation.code == "BP104" and violation.inst is not None and \
        is_named_barrier(system.instances[violation.inst].alloc)
