"""The symbolic engine checked against model/semantics.py (for tests, never for verdicts).

`simulation_gaps` projects every reachable state of a concrete `System` onto one barrier class
(its instances, the in-flight deliveries to them, and for every thread its next operation on
them with its loop coordinate and what it observed) and checks that the class's counter system,
explored at the same parameter values, reaches that projection too. This is the claim the proofs
rest on: every class system over-approximates the real behaviour on its barriers.
"""

from __future__ import annotations

from typing import Mapping

import z3

from barrierproof.model.semantics import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX,
                                          EFFECT_ARRIVE, EXPECT_TX, ISSUE_ASYNC, ISSUE_TCGEN05,
                                          SEM_SIGNAL, SEM_WAIT, WAIT, WAIT_PARITY, WAIT_PHASE,
                                          System)
from barrierproof.checker.symbolic.classes import BarrierClass
from barrierproof.checker.symbolic.encode import J0, J1, UNJOINED, Encoder, SymState
from barrierproof.checker.symbolic.fragment import Fragment
from barrierproof.checker.symbolic.invariants import sample
from barrierproof.checker.symbolic.order import TauRun
from barrierproof.checker.symbolic.program import ClassBuilder
from barrierproof.checker.symbolic.terms import evaluate


class Projection:
    def __init__(self, frag: Fragment, cls: BarrierClass, builder: ClassBuilder, enc: Encoder,
                 system: System, values: Mapping[str, int], s: int | None):
        self.frag, self.cls, self.builder, self.enc = frag, cls, builder, enc
        self.system, self.values, self.s = system, dict(values), s
        self.run = TauRun(frag, system, values)
        self.sub = [(frag.params[n], z3.IntVal(values[n])) for n in frag.symbolic]
        for axis, v in system.grid_position.items():
            if axis in frag.grid_vars:
                self.sub.append((frag.grid_vars[axis], z3.IntVal(v)))
        if cls.ring is not None:
            self.sub.append((cls.s, z3.IntVal(s)))
            self.S = evaluate(cls.ring, self.sub)
        # system instance -> class instance
        self.to_class = {}
        for x, inst in enumerate(system.instances):
            if inst.alloc not in cls.allocs:
                continue
            if cls.ring is None:
                self.to_class[x] = cls.inst(inst.alloc, inst.index, inst.block)
            elif inst.index == (s,):
                self.to_class[x] = cls.inst(inst.alloc, None, inst.block)
        self.from_class = {c: x for x, c in self.to_class.items()}
        self.role_index = {code.role.name: r for r, code in enumerate(enc.codes)}

    def primary(self, agent: int, instr) -> int | None:
        sysm = self.system
        op = instr.op
        if op in (ARRIVE, ARRIVE_DROP, EXPECT_TX, ARRIVE_TX, COMPLETE_TX):
            return instr.target[0]
        if op in (WAIT, WAIT_PARITY, WAIT_PHASE, SEM_SIGNAL, SEM_WAIT):
            return instr.target
        own = sysm.agents[agent].block
        if op == ISSUE_ASYNC:
            if instr.target:
                return instr.target[0]
            insts = [sysm.slots[q].inst for q in instr.aux]
        elif op == ISSUE_TCGEN05:
            insts = list(sysm.arrival_sets[instr.aux])
        else:
            return None
        mine = [x for x in insts if sysm.instances[x].block == own]
        return (mine or insts or [None])[0]

    def thread(self, state, agent: int):
        """(role name, entry) of an agent in the class, or None when it has no class event."""
        sysm = self.system
        rows = self.run.annotations[agent]
        r = rows[0][0] if rows else self.run._role_of(sysm.agents[agent])
        role = self.frag.roles[r]
        if role.name not in self.role_index:
            return None
        code = self.enc.codes[self.role_index[role.name]]
        obs = []
        for c in code.waited:
            x = self.from_class[c]
            pos = sysm.seen_pos.get((agent, x))
            seen = state[pos] if pos is not None else -1
            phase = sysm.barrier(state, x)[0]
            obs.append(UNJOINED if seen < 0 else J0 if seen == phase else
                       J1 if seen == phase - 1 else 9)
        obs = tuple(obs)
        prog = sysm.programs[agent]
        for pc in range(state[agent], len(prog)):
            x = self.primary(agent, prog[pc])
            if x is None or x not in self.to_class:
                continue
            _, i, b, iteration = rows[pc]
            key = (role.name, i, b, self.to_class[x])
            if key not in self.builder.where:
                raise AssertionError(f"no class operation for {key}")
            seg, n = self.builder.where[key]
            cseg = code.role.segments[seg]
            if not cseg.loop:
                k = 0
            elif self.cls.ring is None:
                k = iteration + evaluate(self.builder.shifts[(role.name, i)], self.sub)
            else:
                c = evaluate(self.builder.offsets[(role.name, i)], self.sub)
                c -= (self.builder.lag_deltas.get((role.name, i)) or {b: 0})[b] or 0
                v = (iteration if iteration is not None else 0) + c
                assert (v - self.s) % self.S == 0, (v, self.s, self.S)
                k = (v - self.s) // self.S
            return role.name, (seg, k, n, obs)
        return role.name, ("done", obs)

    def view(self, state) -> tuple:
        sysm = self.system
        fields = []
        for c in range(len(self.cls.instances)):
            fields.append(sysm.barrier(state, self.from_class[c]))
        fly = []
        for slot in self.enc.system.slots:
            amount = evaluate(slot.amount, self.sub)
            n = 0
            if slot.kind == "tcgen05":
                for a in sysm.queue_agents:
                    for entry in state[sysm.queue_pos[a]]:
                        n += sum(1 for t in sysm.arrival_sets[entry]
                                 if self.to_class.get(t) == slot.inst)
            else:
                effect = EFFECT_ARRIVE if slot.effect == "arrive" else 0
                for q, sslot in enumerate(sysm.slots):
                    if sslot.effect == effect and self.to_class.get(sslot.inst) == slot.inst \
                            and sslot.amount == amount and sslot.kind == slot.kind:
                        n += state[sysm.slot_base + q]
            fly.append(n)
        roles: dict[str, list] = {code.role.name: [] for code in self.enc.codes}
        for a in range(sysm.n_agents):
            got = self.thread(state, a)
            if got is not None:
                roles[got[0]].append(got[1])
        return (tuple(fields), tuple(fly),
                tuple(tuple(sorted(roles[code.role.name], key=repr)) for code in self.enc.codes))


