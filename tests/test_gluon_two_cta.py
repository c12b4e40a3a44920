"""2-CTA tcgen05 in Gluon (model/gluon/two_cta.py): the leader issues the pair's MMA, which reads
both CTAs' shared memory and arrives in both; pair barriers live in the leader; each CTA's TMA
load completes on the leader's barrier and lands in its own shared memory."""

import os

import pytest

pytest.importorskip("triton")

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.blackwell import (  # noqa: E402
    TensorMemoryLayout, allocate_tensor_memory, tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import mbarrier  # noqa: E402

from barrierproof.checker.check import check_kernel  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model.gluon import Launch, load, tensor_desc  # noqa: E402
from barrierproof.model.ir import When, walk  # noqa: E402
from barrierproof.model import primitives as K  # noqa: E402

from conftest import EXAMPLES  # noqa: E402

PAIR = os.path.join(EXAMPLES, "gluon", "two_cta_matmul.py")


def _target(name):
    (target,) = resolve(PAIR + "::" + name)
    return target


def _leader_only(kernel) -> list:
    """The ops under `cta == 0` branches."""
    return [op for w in walk(kernel.body) if isinstance(w, When) and "cta == 0" in repr(w.cond)
            for op in w.then]


def test_the_leader_issues_the_pair_mma_which_arrives_in_both_ctas():
    kernel = _target("pair_matmul").build()
    assert kernel.cluster[0][0] == "cta" and kernel.cluster[0][1].value == 2
    tensor_core = [op for op in kernel.ops() if op.kind in (K.TCGEN05_MMA,
                                                             K.TCGEN05_COMMIT_ARRIVE)]
    assert tensor_core and all(op.collective_axes == ("cta",) for op in tensor_core)
    leader = _leader_only(kernel)
    assert all(any(op is x for x in leader) for op in tensor_core)
    # the pair barrier: init count doubled, every load and expect on the leader's barrier
    pair = {b.name: b for b in kernel.barriers}["load_bars"]
    assert pair.num_arrivals.value == 2
    loads = [op for op in kernel.ops() if op.kind == K.TMA_LOAD]
    assert loads and all(op.barrier.block[0].value == 0 for op in loads)
    assert {op.bytes.value for op in loads} == {128 * 64 * 2, 64 * 64 * 2}   # each CTA's half
    expects = [op for op in kernel.ops() if op.kind == K.ARRIVE_EXPECT_TX]
    assert {op.bytes.value for op in expects} == {2 * (128 * 64 + 64 * 64) * 2}
    waits = [op for op in kernel.ops() if op.kind == K.WAIT_PARITY and op.barrier.alloc is pair]
    assert waits and all(any(op is x for x in leader) for op in waits)


@pytest.mark.parametrize("name", ["pair_matmul", "load_barriers_per_cta", "expect_pair_bytes"])
def test_the_examples_verdicts(name):
    target = _target(name)
    v = check_kernel(target.build(), source=target.ref)
    assert v.matches(target.expect), (v.label, [d.message for d in v.diagnostics])


def test_the_race_is_on_the_followers_half():
    """Per-CTA load barriers: the leader's MMA reads the follower's half (block 1) while the
    follower's TMA load still writes it."""
    target = _target("load_barriers_per_cta")
    v = check_kernel(target.build(), source=target.ref)
    assert v.label == "violation:BP200"
    assert any("a_bufs[0]@1" in d.message or "b_bufs[0]@1" in d.message for d in v.diagnostics)


@gluon.jit
def quad(a_desc, b_desc):
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    a = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BLOCK_M, BLOCK_N], TensorMemoryLayout(
        block=(128, BLOCK_N), col_stride=1, cga_layout=[[1, 0], [2, 0]], two_ctas=True))
    tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])
    mbarrier.wait(bar, 0)


def test_pairs_in_a_cluster_of_four_are_bp190():
    a = gl.NVMMASharedLayout.get_default_for([512, 64], gl.float16, cga_layout=[[1, 0], [2, 0]])
    b = gl.NVMMASharedLayout.get_default_for([64, 128], gl.float16, cga_layout=[[0, 1], [0, 0]])
    kernel = load(Launch(quad, args=dict(a_desc=tensor_desc("fp16", [512, 64], a),
                                         b_desc=tensor_desc("fp16", [64, 128], b)),
                         num_ctas=4, target="cuda:100"))
    unmodeled = [op.name for op in kernel.ops() if op.kind == K.UNMODELED]
    assert unmodeled and all("cluster of 4 CTAs" in n for n in unmodeled), unmodeled
    assert check_kernel(kernel).verdict == "unknown"
