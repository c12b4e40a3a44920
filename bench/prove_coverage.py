"""How many of the correct protocols of examples/ and examples/patterns/ `prove` proves.

    python bench/prove_coverage.py --out bench/SYMBOLIC.md

A protocol is correct when its declared verdict is `verified`. Each is proved for every value of
the parameters it declares `symbolic=` (in the domain its `k.assume` states), the others fixed
at their defaults (the table names them: a cluster's shape, say, is concrete in the fragment); a
protocol that declares no parameter symbolic counts as not proved (nothing says for which values
it is meant to hold). Protocols without parameters have nothing to quantify over and are listed
apart. The figure is written between the coverage markers of --out (the rest of
the file, bench_symbolic.py's tables, is kept).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import platform
import re
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from barrierproof.cli import main as cli  # noqa: E402
from barrierproof.loader import import_file, targets_in_module  # noqa: E402

BEGIN, END = "<!-- coverage: bench/prove_coverage.py -->", "<!-- /coverage -->"
MAX_MEMORY_MB = 4000           # per proof, as `--max-memory`
FOLDERS = ("examples", os.path.join("examples", "patterns"))


def correct_protocols() -> list:
    """(file relative to the root, target) of every DSL protocol declared `verified`."""
    out = []
    for folder in FOLDERS:
        for file in sorted(Path(ROOT, folder).glob("*.py")):
            if file.name.startswith("_"):
                continue
            for target in targets_in_module(str(file), import_file(str(file))):
                if target.kind == "dsl" and target.expect == "verified":
                    out.append((os.path.relpath(file, ROOT), target))
    return out


def measure_one(job: tuple[str, str, float]) -> dict:
    """One protocol's row (in a worker process: proofs are independent)."""
    rel, name, timeout = job
    target = next(t for t in targets_in_module(os.path.join(ROOT, rel),
                                               import_file(os.path.join(ROOT, rel)))
                  if t.name == name)
    return _row(rel, target, timeout)


def measure(timeout: float, jobs: int = 1, only: str | None = None) -> list[dict]:
    work = [(rel, target.name, timeout) for rel, target in correct_protocols()
            if only is None or rel == only]
    rows = []

    def done(row):
        rows.append(row)
        print(f"{row['ref']}: {row['verdict']} ({row['seconds']:.1f}s) {row['why']}", flush=True)

    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for row in pool.imap(measure_one, work, chunksize=1):   # in order, as they finish
                done(row)
    else:
        for w in work:
            done(measure_one(w))
    return rows


def _row(rel: str, target, timeout: float) -> dict:
    kernel = target.build()
    params = list(kernel.params)
    symbolic = [p.name for p in kernel.params.values() if p.symbolic]
    row = dict(ref=f"{rel}::{target.name}", params=params, symbolic=symbolic)
    if not params:
        row.update(verdict="no parameters", seconds=0.0, why="")
    elif not symbolic:
        row.update(verdict="not declared", seconds=0.0, why="no parameter declared symbolic")
    else:
        t0 = time.perf_counter()
        report = _prove(row["ref"], timeout)
        label = report["verdict"] + (f":{report['diagnostics'][0]['code']}"
                                     if report["verdict"] == "violation" else "")
        row.update(verdict=label, seconds=time.perf_counter() - t0,
                   why="" if label == "proved" else (report.get("coverage") or "").split("\n")[0])
    return row


def _prove(ref: str, timeout: float) -> dict:
    """`barrierproof prove REF` as a user runs it: the CLI's watchdog holds --timeout and
    --max-memory behind the prover's own budget."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli(["prove", os.path.join(ROOT, ref), "--timeout", f"{timeout:g}", "--max-memory",
             str(MAX_MEMORY_MB), "--no-cache", "--format", "json"])
    (report,) = json.loads(out.getvalue())
    return report


ROW = re.compile(r"^\| (examples/\S+) \| ([^|]*) \| ([^|]*) \| ([^|]+?) \| ([\d.]+)s \| (.*) \|$",
                 re.M)


def previous_rows(path: str) -> list[dict]:
    """The rows of the coverage table in `path` (as an earlier run wrote them)."""
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN not in text:
        return []
    section = text.split(BEGIN, 1)[1].split(END, 1)[0]
    out = []
    for ref, sym, fixed, verdict, seconds, why in ROW.findall(section):
        names = [n.strip() for n in sym.split(",") if n.strip() != "-"]
        rest = [n.strip() for n in fixed.split(",") if n.strip() != "-"]
        params = names + rest if verdict != "no parameters" else []
        out.append(dict(ref=ref, params=params, symbolic=names, verdict=verdict,
                        seconds=float(seconds), why=why.replace("\\|", "|")))
    return out


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    """`old` with the rows of `new` in place of theirs, new ones after the last of their file."""
    fresh = {r["ref"]: r for r in new}
    rows = [fresh.pop(r["ref"], r) for r in old]
    for r in fresh.values():
        file = r["ref"].split("::")[0]
        at = max((i for i, o in enumerate(rows) if o["ref"].startswith(file + "::")),
                 default=len(rows) - 1)
        rows.insert(at + 1, r)
    return rows


def report(rows: list[dict], command: str) -> str:
    with_params = [r for r in rows if r["params"]]
    proved = [r for r in with_params if r["verdict"] == "proved"]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    lines = [
        BEGIN,
        "## Coverage: correct protocols proved for every value of their parameters",
        "",
        f"**{len(proved)} of {len(with_params)} correct protocols with parameters "
        f"({100 * len(proved) / max(1, len(with_params)):.0f}%)** in examples/ and "
        "examples/patterns/ are proved by `prove` for every value of their symbolic parameters "
        f"({len(rows) - len(with_params)} more have no parameters: nothing to quantify over).",
        "",
        f"Produced by `{command}` at the repository root on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; load average at the end: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.",
        "",
        "| protocol | symbolic | fixed | prove | time | why not proved |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    for r in rows:
        why = r["why"].replace("|", "\\|")
        fixed = [p for p in r["params"] if p not in r["symbolic"]]
        lines.append(f"| {r['ref']} | {', '.join(r['symbolic']) or '-'} | "
                     f"{', '.join(fixed) or '-'} | {r['verdict']} | {r['seconds']:.1f}s | {why} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_section(path: str, section: str) -> None:
    """Replace the coverage section of `path` (or append it), keeping everything else."""
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the coverage section into this Markdown file")
    parser.add_argument("--timeout", type=float, default=60.0, help="per proof (seconds)")
    parser.add_argument("--jobs", type=int, default=1, help="proofs run side by side")
    parser.add_argument("--only", metavar="FILE",
                        help="measure the protocols of this file (relative to the root) only, "
                             "keeping the other rows of --out as an earlier run wrote them")
    args = parser.parse_args(argv)
    rows = measure(args.timeout, args.jobs, args.only)
    command = "python bench/prove_coverage.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
    if args.only:
        if not args.out:
            parser.error("--only needs --out (the table it updates)")
        rows = merge(previous_rows(args.out), rows)
        command += f" (rows of {args.only}; the others from the run before)"
    section = report(rows, command.strip())
    print(section)
    if args.out:
        write_section(args.out, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
