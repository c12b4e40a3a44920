"""Every kernel of examples/pallas/jax_kernels.py with its tuning config at K = 1024, checked with
the CLI's defaults (depth-first search with branch and bound, every reduction) and a 60 s limit
per kernel; writes the table into bench/PERF.md between its markers.

    python bench/jax_kernels_k1024.py                 # every kernel (minutes: up to 60 s each)
    python bench/jax_kernels_k1024.py --only hopper_matmul,ragged_dot   # some rows, printed only
    python bench/jax_kernels_k1024.py --timeout 20

K = 1024 is the contraction length of the matmuls (M and N as in jax_kernels.py; the 2-CTA
Blackwell matmul at 1024 x 1024 x 1024, as bench/perf.py measures it), and the key/value
sequence length of attention. A violation's coverage says whether it is confirmed shortest.
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
KERNELS = os.path.join(ROOT, "examples", "pallas", "jax_kernels.py")
PERF = os.path.join(HERE, "PERF.md")
BEGIN, END = "<!-- bench/jax_kernels_k1024.py -->", "<!-- end bench/jax_kernels_k1024.py -->"

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.checker.engines.explore import Limits  # noqa: E402
from barrierproof.model import pallas  # noqa: E402
from jax_sizes import with_contraction  # noqa: E402

K = 1024


def names(module) -> list[str]:
    return list(module.EXPECT) + list(module.SLOW)


def row(module, name: str, timeout: float) -> list[list[str]]:
    start = time.perf_counter()
    kernels = pallas.load(getattr(module, name), name=name)
    traced = time.perf_counter() - start
    rows = []
    for n, kernel in enumerate(kernels):
        start = time.perf_counter()
        v = check_kernel(kernel, None, Options(Limits(timeout=timeout), store="fingerprint"))
        seconds = time.perf_counter() - start
        label = name if len(kernels) == 1 else f"{name} (kernel {n + 1} of {len(kernels)})"
        coverage = re.sub(r" \(64-bit fingerprints: [^)]*\)", "",
                          re.sub(r"\s+", " ", v.coverage or ""))
        expect = {**module.EXPECT, **module.SLOW}.get(name, "")
        grown = (v.bytes_per_state or 0) * v.states / 2**20
        met = "yes" if v.verdict not in ("bounded", "error") and seconds <= 60 else "no"
        rows.append([label, expect, v.label, f"{v.states:,}", coverage, f"{traced:.1f}",
                     f"{seconds:.1f}", f"{grown:,.0f}", met])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return rows


def markdown(rows, seconds: float, timeout: float) -> str:
    head = ["kernel", "expected (jax_kernels.py, its sizes)", "verdict at K=1024",
            "distinct states", "coverage", "trace s", "check s", "memory grown MB",
            "verdict in <= 60 s"]
    met = sum(r[-1] == "yes" for r in rows)
    lines = [BEGIN, "## JAX's kernels at K = 1024 (examples/pallas/jax_kernels.py), "
             "default search", "",
             f"Produced by `python bench/jax_kernels_k1024.py` in one run of {seconds:.0f} s on "
             f"{platform.machine()} with {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()} (a machine shared with other work: times are "
             f"indicative). Each kernel: `check` with its limit of {timeout:g} s, the fingerprint "
             "store, every reduction, depth-first search with branch and bound. "
             f"Goal (a verdict in <= 60 s each): met by {met} of {len(rows)}.", "",
             "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append(END)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated function names; print, do not write")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    module = with_contraction(pallas.import_file(KERNELS), K, square=True)
    chosen = args.only.split(",") if args.only else names(module)
    start = time.perf_counter()
    rows = [r for name in chosen for r in row(module, name, args.timeout)]
    text = markdown(rows, time.perf_counter() - start, args.timeout)
    if args.only:
        print(text)
        return 0
    perf = open(PERF).read()
    if BEGIN in perf:
        perf = perf[:perf.index(BEGIN)] + text + perf[perf.index(END) + len(END):]
    else:
        perf = perf.rstrip("\n") + "\n\n" + text + "\n"
    with open(PERF, "w") as f:
        f.write(perf)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
