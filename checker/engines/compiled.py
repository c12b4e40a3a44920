"""The explorer's breadth-first search on the compiled core, where it accepts the System: the
raw one (no reduction), and the reduced ones of thread symmetry with or without por.py's
persistent sets (_por.c; docs/POR.md "In the compiled core"), which reach the same graph.

`_core` (checker/engines/_core.c, built by pip when a C compiler is there) runs the
breadth-first search of explore.py over the same flat states, with the same order of actions,
the same visited set semantics, the same tie-breaks at a level (first code in `rank` order, then the first
met) and the same limits, and returns its counts and the breadth-first tree. What it finds is
rebuilt here into the schedule the Python explorer would report: the path of states from the
tree, matched step by step with `_concretize` (the lowest action reaching each state, as the
Python search's path is), the violation recomputed by semantics.py and checked to have the code
the core claims; the driver then replays it as every counterexample is. The side table of bare
parity waits comes back too, for the aliasing (and the deadlock it explains) to be rebuilt by
parity_returns.py as the Python search would.

Which core runs: `core` "auto" (the default; also the environment variable BARRIERPROOF_CORE)
uses the compiled core whenever it is built and accepts the System (flatten.py names what it
refuses), "python" never, "compiled" insists that it is built (an error otherwise) and still
falls back, with a note naming the reason, for a System it refuses. Without a C compiler at
install time the extension is absent and every search is the Python one: only speed differs.
"""

from __future__ import annotations

import os
import sys
import time
from array import array

from ...model.memory import SPACE_CODE
from ...model.parity import aliasing
from ...model.semantics import System
from ...model.violations import Violation, primary
from ...model import instructions as ins
from .core_sources import stale
from .flatten import Refused, flatten
from .flatten_por import persistent_tables
from .parity_returns import Conflict, ParityReturns, Shown, search_return
from .symmetry import permute_state, race_permutations

try:
    from . import _core
except ImportError:     # built without a C compiler: the Python explorer runs every search
    _core = None
# A core built from other sources than the checkout's (an editable install not rebuilt) reads
# another layout: not used, and said once.
STALE = stale(_core) if _core is not None else None
if STALE is not None:
    _core = None
    sys.stderr.write(f"barrierproof: {STALE}; the Python explorer searches instead\n")

CORES = ("auto", "python", "compiled")
VERIFIED, VIOLATION, STATE_LIMIT, TIME_LIMIT, MEMORY_LIMIT, DEPTH_LIMIT, INTERRUPTED = range(7)
AT_INITIAL, BY_STEP, IN_STATE, DEADLOCK, ALIASING = range(5)
NOTE = ("searched breadth first by the compiled core (C), which reaches the states, verdict and "
        "shortest counterexample of the Python explorer's breadth-first search")
POR_NOTE = ("searched by the compiled core (C), breadth first with partial-order reduction and "
            "thread symmetry, which reaches the states, verdict and counterexample of the "
            "Python explorer's reduced breadth-first search")
SYMMETRY_NOTE = ("searched by the compiled core (C), breadth first with thread symmetry, which "
                 "reaches the orbits, verdict and shortest counterexample of the Python "
                 "explorer's breadth-first search without partial-order reduction")
# States the search for a blocked parity wait's earlier return may visit (explore.py's).
ALIAS_SEARCH = 20_000


def available() -> bool:
    return _core is not None


def chosen(core: str | None) -> str:
    """The core asked for: the argument, else BARRIERPROOF_CORE, else auto."""
    core = core or os.environ.get("BARRIERPROOF_CORE") or "auto"
    if core not in CORES:
        raise ValueError(f"unknown exploration core {core!r}; choose one of {', '.join(CORES)}")
    if core == "compiled" and _core is None:
        raise RuntimeError(f"{STALE}: use --core python or auto" if STALE else
                           "the compiled exploration core is not built (no C compiler when "
                           "barrierproof was installed): use --core python or auto")
    return core


def _rss_bytes() -> int:
    from .search_result import _rss_bytes as rss
    return rss()


