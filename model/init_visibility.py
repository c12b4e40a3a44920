"""mbarrier initialisation and who it is visible to (PTX `mbarrier.init`, NVIDIA/Fuser#1552).

A barrier declared `explicit_init=True` starts uninitialised: one thread runs `mbarrier_init`
on each instance, and the init is then visible to that thread only. The PTX ISA treats the init
as a write to shared memory like any other, so it reaches

- another thread of the same block through a CTA-wide synchronization that orders it: a
  `bar.sync` / `__syncthreads` / named barrier or the cluster barrier in which a thread that
  sees the init arrives (after the init) and the other thread waits for that phase;
- a thread of another block of the cluster only through the cluster barrier: a
  `barrier.cluster.arrive` (release semantics) by a thread that sees the init, or a
  `barrier.cluster.arrive.relaxed` (CUTLASS `cluster_arrive_relaxed`) once the init was
  released at cluster scope (`fence.mbarrier_init.release.cluster`, CUTLASS's
  `fence_barrier_init`) by a thread that sees it;
- the async proxy (TMA landings, tcgen05 commits, which update the barrier from outside the
  generic proxy) only after a proxy fence by a thread that sees it: `fence.mbarrier_init`
  (what CUTLASS issues) or `fence.proxy.async.shared::cta` (`fence_view_async_shared`).

Using an instance (arrive, expect_tx, wait, a copy or commit that arrives on it) before its init
is visible to the user is BP147 init-not-visible, judged on the state where the user stands at
that operation. Barriers without explicit init keep their meaning: initialised before the body,
visible to everyone (Pallas inits them for you).

State, after hw_barriers.py's fields (System._layout), only for explicit-init instances:

    vis[inst]        bit a: the init is visible to agent a; bit A (agents): to the async proxy;
                     bit A + 1: released at cluster scope (fence_mbarrier_init). 0: not initialised
    rel[inst, h]     for hardware barrier h of the instance's block or the cluster barrier: 1 +
                     the first phase of h in which an agent that sees the init arrived (0: none)
    relc[inst]       the same at cluster scope, for the cluster barrier (a release arrival, or a
                     relaxed one after fence_mbarrier_init): what another block may learn

An agent that passes a wait on h for the phase it arrived in (hwseen) learns every init released
in that phase or an earlier one: those arrivals happen before the phase completes.

Where the model is stricter than the hardware: visibility passes only through the hardware
barriers above (what CUTLASS, DeepGEMM and nvFuser use after their inits), not through another
mbarrier's arrive/wait; a protocol that publishes an init that way is reported. Re-initialising
an instance (`mbarrier.inval` then `init`) is not modelled: an input error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .extensions import Extension
from .hw_barriers import CLUSTER_ARRIVE, HW_FIELDS, effect_arrive
from .instructions import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX, FENCE_ASYNC,
                           FENCE_INIT, HW_ARRIVE, HW_WAIT, ISSUE_ASYNC, ISSUE_TCGEN05, MBAR_INIT,
                           WAITS, Instr)
from .ir import ModelError, Op
from .kinds import Primitive
from .steps import UNREDUCED, Step, Tla
from .violations import Violation

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System

# MBAR_INIT: target=instance; FENCE_INIT (fence.mbarrier_init.release.cluster) and FENCE_ASYNC
# (fence.proxy.async.shared::cta): no operand

# IR kinds of the family (model/kinds.py: their declarations are EXTENSION's primitives).
MBARRIER_INIT = "mbarrier_init"
FENCE_MBARRIER_INIT = "fence_mbarrier_init"
FENCE_PROXY_ASYNC = "fence_proxy_async"
INIT_KINDS = frozenset({MBARRIER_INIT, FENCE_MBARRIER_INIT, FENCE_PROXY_ASYNC})

CODES = {"BP147": "init-not-visible"}


def compile_op(system: "System", op: Op, env, agent: int, block) -> None:
    """Unroll one init or fence of `agent`."""
    if op.kind == MBARRIER_INIT:
        inst = system._resolve(op.barrier, env, block, op.loc)
        alloc = system.instances[inst].alloc
        if alloc.semaphore or not alloc.explicit_init:
            raise ModelError(f"mbarrier_init on `{alloc.name}`, which is initialised before the "
                             "kernel body", loc=op.loc,
                             hint=f"declare it with explicit_init=True to initialise it in the "
                                  f"protocol (Pallas barriers are initialised for you)")
        if op.barrier.block is not None and system.instances[inst].block != block:
            raise ModelError(f"mbarrier_init on another block's instance of `{alloc.name}`",
                             loc=op.loc, hint="each block initialises its own barriers")
        src = system._source(op, f"mbarrier_init({system.instances[inst].name})", op.loc)
        system._emit(agent, Instr(MBAR_INIT, inst, 0, None, src))
        return
    code = FENCE_INIT if op.kind == FENCE_MBARRIER_INIT else FENCE_ASYNC
    src = system._source(op, f"{op.kind}()", op.loc)
    system._emit(agent, Instr(code, None, 0, None, src))


def layout(system: "System", pos: int) -> int:
    """Place the visibility fields from `pos` (none without explicit-init barriers); return the
    end of the state. Also checks that each instance is initialised by at most one instruction."""
    system.init_insts = tuple(i for i, inst in enumerate(system.instances)
                              if inst.alloc.explicit_init)
    system.init_pos, system.init_rel_pos, system.init_relc_pos = {}, {}, {}
    system.init_uses = []
    system.init_relaxed = frozenset()
    if not system.init_insts:
        return pos
    inits: dict[int, int] = {}
    for a, prog in enumerate(system.programs):
        for instr in prog:
            if instr.op == MBAR_INIT:
                if instr.target in inits:
                    raise ModelError(
                        f"{system.instances[instr.target].name} is initialised more than once "
                        "(re-initialisation after mbarrier.inval is not modelled)",
                        loc=system.sources[instr.src].loc,
                        hint="initialise each instance once, in one thread")
                inits[instr.target] = a
    cluster_h = [h for h, hw in enumerate(system.hw_instances) if hw.kind == "cluster"]
    for i in system.init_insts:
        system.init_pos[i] = pos
        pos += 1
    for i in system.init_insts:
        for h, hw in enumerate(system.hw_instances):
            if hw.kind == "cluster" or hw.block == system.instances[i].block:
                system.init_rel_pos[(i, h)] = pos
                pos += 1
    for i in system.init_insts if cluster_h else ():
        system.init_relc_pos[i] = pos
        pos += 1
    system.init_async_bit = 1 << system.n_agents
    system.init_fenced_bit = 1 << (system.n_agents + 1)
    system.init_uses = [[_uses(system, instr) for instr in prog] for prog in system.programs]
    # (agent, pc) of every barrier.cluster.arrive.relaxed: no release of its own
    system.init_relaxed = frozenset(
        (a, pc) for a, prog in enumerate(system.programs) for pc, instr in enumerate(prog)
        if instr.op == HW_ARRIVE and system.sources[instr.src].op is not None
        and system.sources[instr.src].op.kind == CLUSTER_ARRIVE
        and system.sources[instr.src].op.name == "relaxed")
    return pos


def _uses(system: "System", instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(instances the thread itself touches, instances the async proxy will update) of one
    instruction, explicit-init instances only."""
    mine, proxy = [], []
    op = instr.op
    if op in (ARRIVE, ARRIVE_DROP, EXPECT_TX, ARRIVE_TX, COMPLETE_TX):
        mine += instr.target
    elif op in WAITS:
        mine.append(instr.target)
    elif op == ISSUE_ASYNC:
        landing = [system.slots[k].inst for k in instr.aux]
        mine += list(instr.target) + landing
        proxy += landing
    elif op == ISSUE_TCGEN05 and instr.aux is not None:
        mine += system.arrival_sets[instr.aux]
        proxy += system.arrival_sets[instr.aux]
    explicit = set(system.init_insts)
    return (tuple(sorted({i for i in mine if i in explicit})),
            tuple(sorted({i for i in proxy if i in explicit})))


