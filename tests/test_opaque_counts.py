"""A non-linear trip count read nowhere else is a parameter of its own
(checker/symbolic/opaque_counts.py): proved for every count, the explorer agreeing on a grid
of the original parameters; a count read beside its loop is left alone."""

import itertools

from barrierproof import protocol
from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.opaque_counts import opaque_trip_counts
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.ir import Loop, Var


def _handoff(k, tiles_m, tiles_n, nprog, extra_read=False):
    """A static schedule's share of an m x n grid of tiles, handed over one by one."""
    k.threads(2, name="wg")
    k.assume(nprog >= 1)
    full = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=1)
    share = (tiles_m * tiles_n + nprog - 1) // nprog
    with k.when(k.thread == 0):
        with k.loop(share):
            k.barrier_arrive(full)
            k.barrier_wait(empty)
    with k.otherwise():
        with k.loop(share):
            k.barrier_wait(full)
            k.barrier_arrive(empty)
        if extra_read:      # one more wait when the grid is wide: reads tiles_n beside the loop
            with k.when(tiles_n >= 3):
                k.barrier_wait(full)


def _kernel(extra_read=False):
    def build(k, tiles_m=2, tiles_n=3, nprog=2):
        _handoff(k, tiles_m, tiles_n, nprog, extra_read)
    return protocol(symbolic=("tiles_m", "tiles_n", "nprog"))(build).build()


def test_a_schedules_share_is_one_parameter_and_the_explorer_agrees_on_a_grid():
    kernel = _kernel()
    new, symbolic, notes = opaque_trip_counts(kernel, ["tiles_m", "tiles_n", "nprog"], {})
    assert symbolic == ["trips"] and len(notes) == 1
    loops = [s for s in new.body for s in getattr(s, "then", ()) + getattr(s, "orelse", ())
             if isinstance(s, Loop)]
    assert loops and all(repr(loop.trip) == repr(Var("trips")) for loop in loops)
    for m, n, p in itertools.product(range(0, 3), range(0, 4), range(1, 4)):
        share = (m * n + p - 1) // p
        old = check_kernel(kernel, {"tiles_m": m, "tiles_n": n, "nprog": p})
        one = check_kernel(new, {"trips": max(share, 0)})
        assert old.verdict == one.verdict == "verified", (m, n, p)
        assert old.states == one.states, (m, n, p)
    proved = prove_kernel(kernel)
    assert proved.verdict == "proved", (proved.coverage, proved.notes)
    assert any("opaque_counts.py" in n for n in [proved.coverage, *proved.notes]), proved.notes


def test_a_count_whose_parameters_are_read_beside_its_loop_is_left_alone():
    kernel = _kernel(extra_read=True)
    new, symbolic, notes = opaque_trip_counts(kernel, ["tiles_m", "tiles_n", "nprog"], {})
    assert new is kernel and notes == [] and symbolic == ["tiles_m", "tiles_n", "nprog"]
    found = prove_kernel(kernel)
    assert found.verdict == "violation"          # the extra wait hangs when tiles_n >= 3
