"""A plain Triton (`tl`) matmul whose K loop asks the compiler for warp specialization
(`tl.range(..., warp_specialize=True)`): Triton splits it into a TMA load partition and an MMA
partition and generates their ring of barriers itself. barrierproof runs Triton's pipeline up to
TTGIR on the CPU and checks the protocol the compiler wrote, for the shape given here.

    barrierproof check examples/gluon/tl_warp_specialized.py
"""

import triton
import triton.language as tl

from barrierproof.model.gluon import Launch, tensor_desc


@triton.jit
def matmul_tl(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K, warp_specialize=True):
        a = a_desc.load([0, k])
        b = b_desc.load([0, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([0, 0], acc.to(tl.float16))


def _launch(stages: int) -> Launch:
    return Launch(matmul_tl, args=dict(a_desc=tensor_desc("fp16", [128, 64]),
                                       b_desc=tensor_desc("fp16", [128, 64]),
                                       c_desc=tensor_desc("fp16", [128, 128]), K=512,
                                       BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
                  num_warps=4, num_stages=stages, target="cuda:100")


three_stages = _launch(3)
two_stages = _launch(2)

EXPECT = {"three_stages": "verified", "two_stages": "verified"}
