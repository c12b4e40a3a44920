"""A proxy fence before the async proxy reads what the threads stored.

Threads store to shared memory through the generic proxy; a TMA store (`copy_smem_to_gmem`), a
WGMMA or a tcgen05 MMA reads it through the async proxy, which sees those stores only after a
proxy fence (`fence.proxy.async.shared::cta`: Pallas's `plgpu.commit_smem()`, Gluon's
`fence_async_shared()`). The model has no proxies, so an async read of a buffer that a store may
have written since the last fence (on some path, earlier in the loop or in the previous
iteration, or in a partition that ran before) is not dropped but becomes unmodelled
synchronization at the reading line (BP190): the verdict is at best `unknown`.

A frontend leaves a marker op where the fence was; `check_commits` reads them with the
kernel's control flow (a branch: the union of both sides; a loop: its body twice, for the
stores of one iteration reaching the next) and removes them. Code the model runs as if it always
happened though the GPU may skip it (a branch on loaded data, Pallas's data_control.py) is
bracketed by `maybe` markers: what is unfenced after it is the union of what it leaves and what
came before, so a fence inside covers no store outside.
"""

from __future__ import annotations

from .expr import mk_not
from .ir import Loc, Loop, Op, When, WarpRegion, iter_ops
from . import primitives as K

COMMIT_SMEM = "commit_smem"
_MAYBE, _END_MAYBE = "maybe skipped: from here", "maybe skipped: to here"
# async-proxy readers of shared memory
_ASYNC_READERS = frozenset({K.COPY_SMEM_TO_GMEM, K.WGMMA, K.TCGEN05_MMA})


def commit_marker(loc: Loc) -> Op:
    """Where the proxy fence stands: a memory op touching nothing, removed by `check_commits`."""
    return Op(K.READ, None, name=COMMIT_SMEM, loc=loc)


def maybe(body: tuple, loc: Loc) -> tuple:
    """`body`, which the model runs though the GPU may skip it, bracketed for the fence flow."""
    if not any(fences(op) for op in iter_ops(body)):
        return body
    return (Op(K.READ, None, name=_MAYBE, loc=loc),) + tuple(body) + \
        (Op(K.READ, None, name=_END_MAYBE, loc=loc),)


def _is_marker(op: Op) -> bool:
    return op.kind == K.READ and op.name in (COMMIT_SMEM, _MAYBE, _END_MAYBE) and not op.reads


def _is_bracket(op: Op) -> bool:
    return op.kind == K.READ and op.name in (_MAYBE, _END_MAYBE) and not op.reads


def fences(op: Op) -> bool:
    """A marker, or the fence itself where a frontend keeps it as an op (the CuTe DSL's
    `fence_proxy("async.shared")`, which also orders barrier inits: init_visibility.py)."""
    return (_is_marker(op) and not _is_bracket(op)) or op.kind == K.FENCE_PROXY_ASYNC


def _smem(refs) -> set[str]:
    return {r.alloc.name for r in refs if r.alloc.space == "smem"}


def _flow(body, unfenced: dict[str, Loc], flagged: dict[int, tuple[Op, str, Loc]]) -> dict:
    """The buffers stored to since the last commit after `body` (name -> a store's line), given
    those before it; async reads of such a buffer go into `flagged` (by op id)."""
    state = dict(unfenced)
    before: list[dict] = []           # the state where each open `maybe` bracket began
    for stmt in body:
        if isinstance(stmt, Op):
            if _is_bracket(stmt):
                if stmt.name == _MAYBE:
                    before.append(dict(state))
                else:
                    state = {**state, **before.pop()}
            elif fences(stmt):
                state.clear()
            elif stmt.kind in _ASYNC_READERS:
                for name in sorted(_smem(stmt.reads) & set(state)):
                    flagged.setdefault(id(stmt), (stmt, name, state[name]))
            elif stmt.kind == K.WRITE:
                for name in _smem(stmt.writes):
                    state.setdefault(name, stmt.loc)
        elif isinstance(stmt, When):
            then = _flow(stmt.then, state, flagged)
            orelse = _flow(stmt.orelse, state, flagged)
            state = {**orelse, **then}
        elif isinstance(stmt, WarpRegion):
            state = _flow(stmt.body, state, flagged)
        elif isinstance(stmt, Loop):
            once = _flow(stmt.body, state, flagged)
            twice = _flow(stmt.body, {**state, **once}, flagged)
            state = {**state, **twice}        # a trip count of 0 keeps what came before
    return state


