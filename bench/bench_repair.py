"""Benchmark of the repair search: for every buggy example (and examples/symbolic_bugs.py), is a
verified fix found, does it match the known fix, and how long does it take.

The known fix is the correct sibling example: the same protocol without the bug. A suggestion
matches when the repaired kernel does exactly what the sibling does at the example's parameter
values: the same barriers (counts, slots, kind) and, for every thread and warp of every block,
the same operations in the same order with the same indices, counts, bytes and parities
(`ir_edit.unrolled`; loops and expressions may be written differently). Where the examples hold
no correct sibling, the row says so and "matches" is left empty.

    python bench/bench_repair.py [--out bench/REPAIR.md] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.checker.repair import suggest_fixes  # noqa: E402
from barrierproof.checker.repair.ir_edit import unrolled  # noqa: E402
from barrierproof.fixcmd import rebuild_with  # noqa: E402
from barrierproof.loader import import_file, resolve  # noqa: E402
from barrierproof.model.dsl import protocol  # noqa: E402


def _helper(path: str, helper: str, **defaults):
    """A correct sibling built from an example's helper without its bug flag."""
    module = import_file(os.path.join(ROOT, path))
    fn = getattr(module, helper)
    names = list(defaults)

    def body(k, **params):
        fn(k, *[params[n] for n in names])
    import inspect
    sig = inspect.Signature([inspect.Parameter("k", inspect.Parameter.POSITIONAL_ONLY)] +
                            [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=v)
                             for n, v in defaults.items()])
    body.__signature__ = sig
    return lambda: protocol(body, name=f"{helper}(correct)").build()


def _ref(spec: str):
    return lambda: resolve(os.path.join(ROOT, spec))[0].build_all()[0]


RING = _ref("examples/hopper_ring.py::tma_ring")
PARITY_RING = _helper("examples/symbolic_bugs.py", "parity_ring", stages=2, consumers=1, steps=3)
PIPELINE = _ref("examples/cutlass.py::pipeline_tma_async")

