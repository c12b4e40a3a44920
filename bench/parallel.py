"""The multi-process explorer (checker/engines/mproc.py) against the one-process compiled core
on CUTLASS's pipeline_tma_async family, and TLC's distributed mode on localhost workers against
one TLC process, in one run. Writes bench/PARALLEL.md.

    python bench/parallel.py            # about 2 minutes on 2 shared CPUs
    python bench/parallel.py --no-tlc   # the explorer rows only (about 20 s)

Every search is breadth first without reductions and must find the same distinct states,
transitions, depth and verdict as the one-process core (checked); TLC's runs the same
distinct-state count (checked). Wall and CPU seconds (this process and its children, so the
workers' CPU is counted) are given with the 1-minute load average before and after each row: on
a machine shared with other work the wall-clock speedup is bounded by the cores that are free,
so the speedup on free cores is given too: the one process's CPU seconds over the busiest
worker's plus the coordinator's (what the search would take with a core per worker).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from barrierproof.checker.engines import compiled, mproc  # noqa: E402
from barrierproof.checker.engines.explore import Limits, explore  # noqa: E402

from compiled_core import MEMBERS  # noqa: E402  (the same pipeline_tma_async members)
UNLIMITED = Limits(max_states=None, timeout=None)


def _load() -> float:
    return os.getloadavg()[0]


def _cpu(who=resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _timed(run):
    before, wall, cpu, children = _load(), time.perf_counter(), _cpu(), \
        _cpu(resource.RUSAGE_CHILDREN)
    result = run()
    return (result, time.perf_counter() - wall, _cpu() - cpu,
            _cpu(resource.RUSAGE_CHILDREN) - children, f"{before:.1f}-{_load():.1f}")


def explorer(workers: list[int]) -> list[str]:
    lines = ["| member | search | states | transitions | wall s | CPU s, all processes | "
             "CPU s, busiest | speedup, wall | speedup on free cores | load |",
             "| --- |" + " --- |" * 9]
    for row in MEMBERS:
        system = row.system(races=False)
        runs = [("1 process (compiled core)", None, lambda: explore(
            system, UNLIMITED, reduction=False, order="bfs", core="compiled"))]
        for n in workers:
            spent: list = []
            runs.append((f"{n} worker{'s' if n > 1 else ''}", spent,
                         lambda n=n, spent=spent: mproc.explore_parallel(
                             system, UNLIMITED, frozenset(), n, cpu=spent)))
        base = None
        for name, spent, run in runs:
            r, wall, own, children, load = _timed(run)
            # the time on free cores: the busiest worker's CPU and the coordinator's
            busiest = own if spent is None else own + max(spent)
            if base is None:
                base = (r, wall, busiest)
                assert compiled.NOTE in r.notes, "the compiled core did not run"
            else:
                assert any(n.startswith(mproc.NOTE.split("{n}")[0]) for n in r.notes)
            same = (r.status, r.states, r.transitions, r.depth)
            want = (base[0].status, base[0].states, base[0].transitions, base[0].depth)
            if same != want:
                raise SystemExit(f"{row.label} {name}: {same}, one process {want}")
            lines.append(f"| {row.label} | {name} | {r.states:,} | {r.transitions:,} | "
                         f"{wall:.2f} | {own + children:.2f} | {busiest:.2f} | "
                         f"{base[1] / wall:.2f}x | {base[2] / busiest:.2f}x | {load} |")
            print(lines[-1], flush=True)
    return lines


def tlc(distributed: list[int]) -> list[str]:
    """One TLC process (1 worker thread) and TLC's distributed mode (a server and K localhost
    worker JVMs of one thread each) on the smaller member."""
    from barrierproof.checker.engines.tla import emit_system
    from barrierproof.checker.engines.tlc import available, run_module
    if not available():
        return ["TLC is not installed here: its rows were not run."]
    row = MEMBERS[0]
    system = row.system(races=False)
    module = emit_system(system)
    lines = ["| member | TLC | distinct states | s (cpu s) | distinct states/s | speedup over "
             "1 process | load |", "| --- |" + " --- |" * 6]
    base = None
    for k in [0] + distributed:
        name = "1 process, 1 worker thread" if k == 0 else \
            f"distributed: server + {k} localhost worker{'s' if k > 1 else ''}"
        run, wall, own, children, load = _timed(
            lambda k=k: run_module(module, timeout=900, distributed=k))
        cpu = own + children
        states = getattr(run, "distinct", None)
        if run.status != "ok":
            lines.append(f"| {row.label} | {name} | {run.status} | {wall:.1f} ({cpu:.1f}) | "
                         f"- | - | {load} |")
            continue
        base = base or wall
        lines.append(f"| {row.label} | {name} | {states:,} | {wall:.1f} ({cpu:.1f}) | "
                     f"{states / wall:,.0f} | {base / wall:.2f}x | {load} |")
        print(lines[-1], flush=True)
    return lines


PROSE = """\
## What is shared, what crosses between workers, and 16+ cores

