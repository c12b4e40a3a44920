"""Houdini: the largest inductive subset of the candidate facts, checked by Z3.

Keep the largest subset of the candidates (invariants.py proposes them from samples) that Z3
proves inductive for ALL parameter values: it holds in every initial state and is preserved by
every transition. Z3 is the judge; the samples only propose. Consecution is asked transition
by transition, each on its own incremental solver with the candidates as assumption literals,
only about the candidates over what the transition writes, under the hypotheses over what
its guard reads or it writes (more are assumed when Z3's counterexample state breaks one, and
then by every transition asked after); a transition is asked again only when its last unsat
core loses a candidate, the cheapest such first (Z3's units on its last round), and each
counterexample state Z3 finds is also tried, in Python, on every other transition (and a few
successors), dropping what breaks there too. On a 2-block cluster whose class system Z3
checks symmetric under the swap of the blocks (symmetry.py) one transition of each mirror pair
is asked. The proof holds when Z3 shows that no error state satisfies the invariant.
"""

from __future__ import annotations

import re
from collections import OrderedDict
import time
from dataclasses import dataclass, field

import z3

from .budget import z3_work
from .encode import Encoder
from .invariants import Candidate, Compiler, Substitution, mirror_of
from .symmetry import close
from .work import checked, limit

@dataclass
class InvariantResult:
    status: str                    # proved, failed, unknown
    seconds: float
    reason: str = ""
    invariant: list[Candidate] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    candidates: int = 0
    checks: int = 0
    # on `unknown`: the candidates not yet dropped. Every dropped one was refuted by a state
    # satisfying all alive candidates, so none is in the largest inductive subset: Houdini
    # resumed from these keeps exactly what it would have kept from all of them.
    alive: list[Candidate] = field(default_factory=list)


# How Houdini's consecution asks Z3 (see `houdini`); bench/prove_speed.py compares the two.
CONSECUTION = "transitions"
# Incremental solvers kept alive at once, the least recently asked dropped first (a class of
# hundreds of transitions with thousands of candidates held ~4 MB a solver, 1 GB in all); a
# transition asked again after its solver was dropped gets a new one: the same question, so
# the same largest inductive subset, only Z3's learned lemmas lost.
LIVE_SOLVERS = 48


