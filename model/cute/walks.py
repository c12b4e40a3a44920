"""A block's walk over a runtime count, proved: the trip count of a static persistent scheduler.

CUTLASS's static persistent tile scheduler walks the output tiles from the block index by the
grid size (`for tile in range(bidx, tiles, grid)`), so block b of a grid of m runs
ceil((tiles - b) / m) tiles: a floor quotient of the tile count, which differs between the
blocks and, at some tile counts, not at all. family.py reads such a kernel with every block its
own grid position and fits trip counts (and the ring positions after them) in floor quotients
`(p + c) // m` of a runtime value p (counts.py). The fit is checked at every value read; here
each fitted trip count is also proved (Z3) equal, at every p >= 1, to the count of the scf.for it
came from, `max(0, ceil((p - lo) / st))` less the iterations roll.py peeled, from the loop's
bounds as the interpreter saw them: its upper bound p itself at every run, its start and step the
same at every run of a block. A trip count that is not proved leaves the runs unjoined (NoJoin:
the loops stay BP190, fail closed).
"""

from __future__ import annotations

from contextvars import ContextVar

from ..ir import BinOp, Loop, When, evaluate, free_vars
from .counts import NoJoin
from .tree import MAX_BLOCKS, reads_block_index

# (linear block index, loop's location) -> [(run's bindings, lo, hi, step, iterations)], filled
# by the interpreter while family.py reads runs (None: not recording)
BOUNDS: ContextVar[dict | None] = ContextVar("BOUNDS", default=None)
BLOCK_AXIS = "block"

# Set while family.py reads runs whose blocks walk a runtime count from their index (a static
# persistent scheduler: block b walks tiles b, b + grid, ...): every block is its own grid
# position, so runs at values where two blocks happen to walk alike keep the same shape
EVERY_BLOCK: ContextVar[bool] = ContextVar("EVERY_BLOCK", default=False)


def grid_size(tree) -> int | None:
    """The number of blocks the kernel is run for one by one (translate.py), if more than one
    and the kernel reads its block index; else None."""
    if tree.grid_dim is None or not reads_block_index(tree):
        return None
    gx, gy, gz = tree.grid_dim
    return gx * gy * gz if 1 < gx * gy * gz <= MAX_BLOCKS else None


def record(tree, block, loc, bindings: dict, lo: int, hi: int, st: int) -> None:
    """A marked scf.for's bounds in one run of one block (interpreter.py)."""
    table = BOUNDS.get()
    if table is None or block is None or tree.grid_dim is None:
        return
    gx, gy, _ = tree.grid_dim
    x, y, z = block
    linear = x + gx * (y + gy * z)
    count = max(0, (hi - lo + st - 1) // st)
    table.setdefault((linear, loc), []).append((dict(bindings), lo, hi, st, count))


def _quotient(e) -> bool:
    return isinstance(e, BinOp) and (e.op == "//" or _quotient(e.lhs) or _quotient(e.rhs))


def _loops(body, blocks: frozenset):
    """Each loop of the body with the blocks whose grid position runs it."""
    for s in body:
        if isinstance(s, Loop):
            yield s, blocks
            yield from _loops(s.body, blocks)
        elif isinstance(s, When):
            names = free_vars(s.cond)
            if names == {BLOCK_AXIS}:
                inside = frozenset(b for b in blocks if evaluate(s.cond, {BLOCK_AXIS: b}))
                yield from _loops(s.then, inside)
                yield from _loops(s.orelse, blocks - inside)
            else:
                yield from _loops(s.then, blocks)
                yield from _loops(s.orelse, blocks)


def check(body, bindings: list[dict], keys: dict, blocks: int) -> None:
    """NoJoin unless every trip count holding a floor quotient is proved to be its loop's count
    at every value of the parameters (module doc). `keys`: parameter name -> binding key."""
    import z3
    table = BOUNDS.get() or {}
    for loop, members in _loops(body, frozenset(range(blocks))):
        if not _quotient(loop.trip):
            continue
        where = f"line {loop.loc.line}" if loop.loc and loop.loc.line else "a loop"
        names = free_vars(loop.trip)
        if not names <= set(keys):
            raise NoJoin(f"the trip count {loop.trip!r} at {where} reads a loop variable")
        for b in sorted(members):
            seen = table.get((b, loop.loc), [])
            if not seen:
                raise NoJoin(f"the trip count {loop.trip!r} at {where}: no bounds recorded")
            bounds = {(lo, st) for _, lo, _, st, _ in seen}
            upper = [n for n in keys if all(hi == run.get(keys[n]) for run, _, hi, _, _ in seen)]
            peeled = {count - evaluate(loop.trip, {n: run[keys[n]] for n in names})
                      for run, _, _, _, count in seen if count}
            if len(bounds) != 1 or len(upper) != 1:
                raise NoJoin(f"the loop at {where} of block {b} does not run from one start "
                             "by one step up to a runtime value")
            if len(peeled) > 1:
                raise NoJoin(f"the trip count {loop.trip!r} at {where} of block {b} is not "
                             "its loop's count less one number of peeled iterations")
            [(lo, st)], [p], peels = bounds, upper, (peeled.pop() if peeled else 0)
            env = {n: z3.Int(n) for n in keys}
            from .guards import _z
            count = z3.If(env[p] > lo, (env[p] - lo + st - 1) / st, 0)
            solver = z3.Solver()
            solver.set(timeout=10_000)
            solver.add(*(v >= 1 for v in env.values()))
            solver.add(_z(loop.trip, env) + peels != count)
            if solver.check() != z3.unsat:
                raise NoJoin(f"the trip count {loop.trip!r} at {where} of block {b} is not "
                             f"proved to be its loop's count from {lo} by {st} below `{p}`")


def _ops(body, blocks: frozenset):
    """Each op of the body with the blocks whose grid position runs it."""
    for s in body:
        if isinstance(s, Loop):
            yield from _ops(s.body, blocks)
        elif isinstance(s, When):
            if free_vars(s.cond) == {BLOCK_AXIS}:
                inside = frozenset(b for b in blocks if evaluate(s.cond, {BLOCK_AXIS: b}))
                yield from _ops(s.then, inside)
                yield from _ops(s.orelse, blocks - inside)
            else:
                yield from _ops(s.then, blocks)
                yield from _ops(s.orelse, blocks)
        else:
            yield s, blocks


def share_named_barriers(body, blocks: int) -> tuple:
    """The body with each named-barrier instruction one op in every grid position that runs it.
    The runs join each block's program apart, so the bar.sync at one line of two blocks' epilogues
    comes out as two ops, which would read as two aligned bar.sync instructions of one barrier
    (BP141). An instruction is shared only when it is the only op of its kind, line, barrier id
    and count in each position that runs it."""
    from .. import primitives as K
    from ..ir import map_ops
    named = (K.BAR_SYNC, K.BAR_ARRIVE)
    per_position: dict[tuple, dict[frozenset, set]] = {}
    first: dict[tuple, object] = {}
    for op, members in _ops(body, frozenset(range(blocks))):
        if op.kind not in named:
            continue
        key = (op.kind, op.name, op.aligned, op.loc, repr(op.bar_id), repr(op.count))
        per_position.setdefault(key, {}).setdefault(members, set()).add(id(op))
        first.setdefault(key, op)
    shared = {key for key, places in per_position.items()
              if all(len(ids) == 1 for ids in places.values())}

    def swap(op):
        if op.kind not in named:
            return op
        key = (op.kind, op.name, op.aligned, op.loc, repr(op.bar_id), repr(op.count))
        return first[key] if key in shared else op
    return map_ops(body, swap)
