"""Buffers at constant slots (partition.py `split_constant_buffers`): a ping-pong's Q tile per
half, `q[0]` filled on `ready[0]` and released through `empty[0]`, `q[1]` on the other slot.
Split into one buffer per slot beside the Q ring's barriers split per slot, each half's slot
is judged by the class of its own barriers. The split must be the same program (the
explorer's verdict and first rule at every point of a grid), and `prove` must agree with the
explorer on a correct twin and on one that releases a slot before its MMAs read it."""

from __future__ import annotations

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.model.dsl import protocol

TILES = 2


def _q_halves(k, blocks, early_release):
    """A loader filling Q's two halves once per tile (Python-unrolled tiles), an MMA thread
    reading `q[h]` in each of `blocks` QK MMAs into `s[h]` and releasing Q's slot by a commit
    after them, and one softmax thread per half reading `s[h]` (two hand-offs each way, as the
    Gluon attention's halves). `early_release`: the MMA thread commits `empty[0]` before the
    first tile's MMAs, so the loader may refill `q[0]` while they read it."""
    k.threads(4, name="wg")
    k.assume(blocks >= 1)
    ready = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2, orders_tensor_core=True)
    s_ready = [k.Barrier(num_arrivals=1, orders_tensor_core=True) for _ in range(2)]
    s_free = [k.Barrier(num_arrivals=1) for _ in range(2)]
    p_ready = [k.Barrier(num_arrivals=1) for _ in range(2)]
    p_free = [k.Barrier(num_arrivals=1) for _ in range(2)]
    q = k.SMEM(slots=2, name="q")
    s = k.TMEM(slots=2, name="s")
    with k.when(k.thread == 0):
        for tile in range(TILES + 1):
            for h in range(2):
                k.wait_parity(empty.at[h], (tile + 1) % 2)
                if tile < TILES:
                    k.arrive_expect_tx(ready.at[h], 4096)
                    k.tma_load(ready.at[h], 4096, dst=q.at[h])
    with k.when(k.thread == 1):
        for tile in range(TILES):
            for h in range(2):
                k.wait_parity(ready.at[h], tile % 2)
            if early_release and tile == 0:
                k.tcgen05_commit_arrive(empty.at[0])
            with k.loop(blocks) as i:
                n = tile * blocks + i
                for h in range(2):
                    k.wait_parity(s_free[h], (n + 1) % 2)
                    k.tcgen05_mma(a=q.at[h], acc=s.at[h])
                    k.tcgen05_commit_arrive(s_ready[h])
                    k.wait_parity(p_ready[h], n % 2)
                    k.arrive(p_free[h])
            for h in range(2):
                if not (early_release and tile == 0 and h == 0):
                    k.tcgen05_commit_arrive(empty.at[h])
    for h in range(2):
        with k.when(k.thread == 2 + h):
            for tile in range(TILES):
                with k.loop(blocks) as i:
                    n = tile * blocks + i
                    k.wait_parity(s_ready[h], n % 2)
                    k.read(s.at[h])
                    k.arrive(s_free[h])
                    k.wait_parity(p_free[h], (n + 1) % 2)
                    k.arrive(p_ready[h])


@protocol(expect="verified", symbolic=("blocks",))
def q_halves(k, blocks=2):
    _q_halves(k, blocks, False)


@protocol(expect="violation:BP200", symbolic=("blocks",))
def q_halves_released_early(k, blocks=2):
    _q_halves(k, blocks, True)