def houdini(encoder: Encoder, candidates: list[Candidate], timeout: float = 120.0,
            query_timeout: float = 60.0, per_step: bool = False,
            consecution: str | None = None, symmetry: bool = True) -> InvariantResult:
    """The largest inductive subset of the candidates, then the error conditions.

    `consecution` says how Houdini asks Z3 whether a step breaks a candidate:
    "transitions" (the default) asks one transition at a time, each on its own incremental
    solver, only about the candidates over variables the transition writes, and re-asks a
    transition only when a candidate its last unsat core used was dropped; "whole" asks about
    every transition at once, then transition by transition if that query is undecided
    (`per_step`: transition by transition from the start). The largest inductive subset is
    unique, so every way keeps the same candidates; only the time differs.

    `symmetry`: on a 2-block cluster's class system that Z3 checks symmetric under the swap
    of the blocks (symmetry.py), the candidates are closed under the swap, dropped in mirror
    pairs, and only one transition of each mirror pair is asked."""
    start = time.perf_counter()
    consecution = consecution or CONSECUTION
    if consecution not in ("transitions", "whole"):
        raise ValueError(f"consecution: 'transitions' or 'whole', not {consecution!r}")
    variables = encoder.vars
    checks = 0

    def remaining() -> float:
        return timeout - (time.perf_counter() - start)

    def solver():
        s = z3.Solver()
        s.set("timeout", int(max(1.0, min(query_timeout, remaining())) * 1000))
        return s

    def result(status, reason="", **kw):
        return InvariantResult(status, time.perf_counter() - start, reason,
                               candidates=len(candidates), checks=checks, **kw)

    alive = list(candidates)
    # Candidates as Python functions: a model's state is evaluated here, not through the API.
    comp = Compiler(variables)
    sym = (mirror_of(encoder, comp)
           if symmetry and consecution == "transitions" and not per_step else None)
    if sym is not None and not sym.closed:
        sym = None           # a pair's drop needs both transitions in the system (symmetry.py)
    image: dict[int, int] = {}
    if sym is not None:
        alive, image = close(alive, sym.perm, variables, Substitution)
    holds = {id(c): comp.function([c.formula], "bool") for c in alive}

    def survivors(model, vector, items, flag_of):
        values = tuple(model.eval(x, model_completion=True).as_long() for x in vector)
        kept = [c for c in items if holds[id(c)](values)]
        if len(kept) == len(items):      # (never expected) fall back to Z3's evaluation
            kept = [c for c in items if z3.is_true(model.eval(flag_of(c), model_completion=True))]
        return kept

    # Initiation: drop candidates that fail in some initial state.
    init_sub = Substitution(variables, encoder.init_head)
    s = solver()
    s.add(encoder.init_body)
    init_flags, init_broken = {}, {}
    for i, c in enumerate(alive):
        init_flags[id(c)] = z3.Bool(f"h!{i}")
        init_broken[id(c)] = z3.Not(init_flags[id(c)])
        _assert_eq(s, init_flags[id(c)], init_sub(c.formula))
    rnd = 0
    while alive:
        goal = z3.Bool(f"hg!{rnd}")
        rnd += 1
        s.add(z3.Implies(goal, _fast_or([init_broken[id(c)] for c in alive])))
        s.set("timeout", int(max(1.0, min(query_timeout, remaining())) * 1000))
        checks += 1
        r = checked(s, goal)
        if r == z3.unsat:
            break
        if r == z3.unknown:
            return result("unknown", f"Z3 could not decide initiation: {s.reason_unknown()}")
        m = s.model()
        alive = survivors(m, encoder.init_head, alive, lambda c: init_flags[id(c)])
    if image:       # dropped in mirror pairs: the set stays closed under the swap
        kept = {id(c) for c in alive}
        alive = [c for c in alive if image[id(c)] in kept]
    if consecution == "transitions" and not per_step:
        alive, why, more = _consecution_by_transition(
            encoder, alive, comp, holds, remaining, query_timeout,
            asked=sym.asked if sym is not None else None, image=image)
        checks += more
        if why is not None:
            return result("unknown", f"Z3 could not decide consecution: {why}", alive=alive)
    else:
        alive, why, more = _consecution_whole(encoder, alive, survivors, remaining,
                                              query_timeout, per_step)
        checks += more
        if why is not None:
            return result("unknown", f"Z3 could not decide consecution: {why}", alive=alive)
    # Safety: no error state satisfies the invariant. One solver holds the invariant; each
    # error condition is asked under its own assumption literal.
    failed = []
    if remaining() <= 0:
        return result("unknown", "time limit while checking the invariant")
    s = solver()
    s.add(encoder.init_body, *encoder.sane)
    ref = s.ctx.ref()
    for c in alive:
        z3.Z3_solver_assert(ref, s.solver, c.formula.as_ast())
    for n, (label, cond) in enumerate(encoder.bad):
        goal = z3.Bool(f"bad!{n}")
        s.add(z3.Implies(goal, cond))
        s.set("timeout", int(max(1.0, min(query_timeout, remaining())) * 1000))
        checks += 1
        r = checked(s, goal)
        if r == z3.sat:
            failed.append(label)
        elif r == z3.unknown:
            return result("unknown", f"Z3 could not decide an error condition ({label}): "
                          f"{s.reason_unknown()}", invariant=alive)
    if failed:
        return result("failed", "the invariant found does not exclude: " + "; ".join(failed[:3]),
                      invariant=alive, failed=failed)
    return result("proved", invariant=alive)


