"""The table of the Gluon examples in docs/frontends.md, produced by checking them.

    python bench/gluon_table.py                  # the markdown table
    python bench/gluon_table.py --check docs/frontends.md    # compare with the table there

Every column but the seconds is a fact of the model (partitions, barriers, distinct states,
verdict); `--check` compares those and fails on any difference. Seconds (compile to TTGIR,
translate and check) depend on the machine and are printed, never compared.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "gluon")

from barrierproof.checker.check import check_kernel  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
import readme_table  # noqa: E402

HEADER = ["Gluon example", "partitions", "barriers", "states explored", "verdict",
          "seconds (compile + check)"]
COMPARED = HEADER[1:5]
# The persistent ping-pong attention at longer sequences than its example (N_CTX = 512): the
# tutorial's configuration, where a bounded unrolling (the TLX detector) times out
LONGER = [("attention_forward.py", "attention_persistent", {"N_CTX": n}) for n in (1024, 2048)]


def rows() -> list[list[str]]:
    table = []
    for target in resolve(EXAMPLES):
        start = time.perf_counter()
        kernel = target.build()
        verdict = check_kernel(kernel, source=target.ref)
        seconds = time.perf_counter() - start
        barriers = sum(int(b.shape[0].value) if not b.scalar else 1 for b in kernel.barriers)
        label = f"`{os.path.basename(target.path)}::{target.name}`"
        table.append([label, str(kernel.num_threads.value), str(barriers),
                      str(verdict.states), verdict.label, f"{seconds:.1f}"])
    for path, name, args in LONGER:
        table.append(_row(path, name, args))
    return table


def _row(path: str, name: str, args: dict) -> list[str]:
    """A launch of an example with some arguments changed, checked like the examples."""
    import dataclasses

    from barrierproof.model.gluon import load
    (target,) = resolve(os.path.join(EXAMPLES, path) + "::" + name)
    import importlib.util
    spec = importlib.util.spec_from_file_location("_gluon_example", target.path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    launch = getattr(module, name)
    start = time.perf_counter()
    kernel = load(dataclasses.replace(launch, args={**launch.args, **args}), name,
                  target.expect)
    verdict = check_kernel(kernel, source=target.ref)
    seconds = time.perf_counter() - start
    barriers = sum(int(b.shape[0].value) if not b.scalar else 1 for b in kernel.barriers)
    shown = ", ".join(f"{k}={v}" for k, v in args.items())
    return [f"`{path}::{name}` ({shown})", str(kernel.num_threads.value), str(barriers),
            str(verdict.states), verdict.label, f"{seconds:.1f}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="README", help="compare with the table in this file (docs/frontends.md)")
    args = parser.parse_args(argv)
    table = rows()
    print(readme_table.markdown(HEADER, table))
    if args.check:
        problems = readme_table.compare(table, args.check, HEADER, COMPARED)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
