"""The work units the race proof of a kernel spends, partition by partition and phase by phase.

    python bench/race_units.py examples/gluon/attention_forward.py::attention \
        --symbolic N_CTX --timeout 300 --case 0

Applies what `prove_kernel` applies before its race proof (a parameter read only as `P // D`
proved as its quotient: quotients.py; barriers the kernel initialises itself published:
init_prefix.py), then runs the race proof alone (prove.py `prove_races`; the barrier rules are
not proved here) with the budget of --timeout, and prints each partition's answer and the
units at which each phase began. `--case n`: the n-th residue case of a strided ring alone
(stride_split.py, as `prove` cuts the races), n = 0 the first residue. Units are counted, not timed (the same on every machine).
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from barrierproof.checker.symbolic import races_proof  # noqa: E402
from barrierproof.checker.symbolic.budget import Budget  # noqa: E402
from barrierproof.checker.symbolic.init_prefix import publish_inits  # noqa: E402
from barrierproof.checker.symbolic.prove import prove_races  # noqa: E402
from barrierproof.checker.symbolic.quotients import quotient_rewrite  # noqa: E402
from barrierproof.checker.symbolic.stride_split import stride_cases  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("--symbolic", action="append", required=True)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--case", type=int, default=None)
    args = ap.parse_args()
    (t,) = resolve(args.target)
    kernel = t.build()
    fixed = {n: p.default for n, p in kernel.params.items() if n not in args.symbolic}
    kernel, quotients = quotient_rewrite(kernel, args.symbolic, fixed)
    names = {q.param: q.name for q in quotients}
    symbolic = [names.get(n, n) for n in args.symbolic]
    kernel = publish_inits(kernel, symbolic, fixed)[0]
    if args.case is not None:
        cases, why = stride_cases(kernel, symbolic, fixed)
        if not cases:
            raise SystemExit(f"{args.target}: no stride cases ({why or 'no strided ring'})")
        case = cases[args.case]
        print(case.label, flush=True)
        kernel, symbolic = case.kernel, case.symbolic
    budget = Budget(args.timeout, progress=lambda e: print(
        f"{e['spent'] * budget.units / 1e6:8.1f}M  {e['phase']}", flush=True))
    attempt = races_proof._prove_races_on

    def shown(*a, **kw):        # each partition's answer, as it comes
        proof = attempt(*a, **kw)
        tried = ", ".join(k for k, v in kw.items() if v is True) or "every concrete barrier"
        print(f"partition ({tried}): " + ("refused" if proof is None else
                                          f"{proof.status} {proof.reason}"), flush=True)
        return proof

    races_proof._prove_races_on = shown
    proof = prove_races(kernel, symbolic, fixed, budget)
    print(f"{args.target}: races {proof.status}, {budget.spent() / 1e6:.1f}M units")


if __name__ == "__main__":
    main()
