"""The engine of `barrierproof prove` and `check --engine symbolic`: a kernel's verdict from
its barrier proof (prove.py, passed in as a BarrierProver), its race proof (races_proof.py), the
explorer's searches for breaking values and its cross-check of every proof."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Mapping, Sequence

import z3

from ...model.ir import Kernel, ModelError, free_vars, has_memory_effects, without_memory
from ...model.static_rules import static_findings
from ..check import RACE_CODES, Options, check_assumptions, check_kernel, error_verdict
from ..engine_settings import ProveSettings, settings_of
from ..rules import RULES, describe, in_play, undecided
from ..verdict import Verdict
from .budget import Budget, STATES_PER_SECOND, UNITS_PER_EXPLORED_STATE, own_context
from .cases import prove_by_cases, prove_laps
from .cluster_sync import alternates, lower_cluster_sync, uses_cluster_barrier
from .declared import add_declared_finding
from .exit_async import exit_open
from .init_prefix import publish_inits
from .laps import lap_cases
from .lifetimes import bp146_note, peer_lifetime_gap
from .peer_exit import ENCODED as PEER_EXIT_ENCODED
from .points import explorer_net, points, points_text, smallest_violation
from .proofs import BarrierProver, Proof
from .quotients import quotient_rewrite, translate
from .races_proof import races_by_tile, races_of_lap_case
from .terms import Unsupported
from .tiles import promotable, prove_tiles
from .work import charge as charge_work

def interrupt_solver() -> None:
    """Make a running Z3 query return (unknown), so a watchdog's stop can land."""
    z3.main_ctx().interrupt()


def _conditions_text(kernel: Kernel, symbolic: Sequence[str]) -> str:
    conds = [repr(a) for a in kernel.assumptions]
    text = ", ".join(symbolic)
    return f"all {text}" + (f" with {' and '.join(conds)}" if conds else "")


@own_context()     # the same course and units after any other proof (budget.py)
def _refuted(found: Verdict, symbolic, start: float, searched: str) -> Verdict:
    """The explorer's violation at the smallest breaking values, as prove's verdict."""
    found.engine = "symbolic"
    found.seconds = time.perf_counter() - start
    shown = ", ".join(f"{n}={found.params[n]}" for n in symbolic)
    found.notes.append(f"smallest breaking values found: {shown} (bounded search: {searched}; "
                       "the trace is from the explicit explorer, replayed on the interpreter)")
    return found


