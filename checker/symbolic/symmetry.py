"""The two blocks of a cluster run one program: Houdini asked once per pair of mirror steps.

A class system of a 2-block cluster holds both blocks' rings: every role and barrier instance of
block A has a twin in block B, and the swap sigma of the twins' state variables (parameters
fixed) maps the system onto itself. When Z3 checks that it does -- the construction facts and
the parameters' constraints are preserved by sigma, and every transition u is sigma's image of a
transition t Houdini asks about (same guard, successor mapped variable by variable, for every
state of the construction facts) -- then:

  * a candidate set closed under sigma has a largest inductive subset closed under sigma (a
    state refuting c by step t, mirrored, refutes sigma(c) by sigma(t)), so Houdini drops c and
    sigma(c) together and loses nothing it would have kept;
  * a sigma-closed set A preserved by t is preserved by sigma(t): from v satisfying A, the step
    sigma(t) reaches v' where t, from sigma(v) (which satisfies A: A is closed), reaches
    sigma(v'); so A holds at sigma(v'), so at v'.

So Houdini's consecution asks only one transition of each mirror pair (about half of a
cluster's), initiation and the error conditions are asked as always, and the invariant it
returns is inductive for every transition. Both uses need more than pairs: sigma must map the
system's transitions onto themselves (`Mirror.closed`, checked by Z3), or a candidate dropped
by t would take down its mirror that no transition refutes, and a sampled state's mirror
need not be reachable (an error reached only there is no error of the system). A system
that is not closed is sampled and asked as it is; its construction check still asks one
transition of each pair (a fact set closed under sigma preserved by t is by sigma(t)). Nothing here is assumed: a twin that does not
check is asked itself (only slower), and a system sigma does not preserve is proved as before.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import z3

from .encode import Encoder
from .work import checked


@dataclass
class Mirror:
    """sigma as a permutation of the state variables (an involution), and the transitions
    Houdini asks (`asked`); every other transition u is sigma's image of `twin[u]`, checked."""

    perm: list[int]
    asked: list[int]
    twin: dict[int, int]
    # every transition's image is a transition too (checked by Z3): only then is the set of
    # reachable states closed under sigma, so that a sampled state stands for its mirror
    closed: bool = False


def _twins(items, key) -> dict[int, int] | None:
    """Items of the two blocks paired in order (identity for items in no block)."""
    blocks = sorted({key(x) for x in items if key(x) is not None})
    if len(blocks) != 2:
        return None
    a = [i for i, x in enumerate(items) if key(x) == blocks[0]]
    b = [i for i, x in enumerate(items) if key(x) == blocks[1]]
    if len(a) != len(b):
        return None
    out = {i: i for i, x in enumerate(items) if key(x) is None}
    for i, j in zip(a, b):
        out[i], out[j] = j, i
    return out


def block_swap(enc: Encoder) -> list[int] | None:
    """The permutation of `enc`'s variables that swaps the two blocks' twins, read off the
    layout (roles and instances paired in order); None when the system has no such shape.
    Whether it is a symmetry is for Z3 (`mirror`)."""
    sysm, layout = enc.system, enc.layout
    roles = _twins(sysm.roles, lambda r: r.block)
    insts = _twins(sysm.instances, lambda i: i.block)
    if roles is None or insts is None:
        return None
    if any(sysm.instances[i].alloc != sysm.instances[j].alloc for i, j in insts.items()):
        return None
    nf = len(sysm.frozen)
    perm = list(range(len(enc.vars)))
    for i, j in insts.items():
        for f in range(4):
            perm[nf + 4 * i + f] = nf + 4 * j + f
    base = nf + 4 * len(sysm.instances)
    used: set[int] = set()
    for q, slot in enumerate(sysm.slots):
        match = [p for p, other in enumerate(sysm.slots) if p not in used
                 and other.kind == slot.kind and other.effect == slot.effect
                 and other.inst == insts[slot.inst]]
        if not match:
            return None
        used.add(match[0])
        perm[base + q] = base + match[0]
    starts = [entry["start"] for entry in layout.role_vars] + [len(enc.vars) - len(layout.queues)]
    for r, s in roles.items():
        a, b = layout.codes[r], layout.codes[s]
        if (a.role.single != b.role.single or a.loop_segments != b.loop_segments
                or [insts[x] for x in a.waited] != list(b.waited)
                or layout.counter_locals[r] != layout.counter_locals[s]
                or starts[r + 1] - starts[r] != starts[s + 1] - starts[s]):
            return None
        for o in range(starts[r + 1] - starts[r]):
            perm[starts[r] + o] = starts[s] + o
    queues = sorted(layout.queues)
    top = len(enc.vars) - len(queues)
    for n, r in enumerate(queues):
        if roles[r] not in layout.queues:
            return None
        perm[top + n] = top + queues.index(roles[r])
    if sorted(perm) != list(range(len(perm))) or any(perm[perm[i]] != i for i in perm) \
            or any(perm[i] != i for i in range(nf)) or perm == list(range(len(perm))):
        return None
    return perm


