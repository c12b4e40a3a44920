"""Hardware barriers that are not mbarriers: the step rules of named barriers and the cluster barrier.

- Named barriers (PTX `bar.sync id, count` / `bar.arrive id, count`, `barrier.sync` for the
  unaligned form, CUTLASS `NamedBarrier::sync/arrive`, `__syncthreads` = `bar.sync 0` with every
  thread of the block): 16 per block (ids 0..15). The first arrival of a phase fixes its thread
  count; the phase completes when that many threads have arrived, and the barrier resets.
  `bar.arrive` does not wait; `bar.sync` arrives, then waits for the completion of the phase it
  arrived in.
- The cluster barrier (`barrier.cluster.arrive` / `barrier.cluster.wait`, CUTLASS
  `cluster_arrive` / `cluster_wait`): one per cluster; a phase completes when every thread of
  every block of the cluster has arrived. Each thread alternates arrive and wait.

Thread counts are hardware threads: an agent outside a warp region is a warpgroup
(`num_warps` x 32 threads), a warp inside one is 32.

State, after semantics.py's fields (see System._layout):

    (phase, arrived, count, site)[hw instance]   completions so far; threads arrived in the open
                                                 phase; its count (0: no phase open); the source
                                                 (+1) of its first blocking aligned sync (0: none)
    arrived_in[agent, hw instance]               the phase the agent last arrived in, -1 before;
                                                 only for pairs where the agent waits

Where the model departs from the hardware: the hardware lets exited threads off a count-less
`bar.sync 0` and the cluster barrier; the model expects every thread (the CUDA contract for
`__syncthreads` and CUTLASS's use of the cluster barrier), and a thread that exits while
others wait for it is reported (BP144 for a named barrier, BP100 for the cluster barrier).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .extensions import Extension
from .instructions import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX, HW_ARRIVE,
                           HW_WAIT, ISSUE_ASYNC, Instr)
from .ir import ModelError, Op, evaluate
from .kinds import Primitive
from .lanes import IN_WARP_REGION, LANE, LANES_SPLIT, lane_split  # noqa: F401 (re-exported)
from .static_rules import StaticFinding
from .steps import HARDWARE, Step, Tla, Touch
from .violations import Violation

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System

# HW_ARRIVE: target=hw instance, amount=threads arriving, aux=HwArrival
# HW_WAIT: target=hw instance, aux=position of the agent's arrived_in entry

# IR kinds of the family (model/kinds.py: their declarations are EXTENSION's primitives).
BAR_SYNC = "bar_sync"
BAR_ARRIVE = "bar_arrive"
CLUSTER_ARRIVE = "cluster_arrive"
CLUSTER_WAIT = "cluster_wait"
HARDWARE_BARRIER_KINDS = frozenset({BAR_SYNC, BAR_ARRIVE, CLUSTER_ARRIVE, CLUSTER_WAIT})

NAMED_BARRIERS = 16
WARP_SIZE = 32

# Fields of one hardware barrier instance in the state vector.
HW_PHASE, HW_ARRIVED, HW_COUNT, HW_SITE = 0, 1, 2, 3
HW_FIELDS = 4

# Op.name of a bar_sync without a count operand (__syncthreads): every thread of the block.
ALL_THREADS = "syncthreads"

CODES = {
    "BP140": "named-barrier-count",
    "BP141": "divergent-barrier",
    "BP142": "barrier-count-mismatch",
    "BP143": "named-barrier-id",
    "BP144": "exit-while-barrier-waits",
    "BP145": "cluster-barrier-order",
    "BP146": "peer-exited",
}


@dataclass(frozen=True)
class HwInstance:
    kind: str                       # "named" or "cluster"
    block: tuple[int, ...] | None   # None for the cluster barrier
    bar_id: int
    name: str


class HwArrival(NamedTuple):
    """What one HW_ARRIVE carries besides its thread count."""
    count: int          # threads the phase needs (the instruction's count operand)
    site: int           # source index + 1 of a blocking aligned sync (bar.sync), else 0
    partial: bool       # reached from a branch on the lane index: part of a warp only
    pos: int            # the agent's arrived_in entry, -1 when it never waits on the barrier


def agent_threads(system: "System", env) -> int:
    """Hardware threads one arrival of this agent stands for."""
    return WARP_SIZE if env.get(IN_WARP_REGION) else system.kernel.num_warps * WARP_SIZE


def block_threads(system: "System") -> int:
    return system.num_threads * system.kernel.num_warps * WARP_SIZE


def _instance(system: "System", kind: str, block, bar_id: int) -> int:
    key = (kind, block if kind == "named" else None, bar_id)
    if key not in system.hw_index:
        if kind == "named":
            name = f"named_bar[{bar_id}]"
            if len(system.blocks) > 1:
                name += "@" + ",".join(map(str, block))
        else:
            name = "cluster_barrier"
        system.hw_index[key] = len(system.hw_instances)
        system.hw_instances.append(HwInstance(kind, key[1], bar_id, name))
    return system.hw_index[key]


def compile_op(system: "System", op: Op, env, agent: int, block) -> None:
    """Unroll one hardware-barrier operation of `agent` into HW_ARRIVE / HW_WAIT."""
    threads = agent_threads(system, env)
    partial = bool(env.get(LANES_SPLIT))
    text = op.describe()
    if op.kind in (CLUSTER_ARRIVE, CLUSTER_WAIT):
        if partial:
            raise ModelError(f"`{text}` in a branch on the lane index is not modelled", loc=op.loc,
                             hint="reach the cluster barrier from warp-uniform code")
        inst = _instance(system, "cluster", None, 0)
        src = system._source(op, text, op.loc)
        if op.kind == CLUSTER_ARRIVE:
            count = block_threads(system) * len(system.blocks)
            system._emit(agent, Instr(HW_ARRIVE, inst, threads, HwArrival(count, 0, False, -1),
                                      src))
        else:
            system._emit(agent, Instr(HW_WAIT, inst, 0, -1, src))
        return
    bar_id = evaluate(op.bar_id, env)
    if not 0 <= bar_id < NAMED_BARRIERS:
        system.findings.append(StaticFinding(
            "BP143", f"named barrier id {bar_id} is outside 0..{NAMED_BARRIERS - 1}: a block has "
            f"{NAMED_BARRIERS} named barriers", op.loc,
            "share ids between phases of the kernel, or use an mbarrier"))
        return
    count = evaluate(op.count, env)
    total = block_threads(system)
    if op.name == ALL_THREADS:
        count = total   # no count operand: every thread of the block
    if count <= 0 or count % WARP_SIZE or count > total:
        why = ("not a multiple of the warp size (32)" if count > 0 and count % WARP_SIZE else
               f"above the block's {total} threads" if count > total else "not positive")
        system.findings.append(StaticFinding(
            "BP140", f"named barrier {bar_id} with thread count {count}: {why}", op.loc,
            f"count whole warps of the block: a multiple of 32 up to {total}"))
        return
    if partial and not op.aligned:
        raise ModelError(f"`{text}` (unaligned) in a branch on the lane index is not modelled",
                         loc=op.loc, hint="reach it from warp-uniform code")
    inst = _instance(system, "named", block, bar_id)
    if op.name == ALL_THREADS:
        concrete = "syncthreads()"
    else:
        spelled = "bar.arrive" if op.kind == BAR_ARRIVE else \
            "bar.sync" if op.aligned else "barrier.sync"
        concrete = f"{spelled}({bar_id}, {count})"
    src = system._source(op, concrete, op.loc)
    blocking = op.kind == BAR_SYNC
    site = src + 1 if blocking and op.aligned else 0
    system._emit(agent, Instr(HW_ARRIVE, inst, threads, HwArrival(count, site, partial, -1), src))
    if blocking:
        system._emit(agent, Instr(HW_WAIT, inst, 0, -1, src))


def static_order_findings(system: "System") -> None:
    """BP145: every thread alternates barrier.cluster.arrive and barrier.cluster.wait,
    starting with an arrive."""
    for prog in system.programs:
        arrived: dict[int, bool] = {}
        for instr in prog:
            if instr.op not in (HW_ARRIVE, HW_WAIT):
                continue
            inst = instr.target
            if system.hw_instances[inst].kind != "cluster":
                continue
            loc = system.sources[instr.src].loc
            if instr.op == HW_ARRIVE:
                if arrived.get(inst):
                    system.findings.append(StaticFinding(
                        "BP145", "cluster_arrive twice without a cluster_wait in between", loc,
                        "wait on the cluster barrier before arriving on it again"))
                arrived[inst] = True
            else:
                if not arrived.get(inst):
                    system.findings.append(StaticFinding(
                        "BP145", "cluster_wait without a cluster_arrive before it", loc,
                        "arrive on the cluster barrier (cluster_arrive) before waiting on it"))
                arrived[inst] = False


def layout(system: "System", pos: int) -> int:
    """Place the hardware barriers' fields from `pos`; return the end of the state."""
    system.hw_base = pos
    pos += HW_FIELDS * len(system.hw_instances)
    system.hw_seen_pos = {}
    for a, prog in enumerate(system.programs):
        for instr in prog:
            if instr.op == HW_WAIT and (a, instr.target) not in system.hw_seen_pos:
                system.hw_seen_pos[(a, instr.target)] = pos
                pos += 1
    for a, prog in enumerate(system.programs):
        out = []
        for instr in prog:
            if instr.op == HW_WAIT:
                instr = instr._replace(aux=system.hw_seen_pos[(a, instr.target)])
            elif instr.op == HW_ARRIVE:
                instr = instr._replace(aux=instr.aux._replace(
                    pos=system.hw_seen_pos.get((a, instr.target), -1)))
            out.append(instr)
        system.programs[a] = tuple(out)
    return pos


