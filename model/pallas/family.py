"""Shape families: one IR for every size of a Pallas kernel, from traces at a few sizes.

A kernel takes its loop trip counts from the shapes of its arguments (K steps = K / tile_k), so
one trace says nothing about another K. A target names its size arguments:

    @sizes(k_steps=("k", 64))            # the argument k is 64 * k_steps
    def hopper_matmul(k=256): ...

and `trace_family` traces it at k_steps = lo .. lo+4 (the other size parameters at their
defaults), anti-unifies the IRs and fits every IR position that varies (a trip count, the offset
of a drain loop's first slot) as an expression of the size parameters: affine (`k_steps - 2`),
or affine clipped by a constant (`min(k_steps, 2)`, `max(k_steps - 2, 0)`). Positions that vary
alike share the parameter; a position that fits no such expression, or traces that differ in
structure (a Python `if` on a shape), is never guessed: the smallest values where the traces
disagree become exceptions, the rest is fitted and the fit is re-checked against traces at
larger sizes it did not see. Exceptions are joined to the family by a branch on the parameter
(`k_steps == 1`: the IR traced there), so one parameterised IR stands for every size.

A persistent loop (`plgpu.nd_loop` over the tiles, `collective_axes` the grid) runs a number of
tiles that depends on the block's grid position and the problem size; its trip count becomes one
parameter `tiles` (every value >= 0), tied across the roles that run the same count, and the grid
axis disappears when nothing else reads it. Every grid position of every shape is then one value
of `tiles`, a remainder SM with one tile fewer included.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..ir import (BarrierAlloc, Expr, Kernel, Loop, MemAlloc, ModelError, Op, Param, Var,
                  WarpRegion, When, free_vars)
from .antiunify import (AntiUnifier, Disagree, _rebind, fit, fit_1d, instantiate,  # noqa: F401
                        instantiate_exprs, same_kernel)
from .locations import _loc_of_function

SIZES_ATTR = "__barrierproof_sizes__"
AXIS_POINTS = 5          # traces per size parameter: lo .. lo + 4 (an affine fit is over-determined
#                          by three, a clipped one by two)
CHECK_OFFSETS = (7, 11)  # re-check the fit at sizes it did not see
# A persistent loop's count is a parameter fixed at 2 by default (every barrier is reused across a
# tile boundary); the prover's fragment has no nested loops, so `--symbolic tiles` is `unknown`.
TILES_DEFAULT = 2
MAX_EXCEPTIONS = 3       # small values traced on their own before the family's regime starts


def sizes(**params):
    """Declare a target's shape family: `name=("argument", unit)` makes `argument = unit * name`
    a size the proof quantifies over (`name >= 1`)."""
    def mark(fn):
        setattr(fn, SIZES_ATTR, dict(params))
        return fn
    return mark


@dataclass(frozen=True)
class SizeParam:
    name: str
    arg: str
    unit: int
    base: int            # the value at the function's defaults


@dataclass
class Family:
    """What `trace_family` found: the parameterised kernel and how it was obtained."""

    kernel: Kernel
    sizes: list[SizeParam]
    traced: list[dict[str, int]] = field(default_factory=list)
    checked: list[dict[str, int]] = field(default_factory=list)
    fits: list[str] = field(default_factory=list)
    exceptions: dict[str, list[int]] = field(default_factory=dict)   # sizes joined as branches
    tiles: list[str] = field(default_factory=list)
    fitted: Kernel | None = None       # the fitted kernel alone, for the sizes of its regime


def size_params(fn: Callable, name: str) -> list[SizeParam] | None:
    declared = getattr(fn, SIZES_ATTR, None)
    if not declared:
        return None
    where = _loc_of_function(fn)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    out = []
    for pname, spec in declared.items():
        if not (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str)
                and isinstance(spec[1], int) and spec[1] > 0):
            raise ModelError(f"sizes({pname}={spec!r}) of {name} is not (argument, unit)",
                             loc=where, hint='write e.g. @sizes(k_steps=("k", 64)): the '
                             "argument k is 64 * k_steps")
        arg, unit = spec
        param = sig.parameters.get(arg) if sig else None
        if param is None or not isinstance(param.default, int):
            raise ModelError(f"sizes({pname}=...) names argument {arg!r}, which {name} does not "
                             "take with an integer default", loc=where,
                             hint=f"give {name} an argument {arg}=<a multiple of {unit}>")
        if param.default % unit or param.default <= 0:
            raise ModelError(f"the default {arg}={param.default} of {name} is not a positive "
                             f"multiple of {unit}", loc=where,
                             hint=f"make the default a multiple of {unit}")
        out.append(SizeParam(pname, arg, unit, param.default // unit))
    return out


# ----------------------------------------------------------------------------------------------
# Tracing one member
# ----------------------------------------------------------------------------------------------

def trace_member(fn: Callable, name: str, expect: str | None, params: Sequence[SizeParam],
                 values: Mapping[str, int], load: Callable) -> Kernel:
    """The kernel at these sizes, loops kept in place and persistent loops' counts as `tiles`."""
    from .loops import KEEP_LOOPS
    from .device import device_facts_of
    kwargs = {p.arg: p.unit * values[p.name] for p in params}
    facts = device_facts_of(fn)       # the target module's, not this module's
    KEEP_LOOPS["on"] = True
    try:
        kernels = load(lambda: fn(**kwargs), name=name, expect=expect,
                       core_count=facts.get("core_count"),
                       device_count=facts.get("device_count"))
    finally:
        KEEP_LOOPS["on"] = False
    if len(kernels) != 1:
        raise ModelError(f"{name} launches {len(kernels)} kernels; a shape family needs one",
                         loc=_loc_of_function(fn), hint="call one plgpu.kernel per target")
    return generalize_tiles(kernels[0])


