"""Persistent kernels for every number of tiles: `loop t < tiles: B` proved through one tile B.

A persistent kernel runs the same tile program B (a K loop per role) `tiles` times, its
barriers allocated once, so their phases run on across tiles. The prover has no nested loops;
instead, when the tiles are separated by the kernel's own synchronization, `tiles` copies of B
behave like one copy started again from a reset barrier state, and it is enough to prove B.

The conditions (checked here, each for every value of the other parameters):

1. Shape. The body is exactly `loop t < tiles: B`, neither t nor `tiles` used in B; one block
   or a pair of blocks (a cluster of 2), a concrete thread count, no warp regions; B uses
   `barrier_wait` (the Pallas wait: thread j's k-th wait waits for completion k),
   `barrier_arrive` and `copy_gmem_to_smem` only, on the own block's instances, branches on
   the thread index only (both blocks run the same program). In a pair, a ClusterBarrier
   arrival and a multicast copy reach both blocks (no leader-tracked barriers).
2. A closer. Exactly one thread c does not start its tile with a wait. Every other thread j
   ends its tile with a `barrier_arrive` on an instance that c waits on in the tile (in a pair,
   on a ClusterBarrier: it reaches both blocks' closers), and for every array a copy arrives
   on, every instance is waited on by some thread.
3. Gated starts. Every thread j != c starts its tile with a `barrier_wait` on an array that
   only c's operations arrive on (its arrives and its copies; in a pair, a Barrier of the own
   block, so only the own block's closer opens it).
4. B itself is proved (or explored, when nothing symbolic is left) for every value of the other
   parameters, with the exit rules BP103/BP104/BP105.

For a pair of blocks, three more:

5. Every instance of an array that c arrives on (arrives or copies) is waited on by a thread
   j != c.
6. c waits only on arrays that no copy and not c itself arrive on.
7. The first wait of every j != c needs the other block's share of a multicast copy: among
   the first arrivals of c on that instance (as many as the barrier counts, the same
   operations for every size) is a copy multicast to both blocks, of more than 0 bytes.

Why this suffices (one block). By 4, at the end of one tile every barrier is back to
`pending == expected`, `tx == 0`, nothing in flight, and every thread that waits on an instance
has observed all of its completions; the arrivals on an instance in a tile are exactly its
expected count times its completions. When c finishes its tile, it has observed every
completion of the instance j's last arrive went to (it waits on it, and by BP103 observes them
all), so that arrive -- and every earlier event of j -- has happened (2); every copy of the tile
has landed before the last completion of its instance, observed by some thread that finished
before c or by c (2). So c's last event is the last event of the tile. The next tile's first
event of c comes after it; that of j != c is a wait for a completion of an instance only c
arrives on, which needs an arrival of c's next tile (3): every event of tile u + 1 follows every
event of tile u. Each tile therefore runs from a state equal to the initial one up to the phase
numbers (the Pallas wait counts completions, and the rules BP101-BP105 are relative to them), so
every reachable state of the kernel is a reachable state of B shifted, a deadlock of the kernel
one of B (a finished thread waits at its next tile's first wait, or ends), and a rule broken in
tile u one broken in B. With tiles = 0 nothing runs.

Why this suffices (a pair). Take the first event that breaks a rule or the order below; until
then the argument holds. When either closer finishes tile u, every j != c of both blocks has
finished it (2: the last arrival reaches both blocks), so every instance waited on by a j != c
has completed all of tile u's phases: every arrival and copy of tile u by the other closer
has happened too (5), and what that closer has left of tile u are waits (its last operations
after its last arrival) on arrays only the j != c arrive on, without bytes (6), all of whose
tile-u arrivals have happened: they are enabled, and stay so (a Pallas wait counts
completions). The first wait of a j != c in tile u + 1 needs the first completion of tile u + 1
of its instance: its arrivals are the first ones of its own closer in tile u + 1 (3), and their
bytes include a multicast whose other half must land from the other block's closer (7), from a
copy of tile u + 1 (those of tile u landed in tile u's phases): so no j != c starts tile u + 1
before both closers have ended tile u. Before that, the events of tile u + 1 are a closer's,
on instances whose tile-u phases are complete and which the other closer's remaining waits do
not read (6): they commute with those waits. Moving the waits before them gives a run whose
tiles follow one another, and the one-block argument applies to it; a deadlock cannot leave a
closer at an enabled wait.

A tile count the user did not ask symbolic stays fixed in the verdict (no parameter becomes
symbolic unasked), but the argument above is for every tile count, so when conditions 1-3 (and
5-7) hold -- checked the same way, for every value of the asked parameters -- a proof of one tile
for every size proves the fixed count too. Anything short of that proof falls back to the whole
kernel at the fixed count.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import z3

from ...model import primitives as K
from ...model.expr import mk, mk_not, stmt_vars, substitute
from ...model.ir import (Const, Expr, Kernel, Loop, ModelError, Op, Var, WarpRegion, When,
                         evaluate, free_vars, iter_ops, walk)
from .named_tiles import HOW as NAMED_HOW, is_named_tile, why_not_named
from .terms import Unsupported, z_bool, z_int

# The Pallas operations the argument is made for (module doc, condition 1).
KINDS = (K.BARRIER_WAIT, K.BARRIER_ARRIVE, K.COPY_GMEM_TO_SMEM)
ARRIVING = (K.BARRIER_ARRIVE, K.COPY_GMEM_TO_SMEM)
WITNESSES = 4       # iterations tried from each end of a loop as the one that waits


def tile_loop(body: Sequence, name: str) -> Loop | None:
    """The loop when `body` is exactly `loop t < name: B` with neither t nor `name` in B."""
    if len(body) != 1 or not isinstance(body[0], Loop):
        return None
    loop = body[0]
    if not (isinstance(loop.trip, Var) and loop.trip.name == name):
        return None
    if {loop.var, name} & stmt_vars(loop.body):
        return None
    return loop


def leaves(body: Sequence, symbolic: Sequence[str]) -> list[tuple[tuple, list[Expr]]]:
    """The programs of a body that is a tree of branches on parameters (cases.py's splits),
    each with the conditions that lead to it."""
    if len(body) == 1 and isinstance(body[0], When) and free_vars(body[0].cond) <= set(symbolic):
        w = body[0]
        return [(b, [w.cond] + c) for b, c in leaves(w.then, symbolic)] + \
            [(b, [mk_not(w.cond)] + c) for b, c in leaves(w.orelse, symbolic)]
    return [(tuple(body), [])]


def one_tile(kernel: Kernel, loop: Loop, name: str) -> Kernel:
    """The kernel running the tile program once, without the parameter `name`."""
    params = {n: p for n, p in kernel.params.items() if n != name}
    assumptions = tuple(a for a in kernel.assumptions if name not in free_vars(a))
    return kernel.replace(body=loop.body, params=params, assumptions=assumptions,
                          name=kernel.name)


class _Facts:
    """Validity under the kernel's assumptions, other parameters symbolic or fixed."""

    def __init__(self, kernel: Kernel, symbolic, fixed, extra=()):
        self.env: dict = {n: z3.IntVal(v) for n, v in fixed.items()}
        for n in symbolic:
            self.env[n] = z3.Int(n)
        self.facts = [z_bool(a, self.env) for a in tuple(kernel.assumptions) + tuple(extra)
                      if free_vars(a) <= set(self.env)]    # not those on the tile count

    def valid(self, claim) -> bool:
        s = z3.Solver()
        s.set("timeout", 5000)
        s.add(*self.facts, z3.Not(claim))
        return s.check() == z3.unsat

    def int(self, e: Expr):
        return z_int(e, self.env)


def _program(body, axis: str, thread: int, fixed) -> list:
    """Thread `thread`'s tile program: ops and loops of ops, branches on the thread resolved."""
    out = []
    for s in body:
        if isinstance(s, Op):
            out.append(s)
        elif isinstance(s, Loop):
            inner = _program(s.body, axis, thread, fixed)
            if any(not isinstance(x, Op) for x in inner):
                raise Unsupported("a loop nested in the tile program's loops")
            out.append(Loop(s.var, s.trip, tuple(inner), s.loc))
        elif isinstance(s, When):
            if not free_vars(s.cond) <= {axis} | set(fixed):
                raise Unsupported(f"the branch `{s.cond}` is not on the thread index alone")
            taken = evaluate(s.cond, {**fixed, axis: thread})
            out += _program(s.then if taken else s.orelse, axis, thread, fixed)
        else:
            raise Unsupported("a warp region in the tile program")
    return out


def _first(prog, facts: _Facts) -> tuple[Op, dict] | None:
    """The thread's first operation and its loop variable's value, when it is the same one for
    every parameter value."""
    for item in prog:
        if isinstance(item, Op):
            return item, {}
        if facts.valid(facts.int(item.trip) >= 1):
            return (item.body[0], {item.var: Const(0)}) if item.body else None
        if not facts.valid(facts.int(item.trip) <= 0):
            return None
    return None


def _last(prog, facts: _Facts) -> tuple[Op, dict] | None:
    for item in reversed(prog):
        if isinstance(item, Op):
            return item, {}
        if facts.valid(facts.int(item.trip) >= 1):
            return (item.body[-1], {item.var: mk("-", item.trip, Const(1))}) \
                if item.body else None
        if not facts.valid(facts.int(item.trip) <= 0):
            return None
    return None


def _index(op: Op, env: dict, facts: _Facts) -> list:
    return [facts.int(substitute(e, env)) for e in op.barrier.index]


def _waits_on(prog, alloc, index: list, facts: _Facts, given=None) -> bool:
    """Does the program wait, for every parameter value, on the instance `alloc[index]`?
    (A witness iteration is looked for at either end of each loop; with `given`, the premise
    on a symbolic instance (INSTANCE) of an array of symbolic size, also at iteration
    INSTANCE.)"""
    premise = z3.BoolVal(True) if given is None else given
    for item in prog:
        ops = [(item, None)] if isinstance(item, Op) else [(op, item) for op in item.body]
        for op, loop in ops:
            if op.kind != K.BARRIER_WAIT or op.barrier.alloc is not alloc:
                continue
            if loop is None:
                envs = [({}, z3.BoolVal(True))]
            else:
                trip = facts.int(loop.trip)
                envs = [({loop.var: Const(d)}, trip > d) for d in range(WITNESSES)] + \
                    [({loop.var: mk("-", loop.trip, Const(d + 1))}, trip > d)
                     for d in range(WITNESSES)]
                if given is not None:
                    envs.append(({loop.var: Var(INSTANCE)}, trip > z3.Int(INSTANCE)))
            for env, inside in envs:
                got = _index(op, env, facts)
                if facts.valid(z3.Implies(premise, z3.And(
                        [inside] + [a == b for a, b in zip(got, index)]))):
                    return True
    return False


INSTANCE = "instance__"     # a symbolic slot of an array of symbolic size


def _every_instance_waited(progs, alloc, facts: _Facts) -> bool:
    """Is every instance of the one-dimensional `alloc` waited on by some thread, for every
    size? A concrete size instance by instance; a symbolic size S at a symbolic slot
    0 <= x < S, each loop tried at iteration x too (a ring loop `i < T` waiting on `i % S`
    with T >= S takes slot x at iteration x)."""
    size = _const(alloc.shape[0], facts)
    if size is not None:
        return all(any(_waits_on(p, alloc, [z3.IntVal(x)], facts) for p in progs)
                   for x in range(size))
    x = z3.Int(INSTANCE)
    facts.env[INSTANCE] = x
    try:
        given = z3.And(x >= 0, x < facts.int(alloc.shape[0]))
        return any(_waits_on(p, alloc, [x], facts, given) for p in progs)
    finally:
        del facts.env[INSTANCE]


def _pair_axis(kernel: Kernel, fixed) -> tuple[str | None, str | None]:
    """(the cluster axis of a pair of blocks, None); (None, None) for one block; (None, why)
    for any other cluster shape."""
    try:
        sizes = [(a, evaluate(n, fixed)) for a, n in kernel.cluster]
    except ModelError:
        return None, "the cluster's shape is not concrete"
    big = [(a, n) for a, n in sizes if n != 1]
    if not big:
        return None, None
    if len(big) == 1 and big[0][1] == 2:
        return big[0][0], None
    return None, (f"a cluster of {'x'.join(str(n) for _, n in sizes)} blocks (tiles are "
                  "separated for one block or a pair of blocks)")


def _ops(prog):
    return [op for item in prog for op in ([item] if isinstance(item, Op) else item.body)]


def _const(expr: Expr, facts: _Facts) -> int | None:
    """The value of `expr` when it is the same for every size (None otherwise)."""
    value = z3.simplify(facts.int(expr))
    return value.as_long() if z3.is_int_value(value) else None


def _first_arrivals(prog, alloc, index, count: int, facts: _Facts, bound: int = 64):
    """The closer's first operations that arrive on `alloc[index]`, in program order, until
    `count` arrivals; None when they are not the same ones for every size."""
    def iterations():
        for item in prog:
            if isinstance(item, Op):
                yield {}, [item]
                continue
            trip = facts.int(item.trip)
            for d in range(bound):
                if facts.valid(trip <= d):
                    break
                if not facts.valid(trip > d):
                    yield None, None            # may or may not run: not the same for all
                    return
                yield {item.var: Const(d)}, item.body
            else:
                yield None, None
                return

    out, total = [], 0
    for env, ops in iterations():
        if env is None:
            return None
        for op in ops:
            if op.kind not in ARRIVING or op.barrier.alloc is not alloc:
                continue
            same = z3.And([a == b for a, b in zip(_index(op, env, facts), index)])
            if facts.valid(z3.Not(same)):
                continue
            n = 1 if op.kind == K.COPY_GMEM_TO_SMEM else _const(op.count, facts)
            if n is None or not facts.valid(same):
                return None
            out.append((op, env))
            total += n
            if total >= count:
                return out
    return None


def _pair_conditions(progs, c: int, firsts, facts: _Facts, axis: str) -> str | None:
    """Conditions 5-7 of the module doc for a pair of blocks; None when they hold."""
    closer_ops, other_ops = _ops(progs[c]), [op for j, p in enumerate(progs) if j != c
                                             for op in _ops(p)]
    # 5. whatever a closer arrives on is waited on by another thread, at every instance
    for alloc in {op.barrier.alloc for op in closer_ops if op.kind in ARRIVING}:
        if len(alloc.shape) != 1:
            return f"`{alloc.name}` is not a one-dimensional array"
        size = _const(alloc.shape[0], facts)
        if size is None:
            return f"`{alloc.name}` has no size that is the same for every size"
        for x in range(size):
            if not any(_waits_on(p, alloc, [z3.IntVal(x)], facts)
                       for j, p in enumerate(progs) if j != c):
                return (f"no thread but the closer {c} waits on `{alloc.name}[{x}]` for every "
                        "size (the other block's closer could still be arriving on it)")
    # 6. the closer waits only on barriers the other threads arrive on, without copies
    for alloc in {op.barrier.alloc for op in closer_ops if op.kind == K.BARRIER_WAIT}:
        if any(op.barrier.alloc is alloc and op.kind in ARRIVING for op in closer_ops) or \
                any(op.barrier.alloc is alloc and op.kind == K.COPY_GMEM_TO_SMEM
                    for op in other_ops):
            return (f"the closer {c} waits on `{alloc.name}`, which copies or the closer "
                    "itself arrive on (its last waits may not be enabled when the other "
                    "threads end their tile)")
    # 7. each other thread's first wait needs the other block's share of a multicast copy
    for j, prog in enumerate(progs):
        if j == c or not prog:
            continue
        first, env = firsts[j]
        alloc = first.barrier.alloc
        need = _const(alloc.num_arrivals, facts)
        if need is None or need < 1:
            return f"`{alloc.name}` has no arrival count >= 1 that is the same for every size"
        index = _index(first, env, facts)
        ops = _first_arrivals(progs[c], alloc, index, need, facts)
        if ops is None:
            return (f"the arrivals that open thread {j}'s first wait on `{alloc.name}` are "
                    "not the same operations for every size")
        if not any(op.kind == K.COPY_GMEM_TO_SMEM and axis in op.collective_axes and
                   facts.valid(facts.int(substitute(op.bytes, e)) > 0) for op, e in ops):
            return (f"thread {j}'s first wait on `{alloc.name}` does not need the other "
                    "block's share of a multicast copy (a block could start its next tile "
                    "before the other block's closer ends this one)")
    return None


def why_not(kernel: Kernel, loop: Loop, fixed: Mapping[str, int], symbolic: Sequence[str],
            extra=()) -> str | None:
    """None when the tiles of `loop` are separated by the kernel's synchronization (conditions
    1-3 of the module doc), else what fails."""
    if is_named_tile(loop):
        # hardware barriers: tiles closed by a sync of the whole block (named_tiles.py)
        try:
            facts = _Facts(kernel, symbolic, fixed, extra)
        except (Unsupported, ModelError) as err:
            return str(err)
        return why_not_named(kernel, loop, fixed, facts, lambda j: _program(
            loop.body, kernel.thread_axis, j, fixed))
    axis, why = _pair_axis(kernel, fixed)
    if why is not None:
        return why
    for op in iter_ops(loop.body):
        if op.kind not in KINDS:
            return f"`{op.describe()}` is not one of {', '.join(KINDS)}"
        if op.barrier is None or op.barrier.block is not None or \
                op.parity is not None or op.phase is not None:
            return f"`{op.describe()}` is not a Pallas barrier operation on the own block"
        alloc = op.barrier.alloc
        if axis is None and (op.collective_axes or alloc.cluster):
            return f"`{op.describe()}` reaches other blocks of a cluster of one block"
        if axis is not None and (
                alloc.leader_tracked or (alloc.cluster and axis not in alloc.collective_axes)
                or (op.collective_axes and axis not in op.collective_axes)):
            return (f"`{op.describe()}` does not reach both blocks of the cluster (a "
                    "leader-tracked barrier, or collective axes without the pair's axis)")
    try:
        facts = _Facts(kernel, symbolic, fixed, extra)
        if free_vars(kernel.num_threads) - set(fixed):
            return "the number of threads is not concrete"
        n = evaluate(kernel.num_threads, fixed)
        progs = [_program(loop.body, kernel.thread_axis, j, fixed) for j in range(n)]
        firsts = [_first(p, facts) if p else (None, {}) for p in progs]
        if any(f is None for f in firsts):
            return "a thread's first operation depends on the parameters"
        closers = [j for j, (op, _) in enumerate(firsts)
                   if op is not None and op.kind != K.BARRIER_WAIT]
        if len(closers) != 1:
            return (f"{len(closers)} threads start a tile without waiting (one closer whose "
                    "end orders the tile is needed)")
        c = closers[0]
        for j, prog in enumerate(progs):
            if j == c or not prog:
                continue
            first, _ = firsts[j]
            alloc = first.barrier.alloc
            if axis is not None and alloc.cluster:
                return (f"`{alloc.name}`, which thread {j} waits on first, is a ClusterBarrier "
                        "(the other block's arrivals could open it)")
            others = [op for k, p in enumerate(progs) if k != c for item in p
                      for op in ([item] if isinstance(item, Op) else item.body)
                      if op.kind in ARRIVING and op.barrier.alloc is alloc]
            if others:
                return (f"`{alloc.name}`, which thread {j} waits on first, is also arrived on "
                        f"by a thread other than {c} (`{others[0].describe()}`)")
            last = _last(prog, facts)
            if last is None or last[0].kind != K.BARRIER_ARRIVE:
                return f"thread {j} does not end its tile with a barrier_arrive"
            op, env = last
            if not _waits_on(progs[c], op.barrier.alloc, _index(op, env, facts), facts):
                return (f"thread {c} does not wait on the barrier of thread {j}'s last "
                        f"`{op.describe()}` for every size")
            if axis is not None and not op.barrier.alloc.cluster:
                return (f"thread {j}'s last `{op.describe()}` does not reach the other "
                        "block's closer (a Barrier, not a ClusterBarrier)")
        if axis is not None:
            why = _pair_conditions(progs, c, firsts, facts, axis)
            if why is not None:
                return why
        for alloc in {op.barrier.alloc for op in iter_ops(loop.body)
                      if op.kind == K.COPY_GMEM_TO_SMEM}:
            if len(alloc.shape) != 1:
                return f"`{alloc.name}` is not a one-dimensional array"
            if not _every_instance_waited(progs, alloc, facts):
                return f"no thread waits on every instance of `{alloc.name}` for every size"
    except (Unsupported, ModelError) as err:
        return str(err)
    return None


def promotable(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
               given: Sequence[str] = ()) -> list[str]:
    """Parameters of `fixed` (not `given` by the user) that count a persistent kernel's tiles
    and may be made symbolic: in every case of the body (cases.py) the body is one tile loop
    over it whose tiles the kernel's synchronization separates."""
    out = []
    for name in fixed:
        if not name.startswith("tiles") or name in given:   # the shape family's tile counts
            continue
        rest = {n: v for n, v in fixed.items() if n != name}
        ok = True
        for body, conds in leaves(kernel.body, symbolic):
            loop = tile_loop(body, name)
            if loop is None or why_not(kernel, loop, rest, symbolic, conds) is not None:
                ok = False
                break
        if ok:
            out.append(name)
    return out


def prove_tiles(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                timeout: float, prove: Callable, check_at: Callable):
    """`prove(kernel, symbolic, fixed, timeout)`, through one tile when the body is a tile
    loop over a symbolic parameter (module doc); `check_at(kernel, values)` -> (ok, text) is
    the explorer for a tile with nothing symbolic left."""
    from .proofs import Proof
    start = time.perf_counter()
    # only a loop around loops: a single loop is the prover's own business
    name = next((n for n in symbolic if _nest(kernel, n) is not None), None)
    if name is None:
        held = next((n for n in fixed if _nest(kernel, n) is not None), None)
        if held is not None and symbolic:
            return _prove_fixed_tiles(kernel, held, symbolic, fixed, timeout, prove)
        return prove(kernel, symbolic, fixed, timeout)
    loop = tile_loop(kernel.body, name)
    rest = [n for n in symbolic if n != name]
    why = why_not(kernel, loop, fixed, rest)
    if why is not None:
        proof = prove(kernel, symbolic, fixed, timeout)
        if proof.status != "proved":
            proof.reason = (f"the tiles of `{name}` are not shown separated ({why}); "
                            f"without that: {proof.reason}")
        return proof
    tile = one_tile(kernel, loop, name)
    how = f"per tile ({name}): {_how(loop)}, so one tile is checked"
    if rest:
        proof = prove(tile, rest, fixed, timeout)
        proof.cases = proof.cases + [how + " for every size"]
        return proof
    ok, text = check_at(tile, dict(fixed))
    seconds = time.perf_counter() - start
    if not ok:
        return Proof("failed", seconds, f"one tile at {dict(fixed)}: {text}")
    return Proof("proved", seconds, "", cases=[how + f" by the explorer at {dict(fixed)}"])


def _how(loop: Loop) -> str:
    return NAMED_HOW if is_named_tile(loop) else (
        "every tile runs from a reset barrier state, ordered after the previous tile by the "
        "kernel's own waits (checker/symbolic/tiles.py)")


def _nest(kernel: Kernel, name: str) -> Loop | None:
    """The tile loop over `name` when its tiles hold loops (a tile loop around K loops)."""
    loop = tile_loop(kernel.body, name)
    return loop if loop is not None and any(isinstance(s, Loop) for s in walk(loop.body)) \
        else None


def _prove_fixed_tiles(kernel: Kernel, name: str, symbolic: Sequence[str],
                       fixed: Mapping[str, int], timeout: float, prove: Callable):
    """A tile count the user did not ask symbolic, fixed at `fixed[name]`: when the kernel's
    waits separate its tiles (conditions 1-3 and 5-7, checked for every value of the other
    parameters and every tile count), a proof of one tile covers every tile count, the fixed
    one among them, so the tile count stays fixed in the verdict and one tile is proved.
    Anything short of a proof of the tile falls back to the whole kernel at the fixed count
    (a tile refuted at values the kernel's assumptions on the tile count exclude is no
    refutation of the kernel)."""
    start = time.perf_counter()
    loop = _nest(kernel, name)
    rest = {n: v for n, v in fixed.items() if n != name}
    if why_not(kernel, loop, rest, symbolic) is not None:
        return prove(kernel, symbolic, fixed, timeout)      # not separated: the whole kernel
    tile = prove(one_tile(kernel, loop, name), symbolic, rest, timeout)
    if tile.status == "proved":
        tile.seconds = time.perf_counter() - start
        tile.cases = tile.cases + [
            f"per tile ({name} = {fixed[name]}, not symbolic): {_how(loop)}, for every tile "
            f"count, {name} = {fixed[name]} among them, so one tile is proved for every size"]
        return tile
    proof = prove(kernel, symbolic, fixed, max(1.0, timeout - (time.perf_counter() - start)))
    if proof.status != "proved":
        proof.reason = (f"one tile of `{name}` (separated, fixed at {fixed[name]}) is "
                        f"{tile.status}: {tile.reason}; the whole kernel: {proof.reason}")
    return proof


__all__ = ["leaves", "one_tile", "promotable", "prove_tiles", "tile_loop", "why_not"]
