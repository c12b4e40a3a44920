"""A parameter that reaches the protocol only through a division by a block size is sampled where
the quotient changes, so `prove`'s search for the smallest breaking values and its explorer
cross-check see iterations (checker/symbolic/param_values.py)."""

from __future__ import annotations

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.param_values import sample_values
from barrierproof.checker.symbolic.prove import points, prove_kernel, smallest_points
from barrierproof.model.dsl import protocol


def rows(stale_after: bool):
    """One producer hands tiles of 128 rows to one consumer through a single-slot barrier; the
    buggy one lets the producer run ahead without backpressure (BP101 from the second tile)."""
    @protocol(symbolic=("n_ctx",))
    def handoff(k, n_ctx=512):
        k.threads(2, name="wg")
        k.assume(n_ctx >= 0)
        full = k.Barrier()
        empty = k.Barrier()
        with k.when(k.thread == 0):
            with k.loop(n_ctx // 128) as i:
                if not stale_after:
                    with k.when(i >= 1):
                        k.barrier_wait(empty)
                k.barrier_arrive(full)
        with k.otherwise():
            with k.loop(n_ctx // 128) as j:
                k.barrier_wait(full)
                with k.when(j + 1 < n_ctx // 128):       # the last tile needs no release
                    k.barrier_arrive(empty)
    return handoff.build()


def test_a_quotient_only_parameter_is_sampled_where_the_quotient_changes():
    kernel = rows(stale_after=True)
    assert sample_values(kernel, "n_ctx", {}, 4) == [0, 128, 256, 384]
    assert [p["n_ctx"] for p in points(kernel, ["n_ctx"], {}, 3)] == [0, 128, 256, 384]
    assert [p["n_ctx"] for p in smallest_points(kernel, ["n_ctx"], {})] == [0, 128]


def test_a_ceiling_division_keeps_the_ragged_values():
    @protocol(symbolic=("k_dim",))
    def ragged(k, k_dim=100):
        k.threads(1)
        bar = k.Barrier()
        with k.loop((k_dim + 63) // 64):
            k.barrier_arrive(bar)
            k.barrier_wait(bar)
    assert sample_values(ragged.build(), "k_dim", {}, 4) == [0, 1, 65, 129]


def test_a_parameter_used_anywhere_else_keeps_every_small_value():
    @protocol(symbolic=("n",))
    def counted(k, n=256):
        k.threads(2)
        bar = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            with k.loop(n // 128):
                k.barrier_arrive(bar)
            k.copy_gmem_to_smem(bar, bytes=n)       # n itself matters here
        with k.otherwise():
            with k.loop(n // 128 + 1):
                k.barrier_wait(bar)
    assert sample_values(counted.build(), "n", {}, 5) == [0, 1, 2, 3, 4]


def test_prove_refutes_a_bug_that_needs_two_tiles_at_its_smallest_values():
    kernel = rows(stale_after=True)
    verdict = prove_kernel(kernel, options=Options(Limits(timeout=20)))
    assert verdict.verdict == "violation", verdict.coverage
    assert verdict.params == {"n_ctx": 256}
    # the explorer agrees at those values, and finds nothing at one tile
    assert check_kernel(kernel, {"n_ctx": 256}).verdict == "violation"
    assert check_kernel(kernel, {"n_ctx": 128}).verdict == "verified"


def test_the_correct_handoff_is_still_proved():
    # the same verdict whatever was proved before it in the process (budget.own_context)
    verdict = prove_kernel(rows(stale_after=False), options=Options(Limits(timeout=20)))
    assert verdict.verdict == "proved", verdict.coverage
    assert "n_ctx=128" in " ".join(verdict.notes)      # the cross-check ran with a tile