def generalize_tiles(kernel: Kernel) -> Kernel:
    """Trip counts that depend only on the grid position become parameters `tiles`, `tiles2`,
    ... (one per distinct count), every value >= 0."""
    grid_axes = {a for a, _ in kernel.grid}
    names: dict[str, str] = {}
    defaults: dict[str, int] = {}

    def visit(body):
        out = []
        for s in body:
            if isinstance(s, Loop):
                trip = s.trip
                fv = free_vars(trip)
                if fv and fv <= grid_axes:
                    key = repr(trip)
                    if key not in names:
                        names[key] = "tiles" if not names else f"tiles{len(names) + 1}"
                        defaults[names[key]] = TILES_DEFAULT
                    trip = Var(names[key])
                out.append(Loop(s.var, trip, visit(s.body), s.loc))
            elif isinstance(s, When):
                out.append(When(s.cond, visit(s.then), visit(s.orelse), s.loc))
            elif isinstance(s, WarpRegion):
                out.append(WarpRegion(s.axis, visit(s.body), s.loc))
            else:
                out.append(s)
        return tuple(out)

    body = visit(kernel.body)
    if not names:
        return kernel
    params = dict(kernel.params)
    for n in names.values():
        params[n] = Param(n, defaults[n])
    used = set()
    for s in _walk_all(body):
        used |= _stmt_free_vars(s)
    grid = tuple((a, n) for a, n in kernel.grid if a in used)
    return kernel.replace(body=body, params=params, grid=grid,
                          assumptions=kernel.assumptions + tuple(Var(n) >= 0 for n in names.values()))


def _walk_all(body):
    for s in body:
        yield s
        if isinstance(s, Loop):
            yield from _walk_all(s.body)
        elif isinstance(s, When):
            yield from _walk_all(s.then)
            yield from _walk_all(s.orelse)
        elif isinstance(s, WarpRegion):
            yield from _walk_all(s.body)


def _stmt_free_vars(s) -> set[str]:
    out: set[str] = set()
    if isinstance(s, Loop):
        out |= free_vars(s.trip)
    elif isinstance(s, When):
        out |= free_vars(s.cond)
    elif isinstance(s, Op):
        for e in (s.count, s.bytes, s.parity, s.phase, s.bar_id):
            if e is not None:
                out |= free_vars(e)
        if s.barrier is not None:
            for e in s.barrier.index + (s.barrier.block or ()):
                out |= free_vars(e)
        for r in s.reads + s.writes:
            for e in r.exprs():
                out |= free_vars(e)
    return out


# ----------------------------------------------------------------------------------------------
# The family
# ----------------------------------------------------------------------------------------------

def _fit_all(kernels, points, names, base) -> tuple[Kernel, list[str]]:
    au = AntiUnifier(kernels)
    fam = au.kernel()
    env: dict[str, Expr] = {}
    fits = []
    for hole, ys in au.holes.items():
        expr = fit(points, ys, names, base)
        if expr is None:
            shown = ", ".join(f"{_point_text(x)}: {y}" for x, y in zip(points, ys))
            raise Disagree(f"{au.where[hole]} takes the values {shown}, which no expression "
                           "a*n + b, min(a*n + b, c) or max(a*n + b, c) of the sizes fits")
        env[hole] = expr
        fits.append(f"{au.where[hole]}: {expr!r}")
    return instantiate_exprs(fam, env), fits


