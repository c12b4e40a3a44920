"""TMA copies that complete on one barrier instance: parts of one transaction where they write
disjoint cells (a tile split among copies) or are all multicast (each block's share written as
the whole destination), a race (BP200) where copies of two threads write a common cell. `check`
finds it, the independent reference replays it, and `prove` never answers `proved` there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol


def _two_loaders(k, steps, second_at):
    """Threads 0 and 1 each load two rows of every ring slot on one `full` barrier; thread 2
    reads the slot. Thread 1's rows start at `second_at`."""
    k.threads(3, name="wg")
    k.assume(steps >= 2)
    full = k.Barrier(num_arrivals=2, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    tiles = k.SMEM(slots=(2, 4))
    with k.when(k.thread < 2):
        with k.loop(steps) as i:
            with k.when(i >= 2):
                k.barrier_wait(empty.at[i % 2])
            k.arrive_expect_tx(full.at[i % 2], 2048)
            with k.when(k.thread == 0):
                k.tma_load(full.at[i % 2], 2048, dst=tiles.at[i % 2, k.ds(0, 2)])
            with k.otherwise():
                k.tma_load(full.at[i % 2], 2048, dst=tiles.at[i % 2, k.ds(second_at, 2)])
        with k.loop(2) as j:
            k.barrier_wait(empty.at[(steps - 2 + j) % 2])
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % 2])
            k.read(tiles.at[i % 2])
            k.barrier_arrive(empty.at[i % 2])


@protocol(expect="violation:BP200", symbolic=("steps",))
def same_rows(k, steps=2):
    """Both loaders write rows 0..1 of the slot: two writers of one byte, not one transaction."""
    _two_loaders(k, steps, 0)


@protocol(expect="verified", symbolic=("steps",))
def split_rows(k, steps=2):
    """Rows 0..1 and 2..3: disjoint parts of one transaction."""
    _two_loaders(k, steps, 2)


@pytest.mark.parametrize("steps", [2, 3, 4])
def test_two_threads_writing_one_slot_race(steps):
    v = check_kernel(same_rows.build(), dict(steps=steps))
    assert v.label == "violation:BP200", v.label
    assert "TMA copy" in v.diagnostics[0].message
    assert check_kernel(split_rows.build(), dict(steps=steps)).verdict == "verified"


def test_prove_never_proves_the_overlapping_loaders():
    v = prove_kernel(same_rows.build(), {}, Options(), None,
                     SimpleNamespace(symbolic=["steps"], search_first=False))
    assert v.verdict != "proved", (v.label, v.coverage)
    assert v.label in ("violation:BP200", "unknown"), v.label
    # the race proof itself meets the two writers (not only the search after it)
    assert any("TMA copies of two threads in flight" in n for n in v.notes), v.notes
    assert not any("a gap in the prover" in n for n in v.notes), v.notes
