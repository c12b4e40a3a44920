"""Partial-order reduction by persistent sets (checker/engines/por.py) on kernels whose memory is
race-checked (BP200/BP201), with named and cluster hardware barriers, warp regions and cluster
blocks: the same verdict, code and counterexample length as the search without it, on every
example with memory and on random protocols."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barrierproof.checker.engines.explore import explore
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import (BarrierAlloc, BarrierRef, Const, Kernel, MemAlloc, MemRef, Op,
                                   Var, WarpRegion, When)
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System, compile_systems

from test_examples import TARGETS


def _same(system, ignore=frozenset()):
    with_por = explore(system, ignore=ignore)
    without = explore(system, partial_order=False, ignore=ignore)
    full = explore(system, reduction=False, ignore=ignore)
    assert with_por.status == without.status == full.status, \
        (with_por.status, without.status, full.status)
    if full.status == "violation":
        assert with_por.violation.code == without.violation.code == full.violation.code
        assert len(with_por.actions) == len(full.actions)         # still shortest
        run = replay(system, with_por.actions, ignore, with_por.witness)
        assert run.violation is not None and run.violation.code == with_por.violation.code
    return with_por, without, full


MEMORY_TARGETS = [t for t in TARGETS if t.build().buffers]


@pytest.mark.parametrize("target", MEMORY_TARGETS, ids=lambda t: t.name)
def test_race_examples_keep_their_verdicts(target):
    systems = compile_systems(target.build())
    for system in systems:
        assert system.memory is not None
        _same(system)


def test_there_are_race_examples():
    assert len(MEMORY_TARGETS) >= 6


SMEM = MemAlloc("tile", "smem", (Const(2),), scalar=False)
TMEM = MemAlloc("acc", "tmem", (Const(1),), scalar=True)
KINDS = ["barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_mma",
         "tcgen05_commit_arrive", "read", "write", "read_tmem", "bar_sync", "unmodeled"]


@st.composite
def memory_protocols(draw):
    """Two roles over one or two barriers, a two-slot SMEM ring and a TMEM accumulator: copies
    write slots, MMAs read them and write the accumulator, threads load and store; optionally a
    named barrier every thread syncs on, a warp region, or a cluster of two blocks."""
    blocks = draw(st.integers(1, 2))
    bars = tuple(BarrierAlloc(f"b{i}", Const(draw(st.integers(1, 2))),
                              (Const(draw(st.integers(1, 2))),), orders_tensor_core=True,
                              scalar=False) for i in range(draw(st.integers(1, 2))))
    n_threads = draw(st.integers(2, 3 if blocks == 1 else 2))

    def op():
        kind = draw(st.sampled_from(KINDS))
        alloc = draw(st.sampled_from(bars))
        ref = BarrierRef(alloc, (Const(draw(st.integers(0, alloc.shape[0].value - 1))),))
        slot = MemRef(SMEM, (Const(draw(st.integers(0, 1))),))
        if kind == "read":
            return Op("read", reads=(slot,))
        if kind == "write":
            return Op("write", writes=(slot,))
        if kind == "read_tmem":
            return Op("read", reads=(MemRef(TMEM),))
        if kind == "bar_sync":
            return Op("bar_sync", None, count=Const(0), bar_id=Const(0), name="syncthreads")
        if kind == "unmodeled":
            return Op("unmodeled", name="fence")
        if kind == "copy_gmem_to_smem":
            return Op(kind, ref, bytes=Const(draw(st.sampled_from([0, 64]))), writes=(slot,))
        if kind == "tcgen05_mma":
            return Op(kind, ref if draw(st.booleans()) else None, reads=(slot,),
                      writes=(MemRef(TMEM),))
        return Op(kind, ref)

    def role():
        body = tuple(op() for _ in range(draw(st.integers(1, 4))))
        if blocks == 1 and draw(st.integers(0, 3)) == 0:
            body = (WarpRegion("w", (op(),)),) + body
        return body

    body = (When(Var("t") == 0, role(), role()),)
    syncs = sum(1 for o in _ops(body) if o.kind == "bar_sync")
    if syncs:
        # every thread reaches the same number of syncthreads (else the verdict is trivially
        # BP144): pad the role with fewer
        body = _balance(body)
    return Kernel("random_memory", body, bars, (SMEM, TMEM), num_threads=Const(n_threads),
                  thread_axis="t", num_warps=2, warp_axis="w",
                  cluster=(("x", Const(blocks)),) if blocks > 1 else ())


def _ops(body):
    for s in body:
        if isinstance(s, Op):
            yield s
        elif isinstance(s, When):
            yield from _ops(s.then)
            yield from _ops(s.orelse)
        elif isinstance(s, WarpRegion):
            yield from _ops(s.body)


def _balance(body):
    when = body[0]
    a = sum(1 for o in _ops(when.then) if o.kind == "bar_sync")
    b = sum(1 for o in _ops(when.orelse) if o.kind == "bar_sync")
    sync = Op("bar_sync", None, count=Const(0), bar_id=Const(0), name="syncthreads")
    return (When(when.cond, when.then + (sync,) * max(b - a, 0),
                 when.orelse + (sync,) * max(a - b, 0)),)


IGNORABLE = ["BP100", "BP103", "BP104", "BP105", "BP141", "BP200", "BP201"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memory_protocols(), st.sets(st.sampled_from(IGNORABLE), max_size=3))
def test_random_memory_protocols_keep_their_verdicts(kernel, ignore):
    """Also with codes ignored: a state that breaks only an ignored rule is explored further,
    so the reduction must keep what lies beyond it (an exit with copies still in flight, say)."""
    try:
        system = System(kernel)
    except ModelError:      # an input error of the generated protocol
        return
    _same(system, frozenset(ignore))


def test_reduction_stays_on_with_memory_and_named_barriers():
    # two independent producer/consumer pairs on their own barriers and slots, then a
    # syncthreads: the pairs interleave freely without the reduction
    bars = tuple(BarrierAlloc(f"full{i}", Const(1), (Const(1),), scalar=True) for i in range(2))
    slots = [MemRef(SMEM, (Const(i),)) for i in range(2)]
    sync = Op("bar_sync", None, count=Const(0), bar_id=Const(0), name="syncthreads")

    def pair(i):
        produce = (Op("copy_gmem_to_smem", BarrierRef(bars[i], ()), bytes=Const(64),
                      writes=(slots[i],)), Op("unmodeled", name="fence"), sync)
        consume = (Op("barrier_wait", BarrierRef(bars[i], ())), Op("read", reads=(slots[i],)),
                   Op("unmodeled", name="fence"), sync)
        return produce, consume

    (p0, c0), (p1, c1) = pair(0), pair(1)
    body = (When(Var("t") == 0, p0, ()), When(Var("t") == 1, c0, ()),
            When(Var("t") == 2, p1, ()), When(Var("t") == 3, c1, ()))
    kernel = Kernel("two_pairs", body, bars, (SMEM,), num_threads=Const(4), thread_axis="t")
    system = System(kernel)
    with_por, without, full = _same(system)
    assert with_por.status == "verified"
    assert with_por.states * 2 < without.states


def _cluster_ring(blocks, slot_of_block=None):
    """A TMA ring in every block of a cluster (one producer, one consumer), the consumers
    meeting at a ClusterBarrier after each step; the consumer reads the slot it waited for, or
    `slot_of_block(x)` (a slot that depends on the block: the blocks touch memory differently)."""
    full = BarrierAlloc("full", Const(1), (Const(2),), scalar=False)
    empty = BarrierAlloc("empty", Const(1), (Const(2),), scalar=False)
    meet = BarrierAlloc("meet", Const(1), (Const(1),), cluster=True, collective_axes=("x",))
    produce, consume = [], []
    for i in range(2):
        s = i % 2
        if i >= 2:
            produce.append(Op("barrier_wait", BarrierRef(empty, (Const(s),))))
        produce.append(Op("copy_gmem_to_smem", BarrierRef(full, (Const(s),)), bytes=Const(64),
                          writes=(MemRef(SMEM, (Const(s),)),)))
        read = (Op("read", reads=(MemRef(SMEM, (Const(s),)),)),)
        if slot_of_block is not None:
            read = (When(Var("x") == 0, (Op("read", reads=(MemRef(SMEM, (Const(0),)),)),),
                         (Op("read", reads=(MemRef(SMEM, (Const(1),)),)),)),)
        consume += [Op("barrier_wait", BarrierRef(full, (Const(s),))), *read,
                    Op("barrier_arrive", BarrierRef(empty, (Const(s),))),
                    Op("barrier_arrive", BarrierRef(meet, ())), Op("barrier_wait", BarrierRef(meet, ()))]
    for s in range(2):
        produce.append(Op("barrier_wait", BarrierRef(empty, (Const(s),))))
    body = (When(Var("t") == 0, tuple(produce), tuple(consume)),)
    return Kernel("cluster_ring", body, (full, empty, meet), (SMEM,), num_threads=Const(2),
                  thread_axis="t", cluster=(("x", Const(blocks)),))


def test_block_symmetry_renames_buffers_with_the_blocks():
    from barrierproof.checker.engines.symmetry import Symmetry
    system = System(_cluster_ring(3))
    assert len(Symmetry(system).blocks) == 6        # every permutation of the three blocks
    with_por, without, full = _same(system)
    without_blocks = explore(system, block_symmetry=False, partial_order=False)
    assert full.status == "verified"
    assert without.states * 3 < without_blocks.states


def test_blocks_that_touch_different_slots_are_not_permuted():
    from barrierproof.checker.engines.symmetry import Symmetry
    system = System(_cluster_ring(2, slot_of_block=True))
    assert Symmetry(system).blocks == []
    _same(system)


PALLAS_WITH_MEMORY = [("races.py", "ring_read_then_release"), ("races.py", "ring_release_then_read"),
                      ("jax_kernels.py", "hopper_matmul"), ("jax_kernels.py", "hopper_matmul_cluster"),
                      ("jax_kernels.py", "ragged_dot"), ("jax_kernels.py", "attention_forward"),
                      ("jax_kernels.py", "blackwell_matmul")]


@pytest.mark.parametrize("file,name", PALLAS_WITH_MEMORY, ids=lambda x: x)
def test_pallas_kernels_with_memory_keep_their_verdicts(file, name):
    """Kernels traced from JAX, whose memory effects come from the jaxpr: the same verdict,
    code and counterexample length with and without partial-order reduction (and for the
    small ones without any reduction)."""
    import os

    from barrierproof.model import pallas

    from conftest import EXAMPLES
    mod = pallas.import_file(os.path.join(EXAMPLES, "pallas", file))
    for kernel in pallas.load(getattr(mod, name), name=name):
        for system in compile_systems(kernel):
            assert system.memory is not None
            with_por = explore(system)
            without = explore(system, partial_order=False)
            assert with_por.status == without.status
            if without.status == "violation":
                assert with_por.violation.code == without.violation.code
                assert len(with_por.actions) == len(without.actions)
            assert with_por.states <= without.states
            if without.states < 5000:
                full = explore(system, reduction=False)
                assert full.status == with_por.status
