"""Proofs for every parameter value (Z3), or the smallest parameter values that break a protocol.

`barrierproof prove PATH[::NAME] [--symbolic NAME ...]` and `check --engine symbolic` call
`prove_kernel`. The verdict is

- `proved`: for EVERY value of the symbolic parameters that satisfies the kernel's assumptions
  (`k.assume(...)`) -- and the side conditions the verdict lists, the hardware ranges without
  which model/semantics.py has no meaning (e.g. `num_arrivals <= 2**20 - 1`) -- no reachable
  state deadlocks (BP100, BP130) or breaks a rule (BP101-BP105, BP121), with the meaning of
  model/semantics.py. Every fact this rests on was proved by Z3; an `unknown` or a time-out from
  Z3 anywhere means no proof.
- `violation`: the smallest breaking parameter values found by a bounded search (points in order
  of the sum of the symbolic values, then lexicographically), with the explicit explorer's
  shortest counterexample at those values, replayed on the interpreter.
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
   checking them on every class system checks them on the kernel. (That the projection of every
   reachable state of model/semantics.py is reached by the class system is tested at small
   parameter values: crosscheck.py.)
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
   whose class system proved it enabled -- a contradiction. Candidate orders are first replayed
   concretely (the tau-ordered run of model/semantics.py must pass every wait at a few small
   parameter values); only the symbolic check counts.
5. Invariants (invariants.py). Each class system is explored explicitly at small
   parameter values; linear equalities (null spaces of the sampled states), bounds and bounds on
   differences, globally and conditioned on where a thread is, are the candidates. Houdini keeps
   the largest subset Z3 proves inductive for ALL parameter values (initiation and consecution
   over symbolic parameters), and Z3 then proves that no error state satisfies it. Spacer (Z3's
   CHC engine) was tried first on the same transition systems and did not converge even on
   concrete 19-state instances in 60 s, so invariants are guessed from samples and checked by Z3:
   the samples only propose, Z3 decides.

The fragment (anything else is `unknown` with the reason): concrete cluster shape and warps per
warpgroup; threads per block concrete or cut into roles by comparisons `thread OP expr`; loops not
nested; trip counts, guards, counts and bytes linear in the parameters and the loop variable;
barrier arrays of concrete size, or of one symbolic size S indexed `(i + c) % S` in loops or
`c % S` outside; parities of `wait_parity` linear in `(i + c) // S` (xor allowed there); a plain
tcgen05_mma followed, unconditionally, by a tcgen05 arrival of its thread.
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field

import z3
from typing import Mapping, Sequence

from ...model.ir import Kernel, ModelError, evaluate
from ...model.semantics import compile_systems, static_findings
from ..check import Options, check_kernel, error_verdict
from ..engines.explore import Limits
from ..verdict import Verdict
from .encode import Encoder
from .fragment import Fragment
from .invariants import guess, houdini, sample
from .order import TauRun, TauSearch, tau_static_ok
from .terms import Unsupported
from .unroll import split_ring_arrays, unroll_fixed_loops


@dataclass
class ClassProof:
    name: str
    status: str                 # proved, failed, unknown
    seconds: float
    reason: str = ""
    invariant_size: int = 0
    samples: int = 0


@dataclass
class Proof:
    status: str                 # proved, failed, unknown
    seconds: float
    reason: str = ""
    classes: list[ClassProof] = field(default_factory=list)
    side_conditions: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    tau: str = ""


# ----------------------------------------------------------------------------------------------
# Parameter points
# ----------------------------------------------------------------------------------------------

def _satisfies(kernel: Kernel, values: Mapping[str, int], extra=()) -> bool:
    try:
        return all(evaluate(a, values) for a in kernel.assumptions) and all(
            evaluate(a, values) for a in extra)
    except ModelError:
        return False


def points(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int], top: int,
           limit: int | None = None, seed: int = 0) -> list[dict[str, int]]:
    """Parameter values 0..top for the symbolic parameters, in order of their sum, that satisfy
    the assumptions (at most `limit` of them, a deterministic spread when more exist)."""
    combos = sorted(itertools.product(range(top + 1), repeat=len(symbolic)),
                    key=lambda c: (sum(c), c))
    out = []
    for combo in combos:
        values = dict(fixed)
        values.update(zip(symbolic, combo))
        if _satisfies(kernel, values):
            out.append(values)
    if limit is not None and len(out) > limit:
        rng = random.Random(seed)
        keep = out[: limit // 2]
        keep += rng.sample(out[limit // 2:], limit - len(keep))
        out = keep
    return out


# ----------------------------------------------------------------------------------------------
# The proof
# ----------------------------------------------------------------------------------------------

def prove(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
          timeout: float = 240.0) -> Proof:
    """Prove `kernel` deadlock-free and rule-clean for every value of `symbolic` satisfying the
    assumptions (the other parameters at `fixed`)."""
    start = time.perf_counter()

    def spent() -> float:
        return time.perf_counter() - start

    kernel = split_ring_arrays(unroll_fixed_loops(kernel, fixed), fixed)
    try:
        frag = Fragment(kernel, symbolic, fixed)
        roles = frag.build_roles()
        frag.build_classes()
        search = TauSearch(frag)
    except Unsupported as err:
        return Proof("unknown", spent(), f"outside the supported fragment: {err}")
    side = [text for _, text in frag.side_conditions]
    # The order tau: candidates checked on the tau-ordered run of model/semantics.py.
    check_points = _tau_points(kernel, symbolic, fixed, frag)
    runs = []
    try:
        for values in check_points:
            for system in compile_systems(kernel, values):
                runs.append(TauRun(frag, system, values))
    except (Unsupported, ModelError) as err:
        return Proof("unknown", spent(), f"cannot replay candidate orders: {err}")
    chosen = None
    why = "no candidate"
    for tau in search.candidates():
        if not tau_static_ok(frag, search, tau):
            continue
        search.apply(tau)
        why = next((r for r in (run.check(search) for run in runs) if r), None)
        if why is None:
            chosen = tau
            break
        if spent() > timeout / 4:
            break
    if chosen is None:
        return Proof("failed", spent(), f"no static order passes every wait at small parameter "
                     f"values (last: {why})", roles=[r.name for r in roles])
    tau_text = _describe_tau(frag, search, chosen)
    try:
        systems = frag.build_systems()
    except Unsupported as err:
        return Proof("unknown", spent(), f"outside the supported fragment: {err}")
    side = [text for _, text in frag.side_conditions]
    mine = points(kernel, symbolic, fixed, 3)
    check = points(kernel, symbolic, fixed, 7, limit=60)
    proofs = []
    for cls, system, builder in systems:
        t0 = time.perf_counter()
        if not system.roles:
            continue
        enc = Encoder(system).build()
        bad = enc.check_sane()
        if bad is not None:
            return Proof("unknown", spent(), f"internal: construction facts of {cls.name} fail at "
                         f"`{bad}`", side_conditions=side)
        vals = [v for p in mine for v in frag.valuations(cls, system, p)]
        more = [v for p in check for v in frag.valuations(cls, system, p)]
        small = sample(enc, vals, limit=20000, budget=max(5.0, (timeout - spent()) / 8))
        if small.errors:
            label, frozen = next(iter(small.errors.items()))
            values = dict(zip([str(v) for v in system.frozen], frozen))
            proofs.append(ClassProof(cls.name, "failed", time.perf_counter() - t0,
                                     f"{label} at {values}"))
            return Proof("failed", spent(), f"{cls.name}: the abstraction reaches `{label}` at "
                         f"{_params_only(values, symbolic)}", proofs, side, tau=tau_text)
        large = sample(enc, more, limit=60000, budget=max(5.0, (timeout - spent()) / 8))
        result = None
        # richer templates only when the plainer ones fail (each attempt costs Houdini rounds)
        for pairs, hulls in ((False, False), (True, False), (True, True)):
            cands = guess(enc, small.states + large.states, (), conditional_pairs=pairs,
                          hulls=hulls)
            left = timeout - spent()
            if left <= 0:
                break
            result = houdini(enc, cands, timeout=left)
            if result.status == "proved" or result.status == "unknown":
                break
        seconds = time.perf_counter() - t0
        if result is None:
            return Proof("unknown", spent(), "time limit", proofs, side, tau=tau_text)
        proofs.append(ClassProof(cls.name, result.status, seconds, result.reason,
                                 len(result.invariant), len(small.states)))
        if result.status != "proved":
            status = "unknown" if result.status == "unknown" else "failed"
            return Proof(status, spent(), f"{cls.name}: {result.reason}", proofs, side,
                         tau=tau_text)
    return Proof("proved", spent(), "", proofs, side, [r.name for r in roles], tau_text)


def _params_only(values: Mapping[str, int], symbolic) -> dict:
    return {k: v for k, v in values.items() if k in symbolic}


def _tau_points(kernel, symbolic, fixed, frag) -> list[dict[str, int]]:
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
    for values in points(kernel, symbolic, fixed, 5, limit=6, seed=1):
        if values not in out:
            out.append(values)
    return out[:6]


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
# Smallest breaking values
# ----------------------------------------------------------------------------------------------

def smallest_violation(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                       options: Options | None = None, source: str | None = None,
                       budget: float = 60.0, top: int = 8) -> tuple[Verdict | None, str]:
    """Explore parameter values in order of their sum (then lexicographically) with the explicit
    explorer; the first violation is returned, its trace already replayed on the interpreter."""
    start = time.perf_counter()
    base = options or Options()
    checked = 0
    last = None
    for values in points(kernel, symbolic, fixed, top):
        if time.perf_counter() - start > budget:
            break
        limits = Limits(max_states=base.limits.max_states or 2_000_000,
                        max_depth=base.limits.max_depth,
                        timeout=min(base.limits.timeout or 30.0,
                                    max(1.0, budget - (time.perf_counter() - start))),
                        max_memory_mb=base.limits.max_memory_mb)
        opts = Options(limits, base.reduction, base.ignore, base.select)
        verdict = check_kernel(kernel, values, opts, source)
        checked += 1
        last = values
        if verdict.verdict == "violation" or (
                verdict.verdict == "error" and verdict.codes and verdict.codes[0] in
                ("BP120", "BP121")):
            return verdict, f"{checked} parameter point(s) explored in order of size"
    what = f"{checked} parameter point(s) explored" + (f", up to {last}" if last else "")
    return None, what


# ----------------------------------------------------------------------------------------------
# The engine of `barrierproof prove` and `check --engine symbolic`
# ----------------------------------------------------------------------------------------------

def _conditions_text(kernel: Kernel, symbolic: Sequence[str]) -> str:
    conds = [repr(a) for a in kernel.assumptions]
    text = ", ".join(symbolic)
    return f"all {text}" + (f" with {' and '.join(conds)}" if conds else "")


def prove_kernel(kernel: Kernel, params: Mapping[str, int] | None = None,
                 options: Options | None = None, source: str | None = None,
                 args=None) -> Verdict:
    """Prove for every value of the symbolic parameters, or find the smallest breaking ones."""
    start = time.perf_counter()
    options = options or Options()
    params = dict(params or {})
    requested = list(getattr(args, "symbolic", None) or [])
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
            hint=f"its parameters: {', '.join(kernel.params) or 'none'}"), source)
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
    if options.ignored():
        return verdict("unknown", coverage="--ignore/--select change which rules count; the "
                       "symbolic engine proves all of them or nothing", params=fixed)
    timeout = options.limits.timeout or 300.0
    proof = prove(kernel, symbolic, fixed, timeout=timeout)
    conditions = _conditions_text(kernel, symbolic)
    if proof.status == "proved":
        notes = []
        if proof.side_conditions:
            notes.append("also assumed (the model is undefined otherwise): "
                         + "; ".join(proof.side_conditions))
        notes.append(f"static order tau: {proof.tau}")
        facts = sum(c.invariant_size for c in proof.classes)
        per = ", ".join(f"{c.name} {c.seconds:.1f}s" for c in proof.classes)
        return verdict("proved", params=fixed, notes=notes,
                       coverage=f"proved for {conditions}: {len(proof.classes)} barrier "
                       f"class(es) ({per}), inductive invariants of {facts} facts checked by Z3")
    budget = max(10.0, min(120.0, timeout - (time.perf_counter() - start)))
    found, searched = smallest_violation(kernel, symbolic, fixed, options, source, budget=budget)
    if found is not None:
        found.engine = "symbolic"
        found.seconds = time.perf_counter() - start
        shown = ", ".join(f"{n}={found.params[n]}" for n in symbolic)
        found.notes.append(f"smallest breaking values found: {shown} "
                           f"(bounded search: {searched}; the trace is from the explicit "
                           "explorer, replayed on the interpreter)")
        if proof.reason:
            found.notes.append(f"proof attempt: {proof.reason}")
        return found
    return verdict("unknown", params=fixed,
                   coverage=f"not proved for {conditions}: {proof.reason}; no violation in "
                   f"{searched}")
