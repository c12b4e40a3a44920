"""The class program: one role's items translated into the counter program of one barrier class.

Inside a loop over i, the slot-s operations of a ring class happen at the iterations
v = i + c that are lattice points v = s + k*S; a comparison of v with a threshold x becomes a
comparison of k with U(x) = #{k >= 0 : s + k*S < x}, a fresh integer about which the module
states only facts that hold for every value: U(x) >= 0, U(x) >= 1 iff x > s, monotonicity, and
U(y) - U(x) <= m (>= m) when 0 <= x and y - x <= m*S (>= m*S). So the class program stays linear
and over-approximates the real slot-s behaviour. A ring of a concrete size S also gets U's
definition itself, still linear: U(x) = 0 when x <= s, else S*(U(x) - 1) < x - s <= S*U(x)
(tests/test_prove_drain.py checks it against the count on a grid); a drain's phase
`(steps - 1) // S` is then the lap count of the last slot it waits on.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Mapping

import z3

from ...model import kinds
from ...model.ir import MAX_ARRIVALS, MAX_TX, BinOp, Expr, UnOp, free_vars
from ...model.grid import peer_blocks
from .classes import BarrierClass, ring_lhs
from .counters import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX, ISSUE, K, WAIT,
                       WAIT_PARITY, WAIT_PHASE, AsyncSlot, CInst, COp, CounterSystem, CRole,
                       CSegment)
from .hw import SYNC_ARRIVAL, is_named_barrier
from .lifetimes import peer_exit_obligations
from .peer_exit import ENCODED as PEER_EXIT_ENCODED
from .semaphores import semaphore_cops
from .strides import ring_step_reason
from .plain import Plain as _Plain
from .queue_tail import drained_slots
from .races import access_cops, attach_async, attach_queued
from .terms import CMP, Unsupported, evaluate, linear_in, nonlinear, z_bool, z_int

if TYPE_CHECKING:
    from .fragment import BodyOp, Fragment, Item, Role


def exact_threshold(x, u, s, S) -> list[z3.BoolRef]:
    """U(x) = #{k >= 0 : s + k*S < x} for a ring of concrete size S (linear in x, s, U)."""
    return [z3.Implies(x <= s, u == 0),
            z3.Implies(x > s, z3.And(S * (u - 1) < x - s, x - s <= S * u))]


