"""Protocols no one on the project wrote (tests/data/unseen_dsl.py): public barrier bugs and
their fixes, written from their descriptions by a new user. Each verdict below follows from the
hardware semantics; where the code is not the obvious one, the comment says why.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.cli import main
from barrierproof.loader import import_file, targets_in_module

from conftest import ROOT

FIELD = os.path.join(ROOT, "tests", "data", "unseen_dsl.py")
TARGETS = {t.name: t for t in targets_in_module(FIELD, import_file(FIELD))}
RACES = frozenset({"BP200", "BP201"})

VERDICTS = {
    "ab_ring_two_consumers": "verified",
    "ab_ring_one_consumer_releases_before_reading": "violation:BP200",
    "ab_ring_expect_tx_for_a_only": "violation:BP200",
    "producer_starts_at_phase_one": "verified",
    "producer_starts_at_phase_zero": "violation:BP100",
    "named_barrier_counts_every_participant": "verified",
    "named_barrier_count_misses_a_warpgroup": "violation:BP200",
    # a deadlock, named more precisely than BP100: a count of the whole
    # block makes the exited producer one of the threads the phase waits for
    "named_barrier_counts_an_idle_warpgroup": "violation:BP144",
    "each_consumer_releases_its_share": "verified",
    # not BP200 (refill under wg1's read): the shorter consequence comes first, the
    # refill's copy completing `full` again before wg1 observed its first completion
    "leader_releases_for_both_consumers": "violation:BP101",
    "persistent_carries_pipeline_state": "verified",
    # not BP101 (parity aliasing): the stale wait returns after the same
    # completion on every schedule (the producer is held on `empty`), so it is no aliasing;
    # the restarted drain then waits for a parity `empty` already shows and hangs
    "persistent_resets_phase_per_tile": "violation:BP100",
    "persistent_resets_phase_harmlessly": "verified",
    "cluster_sync_before_remote_arrive": "violation:BP146",
    "cluster_sync_after_remote_arrive": "verified",
    "remote_arrive_awaited_inside_cluster_sync": "violation:BP100",
    "remote_arrive_awaited": "verified",
    "dsmem_push_into_exited_peer": "violation:BP146",
    "dsmem_push_awaited": "verified",
    "leader_warp_releases_before_siblings_wait": "violation:BP101",
    "leader_warp_releases_after_partition_sync": "verified",
    "sparse_block_skipped_without_arrival": "violation:BP100",
    "sparse_block_skipped_with_arrival": "verified",
    # the warpgroup with fewer K blocks exits while the other's __syncthreads counts it
    "causal_trip_counts_with_block_barrier": "violation:BP144",
    "causal_trip_counts_with_warpgroup_barrier": "verified",
    "concurrent_reductions_share_a_barrier_id": "violation:BP200",
    "concurrent_reductions_own_barrier_ids": "verified",
    "epilogue_barrier_counts_producer_warp": "verified",
    "epilogue_barrier_misses_producer_warp": "violation:BP142",
    "expect_tx_of_the_clamped_box": "violation:BP130",
    "expect_tx_of_the_box_the_descriptor_loads": "verified",
    "syncthreads_in_the_compute_branch": "violation:BP144",
    "syncthreads_reached_by_every_warp": "verified",
    "shared_operand_without_loop_back_barrier": "violation:BP200",
    "shared_operand_with_loop_back_barrier": "verified",
    # not BP105/BP130 (the copy in flight, its bytes missing at the exit), which hold in the
    # same state: the read racing with the copy is the earlier cause, ranked first
    "bias_read_without_waiting_for_its_load": "violation:BP200",
    "bias_read_after_its_load_landed": "verified",
    "cp_async_stage_completes_through_its_barrier": "verified",
    "cp_async_arrive_before_the_copy": "violation:BP200",
    "three_stages_by_modulo": "verified",
    "three_stages_by_mask": "violation:BP200",
    # the consumer's early release of a fresh stage breaks the producer's first acquire
    # sooner than its read meets the load (BP200)
    "three_stages_phase_of_the_step": "violation:BP101",
}


def test_the_table_covers_every_protocol_and_agrees_with_its_decorator():
    assert set(VERDICTS) == set(TARGETS)
    assert all(TARGETS[n].expect == v for n, v in VERDICTS.items())


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_check_gives_the_verdict_decided_from_the_semantics(name):
    got = check_kernel(TARGETS[name].build(), source=name)
    assert got.label == VERDICTS[name], (got.label, got.diagnostics)
    if got.verdict == "violation":
        assert got.codes[0] == VERDICTS[name].split(":")[1]
        assert got.trace is not None


def test_expect_tx_for_one_of_two_loads_races_or_hangs_by_landing_order():
    """expect_tx(A) then copies of A (8 KiB) and B (4 KiB): if A lands first, tx hits 0 and the
    phase completes under B's copy (the race found first); if B lands first, tx goes
    8192 -> 4096 -> -4096, skips 0, and the phase never completes."""
    kernel = TARGETS["ab_ring_expect_tx_for_a_only"].build()
    hang = check_kernel(kernel, options=Options(ignore=RACES))
    assert hang.label == "violation:BP130"


def test_an_early_release_breaks_only_the_data_not_the_barriers():
    kernel = TARGETS["ab_ring_one_consumer_releases_before_reading"].build()
    assert check_kernel(kernel, options=Options(ignore=RACES)).label == "verified"


def test_named_barrier_count_short_by_a_warpgroup_also_leaves_a_phase_open():
    kernel = TARGETS["named_barrier_count_misses_a_warpgroup"].build()
    assert check_kernel(kernel, options=Options(ignore=RACES)).label == "violation:BP144"


def test_a_per_tile_phase_restart_is_harmless_exactly_when_each_slot_is_used_evenly():
    """Restarting stage and phase at each tile equals carrying them iff every slot is used an
    even number of times per tile, i.e. ksteps is a multiple of 2 * stages."""
    kernel = TARGETS["persistent_resets_phase_per_tile"].build()
    for stages in (1, 2, 3):
        for ksteps in range(1, 7):
            got = check_kernel(kernel, {"tiles": 2, "ksteps": ksteps, "stages": stages})
            harmless = ksteps % (2 * stages) == 0
            assert (got.verdict == "verified") == harmless, (stages, ksteps, got.label)


def test_prove_covers_the_producer_start_phase_for_every_stage_and_trip_count():
    kernel = TARGETS["producer_starts_at_phase_one"].build()
    got = prove_kernel(kernel, {}, Options(Limits(timeout=60)), "producer_starts_at_phase_one",
                       SimpleNamespace(symbolic=[]))
    assert got.verdict == "proved", got.reason


def test_a_race_at_the_exit_is_named_before_the_exit_rules_by_every_engine():
    """The state after the copy is issued breaks BP200, BP105 and BP130 at once: the Python
    explorer, the compiled core (when built) and the independent reference all name the race;
    with races ignored the exit rules are what is left."""
    from barrierproof.checker.engines import compiled
    from barrierproof.checker.engines.explore import explore
    from barrierproof.model import reference
    from barrierproof.model.semantics import System
    kernel = TARGETS["bias_read_without_waiting_for_its_load"].build()
    system = System(kernel)
    end = system.initial_state()
    for action in (0, 0):
        end = system.step(end, action)[0]
    assert {v.code for v in system.state_violations(end)} == {"BP105", "BP130", "BP200"}
    for core in ["python"] + (["compiled"] if compiled.available() else []):
        got = explore(system, Limits(max_states=1000), reduction=False, order="bfs", core=core)
        assert got.violation.code == "BP200", (core, got.violation)
    found = check_kernel(kernel)
    assert reference.replay_trace(kernel, found.trace).code == "BP200"
    assert check_kernel(kernel, options=Options(ignore=RACES)).codes[0] == "BP105"


def test_a_bit_mask_in_a_protocol_expression_is_refused_at_its_line(tmp_path, capsys):
    """`&` and `|` are logical in the DSL: `i & (stages - 1)` would be read as true or false,
    not as bits. It is an input error at the user's line, with the arithmetic to write."""
    path = tmp_path / "mask.py"
    path.write_text("from barrierproof import protocol\n\n\n@protocol\ndef p(k, stages=4):\n"
                    "    k.threads(1)\n    bar = k.Barrier(num_barriers=stages)\n"
                    "    with k.loop(8) as i:\n        k.arrive(bar.at[i & (stages - 1)])\n")
    assert main(["check", "--no-cache", str(path)]) == 3
    out, err = capsys.readouterr()
    assert "mask.py:9" in out + err and "is a number, not a truth value" in out + err
    assert "i % stages" in out + err


