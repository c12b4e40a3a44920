"""Where `barrierproof prove` spends its time, and Houdini's two ways of asking Z3, side by side.

    python bench/prove_speed.py --out bench/PROVE_SPEED.md          # every protocol below
    python bench/prove_speed.py --only hopper_matmul_any_k          # some rows, printed only

Each protocol is proved twice, each time in a fresh process, as `barrierproof prove REF
--timeout T --no-cache` (--ignore BP200,BP201 where a row says so): once with Houdini's
consecution asked as one query over every transition (`whole`, the way it was asked before) and
once transition by transition (`transitions`, the default: one incremental solver per
transition, asked only about the candidates the transition writes, re-asked only when a
candidate of its last unsat core is dropped; checker/symbolic/invariants.py). The `whole` runs
get --old-timeout (default 60 s) so the table is produced in minutes; a row that did not finish
says so (`unknown (> T s)`). The time of each phase of the `transitions` run is measured by
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
    from barrierproof.checker.symbolic import invariants, prove
    from barrierproof.cli import main as cli
    invariants.CONSECUTION = consecution
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
    with contextlib.redirect_stdout(out):
        cli(["prove", os.path.join(ROOT, ref.split("::")[0]) + "::" + ref.split("::")[1],
             "--timeout", f"{timeout:g}", "--no-cache", "--format", "json", *extra])
    seconds = time.perf_counter() - t0
    (report,) = json.loads(out.getvalue())
    verdict = report["verdict"]
    why = "" if verdict == "proved" else (report.get("coverage") or "").split("\n")[0]
    return dict(ref=ref, consecution=consecution, verdict=verdict, seconds=seconds,
                timeout=timeout, why=why, **spent)


def measure(ref: str, extra: list, consecution: str, timeout: float) -> dict:
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(run_one, ((ref, extra, consecution, timeout),))


def shown(row: dict) -> str:
    if row["verdict"] == "proved":
        return f"proved {row['seconds']:.1f}s"
    if row["verdict"] == "unknown" and row["seconds"] >= row["timeout"]:
        return f"unknown (> {row['timeout']:g} s)"
    return f"{row['verdict']} {row['seconds']:.1f}s"


def report(rows: list[tuple[dict, dict]], command: str) -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    import z3
    lines = [
        BEGIN,
        "## Prover speed: Houdini transition by transition",
        "",
        f"Produced by `{command}` at the repository root on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, z3 "
        f"{z3.get_version_string()}; load average at the end: {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}. `whole`: consecution as one query over every transition (before); "
        "`transitions`: one incremental solver per transition (now). Phases of the "
        "`transitions` run: sampling, guessing candidates, Houdini (Z3), the rest (tracing, "
        "rewrites, classes, static order search).",
        "",
        "| protocol | whole | transitions | sample | guess | houdini | rest | why not proved |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for old, new in rows:
        rest = new["seconds"] - sum(new[p] for p in PHASES)
        why = new["why"].replace("|", "\\|")
        lines.append(f"| {new['ref']} | {shown(old)} | {shown(new)} | {new['sample']:.1f}s | "
                     f"{new['guess']:.1f}s | {new['houdini']:.1f}s | {rest:.1f}s | {why} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="--timeout of the `transitions` runs (default 300)")
    parser.add_argument("--old-timeout", type=float, default=60.0,
                        help="--timeout of the `whole` runs (default 60)")
    parser.add_argument("--only", help="comma-separated protocol names (the part after ::)")
    parser.add_argument("--out", help="write the table into this markdown file")
    args = parser.parse_args(argv)
    chosen = [p for p in PROTOCOLS
              if not args.only or p[0].split("::")[1] in args.only.split(",")]
    rows = []
    for ref, extra in chosen:
        old = measure(ref, extra, "whole", args.old_timeout)
        new = measure(ref, extra, "transitions", args.timeout)
        print(f"{ref}: whole {shown(old)}; transitions {shown(new)} (sample {new['sample']:.1f}s,"
              f" guess {new['guess']:.1f}s, houdini {new['houdini']:.1f}s) {new['why'][:160]}",
              flush=True)
        rows.append((old, new))
    if args.out:
        command = "python bench/prove_speed.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:]))
        section = report(rows, command.strip())
        text = open(args.out).read() if os.path.exists(args.out) else \
            "# Prover speed\n\n"
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
        else:
            text += section
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