def _point_text(x: Mapping[str, int]) -> str:
    return ", ".join(f"{n}={v}" for n, v in x.items())


def trace_family(fn: Callable, name: str, expect: str | None, load: Callable) -> Family:
    """Trace `fn` at several sizes and return one kernel whose sizes are parameters.

    Raises ModelError when the traces cannot be joined (what differs, where); the caller then
    falls back to the traced shape.
    """
    params = size_params(fn, name)
    if not params:
        raise ModelError(f"{name} declares no sizes", loc=_loc_of_function(fn),
                         hint='declare them with @sizes(k_steps=("k", 64))')
    names = [p.name for p in params]
    cache: dict[tuple, Kernel | ModelError] = {}

    def at(values: Mapping[str, int]) -> Kernel:
        key = tuple(values[n] for n in names)
        if key not in cache:
            try:
                cache[key] = trace_member(fn, name, expect, params, values, load)
            except ModelError as err:
                cache[key] = err
        got = cache[key]
        if isinstance(got, ModelError):
            raise got
        return got

    lo = {n: 1 for n in names}
    exceptions: dict[str, list[int]] = {n: [] for n in names}
    rejected: dict[str, list[int]] = {n: [] for n in names}
    base = {p.name: p.base for p in params}
    last_error: Exception | None = None
    fam = None
    for _ in range(2 * MAX_EXCEPTIONS + 2):
        fam_base = {n: max(base[n], lo[n]) for n in names}
        points = _axis_points(fam_base, lo, names)
        try:
            kernels = []
            for x in points:
                try:
                    kernels.append(at(x))
                except ModelError as err:
                    # the kernel's own checks reject this size (too few steps, say): the
                    # family starts above it
                    small = [n for n in names if x[n] == lo[n]]
                    if err.code or not small or len(rejected[small[0]]) >= MAX_EXCEPTIONS:
                        raise
                    raise _Reject(small[0], err) from None
            fam, fits = _fit_all(kernels, points, names, fam_base)
            break
        except _Reject as rej:
            rejected[rej.param].append(lo[rej.param])
            lo[rej.param] += 1
            last_error = rej.err
        except Disagree as err:
            last_error = err
            moved = False
            for n in names:       # the smallest size is the usual odd one out (one step, ...)
                trial = {**lo, n: lo[n] + 1}
                if len(exceptions[n]) < MAX_EXCEPTIONS and _joinable(at, trial, names, base):
                    exceptions[n].append(lo[n])
                    lo = trial
                    moved = True
                    break
            if not moved:
                break
    if fam is None:
        raise ModelError(f"the traces of {name} at different sizes cannot be joined into one "
                         f"kernel: {last_error}", loc=_loc_of_function(fn),
                         hint="check it at given sizes with `barrierproof check`")
    # the fit must predict sizes it has not seen
    checked = []
    for off in CHECK_OFFSETS:
        x = {n: lo[n] + off for n in names}
        want = at(x)
        got = instantiate(fam, x)
        diff = same_kernel(got, want)
        if diff is not None:
            raise ModelError(f"the fitted family of {name} does not predict its trace at "
                             f"{_point_text(x)} ({diff})", loc=_loc_of_function(fn),
                             hint="check it at given sizes with `barrierproof check`")
        checked.append(x)
    # exceptions: the kernel traced at that size, selected by a branch on the parameter
    body = fam.body
    extra_bars: list[BarrierAlloc] = []
    extra_bufs: list[MemAlloc] = []
    branched: dict[str, list[int]] = {n: [] for n in names}
    for n in names:
        for v in sorted(exceptions[n], reverse=True):
            point = {**{m: lo[m] for m in names}, n: v}
            member = at(point)
            diff = same_kernel(_drop_params(member, names),
                               _drop_params(instantiate(fam, point), names))
            if diff is None:
                continue                  # the fit covers it after all
            if len(names) > 1:
                # a branch traced at one value of the other sizes would stand for all of them
                raise ModelError(f"{name} traces differently at {n} = {v}, and with several "
                                 "sizes such a branch cannot be joined", loc=_loc_of_function(fn),
                                 hint=f"let the kernel reject {n} = {v} (its own check), or "
                                      "declare fewer sizes")
            one = instantiate(fam, {n: v})
            # allocations sized by the parameter (fewer stages for fewer steps) get their own
            # copies in that branch
            fbars = {b.name: b for b in one.barriers}
            fbufs = {b.name: b for b in one.buffers}
            bars = {b.name: b for b in fam.barriers}
            bufs = {b.name: b for b in fam.buffers}
            for b in member.barriers:
                f = fbars.get(b.name)
                if f is None or _alloc_key(f) != _alloc_key(b):
                    bars[b.name] = dataclasses.replace(b, name=f"{b.name}_{n}{v}")
                    extra_bars.append(bars[b.name])
            for b in member.buffers:
                f = fbufs.get(b.name)
                if f is None or repr(f.shape) != repr(b.shape) or f.space != b.space:
                    bufs[b.name] = dataclasses.replace(b, name=f"{b.name}_{n}{v}")
                    extra_bufs.append(bufs[b.name])
            if repr(member.num_threads) != repr(one.num_threads) or \
                    [a for a, _ in member.cluster] != [a for a, _ in one.cluster] or \
                    repr(member.cluster) != repr(one.cluster):
                raise ModelError(f"{name} at {n}={v} runs other threads or blocks than at "
                                 "larger sizes", loc=_loc_of_function(fn),
                                 hint="check it at given sizes with `barrierproof check`")
            body = (When(Var(n) == v, _rebind(member.body, bars, bufs), body, fam.loc),)
            branched[n].append(v)
    tiles = [n for n in fam.params if n.startswith("tiles")]
    fam_params = dict(fam.params)
    for p in params:
        fam_params[p.name] = Param(p.name, p.base, symbolic=True)
    lows = {n: min([lo[n]] + exceptions[n]) for n in names}
    assumptions = tuple(Var(n) >= lows[n] for n in names) + fam.assumptions
    notes = list(fam.notes)
    notes.append("shape family: " + "; ".join(
        f"{p.arg} = {p.unit}*{p.name}" for p in params) +
        f"; fitted from {len(points)} traces, re-checked against traces at "
        + " and ".join(_point_text(x) for x in checked))
    for n in names:
        if rejected[n]:
            notes.append(f"{name} rejects {n} = {', '.join(map(str, rejected[n]))} while "
                         f"tracing (its own checks): the family starts at {n} = {lows[n]}")
        if branched[n]:
            notes.append(f"at {n} = {', '.join(map(str, sorted(branched[n])))} the trace differs in "
                         "structure from the larger sizes; the kernel traced there is a branch "
                         f"of the family (`{n} == v`)")
    for t in tiles:
        notes.append(f"`{t}`: the trip count of a persistent loop over the grid (tiles of one "
                     f"cluster; each value stands for every grid position and size that runs "
                     f"that many tiles); it is {fam.params[t].default} unless given with "
                     f"--param {t}=N")
    kernel = fam.replace(body=body, params=fam_params, assumptions=assumptions,
                         notes=tuple(notes), barriers=fam.barriers + tuple(extra_bars),
                         buffers=fam.buffers + tuple(extra_bufs))
    return Family(kernel, params, sorted(points, key=lambda x: tuple(x.values())), checked,
                  fits, branched, tiles, fam)


