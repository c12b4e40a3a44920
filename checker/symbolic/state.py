"""The state of a class system as Z3 terms: the names and order of its variables (`Layout`),
each role's class program as positions (`RoleCode`, `Pos`), and a state as terms (`SymState`).
encode.py builds the initial condition, the transitions and the error conditions over it
(its docstring lists the state variables).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import z3

from . import queue_order
from .counters import J0, J1, UNJOINED, WAIT, WAITS, K, CounterSystem, COp, CRole


def TRUE() -> z3.BoolRef:       # functions: the terms of the Z3 context in force (own_context)
    return z3.BoolVal(True)


def FALSE() -> z3.BoolRef:
    return z3.BoolVal(False)


@dataclass(frozen=True)
class Pos:
    """('head', j): before segment j (j == number of segments: done); ('at', j, pc) at the
    operation pc of segment j; d is the loop offset (counter roles only)."""

    where: str
    seg: int
    pc: int = 0
    d: int = 0


def _subst(term, frozen_src: Sequence, frozen_dst: Sequence, k=None):
    pairs = [(a, b) for a, b in zip(frozen_src, frozen_dst) if not a.eq(b)]
    if k is not None:
        pairs.append((K(), k))
    return z3.substitute(term, *pairs) if pairs else term


# ----------------------------------------------------------------------------------------------
# Roles
# ----------------------------------------------------------------------------------------------

class RoleCode:
    """Static facts about one role's class program."""

    def __init__(self, role: CRole, index: int):
        self.role = role
        self.index = index
        self.waited = sorted({op.targets[0] for seg in role.segments for op in seg.body
                              if op.kind in WAITS})
        # instances this role waits on with barrier_wait (held to BP103 at exit; parity
        # waiters follow the hardware, where an unobserved last completion is harmless)
        self.pallas_waited = {op.targets[0] for seg in role.segments for op in seg.body
                              if op.kind == WAIT}
        self.nseg = len(role.segments)
        self.loop_segments = [j for j, s in enumerate(role.segments) if s.loop]
        self.done = Pos("head", self.nseg)

    def op(self, pos: Pos) -> COp | None:
        return self.role.segments[pos.seg].body[pos.pc] if pos.where == "at" else None

    def before(self, pos: Pos, j: int) -> bool:
        """Is a thread at `pos` still before segment j?"""
        return pos.seg <= j if pos.where == "head" else pos.seg < j

    def positions(self, offsets: int = 0) -> list[Pos]:
        out = [Pos("head", j) for j in range(self.nseg + 1)]
        for j, seg in enumerate(self.role.segments):
            for d in range(offsets + 1 if seg.loop else 1):
                out += [Pos("at", j, pc, d) for pc in range(len(seg.body))]
        return out

    def next_of(self, pos: Pos) -> list[tuple[str, Pos]]:
        """Successor positions after executing or skipping the operation at pos:
        ("same", p) within the iteration, ("iter", p) next iteration, ("leave", head)."""
        seg = self.role.segments[pos.seg]
        if pos.pc + 1 < len(seg.body):
            return [("same", Pos("at", pos.seg, pos.pc + 1, pos.d))]
        leave = Pos("head", pos.seg + 1)
        if not seg.loop:
            return [("leave", leave)]
        return [("iter", Pos("at", pos.seg, 0, pos.d + 1)), ("leave", leave)]


