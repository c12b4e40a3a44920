"""The opcode table: one `Step` per opcode of an unrolled program, declared by the family module
that owns the opcode (model/primitives/*, hw_barriers.py, init_visibility.py) and entered here
when model/plugins.py installs its extension (extensions.py).

A step row holds everything an engine needs about one opcode, so a primitive with a new opcode
touches no engine:

- `guard` and `effect`: the step rule (SEMANTICS.md). A guard says when a thread may take the
  step (None: always); an effect changes the state of a `System` and returns the rule it breaks,
  if any (None: only the program counter moves). `System.step` and `System.successors`
  (semantics.py) apply them through `GUARDS` / `EFFECTS`; the barrier micro-steps they share (an
  arrival, a tx change, a phase completion) are `System` methods, as the state layout is.
- `touches`: what the step reads and writes (a `Touch`), for partial-order reduction
  (checker/engines/por.py), with `resources` saying it in words; or `UNREDUCED`: the explorer
  turns the reductions off where the opcode occurs. `waits`: a thread's horizon may end there.
- `symmetry`: how block symmetry carries its operands onto their image (one of the classes
  checker/engines/symmetry.py names), or `UNREDUCED`.
- `tla`: its instruction in TLA+ (`Tla`: the specs' constructor and action, and the text of one
  instruction), or `NOT_IN_TLA`, which the emitter refuses with a reason (never a silent skip).

Fail closed: `register` refuses a row that leaves one of these out, naming it; `check_complete`
refuses an opcode without a row. The tables are filled in place, so a module that imported one
before the plug-ins were installed still sees every opcode.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Callable, NamedTuple

from .instructions import BARRIER_FIELDS, OPCODE_NAMES, WAIT_PHASE, Instr

if TYPE_CHECKING:  # pragma: no cover
    from .semantics import System

# A reduction that does not apply where the opcode occurs (por.py and symmetry.py then leave
# the whole System unreduced); the TLA+ emitter's refusal.
UNREDUCED = "unreduced"
NOT_IN_TLA = "not in TLA+"

# The shared objects a step can touch (`Touch`), each with an index: a barrier or semaphore
# instance's counters, a hardware barrier instance's, the fork of a warpgroup (agent), the end
# of a warp (agent) that a join waits for.
BARRIER, HARDWARE, FORKED, ENDED = "barrier", "hardware", "forked", "ended"
RESOURCE_SPACES = frozenset({BARRIER, HARDWARE, FORKED, ENDED})


class Touch(NamedTuple):
    """What one instruction's step touches (resources are (space, index) pairs)."""

    reads: tuple = ()           # read by the step (and its guard)
    writes: tuple = ()
    guard_reads: tuple = ()     # read by the guard only while it is false (it stays true after)
    issues: tuple = ()          # in-flight slots it issues: each delivery writes its instance
    enqueues: int | None = None     # the tcgen05 arrival set whose completion it queues
    reaches: tuple = ()         # instances it arrives on (a peer block's: BP146)
    # (instance, seen position) of a Pallas wait: a thread moving onto it is read by a
    # completion of that instance while it has observed nothing (BP101)
    standing: tuple | None = None
    # writes charged to another agent's step: ((agent, pc, resource), ...) (a join: the last
    # step of each warp it waits for ends that warp)
    writes_at: tuple = ()


class Tla(NamedTuple):
    constructor: str            # specs/MBarrier.tla's constructor (with its operands)
    action: str                 # the action that executes it
    text: Callable              # (system, instr) -> the instruction in constructor syntax


_MISSING = object()
# The rows every step declares, and what each means (the message of a missing one).
ROWS = {
    "guard": "its guard (None: always enabled)",
    "effect": "its effect (None: only the program counter moves)",
    "touches": "what it reads and writes for partial-order reduction ((system, agent, instr) "
               "-> Touch), or UNREDUCED",
    "resources": "the same in words (por.py's RESOURCES)",
    "waits": "whether a thread's reduction horizon may end at it (True for a wait)",
    "symmetry": "how block symmetry maps its operands (a class of checker/engines/symmetry.py)"
                ", or UNREDUCED",
    "tla": "its TLA+ instruction (Tla), or NOT_IN_TLA",
}


@dataclass(frozen=True)
class Step:
    """Everything the engines know about one opcode."""

    opcode: int
    guard: Callable | None = _MISSING
    effect: Callable | None = _MISSING
    touches: Callable | str = _MISSING
    resources: str = _MISSING
    waits: bool = _MISSING
    symmetry: str = _MISSING
    tla: Tla | str = _MISSING
    family: str = ""            # filled in by `register`