def initial_fields(system: "System") -> list[int]:
    return [0] * (HW_FIELDS * len(system.hw_instances)) + [-1] * len(system.hw_seen_pos)


def fields(system: "System", state, inst: int) -> tuple[int, int, int, int]:
    """(phase, arrived, count, site) of one hardware barrier instance."""
    b = system.hw_base + HW_FIELDS * inst
    return state[b], state[b + 1], state[b + 2], state[b + 3]


# -- the step rules ----------------------------------------------------------------------------

def guard_wait(system: "System", state, instr) -> bool:
    """bar.sync's wait / barrier.cluster.wait: the phase the agent arrived in has completed."""
    return state[system.hw_base + HW_FIELDS * instr.target] > state[instr.aux]


def effect_arrive(system: "System", s: list, instr, agent: int, events):

    b = system.hw_base + HW_FIELDS * instr.target
    arrival: HwArrival = instr.aux
    name = system.hw_instances[instr.target].name
    who = system.agents[agent].name
    if arrival.pos >= 0:
        s[arrival.pos] = s[b + HW_PHASE]
    if arrival.partial:
        return Violation(
            "BP141", f"{who} reaches {system.sources[instr.src].text} from a branch on the lane "
            f"index: the threads of one warp split across barrier instructions, and no copy "
            f"ever sees the whole warp (undefined for the aligned form; hangs on hardware)",
            agent, None, instr.src)
    open_count = s[b + HW_COUNT]
    if open_count and open_count != arrival.count:
        return Violation(
            "BP142", f"{who} arrives on {name} with thread count {arrival.count} while its open "
            f"phase {s[b + HW_PHASE] + 1} counts {open_count}", agent, None, instr.src)
    s[b + HW_COUNT] = arrival.count
    if arrival.site:
        if s[b + HW_SITE] and s[b + HW_SITE] != arrival.site:
            first = system.sources[s[b + HW_SITE] - 1]
            return Violation(
                "BP141", f"{who} blocks on {name} at a different aligned bar.sync than the one "
                f"its phase {s[b + HW_PHASE] + 1} started at ({first.loc}): divergent barrier",
                agent, None, instr.src,
                [f"bar.sync is barrier.sync.aligned: every blocking participant of a phase must "
                 f"execute the same instruction; use the unaligned form (aligned=False) for "
                 f"participants reaching it from different branches"])
        s[b + HW_SITE] = arrival.site
    arrived = s[b + HW_ARRIVED] + instr.amount
    if arrived > arrival.count:
        return Violation(
            "BP142", f"{arrived} threads arrive on {name} whose phase {s[b + HW_PHASE] + 1} "
            f"counts {arrival.count}", agent, None, instr.src)
    if arrived == arrival.count:
        s[b + HW_PHASE] += 1
        if events is not None:
            events.append((name, s[b + HW_PHASE]))
        s[b + HW_ARRIVED] = 0
        s[b + HW_COUNT] = 0
        s[b + HW_SITE] = 0
    else:
        s[b + HW_ARRIVED] = arrived
    return None