class _Reject(Exception):
    def __init__(self, param, err):
        super().__init__(str(err))
        self.param = param
        self.err = err


def _axis_points(fam_base, lo, names) -> list[dict[str, int]]:
    points = [fam_base] + [dict(fam_base, **{n: v}) for n in names
                           for v in range(lo[n], lo[n] + AXIS_POINTS)]
    if len(names) > 1:      # sizes moved together: a fit of one size at a time must hold here
        points += [{n: lo[n] + 1 for n in names},
                   {n: lo[n] + 2 + k for k, n in enumerate(names)},
                   {n: lo[n] + 3 + 2 * k for k, n in enumerate(reversed(names))}]
    return [dict(x) for x in {tuple(sorted(x.items())): x for x in points}.values()]


def _joinable(at, lo, names, base) -> bool:
    fam_base = {n: max(base[n], lo[n]) for n in names}
    points = _axis_points(fam_base, lo, names)
    try:
        _fit_all([at(x) for x in points], points, names, fam_base)
    except (Disagree, ModelError):
        return False
    return True


def _drop_params(k: Kernel, names) -> Kernel:
    return k.replace(params={n: p for n, p in k.params.items() if n not in names})


def _alloc_key(b: BarrierAlloc) -> str:
    return repr((b.num_arrivals, b.shape, b.copies, b.orders_tensor_core, b.cluster,
                 b.collective_axes, b.scalar, b.semaphore))
