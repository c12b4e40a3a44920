"""TLA+ emitter: one module per compiled System that EXTENDS specs/MBarrier.tla, plus its .cfg.

specs/MBarrier.tla states the step rules of model/semantics.py in TLA+ over the same state
(variable for variable: pc, phase, pending, tx, expected, seen, inflight, queue), so the module
emitted here only supplies data: each agent's unrolled program (one instruction per line, with
the operation's text and source line as a comment), the arrival counts, who waits on what, the
in-flight slots and tcgen05 queues, and, where the kernel declares its memory effects, the
pairs of holders (a thread at a gap, an in-flight copy, a queued tcgen05 op) whose accesses
conflict, for the race rules BP200/BP201 (model/race_pairs.py). TLC then searches exactly the
state graph the explorer searches with reductions off: the same distinct-state count, by
construction.

The .cfg checks deadlock (TLC's default: never pass `-deadlock`, which turns it off); a finished
kernel stutters (`Done` in MBarrier), so it is not a deadlock. One invariant or property per rule.

Reading TLC's states back is tla_state.py; emitting many targets at once (`barrierproof tla`,
specs/generated/) is tla_files.py.

>>> from barrierproof.model.samples import handoff
>>> module = emit_module(handoff.build())
>>> module.name, "EXTENDS MBarrier" in module.tla, "INVARIANT BP102_NoLateJoin" in module.cfg
('handoff', True, True)
"""

from __future__ import annotations

import collections

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ...resources import specs_dir
from ...model.ir import MAX_TX, Kernel, Loc, ModelError, has_memory_effects
from ...model import hw_barriers as hw
from ...model.race_pairs import Holder, race_pairs
from ...model.semantics import (EFFECT_COMPLETE_TX, EFFECT_SIGNAL, OPCODE_NAMES, WAITS, System,
                               compile_systems)
from ...model.steps import NOT_IN_TLA, STEPS

LIBRARY = "MBarrier"
# Named and cluster barriers, and the rule on blocks that exit under a peer's arrival: kernels
# with hardware barriers or more than one block extend this sibling of MBarrier.
HW_LIBRARY = "HwBarrier"
# mbarrier init visibility (model/init_visibility.py): kernels with explicit-init barriers
# extend this sibling of HwBarrier.
INIT_LIBRARY = "InitBarrier"
# Library levels: which module a kernel's spec extends (Checks.hw holds one).
MBARRIER, HW, INIT = 0, 1, 2

# One row per opcode: how its instruction is written in TLA+ (the constructors of
# MBarrier.tla) and the MBarrier action that executes it. Each opcode's family declares it
# (`Step.tla`, model/steps.py), or that the opcode is not in the TLA+ model. As imported (the
# emitter reads STEPS).
ACTIONS = {op: (step.tla.constructor, step.tla.action) for op, step in STEPS.items()
           if step.tla != NOT_IN_TLA}

# Rules checked by TLC, by diagnostic code: (cfg keyword, MBarrier definition). Deadlock (BP100,
# and its tx flavour BP130) is TLC's own check; every other rule is one invariant or property.
RULES = {
    "BP101": ("PROPERTY", "BP101_NoPhaseOverrun"),
    "BP102": ("INVARIANT", "BP102_NoLateJoin"),
    "BP103": ("INVARIANT", "BP103_AllCompletionsObserved"),
    "BP104": ("INVARIANT", "BP104_NoPendingArrivals"),
    "BP105": ("INVARIANT", "BP105_NoAsyncInFlight"),
    "BP121": ("INVARIANT", "BP121_InRange"),
    "BP130": ("INVARIANT", "BP130_TxBalanced"),
}
# The rules HwBarrier adds.
HW_RULES = {
    "BP141": ("PROPERTY", "BP141_NoDivergentBarrier"),
    "BP142": ("PROPERTY", "BP142_CountsAgree"),
    "BP146": ("INVARIANT", "BP146_NoPeerExited"),
}
# The rule InitBarrier adds.
INIT_RULES = {"BP147": ("INVARIANT", "BP147_InitVisible")}
# The race rules (model/memory.py), checked where the System carries memory effects: an
# invariant each, and the Exact_ property of each library level.
RACE_RULES = {"BP200": ("INVARIANT", "BP200_NoSmemRace"),
              "BP201": ("INVARIANT", "BP201_NoTmemRace")}