# -- judging states ----------------------------------------------------------------------------

def exited(system: "System", state, agent: int) -> bool:
    """The agent's threads have exited: it finished, and so did its warpgroup (a warp that
    leaves a warp region joins its warpgroup; it has not exited)."""
    a = system.agents[agent]
    top = agent if a.warp is None else system._agent_index[(a.block, a.thread, None)]
    return state[top] >= system.lengths[top]


def deadlock_details(system: "System", state) -> tuple[list[str], int | None]:
    """Lines for agents blocked at a hardware barrier, and the instance a thread exited from
    while others wait at it (BP144), if any."""
    lines, left = [], None
    for a, agent in enumerate(system.agents):
        instr = system.current(state, a)
        if instr is None or instr.op != HW_WAIT:
            continue
        inst = instr.target
        hw = system.hw_instances[inst]
        phase, arrived, count, _ = fields(system, state, inst)
        if hw.kind == "cluster":
            count = block_threads(system) * len(system.blocks)
        line = (f"{agent.name} blocked at {system.sources[instr.src].text} "
                f"({system.sources[instr.src].loc}) waiting for phase {state[instr.aux] + 1} of "
                f"{hw.name}: {arrived}/{count} threads arrived")
        # Who the open phase waits for: every thread of the block for a count-less bar.sync,
        # else the threads that arrive on this barrier somewhere in their program.
        everyone = count == block_threads(system)
        gone = [system.agents[o].name for o in range(system.n_agents)
                if exited(system, state, o) and system.agents[o].warp is None
                and system.agents[o].block == hw.block
                and (everyone or any(i.op == HW_ARRIVE and i.target == inst
                                     for i in system.programs[o]))]
        if gone and hw.kind == "named":
            line += f"; exited while counted in this phase: {', '.join(gone)}"
            left = inst if left is None else left
        lines.append(line)
    return lines, left