def explore_compiled(system: System, limits, ignore: frozenset[str] = frozenset(),
                     progress=None, symmetry=None, partial_order: bool = False,
                     overruns: bool = False):
    """The raw breadth-first search of explore.py on the compiled core (an ExploreResult);
    raises `Refused` for a System outside it. With `symmetry` (a Symmetry of thread classes
    only), the search explore.py makes without partial-order reduction: one state per orbit
    (the core's representative, `thread_canon`), the twin steps left out; and with
    `partial_order` the persistent sets of por.py too (_por.c), which may reach a violation
    later than the full graph: explore.py confirms it as it confirms its own."""
    start = time.perf_counter()
    classes = symmetry.classes if symmetry is not None else []
    if symmetry is not None and symmetry.blocks:
        raise Refused("block symmetry")
    scalars, arrays, codes, init = flatten(system, ignore, classes)
    tables = persistent_tables(system, classes, overruns) if partial_order else None
    canon = thread_canon(system, classes)
    init = [0 if isinstance(v, tuple) else v for v in canon(system.initial_state())]
    budget = -1 if limits.max_memory_mb is None else \
        max(limits.max_memory_mb * 2**20 - _rss_bytes(), 0)
    bounds = (-1 if limits.max_states is None else limits.max_states,
              -1 if limits.max_depth is None else limits.max_depth,
              -1.0 if limits.timeout is None else float(limits.timeout), budget)
    # states in 16-bit words; a value beyond them: the search again in 32-bit ones
    out = _core.explore(scalars, arrays, codes, init, *bounds, 2, progress, tables)
    if out["status"] == "wide":
        out = _core.explore(scalars, arrays, codes, init, *bounds, 4, progress, tables)
    parents, actions = array("i"), array("i")
    parents.frombytes(out["parents"])
    actions.frombytes(out["actions"])
    if not classes and not partial_order:
        return outcome(system, out, parents, actions, limits, ignore, start, [NOTE])
    found = outcome(system, out, parents, actions, limits, ignore, start,
                    [POR_NOTE if partial_order else SYMMETRY_NOTE], symmetry, canon)
    found.symmetry_classes = symmetry.describe() if symmetry is not None else []
    return found


def thread_canon(system: System, classes: list[list[int]]):
    """_core.c's representative of a state's orbit under thread symmetry (`canonical`), on
    semantics.py's states: each class's local parts sorted by their values as the core holds
    them (a tcgen05 queue as the entries it has delivered, which with the pc says its tuple)."""
    if not classes:
        return lambda s: s
    from .symmetry import _local_fields
    plan = []
    for cls in classes:
        issued, n = [], 0
        for instr in system.programs[cls[0]]:      # tcgen05 ops issued before each pc
            issued.append(n)
            n += instr.op == ins.ISSUE_TCGEN05
        issued.append(n)
        plan.append((issued, [_local_fields(system, a) for a in cls]))

    def canon(state: tuple) -> tuple:
        out = None
        for issued, fields in plan:
            parts = [tuple(state[p] for p in f) for f in fields]
            keys = [tuple(issued[part[0]] - len(v) if isinstance(v, tuple) else v
                          for v in part) for part in parts]
            order = sorted(range(len(parts)), key=keys.__getitem__)
            if any(k != i for i, k in enumerate(order)):
                out = out if out is not None else list(state)
                for f, k in zip(fields, order):
                    for p, v in zip(f, parts[k]):
                        out[p] = v
        return state if out is None else tuple(out)
    return canon