STEPS: dict[int, Step] = {}
GUARDS: dict[int, Callable | None] = {}
EFFECTS: dict[int, Callable | None] = {}


def missing_rows(step: Step) -> list[str]:
    return [f.name for f in fields(Step) if getattr(step, f.name) is _MISSING]


def check_step(step: Step, family: str) -> None:
    """Refuse a row that leaves out a declaration or names an unknown opcode."""
    name = OPCODE_NAMES.get(step.opcode)
    if name is None:
        raise AssertionError(f"{family}: opcode {step.opcode} is not allocated "
                             "(instructions.opcode)")
    for row in missing_rows(step):
        raise AssertionError(f"{family}: opcode {name} has no `{row}` row: {ROWS[row]}")
    if step.touches != UNREDUCED and not callable(step.touches):
        raise AssertionError(f"{family}: opcode {name}: `touches` is a function or UNREDUCED")
    if step.tla != NOT_IN_TLA and not isinstance(step.tla, Tla):
        raise AssertionError(f"{family}: opcode {name}: `tla` is a Tla or NOT_IN_TLA")
    if (step.touches == UNREDUCED) != (step.symmetry == UNREDUCED):
        raise AssertionError(f"{family}: opcode {name}: both reductions are off where it "
                             "occurs, or neither (the explorer turns them off together)")


def register(step: Step, family: str) -> None:
    """Enter one opcode's row (extensions.install calls this)."""
    check_step(step, family)
    if step.opcode in STEPS:
        raise AssertionError(f"{family}: opcode {OPCODE_NAMES[step.opcode]} is declared by "
                             f"{STEPS[step.opcode].family}")
    STEPS[step.opcode] = Step(**{**{f.name: getattr(step, f.name) for f in fields(Step)},
                                 "family": family})
    GUARDS[step.opcode] = step.guard
    EFFECTS[step.opcode] = step.effect


def check_complete(opcode_names=OPCODE_NAMES) -> None:
    """Every opcode has a row."""
    for op, name in opcode_names.items():
        if op not in STEPS:
            raise AssertionError(f"opcode {name} has no step row: declare a `Step` in the "
                                 "`steps` of the family that owns it (model/steps.py)")


def opcodes_in(system: System, test: Callable[[Step], bool]) -> list[str]:
    """The names of the opcodes in `system`'s programs whose row passes `test` (e.g. the
    ones outside a reduction: `lambda s: s.touches == UNREDUCED`)."""
    ops = {instr.op for prog in system.programs for instr in prog}
    return sorted(OPCODE_NAMES[op] for op in ops if test(STEPS[op]))


# Helpers the families' rows share.

def phase(system: System, state, inst: int) -> int:
    """The phase (a semaphore's value) of barrier instance `inst`."""
    return state[system.barrier_base + BARRIER_FIELDS * inst]


def barriers(instances) -> tuple:
    return tuple((BARRIER, i) for i in instances)


def tla_seq(items) -> str:
    """A TLA+ sequence."""
    items = list(items)
    return "<<" + ", ".join(str(i) for i in items) + ">>" if items else "<<>>"


def tla_seen(system: System, pos: int) -> int:
    """The TLA+ index (from 1) of a state position in the `seen` entries."""
    return pos - (system.n_agents + BARRIER_FIELDS * len(system.instances)) + 1


def intended_completion(instr: Instr, seen: int) -> int:
    """The completion a parity wait means (the phase the thread means, plus one).

    WAIT_PHASE states it: the thread's own phase count, which is what the rules check. For a
    bare WAIT_PARITY it is only a guess, which no rule checks (model/parity.py judges bare
    waits by what they return after; tests show where the guess goes wrong): the next
    completion this agent has not observed whose number has parity P + 1 (it passes once the
    barrier's parity differs from P): after observing `seen` completions (-1: none yet) that is
    seen + 1 or seen + 2. A fresh barrier (seen -1) with P = 1 means completion 0: the initial
    phase, which has already passed (CUTLASS's producer_acquire).

    >>> from .instructions import WAIT_PARITY
    >>> [intended_completion(Instr(WAIT_PARITY, 0, p, 0, 0), -1) for p in (1, 0)]
    [0, 1]
    >>> intended_completion(Instr(WAIT_PARITY, 0, 0, 0, 0), 1)   # parity not toggled
    3
    """
    if instr.op == WAIT_PHASE:
        return instr.amount
    return seen + 1 if (seen - instr.amount) % 2 == 0 else seen + 2