def _consecution_whole(encoder: Encoder, alive: list, survivors, remaining,
                       query_timeout: float, per_step: bool) -> tuple[list, str | None, int]:
    """Consecution as one incremental query over all transitions at once, until no transition
    breaks a candidate (transition by transition if that query is undecided). Candidate i is
    assumed through the literal a_i; dropping it is just not assuming a_i any more, so Z3
    keeps what it learned."""
    checks = 0
    if per_step:
        alive, why, more = _consecution_per_step(encoder, alive, survivors, remaining,
                                                 query_timeout)
        checks += more
        if why is not None:
            return alive, why, checks
    post, relation, frame = encoder.transition_relation()
    s, lits, flags = _candidate_solver(encoder, alive, [relation, *frame], post)
    alive, r, more, _ = _drop_broken(s, post, alive, lits, flags, survivors, remaining,
                                     query_timeout, 0)
    checks += more
    if r == z3.unknown:
        # The disjunction of every transition is too much at once: ask transition by
        # transition (smaller queries; each solver keeps what it learned).
        alive, why, more = _consecution_per_step(encoder, alive, survivors, remaining,
                                                 query_timeout)
        checks += more
        if why is not None:
            return alive, f"{s.reason_unknown()}; transition by transition: {why}", checks
    elif r != z3.unsat:
        return alive, r, checks
    return alive, None, checks


def _candidate_solver(encoder: Encoder, alive: list, step: list, post) -> tuple:
    """An incremental solver for consecution across `step` (its constraints, with successor
    vector `post`): candidate i is assumed through the literal a!i, and f!i is its value after
    the step. Returns (the solver, the literals, the flags), keyed by id."""
    s = z3.Solver()
    s.add(encoder.init_body, *encoder.sane, *step)
    sub = Substitution(encoder.vars, post)
    lits, flags = {}, {}
    for i, c in enumerate(alive):
        lits[id(c)], flags[id(c)] = z3.Bool(f"a!{i}"), z3.Bool(f"f!{i}")
        _assert_candidate(s, lits[id(c)], flags[id(c)], c.formula, sub(c.formula))
    return s, lits, flags


def _drop_broken(s: z3.Solver, post, alive: list, lits: dict, flags: dict, survivors,
                 remaining, query_timeout: float, rnd: int) -> tuple:
    """Ask `s` whether a step breaks an alive candidate, drop those its model breaks, until
    none breaks. Returns (the alive candidates, z3.unsat when none breaks or none is left /
    z3.unknown / "time limit", the number of queries, the next goal number): goal literals
    are numbered from `rnd` so that none is reused on a solver."""
    checks = 0
    while alive:
        if remaining() <= 0:
            return alive, "time limit", checks, rnd
        checks += 1
        r = _some_broken(s, f"g!{rnd}", alive, lits, flags,
                         max(1.0, min(query_timeout, remaining())))
        rnd += 1
        if r != z3.sat:
            return alive, r, checks, rnd
        alive = survivors(s.model(), post, alive, lambda c: flags[id(c)])
    return alive, z3.unsat, checks, rnd


class _Neighbourhood:
    """Houdini's drops, evaluated in Python around a state Z3 found.

    A state that satisfies every alive candidate (and the construction facts and the
    parameters' constraints, as Z3's hypotheses do) breaks a candidate when one of its
    successors does: that is exactly why Houdini drops a candidate, so such a state found for
    one transition is tried on every transition, and so are its successors that still satisfy
    every alive candidate (a few states at most). Only the candidates over what a transition
    writes can break across it. Z3 found the first state; the rest is evaluation of the
    compiled transitions and candidates, no query."""

    LIMIT = 8

    def __init__(self, encoder: Encoder, comp: Compiler, steps: list, holds: dict):
        self.ok = comp.function([z3.And(list(encoder.sane) + [encoder.init_body])], "bool")
        # Each candidate is compiled once (`holds`); a function per transition over its
        # relevant candidates would compile the same formulas again for every transition
        # (hundreds of megabytes of source for a kernel with thousands of candidates).
        self.holds = holds
        # per transition: its guard, its successor, and its relevant candidates
        self.steps = []
        for (_, pre, nxt), (_, _, _, relevant) in zip(encoder.steps, steps):
            if relevant:
                self.steps.append((comp.function([pre], "bool"), comp.function(nxt),
                                   [id(c) for c in relevant]))

    def drops(self, start: tuple, alive: set[int]) -> set[int]:
        out: set[int] = set()
        seen = {start}
        frontier = [start]
        while frontier and len(seen) < self.LIMIT:
            state = frontier.pop()
            if state != start:
                if not self.ok(state):
                    continue
                if not all(self.holds[key](state) for key in alive if key not in out):
                    continue                  # not a state Houdini's hypotheses allow
            for pre, post, keys in self.steps:
                if not pre(state):
                    continue
                nxt = post(state)
                for key in keys:
                    if key in alive and key not in out and not self.holds[key](nxt):
                        out.add(key)
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        return out