def check_commits(body, fence: str = "plgpu.commit_smem()", concurrent: bool = False) -> tuple:
    """The body without fence markers, with an unmodelled op before each async read of
    shared memory that stores not yet fenced may have written; `fence` is the call the
    kernel's language spells the fence with, for the message. With `concurrent`, the body's
    statements are threads running side by side (Gluon's partitions): each starts from what
    every other one leaves unfenced at its end, whichever comes first in the body."""
    flagged: dict[int, tuple[Op, str, Loc]] = {}
    if not concurrent:
        _flow(body, {}, flagged)
    else:
        ends = [_flow((stmt,), {}, {}) for stmt in body]
        for k, stmt in enumerate(body):
            others: dict[str, Loc] = {}
            for j, end in enumerate(ends):
                if j != k:
                    others = {**end, **others}
            _flow((stmt,), others, flagged)
    return _rewrite(body, flagged, fence)


def check_threads(threads, fence: str, copies) -> list[tuple]:
    """`check_commits` for threads side by side, each body rewritten on its own: thread k
    starts from what every other leaves unfenced at its end, and from its own end too where
    `copies[k]` (one body run by several threads: a CuTe role of several warps)."""
    ends = [_flow(tuple(body), {}, {}) for body in threads]
    out = []
    for k, body in enumerate(threads):
        start: dict[str, Loc] = {}
        for j, end in enumerate(ends):
            if j != k or copies[k]:
                start = {**end, **start}
        flagged: dict[int, tuple[Op, str, Loc]] = {}
        _flow(tuple(body), start, flagged)
        out.append(_rewrite(tuple(body), flagged, fence))
    return out


def _same(new: tuple, old: tuple) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


def _rewrite(body, flagged, fence) -> tuple:
    out: list = []
    for stmt in body:
        if isinstance(stmt, Op):
            if _is_marker(stmt):
                continue
            if id(stmt) in flagged:
                _, name, store = flagged[id(stmt)]
                out.append(Op(K.UNMODELED, None, loc=stmt.loc, name=(
                    f"{stmt.kind} reads `{name}`, stored to at line {store.line} with no "
                    f"proxy fence since: whether the async proxy sees those stores is not "
                    f"modelled (call {fence} after the stores).")))
            out.append(stmt)
        # a loop or branch that held nothing but commits goes, as it would have without them;
        # one the rewrite left alone stays the same object (statements compare by identity:
        # the CuTe frontend joins runs whose warps share them)
        elif isinstance(stmt, Loop):
            body = _rewrite(stmt.body, flagged, fence)
            if _same(body, stmt.body):
                out.append(stmt)
            elif body:
                out.append(Loop(stmt.var, stmt.trip, body, stmt.loc))
        elif isinstance(stmt, When):
            then, orelse = _rewrite(stmt.then, flagged, fence), _rewrite(stmt.orelse, flagged, fence)
            if _same(then, stmt.then) and _same(orelse, stmt.orelse):
                out.append(stmt)
            elif then:
                out.append(When(stmt.cond, then, orelse, stmt.loc))
            elif orelse:
                out.append(When(mk_not(stmt.cond), orelse, (), stmt.loc))
        elif isinstance(stmt, WarpRegion):
            body = _rewrite(stmt.body, flagged, fence)
            out.append(stmt if _same(body, stmt.body) else WarpRegion(stmt.axis, body, stmt.loc))
        else:
            out.append(stmt)
    return tuple(out)
