"""The compiled exploration core against the Python explorer's raw search (and TLC) on CUTLASS's
pipeline_tma_async family, in one run; and which example systems the core accepts, with the
reasons for the others. Writes bench/COMPILED.md.

    python bench/compiled_core.py               # about 1-2 minutes on 2 shared CPUs
    python bench/compiled_core.py --tlc-big     # TLC on 3,6,8 too (about 2 minutes, 2.3 GB more)
    python bench/compiled_core.py --jax         # and JAX's kernels at K = 4096 (up to 60 s each)
    python bench/compiled_core.py --reduced     # only its section: the reduced searches of the
                                                # 2-CTA Blackwell matmul at 1024^3 (about 5 min)
    python bench/compiled_core.py --jax-only    # JAX's kernels alone (their section rewritten)

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
from barrierproof.checker.engines.por import OVERRUNS, depth_unkept  # noqa: E402
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
    head = (f"The compiled core accepts {accepted} of the {total} example systems (every "
            "distinct cluster behaviour of every example kernel, compiled with memory effects "
            "as `check` compiles them)")
    if not refused:
        return [head + "."]
    return [head + "; the Python explorer searches the others, for these reasons:", "",
            "| systems | refused for |", "| --- | --- |",
            *(f"| {n} | {why} |" for why, n in refused.most_common())]


JAX_K = 4096
JAX_TIMEOUT = 60.0
# the notes of a counterexample reported shortest without a confirming search (explore.py)
SETTLED = "shortest without a confirming search"


def jax_kernels(only: frozenset[str] = frozenset()) -> list[str]:
    """Every kernel of examples/pallas/jax_kernels.py at K = 4096 (the 2-CTA Blackwell matmul at
    4096^3) and JAX's 2-CTA Blackwell matmul at 1024^3 with 3 tiles per block, as `check`
    compiles them (memory effects included): the compiled core's breadth-first search without
    reductions, every System of a kernel within one limit of 60 s. A violation it finds is the
    shortest (every level is finished first), recomputed and replayed in Python. `only`: these
    kernels' rows alone (by function name)."""
    from barrierproof.model import pallas
    from jax_sizes import with_contraction
    kernels = os.path.join(ROOT, "examples", "pallas", "jax_kernels.py")
    lines = ["| kernel | expected (jax_kernels.py, its sizes) | compiled BFS verdict | distinct "
             "states | depth | counterexample steps | compile s (cpu) | search s (cpu) | "
             "verdict in <= 60 s | default search verdict | its s (cpu) | its verdict in <= "
             "60 s |", "| --- |" + " --- |" * 11]
    runs = []
    module = with_contraction(pallas.import_file(kernels), JAX_K, square=True)
    for name in list(module.EXPECT) + list(module.SLOW):
        if only and name not in only:
            continue
        built = pallas.load(getattr(module, name), name=name)
        for n, kernel in enumerate(built):
            label = name if len(built) == 1 else f"{name} (kernel {n + 1} of {len(built)})"
            if name == "blackwell_matmul_collective":
                label += f" at {JAX_K}^3"
            runs.append((label, {**module.EXPECT, **module.SLOW}[name], kernel))
    module = with_contraction(pallas.import_file(kernels), 1024, square=True)
    if not only or "blackwell_matmul_collective" in only:
        runs.append(("blackwell_matmul_collective at 1024^3, 3 tiles per block",
                     module.SLOW["blackwell_matmul_collective"],
                     pallas.load(module.blackwell_matmul_collective,
                                 name="blackwell_matmul_collective")[0]))
    for label, expect, kernel in runs:
        wall, cpu = time.perf_counter(), _cpu()
        systems = compile_systems(kernel)
        built_s, built_cpu = time.perf_counter() - wall, _cpu() - cpu
        wall, cpu = time.perf_counter(), _cpu()
        states = depth = 0
        verdict, steps = "verified", "-"
        for system in systems:
            left = JAX_TIMEOUT - (time.perf_counter() - wall)
            r = explore(system, Limits(max_states=None, timeout=max(left, 0.0)),
                        reduction=False, order="bfs", core="compiled")
            assert compiled.NOTE in r.notes, f"{label}: {r.notes}"
            states, depth = states + r.states, max(depth, r.depth)
            if r.status == "violation":
                verdict, steps = f"violation:{r.violation.code}", str(len(r.actions))
                break
            if r.status == "bounded":
                verdict = f"bounded (the {JAX_TIMEOUT:g} s limit, at depth {r.depth})"
                break
        seconds, cpu = time.perf_counter() - wall, _cpu() - cpu
        met = "yes" if not verdict.startswith("bounded") and seconds + built_s <= JAX_TIMEOUT \
            else "no"
        default, d_seconds, d_cpu = _default_search(systems)
        d_met = "yes" if not default.startswith("bounded") and \
            d_seconds + built_s <= JAX_TIMEOUT else "no"
        lines.append(f"| {label} | {expect} | {verdict} | {states:,} | {depth} | {steps} | "
                     f"{built_s:.1f} ({built_cpu:.1f}) | {seconds:.1f} ({cpu:.1f}) | {met} | "
                     f"{default} | {d_seconds:.1f} ({d_cpu:.1f}) | {d_met} |")
        print(lines[-1], flush=True)
    return lines