def initial_fields(system: "System") -> list[int]:
    return [0] * (len(system.init_pos) + len(system.init_rel_pos) + len(system.init_relc_pos))


# -- the step rules ----------------------------------------------------------------------------

def effect_init(system: "System", s: list, instr, agent: int, events) -> None:
    s[system.init_pos[instr.target]] |= 1 << agent


def effect_fence(system: "System", s: list, instr, agent: int, events) -> None:
    """Every init this agent sees becomes visible to the async proxy (and, for
    fence.mbarrier_init, released at cluster scope for the next cluster barrier). Without
    explicit-init barriers there is nothing to publish."""
    if not system.init_insts:
        return
    bits = system.init_async_bit | (system.init_fenced_bit if instr.op == FENCE_INIT else 0)
    me = 1 << agent
    for i in system.init_insts:
        pos = system.init_pos[i]
        if s[pos] & me:
            s[pos] |= bits


def effect_hw_arrive(system: "System", s: list, instr, agent: int, events):
    """A hardware barrier arrival (hw_barriers.py), which also releases the inits the arriving
    agent sees into the phase it arrives in."""
    h = instr.target
    phase = s[system.hw_base + HW_FIELDS * h]
    violation = effect_arrive(system, s, instr, agent, events)
    if violation is not None or not system.init_insts:
        return violation
    me = 1 << agent
    for i in system.init_insts:
        vis = s[system.init_pos[i]]
        if not vis & me:
            continue
        pos = system.init_rel_pos.get((i, h))
        if pos is not None and not s[pos]:
            s[pos] = phase + 1
        if system.hw_instances[h].kind == "cluster" and (
                vis & system.init_fenced_bit or (agent, s[agent] - 1) not in system.init_relaxed):
            pos = system.init_relc_pos[i]
            if not s[pos]:
                s[pos] = phase + 1
    return None


