"""The work units a whole `prove` spends, phase by phase, and its verdict.

    python bench/prove_units.py examples/pallas/sizes.py::hopper_matmul_cluster_any_k \
        --symbolic k_steps --symbolic tiles --timeout 400

Runs what `barrierproof prove TARGET --symbolic ... --timeout T --no-cache` runs and prints
the units counted (Z3's and the counted Python work, budget.py `units_spent`) at the start of
each phase the budget enters, then the verdict and the total. Units are counted, not timed: the
same on every machine, run after run. bench/race_units.py does the same for the race proof
alone.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from barrierproof.checker.check import Options  # noqa: E402
from barrierproof.checker.engine_settings import ProveSettings  # noqa: E402
from barrierproof.checker.engines.search_result import Limits  # noqa: E402
from barrierproof.checker.symbolic.budget import units_spent  # noqa: E402
from barrierproof.checker.symbolic.prove import prove_kernel  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("--symbolic", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    (t,) = resolve(args.target)
    # a Pallas kernel declared at several sizes is proved over its family, as `prove` does
    kernel = t.build_family() if getattr(t, "build_family", None) else t.build()
    start = units_spent()

    def phase(event: dict) -> None:     # the explorer's progress events carry no phase
        if "phase" in event:
            print(f"{(units_spent() - start) / 1e6:8.2f}M  {event['phase']}", flush=True)

    options = Options(limits=Limits(timeout=args.timeout), progress=phase)
    verdict = prove_kernel(kernel, None, options, args.target,
                           ProveSettings(symbolic=tuple(args.symbolic)))
    print(f"{args.target}: {verdict.verdict}, {(units_spent() - start) / 1e6:.2f}M units")
    for line in [verdict.coverage] + [d.message for d in verdict.diagnostics]:
        if line:
            print(f"  {line}")


if __name__ == "__main__":
    main()
