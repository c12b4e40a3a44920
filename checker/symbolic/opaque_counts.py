"""A non-linear trip count read nowhere else becomes a parameter of its own.

A persistent kernel's static schedule gives each program `max(0, (tiles - pid + nprog - 1) //
nprog)` tiles, with `tiles` itself a product of two ceil-divisions of the problem's shape. The
prover's fragment is linear, so that count stops it, though the protocol never reads the
shape, the program id or the program count anywhere else: the loop only runs some number of
times. When every parameter a non-linear trip count E reads (symbolic ones) is read nowhere
but in loops whose trip count is E itself, the kernel's runs at any values are its runs with
those loops taken n = E times; and a loop of a negative count runs no iteration, as at 0. So
the kernel with E replaced by a new parameter n, proved for every n >= 0, is proved for every
value of the parameters E read (a wider range: the assumptions on them are dropped).

Nothing else is rewritten: a count read beside its loops (in a condition, an index, another
count), or one that reads a loop variable or an axis, stays as it is and the fragment's own
reason stands.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import z3

import dataclasses

from ...model.ir import (BinOp, Const, Expr, Kernel, Loop, Param, Var, When, WarpRegion,
                         evaluate, free_vars, unique_name)
from .terms import Unsupported, nonlinear, z_int


def _names(obj, found: set[str]) -> set[str]:
    """Every name any expression inside `obj` reads (statements, operands, regions, barrier and
    buffer declarations: all of it, so nothing a rewrite drops is still read somewhere)."""
    if isinstance(obj, Expr):
        found |= free_vars(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _names(x, found)
    elif isinstance(obj, dict):
        for x in obj.values():
            _names(x, found)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _names(getattr(obj, f.name), found)
    return found


def _nonlinear(e, symbolic: Sequence[str], fixed: Mapping[str, int]) -> bool:
    env = {n: z3.Int(n) for n in symbolic} | {n: z3.IntVal(v) for n, v in fixed.items()}
    try:
        return nonlinear(z_int(e, env))
    except Unsupported:
        return False


def _loops(body):
    for s in body:
        if isinstance(s, Loop):
            yield s
            yield from _loops(s.body)
        elif isinstance(s, When):
            yield from _loops(s.then)
            yield from _loops(s.orelse)
        elif isinstance(s, WarpRegion):
            yield from _loops(s.body)


def _replace_trips(body, key: str, name: str) -> tuple:
    """The statements with every loop whose trip count is spelled `key` taken `name` times."""
    out = []
    for s in body:
        if isinstance(s, Loop):
            trip = Var(name) if repr(s.trip) == key else s.trip
            out.append(Loop(s.var, trip, _replace_trips(s.body, key, name), s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, _replace_trips(s.then, key, name),
                            _replace_trips(s.orelse, key, name), s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, _replace_trips(s.body, key, name), s.loc))
        else:
            out.append(s)
    return tuple(out)


def opaque_trip_counts(kernel: Kernel, symbolic: Sequence[str],
                       fixed: Mapping[str, int] | None = None
                       ) -> tuple[Kernel, list[str], list[str]]:
    """The kernel with each non-linear trip count read nowhere else as a parameter of its own
    (module doc), its symbolic parameters, and a note per count replaced."""
    fixed = dict(fixed or {})
    symbolic = list(symbolic)
    notes: list[str] = []
    counts = {repr(s.trip): s.trip for s in _loops(kernel.body)}
    for key, trip in counts.items():
        reads = free_vars(trip)
        if not reads & set(symbolic) or not reads <= set(kernel.params) or \
                not _nonlinear(trip, symbolic, fixed):
            continue
        gone = reads & set(symbolic)
        taken = set(kernel.params) | {s.var for s in _loops(kernel.body)}
        name = unique_name("trips", taken)
        body = _replace_trips(kernel.body, key, name)
        rest = (body, kernel.barriers, kernel.buffers, kernel.num_threads, kernel.cluster,
                kernel.grid)
        if _names(rest, set()) & gone:
            continue            # read beside its loops: the count is not all they say
        try:
            default = max(0, evaluate(trip, kernel.param_values(fixed)))
        except Exception:       # a parameter without a default: n has none either
            default = None
        params = {n: p for n, p in kernel.params.items() if n not in gone}
        params[name] = Param(name, default, symbolic=True)
        kept = tuple(a for a in kernel.assumptions if not free_vars(a) & gone)
        kernel = kernel.replace(body=body, params=params,
                                assumptions=kept + (BinOp(">=", Var(name), Const(0)),))
        symbolic = [n for n in symbolic if n not in gone] + [name]
        notes.append(f"the loops of trip count `{trip}` (not linear) are taken `{name}` times, "
                     f"for every {name} >= 0: {', '.join(sorted(gone))} are read nowhere else, "
                     "so this covers every value of them, and a negative count runs nothing "
                     "(checker/symbolic/opaque_counts.py)")
    return kernel, symbolic, notes


__all__ = ["opaque_trip_counts"]