def prove_kernel(kernel: Kernel, params: Mapping[str, int] | None,
                 options: Options | None, source: str | None,
                 settings, barriers: BarrierProver) -> Verdict:
    """Prove for every value of the symbolic parameters, or find the smallest breaking ones
    (the `symbolic` engine, checker/engine_registry.py; `settings` is a ProveSettings)."""
    start = time.perf_counter()
    options = options or Options()
    params = dict(params or {})
    settings = settings_of(ProveSettings, settings)
    requested = list(settings.symbolic)
    symbolic = requested or [p.name for p in kernel.params.values() if p.symbolic]

    def verdict(kind: str, diags=(), **kw) -> Verdict:
        v = Verdict(kernel.name, kind, list(diags), engine="symbolic", source=source,
                    seconds=time.perf_counter() - start, expected=kernel.expect,
                    notes=list(kernel.notes) + kw.pop("notes", []), **kw)
        return v

    unknown_names = [n for n in symbolic if n not in kernel.params]
    if unknown_names:
        return error_verdict(kernel.name, ModelError(
            f"{kernel.name} has no parameter {', '.join(unknown_names)}", loc=kernel.loc,
            hint=f"its parameters: {', '.join(kernel.params) or 'none'}"
            + ("; a Pallas kernel function's keyword arguments are not parameters: declare "
               "sizes with @sizes (docs/prove.md)" if kernel.source == "pallas" else "")),
            source)
    clash = [n for n in symbolic if n in params]
    if clash:
        return error_verdict(kernel.name, ModelError(
            f"{', '.join(clash)} is both symbolic and fixed with --param", loc=kernel.loc,
            hint="drop the --param or the --symbolic"), source)
    try:
        defaults = kernel.param_values({**{n: 0 for n in symbolic if kernel.params[n].default
                                           is None}, **params})
    except ModelError as err:
        return error_verdict(kernel.name, err, source)
    fixed = {n: v for n, v in defaults.items() if n not in symbolic}
    try:    # fixed values outside k.assume would make any proof vacuous
        check_assumptions(kernel, fixed)
    except ModelError as err:
        return error_verdict(kernel.name, err, source)
    # a parameter read only as `P // D` is proved as its quotient (quotients.py)
    rewritten, quotients = quotient_rewrite(kernel, symbolic, fixed)
    if quotients:
        names = {q.param: q.name for q in quotients}
        inner = replace(settings, symbolic=tuple(names.get(n, n) for n in requested))
        return translate(prove_kernel(rewritten, params, options, source, inner, barriers),
                         quotients)
    # No parameter becomes symbolic unless the user asked: a persistent loop's tile count that
    # tiles.py could prove for every value stays fixed, and the verdict says how to ask.
    hints = [f"`{t}` is fixed at {fixed[t]} (not declared symbolic); the kernel's own waits "
             f"separate its tiles, so `--symbolic {t}` would prove every tile count"
             for t in promotable(without_memory(kernel), symbolic, fixed, given=list(params))] \
        if not requested else []
    if hints:
        kernel = kernel.replace(notes=tuple(kernel.notes) + tuple(hints))
    if not symbolic:
        found = check_kernel(kernel, params, options, source)
        found.notes.append("no symbolic parameters: checked for the given values only")
        return found
    # Rules that need no parameters.
    findings = [f for f in static_findings(kernel) if f.code not in options.ignored()]
    if any(f.code != "BP190" for f in findings):
        found = check_kernel(kernel, defaults, options, source)
        found.engine = "symbolic"
        found.notes.append("found statically: it holds for every parameter value")
        return found
    if findings:
        return verdict("unknown", coverage="the kernel uses synchronization the model does not "
                       "cover (BP190): nothing can be proved", params=fixed)
    if {c for c in options.ignored() - RACE_CODES if "symbolic" in RULES[c].decided_by}:
        return verdict("unknown", coverage="--ignore/--select change which rules count; the "
                       "symbolic engine proves all of them or nothing", params=fixed)
    if not points(kernel, symbolic, fixed, 8, limit=1):
        return verdict("unknown", params=fixed, coverage=(
            f"no values of {', '.join(symbolic)} in 0..8 satisfy the assumptions "
            f"({_conditions_text(kernel, symbolic)}): a proof over a range that may be empty "
            "would be vacuous, so none is claimed"),
            notes=["check k.assume(...) and the --param values against each other"])
    # The Z3 encoding has no memory effects: with them, a proof covers the barrier rules only.
    races_open = has_memory_effects(kernel) and not RACE_CODES <= options.ignored()
    timeout = options.limits.timeout or 300.0
    # one budget for the whole run: every phase below draws from it (budget.py)
    budget = Budget(timeout, progress=options.progress)

    def check_case(case: Kernel, values) -> tuple[bool, str]:
        # a case or tile with nothing symbolic left: the explorer, within the run's deadline
        budget.enter(f"explorer on the case {points_text([values], list(values))}")
        limits = replace(options.limits, timeout=max(1.0, budget.wall_left()))
        found = check_kernel(case, values, Options(limits, options.reduction))
        charge_work(found.states * UNITS_PER_EXPLORED_STATE)
        return found.verdict == "verified", f"{found.label} ({found.coverage})"

    if races_open and settings.search_first:
        # The barrier proof below has no memory effects, so a kernel whose barriers are right
        # and whose buffers race (a slot reloaded before the MMA reading it completed) would
        # pay a full barrier proof before its search: a short search for breaking values
        # first, at the same points in the same order as the one after the proofs (the
        # violation it finds is the one that search would find first).
        budget.enter("short search for breaking values")
        short = int(timeout * STATES_PER_SECOND / 60)
        found, searched = smallest_violation(kernel, symbolic, fixed, options, source,
                                             states=short)
        if found is not None:
            add_declared_finding(found, kernel, symbolic, fixed, options, source, short)
            return _refuted(found, symbolic, start, f"{searched}, before any proof")
    try:
        # barriers the kernel initialises itself: proved as initialised when a static check
        # shows every init published to every user before any use (init_prefix.py)
        published, init_note = publish_inits(kernel, symbolic, fixed)
    except Unsupported as err:
        published, init_note = None, None
        proof = Proof("unknown", time.perf_counter() - start,
                      f"outside the supported fragment: {err}")
    if published is not None:
        # a case or a tile gets its share `t` of the budget, within what the run has left
        # BP146 is an error condition of the class systems unless ignored (peer_exit.py)
        encoding = PEER_EXIT_ENCODED.set("BP146" not in options.ignored())
        try:
            proof = prove_by_cases(without_memory(published), symbolic, fixed, timeout,
                                   lambda k, s, f, t: prove_tiles(
                                       k, s, f, t, lambda k, s, f, t: barriers.prove(
                                           k, s, f, budget=Budget(t, parent=budget)),
                                       check_case), check_case)
        finally:
            PEER_EXIT_ENCODED.reset(encoding)
    conditions = _conditions_text(kernel, symbolic)
    races = None
    if proof.status == "proved" and races_open:
        # the races get what the barrier proof left of the budget
        budget.enter("race proof")
        # a drained pipeline cut into laps (laps.py) is cut alike for its races; otherwise split
        # on a top-level branch over a parameter as the barrier proof is (cases.py: `k_steps ==
        # 1` by the explorer, races and all; the rest with `k_steps >= 2` assumed), and on the
        # residues of a strided ring (stride_split.py: its buffer's slots numbered as its
        # barriers', number_slots.py, so each slot is judged by its own slot's class)
        cut = lap_cases(published, symbolic, fixed)
        if cut is not None:
            races = prove_laps(*cut, fixed, timeout, lambda k, s, f, t: races_of_lap_case(
                k, s, f, budget, barriers), check_case)
        else:
            races = prove_by_cases(published, symbolic, fixed, timeout,
                                   lambda k, s, f, _: races_by_tile(k, s, f, budget, barriers,
                                                                     check_case),
                                   check_case)
    open_exit = None
    if proof.status == "proved" and "BP105" not in options.ignored() and \
            (races is None or races.status == "proved"):
        # the barrier proof has no memory effects: a store left running at exit is proved here
        open_exit = exit_open(published, symbolic, fixed)
        if open_exit is not None:
            races = Proof("unknown", time.perf_counter() - start, open_exit)
    what, codes, undo = ("races", " (BP200/BP201)", "--ignore BP200,BP201") \
        if open_exit is None else ("asynchronous accesses at exit", " (BP105)", "--ignore BP105")
    # the explorer's searches: what the proofs left, at least a quarter of --timeout's
    # states for breaking values (a protocol whose proof spent the budget is still searched)
    search_states = budget.states_left(floor=max(1000, int(timeout * STATES_PER_SECOND / 4)))
    if races is not None and races.status != "proved":
        budget.enter("search for breaking values")
        found, searched = smallest_violation(kernel, symbolic, fixed, options, source,
                                             states=search_states)
        if found is not None:
            found.engine = "symbolic"
            found.seconds = time.perf_counter() - start
            shown = ", ".join(f"{n}={found.params[n]}" for n in symbolic)
            found.notes.append(f"smallest breaking values found: {shown} (bounded search: "
                               f"{searched}; the barrier protocol itself is proved)")
            found.notes.append(f"why {what} are not proved: {races.reason}")
            add_declared_finding(found, kernel, symbolic, fixed, options, source,
                                 search_states)
            return found
        return verdict("unknown", params=fixed,
                       coverage=f"barrier rules (deadlock, BP1xx) proved for {conditions}; "
                       f"{what}{codes} not proved ({races.reason}); the explorer found "
                       f"none in {searched}",
                       notes=[f"check {what} for given values with `barrierproof check`, or "
                              f"{undo} to prove the barrier rules alone"])
    if proof.status == "proved":
        # The rules the class systems do not encode, and the explorer's word at the smallest
        # points: a proof is never stronger than a search.
        # a cluster barrier used in arrive-wait pairs is a ClusterBarrier of the proof, and
        # BP145 holds by the pairing itself (cluster_sync.py)
        paired = uses_cluster_barrier(kernel) and alternates(kernel) is None
        encoded = frozenset(a for c in proof.classes if c.status == "proved" for a in c.peer_exit)
        gap = peer_lifetime_gap(lower_cluster_sync(kernel) if paired else kernel, encoded)
        left_open = undecided(kernel, "symbolic", options.ignored(),
                              also_decided=(() if gap else ("BP146",))
                              + (("BP145",) if paired else ()))
        budget.enter("explorer cross-check of the proof")
        found, net = explorer_net(kernel, symbolic, fixed, options, source, states=max(
            20_000, min(int(timeout * STATES_PER_SECOND / 4), budget.states_left())))
        if found is not None:
            found.engine = "symbolic"
            found.seconds = time.perf_counter() - start
            shown = ", ".join(f"{n}={found.params[n]}" for n in symbolic)
            code = found.codes[0] if found.codes else "?"
            why = ("a rule the symbolic engine does not decide" if code in left_open else
                   "the class systems' invariants did not exclude it: a gap in the prover")
            found.notes.append(f"the explorer finds {code} at {shown}; it is {why}, so the "
                               "barrier proof does not stand")
            return found
        if left_open:
            notes = [f"{c}: {gap}" for c in sorted(left_open) if c == "BP146" and gap]
            notes.append("check the open rules for given values with `barrierproof check`, or "
                         f"--ignore {','.join(sorted(left_open))} to accept them unproved")
            return verdict("unknown", params=fixed, notes=notes,
                           coverage=f"proved for {conditions} except "
                           f"{describe(left_open, 'symbolic')}: not decided by the symbolic "
                           f"engine; the explorer found no violation {net}")
        notes = [f"cross-checked by the explorer with every rule: no violation {net}"]
        if paired:
            notes.append("BP145 (cluster-barrier-order): every cluster_arrive is directly "
                         "followed by a cluster_wait, so every thread alternates them; the "
                         "cluster barrier is proved as a ClusterBarrier of one arrival per "
                         "thread (checker/symbolic/cluster_sync.py)")
        if "BP146" in in_play(kernel) and "BP146" not in options.ignored():
            notes.append(bp146_note(lower_cluster_sync(kernel) if paired else kernel, encoded))
        side = list(dict.fromkeys(proof.side_conditions + (races.side_conditions if races
                                                           else [])))
        if side:
            notes.append("also assumed (the model is undefined otherwise): " + "; ".join(side))
        notes += [c if c.startswith(("per tile", "per-tile operations", "nested loops", "renamed")) else f"proved by cases: {c}"
                  for c in proof.cases]
        if races is not None:       # rewrites the race proof rests on (races_nested.py)
            notes += [f"races: {c}" for c in races.cases]
        if init_note:
            notes.append(init_note)
        if proof.tau:
            notes.append(f"static order tau: {proof.tau}")
        classes = proof.classes + (races.classes if races else [])
        facts = sum(c.invariant_size for c in classes)
        what = _classes(proof.classes, "barrier")
        if races is not None:
            what += f", race-free (BP200/BP201): {_classes(races.classes, 'memory')}"
        how = (f"inductive invariants of {facts} facts checked by Z3" if facts else
               "every obligation checked by Z3, no invariant needed")
        return verdict("proved", params=fixed, notes=notes,
                       coverage=f"proved for {conditions}: {what}, {how}")
    budget.enter("search for breaking values")
    found, searched = smallest_violation(kernel, symbolic, fixed, options, source,
                                         states=search_states)
    if found is not None:
        add_declared_finding(found, kernel, symbolic, fixed, options, source, search_states)
        _refuted(found, symbolic, start, searched)
        if proof.reason:
            found.notes.append(f"why there is no proof: {proof.reason}")
        return found
    notes = []
    free = [n for n in symbolic
            if not any(n in free_vars(a) for a in kernel.assumptions)]
    if free:
        notes.append(f"no k.assume(...) constrains {', '.join(free)}, so the proof must cover "
                     f"every integer value, 0 and negative ones included (a loop of a negative "
                     f"count runs no iteration); if the protocol is meant "
                     f"for a range only, state it, e.g. k.assume({free[0]} >= 1)")
    return verdict("unknown", params=fixed, notes=notes,
                   coverage=f"not proved for {conditions}: {proof.reason}; no violation in "
                   f"{searched}")


def _classes(classes, what: str) -> str:
    """`2 barrier class(es) (ring of stages 1.2s, ...)`, or `no barrier class` where the proof
    needed none (no barrier, or every case judged without an invariant)."""
    if not classes:
        return f"no {what} class"
    per = ", ".join(f"{c.name} {c.seconds:.1f}s" for c in classes)
    return f"{len(classes)} {what} class(es) ({per})"