def _default_search(systems) -> tuple[str, float, float]:
    """The explorer as `check` runs it (its default reductions, depth first, the core it
    chooses) over every System within one limit of 60 s: its verdict, said `(shortest)` when
    the counterexample is confirmed shortest or needs no confirmation, and its wall and CPU s."""
    wall, cpu = time.perf_counter(), _cpu()
    verdict = "verified"
    for system in systems:
        left = JAX_TIMEOUT - (time.perf_counter() - wall)
        r = explore(system, Limits(max_states=None, timeout=max(left, 0.0)))
        if r.status == "violation":
            verdict = f"violation:{r.violation.code} ({len(r.actions)} steps, " + \
                ("a shorter one may exist)" if r.reason else "shortest)")
            break
        if r.status == "bounded":
            verdict = f"bounded ({r.reason})"
            break
    return verdict, time.perf_counter() - wall, _cpu() - cpu


REDUCED_MARK = "<!-- bench/compiled_core.py --reduced -->"
REDUCED_END = "<!-- end bench/compiled_core.py --reduced -->"
# The ignore sets of the reduced rows: none; the issue's; with the deadlock and exit rules too,
# so that nothing stops the breadth-first search before the end of the reduced graph.
REDUCED_IGNORES = [(), ("BP101", "BP102", "BP103"),
                   ("BP100", "BP101", "BP102", "BP103", "BP104", "BP105")]