def mirror(enc: Encoder, comp, substitution, timeout_ms: int = 60_000) -> Mirror | None:
    """sigma = block_swap(enc) checked by Z3 a symmetry of the system as far as Houdini uses
    it: the parameters' constraints and construction facts preserved, and each transition
    either asked or the checked image of one asked. None when sigma does not exist or does
    not preserve the construction facts. `substitution(src, dst)` makes the substituting
    function (invariants.Substitution). Each query runs within the budget in force (`checked`:
    counted units); `timeout_ms` is only a wall-clock net (these are equalities of terms that
    differ by the order of their arguments, decided in a few units)."""
    perm = block_swap(enc)
    if perm is None:
        return None
    v = enc.vars
    sig = substitution(v, [v[perm[i]] for i in range(len(v))])

    hyp = z3.And(enc.init_body, *enc.sane)
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(hyp, z3.Not(sig(hyp)))
    if checked(s) != z3.unsat:
        return None
    # Twins are looked up by the values of guard and successor at a few random points (the
    # image of t evaluated at v is t's at sigma(v), mirrored); Z3 then checks each pair.
    rng = random.Random(0)
    points = [tuple(rng.randint(-2, 5) for _ in v) for _ in range(4)]
    flip = [tuple(p[perm[i]] for i in range(len(v))) for p in points]
    prints, images = [], []
    for _, pre, nxt in enc.steps:
        g, f = comp.function([pre], "bool"), comp.function(nxt)
        prints.append(tuple((bool(g(p)), f(p)) for p in points))
        images.append(tuple((bool(g(w)), tuple(f(w)[perm[i]] for i in range(len(v))))
                            for w in flip))
    asked: list[int] = []
    by_print: dict = {}
    twin: dict[int, int] = {}
    check = z3.Solver()
    check.set("timeout", timeout_ms)
    check.add(hyp)
    for u, (_, pre_u, nxt_u) in enumerate(enc.steps):
        found = None
        for t in by_print.get(images[u], ()):
            _, pre_t, nxt_t = enc.steps[t]
            same = z3.And(pre_u == sig(pre_t),
                          z3.Implies(pre_u, z3.And([nxt_u[i] == sig(nxt_t[perm[i]])
                                                    for i in range(len(v))])))
            check.push()
            check.add(z3.Not(same))
            r = checked(check)
            check.pop()
            if r == z3.unsat:
                found = t
                break
        if found is None:
            asked.append(u)
            by_print.setdefault(prints[u], []).append(u)
        else:
            twin[u] = found
    if not twin:
        return None
    return Mirror(perm, asked, twin, _closed(enc, check, sig, perm, asked, twin))


def _closed(enc: Encoder, check: z3.Solver, sig, perm: list[int], asked: list[int],
            twin: dict[int, int]) -> bool:
    """Is sigma's image of every asked transition a transition? A twin u is sigma(t) of the
    t it is paired with; an asked t that is no twin's pair must be its own image (a role in no
    block). Two blocks running one program in different orders (block b releasing its own
    block's slot first) are not closed: a state's mirror need not be reachable then."""
    paired = set(twin.values())
    n = len(enc.vars)
    for t in asked:
        if t in paired:
            continue
        _, pre, nxt = enc.steps[t]
        same = z3.And(pre == sig(pre),
                      z3.Implies(pre, z3.And([nxt[i] == sig(nxt[perm[i]]) for i in range(n)])))
        check.push()
        check.add(z3.Not(same))
        r = checked(check)
        check.pop()
        if r != z3.unsat:
            return False
    return True


def close(candidates: list, perm: list[int], variables, substitution
          ) -> tuple[list, dict[int, int]]:
    """The candidates with each one's mirror image (added where missing), and the map from a
    candidate's id to its image's."""
    sig = substitution(variables, [variables[perm[i]] for i in range(len(variables))])
    by_formula = {c.formula.get_id(): c for c in candidates}
    out = list(candidates)
    image: dict[int, int] = {}
    for c in list(candidates):
        f = sig(c.formula)
        other = by_formula.get(f.get_id())
        if other is None:
            other = type(c)(f, f"{c.text} (its mirror in the other block)")
            by_formula[f.get_id()] = other
            out.append(other)
        image[id(c)], image[id(other)] = id(other), id(c)
    return out, image
