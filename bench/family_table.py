"""The table (docs/prove.md) of `barrierproof prove` over every size of JAX's kernels (shape families).

    python bench/family_table.py                      # every row, as a markdown table
    python bench/family_table.py --check docs/prove.md  # compare with the docs' table

Each row runs `barrierproof prove examples/pallas/sizes.py::NAME --ignore BP200,BP201
--timeout 60` in this process, with `--symbolic` for the sizes and the tile count of the
persistent kernels (no parameter becomes symbolic unasked; the barrier rules; races
are not in the symbolic model): the kernel is traced at several sizes, the traces are joined into one IR whose trip counts are
expressions of the declared sizes (model/pallas/family.py), and the prover answers for every
size or finds the smallest breaking one, replayed by tracing the kernel again there. Every
column but the seconds is compared by `--check`; seconds depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = os.path.join(ROOT, "examples", "pallas", "sizes.py")

from barrierproof.cli import main as cli  # noqa: E402
import readme_table  # noqa: E402

# (label, kernel, the parameters asked symbolic with --symbolic, or () for the family's sizes):
# no parameter becomes symbolic unasked, so a persistent kernel's tile count is asked for
ROWS = [
    ("a TMA ring (examples/pallas/sizes.py), any steps and slots", "ring_any_size", ()),
    ("hopper_matmul", "hopper_matmul_any_k", ("k_steps", "tiles")),
    ("hopper_matmul, any stage count", "hopper_matmul_any_stages",
     ("extra_steps", "stages", "tiles")),
    ("hopper_matmul, cluster 2 along M", "hopper_matmul_cluster_any_k", ("k_steps", "tiles")),
    ("attention forward", "attention_forward_any_kv", ()),
    ("blackwell_matmul (1 CTA, 3 tiles per block)", "blackwell_matmul_any_k", ()),
]
TIMEOUT = 60
HEADER = ["kernel", "sizes (fitted from traces)", "prove", "what it covers", "seconds"]


def prove(name: str, symbolic=()) -> tuple[dict, float]:
    out = io.StringIO()
    start = time.perf_counter()
    asked = [a for n in symbolic for a in ("--symbolic", n)]
    with contextlib.redirect_stdout(out):
        cli(["prove", f"{SIZES}::{name}", "--ignore", "BP200,BP201", "--timeout", str(TIMEOUT),
             "--no-cache", "--format", "json", *asked])
    (report,) = json.loads(out.getvalue())
    return report, time.perf_counter() - start


def _note(report: dict, prefix: str) -> str | None:
    return next((n for n in report["notes"] if n.startswith(prefix)), None)


def covers(report: dict) -> str:
    verdict = report["verdict"]
    sizes = ", ".join(f"{n} >= 1" for n in report["params"] if not n.startswith(("tiles",
                                                                               "trips")))
    fixed = ", ".join(f"{n}={v}" for n, v in report["params"].items()
                      if n.startswith(("tiles", "trips")))
    at = f" at {fixed}" if fixed else ""
    if verdict == "proved":
        what = re.search(r"proved for (all .*?): \d+ barrier class", report["coverage"] or "")
        return f"proved for {what.group(1) if what else sizes}{at}"
    if verdict == "violation":
        replay = _note(report, "replayed by tracing") or _note(report, "NOT reproduced")
        where = re.search(r"again at (.*?\))[ :]", replay or "")
        return (f"{report['diagnostics'][0]['code']} at the smallest size "
                f"({where.group(1) if where else '?'}), re-traced there and replayed")
    coverage = report.get("coverage") or ""
    searched = re.search(r"no violation in (\d+) parameter point\(s\) explored, up to (\{.*\})",
                         coverage)
    if "static event order" in coverage:
        why = "the static event order does not fit"
    elif "fragment" in coverage:
        why = "outside the fragment"
    elif "wall-clock limit" in coverage or "budget" in coverage:
        why = f"no proof within --timeout {TIMEOUT}"
    else:
        why = "no proof"
    reach = ""
    if searched:
        top = ", ".join(f"{n}={v}" for n, v in
                        json.loads(searched.group(2).replace("'", '"')).items()
                        if not n.startswith(("tiles", "trips")))
        reach = f"; no violation for {top} and below" + (f" at {fixed}" if fixed else "")
    return f"{why}{reach}"


def sizes_column(report: dict) -> str:
    note = _note(report, "shape family: ") or "no shape family"
    family = note.removeprefix("shape family: ").split("; fitted")[0].replace("; ", ", ")
    branch = _note(report, "at ") or ""
    odd = re.match(r"at (\w+) = ([\d, ]+) the trace differs", branch)
    return family + (f" ({odd.group(1)} = {odd.group(2)} a branch of its own)" if odd else "")


def _family_notes(name: str) -> list[str]:
    """The family's own notes, for a report stopped by the wall-clock net (it has none)."""
    from barrierproof.loader import resolve
    (target,) = resolve(f"{SIZES}::{name}")
    return list(target.build_family().notes)


def run(rows=ROWS) -> list[list[str]]:
    table = []
    for label, name, symbolic in rows:
        report, seconds = prove(name, symbolic)
        if _note(report, "shape family: ") is None:
            report = {**report, "notes": list(report["notes"]) + _family_notes(name)}
        table.append([label, sizes_column(report), report["verdict"]
                      + (f":{report['diagnostics'][0]['code']}" if report["verdict"] ==
                         "violation" else ""), covers(report), f"{seconds:.0f}"])
        print(f"{label}: {table[-1][2]} ({seconds:.1f}s)", file=sys.stderr)
    return table


def markdown(table) -> str:
    return readme_table.markdown(HEADER, table)


def compare(table, path: str) -> list[str]:
    """Differences from the table in `path`, seconds left out."""
    return readme_table.compare(table, path, HEADER, HEADER[1:-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="PAGE", help="compare with this file's table")
    args = parser.parse_args(argv)
    table = run()
    print(markdown(table))
    if args.check:
        problems = compare(table, args.check)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
