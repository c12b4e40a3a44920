"""What the reporters (rich text, HTML, SARIF) read off a counterexample Trace, in one place:
its lanes, the barrier states at every step, the stuck agents, and `path:line` locations.

Pure functions over the Trace's data; no reporter re-derives them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...model.interpreter import Trace
from .text import barrier_state
from ...model import primitives as K

_LOC_IN_TEXT = re.compile(r"\(([^()\s]+):(\d+)\)")


def trace_stem(name: str) -> str:
    """A protocol's name as a file name: [A-Za-z0-9._-] only (no `/`, no `..`), never empty.

    >>> trace_stem("../ring/v2") + ".trace.json"
    'ring_v2.trace.json'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:100] or "protocol"


def split_location(location: str | None) -> tuple[str | None, int | None]:
    """`path:line` -> (path, line); line is None when absent or 0.

    >>> split_location("examples/handoff.py:25"), split_location("<unknown>:0")
    (('examples/handoff.py', 25), (None, None))
    """
    if not location:
        return None, None
    path, sep, line = location.rpartition(":")
    if not sep or not line.isdigit():
        return location, None
    if path.startswith("<"):
        return None, None
    return path, int(line) or None


def location_in_text(text: str) -> tuple[str | None, int | None]:
    """The first `(path:line)` mentioned in a detail line."""
    m = _LOC_IN_TEXT.search(text)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def lanes(trace: Trace) -> list[str]:
    """Every thread and warp of the trace (moving or not, since a stuck thread may never move),
    then each asynchronous agent that moves (TMA landings, async arrivals, tcgen05 queues)."""
    out = list(trace.agents)
    for step in trace.steps:
        if step.agent not in out:
            out.append(step.agent)
    return out


def lane_kind(trace: Trace, lane: str) -> str:
    """thread, warp, tma, async or tcgen05."""
    for step in trace.steps:
        if step.agent == lane:
            return step.agent_kind
    # A warp never moved: its name extends its warpgroup's (`wg0.warp1`; `b1.wg0` is a thread).
    return "warp" if any(lane.startswith(a + ".") for a in trace.agents) else "thread"


def stuck(trace: Trace) -> dict[str, list[str]]:
    """The violation's details, by the agent each names first ("wg1 blocked at ..."); details
    that name no lane are kept under the empty string."""
    details = (trace.violation or {}).get("details") or []
    names = sorted(lanes(trace), key=len, reverse=True)
    out: dict[str, list[str]] = {}
    for line in details:
        who = next((n for n in names if line.startswith(n + " ")), "")
        out.setdefault(who, []).append(line)
    return out


def blocked(trace: Trace) -> bool:
    """Is the violation a stuck state (deadlock or a phase that can never complete)?"""
    return (trace.violation or {}).get("code") in ("BP100", "BP130")


@dataclass
class BarrierRow:
    step: int                          # 0: before the first step
    states: dict[str, dict]            # barrier name -> phase/arrived/expected/tx[/in_flight]
    changed: set[str]
    completed: set[str]


def barrier_rows(trace: Trace) -> list[BarrierRow]:
    """The state of every barrier before the first step and after each step.

    A Trace records the initial and final state of every barrier and what each step changed;
    the states in between are carried forward. (Traces written before the initial state was
    recorded start every barrier in phase 0 with the count it shows when first changed.)
    """
    names = list(trace.final_barriers)
    for step in trace.steps:
        for name in step.barriers:
            if name not in names:
                names.append(name)
    first: dict[str, dict] = {}
    for step in trace.steps:
        for name, view in step.barriers.items():
            first.setdefault(name, view)
    current = {}
    for name in names:
        if name in trace.initial_barriers:
            current[name] = dict(trace.initial_barriers[name])
            continue
        seen = first.get(name) or trace.final_barriers.get(name) or {}
        current[name] = {"phase": 0, "arrived": 0, "expected": seen.get("expected", 0), "tx": 0}
    rows = [BarrierRow(0, dict(current), set(), set())]
    for step in trace.steps:
        completed = {c.split(" completes")[0] for c in step.completions}
        for name, view in step.barriers.items():
            current[name] = view
        rows.append(BarrierRow(step.index, dict(current), set(step.barriers), completed))
    return rows


def barrier_cell(view: dict) -> str:
    """`ph1 2/2 tx+4096 [1 tma (4096 bytes each)]`: phase, arrivals of the open phase, bytes."""
    text = barrier_state(view)
    if view.get("in_flight"):
        text += " [" + "; ".join(view["in_flight"]) + "]"
    return text


def event_kind(step) -> str:
    """A step's kind of event, for colouring: arrive, wait, copy, land, mma, other."""
    text = step.text
    if step.agent_kind in ("tma", "async"):
        return "land"
    if step.agent_kind == "tcgen05":
        return "mma"
    if "wait" in text:
        return "wait"
    if text.startswith((K.COPY_GMEM_TO_SMEM, K.TMA_LOAD, K.TRY_CLUSTER_CANCEL,
                        K.CP_ASYNC_ARRIVE, K.ASYNC_STORE_SMEM)):
        return "copy"
    if text.startswith(("tcgen05",)):
        return "mma"
    if "arrive" in text or "expect_tx" in text or "complete_tx" in text:
        return "arrive"
    return "other"
