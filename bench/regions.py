"""Cost of regions: every Pallas example kernel checked with its regions (what the frontend
reads from `pl.ds` / `.at[...]`) and with each region widened to its leading slots (what race
checking judged before regions: `whole_buffers`), side by side.

    python bench/regions.py                       # examples/pallas/*.py, to bench/REGIONS.md
    python bench/regions.py examples/pallas/regions.py --stdout

Columns: the verdict and distinct states each way, and the seconds to each verdict (compile +
search, reductions on). Kernels without a region are listed once, as a count: for them both
ways are the same IR.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from barrierproof.checker.check import check_kernel  # noqa: E402
from barrierproof.model import pallas  # noqa: E402
from barrierproof.model.ir import ModelError, has_regions, whole_buffers  # noqa: E402


def measure(kernel) -> tuple[str, int, float]:
    start = time.perf_counter()
    v = check_kernel(kernel)
    return v.label, v.states, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--stdout", action="store_true")
    args = parser.parse_args(argv)
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "examples", "pallas", "*.py")))
    rows, plain = [], 0
    for path in files:
        module = pallas.import_file(path)
        for name in sorted(pallas.targets(module)):
            try:
                kernels = pallas.load_target(f"{path}::{name}")
            except ModelError:
                continue
            for kernel in kernels:
                if not has_regions(kernel):
                    plain += 1
                    continue
                with_regions = measure(kernel)
                whole = measure(whole_buffers(kernel))
                rows.append((f"{os.path.relpath(path, ROOT)}::{name}", with_regions, whole))
    lines = ["| kernel | with regions | states | s | whole buffers | states | s |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: |"]
    for ref, (v1, n1, t1), (v2, n2, t2) in rows:
        lines.append(f"| {ref} | {v1} | {n1} | {t1:.2f} | {v2} | {n2} | {t2:.2f} |")
    lines.append("")
    lines.append(f"{len(rows)} kernel(s) with regions; {plain} without (the same IR both ways).")
    text = "\n".join(lines) + "\n"
    if args.stdout:
        sys.stdout.write(text)
    else:
        with open(os.path.join(HERE, "REGIONS.md"), "w") as f:
            f.write("# Regions: states and time with and without them\n\n"
                    "Written by `python bench/regions.py` (see its docstring).\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
