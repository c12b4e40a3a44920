"""Ampere's cp.async in Gluon (`async_copy.async_load`, `commit_group`, `wait_group`): a copy
writes its destination from its issue until a `wait_group` retires its commit group.

`wait_group(n)` counts commit groups, not copies (an empty group, committed where a predicated
load did not run, counts too): each group becomes one cp_async access, at its commit, writing
the destinations of the copies issued since the previous commit, so that the model's
"at most n in flight" is the hardware's. Moving the copies' writes to the commit is exact only
when nothing synchronizes or touches memory in between, and the copies of a group run under
one condition; anything else is BP190 at its line, never a guess."""

from __future__ import annotations

import functools
import re

from ..expr import mk, mk_not
from ..ir import Const, Expr, Op, When
from .ttgir import Operation
from .values import Unread
from .. import primitives as K

COPY = "ttg.async_copy_global_to_local"
COMMIT = "ttg.async_commit_group"
WAIT = "ttg.async_wait"
# ops that may stand between a copy and its commit: they do not reach the model's program
BETWEEN_OK = (COPY, COMMIT, "scf.if", "scf.yield")


class CpAsyncRules:
    cp_group: list          # (conditions, destination refs, loc) of the copies not committed
    cp_conds: list          # the conditions of the scf.if branches being read

    def async_copy(self, op: Operation, out):
        if len(op.operands) < 2:
            raise Unread("the destination of the copy cannot be read")
        self.cp_group.append((tuple(self.cp_conds), self.memref(op.operands[1]), self.where(op)))

    def async_commit(self, op: Operation, out):
        group, self.cp_group[:] = list(self.cp_group), []
        conds = {g[0] for g in group}
        if len(conds) > 1:
            raise Unread("a cp.async commit group whose copies run under different conditions")
        writes = tuple(r for _, refs, _ in group for r in refs)
        loc = group[0][2] if group else self.where(op)
        issue = Op(K.CP_ASYNC, writes=writes, loc=loc)
        path = conds.pop() if conds else ()
        cond = functools.reduce(lambda a, b: mk("and", a, b), path) if path else None
        if cond is None:
            out.append(issue)
        else:       # the group is committed either way; only its copies are conditional
            out.append(When(cond, (issue,), (Op(K.CP_ASYNC, loc=loc),), loc))

    def async_wait(self, op: Operation, out):
        m = re.search(r"\bnum\s*=\s*(\d+)", op.text)
        if not m:
            raise Unread("the number of commit groups left in flight cannot be read")
        out.append(Op(K.WAIT_GMEM_TO_SMEM, count=Const(int(m.group(1))), loc=self.where(op)))

    def cp_between(self, op: Operation, before: int, out: list) -> None:
        """An op translated while copies wait for their commit put something in the program:
        the copies' writes cannot be moved to the commit past it."""
        if self.cp_group and op.name not in BETWEEN_OK and len(out) > before:
            line = self.cp_group[0][2].line
            self.cp_group.clear()
            out.append(self.unmodeled(op, f"synchronization or a memory access between the "
                                          f"cp.async copy of line {line} and its commit_group"))

    def cp_leftover(self, start: int, out: list) -> None:
        """Copies of a loop body or a partition never committed there: no wait_group counts
        them (BP190 at the copy)."""
        for _, _, loc in self.cp_group[start:]:
            out.append(Op(K.UNMODELED, name=f"{COPY}: a cp.async copy not committed "
                          "(commit_group) in its loop iteration or partition", loc=loc))
        del self.cp_group[start:]

    def cp_branch(self, cond: Expr, taken: bool, ops: list) -> list:
        """An scf.if branch, its condition on the stack its copies record."""
        self.cp_conds.append(cond if taken else mk_not(cond))
        try:
            return self.block(ops, branch=True)
        finally:
            self.cp_conds.pop()
