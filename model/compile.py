"""Compilation of a kernel into a System's parts: agents, their unrolled programs, barrier
instances, in-flight slots and the layout of the state vector (SEMANTICS.md).

`CompiledKernel` does the compiling; `System` (semantics.py) inherits it and steps the state
it lays out. Control flow never depends on barrier state, so every agent's program unrolls to
straight-line instructions (instructions.py) at concrete parameter values. Each operation
compiles through the hook its primitive declares (model/kinds.py; the families are
model/primitives/, hw_barriers.py and init_visibility.py) with the shared methods below
(`barrier_site`, `_emit`, `_slot`, ...); families with state of their own lay out their fields
after these (`hw_barriers.layout`, `init_visibility.layout`).
"""

from __future__ import annotations

import itertools
from typing import Mapping

from . import ir, kinds
from .block_limits import check_block_sizes
from .extensions import EXTENSIONS
from .grid import LOCKSTEP_AXIS, lockstep_blocks, peer_blocks
from .instructions import (AWAIT_FORK, BARRIER_FIELDS, EFFECT_SIGNAL, FORK, ISSUE_ASYNC,
                           ISSUE_TCGEN05, JOIN, PALLAS_WAITS, PARITY_WAITS, WAIT, WAITS, Agent,
                           Instance, Instr, Slot, Source)
from .lanes import IN_WARP_REGION, LANES_SPLIT, lane_split
from .ir import (MAX_ARRIVALS, BarrierRef, Kernel, Loc, Loop, ModelError, Op, When,
                 WarpRegion, evaluate, walk)
from . import exit_async
from .memory import Access, MemoryLayout
from .static_rules import StaticFinding

# Asynchronous accesses a thread waits for itself (issuing kind -> group; waiting kind ->
# (group, whether it leaves `count` of the newest in flight)) and the operations of Pallas's
# own API (the rest are PTX-level): the primitive registry's tables, re-exported.
ASYNC_GROUPS = kinds.ASYNC_GROUPS
ASYNC_WAITS = kinds.ASYNC_WAITS
PALLAS_KINDS = kinds.PALLAS_KINDS


