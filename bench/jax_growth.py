"""JAX's shipped kernels at growing sizes: K-loop steps 2..64 and tiles per block 1..8, checked
with the CLI's defaults (depth-first search with branch and bound, every reduction, fingerprint
store) and a time limit per point; writes bench/GROWTH.md.

    python bench/jax_growth.py                    # every point (about 10 minutes)
    python bench/jax_growth.py --timeout 10 --only hopper_matmul   # some rows, printed only

K steps = K / tile_k for the matmuls (tile_k = 64) and the key/value steps of attention
(block_kv = 64); tiles per block is the trip count of the dynamic-scheduling loop of the
Blackwell matmuls (a stated parameter of the traced kernel). Every point is traced afresh.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNELS = os.path.join(ROOT, "examples", "pallas", "jax_kernels.py")
OUT = os.path.join(HERE, "GROWTH.md")

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.checker.engines.explore import Limits  # noqa: E402
from barrierproof.model import pallas  # noqa: E402
from jax_sizes import with_contraction  # noqa: E402

TILE_K = 64
STEPS = (2, 4, 8, 16, 32, 64)
TILES = (1, 2, 3, 4, 6, 8)


# (function, K steps, tiles per block or None when the kernel has no scheduling loop)
POINTS = ([("hopper_matmul", s, None) for s in STEPS]
          + [("hopper_matmul_cluster", s, None) for s in STEPS]
          + [("attention_forward", s, None) for s in STEPS]
          + [("blackwell_matmul", s, 1) for s in STEPS]
          + [("blackwell_matmul", 4, t) for t in TILES if t != 1]
          + [("blackwell_matmul_collective", 2, t) for t in TILES])


def measure(name: str, steps: int, tiles: int | None, timeout: float) -> list[str]:
    module = with_contraction(pallas.import_file(KERNELS), steps * TILE_K)
    start = time.perf_counter()
    (kernel,) = pallas.load(getattr(module, name), name=name)
    traced = time.perf_counter() - start
    params = {}
    if tiles is not None:
        (trips,) = [p for p in kernel.params if p.startswith("trips_")]
        params[trips] = tiles
    start = time.perf_counter()
    v = check_kernel(kernel, params, Options(Limits(timeout=timeout), store="fingerprint"))
    seconds = time.perf_counter() - start
    shortest = ""
    if v.verdict == "violation":
        shortest = "shortest" if (v.coverage or "").startswith("shortest") else "not confirmed"
    return [name, str(steps), "-" if tiles is None else str(tiles), v.label, shortest,
            f"{v.states:,}", f"{traced:.1f}", f"{seconds:.1f}"]


HEAD = ["kernel", "K steps", "tiles per block", "verdict", "counterexample", "distinct states",
        "trace s", "check s"]


def markdown(rows, seconds: float, timeout: float) -> str:
    lines = ["# JAX's kernels at growing sizes", "",
             f"Produced by `python bench/jax_growth.py` in one run of {seconds:.0f} s on "
             f"{platform.machine()} with {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}; 1-minute load average {os.getloadavg()[0]:.1f} at "
             "the end (a shared machine: times are indicative). Each point: `check` with a "
             f"limit of {timeout:g} s, the CLI's defaults (depth first with branch and bound, "
             "every reduction), the fingerprint store. A violation found and replayed but not "
             "confirmed shortest within the limit says `not confirmed`; `bounded` means no "
             "violation in the states searched.", "",
             "| " + " | ".join(HEAD) + " |", "|" + " --- |" * len(HEAD)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated function names; print, do not write")
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args(argv)
    chosen = set(args.only.split(",")) if args.only else None
    start = time.perf_counter()
    rows = []
    for name, steps, tiles in POINTS:
        if chosen is None or name in chosen:
            rows.append(measure(name, steps, tiles, args.timeout))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    text = markdown(rows, time.perf_counter() - start, args.timeout)
    if not args.only:
        with open(OUT, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