class ClassBuilder:
    """Translation of one role's items into the class program of one barrier class."""

    def __init__(self, frag: "Fragment", cls: BarrierClass):
        self.frag = frag
        self.cls = cls
        self.slots: list[AsyncSlot] = []
        self._slot_keys: dict = {}
        self.holds: list = []           # queued MMAs' cells held to arrivals (queue_holds.py)

    # -- thresholds U(x) ----------------------------------------------------------------------

    def U(self, x: z3.ArithRef) -> z3.ArithRef:
        x = z3.simplify(x)
        for t, u in self.cls.thresholds:
            if t.eq(x) or self.frag.solver.equal(t, x):
                return u
        u = z3.Int(f"U[{x}]")
        self.cls.thresholds.append((x, u))
        return u

    def facts(self) -> list[z3.BoolRef]:
        """What holds of U(x) = #{k >= 0 : s + k*S < x} for every value (see module doc)."""
        S, s = self.cls.ring, self.cls.s
        out = []
        th = self.cls.thresholds
        for x, u in th:
            out += [u >= 0, (u >= 1) == (x > s)]
        for (x, u), (y, w) in itertools.permutations(th, 2):
            out.append(z3.Implies(y >= x, w >= u))
            for m in (1, 2):
                out.append(z3.Implies(z3.And(x >= 0, y - x <= m * S), w - u <= m))
                out.append(z3.Implies(z3.And(x >= 0, y - x >= m * S), w - u >= m))
        if z3.is_int_value(z3.simplify(S)):
            for x, u in th:
                out += exact_threshold(x, u, s, z3.simplify(S))
        return out

    # -- slots ---------------------------------------------------------------------------------

    def slot(self, effect: str, inst: int, amount, kind: str) -> int:
        key = (effect, inst, z3.simplify(amount).sexpr(), kind)
        if key not in self._slot_keys:
            self._slot_keys[key] = len(self.slots)
            self.slots.append(AsyncSlot(effect, inst, amount, kind))
        return self._slot_keys[key]

    # -- expressions in a loop body ----------------------------------------------------------------

    def context(self, role: Role, item: Item):
        """A translator for the item's expressions: (int, bool) functions of IR expressions."""
        frag = self.frag
        env = role.env
        if item.kind != "loop":
            return _Plain(frag, env, None)
        var = item.loop.var
        if self.cls.ring is None:
            # the class coordinate is the tau key i + shift of the iteration
            return _Plain(frag, env, var, item.shift_term())
        c = self.offset(role, item)
        return _Lattice(frag, self, env, var, c)

    def op_context(self, role: Role, item: Item, ctx, delta: int | None):
        """The translator of one operation of a ring loop whose offset is c - delta."""
        if not delta:
            return ctx
        return _Lattice(self.frag, self, role.env, item.loop.var, z3.simplify(ctx.c - delta))

    def offset(self, role: Role, item: Item) -> z3.ArithRef:
        """The loop's reference offset c: the largest c_j of its operations' ring indices
        (i + c_j) % S in this class (see op_offsets)."""
        return self.op_offsets(role, item)[0]

    def op_offsets(self, role: Role, item: Item) -> tuple[z3.ArithRef, list[int | None]]:
        """(c, [delta_j]): every ring index of this class in operation j of the loop is
        (i + c - delta_j) % S, with delta_j a concrete integer >= 0 (None: no ring access).

        Slot s sees operation j at the iterations i = s - c + delta_j + k*S (its lap k). When
        every delta_j < S (required below), lap k's events of all operations lie in the window
        of iterations [s - c + k*S, s - c + k*S + S) and laps do not interleave: lap by lap,
        operations by (delta_j, program order). A ring pipeline that releases slot i - 1
        after waiting for slot i (CUTLASS's release lag) has two offsets one apart."""
        frag = self.frag
        found = None
        offs: list = []
        for bop in item.body:
            here = None
            for ref in self.class_refs(bop.op):
                lhs = self.ring_lhs(ref, role.env)
                lin = linear_in(lhs, item.loop.var, role.env, frag.solver)
                if lin is None or lin[0] != 1:
                    raise Unsupported(ring_step_reason(ref, item.loop.var, lin, self.cls.ring),
                                      bop.op.loc)
                if here is None:
                    here = lin[1]
                elif not frag.solver.equal(here, lin[1]):
                    raise Unsupported(f"`{bop.op.describe()}` uses two different ring offsets",
                                      bop.op.loc)
            if here is not None and found is None:
                found = here
            offs.append(here)
        if found is None:
            return z3.IntVal(0), [None] * len(offs)
        diffs = []
        for here in offs:
            if here is None:
                diffs.append(None)
                continue
            d = z3.simplify(here - found)
            if not z3.is_int_value(d):
                raise Unsupported("one loop uses ring offsets on the same barriers"
                                  + (" and buffers" if self.cls.buffers else "")
                                  + " that differ by a non-constant amount", item.loop.loc)
            diffs.append(d.as_long())
        top = max(d for d in diffs if d is not None)
        deltas = [None if d is None else top - d for d in diffs]
        spread = max(d for d in deltas if d is not None)
        if spread:
            frag.require(self.cls.ring >= spread + 1,
                         f"the ring of {self.cls.ring} slots is deeper than the {spread} "
                         f"iteration(s) between the ring offsets of loop {item.loop.var} "
                         f"({item.loop.loc})")
        return z3.simplify(found + top), deltas

    def class_refs(self, op) -> list:
        """The operation's references into this class: its barrier, and the buffers of the
        class it reads or writes (races.py)."""
        out = [op.barrier] if op.barrier is not None and op.barrier.alloc in self.cls.allocs \
            else []
        if self.cls.buffers:
            out += [m for m in op.reads + op.writes if m.alloc in self.cls.buffers]
        return out

    def ring_lhs(self, ref, env) -> Expr:
        return ring_lhs(self.frag, ref, env, self.cls.ring)

    # -- operations -----------------------------------------------------------------------------

    def targets(self, role: Role, ref, ctx) -> list[tuple[z3.BoolRef, int]]:
        """(guard, instance) pairs an operation on `ref` may address in this class."""
        alloc = ref.alloc
        frag = self.frag
        block = role.block
        if ref.block is not None:
            block = tuple(frag.concrete(c, "a remote block", role.env) for c in ref.block)
            if block not in frag.blocks:
                raise Unsupported(f"`{ref}` names a block outside the cluster")
        if self.cls.ring is not None:
            return [(z3.BoolVal(True), self.cls.inst(alloc, None, block))]
        shape = [frag.concrete(d, "num_barriers") for d in alloc.shape]
        if not ref.index:
            return [(z3.BoolVal(True), self.cls.inst(alloc, (0,) * len(shape), block))]
        terms = [ctx.int(i) for i in ref.index]
        out = []
        for combo in itertools.product(*[range(n) for n in shape]):
            g = z3.simplify(z3.And([t == c for t, c in zip(terms, combo)]))
            if z3.is_false(g):
                continue
            out.append((g, self.cls.inst(alloc, combo, block)))
        # every reachable index must be one of them (BP120 otherwise)
        inside = z3.And([z3.And(t >= 0, t < n) for t, n in zip(terms, shape)])
        ctx.require_in_range(inside, ref)
        return out

    def fan_out(self, inst: int) -> tuple[int, ...]:
        alloc, index, block = self.cls.instances[inst]
        if not alloc.cluster:
            return (inst,)
        frag = self.frag
        if alloc.leader_tracked:    # every arrival goes to block 0 along the collective axis
            d = frag.cluster_axes.index(alloc.collective_axes[0])
            return (self.cls.inst(alloc, index, block[:d] + (0,) + block[d + 1:]),)
        out = [inst]
        for axis in alloc.collective_axes:
            d = frag.cluster_axes.index(axis)
            for coord in range(frag.cluster_shape[d]):
                if coord != block[d]:
                    other = block[:d] + (coord,) + block[d + 1:]
                    out.append(self.cls.inst(alloc, index, other))
        return tuple(out)

    def peers(self, block, axes) -> list[tuple]:
        frag = self.frag
        return peer_blocks(block, [frag.cluster_axes.index(a) for a in axes],
                           frag.cluster_shape)

    def cops(self, role: Role, item: Item, bop: BodyOp, ctx, rank: int) -> list[COp]:
        op = bop.op
        prim = kinds.lookup(op.kind)
        if prim is not None and prim.unmodelled:     # no effect here; BP190, reported statically
            return []
        ref = op.barrier
        if self.cls.buffers and (op.reads or op.writes):
            made = access_cops(self, role, item, bop, ctx, rank)
            if made is not None:
                return made
        if ref is None or ref.alloc not in self.cls.allocs:
            return []
        guard = ctx.guard(bop.conds)
        out = self._cops(role, item, bop, ctx, rank, guard, ref)
        if self.cls.buffers and (op.reads or op.writes):
            attach_async(self, role, op, ctx, out)
        attach_queued(self, role, item, bop, out)
        return out

    def _cops(self, role, item, bop, ctx, rank, guard, ref) -> list[COp]:
        op = bop.op
        if ref.alloc.semaphore:     # one counter for the cluster, whichever block names it
            inst = self.cls.inst(ref.alloc, (0,), self.frag.blocks[0])
            return semaphore_cops(self, op, ctx, guard, rank, inst)
        prim = kinds.lookup(op.kind)
        encode = _ENCODINGS.get(prim.counter) if prim is not None else None
        out = []
        for g, inst in self.targets(role, ref, ctx):
            gg = z3.simplify(z3.And(guard, g))
            if z3.is_false(gg):
                continue
            if encode is None:
                raise Unsupported(f"operation {op.kind} is outside the supported fragment",
                                  op.loc)
            out.append(encode(self, role, op, ctx, inst, gg, rank, prim.counter))
            out[-1].primary = inst
        return out

    # -- the counter-program op of each `Primitive.counter` (kinds.COUNTER_OPS) ---------------
    # (role, op, ctx, instance, guard, rank, counter op) -> COp

    def _arrive(self, role, op, ctx, inst, gg, rank, how) -> COp:
        text = op.describe()
        count = ctx.int(op.count)
        self.frag.require_always(z3.And(count >= 1, count <= MAX_ARRIVALS),
                                 f"the arrival count of `{text}` is within "
                                 f"1..{MAX_ARRIVALS}", ctx)
        return COp(ARRIVE, self.fan_out(inst), count, guard=gg, rank=rank, text=text,
                   sync=op.name == SYNC_ARRIVAL)

    def _arrive_drop(self, role, op, ctx, inst, gg, rank, how) -> COp:
        return COp(ARRIVE_DROP, self.fan_out(inst), z3.IntVal(1), guard=gg, rank=rank,
                   text=op.describe())

    def _tx(self, role, op, ctx, inst, gg, rank, how) -> COp:
        text = op.describe()
        nbytes = ctx.int(op.bytes)
        self.frag.require_always(z3.And(nbytes >= 0, nbytes <= MAX_TX),
                                 f"the byte count of `{text}` is within 0..{MAX_TX}", ctx)
        code = {"expect_tx": EXPECT_TX, "arrive_tx": ARRIVE_TX, "complete_tx": COMPLETE_TX}[how]
        return COp(code, self.fan_out(inst), nbytes, guard=gg, rank=rank, text=text)

    def _wait(self, role, op, ctx, inst, gg, rank, how) -> COp:
        text = op.describe()
        if op.barrier.block is not None and self.cls.instances[inst][2] != role.block:
            raise Unsupported("a wait on another block's barrier (BP112)", op.loc)
        if how == "wait_parity" and op.phase is not None:
            return COp(WAIT_PHASE, (inst,), phase=ctx.int(op.phase), guard=gg, rank=rank,
                       text=text)
        parity = ctx.int(op.parity, parity=True) if how == "wait_parity" else None
        return COp(WAIT if how == "wait" else WAIT_PARITY, (inst,), parity=parity, guard=gg,
                   rank=rank, text=text)

    def _copy(self, role, op, ctx, inst, gg, rank, how) -> COp:
        """A copy's bytes land on every block it reaches, an even share each; "copy" also
        arrives (arrive.expect_tx) at issue, "landing" only completes them."""
        text = op.describe()
        nbytes = ctx.int(op.bytes)
        self.frag.require_always(z3.And(nbytes >= 0, nbytes <= MAX_TX),
                                 f"the byte count of `{text}` is within 0..{MAX_TX}", ctx)
        alloc, index, block = self.cls.instances[inst]
        peers = self.peers(block, op.collective_axes)
        share = z3.simplify(nbytes / len(peers)) if len(peers) > 1 else nbytes
        if len(peers) > 1:
            self.frag.require_always(nbytes % len(peers) == 0,
                                     f"`{text}` splits evenly among {len(peers)} blocks", ctx)
        slots = tuple(self.slot("tx", self.cls.inst(alloc, index, p), share, "tma")
                      for p in peers)
        arrive = (inst,) if how == "copy" else ()
        return COp(ISSUE, arrive, nbytes, slots=slots, guard=gg, rank=rank, text=text)

    def _async_arrival(self, role, op, ctx, inst, gg, rank, how) -> COp:
        return COp(ISSUE, (), z3.IntVal(0),
                   slots=(self.slot("arrive", inst, z3.IntVal(1), "async"),),
                   guard=gg, rank=rank, text=op.describe())

    def _tcgen05(self, role, op, ctx, inst, gg, rank, how) -> COp:
        alloc, index, block = self.cls.instances[inst]
        targets = [inst]
        if op.collective_axes:
            targets = [self.cls.inst(alloc, index, p)
                       for p in self.peers(role.block, op.collective_axes)]
        slots = tuple(self.slot("arrive", t, z3.IntVal(1), "tcgen05") for t in targets)
        return COp(ISSUE, (), z3.IntVal(0), slots=slots, guard=gg, rank=rank,
                   text=op.describe())

    def segments(self, role: Role) -> list[CSegment]:
        """The role's class program; `self.where[(role, item, op, instance)]` records where each
        operation landed (segment, index) for the cross-checks against model/semantics.py."""
        if not hasattr(self, "where"):
            self.where = {}
            self.offsets = {}
            self.lag_deltas = {}
            self.shifts = {}
            self.group_base = {}
        segs = []
        for i, item in enumerate(role.items):
            if item.kind not in ("loop", "op"):
                continue
            ctx = self.context(role, item)
            lagged = self.cls.ring is not None and item.kind == "loop"
            deltas = self.op_offsets(role, item)[1] if lagged else [None] * len(item.ops)
            spread = max([d or 0 for d in deltas] + [0])
            cops = []
            placed = []
            for b, bop in enumerate(item.ops):
                octx = self.op_context(role, item, ctx, deltas[b])
                made = self.cops(role, item, bop, octx, item.ranks[b])
                if self.cls.ring is not None:
                    d = deltas[b] or 0
                    for cop in made:
                        # tau key of lap k: i + shift = (the loop's lap key) + delta, and
                        # delta < S: compare laps, then deltas, then ranks
                        cop.rank = (d, cop.rank)
                        if spread:               # the laps of this operation's offset only
                            c, trip = octx.c, z_int(item.loop.trip, role.env)
                            cop.guard = z3.simplify(z3.And(cop.guard, K() >= self.U(c),
                                                           K() < self.U(c + trip)))
                for cop in made:
                    placed.append((b, cop, deltas[b] or 0))
                cops += made
            if not cops:
                continue
            if lagged and any(d for _, _, d in placed):
                # lap by lap, operations by (delta, program order)
                placed.sort(key=lambda p: (p[2], p[0]))
                cops = [cop for _, cop, _ in placed]
                self.lag_deltas[(role.name, i)] = deltas
            placed = [(b, cop) for b, cop, _ in placed]
            for n, (b, cop) in enumerate(placed):
                self.where[(role.name, i, b, cop.primary)] = (len(segs), n)
            if self.cls.ring is not None:
                self.offsets[(role.name, i)] = ctx.c if item.kind == "loop" else \
                    z_int(self.ring_lhs(self.class_refs(item.op)[0], role.env), role.env)
            if item.kind == "loop":
                self.shifts[(role.name, i)] = item.shift_term()
                if self.cls.ring is not None:
                    # Loops of one tau group are compared by lap k here, i.e. by v = i + c;
                    # tau compares i + shift. Both agree only if c - shift is the same for
                    # every loop of the group that uses the class.
                    base = z3.simplify(ctx.c - item.shift_term())
                    seen = self.group_base.setdefault(item.group, base)
                    if seen is not base and not self.frag.solver.equal(seen, base):
                        raise Unsupported(f"internal: the static order compares loops of "
                                          f"{self.cls.name} at different ring offsets",
                                          item.loop.loc)
            guard = _Plain(self.frag, role.env, None).guard(item.conds)
            if item.kind == "loop":
                trip = z_int(item.loop.trip, role.env)
                if nonlinear(trip):
                    raise Unsupported(f"trip count `{item.loop.trip}` is not linear",
                                      item.loop.loc)
                if self.cls.ring is None:
                    sh = item.shift_term()
                    lo, hi = z3.simplify(sh), z3.simplify(trip + sh)
                else:
                    c = ctx.c
                    self._positions_start_at_zero(role, item, c, trip, deltas)
                    lo, hi = self.U(c - spread), self.U(c + trip)
                segs.append(CSegment(True, cops, item.group, guard, lo, hi,
                                     text=f"loop {item.loop.var} ({item.loop.loc})"))
            elif self.cls.ring is not None:
                # a single ring access c % S outside loops: a loop over [c, c + 1)
                ref = self.class_refs(item.op)[0]
                lhs = self.ring_lhs(ref, role.env)
                c = z_int(lhs, role.env)
                self._lattice_starts_at_zero(c, item.op.loc, guard)
                segs.append(CSegment(True, cops, item.group, guard, self.U(c), self.U(c + 1),
                                     text=item.op.describe(), keyed=False))
            else:
                segs.append(CSegment(False, cops, item.group, guard, text=item.op.describe()))
        return segs


    def _positions_start_at_zero(self, role: Role, item: Item, c, trip, deltas) -> None:
        """Every ring position i + c - delta_j a loop's operation j reaches when it runs is
        >= 0 (U counts laps k >= 0, so a negative one would be lost): either c - delta_j >= 0,
        or the operation's own conditions leave out the iterations where it is negative (a
        release lag's `when i >= 1: arrive(empty[i - 1])`)."""
        i = z3.Int(f"·{item.loop.var}")
        env = {**role.env, item.loop.var: i}
        for bop, delta in zip(item.ops, deltas):
            if delta is None or self.frag.solver.valid(c - delta >= 0):
                continue
            runs = z3.And([0 <= i, i < trip] + [z_bool(e, env) if pos else z3.Not(z_bool(e, env))
                                                for e, pos in bop.conds])
            if not self.frag.solver.valid(z3.Implies(runs, i + c - delta >= 0)):
                raise Unsupported(f"the ring position {item.loop.var} + ({z3.simplify(c - delta)})"
                                  f" may be negative in {self.cls.name}", bop.op.loc)

    def _lattice_starts_at_zero(self, c, loc, guard=True) -> None:
        """Laps are counted from slot position 0 (U counts k >= 0): a ring position i + c
        that can be negative would lose its first iterations, so it is outside the fragment
        (a position negative only where the op's own conditions leave it out is not reached:
        the drain `when k_tiles > 0: wait(done[(k_tiles - 1) % S])`)."""
        if not self.frag.solver.valid(z3.Implies(guard, c >= 0)):
            raise Unsupported(f"the ring position i + ({z3.simplify(c)}) may be negative "
                              f"in {self.cls.name}", loc)