_STATE_INDEX = re.compile(r"s\[(\d+)\]")


def _consecution_by_transition(encoder: Encoder, alive: list, comp: Compiler, holds: dict,
                               remaining, query_timeout: float, asked: list[int] | None = None,
                               image: dict[int, int] | None = None
                               ) -> tuple[list, str | None, int]:
    """Houdini's consecution one transition at a time, on one incremental solver each.

    A transition writes a few state variables; a candidate over none of them is preserved by
    it (the pre-state satisfies it and nothing it reads changes), so the transition's query
    asks only whether one of the candidates over what it writes breaks. Its unsat core names
    the candidates the answer rests on: the transition is asked again only when one of them is
    dropped (a query under fewer hypotheses about fewer candidates). With a mirror
    (symmetry.py) only the transitions `asked` are asked and a candidate is dropped with its
    `image`. Returns (the inductive candidates, why undecided or None, the number of
    queries)."""
    variables = encoder.vars
    nf = len(encoder.system.frozen)
    reads = {id(c): {int(x) for x in _STATE_INDEX.findall(comp.expr(c.formula))}
             for c in alive}
    lits = {id(c): z3.Bool(f"a!{i}") for i, c in enumerate(alive)}
    by_lit = {lits[id(c)].get_id(): id(c) for c in alive}
    # Terms shared by every transition's solver, built once: the hypotheses `a_i =>
    # candidate_i`, and `f_i == candidate_i` (substituted per transition in one call).
    ctx = variables[0].ctx
    ref = ctx.ref()
    implies = {id(c): z3.BoolRef(z3.Z3_mk_implies(ref, lits[id(c)].as_ast(),
                                                  c.formula.as_ast()), ctx) for c in alive}
    flags = {id(c): z3.Bool(f"f!{i}") for i, c in enumerate(alive)}
    broken = {id(c): z3.Not(flags[id(c)]) for c in alive}
    defines = {id(c): z3.BoolRef(z3.Z3_mk_eq(ref, flags[id(c)].as_ast(), c.formula.as_ast()),
                                 ctx) for c in alive}
    where = {id(c): _condition_values(c.formula, variables) for c in alive}
    steps = []
    for label, pre, nxt in encoder.steps:
        writes = {i for i in range(nf, len(variables)) if not nxt[i].eq(variables[i])}
        # A candidate whose condition (`pos[wg0] == 5 => ...`) the transition's successor
        # cannot meet holds there whatever it says: it cannot break across it.
        after = {i: nxt[i].as_long() for i in writes if z3.is_int_value(nxt[i])}
        relevant = [c for c in alive if reads[id(c)] & writes
                    and not _excluded(where[id(c)], after)]
        steps.append((label, pre, nxt, relevant))
    # Likewise a hypothesis whose condition the transition's guard excludes holds in every
    # state the transition leaves: it is not assumed in that transition's queries (the same
    # answer; a smaller query).
    guards = [_fixed_values(pre, variables) for _, pre, _ in encoder.steps]
    assumed = [{id(c) for c in alive if not _excluded(where[id(c)], g)} for g in guards]
    solvers: OrderedDict[int, z3.Solver] = OrderedDict()
    # Hypotheses are given lazily: a transition's solver first assumes the candidates over the
    # variables its guard reads or it writes; when Z3's model has a pre-state that breaks
    # another alive candidate, that candidate is added and the transition asked again. An
    # unsat answer under fewer hypotheses holds under all of them, and a candidate is dropped
    # only by a pre-state that satisfies every alive candidate, so the largest inductive
    # subset is the same; the queries are smaller (most hypotheses bear on no transition).
    # The terms given (with the guard's values put in) and each transition's successor terms
    # are built once: a solver made again (LIVE_SOLVERS) is given the same terms.
    given: dict[int, set[int]] = {}         # per transition: the candidates it assumes
    # hypotheses some transition's query needed beyond its own variables: given to every
    # transition asked after (most are about the same few places; one round each saved)
    hot: set[int] = set()
    terms: dict[int, list] = {}             # ... as the terms its solver was given
    posts: dict[int, z3.BoolRef] = {}       # per transition: its candidates' successor values

    def give(t: int, keys: list[int]) -> z3.BoolRef:
        """The hypotheses `keys` (a_i => candidate_i), the guard of transition t put in."""
        given[t].update(keys)
        part = _fast_and([implies[k] for k in keys])
        fixed = [(variables[i], z3.IntVal(v)) for i, v in guards[t].items()]
        terms[t].append(z3.simplify(z3.substitute(part, *fixed)) if fixed else part)
        return terms[t][-1]

    def solver_of(t: int) -> z3.Solver:
        if t in solvers:
            solvers.move_to_end(t)
        else:
            if len(solvers) >= LIVE_SOLVERS:
                solvers.popitem(last=False)
            label, pre, nxt, relevant = steps[t]
            if t not in given:
                given[t], terms[t] = set(), []
                cone = {int(x) for x in _STATE_INDEX.findall(comp.expr(pre))}
                cone |= {i for i in range(nf, len(variables)) if not nxt[i].eq(variables[i])}
                goals = {id(c) for c in relevant}
                give(t, [id(c) for c in alive if id(c) in assumed[t]
                         and (reads[id(c)] & cone or id(c) in goals or id(c) in hot)])
            s = z3.Solver()
            s.add(encoder.init_body, *encoder.sane, pre, *terms[t])
            if t not in posts:
                fixed = [(variables[i], z3.IntVal(v)) for i, v in guards[t].items()]
                sub = Substitution(variables, nxt)
                post = sub(_fast_and([defines[id(c)] for c in relevant]))
                posts[t] = z3.simplify(z3.substitute(post, *fixed)) if fixed else post
            s.add(posts[t])
            solvers[t] = s
        return solvers[t]

    around = _Neighbourhood(encoder, comp, steps, holds)
    checks = 0
    rnd = 0
    dead: set[int] = set()
    cores: dict[int, set[int]] = {}          # transition -> candidates its last unsat rests on
    todo = list(range(len(steps))) if asked is None else list(asked)
    queued = set(todo)
    # Z3's units each transition's last round of queries took: a transition asked again (its
    # core lost a candidate) waits until the cheaper ones asked again have settled, so drops
    # found by cheap queries accumulate before an expensive one is re-asked once, not once
    # per drop. The order changes only which queries are asked, never what is kept.
    cost: dict[int, int] = {}
    while todo:
        t = min(todo, key=lambda u: (u in cost, cost.get(u, 0)))
        todo.remove(t)
        queued.discard(t)
        label, pre, nxt, relevant = steps[t]
        cost[t] = 0
        while True:
            goals = [c for c in relevant if id(c) not in dead]
            if not goals:
                cores[t] = set()
                break
            if remaining() <= 0:
                return [c for c in alive if id(c) not in dead], "time limit", checks
            s = solver_of(t)
            goal = z3.Bool(f"g!{rnd}")
            rnd += 1
            s.add(z3.Implies(goal, _fast_or([broken[id(c)] for c in goals])))
            s.set("timeout", int(max(1.0, min(query_timeout, remaining())) * 1000))
            checks += 1
            ahead = z3_work()
            r = _fast_check(s, [goal] + [lits[id(c)] for c in alive
                                         if id(c) in given[t] and id(c) not in dead])
            cost[t] += z3_work() - ahead
            if r == z3.sat:
                m = s.model()
                pre_state = tuple(m.eval(x, model_completion=True).as_long()
                                  for x in variables)
                missing = [id(c) for c in alive if id(c) not in dead and id(c) in assumed[t]
                           and id(c) not in given[t] and not holds[id(c)](pre_state)]
                if missing:
                    # a pre-state outside the invariant: assume what it breaks, and what
                    # other transitions' pre-states broke (`hot`), ask again
                    hot.update(missing)
                    new = set(missing)
                    missing += [id(c) for c in alive if id(c) in hot and id(c) not in new
                                and id(c) not in dead and id(c) in assumed[t]
                                and id(c) not in given[t]]
                    s.add(give(t, missing))
                    continue
            if r == z3.unsat:
                cores[t] = {by_lit[x.get_id()] for x in s.unsat_core()
                            if x.get_id() in by_lit}
                break
            if r == z3.unknown:
                return ([c for c in alive if id(c) not in dead],
                        f"{label}: {s.reason_unknown()}", checks)
            m = s.model()
            values = tuple(m.eval(x, model_completion=True).as_long() for x in nxt)
            gone = {id(c) for c in goals if not holds[id(c)](values)}
            if not gone:     # (never expected) fall back to Z3's evaluation of the flags
                gone = {id(c) for c in goals
                        if z3.is_false(m.eval(broken[id(c)].arg(0), model_completion=True))}
            if not gone:
                return ([c for c in alive if id(c) not in dead],
                        f"{label}: a model breaks no candidate", checks)
            dead |= gone
            # The model's pre-state satisfies every alive candidate: so may its successors
            # by other transitions; each successor that breaks a candidate drops it too.
            pre_state = tuple(m.eval(x, model_completion=True).as_long() for x in variables)
            more = around.drops(pre_state, {id(c) for c in alive} - dead)
            dead |= more
            gone |= more
            if image:
                more = {image[x] for x in gone} - dead
                dead |= more
                gone |= more
            for u, core in list(cores.items()):
                if u != t and core & gone:
                    del cores[u]
                    if u not in queued:
                        queued.add(u)
                        todo.append(u)
    return [c for c in alive if id(c) not in dead], None, checks


