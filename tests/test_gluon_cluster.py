"""Multi-CTA Gluon kernels (model/gluon/cluster.py): the CTAs as the blocks of a cluster,
per-CTA barriers, `from_cta` routing, multicast TMA loads, the cluster barrier, and BP190 for
every CTA layout the frontend does not read."""

import os

import pytest

pytest.importorskip("triton")

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (cluster, mbarrier,  # noqa: E402
                                                             tma)

from barrierproof.checker.check import check_kernel  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model.gluon import Launch, load, tensor_desc  # noqa: E402
from barrierproof.model.ir import When, walk  # noqa: E402
from barrierproof.model import primitives as K  # noqa: E402

from conftest import EXAMPLES  # noqa: E402

RING = os.path.join(EXAMPLES, "gluon", "multicta_ring.py")


def _whole(shape=(64, 64)):
    layout = gl.NVMMASharedLayout.get_default_for(list(shape), gl.float16,
                                                  cga_layout=[[0, 0]])
    return tensor_desc("fp16", list(shape), layout)


def _whole4(shape=(64, 64)):
    layout = gl.NVMMASharedLayout.get_default_for(list(shape), gl.float16,
                                                  cga_layout=[[0, 0], [0, 0]])
    return tensor_desc("fp16", list(shape), layout)


def test_the_ring_is_a_cluster_of_two_ctas_with_remote_releases_and_multicast_loads():
    (target,) = resolve(RING + "::ring")
    kernel = target.build()
    assert [(a, n.value) for a, n in kernel.cluster] == [("cta", 2)]
    assert not [op for op in kernel.ops() if op.kind == K.UNMODELED]
    arrives = [op for op in kernel.ops() if op.kind == K.ARRIVE]
    # from_cta=0: each CTA releases the slot on both CTAs' `empty` barriers
    assert sorted(op.barrier.block[0].value for op in arrives) == [0, 1]
    assert all(op.barrier.alloc.name == "empty" for op in arrives)
    (load_op,) = [op for op in kernel.ops() if op.kind == K.TMA_LOAD]
    assert load_op.collective_axes == ("cta",) and load_op.bytes.value == 64 * 64 * 2
    (expect,) = [op for op in kernel.ops() if op.kind == K.ARRIVE_EXPECT_TX]
    assert expect.barrier.block is None          # the CTA's own barrier, the whole tile
    assert {b.name: int(b.shape[0].value) for b in kernel.barriers} == {"ready": 2, "empty": 2}


@gluon.jit
def routed(desc, FROM: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=4)
    mbarrier.arrive(bar, from_cta=FROM)


@pytest.mark.parametrize("keep", range(4))
def test_from_cta_keeps_its_bits_and_broadcasts_over_the_others(keep):
    """In a cluster of 4, CTA c's arrival with from_cta=m reaches every CTA d with
    d & m == c & m: checked for every sender and every mask."""
    kernel = load(Launch(routed, args=dict(desc=_whole4(), FROM=keep), num_ctas=4))
    assert not [op for op in kernel.ops() if op.kind == K.UNMODELED]
    whens = [s for s in walk(kernel.body) if isinstance(s, When) and
             any(getattr(t, "kind", None) == K.ARRIVE for t in s.then)]
    for c in range(4):
        wanted = {d for d in range(4) if d & keep == c & keep}
        if keep == 3:                # the default: the CTA's own barrier
            (op,) = [op for op in kernel.ops() if op.kind == K.ARRIVE]
            assert op.barrier.block is None
            continue
        if whens:
            (branch,) = [w for w in whens if w.cond.rhs.value == c]
            ops = branch.then
        else:
            ops = [op for op in kernel.ops() if op.kind == K.ARRIVE]
        assert {op.barrier.block[0].value for op in ops} == wanted, (c, keep)


@gluon.jit
def leader_barrier(desc):
    bar = mbarrier.allocate_mbarrier(two_ctas=True)
    mbarrier.init(bar, count=1)
    mbarrier.arrive(bar)
    mbarrier.wait(bar, 0)


def test_a_barrier_shared_by_a_pair_of_ctas_is_bp190_at_its_init_and_uses():
    kernel = load(Launch(leader_barrier, args=dict(desc=_whole()), num_ctas=2))
    unmodeled = [op for op in kernel.ops() if op.kind == K.UNMODELED]
    assert len(unmodeled) == 3 and all("one barrier per CTA" in op.name for op in unmodeled)
    assert check_kernel(kernel).verdict == "unknown"


@gluon.jit
def synced(desc, SYNC: gl.constexpr):
    buf = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = mbarrier.allocate_mbarrier()
    done = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    mbarrier.init(done, count=2)
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load(desc, [0, 0], bar, buf, multicast=True)
    mbarrier.wait(bar, 0)
    mbarrier.arrive(done, from_cta=0)       # nobody waits for it
    if SYNC:
        cluster.barrier()


def test_the_cluster_barrier_keeps_a_cta_alive_for_its_peers_arrival():
    """Both CTAs arrive on both `done` barriers after their load: without a cluster barrier a CTA may
    exit before its peer's arrival lands (BP146); with one, none exits early."""
    bare = load(Launch(synced, args=dict(desc=_whole(), SYNC=False), num_ctas=2))
    assert check_kernel(bare).label == "violation:BP146"
    kernel = load(Launch(synced, args=dict(desc=_whole(), SYNC=True), num_ctas=2))
    assert [op.kind for op in kernel.ops()][-2:] == [K.CLUSTER_ARRIVE, K.CLUSTER_WAIT]
    assert check_kernel(kernel).verdict == "verified"
