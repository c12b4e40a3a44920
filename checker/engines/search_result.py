"""What a search returns (`Limits` in, `ExploreResult` out) and how a schedule is rebuilt from the
keys a search stored: shared by the Python explorer (explore.py) and the compiled core
(compiled.py), so neither imports the other."""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from typing import Callable

from ...model.semantics import System
from ...model.violations import Violation


@dataclass
class Limits:
    max_states: int | None = 5_000_000
    max_depth: int | None = None
    timeout: float | None = None        # seconds
    max_memory_mb: int | None = 16_000


@dataclass
class ExploreResult:
    status: str                          # verified, violation, bounded
    states: int
    transitions: int
    depth: int
    seconds: float
    actions: list[int] | None = None     # concrete schedule to the violation
    witness: list[int] | None = None     # parity aliasing: the other schedule (model/parity.py)
    violation: Violation | None = None
    reason: str | None = None            # why a search stopped early
    reduction: bool = True
    symmetry_classes: list[list[str]] = field(default_factory=list)
    store: str = "tuple"
    bytes_per_state: float = 0.0         # resident memory grown per distinct state
    collision_probability: float | None = None   # fingerprint store only
    notes: list[str] = field(default_factory=list)   # what the search decided on its own
    # Why partial-order reduction was switched off, if it was: a matter of speed, never of the
    # verdict (a full expansion is always a persistent set), so not a note of the verdict.
    partial_order_off: str | None = None


def _rss_bytes() -> int:
    """The resident set size now (Linux), else the peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _states(system: System, actions: list[int]) -> list[tuple]:
    states = [system.initial_state()]
    for a in actions:
        states.append(system.step(states[-1], a)[0])
    return states


def _concretize(system: System, canon, key, path: list, pred: tuple | None, action: int | None,
                ignore: frozenset[str], step_code: str | None = None,
                tolerated: Callable[[Violation], bool] | None = None
                ) -> tuple[list[int], Violation | None]:
    """Map a path of stored keys (orbit representatives) to one concrete schedule. A last step
    that breaks a rule itself is matched by its code `step_code` (the least of its orbit, see
    symmetry.py); it is returned with the violation it reports."""
    current = system.initial_state()
    actions: list[int] = []

    def follow(target: object, want_code: str | None) -> None:
        nonlocal current
        for b in range(system.n_actions):
            if system.enabled(current, b):
                nxt, v = system.step(current, b)
                code = v.code if v is not None and v.code not in ignore else None
                if code == want_code and key(canon(nxt)) == target:
                    actions.append(b)
                    current = nxt
                    return
        raise AssertionError("the reduced search lost a step of the counterexample")

    for target in path:
        follow(target, None)
    if action is None:
        return actions, None
    if step_code is None:            # the state reached breaks a rule, not the step
        nxt, _ = system.step(pred, action)
        follow(key(canon(nxt)), None)
        return actions, None
    for b in range(system.n_actions):
        if system.enabled(current, b):
            _, v = system.step(current, b)
            if v is not None and v.code == step_code and not (tolerated and tolerated(v)):
                actions.append(b)
                return actions, v
    raise AssertionError("the reduced search lost the last step of the counterexample")
