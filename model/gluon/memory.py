"""Shared and tensor memory: allocations become the IR's buffers (a ring of 2-D tiles has its
slots along the leading dimension), descriptors slots of them, and the ops that touch them
reads and writes for race checking (BP200/BP201)."""

from __future__ import annotations

import re

from ..expr import opaque, opaque_vars
from ..ir import Const, Expr, MemAlloc, MemRef, Op
from .ttgir import Operation, split_operands
from .values import Alloc, Mem, Unread, _memdesc


class MemoryRules:
    def local_alloc(self, op: Operation, out):
        desc = _memdesc(op.text)
        if desc is None:
            return None
        space = "tmem" if op.name == "ttng.tmem_alloc" else "smem"
        name = op.results[0].lstrip("%") if op.results else f"alloc{next(self._ids)}"
        name = re.sub(r"_\d+$", "", name) if not name[0].isdigit() else f"alloc{name}"
        alloc = Alloc(self.fresh(name), desc[0], desc[1], space, self.where(op))
        if not (desc[1] == "i64" and space == "smem"):
            # a ring of 2-D tiles has its slots along the leading dimension
            slotted = len(alloc.dims) >= 3
            self.buffers[alloc] = MemAlloc(alloc.name, space,
                                           (Const(alloc.dims[0]),) if slotted else (Const(1),),
                                           alloc.loc, scalar=not slotted)
        return [Mem(alloc)]

    def memref(self, name: str) -> tuple[MemRef, ...]:
        """The buffer slots a descriptor names; a slot index the model cannot follow covers the
        whole buffer (an access that may overlap every slot)."""
        mem = self.value(name)
        if not isinstance(mem, Mem) or mem.alloc not in self.buffers:
            raise Unread(f"`{name}` is not a buffer the translator can follow")
        buf = self.buffers[mem.alloc]
        index = mem.index[:1] if not buf.scalar and mem.index else ()
        if any(opaque_vars(i) for i in index):
            index = ()
        return (MemRef(buf, tuple(index)),)

    def local_load(self, op: Operation, out):
        out.append(Op("read", reads=self.memref(op.operands[0]), loc=self.where(op)))

    def local_store(self, op: Operation, out):
        out.append(Op("write", writes=self.memref(op.operands[1]), loc=self.where(op)))

    def tma_store(self, op: Operation, out):
        m = re.match(r"^\S+\s+%[\w.$#-]+\[[^\]]*\]\s+(%[\w.$#-]+)", op.text)
        if not m:
            raise Unread("the source of the store cannot be read")
        out.append(Op("copy_smem_to_gmem", reads=self.memref(m.group(1)), loc=self.where(op)))

    def wgmma(self, op: Operation, out):
        """Hopper's warpgroup MMA reads its shared-memory operands (register ones are data)
        until a covering wait when asynchronous, at once otherwise."""
        args = [a.strip() for a in split_operands(op.text[len(op.name):])][:2]
        reads = tuple(r for a in args if isinstance(self.value(a), Mem) for r in self.memref(a))
        if reads:
            asynchronous = re.search(r"isAsync\s*=\s*true", op.text) is not None
            out.append(Op("wgmma" if asynchronous else "read", reads=reads, loc=self.where(op)))
        return [self.value(a) for a in op.operands[2:3]]

    def wgmma_wait(self, op: Operation, out):
        m = re.search(r"pendings\s*=\s*(\d+)", op.text)
        if not m:
            raise Unread("the number of MMAs left in flight cannot be read")
        out.append(Op("wgmma_wait", count=Const(int(m.group(1))), loc=self.where(op)))

    def store_wait(self, op: Operation, out):
        m = re.search(r"pendings\s*=\s*(\d+)", op.text)
        if not m:
            raise Unread("the number of stores left in flight cannot be read")
        out.append(Op("wait_smem_to_gmem", count=Const(int(m.group(1))), loc=self.where(op)))

    def memdesc_index(self, op: Operation, out):
        src, *idx = op.operands
        mem = self.value(src)
        if not isinstance(mem, Mem):
            return None
        index = [self.value(i) for i in idx]
        if not all(isinstance(i, Expr) for i in index):
            return [Mem(mem.alloc, mem.index + tuple(opaque("index") for _ in index))]
        return [Mem(mem.alloc, mem.index + tuple(index))]

    def view(self, op: Operation, out):
        """A view of the same slots (transpose, subslice along inner dims, reinterpret)."""
        mem = self.value(op.operands[0]) if op.operands else None
        return [mem] if isinstance(mem, Mem) else None
