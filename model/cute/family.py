"""A trip count from a runtime kernel argument, as a parameter of the IR.

`cute.compile` leaves an `Int32` kernel argument a value of the MLIR function, so a loop
`for k in cutlass.range(n)` over it has no trip count in the IR. The MLIR is the same for every
value of `n`, so the frontend runs the kernel's warps with `n` bound to several values
(SAMPLES, the last ones a check of the fit on values it did not need), rolls each run's loops
(roll.py) and joins the runs: every trip count, ring slot and parity that varies with `n` must
be one of roll.py's expressions of `n` at every value run. Only when no branch around
synchronization depends on the argument: such a branch could go the other way at a value not
run. The joined IR has a parameter named after the argument (symbolic: `prove` quantifies over
it, with `n >= 1`); `check` explores it at DEFAULT. Runs that do not join leave the loop BP190,
as before.

Several runtime values (a tile count and K: a tile loop around a K loop, found level by level)
are read together at every point of a grid of their values (GRID_SAMPLES) and joined by
counts.py, whose fits are functions of all of them and of the loop variables (the K step's ring
slot `(t * k_tiles + k) % S`); each value is a parameter, and a note says why when they do not
join."""

from __future__ import annotations

import ast
import itertools
import os
import re
from typing import Callable

from .. import primitives as K
from ..expr import mk
from ..ir import BarrierRef, Const, Kernel, ModelError, Param, Var, map_ops
from . import guards, walks
from .counts import NoJoin, Scope, join_grid
from .groups import split_rings
from .roll import PEELS, join
from .tree import KernelTree

SAMPLES = (1, 2, 3, 4, 5, 6, 7, 9, 12)
DEFAULT = 4
# several runtime values: the grid of their values read, by how many there are (each run is a
# whole read of the kernel: 16 runs for a tile count and K), and their value for `check`
GRID_SAMPLES = {2: (1, 2, 3, 5), 3: (1, 2, 3)}
GRID_DEFAULT = 3
MAX_VALUES = 3          # runtime values read together
# a loop's count from an integer argument: an scf.for's bound, or an scf.while's condition
# (a tile scheduler's `while work.is_valid_tile`, the tile index against the tile count)
_FROM_ARGUMENT = re.compile(r"(?:trip count from|scf\.while on) kernel argument (\d+) \((i\d+)\)")


def _trip_arguments(kernel: Kernel) -> dict[int, bool]:
    """The integer kernel arguments a BP190 trip count comes from, each with whether a while
    loop (a tile scheduler's) runs on it."""
    found: dict[int, bool] = {}
    for op in kernel.ops():
        m = _FROM_ARGUMENT.search(op.name) if op.kind == K.UNMODELED else None
        if m:
            index = int(m.group(1))
            found[index] = found.get(index, False) or "scf.while" in op.name
    return found


def argument_name(tree: KernelTree, index: int) -> str:
    """The Python name of the kernel's index-th runtime argument (its Constexpr parameters are
    not MLIR arguments), else `arg<index>`."""
    fallback = f"arg{index}"
    if tree.loc is None:
        return fallback
    try:
        with open(os.path.abspath(tree.loc.file), encoding="utf-8") as f:
            module = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return fallback
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef) and node.name == tree.name:
            names = [a.arg for a in node.args.args
                     if "Constexpr" not in (ast.unparse(a.annotation) if a.annotation else "")]
            if len(names) == len(tree.arg_types) and index < len(names):
                return names[index]
    return fallback


def _taint(order: list, owner: dict, seeds: set, pinned: set) -> set:
    """The values computed from the seeds (through any arithmetic, and through the results of
    a region op one of whose yields carries one), but not past a pinned comparison."""
    tainted = set(seeds)
    for _ in range(8):                       # values carried through loops: a few sweeps
        before = len(tainted)
        for node in order:
            if id(node) in pinned or not any(k in tainted for k in node.operands):
                continue
            tainted.update(node.results)
            if id(node) in owner:
                tainted.update(owner[id(node)].results)
        if len(tainted) == before:
            break
    return tainted


def _integer(type_: str) -> bool:
    return type_ == "index" or re.fullmatch(r"i\d+", type_) is not None and type_ != "i1"


