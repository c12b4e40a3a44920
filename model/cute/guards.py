"""Branches on a runtime value, pinned: each comparison that steers one is a guard of the IR.

A kernel read at several values of a runtime value (family.py) stands for every value only if
no branch around synchronization could go another way at a value not read. CUTLASS's
mainloops do branch on K: they peek at the next stage only while one is left (`if
state.count < k_tiles: status = try_wait(state)`), so the last iteration differs from the
others. Such a comparison (an `arith.cmpi` on integers whose result steers a branch around
synchronization) is read as a guard: each time a warp evaluates it, an event records its two
operands and its outcome. The runs' loops are rolled and joined with the guards in them (an
iteration whose outcome differs from the others' is peeled, roll.py), so every guard of the
joined IR has its operands as expressions of the loop variables and the parameters, and one
outcome. `settle` then proves with Z3 that each guard has that outcome at every value of the
parameters (under the kernel's assumptions) and every iteration of the loops around it, and
removes the guards; a guard it cannot prove leaves the runs unjoined (fail closed: the loops
stay BP190, with a note naming the comparison).
"""

from __future__ import annotations

from contextvars import ContextVar

from ..ir import Loop, Op, When, free_vars

KIND = "cute_guard"         # an Op of the runs only, never of a kernel that leaves family.py
# the arith.cmpi ops (by id of the MLIR op) whose evaluations are guards, while runs are read
GUARDED: ContextVar[frozenset] = ContextVar("GUARDED", default=frozenset())
# arith.cmpi's predicates (MLIR's CmpIPredicate order), as the interpreter evaluates them
PREDICATES = ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")


def describe(predicate: int, outcome: int) -> str:
    """The name a guard op carries: its comparison and the outcome the run saw."""
    return f"{PREDICATES[predicate]} {'true' if outcome else 'false'}"


def _z(e, env):
    """A guard's operand as a Z3 term: names bound by its loops and the parameters, division
    only where Z3's is Python's."""
    from ..zterms import Untranslated, z_int
    unbound = sorted(free_vars(e) - set(env))
    if unbound:
        raise ValueError(f"`{unbound[0]}` is bound by no loop or parameter")
    try:
        return z_int(e, env, exact_division=True)
    except Untranslated:
        raise ValueError(f"the expression {e!r} is not translated") from None


def _compare(op: str, a, b):
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
            ">=": a >= b}[op]


def _guards(body, loops: tuple = ()):
    """Each guard of the body with the loops around it, (var, trip) outermost first."""
    for s in body:
        if isinstance(s, Op) and s.kind == KIND:
            yield s, loops
        elif isinstance(s, Loop):
            yield from _guards(s.body, loops + ((s.var, s.trip),))
        elif isinstance(s, When):
            yield from _guards(s.then, loops)
            yield from _guards(s.orelse, loops)


def has_guards(body) -> bool:
    return next(_guards(body), None) is not None


def unproved(body, params: list[str], assumptions) -> str | None:
    """None when every guard has its outcome at every value of the parameters satisfying the
    assumptions and every iteration of its loops (Z3); else the first that was not proved."""
    import z3
    for guard, loops in _guards(body):
        env = {name: z3.Int(name) for name in params}
        where = f"line {guard.loc.line}" if guard.loc and guard.loc.line else "a comparison"
        try:
            facts = [_z(a, env) != 0 for a in assumptions]
            for var, trip in loops:
                env[var] = z3.Int(f"{var}!{len(env)}")
                facts += [env[var] >= 0, env[var] < _z(trip, env)]
            op, outcome = guard.name.split()
            holds = _compare(op, _z(guard.count, env), _z(guard.bytes, env))
        except ValueError as e:
            return f"the comparison at {where} ({e})"
        solver = z3.Solver()
        solver.set(timeout=10_000)
        solver.add(*facts)
        solver.add(z3.Not(holds) if outcome == "true" else holds)
        if solver.check() != z3.unsat:
            return (f"the comparison at {where} ({guard.count!r} {op} {guard.bytes!r}, "
                    f"{outcome} at every value read) is not proved {outcome} at every value")
    return None


def strip(body) -> tuple:
    """The body without its guards."""
    out = []
    for s in body:
        if isinstance(s, Op) and s.kind == KIND:
            continue
        if isinstance(s, Loop):
            out.append(Loop(s.var, s.trip, strip(s.body), s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, strip(s.then), strip(s.orelse), s.loc))
        else:
            out.append(s)
    return tuple(out)


def note(body, names: list[str]) -> tuple:
    """The note saying which comparisons with the runtime values were proved, if any."""
    lines = sorted({g.loc.line for g, _ in _guards(body) if g.loc and g.loc.line})
    if not lines:
        return ()
    spelled = ", ".join(f"`{n}`" for n in names)
    return (f"the comparisons with {spelled} that steer synchronization (line "
            f"{', '.join(map(str, lines))}) are proved to go the way the runs went at every "
            "value and iteration (Z3), so the runs stand for every value",)
