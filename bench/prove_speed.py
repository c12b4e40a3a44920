"""Where `barrierproof prove` spends its time, and Houdini's two ways of asking Z3, side by side.

    python bench/prove_speed.py --out bench/PROVE_SPEED.md          # every protocol below
    python bench/prove_speed.py --only hopper_matmul_any_k          # some rows, printed only

Each protocol is proved twice, each time in a fresh process, as `barrierproof prove REF
--timeout T --no-cache` (--ignore BP200,BP201 where a row says so): once with Houdini's
consecution asked as one query over every transition (`whole`, the way it was asked before) and
once transition by transition (`transitions`, the default: one incremental solver per
transition, asked only about the candidates the transition writes, re-asked only when a
candidate of its last unsat core is dropped; checker/symbolic/houdini.py). The `whole` runs
get the same --timeout (the budget: Z3 units, static orders tried) but are stopped after
--old-timeout wall seconds (default 60) so the table is produced in minutes; a row stopped so
says it. The time of each phase of the `transitions` run is measured by
wrapping the prover's phase functions: sampling the class systems, guessing candidates, Houdini
(Z3), and the rest (tracing, rewrites, classes, the static order search). Seconds depend on the
machine and its load (printed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

BEGIN, END = "<!-- speed: bench/prove_speed.py -->", "<!-- /speed -->"
RACES_OFF = ["--ignore", "BP200,BP201"]
# (reference, extra CLI arguments): the protocols issue #12 names as slow, then proved ones of
# bench/SYMBOLIC.md's coverage table (their times must not regress).
PROTOCOLS = [
    ("examples/pallas/sizes.py::hopper_matmul_any_k", RACES_OFF),
    ("examples/races.py::multicast_ring_cluster_release", []),
    ("examples/patterns/cluster_stores.py::exchange_through_peer_smem", []),
    ("examples/patterns/blackwell_persistent.py::umma_persistent_gemm", []),
    ("examples/patterns/cutlass_pipelines.py::tma_multicast_2x1", []),
    ("examples/patterns/split_k.py::split_k_dsmem", []),
    ("examples/hopper_ring.py::prefetch_ring", []),
    ("examples/cutlass.py::pipeline_tma_async", []),
    ("examples/patterns/hopper_ws.py::hopper_ws_matmul", []),
    ("examples/patterns/ordered_sequence.py::ordered_sequence_3wg", []),
    ("examples/races.py::mailbox_ack_after_copy", []),
]
PHASES = ("sample", "guess", "houdini")


def run_one(job: tuple[str, list, str, float]) -> dict:
    """One proof in this (fresh, forked) process, with the phases timed."""
    ref, extra, consecution, timeout = job
    from barrierproof.checker.symbolic import houdini, prove
    from barrierproof.cli import main as cli
    houdini.CONSECUTION = consecution
    spent = {p: 0.0 for p in PHASES}
    for name in PHASES:
        inner = getattr(prove, name)

        def timed(*a, _inner=inner, _name=name, **k):
            t0 = time.perf_counter()
            try:
                return _inner(*a, **k)
            finally:
                spent[_name] += time.perf_counter() - t0
        setattr(prove, name, timed)
    out = io.StringIO()
    t0 = time.perf_counter()
    cpu0, units0 = time.process_time(), prove.z3_work()
    with contextlib.redirect_stdout(out):
        cli(["prove", os.path.join(ROOT, ref.split("::")[0]) + "::" + ref.split("::")[1],
             "--timeout", f"{timeout:g}", "--no-cache", "--format", "json", *extra])
    seconds = time.perf_counter() - t0
    cpu, units = time.process_time() - cpu0, prove.z3_work() - units0
    (report,) = json.loads(out.getvalue())
    verdict = report["verdict"]
    why = "" if verdict == "proved" else (report.get("coverage") or "").split("\n")[0]
    return dict(ref=ref, consecution=consecution, verdict=verdict, seconds=seconds,
                timeout=timeout, why=why, cpu=cpu, units=units, **spent)


def _child(job, queue) -> None:
    queue.put(run_one(job))


def measure(ref: str, extra: list, consecution: str, timeout: float,
            cap: float | None = None) -> dict:
    """One proof with `--timeout timeout` (the budget: Z3 units, orders tried, states), in a
    fresh process, stopped after `cap` wall seconds if given (a row `unfinished`)."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=((ref, extra, consecution, timeout), queue))
    child.start()
    try:
        return queue.get(timeout=cap)
    except Exception:                     # queue.Empty: the cap passed
        child.kill()
        return dict(ref=ref, consecution=consecution, verdict="unfinished", seconds=cap,
                    timeout=timeout, why="", cpu=float("nan"), units=float("nan"),
                    **{p: float("nan") for p in PHASES})
    finally:
        child.join(5)