def _branch_on(tree: KernelTree, seeds: set) -> tuple[object | None, frozenset]:
    """The first branch around synchronization whose condition depends on the runtime value
    other than through a comparison of integers, or None; and the comparisons of integers
    that steer such a branch (guards.py: each evaluation is recorded, and the joined runs must
    prove its outcome at every value). An unpinned branch could take another side at values
    the runs did not read (`if (k_tiles & 16)`), so the runs do not stand for every value. A
    while loop on the argument (a tile scheduler's `while work.is_valid_tile`) is a loop
    whose trip count comes from it, as an scf.for's bound is: the join checks its count at
    every value run."""
    from .handlers import synchronizes
    order = [op for top in tree.body.ops for op in top.walk()]
    owner = {}                  # a terminator -> the region op whose results it yields
    for op in order:
        for region in op.regions:
            for block in region:
                if block.ops and block.ops[-1].name in ("scf.yield", "scf.condition"):
                    owner[id(block.ops[-1])] = op
    branches = [node for node in order if node.name == "scf.if" and
                any(synchronizes(op) for op in node.walk() if op is not node)]
    tainted = _taint(order, owner, seeds, set())
    comparisons = {id(node): node for node in order if node.name == "arith.cmpi" and
                   any(k in tainted for k in node.operands) and
                   all(_integer(t) for t in node.operand_types[:2])}
    pinned = set(comparisons)
    tainted = _taint(order, owner, seeds, pinned)
    for node in branches:
        if any(k in tainted for k in node.operands):
            return node, frozenset()
    steering = set()
    for key, node in comparisons.items():    # the comparisons whose result reaches a branch
        reach = _taint(order, owner, set(node.results), set())
        if any(k in reach for b in branches for k in b.operands):
            steering.add(key)
    return None, frozenset(steering)


def _rebind(kernel: Kernel, allocs: dict) -> tuple:
    """The body with each barrier reference on the allocation of the same name in `allocs`."""
    def swap(op):
        import dataclasses
        if op.reads or op.writes:      # shared-memory data: the buffer of the same name too
            op = dataclasses.replace(op, **{field: tuple(
                dataclasses.replace(ref, alloc=allocs[("buffer", ref.alloc.name)])
                for ref in getattr(op, field)) for field in ("reads", "writes")})
        if op.barrier is None:
            return op
        alloc = allocs[op.barrier.alloc.name]
        return dataclasses.replace(op, barrier=BarrierRef(alloc, op.barrier.index,
                                                          op.barrier.block))
    return map_ops(kernel.body, swap)


def _shape(kernel: Kernel) -> tuple:
    return (tuple((b.name, repr(b.num_arrivals), repr(b.shape), b.explicit_init)
                  for b in kernel.barriers), repr(kernel.num_threads), repr(kernel.grid),
            tuple((b.name, repr(b.shape), b.granule) for b in kernel.buffers))


def _dynamic_sizes(tree: KernelTree) -> list:
    """`cute.size` ops whose value is dynamic (a mode of a tensor whose extent is set at run
    time, `k_tiles = cute.size(gA, mode=[2])`) and reaches the bound of an `scf.for`."""
    order = [op for top in tree.body.ops for op in top.walk()]
    found = []
    for node in order:
        if node.name != "cute.size" or '"?"' not in node.types[0]:
            continue
        reach = set(node.results)
        for op in order:
            if any(k in reach for k in op.operands):
                if op.name == "scf.for" and len(op.operands) > 1 and op.operands[1] in reach:
                    found.append(node)
                    break
                reach.update(op.results)
    return found


def _assigned_name(node, fallback: str) -> str:
    """The Python name the op's line assigns (`k_tiles = cute.size(...)`)."""
    import linecache
    if node.loc is None:
        return fallback
    text = linecache.getline(os.path.abspath(node.loc.file), node.loc.line)
    m = re.match(r"\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]", text)
    return m.group(1) if m else fallback


