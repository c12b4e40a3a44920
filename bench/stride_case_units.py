"""The work units each residue case of a strided ring costs `prove` (stride_split.py).

    python bench/stride_case_units.py \
        examples/patterns/parity_skipping.py::pingpong_bare_parity_deep_ring --timeout 400
    python bench/stride_case_units.py examples/gluon/attention_forward.py::attention \
        --symbolic N_CTX --timeout 300 --case 0

`prove --timeout T` draws every case of a strided ring from one budget of T * 10^6 units
(budget.py); a row that stays `unknown` at --timeout 60 says only where that budget ran out.
This script applies what `prove_kernel` applies before the cases (a parameter read only as
`P // D` proved as its quotient: quotients.py; barriers the kernel initialises itself published:
init_prefix.py; memory effects left to the race proof), then proves each case on its own with a budget large enough to finish, and prints what
it spent, in total and per phase (Houdini on each class, sampling, ...): the figure a faster
method has to beat, case by case. Units are counted, not timed (the same on every machine).
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from barrierproof.checker.symbolic.budget import Budget  # noqa: E402
from barrierproof.checker.symbolic.init_prefix import publish_inits  # noqa: E402
from barrierproof.checker.symbolic.quotients import quotient_rewrite  # noqa: E402
from barrierproof.checker.symbolic.prove import prove  # noqa: E402
from barrierproof.checker.symbolic.stride_split import stride_cases  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model.ir import without_memory  # noqa: E402


def case_units(target: str, symbolic: list[str], timeout: float, least: float = 0.2,
               only: list[int] | None = None):
    """[(label, status, units, [(phase, units)])] per case (the cases numbered `only`, when
    given: one residue at a time); phases of fewer than `least` million units left out."""
    (t,) = resolve(target)
    kernel = t.build()
    fixed = {n: p.default for n, p in kernel.params.items() if n not in symbolic}
    kernel, quotients = quotient_rewrite(kernel, symbolic, fixed)
    names = {q.param: q.name for q in quotients}
    symbolic = [names.get(n, n) for n in symbolic]
    kernel = without_memory(publish_inits(kernel, symbolic, fixed)[0])
    cases, why = stride_cases(kernel, symbolic, fixed)
    if not cases:
        raise SystemExit(f"{target}: no stride cases ({why or 'no strided ring'})")
    out = []
    for n, case in enumerate(cases):
        if only is not None and n not in only:
            continue
        marks: list[tuple[str, float]] = []
        budget = Budget(timeout, progress=lambda e: marks.append((e["phase"], e["spent"])))
        proof = prove(case.kernel, case.symbolic, fixed, timeout=timeout, budget=budget)
        total = budget.spent()
        marks.append(("end", total / budget.units))
        phases: dict[str, int] = {}
        for (phase, a), (_, b) in zip(marks, marks[1:]):
            phases[phase] = phases.get(phase, 0) + int((b - a) * budget.units)
        shown = [(p, u) for p, u in phases.items() if u >= least * 1e6]
        out.append((case.label, proof.status, total, shown))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", nargs="?", default="examples/patterns/parity_skipping.py::"
                    "pingpong_bare_parity_deep_ring")
    ap.add_argument("--symbolic", action="append", default=None)
    ap.add_argument("--timeout", type=float, default=400.0,
                    help="budget of each case, in --timeout seconds (default 400)")
    ap.add_argument("--case", type=int, action="append", default=None,
                    help="only the case of this number (0 = the first residue); repeatable")
    args = ap.parse_args()
    symbolic = args.symbolic or ["tiles_per_wg"]
    rows = case_units(args.target, symbolic, args.timeout, only=args.case)
    print(f"{args.target}, each case with the budget of --timeout {args.timeout:g}:")
    for label, status, total, phases in rows:
        print(f"- {label}: {status}, {total / 1e6:.1f}M units")
        for phase, units in phases:
            print(f"    {units / 1e6:6.1f}M  {phase}")
    print(f"{'all cases' if args.case is None else 'these cases'}: "
          f"{sum(r[2] for r in rows) / 1e6:.1f}M units")


if __name__ == "__main__":
    main()
