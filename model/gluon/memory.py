"""Shared and tensor memory: allocations become the IR's buffers (a ring of 2-D tiles has its
slots along the leading dimension), descriptors slots of them, and the ops that touch them
reads and writes for race checking (BP200/BP201)."""

from __future__ import annotations

import dataclasses
import linecache
import os
import re

from ..expr import opaque, opaque_vars
from ..ir import Const, Expr, MemAlloc, MemRef, Op, Slice
from ..proxy_fence import commit_marker
from . import smem_views
from .ttgir import Operation, split_operands
from .values import _ELEM_BYTES, Alloc, Mem, Unread, _memdesc
from .. import primitives as K


class MemoryRules:
    def local_alloc(self, op: Operation, out):
        desc = _memdesc(op.text)
        if desc is None:
            return None
        space = "tmem" if op.name == "ttng.tmem_alloc" else "smem"
        name = op.results[0].lstrip("%") if op.results else f"alloc{next(self._ids)}"
        name = re.sub(r"_\d+$", "", name) if not name[0].isdigit() else f"alloc{name}"
        name = self._assigned_name(op) or name
        alloc = Alloc(self.fresh(name), desc[0], desc[1], space, self.where(op))
        # a ring of 2-D tiles has its slots along the leading dimension
        slotted = len(alloc.dims) >= 3
        if space == "tmem":
            # slots by 32-bit columns: partitions working on column slices of one accumulator
            # (an S tile borrowed for P and its row statistics) touch disjoint cells
            elem = _ELEM_BYTES.get(desc[1], 4)
            cols = -(-alloc.dims[-1] * elem // 4)
            self.buffers[alloc] = MemAlloc(
                alloc.name, space, (Const(alloc.dims[0] if slotted else 1), Const(cols)),
                alloc.loc, scalar=False)
            return [Mem(alloc, cols=(0, cols), elem_bytes=elem)]
        if not desc[1] == "i64":
            self.buffers[alloc] = MemAlloc(alloc.name, space,
                                           (Const(alloc.dims[0]),) if slotted else (Const(1),),
                                           alloc.loc, scalar=not slotted)
            if op.operands:     # allocated with a value: the threads store it there
                out.append(Op(K.WRITE, writes=(MemRef(self.buffers[alloc], ()),),
                              loc=self.where(op)))
        return [Mem(alloc)]

    def _assigned_name(self, op: Operation) -> str | None:
        """For an allocation made inside Triton's library (`full = mbarrier.allocate_mbarrier(
        batch=2)`), the name the user's line assigns it to: the library names it `bar`."""
        frames = self.module.frames(op.loc)
        if not frames or not os.path.abspath(frames[0][0]).startswith(self._triton_dir):
            return None
        where = self.where(op)
        line = linecache.getline(where.file, where.line)
        m = re.match(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)", line)
        return m.group(1) if m else None

    def memref(self, name: str) -> tuple[MemRef, ...]:
        """The buffer slots a descriptor names; a slot index the model cannot follow covers the
        whole buffer (an access that may overlap every slot)."""
        mem = self.value(name)
        if not isinstance(mem, Mem) or mem.alloc not in self.buffers:
            raise Unread(f"`{name}` is not a buffer the translator can follow")
        buf = self.buffers[mem.alloc]
        if (mem.window is not None or mem.span is not None) and buf.space == "smem":
            return (smem_views.ref(mem, buf),)
        if buf.space == "tmem":
            index = mem.index[:1] if len(mem.alloc.dims) >= 3 else (Const(0),)
            if len(index) != 1 or any(opaque_vars(i) for i in index):
                return (MemRef(buf, ()),)
            lo, hi = mem.cols or (0, int(buf.shape[1].value))
            return (MemRef(buf, tuple(index), (Slice(Const(lo), Const(hi - lo)),)),)
        index = mem.index[:1] if not buf.scalar and mem.index else ()
        if any(opaque_vars(i) for i in index):
            index = ()
        return (MemRef(buf, tuple(index)),)

    def clc_try_cancel(self, op: Operation, out):
        """clusterlaunchcontrol.try_cancel (PTX): asynchronously writes its 16-byte response to
        shared memory and completes 16 bytes (mbarrier::complete_tx::bytes) on the barrier; the
        issuing thread expects them (`mbarrier.expect(bar, 16)`). Reading the response
        (`clc.load_result`) before the barrier's phase completes races with that write."""
        if len(op.operands) != 2:
            raise Unread("the response buffer and barrier of the request cannot be read")
        if "multicast" in op.text and (self.module.int_attr("ttg.num-ctas") or 1) > 1:
            raise Unread("a request multicast to the CTAs of a cluster is not modelled yet")
        response, barrier = op.operands
        mem = self._response(response)
        self.clc_cancel_issued(mem)
        out.append(Op(K.TMA_LOAD, self.barrier(barrier), bytes=Const(16),
                      writes=self.memref(response), loc=self.where(op)))

    def _response(self, name: str):
        """A CLC response buffer: an int64x2 (or a ring of them) is data, not an mbarrier array,
        whichever partition touches it first (a request or a `clc.load_result`)."""
        mem = self.value(name)
        if isinstance(mem, Mem) and mem.alloc not in self.buffers \
                and mem.alloc not in self.barriers:
            slotted = len(mem.alloc.dims) >= 2
            self.buffers[mem.alloc] = MemAlloc(
                mem.alloc.name, "smem", (Const(mem.alloc.dims[0]) if slotted else Const(1),),
                mem.alloc.loc, scalar=not slotted)
        return mem

    def clc_load_result(self, op: Operation, out):
        self._response(op.operands[0])
        self.local_load(op, out)

    def local_load(self, op: Operation, out):
        out.append(Op(K.READ, reads=self.memref(op.operands[0]), loc=self.where(op)))

    def local_store(self, op: Operation, out):
        out.append(Op(K.WRITE, writes=self.memref(op.operands[1]), loc=self.where(op)))

    def tma_store(self, op: Operation, out):
        m = re.match(r"^\S+\s+%[\w.$#-]+\[[^\]]*\]\s+(%[\w.$#-]+)", op.text)
        if not m:
            raise Unread("the source of the store cannot be read")
        out.append(Op(K.COPY_SMEM_TO_GMEM, reads=self.memref(m.group(1)), loc=self.where(op)))

    def wgmma(self, op: Operation, out):
        """Hopper's warpgroup MMA reads its shared-memory operands (register ones are data)
        until a covering wait when asynchronous, at once otherwise."""
        args = [a.strip() for a in split_operands(op.text[len(op.name):])][:2]
        reads = tuple(r for a in args if isinstance(self.value(a), Mem) for r in self.memref(a))
        if reads:
            asynchronous = re.search(r"isAsync\s*=\s*true", op.text) is not None
            out.append(Op(K.WGMMA if asynchronous else K.READ, reads=reads, loc=self.where(op)))
        return [self.value(a) for a in op.operands[2:3]]

    def wgmma_wait(self, op: Operation, out):
        m = re.search(r"pendings\s*=\s*(\d+)", op.text)
        if not m:
            raise Unread("the number of MMAs left in flight cannot be read")
        out.append(Op(K.WGMMA_WAIT, count=Const(int(m.group(1))), loc=self.where(op)))

    def proxy_fence(self, op: Operation, out):
        """`fence_async_shared()`: the marker `proxy_fence.check_commits` reads."""
        out.append(commit_marker(self.where(op)))

    def store_wait(self, op: Operation, out):
        m = re.search(r"pendings\s*=\s*(\d+)", op.text)
        if not m:
            raise Unread("the number of stores left in flight cannot be read")
        out.append(Op(K.WAIT_SMEM_TO_GMEM, count=Const(int(m.group(1))), loc=self.where(op)))

    def memdesc_index(self, op: Operation, out):
        src, *idx = op.operands
        mem = self.value(src)
        if not isinstance(mem, Mem):
            return None
        index = [self.value(i) for i in idx]
        if not all(isinstance(i, Expr) for i in index):
            index = [opaque("index") for _ in index]
        buf = self.buffers.get(mem.alloc)
        if buf is not None and buf.space == "smem" and len(index) == 1:
            view = smem_views.index_view(mem, buf, index[0], op.text)
            if view is not None:        # the view's slots are not the allocation's
                return [view]
        if buf is not None and buf.space == "smem" and buf.scalar and not mem.index \
                and len(mem.alloc.dims) >= 2:
            # a 2-D allocation indexed along its leading dimension (`alpha.index(h)` of a
            # [2, M] buffer): its rows are slots too (`restore_slots` fixes earlier accesses)
            self.buffers[mem.alloc] = dataclasses.replace(
                buf, shape=(Const(mem.alloc.dims[0]),), scalar=False)
        return [dataclasses.replace(mem, index=mem.index + tuple(index))]

    def restore_slots(self, program: tuple) -> tuple:
        """Accesses translated before their buffer was found to have slots name it whole."""
        from ..ir import map_ops
        current = {b.name: b for b in self.buffers.values()}

        def refs(rs):
            return tuple(dataclasses.replace(r, alloc=current[r.alloc.name])
                         if current.get(r.alloc.name, r.alloc) is not r.alloc else r
                         for r in rs)

        def fix(op: Op) -> Op:
            if not op.reads and not op.writes:
                return op
            return dataclasses.replace(op, reads=refs(op.reads), writes=refs(op.writes))
        return map_ops(program, fix)

    def view(self, op: Operation, out):
        """A view of the same slots (transpose, subslice along inner dims, reinterpret); a
        reinterpret of tensor memory keeps its columns and takes the new element size."""
        mem = self.value(op.operands[0]) if op.operands else None
        if not isinstance(mem, Mem):
            return None
        desc = _memdesc(op.text)
        if mem.cols is not None and desc is not None and desc[1] in _ELEM_BYTES:
            return [dataclasses.replace(mem, elem_bytes=_ELEM_BYTES[desc[1]])]
        buf = self.buffers.get(mem.alloc)
        if op.name == "ttg.memdesc_subslice" and buf is not None and buf.space == "smem":
            return [smem_views.row_slice(mem, buf, op.text)]
        return [mem]

    def tmem_subslice(self, op: Operation, out):
        """`acc.slice(start, n)`: columns [start, start + n) of the view, in its elements."""
        mem = self.value(op.operands[0]) if op.operands else None
        if not isinstance(mem, Mem):
            return None
        m = re.search(r"\boffset\s*=\s*(\d+)", op.text)
        desc = _memdesc(op.text)
        if mem.cols is None or not m or desc is None:
            return [dataclasses.replace(mem, cols=None)]     # the whole tile: conservative
        lo, hi = mem.cols
        start = lo + int(m.group(1)) * mem.elem_bytes // 4
        end = start + -(-desc[0][-1] * mem.elem_bytes // 4)
        return [dataclasses.replace(mem, cols=(start, min(hi, max(end, start + 1))))]
