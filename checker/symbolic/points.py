"""Parameter points: the values of the symbolic parameters a proof samples its class systems at
and replays candidate orders on, and the explicit explorer's search over them for the smallest
values that break a protocol (a count of states, not a time, so every machine searches the same
points; its states are drawn from the proof's budget)."""

from __future__ import annotations

import itertools
import random
from typing import Mapping, Sequence

from ...model.ir import Kernel, ModelError, evaluate
from ..check import Options, check_kernel
from ..engines.explore import Limits
from ..verdict import Verdict
from .budget import UNITS_PER_EXPLORED_STATE
from .param_values import sample_values
from .work import charge as charge_work


def _satisfies(kernel: Kernel, values: Mapping[str, int], extra=()) -> bool:
    try:
        return all(evaluate(a, values) for a in kernel.assumptions) and all(
            evaluate(a, values) for a in extra)
    except ModelError:
        return False


def points(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int], top: int,
           limit: int | None = None, seed: int = 0,
           negative: frozenset[str] = frozenset()) -> list[dict[str, int]]:
    """Parameter values for the symbolic parameters, each at its top + 1 smallest values the
    kernel tells apart (`sample_values`: 0..top, or 0, 128, 256, ... for a trip count N // 128),
    in order of the sum of their ranks, that satisfy the assumptions (at most `limit` of them,
    a deterministic spread when more exist); -1..-1-top for those in `negative`."""
    scales = [list(range(top + 1)) if n in negative else sample_values(kernel, n, fixed, top + 1)
              for n in symbolic]
    combos = sorted(itertools.product(range(top + 1), repeat=len(symbolic)),
                    key=lambda c: (sum(c), c))
    out = []
    for combo in combos:
        values = dict(fixed)
        values.update((n, -1 - c if n in negative else scale[c])
                      for n, c, scale in zip(symbolic, combo, scales))
        if _satisfies(kernel, values):
            out.append(values)
    if limit is not None and len(out) > limit:
        rng = random.Random(seed)
        keep = out[: limit // 2]
        keep += rng.sample(out[limit // 2:], limit - len(keep))
        out = keep
    return out


def beyond(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int], top: int,
           tries: int = 3) -> list[dict[str, int]]:
    """One point past `points(..., top)` in every symbolic parameter (each at a rank above
    `top`, the least that satisfies the assumptions), or none: its states refute the candidate
    bounds that only say how far the samples went (`k <= 6` where `k` ran to 6)."""
    for extra in range(1, tries + 1):
        values = dict(fixed)
        for n in symbolic:
            values[n] = sample_values(kernel, n, fixed, top + 1 + extra)[top + extra]
        if _satisfies(kernel, values):
            return [values]
    return []


def tau_points(kernel, symbolic, fixed, frag) -> list[dict[str, int]]:
    """A few small, varied parameter points to replay candidate orders on."""
    extra = []
    out = []
    for target in (2, 3, 1):
        for values in points(kernel, symbolic, fixed, 4):
            if all(values[n] == target or values[n] == target + 1 for n in symbolic) and \
                    _satisfies(kernel, values, extra):
                if values not in out:
                    out.append(values)
                break
    # one parameter just above another (more steps than stages, and the reverse): an order
    # that holds only on one side of a comparison fails there
    for a, b in itertools.permutations(symbolic, 2):
        for values in points(kernel, symbolic, fixed, 4):
            if values[a] == values[b] + 1 and values[b] >= 2 and \
                    _satisfies(kernel, values, extra):
                if values not in out:
                    out.append(values)
                break
    cap = len(out) + 3
    for values in points(kernel, symbolic, fixed, 5, limit=6, seed=1):
        if values not in out:
            out.append(values)
    return out[:max(6, cap)]


def smallest_violation(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                       options: Options | None = None, source: str | None = None,
                       states: int = 1_200_000, top: int = 8) -> tuple[Verdict | None, str]:
    """Explore parameter values in order of their sum (then lexicographically) with the explicit
    explorer, `states` distinct states in all (a count, not a time: the same points are
    searched on every machine); the first violation is returned, its trace already replayed on
    the interpreter."""
    base = options or Options()
    checked = 0
    last = None
    left = states
    for values in points(kernel, symbolic, fixed, top):
        if left <= 0:
            break
        cap = left if base.limits.max_states is None else min(left, base.limits.max_states)
        limits = Limits(max_states=cap, max_depth=base.limits.max_depth, timeout=None,
                        max_memory_mb=base.limits.max_memory_mb)
        opts = Options(limits, base.reduction, base.ignore, base.select)
        verdict = check_kernel(kernel, values, opts, source)
        charge_work(verdict.states * UNITS_PER_EXPLORED_STATE)  # drawn from the budget
        left -= max(1, verdict.states)
        checked += 1
        last = values
        if verdict.verdict == "violation" or (
                verdict.verdict == "error" and verdict.codes and verdict.codes[0] in
                ("BP120", "BP121")):
            return verdict, f"{checked} parameter point(s) explored in order of size"
    what = f"{checked} parameter point(s) explored" + (f", up to {last}" if last else "")
    return None, what


def smallest_points(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                    per_parameter: int = 2, top: int = 8) -> list[dict[str, int]]:
    """Every combination of the `per_parameter` smallest values each symbolic parameter takes
    in a point that satisfies the assumptions (0..top), kept where the assumptions hold."""
    allowed = points(kernel, symbolic, fixed, top)
    smallest = [sorted({p[n] for p in allowed})[:per_parameter] for n in symbolic]
    grid = []
    for combo in itertools.product(*smallest):
        values = {**fixed, **dict(zip(symbolic, combo))}
        if _satisfies(kernel, values):
            grid.append(values)
    return grid


def explorer_net(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                 options: Options, source: str | None, states: int) -> tuple[Verdict | None, str]:
    """The explicit explorer with every rule the user did not ignore, at the smallest points
    (`smallest_points`), `states` distinct states in all (a count: the same points are searched
    on every machine). The first violation is returned, replayed; else what was searched."""
    grid = smallest_points(kernel, symbolic, fixed)
    left, searched, bounded = states, [], 0
    for values in grid:
        if left <= 0:
            break
        cap = left if options.limits.max_states is None else min(left, options.limits.max_states)
        limits = Limits(max_states=cap, max_depth=options.limits.max_depth, timeout=None,
                        max_memory_mb=options.limits.max_memory_mb)
        found = check_kernel(kernel, values, Options(limits, options.reduction, options.ignore,
                                                     options.select), source)
        charge_work(found.states * UNITS_PER_EXPLORED_STATE)     # drawn from the budget
        left -= max(1, found.states)
        searched.append(values)
        if found.verdict == "violation" or (found.verdict == "error" and found.codes
                                            and found.codes[0] in ("BP120", "BP121")):
            return found, f"at {points_text(searched[-1:], symbolic)}"
        bounded += found.verdict in ("bounded", "unknown")
    text = f"at {len(searched)} of {len(grid)} smallest point(s) ({points_text(searched, symbolic)})"
    if bounded:
        text += f", {bounded} of them cut short by the state budget"
    return None, text


def points_text(values: Sequence[Mapping[str, int]], symbolic: Sequence[str]) -> str:
    return "; ".join(", ".join(f"{n}={v[n]}" for n in symbolic) for v in values) or "none"