def _var_index(term, variables) -> int | None:
    index = _VAR_INDEX.get(id(variables))
    if index is None or index[0] is not variables:
        index = (variables, {v.get_id(): i for i, v in enumerate(variables)})
        _VAR_INDEX.clear()
        _VAR_INDEX[id(variables)] = index
    return index[1].get(term.get_id())


_VAR_INDEX: dict = {}       # the last variable vector's index: id -> position


def _equalities(formula, variables) -> dict[int, int]:
    """{i: value} for the conjuncts `variables[i] == value` of `formula` (the rest ignored)."""
    parts = formula.children() if z3.is_and(formula) else [formula]
    out = {}
    for part in parts:
        if z3.is_eq(part):
            a, b = part.children()
            if z3.is_int_value(a):
                a, b = b, a
            if z3.is_int_value(b):
                i = _var_index(a, variables)
                if i is not None:
                    out[i] = b.as_long()
    return out


def _condition_values(formula, variables) -> dict[int, int]:
    """The values `cond => fact` fixes in its condition ({} for an unconditional fact)."""
    if not z3.is_app_of(formula, z3.Z3_OP_IMPLIES):
        return {}
    return _equalities(formula.arg(0), variables)


def _fixed_values(pre, variables) -> dict[int, int]:
    """The values a transition's guard fixes (`pos[wg0] == 3`, one conjunct each)."""
    return _equalities(pre, variables)


