"""A refutation's finding at the declared values too, when it differs from the smallest one.

`prove` refutes with the explorer's first violation at the smallest breaking values. One fault
can show as different rules at different sizes: an accumulator stage never advanced deadlocks
with two tiles (BP100) and aliases a parity with three (BP101); a stage released before its MMA
leaves the MMA running at exit with one K step (BP105) and lets the next copy overwrite the
stage it reads with four (BP200). `check` explores the declared values (the parameters'
defaults) and reports the latter. So that `prove`'s answer names what `check` names, the explorer
is also run at the declared values, with the short search's state cap, and its first finding,
when it is another rule, is kept apart from the verdict's own diagnostics (those stay the
smallest values', with their trace) in `Verdict.at_declared`, with a note; an expectation,
which states the declared values' verdict, is met by its code too. Nothing is weakened: both
are findings of the explorer, each at its own values.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ...model.ir import Kernel
from ..check import Options, check_kernel
from ..engines.explore import Limits
from ..verdict import Verdict
from .budget import UNITS_PER_EXPLORED_STATE
from .work import charge as charge_work


def add_declared_finding(found: Verdict, kernel: Kernel, symbolic: Sequence[str],
                         fixed: Mapping[str, int], options: Options, source: str | None,
                         states: int) -> None:
    """Append the explorer's first finding at the declared values to `found` (module doc)."""
    declared = {n: kernel.params[n].default for n in symbolic if n in kernel.params}
    if not found.diagnostics or len(declared) != len(symbolic) or \
            all(found.params.get(n) == v for n, v in declared.items()):
        return
    cap = states if options.limits.max_states is None else min(states, options.limits.max_states)
    limits = Limits(max_states=max(1, cap), max_depth=options.limits.max_depth, timeout=None,
                    max_memory_mb=options.limits.max_memory_mb)
    there = check_kernel(kernel, {**fixed, **declared},
                         Options(limits, options.reduction, options.ignore, options.select), source)
    charge_work(there.states * UNITS_PER_EXPLORED_STATE)
    if there.verdict not in ("violation", "error") or not there.diagnostics:
        return
    first = there.diagnostics[0]
    if first.code in found.codes:
        return
    shown = ", ".join(f"{n}={v}" for n, v in declared.items())
    found.at_declared.append(first)
    found.notes.append(f"at the declared values ({shown}) the explorer's first finding is "
                       f"{first.code} ({first.name}): the same fault at other sizes; "
                       "`barrierproof check` shows its trace")