class _Lattice(_Plain):
    """Expressions in a loop whose ring accesses happen at v = i + c = s + k*S."""

    def __init__(self, frag, builder: ClassBuilder, env, var, c):
        super().__init__(frag, env, None)
        self.builder = builder
        self.var = var
        self.c = c
        self.S = builder.cls.ring
        self.s = builder.cls.s

    def free(self, e) -> bool:
        return self.var not in free_vars(e)

    def int(self, e, parity=False):
        if self.free(e):
            return super().int(e, parity)
        if isinstance(e, BinOp) and e.op in ("//", "%") and self.free(e.rhs):
            rhs = z_int(e.rhs, self.env)
            if self.frag.solver.equal(rhs, self.S):
                lin = linear_in(e.lhs, self.var, self.env, self.frag.solver)
                if lin is not None and lin[0] == 1 and self.frag.solver.equal(lin[1], self.c):
                    return K() if e.op == "//" else self.s
                d = None if lin is None or lin[0] != 1 else z3.simplify(lin[1] - self.c)
                if d is not None and z3.is_int_value(d) and z3.is_int_value(z3.simplify(rhs)):
                    # i + c' = v + d at the lattice point v = s + k*S: a phase a lap behind
                    # its slot (`(i - 1) // S` beside slot `(i + S - 1) % S`) is k plus the
                    # carry of s + d, the same value for every k since S > 0
                    if e.op == "//":
                        return K() + (self.s + d) / self.S
                    return (self.s + d) % self.S
            rhs = z3.simplify(rhs)
            if z3.is_int_value(rhs) and rhs.as_long() > 0:
                lhs = self.int(e.lhs, parity)
                return lhs / rhs if e.op == "//" else lhs % rhs
        if isinstance(e, BinOp) and e.op in ("+", "-", "*", "xor"):
            a, b = self.int(e.lhs, parity), self.int(e.rhs, parity)
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "xor":
                if not parity:
                    raise Unsupported(f"`{e}`: xor outside a parity")
                return a + b
            a, b = z3.simplify(a), z3.simplify(b)
            if not (z3.is_int_value(a) or z3.is_int_value(b)):
                raise Unsupported(f"`{e}` is not linear")
            return a * b
        if isinstance(e, UnOp) and e.op == "neg":
            return -self.int(e.arg, parity)
        if isinstance(e, BinOp) and (e.op in CMP or e.op in ("and", "or")) or \
                isinstance(e, UnOp) and e.op == "not":
            return z3.If(self.bool(e), 1, 0)
        raise Unsupported(f"`{e}`: the loop variable of a ring loop may only appear as "
                          f"i + c in comparisons, (i + c) // {self.S} or (i + c) % {self.S}")

    def bool(self, e):
        if self.free(e):
            return super().bool(e)
        if isinstance(e, BinOp) and e.op == "and":
            return z3.And(self.bool(e.lhs), self.bool(e.rhs))
        if isinstance(e, BinOp) and e.op == "or":
            return z3.Or(self.bool(e.lhs), self.bool(e.rhs))
        if isinstance(e, UnOp) and e.op == "not":
            return z3.Not(self.bool(e.arg))
        if isinstance(e, BinOp) and e.op in CMP:
            lin = linear_in(BinOp("-", e.lhs, e.rhs), self.var, self.env, self.frag.solver)
            if lin is not None and lin[0] in (1, -1):
                a, b = lin
                op = e.op
                if a == 1:        # v - c + b OP 0  <=>  v OP c - b
                    x = self.c - b
                else:             # -(v - c) + b OP 0  <=>  v OP' c + b
                    x = self.c + b
                    op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}[op]
                return self.compare(op, z3.simplify(x))
            return CMP[e.op](self.int(e.lhs), self.int(e.rhs))
        return self.int(e) != 0

    def compare(self, op: str, x):
        """v OP x for the lattice point v = s + k*S, as a condition on k."""
        U = self.builder.U
        if op == "<":
            return K() < U(x)
        if op == "<=":
            return K() < U(x + 1)
        if op == ">":
            return K() >= U(x + 1)
        if op == ">=":
            return K() >= U(x)
        eq = z3.And(K() >= U(x), K() < U(x + 1))
        return eq if op == "==" else z3.Not(eq)

    def require_in_range(self, inside, ref):
        pass   # (i + c) % S is always within 0..S-1


