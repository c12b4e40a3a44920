"""An independent reference for the barrier rules: a small, direct interpreter of the IR.

This is the oracle that counterexamples are checked against for *correctness*, as opposed to the
concrete interpreter (model/interpreter.py), which re-runs the step rules of model/semantics.py
and so can only check that an engine's trace is *consistent* with them. It was written from the
rules as SEMANTICS.md states them (PTX ISA mbarrier, Pallas' three usage rules) and does not import
model/semantics.py, model/interpreter.py or anything in checker/.

What it shares with the main model, and why that is acceptable:
- model/ir.py: the IR's data types and `evaluate` for integer expressions. The IR is the input
  both read; a bug in how a frontend builds it is outside what any replay of it can see.
- the trace format: the names of agents (`wg0`, `b1.wg0`, `wg0.warp1`, `tma`, `async`,
  `tcgen05(wg0)`), of barrier instances (`full[1]`, `bar@1`) and the text of each step
  (`copy_gmem_to_smem(full[0], 16384B)`). A trace is replayed by these names and texts, not by
  the explorer's action numbers, so the two must name things alike; a naming difference shows up
  as a failed replay, never as a silent agreement.

Everything else is its own: threads are objects with a list of actions built by walking the
structured program, barriers are objects with phase / pending / tx / expected, a Pallas wait
keeps the thread's private parity bit (flipped at each successful wait, as Pallas lowers
`barrier_wait`), in-flight TMA landings are a plain list, tcgen05 queues are per-thread FIFOs.
It is read beside SEMANTICS.md from top to bottom, and slow on purpose: clarity over speed. The
core is this module; the hardware barriers (`hardware.py`: named / block barriers, the cluster
barrier), global semaphores (`semaphores.py`), mbarrier init visibility (`inits.py`) and memory
effects with races (`memory.py`) are one module each, importing nothing of the model but the IR
either. The core stays one module of about a thousand lines: the actions, the mbarrier step
rules, judging a state, replay and the search are one statement of the rules, read top to bottom
beside SEMANTICS.md; split, they would scatter what an auditor compares. `replay` decides the violation
code of a trace on its own; `explore` is a plain breadth-first search for small models, to
cross-check `verified`.

>>> from barrierproof.model.samples import lost_arrival
>>> result = replay(lost_arrival.build(), [("wg0", "barrier_arrive(bar)")])
>>> result.outcome, result.code
('deadlock', 'BP100')
"""

from __future__ import annotations

import copy
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..ir import (MAX_ARRIVALS, MAX_TX, MEMORY_KINDS, BarrierRef, Const, Kernel, Loop,
                  ModelError, Op, When, WarpRegion, evaluate, free_vars, iter_ops, walk)
from .hardware import ClusterHardware, RulesHardware
from .inits import RulesInits, single_inits
from .memory import ClusterMemory, RulesMemory, copy_dest, unmatched
from .machine import (IN_REGION, LANE, LANE_SPLIT, PALLAS_TEST, PALLAS_WAIT, PARITY_WAIT,
                      WARP_THREADS, Action, Finding, Machine, Mbarrier, ReferenceError, Thread)
from .semaphores import ClusterSemaphores

# ----------------------------------------------------------------------------------------------
# Building the cluster: threads with their actions, barrier instances, static findings
# ----------------------------------------------------------------------------------------------