def peer_exit_violations(system: "System", state) -> list:
    """BP146: a thread is about to touch a barrier in the shared memory of a block of its
    cluster whose threads have all exited (no cluster barrier kept the block alive), or an
    asynchronous delivery another block issued is still in flight into such a block."""
    gone = [blk for blk, members in system.block_agents.items()
            if all(state[m] >= system.lengths[m] for m in members)]
    if not gone:
        return []
    found: list = []
    # An asynchronous delivery still in flight from another block into an exited one (a
    # multicast share, an async_store_smem, a collective tcgen05 commit): it will write the
    # dead block's shared memory. (Once every thread has exited it is BP105, the kernel's.)
    if system.is_done(state):
        return found
    for k in system.remote_slots:
        blk = system.instances[system.slots[k].inst].block
        if state[system.slot_base + k] and blk in gone:
            slot = system.slots[k]
            found.append(Violation(
                "BP146", f"a {slot.kind} delivery into {system.instances[slot.inst].name} is "
                f"still in flight from another block, but block {','.join(map(str, blk))} has "
                "exited", None, slot.inst, system.remote_slot_src[k],
                ["make the receiving block wait for every delivery it is sent (or end the "
                 "kernel with cluster_arrive + cluster_wait) before it exits"]))
    for a in system.queue_agents:
        own = system.agents[a].block
        for entry in state[system.queue_pos[a]]:
            hit = next((i for i in system.arrival_sets[entry]
                        if system.instances[i].block != own
                        and system.instances[i].block in gone), None)
            if hit is not None:
                found.append(Violation(
                    "BP146", f"a tcgen05 arrival of {system.agents[a].name} on "
                    f"{system.instances[hit].name} is still in flight, but block "
                    f"{','.join(map(str, system.instances[hit].block))} has exited", a, hit, None,
                    ["make the receiving block wait for the commit (or end the kernel with "
                     "cluster_arrive + cluster_wait) before it exits"]))
                break
    for a in range(system.n_agents):
        instr = system.current(state, a)
        if instr is None or instr.op not in (ARRIVE, ARRIVE_DROP, EXPECT_TX, ARRIVE_TX,
                                             COMPLETE_TX, ISSUE_ASYNC):
            continue
        insts = list(instr.target)
        if instr.op == ISSUE_ASYNC:
            insts += [system.slots[k].inst for k in instr.aux]
        own = system.agents[a].block
        for i in insts:
            blk = system.instances[i].block
            if blk != own and blk in gone:
                found.append(Violation(
                    "BP146", f"{system.agents[a].name} is at {system.sources[instr.src].text} "
                    f"on {system.instances[i].name}, in the shared memory of block "
                    f"{','.join(map(str, blk))}, whose threads have all exited", a, i, instr.src,
                    ["end the kernel with cluster_arrive + cluster_wait in every thread so no "
                     "block exits while a peer still reaches into its shared memory"]))
                break
    return found