# buggy example -> its correct sibling (the known fix), or why there is none.
SIBLINGS = {
    "handoff.py::wrong_arrival_count": _ref("examples/handoff.py::single_handoff"),
    "hopper_ring.py::ring_without_drain": RING,
    "hopper_ring.py::consumer_lapped_by_producer": RING,
    "hopper_ring.py::empty_count_too_small": RING,
    "hopper_ring.py::empty_count_too_large": RING,
    "hopper_ring.py::roles_disagree_on_trip_count": RING,
    "hopper_ring.py::early_exit_skips_wait": RING,
    "cutlass.py::expect_tx_larger_than_copy": PIPELINE,
    "cutlass.py::expect_tx_without_copy": PIPELINE,
    "cutlass.py::parity_not_toggled": PIPELINE,
    "attention.py::pingpong_missing_final_wait": _ref("examples/attention.py::pingpong_schedule"),
    "symbolic_bugs.py::drain_every_stage": RING,
    "symbolic_bugs.py::empty_counts_two_consumers": RING,
    "symbolic_bugs.py::reuse_one_iteration_late": RING,
    "symbolic_bugs.py::pingpong_even_handback": _ref("examples/attention.py::pingpong_schedule"),
    "symbolic_bugs.py::schedule_barrier_odd_tail": _ref("examples/attention.py::schedule_barrier"),
    "symbolic_bugs.py::release_skipped_when_steps_mod_stages_is_1": PARITY_RING,
    "symbolic_bugs.py::reuse_assumes_double_buffering": PARITY_RING,
    "symbolic_bugs.py::tcgen05_commit_only_even_steps":
        _ref("examples/blackwell.py::tma_mma_epilogue"),
    "patterns/cutlass_pipelines.py::pipeline_async_tail_parity_stale":
        _ref("examples/patterns/cutlass_pipelines.py::pipeline_async"),
    "patterns/cutlass_pipelines.py::mainloop_release_lag_trip_count_one":
        _ref("examples/patterns/cutlass_pipelines.py::mainloop_release_lag"),
    "patterns/cutlass_pipelines.py::tma_multicast_empty_counts_local_consumers_only":
        _ref("examples/patterns/cutlass_pipelines.py::tma_multicast_2x1"),
    "patterns/cutlass_pipelines.py::tma_multicast_expect_tx_counts_own_half":
        _ref("examples/patterns/cutlass_pipelines.py::tma_multicast_2x1"),
    "patterns/cutlass_pipelines.py::tma_multicast_without_producer_tail":
        _ref("examples/patterns/cutlass_pipelines.py::tma_multicast_2x1"),
    "patterns/flash_attention.py::fa3_v_empty_counts_one_warpgroup":
        _ref("examples/patterns/flash_attention.py::fa3_forward_pingpong"),
    "patterns/flash_attention.py::fa3_warpgroup_skips_last_block":
        _ref("examples/patterns/flash_attention.py::fa3_forward_pingpong"),
    "patterns/hopper_ws.py::hopper_ws_every_warp_issues":
        _ref("examples/patterns/hopper_ws.py::hopper_ws_matmul"),
    "patterns/hopper_ws.py::hopper_ws_drain_assumes_full_ring":
        _ref("examples/patterns/hopper_ws.py::hopper_ws_matmul"),
    "patterns/ordered_sequence.py::ordered_sequence_2wg_as_in_cutlass":
        _ref("examples/patterns/ordered_sequence.py::ordered_sequence_2wg"),
    "patterns/ordered_sequence.py::ordered_sequence_3wg_no_opposite_phase":
        _ref("examples/patterns/ordered_sequence.py::ordered_sequence_3wg"),
    "patterns/split_k.py::split_k_reducer_skips_last_release":
        _ref("examples/patterns/split_k.py::split_k_dsmem"),
    "patterns/split_k.py::split_k_cluster_sync_skipped_by_a_block":
        _ref("examples/patterns/split_k.py::split_k_dsmem"),
    "patterns/blackwell_persistent.py::umma_mma_reuses_accumulator_without_wait":
        _ref("examples/patterns/blackwell_persistent.py::umma_persistent_gemm"),
    "patterns/blackwell_persistent.py::clc_query_before_release":
        _ref("examples/patterns/blackwell_persistent.py::clc_scheduler"),
    "pallas/ring.py::ring_without_drain": _ref("examples/pallas/ring.py::ring"),
    "pallas/ring.py::producer_laps_consumer": _ref("examples/pallas/ring.py::ring"),
    "pallas/ring.py::tail_iteration_skips_wait": _ref("examples/pallas/ring.py::ring"),
    "pallas/ring.py::roles_disagree_on_trips": _ref("examples/pallas/ring.py::ring"),
    "pallas/ring.py::trip_count_one": _ref("examples/pallas/ring.py::trip_count_one_guarded"),
    "pallas/handoff.py::missing_arrival": _ref("examples/pallas/handoff.py::handoff"),
    "pallas/audit_kernels.py::ws_matmul_one_release_per_stage":
        _ref("examples/pallas/audit_kernels.py::ws_matmul"),
    "pallas/audit_kernels.py::persistent_tcgen05_matmul_acc_slot_zero":
        _ref("examples/pallas/audit_kernels.py::persistent_tcgen05_matmul"),
}


# Why a row has no verified fix, where that was looked into (the others: no candidate of the
# implemented classes verified within the budget).
WHY_NOT = {
    "handoff.py::arrivals_without_waiter": "needs a second barrier for the producer to wait on "
                                           "(a new allocation, outside the candidate classes)",
    "hopper_ring.py::index_without_modulo": "`full.at[i % stages]` is found, but the ring has no "
                                            "`empty` barrier, so the producer then laps the "
                                            "consumer (BP121): it needs a new barrier",
    "pallas/ring.py::producer_laps_consumer": "no `empty` barrier to wait on: it needs a new "
                                              "barrier",
    "pallas/hardware.py::tcgen05_commit_plain_barrier": "found while tracing (JAX rejects the "
                                                        "kernel), so there is no IR to edit; "
                                                        "the diagnostic's hint is the fix",
    "patterns/ordered_sequence.py::ordered_sequence_2wg_as_in_cutlass":
        "the drain waits on a two-dimensional barrier array; the drain candidates cover rings "
        "(one dimension) and single barriers",
}


def buggy_targets(only: str | None):
    out = []
    for target in resolve(os.path.join(ROOT, "examples")):
        if not (target.expect or "").startswith(("violation", "error")):
            continue
        short = os.path.relpath(target.path, os.path.join(ROOT, "examples")) + "::" + target.name
        if only and only not in short:
            continue
        out.append((short, target))
    return out


