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
from .laps import LapCase, lap_cases
from .stride_split import StrideCase, stride_cases


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
                   timeout: float, prove: Callable, check_at: Callable, strides: bool = True):
    """`prove(kernel, symbolic, fixed, timeout)`, split first on a top-level branch over a
    parameter (recursively); `check_at(kernel, values)` is the explorer for a case with nothing
    symbolic left, returning (ok, text). `strides`: also split a ring's strides into whole
    laps (stride_split.py), as the barrier proof does."""
    case = top_case(kernel, symbolic)
    if case is None:
        strided, _ = stride_cases(kernel, symbolic, fixed) if strides else (None, None)
        if strided:
            return _prove_strided(strided, fixed, timeout, prove, check_at)
        cut = lap_cases(kernel, symbolic, fixed)
        if cut is not None:
            return prove_laps(*cut, fixed, timeout, prove, check_at)
        return prove(kernel, symbolic, fixed, timeout)
    start = time.perf_counter()
    n, v, at, rest = case
    left = [s for s in symbolic if s != n]
    if left:
        first = prove_by_cases(at, left, {**fixed, n: v}, timeout / 2, prove, check_at, strides)
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
    second = prove_by_cases(rest, symbolic, fixed, timeout, prove, check_at, strides)
    second.seconds = time.perf_counter() - start
    case_text = f"case {n} = {v}: " + ("verified by the explorer" if first is None
                                       else "proved") + f"; case {n} != {v}"
    second.reason = f"{case_text}: {second.reason}" if second.reason else second.reason
    second.cases = [case_text] + second.cases
    if first is not None:
        second.classes = first.classes + second.classes
    return second


def _prove_strided(cases: list[StrideCase], fixed: Mapping[str, int], timeout: float,
                   prove: Callable, check_at: Callable):
    """Each residue case of a strided ring (stride_split.py) proved on its own; the kernel is
    proved iff every case is, and the first that is not says why."""
    from .budget import Z3_UNITS_PER_SECOND, units_spent
    from .proofs import Proof
    start = time.perf_counter()
    done = []
    classes = []
    first = units_spent()
    for n, case in enumerate(cases):
        # an equal part of the work left (counted, as the budget is: not the wall time, which
        # the machine's load would make the verdict depend on)
        spent = (units_spent() - first) / Z3_UNITS_PER_SECOND
        left = max(1.0, (timeout - spent) / (len(cases) - n))
        got = prove_by_cases(case.kernel, case.symbolic, fixed, left, prove, check_at)
        classes += got.classes
        if got.status != "proved":
            got.reason = f"the case {case.label} (stride_split.py): {got.reason}"
            got.seconds = time.perf_counter() - start
            got.classes = classes
            return got
        done.append(got)
    last = done[-1]
    text = ("rings stepped through at a stride relabelled to one slot per iteration or "
            f"strip-mined to whole laps (stride_split.py), proved in {len(cases)} case(s): "
            + "; ".join(c.label for c in cases))
    return Proof("proved", time.perf_counter() - start, "", classes,
                 list(dict.fromkeys(s for p in done for s in p.side_conditions)),
                 last.roles, last.tau,
                 [text] + list(dict.fromkeys(c for p in done for c in p.cases)))


def prove_laps(cases: list[LapCase], note: str, fixed: Mapping[str, int], timeout: float,
                prove: Callable, check_at: Callable):
    """The lap cases of a drained pipeline (laps.py): the concrete ones by the explorer, the
    others proved; the kernel is proved iff every case is, and the first that is not says why."""
    from .proofs import Proof
    start = time.perf_counter()
    classes, done = [], []
    symbolic = [c for c in cases if c.symbolic]
    for case in cases:
        if not case.symbolic:
            ok, text = check_at(case.kernel, {**fixed, **case.values})
            if not ok:
                return Proof("failed", time.perf_counter() - start,
                             f"the case {case.label} (laps.py): {text}", classes=classes)
            continue
        left = max(1.0, (timeout - (time.perf_counter() - start))
                   / (len(symbolic) - len(done)))
        got = prove(case.kernel, case.symbolic, fixed, left)
        classes += got.classes
        if got.status != "proved":
            got.reason = f"the case {case.label} (laps.py): {got.reason}"
            got.seconds = time.perf_counter() - start
            got.classes = classes
            return got
        done.append(got)
    last = done[-1]
    return Proof("proved", time.perf_counter() - start, "", classes,
                 list(dict.fromkeys(s for p in done for s in p.side_conditions)),
                 last.roles, last.tau, [note] + [c for p in done for c in p.cases])