def _excluded(condition: dict[int, int], fixed: dict[int, int]) -> bool:
    return any(i in fixed and fixed[i] != v for i, v in condition.items())


def _some_broken(s: z3.Solver, goal_name: str, alive: list, lits: dict, flags: dict,
                 seconds: float):
    """Can a step from a state satisfying every alive candidate break one of them? The goal
    literal makes this round's question retractable; the solver keeps what it learned."""
    goal = z3.Bool(goal_name)
    negated = flags.setdefault("not", {})
    for c in alive:
        if id(c) not in negated:
            negated[id(c)] = z3.Not(flags[id(c)])
    s.add(z3.Implies(goal, _fast_or([negated[id(c)] for c in alive])))
    s.set("timeout", int(seconds * 1000))
    return _fast_check(s, [goal] + [lits[id(c)] for c in alive])


# Houdini asks one query per round over thousands of candidate literals; building the query
# through z3's Python coercions cost more than Z3's own work. These build the same terms
# through the C API directly (every argument is already a Boolean of one context).
def _assert_candidate(s: z3.Solver, lit, flag, formula, post) -> None:
    """s.add(Implies(lit, formula), flag == post), through the C API."""
    ref = s.ctx.ref()
    z3.Z3_solver_assert(ref, s.solver, z3.Z3_mk_implies(ref, lit.as_ast(), formula.as_ast()))
    z3.Z3_solver_assert(ref, s.solver, z3.Z3_mk_eq(ref, flag.as_ast(), post.as_ast()))


