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

The statement of the rules is split by job; this module steps a compiled kernel and judges its
states, and re-exports the tables the engines read (opcodes, `OPCODE_NAMES`, `CODES`):
- instructions.py: the opcodes, `Instr` and the parts of a System (agents, instances, slots);
- compile.py: `CompiledKernel`, the unrolling and the state layout `System` inherits;
- steps.py: one guard and one effect per opcode (`GUARDS`, `EFFECTS`), which `step` applies;
- violations.py: the BP codes and `Violation`; static_rules.py: the rules checked before any
  parameter is fixed (`static_findings`);
- grid.py: the cluster positions of the grid, lockstep clusters, multicast peers.
Barrier kinds with rules of their own live beside them as plug-ins (hw_barriers.py for named and
cluster barriers, init_visibility.py for explicit init), which plugins.py installs into these
tables and whose hooks (extensions.py) this module calls; memory.py states the races.
"""

from __future__ import annotations

from typing import Mapping

from . import exit_async
from .compile import CompiledKernel
from .extensions import EXTENSIONS
from .grid import grid_positions, position_key
from .instructions import (  # noqa: F401  (the opcode tables are re-exported: engines read them here)
    ARRIVE, ARRIVE_DROP, ARRIVE_TX, AWAIT_FORK, BARRIER_FIELDS, BARRIER_TEST, COMPLETE_TX,
    EFFECT_ARRIVE, EFFECT_COMPLETE_TX, EFFECT_SIGNAL, EXPECT_TX, EXPECTED, FENCE_ASYNC, FENCE_INIT,
    FORK, HW_ARRIVE, HW_WAIT, ISSUE_ASYNC, ISSUE_TCGEN05, JOIN, MBAR_INIT, OPCODE_NAMES,
    PALLAS_WAITS, PARITY_WAITS, PENDING, PHASE, SEM_SIGNAL, SEM_SIGNAL_SET, SEM_WAIT,
    SIGNALS_LANDED, TX, UNMODELED, WAIT, WAIT_PARITY, WAIT_PHASE, WAITS, Instr)
from .ir import MAX_TX, Kernel, Loc, evaluate
from .static_rules import StaticFinding
from .steps import EFFECTS, GUARDS, intended_completion
from .violations import CODES, Violation  # noqa: F401  (CODES re-exported)


class System(CompiledKernel):
    """A kernel compiled for concrete parameters (compile.py: agents, programs, barrier
    instances, layout) and its step rules: states, successors, the rules judged on a state."""

    # -- states ------------------------------------------------------------------------------

    def initial_state(self) -> tuple:
        s: list = [0] * self.n_agents
        for inst in self.instances:
            s += [0, inst.expected, 0, inst.expected]
        s += [-1] * len(self.seen_pos)
        s += [0] * len(self.slots)
        s += [()] * len(self.queue_agents)
        for ext in EXTENSIONS:
            if ext.initial_fields is not None:
                s += ext.initial_fields(self)
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
        """Rules judged on a state: a wait for a stated phase the barrier has run past (BP101), late joins
        (BP102), and at kernel exit BP103, BP104, BP105, BP130."""
        found = []
        for a in self.parity_agents:
            instr = self.current(state, a)
            # Only a stated phase is an intent to check here; a bare parity wait is judged by
            # what it returns across schedules (model/parity.py).
            if instr is None or instr.op != WAIT_PHASE:
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
        for ext in EXTENSIONS:
            if ext.state_violations is not None:
                found += ext.state_violations(self, state)
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
        found += exit_async.exit_violations(self)   # a thread's own, running past its end
        for inst, instance in enumerate(self.instances):
            phase, pending, tx, expected = self.barrier(state, inst)
            if tx != 0:
                found.append(Violation(
                    "BP130", f"{instance.name} ends with tx-count {tx}: "
                    f"{'more bytes expected than delivered' if tx > 0 else 'bytes delivered without expect_tx'}",
                    None, inst))
            elif pending != expected:
                late = self.in_flight(state, inst)     # arrivals issued, not yet delivered
                found.append(Violation(
                    "BP104", f"{instance.name} ends with {expected - pending} of {expected} "
                    f"arrivals of phase {phase + 1} that never completed it"
                    + (f" (when every thread has exited, still in flight: {', '.join(late)})"
                       if late else ""), None, inst))
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
                name = self.instances[inst].name
                if instr.op == WAIT:
                    seen = max(state[instr.aux], 0)
                    want = f"completion {seen + 1} of {name}"
                elif instr.op == WAIT_PARITY:   # a bare parity: an odd or even count
                    want = (f"{name} to complete a phase of parity {instr.amount} (an "
                            f"{'odd' if instr.amount == 0 else 'even'} completion count)")
                else:
                    want = f"completion {intended_completion(instr, state[instr.aux])} of {name}"
                line = (f"{agent.name} blocked at {self.sources[instr.src].text} "
                        f"({self.sources[instr.src].loc}) waiting for {want}; "
                        f"it has {phase} completion(s) "
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
        claimed = None      # a plug-in's name for this deadlock (hw_barriers.py: BP144)
        for ext in EXTENSIONS:
            if ext.deadlock is not None:
                lines, found = ext.deadlock(self, state)
                details += lines
                claimed = claimed or found
        blocked = [a for a in range(self.n_agents) if self.current(state, a) is not None]
        first = blocked[0] if blocked else None
        src = self.current(state, first).src if first is not None else None
        if tx_blocked is not None:
            return Violation("BP130", f"{self.instances[tx_blocked].name} can never complete: its "
                             "tx-count never returns to zero", first, tx_blocked, src, details)
        if claimed is not None:
            claimed.details = details
            return claimed
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
                into = f" into {slot.dest}" if slot.dest else ""
                return f"lands on {self.instances[slot.inst].name} ({slot.amount}B){into}", None
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


def compile_systems(kernel: Kernel, params: Mapping[str, int] | None = None,
                    races: bool = True) -> list[System]:
    """One System per distinct behaviour across the grid: clusters whose unrolled programs are
    identical need to be checked once. `races=False` leaves memory effects out."""
    seen: dict[tuple, System] = {}
    values = kernel.param_values(params)
    same, keys = position_key(kernel, values), set()
    for position in grid_positions(kernel, values):
        if (k := same(position)) in keys:
            continue        # compiles as a position already compiled
        keys.add(k)
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