def shown(row: dict) -> str:
    """Verdict, wall seconds, CPU seconds of the process and Z3's resource units (millions):
    the wall time depends on the machine's load, the units do not."""
    if row["verdict"] == "unfinished":
        return f"stopped after {row['seconds']:g} s (--timeout {row['timeout']:g})"
    work = f"{row['seconds']:.1f}s, CPU {row['cpu']:.1f}s, Z3 {row['units'] / 1e6:.1f}M"
    if row["verdict"] == "unknown" and row["seconds"] >= row["timeout"]:
        return f"unknown (> {row['timeout']:g} s; {work})"
    return f"{row['verdict']} ({work})"


def report(rows: list[tuple[dict, dict]], command: str, previous: str = "") -> str:
    """The section: the rows measured now, and those of `previous` (the section as it was)
    for protocols not measured now, with every command that produced a row."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    import z3
    lines_of = {}
    commands = []
    for line in previous.splitlines():
        if line.startswith("| examples/"):
            lines_of[line.split(" | ")[0][2:]] = line
        elif line.startswith("- `python bench/prove_speed.py"):
            commands.append(line)
    for old, new in rows:
        rest = new["seconds"] - sum(new[p] for p in PHASES)
        why = new["why"].replace("|", "\\|")
        lines_of[new["ref"]] = (
            f"| {new['ref']} | {shown(old)} | {shown(new)} | {new['sample']:.1f}s | "
            f"{new['guess']:.1f}s | {new['houdini']:.1f}s | {rest:.1f}s | {why} |")
    commands.append(f"- `{command}` (load average at the end: {load[0]:.2f} {load[1]:.2f} "
                    f"{load[2]:.2f})")
    order = [ref for ref, _ in PROTOCOLS]
    lines = [
        BEGIN,
        "## Prover speed: Houdini transition by transition",
        "",
        f"On {platform.machine()}, {os.cpu_count()} cores (shared), Python "
        f"{platform.python_version()}, z3 {z3.get_version_string()}. `whole`: consecution "
        "asked as one query over every transition (as before); `transitions`: one incremental "
        "solver per transition, candidates dropped around each counterexample (now). Phases "
        "of the `transitions` run: sampling, guessing candidates, Houdini (Z3), the rest "
        "(tracing, rewrites, classes, static order search).",
        "",
        "Each run: verdict (wall time, the process's CPU time, Z3's resource units in "
        "millions: the wall time depends on the machine's load, the units do not).",
        "",
        "| protocol | whole | transitions | sample | guess | houdini | rest | why not proved |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += [lines_of[ref] for ref in sorted(lines_of, key=lambda r: (
        order.index(r) if r in order else len(order), r))]
    lines += ["", "Produced by these runs, at the repository root:", ""]
    lines += list(dict.fromkeys(commands))
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="--timeout of the `transitions` runs (default 300)")
    parser.add_argument("--old-timeout", type=float, default=60.0,
                        help="stop the `whole` runs after this many wall seconds (default 60;"
                        " they get the same --timeout budget)")
    parser.add_argument("--only", help="comma-separated protocol names (the part after ::)")
    parser.add_argument("--out", help="write the table into this markdown file")
    args = parser.parse_args(argv)
    chosen = [p for p in PROTOCOLS
              if not args.only or p[0].split("::")[1] in args.only.split(",")]
    rows = []
    for ref, extra in chosen:
        old = measure(ref, extra, "whole", args.timeout, cap=args.old_timeout)
        new = measure(ref, extra, "transitions", args.timeout)
        print(f"{ref}: whole {shown(old)}; transitions {shown(new)} (sample {new['sample']:.1f}s,"
              f" guess {new['guess']:.1f}s, houdini {new['houdini']:.1f}s) {new['why'][:160]}",
              flush=True)
        rows.append((old, new))
    if args.out:
        command = "python bench/prove_speed.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:]))
        text = open(args.out).read() if os.path.exists(args.out) else \
            "# Prover speed\n\n"
        if BEGIN in text and END in text:
            previous = text[text.index(BEGIN):text.index(END)]
            section = report(rows, command.strip(), previous)
            text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
        else:
            text += report(rows, command.strip())
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
