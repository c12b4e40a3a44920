"""Explicit-state search: every interleaving of threads and asynchronous agents, breadth first
or depth first.

Breadth-first order makes the first violation found a shortest one. States are the flat tuples
of `semantics.System`; the visited set (store.py: tuples, packed bytes or 64-bit fingerprints) is
kept level by level with each state's predecessor index, so a counterexample is rebuilt without
storing paths. Depth first (branch and bound, `order="dfs"`) has a violation in hand early and
then searches for shorter ones; run to the end it reports what breadth first reports
(docs/POR.md, "Search order"), stopped by a limit the shortest it has, saying so.

Reductions (docs/POR.md argues each rule survives them; tests compare with the unreduced search):
symmetry between identical threads and between cluster blocks that map onto each other
(symmetry.py), and partial-order reduction by dynamic persistent sets (por.py). A counterexample
found in the quotient is mapped back to a concrete schedule before it is replayed. Races
(BP200/BP201) are not invariant under a permutation of threads that touch different memory: each
state kept is also race-checked in its images under those permutations (race_permutations). A
block permutation is kept for a kernel with checked memory only when it carries every access,
renamed with the blocks, onto its image's (symmetry.py), so races are invariant under it.

Bare parity waits are judged across schedules (model/parity.py): a side table records, per
dynamic wait, the completions it returns after with the shallowest state showing each
(parity_returns.py); two of them are a violation reported as two concrete schedules.

Suppressed findings (barrierproof/suppress.py) are `tolerate`d places, (code, file, line): a
violation there is not reported, and its state is a dead end, as every violation's state is
(model/violations.py), so the search goes on along every other path and reports any other
violation, of the same code elsewhere or of another code. Not expanding it is the sound choice:
past a broken rule the model follows a run the hardware need not (an arrival beyond the count
is undefined behaviour, a wait past its phase returns for the wrong one), so whatever it found
there could be an artefact of the accepted finding; what lies only beyond it is not searched,
and the verdict says so (a note). Partial-order reduction is off then (a dead end breaks its
persistent sets, which put steps off to later on every path). A race is not invariant under
the thread symmetry, so a state whose only broken rule is a tolerated race is expanded for the
images it stands for that do not race. A bare parity wait whose aliasing is accepted is left
out of the cross-schedule table: its states are ordinary ones and are searched as usual.
tests/test_suppress_places.py compares all of this with a plain walk of every schedule.
"""

from __future__ import annotations

import gc
import time
from typing import Callable

from ...model.parity import aliasing
from ...model.semantics import System
from ...model.steps import UNREDUCED, opcodes_in
from ...model.violations import CODES, Place, Violation, primary, rank, tolerance
from .parity_returns import Conflict, ParityReturns, Trail, search_return
from .compiled import Refused, available, explore_compiled
from .compiled import chosen as chosen_core
from .por import OVERRUNS, depth_unkept, keeps_overruns, leaves_nothing_out, persistent_sets
from .search_result import (ExploreResult, Limits, _concretize, _rss_bytes,  # noqa: F401
                            _states)
from .store import StateStore
from .symmetry import (Symmetry, _local_fields, permute_state, schedule_toward,
                       race_permutations, thread_classes)


# A reduced search's counterexample needs no confirming search when every rule it may report is
# one whose first violation the persistent sets keep at its depth (por.py `depth_unkept`).
DEPTH_KEPT_NOTE = ("shortest without a confirming search: every rule not ignored is one the "
                   "persistent sets meet at its depth in the full graph (docs/POR.md)")
# ... or, where some are not, because those have no violation anywhere (`_absent_unkept`).
ABSENT_NOTE = ("shortest without a confirming search: {rules}, the rules whose depth the "
               "persistent sets may put off, have no violation anywhere (the reduced search "
               "checking them alone met none, run to the end); every other rule not ignored is "
               "one the persistent sets meet at its depth in the full graph (docs/POR.md)")

# States of the graph the persistent sets are tried on before a search (por.py,
# `leaves_nothing_out`): if none of them leaves out an enabled step, the search runs without.
POR_SAMPLE = 1000
# The budgets of states on which a violation found with the persistent sets is shown shortest
# (`settle_or_confirm`): the first, the factor from one round to the next, how many rounds
# before both run to the caller's limits.
SETTLE_BUDGET = 20_000
SETTLE_GROWTH = 4
SETTLE_ROUNDS = 3


def symmetry_classes(system: System) -> list[list[int]]:
    """Groups of interchangeable threads (kept for callers of the thread-only reduction)."""
    return thread_classes(system)