def effect_hw_wait(system: "System", s: list, instr, agent: int, events) -> None:
    """Passing a hardware barrier's wait: the agent learns the inits released in the phase it
    arrived in or before (hwseen)."""
    if not system.init_insts:
        return None
    h = instr.target
    upto = s[instr.aux] + 1
    me = 1 << agent
    own = system.agents[agent].block
    for i in system.init_insts:
        pos = system.init_pos[i]
        if s[pos] & me:
            continue
        if system.instances[i].block == own:
            rel = system.init_rel_pos.get((i, h))
        else:
            rel = system.init_relc_pos.get(i) if system.hw_instances[h].kind == "cluster" \
                else None
        if rel is not None and 0 < s[rel] <= upto:
            s[pos] |= me
    return None


# -- judging states ----------------------------------------------------------------------------

def violations(system: "System", state) -> list:
    """BP147: an agent stands at an operation on an explicit-init instance whose init it does
    not see (or, for a copy or commit that will arrive on it, the async proxy does not)."""
    found = []
    for a in range(system.n_agents):
        pc = state[a]
        if pc >= system.lengths[a]:
            continue
        mine, proxy = system.init_uses[a][pc]
        if not mine and not proxy:
            continue
        instr = system.programs[a][pc]
        who = system.agents[a].name
        text = system.sources[instr.src].text
        for i in mine:
            vis = state[system.init_pos[i]]
            if vis & (1 << a):
                continue
            inst = system.instances[i]
            if not vis:
                why = "before any thread has initialised it"
                fix = f"initialise {inst.name} (mbarrier_init) and sync before this use"
            elif inst.block == system.agents[a].block:
                why = ("but no CTA sync has made its init visible to this thread (no syncthreads "
                       "/ named barrier / cluster barrier phase it waited for had an arrival "
                       "after the init)")
                fix = ("after mbarrier_init, a syncthreads() (or bar.sync / cluster_sync) that "
                       "the initialising thread and this one both pass")
            else:
                why = ("in another block's shared memory, whose init has not reached this block "
                       "(it needs fence_mbarrier_init, then a cluster barrier phase this thread "
                       "waits for)")
                fix = ("after mbarrier_init: fence_mbarrier_init(), then cluster_arrive + "
                       "cluster_wait in every thread of the cluster before this use")
            found.append(Violation("BP147", f"{who} is at {text}, which uses {inst.name} {why}",
                                   a, i, instr.src, [f"fix: {fix}"]))
            break
        else:
            for i in proxy:
                vis = state[system.init_pos[i]]
                if vis & system.init_async_bit:
                    continue
                inst = system.instances[i]
                found.append(Violation(
                    "BP147", f"{who} is at {text}, whose asynchronous arrival on {inst.name} "
                    "would reach it through the async proxy, to which its init is not visible",
                    a, i, instr.src,
                    ["fix: after mbarrier_init, fence_mbarrier_init() (or fence_proxy_async()) "
                     "in the initialising thread, before the sync that publishes the init"]))
                break
    return found


def _init_step(opcode: int, effect, constructor: str, text) -> Step:
    # Neither reduction models what an init or fence publishes: both are off where one occurs.
    return Step(opcode, guard=None, effect=effect, touches=UNREDUCED, resources=UNREDUCED,
                waits=False, symmetry=UNREDUCED, tla=Tla(constructor, "InitThreadStep", text))


STEPS = (
    _init_step(MBAR_INIT, effect_init, "mbarrier_init(inst)",
               lambda system, instr: f"mbarrier_init({instr.target + 1})"),
    _init_step(FENCE_INIT, effect_fence, "fence_mbarrier_init",
               lambda system, instr: "fence_mbarrier_init"),
    _init_step(FENCE_ASYNC, effect_fence, "fence_proxy_async",
               lambda system, instr: "fence_proxy_async"),
)

_COMMON = dict(blocking=False, waits_for="", reference="inits",
               prover="init prefix (init_prefix.py)", repair=frozenset())

EXTENSION = Extension(
    "mbarrier init visibility", codes=CODES, primitives=(
        Primitive(MBARRIER_INIT, "mbarrier.init: this thread initialises one instance",
                  needs=frozenset({"barrier"}), opcodes=("mbarrier_init",), dsl="mbarrier_init",
                  **_COMMON),
        Primitive(FENCE_MBARRIER_INIT, "fence.mbarrier_init.release.cluster: the thread's inits "
                  "are released to the cluster and to the async proxy", needs=frozenset(),
                  opcodes=("fence_mbarrier_init",), dsl="fence_mbarrier_init",
                  describe=lambda op: f"{op.kind}()", **_COMMON),
        Primitive(FENCE_PROXY_ASYNC, "fence.proxy.async.shared::cta: the thread's inits are "
                  "visible to the async proxy (TMA, tcgen05)", needs=frozenset(),
                  opcodes=("fence_proxy_async",), dsl="fence_proxy_async",
                  describe=lambda op: f"{op.kind}()", **_COMMON),
    ),
    steps=STEPS,
    # a hardware barrier's arrival and wait also publish the inits their agent sees
    wraps={HW_ARRIVE: effect_hw_arrive, HW_WAIT: effect_hw_wait},
    compile_op=compile_op, layout=layout, initial_fields=initial_fields,
    state_violations=lambda system, state: violations(system, state) if system.init_insts else [])