def run(only: str | None = None, budget: float = 10.0):
    rows = []
    for short, target in buggy_targets(only):
        try:
            kernel = target.build_all()[0]
        except Exception as err:  # an example that cannot be traced here (no jax): say so
            rows.append(dict(name=short, found=None,
                             note=f"no IR to repair: {str(err).split(' (hint')[0]}"))
            continue
        verdict = check_kernel(kernel, {}, Options(), target.ref)
        start = time.perf_counter()
        repair = suggest_fixes(kernel, {}, Options(), verdict, budget=budget,
                               rebuild=rebuild_with(kernel))
        seconds = time.perf_counter() - start
        match = None
        sibling = SIBLINGS.get(short)
        if sibling is not None:
            values = kernel.param_values({})
            want = unrolled(sibling(), values)
            ranks = [n + 1 for n, c in enumerate(repair.chosen)
                     if unrolled(c.kernel, values) == want]
            match = ranks[0] if ranks else 0
        top = repair.fixes[0] if repair.fixes else None
        rows.append(dict(name=short, code=verdict.label, found=bool(repair.fixes),
                         n=len(repair.fixes), top=top.description if top else "",
                         verdict=top.verdict if top else "", exact=bool(top and top.patch),
                         match=match, seconds=seconds, tried=repair.tried,
                         note=repair.reason))
        print(f"{short}: {len(repair.fixes)} fix(es), match={match}, {seconds:.1f}s",
              file=sys.stderr)
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(rows) -> str:
    done = [r for r in rows if r["found"] is not None]
    found = [r for r in done if r["found"]]
    with_sibling = [r for r in done if r["match"] is not None]
    top1 = [r for r in with_sibling if r["match"] == 1]
    anyrank = [r for r in with_sibling if r["match"]]
    times = [r["seconds"] for r in done]
    out = ["# Repair benchmark", "",
           "Generated by `python bench/bench_repair.py` (do not edit by hand). For every buggy "
           "example: the repair search (`checker/repair/`) at the example's parameters, each "
           "suggestion verified by the explorer, symbolic protocols also searched at small "
           "parameter values and the first suggestion given to the prover. *matches* compares "
           "what the repaired kernel does at the example's parameters (every thread's operations, "
           "unrolled) with what the correct sibling example does (rank of the suggestion that "
           "equals it; `-` when the examples hold no correct sibling).", "",
           f"Machine: {platform.processor() or platform.machine()}, Python "
           f"{platform.python_version()}, one process.", "",
           f"- buggy examples: {len(done)}",
           f"- with a verified suggestion: {len(found)}/{len(done)} "
           f"({100 * len(found) / max(1, len(done)):.0f}%)",
           f"- with a correct sibling: {len(with_sibling)}; first suggestion matches it: "
           f"{len(top1)}/{len(with_sibling)}; some suggestion matches: "
           f"{len(anyrank)}/{len(with_sibling)}",
           f"- time per example: median {statistics.median(times):.2f}s, "
           f"max {max(times):.1f}s, total {sum(times):.0f}s", "",
           "| example | verdict | fixes | first suggestion | its verdict | patch | matches | "
           "time | candidates |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["found"] is None:
            out.append(f"| {r['name']} | | | {_cell(WHY_NOT.get(r['name'], r['note']))} "
                       "| | | | | |")
            continue
        match = "-" if r["match"] is None else ("no" if r["match"] == 0 else
                                                 f"yes (#{r['match']})")
        why = WHY_NOT.get(r["name"], r["note"])
        if not r["found"] and r["tried"] == 0:
            why = "no candidate edit applies"
            if r["name"].startswith("hw_barriers.py"):
                why += (": the repair classes cover mbarrier protocols; named barriers, "
                        "bar.sync and barrier.cluster have none yet")
        first = r["top"] or f"none: {why}"
        out.append(f"| {r['name']} | {r['code']} | {r['n']} | {_cell(first)} | {r['verdict']} "
                   f"| {'exact' if r['exact'] else ('words' if r['found'] else '')} | {match} | "
                   f"{r['seconds']:.2f}s | {r['tried']} |")
    out += ["", "*patch*: `exact` when the edit maps to the protocol's own source lines "
            "(`barrierproof fix --apply` can write it); `words` when the code lies in a helper "
            "shared with the correct siblings (or in a traced Pallas kernel), so the edit is "
            "described at its line instead.", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "REPAIR.md"))
    parser.add_argument("--only", default=None)
    parser.add_argument("--budget", type=float, default=10.0)
    args = parser.parse_args()
    rows = run(args.only, args.budget)
    text = markdown(rows)
    if args.only:
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
