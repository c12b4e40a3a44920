"""pytest helpers: a kernel's synchronization as a unit test.

```python
from barrierproof.testing import assert_deadlock_free

from mykernels.protocols import tma_ring           # a @protocol
from mykernels.matmul import check_matmul          # a function that calls a plgpu.kernel

def test_ring_is_deadlock_free():
    assert_deadlock_free(tma_ring, stages=3, steps=8)

def test_matmul_is_deadlock_free():
    assert_deadlock_free(check_matmul)
```

A failure is an AssertionError whose message is the full text report: the diagnostic, its help
line and the counterexample timeline with the stuck waits, exactly what `barrierproof check`
prints. Nothing short of `verified` (or `proved`) passes: a bounded search, a kernel with
unmodelled synchronization (`unknown`) and an input error all fail, each saying why.
"""

from __future__ import annotations

from .api import _kernels, check
from .checker.check import Options
from .checker.report.text import describe
from .checker.verdict import Verdict
from .model.ir import ModelError

__all__ = ["check", "assert_deadlock_free", "assert_violation"]


def assert_deadlock_free(target, *, options: Options | None = None,
                         max_states: int | None = None, ignore: tuple[str, ...] = (),
                         fix: bool = True, **params: int) -> list[Verdict]:
    """Fail unless every kernel of `target` is verified (or proved) for these parameters.

    `target` is a `@protocol`, a Kernel, or a zero-argument function that calls Pallas Mosaic
    GPU kernels (traced on the CPU). Keyword arguments set the protocol's parameters; `ignore`
    takes diagnostic codes, `max_states` bounds the search. On a violation the message also
    shows the verified repairs the repair search finds (`fix=False` skips the search).
    Returns the verdicts.

    >>> from barrierproof.model.samples import lost_arrival
    >>> try:
    ...     assert_deadlock_free(lost_arrival)
    ... except AssertionError as err:
    ...     print(str(err).splitlines()[0])
    lost_arrival is not deadlock-free: violation:BP100
    """
    verdicts = check(target, options=options, max_states=max_states, ignore=ignore, **params)
    bad = [v for v in verdicts if v.verdict not in ("verified", "proved")]
    if bad and fix:
        _attach_fixes(target, bad, options, params)
    if bad:
        raise AssertionError("\n\n".join(_explain(v) for v in bad))
    return verdicts


def assert_violation(target, code: str, *, options: Options | None = None,
                     max_states: int | None = None, **params: int) -> Verdict:
    """Fail unless `target` has a violation with diagnostic `code` (a regression test for a
    known bug pattern). Returns the verdict, whose `trace` is the counterexample."""
    verdicts = check(target, options=options, max_states=max_states, **params)
    for v in verdicts:
        if v.verdict == "violation" and code in v.codes:
            return v
    raise AssertionError("\n\n".join(f"expected violation:{code}, got {v.label}\n{describe(v)}"
                                     for v in verdicts))


def _attach_fixes(target, verdicts: list[Verdict], options: Options | None, params) -> None:
    from .checker.repair import attach_fixes
    from .fixcmd import rebuild_with
    try:
        kernels = _kernels(target)
    except ModelError:
        return
    for kernel, _ in kernels:
        for v in verdicts:
            if v.name == kernel.name and v.fixes is None:
                own = {k: p for k, p in params.items() if k in kernel.params}
                attach_fixes(v, kernel, own, options, budget=15.0,
                             rebuild=rebuild_with(kernel))


def _explain(v: Verdict) -> str:
    why = {"violation": "is not deadlock-free",
           "bounded": "was not proved: the search stopped at a limit",
           "unknown": "was not proved: it uses synchronization the model does not cover",
           "error": "could not be checked"}.get(v.verdict, "was not verified")
    return f"{v.name} {why}: {v.label}\n{describe(v)}"
