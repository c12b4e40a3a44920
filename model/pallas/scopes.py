"""Scoped allocations (`pl.run_scoped`) as Mosaic GPU lowers them.

Shared memory of a scope is taken from a stack: a scope starts where the enclosing live scopes
end and gives its bytes back when it exits, so a later scope's buffer lies on an earlier,
exited scope's bytes (two `emit_pipeline`s one after the other, say), and a TMA copy the first
scope left in flight still touches them. A later buffer with the same shape, element type and
transforms as the one it lies on is the same IR buffer element for element. Any other overlap
is a layout the model does not relate element by element: in a one-thread kernel the allocation
is a write of every buffer it lies on (coarse, never missing what is still in flight on them:
nothing is issued on a buffer after its scope exited); with several threads, which all take the
bytes over at once, BP190 at the allocation (never two unrelated buffers).

A scope all threads enter together (`collective_axes` the thread axis) starts with a block
barrier, so that no thread reuses memory another still uses: modelled as that barrier wherever
an op precedes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import Const, Op
from ..ir import MemRef as IRMemRef
from .. import primitives as K
from .values import MemRef

SMEM_ALIGNMENT = 1024       # bytes: Mosaic GPU aligns every scoped SMEM buffer to this


@dataclass(frozen=True)
class _Placed:
    offset: int
    nbytes: int
    layout: tuple          # shape, element type and transforms: equal means element-for-element
    value: MemRef          # the buffer as the translator gave it (its IR allocation)


class ScopeStack:
    """Where each scoped SMEM buffer lies, and which exited scopes' buffers it reuses."""

    def __init__(self) -> None:
        self.top = 0
        self.exited: list[_Placed] = []

    def place(self, value: MemRef, transforms: Any) -> tuple[int, int, tuple]:
        itemsize = np.dtype(value.dtype).itemsize
        nbytes = -(-math.prod(value.shape) * itemsize // SMEM_ALIGNMENT) * SMEM_ALIGNMENT
        offset, self.top = self.top, self.top + nbytes
        return offset, nbytes, (tuple(value.shape), str(value.dtype), repr(transforms))

    def under(self, offset: int, nbytes: int) -> list[_Placed]:
        """The exited scopes' buffers a placement lies on."""
        return [p for p in self.exited
                if p.offset < offset + nbytes and offset < p.offset + p.nbytes]

    def reused(self, offset: int, nbytes: int, layout: tuple) -> tuple[MemRef | None, bool]:
        """The exited buffer this placement is (None if it lies on none) and whether every
        buffer it overlaps is that one element for element."""
        under = self.under(offset, nbytes)
        same = [p for p in under if (p.offset, p.nbytes, p.layout) == (offset, nbytes, layout)]
        if not under:
            return None, True
        if not same:
            return None, False
        alloc = same[-1].value.alloc
        return same[-1].value, all(p.value.alloc is alloc for p in under)

    def leave(self, mark: int, placed: list[_Placed]) -> None:
        self.top = mark
        self.exited.extend(placed)


class ScopeRules:
    """The Translator's rules for `run_scoped` allocations (mixed into Translator)."""

    def _scope_barrier(self, collective, frame, out) -> None:
        """The block barrier a thread-collective scope starts with; left out while no op
        precedes it (the kernel's scratch scope, say), where it orders nothing."""
        axes = tuple(self.axis_names.get(a, a) for a in collective)
        if (self.num_threads > 1 and axes == (self.thread_axis,)
                and (self._emitted or out)):
            out.append(Op(K.BAR_SYNC, None, count=Const(0), bar_id=Const(0),
                          name="syncthreads", loc=self.where(frame)))

    def _scoped_smem(self, var, pname, transforms, frame, out, placed) -> Any:
        """An SMEM buffer of a scope: the exited scope's buffer it lies on, or a new one."""
        value = self._ref_value(var, pname)
        if (not isinstance(value, MemRef) or value.space != "smem"
                or not isinstance(value.dtype, np.dtype)):
            return None         # barriers (their own pool) and TMEM are allocated elsewhere
        offset, nbytes, layout = self.scopes.place(value, transforms)
        earlier, exact = self.scopes.reused(offset, nbytes, layout)
        loc = self.where(frame)
        if not exact and self.num_threads == 1:
            # its bytes are taken over: a write of every buffer it lies on (an access to the
            # new buffer races with what is still in flight on them, and nothing can be issued
            # on them after their scope exited)
            taken = tuple(IRMemRef(p.value.alloc) for p in self.scopes.under(offset, nbytes))
            self._note(f"{loc}: this scoped buffer lies on the shared memory of "
                       f"{', '.join(f'`{r.alloc.name}`' for r in taken)} (exited scopes', "
                       "another layout): checked as a write of them where it is allocated")
            out.append(Op(K.WRITE, None, writes=taken, loc=loc))
        elif not exact:
            # every thread takes the bytes over at once: not one write of them
            out.append(Op(K.UNMODELED, loc=loc,
                          name="a scoped buffer on the shared memory of an exited scope's "
                               "buffers of another shape or layout"))
        if earlier is not None and exact:
            self._note(f"{loc}: this scoped buffer lies on the shared memory of "
                       f"`{earlier.alloc.name}` (an exited scope's): checked as that buffer")
            result = earlier
        else:
            result = self._mem_alloc(value, pname, frame)
        placed.append(_Placed(offset, nbytes, layout, result))
        return result
