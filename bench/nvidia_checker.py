"""barrierproof side by side with NVIDIA's exhaustive interleaving checker
(`cutlass.experimental.task_scheduling.exhaustive_checker`, nvidia-cutlass-dsl 4.8) on a kernel
that exists in both forms: bench/ts_gemm.py (the task-scheduling form NVIDIA's checker reads)
and examples/cute/ts_twins.py (the CuTe DSL form barrierproof reads from its MLIR).

    python bench/nvidia_checker.py --out bench/NVIDIA_CHECKER.md     # about 3 minutes

For each pair and size (tiles, K steps): NVIDIA's checker at that tile count (its states,
seconds and verdict, at the state bound TaskManager runs it with) and what TaskManager's
structural checks say before it; barrierproof `check` at the same tile count and K. Then
barrierproof `prove` for every tile count and K. tests/test_nvidia_checker_bench.py re-measures
the states and verdicts of the table (never the seconds).
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

TWINS = os.path.join(ROOT, "examples", "cute", "ts_twins.py")
COMMAND = "python bench/nvidia_checker.py --out bench/NVIDIA_CHECKER.md"


@dataclass(frozen=True)
class Pair:
    """One kernel in both forms: the TS builder's keyword arguments and shape, the CuTe
    target. A persistent pair's tile count is a parameter of both; the tutorial's GEMM computes
    one tile per CTA (NVIDIA's checker runs it at one tile, as TaskManager does)."""
    label: str
    ts: dict
    cute: str
    shape: str = "PERSISTENT"

    @property
    def persistent(self) -> bool:
        return self.shape == "PERSISTENT"


PAIRS = {p.label: p for p in (
    Pair("tutorial GEMM", {}, "tutorial_gemm", "TUTORIAL"),
    Pair("tutorial GEMM, accumulator never released", {"release_acc": False},
         "tutorial_gemm_acc_never_released", "TUTORIAL"),
    Pair("correct", {}, "persistent_gemm"),
    Pair("A/B stage released before its MMAs", {"release_first": True},
         "persistent_gemm_released_before_the_mma"),
    Pair("accumulator consumers counted in warps", {"acc_consumer_arrivals": 1},
         "persistent_gemm_acc_counted_in_warps"),
    Pair("accumulator never released", {"release_acc": False},
         "persistent_gemm_acc_never_released"),
)}


@dataclass(frozen=True)
class Row:
    pair: str
    tiles: int
    k_tiles: int
    slow: bool = False        # left out of the test (NVIDIA's checker runs to its bound)


ROWS = [
    Row("tutorial GEMM", 1, 4), Row("tutorial GEMM", 1, 16), Row("tutorial GEMM", 1, 64),
    Row("tutorial GEMM, accumulator never released", 1, 4),
    Row("correct", 1, 2), Row("correct", 2, 2), Row("correct", 4, 4), Row("correct", 8, 8),
    Row("correct", 32, 32, slow=True), Row("correct", 64, 32, slow=True),
    Row("A/B stage released before its MMAs", 2, 2),
    Row("accumulator consumers counted in warps", 2, 2),
    Row("accumulator never released", 1, 2), Row("accumulator never released", 2, 2),
    Row("accumulator never released", 3, 2),
]
# `prove` on the CuTe form: every tile count and K, or every tile count with K fixed.
PROVE = ["tutorial_gemm", "tutorial_gemm_acc_never_released", "persistent_gemm", "persistent_gemm_two_k_steps",
         "persistent_gemm_released_before_the_mma", "persistent_gemm_acc_counted_in_warps",
         "persistent_gemm_acc_never_released"]
HEADER = ("| pair | tiles | K steps | NVIDIA states | NVIDIA s | NVIDIA verdict | "
          "TaskManager structural checks | barrierproof states | barrierproof s | "
          "barrierproof verdict |")


def nvidia_max_states() -> int:
    """The bound TaskManager runs the checker with: check_all_interleavings' default (it
    passes none)."""
    from cutlass.experimental.task_scheduling.exhaustive_checker import check_all_interleavings
    return inspect.signature(check_all_interleavings).parameters["max_states"].default


def nvidia(pair: Pair, tiles: int, k_tiles: int) -> tuple[int, float, str, str]:
    """NVIDIA's checker on the TS form: states, seconds, verdict; then TaskManager's structural
    checks (without the exhaustive one) on the same tasks."""
    import warnings

    import ts_gemm
    from cutlass.experimental.task_scheduling.exhaustive_checker import check_all_interleavings
    from cutlass.experimental.task_scheduling.task_manager import TaskManager
    kernel = ts_gemm.gemm(k_tiles, getattr(ts_gemm, pair.shape), **pair.ts)
    start = time.perf_counter()
    result = check_all_interleavings(kernel.tasks, num_tiles=tiles)
    seconds = time.perf_counter() - start
    if result.deadlock_states:
        verdict = "deadlock"
    elif result.race_states:
        verdict = "race"
    elif result.hit_state_limit:
        verdict = f"bounded (max_states={nvidia_max_states():,}; no issue found)"
    else:
        verdict = "safe"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TaskManager(tasks=kernel.tasks, resource_dependency_graph=kernel.graph,
                        verbose=False, exhaustive_deadlock_race_check=False)
        structural = "pass"
    except ValueError as error:
        structural = "reject: " + _first_sentence(str(error))
    return result.states_explored, seconds, verdict, structural


def _first_sentence(text: str) -> str:
    line = text.strip().splitlines()[0]
    return line.split(" Task(s):")[0].split(" — ")[-1].rstrip(".").replace("|", "/")


_BUILT: dict = {}
COMPILE_SECONDS: dict = {}     # compile on the CPU + read into the IR, not in the tables' s


def cute_kernel(name: str):
    """The CuTe form compiled on the CPU and read into the IR (once per process)."""
    if name not in _BUILT:
        from barrierproof.loader import import_file, targets_in_module
        (target,) = [t for t in targets_in_module(TWINS, import_file(TWINS)) if t.name == name]
        start = time.perf_counter()
        _BUILT[name] = (target, target.build())
        COMPILE_SECONDS[name] = time.perf_counter() - start
    return _BUILT[name]


def barrierproof(pair: Pair, tiles: int, k_tiles: int) -> tuple[int, float, str]:
    from barrierproof.checker.check import check_kernel
    target, kernel = cute_kernel(pair.cute)
    start = time.perf_counter()
    params = {"tiles": tiles, "k_tiles": k_tiles} if pair.persistent else {"k_tiles": k_tiles}
    verdict = check_kernel(kernel, params, source=target.ref)
    return verdict.states, time.perf_counter() - start, verdict.label


def measure(rows=ROWS) -> list[list[str]]:
    """The table's cells, one list per row: what the test compares (seconds excepted)."""
    out = []
    for row in rows:
        pair = PAIRS[row.pair]
        n_states, n_s, n_verdict, structural = nvidia(pair, row.tiles, row.k_tiles)
        b_states, b_s, b_verdict = barrierproof(pair, row.tiles, row.k_tiles)
        out.append([row.pair, str(row.tiles), str(row.k_tiles), f"{n_states:,}", f"{n_s:.2f}",
                    n_verdict, structural, f"{b_states:,}", f"{b_s:.2f}", b_verdict])
        print(" | ".join(out[-1]), flush=True)
    return out


SECONDS_COLUMNS = (4, 8)


def without_seconds(cells: list[str]) -> list[str]:
    return [c for i, c in enumerate(cells) if i not in SECONDS_COLUMNS]


def prove_rows() -> list[list[str]]:
    from barrierproof.checker.symbolic.prove import prove_kernel
    out = []
    for name in PROVE:
        target, kernel = cute_kernel(name)
        start = time.perf_counter()
        verdict = prove_kernel(kernel, source=target.ref)
        seconds = time.perf_counter() - start
        said = verdict.coverage or ""
        smallest = [n.split(" (")[0] for n in verdict.notes if "smallest breaking" in n]
        out.append([name, verdict.label, f"{seconds:.1f}", f"{COMPILE_SECONDS[name]:.1f}",
                    _short(said, smallest)])
        print(" | ".join(out[-1]), flush=True)
    return out


def _short(coverage: str, smallest: list[str]) -> str:
    """The coverage line without its timings: what was proved, what was left to the
    explorer, or the smallest breaking values."""
    import re
    if smallest:
        return smallest[0]
    if "race-free" in coverage:
        return coverage.split(":")[0] + ", race-free (BP200/BP201)"
    text = re.sub(r" \(outside the supported fragment[^;]*\)", "", coverage)
    return text.replace("|", "/")


def table_rows(path: str) -> list[list[str]]:
    """The rows of the side-by-side table of a written NVIDIA_CHECKER.md."""
    rows, inside = [], False
    with open(path) as f:
        for line in f:
            if line.startswith(HEADER):
                inside = True
                continue
            if inside:
                if not line.startswith("|"):
                    break
                if not line.startswith("|--"):
                    rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def facts(rows: list[list[str]]) -> dict[str, str]:
    """The figures the prose and README quote, taken from the table's rows."""
    def where(pair, tiles=None):
        return [r for r in rows if r[0] == pair and (tiles is None or r[1] == str(tiles))]
    (bounded,) = [r for r in rows if r[5].startswith("bounded")]
    never = where("accumulator never released")
    first_bp = min(never, key=lambda r: int(r[1]))
    return {
        "bound_at": f"{bounded[1]} tiles of {bounded[2]} K steps",
        "bound_bp_states": bounded[7],
        "release_first_nvidia": where("A/B stage released before its MMAs")[0][5],
        "release_first_bp": where("A/B stage released before its MMAs")[0][9],
        "warps_nvidia": where("accumulator consumers counted in warps")[0][5],
        "warps_bp": where("accumulator consumers counted in warps")[0][9],
        "never_safe": str(max(int(r[1]) for r in never if r[5] == "safe")),
        "never_deadlock": str(min(int(r[1]) for r in never if r[5] == "deadlock")),
        "never_bp": first_bp[9],
        "never_bp_tiles": first_bp[1],
        "tutorial_never_nvidia": where("tutorial GEMM, accumulator never released")[0][5],
        "tutorial_never_bp": where("tutorial GEMM, accumulator never released")[0][9],
    }


def write(path: str, rows: list[list[str]], proofs: list[list[str]], load_before: str) -> None:
    import cutlass
    fig = facts(rows)
    proved = {r[0]: r[1] for r in proofs}
    version = getattr(cutlass, "__version__", "4.8")
    lines = [
        "# barrierproof and NVIDIA's exhaustive checker, side by side",
        "",
        f"Written by `{COMMAND}` (nvidia-cutlass-dsl {version}, Python "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{load_before} at the start and {load()} at the end). Seconds are wall clock on that "
        "machine, shared with other jobs: compare states and verdicts, not times; "
        "tests/test_nvidia_checker_bench.py re-measures every state count and verdict of the "
        "fast rows.",
        "",
        "## The kernel, in both forms",
        "",
        "A persistent Blackwell GEMM: a TMA warp fills a two-stage A/B ring, an MMA warp waits "
        "for each stage, issues its tcgen05 MMAs into a two-stage accumulator ring and releases "
        "the stage, an epilogue warp (32 threads) waits for each accumulator and releases it. "
        "`bench/ts_gemm.py` writes it in the CuTe DSL's task-scheduling framework (tasks, "
        "resources with a `TmaUmma` and an `UmmaAsync` pipeline, schedules of acquire / work / "
        "commit and wait / work / release); `examples/cute/ts_twins.py` writes it with the CuTe "
        "DSL's pipelines (`PipelineTmaUmma`, `PipelineUmmaAsync`, a "
        "`StaticPersistentTileScheduler`), as CUTLASS's own persistent GEMMs are written. Each "
        "bug is made the same way in both. The *tutorial GEMM* rows are the same pipeline at "
        "the shape of the task-scheduling tutorial's GEMM (NVIDIA/cutlass, "
        "`examples/python/CuTeDSL/experimental/task_scheduling/blackwell/tutorial/"
        "02_gemm_simple_ts`): one output tile per CTA, four epilogue warps whose 128 threads "
        "release the accumulator, the TMA warp 4, the MMA warp 5, two idle warps, three A/B "
        "stages; without a work queue TaskManager runs NVIDIA's checker at one tile, and so "
        "does the table.",
        "",
        "## What each checks",
        "",
        "NVIDIA's checker (`check_all_interleavings`) runs a breadth-first search over the "
        "tasks' schedules. A state is the vector of the tasks' positions in their schedules; "
        "synchronization is a credit model: a consumer's wait needs a producer commit credit, a "
        "producer's acquire an empty-slot credit, a pipeline starts with one empty credit per "
        "stage. It does not model mbarrier phases, parity, arrival counts or transaction bytes: "
        "the framework generates that code from the declared pipeline, and the checker trusts "
        "it. It reports deadlocks, races between aliased shared/tensor memory held by the tasks, "
        "and PDL ordering. A persistent kernel is checked at a fixed number of tiles: the "
        "schedule repeated `num_tiles` times (TaskManager passes 2); the search stops at "
        f"`max_states` = {nvidia_max_states():,} explored states (TaskManager's bound: "
        "`check_all_interleavings`' default) and then warns that no issue was found without "
        "completing. TaskManager also runs structural checks first (cooperative-group sizes "
        "against the tasks' warps, every acquire matched by a release, a DMA consumer released "
        "only after the work that reads it): the column says what they answer.",
        "",
        "barrierproof reads the CuTe form's MLIR, compiled on the CPU: every mbarrier "
        "operation the pipelines emit (init counts, arrivals per thread or per elected lane, "
        "`expect_tx` bytes, TMA copies landing, tcgen05 commits, `try_wait.parity` with the "
        "phase bit the pipeline state carries, the producer's tail) and the shared-memory "
        "regions the copies and MMAs touch. `check` explores every interleaving of those at "
        "the given tile count and K (its states are distinct model states after its "
        "reductions, so the two state counts measure different things); `prove` answers for "
        "every tile count and K at once (Z3), or gives the smallest breaking values.",
        "",
        "## Side by side",
        "",
        HEADER,
        "|" + "---|" * 10,
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += [
        "",
        "What the rows show:",
        "",
        "- **tutorial GEMM**: both answer no issue at every K they are run at; `prove` below "
        "covers every K.",
        "- **tutorial GEMM, accumulator never released**: one tile per CTA never needs a "
        "second accumulator stage, so NVIDIA's search answers "
        f"{fig['tutorial_never_nvidia']}; the generated `producer_tail` (below) waits for the "
        f"release forever, and barrierproof answers {fig['tutorial_never_bp']}. The "
        "structural check rejects it.",
        f"- **correct**: both answer no issue wherever they complete. NVIDIA's search grows with "
        f"the tile count and K until, at {fig['bound_at']}, it stops at its bound without a "
        f"verdict, where `check` verifies in {fig['bound_bp_states']} states; `prove` below "
        "covers every tile count.",
        f"- **A/B stage released before its MMAs** (the next TMA copy may overwrite a stage the "
        f"tensor cores still read): NVIDIA's search answers {fig['release_first_nvidia']} (its race "
        "model keeps a TMA-to-MMA stage held until the producer's next acquire of it); the "
        "structural DMA ordering check rejects the schedule. barrierproof answers "
        f"{fig['release_first_bp']}, with the schedule.",
        "- **accumulator consumers counted in warps** (a consumer group of 1 where the 32 "
        "epilogue threads each arrive): the credit model counts tasks, not arrivals, so the "
        f"search answers {fig['warps_nvidia']}; the structural check of cooperative-group sizes "
        f"rejects it. barrierproof answers {fig['warps_bp']} (a phase completed by the wrong "
        "arrivals).",
        f"- **accumulator never released**: the search finds the deadlock from {fig['never_deadlock']} "
        f"tiles (more tiles than accumulator stages); at {fig['never_safe']} tiles (TaskManager "
        "runs a persistent kernel at 2) it answers safe. The code the framework generates "
        "ends every producing task with the pipeline's `producer_tail` (it waits for every "
        "stage to be released), which the searched schedule does not contain; barrierproof "
        f"reads that tail from the CuTe form and answers {fig['never_bp']} at {fig['never_bp_tiles']} "
        "tile. The structural check (an acquire without a release) rejects it.",
        "",
        "## barrierproof prove: every tile count",
        "",
        "`compile s` is the CuTe form compiled to MLIR on the CPU and read into the model, "
        "once per target (the side-by-side seconds leave it out; NVIDIA's checker reads "
        "Python objects and needs no compile).",
        "",
        "| CuTe target | verdict | s | compile s | what it covers |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in proofs]
    lines += [
        "",
        f"The tutorial GEMM (`tutorial_gemm`: {proved['tutorial_gemm']}) has one loop, over K. "
        f"With both the tile count and K at run time (`persistent_gemm`: {proved['persistent_gemm']}) "
        "a barrier rule is proved for every value and races inside two nested loops are outside "
        "`prove`'s fragment, left to the explorer's points. With K fixed at two steps "
        f"(`persistent_gemm_two_k_steps`: {proved['persistent_gemm_two_k_steps']}) it covers "
        "every tile count, races included; NVIDIA's checker covers the tile counts it is run "
        "at.",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(HERE, "NVIDIA_CHECKER.md"))
    args = parser.parse_args()
    before = load()
    rows = measure()
    proofs = prove_rows()
    write(args.out, rows, proofs, before)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
