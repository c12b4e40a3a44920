"""The bench figures that stay true: states and CPU time per state of each reduction, what the
partial-order reduction costs per state against the states it saves, and the explorer against
TLC, measured in one run with the machine's load and CPU count recorded beside them.

    python3 bench/regenerate.py            # every row: about 55 CPU s (TLC most of it)
    python3 bench/regenerate.py --quick    # the rows tests/test_bench_figures.py re-measures

It writes bench/FIGURES.json (the record) and its section of bench/PERF.md (rendered from the
record). tests/test_bench_figures.py re-runs the quick rows: state counts must equal the
record's exactly; times are compared only as ratios taken in one run (TLC's CPU time over the
explorer's), with a tolerant bound, never as seconds. Times are CPU seconds of the process
(time.process_time; TLC: its JVM's, from the children's rusage): on a shared machine they drift
far less than wall clock, yet the load still inflates them, so compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from barrierproof.checker.engines.explore import Limits, explore  # noqa: E402
from barrierproof.loader import import_file  # noqa: E402
from barrierproof.model.semantics import System  # noqa: E402

RECORD = os.path.join(HERE, "FIGURES.json")
PERF = os.path.join(HERE, "PERF.md")
MARK, END = "<!-- bench/regenerate.py -->", "<!-- end bench/regenerate.py -->"
COMMAND = "python3 bench/regenerate.py"

# The explorer's three settings: no reduction (TLC's state graph), symmetry only, and every
# reduction (the default: symmetry and partial-order reduction). All three on the Python
# explorer, so the costs per state compare like with like; the compiled core's search without
# reductions is measured against it in bench/COMPILED.md (bench/compiled_core.py).
SETTINGS = [("none", dict(reduction=False, core="python")), ("symmetry", dict(partial_order=False)),
            ("default", dict())]


@dataclass(frozen=True)
class Row:
    module: str          # a module of examples/ or bench/
    protocol: str
    params: tuple        # ((name, value), ...)
    quick: bool = False  # re-measured by the test
    tlc: bool = False    # TLC checks it too

    @property
    def label(self) -> str:
        return f"{self.protocol}({', '.join(f'{k}={v}' for k, v in self.params)})"

    def system(self, races: bool = True) -> System:
        # by its path, under a private name: examples/cutlass.py must not become `cutlass`
        # (the CuTe DSL's package) for the rest of the process
        folder = next(d for d in (os.path.join(ROOT, "examples"), HERE)
                      if os.path.exists(os.path.join(d, self.module + ".py")))
        module = import_file(os.path.join(folder, self.module + ".py"))
        return System(getattr(module, self.protocol).build(), dict(self.params), races=races)


def _row(module, protocol, quick=False, tlc=False, **params):
    return Row(module, protocol, tuple(params.items()), quick, tlc)


ROWS = [
    _row("family", "pipeline", quick=True, stages=2, consumers=2, steps=4),
    _row("family", "cluster", quick=True, tlc=True, blocks=2, consumers=1, steps=4),
    _row("cutlass", "pipeline_tma_async", quick=True, stages=2, consumers=2, steps=4),
    _row("persistent", "persistent_multicast_pair", quick=True, tiles=1, steps=2),
    _row("family", "cluster", blocks=2, consumers=2, steps=2),
    _row("cutlass", "pipeline_tma_async", tlc=True, stages=3, consumers=5, steps=8),
    _row("persistent", "persistent_multicast_pair", tlc=True, tiles=3, steps=3),
]


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _notes(result) -> list[str]:
    """The search's notes, with the partial-order reduction's switch-off among them (the
    verdict leaves that out: it is a matter of speed, and this table is about speed)."""
    off = [f"partial-order reduction switched off: {result.partial_order_off}"] \
        if result.partial_order_off else []
    return list(result.notes) + off


def _explore(system: System, repeat: int, **kw) -> tuple:
    """The search and its least CPU time over `repeat` runs."""
    best = None
    for _ in range(repeat):
        start = time.process_time()
        result = explore(system, Limits(max_states=None, timeout=300), **kw)
        seconds = time.process_time() - start
        best = seconds if best is None else min(best, seconds)
    return result, best


def tlc_available() -> bool:
    from barrierproof.checker.engines import tlc
    return tlc.available()


def run_tlc(row: Row) -> dict:
    """TLC (one worker, the emitted spec of the same System) on the row: distinct states, wall
    and CPU seconds (JVM start, parsing and checking)."""
    from barrierproof.checker.engines.tla import emit_system
    from barrierproof.checker.engines.tlc import run_module
    module = emit_system(row.system(races=False))
    cpu = _cpu_children()
    run = run_module(module, timeout=300)
    return {"status": run.status, "states": run.distinct, "wall": round(run.seconds, 3),
            "cpu": round(_cpu_children() - cpu, 3)}


def measure(row: Row, with_tlc: bool = True, timed: bool = True) -> dict:
    """One row: per explorer setting its verdict, distinct states and CPU seconds; TLC's run
    when the row has one. Every setting and TLC must agree (checked). `timed=False`: one run
    per setting, for its counts."""
    out = {"label": row.label, "quick": row.quick, "settings": {}}
    for name, kw in SETTINGS:
        system = row.system()
        result, cpu = _explore(system, 1, **kw)
        if timed and result.states < 20_000:
            # small searches are timed over a few runs: their least CPU time is the steadier
            cpu = min(cpu, _explore(system, 2, **kw)[1])
        out["settings"][name] = {"status": result.status, "states": result.states,
                                 "cpu": round(cpu, 4), "notes": _notes(result)}
    statuses = {s["status"] for s in out["settings"].values()}
    if len(statuses) != 1:
        raise SystemExit(f"{row.label}: the explorer's settings disagree: {statuses}")
    if row.tlc and with_tlc:
        tlc = run_tlc(row)
        none = out["settings"]["none"]
        if tlc["status"] != "ok" or tlc["states"] != none["states"]:
            raise SystemExit(f"{row.label}: TLC says {tlc['status']} with {tlc['states']} "
                             f"states, the unreduced explorer {none['states']}")
        out["tlc"] = tlc
    return out


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def regenerate(rows: list[Row], with_tlc: bool = True) -> dict:
    load_start, start = _load(), time.time()
    measured = [measure(r, with_tlc) for r in rows]
    java = ""
    if with_tlc and any(r.tlc for r in rows):
        out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
        java = out.splitlines()[0] if out else "java"
    return {"command": COMMAND, "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "java": java,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)),
            "seconds": round(time.time() - start, 1),
            "load_start": load_start, "load_end": _load(), "rows": measured}


# -- ratios, as the record and the test take them ------------------------------------------

def per_state_us(setting: dict) -> float:
    return 1e6 * setting["cpu"] / max(setting["states"], 1)


def por_cost(row: dict) -> float:
    """CPU time per state with partial-order reduction over without it (symmetry on in both)."""
    s = row["settings"]
    return per_state_us(s["default"]) / max(per_state_us(s["symmetry"]), 1e-9)


def por_saving(row: dict) -> float:
    """States without partial-order reduction over states with it."""
    s = row["settings"]
    return s["symmetry"]["states"] / max(s["default"]["states"], 1)


def por_speedup(row: dict) -> float:
    """CPU time without partial-order reduction over with it: above 1 where it pays."""
    s = row["settings"]
    return s["symmetry"]["cpu"] / max(s["default"]["cpu"], 1e-9)


def tlc_ratio(row: dict) -> float:
    """TLC's CPU seconds over the unreduced explorer's, on the same state graph."""
    return row["tlc"]["cpu"] / max(row["settings"]["none"]["cpu"], 1e-9)


# -- the PERF.md section ------------------------------------------------------------------

def render(record: dict) -> str:
    load = lambda xs: "/".join(f"{x:.1f}" for x in xs) or "unknown"   # noqa: E731
    lines = [
        MARK,
        "## States, CPU time per state, and the partial-order reduction's cost against its "
        "saving",
        "",
        f"Produced by `{record['command']}` on {record['date']} in {record['seconds']:.0f} s "
        f"on {record['machine']} with {record['cpus']} CPUs, Python {record['python']}"
        + (f", {record['java']}" if record["java"] else "") +
        f"; load average (1/5/15 min) {load(record['load_start'])} at the start, "
        f"{load(record['load_end'])} at the end. Times are CPU seconds (the least of 3 runs "
        "below 20,000 states); the load inflates them, so compare ratios within the table. "
        "tests/test_bench_figures.py re-measures the rows marked *: their state counts must "
        "equal these, and TLC's CPU time over the explorer's must stay within a factor of "
        "the recorded ratio.",
        "",
        "POR's cost per state is the default's µs per state over symmetry's; the states it saves, "
        "symmetry's states over the default's; it pays where the CPU ratio (without / with) is "
        "above 1. The explorer switches it off by itself only where its persistent sets leave "
        "no step out on a fixed sample of 1,000 states (checker/engines/por.py, "
        "`leaves_nothing_out`; the note column says so): a count, so the same on every machine, "
        "and sound whatever it decides. It does not switch off by time: a reduction's saving "
        "compounds with depth, and a sample's CPU times would make the state counts depend on "
        "the machine's load.",
        "",
        "| member | states none / symmetry / default | µs per state none / symmetry / default "
        "| POR: cost per state | POR: states saved | POR: CPU without / with | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in record["rows"]:
        s = row["settings"]
        notes = "; ".join(n for n in s["default"]["notes"]) or "-"
        lines.append(
            f"| {row['label']}{' *' if row['quick'] else ''} | "
            + " / ".join(f"{s[n]['states']:,}" for n, _ in SETTINGS) + " | "
            + " / ".join(f"{per_state_us(s[n]):.1f}" for n, _ in SETTINGS) + " | "
            f"{por_cost(row):.2f}x | {por_saving(row):.2f}x | {por_speedup(row):.2f}x | "
            f"{notes} |")
    tlc_rows = [r for r in record["rows"] if "tlc" in r]
    if tlc_rows:
        lines += ["", "The explorer without reductions against TLC (1 worker, the emitted spec of "
                  "the same System, the same distinct states: checked), in the same run:", "",
                  "| member | states | explorer none CPU s | TLC CPU s (wall s) | TLC / explorer "
                  "CPU | explorer default CPU s |", "| --- | --- | --- | --- | --- | --- |"]
        for row in tlc_rows:
            s, t = row["settings"], row["tlc"]
            lines.append(f"| {row['label']}{' *' if row['quick'] else ''} | "
                         f"{s['none']['states']:,} | {s['none']['cpu']:.3f} | "
                         f"{t['cpu']:.1f} ({t['wall']:.1f}) | {tlc_ratio(row):,.0f}x | "
                         f"{s['default']['cpu']:.3f} |")
    lines.append(END)
    return "\n".join(lines)


def write_section(section: str, path: str = PERF) -> None:
    old = open(path).read() if os.path.exists(path) else ""
    if MARK in old:
        head, rest = old.split(MARK, 1)
        tail = rest.split(END, 1)[1] if END in rest else ""
        text = head + section + tail
    else:
        text = old.rstrip("\n") + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="the quick rows only, printed (the record keeps every row)")
    ap.add_argument("--no-tlc", action="store_true", help="the explorer's figures only")
    ap.add_argument("--record", default=RECORD)
    ap.add_argument("--perf", default=PERF)
    args = ap.parse_args()
    rows = [r for r in ROWS if r.quick or not args.quick]
    record = regenerate(rows, with_tlc=not args.no_tlc and tlc_available())
    print(render(record))
    if args.quick:
        return
    with open(args.record, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    write_section(render(record), args.perf)
    print(f"wrote {args.record} and {args.perf}")


if __name__ == "__main__":
    main()