def reduced_blackwell() -> list[str]:
    """JAX's 2-CTA Blackwell matmul at 1024^3, 3 tiles per block, with the explorer's default
    reductions (persistent sets and thread symmetry), breadth first within 60 s: on the
    compiled core (_por.c) and on the Python explorer, the counterexample confirmed shortest
    (or not) by the search without persistent sets in the time left, as explore.py does."""
    from barrierproof.model import pallas
    from jax_sizes import with_contraction
    kernels = os.path.join(ROOT, "examples", "pallas", "jax_kernels.py")
    module = with_contraction(pallas.import_file(kernels), 1024, square=True)
    system, = compile_systems(pallas.load(module.blackwell_matmul_collective,
                                          name="blackwell_matmul_collective")[0])
    start, load = time.time(), _load()
    lines = ["| core | ignored | verdict | distinct states | depth | counterexample steps | "
             "confirmed shortest | s (cpu) | cpu µs per state | verdict and search to the end "
             "in <= 60 s |",
             "| --- |" + " --- |" * 9]
    # (core, ignored, partial-order reduction): the last compiled row without it (thread
    # symmetry only) prices the persistent sets per state against the states they save
    # and with every rule ignored whose depth the persistent sets may put off (por.py
    # `depth_unkept`): the deadlocks and exit rules left need no confirming search
    kept_only = tuple(depth_unkept(system))
    # and with BP101 and BP102 left, which the sets then keep by counting arrivals
    # (por_overrun.py)
    overruns_left = tuple(code for code in kept_only if code not in OVERRUNS)
    runs = [("compiled", ignore, True) for ignore in REDUCED_IGNORES] + \
        [("compiled", kept_only, True), ("compiled", overruns_left, True),
         ("compiled", REDUCED_IGNORES[-1], False), ("python", REDUCED_IGNORES[0], True),
         ("python", REDUCED_IGNORES[-1], True)]
    for core, ignore, partial_order in runs:
        wall, cpu = time.perf_counter(), _cpu()
        r = explore(system, Limits(max_states=None, timeout=JAX_TIMEOUT), order="bfs",
                    core=core, ignore=frozenset(ignore), partial_order=partial_order)
        seconds, cpu = time.perf_counter() - wall, _cpu() - cpu
        if core == "compiled":
            assert any(n in r.notes for n in (compiled.POR_NOTE, compiled.SYMMETRY_NOTE,
                                              compiled.NOTE)), r.notes
        verdict = r.status + (f":{r.violation.code}" if r.violation else "")
        steps = str(len(r.actions)) if r.actions is not None else "-"
        if r.status == "violation":
            shortest = "no: " + r.reason if r.reason else \
                "yes, no confirming search needed" if any(
                    n.startswith(SETTLED) for n in r.notes) else "yes"
        else:
            shortest = "-" if r.status == "verified" else f"- ({r.reason})"
        met = "yes" if seconds <= JAX_TIMEOUT and (r.status == "verified" or (
            r.status == "violation" and not r.reason)) else "no"
        label = core if partial_order else f"{core}, thread symmetry only"
        lines.append(f"| {label} | {', '.join(ignore) or 'none'} | {verdict} | {r.states:,} | "
                     f"{r.depth} | {steps} | {shortest} | {seconds:.1f} ({cpu:.1f}) | "
                     f"{cpu / max(r.states, 1) * 1e6:.1f} | {met} |")
        print(lines[-1], flush=True)
    return [REDUCED_MARK,
            "## The 2-CTA Blackwell matmul at 1024^3 with the reductions",
            "",
            f"Produced by `python bench/compiled_core.py --reduced` in {time.time() - start:.0f} "
            f"s; 1-minute load average {load} at the start, {_load()} at the end. JAX's 2-CTA "
            "Blackwell matmul at 1024^3 with 3 tiles per block (as in the section above), the "
            "explorer's default reductions (partial-order reduction by persistent sets, thread "
            f"symmetry), breadth first, limit {JAX_TIMEOUT:g} s per row. The compiled core runs "
            "por.py's chooser stated again in C (checker/engines/_por.c over flatten_por.py's "
            "tables) and the thread symmetry (tests/test_compiled_por.py and "
            "test_compiled_symmetry.py compare it with the Python search state for state). A "
            "counterexample of the reduced graph is confirmed shortest by the search without "
            "the persistent sets (thread symmetry only, also compiled), bounded by its depth, "
            "in half the time left; `no` says where that search stopped. Where every rule not "
            "ignored is one whose shortest violation the persistent sets keep at its depth "
            "(deadlocks and the rules judged at exit; docs/POR.md, \"Shortest counterexamples "
            "without the confirming search\"), the reduced search's counterexample is the "
            "shortest as it stands: `yes, no confirming search needed`. BP121, BP146 "
            "and the races are not such rules (docs/POR.md says why): in the first two rows "
            "the explorer first searches them alone, every other rule ignored, to the end in "
            "half the time left (first on budgets of states it shares with the confirming "
            "search, docs/POR.md \"Budgets\"); met nowhere, they cannot shorten the "
            "counterexample (docs/POR.md, \"Rules with no violation anywhere\"), and it "
            "stands, or, with BP101 and BP102 left, the search runs again with sets that count "
            "arrivals, in three quarters of the time left; stopped by that limit, no confirming "
            "search runs and the verdict states how short a counterexample can still be (`none "
            "of fewer than N steps`: every level above N was searched, docs/POR.md, \"What a "
            "search stopped by a limit still shows\"); else the confirming search runs. BP101 and BP102 are where the sets count the "
            "arrivals each actor outside them can still make (docs/POR.md, \"Keeping BP101 "
            "and BP102 at their depth\"), which the explorer does when they are the only "
            "rules left that the sets would otherwise put off (the fifth row): larger sets, "
            "so more states, and a dearer choice per state. Times wall clock, CPU "
            "seconds of this process in parentheses; CPU µs per state counts the whole row "
            "(with a confirming search, its states too are spent but not counted).",
            "", *lines, "", REDUCED_END]