def test_the_split_is_the_same_program_on_a_grid():
    """Each slot of `q` and `s` a buffer of its own, beside `ready` and `empty` split per slot:
    the explorer's verdict and first rule at blocks = 1..3 are the kernel's, on the correct
    twin and on the one that races (BP200 from blocks = 1 on)."""
    from barrierproof.checker.symbolic.partition import (split_constant_arrays,
                                                         split_constant_buffers)
    for proto, want in ((q_halves, "verified"), (q_halves_released_early, "violation")):
        k = proto.build()
        split = split_constant_buffers(split_constant_arrays(k, {}), {})
        assert sorted(b.name for b in split.buffers) == ["q[0]", "q[1]", "s[0]", "s[1]"]
        for b in (1, 2, 3):
            got, ref = check_kernel(split, {"blocks": b}), check_kernel(k, {"blocks": b})
            assert (got.verdict, got.codes[:1]) == (ref.verdict, ref.codes[:1]) and \
                ref.verdict == want, (b, got.label, ref.label)
            assert want == "verified" or ref.codes[:1] == ["BP200"], ref.label


def test_a_buffer_indexed_by_a_loop_is_not_split():
    """A slot that moves (`q.at[i % 2]`) names no constant slot: the buffer stays whole."""
    from barrierproof.checker.symbolic.partition import split_constant_buffers

    @protocol(expect="verified", symbolic=("n",))
    def moving(k, n=2):
        full = k.Barrier(num_arrivals=1, num_barriers=2)
        q = k.SMEM(slots=2, name="q")
        with k.loop(n) as i:
            k.copy_gmem_to_smem(full.at[i % 2], bytes=64, dst=q.at[i % 2])
            k.wait_parity(full.at[i % 2], (i // 2) % 2)
            k.read(q.at[0])

    k = moving.build()
    assert split_constant_buffers(k, {}) is k


@pytest.mark.slow
def test_prove_agrees_with_the_explorer_on_both_twins():
    """~1-3 min: the correct twin is proved for every block count (the explorer verifies
    blocks = 1..4), its races by the halves' classes with `q[0]` judged by `ready[0]` and
    `empty[0]`; the racy twin's race proof on its own (no search first) is not `proved`, and
    `prove` finds the explorer's smallest breaking count."""
    from barrierproof.checker.symbolic.budget import Budget
    from barrierproof.checker.symbolic.prove import prove_kernel, prove_races
    k = q_halves.build()
    for b in range(1, 5):
        assert check_kernel(k, {"blocks": b}).verdict == "verified", b
    v = prove_kernel(k)
    assert v.verdict == "proved", v.coverage
    assert "barriers (ready[0], empty[0])" in v.coverage.split("race-free")[1], v.coverage
    races = prove_races(q_halves_released_early.build(), ["blocks"], {}, Budget(60))
    assert races.status != "proved", races
    bad = q_halves_released_early.build()
    v = prove_kernel(bad)
    assert v.verdict == "violation" and v.params["blocks"] == 1, v.label
    assert check_kernel(bad, {"blocks": 1}).codes[:1] == ["BP200"]


# -- a ring at numbered slots and its buffer: the K/V ring of the Gluon attention -------------

def _kv_ring_buffer(k, stages, blocks, release_first):
    """K then V of one ring of `stages` per block into the slots of `kv` (two positions per
    iteration, as the Gluon attention's), an MMA thread reading both slots. `release_first`:
    it arrives on V's `empty` before reading V, so the loader may refill the slot meanwhile."""
    k.threads(2, name="wg")
    k.assume(blocks >= 0)
    ready = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    kv = k.SMEM(slots=stages, name="kv")
    with k.when(k.thread == 0):
        with k.loop(blocks) as i:
            for j in range(2):
                n = 2 * i + j
                k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
                k.arrive_expect_tx(ready.at[n % stages], 4096)
                k.tma_load(ready.at[n % stages], 4096, dst=kv.at[n % stages])
    with k.when(k.thread == 1):
        with k.loop(blocks) as i:
            k.wait_parity(ready.at[(2 * i) % stages], ((2 * i) // stages) % 2)
            k.read(kv.at[(2 * i) % stages])
            k.arrive(empty.at[(2 * i) % stages])
            v = ((2 * i) % stages + 1) % stages
            k.wait_parity(ready.at[v], ((2 * i + 1) // stages) % 2)
            if release_first:
                k.arrive(empty.at[v])
            k.read(kv.at[v])
            if not release_first:
                k.arrive(empty.at[v])


@protocol(expect="verified", symbolic=("blocks",))
def kv_ring_buffer(k, stages=3, blocks=4):
    _kv_ring_buffer(k, stages, blocks, False)


@protocol(expect="violation:BP200", symbolic=("blocks",))
def kv_ring_buffer_released_first(k, stages=3, blocks=4):
    _kv_ring_buffer(k, stages, blocks, True)


def test_a_ring_buffer_at_numbered_slots_is_numbered_as_its_barriers():
    """~2-10 s: strip-mined to whole laps (stride_split.py), every case indexes `kv` by
    numbers, as `ready` and `empty` (number_slots.py, each slot checked by Z3), and keeps the
    explorer's verdict and first rule at q = 0..2, on the correct ring and on its racy twin
    (BP200 once a V slot is refilled)."""
    from barrierproof.checker.symbolic.stride_split import stride_cases
    from barrierproof.model.ir import Const
    for proto, want in ((kv_ring_buffer, {"verified"}),
                        (kv_ring_buffer_released_first, {"verified", "violation"})):
        k = proto.build()
        fixed = {"stages": 3}
        cases, why = stride_cases(k, ["blocks"], fixed)
        assert why is None and len(cases) == 3, why
        seen = set()
        for case in cases:
            refs = [r for op in case.kernel.ops() for r in op.reads + op.writes]
            assert refs and all(isinstance(r.index[0], Const) for r in refs), refs
            (q,) = case.symbolic
            m, b = 3, int(case.label.rsplit("+ ", 1)[1])
            for x in range(3):
                got = check_kernel(case.kernel, {**fixed, q: x})
                ref = check_kernel(k, {**fixed, "blocks": m * x + b})
                assert (got.verdict, got.codes[:1]) == (ref.verdict, ref.codes[:1]), \
                    (case.label, x, got.label, ref.label)
                seen.add(ref.verdict)
                assert ref.verdict == "verified" or ref.codes[:1] == ["BP200"], ref.label
        assert seen == want, seen


# -- an access whose region may reach past its slot -------------------------------------------

@protocol(expect="verified", symbolic=("n",))
def region_at_n(k, n=0):
    """`q[0]` filled at columns n, n + 1 of its 4 (past the slot from n = 3 on), `q[1]` whole;
    the reader waits for both copies."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    q = k.SMEM(slots=(2, 4), name="q")
    with k.when(k.thread == 0):
        k.copy_gmem_to_smem(full.at[0], bytes=64, dst=q.at[0, k.ds(n, 2)])
        k.copy_gmem_to_smem(full.at[1], bytes=64, dst=q.at[1])
    with k.when(k.thread == 1):
        for h in range(2):
            k.wait_parity(full.at[h], 0)
            k.read(q.at[h])


def test_a_region_that_may_reach_past_its_slot_is_not_split():
    """Split per slot only where every region lies inside its slot at the values fixed: with
    n symbolic, or at n = 3 (columns 3..4 of 4, which the explorer rejects as out of range),
    `q` stays whole; at n = 0..2 it is split, and the split is the explorer's program."""
    from barrierproof.checker.symbolic.partition import split_constant_buffers
    k = region_at_n.build()
    assert split_constant_buffers(k, {}) is k
    assert split_constant_buffers(k, {"n": 3}) is k
    assert check_kernel(k, {"n": 3}).verdict == "error"
    for n in (0, 1, 2):
        split = split_constant_buffers(k, {"n": n})
        assert sorted(b.name for b in split.buffers) == ["q[0]", "q[1]"]
        got, ref = check_kernel(split, {"n": n}), check_kernel(k, {"n": n})
        assert (got.verdict, got.codes[:1]) == (ref.verdict, ref.codes[:1]) == ("verified", []), \
            (n, got.label, ref.label)
