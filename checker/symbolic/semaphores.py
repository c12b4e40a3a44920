"""Global semaphores as classes of the prover: one counter each, no phases.

model/steps.py states their step rules: `semaphore_signal(inc)` adds inc times the lockstep
copies (`Semaphore(copies=)`: clusters of the grid that run the same program alongside the
modelled one); `semaphore_wait(value)` blocks until the counter is at least `value`, then takes
`value` from it when `decrement=True`. No rule breaks on a semaphore; what a proof must show is
that no wait blocks for ever. Each semaphore is a class of its own (classes.py) whose one
instance keeps the counter in its phase variable, and a semaphore wait is a wait of the static
order argument (prove.py, point 4): the class system proves it enabled once every event before
it in tau has happened. The counter is exact, so the class system over-approximates the real
one as for mbarriers (other classes' waits pass at any time there).

Decrementing waits with copies > 1: compile.py then models the copies as blocks of their own
along a lockstep axis (model/grid.py, `lockstep_blocks`); `lower_lockstep` makes the same
rewrite of the program before the fragment is built (an explicit cluster axis, copies 1), so the
prover sees the blocks the explorer sees. What that rewrite cannot carry (remote references or
cluster barriers, which the extra axis would change) is `Unsupported`, as is
`semaphore_signal_parallel` and any lockstep copies in a kernel with a grid (the lockstep model
needs every cluster of the grid to signal alike, which compile_systems checks and the prover
does not).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import z3

from ...model import kinds, primitives as K
from ...model.grid import LOCKSTEP_AXIS, lockstep_blocks
from ...model.ir import Const, Kernel, ModelError, Op, evaluate, free_vars, map_ops
from .counters import COp
from .terms import Unsupported, z_int

SEM_SIGNAL, SEM_WAIT, SEM_TAKE = "sem_signal", "sem_wait", "sem_take"   # COp kinds
SEM_WAITS = (SEM_WAIT, SEM_TAKE)


def takes(op: Op) -> bool:
    """Does `op` take what it waits for from its counter (a decrementing semaphore wait)?"""
    prim = kinds.lookup(op.kind)
    return prim is not None and prim.consumes and op.decrement


def lower_lockstep(kernel: Kernel, fixed: Mapping[str, int]) -> Kernel:
    """The kernel with the lockstep copies of its semaphores made blocks of an explicit cluster
    axis, when compile.py models them so (decrementing waits); else the kernel itself."""
    sems = [a for a in kernel.barriers if a.semaphore]
    if not sems:
        return kernel
    for op in kernel.ops():
        if op.kind == K.SEMAPHORE_SIGNAL_PARALLEL:
            raise Unsupported(f"`{op.describe()}` (signals landing in no guaranteed order) is "
                              "outside the prover's fragment", op.loc)
    env = dict(fixed)
    try:
        blocks = math.prod(evaluate(n, env) for _, n in kernel.cluster)
        copies = [evaluate(a.copies, env) for a in sems]
    except ModelError:
        raise Unsupported("the lockstep copies of a semaphore or the cluster shape depend on "
                          "symbolic parameters", sems[0].loc) from None
    if kernel.grid and any(c > 1 for c in copies):
        # the lockstep model holds only while every cluster of the grid signals alike
        # (compile_systems reports BP190 otherwise); the prover does not check that
        raise Unsupported("a semaphore signalled by lockstep copies in a kernel with a grid: "
                          "whether every cluster signals alike is left to the explorer",
                          sems[0].loc)
    n = lockstep_blocks(kernel, env, blocks)
    if n == 1:
        if any(c > 1 for c in copies) and any(
                takes(op) for op in kernel.ops()):
            # compile.py reports these as unmodelled (BP190): nothing to prove
            raise Unsupported("decrementing semaphore waits on a semaphore signalled by "
                              "lockstep copies the model cannot make blocks of", sems[0].loc)
        return kernel
    for op in kernel.ops():
        if (op.barrier is not None and op.barrier.block is not None) or \
                any(a.cluster for a in kernel.barriers):
            raise Unsupported("lockstep copies of a semaphore beside remote or cluster barrier "
                              "operations are outside the prover's fragment", op.loc)
    single = {a.name: dataclasses.replace(a, copies=Const(1)) for a in sems}

    def ref(r):
        if r is None or r.alloc.name not in single:
            return r
        return dataclasses.replace(r, alloc=single[r.alloc.name])

    def rewrite(body) -> tuple:
        return map_ops(body, lambda op: dataclasses.replace(op, barrier=ref(op.barrier)))

    return kernel.replace(
        body=rewrite(kernel.body),
        barriers=tuple(single.get(a.name, a) for a in kernel.barriers),
        cluster=tuple(kernel.cluster) + ((LOCKSTEP_AXIS, Const(n)),),
        notes=tuple(kernel.notes) + (f"the {n} lockstep copies of the semaphores' clusters are "
                                     "blocks of their own",))


def semaphore_cops(builder, op: Op, ctx, guard, rank: int, inst: int) -> list[COp]:
    """The class operations of one semaphore operation (program.py's `_cops`)."""
    text = op.describe()
    amount = ctx.int(op.count)
    if op.kind == K.SEMAPHORE_SIGNAL:
        copies = z_int(op.barrier.alloc.copies, builder.frag.base_env)
        if free_vars(op.barrier.alloc.copies) - set(builder.frag.params):
            raise Unsupported(f"`{text}`: the lockstep copies are not a parameter expression",
                              op.loc)
        return [COp(SEM_SIGNAL, (inst,), z3.simplify(amount * copies), guard=guard, rank=rank,
                    text=text, primary=inst)]
    if op.kind == K.SEMAPHORE_WAIT:
        return [COp(SEM_TAKE if op.decrement else SEM_WAIT, (inst,), amount, guard=guard,
                    rank=rank, text=text, primary=inst)]
    raise Unsupported(f"{op.kind} on semaphore `{op.barrier.alloc.name}`", op.loc)