def deadlock(system: "System", state) -> tuple[list[str], Violation | None]:
    """The lines of a deadlock for agents blocked at a hardware barrier, and BP144 when a thread
    exited while others wait at one (its details are the deadlock's, filled in by the caller)."""
    if not system.hw_instances:
        return [], None
    lines, left = deadlock_details(system, state)
    if left is None:
        return lines, None
    waiter = next(a for a in range(system.n_agents) if (i := system.current(state, a)) is not None
                  and i.op == HW_WAIT and i.target == left)
    return lines, Violation("BP144", f"a thread exited while {system.hw_instances[left].name} "
                            "still waits for its arrival: deadlock", waiter, None,
                            system.current(state, waiter).src)


def state_violations(system: "System", state) -> list:
    return peer_exit_violations(system, state) if system.block_agents else []


def describe_named(op: Op) -> str:
    if op.name == ALL_THREADS:
        return "syncthreads()"
    spelled = ("bar.sync" if op.aligned else "barrier.sync") if op.kind == BAR_SYNC \
        else "bar.arrive"
    return f"{spelled}({op.bar_id!r}, {op.count!r})"


def describe_cluster(op: Op) -> str:
    if op.kind == CLUSTER_ARRIVE and op.name == "relaxed":
        return "cluster_arrive(relaxed=True)"
    return f"{op.kind}()"


_NAMED = dict(needs=frozenset({"bar_id", "count"}), reference="hardware",
              prover="hardware barriers (hw.py)", repair=frozenset(), describe=describe_named)
_CLUSTER = dict(needs=frozenset(), dsl="cluster_arrive", reference="hardware",
                prover="hardware barriers (hw.py)", repair=frozenset(),
                describe=describe_cluster, cluster_wide=True)

def _tla_pos(system: "System", pos: int) -> int:
    """The TLA+ index (from 1) of an agent's arrived_in entry."""
    return pos - (system.hw_base + HW_FIELDS * len(system.hw_instances)) + 1


def _arrive_text(system: "System", instr) -> str:
    arrival = instr.aux
    pos = _tla_pos(system, arrival.pos) if arrival.pos >= 0 else 0
    return (f"hw_arrive({instr.target + 1}, {instr.amount}, {arrival.count}, {arrival.site}, "
            f"{int(arrival.partial)}, {pos})")


STEPS = (
    Step(HW_ARRIVE, guard=None, effect=effect_arrive,
         touches=lambda system, agent, instr: Touch(writes=((HARDWARE, instr.target),)),
         resources="writes H(target)", waits=False, symmetry="hw arrival",
         tla=Tla("hw_arrive(h, threads, count, site, partial, pos)", "HwArrive", _arrive_text)),
    Step(HW_WAIT, guard=guard_wait, effect=None,
         touches=lambda system, agent, instr: Touch(reads=((HARDWARE, instr.target),)),
         resources="reads H(target)", waits=True, symmetry="hw wait",
         tla=Tla("hw_wait(h, pos)", "HwWait", lambda system, instr:
                 f"hw_wait({instr.target + 1}, {_tla_pos(system, instr.aux)})")),
)

EXTENSION = Extension(
    "hardware barriers", codes=CODES, steps=STEPS, primitives=(
        Primitive(BAR_SYNC, "named barrier `bar.sync id, count` (name \"syncthreads\": every "
                  "thread of the block); arrive, then wait", blocking=True, waits_for="hardware",
                  opcodes=("hw_arrive", "hw_wait"), dsl="named_barrier(...).sync / syncthreads",
                  **_NAMED),
        Primitive(BAR_ARRIVE, "`bar.arrive id, count`: arrive without waiting", blocking=False,
                  waits_for="",
                  opcodes=("hw_arrive",), dsl="named_barrier(...).arrive", **_NAMED),
        Primitive(CLUSTER_ARRIVE, "barrier.cluster.arrive: this thread reached the cluster "
                  "barrier", blocking=False, waits_for="", opcodes=("hw_arrive",), **_CLUSTER),
        Primitive(CLUSTER_WAIT, "barrier.cluster.wait: until every thread of the cluster "
                  "arrived", blocking=True, waits_for="hardware", opcodes=("hw_wait",),
                  **dict(_CLUSTER, dsl="cluster_wait")),
    ),
    compile_op=compile_op, after_programs=static_order_findings, layout=layout,
    initial_fields=initial_fields, state_violations=state_violations, deadlock=deadlock)
