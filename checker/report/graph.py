"""`barrierproof graph`: the whole state graph of a small model, as DOT.

Every reachable state (no reduction, so every interleaving shows) is a node labelled with where
each thread is and the state of each barrier; every step is an edge labelled with who moved and
what it did. The initial state is bold, finished states green, deadlocks and rule violations red
(a violating state is not expanded, as in the explorer). Render with `dot -Tsvg graph.dot`.

>>> from barrierproof.model.samples import handoff
>>> from barrierproof.model.semantics import System
>>> g = state_graph(System(handoff.build()))
>>> g.number_of_nodes(), g.number_of_edges(), sorted(n for n, d in g.nodes(data=True) if d["kind"] == "done")
(3, 2, [2])
"""

from __future__ import annotations

import networkx as nx

from ...model.interpreter import barrier_view
from ...model.semantics import System
from .text import barrier_state

STYLE = {
    "initial": 'shape=box, style="rounded,bold"',
    "state": 'shape=box, style=rounded',
    "done": 'shape=box, style="rounded,filled", fillcolor="#dcfce7", color="#1a7f37"',
    "violation": 'shape=box, style="rounded,filled", fillcolor="#fde2e2", color="#c62828", '
                 'penwidth=2',
}


class TooLarge(Exception):
    pass


def _label(system: System, state: tuple) -> str:
    lines = []
    for a, agent in enumerate(system.agents):
        instr = system.current(state, a)
        lines.append(f"{agent.name}: " + (system.sources[instr.src].text if instr else "done"))
    for i, inst in enumerate(system.instances):
        lines.append(f"{inst.name}: {barrier_state(barrier_view(system, state, i))}")
    return "\n".join(lines)


def state_graph(system: System, max_states: int = 2000) -> nx.DiGraph:
    """Breadth-first, every interleaving; raises TooLarge past `max_states` states."""
    graph = nx.DiGraph()
    index: dict[tuple, int] = {}

    def add(state: tuple, kind: str, code: str | None = None) -> int:
        if state in index:
            return index[state]
        if len(index) >= max_states:
            raise TooLarge(f"more than {max_states} states")
        n = index[state] = len(index)
        graph.add_node(n, kind=kind, code=code, label=_label(system, state))
        return n

    init = system.initial_state()
    frontier = [init]
    add(init, "initial")
    while frontier:
        next_frontier = []
        for state in frontier:
            src = index[state]
            bad = system.state_violations(state)
            if bad:
                graph.nodes[src].update(kind="violation", code=bad[0].code)
                continue
            succ = system.successors(state)
            if not succ:
                if system.is_done(state):
                    graph.nodes[src]["kind"] = "done"
                else:
                    graph.nodes[src].update(kind="violation", code=system.deadlock(state).code)
                continue
            for action, nxt, violation in succ:
                new = nxt not in index
                dst = add(nxt, "violation" if violation else "state",
                          violation.code if violation else None)
                agent, _ = system.action_name(action)
                text, _ = system.action_text(state, action)
                graph.add_edge(src, dst, label=f"{agent}: {text}")
                if new and violation is None:
                    next_frontier.append(nxt)
        frontier = next_frontier
    return graph


def _quote(text: str, end: str = "\\l") -> str:
    """A DOT string; each line ends left-aligned (\\l) unless `end` says otherwise."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", end) + end + '"'


def to_dot(graph: nx.DiGraph, name: str = "states") -> str:
    """DOT text for a state graph (labels left-aligned, one line per thread and barrier)."""
    out = [f"digraph {_quote(name, '')} {{",
           '  graph [rankdir=TB, fontname="monospace"];',
           '  node [fontname="monospace", fontsize=10];',
           '  edge [fontname="monospace", fontsize=9];']
    for n, data in graph.nodes(data=True):
        label = data["label"]
        if data.get("code"):
            label = f"{data['code']}\n{label}"
        out.append(f"  s{n} [label={_quote(label)}, {STYLE[data['kind']]}];")
    for a, b, data in graph.edges(data=True):
        out.append(f"  s{a} -> s{b} [label={_quote(data['label'])}];")
    out.append("}")
    return "\n".join(out) + "\n"