def explore(system: System, limits: Limits | None = None, reduction: bool = True,
            ignore: frozenset[str] = frozenset(),
            progress: Callable[[dict], None] | None = None,
            block_symmetry: bool = True, store_mode: str = "tuple",
            partial_order: bool = True, order: str = "bfs",
            tolerate: frozenset[Place] = frozenset(), core: str | None = None,
            workers: int = 1, confirm: bool = True,
            absent: frozenset[str] = frozenset()) -> ExploreResult:
    """Breadth-first search for the shortest violation; `verified` when the space is exhausted.

    `order="dfs"` walks the same reduced graph depth first (the reductions depend on the state
    only, so it reaches the same states): a first violation comes early, however deep, and
    the search then goes on for shorter ones (branch and bound, `depth_first`). Run to the end
    it reports what the breadth-first search reports; stopped by a limit, the shortest found
    so far, with the reason it may not be shortest.

    A raw breadth-first search (no reduction, or no partial-order reduction and a symmetry
    that relates nothing; nothing tolerated) runs on the compiled core when it is built and
    accepts the System (compiled.py; `core`: auto, python or compiled); with `workers` > 1, on
    that many processes (mproc.py), else in one with a note saying why.
    Asked for explicitly (`core="compiled"`), it runs a raw depth-first one too, breadth first:
    run to the end both orders report the same verdict and a shortest counterexample.

    A violation found with partial-order reduction is confirmed shortest (docs/POR.md) unless
    `confirm` is False; `absent`: rules known to have no violation anywhere in the graph (a
    search of them alone ran to the end), which the persistent sets then need not keep.

    >>> from barrierproof.model.samples import lost_arrival
    >>> result = explore(System(lost_arrival.build()))
    >>> result.status, result.violation.code, result.actions
    ('violation', 'BP100', [0])
    """
    limits = limits or Limits()
    start = time.perf_counter()
    # Init visibility (model/init_visibility.py) keeps a bit per agent and is written by hardware
    # barrier waits: neither thread symmetry nor the persistent sets account for it; nor for an
    # opcode whose family declares it outside them (model/steps.py: UNREDUCED).
    reduction = reduction and not getattr(system, "init_insts", ()) and \
        not opcodes_in(system, lambda step: step.touches == UNREDUCED)
    symmetry = Symmetry(system, blocks=block_symmetry) if reduction else None
    # Without partial-order reduction, a symmetry that relates nothing leaves the raw search
    # (the search confirming a shortest counterexample, on a kernel whose threads all differ).
    raw = symmetry is None or (not partial_order and not symmetry.classes and
                               not symmetry.blocks)
    if workers > 1:
        from .mproc import parallel_or_why
        found, why = parallel_or_why(system, limits, ignore, workers, progress, not raw,
                                     tolerate, order, core)
        if found is not None:
            return found
        found = explore(system, limits, reduction, ignore, progress, block_symmetry, store_mode,
                        partial_order, order, tolerate, core)
        found.notes.append(f"searched in one process, not {workers}: {why}")
        return found
    refused = None
    if raw and not tolerate and chosen_core(core) != "python" and \
            (order == "bfs" or chosen_core(core) == "compiled") and available():
        try:
            found = explore_compiled(system, limits, ignore, progress)
            if store_mode == "fingerprint":     # its visited set keeps whole states: no
                found.collision_probability = 0.0   # state can be lost to a collision
            return found
        except Refused as why:      # outside the compiled core: the Python search, the same
            refused = str(why)
    reduce = symmetry.canonicalizer() if symmetry is not None else None
    # From a canonical state, only the mover's class can fall out of order.
    after_step = symmetry.after_step() if symmetry is not None else None
    twins = symmetry.twins() if symmetry is not None else None
    classes = symmetry.classes if symmetry is not None else []
    notes: list[str] = []
    if refused is not None and chosen_core(core) == "compiled":
        notes.append(f"searched by the Python explorer: the compiled core does not state "
                     f"{refused}")
    partial_order_off = None
    if tolerate and reduction and partial_order:
        # The persistent sets put steps off, trusting them to be taken later on every path; a
        # suppressed finding's state is a dead end that breaks that trust (a finding past it
        # on one order of independent steps is lost): off.
        partial_order = False
        partial_order_off = ("a suppressed finding's state is a dead end, which the persistent "
                             "sets do not account for")
    # sets that keep BP101 and BP102 at their depth where they are the only rules left whose
    # shortest violation the sets may put off (por_overrun.py)
    overruns = reduction and partial_order and keeps_overruns(system, ignore | absent)
    local = persistent_sets(system, classes, overruns) if reduction and partial_order else None

    def kept_note() -> str:
        return ABSENT_NOTE.format(rules=", ".join(sorted(absent))) if absent else \
            DEPTH_KEPT_NOTE

    # settle_unkept's search of the rules alone, once run to the end (it does not depend on the
    # budget it was given then)
    settled_alone: list[ExploreResult] = []
    # The search that counts arrivals, breadth first, stopped by a limit of the caller's (not a
    # budget of settle_or_confirm's) before a violation: (the depth it stood at, why it
    # stopped); no counterexample is shorter than that depth (docs/POR.md, "What a search
    # stopped by a limit still shows").
    counted: list = [None]

    def unsettled() -> str:
        """Why the violation in hand may not be shortest where the search that counts arrivals
        stopped, and how short a counterexample can still be."""
        at, why = counted[0]
        return (f"found with partial-order reduction; the search that keeps every rule at its "
                f"depth stopped ({why}), so a shorter one may exist, though none of fewer than "
                f"{at} steps")

    def settle_unkept(cap: int | None) -> tuple[str | None, ExploreResult | None, bool]:
        """Before a confirming search (docs/POR.md, "Rules with no violation anywhere"): the
        rules whose depth the persistent sets may put off, BP101 and BP102 aside, searched
        alone over the reduced graph to the end, in half the time left and at most `cap`
        states. None of them met: a note that the violation in hand is a shortest one, or,
        where BP101 and BP102 are left and the sets can keep them by counting arrivals, that
        search's result. Else (None, None, open): `open` when only `cap` stopped a search."""
        unkept = [r for r in depth_unkept(system, ignore | absent, overruns)
                  if r not in OVERRUNS]
        if not unkept:
            return None, None, False
        if not settled_alone:
            alone = explore(system, Limits(cap, None, time_left(), limits.max_memory_mb),
                            reduction, frozenset(CODES) - frozenset(unkept), progress,
                            block_symmetry, store_mode, order=order, tolerate=tolerate,
                            core=core, confirm=False)
            if alone.status != "verified":
                return None, None, capped(alone, cap)
            settled_alone.append(alone)
        gone = absent | frozenset(unkept)
        if not depth_unkept(system, ignore | gone, overruns):
            return ABSENT_NOTE.format(rules=", ".join(sorted(gone))), None, False
        if overruns or not keeps_overruns(system, ignore | gone):
            return None, None, False
        # Breadth first it gets most of the confirming search's time: that search meets, at
        # each depth, every state this one meets there and more, so where this one stops at a
        # limit of the caller's the confirmation is not run (docs/POR.md).
        again = explore(system, Limits(cap, None, time_left(0.75 if order == "bfs" else 0.5),
                                       limits.max_memory_mb),
                        reduction, ignore, progress, block_symmetry, store_mode, order=order,
                        tolerate=tolerate, core=core, absent=gone)
        settled = again.status == "violation" and not again.reason
        budgeted = not settled and capped(again, cap)
        if again.status == "bounded" and order == "bfs" and not budgeted:
            counted[0] = again.depth, again.reason    # every level above it was finished
        return None, (again if settled else None), budgeted

    def capped(search: ExploreResult, cap: int | None) -> bool:
        """Whether only the budget `cap`, below the caller's state limit, stopped `search`."""
        return search.status == "bounded" and cap != limits.max_states and \
            (search.reason or "").startswith(f"state limit {cap} ")

    def settle_or_confirm(length: int) -> tuple[str | None, ExploreResult | None,
                                                ExploreResult | None]:
        """A violation of `length` steps found with the persistent sets, shown shortest:
        (note, None, None) by `settle_unkept`, (None, result, None) by a search that finds a
        shortest one, or (None, None, stopped) with the confirming search a limit stopped.
        The two take turns on SETTLE_ROUNDS budgets of states, SETTLE_BUDGET first and
        SETTLE_GROWTH times more each round, settle_unkept first in each round, then run as
        before to the caller's limits: a rule met nowhere may take the whole reduced graph to
        show where the confirming search takes a few states, at a cost of at most the budgets
        of both (docs/POR.md). Which one shows it never makes the verdict or the length
        differ: both are exact."""
        budgets = [SETTLE_BUDGET * SETTLE_GROWTH ** n for n in range(SETTLE_ROUNDS)]
        settling = True
        while True:
            cap = limits.max_states
            if budgets and (cap is None or budgets[0] < cap):
                cap = budgets.pop(0)
            if settling:
                note, again, settling = settle_unkept(cap)
                if note is not None or again is not None or counted[0] is not None:
                    return note, again, None
            # A deadlock at this depth shows only when its state is expanded: one level more.
            # Half the time left: the violation in hand is reported within the limit whatever
            # the confirmation does (replays and reports come after it).
            bound = Limits(cap if settling else limits.max_states, length + 1, time_left(),
                           limits.max_memory_mb)
            again = explore(system, bound, reduction, ignore, progress, block_symmetry,
                            store_mode, partial_order=False, tolerate=tolerate, core=core)
            if again.status == "violation":
                return None, again, None
            if not (settling and capped(again, cap)):
                return None, None, again

    def time_left(share: float = 0.5) -> float | None:
        return None if limits.timeout is None else \
            max(limits.timeout - (time.perf_counter() - start), 0.0) * share

    if local is not None:
        # A reduction whose sets leave nothing out costs time and saves no state: off. Decided
        # on a fixed sample of the graph (por.py), so both search orders decide alike.
        watched = leaves_nothing_out(system, local, reduce or (lambda s: s), POR_SAMPLE)
        if watched is not None:
            local = None
            partial_order_off = (f"its persistent sets held every enabled step in the first "
                                 f"{watched:,} states")
    # Thread symmetry, with or without the persistent sets: the compiled core's too.
    if symmetry is not None and (symmetry.classes or local is not None) and \
            not symmetry.blocks and not tolerate and refused is None and \
            chosen_core(core) != "python" and \
            (order == "bfs" or chosen_core(core) == "compiled") and available():
        try:
            found = explore_compiled(system, limits, ignore, progress, symmetry,
                                     partial_order=local is not None, overruns=overruns)
            found.partial_order_off = partial_order_off
            if store_mode == "fingerprint":
                found.collision_probability = 0.0
            if local is None or found.status != "violation" or not confirm:
                return found
            if not depth_unkept(system, ignore | absent, overruns):
                found.notes.append(kept_note())
                return found
            note, again, stopped = settle_or_confirm(found.depth)
            if note is not None:
                found.notes.append(note)
                return found
            if again is not None:
                again.seconds = time.perf_counter() - start
                return again
            if counted[0] is not None:
                found.reason = unsettled()
                return found
            found.reason = (f"found with partial-order reduction; the search without it to "
                            f"depth {found.depth + 1} stopped ({stopped.reason}), so a shorter "
                            "one may exist")
            return found
        except Refused as why:
            refused = str(why)
            if chosen_core(core) == "compiled":
                notes.append(f"searched by the Python explorer: the compiled core does not "
                             f"state {refused}")
    # A step that breaks a rule reports the least code of its orbit (see symmetry.py).
    orbit = symmetry.orbit_code if symmetry is not None and symmetry.blocks else None
    canon = reduce or (lambda s: s)
    perms = race_permutations(system, classes) if reduce is not None else []
    moves = [(perm, [(pa, pb) for a, b in perm.items()
                     for pa, pb in zip(_local_fields(system, a), _local_fields(system, b))])
             for perm in perms]
    # What each bare parity wait returns after, state by state (parity_returns.py); off when
    # BP101 is ignored or the kernel has no bare parity wait.
    tolerated = tolerance(system, tolerate)
    returns = ParityReturns(system, symmetry, tolerated) if "BP101" not in ignore else None
    returns = returns if returns else None
    # violations not reported because their place is tolerated (their states: dead ends)
    accepted: set[tuple] = set()

    def accept(v: Violation, st: tuple | None = None) -> bool:
        """Whether `v` is a tolerated finding: then its state is a dead end, noted when it
        leaves a step unexplored (`st`: the state that shows it; None: a step shows it)."""
        if tolerated is None or not tolerated(v):
            return False
        if st is None or any(system.enabled(st, a) for a in range(system.n_actions)):
            accepted.add((v.code, v.src, v.inst))
        return True

    def violations(st: tuple) -> tuple[list[Violation], dict[int, int] | None]:
        """The rules `st` breaks, or else a race of one of its symmetric images (with the
        permutation that makes it); `[DEAD_END]` when all it breaks is tolerated. A race is
        not invariant under the symmetry: a state whose only broken rules are tolerated races
        stands for images that may not race, so it is expanded (what lies past the accepted
        race may then be reported: more, never less)."""
        bad = kept(system.state_violations(st))
        if bad and tolerated is not None:
            shown = [v for v in bad if not tolerated(v)]
            if shown:
                bad = shown
            elif not moves or not any(v.code in RACES for v in bad):
                for v in bad:
                    accept(v, st)
                return [DEAD_END], None
            else:
                bad = []
        if not bad:
            for perm, pairs in moves:
                image = list(st)
                for pa, pb in pairs:
                    image[pb] = st[pa]
                image = tuple(image)
                if system.memory.racing(system, image):
                    if tolerated is None:
                        race = system.memory.violation(system, image, ignore)
                    else:
                        race = next((v for v in system.memory.violations(system, image)
                                     if v.code not in ignore and not tolerated(v)), None)
                    if race is not None:
                        return [race], perm
        return bad, None

    def kept(violations):
        return [v for v in violations if v.code not in ignore]

    def per_state() -> float:
        return max(_rss_bytes() - rss_start, 0) / max(len(seen), 1)

    def result(status, **kw) -> ExploreResult:
        if accepted:
            shown = ", ".join(f"{c} at {system.location(Violation(c, '', None, i, s))}"
                              for c, s, i in sorted(accepted, key=str))
            note = (f"the search did not go past the suppressed {shown} (a violation's state "
                    "is not expanded): a finding reachable only through it is not looked for")
            if note not in notes:
                notes.append(note)
        return ExploreResult(status, len(seen), transitions, depth,
                             time.perf_counter() - start, reduction=reduction,
                             symmetry_classes=symmetry.describe() if symmetry else [],
                             store=store.mode, bytes_per_state=round(per_state(), 1),
                             collision_probability=store.collision_probability(transitions),
                             notes=list(notes), partial_order_off=partial_order_off, **kw)

    def found(index: int | None, action: int | None, violation: Violation,
              by_step: bool = False, perm: dict[int, int] | None = None) -> ExploreResult:
        """A violation reached from entry `index` of the current level (None: the initial
        state itself) by `action` (None: the state at `index` itself is the violation); `perm`:
        the race is in that symmetric image of the state reached."""
        path = store.path(depth, index) if index is not None else []
        pred = unpack(frontier[index]) if index is not None else None
        return found_on(path, pred, action, violation, by_step, perm)

    def found_on(path: list, pred: tuple | None, action: int | None, violation: Violation,
                 by_step: bool = False, perm: dict[int, int] | None = None,
                 shortest: bool = True) -> ExploreResult:
        """A violation reached along `path` (the keys of the stored states after the initial
        one) to `pred`, then by `action` (see `found`); `shortest`: no shorter one in the
        reduced graph (else the caller says why not)."""
        nonlocal depth
        actions, last = _concretize(system, canon, key, path, pred, action, ignore,
                                    step_code=violation.code if by_step else None,
                                    tolerated=tolerated)
        if last is not None:
            violation = last
        if (perm or violation.code in RACES) and classes and not by_step:
            # a race is judged on the stored representative (or its image under `perm`) and is
            # not invariant under the symmetry: the concrete schedule is renamed to end there
            reached = (pred if pred is not None else init) if action is None else \
                canon(system.step(pred, action)[0])
            target = permute_state(system, reached, perm) if perm else reached
            actions = schedule_toward(system, classes, actions, target)
        depth = len(actions)
        return confirmed(actions, violation, shortest)

    def found_alias(conflict: Conflict, shortest: bool = True) -> ExploreResult:
        """Two concrete schedules from a conflict of the parity table: each to a state that
        shows one of the two completions, then the wait's step, the second renamed onto the
        agent of the first by a symmetry. The first is the deeper: the rank of the conflict."""
        nonlocal depth
        ends = []
        for shown in (conflict.deeper, conflict.other):
            actions, _ = _concretize(system, canon, key, shown.keys, None, None, ignore)
            end = system.initial_state()
            for x in actions:
                end = system.step(end, x)[0]
            ends.append((actions, returns.returning_agent(end, conflict, shown.completion)))
        (this, agent), (other, theirs) = ends
        this = this + [agent]
        other = returns.onto(other, theirs, agent) + [agent]
        violation = aliasing(system, _states(system, this), _states(system, other))
        assert violation is not None, "the parity table's conflict does not replay"
        depth = len(this)
        return confirmed(this, violation, shortest, witness=other)

    def deadlock_alias(actions: list[int]) -> tuple[Violation, list[int]] | None:
        """BP101 for a deadlock whose blocked bare parity wait returned, on another schedule,
        after a completion below the one the barrier stands at here (model/parity.py): the
        other schedule from the parity table, else a bounded search without reduction."""
        states = _states(system, actions)
        for agent, pc, phase in returns.blocked(states[-1]):
            shown = returns.earlier(agent, pc, phase)
            other = None
            if shown is not None:
                other, _ = _concretize(system, canon, key, shown.other.keys, None, None, ignore)
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

    def confirmed(actions: list[int], violation: Violation, shortest: bool,
                  witness: list[int] | None = None) -> ExploreResult:
        def explained(violation: Violation, witness: list[int] | None):
            """A deadlock at a bare parity wait that returns on another schedule before the
            barrier got this far: reported as the parity aliasing it follows from."""
            if returns is not None and witness is None and violation.code == "BP100":
                alias = deadlock_alias(actions)
                if alias is not None:
                    return alias
            return violation, witness

        if local is not None and shortest and not depth_unkept(system, ignore | absent, overruns):
            # every rule left is one the persistent sets meet at its full-graph depth
            notes.append(kept_note())
        elif local is not None and shortest and confirm:
            # The reduced graph may reach a violation later than the full one: the rules left
            # have no violation anywhere, or the shortest is found by the search without
            # partial-order reduction, bounded by this depth (its counts are reported).
            note, again, stopped = settle_or_confirm(depth)
            if note is not None:
                notes.append(note)
            elif again is not None:
                again.seconds = time.perf_counter() - start
                return again
            else:
                # stopped by a limit first: the counterexample found stands, maybe not shortest
                violation, witness = explained(violation, witness)
                return result("violation", actions=actions, violation=violation,
                              witness=witness,
                              reason=unsettled() if counted[0] is not None else f"found with partial-order reduction; the search without "
                                     f"it to depth {depth + 1} stopped ({stopped.reason}), so a "
                                     "shorter one may exist")
        violation, witness = explained(violation, witness)
        return result("violation", actions=actions, violation=violation, witness=witness)

    def expand(state: tuple) -> list:
        """The successors the reductions keep, in the order to take them (last first)."""
        chosen = local(state) if local is not None else None
        if chosen is not None:
            succ = [(a, *system.step(state, a)) for a in chosen]
        else:
            succ = system.successors(state, twins(state) if twins is not None else None)
        succ.reverse()
        return succ

    def depth_first() -> ExploreResult:
        """The reduced graph depth first, with branch and bound: the first violation met bounds
        the length of the next ones, and the search goes on for shorter ones (or one as short
        with a lower code). Every path to a state has the same length (docs/POR.md), so a state
        stands for its whole subtree whatever path reached it, and a search that runs to the
        end finds what the breadth-first search finds: a shortest violation of the reduced
        graph, with the lowest code of its length."""
        nonlocal transitions, depth
        # [rank, path, pred, action, violation, by step, perm]; rank (length, deadlock, code):
        # breadth first, a step's violation is met while the level before is expanded, a
        # deadlock only when its own level is, so at one length it comes last
        best: list = []

        def better(length: int, code: str, deadlock: bool = False) -> bool:
            return not best or (length, deadlock, rank(code)) < best[0]

        def finish(shortest: bool = True) -> ExploreResult:
            if best[1] is ALIASING:
                return found_alias(best[2], shortest)
            return found_on(*best[1:], shortest=shortest)

        def alias(conflict: Conflict | None) -> None:
            if conflict is not None and better(conflict.length, "BP101"):
                best[:] = [(conflict.length, False, rank("BP101")), ALIASING, conflict]

        def stopped(why: str) -> ExploreResult:
            if not best:
                return result("bounded", reason=f"{why} depth first, {len(seen):,} states "
                              f"(deepest {depth})")
            found = finish(shortest=False)
            found.reason = (f"found depth first; the search for a shorter one stopped "
                            f"({why})")
            return found

        path: list = []                  # keys of the states on the stack after the initial one
        trail: list = []                 # the same as shared trails, one per stack state
        stack = [init]
        if returns is not None:
            alias(returns.record(init, 0, list))
        succ = expand(init)
        if not succ and not system.is_done(init):
            stuck = system.deadlock(init)
            if stuck.code not in ignore and not accept(stuck, init):
                return found_on([], init, None, stuck)
        pending = [succ]
        cut = False                      # a state at the depth limit was not expanded
        cap = limits.max_states if limits.max_states is not None else float("inf")
        expanded = 0
        next_report = start + 0.25
        next_memory_check = start + 1.0
        try:
            while pending:
                succ = pending[-1]
                if not succ:
                    pending.pop()
                    stack.pop()
                    if path:
                        path.pop()
                        trail.pop()
                    continue
                action, nxt, violation = succ.pop()
                state = stack[-1]
                length = len(stack)          # of a path to nxt
                transitions += 1
                violation = _orbit_code(orbit, state, action, violation, ignore, tolerated)
                if violation is not None and violation.code not in ignore:
                    if accept(violation):
                        continue             # a dead end, as a violation's state is
                    if better(length, violation.code):
                        best[:] = [(length, False, rank(violation.code)), list(path), state, action,
                                   violation, True, None]
                    continue
                if after_step is not None:
                    nxt = after_step(nxt, action)
                elif reduce is not None:
                    nxt = reduce(nxt)
                k = key(nxt)
                if k in seen:
                    continue
                if len(seen) >= cap:
                    return stopped(f"state limit {limits.max_states} reached")
                seen.add(k)
                bad, perm = violations(nxt)
                if bad:
                    if bad[0] is not DEAD_END and better(length, primary(bad).code):
                        best[:] = [(length, False, rank(primary(bad).code)), list(path), state, action,
                                   primary(bad), False, perm]
                    continue
                if length > depth:               # as breadth first: the deepest state kept
                    depth = length
                if best and length > best[0][0]:
                    continue                 # only longer violations lie beyond
                # as breadth first: a state at the depth limit is checked, not expanded
                if limits.max_depth is not None and length >= limits.max_depth:
                    cut = True
                    continue
                if returns is not None:
                    alias(returns.record(nxt, length,
                                         lambda: Trail(k, trail[-1] if trail else None)))
                after = expand(nxt)
                if not after and not system.is_done(nxt):
                    stuck = system.deadlock(nxt)
                    if stuck.code not in ignore and not accept(stuck, nxt) and \
                            better(length, stuck.code, True):
                        best[:] = [(length, True, rank(stuck.code)), path + [k], nxt, None, stuck, False,
                                   None]
                    continue
                if best and length == best[0][0]:
                    continue                 # its successors are longer than the best
                stack.append(nxt)
                path.append(k)
                trail.append(Trail(k, trail[-1] if trail else None))
                pending.append(after)
                expanded += 1
                if (expanded & 255) == 0:
                    now = time.perf_counter()
                    # with a violation in hand, stop a little early: its replay and report follow
                    if limits.timeout is not None and \
                            now - start > limits.timeout * (0.95 if best else 1.0):
                        return stopped(f"time limit {limits.timeout:g}s reached")
                    if limits.max_memory_mb is not None and now >= next_memory_check:
                        next_memory_check = now + 1.0
                        if _rss_bytes() > limits.max_memory_mb * 2**20:
                            return stopped(f"memory limit {limits.max_memory_mb} MB reached")
                    if progress is not None and now >= next_report:
                        next_report = now + 0.25
                        progress({"states": len(seen), "depth": len(path), "frontier": len(path),
                                  "rate": len(seen) / max(now - start, 1e-9),
                                  "seconds": now - start, "bytes_per_state": per_state(),
                                  "shortest_found": best[0][0] if best else None})
        except KeyboardInterrupt:     # a violation in hand is still reported
            return stopped("interrupted")
        if best:
            return finish()
        if cut:
            return result("bounded", reason=f"depth limit {limits.max_depth} reached depth "
                          "first")
        return result("verified")

    store = StateStore(system, store_mode)
    key, pack, unpack = store.key, store.pack, store.unpack
    packed = store.mode != "tuple"
    fingerprint = store.mode == "fingerprint"
    seen = store.seen
    rss_start = _rss_bytes()
    init = canon(system.initial_state())
    seen.add(key(init))
    transitions = 0
    depth = 0
    first, perm = violations(init)
    if first:
        if first[0] is DEAD_END:
            return result("verified")
        return found(None, None, primary(first), False, perm)
    if order == "dfs":
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return depth_first()
        finally:
            if gc_was_enabled:
                gc.enable()
    frontier = [pack(init)]
    store.levels[0][0].append(key(init))
    store.levels[0][1].append(0)
    next_report = start + 0.25
    next_memory_check = start + 1.0
    # The visited set holds millions of objects that never form cycles: the cyclic collector
    # would rescan them over and over.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while frontier:
            if limits.max_depth is not None and depth >= limits.max_depth:
                return result("bounded", reason=f"depth limit {limits.max_depth} reached with "
                              f"{len(frontier)} states unexpanded")
            next_frontier: list[tuple] = []
            store.new_level()
            next_keys, next_parents = store.levels[-1]
            # The level is finished before a verdict, and ties between violations at the same
            # depth go to the lowest code, so the answer does not depend on search order.
            dead: tuple | None = None   # (index, None, violation, False) at this depth
            best: tuple | None = None   # (predecessor index, action, violation, by step, perm)
            conflict: Conflict | None = None    # a parity wait returning after two completions
            for n, state in enumerate(frontier):
                if packed:
                    state = unpack(state)
                if returns is not None and conflict is None:
                    conflict = returns.record(state, depth,
                                              lambda d=depth, i=n: store.path(d, i))
                chosen = local(state) if local is not None else None
                if chosen is not None:      # a persistent set: its steps are the only ones
                    succ = [(a, *system.step(state, a)) for a in chosen]
                else:
                    succ = system.successors(state, twins(state) if twins is not None else None)
                if not succ and not system.is_done(state):
                    stuck = system.deadlock(state)
                    if stuck.code not in ignore and not accept(stuck, state) and \
                            (dead is None or rank(stuck.code) < rank(dead[2].code)):
                        dead = (n, None, stuck, False, None)
                for action, nxt, violation in succ:
                    transitions += 1
                    violation = _orbit_code(orbit, state, action, violation, ignore, tolerated)
                    if violation is not None and violation.code not in ignore:
                        if accept(violation):
                            continue
                        if best is None or rank(violation.code) < rank(best[2].code):
                            best = (n, action, violation, True, None)
                        continue
                    if after_step is not None:
                        nxt = after_step(nxt, action)
                    elif reduce is not None:
                        nxt = reduce(nxt)
                    if packed:
                        p = pack(nxt)
                        k = hash(p) if fingerprint else p
                    else:
                        p = k = nxt
                    if k in seen:
                        continue
                    seen.add(k)
                    bad, perm = violations(nxt)
                    if bad:
                        if bad[0] is not DEAD_END and \
                                (best is None or rank(primary(bad).code) < rank(best[2].code)):
                            best = (n, action, primary(bad), False, perm)
                        continue
                    next_frontier.append(p)
                    next_keys.append(k)
                    next_parents.append(n)
                if (n & 255) == 0:
                    now = time.perf_counter()
                    if limits.timeout is not None and now - start > limits.timeout:
                        return result("bounded", reason=f"time limit {limits.timeout:g}s reached "
                                      f"at depth {depth}")
                    if limits.max_states is not None and len(seen) > limits.max_states:
                        return result("bounded", reason=f"state limit {limits.max_states} "
                                      f"reached at depth {depth}")
                    if limits.max_memory_mb is not None and now >= next_memory_check:
                        next_memory_check = now + 1.0
                        if _rss_bytes() > limits.max_memory_mb * 2**20:
                            return result("bounded", reason=f"memory limit "
                                          f"{limits.max_memory_mb} MB reached at depth {depth}")
                    if progress is not None and now >= next_report:
                        next_report = now + 0.25
                        progress({"states": len(seen), "depth": depth,
                                  "frontier": len(frontier) - n + len(next_frontier),
                                  "rate": len(seen) / max(now - start, 1e-9),
                                  "seconds": now - start,
                                  "bytes_per_state": per_state()})
            if dead is not None:
                return found(*dead)
            # a conflict met at this level has the length of a step from it (parity_returns.py)
            if best is not None and (conflict is None or best[2].code <= "BP101"):
                return found(*best)
            if conflict is not None:
                return found_alias(conflict)
            if next_frontier:
                depth += 1
            frontier = next_frontier
    except KeyboardInterrupt:
        return result("bounded", reason=f"interrupted at depth {depth}")
    finally:
        if gc_was_enabled:
            gc.enable()
    return result("verified")


# The best violation of a depth-first search is a parity conflict (parity_returns.py).
ALIASING = object()
# States the search for a blocked parity wait's earlier return may visit, unreduced, when the
# reduced search's table has none (parity_returns.search_return): past it the deadlock stands.
ALIAS_SEARCH = 20_000
# The memory rules: not invariant under the symmetry between threads (race_permutations).
RACES = frozenset({"BP200", "BP201"})
# What a state that breaks only tolerated rules shows: nothing to report, nothing to expand.
DEAD_END = Violation("", "a tolerated violation")


def _orbit_code(orbit, state, action, violation, ignore, tolerated=None):
    """A step's violation under block symmetry reports the least code over its block images
    (docs/POR.md), as the unreduced search would at that depth; tolerated ones do not count."""
    if violation is None or orbit is None:
        return violation
    code = orbit(state, action, violation.code, ignore, tolerated)
    if code is not None and (code != violation.code or (tolerated and tolerated(violation))):
        return Violation(code, violation.message)
    return violation