RACE_EXACT = {level: {code: f"{prefix}Exact_{code}" for code in RACE_RULES}
              for level, prefix in enumerate(("", "Hw", "Init"))}
# Deadlock flavours as invariants, for a search that must find one and not the other.
DEADLOCKS = {"BP100": "BP100_NoDeadlock", "BP130": "BP130_NoTxDeadlock"}
HW_DEADLOCKS = {"BP100": "HwBP100_NoDeadlock", "BP130": "HwBP130_NoTxDeadlock",
                "BP144": "BP144_NoExitDeadlock"}
INIT_DEADLOCKS = {"BP100": "InitBP100_NoDeadlock", "BP130": "InitBP130_NoTxDeadlock",
                  "BP144": "InitBP144_NoExitDeadlock"}
# Properties that fail exactly on the steps semantics.py reports with that code.
EXACT = {code: f"Exact_{code}" for code in sorted({*RULES, *HW_RULES, *INIT_RULES})}


def uses_hw(system: System) -> bool:
    """Whether the system's module extends HwBarrier (or InitBarrier, which extends it)."""
    return (bool(system.hw_instances) or len(system.blocks) > 1 or uses_init(system)
            or _instruction_level(system) >= HW)


def uses_init(system: System) -> bool:
    """Whether the system's module extends InitBarrier: explicit-init barriers, or an
    instruction only InitBarrier's actions execute (a fence in a kernel whose barriers all
    start initialised)."""
    return bool(getattr(system, "init_insts", ())) or _instruction_level(system) == INIT


def _instruction_level(system: System) -> int:
    """The lowest library level whose actions execute every instruction of the system."""
    return max((_action_level(STEPS[instr.op].tla.action) for prog in system.programs
                for instr in prog if instr.op in STEPS and STEPS[instr.op].tla != NOT_IN_TLA),
               default=MBARRIER)


@functools.cache
def _action_level(action: str) -> int:
    """The level of the library that defines `action` (read from specs/*.tla)."""
    for lvl, name in ((MBARRIER, LIBRARY), (HW, HW_LIBRARY), (INIT, INIT_LIBRARY)):
        if re.search(rf"^{re.escape(action)}\(", library_text(name), re.M):
            return lvl
    raise ModelError(f"no TLA+ library defines the action {action}",
                     hint="reinstall barrierproof (specs/*.tla ship as package data)")


def level(system: System) -> int:
    """The library the system's module extends: MBARRIER, HW or INIT."""
    return INIT if uses_init(system) else HW if uses_hw(system) else MBARRIER


def rules_of(hw: int, races: bool = False) -> dict:
    """The rules the library of level `hw` checks (`races`: and the race rules)."""
    return {**RULES, **(HW_RULES if hw else {}), **(INIT_RULES if hw == INIT else {}),
            **(RACE_RULES if races else {})}


def deadlocks_of(hw: int) -> dict:
    """The deadlock-flavour invariants of the library of level `hw`."""
    return INIT_DEADLOCKS if hw == INIT else HW_DEADLOCKS if hw else DEADLOCKS


@dataclass(frozen=True)
class Checks:
    """What one TLC run checks: cfg lines (INVARIANT/PROPERTY), whether TLC's own deadlock
    check stays on (off means passing `-deadlock`), an optional depth bound (states at most
    `depth` steps from the initial state), and the codes the user ignores. `judged`, with a
    depth bound: the Exact_* properties judge only the steps `judged` long (MBarrier's
    `Judged`), for a run that settles the code of a violation of that length."""

    lines: tuple[str, ...]
    deadlock: bool = True
    depth: int | None = None
    ignored: frozenset = frozenset()
    hw: int = MBARRIER            # the library the module extends: MBARRIER, HW or INIT
    judged: int | None = None