def abstract_view(enc: Encoder, state: tuple) -> tuple:
    st = SymState(enc.layout, list(state))
    fields = tuple((st.ph[i], st.pend[i], st.tx[i], st.exp[i]) for i in range(len(st.ph)))
    roles = []
    for r, code in enumerate(enc.codes):
        entries = []
        if code.role.single:
            p = enc.layout.single_positions[r][st.pos[r]]
            obs = tuple(st.obs[r][b] for b in code.waited)
            entries.append(_entry(code, p, st.k[r], 0, obs))
        else:
            for (p, sigma), c in zip(enc.layout.counter_locals[r], st.n[r]):
                entries += [_entry(code, p, st.k[r], p.d, sigma)] * c
        roles.append(tuple(sorted(entries, key=repr)))
    return fields, tuple(st.fly), tuple(roles)


def _entry(code, p, k, d, obs):
    if p.where == "head":
        return ("done", tuple(obs)) if p.seg == code.nseg else ("head", p.seg, tuple(obs))
    seg = code.role.segments[p.seg]
    return (p.seg, k[p.seg] + d if seg.loop else 0, p.pc, tuple(obs))


def concrete_states(system: System, limit: int = 200_000) -> list[tuple]:
    """Every state reachable without breaking a rule (a violating transition is terminal)."""
    init = system.initial_state()
    seen = {init}
    frontier = [init]
    while frontier and len(seen) < limit:
        nxt = []
        for state in frontier:
            if system.state_violations(state):
                continue
            for _, t, violation in system.successors(state):
                if violation is None and t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier = nxt
    return list(seen)


def simulation_gaps(frag: Fragment, systems, values: Mapping[str, int],
                    limit: int = 200_000) -> list[str]:
    """Projections of concrete reachable states that no class system reaches (empty: the
    over-approximation holds at these values)."""
    from barrierproof.model.semantics import compile_systems
    gaps = []
    for concrete in compile_systems(frag.kernel, values, races=False):
        states = concrete_states(concrete, limit)
        for cls, system, builder in systems:
            if not system.roles:
                continue
            enc = Encoder(system).build()
            slots = range(evaluate(cls.ring, [(frag.params[n], z3.IntVal(values[n]))
                                               for n in frag.symbolic])) if cls.ring is not None \
                else [None]
            for s in slots:
                proj = Projection(frag, cls, builder, enc, concrete, values, s)
                vals = [v for v in frag.valuations(cls, system, values)
                        if cls.ring is None or v[len(frag.symbolic) + len(frag.grid_vars)] == s]
                if frag.grid_vars:
                    pos = [concrete.grid_position[a] for a in frag.grid_vars]
                    vals = [v for v in vals if v[len(frag.symbolic):len(frag.symbolic) +
                                                  len(frag.grid_vars)] == pos]
                abstract = sample(enc, vals, limit=400_000, budget=120.0)
                reached = {abstract_view(enc, a) for a in abstract.states}
                for state in states:
                    view = proj.view(state)
                    if view not in reached:
                        gaps.append(f"{cls.name} s={s}: {view}")
                        break
    return gaps
