"""A class system that is an already proved one renamed: the proof carried over, checked.

A ping-pong kernel's two halves run one program on two sets of barriers: the halves
partition (partition.py) makes a class of each half, and their systems differ only in the
names of their barriers and of the role serving each half -- the same parameters, the same
layout, the same transitions in the same order. rho, the renaming of one system's state
variables onto the other's position by position (the parameters onto themselves), is a
bijection; when rho maps the proved system's hypotheses (the parameters' constraints and the
construction facts) onto the other's and Z3 shows that, under those hypotheses, it maps each
initial value, each transition's guard and successor and each error condition onto the
other's, then every obligation Houdini discharged for the proved system (initiation,
consecution of each transition, no error state) maps under rho onto the same obligation of the
other with rho(invariant), and a valid formula stays valid under a bijective renaming of its
variables. So rho(invariant) is an inductive invariant of the other system that excludes its
errors, and no Houdini runs there. Anything that does not check (a different order, one
half's wait on the wrong phase) leaves the class to be proved on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import z3

from .encode import Encoder
from .invariants import Candidate, Substitution
from .work import checked


@dataclass
class Proved:
    """A class proved by Houdini: its system and the invariant Z3 checked there."""

    name: str
    enc: Encoder
    invariant: list[Candidate]


def _terms(enc: Encoder) -> list:
    """What Houdini's obligations are made of, beside the hypotheses, in order."""
    out = list(enc.init_head)
    for _, pre, nxt in enc.steps:
        out.append(pre)
        out.extend(nxt)
    out.extend(c for _, c in enc.bad)
    return out


def _shape(enc: Encoder) -> tuple:
    return (len(enc.vars), len(enc.system.frozen), len(enc.init_head), len(enc.sane),
            [len(nxt) for _, _, nxt in enc.steps], len(enc.bad))


def renaming(src: Encoder, dst: Encoder, timeout_ms: int = 60_000) -> Substitution | None:
    """rho (src's variables onto dst's, position by position) when it maps src's system onto
    dst's as the module says, checked; None otherwise. Terms equal after renaming are the
    same Z3 term (hash-consed) and need no query; any other pair is asked of Z3 within the
    budget in force (`checked`)."""
    if _shape(src) != _shape(dst):
        return None
    nf = len(src.system.frozen)
    if any(not a.eq(b) for a, b in zip(src.vars[:nf], dst.vars[:nf])):
        return None                     # the parameters are themselves, not renamed
    if len({v.get_id() for v in dst.vars}) != len(dst.vars):
        return None                     # a bijection
    rho = Substitution(src.vars, dst.vars)
    hyp_src = z3.And(src.init_body, *src.sane)
    hyp_dst = z3.And(dst.init_body, *dst.sane)
    s = z3.Solver(ctx=hyp_dst.ctx)      # the terms' context (a proof runs in its own)
    s.set("timeout", timeout_ms)
    mapped = rho(hyp_src)
    if not mapped.eq(hyp_dst):
        s.push()
        s.add(mapped != hyp_dst)
        if checked(s) != z3.unsat:
            return None
        s.pop()
    s.add(hyp_dst)
    for a, b in zip(_terms(src), _terms(dst)):
        image = rho(a)
        if image.eq(b):
            continue
        s.push()
        s.add(image != b)
        r = checked(s)
        s.pop()
        if r != z3.unsat:
            return None
    return rho


def _names(src: Encoder, dst: Encoder):
    """A fact's text with src's variable names replaced by dst's (Z3's printer is slow on
    thousands of facts)."""
    pairs = {}
    for a, b in zip(src.vars, dst.vars):
        a, b = str(a).split("!", 1)[-1], str(b).split("!", 1)[-1]
        if a != b:
            pairs[a] = b
    if not pairs:
        return lambda text: text
    pattern = re.compile("|".join(map(re.escape, sorted(pairs, key=len, reverse=True))))
    return lambda text: pattern.sub(lambda m: pairs[m.group(0)], text)


def carried_over(dst: Encoder, proved: list[Proved]) -> tuple[list[Candidate], str] | None:
    """The invariant of a proved class renamed onto `dst` (with the proved class's name), or
    None when no proved class is `dst` renamed."""
    for src in reversed(proved):
        rho = renaming(src.enc, dst)
        if rho is not None:
            names = _names(src.enc, dst)
            return [Candidate(rho(c.formula), names(c.text)) for c in src.invariant], src.name
    return None


def renamed_note(name: str, source: str) -> str:
    """What the verdict says of a class proved as another renamed."""
    return (f"renamed class: {name} proved by the invariant of {source} renamed (renamed.py: a "
            "bijection of their state variables, parameters fixed, checked by Z3 to map "
            "hypotheses, initial states, transitions and error conditions onto each other)")