def default_checks(ignore: Iterable[str] = (), hw: bool = False, races: bool = False) -> Checks:
    """Every rule not ignored, cheapest form: what the emitted .cfg checks."""
    ignore = frozenset(ignore)
    rules = rules_of(hw, races)
    lines = tuple(f"{kind} {name}" for code, (kind, name) in rules.items() if code not in ignore)
    return deadlock_checks(ignore, lines, hw=hw)


def deadlock_checks(ignore: Iterable[str] = (), lines: tuple[str, ...] = (),
                    depth: int | None = None, hw: bool = False) -> Checks:
    """Deadlocks of the flavours not ignored: TLC's own check when all count."""
    ignore = frozenset(ignore)
    flavours = deadlocks_of(hw)
    wanted = [c for c in flavours if c not in ignore]
    if len(wanted) == len(flavours):
        return Checks(lines, True, depth, ignore, hw)
    return Checks(lines + tuple(f"INVARIANT {flavours[c]}" for c in wanted), False, depth,
                  ignore, hw)


def exact_checks(codes: Iterable[str], ignore: Iterable[str] = (),
                 depth: int | None = None, hw: bool = False, deadlock: bool = False,
                 judged: int | None = None) -> Checks:
    """Steps that semantics.py reports with one of `codes` (only those `judged` long, when
    given); TLC's own deadlock check when `deadlock`."""
    return Checks(tuple(f"PROPERTY {exact_name(c, hw)}" for c in codes), deadlock, depth,
                  frozenset(ignore), hw, judged)


def exact_name(code: str, hw: int) -> str:
    """The Exact_ property of `code` in the library of level `hw`."""
    return RACE_EXACT[hw][code] if code in RACE_RULES else EXACT[code]


def exact_codes(hw: bool, races: bool = False) -> list[str]:
    """The codes with an Exact_ property in the module's library."""
    return sorted(rules_of(hw, races))


VARIABLES = ("pc", "phase", "pending", "tx", "expected", "seen", "inflight", "queue")
HW_VARIABLES = ("hwphase", "hwarrived", "hwcount", "hwsite", "hwseen")
INIT_VARIABLES = ("initvis", "initrel", "initrelc")


