"""The table (docs/jax-kernels.md) of JAX's own Mosaic GPU kernels, produced by checking them.

    python bench/jax_kernels_table.py                 # the fast rows, as a markdown table
    python bench/jax_kernels_table.py --all           # every row (the slow ones take minutes)
    python bench/jax_kernels_table.py --check docs/jax-kernels.md  # compare with the docs' table

Every column but the seconds is a fact of the model (allocations, threads, distinct states
explored, verdict); `--check` compares those for the rows it ran and fails on any difference
(tests/test_readme_figures.py runs it on the fast rows). Seconds depend on the machine and are
printed, never compared.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "examples", "pallas", "jax_kernels.py")

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.checker.engines.explore import Limits  # noqa: E402
from barrierproof.model import pallas  # noqa: E402
from barrierproof.model.ir import evaluate  # noqa: E402
import readme_table  # noqa: E402

HEADER = ["kernel", "barriers", "threads", "states explored", "verdict",
          "seconds (trace + check)"]
# Breadth first: a search stopped by its time limit then covers a stated depth, and the state
# counts do not depend on the order in which steps are taken.
ORDER = "bfs"
TRIPS = "trips_blackwell_matmul_mgpu_107"


@dataclass(frozen=True)
class Row:
    label: str                 # the docs table's first column
    function: str              # in examples/pallas/jax_kernels.py
    kernel: int = 0            # which launch of the function
    params: tuple = ()         # --param values
    slow: bool = False
    timeout: float | None = None


ROWS = [
    Row("hopper_matmul", "hopper_matmul"),
    Row("hopper_matmul, cluster 2 along M (multicast B)", "hopper_matmul_cluster"),
    Row("hopper_mixed_type_matmul (int8 x bf16)", "hopper_mixed_type_matmul"),
    Row("attention forward", "attention_forward"),
    Row("attention forward, causal", "attention_forward_causal"),
    Row("attention backward: dQ kernel", "attention_backward", 0),
    Row("attention backward: dK/dV kernel", "attention_backward", 1),
    Row("blackwell_matmul (1 CTA, dynamic scheduling, 3 tiles per block)", "blackwell_matmul"),
    Row("blackwell_matmul, collective (2 CTAs), 1 tile per block", "blackwell_matmul_collective",
        params=((TRIPS, 1),), slow=True),
    Row("blackwell_matmul, collective, 3 tiles per block", "blackwell_matmul_collective",
        slow=True, timeout=900.0),
    Row("blackwell_ragged_dot (2 CTAs)", "blackwell_ragged_dot", slow=True),
    Row("ragged_dot (4 groups)", "ragged_dot"),
    Row("transposed_ragged_dot (ragged K: data-dependent trip count)", "transposed_ragged_dot"),
    Row("collective_matmul (all-gather, 2 devices)", "collective_matmul"),
]


def group(n: int) -> str:
    """19686 -> '19 686', as the docs write counts."""
    return f"{n:,}".replace(",", " ")


def shape_columns(kernel) -> tuple[str, str]:
    env = {name: p.default for name, p in kernel.params.items() if p.default is not None}
    per_block = 0
    for alloc in kernel.barriers:
        n = 1
        for dim in alloc.shape:
            n *= evaluate(dim, env)
        per_block += n
    barriers = f"{len(kernel.barriers)} ({per_block} mbarriers/block)"
    threads = f"{evaluate(kernel.num_threads, env)} wg"
    from barrierproof.model.ir import WarpRegion, walk
    if any(isinstance(s, WarpRegion) for s in walk(kernel.body)):
        threads += f" x {kernel.num_warps} warps"
    cluster = 1
    for _, size in kernel.cluster:
        cluster *= evaluate(size, env)
    if cluster > 1:
        threads += f", cluster {cluster}"
    return barriers, threads


def verdict_column(kernel, params, timeout) -> tuple[str, int, float]:
    """(verdict text, states, seconds) as the docs state them."""
    start = time.perf_counter()
    v = check_kernel(kernel, params, Options(Limits(timeout=timeout), order=ORDER))
    seconds = time.perf_counter() - start
    text = v.label
    if v.verdict == "bounded":
        text = f"bounded (time limit {timeout:g} s)"
    elif v.verdict == "violation":
        again = check_kernel(kernel, params, Options(Limits(timeout=timeout), order=ORDER,
                                                     ignore=frozenset(v.codes[:1])))
        if again.verdict == "verified":
            text += f" (verified with `--ignore {v.codes[0]}`" + \
                ("" if again.states == v.states else f", {group(again.states)} states") + ")"
        else:       # a second finding behind the first
            text += f" (with `--ignore {v.codes[0]}`: {again.label}, " \
                    f"{group(again.states)} states)"
    elif v.verdict == "unknown":
        # each site's own reason (a semaphore, a data-dependent branch under a counted
        # wait, ...): the sentence the diagnostic gives, up to its first colon
        unread = [d for d in v.diagnostics if d.code == "BP190"]
        reasons = sorted({d.message.split(":")[0].rstrip(".") for d in unread})
        again = check_kernel(kernel, params, Options(order=ORDER, ignore=frozenset({"BP190"})))
        text = (f"unknown: {len(unread)} not modelled (BP190: {'; '.join(reasons)}); "
                + ("verified" if again.verdict == "verified" else again.label)
                + " with `--ignore BP190`")
    return text, v.states, seconds


def run(rows) -> list[list[str]]:
    module = pallas.import_file(KERNELS)
    table = []
    traced = {}
    for row in rows:
        start = time.perf_counter()
        if row.function not in traced:
            traced[row.function] = pallas.load(getattr(module, row.function), name=row.function)
        trace_seconds = time.perf_counter() - start
        kernel = traced[row.function][row.kernel]
        barriers, threads = shape_columns(kernel)
        verdict, states, seconds = verdict_column(kernel, dict(row.params), row.timeout)
        table.append([row.label, barriers, threads, group(states), verdict,
                      f"{trace_seconds:.1f} + {seconds:.1f}"])
        print(" | ".join(table[-1]), file=sys.stderr, flush=True)
    return table


def markdown(table) -> str:
    return readme_table.markdown(HEADER, table)


def readme_rows(path: str) -> dict[str, list[str]]:
    """The JAX kernel table of a page: kernel label -> its cells."""
    return readme_table.readme_rows(path, HEADER[:5])


def compare(table, path: str) -> list[str]:
    """Differences between a fresh table and the page's, seconds left out."""
    return readme_table.compare(table, path, HEADER[:5], HEADER[1:5])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="the slow rows too (minutes)")
    parser.add_argument("--check", metavar="PAGE", help="compare with this file's table")
    args = parser.parse_args(argv)
    table = run([r for r in ROWS if args.all or not r.slow])
    if args.check:
        problems = compare(table, args.check)
        for p in problems:
            print(p)
        return 1 if problems else 0
    print(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