class Cluster(ClusterHardware, ClusterSemaphores, ClusterMemory):
    """One cluster of blocks at one grid position, for concrete parameter values."""

    def __init__(self, kernel: Kernel, params: Mapping[str, int] | None = None,
                 grid_position: Mapping[str, int] | None = None):
        self.kernel = kernel
        self.params = kernel.param_values(params)
        self.findings: list[Finding] = []
        position = dict(grid_position or {a: 0 for a, _ in kernel.grid})
        self.env = {**self.params, **position}
        self.axes = [a for a, _ in kernel.cluster]
        self.shape = [evaluate(n, self.env) for _, n in kernel.cluster]
        if any(n < 1 for n in self.shape):
            raise ModelError(f"cluster shape {self.shape} has an empty axis", loc=kernel.loc)
        # Clusters that take from a shared semaphore in lockstep with this one: clusters of
        # their own, as one more cluster axis (see `lockstep_copies`).
        self.lockstep = lockstep_copies(kernel, self.env)
        if self.lockstep > 1:
            self.axes.append(LOCKSTEP)
            self.shape.append(self.lockstep)
        self.blocks = list(itertools.product(*[range(n) for n in self.shape]))
        self.multi_block = len(self.blocks) > 1
        self.barriers: dict[str, Mbarrier] = {}
        self.instance_of: dict[tuple, str] = {}    # (alloc name, index, block) -> instance name
        self.allocs = {a.name: a for a in kernel.barriers}
        for alloc in kernel.barriers:
            self._allocate(alloc)
        self.block_of_instance = {name: block for (_, _, block), name in self.instance_of.items()}
        self._memory_setup()
        self.threads: dict[str, Thread] = {}
        nthreads = evaluate(kernel.num_threads, self.env)
        if nthreads < 1:
            raise ModelError(f"num_threads is {nthreads}", loc=kernel.loc)
        with_warps = any(isinstance(s, WarpRegion) for s in walk(kernel.body))
        for block in self.blocks:
            prefix = ("b" + ",".join(map(str, block)) + ".") if self.multi_block else ""
            for t in range(nthreads):
                name = f"{prefix}{kernel.thread_axis}{t}"
                self.threads[name] = Thread(name, block, t, None)
                if with_warps:
                    for w in range(1, kernel.num_warps):
                        wname = f"{name}.{kernel.warp_axis}{w}"
                        self.threads[wname] = Thread(wname, block, t, w)
        for thread in list(self.threads.values()):
            if thread.warp is None:
                self._walk(kernel.body, self._thread_env(thread), thread)
        self._memory_finish()
        self.cluster_order()
        single_inits(self.threads)

    def _allocate(self, alloc) -> None:
        if alloc.semaphore:
            self._allocate_semaphore(alloc)
            return
        arrivals = evaluate(alloc.num_arrivals, self.env)
        expected = arrivals
        if alloc.cluster:
            for axis in alloc.collective_axes:
                if axis not in self.axes:
                    raise ModelError(f"collective axis {axis!r} of `{alloc.name}` is not a "
                                     "cluster axis", loc=alloc.loc)
            # PTX count of a ClusterBarrier: its own block's arrivals plus every peer along each
            # collective axis.
            expected = arrivals * (1 + sum(self.shape[self.axes.index(a)] - 1
                                           for a in alloc.collective_axes))
        if arrivals < 1 or expected > MAX_ARRIVALS:
            self.findings.append(Finding("BP121", f"`{alloc.name}` expects {expected} arrivals",
                                         alloc.loc))
            expected = max(1, min(expected, MAX_ARRIVALS))
        shape = [evaluate(n, self.env) for n in alloc.shape]
        if any(n < 1 for n in shape):
            raise ModelError(f"`{alloc.name}` has an empty dimension", loc=alloc.loc)
        for block in self.blocks:
            for index in itertools.product(*[range(n) for n in shape]):
                name = alloc.name
                if not alloc.scalar:
                    name += "[" + ",".join(map(str, index)) + "]"
                if self.multi_block:
                    name += "@" + ",".join(map(str, block))
                self.instance_of[(alloc.name, index, block)] = name
                self.barriers[name] = Mbarrier(name, expected, pending=expected)

    def _thread_env(self, thread: Thread) -> dict[str, int]:
        env = dict(self.env)
        env.update(zip(self.axes, thread.block))
        env.setdefault("thread", thread.thread)
        env.setdefault("warp", thread.warp or 0)
        env[self.kernel.thread_axis] = thread.thread
        env[self.kernel.warp_axis] = thread.warp or 0
        return env

    # -- walking the structured program ------------------------------------------------------

    def _walk(self, body, env: dict[str, int], thread: Thread) -> None:
        for stmt in body:
            if isinstance(stmt, Op):
                self._op(stmt, env, thread)
            elif isinstance(stmt, Loop):
                outer = env.get(stmt.var)
                for i in range(evaluate(stmt.trip, env)):
                    env[stmt.var] = i
                    self._walk(stmt.body, env, thread)
                if outer is None:
                    env.pop(stmt.var, None)
                else:
                    env[stmt.var] = outer
            elif isinstance(stmt, When):
                if LANE in free_vars(stmt.cond):
                    # A branch on the lane splits the warp: it runs both sides, each with part
                    # of its threads (SIMT divergence).
                    split = {**env, LANE_SPLIT: 1}
                    self._walk(stmt.then, split, thread)
                    self._walk(stmt.orelse, split, thread)
                    continue
                self._walk(stmt.then if evaluate(stmt.cond, env) else stmt.orelse, env, thread)
            elif isinstance(stmt, WarpRegion):
                self._region(stmt, env, thread)

    def _region(self, region: WarpRegion, env: dict[str, int], parent: Thread) -> None:
        """core_map over a WarpMesh: the warpgroup forks its warps, runs as warp 0, and joins."""
        if parent.warp is not None:
            raise ModelError("a warp region inside a warp region", loc=region.loc)
        parent.actions.append(Action("fork", f"core_map({region.axis}): fork warps", region.loc))
        fork_index = len(parent.actions)
        ends = []
        for w in range(1, self.kernel.num_warps):
            warp = self.threads[f"{parent.name}.{self.kernel.warp_axis}{w}"]
            warp.actions.append(Action("enter", f"core_map({region.axis}): enter", region.loc,
                                       link=(parent.name, fork_index)))
            self._walk(region.body, {**env, region.axis: w, self.kernel.warp_axis: w,
                                     IN_REGION: 1}, warp)
            ends.append((warp.name, len(warp.actions)))
        self._walk(region.body, {**env, region.axis: 0, self.kernel.warp_axis: 0, IN_REGION: 1},
                   parent)
        for warp, end in ends:      # the join orders each warp's tail of the region
            self.joined[(warp, end)] = (parent.name, len(parent.actions))
        parent.actions.append(Action("join", f"core_map({region.axis}): join warps", region.loc,
                                     link=tuple(ends)))

    def _instance(self, ref: BarrierRef, env, block, loc) -> tuple[str, tuple[int, ...]] | None:
        """The instance a reference names, with its block; None (and BP120) when out of range."""
        alloc = ref.alloc
        if self.allocs.get(alloc.name) is not alloc:
            raise ModelError(f"barrier `{alloc.name}` is not allocated by this kernel", loc=loc)
        shape = [evaluate(n, env) for n in alloc.shape]
        index = tuple(evaluate(i, env) for i in ref.index) or (0,) * len(shape)
        if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
            self.findings.append(Finding("BP120", f"index {index} of `{alloc.name}` out of range",
                                         loc))
            return None
        if ref.block is not None:
            # a peer of the thread's own cluster: a lockstep copy reaches its own copy's peers
            block = tuple(evaluate(c, env) for c in ref.block) + \
                (block[len(ref.block):] if self.lockstep > 1 else ())
            if block not in self.blocks:
                self.findings.append(Finding("BP120", f"block {block} not in the cluster", loc))
                return None
        return self.instance_of[(alloc.name, index, block)], block

    def _peers(self, block, axes, loc) -> list[tuple[int, ...]]:
        """Blocks equal to `block` except along the collective axes (a multicast reaches them)."""
        for axis in axes:
            if axis not in self.axes:
                raise ModelError(f"collective axis {axis!r} is not a cluster axis", loc=loc)
        free = [self.axes.index(a) for a in axes]
        return [b for b in self.blocks
                if all(b[d] == block[d] for d in range(len(block)) if d not in free)]

    def _fan_out(self, alloc, name: str, index, block) -> tuple[str, ...]:
        """A local arrive on a ClusterBarrier reaches its own block and every block one step
        away along a single collective axis."""
        if not alloc.cluster:
            return (name,)
        if alloc.leader_tracked:    # every arrival goes to block 0 along the collective axis
            d = self.axes.index(alloc.collective_axes[0])
            return (self.instance_of[(alloc.name, index, block[:d] + (0,) + block[d + 1:])],)
        out = [name]
        for axis in alloc.collective_axes:
            d = self.axes.index(axis)
            out += [self.instance_of[(alloc.name, index, block[:d] + (c,) + block[d + 1:])]
                    for c in range(self.shape[d]) if c != block[d]]
        return tuple(out)

    def _op(self, op: Op, env, thread: Thread) -> None:
        kind, loc = op.kind, op.loc
        add = thread.actions.append
        if kind == "unmodeled":
            add(Action("nop", op.describe(), loc))
            return
        if kind in MEMORY_KINDS:
            self._memory_op(op, env, thread)
            return
        if kind in HW_BARRIER_KINDS:
            self._hw_barrier(op, env, thread)
            return
        if kind in SEMAPHORE_KINDS:
            self._semaphore(op, env, thread)
            return
        if kind in ("fence_mbarrier_init", "fence_proxy_async"):
            add(Action(kind, f"{kind}()", loc))
            return
        if op.barrier is None:
            if kind != "tcgen05_mma":
                raise ModelError(f"{kind} needs a barrier", loc=loc)
            add(Action(kind, "tcgen05_mma()", loc, tcgen05_targets=(),
                       memory=self.mma_accesses(op, env, thread)))
            return
        found = self._instance(op.barrier, env, thread.block, loc)
        if found is None:
            return
        name, block = found
        alloc = op.barrier.alloc
        index = tuple(evaluate(i, env) for i in op.barrier.index) or \
            (0,) * len(alloc.shape)
        nbytes = evaluate(op.bytes, env)
        if kind in ("barrier_arrive", "arrive", "arrive_drop", "expect_tx", "arrive_expect_tx",
                    "complete_tx"):
            remote = op.barrier.block is not None   # mbarrier.arrive.shared::cluster: one target
            targets = (name,) if remote else self._fan_out(alloc, name, index, block)
            if kind in ("barrier_arrive", "arrive"):
                count = evaluate(op.count, env)
                if not 1 <= count <= MAX_ARRIVALS:
                    self.findings.append(Finding("BP121", f"arrive count {count}", loc))
                    return
                text = f"{kind}({name})" if kind == "barrier_arrive" or count == 1 else \
                    f"arrive({name}, count={count})"
                add(Action("arrive", text, loc, targets, count))
            elif kind == "arrive_drop":
                add(Action(kind, f"arrive_drop({name})", loc, targets, 1))
            else:
                if not 0 <= nbytes <= MAX_TX:
                    self.findings.append(Finding("BP121", f"tx-count {nbytes}", loc))
                    return
                add(Action(kind, f"{kind}({name}, {nbytes}B)", loc, targets, nbytes))
        elif kind in (PALLAS_WAIT, PARITY_WAIT, PALLAS_TEST):
            if op.barrier.block is not None and block != thread.block:
                return   # waits are local (BP112, a static finding)
            if kind in (PALLAS_WAIT, PALLAS_TEST):
                add(Action(kind, f"{kind}({name})", loc, wait_on=name))
            elif op.phase is not None:
                # The thread states the phase it means (from 0; -1: the one before the first).
                phase = evaluate(op.phase, env)
                if phase < -1:
                    raise ModelError(f"wait_parity means phase {phase}", loc=loc)
                add(Action(kind, f"wait_parity({name}, phase={phase})", loc,
                           amount=phase % 2, wait_on=name, link=phase + 1))
            else:
                parity = evaluate(op.parity, env) % 2
                add(Action(kind, f"wait_parity({name}, {parity})", loc, amount=parity,
                           wait_on=name))
        elif kind in ("copy_gmem_to_smem", "tma_load", "async_store_smem"):
            if alloc.cluster:
                return   # BP111
            if not 0 <= nbytes <= MAX_TX:
                self.findings.append(Finding("BP121", f"copy of {nbytes} bytes", loc))
                return
            peers = self._peers(block, op.collective_axes, loc)
            if nbytes % len(peers):
                raise ModelError(f"{nbytes} bytes do not split among {len(peers)} blocks", loc=loc)
            # Each receiving block's barrier gets its share of the bytes when the copy lands; a
            # Pallas copy also does arrive.expect_tx(all bytes) on the issuer's barrier at issue.
            landings = tuple(("tma", self.instance_of[(alloc.name, index, p)],
                              nbytes // len(peers)) for p in peers)
            expects = (name,) if kind != "tma_load" else ()
            add(Action("copy", f"{kind}({name}, {nbytes}B)", loc, expects, nbytes,
                       landings=landings,
                       memory=self.copy_accesses(op, env, thread, landings,
                                                 own=not expects and not op.collective_axes)))
        elif kind == "mbarrier_init":
            add(Action(kind, f"mbarrier_init({name})", loc, (name,)))
        elif kind in ("try_cluster_cancel", "cp_async_arrive"):
            if alloc.cluster:
                return
            landing = ("async", name, 0)
            # cp.async's arrival lands once the thread's earlier copies are done: their writes
            # are its own until then
            memory = (self.hand_over_copies(thread, landing, env),) if kind == "cp_async_arrive" \
                else ()
            add(Action("copy", f"{kind}({name})", loc, (), 0, landings=(landing,),
                       memory=memory))
        elif kind in ("tcgen05_mma", "tcgen05_commit_arrive"):
            if alloc.cluster or not alloc.orders_tensor_core:
                return   # BP110 / BP111
            targets = (name,)
            if op.collective_axes:
                targets = tuple(self.instance_of[(alloc.name, index, p)]
                                for p in self._peers(thread.block, op.collective_axes, loc))
            add(Action(kind, f"{kind}({name})", loc, tcgen05_targets=targets,
                       memory=self.mma_accesses(op, env, thread)))
        else:
            raise ModelError(f"unknown operation kind {kind!r}", loc=loc)

    # -- the initial machine ------------------------------------------------------------------

    def machine(self) -> Machine:
        return Machine({n: Thread(t.name, t.block, t.thread, t.warp, t.actions, 0)
                        for n, t in self.threads.items()},
                       copy.deepcopy(self.barriers),
                       queues={n: [] for n, t in self.threads.items()
                               if any(a.tcgen05_targets is not None for a in t.actions)},
                       mma_memory={n: [] for n, t in self.threads.items()
                                   if any(a.tcgen05_targets is not None for a in t.actions)})


# What the reference models: mbarriers (Pallas and PTX level), TMA, tcgen05, warp regions. The
# hardware barriers (bar.sync / bar.arrive, the cluster barrier) and global semaphores are
# outside it.
HW_BARRIER_KINDS = {"bar_sync", "bar_arrive", "cluster_arrive", "cluster_wait"}
SEMAPHORE_KINDS = {"semaphore_signal", "semaphore_wait", "semaphore_signal_parallel"}
INIT_KINDS = {"mbarrier_init", "fence_mbarrier_init", "fence_proxy_async"}
COVERED = HW_BARRIER_KINDS | SEMAPHORE_KINDS | INIT_KINDS | {"barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_mma",
           "tcgen05_commit_arrive", "try_cluster_cancel", "cp_async_arrive", "arrive",
           "arrive_drop", "expect_tx",
           "arrive_expect_tx", "complete_tx", "tma_load", "wait_parity", "unmodeled",
           "async_store_smem", "barrier_test"} | MEMORY_KINDS


def uncovered(kernel: Kernel) -> list[str]:
    """The operation kinds of `kernel` the reference does not model, sorted. The unaligned
    barrier.sync in a branch on the lane (part of a warp arriving) is not modelled."""
    out = ({op.kind for op in iter_ops(kernel.body)} - COVERED) | unmatched(kernel)
    for stmt in walk(kernel.body):
        if isinstance(stmt, When) and LANE in free_vars(stmt.cond):
            if any(op.kind == "bar_sync" and not op.aligned
                   for op in iter_ops(stmt.then + stmt.orelse)):
                out.add("bar_sync(aligned=False) in a lane branch")
    # Lockstep copies are clusters of their own only when one count of copies stands for every
    # semaphore and no cluster barrier would have to span them.
    if _decrementing_lockstep(kernel):
        counts = {str(a.copies) for a in kernel.barriers if a.semaphore}
        if len(counts) > 1 or any(op.kind in ("cluster_arrive", "cluster_wait")
                                  for op in iter_ops(kernel.body)):
            out.add("semaphore_wait(decrement=True) with lockstep copies")
    # Whether a warpgroup's fork hands its inits to its warps is not stated here.
    if any(a.explicit_init for a in kernel.barriers) and \
            any(isinstance(s, WarpRegion) for s in walk(kernel.body)):
        out.add("explicit_init barriers with warp regions")
    return sorted(out)


# The lockstep copies' cluster axis: not an identifier, so no name of a protocol can clash.
LOCKSTEP = "(lockstep)"
# the rules judged when every thread has exited (ranked after every other rule of a state)
AT_EXIT = frozenset({"BP103", "BP104", "BP105", "BP130"})


def _decrementing_lockstep(kernel: Kernel) -> bool:
    """A decrementing wait on a semaphore that other clusters signal in lockstep (copies > 1,
    or a count only the parameters fix)."""
    return any(op.kind == "semaphore_wait" and op.decrement and op.barrier is not None and
               not (isinstance(op.barrier.alloc.copies, Const) and
                    op.barrier.alloc.copies.value == 1)
               for op in iter_ops(kernel.body))


def lockstep_copies(kernel: Kernel, env: Mapping[str, int]) -> int:
    """How many clusters the reference builds along the lockstep axis (1: none).

    `copies` clusters run the same program and signal a global semaphore alongside this one. A
    wait that only reads the counter sees the same value whichever of them it is in, so one
    cluster whose signals count `copies` times stands for all. A decrementing wait takes what
    the other clusters' waits then lack, so every copy is a cluster of its own: its own
    threads, barriers and shared memory, the one counter shared by all."""
    if not _decrementing_lockstep(kernel):
        return 1
    counts = {evaluate(a.copies, env) for a in kernel.barriers if a.semaphore}
    return max(1, counts.pop()) if len(counts) == 1 else 1


def covers(kernel: Kernel) -> bool:
    return not uncovered(kernel)


def syntactic_findings(kernel: Kernel) -> list[Finding]:
    """Rules read off the program text, whatever the parameters: asynchronous arrivals on the
    wrong kind of barrier (BP110, BP111), an unindexed array barrier (BP120), a wait on a peer
    block's barrier (BP112), synchronization outside the model (BP190)."""
    out = []
    for op in iter_ops(kernel.body):
        if op.kind == "unmodeled":
            out.append(Finding("BP190", op.name, op.loc))
            continue
        ref = op.barrier
        if ref is None:
            continue
        asynchronous = op.kind in ("copy_gmem_to_smem", "tma_load", "try_cluster_cancel",
                                   "cp_async_arrive", "async_store_smem",
                                   "tcgen05_mma", "tcgen05_commit_arrive")
        if asynchronous and ref.alloc.cluster:
            out.append(Finding("BP111", f"{op.kind} on ClusterBarrier", op.loc))
        elif op.kind.startswith("tcgen05") and not ref.alloc.orders_tensor_core:
            out.append(Finding("BP110", f"{op.kind} on a Barrier without orders_tensor_core",
                               op.loc))
        if not ref.index and not ref.alloc.scalar:
            out.append(Finding("BP120", f"array barrier `{ref.alloc.name}` without index", op.loc))
        if ref.block is not None and op.kind in (PALLAS_WAIT, PARITY_WAIT, PALLAS_TEST):
            out.append(Finding("BP112", "wait on a peer block's barrier", op.loc))
    return out


def positions(kernel: Kernel, params: Mapping[str, int] | None = None,
              limit: int = 4096) -> list[dict[str, int]]:
    """Grid positions to check: all of them up to `limit`, else first, second and last per axis."""
    values = kernel.param_values(params)
    sizes = [(a, max(1, evaluate(n, values))) for a, n in kernel.grid]
    total = 1
    for _, n in sizes:
        total *= n
    ranges = [range(n) if total <= limit else sorted({0, min(1, n - 1), n - 1}) for _, n in sizes]
    return [dict(zip([a for a, _ in sizes], combo)) for combo in itertools.product(*ranges)]


def static_findings(kernel: Kernel, params: Mapping[str, int] | None = None) -> list[Finding]:
    """Every finding made before any thread moves, over every grid position."""
    found = syntactic_findings(kernel)
    for position in positions(kernel, params):
        found += Cluster(kernel, params, position).findings
    return found


# ----------------------------------------------------------------------------------------------
# The rules
# ----------------------------------------------------------------------------------------------

class Rules(RulesHardware, RulesInits, RulesMemory):
    """The step rules of SEMANTICS.md on a Machine. Each method returns the first rule the step
    breaks (a Finding) or None."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        # Which barriers each thread ever waits on, and the last action index of such a wait.
        self.last_wait: dict[str, dict[str, int]] = {}
        # The same for Pallas waits only: the completion-time overrun rule is theirs; a parity
        # wait is judged by the completion it means (`meant`).
        self.last_pallas_wait: dict[str, dict[str, int]] = {}
        for name, thread in cluster.threads.items():
            last, pallas = {}, {}
            for i, action in enumerate(thread.actions):
                if action.wait_on is not None:
                    last[action.wait_on] = i
                    if action.kind in (PALLAS_WAIT, PALLAS_TEST):
                        pallas[action.wait_on] = i
            self.last_wait[name] = last
            self.last_pallas_wait[name] = pallas
        # Pallas' rule 2 holds a barrier used only through Pallas operations that nobody waits
        # on to no completion at all; one driven with PTX-level operations follows the hardware.
        pallas_kinds = {"barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_mma",
                        "tcgen05_commit_arrive", "try_cluster_cancel", "async_store_smem",
                        "barrier_test"}
        pallas_only: dict[str, bool] = {}
        for op in iter_ops(cluster.kernel.body):
            if op.barrier is not None:
                alloc = op.barrier.alloc.name
                pallas_only[alloc] = pallas_only.get(alloc, True) and op.kind in pallas_kinds
        # Hardware threads of the cluster (the cluster barrier's count), and which threads
        # arrive on each named barrier (those a waiting phase counts, with every thread of the
        # block for syncthreads).
        self.cluster_threads = sum(1 for t in cluster.threads.values() if t.warp is None) * \
            cluster.kernel.num_warps * WARP_THREADS
        self.block_threads = self.cluster_threads // len(cluster.blocks)
        self.named_users: dict[tuple, set[str]] = {}
        for name, thread in cluster.threads.items():
            for action in thread.actions:
                if action.kind == "hw_arrive":
                    self.named_users.setdefault(action.targets[0], set()).add(name)
        self.explicit = {inst for (alloc, _, _), inst in cluster.instance_of.items()
                         if cluster.allocs[alloc].explicit_init}
        waited = {bar for last in self.last_wait.values() for bar in last}
        self.unwaited = {inst for (alloc, _, _), inst in cluster.instance_of.items()
                         if pallas_only.get(alloc) and inst not in waited}

    # -- mbarrier primitives (PTX) -----------------------------------------------------------

    def arrive(self, m: Machine, bar: str, count: int) -> Finding | None:
        b = m.barriers[bar]
        b.pending -= count
        if b.pending < 0:
            return Finding("BP121", f"{bar}: more arrivals than its count in one phase")
        return self.complete_if_done(m, bar)

    def add_tx(self, m: Machine, bar: str, delta: int) -> Finding | None:
        b = m.barriers[bar]
        b.tx += delta
        if abs(b.tx) > MAX_TX:
            return Finding("BP121", f"{bar}: tx-count {b.tx} out of range")
        return self.complete_if_done(m, bar)

    def complete_if_done(self, m: Machine, bar: str) -> Finding | None:
        """The phase completes when no arrival and no tx byte is missing; a participating thread
        that has not observed the completion before it must not see another (rule 1 and 3)."""
        b = m.barriers[bar]
        if b.pending or b.tx:
            return None
        before = b.phase
        b.phase += 1
        b.pending = b.expected
        for name, thread in m.threads.items():
            if bar not in self.last_pallas_wait[name]:
                continue
            seen = m.observed.get((name, bar))
            if (seen or 0) >= before:
                continue
            if self.last_pallas_wait[name][bar] < thread.pc:
                continue   # never waits on it again: judged at exit (BP103)
            at_wait = not thread.done and thread.next().wait_on == bar
            if seen is None and not at_wait:
                continue   # has not started waiting: judged when it does (BP102)
            return Finding("BP101", f"{bar} completes phase {b.phase} while {name} has observed "
                           f"{seen or 0} of its completions")
        return None

    # -- which steps are possible -------------------------------------------------------------

    def can_move(self, m: Machine, thread: Thread) -> bool:
        action = thread.next()
        if action is None:
            return False
        if action.kind == PALLAS_WAIT:
            # Pallas' private parity bit flips at each successful wait; try_wait.parity(bit)
            # succeeds once the phase with that parity completed, i.e. the parity moved on.
            bit = m.waits.get((thread.name, action.wait_on), 0) % 2
            return m.barriers[action.wait_on].phase % 2 != bit
        if action.kind == PARITY_WAIT:
            if action.link is not None:      # the phase meant: pass once its parity is current
                return m.barriers[action.wait_on].phase % 2 == action.link % 2
            return m.barriers[action.wait_on].phase % 2 != action.amount
        if action.kind == "hw_wait":     # bar.sync: until the phase it arrived in completes
            key = action.targets[0]
            return m.named[key][0] > m.hw_arrived[(thread.name, key)]
        if action.kind == "sem_wait":
            return m.barriers[action.targets[0]].phase >= action.amount
        if action.kind == "sem_landed":
            return all(owner != thread.name for _, _, owner in m.signals)
        if action.kind == "cluster_wait":
            arrived = m.hw_arrived.get((thread.name, "cluster"))
            return arrived is None or m.cluster_bar[0] > arrived
        if action.kind == "enter":
            parent, fork_index = action.link
            return m.threads[parent].pc >= fork_index
        if action.kind == "join":
            return all(m.threads[w].pc >= end for w, end in action.link)
        return True

    def moves(self, m: Machine) -> list[tuple[str, str]]:
        """Every possible step as (agent, text), the way a trace names it."""
        out = [(n, t.next().text) for n, t in m.threads.items() if self.can_move(m, t)]
        # Copies alike but for their destinations land in either order: one step each.
        dests: dict[tuple, set[str]] = {}
        tracked: dict[tuple, int] = {}
        for landing, accesses in m.copy_memory:
            dests.setdefault(landing, set()).add(copy_dest(accesses))
            tracked[landing] = tracked.get(landing, 0) + 1
        for landing in sorted(set(m.landings)):
            text = self.landing_text(*landing)
            out += [(landing[0], f"{text} into {d}") for d in sorted(dests.get(landing, ()))]
            if m.landings.count(landing) > tracked.get(landing, 0):
                out.append((landing[0], text))
        for sem, n in sorted({(sem, n) for sem, n, _ in m.signals}):
            out.append(("async", f"signals {sem} (+{n})"))
        for name, queue in m.queues.items():
            if queue:
                out.append((f"tcgen05({name})", self.tcgen05_text(queue[0])))
        return out

    @staticmethod
    def landing_text(kind: str, bar: str, nbytes: int) -> str:
        return f"lands on {bar} ({nbytes}B)" if kind == "tma" else f"arrives on {bar}"

    @staticmethod
    def tcgen05_text(targets: tuple[str, ...]) -> str:
        return "completes, arrives on " + ", ".join(targets) if targets else "mma completes"

    # -- taking a step -------------------------------------------------------------------------

    def step(self, m: Machine, agent: str, text: str) -> Finding | None:
        """Take the step a trace names; ReferenceError if these rules do not allow it."""
        if agent in m.threads:
            thread = m.threads[agent]
            action = thread.next()
            if action is None or action.text != text:
                raise ReferenceError(f"{agent} is at {action.text if action else 'its end'}, "
                                     f"not at {text}")
            if not self.can_move(m, thread):
                raise ReferenceError(f"{agent} cannot take {text}: it is blocked")
            thread.pc += 1
            return self.thread_effect(m, agent, action)
        if agent == "async":
            for signal in m.signals:
                if f"signals {signal[0]} (+{signal[1]})" == text:
                    m.signals.remove(signal)     # identical signals land alike
                    m.barriers[signal[0]].phase += signal[1]
                    return None
        if agent in ("tma", "async"):
            for landing in m.landings:
                base = self.landing_text(*landing)
                if landing[0] != agent or not (text == base or text.startswith(base + " into ")):
                    continue
                dest = text[len(base) + len(" into "):] if text != base else None
                # the first copy issued of those alike (into `dest`, when the step names it); a
                # step naming none is one of the landings that write nothing, while any is in
                # flight (as `moves` offers it): it does not end another's writes
                tracked = [e for e in m.copy_memory if e[0] == landing]
                untracked = dest is None and m.landings.count(landing) > len(tracked)
                entry = None if untracked else next(
                    (e for e in tracked if dest is None or copy_dest(e[1]) == dest), None)
                if dest is not None and entry is None:
                    continue
                m.landings.remove(landing)
                if entry is not None:
                    m.copy_memory.remove(entry)
                kind, bar, nbytes = landing
                return self.add_tx(m, bar, -nbytes) if kind == "tma" else self.arrive(m, bar, 1)
            raise ReferenceError(f"no {agent} operation in flight that {text}")
        if agent.startswith("tcgen05(") and agent[8:-1] in m.queues:
            queue = m.queues[agent[8:-1]]
            if not queue or self.tcgen05_text(queue[0]) != text:
                raise ReferenceError(f"{agent} has no queued op that {text}")
            m.mma_memory[agent[8:-1]].pop(0)
            return self.first(self.arrive(m, bar, 1) for bar in queue.pop(0))
        raise ReferenceError(f"no agent named {agent}")

    @staticmethod
    def first(results: Iterable[Finding | None]) -> Finding | None:
        # Every target receives its arrival (the hardware does them all); report the first rule.
        found = [r for r in results if r is not None]
        return found[0] if found else None

    def thread_effect(self, m: Machine, agent: str, action: Action) -> Finding | None:
        kind = action.kind
        if kind == "hw_arrive":
            return self.named_arrive(m, agent, action)
        if kind == "hw_wait":
            phase = m.hw_arrived.pop((agent, action.targets[0]))
            self.acquire(m, agent, action.targets[0], phase)
            return None
        if kind in INIT_KINDS:
            self.init_effect(m, agent, action)
            return None
        if kind == "hw_split":
            if action.link:         # a bar.sync: the thread waits for the phase it reached
                key = action.targets[0]
                m.hw_arrived[(agent, key)] = m.named.get(key, (0,))[0]
            return Finding("BP141", f"{agent} reaches {action.text} from a branch on the lane: "
                           "part of a warp at each copy of the instruction", action.loc)
        if kind == "cluster_arrive":
            return self.cluster_arrive(m, agent, action)
        if kind == "sem_signal":
            m.barriers[action.targets[0]].phase += action.amount
            return None
        if kind == "sem_wait":
            if action.link:
                m.barriers[action.targets[0]].phase -= action.amount
            return None
        if kind == "sem_send":
            m.signals.extend((sem, n, agent) for _, sem, n in action.landings)
            return None
        if kind == "cluster_wait":
            phase = m.hw_arrived.pop((agent, "cluster"), None)
            if phase is None:
                return Finding("BP145", f"{agent} waits on the cluster barrier without arriving",
                               action.loc)
            self.acquire(m, agent, "cluster", phase)
            return None
        if kind == "arrive":
            return self.first(self.arrive(m, b, action.amount) for b in action.targets)
        if kind == "arrive_drop":
            def drop(bar):
                m.barriers[bar].expected -= 1
                if m.barriers[bar].expected < 0:
                    return Finding("BP121", f"arrive_drop takes {bar}'s count below zero")
                return self.arrive(m, bar, 1)
            return self.first(drop(b) for b in action.targets)
        if kind == "expect_tx":
            return self.first(self.add_tx(m, b, action.amount) for b in action.targets)
        if kind == "complete_tx":
            return self.first(self.add_tx(m, b, -action.amount) for b in action.targets)
        if kind in ("arrive_expect_tx", "copy"):
            found = self.first(r for b in action.targets for r in
                               (self.add_tx(m, b, action.amount), self.arrive(m, b, 1)))
            m.landings.extend(action.landings)
            m.copy_memory.extend((landing, accesses) for landing, accesses in
                                 zip(action.landings, action.memory) if accesses)
            return found
        if kind == PALLAS_TEST:
            # Passes (and flips the private bit, like a barrier_wait) only if a wait would.
            key = (agent, action.wait_on)
            phase = m.barriers[action.wait_on].phase
            if phase % 2 != m.waits.get(key, 0) % 2:
                m.waits[key] = m.waits.get(key, 0) + 1
                m.observed[key] = phase
            return None
        if kind in (PALLAS_WAIT, PARITY_WAIT):
            key = (agent, action.wait_on)
            # a bare parity states no phase: what it returns after is judged across schedules
            stated = kind == PARITY_WAIT and action.link is not None
            meant = self.meant(m, agent, action) if stated else None
            phase = m.barriers[action.wait_on].phase
            if kind == PALLAS_WAIT:      # the private bit counts barrier_wait only
                m.waits[key] = m.waits.get(key, 0) + 1
            m.observed[key] = phase
            if meant is not None and phase != meant:
                return Finding("BP101", f"{agent}'s parity wait on {action.wait_on} means "
                               f"completion {meant} but returns after {phase}")
            return None
        if action.tcgen05_targets is not None:
            m.queues[agent].append(action.tcgen05_targets)
            m.mma_memory[agent].append(action.memory)
        return None

    # -- judging a state -----------------------------------------------------------------------

    @staticmethod
    def meant(m: Machine, agent: str, action: Action) -> int:
        """The completion a parity wait means: the stated phase + 1, or for a bare parity P the
        next completion after the last one observed whose number has parity P + 1 (PTX
        try_wait.parity(P) passes once the phase with parity P has completed)."""
        if action.link is not None:
            return action.link
        seen = m.observed.get((agent, action.wait_on), -1)
        return seen + 1 if (seen - action.amount) % 2 == 0 else seen + 2

    def parity_run_past(self, m: Machine) -> list[Finding]:
        """BP101: a thread at a wait for a stated phase whose barrier has already completed past
        that phase's completion (its parity aliases)."""
        out = []
        for name, thread in m.threads.items():
            action = thread.next()
            if action is not None and action.kind == PARITY_WAIT and action.link is not None and \
                    m.barriers[action.wait_on].phase > self.meant(m, name, action):
                out.append(Finding("BP101", f"{name}'s parity wait on {action.wait_on}: the "
                                   "barrier ran past the completion it means"))
        return out

    def bare_returns(self, m: Machine) -> list[tuple[str, int, int]]:
        """(thread, its pc, completions) for each thread at a bare parity wait that passes now:
        the completion count the wait would return after (SEMANTICS.md: a bare parity wait is
        judged by what it returns after on different schedules)."""
        out = []
        for name, thread in m.threads.items():
            action = thread.next()
            if action is not None and action.kind == PARITY_WAIT and action.link is None \
                    and self.can_move(m, thread):
                out.append((name, thread.pc, m.barriers[action.wait_on].phase))
        return out

    def late_joins(self, m: Machine) -> list[Finding]:
        """BP102: a thread about to wait for the first time on a barrier two phases along."""
        out = []
        for name, thread in m.threads.items():
            action = thread.next()
            if action is not None and action.kind == PALLAS_WAIT and \
                    (name, action.wait_on) not in m.observed and \
                    m.barriers[action.wait_on].phase >= 2:
                out.append(Finding("BP102", f"{name} first waits on {action.wait_on} after "
                                   f"{m.barriers[action.wait_on].phase} completions"))
        return out

    def peer_exited(self, m: Machine) -> list[Finding]:
        """BP146: a thread about to arrive on, expect bytes on or copy into a barrier in the
        shared memory of a peer block whose threads have all exited (PTX: the shared memory of
        an exited CTA of the cluster must not be accessed)."""
        gone = {t.block for t in m.threads.values()} - \
            {t.block for t in m.threads.values() if not t.done}
        if len(self.cluster.blocks) < 2 or not gone:
            return []
        out = []
        block_of = {name: block for (_, _, block), name in self.cluster.instance_of.items()}
        for name, thread in m.threads.items():
            action = thread.next()
            if action is None or action.kind not in ("arrive", "arrive_drop", "expect_tx",
                                                     "arrive_expect_tx", "complete_tx", "copy"):
                continue
            touched = list(action.targets) + [bar for _, bar, _ in action.landings]
            if any(block_of[b] != thread.block and block_of[b] in gone for b in touched):
                out.append(Finding("BP146", f"{name} reaches into an exited block's barrier"))
        # Asynchronous deliveries some other block sends into an exited one: a landing (the
        # same kind, barrier and bytes count as one, issued by whichever thread) or a queued
        # tcgen05 arrival.
        if all(t.done for t in m.threads.values()):
            return out      # at the kernel's exit an in-flight delivery is BP105
        if not hasattr(self, "_remote"):
            self._remote = {landing for t in m.threads.values() for a in t.actions
                            for landing in a.landings if block_of[landing[1]] != t.block}
        remote = self._remote
        if any(landing in remote and block_of[landing[1]] in gone for landing in m.landings):
            out.append(Finding("BP146", "a delivery is in flight into an exited block"))
        for agent, queue in m.queues.items():
            own = m.threads[agent].block
            if any(block_of[b] != own and block_of[b] in gone for entry in queue for b in entry):
                out.append(Finding("BP146", f"a tcgen05 arrival of {agent} is in flight into "
                                   "an exited block"))
        return out

    def at_exit(self, m: Machine) -> list[Finding]:
        """Rule 2 and the hardware's obligations when every thread has finished."""
        out = []
        if m.landings or any(m.queues.values()):
            out.append(Finding("BP105", "asynchronous operations still in flight at exit"))
        out += self.running_past_exit()
        for bar, b in m.barriers.items():
            if b.tx:
                out.append(Finding("BP130", f"{bar} ends with tx-count {b.tx}"))
            elif b.pending != b.expected:
                out.append(Finding("BP104", f"{bar} ends with arrivals of an open phase"))
            if b.phase and bar in self.unwaited:
                out.append(Finding("BP103", f"{bar} completes phases nobody waits for"))
            for name in m.threads:
                if bar in self.last_pallas_wait[name] and \
                        m.observed.get((name, bar), 0) < b.phase:
                    out.append(Finding("BP103", f"{name} did not observe every completion of "
                                       f"{bar}"))
        return out

    def stuck(self, m: Machine) -> Finding:
        """Nothing can move and some thread has not finished: a wait whose arrivals are all in
        but whose tx bytes never balance is BP130, any other BP100."""
        for thread in m.threads.values():
            action = thread.next()
            if action is not None and action.wait_on is not None:
                b = m.barriers[action.wait_on]
                if b.pending == 0 and b.tx != 0:
                    return Finding("BP130", f"{b.name}: tx-count {b.tx} never returns to zero")
        # A bar.sync phase waits for a thread that has exited (one that left never arrives):
        # BP144. The phase counts the threads that arrive on the barrier, and every thread of
        # the block when its count is the whole block (syncthreads, `bar.sync id, blockDim`).
        for name, thread in m.threads.items():
            action = thread.next()
            if action is not None and action.kind == "hw_wait":
                key = action.targets[0]
                counted = {n for n, t in m.threads.items() if t.block == key[0]} \
                    if action.amount == self.block_threads else self.named_users.get(key, set())
                # a warp that finishes its part of a warp region joins its warpgroup: only
                # a warpgroup (a thread outside warp regions) exits
                gone = sorted(n for n in counted if m.threads[n].done and
                              m.threads[n].warp is None and m.threads[n].block == key[0])
                if gone:
                    return Finding("BP144", f"{name} waits on named barrier {key[1]} for "
                                   f"{', '.join(gone)}, which exited")
        return Finding("BP100", "deadlock")

    def judge(self, m: Machine, ignore: frozenset[str]) -> tuple[str, Finding | None]:
        """(outcome, finding) of a state reached without a rule break in its last step."""
        found = [f for f in self.parity_run_past(m) + self.late_joins(m) + self.peer_exited(m)
                 + self.init_not_visible(m) if f.code not in ignore]
        races = [f for f in self.races(m) if f.code not in ignore]
        if not found and all(t.done for t in m.threads.values()):
            # at the exit, its obligations and a race in the final gaps are judged together
            found = [f for f in self.at_exit(m) if f.code not in ignore]
            if not found and not races:
                return "terminated", None
        found += races
        if found:
            # by code, but what the exit leaves undone after any other rule: a race in the
            # final gaps is the earlier cause than the copy it races with left in flight
            return "violation", min(found, key=lambda f: (f.code in AT_EXIT, f.code))
        if not self.moves(m):
            finding = self.stuck(m)
            return "deadlock", None if finding.code in ignore else finding
        return "running", None


# ----------------------------------------------------------------------------------------------
# Replaying a trace, and a small breadth-first search
# ----------------------------------------------------------------------------------------------

@dataclass
class Result:
    outcome: str                     # terminated, violation, deadlock, running
    finding: Finding | None
    barrier_mismatches: list[str] = field(default_factory=list)
    machine: tuple | None = None     # (machine, rules) after the last step, when asked for

    @property
    def code(self) -> str | None:
        return self.finding.code if self.finding else None


def replay(kernel: Kernel, steps: Sequence[tuple[str, str]], params=None, grid_position=None,
           ignore: Iterable[str] = (), barriers: Sequence[dict] | None = None,
           keep: bool = False) -> Result:
    """Replay a schedule given as (agent, text) steps and decide on its own what it shows.
    `barriers`, when given, is the trace's record of the barriers each step changed; any
    difference from the reference's barrier state is listed in the result. `keep`: the result
    carries the machine it ends in."""
    ignore = frozenset(ignore)
    cluster = Cluster(kernel, params, grid_position)
    rules = Rules(cluster)
    m = cluster.machine()
    mismatches = []
    for i, (agent, text) in enumerate(steps):
        outcome, finding = rules.judge(m, ignore)
        # After the threads end, asynchronous agents may still move (an ignored BP105).
        if outcome in ("violation", "deadlock"):
            raise ReferenceError(f"step {i + 1} ({agent}: {text}) after the run ended: "
                                 f"{outcome} {finding.code if finding else ''}")
        finding = rules.step(m, agent, text)
        if finding is not None and finding.code not in ignore:
            if i != len(steps) - 1:
                raise ReferenceError(f"step {i + 1} ({agent}: {text}) breaks {finding.code}, "
                                     "but the trace goes on")
            return Result("violation", finding, mismatches)
        if barriers is not None:
            for name, view in barriers[i].items():
                mine = m.barriers[name].view() if name in m.barriers else None
                theirs = {k: view[k] for k in ("phase", "arrived", "expected", "tx")}
                if mine != theirs:
                    mismatches.append(f"step {i + 1}: {name} is {mine}, the trace says {theirs}")
    outcome, finding = rules.judge(m, ignore)
    return Result(outcome, finding, mismatches, (m, rules) if keep else None)


def replay_trace(kernel: Kernel, trace, ignore: Iterable[str] = ()) -> Result:
    """Replay a barrierproof Trace (or its JSON dict) by agent names and step texts. A trace
    with a `witness` claims parity aliasing: both schedules end with the same thread's step off
    the same bare parity wait, after different completions."""
    data = trace if isinstance(trace, dict) else trace.to_json()
    if data.get("witness"):
        return replay_pair(kernel, data, data["witness"], ignore)
    steps = [(s["agent"], s["text"]) for s in data["steps"]]
    return replay(kernel, steps, data["params"], data["grid_position"], ignore,
                  [s["barriers"] for s in data["steps"]])


def replay_pair(kernel: Kernel, this: dict, other: dict, ignore: Iterable[str] = ()) -> Result:
    """BP101 iff two schedules (trace dicts) show one bare parity wait (same thread, same
    position in its actions) returning after different completion counts: both end with the
    thread passing it, or `other` does and `this` ends in a deadlock with the thread at that
    wait while the barrier has completed more often than when it passed on `other`."""

    def passing(data: dict):
        steps = [(s["agent"], s["text"]) for s in data["steps"]]
        if not steps:
            return None, []
        *before, (agent, text) = steps
        result = replay(kernel, before, data["params"], data["grid_position"], ignore,
                        [s["barriers"] for s in data["steps"][:-1]], keep=True)
        m, rules = result.machine
        found = [r for r in rules.bare_returns(m) if r[0] == agent]
        if not found or m.threads[agent].next().text != text:
            return None, result.barrier_mismatches
        return found[0], result.barrier_mismatches

    theirs, mismatches = passing(other)
    if theirs is None:
        raise ReferenceError("the other schedule does not end with a bare parity wait that "
                             "passes")
    b, pc2, k = theirs
    mine, more = passing(this)
    mismatches += more
    if mine is not None and mine[:2] == (b, pc2):
        if mine[2] == k:
            return Result("terminated", None, mismatches)
        return Result("violation", Finding("BP101", f"{b}'s wait at its step {pc2 + 1} returns "
                                           f"after completion {mine[2]} on one schedule, {k} "
                                           "on another"), mismatches)
    steps = [(s["agent"], s["text"]) for s in this["steps"]]
    result = replay(kernel, steps, this["params"], this["grid_position"], ignore,
                    [s["barriers"] for s in this["steps"]], keep=True)
    mismatches = [x for x in mismatches if x not in more] + result.barrier_mismatches
    m, rules = result.machine
    thread = m.threads[b]
    action = thread.next()
    if rules.moves(m) or all(t.done for t in m.threads.values()) or action is None or \
            thread.pc != pc2 or action.kind != PARITY_WAIT or action.link is not None:
        raise ReferenceError(f"this schedule neither ends with {b} passing its wait nor in a "
                             f"deadlock with {b} at it")
    n = m.barriers[action.wait_on].phase
    if n <= k:
        return Result("terminated", None, mismatches)
    return Result("violation", Finding("BP101", f"{b}'s wait at its step {pc2 + 1} returns "
                                       f"after completion {k} on one schedule and is passed "
                                       f"by completion {n} on another, where nothing moves"),
                  mismatches)


@dataclass
class Search:
    status: str                      # verified, violation, bounded
    states: int
    finding: Finding | None = None
    depth: int = 0


def explore(kernel: Kernel, params=None, grid_position=None, max_states: int = 20_000,
            ignore: Iterable[str] = ()) -> Search:
    """Breadth-first search over every interleaving of one cluster, without any reduction, up to
    `max_states` distinct states: an independent check of `verified` on small models."""
    ignore = frozenset(ignore)
    cluster = Cluster(kernel, params, grid_position)
    rules = Rules(cluster)
    start = cluster.machine()
    seen = {start.key()}
    frontier = deque([(start, 0)])
    returned: dict[tuple[str, int], int] = {}     # (thread, pc) of a bare parity wait -> phase
    while frontier:
        m, depth = frontier.popleft()
        outcome, finding = rules.judge(m, ignore)
        if finding is not None:
            if outcome == "deadlock" and "BP101" not in ignore:
                # a blocked bare parity wait that returns on another schedule before its
                # barrier got this far: the parity aliasing the deadlock follows from
                finding = _passed_by(cluster, rules, m, ignore, max_states) or finding
            return Search("violation", len(seen), finding, depth)
        if "BP101" not in ignore:
            for name, pc, phase in rules.bare_returns(m):
                if returned.setdefault((name, pc), phase) != phase:
                    return Search("violation", len(seen), Finding(
                        "BP101", f"{name}'s wait at its step {pc + 1} returns after completion "
                        f"{returned[(name, pc)]} on one schedule, {phase} on another"), depth + 1)
        if outcome not in ("running", "terminated"):
            continue
        for agent, text in rules.moves(m):
            nxt = m.clone()
            broke = rules.step(nxt, agent, text)
            if broke is not None and broke.code not in ignore:
                return Search("violation", len(seen), broke, depth + 1)
            key = nxt.key()
            if key not in seen:
                if len(seen) >= max_states:
                    return Search("bounded", len(seen))
                seen.add(key)
                frontier.append((nxt, depth + 1))
    return Search("verified", len(seen))


def _passed_by(cluster: Cluster, rules: Rules, stuck: Machine, ignore: frozenset[str],
               max_states: int) -> Finding | None:
    """BP101 when a thread blocked at a bare parity wait in the deadlock `stuck` passes that
    wait on some schedule (through states breaking no rule) after fewer completions than its
    barrier has in `stuck`; a search of its own, up to `max_states` states."""
    want = {}
    for name, thread in stuck.threads.items():
        action = thread.next()
        if action is not None and action.kind == PARITY_WAIT and action.link is None:
            want[(name, thread.pc)] = stuck.barriers[action.wait_on].phase
    if not want:
        return None
    start = cluster.machine()
    seen = {start.key()}
    frontier = deque([start])
    while frontier:
        m = frontier.popleft()
        outcome, finding = rules.judge(m, ignore)
        if finding is not None:
            continue
        for name, pc, phase in rules.bare_returns(m):
            if phase < want.get((name, pc), -1):
                return Finding("BP101", f"{name}'s wait at its step {pc + 1} returns after "
                               f"completion {phase} on one schedule and is passed by completion "
                               f"{want[(name, pc)]} on another, where nothing moves")
        for agent, text in rules.moves(m):
            nxt = m.clone()
            broke = rules.step(nxt, agent, text)
            if broke is not None and broke.code not in ignore:
                continue
            key = nxt.key()
            if key not in seen and len(seen) < max_states:
                seen.add(key)
                frontier.append(nxt)
    return None


def random_run(kernel: Kernel, params=None, grid_position=None, seed: int = 0,
               max_steps: int = 200_000, ignore: Iterable[str] = ()) -> Result:
    """One random schedule until the kernel ends, deadlocks or breaks a rule."""
    import random
    rng = random.Random(seed)
    ignore = frozenset(ignore)
    cluster = Cluster(kernel, params, grid_position)
    rules = Rules(cluster)
    m = cluster.machine()
    for _ in range(max_steps):
        outcome, finding = rules.judge(m, ignore)
        moves = rules.moves(m)
        if outcome != "running" and not (outcome == "terminated" and moves):
            return Result(outcome, finding)
        agent, text = rng.choice(moves)
        finding = rules.step(m, agent, text)
        if finding is not None and finding.code not in ignore:
            return Result("violation", finding)
    return Result("running", None)
