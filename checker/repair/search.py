"""The repair search: candidate edits, smallest first, each verified before it is suggested.

A candidate counts only if the repaired kernel is `verified` by the explorer at the protocol's
parameters; where the protocol has symbolic parameters it must also survive a bounded search
over small parameter values (a repair that only works at the defaults is no repair), and the
prover is asked for `proved`. A suggestion's verdict is the strongest of these it got.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ...model.interpreter import ReplayError
from ...model.ir import Kernel, ModelError
from ..check import Options, check_kernel
from ..engines.explore import Limits
from ..verdict import Fix, Verdict
from .candidates import Candidate, candidates
from .ir_edit import canonical
from .source import SourceEdit, Sources, unified_diff

# Violations a repair may address: found by search or statically, and index/range errors.
REPAIRABLE_ERRORS = ("BP120", "BP121")


@dataclass
class Repair:
    """What the search found: verified fixes (best first), and how much it tried."""

    fixes: list[Fix] = field(default_factory=list)
    chosen: list[Candidate] = field(default_factory=list)
    tried: int = 0
    seconds: float = 0.0
    reason: str = ""                    # why nothing was suggested


def repairable(verdict: Verdict) -> bool:
    return verdict.verdict == "violation" or (
        verdict.verdict == "error" and bool(verdict.codes) and verdict.codes[0] in REPAIRABLE_ERRORS)


def _check(kernel: Kernel, params: Mapping[str, int], options: Options, seconds: float) -> Verdict:
    limits = Limits(max_states=min(options.limits.max_states or 200_000, 200_000),
                    max_depth=options.limits.max_depth, timeout=max(0.5, seconds),
                    max_memory_mb=options.limits.max_memory_mb)
    try:
        return check_kernel(kernel, params, Options(limits, options.reduction, options.ignore,
                                                    options.select))
    except (ModelError, ReplayError) as err:
        # a candidate whose counterexample does not replay is no verified repair: rejected
        return Verdict(kernel.name, "error", coverage=str(err))


def _symbolic(kernel: Kernel) -> list[str]:
    return [p.name for p in kernel.params.values() if p.symbolic]


def _general(kernel: Kernel, params: Mapping[str, int], options: Options) -> bool | None:
    """For a kernel verified at `params`: does it hold at nearby parameter values too? None
    when a symbolic protocol breaks at small values (then it is no repair at all)."""
    symbolic = _symbolic(kernel)
    values = kernel.param_values(params)
    if symbolic:
        from ..symbolic.points import smallest_violation
        fixed = {n: v for n, v in values.items() if n not in symbolic}
        found, _ = smallest_violation(kernel, symbolic, fixed, options, states=200_000, top=2)
        return None if found is not None else True
    for name, value in values.items():
        for other in (value - 1, value + 1):
            point = {**values, name: other}
            if other < 1 or not all(_holds(a, point) for a in kernel.assumptions):
                continue
            # A search cut short by its time limit is no evidence against the repair.
            if _check(kernel, point, options, 2.0).verdict in ("violation", "error"):
                return False
    return True


def _holds(cond, values) -> bool:
    from ...model.ir import evaluate
    try:
        return bool(evaluate(cond, values))
    except ModelError:
        return False


def _prove(kernel: Kernel, params: Mapping[str, int], timeout: float) -> str:
    from ..symbolic.prove import prove
    symbolic = _symbolic(kernel)
    values = kernel.param_values(params)
    fixed = {n: v for n, v in values.items() if n not in symbolic}
    try:
        return "proved" if prove(kernel, symbolic, fixed, timeout=timeout).status == "proved" \
            else "verified"
    except ModelError:
        return "verified"


# Builds the protocol again from its source with the given edits applied (None: it does not
# build). Supplied by the front door (it needs the loader); used to confirm that a patch makes
# exactly the repair that was verified.
Rebuild = Callable[[list[SourceEdit]], "Kernel | None"]


def suggest_fixes(kernel: Kernel, params: Mapping[str, int] | None = None,
                  options: Options | None = None, verdict: Verdict | None = None,
                  max_fixes: int = 3, budget: float = 30.0, prove: bool = True,
                  rebuild: Rebuild | None = None, prove_timeout: float = 25.0) -> Repair:
    """Verified repairs of a kernel that violates a rule: those that also hold at nearby
    parameter values first, then the smaller edits. `rebuild` (from the front door) lets exact
    edits be offered as patches.

    >>> from barrierproof.model.samples import lost_arrival
    >>> [f.description for f in suggest_fixes(lost_arrival.build()).fixes]
    ['`bar`: num_arrivals=1 (was 2)']
    """
    start = time.perf_counter()
    options = options or Options()
    params = dict(params or {})
    repair = Repair()
    verdict = verdict or _check(kernel, params, options, budget)
    if not repairable(verdict):
        repair.reason = f"nothing to repair: the verdict is {verdict.verdict}"
        return repair
    src = Sources(kernel, kernel.param_values(params))
    left = lambda: budget - (time.perf_counter() - start)  # noqa: E731
    first = candidates(kernel, src)
    rejected: list[tuple[Candidate, Verdict]] = []

    verified: list[tuple[bool, Candidate]] = []
    wanted = max_fixes + 2          # a few more than shown, so the most general ones can lead

    def consider(cand: Candidate) -> None:
        repair.tried += 1
        result = _check(cand.kernel, params, options, min(5.0, left()))
        if result.verdict != "verified":
            rejected.append((cand, result))
            return
        general = _general(cand.kernel, params, options)
        if general is not None:
            verified.append((general, cand))

    for cand in first:
        if left() <= 0 or len(verified) >= wanted:
            break
        consider(cand)
    if not verified:
        # Two edits: repair what a first edit left, starting from first edits that changed
        # the violation (the bug was a pair, like a missing wait and a missing drain).
        code = verdict.codes[0] if verdict.codes else None
        # Progress first: the longer the new counterexample, the later the bug now shows.
        changed = sorted(((c, r) for c, r in rejected if r.verdict == "violation" and r.codes
                          and (r.codes[0] != code or r.diagnostics[0].location
                               != verdict.diagnostics[0].location)),
                         key=lambda cr: (-cr[1].depth, cr[0].size))
        seen = {c.key for c in first}
        for parent, _ in changed[:6]:
            for cand in candidates(parent.kernel, src):
                if left() <= 0 or len(verified) >= wanted:
                    break
                if cand.key in seen:
                    continue
                seen.add(cand.key)
                consider(_combine(parent, cand))
    verified.sort(key=lambda gc: (not gc[0], gc[1].size, gc[1].cost))
    if verified and verified[0][0]:     # repairs that hold nearby too make the others noise
        verified = [gc for gc in verified if gc[0]]
    for general, cand in verified[:max_fixes]:
        strength = "verified"
        if prove and not repair.chosen and _symbolic(cand.kernel):   # its own time limit
            strength = _prove(cand.kernel, params, prove_timeout)
        if cand.source and not _patch_is_the_repair(cand, rebuild):
            cand.source = None          # described in words rather than a patch that differs
        repair.chosen.append(cand)
        repair.fixes.append(_fix(cand, strength))
    if not repair.fixes:
        repair.reason = (f"no verified repair among {repair.tried} candidate edits"
                         + (" (time budget spent)" if left() <= 0 else ""))
    repair.seconds = time.perf_counter() - start
    return repair


def _patch_is_the_repair(cand: Candidate, rebuild: Rebuild | None) -> bool:
    """Does the source patch build exactly the kernel that was verified? Without a way to
    rebuild (the bare API), patches are not offered."""
    if rebuild is None:
        return False
    try:
        patched = rebuild(cand.source)
    except ModelError:
        return False
    return patched is not None and canonical(patched) == canonical(cand.kernel)


def _combine(first: Candidate, second: Candidate) -> Candidate:
    edits = None
    if first.source and second.source and not _overlap(first.source + second.source):
        edits = first.source + second.source
    return Candidate(f"{first.fix_class}+{second.fix_class}",
                     f"{first.description}; and {second.description}", first.loc,
                     first.size + second.size, second.kernel, edits,
                     f"{first.words}; and at {second.loc}: {second.words}", [first, second])


def _overlap(edits: list[SourceEdit]) -> bool:
    spans = sorted((e.file, e.start, max(e.start, e.end)) for e in edits)
    return any(a[0] == b[0] and b[1] <= a[2] and not (a[1] > a[2] or b[1] > b[2])
               for a, b in zip(spans, spans[1:]))


def _fix(cand: Candidate, verdict: str) -> Fix:
    if cand.source:
        edit = {"kind": "source", "changes": [e.to_json() for e in cand.source]}
        files = {e.file for e in cand.source}
        try:
            patch = "".join(unified_diff(f, [e for e in cand.source if e.file == f])
                            for f in sorted(files))
        except OSError:
            patch = None
    else:
        edit = {"kind": "words", "text": cand.words,
                "file": str(cand.loc).rsplit(":", 1)[0], "line": cand.loc.line}
        patch = None
    return Fix(cand.description, str(cand.loc), edit, verdict, patch)


def attach_fixes(verdict: Verdict, kernel: Kernel, params: Mapping[str, int] | None,
                 options: Options | None = None, **kw) -> Verdict:
    """The verdict with `fixes` filled in (an empty list when none was verified)."""
    if not repairable(verdict):
        return verdict
    repair = suggest_fixes(kernel, params, options, verdict, **kw)
    verdict.fixes = repair.fixes
    if not repair.fixes:
        verdict.notes.append(f"repair: {repair.reason}")
    return verdict
