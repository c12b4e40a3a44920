"""Tiles separated by named barriers: the hardware-barrier case of tiles.py.

A warp-specialized kernel on named barriers (`bar.sync` / `bar.arrive`) often ends each tile in
a sync every thread joins (an epilogue barrier). Such tiles follow one another like those
tiles.py separates by mbarrier waits, under these conditions (checked here, each for every value
of the other parameters under the kernel's assumptions):

N1. Shape. The body is exactly `loop t < tiles: B`, neither t nor `tiles` used in B; one block,
    a concrete thread count, no warp regions; B uses `bar.sync` and `bar.arrive` only, with
    concrete ids and counts, and branches on the thread index only.
N2. A closing sync. Every thread ends its tile with `bar.sync` on one id E whose count is every
    thread of the block, and E is used nowhere else in B.
N3. Matched arrivals. For every id b used in B, the hardware threads arriving on b in one tile
    (each arrive or sync of an agent adds its warps x 32, times the trips of its loops) are a
    multiple of b's count. Z3 decides it as `total % count == 0` for every parameter value.
N4. B itself is proved for every value of the other parameters (tiles.py, condition 4).

Why this suffices. A hardware barrier's state is the number of threads arrived in its open phase
and the threads waiting for that phase; a phase completes when its count is reached. Induction
over tiles: tile u starts from the initial state (no arrival open, nobody waiting). E's phase of
tile u completes only when every thread has made its sync arrival on E (N2: count = all threads,
no other use), its last arrival of tile u; so before any thread passes E, every arrival of tile u
has happened. What a thread has left of tile u after E completes is leaving its wait, which
touches its own position only and commutes with every other thread's events: moving those
steps up to E's completion gives a run with the same states at the events that matter, in which
every event of tile u precedes every event of tile u + 1. At that point every barrier b has
received all arrivals of tiles 0..u and none of later tiles, a multiple of its count in each tile
(N3), so its open phase holds none and nobody waits: the initial state again. Every reachable
state of the kernel is then a reachable state of B (the tile in progress), a deadlock of the
kernel is one of B (a thread still leaving E is not blocked), and a rule broken in tile u is one
broken in B (N4). With tiles = 0 nothing runs. N3 is what B's proof does not give: an open phase
at exit is legal on hardware (hw.py), so B may end with arrivals pending, which would shift the
next tile's phases.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import z3

from ...model.hw_barriers import ALL_THREADS, BAR_SYNC, WARP_SIZE
from ...model.ir import Kernel, Loop, ModelError, Op, evaluate, free_vars, iter_ops
from .hw import NAMED_KINDS
from .terms import Unsupported

HOW = ("every tile ends in a bar.sync every thread joins, and every named barrier's arrivals in "
       "a tile are a multiple of its count (checked by Z3 for every value of the other "
       "parameters), so every tile starts from the reset state after the previous one "
       "(checker/symbolic/named_tiles.py)")


def is_named_tile(loop: Loop) -> bool:
    """Does the tile program use named barriers only (the case of this module)?"""
    ops = list(iter_ops(loop.body))
    return bool(ops) and all(op.kind in NAMED_KINDS for op in ops)


def _concrete(e, fixed, what: str, op: Op) -> int:
    if free_vars(e) - set(fixed):
        raise Unsupported(f"`{op.describe()}`: its {what} `{e}` is not concrete")
    return evaluate(e, fixed)


def why_not_named(kernel: Kernel, loop: Loop, fixed: Mapping[str, int], facts, programs
                  ) -> str | None:
    """None when conditions N1-N3 of the module doc hold for `loop`, else what fails.
    `facts` is tiles.py's validity oracle, `programs(j)` thread j's tile program."""
    try:
        if any(evaluate(n, fixed) != 1 for _, n in kernel.cluster):
            return "named barriers separate the tiles of one block, not of a cluster"
        if free_vars(kernel.num_threads) - set(fixed):
            return "the number of threads is not concrete"
        agents = evaluate(kernel.num_threads, fixed)
        weight = kernel.num_warps * WARP_SIZE                 # hardware threads of one agent
        block = agents * weight
        counts: dict[int, int] = {}
        for op in iter_ops(loop.body):
            bar = _concrete(op.bar_id, fixed, "barrier id", op)
            counts[bar] = block if op.name == ALL_THREADS else \
                _concrete(op.count, fixed, "thread count", op)
            if counts[bar] <= 0:
                return f"`{op.describe()}` has no positive thread count"
        progs = [programs(j) for j in range(agents)]
        # N2: every thread's last operation is a sync on one id counting the whole block
        lasts = [p[-1] if p and isinstance(p[-1], Op) else None for p in progs]
        if any(op is None or op.kind != BAR_SYNC for op in lasts):
            return "a thread does not end its tile with a bar.sync outside loops"
        closing = {evaluate(op.bar_id, fixed) for op in lasts}
        if len(closing) != 1:
            return f"the threads end their tiles on different named barriers {sorted(closing)}"
        (e,) = closing
        if counts[e] != block:
            return (f"the closing named barrier {e} counts {counts[e]} of the block's {block} "
                    "threads")
        for j, prog in enumerate(progs):
            uses = [op for item in prog for op in
                    ([item] if isinstance(item, Op) else item.body)
                    if evaluate(op.bar_id, fixed) == e]
            if len(uses) != 1:
                return (f"thread {j} uses the closing named barrier {e} elsewhere in its tile "
                        "(its phases need not end with the tile)")
        # N3: the arrivals on each id in one tile are a multiple of its count
        for bar, count in sorted(counts.items()):
            total = z3.IntVal(0)
            for prog in progs:
                for item in prog:
                    ops = [item] if isinstance(item, Op) else item.body
                    n = sum(weight for op in ops if evaluate(op.bar_id, fixed) == bar)
                    if not n:
                        continue
                    if isinstance(item, Op):
                        total = total + n
                    else:
                        trip = facts.int(item.trip)
                        total = total + n * z3.If(trip > 0, trip, 0)
            if not facts.valid(total % count == 0):
                return (f"the arrivals on named barrier {bar} in one tile are not a multiple "
                        f"of its count {count} for every value of the other parameters (its "
                        "phases run across tiles)")
    except (Unsupported, ModelError) as err:
        return str(err)
    return None


__all__ = ["HOW", "is_named_tile", "why_not_named"]
