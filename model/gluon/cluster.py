"""Multi-CTA Gluon kernels (`num_ctas > 1`): the kernel's CTAs are the blocks of one cluster
along the axis `cta`, each running every partition; where shared memory lives comes from the
CTA layout (`CGALayout`) of its memdesc type.

- A barrier array is per CTA when its last dimension has one element per CTA (bases
  [[1], [2], ...]: `mbarrier.allocate_mbarrier()`); every other CTA layout of a barrier is BP190.
- `arrive_barrier` / `barrier_expect` with `fromCTA = m` keep the CTA-id bits of `m` and
  broadcast over the others: CTA c signals the barrier of every CTA d with d & m == c & m
  (m = num_ctas - 1, the default, is the CTA's own barrier).
- A multicast TMA load into a tile every CTA holds whole (all bases zero) is a copy along `cta`:
  the IR splits its bytes evenly among the CTAs it reaches, so each CTA's barrier receives the
  whole tile once every CTA has issued its share. A load into a tile split among the CTAs
  (distinct non-zero bases) loads each CTA's piece; split and multicast at once is BP190.
- `ttng.cluster_barrier` is barrier.cluster arrive + wait in a kernel without partitions.
"""

from __future__ import annotations

import ast
import re

from ..ir import BarrierRef, Const, Op, Var, When
from .ttgir import Operation
from .values import Unread
from .. import primitives as K

CTA_AXIS = "cta"


class ClusterRules:
    def ctas(self) -> int:
        return self.module.int_attr("ttg.num-ctas") or 1

    def cga_bases(self, text: str) -> list | None:
        """The CTA layout bases of the last memdesc on the line (None: none given)."""
        found = re.findall(r"memdesc<[^,>]+,\s*(#\w+)", text)
        layout = self.module.layouts.get(found[-1], "") if found else ""
        m = re.search(r"CGALayout\s*=\s*(\[[\[\]\d,\s]*\])", layout)
        return ast.literal_eval(m.group(1)) if m else None

    def per_cta_barrier(self, op: Operation, dims: tuple[int, ...]) -> bool:
        """A multi-CTA kernel's barrier array must hold one barrier per CTA in its last dim, or
        (a 2-CTA kernel) one per pair: True for a pair barrier (two_cta.py)."""
        ctas = self.ctas()
        if ctas == 1:
            return False
        bases = self.cga_bases(op.text)
        if self.is_pair_barrier(dims, bases):
            return True
        wanted = [1 << i for i in range(ctas.bit_length() - 1)]
        if not dims or dims[-1] != ctas or bases is None or len(bases) != len(wanted) or \
                any(b[-1] != w or any(b[:-1]) for b, w in zip(bases, wanted)):
            raise Unread(f"a barrier whose CTA layout ({bases}) is not one barrier per CTA of "
                         f"the {ctas} is not modelled")
        return False

    def routed(self, op: Operation, make) -> list:
        """`make(block)` for each barrier the op signals (block None: the CTA's own)."""
        ctas = self.ctas()
        if re.search(r"\bmulticastCTA\b|\bmulticast\b", op.text):
            raise Unread("a multicast arrival is not modelled")
        m = re.search(r"fromCTA\s*=\s*(\d+)", op.text)
        keep = int(m.group(1)) if m else ctas - 1
        if keep == ctas - 1:
            return [make(None)]
        if keep >= ctas:
            raise Unread(f"fromCTA = {keep} is outside 0..{ctas - 1}")
        by_cta = [[d for d in range(ctas) if d & keep == c & keep] for c in range(ctas)]
        if all(r == by_cta[0] for r in by_cta):
            return [make((Const(d),)) for d in by_cta[0]]
        return [When(Var(CTA_AXIS) == Const(c), tuple(make((Const(d),)) for d in r), (),
                     self.where(op)) for c, r in enumerate(by_cta)]

    @staticmethod
    def on_block(bar: BarrierRef, block) -> BarrierRef:
        return bar if block is None else BarrierRef(bar.alloc, bar.index, block)

    def copy_axes(self, op: Operation, multicast: bool) -> tuple[tuple[str, ...], int]:
        """The cluster axes a TMA load reaches, none (its own CTA) or `cta` (multicast), and
        the number of pieces the CTAs split its tile into (each loads its own piece)."""
        ctas = self.ctas()
        if ctas == 1:
            return (), 1
        bases = self.cga_bases(op.text)
        if bases is None or len(bases) != ctas.bit_length() - 1:
            raise Unread(f"a TMA load whose CTA layout ({bases}) is not one basis per CTA bit "
                         "is not modelled")
        split = sum(1 for b in bases if any(b))
        if multicast and split:
            raise Unread(f"a multicast TMA load into a tile split among the CTAs (CTA layout "
                         f"{bases}) is not modelled")
        if len({tuple(b) for b in bases if any(b)}) != split:
            raise Unread(f"a TMA load whose CTA layout ({bases}) repeats a basis is not "
                         "modelled")
        return ((CTA_AXIS,) if multicast else ()), 1 << split

    def cluster_barrier(self, op: Operation, out):
        name = "relaxed" if re.search(r"relaxed\s*=\s*true", op.text) else ""
        loc = self.where(op)
        self.cluster_syncs.append(loc)
        out += [Op(K.CLUSTER_ARRIVE, None, name=name, loc=loc), Op(K.CLUSTER_WAIT, None, loc=loc)]

    def cluster_shape(self, body: list, threads: int) -> tuple[list, tuple]:
        """The kernel's cluster, and BP190 for what a multi-CTA kernel does not model."""
        ctas = self.ctas()
        why = []
        if self.pair_unmodelled():
            why.append(self.pair_unmodelled())
        if self.cluster_syncs and threads > 1:
            why.append("a cluster barrier in a warp-specialized kernel (which of its warps "
                       "arrive) is not modelled")
        loc = self.cluster_syncs[0] if self.cluster_syncs and threads > 1 else self.loc
        stop = [Op(K.UNMODELED, name=w, loc=loc) for w in why]
        return stop + body, (((CTA_AXIS, Const(ctas)),) if ctas > 1 else ())