def _assert_eq(s: z3.Solver, a, b) -> None:
    """s.add(a == b) for two Booleans, through the C API."""
    ref = s.ctx.ref()
    z3.Z3_solver_assert(ref, s.solver, z3.Z3_mk_eq(ref, a.as_ast(), b.as_ast()))


def _fast_or(args: list) -> z3.BoolRef:
    if not args:
        return z3.BoolVal(False)
    ctx = args[0].ctx
    arr = (z3.Ast * len(args))(*[a.as_ast() for a in args])
    return z3.BoolRef(z3.Z3_mk_or(ctx.ref(), len(args), arr), ctx)


def _fast_and(args: list) -> z3.BoolRef:
    if not args:
        return z3.BoolVal(True)
    ctx = args[0].ctx
    arr = (z3.Ast * len(args))(*[a.as_ast() for a in args])
    return z3.BoolRef(z3.Z3_mk_and(ctx.ref(), len(args), arr), ctx)


def _fast_check(s: z3.Solver, assumptions: list):
    limit(s)
    arr = (z3.Ast * len(assumptions))(*[a.as_ast() for a in assumptions])
    r = z3.Z3_solver_check_assumptions(s.ctx.ref(), s.solver, len(assumptions), arr)
    return z3.CheckSatResult(r)


def _consecution_per_step(encoder: Encoder, alive: list, survivors, remaining,
                          query_timeout: float) -> tuple[list, str | None, int]:
    """Houdini's consecution one transition at a time, until a whole round over the
    transitions drops nothing. Returns (the inductive candidates, why undecided or None, the
    number of queries). Candidate c is assumed through a literal, as in `houdini`."""
    checks = 0
    per_step = [(label, nxt) + _candidate_solver(encoder, alive, [pre], nxt)
                for label, pre, nxt in encoder.steps]
    rnd = 0
    changed = True
    while changed:
        changed = False
        for label, nxt, s, lits, flags in per_step:
            before = len(alive)
            alive, r, more, rnd = _drop_broken(s, nxt, alive, lits, flags, survivors,
                                               remaining, query_timeout, rnd)
            checks += more
            changed |= len(alive) < before
            if r == z3.unknown:
                return alive, f"{label}: {s.reason_unknown()}", checks
            if r != z3.unsat:
                return alive, r, checks
    return alive, None, checks