class Layout:
    """Names and order of the state variables."""

    def __init__(self, system: CounterSystem):
        self.system = system
        self.codes = [RoleCode(role, r) for r, role in enumerate(system.roles)]
        names = [str(v) for v in system.frozen]
        for inst in system.instances:
            names += [f"ph[{inst.name}]", f"pend[{inst.name}]", f"tx[{inst.name}]",
                      f"exp[{inst.name}]"]
        for q, slot in enumerate(system.slots):
            names.append(f"fly[{slot.kind}->{system.instances[slot.inst].name}#{q}]")
        self.role_vars: list[dict] = []
        self.counter_locals: list[list[tuple[Pos, tuple[int, ...]]]] = []
        for code in self.codes:
            rname = code.role.name
            entry: dict = {"k": {}, "start": len(names)}
            for j in code.loop_segments:
                names.append(f"k[{rname},{j}]")
            if code.role.single:
                self.counter_locals.append([])
                names.append(f"pos[{rname}]")
                names += [f"obs[{rname},{system.instances[b].name}]" for b in code.waited]
                self.positions = None
            else:
                locs = [(p, sigma) for sigma in
                        itertools.product((UNJOINED, J0, J1), repeat=len(code.waited))
                        for p in code.positions(system.offset_bound)]
                self.counter_locals.append(locs)
                names += [f"n[{rname},{_pos_name(p)}{_sig_name(s)}]" for p, s in locs]
            self.role_vars.append(entry)
        self.queues = queue_order.queues(system)
        names += [f"newest[{system.roles[r].name}]" for r in sorted(self.queues)]
        self.names = names
        self.single_positions = [code.positions(0) if code.role.single else []
                                 for code in self.codes]
        self.single_index = [{p: i for i, p in enumerate(ps)} for ps in self.single_positions]
        self.counter_index = [{loc: i for i, loc in enumerate(locs)}
                              for locs in self.counter_locals]

    def describe_pos(self, r: int, value: int) -> str:
        return _pos_name(self.single_positions[r][value])


def _pos_name(p: Pos) -> str:
    return f"h{p.seg}" if p.where == "head" else f"s{p.seg}p{p.pc}" + (f"d{p.d}" if p.d else "")


def _sig_name(sigma: tuple[int, ...]) -> str:
    return ("/" + "".join("UAB"[s] for s in sigma)) if sigma else ""


class SymState:
    """The state as Z3 terms; transitions build new SymStates functionally."""

    def __init__(self, layout: Layout, values: Sequence[z3.ArithRef]):
        self.layout = layout
        sysm = layout.system
        it = iter(values)
        self.frozen = [next(it) for _ in sysm.frozen]
        self.ph, self.pend, self.tx, self.exp = [], [], [], []
        for _ in sysm.instances:
            self.ph.append(next(it))
            self.pend.append(next(it))
            self.tx.append(next(it))
            self.exp.append(next(it))
        self.fly = [next(it) for _ in sysm.slots]
        self.k: list[dict[int, z3.ArithRef]] = []
        self.pos: list[z3.ArithRef | None] = []
        self.obs: list[dict[int, z3.ArithRef]] = []
        self.n: list[list[z3.ArithRef]] = []
        for r, code in enumerate(layout.codes):
            self.k.append({j: next(it) for j in code.loop_segments})
            if code.role.single:
                self.pos.append(next(it))
                self.obs.append({b: next(it) for b in code.waited})
                self.n.append([])
            else:
                self.pos.append(None)
                self.obs.append({})
                self.n.append([next(it) for _ in layout.counter_locals[r]])
        self.newest = {r: next(it) for r in sorted(layout.queues)}

    def vector(self) -> list[z3.ArithRef]:
        out = list(self.frozen)
        for i in range(len(self.ph)):
            out += [self.ph[i], self.pend[i], self.tx[i], self.exp[i]]
        out += self.fly
        for r, code in enumerate(self.layout.codes):
            out += [self.k[r][j] for j in code.loop_segments]
            if code.role.single:
                out.append(self.pos[r])
                out += [self.obs[r][b] for b in code.waited]
            else:
                out += self.n[r]
        out += [self.newest[r] for r in sorted(self.newest)]
        return out

    def copy(self) -> "SymState":
        new = SymState.__new__(SymState)
        new.layout = self.layout
        new.frozen = list(self.frozen)
        new.ph, new.pend, new.tx, new.exp = (list(self.ph), list(self.pend), list(self.tx),
                                             list(self.exp))
        new.fly = list(self.fly)
        new.k = [dict(k) for k in self.k]
        new.pos = list(self.pos)
        new.obs = [dict(o) for o in self.obs]
        new.n = [list(c) for c in self.n]
        new.newest = dict(self.newest)
        return new
