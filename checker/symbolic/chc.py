"""A class system's invariant found by Z3's CHC engine (Spacer), re-checked by plain Z3.

Houdini (houdini.py) keeps the largest inductive subset of the candidates the samples
propose; when that subset does not exclude an error, the facts that would are not among the
candidates. Spacer (property-directed reachability over constrained Horn clauses) finds them
instead of guessing: the class system becomes

    Inv(init_head)               <- init_body
    Inv(next)                    <- Inv(x), pre, H(x), sane(x)          (one clause a step)
    false                        <- Inv(x), bad, H(x), sane(x)          (one clause an error)

where H is what Houdini proved inductive and `sane` the construction facts (checked inductive
by Encoder.check_sane): both hold in every reachable state, so they only narrow what Spacer
must learn. Spacer's answer is never trusted: its interpretation of Inv, conjoined with H and
`sane`, is checked by an ordinary Z3 solver for initiation, consecution on every transition and
the exclusion of every error condition, the same three obligations a Houdini proof discharges.
Only when all of them are unsat is the class proved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from .encode import Encoder
from .work import checked


@dataclass
class ChcResult:
    status: str            # proved, failed (Spacer found the error reachable), unknown
    seconds: float
    reason: str = ""
    invariant: z3.BoolRef | None = None
    facts: int = 0


def _conjuncts(formula: z3.BoolRef) -> list[z3.BoolRef]:
    if z3.is_and(formula):
        return [c for arg in formula.children() for c in _conjuncts(arg)]
    return [formula]


def spacer_invariant(enc: Encoder, houdini: list[z3.BoolRef], timeout: float
                     ) -> tuple[str, z3.BoolRef | None, str]:
    """Spacer on the class system narrowed by the proved facts `houdini`: ("sat", Inv over
    enc.vars, "") when it finds a safe inductive interpretation, ("unsat", None, why) when it
    derives an error, ("unknown", None, why) otherwise."""
    xs = enc.vars
    inv = z3.Function("Inv", *([z3.IntSort()] * len(xs)), z3.BoolSort())
    known = z3.And(list(houdini) + list(enc.sane)) if (houdini or enc.sane) else z3.BoolVal(True)
    s = z3.SolverFor("HORN")
    s.set("timeout", max(1, int(timeout * 1000)))
    s.add(z3.ForAll(xs, z3.Implies(enc.init_body, inv(*enc.init_head))))
    nf = len(enc.system.frozen)
    for _, pre, nxt in enc.steps:
        # parameters never change: the frozen part of `next` is the frozen part of x
        post = list(xs[:nf]) + list(nxt[nf:])
        s.add(z3.ForAll(xs, z3.Implies(z3.And(inv(*xs), pre, known), inv(*post))))
    for _, cond in enc.bad:
        s.add(z3.ForAll(xs, z3.Implies(z3.And(inv(*xs), cond, known), z3.BoolVal(False))))
    try:
        answer = checked(s)
    except z3.Z3Exception as exc:
        return "unknown", None, f"Spacer: {exc}"
    if answer == z3.sat:
        interp = s.model()[inv]
        if interp is None:                  # Inv unconstrained: every state
            return "sat", z3.BoolVal(True), ""
        if not isinstance(interp, z3.FuncInterp) or interp.num_entries():
            return "unknown", None, "Spacer's interpretation of Inv is not one formula"
        # the interpretation speaks of its arguments as de Bruijn variables: Var(i) is x_i
        return "sat", z3.substitute_vars(interp.else_value(), *xs), ""
    if answer == z3.unsat:
        return "unsat", None, "Spacer derives an error state of the class system"
    return "unknown", None, f"Spacer: {s.reason_unknown()}"


def check_certificate(enc: Encoder, invariant: z3.BoolRef, timeout: float) -> str | None:
    """None when `invariant` (over enc.vars) holds initially, is preserved by every
    transition and excludes every error condition, each asked of a fresh Z3 solver; else
    the obligation that is not discharged, and whether Z3 refuted it or left it undecided."""
    xs = enc.vars
    nf = len(enc.system.frozen)
    init = z3.substitute(invariant, *zip(xs, enc.init_head))

    def open_(obligation: str, *facts) -> str | None:
        s = z3.Solver()
        s.set("timeout", max(1, int(timeout * 1000)))
        s.add(*facts)
        answer = checked(s)
        if answer == z3.unsat:
            return None
        return f"fails {obligation}" if answer == z3.sat else \
            f"leaves {obligation} undecided ({s.reason_unknown()})"

    why = open_("initiation", enc.init_body, z3.Not(init))
    for label, pre, nxt in enc.steps:
        post = list(xs[:nf]) + list(nxt[nf:])
        why = why or open_(f"consecution on `{label}`", enc.init_body, invariant, pre,
                           z3.Not(z3.substitute(invariant, *zip(xs, post))))
    for label, cond in enc.bad:
        why = why or open_(f"safety on `{label}`", enc.init_body, invariant, cond)
    return why


def prove_class(enc: Encoder, houdini: list[z3.BoolRef], timeout: float) -> ChcResult:
    """The class system proved by an invariant Spacer proposes and plain Z3 checks."""
    start = time.perf_counter()
    verdict, inv, why = spacer_invariant(enc, houdini, timeout)
    if verdict != "sat":
        status = "failed" if verdict == "unsat" else "unknown"
        return ChcResult(status, time.perf_counter() - start, why)
    certificate = z3.And([inv, *houdini, *enc.sane])
    left = max(1.0, timeout - (time.perf_counter() - start))
    open_ = check_certificate(enc, certificate, left)
    seconds = time.perf_counter() - start
    if open_ is not None:
        return ChcResult("unknown", seconds, f"Spacer's invariant {open_} when re-checked")
    return ChcResult("proved", seconds, invariant=certificate,
                     facts=len(_conjuncts(z3.simplify(inv))) + len(houdini))


__all__ = ["ChcResult", "check_certificate", "prove_class", "spacer_invariant"]
