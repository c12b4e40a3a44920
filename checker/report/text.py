"""Reporters: text (with a counterexample timeline) and JSON.

The timeline has one column per thread or asynchronous agent that moves, one row per step, and a
last column with what the step did to the barriers: completions and changed states.
"""

from __future__ import annotations

import json
from typing import Sequence

from ...model.interpreter import Trace
from ..rules import help_line
from ..verdict import Verdict
from .safe import printable_copy

CELL = 36  # widest timeline cell before it is cut


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def steps_text(n: int) -> str:
    """`1 step`, `2 steps`."""
    return f"{n} step" if n == 1 else f"{n} steps"


def barrier_state(view: dict) -> str:
    text = f"ph{view['phase']} {view['arrived']}/{view['expected']}"
    if view.get("tx"):
        text += f" tx{view['tx']:+d}"
    return text


def timeline(trace: Trace) -> str:
    """The counterexample as a table: steps down, agents across.

    >>> from barrierproof.model.interpreter import Step, Trace
    >>> t = Trace("p", None, {}, {}, ["wg0"], [0], [Step(1, 0, "wg0", "thread",
    ...     "barrier_arrive(bar)", "p.py:3", ["bar completes phase 1"], {})], "terminated")
    >>> print(timeline(t))
    step | wg0                 | barriers
    -----+---------------------+----------------------
       1 | barrier_arrive(bar) | bar completes phase 1
    """
    agents: list[str] = []
    for step in trace.steps:
        if step.agent not in agents:
            agents.append(step.agent)
    order = {a: i for i, a in enumerate(trace.agents)}
    agents.sort(key=lambda a: (a not in order, order.get(a, 0), a))
    rows = []
    for step in trace.steps:
        cells = ["" for _ in agents]
        cells[agents.index(step.agent)] = step.text
        effects = list(step.completions)
        done = {c.split(" completes")[0] for c in step.completions}
        effects += [f"{name}: {barrier_state(v)}" for name, v in step.barriers.items()
                    if name not in done]
        rows.append([str(step.index)] + cells + ["; ".join(effects)])
    header = ["step"] + agents + ["barriers"]
    widths = [max(len(header[i]), *(len(_clip(r[i], CELL)) for r in rows)) if rows
              else len(header[i]) for i in range(len(header))]
    widths[-1] = max(len(header[-1]), *(len(r[-1]) for r in rows)) if rows else len(header[-1])

    def line(cols: Sequence[str]) -> str:
        parts = [cols[0].rjust(widths[0])]
        parts += [_clip(c, CELL).ljust(widths[i + 1]) for i, c in enumerate(cols[1:-1])]
        parts.append(cols[-1])
        return " | ".join(parts).rstrip()

    out = [line(header), "-+-".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def describe(v: Verdict, show_trace: bool = True) -> str:
    """The full text report of one verdict (names from users' files escaped: safe.py)."""
    v = printable_copy(v)
    ref = v.source or v.name
    head = f"{ref}: {v.label}"
    if v.verdict in ("verified", "proved", "bounded", "unknown"):
        head += f" ({v.coverage})" if v.coverage else ""
    elif v.verdict == "violation":
        head += f" ({v.states} states explored; {v.coverage})" if v.coverage else ""
    if v.expected and not v.matches(v.expected):
        head += f"  [EXPECTED {v.expected}]"
    lines = [head]
    for d in v.diagnostics:
        lines.append("  " + d.one_line())
        for r in d.related:
            lines.append(f"    and: {r['location']}: {r['message']}")
        if d.help:
            lines.append(f"    help: {help_line(d.code, d.help)}")
    for note in v.notes:
        lines.append(f"  note: {note}")
    lines += fix_lines(v)
    if show_trace and v.trace is not None:
        t = v.trace
        lines.append(f"  counterexample: {steps_text(len(t.steps))}, replayed on the interpreter"
                     + (f"; parameters {t.params}" if t.params else ""))
        lines += ["    " + row for row in timeline(t).splitlines()]
        if t.witness is not None:     # parity aliasing: the same wait on a second schedule
            other = type(t).from_json(t.witness)
            lines.append(f"  the other schedule: {steps_text(len(other.steps))}")
            lines += ["    " + row for row in timeline(other).splitlines()]
        details = t.violation.get("details", []) if t.violation else []
        for d in details:
            lines.append(f"    stuck: {d}" if v.codes and v.codes[0] in ("BP100", "BP130")
                         else f"    {d}")
    return "\n".join(lines)


def fix_lines(v: Verdict) -> list[str]:
    """The verified fixes of a verdict: what, where, with what verdict, and the patch."""
    lines = []
    for n, fix in enumerate(v.fixes or [], 1):
        lines.append(f"  fix {n} ({fix.verdict} after the edit): {fix.description}"
                     + (f"  [{fix.location}]" if fix.location else ""))
        if fix.patch:
            lines += ["      " + row for row in fix.patch.rstrip("\n").splitlines()]
        elif fix.edit.get("kind") == "words":
            lines.append(f"      edit at {fix.location}: {fix.edit['text']}")
    return lines


def text_report(verdicts: Sequence[Verdict], show_trace: bool = True,
                only: Sequence[Verdict] | None = None) -> str:
    """Every verdict's block (or those of `only`, e.g. the failures under -q), then the summary
    over all of `verdicts`."""
    blocks = [describe(v, show_trace) for v in (verdicts if only is None else only)]
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    expected = [v for v in verdicts if v.expected]
    if expected:
        # A target that could not be loaded has no expectation to meet, and did not meet one:
        # it counts against the expectations, never left out of them.
        unchecked = [v for v in verdicts if v.verdict == "error" and not v.expected]
        met = len([v for v in expected if v.matches(v.expected)])
        summary += f"; {met}/{len(expected) + len(unchecked)} as expected"
        if unchecked:
            summary += f" ({len(unchecked)} error(s) before any expectation was read)"
    suppressed = sum(len(v.suppressed) for v in verdicts)
    if suppressed:
        summary += f"; {suppressed} finding(s) suppressed"
    body = "\n\n".join(blocks) + "\n\n" if blocks else ""
    return body + f"{len(verdicts)} checked: {summary}\n"


def json_report(verdicts: Sequence[Verdict]) -> str:
    return json.dumps([v.to_json() for v in verdicts], indent=2)
