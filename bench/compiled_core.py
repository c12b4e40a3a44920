"""The compiled exploration core against the Python explorer's raw search (and TLC) on CUTLASS's
pipeline_tma_async family, in one run; and which example systems the core accepts, with the
reasons for the others. Writes bench/COMPILED.md.

    python bench/compiled_core.py               # about 1-2 minutes on 2 shared CPUs
    python bench/compiled_core.py --tlc-big     # TLC on 3,6,8 too (about 2 minutes, 2.3 GB more)

Both cores search breadth first without reductions (the compiled one is that search only) and
must find the same distinct states, transitions, depth and verdict (checked). States per second
are given per wall-clock second and per CPU second of the process: on a shared machine the CPU
time is the steadier measure. Ratios within the run are what to compare.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from barrierproof.checker.engines import compiled  # noqa: E402
from barrierproof.checker.engines.explore import Limits, explore  # noqa: E402
from barrierproof.checker.engines.flatten import refusal  # noqa: E402
from barrierproof.model.ir import ModelError  # noqa: E402
from barrierproof.model.semantics import compile_systems  # noqa: E402

from regenerate import _row  # noqa: E402

MEMBERS = [_row("cutlass", "pipeline_tma_async", stages=3, consumers=5, steps=8),
           _row("cutlass", "pipeline_tma_async", stages=3, consumers=6, steps=8)]


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(system, core: str):
    wall, cpu = time.perf_counter(), _cpu()
    r = explore(system, Limits(max_states=None, timeout=None), reduction=False, order="bfs",
                core=core)
    return r, time.perf_counter() - wall, _cpu() - cpu


def speed(tlc_big: bool) -> list[str]:
    from barrierproof.checker.engines.tla import emit_system
    from barrierproof.checker.engines.tlc import run_module
    lines = ["| member | states | Python s (cpu) | Python states/s (per cpu s) | compiled s (cpu) "
             "| compiled states/s (per cpu s) | compiled / Python (cpu) | TLC 1w s | "
             "TLC / compiled |",
             "| --- |" + " --- |" * 8]
    for row in MEMBERS:
        system = row.system(races=False)
        python, p_wall, p_cpu = _timed(system, "python")
        core, c_wall, c_cpu = _timed(system, "compiled")
        assert compiled.NOTE in core.notes, "the compiled core did not run"
        same = (python.status, python.states, python.transitions, python.depth)
        if same != (core.status, core.states, core.transitions, core.depth):
            raise SystemExit(f"{row.label}: Python {same}, compiled "
                             f"{(core.status, core.states, core.transitions, core.depth)}")
        tlc = tlc_ratio = "not run (--tlc-big)"
        if tlc_big or core.states < 500_000:
            run = run_module(emit_system(system), timeout=600)
            if run.status != "ok" or run.distinct != core.states:
                raise SystemExit(f"{row.label}: TLC says {run.status} with {run.distinct} "
                                 f"states, the explorer {core.states}")
            tlc, tlc_ratio = f"{run.seconds:.1f}", f"{run.seconds / c_wall:,.0f}x"
        lines.append(
            f"| {row.label} | {core.states:,} | {p_wall:.2f} ({p_cpu:.2f}) | "
            f"{core.states / p_wall:,.0f} ({core.states / p_cpu:,.0f}) | {c_wall:.2f} "
            f"({c_cpu:.2f}) | {core.states / c_wall:,.0f} ({core.states / c_cpu:,.0f}) | "
            f"{p_wall / c_wall:.0f}x ({p_cpu / c_cpu:.0f}x) | {tlc} | {tlc_ratio} |")
        print(lines[-1], flush=True)
    return lines


def coverage() -> list[str]:
    """Which example systems the compiled core accepts; the reasons it gives for the others."""
    from test_examples import TARGETS
    accepted, refused = 0, collections.Counter()
    for target in TARGETS:
        try:
            systems = compile_systems(target.build())
        except ModelError:
            continue
        for system in systems:
            why = refusal(system)
            if why is None:
                accepted += 1
            else:
                refused[why] += 1
    total = accepted + sum(refused.values())
    return [f"The compiled core accepts {accepted} of the {total} example systems (every "
            "distinct cluster behaviour of every example kernel, compiled with memory effects "
            "as `check` compiles them); the Python explorer searches the others, for these "
            "reasons:", "", "| systems | refused for |", "| --- | --- |",
            *(f"| {n} | {why} |" for why, n in refused.most_common())]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc-big", action="store_true", help="TLC on the 1M-state member too")
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "COMPILED.md"))
    args = ap.parse_args()
    if not compiled.available():
        raise SystemExit("the compiled core is not built (pip install needs a C compiler)")
    start, load = time.time(), _load()
    rows = speed(args.tlc_big)
    cover = coverage()
    command = "python bench/compiled_core.py" + (" --tlc-big" if args.tlc_big else "")
    text = "\n".join([
        "# The compiled exploration core",
        "",
        f"Produced by `{command}` in {time.time() - start:.0f} s on {platform.machine()} with "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; 1-minute load average "
        f"{load} at the start, {_load()} at the end. Both cores search breadth first without "
        "reductions and found the same distinct states, transitions, depth and verdict "
        "(checked); TLC (1 worker) checked the spec emitted for the same System and found the "
        "same distinct-state count (checked). Times are wall clock, CPU seconds of this process "
        "in parentheses: on a shared machine the CPU time is the steadier measure.",
        "",
        *rows,
        "",
        *cover,
        "",
    ])
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
