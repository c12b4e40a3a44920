"""What the CuTe DSL frontend costs: for every target in examples/cute/, the time to compile it
on the CPU up to the kernel's MLIR and translate it (model/cute/), and the time to check it.

    python bench/cute_compile.py          # a table on stdout; about 15 s

Times are wall clock in this process; the first target also pays for importing the DSL.
"""

from __future__ import annotations

import glob
import os
import time

from barrierproof.checker.check import check_kernel
from barrierproof.loader import import_file, targets_in_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows():
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "cute", "*.py"))):
        for target in targets_in_module(path, import_file(path)):
            start = time.perf_counter()
            kernel = target.build()
            built = time.perf_counter()
            verdict = check_kernel(kernel)
            done = time.perf_counter()
            yield (target.name, built - start, done - built, repr(kernel.num_threads),
                   len(list(kernel.ops())), verdict.label, target.expect)


def main() -> None:
    print(f"| {'target':42} | compile + translate | check | warps | ops | verdict |")
    print(f"|{'-' * 44}|---------------------|-------|-------|-----|---------|")
    for name, build, check, warps, ops, label, expect in rows():
        mark = "" if label == expect else f" (expected {expect})"
        print(f"| {name:42} | {build:17.2f} s | {check:3.2f} s | {warps:>5} | {ops:3} | "
              f"{label}{mark} |")


if __name__ == "__main__":
    main()
