"""Explorer against TLC on the benchmark family, side by side in one run.

    python bench/run.py                      # the whole family, writes bench/RESULTS.md
    python bench/run.py --quick -o /tmp/r.md # the small members only

For every member: the explorer with reductions (the default) and without, then TLC on the spec
checker/engines/tla.py emits for the same System, with 1 and 2 workers. Every engine must reach the same
verdict, and TLC's distinct-state count must equal the unreduced explorer's (same state graph by
construction); the run stops with an error otherwise. Times are wall clock to the verdict: for
the explorer, compiling and searching in this process; for TLC, emitting the spec, starting the
JVM, parsing and checking (TLC's own "Finished in" time, which leaves out the JVM start and the
parse, is shown as well).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.checker.engines.tlc import run_module, tla2tools_jar  # noqa: E402
from barrierproof.checker.engines.tla import emit_system  # noqa: E402
from barrierproof.model.semantics import compile_systems  # noqa: E402

from family import CLUSTER, FAMILY, PIPELINE  # noqa: E402


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def measure(protocol, params: dict, workers=(1, 2)) -> dict:
    kernel = protocol.build()
    row = {"name": protocol.name, "params": params}
    reduced, row["t_reduced"] = _timed(lambda: check_kernel(kernel, params, Options()))
    full, row["t_full"] = _timed(lambda: check_kernel(kernel, params, Options(reduction=False)))
    row["verdict"] = full.label
    row["states_reduced"], row["states"] = reduced.states, full.states
    if reduced.label != full.label:
        raise SystemExit(f"{protocol.name} {params}: reduction changes the verdict")
    for w in workers:
        def tlc():
            distinct, generated, own = 0, 0, 0.0
            statuses = []
            for system in compile_systems(kernel, params):
                module = emit_system(system)
                run = run_module(module, workers=w)
                statuses.append(run.status)
                distinct += run.distinct
                generated += run.generated
                own += run.tlc_seconds or 0.0
            return statuses, distinct, generated, own
        (statuses, distinct, generated, own), seconds = _timed(tlc)
        verdict = "verified" if all(s == "ok" for s in statuses) else f"tlc:{statuses}"
        if verdict != full.label or distinct != full.states:
            raise SystemExit(f"{protocol.name} {params}: TLC ({w} workers) says {verdict} with "
                             f"{distinct} states, the explorer {full.label} with {full.states}")
        row[f"t_tlc{w}"], row[f"own_tlc{w}"], row[f"gen_tlc{w}"] = seconds, own, generated
    return row


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def table(rows: list[dict], workers) -> list[str]:
    head = ["member", "states", "reduced", "explorer (reduced) s", "explorer (full) s",
            "explorer full states/s"]
    for w in workers:
        head += [f"TLC {w}w s", f"TLC {w}w own s", f"TLC {w}w states/s"]
    head += [f"TLC {w}w / explorer time" for w in workers]
    head += ["explorer full / TLC 1w rate"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        rate_full = r["states"] / r["t_full"]
        cells = [f"{r['name']}({_fmt_params(r['params'])})", f"{r['states']:,}",
                 f"{r['states_reduced']:,}", f"{r['t_reduced']:.3f}", f"{r['t_full']:.3f}",
                 f"{rate_full:,.0f}"]
        for w in workers:
            cells += [f"{r[f't_tlc{w}']:.2f}", f"{r[f'own_tlc{w}']:.1f}",
                      f"{r['states'] / r[f't_tlc{w}']:,.0f}"]
        cells += [f"{r[f't_tlc{w}'] / r['t_reduced']:,.1f}x" for w in workers]
        cells += [f"{rate_full / (r['states'] / r['t_tlc1']):.1f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--quick", action="store_true", help="the smaller members only")
    args = parser.parse_args(argv)
    workers = (1, 2)
    members = FAMILY if not args.quick else PIPELINE[:4] + CLUSTER[:2]
    load_start = os.getloadavg()[0]
    rows = []
    for protocol, params in members:
        row = measure(protocol, params, workers)
        rows.append(row)
        print(f"{row['name']}({_fmt_params(params)}): {row['states']:,} states; explorer "
              f"{row['t_reduced']:.3f}s reduced, {row['t_full']:.3f}s full; TLC "
              + ", ".join(f"{row[f't_tlc{w}']:.2f}s ({w}w)" for w in workers), flush=True)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    java = java.splitlines()[0] if java else "java"
    command = "python bench/run.py" + (" --quick" if args.quick else "")
    out = ["# Explorer against TLC", "",
           f"Produced by `{command}` (bench/run.py, family in bench/family.py) in one run on "
           f"{platform.machine()} with {os.cpu_count()} CPUs, Python {platform.python_version()}, "
           f"{java}, TLC from {os.path.basename(os.path.dirname(tla2tools_jar()))}"
           f"/tla2tools.jar. Every member is `verified` by every engine; TLC's distinct-state "
           f"count equals the unreduced explorer's on every member (checked by the run).", "",
           "Columns: `states` distinct states without reduction (explorer and TLC: equal), "
           "`reduced` with the explorer's reductions (symmetry, partial-order); times are wall clock to the "
           "verdict (TLC: emit + JVM start + parse + check; `own` is TLC's \"Finished in\", "
           "whole seconds above 1 s); rates are distinct states per wall-clock second; "
           "`TLC / explorer time` compares TLC with the explorer as it runs by default "
           "(reductions on).", "",
           f"Machine load (1-minute load average) at the start: {load_start:.1f}, at the end: "
           f"{os.getloadavg()[0]:.1f}; other jobs shared the CPUs, so absolute times are "
           "inflated, most of all TLC's (several JVM threads), and no test re-measures them: "
           "the explorer-vs-TLC ratios a test does re-measure are bench/regenerate.py's "
           "(bench/PERF.md). tests/test_bench_figures.py re-measures the state counts of the "
           "members up to 10,000 states. See bench/README.md for what the figures say.", ""]
    out += table(rows, workers)
    out.append("")
    # bench/races.py keeps its section at the end of the file: carry it over.
    races_mark = "<!-- bench/races.py -->"
    old = open(args.output).read() if os.path.exists(args.output) else ""
    if races_mark in old:
        out += [races_mark + old.split(races_mark, 1)[1].rstrip("\n")]
    open(args.output, "w").write("\n".join(out) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