Each worker owns the states whose 64-bit hash falls in its partition (low 32 bits modulo the
workers; its visited set's slots use the high 32): the visited set, the breadth-first tree and
the frontier are each split N ways and never shared. A level is one round: every worker expands
its frontier on the compiled core's rules, sends each successor to its owner over a pipe (the
packed state, 2 bytes a field here, plus 28 bytes of parent rank, move index, action, parent id
and hash), and stores what it received. A direct-mapped cache of the successors a worker sent
drops the repeats it generates itself (the diamonds of an interleaving, most of the
transitions); a state whose parents lie in two partitions is still sent by both, so the records
per state grow with N, toward the number of distinct parent partitions of a state (at most its
in-degree). The only shared memory is the rank array, 8 bytes per transition of the level
before, in which each parent writes its number of moves; the coordinator turns it into prefix
sums (one linear pass) so that every owner ranks its new states in the order the one-process
search queues them. That is what makes the verdict, the counts, the depth and the
counterexample exactly that search's, not a tie-break argued.

What divides by N: the expansion (steps, packing, hashing), the visited set and its memory
(each partition holds 1/N of the states, so 16 workers hold 16 times the states before a memory
limit, where the machine has the memory). What does not: the records (written, piped, merged:
a fixed cost per record, the `1 worker` row's CPU over the one process's), the cross-partition
repeats above, the coordinator's prefix pass (about a nanosecond per transition) and the
barrier per level (a round of small messages, about a millisecond). So N free cores give at
most N divided by the `2 workers` row's total CPU over the one process's, less as the repeats
grow; protocols whose levels hold a few hundred states (long, narrow state spaces) gain little,
those of 10^5-10^7 states per level, the ones that need the cores, amortize the barrier. On this
2-core machine shared with other work the gain is small, and the wall-clock rows show what the
other work left. A violation stops the search at the end of the level it is found in, as in one
process; the counterexample is rebuilt from the trees the workers hand back (8 bytes per state,
once). Past one machine TLC's distributed mode is the engine (`--engine tlc --distributed K`);
its rows above measure it on localhost workers against one TLC process.
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-tlc", action="store_true", help="the explorer rows only")
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "PARALLEL.md"))
    args = ap.parse_args()
    if mproc._mproc is None or not compiled.available():
        raise SystemExit("the compiled extensions are not built (pip install needs a C compiler)")
    start, load = time.time(), _load()
    rows = explorer([1, 2])
    tlc_rows = ["Not run (--no-tlc)."] if args.no_tlc else tlc([1, 2])
    command = "python bench/parallel.py" + (" --no-tlc" if args.no_tlc else "")
    text = "\n".join([
        "# The explorer on every core",
        "",
        f"Produced by `{command}` in {time.time() - start:.0f} s on {platform.machine()} with "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; 1-minute load average "
        f"{load:.1f} at the start, {_load():.1f} at the end (each row gives its own, before and "
        "after). Every search is breadth first without reductions and found the same distinct "
        "states, transitions, depth and verdict as the one-process compiled core (checked). "
        "CPU seconds count this process and its workers (TLC's: its JVMs). `1 worker` is the "
        "parallel engine on one process (its overhead: the records and the level barrier). "
        "The wall-clock speedup is what this machine gave with its other work running; the "
        "speedup on free cores divides the one process's CPU seconds by the busiest worker's "
        "plus the coordinator's, the time with a free core per worker.",
        "",
        "    barrierproof check examples/cutlass.py::pipeline_tma_async --no-reduction "
        "--workers 2 \\",
        "        --param stages=3 --param consumers=6 --param steps=8",
        "",
        *rows,
        "",
        "## TLC's distributed mode on localhost workers",
        "",
        *tlc_rows,
        "",
        PROSE,
    ])
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