def test_a_typo_in_the_target_name_suggests_the_closest(capsys):
    assert main(["check", FIELD + "::producer_starts_at_phase_on"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "did you mean 'producer_starts_at_phase_one'?" in err


BAD = {
    "raises": ("""
        @protocol
        def p(k, steps=2):
            k.threads(2, name="wg")
            k.Barrier()
            {}["slot"]
        """, "KeyError: 'slot'"),
    "negative_count": ("""
        @protocol
        def p(k):
            k.threads(2, name="wg")
            bar = k.Barrier(num_arrivals=-1)
            with k.when(k.thread == 0):
                k.barrier_arrive(bar)
        """, "num_arrivals=-1: an mbarrier needs 1..1048575 arrivals"),
    "negative_bytes": ("""
        @protocol
        def p(k):
            k.threads(2, name="wg")
            bar = k.Barrier()
            with k.when(k.thread == 0):
                k.copy_gmem_to_smem(bar, bytes=-4096)
            with k.otherwise():
                k.barrier_wait(bar)
        """, "copy of -4096 bytes is outside the tx-count range 0..1048575"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_protocols_get_one_located_error(tmp_path, case, capsys):
    import textwrap
    body, needle = BAD[case]
    path = tmp_path / f"{case}.py"
    path.write_text("from barrierproof import protocol\n" + textwrap.dedent(body))
    assert main(["check", str(path)]) == 3
    out, err = capsys.readouterr()
    text = out + err
    assert "Traceback" not in text and needle in text, text
    assert f"{case}.py:" in text and "help:" in text, text