# Primitive.counter -> how the class program encodes it; every counter op the registry knows
# has one (checked at import: a kind whose op had none would be dropped, not refused).
_ENCODINGS = {
    "arrive": ClassBuilder._arrive, "arrive_drop": ClassBuilder._arrive_drop,
    "expect_tx": ClassBuilder._tx, "arrive_tx": ClassBuilder._tx, "complete_tx": ClassBuilder._tx,
    "wait": ClassBuilder._wait, "wait_parity": ClassBuilder._wait,
    "copy": ClassBuilder._copy, "landing": ClassBuilder._copy,
    "async_arrival": ClassBuilder._async_arrival, "tcgen05": ClassBuilder._tcgen05,
}
if set(_ENCODINGS) != kinds.COUNTER_OPS:
    raise ImportError("checker/symbolic/program.py encodes the counter ops "
                      f"{sorted(_ENCODINGS)}, the registry declares {sorted(kinds.COUNTER_OPS)}")


def build_systems(self: "Fragment") -> list[tuple[BarrierClass, CounterSystem, ClassBuilder]]:
    built = []
    peer_exit = peer_exit_obligations(self.kernel) if PEER_EXIT_ENCODED.get() else frozenset()
    for cls in self.classes:
        cls.thresholds = []
        builder = ClassBuilder(self, cls)
        croles = []
        for role in self.roles:
            segs = builder.segments(role)
            if segs:
                croles.append(CRole(role.name, role.size, segs, role.single, role.block))
        built.append((cls, croles, builder))
    out = []
    for cls, croles, builder in built:
        frozen = [self.params[n] for n in self.symbolic] + list(self.grid_vars.values())
        constraints = list(self.assumptions) + list(self.facts) + \
            [c for c, _ in self.side_conditions]
        if cls.ring is not None:
            frozen += [cls.s] + [u for _, u in cls.thresholds]
            constraints += [cls.ring >= 1, cls.s >= 0, cls.s < cls.ring] + builder.facts()
        # BP146 encoded where lifetimes.py's lemmas do not give it (peer_exit.py)
        insts = [CInst(n, e, is_named_barrier(key[0]), key[2], key[0].name,
                       key[0].name in peer_exit)
                 for n, e, key in zip(cls.names, cls.expected, cls.instances)]
        system = CounterSystem(f"{self.kernel.name}:{cls.name}", frozen, constraints, insts,
                               builder.slots, croles,
                               cells=[(n, c[0].space) for n, c in zip(cls.cell_names, cls.cells)],
                               drained=drained_slots(self, builder, croles),
                               holds=builder.holds)
        out.append((cls, system, builder))
    return out


def valuations(self: "Fragment", cls: BarrierClass, system: CounterSystem,
                point: Mapping[str, int]) -> list[list[int]]:
    """Concrete values of a class system's frozen variables for parameter values `point`
    (every representative slot, every grid position)."""
    sub = [(self.params[n], z3.IntVal(point[n])) for n in self.symbolic]
    grids = [[]]
    for axis, size in self.kernel.grid:
        n = evaluate(z_int(size, self.params), sub)
        grids = [g + [(self.grid_vars[axis], z3.IntVal(v))]
                 for g in grids for v in range(min(n, 3))]
    out = []
    for g in grids:
        full = sub + g
        base = [point[n] for n in self.symbolic] + [v.as_long() for _, v in g]
        if cls.ring is None:
            out.append(base)
            continue
        S = evaluate(cls.ring, full)
        for s in range(S):
            us = []
            for x, _ in cls.thresholds:
                xv = evaluate(x, full)
                us.append(max(0, -((s - xv) // S)))     # ceil((x - s) / S), at least 0
            out.append(base + [s] + us)
    return out
