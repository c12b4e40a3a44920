"""From a kernel to a Verdict: static rules, compilation, exploration, replay of the trace."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..model import reference
from ..model.grid import GRID_LIMIT, grid_size
from ..model.interpreter import ReplayError, replay
from ..model.ir import Kernel, ModelError, evaluate
from ..model.instructions import UNMODELED
from ..model.semantics import CODES, System, compile_systems
from ..model.static_rules import static_findings
from ..model.violations import Place, Violation, place, tolerance
from .engines.explore import Limits, explore
from .rules import HELP
from .verdict import Diagnostic, Verdict

RACE_CODES = frozenset({"BP200", "BP201"})
# `prove --timeout T` buys T seconds of work at a reference speed; its net is this many times T
# of the process's CPU time (checker/symbolic/prove.py Budget), so load changes when a verdict
# comes, not which one.
WALL_NET_FACTOR = 4.0
# The wall clock's net behind it, this many times further: a machine that much busier than idle
# still reaches the CPU net first.
LOAD_ALLOWANCE = 4.0
# Static findings that mean the input cannot be modelled as written.
INPUT_ERRORS = {"BP120", "BP121"}


@dataclass
class Options:
    limits: Limits = field(default_factory=Limits)
    reduction: bool = True
    ignore: frozenset[str] = frozenset()
    select: frozenset[str] | None = None
    progress: Callable[[dict], None] | None = None
    store: str = "tuple"                # explorer state store (checker/engines/store.py)
    # explorer order: depth first with branch and bound (a violation early, then the shortest
    # unless a limit stops it), or breadth first (a bounded search covers every state of the
    # reduced graph to its depth, docs/POR.md); the same verdicts when neither stops at a limit
    # (explore.py)
    order: str = "dfs"
    races: bool = True      # check BP200/BP201 where the kernel declares its memory effects
    # suppressed findings, each at one place (barrierproof/suppress.py): not reported there,
    # and a search does not go past them (explore.py); engines that cannot say where a finding
    # is do not read this (engine_registry.py `locates_suppressions`)
    tolerate: frozenset[Place] = frozenset()
    # which core runs the explorer's unreduced search: auto (the compiled one where it is
    # built and accepts the System), python or compiled (checker/engines/compiled.py); None:
    # BARRIERPROOF_CORE, else auto. Only the speed differs.
    core: str | None = None
    # processes the explorer's unreduced breadth-first search runs on (checker/engines/mproc.py)
    workers: int = 1

    def ignored(self) -> frozenset[str]:
        if self.select is None:
            return frozenset(self.ignore)
        return frozenset(c for c in CODES if c not in self.select) | frozenset(self.ignore)


def error_verdict(name: str, err: ModelError, source: str | None = None,
                  seconds: float = 0.0) -> Verdict:
    """An input error, unless the error carries the code of a rule the kernel breaks (JAX
    rejects a tcgen05 arrival on a barrier without orders_tensor_core while tracing: that is
    BP110, found while tracing, a violation)."""
    loc = str(err.loc) if err.loc else None
    diag = Diagnostic(err.code or "input", err.message, loc, err.hint)
    if err.code in CODES and err.code not in INPUT_ERRORS:
        diag.help = err.hint or HELP.get(err.code)
        return Verdict(name, "violation", [diag], seconds=seconds, source=source,
                       coverage="found while tracing, before exploration")
    return Verdict(name, "error", [diag], seconds=seconds, source=source)


def check_assumptions(kernel: Kernel, values: Mapping[str, int]) -> None:
    """Parameter values must satisfy the kernel's own `k.assume(...)`: a protocol checked
    outside the range it declares says nothing about the range it was written for."""
    for cond in kernel.assumptions:
        try:
            holds = evaluate(cond, values)
        except ModelError:
            continue        # an assumption over a symbolic-only name: not ours to judge
        if not holds:
            shown = ", ".join(f"{n}={v}" for n, v in sorted(values.items()))
            text = repr(cond)
            if text.startswith("(") and text.endswith(")"):
                text = text[1:-1]
            raise ModelError(f"{kernel.name}: parameter values {shown} break its assumption "
                             f"k.assume({text})", loc=kernel.loc,
                             hint="pass values inside the assumed range (--param NAME=VALUE)")


def diagnostic(system: System, violation: Violation) -> Diagnostic:
    return Diagnostic(violation.code, violation.message, str(system.location(violation)),
                      HELP.get(violation.code), list(violation.details),
                      [{"location": str(loc), "message": text}
                       for text, loc in violation.related])


@dataclass
class SearchOutcome:
    """What one engine concluded about one System. A violation carries the concrete schedule
    and the code the engine claims; the driver replays it on the interpreter."""

    status: str                         # verified, violation, bounded
    states: int = 0
    transitions: int = 0
    depth: int = 0
    actions: list[int] | None = None
    code: str | None = None             # claimed violation code (None: whatever it replays to)
    reason: str | None = None           # why a search stopped early
    bytes_per_state: float | None = None
    collision_probability: float | None = None
    witness: list[int] | None = None    # parity aliasing: the other schedule (model/parity.py)
    notes: list[str] = field(default_factory=list)   # what the engine decided on its own


# An engine: (system, ignored codes, seconds left or None) -> SearchOutcome.
Search = Callable[[System, frozenset, "float | None"], SearchOutcome]


def explorer_search(options: Options) -> Search:
    def search(system: System, ignored: frozenset, remaining: float | None) -> SearchOutcome:
        limits = options.limits
        if remaining is not None:
            limits = Limits(limits.max_states, limits.max_depth, remaining, limits.max_memory_mb)
        r = explore(system, limits, options.reduction, ignored, options.progress,
                     store_mode=options.store, order=options.order, tolerate=options.tolerate,
                     core=options.core, workers=options.workers)
        return SearchOutcome(r.status, r.states, r.transitions, r.depth, r.actions,
                             r.violation.code if r.violation else None, r.reason,
                             r.bytes_per_state, r.collision_probability, r.witness, r.notes)
    return search


def run_engine(kernel: Kernel, params: Mapping[str, int] | None, options: Options,
               source: str | None, search: Search, engine: str = "explore",
               label: str = "") -> Verdict:
    """Static rules, compilation, one search per distinct cluster behaviour, and the replay of
    any counterexample on the interpreter: the same verdict pipeline for every engine."""
    ignored = options.ignored()
    start = time.perf_counter()
    try:
        values = kernel.param_values(params)
        check_assumptions(kernel, values)
        findings = static_findings(kernel)
        races = options.races and not RACE_CODES <= ignored
        systems = compile_systems(kernel, values, races)
    except ModelError as err:
        verdict = error_verdict(kernel.name, err, source, time.perf_counter() - start)
        verdict.engine = engine
        return verdict
    for system in systems:
        findings += system.findings
    unique, seen = [], set()
    for f in findings:
        key = (f.code, str(f.loc))  # one finding per place, not per loop iteration
        accepted = options.tolerate and f.loc is not None and \
            place(f.code, f.loc) in options.tolerate       # suppressed at its line
        if key not in seen and f.code not in ignored and not accepted:
            seen.add(key)
            unique.append(Diagnostic(f.code, f.message, str(f.loc), f.hint or HELP.get(f.code)))

    def verdict(kind: str, diags, **kw) -> Verdict:
        memory = {}
        if memory_seen:
            memory = {"store": options.store, "bytes_per_state": max(memory_seen),
                      "collision_probability": collisions if options.store == "fingerprint"
                      else None}
        return Verdict(kernel.name, kind, diags, params=values, source=source, engine=engine,
                       reduction=options.reduction and engine == "explore",
                       seconds=time.perf_counter() - start, expected=kernel.expect,
                       notes=list(kernel.notes) + search_notes, **memory, **kw)

    memory_seen: list[float] = []
    search_notes: list[str] = []
    collisions = 0.0

    if any(d.code in INPUT_ERRORS for d in unique):
        return verdict("error", [d for d in unique if d.code in INPUT_ERRORS])
    static_violations = [d for d in unique if d.code != "BP190"]
    if static_violations:
        return verdict("violation", static_violations,
                       coverage="found statically, before exploration")
    unmodeled = [d for d in unique if d.code == "BP190"]

    states = transitions = depth = 0
    bounded_reasons = []
    timeout = options.limits.timeout
    for system in systems:
        remaining = None if timeout is None else max(0.0, timeout - (time.perf_counter() - start))
        result = search(system, ignored, remaining)
        if result.bytes_per_state is not None:
            memory_seen.append(result.bytes_per_state)
            collisions += result.collision_probability or 0.0
        states += result.states
        transitions += result.transitions
        search_notes += [n for n in result.notes if n not in search_notes]
        depth = max(depth, result.depth)
        if result.status == "violation":
            tolerated = tolerance(system, options.tolerate)
            run = replay(system, result.actions, ignored, result.witness, tolerated)
            if run.violation is None or (result.code and run.violation.code != result.code):
                raise ReplayError(f"{kernel.name}: the {engine} counterexample "
                                  f"({result.code or 'violation'}) replays to {run.outcome}")
            if run.violation.code in ignored:
                bounded_reasons.append(f"{engine} stopped at an ignored {run.violation.code}")
                continue
            trace = run.trace(source)
            _agree_with_reference(kernel, trace, ignored | _set_aside(run, tolerated), engine)
            if unmodeled and _passes_unread(system, run):
                # fail closed: the unread operation may order what the trace shows unordered
                found = verdict("unknown", unmodeled, states=states, transitions=transitions,
                                depth=depth, coverage=f"{label}{states} distinct states; "
                                f"stopped at a counterexample through unread synchronization")
                found.notes.append(
                    f"a counterexample ({run.violation.code}) steps past synchronization the "
                    "model does not read (BP190): it may not be feasible, so it is not a "
                    "finding; a counterexample that passes none is reported as a violation")
                return found
            where = "" if len(systems) == 1 else f" (grid position {system.grid_position})"
            # a reason on a violation: a limit kept the search from confirming it is shortest
            which = "counterexample" if result.reason else "shortest counterexample"
            steps = f"{len(result.actions)} step{'' if len(result.actions) == 1 else 's'}"
            found = verdict("violation", [diagnostic(system, run.violation)] + unmodeled,
                            trace=trace, states=states, transitions=transitions,
                            depth=len(result.actions),
                            coverage=f"{label}{which}: {steps}{where}"
                                     + (f" ({result.reason})" if result.reason else ""))
            if unmodeled:
                found.notes.append("the kernel uses synchronization the model does not cover "
                                   "(BP190); this trace ignores it and may not be feasible")
            return found
        if result.status == "bounded":
            bounded_reasons.append(result.reason)
    coverage = f"{label}{states} distinct states, {transitions} transitions, depth {depth}"
    if memory_seen and options.store == "fingerprint":
        coverage += (f" (64-bit fingerprints: collision probability {collisions:.1e}, "
                     "as TLC estimates it)")
    if len(systems) > 1:
        coverage += f", {len(systems)} distinct cluster behaviours"
    if grid_size(kernel, values) > GRID_LIMIT:
        bounded_reasons.append(f"the grid has {grid_size(kernel, values)} cluster positions; "
                               "only the first, second and last along each axis were checked")
    if bounded_reasons:
        return verdict("bounded", unmodeled, states=states, transitions=transitions, depth=depth,
                       coverage=f"{coverage}; stopped: {'; '.join(bounded_reasons)}")
    if unmodeled:
        return verdict("unknown", unmodeled, states=states, transitions=transitions, depth=depth,
                       coverage=f"{coverage}; exhaustive for the modelled synchronization only")
    return verdict("verified", [], states=states, transitions=transitions, depth=depth,
                   coverage=f"{coverage}; exhaustive")


def _passes_unread(system: System, run) -> bool:
    """Whether an agent of the run steps past an operation the frontend did not read."""
    return any(a < system.n_agents and (i := system.current(st, a)) is not None
               and i.op == UNMODELED for st, a in zip(run.states, run.actions))


def _set_aside(run, tolerated) -> frozenset[str]:
    """The codes of the suppressed findings that hold where `run` ends, besides the one it
    shows: the reference judges by code, not place, so it is told to set those aside there.
    (Before its end a run breaks no rule, suppressed or not: it is replayed strictly.)"""
    if tolerated is None or run.witness is not None:
        return frozenset()
    system, end = run.system, run.states[-1]
    return frozenset(v.code for v in system.state_violations(end)
                     if tolerated(v) and v.code != run.violation.code)


def _agree_with_reference(kernel: Kernel, trace, ignored: frozenset, engine: str) -> None:
    """The independent reference (model/reference/, written without semantics.py) replays the
    trace by agent names and step texts and must reach the same code with the same barrier
    states; otherwise one of the two statements of the rules is wrong and nothing is printed."""
    if not reference.covers(kernel):
        # The few shapes `reference.uncovered` names are outside the reference: such traces
        # are replayed on the interpreter only.
        return
    try:
        result = reference.replay_trace(kernel, trace, ignored)
    except reference.ReferenceError as err:
        raise ReplayError(f"{kernel.name}: the {engine} counterexample does not replay on the "
                          f"independent reference: {err}") from None
    claimed = trace.violation["code"] if trace.violation else None
    if result.code != claimed or result.barrier_mismatches:
        found = f"{result.outcome} {result.code}" if result.code else \
            f"no violation (the reference ends {result.outcome})"
        raise ReplayError(f"{kernel.name}: the {engine} counterexample ({claimed}) replays on the "
                          f"independent reference to {found}"
                          + (f"; {result.barrier_mismatches[0]}" if result.barrier_mismatches
                             else ""))


def check_kernel(kernel: Kernel, params: Mapping[str, int] | None = None,
                 options: Options | None = None, source: str | None = None) -> Verdict:
    """Check one kernel for concrete parameter values with the explicit explorer.

    >>> from barrierproof.model.samples import handoff
    >>> check_kernel(handoff.build()).verdict
    'verified'
    """
    options = options or Options()
    return run_engine(kernel, params, options, source, explorer_search(options))


def explore_kernel(kernel: Kernel, params: Mapping[str, int] | None = None,
                   options: Options | None = None, source: str | None = None,
                   settings=None) -> Verdict:
    """The `explore` engine (checker/engine_registry.py): `check_kernel`, whose settings are all
    in `options`."""
    return check_kernel(kernel, params, options, source)
