"""Cost of race checking (BP200/BP201) on the benchmark family, written into bench/RESULTS.md.

    python bench/races.py                 # the whole family, best of 3; about a minute
    python bench/races.py --quick         # the smaller members only, to stdout

Each member of bench/family.py (`pipeline`, `cluster`) is checked in its `*_buffers` form, where
every TMA copy writes its slot and every consumer reads the slot before releasing it: once with
race checking (the default) and once without (`Options(races=False)`, the barrier protocol
alone). Times are wall clock to the verdict in this process (compile + search, reductions on as
by default), the best of `--repeat` runs; both runs must say `verified`, or the script stops.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from family import CLUSTER, PIPELINE, cluster_buffers, pipeline_buffers  # noqa: E402

from barrierproof.checker.check import Options, check_kernel  # noqa: E402

MARK = "<!-- bench/races.py -->"


def measure(protocol, params: dict, repeat: int) -> dict:
    kernel = protocol.build()
    row = {"name": protocol.name, "params": params}
    for key, races in (("on", True), ("off", False)):
        best = None
        for _ in range(repeat):
            start = time.perf_counter()
            v = check_kernel(kernel, params, Options(races=races))
            elapsed = time.perf_counter() - start
            best = elapsed if best is None else min(best, elapsed)
        if v.verdict != "verified":
            raise SystemExit(f"{protocol.name} {params}: {v.label} with races={races}")
        row[f"t_{key}"], row[f"states_{key}"] = best, v.states
    return row


def section(rows: list[dict], command: str, load: tuple[float, float]) -> list[str]:
    out = [MARK, "## Race checking (BP200/BP201)", "",
           f"Produced by `{command}` (bench/races.py) on {platform.machine()} with "
           f"{os.cpu_count()} CPUs, Python {platform.python_version()}; 1-minute load average "
           f"{load[0]:.1f} at the start, {load[1]:.1f} at the end. Each member in its `*_buffers` "
           "form (copies write the slot, consumers read it before the release), checked with "
           "and without race checking, reductions on; best of the runs, wall clock to the "
           "verdict. Every run is `verified` (checked).", "",
           "| member | states without races | states with races | without races s | "
           "with races s | ratio |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        out.append(f"| {r['name']}({params}) | {r['states_off']:,} | {r['states_on']:,} | "
                   f"{r['t_off']:.3f} | "
                   f"{r['t_on']:.3f} | {r['t_on'] / r['t_off']:.2f}x |")
    worst = max(r["t_on"] / r["t_off"] for r in rows)
    total_on = sum(r["t_on"] for r in rows)
    total_off = sum(r["t_off"] for r in rows)
    out += ["", f"Whole family: {total_off:.2f} s without, {total_on:.2f} s with race checking "
            f"({total_on / total_off:.2f}x); worst member {worst:.2f}x. The state counts differ "
            "because the reductions work on two programs: with race checking each step carries "
            "its memory accesses, which partial-order reduction and block symmetry take into "
            "account (docs/POR.md); without it they are dropped. The verdicts agree.", ""]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller members, print only")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("-o", "--output", default=os.path.join(HERE, "RESULTS.md"))
    args = parser.parse_args(argv)
    members = [(pipeline_buffers, p) for _, p in PIPELINE] + \
        [(cluster_buffers, p) for _, p in CLUSTER]
    if args.quick:
        members = members[:4] + members[len(PIPELINE):len(PIPELINE) + 2]
    load_start = os.getloadavg()[0]
    rows = []
    for protocol, params in members:
        row = measure(protocol, params, args.repeat)
        rows.append(row)
        print(f"{row['name']}({params}): {row['states_off']:,} / {row['states_on']:,} states, {row['t_off']:.3f}s "
              f"without, {row['t_on']:.3f}s with races", flush=True)
    command = "python bench/races.py" + (" --quick" if args.quick else "")
    text = "\n".join(section(rows, command, (load_start, os.getloadavg()[0])))
    if args.quick:
        print(text)
        return 0
    old = open(args.output).read() if os.path.exists(args.output) else ""
    kept = old.split(MARK)[0].rstrip("\n")
    open(args.output, "w").write((kept + "\n\n" if kept else "") + text)
    print(f"wrote the race-checking section of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
