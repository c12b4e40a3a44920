"""Mosaic GPU kernels nobody on the project wrote for the checker (tests/unseen_pallas_kernels.py,
written in the style of JAX's shipped warp-specialized kernels): each verdict was derived from
the hardware rules before the check, and the diagnostics must name the access or barrier that
makes it."""

import os

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from barrierproof.checker.check import check_kernel
from barrierproof.model import pallas
from barrierproof.model.ir import ModelError, iter_ops

HERE = os.path.dirname(__file__)
MODULE = pallas.import_file(os.path.join(HERE, "unseen_pallas_kernels.py"))


def _kernel(name):
    (kernel,) = pallas.load(getattr(MODULE, name), name=name)
    return kernel


def _check(name, params=None):
    verdict = check_kernel(_kernel(name), params)
    return verdict, [d.one_line() for d in verdict.diagnostics]


@pytest.mark.parametrize("name", sorted(MODULE.EXPECT))
def test_unseen_kernel_verdict(name):
    verdict, lines = _check(name)
    assert verdict.label == MODULE.EXPECT[name], lines
    if verdict.verdict == "violation":
        assert verdict.trace is not None and verdict.trace.steps


def test_epilogue_reuse_names_the_store_and_the_overwrite():
    """One staging slot with wait_smem_to_gmem(1): the second tile's write races the first
    tile's bulk store, which reads the same slot."""
    verdict, lines = _check("ws_epilogue_slot_reused_early")
    (diag,) = verdict.diagnostics
    assert diag.code == "BP200" and "out_smem" in diag.message, lines


def test_wrong_slot_wait_is_a_race_and_an_overrun():
    """Consumer 1 waits `full` of the next slot: it reads the current slot while its copy may be
    landing (BP200), and with races ignored the current slot's `full` completes twice before
    consumer 1 observes it (BP101)."""
    from barrierproof.checker.check import Options
    kernel = _kernel("consumer_waits_next_slot")
    verdict = check_kernel(kernel)
    assert {d.code for d in verdict.diagnostics} == {"BP200"}
    assert any("ring[0" in d.message for d in verdict.diagnostics)
    quiet = check_kernel(kernel, options=Options(ignore=frozenset({"BP200"})))
    assert quiet.label == "violation:BP101", [d.one_line() for d in quiet.diagnostics]
    assert "full[0]" in quiet.diagnostics[0].message


def test_missing_release_leaves_one_of_two_arrivals():
    verdict, lines = _check("consumer_skips_last_release")
    (diag,) = verdict.diagnostics
    assert diag.code == "BP100", lines
    assert any("empty[" in d and "1/2 arrivals" in d for d in diag.details), diag.details


def test_any_length_ring_drains_the_slots_its_trip_count_names():
    """The drain indexes `empty` with `(n - 1 - j) % 3` where n is the data trip count: the
    index is written in the trip-count parameter (it used to be refused), so every length
    checks, and the forgotten release deadlocks at every length that has a step."""
    kernel = _kernel("two_consumer_ring_any_length")
    (param,) = kernel.params
    drains = [o for o in iter_ops(kernel.body)
              if o.kind == "barrier_wait" and o.barrier.alloc.name == "empty"
              and param in repr(o.barrier.index)]
    assert len(drains) == 3, [o.describe() for o in iter_ops(kernel.body)]
    for n in (0, 1, 2, 4):
        assert check_kernel(kernel, {param: n}).verdict == "verified", n
    buggy = _kernel("any_length_skips_last_release")
    assert check_kernel(buggy, {param: 0}).verdict == "verified"
    for n in (1, 2):
        assert check_kernel(buggy, {param: n}).label == "violation:BP100", n