def explain_drop(encoder: Encoder, candidates: list[Candidate], pattern: str, rounds: int = 400):
    """Debugging aid: run Houdini until a candidate whose text contains `pattern` is dropped;
    return (round, step labels, pre-state, post-state, dropped texts)."""
    variables = encoder.vars
    nf = len(encoder.system.frozen)
    names = encoder.layout.names
    alive = list(candidates)
    init_sub = list(zip(variables, encoder.init_head))
    s = z3.Solver()
    s.add(encoder.init_body)
    for c in alive:
        s.push()
        s.add(z3.Not(z3.substitute(c.formula, *init_sub)))
        if checked(s) == z3.sat and pattern in c.text:
            return ("init", [], s.model(), None, [c.text])
        s.pop()
    post = [z3.Int(f"{v}'") for v in variables]
    sub = list(zip(variables, post))
    sels = [z3.Bool(f"sel{i}") for i in range(len(encoder.steps))]
    rel = z3.Or([z3.And(sel, pre, *[p == t for p, t in zip(post[nf:], nxt[nf:])])
                 for sel, (_, pre, nxt) in zip(sels, encoder.steps)])
    frame = [p == x for p, x in zip(post[:nf], variables[:nf])]
    for rnd in range(rounds):
        s = z3.Solver()
        s.add(encoder.init_body, *encoder.sane, rel, *frame, *[c.formula for c in alive])
        flags = [z3.Bool(f"h!{i}") for i in range(len(alive))]
        for f, c in zip(flags, alive):
            s.add(f == z3.substitute(c.formula, *sub))
        s.add(z3.Not(z3.And(flags)))
        if checked(s) != z3.sat:
            return None
        m = s.model()
        dropped = [c.text for c, f in zip(alive, flags)
                   if not z3.is_true(m.eval(f, model_completion=True))]
        if any(pattern in d for d in dropped):
            step = [encoder.steps[i][0] for i, sel in enumerate(sels)
                    if z3.is_true(m.eval(sel, model_completion=True))]
            pre = {n: m.eval(x, model_completion=True) for n, x in zip(names, variables)}
            pst = {n: m.eval(x, model_completion=True) for n, x in zip(names, post)}
            return (rnd, step, {k: v for k, v in pre.items() if str(v) != "0"},
                    {k: v for k, v in pst.items() if str(v) != "0"},
                    [d for d in dropped if pattern in d])
        alive = [c for c, f in zip(alive, flags) if z3.is_true(m.eval(f, model_completion=True))]
    return None


def core_closure(encoder: Encoder, invariant: list[Candidate], timeout: float = 600.0):
    """A subset of a proved invariant that is still inductive and still excludes every error
    (closure of unsat cores): for reports and for tuning the candidate templates."""
    variables = encoder.vars
    nf = len(encoder.system.frozen)
    post = [z3.Int(f"{v}'") for v in variables]
    relation = z3.Or([z3.And(pre, *[p == t for p, t in zip(post[nf:], nxt[nf:])])
                      for _, pre, nxt in encoder.steps])
    frame = [p == v for p, v in zip(post[:nf], variables[:nf])]
    sub = list(zip(variables, post))
    marks = [z3.Bool(f"m!{i}") for i in range(len(invariant))]

    def core(goal_neg):
        s = z3.Solver()
        s.set("timeout", int(timeout * 1000))
        s.add(encoder.init_body, *encoder.sane, *goal_neg)
        for m, c in zip(marks, invariant):
            s.add(z3.Implies(m, c.formula))
        r = checked(s, *marks)
        assert r == z3.unsat, r
        return {int(str(x)[2:]) for x in s.unsat_core()}

    needed: set[int] = set()
    todo = []
    for _, cond in encoder.bad:
        for i in core([cond]):
            if i not in needed:
                needed.add(i)
                todo.append(i)
    while todo:
        i = todo.pop()
        goal = [relation, *frame, z3.Not(z3.substitute(invariant[i].formula, *sub))]
        for j in core(goal):
            if j not in needed:
                needed.add(j)
                todo.append(j)
    return [invariant[i] for i in sorted(needed)]