def _runtime_values(tree: KernelTree, expect, kernel_at: Callable, first: Kernel) -> list:
    """(binding key, seeds, name, what) of each runtime value trip counts come from: an integer
    kernel argument (a tile scheduler's tile count, flattened into arguments, is `tiles`), or
    the size of a tensor mode set at run time (named after the Python name it is assigned).
    A loop inside a loop on one is read only once that one has a value: the kernel is read
    again with the values found bound, until no new one appears (a nest of any depth)."""
    arguments = _trip_arguments(first)
    sizes = _dynamic_sizes(tree)
    keys = list(arguments) + [("node", id(n)) for n in sizes]
    for _ in range(MAX_VALUES):
        if not keys:
            break
        try:
            probe = kernel_at(tree, expect, {key: 2 for key in keys})
        except ModelError:
            break
        more = {i: s for i, s in _trip_arguments(probe).items() if i not in arguments}
        if not more:
            break
        arguments.update(more)
        keys += list(more)
    found, names = [], set()
    for index, scheduled in sorted(arguments.items()):
        name, what = argument_name(tree, index), "the kernel argument"
        if scheduled and name == f"arg{index}":     # a scheduler's parameters, flattened
            name, what = "tiles", f"kernel argument {index} (a tile scheduler's tile count)"
        seeds = {tree.body.args[index]} if index < len(tree.body.args) else set()
        found.append((index, seeds, name, what))
    for node in sizes:
        found.append((("node", id(node)), set(node.results), _assigned_name(node, "extent"),
                      "the size of a tensor mode set at run time,"))
    out = []
    for key, seeds, name, what in found:        # two values never share a name
        unique, k = name, 2
        while unique in names:
            unique, k = f"{name}_{k}", k + 1
        names.add(unique)
        out.append((key, seeds, unique, what))
    return out


def _runs(tree: KernelTree, expect, kernel_at: Callable, bindings: list[dict],
          pinned: frozenset = frozenset()) -> list | None:
    """The kernel read at each binding, when every run has the same barriers and no loop left
    on a runtime value, else None. The comparisons `pinned` are guards in each run."""
    token, marks = PEELS.set({}), guards.GUARDED.set(pinned)
    try:        # the longest run first: the iterations its loops peel, the shorter runs peel
        runs = [kernel_at(tree, expect, b) for b in reversed(bindings)][::-1]
    except ModelError:
        return None
    finally:
        PEELS.reset(token)
        guards.GUARDED.reset(marks)
    if any(_shape(k) != _shape(runs[0]) for k in runs) or \
            any(op.kind == K.UNMODELED and ("trip count from" in op.name or
                                             "scf.while on kernel argument" in op.name)
                for k in runs for op in k.ops()):
        return None
    return runs


def _read_and_join(tree: KernelTree, expect, kernel_at: Callable, bindings: list[dict],
                   pinned: frozenset, joined: Callable, keys: dict) -> tuple:
    """The first run and the runs' joined body (`joined(runs, strides)`), or NoJoin. Blocks
    whose programs differ at some values and not at others (a static persistent scheduler:
    block b walks tiles b, b + grid, ... below the tile count, so ceil((tiles - b) / grid)
    of them) are read again with every block its own grid position, the fits then also in
    floor quotients of a value by the grid's size (counts.py); each such trip count is
    proved equal to its loop's count at every value (walks.py)."""
    strided = walks.grid_size(tree)
    why = "the runs at a grid of their values differ in their barriers, or leave a loop unread"
    for every_block in (False, True) if strided else (False,):
        token, bounds = walks.EVERY_BLOCK.set(every_block), walks.BOUNDS.set({})
        try:
            runs = _runs(tree, expect, kernel_at, bindings, pinned)
            if runs is None:
                continue
            base = runs[0]
            allocs = {b.name: b for b in base.barriers}
            allocs.update({("buffer", b.name): b for b in base.buffers})
            try:
                body = joined([_rebind(k, allocs) for k in runs],
                              (strided,) if every_block else ())
            except NoJoin as e:
                why = f"the runs at a grid of their values do not join ({e})"
                continue
            if every_block:
                walks.check(body, bindings, keys, strided)
                body = walks.share_named_barriers(body, strided)
            return base, body
        finally:
            walks.EVERY_BLOCK.reset(token)
            walks.BOUNDS.reset(bounds)
    raise NoJoin(why)