def outcome(system: System, out: dict, parents, actions, limits, ignore: frozenset[str],
            start: float, notes: list[str], symmetry=None, canon=None):
    """The ExploreResult of a compiled search's `out` (the multi-process one's too, mproc.py):
    its counterexample rebuilt from the breadth-first tree (`parents`, `actions` by state id)
    and recomputed by semantics.py. With thread symmetry the tree's states are
    representatives (`canon`) and its actions those of the representatives."""
    from .symmetry import schedule_toward
    from .search_result import ExploreResult, _concretize, _states
    depth, status = out["depth"], out["status"]
    canon = canon or (lambda s: s)

    def result(kind: str, **kw) -> ExploreResult:
        return ExploreResult(kind, out["states"], out["transitions"], kw.pop("depth", depth),
                             time.perf_counter() - start, reduction=symmetry is not None,
                             store="compiled",
                             bytes_per_state=round(out["bytes"] / max(out["states"], 1), 1),
                             notes=notes, **kw)

    if status != VIOLATION:
        reasons = {STATE_LIMIT: f"state limit {limits.max_states} reached at depth {depth}",
                   TIME_LIMIT: f"time limit {limits.timeout:g}s reached at depth {depth}"
                   if limits.timeout is not None else "",
                   MEMORY_LIMIT: f"memory limit {limits.max_memory_mb} MB reached at depth "
                                 f"{depth}",
                   DEPTH_LIMIT: f"depth limit {limits.max_depth} reached with "
                                f"{out['unexpanded']} states unexpanded",
                   INTERRUPTED: f"interrupted at depth {depth}"}
        if status == VERIFIED:
            return result("verified")
        return result("bounded", reason=reasons[status])

    def path(state_id: int) -> list[tuple]:
        """The states from the initial one's successor to state `state_id` of the tree."""
        moves = []
        while parents[state_id] >= 0:
            moves.append(actions[state_id])
            state_id = parents[state_id]
        states = [canon(system.initial_state())]
        for move in reversed(moves):
            states.append(canon(system.step(states[-1], move)[0]))
        return states[1:]

    def agree(violation: Violation) -> Violation:
        claimed = f"BP{out['code']:03d}"
        if violation.code != claimed:
            raise AssertionError(f"the compiled core claims {claimed} where semantics.py finds "
                                 f"{violation.code}: the two statements of the rules differ")
        return violation

    identity = (lambda s: s)
    kind = out["kind"]
    # the side table is rebuilt (a replay per entry) only where a verdict reads it
    returns = _returns(system, out, path, ignore, symmetry) \
        if kind in (ALIASING, DEADLOCK) else None
    perm = out.get("perm", -1)
    if perm >= 0:       # a race of a symmetric image of the state (explore.py `violations`)
        moved = race_permutations(system, symmetry.classes)[perm]
        end = canon(system.initial_state())
        moves = []
        if kind != AT_INITIAL:
            keys = path(out["pred"])
            pred = keys[-1] if keys else end
            end = canon(system.step(pred, out["action"])[0])
            moves, _ = _concretize(system, canon, identity, keys, pred, out["action"], ignore)
        image = permute_state(system, end, moved)
        moves = schedule_toward(system, symmetry.classes, moves, image)
        race = system.memory.violation(system, image, ignore)
        return result("violation", actions=moves, violation=agree(race), depth=len(moves))
    if kind == AT_INITIAL:
        bad = [v for v in system.state_violations(system.initial_state()) if v.code not in ignore]
        return result("violation", actions=[], violation=agree(primary(bad)), depth=0)
    if kind == ALIASING:
        conflict = _conflict(system, out, returns)
        ends = []
        for shown in (conflict.deeper, conflict.other):
            moves, _ = _concretize(system, canon, identity, shown.keys, None, None, ignore)
            end = _states(system, moves)[-1]
            ends.append((moves, returns.returning_agent(end, conflict, shown.completion)))
        (this, agent), (other, theirs) = ends
        this, other = this + [agent], returns.onto(other, theirs, agent) + [agent]
        violation = aliasing(system, _states(system, this), _states(system, other))
        assert violation is not None, "the compiled core's parity conflict does not replay"
        return result("violation", actions=this, violation=agree(violation), witness=other,
                      depth=len(this))
    keys = path(out["pred"])
    pred = keys[-1] if keys else system.initial_state()
    if kind == DEADLOCK:
        moves, _ = _concretize(system, canon, identity, keys, pred, None, ignore)
        violation, witness = agree(system.deadlock(pred)), None
        if returns is not None and violation.code == "BP100":
            alias = _deadlock_alias(system, returns, moves, ignore, canon)
            if alias is not None:
                violation, witness = alias
        return result("violation", actions=moves, violation=violation, witness=witness,
                      depth=len(moves))
    code = f"BP{out['code']:03d}" if kind == BY_STEP else None
    moves, last = _concretize(system, canon, identity, keys, pred, out["action"], ignore,
                              step_code=code)
    if kind == BY_STEP:
        violation = last
    else:
        # judged on the representative, as the Python search judges what it stores
        end = canon(system.step(pred, out["action"])[0])
        violation = primary([v for v in system.state_violations(end) if v.code not in ignore])
        if symmetry is not None and violation.code in SPACE_CODE.values():
            # a race is not invariant under the symmetry: end where it was judged
            moves = schedule_toward(system, symmetry.classes, moves, end)
    return result("violation", actions=moves, violation=agree(violation), depth=len(moves))


def _returns(system: System, out: dict, path, ignore, symmetry) -> ParityReturns | None:
    """The side table of bare parity waits as parity_returns.py keeps it (keyed by the first
    member of each thread class, each other agent its own orbit), filled from the core's."""
    if "BP101" in ignore:
        return None
    returns = ParityReturns(system, symmetry)
    if not returns:
        return None
    where = _instructions(system)
    for index, completion, depth, state_id in out["returns"]:
        agent, pc = where[index]
        returns.table.setdefault((returns.root[agent], pc), {})[completion] = \
            Shown(completion, depth, path(state_id) if depth else [])
    return returns


def _instructions(system: System) -> list[tuple[int, int]]:
    """(agent, pc) of each instruction in the core's numbering."""
    return [(a, pc) for a, prog in enumerate(system.programs) for pc in range(len(prog))]


def _conflict(system: System, out: dict, returns: ParityReturns) -> Conflict:
    agent, pc = _instructions(system)[out["conflict"]]
    first, second = list(returns.table[(agent, pc)].values())[:2]
    return Conflict(returns.orbit(returns.root[agent]), pc, second, first)


def _deadlock_alias(system: System, returns: ParityReturns, actions: list[int], ignore, canon):
    """explore.py's deadlock_alias: a deadlock at a bare parity wait that returned, on another
    schedule, after an earlier completion is that aliasing."""
    from .search_result import _concretize, _states
    identity = (lambda s: s)
    states = _states(system, actions)
    for agent, pc, phase in returns.blocked(states[-1]):
        shown = returns.earlier(agent, pc, phase)
        other = None
        if shown is not None:
            other, _ = _concretize(system, canon, identity, shown.other.keys, None, None,
                                   ignore)
            end = _states(system, other)[-1]
            theirs = returns.returning_agent(end, shown, shown.other.completion)
            other = returns.onto(other, theirs, agent) + [agent]
        else:
            other = search_return(system, agent, pc, phase, ignore, ALIAS_SEARCH)
        if other is not None:
            violation = aliasing(system, states, _states(system, other))
            if violation is not None:
                return violation, other
    return None


__all__ = ["CORES", "NOTE", "Refused", "available", "chosen", "explore_compiled", "outcome"]
