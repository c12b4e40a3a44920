"""`prove` on a Pallas target that declares its sizes (`@sizes(...)`): build the family's IR,
and replay a violation the prover finds by tracing the kernel again at the breaking sizes.

The prover (checker/symbolic) reads IR only; re-tracing is the frontend's business, so it lives
here, between the two.
"""

from __future__ import annotations

from typing import Callable

from .checker.check import Options, check_kernel
from .checker.verdict import Verdict
from .model.ir import Kernel, ModelError


def family_kernel(fn: Callable, name: str, expect: str | None) -> Kernel:
    """The kernel's IR for every size (model/pallas/family.py); a family that cannot be built
    falls back to the traced shape, and says why."""
    from .model import pallas
    from .model.pallas.family import trace_family
    try:
        return trace_family(fn, name, expect, pallas.load).kernel
    except ModelError as err:
        if err.code:
            raise
        kernel = pallas.trace_function(fn, name=name)
        return kernel.replace(notes=kernel.notes + (
            f"no shape family: {err.message}; checked at the traced shape only",))


def replay_by_retracing(fn: Callable, name: str, expect: str | None, verdict: Verdict,
                        options: Options) -> Verdict:
    """Trace the kernel at the sizes of a violation found on its family and check it there:
    the note says whether the kernel's own trace shows the same violation."""
    return judge_member(verdict, name, retrace_member(fn, name, expect, verdict.params),
                        options)


def retrace_member(fn: Callable, name: str, expect: str | None,
                   values: dict | None) -> tuple[str, Kernel] | str | None:
    """The user's code half of the replay (run where user code runs): the kernel traced at the
    violation's sizes, with the sizes shown; a note when it cannot be traced; None when the
    violation does not fix every size."""
    from .model import pallas
    from .model.pallas.family import size_params, trace_member
    sizes = size_params(fn, name) or []
    values = values or {}
    if any(p.name not in values for p in sizes):
        return None
    at = {p.name: values[p.name] for p in sizes}
    shown = ", ".join(f"{p.arg}={p.unit * at[p.name]} ({p.name}={at[p.name]})" for p in sizes)
    try:
        member = trace_member(fn, name, expect, sizes, at, pallas.load)
    except ModelError as err:
        return f"re-tracing {name} at {shown} failed: {err.message}"
    return shown, member


def judge_member(verdict: Verdict, name: str, retraced: tuple[str, Kernel] | str | None,
                 options: Options) -> Verdict:
    """The checker's half: the traced member checked, and the verdict kept (with a note) when
    it shows the same violation, else an error."""
    if retraced is None:
        return verdict
    if isinstance(retraced, str):
        verdict.notes.append(retraced)
        return verdict
    shown, member = retraced
    values = verdict.params or {}
    rest = {n: v for n, v in values.items() if n in member.params}
    again = check_kernel(member, rest, options, verdict.source)
    want = verdict.codes[0] if verdict.codes else None
    got = again.codes[0] if again.codes else None
    if again.verdict == verdict.verdict and got == want:
        verdict.notes.append(f"replayed by tracing {name} again at {shown}"
                             + (f" with {', '.join(f'{n}={v}' for n, v in rest.items())}"
                                if rest else "")
                             + f": {again.verdict}" + (f":{got}" if got else "")
                             + f" ({again.states} states)")
    else:
        verdict.notes.append(f"NOT reproduced by tracing {name} again at {shown}: the trace "
                             f"there gives {again.verdict}" + (f":{got}" if got else "")
                             + "; the family's fit is wrong at these sizes")
        verdict.verdict = "error"
    return verdict
