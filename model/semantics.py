"""The reference small-step semantics of mbarrier synchronization (SEMANTICS.md).

A `System` is one kernel compiled for concrete parameter values and one cluster of blocks:
- agents: every Pallas thread of every block (and every warp inside a `WarpRegion`), each running
  its own straight-line program (control flow never depends on barrier state, so it unrolls);
- barrier instances: every mbarrier of every allocation in every block;
- asynchronous agents: in-flight TMA landings (a counter per (barrier, effect)) and one in-order
  tcgen05 queue per issuing thread.

A state is a flat tuple of small integers (plus one tuple per tcgen05 queue):

    pc[agent]...                          index of the agent's next instruction
    (phase, pending, tx, expected)[inst]  completions so far, missing arrivals, tx bytes, count
    seen[agent, inst]...                  completions observed at the last successful wait,
                                          -1 before the first; only for pairs where agent waits
    in_flight[slot]...                    TMA landings / async arrivals not yet delivered
    queue[tcgen05 issuer]...              its tcgen05 ops in issue order, oldest first
    (hardware barriers, hw_barriers.py; init visibility of explicit-init barriers,
     init_visibility.py)

Every engine reads this module: the explorer searches `successors`, the interpreter replays
`step`, the TLA+ emitter mirrors the layout variable for variable, the Z3 encoding is checked
against it. Rule violations (BP1xx) are terminal: the state that exhibits one is not expanded.

Memory effects (compiled only with `races=True` and buffers declared) add nothing to the state:
loads, stores and the asynchronous accesses a thread waits for itself annotate the gaps between
its instructions, TMA copies and tcgen05 ops carry their accesses on the in-flight counters and
queue entries above. BP200 smem-race / BP201 tmem-race is a predicate of a state, stated in
model/memory.py: two live accesses of different agents overlap and one writes.

Why one file of this size: `System` both lays out the state vector (compilation, unrolling) and
steps it (guards, effects, rule checks); the two halves index the same positions, so they are
read and changed together. Barrier kinds with rules of their own live beside it
(hw_barriers.py for named and cluster barriers, memory.py for races) and register in its tables.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from . import hw_barriers as hw
from . import init_visibility as init
from . import ir
from .ir import (MAX_ARRIVALS, MAX_TX, BarrierAlloc, BarrierRef, Kernel, Loc, Loop, ModelError,
                 Op, When, WarpRegion, evaluate, walk)
from .memory import Access, MemoryLayout

# Instruction opcodes of an unrolled program.
ARRIVE = 0          # target=arrival set, amount=count
ARRIVE_DROP = 1     # target=arrival set
EXPECT_TX = 2       # target=arrival set, amount=bytes
ARRIVE_TX = 3       # arrive.expect_tx: target=arrival set, amount=bytes
COMPLETE_TX = 4     # target=arrival set, amount=bytes
WAIT = 5            # Pallas barrier_wait: target=instance, aux=seen position
WAIT_PARITY = 6     # try_wait.parity: target=instance, amount=parity, aux=seen position; it
#                     means the next completion of that parity the agent has not observed
ISSUE_ASYNC = 7     # TMA / try_cluster_cancel issue: target=arrival set arrived with expect_tx
#                     at issue (or ()), amount=bytes expected, aux=tuple of in-flight slots
ISSUE_TCGEN05 = 8   # tcgen05_mma / commit: aux=index of the arrival set to arrive on when done
FORK = 9            # warpgroup enters a WarpRegion
AWAIT_FORK = 10     # a warp waits for its warpgroup to enter: aux=(parent agent, pc after FORK)
JOIN = 11           # warpgroup leaves a WarpRegion: aux=((warp agent, pc after its body), ...)
UNMODELED = 12      # synchronization outside the model: a no-op, reported statically
# Memory effects are not instructions: they touch no barrier, so they annotate the gaps between
# a thread's instructions (model/memory.py) and add no step and no state.

# Asynchronous accesses a thread waits for itself: issuing kind -> group; waiting kind ->
# (group, whether it leaves `count` of the newest in flight).
ASYNC_GROUPS = {"copy_smem_to_gmem": "TMA store", "tcgen05_store": "tcgen05.st",
                "wgmma": "WGMMA", "cp_async": "cp.async"}
ASYNC_WAITS = {"wait_smem_to_gmem": ("TMA store", True),
               "tcgen05_wait_store": ("tcgen05.st", False), "wgmma_wait": ("WGMMA", True),
               "wait_gmem_to_smem": ("cp.async", True)}

WAIT_PHASE = 40     # try_wait.parity with the agent's own phase count: target=instance,
#                     amount=the completion it means (phase + 1; parity (amount - 1) % 2),
#                     aux=seen position
SEM_SIGNAL = 41     # semaphore_signal: target=semaphore instance, amount=increment (x copies)
SEM_WAIT = 42       # semaphore_wait: target=instance, amount=value, aux=1 if it decrements
BARRIER_TEST = 50   # Pallas barrier_test: a non-blocking barrier_wait (target=instance,
#                     aux=seen position); it always moves on, and observes the completion its
#                     private parity bit waits for if that has happened (the bit flips)
# Named and cluster hardware barriers (model/hw_barriers.py, opcodes 20-29).
HW_ARRIVE = hw.HW_ARRIVE    # target=hw instance, amount=threads, aux=hw.HwArrival
HW_WAIT = hw.HW_WAIT        # target=hw instance, aux=position of the agent's arrived_in entry
HARDWARE_BARRIER_KINDS = hw.HARDWARE_BARRIER_KINDS
# mbarrier init and its visibility (model/init_visibility.py, opcodes 60-69).
MBAR_INIT = init.MBAR_INIT      # target=instance
FENCE_INIT = init.FENCE_INIT    # fence.mbarrier_init.release.cluster
FENCE_ASYNC = init.FENCE_ASYNC  # fence.proxy.async.shared::cta
SEM_SIGNAL_SET = 63  # semaphore_signal_parallel to different semaphores: aux=tuple of in-flight
#                      slots (one signal each), which land in any order
SIGNALS_LANDED = 64  # the thread goes on once those signals have landed: aux=the same slots

OPCODE_NAMES = {ARRIVE: "arrive", ARRIVE_DROP: "arrive_drop", EXPECT_TX: "expect_tx",
                ARRIVE_TX: "arrive_expect_tx", COMPLETE_TX: "complete_tx", WAIT: "wait",
                WAIT_PARITY: "wait_parity", ISSUE_ASYNC: "issue_async",
                ISSUE_TCGEN05: "issue_tcgen05", FORK: "fork", AWAIT_FORK: "await_fork",
                JOIN: "join", UNMODELED: "unmodeled", WAIT_PHASE: "wait_phase",
                SEM_SIGNAL: "sem_signal", SEM_WAIT: "sem_wait", HW_ARRIVE: "hw_arrive",
                HW_WAIT: "hw_wait", BARRIER_TEST: "barrier_test", MBAR_INIT: "mbarrier_init",
                FENCE_INIT: "fence_mbarrier_init", FENCE_ASYNC: "fence_proxy_async",
                SEM_SIGNAL_SET: "sem_signal_set", SIGNALS_LANDED: "signals_landed"}
# Every wait: each has a seen entry. Pallas waits (WAIT) follow the Pallas rules (observe every
# completion); parity waits follow the hardware's (return for the phase meant, see
# `intended_completion`).
WAITS = (WAIT, WAIT_PARITY, WAIT_PHASE, BARRIER_TEST)
PARITY_WAITS = (WAIT_PARITY, WAIT_PHASE)
# Operations on the Pallas private parity bit: the Pallas rules hold their threads.
PALLAS_WAITS = (WAIT, BARRIER_TEST)

# Effects of an in-flight slot when it is delivered.
EFFECT_COMPLETE_TX = 0   # complete_tx(bytes) on the instance
EFFECT_ARRIVE = 1        # arrive(1) on the instance
EFFECT_SIGNAL = 2        # semaphore += amount (one of a semaphore_signal_parallel's signals)

# Fields of one barrier instance in the state vector.
PHASE, PENDING, TX, EXPECTED = 0, 1, 2, 3
BARRIER_FIELDS = 4

# Operations of Pallas's own API (the rest are PTX-level, for CUTLASS-style protocols).
PALLAS_KINDS = frozenset({"barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_mma",
                          "tcgen05_commit_arrive", "try_cluster_cancel", "async_store_smem",
                          "barrier_test"})

# Diagnostic codes and names (SEMANTICS.md section 3).
CODES = {
    "BP100": "deadlock",
    "BP101": "phase-overrun",
    "BP102": "late-join",
    "BP103": "unobserved-completion",
    "BP104": "pending-arrivals",
    "BP105": "async-in-flight",
    "BP110": "tensor-core-order",
    "BP111": "unsupported-barrier",
    "BP112": "remote-wait",
    "BP120": "bad-index",
    "BP121": "out-of-range",
    "BP130": "tx-imbalance",
    "BP190": "unmodeled-sync",
    "BP200": "smem-race",
    "BP201": "tmem-race",
    **hw.CODES,
    **init.CODES,
}


class Instr(NamedTuple):
    op: int
    target: object      # arrival set (tuple of instances) or one instance, per opcode
    amount: int
    aux: object
    src: int            # index into System.sources


@dataclass(frozen=True)
class Source:
    """What an instruction came from: the IR op, its text with concrete indices, its location."""

    op: Op | None
    text: str
    loc: Loc


@dataclass(frozen=True)
class Agent:
    name: str
    block: tuple[int, ...]
    thread: int
    warp: int | None = None   # None: the warpgroup itself


@dataclass(frozen=True)
class Instance:
    alloc: BarrierAlloc
    index: tuple[int, ...]
    block: tuple[int, ...]
    expected: int
    name: str


@dataclass(frozen=True)
class Slot:
    """An in-flight counter: deliveries of `effect` (`amount` bytes) to barrier `inst`."""

    effect: int
    inst: int
    amount: int
    kind: str        # "tma" or "async"


@dataclass
class Violation:
    code: str
    message: str
    agent: int | None = None      # the agent whose step or state shows it
    inst: int | None = None
    src: int | None = None        # instruction source, for the location
    details: list[str] = field(default_factory=list)
    related: list[tuple[str, Loc]] = field(default_factory=list)  # the other side of a race

    @property
    def name(self) -> str:
        return CODES[self.code]


def primary(violations: list[Violation]) -> Violation:
    """The violation to report when several hold at once: the lowest code, so every engine and
    the interpreter name the same one whatever order they found them in."""
    return min(violations, key=lambda v: v.code)


@dataclass
class StaticFinding:
    code: str
    message: str
    loc: Loc
    hint: str = ""


def _arrival_targets_ok(alloc: BarrierAlloc, kind: str, loc: Loc) -> list[StaticFinding]:
    """BP110 / BP111: which barriers an asynchronous arrival may target."""
    findings = []
    if kind in ("tcgen05_mma", "tcgen05_commit_arrive", "copy_gmem_to_smem", "tma_load",
                "try_cluster_cancel", "async_store_smem") and alloc.cluster:
        findings.append(StaticFinding(
            "BP111", f"{kind} arrives on ClusterBarrier `{alloc.name}`: Unsupported barrier type",
            loc, "asynchronous arrivals (TMA, tcgen05) need a plain plgpu.Barrier"))
    elif kind in ("tcgen05_mma", "tcgen05_commit_arrive") and not alloc.orders_tensor_core:
        findings.append(StaticFinding(
            "BP110", f"{kind} arrives on `{alloc.name}`, a Barrier that does not order the "
            "tensor core", loc, f"declare `{alloc.name}` with orders_tensor_core=True"))
    return findings


def static_findings(kernel: Kernel) -> list[StaticFinding]:
    """Rules that need no parameters and no exploration: BP110, BP111, BP120 (unindexed array),
    BP190 (unmodelled synchronization)."""
    findings: list[StaticFinding] = []
    for op in kernel.ops():
        if op.kind == "unmodeled":
            findings.append(StaticFinding(
                "BP190", f"`{op.name}` is synchronization the model does not cover", op.loc,
                "the verdict cannot be verified while it is ignored; pass --ignore BP190 to "
                "accept the risk"))
            continue
        ref = op.barrier
        if ref is None:
            continue
        findings += _arrival_targets_ok(ref.alloc, op.kind, op.loc)
        if not ref.index and not ref.alloc.scalar:
            findings.append(StaticFinding(
                "BP120", f"array barrier `{ref.alloc.name}` used without an index", op.loc,
                f"index it: {ref.alloc.name}.at[i]"))
        if ref.block is not None and op.kind in ("barrier_wait", "wait_parity", "barrier_test"):
            findings.append(StaticFinding(
                "BP112", f"wait on another block's instance of `{ref.alloc.name}`", op.loc,
                "waits are local: wait on your own block's barrier"))
    return findings



def peer_blocks(block: tuple[int, ...], dims: list[int], shape: tuple[int, ...]) -> list[tuple]:
    """Every block of the cluster that agrees with `block` outside the dimensions `dims` (the
    blocks a multicast along those cluster axes reaches, `block` included)."""
    peers = []
    for coords in itertools.product(*[range(shape[d]) for d in dims]):
        b = list(block)
        for d, c in zip(dims, coords):
            b[d] = c
        peers.append(tuple(b))
    return peers

class System:
    """A kernel compiled for concrete parameters: agents, programs, barrier instances, layout."""

    def __init__(self, kernel: Kernel, params: Mapping[str, int] | None = None,
                 grid_position: Mapping[str, int] | None = None, max_instructions: int = 2_000_000,
                 races: bool = True):
        self.kernel = kernel
        self.params = kernel.param_values(params)
        self.grid_position = dict(grid_position or {a: 0 for a, _ in kernel.grid})
        self.max_instructions = max_instructions
        self.findings: list[StaticFinding] = []
        _check_names(kernel)
        env = {**self.params, **self.grid_position}
        self.cluster_axes = [a for a, _ in kernel.cluster]
        self.cluster_shape = [self._positive(evaluate(n, env), f"cluster size along {a}", kernel.loc)
                              for a, n in kernel.cluster]
        # Clusters that run in lockstep with this one and take from a shared semaphore: modelled
        # as blocks of their own (see `lockstep_blocks`); 1 when the `copies` count stands in.
        self.lockstep = lockstep_blocks(kernel, env, len(list(itertools.product(
            *[range(n) for n in self.cluster_shape]))))
        if self.lockstep > 1:
            self.cluster_axes.append(LOCKSTEP_AXIS)
            self.cluster_shape.append(self.lockstep)
        self.blocks = list(itertools.product(*[range(n) for n in self.cluster_shape]))
        self.num_threads = self._positive(evaluate(kernel.num_threads, env), "num_threads",
                                          kernel.loc)
        self.uses_warps = any(isinstance(s, WarpRegion) for s in walk(kernel.body))
        self._build_instances(env)
        self.hw_instances: list[hw.HwInstance] = []
        self.hw_index: dict[tuple, int] = {}
        self._build_agents()
        # Memory effects are compiled only when races are checked: without them copies to
        # different buffers share one in-flight counter, as in the pure barrier protocol.
        self.memory = MemoryLayout(kernel.buffers, self.blocks, env) \
            if races and kernel.buffers else None
        if self.memory is not None:
            self.memory.events = [[] for _ in self.agents]
        self.sources: list[Source] = []
        self._source_index: dict[tuple, int] = {}
        self.arrival_sets: list[tuple[int, ...]] = [()]
        self._arrival_set_index: dict[tuple[int, ...], int] = {(): 0}
        self.slots: list[Slot] = []
        self._slot_index: dict[tuple, int] = {}
        self.programs: list[list[Instr]] = [[] for _ in self.agents]
        self._count = 0
        for a, agent in enumerate(self.agents):
            if agent.warp is None:
                self._unroll(kernel.body, self._agent_env(env, agent), a)
        self.programs = [tuple(p) for p in self.programs]  # type: ignore[misc]
        hw.static_order_findings(self)
        self._layout()
        self.unwaited = self._unwaited_pallas_barriers()

    # -- compilation -------------------------------------------------------------------------

    @staticmethod
    def _positive(value: int, what: str, loc: Loc) -> int:
        if value < 1:
            raise ModelError(f"{what} is {value}; it must be at least 1", loc=loc)
        return value

    def _build_instances(self, env: Mapping[str, int]) -> None:
        self.instances: list[Instance] = []
        self._inst_index: dict[tuple, int] = {}
        multi_block = len(self.blocks) > 1
        for alloc in self.kernel.barriers:
            if alloc.semaphore:
                # one counter for the cluster (its value in the phase field), whichever block
                # names it
                for block in self.blocks:
                    self._inst_index[(alloc.name, (0,), block)] = len(self.instances)
                self.instances.append(Instance(alloc, (0,), self.blocks[0], 0, alloc.name))
                continue
            arrivals = evaluate(alloc.num_arrivals, env)
            if alloc.cluster:
                unknown = [a for a in alloc.collective_axes if a not in self.cluster_axes]
                if unknown:
                    raise ModelError(f"ClusterBarrier `{alloc.name}` names collective axis "
                                     f"{unknown[0]!r}, which is not a cluster axis", loc=alloc.loc,
                                     hint=f"cluster axes: {self.cluster_axes or 'none'}")
                fan_in = 1 + sum(self.cluster_shape[self.cluster_axes.index(a)] - 1
                                 for a in alloc.collective_axes)
                expected = arrivals * fan_in
            else:
                expected = arrivals
            if not 1 <= arrivals or not expected <= MAX_ARRIVALS:
                self.findings.append(StaticFinding(
                    "BP121", f"`{alloc.name}` expects {expected} arrivals; an mbarrier's count "
                    f"must be 1..{MAX_ARRIVALS}", alloc.loc, "num_arrivals must be at least 1"))
                expected = max(1, min(expected, MAX_ARRIVALS))
            shape = [evaluate(n, env) for n in alloc.shape]
            if any(n < 1 for n in shape):
                raise ModelError(f"`{alloc.name}` has num_barriers={tuple(shape)}; every dimension "
                                 "must be at least 1", loc=alloc.loc)
            for block in self.blocks:
                for index in itertools.product(*[range(n) for n in shape]):
                    name = alloc.name
                    if not alloc.scalar:
                        name += "[" + ",".join(map(str, index)) + "]"
                    if multi_block:
                        name += "@" + ",".join(map(str, block))
                    self._inst_index[(alloc.name, index, block)] = len(self.instances)
                    self.instances.append(Instance(alloc, index, block, expected, name))
        self._shapes = {alloc.name: alloc for alloc in self.kernel.barriers}

    def _build_agents(self) -> None:
        self.agents: list[Agent] = []
        multi_block = len(self.blocks) > 1
        tname = self.kernel.thread_axis
        for block in self.blocks:
            prefix = ("b" + ",".join(map(str, block)) + ".") if multi_block else ""
            for t in range(self.num_threads):
                self.agents.append(Agent(f"{prefix}{tname}{t}", block, t))
                if self.uses_warps:
                    for w in range(1, self.kernel.num_warps):
                        self.agents.append(Agent(f"{prefix}{tname}{t}.{self.kernel.warp_axis}{w}",
                                                 block, t, w))
        self._agent_index = {(a.block, a.thread, a.warp): i for i, a in enumerate(self.agents)}

    def _agent_env(self, env: Mapping[str, int], agent: Agent) -> dict[str, int]:
        local = dict(env)
        for axis, coord in zip(self.cluster_axes, agent.block):
            local[axis] = coord
        # The DSL's `k.thread` / `k.warp` may predate a renaming by k.threads(name=...).
        local.setdefault("thread", agent.thread)
        local.setdefault("warp", agent.warp or 0)
        local[self.kernel.thread_axis] = agent.thread
        local[self.kernel.warp_axis] = agent.warp or 0
        return local

    def _emit(self, agent: int, instr: Instr) -> None:
        self._count += 1
        if self._count > self.max_instructions:
            raise ModelError(f"the unrolled program exceeds {self.max_instructions} operations",
                             loc=self.kernel.loc,
                             hint="check smaller parameter values, or prove with `prove`")
        self.programs[agent].append(instr)

    def _source(self, op: Op | None, text: str, loc: Loc) -> int:
        key = (id(op), text, loc)
        if key not in self._source_index:
            self._source_index[key] = len(self.sources)
            self.sources.append(Source(op, text, loc))
        return self._source_index[key]

    def _arrival_set(self, targets: tuple[int, ...]) -> int:
        if targets not in self._arrival_set_index:
            self._arrival_set_index[targets] = len(self.arrival_sets)
            self.arrival_sets.append(targets)
        return self._arrival_set_index[targets]

    def _slot(self, effect: int, inst: int, amount: int, kind: str,
              access: Access | None = None, owner: object = None) -> int:
        # The counter is the barrier protocol's, memory effects or not: copies that complete the
        # same bytes on the same instance share it, and while it is non-zero the destinations
        # of all of them count as written (an over-approximation: never a missed race).
        key = (effect, inst, amount, kind) + ((owner,) if owner is not None else ())
        if key not in self._slot_index:
            self._slot_index[key] = len(self.slots)
            self.slots.append(Slot(effect, inst, amount, kind))
        k = self._slot_index[key]
        if access is not None:
            known = self.memory.slot_access.setdefault(k, [])
            if all(x.mask != access.mask or x.text != access.text for x in known):
                known.append(access)
        return k

    def _tcgen05_entry(self, targets: tuple[int, ...], accesses: tuple[Access, ...]) -> int:
        """A tcgen05 queue entry: the arrival set it arrives on and the memory it touches."""
        if not accesses:
            return self._arrival_set(targets)
        key = (targets, accesses)
        if key not in self._arrival_set_index:
            self._arrival_set_index[key] = len(self.arrival_sets)  # type: ignore[index]
            self.arrival_sets.append(targets)
            self.memory.entry_accesses[self._arrival_set_index[key]] = accesses  # type: ignore
        return self._arrival_set_index[key]  # type: ignore[index]

    def _accesses(self, op: Op, who: str, env: Mapping[str, int], block: tuple[int, ...],
                  src: int, reads: bool = True, writes: bool = True) -> tuple[Access, ...]:
        out = []
        refs = ([(r, False) for r in op.reads] if reads else []) + \
            ([(w, True) for w in op.writes] if writes else [])
        for ref, write in refs:
            mask, text = self.memory.resolve(ref, env, block, op.loc)
            out.append(Access(who, write, mask, src, text))
        return tuple(out)

    def _resolve(self, ref: BarrierRef, env: Mapping[str, int], block: tuple[int, ...],
                 loc: Loc) -> int:
        alloc = ref.alloc
        if alloc.name not in self._shapes or self._shapes[alloc.name] is not alloc:
            raise ModelError(f"barrier `{alloc.name}` is not allocated by this kernel", loc=loc,
                             hint="allocate it with k.Barrier(...) in the same protocol")
        shape = [evaluate(n, env) for n in alloc.shape]
        index = tuple(evaluate(i, env) for i in ref.index)
        if not index:
            index = (0,) * len(shape)
        if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
            raise _IndexOutOfRange(f"index {index if len(index) > 1 else index[0]} is out of range "
                                   f"for `{alloc.name}` with num_barriers="
                                   f"{tuple(shape) if len(shape) > 1 else shape[0]}", loc)
        if ref.block is not None:
            target = tuple(evaluate(c, env) for c in ref.block)
            if target not in self.blocks:
                raise _IndexOutOfRange(f"block {target} is not in the cluster "
                                       f"{tuple(self.cluster_shape)}", loc)
            block = target
        return self._inst_index[(alloc.name, index, block)]

    def _fan_out(self, inst: int) -> tuple[int, ...]:
        """A ClusterBarrier arrival: the own block's instance and every block that differs from
        it along exactly one collective axis (leader-tracked: the leader block's instance only)."""
        instance = self.instances[inst]
        alloc = instance.alloc
        if not alloc.cluster:
            return (inst,)
        if alloc.leader_tracked:
            d = self.cluster_axes.index(alloc.collective_axes[0])
            leader = instance.block[:d] + (0,) + instance.block[d + 1:]
            return (self._inst_index[(alloc.name, instance.index, leader)],)
        targets = [inst]
        for axis in alloc.collective_axes:
            d = self.cluster_axes.index(axis)
            for coord in range(self.cluster_shape[d]):
                if coord != instance.block[d]:
                    block = instance.block[:d] + (coord,) + instance.block[d + 1:]
                    targets.append(self._inst_index[(alloc.name, instance.index, block)])
        return tuple(targets)

    def _copy_write(self, op: Op, env: Mapping[str, int], block: tuple[int, ...],
                    src: int) -> Access | None:
        """A TMA copy's write of its destination in one block it reaches."""
        if self.memory is None or not op.writes:
            return None
        mask, texts = 0, []
        for ref in op.writes:
            m, text = self.memory.resolve(ref, env, block, op.loc)
            mask |= m
            texts.append(text)
        return Access("TMA copy", True, mask, src, ", ".join(texts))

    def _peers(self, block: tuple[int, ...], axes: tuple[str, ...], loc: Loc) -> list[tuple]:
        """Blocks that share every coordinate of `block` except along `axes` (a multicast)."""
        dims = []
        for axis in axes:
            if axis not in self.cluster_axes:
                raise ModelError(f"collective axis {axis!r} is not a cluster axis", loc=loc,
                                 hint=f"cluster axes: {self.cluster_axes or 'none'}")
            dims.append(self.cluster_axes.index(axis))
        return peer_blocks(block, dims, self.cluster_shape)

    def _unroll(self, body, env: dict[str, int], agent: int) -> None:
        block = self.agents[agent].block
        for stmt in body:
            if isinstance(stmt, Op):
                try:
                    self._unroll_op(stmt, env, agent, block)
                except _IndexOutOfRange as err:
                    self.findings.append(StaticFinding("BP120", err.message, stmt.loc,
                                                       "keep barrier indices below num_barriers"))
            elif isinstance(stmt, Loop):
                trip = evaluate(stmt.trip, env)
                saved = env.get(stmt.var)
                for i in range(max(trip, 0)):
                    env[stmt.var] = i
                    self._unroll(stmt.body, env, agent)
                if saved is None:
                    env.pop(stmt.var, None)
                else:
                    env[stmt.var] = saved
            elif isinstance(stmt, When):
                if hw.lane_split(ir.free_vars(stmt.cond)):
                    # A branch on the lane index splits a warp: each side runs with part of it.
                    split = {**env, hw.LANES_SPLIT: 1}
                    self._unroll(stmt.then, split, agent)
                    self._unroll(stmt.orelse, split, agent)
                    continue
                self._unroll(stmt.then if evaluate(stmt.cond, env) else stmt.orelse, env, agent)
            elif isinstance(stmt, WarpRegion):
                self._unroll_region(stmt, env, agent)
            else:
                raise TypeError(f"not a statement: {stmt!r}")

    def _unroll_region(self, region: WarpRegion, env: dict[str, int], agent: int) -> None:
        me = self.agents[agent]
        if me.warp is not None:
            raise ModelError("a warp region inside a warp region", loc=region.loc,
                             hint="core_map over a WarpMesh cannot nest")
        src = self._source(None, f"core_map({region.axis}): fork warps", region.loc)
        enter = self._source(None, f"core_map({region.axis}): enter", region.loc)
        join = self._source(None, f"core_map({region.axis}): join warps", region.loc)
        self._emit(agent, Instr(FORK, None, 0, None, src))
        fork_pc = len(self.programs[agent])
        joins = []
        for w in range(1, self.kernel.num_warps):
            wa = self._agent_index[(me.block, me.thread, w)]
            self._emit(wa, Instr(AWAIT_FORK, None, 0, (agent, fork_pc), enter))
            wenv = {**env, hw.IN_WARP_REGION: 1}
            wenv[region.axis] = wenv[self.kernel.warp_axis] = w
            self._unroll(region.body, wenv, wa)
            joins.append((wa, len(self.programs[wa])))
        wenv = {**env, hw.IN_WARP_REGION: 1}
        wenv[region.axis] = wenv[self.kernel.warp_axis] = 0
        self._unroll(region.body, wenv, agent)
        self._emit(agent, Instr(JOIN, None, 0, tuple(joins), join))

    def _unroll_op(self, op: Op, env: dict[str, int], agent: int, block: tuple[int, ...]) -> None:
        kind = op.kind
        if kind in ir.MEMORY_KINDS:
            if self.memory is not None:
                self._unroll_memory(op, env, agent, block)
            return
        if kind in HARDWARE_BARRIER_KINDS:
            hw.compile_op(self, op, env, agent, block)
            return
        if kind in init.INIT_KINDS:
            init.compile_op(self, op, env, agent, block)
            return
        if kind == "semaphore_signal_parallel":
            self._unroll_signal_parallel(op, env, agent, block)
            return
        if env.get(hw.LANES_SPLIT):
            raise ModelError(f"`{op.describe()}` in a branch on the lane index is not modelled",
                             loc=op.loc, hint="only named barriers may be reached from a branch "
                                              "that splits a warp")
        if kind == "unmodeled":
            self._emit(agent, Instr(UNMODELED, None, 0, None,
                                    self._source(op, op.describe(), op.loc)))
            return
        if op.barrier is None:
            if kind == "tcgen05_mma":
                src = self._source(op, "tcgen05_mma()", op.loc)
                accesses = self._accesses(op, "tcgen05", env, block, src) \
                    if self.memory is not None else ()
                self._emit(agent, Instr(ISSUE_TCGEN05, None, 0,
                                        self._tcgen05_entry((), accesses), src))
                return
            raise ModelError(f"{kind} needs a barrier", loc=op.loc)
        inst = self._resolve(op.barrier, env, block, op.loc)
        if self.instances[inst].alloc.semaphore or kind in ("semaphore_signal", "semaphore_wait"):
            self._unroll_semaphore_op(op, env, agent, inst)
            return
        name = self.instances[inst].name
        nbytes = evaluate(op.bytes, env)
        text = _op_text(op, name, nbytes, env)
        src = self._source(op, text, op.loc)
        if kind in ("barrier_arrive", "arrive", "arrive_drop", "expect_tx", "arrive_expect_tx",
                    "complete_tx"):
            # A remote arrive (`bar.on(block)`) reaches exactly that block's instance, as
            # mbarrier.arrive.shared::cluster does; only a local ClusterBarrier arrive fans out.
            targets = (inst,) if op.barrier.block is not None else self._fan_out(inst)
            if kind in ("barrier_arrive", "arrive"):
                count = evaluate(op.count, env)
                if not 1 <= count <= MAX_ARRIVALS:
                    self.findings.append(StaticFinding(
                        "BP121", f"arrive count {count} is outside 1..{MAX_ARRIVALS}", op.loc))
                    return
                self._emit(agent, Instr(ARRIVE, targets, count, None, src))
            elif kind == "arrive_drop":
                self._emit(agent, Instr(ARRIVE_DROP, targets, 1, None, src))
            else:
                if not 0 <= nbytes <= MAX_TX:
                    self.findings.append(StaticFinding(
                        "BP121", f"tx-count {nbytes} is outside 0..{MAX_TX}", op.loc))
                    return
                code = {"expect_tx": EXPECT_TX, "arrive_expect_tx": ARRIVE_TX,
                        "complete_tx": COMPLETE_TX}[kind]
                self._emit(agent, Instr(code, targets, nbytes, None, src))
        elif kind in ("barrier_wait", "wait_parity", "barrier_test"):
            if op.barrier.block is not None and self.instances[inst].block != block:
                return  # reported statically as BP112
            if kind == "barrier_wait":
                self._emit(agent, Instr(WAIT, inst, 0, None, src))
            elif kind == "barrier_test":
                self._emit(agent, Instr(BARRIER_TEST, inst, 0, None, src))
            elif op.phase is not None:
                phase = evaluate(op.phase, env)
                if phase < -1:
                    raise ModelError(f"wait_parity means phase {phase}; phases count from 0 "
                                     "(-1: the one before the first)", loc=op.loc)
                self._emit(agent, Instr(WAIT_PHASE, inst, phase + 1, None, src))
            else:
                parity = evaluate(op.parity, env) % 2
                self._emit(agent, Instr(WAIT_PARITY, inst, parity, None, src))
        elif kind in ("copy_gmem_to_smem", "tma_load", "async_store_smem"):
            # async_store_smem: st.async into a peer's shared memory; the issuer's
            # arrive.expect_tx and the landing's complete_tx both go to the destination block's
            # barrier (`op.barrier.block`), a copy with one receiving block.
            if self.instances[inst].alloc.cluster:
                return  # BP111, reported statically
            if not 0 <= nbytes <= MAX_TX:
                self.findings.append(StaticFinding(
                    "BP121", f"copy of {nbytes} bytes exceeds the tx-count range 0..{MAX_TX}",
                    op.loc))
                return
            peers = self._peers(self.instances[inst].block, op.collective_axes, op.loc)
            if nbytes % len(peers):
                raise ModelError(f"a multicast copy of {nbytes} bytes cannot be split evenly "
                                 f"among {len(peers)} blocks", loc=op.loc)
            share = nbytes // len(peers)
            inst_index = self.instances[inst].index
            slots = tuple(self._slot(EFFECT_COMPLETE_TX,
                                     self._inst_index[(op.barrier.alloc.name, inst_index, p)],
                                     share, "tma", self._copy_write(op, env, p, src))
                          for p in peers)
            arrive = (inst,) if kind != "tma_load" else ()
            self._emit(agent, Instr(ISSUE_ASYNC, arrive, nbytes, slots, src))
        elif kind == "try_cluster_cancel":
            if self.instances[inst].alloc.cluster:
                return
            slot = self._slot(EFFECT_ARRIVE, inst, 1, "async")
            self._emit(agent, Instr(ISSUE_ASYNC, (), 0, (slot,), src))
        elif kind in ("tcgen05_mma", "tcgen05_commit_arrive"):
            alloc = self.instances[inst].alloc
            if alloc.cluster or not alloc.orders_tensor_core:
                return  # BP110 / BP111, reported statically
            targets = (inst,)
            if op.collective_axes:
                targets = tuple(self._inst_index[(alloc.name, self.instances[inst].index, p)]
                                for p in self._peers(block, op.collective_axes, op.loc))
            accesses = self._accesses(op, "tcgen05", env, block, src) \
                if self.memory is not None else ()
            self._emit(agent, Instr(ISSUE_TCGEN05, None, 0,
                                    self._tcgen05_entry(targets, accesses), src))
        else:
            raise ModelError(f"unknown operation kind {kind!r}", loc=op.loc)

    def _unroll_memory(self, op: Op, env: dict[str, int], agent: int,
                       block: tuple[int, ...]) -> None:
        """Recorded in program order at the gap before the agent's next instruction: thread
        loads/stores, the issue of a TMA store / WGMMA / tcgen05.st, the waits that retire them
        (model/memory.py turns them into live accesses per gap)."""
        kind = op.kind
        pc = len(self.programs[agent])
        if kind in ("read", "write") or kind in ASYNC_GROUPS:
            texts = [self.memory.resolve(r, env, block, op.loc)[1] for r in op.reads + op.writes]
            src = self._source(op, f"{kind}({', '.join(texts)})", op.loc)
            who = "thread" if kind in ("read", "write") else ASYNC_GROUPS[kind]
            accesses = self._accesses(op, who, env, block, src)
            self.memory.events[agent].append(("access" if who == "thread" else "issue", pc,
                                              who, accesses))
        else:
            group, counted = ASYNC_WAITS[kind]
            keep = evaluate(op.count, env) if counted else 0
            self.memory.events[agent].append(("wait", pc, group, keep))
    def _unroll_semaphore_op(self, op: Op, env: dict[str, int], agent: int, inst: int) -> None:
        alloc = self.instances[inst].alloc
        if not alloc.semaphore or op.kind not in ("semaphore_signal", "semaphore_wait"):
            what = "a semaphore" if alloc.semaphore else f"a {alloc.kind}"
            raise ModelError(f"{op.kind} on `{alloc.name}`, which is {what}", loc=op.loc,
                             hint="signal and wait on semaphores; arrive and wait on barriers")
        copies = 1 if self.lockstep > 1 else evaluate(alloc.copies, env)
        amount = evaluate(op.count, env)
        text = (f"semaphore_signal({alloc.name}, +{amount}"
                + (f" x{copies} clusters)" if copies > 1 else ")")
                if op.kind == "semaphore_signal" else
                f"semaphore_wait({alloc.name}, >={amount}"
                + (", decrement)" if op.decrement else ")"))
        src = self._source(op, text, op.loc)
        if op.kind == "semaphore_signal":
            self._emit(agent, Instr(SEM_SIGNAL, inst, amount * copies, None, src))
        elif op.decrement and copies > 1:
            # lockstep copies of a decrementing wait would race for one counter
            self.findings.append(StaticFinding(
                "BP190", f"a decrementing semaphore_wait on `{alloc.name}`, which {copies} "
                "clusters signal in lockstep, is outside the model", op.loc,
                "the lockstep model of a global semaphore needs monotone waits "
                "(decrement=False)"))
            self._emit(agent, Instr(UNMODELED, None, 0, None, src))
        else:
            self._emit(agent, Instr(SEM_WAIT, inst, amount, int(op.decrement), src))

    def _unroll_signal_parallel(self, op: Op, env: dict[str, int], agent: int,
                                block: tuple[int, ...]) -> None:
        """Signals that land in no guaranteed order (JAX: "the target device might observe a
        signal on semaphores[1] before it observes a signal on semaphores[0]"), all before the
        thread's next operation. On one semaphore the order cannot matter: the signals one
        after the other. On several: one in-flight slot per signal, delivered in any order."""
        signals = []
        for ref, inc in op.signals:
            inst = self._resolve(ref, env, block, op.loc)
            alloc = self.instances[inst].alloc
            if not alloc.semaphore:
                raise ModelError(f"semaphore_signal_parallel signals `{alloc.name}`, which is a "
                                 f"{alloc.kind}", loc=op.loc, hint="signal semaphores only")
            copies = 1 if self.lockstep > 1 else evaluate(alloc.copies, env)
            signals.append((inst, evaluate(inc, env) * copies))
        names = ", ".join(f"{self.instances[i].name} +{n}" for i, n in signals)
        src = self._source(op, f"semaphore_signal_parallel({names})", op.loc)
        if len({i for i, _ in signals}) == 1:
            for inst, amount in signals:
                self._emit(agent, Instr(SEM_SIGNAL, inst, amount, None, src))
            return
        slots = tuple(self._slot(EFFECT_SIGNAL, inst, amount, "async", owner=(agent, src, n))
                      for n, (inst, amount) in enumerate(signals))
        self._emit(agent, Instr(SEM_SIGNAL_SET, (), 0, slots, src))
        landed = self._source(op, "semaphore_signal_parallel: signals landed", op.loc)
        self._emit(agent, Instr(SIGNALS_LANDED, (), 0, slots, landed))

    def _reject_mixed_waits(self) -> None:
        """A thread waits on one barrier either with barrier_wait or with parity waits: Pallas's
        private parity bit flips only at its own barrier_wait, so a parity wait in between would
        leave the two views of the thread's phase disagreeing (no real kernel mixes them)."""
        for a, prog in enumerate(self.programs):
            kinds: dict[int, Instr] = {}
            for instr in prog:
                if instr.op not in WAITS:
                    continue
                first = kinds.setdefault(instr.target, instr)
                if (first.op in PALLAS_WAITS) != (instr.op in PALLAS_WAITS):
                    raise ModelError(
                        f"{self.agents[a].name} waits on {self.instances[instr.target].name} "
                        "both with barrier_wait and with a parity wait (wait_parity/wait_phase)",
                        loc=self.sources[instr.src].loc,
                        hint="barrier_wait keeps its own parity bit, which parity waits do not "
                             "flip: wait on one barrier with one kind in each thread")

    def _layout(self) -> None:
        A = len(self.agents)
        self.n_agents = A
        self.barrier_base = A
        n_inst = len(self.instances)
        # seen[agent, inst] exists for every pair where the agent waits on the instance.
        self.seen_pos: dict[tuple[int, int], int] = {}
        pos = A + BARRIER_FIELDS * n_inst
        self.participants: list[list[tuple[int, int]]] = [[] for _ in self.instances]
        for a, prog in enumerate(self.programs):
            for instr in prog:
                if instr.op in WAITS and (a, instr.target) not in self.seen_pos:
                    self.seen_pos[(a, instr.target)] = pos
                    self.participants[instr.target].append((a, pos))
                    pos += 1
        self._reject_mixed_waits()
        # Seen entries of agents that wait on the instance with a Pallas barrier_wait: the
        # Pallas rules (BP101 at a completion, BP103 at exit) hold them to every completion.
        self.pallas_seen = frozenset(
            self.seen_pos[(a, instr.target)] for a, prog in enumerate(self.programs)
            for instr in prog if instr.op in PALLAS_WAITS)
        # Waits carry the position of their seen entry, so a step needs no dictionary lookup.
        for a, prog in enumerate(self.programs):
            self.programs[a] = tuple(
                instr._replace(aux=self.seen_pos[(a, instr.target)])
                if instr.op in WAITS else instr for instr in prog)
        self.parity_agents = tuple(a for a, prog in enumerate(self.programs)
                                   if any(i.op in PARITY_WAITS for i in prog))
        self.slot_base = pos
        pos += len(self.slots)
        self.queue_agents = [a for a, prog in enumerate(self.programs)
                             if any(i.op == ISSUE_TCGEN05 for i in prog)]
        self.queue_pos = {a: pos + j for j, a in enumerate(self.queue_agents)}
        self.queue_base = pos
        self.queue_end = pos + len(self.queue_agents)
        self.width = init.layout(self, hw.layout(self, self.queue_end))
        self.block_agents = {b: [a for a, ag in enumerate(self.agents) if ag.block == b]
                             for b in self.blocks} if len(self.blocks) > 1 else {}
        # Asynchronous deliveries into another block than their issuer's (multicast shares,
        # async_store_smem, collective tcgen05 commits): BP146 once that block has exited.
        # (slot -> the first instruction that issues it remotely, for the report's location)
        self.remote_slot_src: dict[int, int] = {}
        for a, prog in enumerate(self.programs):
            for i in prog:
                if i.op == ISSUE_ASYNC:
                    for k in i.aux:
                        if self.instances[self.slots[k].inst].block != self.agents[a].block \
                                and self.slots[k].effect != EFFECT_SIGNAL:
                            self.remote_slot_src.setdefault(k, i.src)
        self.remote_slots = tuple(sorted(self.remote_slot_src))
        self.n_actions = A + len(self.slots) + len(self.queue_agents)
        self.lengths = tuple(len(p) for p in self.programs)
        # wait_ahead[agent][pc]: bit i set iff the agent waits on instance i at or after pc.
        self.wait_ahead = []
        for prog in self.programs:
            masks = [0] * (len(prog) + 1)
            for pc in range(len(prog) - 1, -1, -1):
                instr = prog[pc]
                masks[pc] = masks[pc + 1] | ((1 << instr.target)
                                             if instr.op in WAITS else 0)
            self.wait_ahead.append(masks)
        # Agents with Pallas-style waits can late-join (BP102).
        self.wait_pcs = [(a, frozenset(pc for pc, i in enumerate(p) if i.op == WAIT))
                         for a, p in enumerate(self.programs) if any(i.op == WAIT for i in p)]
        if self.memory is not None:
            self.memory.finish(list(self.lengths), [slot.inst for slot in self.slots])

    def _unwaited_pallas_barriers(self) -> tuple[int, ...]:
        """Instances of barriers used only through Pallas operations that no thread waits on:
        Pallas's rule 2 (completions == waits over a barrier's lifetime) holds them to no
        completion at all (BP103 at exit). Barriers a protocol drives with PTX-level operations
        follow the hardware, where an unobserved completion is harmless."""
        pallas_only = {}
        for op in self.kernel.ops():
            if op.barrier is not None:
                name = op.barrier.alloc.name
                pallas_only[name] = pallas_only.get(name, True) and op.kind in PALLAS_KINDS
        return tuple(i for i, inst in enumerate(self.instances)
                     if pallas_only.get(inst.alloc.name) and not self.participants[i])

    # -- states ------------------------------------------------------------------------------

    def initial_state(self) -> tuple:
        s: list = [0] * self.n_agents
        for inst in self.instances:
            s += [0, inst.expected, 0, inst.expected]
        s += [-1] * len(self.seen_pos)
        s += [0] * len(self.slots)
        s += [()] * len(self.queue_agents)
        s += hw.initial_fields(self)
        s += init.initial_fields(self)
        return tuple(s)

    def barrier(self, state: tuple, inst: int) -> tuple[int, int, int, int]:
        """(phase, pending, tx, expected) of one instance."""
        b = self.barrier_base + BARRIER_FIELDS * inst
        return state[b], state[b + 1], state[b + 2], state[b + 3]

    def is_done(self, state: tuple) -> bool:
        return state[:self.n_agents] == self.lengths

    def current(self, state: tuple, agent: int) -> Instr | None:
        pc = state[agent]
        prog = self.programs[agent]
        return prog[pc] if pc < len(prog) else None

    def in_flight(self, state: tuple, inst: int) -> list[str]:
        """Asynchronous agents that will still arrive on, or deliver bytes to, `inst`."""
        out = []
        for k, slot in enumerate(self.slots):
            n = state[self.slot_base + k]
            if n and slot.inst == inst:
                what = f"{slot.amount} bytes" if slot.effect == EFFECT_COMPLETE_TX else \
                f"+{slot.amount}" if slot.effect == EFFECT_SIGNAL else "1 arrival"
                out.append(f"{n} {slot.kind} ({what} each)")
        for a in self.queue_agents:
            queue = state[self.queue_pos[a]]
            n = sum(1 for entry in queue if inst in self.arrival_sets[entry])
            if n:
                out.append(f"{n} tcgen05 arrival(s) queued by {self.agents[a].name}")
        return out

    # -- the step rules ----------------------------------------------------------------------

    def enabled(self, state: tuple, action: int) -> bool:
        A = self.n_agents
        if action < A:
            pc = state[action]
            prog = self.programs[action]
            if pc >= len(prog):
                return False
            instr = prog[pc]
            guard = GUARDS[instr.op]
            return guard is None or guard(self, state, instr)
        k = action - A
        if k < len(self.slots):
            return state[self.slot_base + k] > 0
        k -= len(self.slots)
        return k < len(self.queue_agents) and len(state[self.queue_base + k]) > 0

    def successors(self, state: tuple, skip: set | None = None
                   ) -> list[tuple[int, tuple, Violation | None]]:
        """Every enabled action with its successor state and the rule it breaks, if any.
        The same as stepping every action for which `enabled` holds, unrolled for speed.
        Actions in `skip` are left out (a reduction that knows their successors are
        redundant)."""
        out = []
        step = self.step
        for agent, prog in enumerate(self.programs):
            pc = state[agent]
            if pc >= len(prog) or (skip and agent in skip):
                continue
            instr = prog[pc]
            guard = GUARDS[instr[0]]
            if guard is not None and not guard(self, state, instr):
                continue
            nxt, violation = step(state, agent)
            out.append((agent, nxt, violation))
        action = self.n_agents
        for pos in range(self.slot_base, self.queue_base):
            if state[pos]:
                nxt, violation = step(state, action)
                out.append((action, nxt, violation))
            action += 1
        for pos in range(self.queue_base, self.queue_end):
            if state[pos] and not (skip and action in skip):
                nxt, violation = step(state, action)
                out.append((action, nxt, violation))
            action += 1
        return out

    def step(self, state: tuple, action: int, events: list | None = None
             ) -> tuple[tuple, Violation | None]:
        """Apply one enabled action. `events` collects (inst, completion number) pairs."""
        s = list(state)
        A = self.n_agents
        violation = None
        if action < A:
            agent = action
            instr = self.programs[agent][s[agent]]
            s[agent] += 1
            effect = EFFECTS[instr.op]
            if effect is not None:
                violation = effect(self, s, instr, agent, events)
            return tuple(s), violation
        k = action - A
        if k < len(self.slots):
            slot = self.slots[k]
            s[self.slot_base + k] -= 1
            if slot.effect == EFFECT_COMPLETE_TX:
                violation = self._tx(s, slot.inst, -slot.amount, None, None, events)
            elif slot.effect == EFFECT_SIGNAL:
                s[self.barrier_base + BARRIER_FIELDS * slot.inst] += slot.amount
            else:
                violation = self._arrive(s, slot.inst, 1, None, None, events)
            return tuple(s), violation
        k -= len(self.slots)
        q = self.queue_base + k
        entry, s[q] = s[q][0], s[q][1:]
        for inst in self.arrival_sets[entry]:
            violation = violation or self._arrive(s, inst, 1, None, None, events)
        return tuple(s), violation

    def _arrive(self, s: list, inst: int, count: int, agent, src, events) -> Violation | None:
        b = self.barrier_base + BARRIER_FIELDS * inst
        pending = s[b + PENDING] - count
        s[b + PENDING] = pending
        if pending > 0:
            return None
        if pending < 0:
            return Violation("BP121", f"{self.instances[inst].name} receives more arrivals than "
                             f"its count {s[b + EXPECTED]} in phase {s[b + PHASE]} (its tx-count "
                             f"{s[b + TX]} keeps the phase open): undefined behaviour",
                             agent, inst, src)
        return self._maybe_complete(s, inst, agent, src, events)

    def _tx(self, s: list, inst: int, delta: int, agent, src, events) -> Violation | None:
        b = self.barrier_base + BARRIER_FIELDS * inst
        tx = s[b + TX] + delta
        s[b + TX] = tx
        if not -MAX_TX <= tx <= MAX_TX:
            return Violation("BP121", f"the tx-count of {self.instances[inst].name} reaches {tx}, "
                             f"outside +-{MAX_TX}", agent, inst, src)
        if tx or s[b + PENDING]:
            return None
        return self._maybe_complete(s, inst, agent, src, events)

    def _maybe_complete(self, s: list, inst: int, agent, src, events) -> Violation | None:
        """A phase completes when its arrivals and its tx bytes are all in, atomically."""
        b = self.barrier_base + BARRIER_FIELDS * inst
        if s[b + PENDING] != 0 or s[b + TX] != 0:
            return None
        completed = s[b + PHASE]  # completions before this one
        s[b + PHASE] = completed + 1
        s[b + PENDING] = s[b + EXPECTED]
        if events is not None:
            events.append((inst, completed + 1))
        for waiter, pos in self.participants[inst]:
            seen = s[pos]
            if max(seen, 0) >= completed or pos not in self.pallas_seen:
                continue
            # An overrun aliases parity only for a thread that will wait on the barrier again;
            # one that never will is reported at exit (BP103), one that has not started
            # waiting yet when it starts (BP102).
            if not (self.wait_ahead[waiter][s[waiter]] >> inst) & 1:
                continue
            if seen >= 0 or self._waits_on(s, waiter, inst):
                where = self.current(s, waiter)
                return Violation(
                    "BP101", f"{self.instances[inst].name} completes phase {completed + 1} while "
                    f"{self.agents[waiter].name} has observed only {max(seen, 0)} of its "
                    f"completions: its next wait misses completion {max(seen, 0) + 1} "
                    f"(parity aliasing)", agent, inst,
                    src if src is not None else (where.src if where is not None else None),
                    [f"{self.agents[waiter].name} is at {self._where(s, waiter)}"])
        return None

    def _waits_on(self, s, agent: int, inst: int) -> bool:
        instr = self.current(s, agent)
        return instr is not None and instr.op in WAITS and instr.target == inst

    def _where(self, s, agent: int) -> str:
        instr = self.current(s, agent)
        if instr is None:
            return "its end"
        source = self.sources[instr.src]
        return f"{source.text} ({source.loc})"

    # -- state predicates --------------------------------------------------------------------

    def state_violations(self, state: tuple) -> list[Violation]:
        """Rules judged on a state: a parity wait the barrier has run past (BP101), late joins
        (BP102), and at kernel exit BP103, BP104, BP105, BP130."""
        found = []
        for a in self.parity_agents:
            instr = self.current(state, a)
            if instr is None or instr.op not in PARITY_WAITS:
                continue
            phase = state[self.barrier_base + BARRIER_FIELDS * instr.target]
            meant = intended_completion(instr, state[instr.aux])
            if phase > meant:
                found.append(Violation(
                    "BP101", f"{self.agents[a].name} waits on "
                    f"{self.instances[instr.target].name} for completion {meant}, but it has "
                    f"already completed {phase}: the wait "
                    + ("returns at once, for that later phase" if (phase - meant) % 2 == 0
                       else f"returns after completion {phase + 1} or never")
                    + " (parity aliasing)", a, instr.target, instr.src))
        for a, pcs in self.wait_pcs:
            pc = state[a]
            if pc in pcs:
                instr = self.programs[a][pc]
                phase = state[self.barrier_base + BARRIER_FIELDS * instr.target]
                if state[instr.aux] < 0 and phase >= 2:
                    found.append(Violation(
                        "BP102", f"{self.agents[a].name} waits on "
                        f"{self.instances[instr.target].name} for the first time after "
                        f"{phase} completions: its parity bit points at the wrong phase",
                        a, instr.target, instr.src))
        if self.block_agents:
            found += hw.peer_exit_violations(self, state)
        if self.init_insts:
            found += init.violations(self, state)
        if not found and self.is_done(state):
            found = self.exit_violations(state)
        if self.memory is not None:
            found += self.memory.violations(self, state)   # one per memory space
        return found

    def exit_violations(self, state: tuple) -> list[Violation]:
        found = []
        for k, slot in enumerate(self.slots):
            if state[self.slot_base + k]:
                found.append(Violation(
                    "BP105", f"the kernel exits with {state[self.slot_base + k]} {slot.kind} "
                    f"operation(s) on {self.instances[slot.inst].name} still in flight",
                    None, slot.inst))
        for a in self.queue_agents:
            if state[self.queue_pos[a]]:
                found.append(Violation(
                    "BP105", f"the kernel exits with {len(state[self.queue_pos[a]])} tcgen05 "
                    f"operation(s) of {self.agents[a].name} still in flight", a, None))
        for inst, instance in enumerate(self.instances):
            phase, pending, tx, expected = self.barrier(state, inst)
            if tx != 0:
                found.append(Violation(
                    "BP130", f"{instance.name} ends with tx-count {tx}: "
                    f"{'more bytes expected than delivered' if tx > 0 else 'bytes delivered without expect_tx'}",
                    None, inst))
            elif pending != expected:
                found.append(Violation(
                    "BP104", f"{instance.name} ends with {expected - pending} of {expected} "
                    f"arrivals of phase {phase + 1} that never completed it", None, inst))
            if phase and inst in self.unwaited:
                found.append(Violation(
                    "BP103", f"{instance.name} completes {phase} phase(s) that no thread ever "
                    "waits for (Pallas: completions must equal waits over a barrier's lifetime)",
                    None, inst))
            for waiter, pos in self.participants[inst]:
                if state[pos] < phase and pos in self.pallas_seen:
                    found.append(Violation(
                        "BP103", f"{self.agents[waiter].name} exits having observed "
                        f"{max(state[pos], 0)} of the {phase} completions of {instance.name}",
                        waiter, inst))
        return found

    def deadlock(self, state: tuple) -> Violation:
        """Describe a state where some agent has not finished and nothing can move."""
        details = []
        tx_blocked = None
        for a, agent in enumerate(self.agents):
            instr = self.current(state, a)
            if instr is None:
                continue
            if instr.op in WAITS:
                inst = instr.target
                phase, pending, tx, expected = self.barrier(state, inst)
                if instr.op == WAIT:
                    seen = max(state[instr.aux], 0)
                    want = f"completion {seen + 1}"
                else:
                    want = f"completion {intended_completion(instr, state[instr.aux])}"
                line = (f"{agent.name} blocked at {self.sources[instr.src].text} "
                        f"({self.sources[instr.src].loc}) waiting for {want} of "
                        f"{self.instances[inst].name}; it has {phase} completion(s) "
                        f"(parity {phase & 1}), "
                        f"{expected - pending}/{expected} arrivals, tx={tx}")
                if pending == 0 and tx != 0:
                    tx_blocked = tx_blocked if tx_blocked is not None else inst
                    line += (" — all arrivals are in but the tx-count never returns to zero")
                else:
                    later = self.missing_arrivals(state, inst)
                    line += (f"; {pending} arrival(s) missing; " +
                             ("later arrivals on it: " + ", ".join(later) if later else
                              "no agent arrives on it again"))
                    silent = self.silent_blocks(inst)
                    if silent:
                        line += (f"; block(s) {', '.join(silent)} of its cluster never arrive "
                                 "on it (no thread there has an arrival on it)")
                details.append(line)
            elif instr.op == SEM_WAIT:
                value = state[self.barrier_base + BARRIER_FIELDS * instr.target]
                details.append(f"{agent.name} blocked at {self.sources[instr.src].text} "
                               f"({self.sources[instr.src].loc}): "
                               f"{self.instances[instr.target].name} is {value}, it waits for "
                               f"{instr.amount}")
            elif instr.op == AWAIT_FORK:
                details.append(f"{agent.name} waits for its warpgroup to enter the warp region")
            elif instr.op == JOIN:
                details.append(f"{agent.name} waits for its warps to leave the warp region")
        hw_lines, left = hw.deadlock_details(self, state) if self.hw_instances else ([], None)
        details += hw_lines
        blocked = [a for a in range(self.n_agents) if self.current(state, a) is not None]
        first = blocked[0] if blocked else None
        src = self.current(state, first).src if first is not None else None
        if tx_blocked is not None:
            return Violation("BP130", f"{self.instances[tx_blocked].name} can never complete: its "
                             "tx-count never returns to zero", first, tx_blocked, src, details)
        if left is not None:
            waiter = next(a for a in blocked if self.current(state, a).op == HW_WAIT
                          and self.current(state, a).target == left)
            return Violation("BP144", f"a thread exited while {self.hw_instances[left].name} "
                             "still waits for its arrival: deadlock", waiter,
                             None, self.current(state, waiter).src, details)
        return Violation("BP100", f"deadlock: {len(blocked)} agent(s) blocked forever", first,
                         None, src, details)

    def silent_blocks(self, inst: int) -> list[str]:
        """The blocks whose arrivals a ClusterBarrier instance counts but whose threads never
        arrive on it anywhere in their programs (a cluster barrier skipped by a block)."""
        if not self.instances[inst].alloc.cluster:
            return []
        arriving = set()
        for a, prog in enumerate(self.programs):
            if any(instr.op in (ARRIVE, ARRIVE_DROP, ARRIVE_TX) and inst in instr.target
                   for instr in prog):
                arriving.add(self.agents[a].block)
        instance = self.instances[inst]
        if instance.alloc.leader_tracked:   # only the leader's instance hears from its peers
            d = self.cluster_axes.index(instance.alloc.collective_axes[0])
            fan_in = self._peers(instance.block, instance.alloc.collective_axes[:1],
                                 instance.alloc.loc) if instance.block[d] == 0 else []
        else:
            fan_in = [self.instances[t].block for t in self._fan_out(inst)]   # symmetric
        return ["b" + ",".join(map(str, b)) for b in fan_in if b not in arriving]

    def missing_arrivals(self, state: tuple, inst: int) -> list[str]:
        """Agents whose remaining program would still arrive on `inst`, and where they are."""
        out = []
        for a, prog in enumerate(self.programs):
            for pc in range(state[a], len(prog)):
                instr = prog[pc]
                hits = (instr.op in (ARRIVE, ARRIVE_DROP, ARRIVE_TX) and inst in instr.target) or \
                    (instr.op == ISSUE_ASYNC and (inst in instr.target or any(
                        self.slots[k].inst == inst for k in instr.aux))) or \
                    (instr.op == ISSUE_TCGEN05 and inst in self.arrival_sets[instr.aux])
                if hits:
                    where = self._where(state, a) if pc == state[a] else \
                        f"stuck at {self._where(state, a)}"
                    out.append(f"{self.agents[a].name} at {self.sources[instr.src].text} "
                               f"({self.sources[instr.src].loc})"
                               + ("" if pc == state[a] else f", {where}"))
                    break
        return out

    # -- naming ------------------------------------------------------------------------------

    def action_name(self, action: int) -> tuple[str, str]:
        """(agent name, agent kind) of an action."""
        A = self.n_agents
        if action < A:
            return self.agents[action].name, "thread" if self.agents[action].warp is None \
                else "warp"
        k = action - A
        if k < len(self.slots):
            slot = self.slots[k]
            return slot.kind, slot.kind  # one timeline column for all landings of a kind
        agent = self.queue_agents[k - len(self.slots)]
        return f"tcgen05({self.agents[agent].name})", "tcgen05"

    def action_text(self, state: tuple, action: int) -> tuple[str, Loc | None]:
        """What an action does from `state`, and where it was written."""
        A = self.n_agents
        if action < A:
            instr = self.current(state, action)
            source = self.sources[instr.src]
            return source.text, source.loc
        k = action - A
        if k < len(self.slots):
            slot = self.slots[k]
            if slot.effect == EFFECT_COMPLETE_TX:
                return f"lands on {self.instances[slot.inst].name} ({slot.amount}B)", None
            if slot.effect == EFFECT_SIGNAL:
                return f"signals {self.instances[slot.inst].name} (+{slot.amount})", None
            return f"arrives on {self.instances[slot.inst].name}", None
        agent = self.queue_agents[k - len(self.slots)]
        entry = state[self.queue_pos[agent]][0]
        targets = self.arrival_sets[entry]
        if not targets:
            return "mma completes", None
        return "completes, arrives on " + ", ".join(
            self.instances[i].name for i in targets), None

    def location(self, violation: Violation) -> Loc:
        if violation.src is not None:
            return self.sources[violation.src].loc
        if violation.inst is not None:
            return self.instances[violation.inst].alloc.loc
        return self.kernel.loc


# ----------------------------------------------------------------------------------------------
# The rule table: one row per instruction. A guard says when a thread may take the step (None:
# always); an effect changes the barrier state and returns the rule it breaks, if any (None: only
# the program counter moves). The TLA+ emitter and the Z3 encoding each have one row per opcode too.
# ----------------------------------------------------------------------------------------------

def _phase(system: System, state, inst: int) -> int:
    return state[system.barrier_base + BARRIER_FIELDS * inst]


def guard_wait(system: System, state, instr: Instr) -> bool:
    """barrier_wait: the thread's private parity bit counts its own waits; it waits for the phase
    after the last one it observed. Passes iff the current parity differs from that bit."""
    seen = state[instr.aux]
    parity = seen & 1 if seen > 0 else 0
    return (_phase(system, state, instr.target) & 1) != parity


def guard_wait_parity(system: System, state, instr: Instr) -> bool:
    """try_wait.parity(P): true iff the phase with parity P has completed (current parity != P)."""
    return (_phase(system, state, instr.target) & 1) != instr.amount


def guard_wait_phase(system: System, state, instr: Instr) -> bool:
    """try_wait.parity((c - 1) % 2) for the thread's completion c: passes iff the barrier's
    parity is that of c."""
    return (_phase(system, state, instr.target) & 1) == (instr.amount & 1)


def intended_completion(instr: Instr, seen: int) -> int:
    """The completion a parity wait means (the phase the thread means, plus one).

    WAIT_PHASE states it: the thread's own phase count. A bare WAIT_PARITY(P) means the next
    completion this agent has not observed whose number has parity P + 1 (it passes once the
    barrier's parity differs from P): after observing `seen` completions (-1: none yet) that is
    seen + 1 or seen + 2. A fresh barrier (seen -1) with P = 1 means completion 0: the initial
    phase, which has already passed (CUTLASS's producer_acquire).

    >>> [intended_completion(Instr(WAIT_PARITY, 0, p, 0, 0), -1) for p in (1, 0)]
    [0, 1]
    >>> intended_completion(Instr(WAIT_PARITY, 0, 0, 0, 0), 1)   # parity not toggled
    3
    """
    if instr.op == WAIT_PHASE:
        return instr.amount
    return seen + 1 if (seen - instr.amount) % 2 == 0 else seen + 2


def guard_sem_wait(system: System, state, instr: Instr) -> bool:
    """semaphore_wait: the counter has reached the value."""
    return _phase(system, state, instr.target) >= instr.amount


def effect_sem_signal(system: System, s: list, instr: Instr, agent: int, events) -> None:
    s[system.barrier_base + BARRIER_FIELDS * instr.target] += instr.amount


def effect_sem_wait(system: System, s: list, instr: Instr, agent: int, events) -> None:
    if instr.aux:
        s[system.barrier_base + BARRIER_FIELDS * instr.target] -= instr.amount


def guard_await_fork(system: System, state, instr: Instr) -> bool:
    parent, fork_pc = instr.aux
    return state[parent] >= fork_pc


def guard_join(system: System, state, instr: Instr) -> bool:
    return all(state[w] >= end for w, end in instr.aux)


def effect_arrive(system: System, s: list, instr: Instr, agent: int, events) -> Violation | None:
    violation = None
    for inst in instr.target:
        violation = violation or system._arrive(s, inst, instr.amount, agent, instr.src, events)
    return violation


def effect_arrive_drop(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        b = system.barrier_base + BARRIER_FIELDS * inst
        s[b + EXPECTED] -= 1
        if s[b + EXPECTED] < 0 and violation is None:
            violation = Violation("BP121", f"arrive_drop lowers the expected count of "
                                  f"{system.instances[inst].name} below zero",
                                  agent, inst, instr.src)
        violation = violation or system._arrive(s, inst, 1, agent, instr.src, events)
    return violation


def effect_expect_tx(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, instr.amount, agent, instr.src, events)
    return violation


def effect_arrive_expect_tx(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, instr.amount, agent, instr.src, events)
        violation = violation or system._arrive(s, inst, 1, agent, instr.src, events)
    return violation


def effect_complete_tx(system: System, s: list, instr: Instr, agent: int, events):
    violation = None
    for inst in instr.target:
        violation = violation or system._tx(s, inst, -instr.amount, agent, instr.src, events)
    return violation


def effect_wait(system: System, s: list, instr: Instr, agent: int, events) -> None:
    # The wait observed every completion so far.
    s[instr.aux] = _phase(system, s, instr.target)


def effect_barrier_test(system: System, s: list, instr: Instr, agent: int, events) -> None:
    """barrier_test: true iff barrier_wait would pass now; then it flips the private bit, as
    the wait would (Mosaic GPU stores the new parity only when the test succeeds). The
    protocol's control flow does not depend on the answer."""
    if guard_wait(system, s, instr):
        s[instr.aux] = _phase(system, s, instr.target)


def effect_wait_parity(system: System, s: list, instr: Instr, agent: int, events):
    """The hardware's rule: a parity wait must return for the completion it means. (One the
    barrier has already run past is caught before, as a state: `state_violations`.)"""
    meant = intended_completion(instr, s[instr.aux])
    phase = _phase(system, s, instr.target)
    s[instr.aux] = phase
    if phase != meant:
        return Violation(
            "BP101", f"{system.agents[agent].name}'s wait on {system.instances[instr.target].name} "
            f"means completion {meant} but returns after completion {phase}, a phase it does "
            "not mean (its parity bit is stale)", agent, instr.target, instr.src)
    return None


def effect_issue_async(system: System, s: list, instr: Instr, agent: int, events):
    # The issuer's arrive.expect_tx (Pallas copies), then the copy is in flight.
    violation = effect_arrive_expect_tx(system, s, instr, agent, events)
    for slot in instr.aux:
        s[system.slot_base + slot] += 1
    return violation


def effect_sem_signal_set(system: System, s: list, instr: Instr, agent: int, events) -> None:
    for slot in instr.aux:
        s[system.slot_base + slot] += 1


def guard_signals_landed(system: System, state, instr: Instr) -> bool:
    return not any(state[system.slot_base + slot] for slot in instr.aux)


def effect_issue_tcgen05(system: System, s: list, instr: Instr, agent: int, events) -> None:
    q = system.queue_pos[agent]
    s[q] = s[q] + (instr.aux,)


GUARDS = {
    ARRIVE: None, ARRIVE_DROP: None, EXPECT_TX: None, ARRIVE_TX: None, COMPLETE_TX: None,
    WAIT: guard_wait, WAIT_PARITY: guard_wait_parity, ISSUE_ASYNC: None, ISSUE_TCGEN05: None,
    FORK: None, AWAIT_FORK: guard_await_fork, JOIN: guard_join, UNMODELED: None,
    WAIT_PHASE: guard_wait_phase, SEM_SIGNAL: None, SEM_WAIT: guard_sem_wait,
    HW_ARRIVE: None, HW_WAIT: hw.guard_wait, BARRIER_TEST: None,
    MBAR_INIT: None, FENCE_INIT: None, FENCE_ASYNC: None,
    SEM_SIGNAL_SET: None, SIGNALS_LANDED: guard_signals_landed,
}
EFFECTS = {
    ARRIVE: effect_arrive, ARRIVE_DROP: effect_arrive_drop, EXPECT_TX: effect_expect_tx,
    ARRIVE_TX: effect_arrive_expect_tx, COMPLETE_TX: effect_complete_tx, WAIT: effect_wait,
    WAIT_PARITY: effect_wait_parity, ISSUE_ASYNC: effect_issue_async,
    ISSUE_TCGEN05: effect_issue_tcgen05, FORK: None, AWAIT_FORK: None, JOIN: None,
    UNMODELED: None, WAIT_PHASE: effect_wait_parity, SEM_SIGNAL: effect_sem_signal,
    SEM_WAIT: effect_sem_wait,
    UNMODELED: None, HW_ARRIVE: init.effect_hw_arrive, HW_WAIT: init.effect_hw_wait,
    BARRIER_TEST: effect_barrier_test,
    MBAR_INIT: init.effect_init, FENCE_INIT: init.effect_fence, FENCE_ASYNC: init.effect_fence,
    SEM_SIGNAL_SET: effect_sem_signal_set, SIGNALS_LANDED: None,
}


class _IndexOutOfRange(Exception):
    def __init__(self, message: str, loc: Loc):
        super().__init__(message)
        self.message = message
        self.loc = loc


def _check_names(kernel: Kernel) -> None:
    """A parameter named like an index (axis or loop variable) would be silently shadowed by it
    inside the body: refuse it."""
    axes = {a for a, _ in kernel.grid} | {a for a, _ in kernel.cluster} | \
        {kernel.thread_axis, kernel.warp_axis}
    loops = {s.var for s in walk(kernel.body) if isinstance(s, Loop)}
    for name in kernel.params:
        if name in axes or name in loops:
            what = "a loop variable" if name in loops else "an axis"
            raise ModelError(f"parameter `{name}` of {kernel.name} has the same name as {what}; "
                             "inside the body one would hide the other", loc=kernel.loc,
                             hint=f"rename the {'loop variable' if name in loops else 'axis'}, "
                                  f"e.g. `{name}_idx`")


def _op_text(op: Op, barrier_name: str, nbytes: int, env: Mapping[str, int]) -> str:
    kind = op.kind
    if kind in ("copy_gmem_to_smem", "tma_load", "expect_tx", "arrive_expect_tx", "complete_tx",
                "async_store_smem"):
        return f"{kind}({barrier_name}, {nbytes}B)"
    if kind == "wait_parity":
        if op.phase is not None:
            return f"wait_parity({barrier_name}, phase={evaluate(op.phase, env)})"
        return f"wait_parity({barrier_name}, {evaluate(op.parity, env) % 2})"
    if kind == "arrive":
        count = evaluate(op.count, env)
        return f"arrive({barrier_name}{'' if count == 1 else f', count={count}'})"
    return f"{kind}({barrier_name})"


GRID_LIMIT = 4096
# Lockstep clusters modelled as blocks of their own: the axis's name (not an identifier, so no
# name of the protocol can clash) and the most blocks this may make.
LOCKSTEP_AXIS = "·lockstep"
LOCKSTEP_LIMIT = 16


def lockstep_blocks(kernel: Kernel, env: Mapping[str, int], blocks: int) -> int:
    """How many clusters a System models explicitly, as blocks along LOCKSTEP_AXIS (1: none).

    A global semaphore signalled in lockstep by `copies` clusters is one counter; while its waits
    only read it, one modelled cluster whose signals count `copies` times stands for all of them.
    A decrementing wait takes from the counter what the other clusters' waits then lack, so the
    copies are modelled as clusters of their own (each its own barriers, the one counter shared)
    when every semaphore has the same `copies`, the kernel has no cluster barrier (which would
    then span them) and they make at most LOCKSTEP_LIMIT blocks."""
    sems = [a for a in kernel.barriers if a.semaphore]
    copies = {evaluate(a.copies, env) for a in sems}
    if len(copies) != 1 or (n := copies.pop()) <= 1 or n * blocks > LOCKSTEP_LIMIT:
        return 1
    ops = list(kernel.ops())
    if not any(op.kind == "semaphore_wait" and op.decrement for op in ops) or \
            any(op.kind in ("cluster_arrive", "cluster_wait") for op in ops):
        return 1
    return n



def grid_size(kernel: Kernel, params: Mapping[str, int]) -> int:
    total = 1
    for _, n in kernel.grid:
        total *= max(1, evaluate(n, kernel.param_values(params)))
    return total


def grid_positions(kernel: Kernel, params: Mapping[str, int], limit: int = GRID_LIMIT
                   ) -> list[dict[str, int]]:
    """Every cluster position of the grid while there are at most `limit`; beyond that the
    first, second and last position along each axis (the caller must say so)."""
    values = kernel.param_values(params)
    sizes = [(axis, max(1, evaluate(n, values))) for axis, n in kernel.grid]
    if grid_size(kernel, values) > limit:
        ranges = [sorted({0, min(1, n - 1), n - 1}) for _, n in sizes]
    else:
        ranges = [range(n) for _, n in sizes]
    return [dict(zip([a for a, _ in sizes], combo)) for combo in itertools.product(*ranges)]


def compile_systems(kernel: Kernel, params: Mapping[str, int] | None = None,
                    races: bool = True) -> list[System]:
    """One System per distinct behaviour across the grid: clusters whose unrolled programs are
    identical need to be checked once. `races=False` leaves memory effects out."""
    seen: dict[tuple, System] = {}
    values = kernel.param_values(params)
    for position in grid_positions(kernel, values):
        system = System(kernel, values, position, races=races)
        key = tuple(system.programs)
        if key not in seen:
            seen[key] = system
    systems = list(seen.values())
    lockstep = [a for a in kernel.barriers if a.semaphore and evaluate(a.copies, values) > 1]
    if lockstep and systems[0].lockstep == 1 and len({_semaphore_projection(s) for s in systems}) > 1:
        # Clusters whose barrier protocols differ (more tiles here, fewer there) still signal
        # in lockstep if their semaphore operations are the same; these are not.
        for system in systems:
            system.findings.append(StaticFinding(
                "BP190", f"semaphore `{lockstep[0].name}` is signalled differently by different "
                "clusters of the grid; its lockstep model needs every cluster to signal and "
                "wait alike", lockstep[0].loc, "check a grid whose clusters all signal alike"))
    return systems


def _semaphore_projection(system: System) -> tuple:
    """Each agent's semaphore operations, in order: what the lockstep model of a global
    semaphore needs to be the same in every cluster of the grid."""
    def signal(i):
        if i.op in (SEM_SIGNAL_SET, SIGNALS_LANDED):
            return (i.op, tuple((system.slots[k].inst, system.slots[k].amount) for k in i.aux))
        return (i.op, i.target, i.amount, i.aux)
    return tuple(tuple(signal(i) for i in prog
                       if i.op in (SEM_SIGNAL, SEM_WAIT, SEM_SIGNAL_SET, SIGNALS_LANDED))
                 for prog in system.programs)


# SEMANTICS-READY