@dataclass
class TlaModule:
    """An emitted module: its name, the .tla and .cfg texts, and the System it states."""

    name: str
    tla: str
    cfg: str
    system: System = field(repr=False)
    checks: "Checks | None" = field(default=None, repr=False)   # what the .cfg checks

    def write(self, directory: str | os.PathLike, library: bool = True) -> tuple[Path, Path]:
        """Write NAME.tla and NAME.cfg (and MBarrier.tla, unless `library=False`)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tla_path, cfg_path = out / f"{self.name}.tla", out / f"{self.name}.cfg"
        tla_path.write_text(self.tla)
        cfg_path.write_text(self.cfg)
        if library:
            (out / f"{LIBRARY}.tla").write_text(library_text())
            (out / f"{HW_LIBRARY}.tla").write_text(library_text(HW_LIBRARY))
            (out / f"{INIT_LIBRARY}.tla").write_text(library_text(INIT_LIBRARY))
        return tla_path, cfg_path

    @property
    def hw(self) -> int:
        return level(self.system)

    @property
    def races(self) -> bool:
        """Whether the module states the race rules (the System carries memory effects)."""
        return self.system.memory is not None


def bounded_wrapper(module: TlaModule, depth: int,
                    judged: int | None = None) -> tuple[str, str]:
    """A root module for a depth-bounded run: the kernel's module plus a state constraint that
    stops the search `depth` steps from the initial state (TLCGet("level") of the state being
    expanded). It adds no variable: the states it keeps are the kernel module's. `judged`: the
    Exact_* properties judge only the steps `judged` long, those from a state of that level
    (the initial state's is 1), by `Judged` of MBarrier, which the .cfg overrides. TLC judges
    the steps out of the last states it expands too, whose successors it does not keep."""
    name = f"{module.name}_Within{depth}"
    judging = ""
    if judged is not None:
        name += f"_Judging{judged}"
        judging = f"JudgedSteps == TLCGet(\"level\") = {judged}\n"
    text = (f"---- MODULE {name} ----\n"
            f"EXTENDS {module.name}, TLC\n"
            f"WithinDepth == TLCGet(\"level\") <= {depth}\n"
            f"{judging}"
            "====\n")
    return name, text


def library_text(name: str = LIBRARY) -> str:
    """The text of specs/MBarrier.tla (or of its siblings HwBarrier.tla, InitBarrier.tla)."""
    path = specs_dir() / f"{name}.tla"
    if not path.is_file():
        raise ModelError(f"{path} is missing: the TLA+ emitter needs the {name} library module",
                         hint="reinstall barrierproof (its wheel ships specs/*.tla as package "
                              "data)")
    return path.read_text()


def module_name(text: str) -> str:
    """A TLA+ module name (letters, digits, underscores; starts with a letter)."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "Kernel"
    if not name[0].isalpha():
        name = "K_" + name
    return name


def _ident(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")


def _ascii(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii").replace("\n", " ")


def _seq(items: Iterable) -> str:
    items = list(items)
    return "<<" + ", ".join(str(i) for i in items) + ">>" if items else "<<>>"


def _where(loc: Loc | None, root: str | None) -> str:
    if loc is None or not loc.line:
        return ""
    file = loc.file
    if root is not None and os.path.isabs(file):
        try:
            file = os.path.relpath(file, root)
        except ValueError:
            pass
    return f"{file}:{loc.line}"


def _instruction(system: System, agent: int, instr) -> str:
    """One instruction of semantics.py in MBarrier's constructor syntax (TLA+ indices from 1),
    as its family writes it."""
    step = STEPS.get(instr.op)
    if step is None or step.tla == NOT_IN_TLA:
        name = OPCODE_NAMES.get(instr.op, instr.op)
        family = f" ({step.family})" if step is not None else ""
        raise ModelError(f"opcode {name}{family} is not in the TLA+ model",
                         hint="check this kernel with the explorer (`--engine explore`)")
    return step.tla.text(system, instr)


def _table(name: str, rows: list[tuple[str, str]], indent: str = "    ") -> list[str]:
    """`name == << row, row >>` with one row per line and its comment aligned."""
    if not rows:
        return [f"{name} == <<>>"]
    width = max(len(r) for r, _ in rows) + 1
    lines = [f"{name} == <<"]
    for n, (row, comment) in enumerate(rows):
        sep = "," if n < len(rows) - 1 else " "
        text = f"{indent}{(row + sep).ljust(width)}"
        lines.append(f"{text}  \\* {comment}" if comment else text.rstrip())
    lines.append(">>")
    return lines


def cfg_text(checks: Checks | None = None) -> str:
    """The .cfg: the MBarrier constants bound to this module's tables, and the rules."""
    checks = checks or default_checks()
    ignored = ", ".join(f'"{c}"' for c in sorted(checks.ignored))
    hw_constants = [
        "    HwKind <- KernelHwKind",
        "    HwBlock <- KernelHwBlock",
        "    HwSeenOf <- KernelHwSeenOf",
        "    BlockOf <- KernelBlockOf",
        "    TopAgents <- KernelTopAgents",
        "    InstBlock <- KernelInstBlock",
        "    BlockThreads <- KernelBlockThreads",
        "    RemoteSlots <- KernelRemoteSlots",
    ] if checks.hw else []
    init_constants = [
        "    InitOf <- KernelInitOf",
        "    RelOf <- KernelRelOf",
        "    ClusterHw <- KernelClusterHw",
        "    RelaxedAt <- KernelRelaxedAt",
    ] if checks.hw == INIT else []
    lines = [
        "\\* Generated by barrierproof (checker/engines/tla.py).",
        ("\\* Deadlock checking is on (TLC's default; do not pass -deadlock). A finished kernel"
         if checks.deadlock else
         "\\* Run with -deadlock: deadlocks are checked by the invariants below. A finished kernel"),
        "\\* stutters, so it is not a deadlock.",
        f"SPECIFICATION {('Spec', 'HwSpec', 'InitSpec')[checks.hw]}",
        "CONSTANTS",
        "    Prog <- KernelProg",
        "    ExpectedInit <- KernelExpected",
        "    SeenOf <- KernelSeenOf",
        "    Participants <- KernelParticipants",
        "    Slots <- KernelSlots",
        "    ArrivalSets <- KernelArrivalSets",
        "    QueueAgents <- KernelQueueAgents",
        "    Unwaited <- KernelUnwaited",
        "    ExitLive <- KernelExitLive",
        "    Races <- KernelRaces",
        f"    MaxTx = {MAX_TX}",
        f"    Ignored = {{{ignored}}}",
        *hw_constants,
        *init_constants,
    ]
    if checks.judged is not None:
        if checks.depth is None:
            raise ValueError("judging the steps of one length needs a depth bound")
        lines.append("    Judged <- JudgedSteps")
    lines += list(checks.lines)
    if checks.depth is not None:
        lines.append("CONSTRAINT WithinDepth")
    return "\n".join(lines) + "\n"


def emit_system(system: System, name: str | None = None, source: str | None = None,
                root: str | None = None, ignore: Iterable[str] = (),
                command: str | None = None) -> TlaModule:
    """The module and .cfg of one compiled System."""
    kernel = system.kernel
    name = module_name(name or kernel.name)
    params = ", ".join(f"{k}={v}" for k, v in sorted(system.params.items())) or "none"
    seen_base = system.n_agents + 4 * len(system.instances)
    out = [f"{'-' * 20} MODULE {name} {'-' * 20}",
           f"\\* Generated by barrierproof (checker/engines/tla.py) from {_ascii(source or kernel.name)}.",
           f"\\* Parameters: {params}."]
    if system.grid_position:
        pos = ", ".join(f"{k}={v}" for k, v in sorted(system.grid_position.items()))
        out.append(f"\\* Cluster at grid position {pos}.")
    if command:
        out.append(f"\\* Regenerate with: {command}")
    out += ["\\* Do not edit: the step rules are in MBarrier.tla; this module only lists the",
            "\\* kernel's agents, programs and barriers. Variables and their values are those of",
            "\\* model/semantics.py; agents, instances, seen entries, slots and queues are",
            "\\* numbered from 1 here (from 0 in semantics.py).",
            f"EXTENDS {(LIBRARY, HW_LIBRARY, INIT_LIBRARY)[level(system)]}", ""]
    if has_memory_effects(kernel) and system.memory is None:
        out[-2:-2] = ["\\* Not modelled here: the kernel's memory effects (its System was compiled",
                      "\\* without races). TLC checks its barrier protocol only."]

    # Barrier instances.
    rows = []
    for i, inst in enumerate(system.instances):
        alloc = inst.alloc
        where = _where(alloc.loc, root)
        rows.append((str(inst.expected),
                     f"{i + 1}: {_ascii(inst.name)} ({alloc.kind}"
                     f"{', orders_tensor_core' if alloc.orders_tensor_core else ''})"
                     f"{'  ' + where if where else ''}"))
    out.append("\\* Barrier instances: the arrival count of each (index: name).")
    out += _table("KernelExpected", rows)
    out.append("")

    # Programs.
    prog_names = []
    for a, agent in enumerate(system.agents):
        ident = f"Prog_{a + 1}_{_ident(agent.name)}"
        prog_names.append(ident)
        rows = []
        for pc, instr in enumerate(system.programs[a]):
            src = system.sources[instr.src]
            where = _where(src.loc, root)
            rows.append((_instruction(system, a, instr),
                         f"pc {pc}: {_ascii(src.text)}{'  ' + where if where else ''}"))
        kind = "warp" if agent.warp is not None else "thread"
        out.append(f"\\* Agent {a + 1}: {_ascii(agent.name)} ({kind}), "
                   f"{len(rows)} instruction(s).")
        out += _table(ident, rows)
        out.append("")
    out += _table("KernelProg", [(p, "") for p in prog_names])
    out.append("")

    # Who waits on what.
    entries = sorted(system.seen_pos.items(), key=lambda kv: kv[1])
    rows = []
    for (a, i), pos in entries:
        last = max(pc for pc, instr in enumerate(system.programs[a])
                   if instr.op in WAITS and instr.target == i)
        rows.append((f"<<{a + 1}, {i + 1}, {last}>>",
                     f"{pos - seen_base + 1}: {_ascii(system.agents[a].name)} waits on "
                     f"{_ascii(system.instances[i].name)}, last at pc {last}"))
    out.append("\\* Seen entries: <<agent, instance, pc of its last wait on it>> for every agent "
               "that waits on an instance.")
    out += _table("KernelSeenOf", rows)
    out.append("")
    rows = [(_seq(pos - seen_base + 1 for _, pos in system.participants[i]),
             f"{_ascii(inst.name)}") for i, inst in enumerate(system.instances)]
    out.append("\\* Participants: the seen entries of each instance.")
    out += _table("KernelParticipants", rows)
    out.append("")

    # Asynchronous agents.
    rows = []
    # landings alike but for their destinations (one slot each) are told apart by them
    alike = collections.Counter((s.inst, s.amount) for s in system.slots
                                if s.effect == EFFECT_COMPLETE_TX)
    for k, slot in enumerate(system.slots):
        if slot.effect == EFFECT_SIGNAL:
            rows.append((f"signal_slot({slot.inst + 1}, {slot.amount})",
                         f"{k + 1}: a signal of {_ascii(system.instances[slot.inst].name)}"))
        elif slot.effect == EFFECT_COMPLETE_TX:
            rows.append((f"complete_tx_slot({slot.inst + 1}, {slot.amount})",
                         f"{k + 1}: {slot.kind} landing on {_ascii(system.instances[slot.inst].name)}"
                         + (f" into {_ascii(slot.dest)}" if alike[slot.inst, slot.amount] > 1
                            else "")))
        else:
            rows.append((f"arrive_slot({slot.inst + 1})",
                         f"{k + 1}: {slot.kind} arrival on {_ascii(system.instances[slot.inst].name)}"))
    out.append("\\* In-flight slots: TMA landings (complete_tx) and asynchronous arrivals.")
    out += _table("KernelSlots", rows)
    out.append("")
    rows = [(_seq(i + 1 for i in targets),
             f"set {s}: " + (", ".join(_ascii(system.instances[i].name) for i in targets)
                             or "no barrier"))
            for s, targets in enumerate(system.arrival_sets)]
    out.append("\\* Arrival sets of tcgen05 ops (queue entries hold the set number, from 0).")
    out += _table("KernelArrivalSets", rows)
    out.append("")
    rows = [(str(a + 1), f"queue {q + 1}: tcgen05 ops of {_ascii(system.agents[a].name)}")
            for q, a in enumerate(system.queue_agents)]
    out.append("\\* tcgen05 queues: the agent that issues into each.")
    out += _table("KernelQueueAgents", rows)
    out.append("")
    out += _race_table(system, root)
    out.append("\\* Instances of Pallas-only barriers no thread waits on (BP103 if they complete).")
    out.append("KernelUnwaited == {" + ", ".join(str(i + 1) for i in system.unwaited) + "}")
    out.append("")
    out += _exit_live(system, root)
    if uses_hw(system):
        out += _hw_tables(system)
    if uses_init(system):
        out += _init_tables(system)
    out.append("=" * (len(out[0])))
    checks = default_checks(ignore, hw=level(system), races=system.memory is not None)
    return TlaModule(name, "\n".join(out) + "\n", cfg_text(checks), system, checks)


def _holder(system: System, x: Holder) -> str:
    """A holder of live accesses in MBarrier's syntax (agents, slots, queues from 1)."""
    members = ", ".join(str(m + 1 if x.kind == "slots" else m) for m in x.members)
    index = system.queue_agents.index(x.index) if x.kind == "queue" else x.index
    if x.kind == "tail":        # live until the warpgroup passes its JOIN
        return f'<<"tail", {index + 1}, {{{members}}}, {x.until[0] + 1}, {x.until[1]}>>'
    return f'<<"{x.kind}", {index + 1}, {{{members}}}>>'


def _race_table(system: System, root: str | None) -> list[str]:
    """KernelRaces: the pairs of holders whose accesses conflict (model/race_pairs.py), each
    with one pair of accesses that makes it as its comment."""
    def who(x: Holder) -> str:
        if x.kind in ("pc", "tail"):
            return _ascii(system.agents[x.index].name)
        if x.kind == "slots":
            return "TMA copy"
        return f"tcgen05({_ascii(system.agents[x.index].name)})"

    def access(x: Holder, acc) -> str:
        where = _where(system.sources[acc.src].loc, root)
        return (f"{who(x)} {'writes' if acc.write else 'reads'} {_ascii(acc.text)}"
                f"{' (' + where + ')' if where else ''}")

    rows = []
    for row in race_pairs(system):
        comment = f"{access(row.x, row.first)} / {access(row.y, row.second)}"
        if row.y is row.x:
            comment = f"own program: {comment}"
        rows.append((f'<<"{row.code}", {_holder(system, row.x)}, {_holder(system, row.y)}>>',
                     comment))
    out = ["\\* Races: <<code, x, y>> when holders x and y are both live (MBarrier's Live)."]
    if system.memory is None:
        out[0] = "\\* Races: none modelled (no memory effects compiled)."
    out += _table("KernelRaces", rows)
    out.append("")
    return out


def _exit_live(system: System, root: str | None) -> list[str]:
    """KernelExitLive: the agents whose asynchronous shared-memory accesses outlive their
    program (model/exit_async.py), each access as a comment."""
    out = ["\\* Agents that end with their own asynchronous shared-memory access still running "
           "(BP105 at exit)."]
    for acc in system.exit_live:
        where = _where(system.sources[acc.src].loc, root)
        out.append(f"\\*   {_ascii(system.agents[acc.agent].name)}: {acc.group} "
                   f"{'writing' if acc.write else 'reading'} {_ascii(acc.text)}"
                   + (f" ({where})" if where else ""))
    agents = sorted({acc.agent + 1 for acc in system.exit_live})
    out.append("KernelExitLive == {" + ", ".join(map(str, agents)) + "}")
    out.append("")
    return out


def _hw_tables(system: System) -> list[str]:
    """The constants of HwBarrier: hardware barriers, their waiters, blocks of agents and
    instances (blocks numbered from 1)."""
    block_no = {b: n + 1 for n, b in enumerate(system.blocks)}
    out = []
    rows = [(f'"{h.kind}"', f"{n + 1}: {_ascii(h.name)}")
            for n, h in enumerate(system.hw_instances)]
    out.append("\\* Hardware barriers: named barriers of one block, or the cluster barrier.")
    out += _table("KernelHwKind", rows)
    out.append("")
    rows = [(str(block_no[h.block] if h.block is not None else 0), _ascii(h.name))
            for h in system.hw_instances]
    out.append("\\* The block of each named barrier (0: the cluster barrier).")
    out += _table("KernelHwBlock", rows)
    out.append("")
    rows = [(f"<<{a + 1}, {h + 1}>>", f"{_ascii(system.agents[a].name)} waits at "
                                      f"{_ascii(system.hw_instances[h].name)}")
            for (a, h), _ in sorted(system.hw_seen_pos.items(), key=lambda kv: kv[1])]
    out.append("\\* hwseen entries: <<agent, hardware barrier>> for every agent that waits on one.")
    out += _table("KernelHwSeenOf", rows)
    out.append("")
    rows = [(str(block_no[a.block]), _ascii(a.name)) for a in system.agents]
    out.append("\\* The block of each agent.")
    out += _table("KernelBlockOf", rows)
    out.append("")
    top = ", ".join(str(n + 1) for n, a in enumerate(system.agents) if a.warp is None)
    out.append("\\* The agents that are warpgroups (a warp that ends has joined, not exited).")
    out.append(f"KernelTopAgents == {{{top}}}")
    out.append("")
    rows = [(str(block_no[i.block]), _ascii(i.name)) for i in system.instances]
    out.append("\\* The block of each mbarrier instance.")
    out += _table("KernelInstBlock", rows)
    out.append("")
    out.append(f"KernelBlockThreads == {hw.block_threads(system)}")
    out.append("")
    remote = ", ".join(str(k + 1) for k in system.remote_slots)
    out.append("\\* The slots some block issues into another block's barrier.")
    out.append(f"KernelRemoteSlots == {{{remote}}}")
    out.append("")
    return out


def _init_tables(system: System) -> list[str]:
    """The constants of InitBarrier: the explicit-init instances and their release fields."""
    entry = {i: e + 1 for e, i in enumerate(system.init_insts)}
    out = []
    rows = [(str(i + 1), _ascii(system.instances[i].name)) for i in system.init_insts]
    out.append("\\* Explicit-init entries: the mbarrier instance of each.")
    out += _table("KernelInitOf", rows)
    out.append("")
    rows = [(f"<<{entry[i]}, {h + 1}>>", f"{_ascii(system.instances[i].name)} released on "
                                         f"{_ascii(system.hw_instances[h].name)}")
            for (i, h), _ in sorted(system.init_rel_pos.items(), key=lambda kv: kv[1])]
    out.append("\\* Release fields: <<entry, hardware barrier>>.")
    out += _table("KernelRelOf", rows)
    out.append("")
    cluster = [h + 1 for h, x in enumerate(system.hw_instances) if x.kind == "cluster"]
    out.append(f"KernelClusterHw == {cluster[0] if cluster else 0}")
    out.append("")
    relaxed = ", ".join(f"<<{a + 1}, {pc}>>" for a, pc in sorted(system.init_relaxed))
    out.append("\\* <<agent, pc>> of each barrier.cluster.arrive.relaxed.")
    out.append(f"KernelRelaxedAt == {{{relaxed}}}")
    out.append("")
    return out


def position_suffix(system) -> str:
    """A module-name suffix for a grid position (`sm0`, `flag_m1`): an identifier, and
    unambiguous when an axis name ends in a digit."""
    parts = []
    for axis, value in sorted(system.grid_position.items()):
        text = str(value) if value >= 0 else f"m{-value}"
        parts.append(f"{axis}_{text}" if axis[-1:].isdigit() or value < 0 else f"{axis}{text}")
    return "_".join(parts)


def emit_modules(kernel: Kernel, params: Mapping[str, int] | None = None,
                 name: str | None = None, **kw) -> list[TlaModule]:
    """One module per distinct cluster behaviour of the kernel (usually one)."""
    systems = compile_systems(kernel, params)
    base = name or kernel.name
    if len(systems) == 1:
        return [emit_system(systems[0], base, **kw)]
    out = []
    for system in systems:
        out.append(emit_system(system, f"{base}_{position_suffix(system)}", **kw))
    return out


def emit_module(system_or_kernel: System | Kernel, params: Mapping[str, int] | None = None,
                name: str | None = None, **kw) -> TlaModule:
    """The module of a System, or of a kernel with one cluster behaviour (`emit_modules` for
    kernels whose clusters behave differently across the grid)."""
    if isinstance(system_or_kernel, System):
        if params:
            raise ValueError("params are fixed when the System is compiled")
        return emit_system(system_or_kernel, name, **kw)
    modules = emit_modules(system_or_kernel, params, name, **kw)
    if len(modules) != 1:
        raise ModelError(f"{system_or_kernel.name} has {len(modules)} distinct cluster behaviours",
                         hint="use emit_modules() for one module per behaviour")
    return modules[0]
