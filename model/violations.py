"""Rule violations found while stepping a System: the BP codes and the record every engine reports.

SEMANTICS.md section 3 states the rules; the plug-ins (hw_barriers.py, init_visibility.py) add
the codes of their own rules when plugins.py installs them. A violation is terminal: the state that shows it is not expanded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from .ir import Loc

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
    # and the codes of the plug-ins (extensions.py), installed by plugins.py
}


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


# The rules judged when every thread has exited: what the kernel left undone at its end.
EXIT_RULES = frozenset({"BP103", "BP104", "BP105", "BP130"})


def rank(code: str) -> tuple[bool, str]:
    """The order of codes for every choice among findings (the compiled core's RANK): by
    number, the exit rules after every other. A race in the kernel's last gaps (a read of a tile
    a TMA load still writes) is the earlier, more specific cause: it is named at the access, not
    as the copy left in flight at the exit."""
    return code in EXIT_RULES, code


def primary(violations: list[Violation]) -> Violation:
    """The violation to report when several hold at once: the first in `rank`, so every engine
    and the interpreter name the same one whatever order they found them in."""
    return min(violations, key=lambda v: rank(v.code))


# A finding accepted at one place (barrierproof/suppress.py): its code, the real path of the
# file and the line its diagnostic points at.
Place = tuple[str, str, int]


def place(code: str, loc: Loc) -> Place:
    return code, os.path.realpath(loc.file), loc.line


def tolerance(system, tolerate: frozenset[Place]) -> Callable[[Violation], bool] | None:
    """Whether a violation of `system` is one of the accepted findings `tolerate`: its code, at
    the location its report would print (`system.location`). None when nothing is accepted, so
    a search without suppressions pays nothing for them."""
    if not tolerate:
        return None
    memo: dict[tuple, bool] = {}

    def tolerated(v: Violation) -> bool:
        key = (v.code, v.src, v.inst)
        if key not in memo:
            memo[key] = place(v.code, system.location(v)) in tolerate
        return memo[key]
    return tolerated
