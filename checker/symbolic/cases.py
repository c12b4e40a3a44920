"""Case splits on a parameter before the proof: `when n == v: A else: B` at the top of a kernel.

A kernel whose program is one branch on a symbolic parameter (a shape family whose smallest
size traces differently, model/pallas/family.py: `k_steps == 1` runs one stage) is two
programs: A at n = v, B for every other n. Each is proved on its own -- A with n fixed (by the
explorer when nothing symbolic is left, else by the prover), B with `n != v` added to the
assumptions (`n >= v + 1` when the assumptions start n at v) -- and the kernel is proved iff
both are. One static event order for both programs rarely exists; one for each usually does.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

from ...model.ir import BinOp, Const, Kernel, Var, When


def top_case(kernel: Kernel, symbolic: Sequence[str]) -> tuple[str, int, Kernel, Kernel] | None:
    """(n, v, program at n = v, program for n != v) when the body is one `when n == v`."""
    if len(kernel.body) != 1 or not isinstance(kernel.body[0], When):
        return None
    w = kernel.body[0]
    c = w.cond
    if not (isinstance(c, BinOp) and c.op == "==" and isinstance(c.lhs, Var)
            and c.lhs.name in symbolic and isinstance(c.rhs, Const)):
        return None
    n, v = c.lhs.name, c.rhs.value
    at = kernel.replace(body=w.then)
    lower = [a for a in kernel.assumptions if isinstance(a, BinOp) and a.op == ">="
             and isinstance(a.lhs, Var) and a.lhs.name == n and isinstance(a.rhs, Const)
             and a.rhs.value == v]
    if lower:
        rest = tuple(a for a in kernel.assumptions if not any(a is b for b in lower)) \
            + (Var(n) >= v + 1,)
    else:
        rest = kernel.assumptions + (Var(n) != v,)
    return n, v, at, kernel.replace(body=w.orelse, assumptions=rest)


def prove_by_cases(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                   timeout: float, prove: Callable, check_at: Callable):
    """`prove(kernel, symbolic, fixed, timeout)`, split first on a top-level branch over a
    parameter (recursively); `check_at(kernel, values)` is the explorer for a case with nothing
    symbolic left, returning (ok, text)."""
    case = top_case(kernel, symbolic)
    if case is None:
        return prove(kernel, symbolic, fixed, timeout)
    start = time.perf_counter()
    n, v, at, rest = case
    left = [s for s in symbolic if s != n]
    if left:
        first = prove_by_cases(at, left, {**fixed, n: v}, timeout / 2, prove, check_at)
        first_ok, first_text = first.status == "proved", first.reason
    else:
        first_ok, first_text = check_at(at, {**fixed, n: v})
        first = None
    if not first_ok:
        from .proofs import Proof
        return Proof("failed" if first is None or first.status == "failed" else first.status,
                     time.perf_counter() - start,
                     f"the case {n} = {v}: {first_text}",
                     classes=first.classes if first else [])
    # the rest of the budget: `prove` draws from the run's one budget (prove.py), whose count,
    # not the clock, caps what the second case spends
    second = prove_by_cases(rest, symbolic, fixed, timeout, prove, check_at)
    second.seconds = time.perf_counter() - start
    case_text = f"case {n} = {v}: " + ("verified by the explorer" if first is None
                                       else "proved") + f"; case {n} != {v}"
    second.reason = f"{case_text}: {second.reason}" if second.reason else second.reason
    second.cases = [case_text] + second.cases
    if first is not None:
        second.classes = first.classes + second.classes
    return second
