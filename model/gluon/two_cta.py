"""2-CTA tcgen05 (`TensorMemoryLayout(..., two_ctas=True)`, module attribute `ttng.two-ctas`)
in a cluster of two CTAs: the pair computes one MMA whose operands and accumulator are split
between the two CTAs' shared and tensor memory.

- The leader (CTA 0) issues every tcgen05 MMA and commit; the MMA reads both CTAs' SMEM
  operands and writes both halves of the accumulator; its completion arrives on the barrier in
  both CTAs (the commit is multicast to the pair).
- A pair barrier (`mbarrier.allocate_mbarrier(two_ctas=True)`, CTA layout bases all zero, one
  barrier per pair) lives in the leader's shared memory: its init count is doubled there, an
  expect of N bytes is the leader's arrive.expect_tx(2N) and the follower's plain arrival on
  the leader's barrier, an arrive arrives on the leader's, only the leader waits, and each CTA's
  TMA load completes its bytes on the leader's barrier while landing in its own SMEM.

What this does not cover (more than two CTAs, another layout of a pair barrier) is BP190.
"""

from __future__ import annotations

import re

from ..expr import mk
from ..ir import BarrierRef, Const, Op, Var, When
from .cluster import CTA_AXIS
from .ttgir import Operation
from .values import Unread
from .. import primitives as K

LEADER_CTA = 0


class PairRules:
    def two_ctas(self) -> bool:
        return re.search(r'"ttng\.two-ctas"\s*=\s*true', self.module.attrs) is not None

    def pair_unmodelled(self) -> str | None:
        """Why a 2-CTA kernel is not modelled (None: it is, or it is no 2-CTA kernel)."""
        if self.two_ctas() and self.ctas() != 2:
            return (f"2-CTA tcgen05 (two_ctas) in a cluster of {self.ctas()} CTAs (pairs within "
                    "a larger cluster) is not modelled")
        return None

    def is_pair_barrier(self, dims: tuple[int, ...], bases: list | None) -> bool:
        """One barrier per pair of CTAs: last dimension 1, every CTA layout basis zero."""
        return self.two_ctas() and self.ctas() == 2 and bool(dims) and dims[-1] == 1 and \
            bases is not None and len(bases) == 1 and not any(bases[0])

    def is_pair(self, bar: BarrierRef) -> bool:
        return bar.alloc.name in self.pair_barriers

    @staticmethod
    def on_leader(bar: BarrierRef) -> BarrierRef:
        return BarrierRef(bar.alloc, bar.index, (Const(LEADER_CTA),))

    def on_leader_only(self, out: list, pred, then: tuple, orelse: tuple,
                       op: Operation) -> None:
        """`then` in the leader, `orelse` in the follower, each under the op's predicate."""
        branches = []
        for steps in (then, orelse):
            guarded: list = []
            for step in steps:
                self.guarded(guarded, pred, step, op)
            branches.append(tuple(guarded))
        out.append(When(Var(CTA_AXIS) == Const(LEADER_CTA), *branches, self.where(op)))

    def pair_expect(self, out: list, pred, bar: BarrierRef, nbytes, op: Operation) -> None:
        """The leader expects both CTAs' bytes; the follower's expect is one arrival there."""
        loc = self.where(op)
        target = self.on_leader(bar)
        self.on_leader_only(
            out, pred, (Op(K.ARRIVE_EXPECT_TX, target, bytes=mk("*", nbytes, Const(2)), loc=loc),),
            (Op(K.ARRIVE, target, count=Const(1), loc=loc),), op)

    def pair_mma(self, op: Operation) -> tuple[str, ...]:
        """The collective axes of a tcgen05 op in this kernel: the pair for a 2-CTA MMA."""
        text = op.text
        if not self.two_ctas():
            if self.ctas() > 1 and re.search(r"\{[^{}]*\b(multicast|two_ctas)\b", text):
                raise Unread("an MMA whose commit is multicast to the cluster is not modelled "
                             "outside 2-CTA mode")
            return ()
        why = self.pair_unmodelled()
        if why:
            raise Unread(why)
        # the whole cluster is the pair: a commit multicast to it reaches the same two CTAs
        return (CTA_AXIS,)
