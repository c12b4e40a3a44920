"""Global rows read back while a TMA store of them may still write (model/pallas/readback.py):
global memory is not modelled, so such a read is BP190 at its line, whatever wait comes
between (none, or the read-only one), in the program's order or a loop's next iteration; a full
`wait_smem_to_gmem(0)` before the read, or a store to another device's memory, leaves the
kernel as it was."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from barrierproof.testing import check

ROWS, COLS, F32 = 8, 128, jnp.float32


def _store_then_load(wait, in_loop=False):
    """Store `buf` to the output, wait per `wait` ("full", "read_only" or None), then load the
    output rows back into `back` (in a loop, the load comes first and reads the rows the
    previous iteration stored)."""
    def body(x_gmem, o_gmem, buf, back, loaded):
        def store():
            plgpu.copy_smem_to_gmem(buf, o_gmem)
            if wait is not None:
                plgpu.wait_smem_to_gmem(0, wait_read_only=wait == "read_only")

        def load():
            plgpu.copy_gmem_to_smem(o_gmem, back, loaded)
            plgpu.barrier_wait(loaded)

        plgpu.copy_gmem_to_smem(x_gmem, buf, loaded)
        plgpu.barrier_wait(loaded)
        plgpu.commit_smem()
        if in_loop:
            @pl.loop(0, 2)
            def _(i):
                load()
                store()
        else:
            store()
            load()
        plgpu.wait_smem_to_gmem(0)

    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((ROWS, COLS), F32),
                     scratch_types=[plgpu.SMEM((ROWS, COLS), F32),
                                    plgpu.SMEM((ROWS, COLS), F32), plgpu.Barrier()])
    return k(jnp.zeros((ROWS, COLS), F32))


def _unread_lines(fn):
    (verdict,) = check(fn)
    return verdict, [d for d in verdict.diagnostics if d.code == "BP190"]


@pytest.mark.parametrize("wait", [None, "read_only"])
@pytest.mark.parametrize("in_loop", [False, True])
def test_a_read_of_rows_a_store_may_still_write_is_unread(wait, in_loop):
    verdict, unread = _unread_lines(functools.partial(_store_then_load, wait, in_loop))
    assert verdict.label == "unknown", verdict.label
    assert len(unread) == 1 and "TMA store at line" in unread[0].message
    line = int(unread[0].location.rsplit(":", 1)[1])
    text = open(__file__, encoding="utf-8").read().splitlines()[line - 1]
    assert "plgpu.copy_gmem_to_smem(o_gmem" in text, text


@pytest.mark.parametrize("in_loop", [False, True])
def test_a_full_wait_before_the_read_leaves_the_kernel_checked(in_loop):
    verdict, unread = _unread_lines(functools.partial(_store_then_load, "full", in_loop))
    assert verdict.label == "verified" and not unread, [d.message for d in verdict.diagnostics]
