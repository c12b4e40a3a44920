"""Proofs of a class system case by case on the sign of its parameters.

A symbolic parameter ranges over every integer the assumptions allow, negative ones included
(`k.loop(n)` is `range(n)`: no iteration when n <= 0), but the samples the candidates are
guessed from are taken at 0, 1, 2, ... A loop counter that leaves its loop equals
max(n, 0), not n: the sampled `k == n` after the loop breaks at n = -1 and Houdini drops it,
with every fact that rested on it, although no state at n >= 0 breaks it (a split-K reduction's
contributors: `k == tiles` when they leave their loop, so a contributor that has not waited
has not iterated). No linear fact says max(n, 0), but each sign alone is linear: the class
system is proved once under `n >= 0` (with the samples it always had) and once under `n <= -1`
(sampled at -1, -2, ...), as two systems of their own.

Why it is sound: the parameters are frozen variables (no transition changes them), so every
run of the class system has its parameters in exactly one of the sign cases, and it is a run of
that case's system (the same transitions and error conditions, the initial states restricted
to the case). An invariant Z3 proved inductive and error-free on each case's system therefore
covers every run, and the cases (the orthants of the parameters not bounded below by the
assumptions, empty ones skipped only when Z3 shows them empty) cover every parameter value.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

import z3

from .counters import CounterSystem

# at most 2**MAX_SPLIT cases (every parameter that may be negative splits them in two)
MAX_SPLIT = 3


@dataclasses.dataclass
class SignCase:
    text: str                      # e.g. "tiles >= 0"
    negative: frozenset[str]       # the parameters that are negative in this case
    system: CounterSystem


def sign_cases(system: CounterSystem, params: dict[str, z3.ArithRef],
               symbolic: Sequence[str]) -> list[SignCase]:
    """The cases of `system` by the sign of its symbolic parameters that may be negative; none
    when no parameter may be (nothing to split) or too many may."""
    constraints = list(system.constraints)

    def possible(extra) -> bool:
        s = z3.Solver()
        s.set("timeout", 10_000)
        s.add(*constraints, *extra)
        return s.check() != z3.unsat      # undecided: kept, and so proved like the others

    split = [n for n in symbolic if possible([params[n] < 0])]
    if not split or len(split) > MAX_SPLIT:
        return []
    out = []
    for signs in itertools.product((False, True), repeat=len(split)):
        case = [params[n] <= -1 if neg else params[n] >= 0 for n, neg in zip(split, signs)]
        if not possible(case):
            continue
        text = " and ".join(f"{n} <= -1" if neg else f"{n} >= 0" for n, neg in zip(split, signs))
        out.append(SignCase(text, frozenset(n for n, neg in zip(split, signs) if neg),
                            dataclasses.replace(system, constraints=constraints + case)))
    return out
