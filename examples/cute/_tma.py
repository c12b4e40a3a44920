"""Shared-memory staging for the CuTe examples' TMA loads: a ring of swizzled K-major tiles and
the TMA atom that fills one stage of it. (The loader skips files whose name starts with `_`:
this one holds no kernel.)"""

import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync


def staged_tiles(tensor: cute.Tensor, rows: int, cols: int, stages: int):
    """The (rows, cols, stages) swizzled shared-memory layout of a ring of tiles, and the TMA
    atom and tensor that load one stage of it from `tensor` (call it in a @cute.jit host)."""
    layout = cute.make_composed_layout(
        cute.make_swizzle(3, 4, 3), 0,
        cute.make_ordered_layout((rows, cols, stages), order=(1, 0, 2)))
    atom, tma_tensor = cpasync.make_tiled_tma_atom(
        cpasync.CopyBulkTensorTileG2SOp(), tensor, cute.slice_(layout, (None, None, 0)),
        (rows, cols))
    return layout, atom, tma_tensor


def ring_in_smem(smem, layout):
    """The ring of fp16 tiles `layout` (from staged_tiles) in shared memory, and the bytes of
    one stage (what a stage's TMA copy lands; call it in a @cute.kernel)."""
    import cutlass
    ring = smem.allocate_tensor(cutlass.Float16, layout.outer, byte_alignment=128,
                                swizzle=layout.inner)
    return ring, cute.size_in_bytes(cutlass.Float16, cute.slice_(layout, (None, None, 0)))