def _kept_reduced(path: str) -> list[str]:
    """The --reduced section of the file as it is (kept by a run without --reduced)."""
    try:
        with open(path) as f:
            old = f.read()
    except OSError:
        return []
    if REDUCED_MARK not in old or REDUCED_END not in old:
        return []
    return old[old.index(REDUCED_MARK):old.index(REDUCED_END) + len(REDUCED_END)].splitlines()
def jax_section(rows: list[str], produced: str = "") -> list[str]:
    """bench/COMPILED.md's section of JAX's kernels: what was run, then `rows`."""
    return [f"## JAX's kernels at K = {JAX_K}, and the 2-CTA Blackwell matmul at 1024^3",
            "",
            produced + "examples/pallas/jax_kernels.py with its contraction (key/value) length "
            f"set to {JAX_K} (bench/jax_sizes.py; the 2-CTA Blackwell matmul square, {JAX_K}^3), "
            "and the 2-CTA Blackwell matmul at 1024^3 with its default 3 tiles per block "
            "(bench/perf.py's), compiled as `check` compiles them (memory effects included). "
            "Each: the compiled core's breadth-first search without reductions over every "
            f"System of the kernel, within one limit of {JAX_TIMEOUT:g} s for the search "
            "(compiling the Systems, timed apart, is Python's and not limited). A violation found "
            "is the shortest counterexample (every level is finished first), confirmed by the "
            "search itself; it was recomputed and replayed in Python. The column after counts "
            "compile and search together, wall clock. The last three: the explorer as `check` "
            "runs it (its default reductions, depth first, the core it chooses), over every "
            f"System within one limit of {JAX_TIMEOUT:g} s; `shortest` where its counterexample "
            "is confirmed shortest or needs no confirmation (docs/POR.md), and its last column "
            "counts compile and search together.",
            "", *rows, ""]


def jax_only(path: str) -> None:
    """Run JAX's kernels alone and replace that section of an existing bench/COMPILED.md."""
    start, load = time.time(), _load()
    rows = jax_kernels()
    produced = (f"This section alone was produced by `python bench/compiled_core.py --jax-only` "
                f"in {time.time() - start:.0f} s on {platform.machine()} with {os.cpu_count()} "
                f"CPUs, Python {platform.python_version()}; 1-minute load average {load} at the "
                f"start, {_load()} at the end. ")
    with open(path) as f:
        text = f.read()
    head = text.split("## JAX's kernels")[0]
    kept = _kept_reduced(path)
    with open(path, "w") as f:
        f.write(head + "\n".join(jax_section(rows, produced)
                                 + (["", *kept, ""] if kept else [])))
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc-big", action="store_true", help="TLC on the 1M-state member too")
    ap.add_argument("--jax", action="store_true", help="JAX's kernels at K = 4096 too")
    ap.add_argument("--reduced", action="store_true",
                    help="only the reduced searches of the 2-CTA Blackwell matmul at 1024^3 "
                         "(its section of the file; the rest is kept)")
    ap.add_argument("--jax-only", action="store_true",
                    help="JAX's kernels alone: rewrite only their section of the output")
    ap.add_argument("--only", help="with --jax-only: comma-separated kernel names; print their "
                    "rows, write nothing")
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "COMPILED.md"))
    args = ap.parse_args()
    if not compiled.available():
        raise SystemExit("the compiled core is not built (pip install needs a C compiler)")
    if args.reduced:
        section = reduced_blackwell()
        kept = _kept_reduced(args.output)
        with open(args.output) as f:
            text = f.read()
        if kept:
            text = text.replace("\n".join(kept), "\n".join(section))
        else:
            text = text.rstrip("\n") + "\n\n" + "\n".join(section) + "\n"
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}")
        return
    if args.jax_only and args.only:
        jax_kernels(frozenset(args.only.split(",")))
        return
    if args.jax_only:
        return jax_only(args.output)
    start, load = time.time(), _load()
    rows = speed(args.tlc_big)
    cover = coverage()
    jax = jax_kernels() if args.jax else []
    command = "python bench/compiled_core.py" + (" --tlc-big" if args.tlc_big else "") + \
        (" --jax" if args.jax else "")
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
        *(jax_section(jax) if jax else []),
        *(["", *_kept_reduced(args.output), ""] if _kept_reduced(args.output) else []),
    ])
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