def runtime_family(tree: KernelTree, expect, kernel_at: Callable,
                   first: Kernel) -> Kernel | None:
    """The kernel with a parameter for each runtime value its trip counts come from (an
    integer argument, or the size of a tensor mode set at run time), or None (no such value,
    or runs that do not join: `first`, the kernel read without them, stands)."""
    values = _runtime_values(tree, expect, kernel_at, first)
    if len(values) > 1:
        return _grid_family(tree, expect, kernel_at, first, values)
    if not values:
        return None
    [(key, seeds, name, what)] = values
    branch, pinned = _branch_on(tree, seeds)
    if branch is not None:
        return None
    def joined(rebound, strides):
        if not strides:
            try:
                return join(rebound, list(SAMPLES), Var(name))
            except NoJoin:
                pass
        # a K loop inside a loop of fixed count: its ring slot `(i0 * K + i1) % S`
        return join_grid(rebound, Scope([{name: v} for v in SAMPLES], [name],
                                        strides=strides))
    try:
        base, body = _read_and_join(tree, expect, kernel_at, [{key: v} for v in SAMPLES],
                                    pinned, joined, {name: key})
    except NoJoin as why:         # the loops stay BP190: say why, as for several values
        return first.replace(notes=first.notes + (
            f"the trip count from {what} `{name}` stays BP190: {why}",))
    assumptions = (mk(">=", Var(name), Const(1)),)
    why = guards.unproved(body, [name], assumptions)
    if why is not None:
        return first.replace(notes=first.notes + (
            f"the trip count from {what} `{name}` stays BP190: a branch steered by {why}",))
    pinned_note, body = guards.note(body, [name]), guards.strip(body)
    notes = tuple(n for n in base.notes) + (
        f"the trip count from {what} `{name}` is the parameter {name} "
        f"(read at {name} = {', '.join(map(str, SAMPLES))}; prove: every {name} >= 1; "
        f"check: {name} = {DEFAULT})",) + pinned_note
    return split_rings(base.replace(body=body, params={name: Param(name, DEFAULT, symbolic=True)},
                                    assumptions=assumptions, notes=notes))


def _grid_family(tree: KernelTree, expect, kernel_at: Callable, first: Kernel,
                 values: list[tuple]) -> Kernel:
    """Several runtime values (a tile count and K): the kernel read at every point of a grid
    of their values and joined (counts.py), one parameter each; else `first` with a note
    saying why the loops on them stay BP190."""
    names = [name for _, _, name, _ in values]
    spelled = ", ".join(f"`{n}`" for n in names)

    def refused(why: str) -> Kernel:
        return first.replace(notes=first.notes + (
            f"trip counts from several runtime values ({spelled}): {why}, so the loops on them "
            "stay BP190",))
    if len(values) > MAX_VALUES:
        return refused(f"more than {MAX_VALUES} runtime values are not read together")
    branch, pinned = _branch_on(tree, set().union(*(seeds for _, seeds, _, _ in values)))
    if branch is not None:
        line = f" (line {branch.loc.line})" if branch.loc else ""
        return refused(f"a branch around synchronization depends on one of them{line}, and "
                       "could go the other way at values not run")
    samples = GRID_SAMPLES[len(values)]
    grid = list(itertools.product(samples, repeat=len(values)))
    try:
        base, body = _read_and_join(
            tree, expect, kernel_at,
            [{key: v for (key, _, _, _), v in zip(values, point)} for point in grid], pinned,
            lambda rebound, strides: join_grid(
                rebound, Scope([dict(zip(names, p)) for p in grid], names, strides=strides)),
            {name: key for key, _, name, _ in values})
    except NoJoin as e:
        return refused(str(e))
    assumptions = tuple(mk(">=", Var(n), Const(1)) for n in names)
    why = guards.unproved(body, names, assumptions)
    if why is not None:
        return refused(f"a branch is steered by {why}")
    pinned_note, body = guards.note(body, names), guards.strip(body)
    read = ", ".join(map(str, samples))
    notes = base.notes + (
        "the trip counts from " + "; ".join(f"{what} `{name}`" for _, _, name, what in values)
        + f" are the parameters {', '.join(names)} (the kernel read at every combination of "
        f"{read} and joined, counts.py; prove: every {' and '.join(n + ' >= 1' for n in names)};"
        f" check: {', '.join(f'{n} = {GRID_DEFAULT}' for n in names)})",) + pinned_note
    return split_rings(base.replace(
        body=body, params={n: Param(n, GRID_DEFAULT, symbolic=True) for n in names},
        assumptions=assumptions, notes=notes))
