"""Races of a persistent kernel `loop t < tiles: B` judged through one tile B.

tiles.py shows, from the barrier events alone, that when the kernel's own waits separate its
tiles (its conditions 1-3, and 5-7 for a pair of blocks) every barrier event of tile u + 1
follows every barrier event of tile u, up to a closer's trailing waits, which touch no memory.
For races that is not enough: an access may stay live past its thread's last barrier event (a
WGMMA not yet retired, a TMA store in flight into the next tile). So the buffers are split:

- Bounded buffers: every access to them, in every thread's tile program, is a barrier-tracked
  copy (an arrival itself, landed before a completion some thread observes in the tile), or is
  followed in program order, on every path, by an arrival of its own thread in the same tile,
  an asynchronous one (WGMMA, TMA store, ...) also by a full retire of its group (`wait(0)`) in
  the same body before that arrival. Then each such access is over before its thread's last
  arrival: for a thread j other than the closer before j's last arrive, which the closer
  observes before it ends the tile; for the closer before its last arrival, so that nothing is
  live while its trailing waits commute with the other block's next tile. No access to these
  buffers is live across a tile's boundary, every reachable state of the kernel is (up to
  those waits) a reachable state of B, and a race of the kernel is a race of B. These buffers
  are judged in B, with the other buffers' accesses left out (barrier-less ops, so every run of
  the kernel is a run of that program, each access live as long).
- The other buffers, when only barrier-less accesses touch them (a warpgroup's staging slots
  stored to global memory across tiles): judged on the whole kernel with every barrier
  operation and every loop touching none of them left out. Leaving out synchronization and
  other buffers' accesses only adds runs (an async wait left without its issues retires
  nothing more), so a race on them in the kernel is one there; what is left is one loop level,
  whose thread-private cells own_copies.py follows along the thread's program.

Anything else returns None (the caller judges the kernel whole).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping, Sequence

from ...model import kinds, primitives as K
from ...model.ir import (Kernel, Loop, ModelError, Op, Var, WarpRegion, When, evaluate,
                         free_vars, iter_ops, map_ops, walk, without_memory)
from ...model.kinds import ASYNC_GROUPS, ASYNC_WAITS, MEMORY_KINDS
from .proofs import Proof
from .races_nested import _only_buffers
from .terms import Unsupported
from .tiles import ARRIVING, _Facts, _program, one_tile, tile_loop, why_not

# a thread's loads and stores, over when it moves on
SYNC = kinds.kinds_where(lambda p: p.memory == "thread")
HOW = ("per tile ({name}): the kernel's waits separate its tiles and every access to {bounded} "
       "ends before its thread's last arrival in the tile, so one tile judges them"
       "{rest} (checker/symbolic/races_tiles.py)")


def prove_races_by_tile(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                        prove: Callable, check_at: Callable | None = None) -> Proof | None:
    """`prove(kernel, symbolic, fixed)` on the kernels of the module doc, joined; None when the
    reduction does not apply. A tile with nothing symbolic left (the tile count was the only
    symbolic parameter) goes to `check_at(kernel, values)` -> (ok, text), the explorer, races
    and all: one exhaustive search of B at its values decides B's races there; a tile it does
    not verify says nothing of the kernel (a race of the kernel is one of B, not conversely),
    so the kernel is then judged whole (None)."""
    cut = _cut(kernel, symbolic, fixed, concrete_tile=check_at is not None)
    if cut is None:
        return None
    name, tile, tsym, tfixed, own, bounded, others = cut
    first = prove(tile, tsym, tfixed) if tsym else _explored(tile, tfixed, check_at)
    if first is None:
        return None
    proofs = [first]
    if first.status == "proved" and own is not None:
        proofs.append(prove(own, list(symbolic), dict(fixed)))
    bad = next((p for p in proofs if p.status != "proved"), None)
    rest = "" if not others else (f"; {', '.join(others)} on the kernel without barriers and "
                                  "without the loops not touching them")
    how = HOW.format(name=name, bounded=", ".join(bounded), rest=rest)
    if bad is not None:
        # one tile's race is the kernel's only where a single tile is a value of its tile count
        return dataclasses.replace(bad, status="unknown",
                                   reason=f"{bad.reason} (after {how})")
    return dataclasses.replace(
        proofs[0], seconds=max(p.seconds for p in proofs),
        classes=[c for p in proofs for c in p.classes],
        side_conditions=list(dict.fromkeys(x for p in proofs for x in p.side_conditions)),
        cases=list(dict.fromkeys([c for p in proofs for c in p.cases] + [how])))


def _explored(tile: Kernel, values: Mapping[str, int], check_at: Callable) -> Proof | None:
    """The tile verified by the explorer at `values`, else None."""
    start = time.perf_counter()
    ok, _ = check_at(tile, dict(values))
    if not ok:
        return None
    return Proof("proved", time.perf_counter() - start, "",
                 cases=[f"one tile by the explorer at {dict(values)}"])


def _cut(kernel: Kernel, symbolic, fixed, concrete_tile: bool = False):
    body = kernel.body
    if not body or not isinstance(body[0], Loop) or not isinstance(body[0].trip, Var):
        return None
    name = body[0].trip.name
    if name not in symbolic and name not in fixed:
        return None
    # after the tile loop, only retires of asynchronous groups (left out: weaker)
    if any(not isinstance(s, Op) or s.kind not in ASYNC_WAITS or s.barrier is not None
           for s in body[1:]):
        return None
    loop = tile_loop(body[:1], name)
    if loop is None or not any(isinstance(s, Loop) for s in walk(loop.body)):
        return None
    tsym = [n for n in symbolic if n != name]
    tfixed = {n: v for n, v in fixed.items() if n != name}
    if not tsym and not concrete_tile:
        return None
    bare = without_memory(kernel.replace(body=(loop,)))
    if why_not(bare, bare.body[0], tfixed, tsym) is not None:
        return None
    try:
        facts = _Facts(kernel, tsym, tfixed)
        if free_vars(kernel.num_threads) - set(tfixed):
            return None
        n = evaluate(kernel.num_threads, tfixed)
        progs = [_program(loop.body, kernel.thread_axis, j, tfixed) for j in range(n)]
    except (Unsupported, ModelError):
        return None
    unbounded: set[str] = set()
    for prog in progs:
        for i, item in enumerate(prog):
            for p, op in (enumerate(item.body) if isinstance(item, Loop) else [(None, item)]):
                if op.reads or op.writes:
                    if not _bounded(prog, i, p, op, facts):
                        unbounded |= {m.alloc.name for m in op.reads + op.writes}
    names = {m.alloc.name for op in iter_ops(loop.body) for m in op.reads + op.writes}
    bounded = sorted(names - unbounded)
    if not bounded:
        return None
    for op in kernel.ops():
        if op.barrier is not None and any(m.alloc.name in unbounded
                                          for m in op.reads + op.writes):
            return None      # a barrier-tracked access that outlives its tile
    keep = set(bounded)
    groups = {ASYNC_GROUPS[op.kind] for op in kernel.ops() if op.kind in ASYNC_GROUPS and
              any(m.alloc.name in keep for m in op.reads + op.writes)}
    tile_body = _drop_idle(_only_buffers((loop,), keep), groups)
    tk = kernel.replace(body=tile_body, buffers=tuple(m for m in kernel.buffers if m.name in keep))
    tile = one_tile(tk, tile_body[0], name)
    own = None
    if unbounded:
        own_body = _own_only(body, unbounded)
        if own_body is None:
            return None
        own = kernel.replace(body=own_body, barriers=(),
                             buffers=tuple(m for m in kernel.buffers if m.name in unbounded))
    return name, tile, tsym, tfixed, own, bounded, sorted(unbounded)


def _bounded(prog, i: int, p, op: Op, facts) -> bool:
    """`op` (item i of the program, position p of its loop body or None) is over before an
    arrival of its thread that follows it in the tile (module doc)."""
    if op.kind == K.COPY_GMEM_TO_SMEM and op.barrier is not None:
        return True              # a barrier-tracked copy: an arrival itself
    if op.kind not in ASYNC_GROUPS and op.kind not in SYNC:
        return False             # an MMA completing on a barrier, or anything else
    seq = list(prog[i].body) if p is not None else list(prog)
    at = p if p is not None else i
    if op.kind in ASYNC_GROUPS:
        group = ASYNC_GROUPS[op.kind]
        at = next((q for q in range(at + 1, len(seq)) if isinstance(seq[q], Op) and
                   _full_retire(seq[q], group)), None)
        if at is None:
            return False
    if any(isinstance(x, Op) and x.kind in ARRIVING for x in seq[at + 1:]):
        return True
    for item in prog[(i if p is not None else at) + 1:]:
        if isinstance(item, Op) and item.kind in ARRIVING:
            return True
        if isinstance(item, Loop) and any(x.kind in ARRIVING for x in item.body) and \
                facts.valid(facts.int(item.trip) >= 1):
            return True
    return False


def _full_retire(op: Op, group: str) -> bool:
    wait = ASYNC_WAITS.get(op.kind)
    if wait is None or wait[0] != group:
        return False
    return not wait[1] or (op.count is not None and not free_vars(op.count)
                           and evaluate(op.count, {}) == 0)


def _drop_idle(body, groups: set[str]) -> tuple:
    """Memory-only ops left touching nothing, and retires of groups no kept access issues,
    left out (barrier-less: every run keeps its accesses, each live as long)."""
    def idle(op: Op) -> bool:
        return op.barrier is None and not (op.reads or op.writes) and (
            op.kind in MEMORY_KINDS and ASYNC_WAITS.get(op.kind, ("",))[0] not in groups)
    return map_ops(body, lambda op: () if idle(op) else op)


def _touches(s, names) -> bool:
    return any(isinstance(x, Op) and any(m.alloc.name in names for m in x.reads + x.writes)
               for x in walk([s]))


def _own_only(body, names: set[str]):
    """The statements with barrier operations, other buffers' accesses and loops touching none
    of `names` left out; None where a kept op is a barrier operation."""
    out = []
    for s in body:
        if isinstance(s, Op):
            if s.barrier is not None:
                if _touches(s, names):
                    return None
                continue
            if s.reads or s.writes:
                if not _touches(s, names):
                    continue
                s = dataclasses.replace(
                    s, reads=tuple(m for m in s.reads if m.alloc.name in names),
                    writes=tuple(m for m in s.writes if m.alloc.name in names))
            out.append(s)
        elif isinstance(s, Loop):
            if not _touches(s, names):
                continue
            inner = _own_only(s.body, names)
            if inner is None:
                return None
            out.append(Loop(s.var, s.trip, inner, s.loc))
        elif isinstance(s, When):
            then, other = _own_only(s.then, names), _own_only(s.orelse, names)
            if then is None or other is None:
                return None
            out.append(When(s.cond, then, other, s.loc))
        elif isinstance(s, WarpRegion):
            inner = _own_only(s.body, names)
            if inner is None:
                return None
            out.append(WarpRegion(s.axis, inner, s.loc))
        else:
            out.append(s)
    return tuple(out)


__all__ = ["prove_races_by_tile"]
