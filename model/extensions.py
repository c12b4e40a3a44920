"""How a family of primitives outside the mbarrier core plugs into a System.

The core (instructions.py, violations.py, steps.py, compile.py, semantics.py) names no plug-in:
a plug-in module (hw_barriers.py, init_visibility.py) describes itself as an `Extension` and
plugins.py, the one registration module, installs them in order. `install` puts its codes
into violations.CODES and its step rules into steps.GUARDS / EFFECTS; the compiler and the
System call its hooks in installation order (which fixes the layout of the state vector).
Its `steps` are the rows of the opcodes it owns (steps.py: step rule, what partial-order
reduction and symmetry see, TLA+ action), which `install` enters in steps.STEPS.
A family's `primitives` (model/kinds.py) declare its IR kinds: `install` enters them in the
primitive registry, where the core finds each kind's compile hook (the primitive's own, else
the extension's `compile_op`). The families of the mbarrier core (model/primitives/) join the
same way. `install` refuses a step row that leaves a declaration out, naming it, and
`check_complete` then makes an opcode without a row, or without a primitive, and a primitive
without a compile hook an error at import, never a step that does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import kinds as _kinds
from . import steps as _steps
from .instructions import OPCODE_NAMES
from .steps import EFFECTS
from .violations import CODES


@dataclass(frozen=True)
class Extension:
    name: str
    codes: dict[str, str] = field(default_factory=dict)         # BP code -> rule name
    primitives: tuple = ()                      # kinds.Primitive: the IR op kinds it declares
    steps: tuple = ()                           # steps.Step: the rows of the opcodes it owns
    # opcode of an extension installed before -> the effect this one puts in its place (and
    # which calls the one it replaces)
    wraps: dict[int, Callable] = field(default_factory=dict)
    # (system, op, env, agent, block) -> None: unroll one op of `kinds` into instructions
    compile_op: Callable | None = None
    after_programs: Callable | None = None      # (system) -> None: once every program is built
    layout: Callable | None = None              # (system, pos) -> pos: place its state fields
    initial_fields: Callable | None = None      # (system) -> list: their initial values
    state_violations: Callable | None = None    # (system, state) -> [Violation]
    # (system, state) -> (detail lines, the Violation a deadlock is, or None)
    deadlock: Callable | None = None

    @property
    def kinds(self) -> frozenset[str]:
        """The IR op kinds it declares."""
        return frozenset(p.kind for p in self.primitives)


INSTALLED: list[Extension] = []
# The installed extensions with a hook the compiler or the System calls, in installation order
# (families that only declare primitives stay off the stepping path).
EXTENSIONS: list[Extension] = []
_HOOKS = ("after_programs", "layout", "initial_fields", "state_violations", "deadlock")


def install(ext: Extension) -> None:
    clash = set(ext.codes) & set(CODES)
    if clash:
        raise AssertionError(f"{ext.name}: codes {sorted(clash)} are already taken")
    for step in ext.steps:
        _steps.check_step(step, ext.name)
    for op in ext.wraps:
        if op not in EFFECTS:
            raise AssertionError(f"{ext.name}: wraps {OPCODE_NAMES[op]}, which no family "
                                 "installed before declares")
    for prim in ext.primitives:
        _kinds.register(prim, ext.name, ext.compile_op)
    for step in ext.steps:
        _steps.register(step, ext.name)
    CODES.update(ext.codes)
    EFFECTS.update(ext.wraps)
    INSTALLED.append(ext)
    if any(getattr(ext, hook) is not None for hook in _HOOKS):
        EXTENSIONS.append(ext)


def check_complete() -> None:
    """Every opcode has a step row (steps.py) and belongs to a primitive; every primitive
    compiles."""
    _steps.check_complete(OPCODE_NAMES)
    _kinds.check_complete(OPCODE_NAMES.values())
