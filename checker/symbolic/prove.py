"""Proofs for every parameter value (Z3), or the smallest parameter values that break a protocol.

`barrierproof prove PATH[::NAME] [--symbolic NAME ...]` and `check --engine symbolic` call
`prove_kernel`. The verdict is

- `proved`: for EVERY value of the symbolic parameters that satisfies the kernel's assumptions
  (`k.assume(...)`) -- and the side conditions the verdict lists, the hardware ranges without
  which model/semantics.py has no meaning (e.g. `num_arrivals <= 2**20 - 1`) -- no reachable
  state deadlocks (BP100, BP130) or breaks a rule (BP101-BP105, BP121; BP140-BP144 for named
  barriers, hw.py), with the meaning of model/semantics.py; and, for a kernel with memory
  effects, no reachable state races (BP200/BP201, model/memory.py), proved on the same class
  systems with the accesses added (`prove_races`, races.py). Every fact this rests on was
  proved by Z3; an `unknown` or a time-out from Z3 anywhere means no proof.
- `violation`: the smallest breaking parameter values found by a bounded search (points.py:
  points in order of the sum of the symbolic values, then lexicographically), with the explicit
  explorer's shortest counterexample at those values, replayed on the interpreter.
- `unknown`: neither, with the reason (outside the fragment, proof failed, time limit) and how
  far the bounded search went.

How a proof works
-----------------
1. Barrier classes (classes.py, program.py). The barrier instances are split into classes that
   can be analysed separately: all instances of concrete arrays and scalar barriers, and, per
   group of arrays of one symbolic size S (a ring: arrays used with the same offset in a loop,
   like its `full` and `empty`), ONE representative slot s (0 <= s < S, a symbolic constant).
   Each thread's program is projected on a class: only its operations on the class's instances
   remain, in program order, with their guards; everything else is a stutter. A class system
   therefore has every interleaving of class events the real system has (and more): a wait on
   another class may pass at any time there, tcgen05 completions need not wait for their queue,
   a fork or join orders nothing. Rules BP101-BP105, BP121 are about one instance at a time, so
   checking them on every class system checks them on the kernel. The order of a thread's
   tcgen05 queue is lost between classes, except at exit: releases followed by the thread's last
   tcgen05 arrival, which its own class holds to the exit rules, are checked landed there
   (queue_tail.py). (That the projection of every
   reachable state of model/semantics.py is reached by the class system is tested at small
   parameter values: tests/crosscheck.py.)
2. Rings. In a loop over i whose ring operations use `(i + c) % S`, slot s is used at the
   iterations v = i + c that are lattice points v = s + k*S. The class program counts k instead of
   i; a guard `v < x` becomes `k < U(x)`, where U(x) = #{k >= 0 : s + k*S < x} is a fresh
   integer constrained only by facts true for every value (U(x) >= 0; U(x) >= 1 iff x > s;
   monotone; U(y) - U(x) <= m (>= m) when 0 <= x and y - x <= m*S (>= m*S)); `(i + c) // S` is k
   and `(i + c) % S` is s. Everything stays linear, so Z3 decides every check.
3. Identical threads (encode.py). A role whose size is symbolic (N consumers) is a
   counter abstraction: how many of its threads are at each position, with their loop offset
   d = k - kref (kref: the role's slowest thread in that loop) and what each observed of each
   instance it waits on: U (never waited), J0 (seen = phase) or J1 (seen = phase - 1). Falling two
   completions behind is BP101 at that completion, so the three values are exact; a role whose
   threads drift more than B = 2 iterations apart on one class is reported as an error of the
   abstraction (never as a proof). A role of one thread keeps an explicit position.
4. Deadlocks. A deadlock is a state where every unfinished thread is blocked (at a wait, a join
   or before a fork) and nothing is in flight. A static order tau on all events (by groups of
   aligned loops, then iteration, then rank; every thread's events in program order) is chosen,
   and each class system proves, as one more error condition, "a thread is blocked at a wait
   although every event before it in tau has happened and nothing is in flight" unreachable;
   forks precede their awaits and joins follow their warps' events in tau by construction. Then no
   reachable state is a deadlock: in a deadlock take the tau-least pending event e; every event
   before it has happened, so e is a wait (forks, joins and other operations would be enabled)
   whose class system proved it enabled -- a contradiction. The argument needs tau to be a
   total order of the events that respects every thread's program order (the alignment's edges)
   and nothing else, so how tau is found is free. Candidates are first built on the concrete
   runs (guided.py: group by group, the next group one whose events can all run from the state
   the placed ones reached, a loop group's ranks read off a greedy run of its iterations), then
   enumerated blindly (order.py); groups of loops may be joined wherever they stay acyclic (the
   consumers' second tile of an unrolled cluster kernel with the producers' second tile). Each
   candidate is replayed concretely (the tau-ordered run of model/semantics.py must pass every
   wait at a few small parameter values); only the symbolic check counts.
5. Invariants (invariants.py, houdini.py). Each class system is explored explicitly at small
   parameter values; linear equalities (null spaces of the sampled states), bounds and bounds on
   differences, globally and conditioned on where a thread is, are the candidates. Houdini keeps
   the largest subset Z3 proves inductive for ALL parameter values (initiation and consecution
   over symbolic parameters; on a 2-block cluster one transition of each mirror pair, the swap
   of the blocks checked a symmetry by Z3: symmetry.py), and Z3 then proves that no error state satisfies it. Spacer (Z3's
   CHC engine) was tried first on the same transition systems and did not converge even on
   concrete 19-state instances in 60 s, so invariants are guessed from samples and checked by Z3:
   the samples only propose, Z3 decides. Where the largest inductive subset does not exclude
   an error, Spacer gets the class system narrowed by it, with a share of what is left of the
   budget (chc.py); whatever invariant it returns is re-checked by plain Z3 (initiation,
   consecution on every transition, every error condition) before it counts.

6. Rewrites first (the same program): loops of concrete length nested in others are unrolled
   and arrays with one symbolic dimension split into rings (unroll.py); nests `loop t < T:
   loop kk < K: B` whose B reads t, kk only through t*K + kk become one loop over a parameter
   P = T*K, each changed expression proved equal by Z3 (nested.py), or, with operations
   beside the inner loop on barriers of their own, two projections are proved (pertile.py); a
   pipeline's peeled
   prologue is joined with its steady-state loop when Z3 proves they run the same operations
   (fuse.py); a program that is one branch on a parameter (`n == v`) is proved case by case
   (cases.py: the explorer at n = v when nothing else is symbolic, the prover for n != v); a
   persistent loop around the program's loops is proved through one tile when the kernel's
   own waits separate its tiles, for one block or a pair of blocks (tiles.py), when the user
   declared the tile count symbolic (no parameter becomes symbolic unasked: the verdict only
   says when `--symbolic tiles` would apply). A one-thread pipeline whose drain names its last slot
   by the trip count is cut into whole laps of its ring, case by case on the residue, short
   trip counts to the explorer (laps.py).
7. Classes of concrete rings: a 1-D barrier array of concrete size S used only as a ring
   (`(i + c) % S` in loops, constant slots outside) is tried first, with two thirds of the
   budget, as a ring class of constant size S at one representative slot (fewer variables,
   invariants that close far faster), then with all its instances when that does not prove it
   (after the hand-off pairs of point 9). Laps are counted from slot position 0,
   so a ring position i + c that may be negative is outside the fragment.
8. Hardware barriers and semaphores (hw.py, semaphores.py). Named barriers (`bar.sync`,
   `bar.arrive`, `syncthreads`) are rewritten into mbarriers counted in warps, in a class of
   their own: a sync is an arrival, checked to land in the phase the thread has seen open, then
   a barrier_wait; an open phase at exit is legal for them (no BP104). Each semaphore is a class
   with one counter; its waits are waits of the static order (point 4). Lockstep copies whose
   waits decrement become blocks of an explicit cluster axis, as model/grid.py models them.
9. Hand-off pairs (partition.py): concrete arrays indexed only by constants become scalar
   barriers, and barriers joined by a thread's "wait on one, then signal the other" form the
   classes (a two-slot pipeline's `full[c]`, `empty[c]`), tried with a third of the budget
   (plus what the concrete rings left of theirs: a partition skipped or refused under its
   share passes the rest on, budget.py) after the concrete rings and before one class holds
   every concrete barrier. Any partition is sound (point 1).
   Then, on the kernel with ring slots that are numbers written so (number_slots.py: a loop
   that takes a multiple of the ring's size per iteration), each hand-off pair joined with the
   barriers no hand-off joins (order barriers: the ping-pong's math warpgroups take a ring's
   slots in turn only through theirs), with two thirds of what is left: a cover, not a
   partition, as sound (every instance is in some class, every wait proved enabled by one).
   A class that two partitions build alike (points 7 and 9: the same Z3 terms, sampled at the
   same values) is worked on once (ClassWork): its samples and candidates are reused, a
   verdict Z3 gave on it stands, and a Houdini run the first partition's budget cut short
   resumes from the candidates it had not yet dropped (none of the dropped ones is in the
   largest inductive subset, so the result is the same as a run from the start).
10. Signs (signs.py). A parameter ranges over every integer the assumptions allow, negative
   ones too, but is sampled at 0, 1, 2, ...: a class whose invariant, with a template, does not
   exclude an error is proved again under `p >= 0` and under `p <= -1` for each parameter p
   the assumptions do not bound below, each case a system of its own sampled on its side,
   before the richer templates (a loop counter leaves its loop at max(p, 0): `k == p` holds
   on one side only). Parameters never change, so the cases' invariants cover every run.

The fragment (anything else is `unknown` with the reason): concrete cluster shape and warps per
warpgroup; threads per block concrete or cut into roles by comparisons `thread OP expr`; loops not
nested; trip counts, guards, counts and bytes linear in the parameters and the loop variable;
barrier arrays of concrete size, or of one symbolic size S indexed `(i + c) % S` in loops or
`c % S` outside; loops of different roles that step through one ring at one stride (strides.py
names two that do not, when no order is found); parities of `wait_parity` linear in `(i + c) // S` (xor allowed there); a plain
tcgen05_mma followed, unconditionally, by a tcgen05 arrival of its thread (later in the same
loop iteration, or after the loop); named barriers with concrete ids and counts, one count per
id and at most one aligned `bar.sync` instruction per id, none reached from a branch on the
lane; semaphores signalled and waited on with `semaphore_signal` / `semaphore_wait` (not
`semaphore_signal_parallel`), decrementing waits under lockstep copies only in a kernel without
cluster barriers or remote operations; the cluster barrier (`cluster_arrive`/`cluster_wait`)
only in arrive-wait pairs (`cluster_sync()`), outside warp regions, in a cluster longer than 1
along one axis at most (cluster_sync.py: then a ClusterBarrier of one arrival per thread, and
BP145 holds by the pairing). Non-blocking tests are outside. Before the fragment is built, loops of concrete trip count
nested in others are unrolled and a loop of c * X iterations is strip-mined into X iterations
of c (unroll.py; c the product of the trip's concrete factors, as in `2 * tiles * k_tiles`):
the same program, aligned with the loops that run X times. A
`wait_parity(phase=n)` (the thread's own phase count) is held to the hardware's rule on phase n
(encode.py: a wrong phase on return, phase-ahead while waiting), with n linear like a parity and
never mixed with observed-parity waits on one barrier in one thread. A bare
`wait_parity(bar, L % 2)` on a barrier some wait of which skips phases in sampled runs is held
to `phase=L + 2c` when its sampled returns agree on c (phases.py), else it keeps the rule of
observed parity. Barriers the kernel
initialises itself (`explicit_init=True`) only in the CUTLASS shape that init_prefix.py checks
statically (one thread inits every instance once and fences, then one top-level syncthreads()
before any use, one block): the rest is proved on barriers that start initialised. Races: a
thread's load or store; a TMA copy's or MMA's memory while in flight; an access its thread
waits for itself (TMA store, WGMMA, tcgen05.st) retired by the next instruction, or, in a ring
loop, before the thread's next event on its slot; cp.async copies, TMA stores, WGMMAs and
tcgen05.st on buffers of their thread alone, retired along its program before an overlapping
access (own_copies.py); a tcgen05 MMA
that arrives on no barrier of its cells' class, live until the next tcgen05 arrival of its
thread on that class lands (its queue completes in order), when that arrival follows it, past
only other such MMAs, on every way. Race proofs try concrete rings at one representative slot,
then the single concrete class, then the hand-off classes.

This module is the method's outline and its orchestration (partitions tried in turn, budgets,
the per-class loop over templates and sign cases, the verdict's text); every step it calls is a
module of its own, so what is left here is the order in which they run, kept in one place.
`--timeout` is one budget for the whole run (budget.py): each phase enters its name there (what
progress shows, and what an `unknown` for a spent budget names) and draws from what is left.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import z3
from typing import Mapping, Sequence

from ...model.ir import Kernel, ModelError
from ...model.semantics import compile_systems
from ..check import Options
from ..verdict import Verdict
from . import engine, races_proof
from .encode import Encoder
from .fragment import Fragment
from .fuse import fuse_peeled_loops
from .lowering import lowered
from .nested import PerTileOps, flatten_nested
from .opaque_counts import opaque_trip_counts
from .number_slots import number_slots
from .pertile import prove_per_tile
from .positions import by_position, split_positions
from .guided import guided_candidates
from .partition import split_constant_arrays
from .phases import infer_phases
from .signs import sign_cases
from .queue_tail import drain_cases
from .stride_split import stride_cases, stride_mismatch
from .engine import interrupt_solver  # noqa: F401  (checker/engine_registry.py reads it here)
from .renamed import Proved, carried_over, renamed_note
from .work import charge as charge_work, tick
from .points import beyond, points, smallest_points, tau_points  # noqa: F401
from .chc import prove_class
from .houdini import InvariantResult, houdini
from .invariants import Candidate, check_construction, guess, sample
from .order import TauRun, TauSearch, tau_static_ok
from .proofs import BarrierProver, ClassProof, Proof  # noqa: F401  (re-exported)
from .budget import (Budget, BudgetSpent, STATES_PER_SECOND, UNITS_PER_EXPLORED_STATE,  # noqa: F401
                     FACT_CELLS_PER_UNIT, UNITS_PER_FACT_ROW,
                     UNITS_PER_REPLAYED_EVENT,
                     Z3_UNITS_PER_SECOND, cpu_seconds, own_context, units_spent, z3_limits,
                     z3_work)
from .terms import Unsupported


# ----------------------------------------------------------------------------------------------
# The proof
# ----------------------------------------------------------------------------------------------

@own_context()     # the same course and units after any other proof (budget.py)
def prove(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
          timeout: float = 240.0, budget: Budget | None = None) -> Proof:
    """Prove `kernel` deadlock-free and rule-clean for every value of `symbolic` satisfying the
    assumptions (the other parameters at `fixed`), within the work `timeout` buys, or within
    `budget` (the run's, or a share of it: budget.py)."""
    start = time.perf_counter()
    budget = budget or Budget(timeout)
    with z3_limits(budget):     # every query of the proof within what is left (work.py)
        parts = split_positions(kernel, symbolic, fixed)    # positions with nests of their own
        if parts is not None:
            return by_position(parts, budget, lambda k, names, share: _prove(
                k, names, fixed, share, time.perf_counter()))
        return _prove(kernel, symbolic, fixed, budget, start)


def _prove(kernel: Kernel, symbolic, fixed, budget: Budget, start: float) -> Proof:
    given = (kernel, list(symbolic))       # as written: what the stride rewrite would read
    try:    # ring slots and phases the long way (Triton's `((i + 2) % 3 + 1) % 3`) canonical
        kernel, ring_notes = lowered(kernel, symbolic, fixed)
    except Unsupported as err:
        return Proof("unknown", time.perf_counter() - start,
                     f"outside the supported fragment: {err}")
    try:    # tiles x K-steps nests read through the running position: one loop (nested.py)
        flat = flatten_nested(kernel, symbolic, fixed)
    except PerTileOps as err:   # per-tile operations: two projections (pertile.py)
        return prove_per_tile(kernel, symbolic, fixed, budget, start, err, prove)
    except Unsupported as err:
        return Proof("unknown", time.perf_counter() - start,
                     f"outside the supported fragment: {err}")
    if flat is not None:
        kernel, symbolic = flat.kernel, flat.symbolic
    # a schedule's non-linear tile count, read only as a trip count: a parameter of its own
    kernel, symbolic, opaque_notes = opaque_trip_counts(kernel, symbolic, fixed)
    kernel, _ = fuse_peeled_loops(kernel, symbolic, fixed)
    # bare parity waits that skip phases: the phase they return after, stated (phases.py)
    budget.enter("inferring the phases of bare parity waits")
    kernel, parity_notes = infer_phases(kernel, _sample_points(kernel, symbolic, fixed))
    work = ClassWork()          # a class built alike by two partitions is proved once
    # Concrete arrays used as rings first, at one representative slot (a smaller system whose
    # invariants close far faster): with the other concrete barriers in halves (partition.py
    # `role_components`; skipped where they are one), a ring at numbered slots (strip-mined to
    # whole laps: stride_split.py) split into its slots' hand-off pairs, with three quarters of
    # the budget (a half renamed is not asked again: renamed.py), then in one class with two
    # thirds of what is left; then hand-off pairs of
    # concrete barriers as classes of their own (partition.py) with a third; then every
    # concrete barrier as it is, with what is left. Any partition is sound; the order only decides
    # which proof is found first. Every share is drawn from the one budget of the run, and
    # what a partition leaves of its share (skipped, refused) is added to the next one's.
    tries = [("halves, concrete rings at one slot", 3 / 4, lambda part: _prove_fragment(
                 split_constant_arrays(kernel, fixed, looped=True), symbolic, fixed, part,
                 start, concrete_rings=True, handoffs=True, halves=True, work=work)),
             ("concrete rings at one slot", 2 / 3, lambda part: _prove_fragment(
                 kernel, symbolic, fixed, part, start, concrete_rings=True,
                 work=work)),
             ("hand-off pairs", 1 / 3, lambda part: _prove_fragment(
                 split_constant_arrays(kernel, fixed), symbolic, fixed, part,
                 start, concrete_rings=False, handoffs=True, work=work)),
             ("hand-off pairs with their order barriers", 2 / 3, lambda part: _prove_fragment(
                 split_constant_arrays(number_slots(kernel, symbolic, fixed), fixed, dims=8),
                 symbolic, fixed, part, start, concrete_rings=False,
                 handoffs=True, cover=True, work=work)),
             ("every concrete barrier", None, lambda part: _prove_fragment(
                 kernel, symbolic, fixed, part, start, concrete_rings=False, work=work)),
             ("named barriers joined", None, lambda part: _prove_fragment(
                 kernel, symbolic, fixed, part, start, concrete_rings=False, join_named=True,
                 work=work))]
    last = None
    carried = 0
    for name, fraction, attempt in tries:
        budget.enter(f"partition: {name}")
        part = budget if fraction is None else budget.share(fraction, carried)
        result = attempt(part)
        carried = 0 if fraction is None else part.unused()
        if result is None:
            continue
        last = result
        if result.status == "proved" or budget.exhausted():
            break
    if last is not None and last.status != "proved" and budget.exhausted() and \
            "--timeout" not in last.reason and " net " not in last.reason:
        # the last partition failed on its own share; the run's budget is spent too
        last.reason = f"{last.reason}; {budget.spent_text()}"
    if last is not None and last.status != "proved" and "stride_split" not in last.reason:
        # a ring stepped at a stride beside one stepped slot by slot: why the rewrite that
        # makes them alike (and the classes of rings, of numbered slots) did not apply
        _, why = stride_cases(*given, fixed)
        if why:
            last.reason = f"{last.reason}; {why}"
    if last is not None and last.status != "proved" and parity_notes + ring_notes:
        # one ring index stands for its kind: a strided ring names every op of every loop
        shown = ring_notes[:2] + ([f"{len(ring_notes) - 2} more ring indices alike"]
                                  if len(ring_notes) > 2 else [])
        last.reason = "; ".join([last.reason] + parity_notes + shown)
    if last is not None and last.status == "proved":
        last.cases = last.cases + [renamed_note(c.name, c.renamed)
                                   for c in last.classes if c.renamed]
    if last is not None and flat is not None:
        if last.status == "proved":
            last.cases = last.cases + [flat.note]
        else:
            last.reason = f"{last.reason} (after {flat.note.replace('proved for', 'to prove for')})"
    if last is not None and opaque_notes:
        if last.status == "proved":
            last.cases = last.cases + opaque_notes
        else:
            last.reason = f"{last.reason} (after: {'; '.join(opaque_notes)})"
    return last


def _sample_points(kernel: Kernel, symbolic, fixed) -> list[dict[str, int]]:
    """Small parameter points at which the concrete runs propose what bare parity waits return
    after (phases.py): the points candidate orders are replayed on."""
    return tau_points(kernel, symbolic, fixed, None)[:4]


def _prove_fragment(kernel: Kernel, symbolic, fixed, budget: Budget, start: float,
                    concrete_rings: bool, handoffs: bool = False,
                    work: ClassWork | None = None, join_named: bool = False,
                    cover: bool = False, halves: bool = False) -> Proof | None:
    """The proof on one partition into classes; None when `concrete_rings`, `handoffs` or
    `join_named` changes nothing."""

    def spent() -> float:
        return time.perf_counter() - start

    try:
        frag = _partition(kernel, symbolic, fixed, concrete_rings, handoffs, join_named,
                          cover, halves)
        if frag is None:
            return None
        roles = frag.roles
        search = TauSearch(frag)
    except Unsupported as err:
        return Proof("unknown", spent(), f"outside the supported fragment: {err}")
    side = [text for _, text in frag.side_conditions]
    # The order tau: candidates checked on the tau-ordered run of model/semantics.py.
    check_points = tau_points(kernel, symbolic, fixed, frag)
    runs = []
    try:
        for values in check_points:
            for system in compile_systems(kernel, values, races=False):
                runs.append(TauRun(frag, system, values))
    except (Unsupported, ModelError) as err:
        return Proof("unknown", spent(), f"cannot replay candidate orders: {err}")
    chosen = None
    why = "no candidate"
    tried = 0
    budget.enter("static order search")
    # a replay's cost, counted: the events of every run
    replay_units = UNITS_PER_REPLAYED_EVENT * sum(len(rows) for run in runs
                                                  for rows in run.annotations)
    # orders built on the runs themselves first (guided.py), then the blind enumeration
    for tau in itertools.chain(guided_candidates(search, runs), search.candidates()):
        if not tau_static_ok(frag, search, tau):
            continue
        search.apply(tau)
        tried += 1
        why = next((r for r in (run.check(search) for run in runs) if r), None)
        charge_work(replay_units)       # counted work (budget.py)
        if why is None:
            chosen = tau
            break
        if tried >= budget.orders:      # counted, not timed: the same cut on every machine
            break
        if budget.exhausted():
            return Proof("unknown", spent(), f"{budget.spent_text()} after {tried} static "
                         "event order(s)", roles=[r.name for r in roles])
    if chosen is None:
        strided = stride_mismatch(kernel, fixed)
        return Proof("failed", spent(), f"none of the {tried} static event order(s) tried "
                     f"lets every wait pass in order at small parameter values, so this proof "
                     f"method does not apply (the last one: {why}; that is the order's "
                     "failure, not a deadlock of the protocol)"
                     + (f"; {strided}" if strided else ""), roles=[r.name for r in roles])
    tau_text = _describe_tau(frag, search, chosen)
    try:
        systems = frag.build_systems()
    except Unsupported as err:
        return Proof("unknown", spent(), f"outside the supported fragment: {err}")
    side = [text for _, text in frag.side_conditions]
    proofs: list[ClassProof] = []
    with z3_limits(budget):
        failed = _prove_systems(frag, systems, kernel, symbolic, fixed, budget, proofs, work)
    if failed is not None:
        status, reason = failed
        return Proof(status, spent(), reason, proofs, side, tau=tau_text)
    return Proof("proved", spent(), "", proofs, side, [r.name for r in roles], tau_text)


def _partition(kernel: Kernel, symbolic, fixed, concrete_rings: bool,
               handoffs: bool, join_named: bool = False, cover: bool = False,
               halves: bool = False) -> Fragment | None:
    """The fragment with its roles and classes on one partition (with `cover`, hand-off pairs
    joined with their order barriers: classes.py; with `halves`, hand-off pairs joined by the
    roles that use only some of them: partition.py); None when `concrete_rings`, `handoffs`,
    `join_named`, `cover` or `halves` changes nothing."""
    frag = Fragment(kernel, symbolic, fixed, concrete_rings=concrete_rings)
    frag.handoff_classes = handoffs
    frag.role_classes = halves
    frag.handoff_cover = cover
    frag.join_named = join_named
    frag.build_roles()
    classes = frag.build_classes()
    if handoffs and not frag.handoff_split or join_named and not frag.joined_named:
        return None
    if concrete_rings and not any(
            c.ring is not None and z3.is_int_value(z3.simplify(c.ring)) for c in classes):
        return None
    return frag


class ClassWork:
    """What was computed on a class system, shared by the partitions one proof tries (the
    hand-off pairs, then the classes of point 9; one representative slot, then all instances):
    a class two partitions build alike -- the same Z3 terms for its variables, initial states,
    transitions, construction facts and error conditions, sampled at the same valuations -- has
    the same samples, the same candidates and the same largest inductive subset, so a verdict
    Z3 gave on it (proved, or an invariant that does not exclude an error) holds for it
    again. Z3 hash-conses terms, so equal terms have equal ids; the terms are kept alive here
    so that no id is reused by another term."""

    def __init__(self):
        self.entries: dict[tuple, dict] = {}
        self.keep: list = []

    def entry(self, enc: Encoder, vals, more) -> dict:
        terms = [enc.init_body, *enc.init_head, *enc.sane, *enc.vars,
                 *(c for _, c in enc.bad)]
        for _, pre, nxt in enc.steps:
            terms.append(pre)
            terms.extend(nxt)
        self.keep.append(terms)
        key = (tuple(t.get_id() for t in terms), tuple(label for label, _ in enc.bad),
               tuple(label for label, _, _ in enc.steps), tuple(enc.layout.names),
               tuple(map(str, enc.system.frozen)),
               tuple(str(code.role.size) for code in enc.layout.codes if not code.role.single),
               tuple(map(tuple, vals)), tuple(map(tuple, more)))
        return self.entries.setdefault(key, {})


def _prove_systems(frag, systems, kernel, symbolic, fixed, budget: Budget,
                   proofs: list[ClassProof], work: ClassWork | None = None
                   ) -> tuple[str, str] | None:
    """Houdini on every class system; None when all are proved, else (status, reason)."""
    mine = points(kernel, symbolic, fixed, 3)
    check = points(kernel, symbolic, fixed, 7, limit=60)
    far = beyond(kernel, symbolic, fixed, 7)
    proved: list[Proved] = []      # a class that is one of these renamed is not asked again
    for cls, system, builder in systems:
        if not system.roles:
            continue
        try:
            failed = _prove_class(frag, cls, system, kernel, symbolic, fixed, budget, proofs,
                                  work, mine, check, far, proved)
        except BudgetSpent as spent:
            return "unknown", f"{cls.name}: {spent}"
        if failed is not None:
            return failed
    return None


def _prove_class(frag, cls, system, kernel, symbolic, fixed, budget: Budget,
                 proofs: list[ClassProof], work: ClassWork | None, mine, check, far=(),
                 proved: list[Proved] | None = None) -> tuple[str, str] | None:
    """Houdini on one class system (with sign cases, then Spacer), or the invariant of a
    class in `proved` that it is renamed (renamed.py); None when proved."""
    t0 = time.perf_counter()
    budget.enter(f"encoding class {cls.name}")
    enc = Encoder(system).build()
    budget.enter(f"construction check of class {cls.name}")
    bad = check_construction(enc, budget.query_timeout())
    if bad is not None:
        if budget.exhausted():
            return "unknown", f"{cls.name}: {budget.spent_text()}"
        return "unknown", f"internal: construction facts of {cls.name} fail at `{bad}`"
    if proved:
        budget.enter(f"renaming a proved class onto class {cls.name}")
        carried = carried_over(enc, proved)
        if carried is not None:
            facts, source = carried
            proofs.append(ClassProof(cls.name, "proved", time.perf_counter() - t0,
                                     invariant_size=len(facts), renamed=source,
                                     peer_exit=tuple(sorted(
                                         {i.alloc for i in system.instances if i.peer_exit}))))
            return None
    vals = [v for p in mine for v in frag.valuations(cls, system, p)]
    more = [v for p in check for v in frag.valuations(cls, system, p)]
    done = (work or ClassWork()).entry(enc, vals, more)
    # Sampling stops at a number of states, never at a time: the candidates it yields, and
    # so the proof, must not depend on the machine's speed.
    budget.enter(f"sampling class {cls.name}")
    if "small" not in done:
        done["small"] = sample(enc, vals, limit=20000, budget=float("inf"))
    small = done["small"]
    if small.errors:
        label, frozen = next(iter(small.errors.items()))
        values = dict(zip([str(v) for v in system.frozen], frozen))
        proofs.append(ClassProof(cls.name, "failed", time.perf_counter() - t0,
                                 f"{label} at {values}"))
        return "failed", (f"{cls.name}: the abstraction reaches `{label}` at "
                          f"{_params_only(values, symbolic)}")
    if "large" not in done:
        # the valuations the small sample explored to the end are taken as they are
        done["large"] = sample(enc, more, limit=60000, budget=float("inf"), known=small)
    large = done["large"]
    if "far" not in done:
        # states one parameter point past the sampled ones: reachable, so a candidate they
        # break is in no inductive invariant (the same largest inductive subset, without the
        # Houdini rounds that would drop the bounds saying only how far the samples went)
        done["far"] = _past(sample(
            enc, [v for p in far for v in frag.valuations(cls, system, p)],
            limit=FAR_STATES, budget=float("inf")).states, small.states + large.states,
            len(system.frozen))
    result = None
    for tier in range(len(TEMPLATES)):
        result = _invariant(enc, small.states + large.states, budget, done, tier, cls.name,
                            refute=done["far"], mirrored=small.mirrored and large.mirrored)
        if result is None or result.status != "failed":
            break
        # the candidates sampled at parameters >= 0 may fail at negative ones only
        # (signs.py): the class again, case by case on the parameters' signs, with the
        # same templates before richer ones
        split = _prove_by_sign(frag, cls, system, kernel, symbolic, fixed, budget, done,
                               tier)
        if isinstance(split, InvariantResult):
            result = split
            break
        if budget.exhausted():
            result = replace(result, status="unknown", reason=budget.spent_text())
            break
        if split is not None and tier == len(TEMPLATES) - 1:
            result = replace(result, reason=f"{result.reason}; by the sign of the "
                             f"parameters: {split}")
    if result is not None and result.status == "failed" and not budget.exhausted():
        # the samples' candidates do not close: Spacer looks for the missing facts, and
        # plain Z3 re-checks whatever it proposes (chc.py)
        budget.enter(f"Spacer on class {cls.name}")
        result = _strengthen_by_chc(enc, result, budget)
    seconds = time.perf_counter() - t0
    if result is None:
        return "unknown", f"{cls.name}: {budget.spent_text()}"
    proofs.append(ClassProof(cls.name, result.status, seconds, result.reason,
                             len(result.invariant), len(small.states),
                             tuple(sorted({i.alloc for i in system.instances if i.peer_exit}))))
    if result.status != "proved":
        status = "unknown" if result.status == "unknown" else "failed"
        return status, f"{cls.name}: {result.reason}"
    if proved is not None:
        proved.append(Proved(cls.name, enc, result.invariant))
    return None


# Candidate templates, (conditional_pairs, hulls) of `guess`, tried in this order: the richest
# only when the plain ones fail (each attempt costs Houdini rounds; the richest set contains the
# plain one, so its largest inductive subset does too, and a pipeline's ring needs it: JAX's
# Hopper matmul).
TEMPLATES = ((False, False), (True, True))


FAR_STATES = 4000      # states sampled at the point past the others (invariants.sample)
FAR_ROWS = 1000        # of them, those each candidate is evaluated on (a spread)


def _past(far: list, near: list, frozen: int, most: int = FAR_ROWS) -> list:
    """The states of `far` with a state variable (past the `frozen` parameters, all past
    there) outside the range `near` sampled it in (those that break a bound saying how far
    the samples went), at most `most`, spread evenly."""
    if not far or not near:
        return []
    import numpy as np
    a = np.asarray(far, dtype=np.int64)[:, frozen:]
    b = np.asarray(near, dtype=np.int64)[:, frozen:]
    tick(a.size // FACT_CELLS_PER_UNIT)
    out = ((a < b.min(axis=0)) | (a > b.max(axis=0))).any(axis=1)
    rows = [far[i] for i in np.nonzero(out)[0].tolist()]
    step = -(-len(rows) // most) if len(rows) > most else 1
    return rows[::step]


def _invariant(enc: Encoder, states: list, budget: Budget, done: dict, tier: int,
               name: str = "", refute: list = (), mirrored: bool = False):
    """Houdini on a class system from the candidates its samples `states` propose, with the
    templates up to TEMPLATES[tier] in turn until one proves; None when the budget is spent
    first. `done` keeps Z3's verdicts (ClassWork), so a template already tried is not again."""
    result = None
    for pairs, hulls in TEMPLATES[:tier + 1]:
        if (pairs, hulls) in done:          # Z3's verdict on this class, candidates
            result = done[(pairs, hulls)]   # and all, in an earlier partition or tier
            if result.status == "proved":
                break
            continue
        # Houdini stopped undecided on this class in an earlier partition: resumed from
        # the candidates it had not dropped (the same largest inductive subset)
        budget.enter(f"candidate facts of class {name}" + (" (pairs, hulls)" if pairs else ""))
        cands = done.get(("alive", pairs, hulls))
        if not cands:
            cands = guess(enc, states, refute, conditional_pairs=pairs, hulls=hulls,
                          mirrored=mirrored)
            tick(len(cands) * len(refute) * UNITS_PER_FACT_ROW)    # (at most) evaluated
        if budget.z3_left() <= 0:
            break
        budget.enter(f"Houdini on class {name}" + (" (pairs, hulls)" if pairs else ""))
        # Z3's own wall-clock timeout is only the net (a query cannot outlive the run).
        with z3_limits(budget):
            result = houdini(enc, cands, timeout=budget.query_timeout(),
                             query_timeout=budget.query_timeout())
        if result.status in ("proved", "failed"):
            done[(pairs, hulls)] = result
        elif result.alive:
            done[("alive", pairs, hulls)] = result.alive
        if result.status == "unknown" and budget.exhausted():
            result.reason = budget.spent_text()
        if result.status == "proved" or result.status == "unknown":
            break
    return result


def _strengthen_by_chc(enc: Encoder, houdini_result: InvariantResult, budget: Budget
                       ) -> InvariantResult:
    """Houdini's failed result, or a proved one when Spacer finds an invariant that, with
    Houdini's facts, Z3 checks inductive and safe (chc.py)."""
    facts = [c.formula for c in houdini_result.invariant]
    # a quarter of what is left, so the partitions tried after this one keep theirs
    share = budget.share_of_left(1 / 4)
    with z3_limits(share):
        found = prove_class(enc, facts, timeout=min(budget.query_timeout(), share.query_timeout()))
    if found.status == "proved":
        extra = Candidate(found.invariant, "Spacer's invariant, re-checked by Z3")
        return InvariantResult("proved", houdini_result.seconds + found.seconds,
                               invariant=houdini_result.invariant + [extra])
    return replace(houdini_result, reason=f"{houdini_result.reason}; Spacer on the same "
                   f"system: {found.reason}")


def _prove_by_sign(frag, cls, system, kernel, symbolic, fixed, budget: Budget, done: dict,
                   tier: int):
    """The class system proved case by case on the signs of its parameters (signs.py): a
    proved InvariantResult, None when there are no cases, or why a case is not proved. Its
    `invariant` lists every case's facts, for the count reported only: each case's facts hold
    on its own side, not as one conjunction over every run."""
    # (no sign to split on: the drain's cases, queue_tail.py)
    cases = sign_cases(system, frag.params, symbolic) or drain_cases(system)
    if not cases:
        return None
    start = time.perf_counter()
    invariant, candidates = [], 0
    for case in cases:
        if budget.exhausted():
            return f"{case.text}: {budget.spent_text()}"
        budget.enter(f"sign case {case.text} of class {cls.name}")
        enc = Encoder(case.system).build()
        if check_construction(enc, budget.query_timeout()) is not None:
            if budget.exhausted():
                return f"{case.text}: {budget.spent_text()}"
            return f"{case.text}: construction facts not inductive"
        work = done.setdefault(("sign", case.text), {})
        if "states" not in work:
            mine = points(kernel, symbolic, fixed, 3, negative=case.negative)
            check = points(kernel, symbolic, fixed, 7, limit=60, negative=case.negative)
            small = sample(enc, [v for p in mine for v in frag.valuations(cls, case.system, p)],
                           limit=20000, budget=float("inf"))
            large = sample(enc, [v for p in check
                                 for v in frag.valuations(cls, case.system, p)],
                           limit=60000, budget=float("inf"), known=small)
            if small.errors or large.errors:
                label, _ = next(iter({**large.errors, **small.errors}.items()))
                work["states"] = f"the abstraction reaches `{label}`"
            else:
                work["states"] = small.states + large.states
        if isinstance(work["states"], str):
            return f"{case.text}: {work['states']}"
        result = _invariant(enc, work["states"], budget, work, tier, cls.name)
        if result is None or result.status != "proved":
            return f"{case.text}: {result.reason if result else budget.spent_text()}"
        invariant += result.invariant
        candidates += result.candidates
    return InvariantResult("proved", time.perf_counter() - start,
                           "by the sign of the parameters: " + "; ".join(c.text for c in cases),
                           invariant=invariant, candidates=candidates)


def _params_only(values: Mapping[str, int], symbolic) -> dict:
    return {k: v for k, v in values.items() if k in symbolic}


def _describe_tau(frag, search, tau) -> str:
    parts = []
    nodes = tau.nodes if tau.nodes is not None else search.nodes
    for g, v in enumerate(tau.order):
        node = nodes[v]
        items = []
        for r, i in node.members:
            item = frag.roles[r].items[i]
            if item.kind == "loop":
                shift = tau.shifts.get((r, i))
                shown = "" if shift is None or str(z3.simplify(shift)) == "0" else \
                    f" (key {item.loop.var} + {z3.simplify(shift)})"
                items.append(f"{frag.roles[r].name}:loop {item.loop.var}{shown}")
            elif item.kind == "op":
                items.append(f"{frag.roles[r].name}:{item.op.kind}")
            else:
                items.append(f"{frag.roles[r].name}:{item.kind}")
        parts.append("{" + ", ".join(items) + "}")
    return " < ".join(parts)


# ----------------------------------------------------------------------------------------------
# The race proof and the engine of `prove` (races_proof.py, engine.py), on this barrier proof
# ----------------------------------------------------------------------------------------------

def barrier_prover() -> BarrierProver:
    """This module's barrier proof, for the modules it re-exports; built at each call, so a
    replaced `_partition` or `_prove_systems` (a test's spy) reaches the race proof too."""
    return BarrierProver(prove, _partition, _prove_systems)


def prove_races(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                budget: Budget) -> Proof:
    """Prove `kernel` free of BP200/BP201 races for every value of `symbolic`, beside a barrier
    proof of the same kernel (races_proof.py)."""
    return races_proof.prove_races(kernel, symbolic, fixed, budget, barrier_prover())


def prove_kernel(kernel: Kernel, params: Mapping[str, int] | None = None,
                 options: Options | None = None, source: str | None = None,
                 settings=None) -> Verdict:
    """Prove for every value of the symbolic parameters, or find the smallest breaking ones
    (the `symbolic` engine, checker/engine_registry.py; `settings` is a ProveSettings;
    engine.py)."""
    return engine.prove_kernel(kernel, params, options, source, settings, barrier_prover())
