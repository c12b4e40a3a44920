"""Memory effects under control that depends on data: one policy for the frontend.

A branch on a value loaded from memory (a ragged group size), or a loop whose trip count or
carried branches depend on one, whose body holds no barrier operation, is checked *as if it
always happens*: every arm of the branch in turn, the loop as two iterations whose slots are the
whole buffer wherever they depend on the iteration or on data (loops.py argues the two). Its
presence or absence changes no barrier, so for races it can only add accesses, never orders,
except through the thread's count of asynchronous operations in flight. Two cases break that,
and each makes the site unmodelled (BP190 at its line, the verdict at best `unknown`):

- the body retires asynchronous operations (a `wgmma_wait`, a `wait_smem_to_gmem`): taken as
  always happening, the wait would retire earlier operations the GPU may still be running;
- the kernel waits with a count above 0 (`wgmma_wait(1)`: keep at most one in flight) on a group
  the body issues: the model issuing more than the GPU did would retire older operations early.

Arms of one branch exclude each other, but are checked one after the other: where two arms touch
the same buffer and one of them writes it or reads it asynchronously, that order could show a
race no execution has, so the branch is unmodelled too (BP190) rather than a false alarm.

A proxy fence (`commit_smem`) inside is kept: each arm is bracketed for the fence check
(proxy_fence.py `maybe`), so its fence covers the arm's own stores and none made before it.

The second is known only once the whole kernel is translated: each site first leaves a BP190
marker naming what it issues, and `settle` removes the markers no counted wait concerns.
"""

from __future__ import annotations

from ..ir import Const, Op, iter_ops, map_ops
from .readback import READBACK
from .. import kinds, primitives as K


_SITE = "depends on data loaded from memory and "


def site(loc, what: str, rest: str) -> Op:
    """A BP190 marker of data-dependent code ("this {what} depends on data loaded from memory
    and {rest}"): every marker is made here, so `is_site` knows them all by their opening."""
    return Op(K.UNMODELED, None, loc=loc, name=f"this {what} {_SITE}{rest}")


def is_site(op) -> bool:
    """A marker of this module or of readback.py (it stands for no synchronization of the
    kernel)."""
    return op.kind == K.UNMODELED and (op.name.startswith("this ") and _SITE in op.name
                                       or op.name.startswith(READBACK))


def issued_groups(body) -> frozenset[str]:
    """The asynchronous groups (`TMA store`, `WGMMA`, ...) whose operations a body issues."""
    return frozenset(kinds.ASYNC_GROUPS[op.kind] for op in iter_ops(body)
                     if op.kind in kinds.ASYNC_GROUPS)


def retired_groups(body) -> frozenset[str]:
    """The asynchronous groups a body waits for."""
    return frozenset(kinds.ASYNC_WAITS[op.kind][0] for op in iter_ops(body)
                     if op.kind in kinds.ASYNC_WAITS)


def _touched(arm) -> tuple[set, set]:
    """The buffers an arm accesses, and those it writes or reads asynchronously."""
    every, strong = set(), set()
    for op in iter_ops(arm):
        names = {r.alloc.name for r in op.reads + op.writes if r.alloc is not None}
        every |= names
        if op.kind in kinds.ASYNC_GROUPS:
            strong |= names
        strong |= {r.alloc.name for r in op.writes if r.alloc is not None}
    return every, strong


def overlapping_arms(arms) -> str | None:
    """A buffer two arms touch, one of them writing it or reading it asynchronously."""
    touched = [_touched(arm) for arm in arms]
    for i, (every_i, strong_i) in enumerate(touched):
        for every_j, strong_j in touched[i + 1:]:
            common = (strong_i & every_j) | (every_i & strong_j)
            if common:
                return sorted(common)[0]
    return None


def exclusive_site(loc, buffer: str) -> Op:
    """BP190: arms that exclude each other, checked in sequence, would order their accesses."""
    return site(loc, "branch", (
        f"more than one of its arms accesses `{buffer}` (one writing it or reading it "
        "asynchronously): the arms exclude each other, but checked one after the other they "
        "would be ordered as no execution is, so their memory effects are not modelled (hoist "
        "the shared access out of the branch)."))


def counted_groups(body) -> frozenset[str]:
    """Groups some wait keeps operations of in flight (a count that is not the constant 0)."""
    out = set()
    for op in iter_ops(body):
        if op.kind in kinds.ASYNC_WAITS:
            group, counted = kinds.ASYNC_WAITS[op.kind]
            if counted and not (isinstance(op.count, Const) and op.count.value == 0):
                out.add(group)
    return frozenset(out)


def _names(groups) -> str:
    return ", ".join(sorted(groups))


def retiring_site(loc, what: str, body) -> Op:
    """BP190: a data-dependent body that waits cannot be taken as always happening."""
    return site(loc, what, (
        f"waits for asynchronous operations ({_names(retired_groups(body))}) with no barrier "
        "inside: taken as always happening, the wait would retire earlier operations the GPU "
        "may still run, so its memory effects are not modelled (move the wait out of the "
        "data-dependent code)."))


def counted_site(loc, what: str, groups) -> Op:
    """BP190 marker of a site taken as always happening; `settle` keeps it only when the kernel
    waits with a count above 0 on a group the site issues."""
    return site(loc, what, (
        f"issues asynchronous operations ({_names(groups)}) that the kernel also waits for "
        "with a count above 0: taken as always happening, its extra operations would let that "
        "wait retire earlier ones too soon, so its memory effects are not modelled (wait with "
        "count 0, or issue them unconditionally)."))


def settle(body, sites: dict[str, frozenset[str]]) -> tuple[tuple, set[str]]:
    """The body without the markers of `sites` (marker text -> groups it issues) whose groups no
    counted wait of the kernel keeps in flight, and the texts of those removed."""
    counted = counted_groups(body)
    present = {op.name for op in iter_ops(body) if op.kind == K.UNMODELED}
    drop = {name for name, groups in sites.items() if name in present and not groups & counted}
    if not drop:
        return tuple(body), drop
    return map_ops(body, lambda op: () if op.kind == K.UNMODELED and op.name in drop
                   else op), drop