class CompiledKernel:
    """A kernel compiled for concrete parameters: agents, programs, barrier instances, layout.
    `System` (semantics.py) steps it."""

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
        check_block_sizes(kernel, env)       # before one object per thread or barrier is made
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
        self.hw_instances: list = []       # hardware barriers (hw_barriers.HwInstance)
        self.hw_index: dict[tuple, int] = {}
        self._build_agents()
        # Memory effects are compiled only when races are checked: without them copies to
        # different buffers share one in-flight counter (`_slot`), as in the barrier protocol.
        self.memory = MemoryLayout(kernel.buffers, self.blocks, env) \
            if races and kernel.buffers else None
        if self.memory is not None:
            self.memory.events = [[] for _ in self.agents]
        # each agent's asynchronous shared-memory issues and waits, for BP105 at exit
        self.async_ledger: list[list[tuple]] = [[] for _ in self.agents]
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
        for ext in EXTENSIONS:
            if ext.after_programs is not None:
                ext.after_programs(self)
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
              access: Access | None = None, owner: object = None,
              issuer: int | None = None, multicast: bool = False) -> int:
        # One counter per destination: copies that complete the same bytes on the same
        # instance but write different memory land in either order, and each destination is
        # written until its own copy lands (one `full` barrier may serve two buffers). Copies
        # of one destination share it (their landings are alike); without memory effects all
        # alike copies do, as the barrier protocol cannot tell them apart. A TMA copy of
        # `issuer` writing bytes another thread's copy of that counter writes gets a counter
        # of its own: the two race (memory.py `slot_groups`), unless both are multicast.
        dest = self.memory.destination(access) if access is not None else ""
        key = (effect, inst, amount, kind, dest) + ((owner,) if owner is not None else ())
        if access is not None and issuer is not None and key in self._slot_index and \
                self.memory.clashes(self._slot_index[key], issuer, access.mask, multicast):
            key += (("issuer", issuer),)
        if key not in self._slot_index:
            self._slot_index[key] = len(self.slots)
            self.slots.append(Slot(effect, inst, amount, kind, dest))
        k = self._slot_index[key]
        if access is not None:
            known = self.memory.slot_access.setdefault(k, [])
            if all(x.mask != access.mask or x.text != access.text for x in known):
                known.append(access)
            if issuer is not None:
                self.memory.issued(k, issuer, access.mask, multicast)
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
            mask, text, boxes = self.memory.resolve(ref, env, block, op.loc)
            out.append(Access(who, write, mask, src, text, boxes))
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
            if self.lockstep > 1:       # a peer in the thread's own lockstep copy of the cluster
                target += block[len(target):]
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
        mask, texts, boxes = 0, [], ()
        for ref in op.writes:
            m, text, box = self.memory.resolve(ref, env, block, op.loc)
            mask |= m
            texts.append(text)
            boxes += box
        return Access("TMA copy", True, mask, src, ", ".join(texts), boxes)

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
                if lane_split(ir.free_vars(stmt.cond)):
                    # A branch on the lane index splits a warp: each side runs with part of it.
                    split = {**env, LANES_SPLIT: 1}
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
            wenv = {**env, IN_WARP_REGION: 1}
            wenv[region.axis] = wenv[self.kernel.warp_axis] = w
            self._unroll(region.body, wenv, wa)
            joins.append((wa, len(self.programs[wa])))
        wenv = {**env, IN_WARP_REGION: 1}
        wenv[region.axis] = wenv[self.kernel.warp_axis] = 0
        self._unroll(region.body, wenv, agent)
        self._emit(agent, Instr(JOIN, None, 0, tuple(joins), join))

    def _unroll_op(self, op: Op, env: dict[str, int], agent: int, block: tuple[int, ...]) -> None:
        prim = kinds.lookup(op.kind)
        if prim is None:
            raise ModelError(f"unknown operation kind {op.kind!r}", loc=op.loc)
        prim.compile(self, op, env, agent, block)   # its family's hook (model/kinds.py)

    # -- what the families' compile hooks share ----------------------------------------------

    def refuse_lane_split(self, op: Op, env: Mapping[str, int]) -> None:
        """Only named barriers may be reached from a branch that splits a warp."""
        if env.get(LANES_SPLIT):
            raise ModelError(f"`{op.describe()}` in a branch on the lane index is not modelled",
                             loc=op.loc, hint="only named barriers may be reached from a branch "
                                              "that splits a warp")

    def resolve_operand(self, op: Op, env: Mapping[str, int], block: tuple[int, ...]) -> int:
        """The instance of the barrier or semaphore an op names (warp-uniform code only)."""
        self.refuse_lane_split(op, env)
        if op.barrier is None:
            raise ModelError(f"{op.kind} needs a barrier", loc=op.loc)
        return self._resolve(op.barrier, env, block, op.loc)

    def barrier_site(self, op: Op, env: Mapping[str, int],
                     block: tuple[int, ...]) -> tuple[int, int, int]:
        """An mbarrier operation's instance, source (its text at these values) and bytes."""
        inst = self.resolve_operand(op, env, block)
        alloc = self.instances[inst].alloc
        if alloc.semaphore:
            raise ModelError(f"{op.kind} on `{alloc.name}`, which is a semaphore", loc=op.loc,
                             hint="signal and wait on semaphores; arrive and wait on barriers")
        name = self.instances[inst].name
        nbytes = evaluate(op.bytes, env)
        text_of = kinds.lookup(op.kind).text
        text = text_of(op, name, nbytes, env) if text_of else f"{op.kind}({name})"
        return inst, self._source(op, text, op.loc), nbytes

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
        pos = self.queue_end
        for ext in EXTENSIONS:
            if ext.layout is not None:
                pos = ext.layout(self, pos)
        self.width = pos
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
            joins = {(w, end): (a, pc) for a, prog in enumerate(self.programs)
                     for pc, instr in enumerate(prog) if instr.op == JOIN
                     for w, end in instr.aux}
            self.memory.finish(list(self.lengths), [slot.inst for slot in self.slots], joins)
        self.exit_live = exit_async.finish(self)

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

