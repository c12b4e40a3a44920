"""A Gluon epilogue that stores a tile from shared memory with a TMA store.

`tma.async_store` reads its shared-memory source until `tma.store_wait(n)` leaves at most n
stores in flight. Triton adds no wait at the end of the kernel for a store the program issued
(its TTGIR and PTX end with the store's `cp.async.bulk.commit_group` and `ret`), so without
`store_wait(0)` the kernel may exit while the store still reads memory the block gives up.

    barrierproof check examples/gluon/store_epilogue.py
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, tma

from barrierproof.model.gluon import Launch, tensor_desc


@gluon.jit
def epilogue(c_desc, WAIT: gl.constexpr, num_warps: gl.constexpr):
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [num_warps, 1], [1, 0])
    c_smem.store(gl.zeros(c_desc.block_type.shape, c_desc.dtype, layout))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    if WAIT:
        tma.store_wait(0)


def _launch(wait):
    return Launch(epilogue, args=dict(c_desc=tensor_desc("fp16", [128, 128], shape=(256, 256)),
                                      WAIT=wait),
                  num_warps=4, target="cuda:90")


store_waited = _launch(True)
exits_with_store_in_flight = _launch(False)

EXPECT = {
    "store_waited": "verified",
    "exits_with_store_in_flight": "violation:BP105",
}