def test_barrier_index_from_other_data_is_still_refused():
    """A slot read from memory that is no trip count or branch has no value to stand for."""
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((8,), jnp.float32),
                  scratch_types=[plgpu.Barrier(num_barriers=2)])
    def kernel(slot_ref, o_ref, bar):
        plgpu.barrier_arrive(bar.at[slot_ref[0] % 2])
        plgpu.barrier_wait(bar.at[slot_ref[0] % 2])

    with pytest.raises(ModelError, match="index of barrier `bar` depends on data"):
        pallas.load(lambda: kernel(jnp.array([1], jnp.int32)), name="data_slot")


def test_epilogue_without_final_wait_exits_with_the_store_in_flight():
    verdict, lines = _check("ws_epilogue_exits_in_flight")
    assert [d.code for d in verdict.diagnostics] == ["BP105"], lines


def test_manual_release_before_read_races_the_refill_of_that_half():
    """Only warpgroup 1 releases early: the race is on its rows (64:128) of the input slot."""
    verdict, lines = _check("ws_manual_release_before_read")
    (diag,) = verdict.diagnostics
    assert diag.code == "BP200", lines
    assert any("[0,64:128]" in d for d in diag.details), diag.details
    assert not any("[0,0:64]" in d for d in diag.details), diag.details


def test_manual_release_skipped_last_blocks_the_pipeline_drain():
    """The pipeline's memory warpgroup waits every consumed barrier before it exits; the last
    step's slot (5 % 4 = 1) gets one of its two arrivals."""
    verdict, lines = _check("ws_manual_release_skipped_last")
    (diag,) = verdict.diagnostics
    assert diag.code == "BP100", lines
    assert any("consumed_barrier" in d and "[1]" in d and "1/2 arrivals" in d
               for d in diag.details), diag.details


def _flag_slot(wait_shift):
    """A slot computed from data that decides a branch: the data becomes a grid axis checked
    value by value, and the slot follows it."""
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((8,), jnp.float32),
                  scratch_types=[plgpu.Barrier(num_barriers=2)])
    def kernel(f_ref, o_ref, bar):
        f = f_ref[0]

        @pl.when(f > 0)
        def _():
            plgpu.barrier_arrive(bar.at[f % 2])
            plgpu.barrier_wait(bar.at[(f + wait_shift) % 2])

    (k,) = pallas.load(lambda: kernel(jnp.array([1], jnp.int32)), name="flag_slot")
    return k


def test_barrier_index_over_branch_data_follows_the_grid_axis():
    assert check_kernel(_flag_slot(0)).verdict == "verified"
    wrong = check_kernel(_flag_slot(1))
    assert wrong.label == "violation:BP100"
    assert any("bar[" in d for d in wrong.diagnostics[0].details)


def test_two_copies_on_a_one_arrival_barrier():
    """Each problem the single count makes, one behind the other: an arrival on a phase with no
    arrival left (BP121), the second completion before the consumer's wait (BP101, and as its
    first wait BP102), the read of the B tile while it lands (BP200, naming the B tile's copy:
    each copy has its own in-flight counter)."""
    from barrierproof.checker.check import Options
    kernel = _kernel("two_operand_loads_counted_once")
    labels = []
    for ignored in ((), ("BP121",), ("BP121", "BP101"), ("BP121", "BP101", "BP102")):
        labels.append(check_kernel(kernel, options=Options(ignore=frozenset(ignored))).label)
    assert labels == ["violation:BP121", "violation:BP101", "violation:BP102",
                      "violation:BP200"]
    race = check_kernel(kernel, options=Options(ignore=frozenset({"BP121", "BP101", "BP102"})))
    assert "a TMA copy writes b_ring[0]" in race.diagnostics[0].message


def test_one_full_barrier_names_the_copy_that_lands():
    """Each copy into `ring` has its own in-flight counter on `full`: a landing step names its
    destination, so a trace says which buffer is written until when."""
    from barrierproof.model.semantics import compile_systems
    (system,) = compile_systems(_kernel("one_full_barrier_seen"))
    dests = sorted(s.dest for s in system.slots if system.instances[s.inst].name == "full")
    assert dests == ["ring[0]", "ring[1]"]
