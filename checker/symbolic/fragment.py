"""From a kernel's IR to one counter system per barrier class: the fragment `prove` supports.

Supported (anything else raises `Unsupported`, and the verdict says why):
- cluster shape, warps per warpgroup: concrete; the number of threads may be symbolic when the
  roles are cut out of the thread range by comparisons `thread OP expr` (OP in == != < <= > >=);
- loops are not nested; trip counts, conditions, counts and bytes are linear in the parameters
  and the loop variable (division and modulo by constants allowed);
- barrier arrays have a concrete number of barriers, or one symbolic dimension S (a ring) indexed
  with `(i + c) % S` (i the loop variable, c free of it) or `c % S` outside loops;
- a plain tcgen05_mma (no barrier) is followed in its thread by a tcgen05 op that arrives.

Barrier classes. All instances of concrete arrays and scalar barriers form one class; arrays of
the same symbolic size S that loops use with the same offset form another (arrays used with
different offsets in one loop are kept apart), analysed at one representative slot s
(0 <= s < S, symbolic). Inside a loop over i, the slot-s operations happen at the iterations v = i + c that
are lattice points v = s + k*S; a comparison of v with a threshold x becomes a comparison of k
with U(x) = #{k >= 0 : s + k*S < x}, a fresh integer about which the module states only facts
that hold for every value: U(x) >= 0, U(x) >= 1 iff x > s, monotonicity, and
U(y) - U(x) <= m (>= m) when 0 <= x and y - x <= m*S (>= m*S). So the class program stays linear
and over-approximates the real slot-s behaviour.

The static order tau (used to rule out deadlocks) is built here too: every role's top-level items
(loops and operations) are merged into groups, loops of different roles that run the same
iterations share a group, and the operations of a group get ranks; tau orders events by
(group, iteration, rank). A candidate order is first checked concretely (the tau-ordered run of
model/semantics.py must pass every wait at small parameter values), then symbolically by the
progress condition of every class.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import z3

from ...model.ir import (MAX_ARRIVALS, MAX_TX, BarrierAlloc, BinOp, Const, Expr, Kernel, Loc, Loop,
                        Op, UnOp, Var, WarpRegion, When, free_vars, walk)
from ...model.semantics import PALLAS_KINDS, peer_blocks
from .encode import (ARRIVE, ARRIVE_DROP, ARRIVE_TX, COMPLETE_TX, EXPECT_TX, ISSUE, K,
                              WAIT, WAIT_PARITY, AsyncSlot, CInst, COp, CounterSystem, CRole,
                              CSegment)


class Unsupported(Exception):
    """The kernel is outside the fragment the prover handles."""

    def __init__(self, message: str, loc: Loc | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        where = f" ({self.loc})" if self.loc and self.loc.line else ""
        return self.message + where


LOOPVAR = z3.Int("i!loop")       # the loop variable while translating loop bodies


# ----------------------------------------------------------------------------------------------
# Integer expressions to Z3
# ----------------------------------------------------------------------------------------------

_CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}   # x OP y == y OP' x


def z_int(e, env: Mapping[str, z3.ArithRef], parity: bool = False) -> z3.ArithRef:
    """An IR expression as a Z3 integer term (comparisons and logic as 0/1, like the IR)."""
    if isinstance(e, int):
        return z3.IntVal(e)
    if isinstance(e, Const):
        return z3.IntVal(e.value)
    if isinstance(e, Var):
        if e.name not in env or env[e.name] is None:
            raise Unsupported(f"`{e.name}` is not available here")
        v = env[e.name]
        return z3.IntVal(v) if isinstance(v, int) else v
    if isinstance(e, UnOp):
        if e.op == "neg":
            return -z_int(e.arg, env, parity)
        return z3.If(z_bool(e.arg, env), 0, 1)
    if isinstance(e, BinOp):
        if e.op in _CMP or e.op in ("and", "or"):
            return z3.If(z_bool(e, env), 1, 0)
        a, b = z_int(e.lhs, env, parity), z_int(e.rhs, env, parity)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op in ("//", "%"):
            return a / b if e.op == "//" else a % b
        if e.op == "min":
            return z3.If(a <= b, a, b)
        if e.op == "max":
            return z3.If(a >= b, a, b)
        if e.op == "xor":
            if parity:      # only its parity is used: (a ^ b) % 2 == (a + b) % 2
                return a + b
            raise Unsupported(f"`{e}`: xor outside a parity is not supported")
    raise Unsupported(f"cannot translate `{e}`")


def z_bool(e, env: Mapping[str, z3.ArithRef]) -> z3.BoolRef:
    if isinstance(e, BinOp):
        if e.op in _CMP:
            return _CMP[e.op](z_int(e.lhs, env), z_int(e.rhs, env))
        if e.op == "and":
            return z3.And(z_bool(e.lhs, env), z_bool(e.rhs, env))
        if e.op == "or":
            return z3.Or(z_bool(e.lhs, env), z_bool(e.rhs, env))
    if isinstance(e, UnOp) and e.op == "not":
        return z3.Not(z_bool(e.arg, env))
    return z_int(e, env) != 0


def nonlinear(t) -> bool:
    """Does a term multiply two non-constants or divide by a non-constant?"""
    if z3.is_app(t):
        kind = t.decl().kind()
        kids = t.children()
        if kind == z3.Z3_OP_MUL and sum(0 if z3.is_int_value(k) else 1 for k in kids) > 1:
            return True
        if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_DIV) and not z3.is_int_value(kids[1]):
            return True
        return any(nonlinear(k) for k in kids)
    return False


class Solver:
    """Validity checks under the kernel's assumptions."""

    def __init__(self, facts: Sequence[z3.BoolRef], timeout: float = 5.0):
        self.facts = list(facts)
        self.timeout = timeout

    def valid(self, claim, *extra) -> bool:
        s = z3.Solver()
        s.set("timeout", int(self.timeout * 1000))
        s.add(*self.facts, *extra, z3.Not(claim))
        return s.check() == z3.unsat

    def possible(self, claim, *extra) -> bool:
        s = z3.Solver()
        s.set("timeout", int(self.timeout * 1000))
        s.add(*self.facts, *extra, claim)
        return s.check() != z3.unsat

    def equal(self, a, b, *extra) -> bool:
        return self.valid(a == b, *extra)


def linear_in(e, var: str, env: Mapping, solver: Solver) -> tuple[int, z3.ArithRef] | None:
    """(a, b) with e == a*var + b for every value of var, a a constant; None if not."""
    try:
        t0 = z3.simplify(z_int(e, {**env, var: z3.IntVal(0)}))
        t1 = z3.simplify(z_int(e, {**env, var: z3.IntVal(1)}))
        tx = z_int(e, {**env, var: LOOPVAR})
    except Unsupported:
        return None
    a = z3.simplify(t1 - t0)
    if not z3.is_int_value(a):
        return None
    a = a.as_long()
    if not solver.valid(tx == a * LOOPVAR + t0):
        return None
    return a, t0


# ----------------------------------------------------------------------------------------------
# Roles and their items
# ----------------------------------------------------------------------------------------------

@dataclass
class BodyOp:
    op: Op
    conds: list[tuple[Expr, bool]]         # When conditions inside the loop body


@dataclass
class Item:
    kind: str                               # loop, op, fork, join, await
    conds: list[tuple[Expr, bool]]          # conditions around the item (params only)
    loop: Loop | None = None
    op: Op | None = None
    body: list[BodyOp] = field(default_factory=list)
    region: WarpRegion | None = None
    group: int = -1
    ranks: list[int] = field(default_factory=list)   # per body op (loops) or [rank] (op)
    shift: object = 0                       # loops: tau key of iteration i is i + shift

    @property
    def ops(self) -> list[BodyOp]:
        if self.kind == "loop":
            return self.body
        if self.kind == "op":
            return [BodyOp(self.op, [])]
        return []


@dataclass
class Role:
    name: str
    block: tuple[int, ...]
    warp: int | None                        # None: the warpgroup agent
    lo: z3.ArithRef                         # first thread index
    size: z3.ArithRef
    single: bool
    env: dict                               # names -> Z3 terms for this role
    items: list[Item] = field(default_factory=list)
    thread_free: bool = False               # op arguments may not mention the thread


class Fragment:
    """The kernel with symbolic parameters, cut into roles, barrier classes and tau."""

    def __init__(self, kernel: Kernel, symbolic: Sequence[str], concrete: Mapping[str, int]):
        self.kernel = kernel
        self.symbolic = list(symbolic)
        self.params: dict[str, z3.ArithRef] = {}
        for name in kernel.params:
            if name in self.symbolic:
                self.params[name] = z3.Int(name)
            else:
                self.params[name] = z3.IntVal(int(concrete[name]))
        self.grid_vars = {}
        base = dict(self.params)
        facts = []
        for axis, size in kernel.grid:
            g = z3.Int(f"grid!{axis}")
            self.grid_vars[axis] = g
            base[axis] = g
            facts += [g >= 0, g < z_int(size, self.params)]
        self.base_env = base
        self.assumptions = [z_bool(a, base) for a in kernel.assumptions]
        self.solver = Solver(self.assumptions + facts)
        self.side_conditions: list[tuple[z3.BoolRef, str]] = []
        self.facts = facts

    # -- well-formedness ---------------------------------------------------------------------

    def require(self, claim: z3.BoolRef, text: str) -> None:
        """A fact the model needs (a hardware range, a positive size): proved from the
        assumptions, or else kept as an explicit side condition of the proof."""
        if not self.solver.valid(claim):
            if not self.solver.possible(claim):
                raise Unsupported(f"{text} never holds under the assumptions")
            self.side_conditions.append((claim, text))
            self.solver.facts.append(claim)

    # -- shape ----------------------------------------------------------------------------------

    def concrete(self, e, what: str, env=None) -> int:
        t = z3.simplify(z_int(e, env or self.base_env))
        if not z3.is_int_value(t):
            raise Unsupported(f"{what} must not depend on symbolic parameters: `{e}`")
        return t.as_long()

    def build_roles(self) -> list[Role]:
        k = self.kernel
        waited = {op.barrier.alloc.name for op in k.ops()
                  if op.kind in ("barrier_wait", "wait_parity") and op.barrier is not None}
        for op in k.ops():
            if op.barrier is not None and op.barrier.alloc.name not in waited \
                    and op.kind in PALLAS_KINDS and op.kind != "barrier_wait":
                # Pallas rule 2 on a barrier nobody waits on is left to the explorer
                raise Unsupported(f"`{op.barrier.alloc.name}` receives Pallas arrivals but no "
                                  "thread waits on it", op.loc)
            if op.kind in ("semaphore_signal", "semaphore_wait"):
                raise Unsupported(f"`{op.describe()}`: semaphores are left to the explorer",
                                  op.loc)
            if op.kind == "wait_parity" and op.phase is not None:
                # the thread's own phase count may skip phases (ping-pong): the counter
                # abstraction follows every completion, so it cannot judge such a wait
                raise Unsupported(f"`{op.describe()}` waits for a stated phase "
                                  "(wait_parity(phase=)), which may skip phases", op.loc)
        self.cluster_axes = [a for a, _ in k.cluster]
        self.cluster_shape = [self.concrete(n, f"cluster size along {a}") for a, n in k.cluster]
        for a, n in zip(self.cluster_axes, self.cluster_shape):
            if n < 1:
                raise Unsupported(f"cluster size along {a} is {n}")
        self.blocks = list(itertools.product(*[range(n) for n in self.cluster_shape]))
        nthreads = z3.simplify(z_int(k.num_threads, self.base_env))
        self.require(nthreads >= 1, "at least one thread per block")
        self.uses_warps = any(isinstance(s, WarpRegion) for s in walk(k.body))
        intervals = self.thread_intervals(nthreads)
        roles = []
        for block in self.blocks:
            benv = dict(self.base_env)
            for axis, c in zip(self.cluster_axes, block):
                benv[axis] = z3.IntVal(c)
            prefix = ("b" + ",".join(map(str, block)) + ".") if len(self.blocks) > 1 else ""
            for lo, size, single in intervals:
                warps = [None] + (list(range(1, k.num_warps)) if self.uses_warps else [])
                for w in warps:
                    env = dict(benv)
                    env[k.thread_axis] = lo
                    env[k.warp_axis] = z3.IntVal(w or 0)
                    tname = (f"{k.thread_axis}{z3.simplify(lo)}" if single else
                             f"{k.thread_axis}[{z3.simplify(lo)}..+{z3.simplify(size)}]")
                    name = prefix + tname + (f".{k.warp_axis}{w}" if w else "")
                    role = Role(name, block, w, lo, size, single, env, thread_free=not single)
                    self.walk_role(role, k.body, [], None, in_region=False)
                    _check_plain_mma(role)
                    roles.append(role)
        self.roles = self.merge_roles(roles)
        return self.roles

    def merge_roles(self, roles: list[Role]) -> list[Role]:
        """Adjacent thread ranges of one block and warp whose programs are the same (a leader
        consumer coded apart from the others, with the same operations) become one role: the
        same interchangeable threads, one counter. `twins` maps each op of a merged range to
        the op of the role's program it equals (for the replay on model/semantics.py)."""
        out: list[Role] = []
        for role in roles:
            prev = out[-1] if out else None
            if prev is not None and prev.block == role.block and prev.warp == role.warp and \
                    self.solver.equal(prev.lo + prev.size, role.lo) and \
                    self._same_program(prev, role):
                twins = dict(getattr(prev, "twins", {}))
                for a, b in zip(self._flat_ops(prev), self._flat_ops(role)):
                    twins[id(b)] = id(a)
                size = z3.simplify(prev.size + role.size)
                merged = Role(f"{prev.name}+{role.name}", prev.block, prev.warp, prev.lo, size,
                              self.solver.valid(size == 1), prev.env, prev.items,
                              thread_free=True)
                merged.twins = twins
                out[-1] = merged
                continue
            out.append(role)
        return out

    @staticmethod
    def _flat_ops(role: Role) -> list[Op]:
        return [bop.op for item in role.items for bop in item.ops]

    def _same_program(self, a: Role, b: Role) -> bool:
        """Do the threads of both roles run the same program (as terms, for every value)?"""
        if a.warp is not None or len(a.items) != len(b.items):
            return False
        axis = self.kernel.thread_axis

        def same_int(x, y, ea, eb) -> bool:
            if x is None or y is None:
                return x is None and y is None
            try:
                return self.solver.equal(z_int(x, ea, True), z_int(y, eb, True))
            except Unsupported:
                return False

        def same_conds(ca, cb, ea, eb) -> bool:
            return len(ca) == len(cb) and all(
                pa == pb and same_int(xa, xb, ea, eb) for (xa, pa), (xb, pb) in zip(ca, cb))

        for ia, ib in zip(a.items, b.items):
            if ia.kind != ib.kind or ia.kind not in ("loop", "op"):
                return False
            ea, eb = dict(a.env), dict(b.env)
            if not same_conds(ia.conds, ib.conds, ea, eb):
                return False
            if ia.kind == "loop":
                if not same_int(ia.loop.trip, ib.loop.trip, ea, eb):
                    return False
                ea[ia.loop.var], eb[ib.loop.var] = LOOPVAR, LOOPVAR
                if len(ia.body) != len(ib.body):
                    return False
            for ba, bb in zip(ia.ops, ib.ops):
                oa, ob = ba.op, bb.op
                if oa.kind != ob.kind or oa.collective_axes != ob.collective_axes or \
                        oa.name != ob.name or not same_conds(ba.conds, bb.conds, ea, eb):
                    return False
                if (oa.barrier is None) != (ob.barrier is None):
                    return False
                if not all(same_int(x, y, ea, eb) for x, y in
                           ((oa.count, ob.count), (oa.bytes, ob.bytes),
                            (oa.parity, ob.parity))):
                    return False
                if oa.barrier is not None:
                    ra, rb = oa.barrier, ob.barrier
                    if ra.alloc is not rb.alloc or len(ra.index) != len(rb.index) or \
                            (ra.block is None) != (rb.block is None):
                        return False
                    pairs = list(zip(ra.index, rb.index)) + list(zip(ra.block or (),
                                                                     rb.block or ()))
                    if not all(same_int(x, y, ea, eb) for x, y in pairs):
                        return False
                # the merged range is cut by no thread condition: no expression may mention
                # the thread once it is a range (values at other threads are not compared)
                if not a.single or not b.single:
                    for e in [oa.count, oa.bytes, oa.parity] + \
                            (list(oa.barrier.index) + list(oa.barrier.block or ())
                             if oa.barrier is not None else []):
                        if e is not None and axis in free_vars(e):
                            return False
        return True

    def thread_intervals(self, n: z3.ArithRef) -> list[tuple[z3.ArithRef, z3.ArithRef, bool]]:
        """Cut [0, n) into intervals on which every condition on the thread index is uniform."""
        axis = self.kernel.thread_axis
        if z3.is_int_value(n) and n.as_long() <= 64:
            return [(z3.IntVal(t), z3.IntVal(1), True) for t in range(n.as_long())]
        points = [z3.IntVal(0), n]
        for cond in _conditions(self.kernel.body):
            for atom in _atoms(cond):
                if axis not in free_vars(atom):
                    continue
                if not (isinstance(atom, BinOp) and atom.op in _CMP):
                    raise Unsupported(f"condition `{atom}` on the thread index is not a "
                                      "comparison", None)
                lin = linear_in(BinOp("-", atom.lhs, atom.rhs), axis, self.base_env, self.solver)
                if lin is None or lin[0] not in (1, -1):
                    raise Unsupported(f"condition `{atom}` is not of the form thread OP expr")
                a, b = lin
                x = z3.simplify(-b if a == 1 else b)     # thread OP' x
                op = atom.op if a == 1 else _FLIP[atom.op]
                # only where the condition can change value: `thread >= 1` next to
                # `thread == 0` must not add a point 2 unordered with a symbolic bound
                points += {"<": [x], ">=": [x], "<=": [z3.simplify(x + 1)],
                           ">": [z3.simplify(x + 1)]}.get(op, [x, z3.simplify(x + 1)])
        uniq: list[z3.ArithRef] = []
        for p in points:
            if not any(self.solver.equal(p, q) for q in uniq):
                uniq.append(p)
        for a in uniq:
            for b in uniq:
                if a is not b and not (self.solver.valid(a <= b) or self.solver.valid(b <= a)):
                    raise Unsupported(f"the thread ranges `{a}` and `{b}` are not ordered by "
                                      "the assumptions")
        ordered = sorted(uniq, key=_Cmp(self.solver))
        for lo, hi in zip(ordered, ordered[1:]):
            if not self.solver.valid(lo <= hi):       # never expected: the intervals would overlap
                raise Unsupported(f"the thread ranges `{lo}` and `{hi}` are out of order")
        intervals = []
        for lo, hi in zip(ordered, ordered[1:]):
            if self.solver.valid(hi <= 0) or self.solver.valid(lo >= n):
                continue
            if not (self.solver.valid(lo >= 0) and self.solver.valid(hi <= n)):
                raise Unsupported("thread ranges reach outside the block")
            size = z3.simplify(hi - lo)
            if self.solver.valid(size == 0):
                continue
            intervals.append((lo, size, self.solver.valid(size == 1)))
        # Uniformity of every thread condition on each interval.
        t = z3.Int("t!")
        for lo, size, single in intervals:
            if single:
                continue
            for cond in _conditions(self.kernel.body):
                for atom in _atoms(cond):
                    if axis not in free_vars(atom):
                        continue
                    env_t = {**self.base_env, axis: t}
                    env_lo = {**self.base_env, axis: lo}
                    try:
                        at_t, at_lo = z_bool(atom, env_t), z_bool(atom, env_lo)
                    except Unsupported:
                        raise Unsupported(f"condition `{atom}` mixes the thread index with "
                                          "loop variables") from None
                    if not self.solver.valid(at_t == at_lo, t >= lo, t < lo + size):
                        raise Unsupported(f"`{atom}` is not uniform on threads "
                                          f"[{lo}, {lo} + {size})")
        return intervals

    def walk_role(self, role: Role, body, conds, loop: Item | None, in_region: bool) -> None:
        k = self.kernel
        for stmt in body:
            if isinstance(stmt, Op):
                emitted = (role.warp is None) or in_region
                if not emitted:
                    continue
                self.check_thread_free(role, stmt)
                if loop is not None:
                    loop.body.append(BodyOp(stmt, list(conds)))
                else:
                    role.items.append(Item("op", list(conds), op=stmt))
            elif isinstance(stmt, Loop):
                if loop is not None:
                    raise Unsupported("nested loops are outside the supported fragment",
                                      stmt.loc)
                if role.thread_free and k.thread_axis in free_vars(stmt.trip):
                    raise Unsupported("a trip count depends on the thread index", stmt.loc)
                item = Item("loop", list(conds), loop=stmt)
                self.walk_role(role, stmt.body, [], item, in_region)
                if item.body:
                    role.items.append(item)
            elif isinstance(stmt, When):
                then_conds = conds + [(stmt.cond, True)]
                else_conds = conds + [(stmt.cond, False)]
                decided = self.decide(role, stmt.cond, loop is not None)
                if decided is not False:
                    self.walk_role(role, stmt.then, then_conds if decided is None else conds,
                                   loop, in_region)
                if decided is not True:
                    self.walk_role(role, stmt.orelse, else_conds if decided is None else conds,
                                   loop, in_region)
            elif isinstance(stmt, WarpRegion):
                if in_region:
                    raise Unsupported("a warp region inside a warp region", stmt.loc)
                if loop is not None:
                    raise Unsupported("a warp region inside a loop", stmt.loc)
                if role.warp is None:
                    role.items.append(Item("fork", list(conds), region=stmt))
                    env = role.env
                    saved = env.get(stmt.axis)
                    env[stmt.axis] = z3.IntVal(0)
                    self.walk_role(role, stmt.body, conds, None, True)
                    env[stmt.axis] = saved if saved is not None else z3.IntVal(0)
                    role.items.append(Item("join", list(conds), region=stmt))
                else:
                    role.items.append(Item("await", list(conds), region=stmt))
                    role.env[stmt.axis] = z3.IntVal(role.warp)
                    self.walk_role(role, stmt.body, conds, None, True)
            else:
                raise Unsupported(f"unknown statement {stmt!r}")

    def decide(self, role: Role, cond: Expr, in_loop: bool) -> bool | None:
        """True/False when a condition is decided for the role (thread, block, warp and
        concrete parameters), None when it depends on symbolic values or the loop variable."""
        try:
            b = z3.simplify(z_bool(cond, {**role.env, **({} if not in_loop else {})}))
        except Unsupported:
            return None
        if z3.is_true(b):
            return True
        if z3.is_false(b):
            return False
        # Only a role with threads runs its program: decide for size >= 1 (the conditions
        # on the thread index are uniform on the role's range, so the value at lo is theirs).
        nonempty = role.size >= 1
        if self.solver.valid(b, nonempty):
            return True
        if self.solver.valid(z3.Not(b), nonempty):
            return False
        return None

    def check_thread_free(self, role: Role, op: Op) -> None:
        if not role.thread_free:
            return
        axis = self.kernel.thread_axis
        exprs = [op.count, op.bytes] + ([op.parity] if op.parity is not None else [])
        if op.barrier is not None:
            exprs += list(op.barrier.index) + list(op.barrier.block or ())
        for e in exprs:
            if axis in free_vars(e):
                raise Unsupported(f"`{op.describe()}` depends on the thread index inside a "
                                  "group of threads whose size is symbolic", op.loc)


def _check_plain_mma(role: Role) -> None:
    """A tcgen05_mma without a barrier leaves nothing to observe: it must be followed, in its
    thread and unconditionally, by a tcgen05 op that arrives (the tcgen05 queue is in order, so
    that arrival implies its completion; BP105 at exit is then checked on that arrival)."""
    flat = []
    for item in role.items:
        for bop in item.ops:
            flat.append((item, bop))
    plain = [n for n, (_, bop) in enumerate(flat)
             if bop.op.kind == "tcgen05_mma" and bop.op.barrier is None]
    if not plain:
        return
    for n in range(plain[-1] + 1, len(flat)):
        item, bop = flat[n]
        if bop.op.kind in ("tcgen05_mma", "tcgen05_commit_arrive") and \
                bop.op.barrier is not None and item.kind == "op" and not item.conds:
            return
    op = flat[plain[-1]][1].op
    raise Unsupported("a tcgen05_mma without a barrier is not followed by an unconditional "
                      "tcgen05_commit_arrive", op.loc)


class _Cmp:
    """A sort key from provable <= (all pairs are comparable by construction, and no two are
    provably equal). Strict `a < b` is not the order: `1` and `consumers` with consumers >= 1
    are neither provably < nor >, and sorting them as equal could put them in either order."""

    def __init__(self, solver: Solver):
        self.solver = solver

    def __call__(self, x):
        solver = self.solver

        class Key:
            def __init__(self, v):
                self.v = v

            def __lt__(self, other):
                return solver.valid(self.v <= other.v) and not solver.valid(other.v <= self.v)
        return Key(x)


def _conditions(body) -> Iterator[Expr]:
    for stmt in walk(body):
        if isinstance(stmt, When):
            yield stmt.cond


def _atoms(e) -> Iterator[Expr]:
    if isinstance(e, BinOp) and e.op in ("and", "or"):
        yield from _atoms(e.lhs)
        yield from _atoms(e.rhs)
    elif isinstance(e, UnOp) and e.op == "not":
        yield from _atoms(e.arg)
    else:
        yield e



# ----------------------------------------------------------------------------------------------
# Barrier classes
# ----------------------------------------------------------------------------------------------

@dataclass
class BarrierClass:
    name: str
    ring: z3.ArithRef | None                 # S for a ring class, None for the concrete class
    allocs: list[BarrierAlloc]
    instances: list[tuple] = field(default_factory=list)   # (alloc, index or None, block)
    names: list[str] = field(default_factory=list)
    expected: list[z3.ArithRef] = field(default_factory=list)
    s: z3.ArithRef | None = None
    thresholds: list[tuple[z3.ArithRef, z3.ArithRef]] = field(default_factory=list)

    def inst(self, alloc, index, block) -> int:
        key = (alloc.name, index, block)
        for i, (a, idx, b) in enumerate(self.instances):
            if (a.name, idx, b) == key:
                return i
        raise KeyError(key)


class ClassBuilder:
    """Translation of one role's items into the class program of one barrier class."""

    def __init__(self, frag: "Fragment", cls: BarrierClass):
        self.frag = frag
        self.cls = cls
        self.slots: list[AsyncSlot] = []
        self._slot_keys: dict = {}

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
            return _Plain(frag, env, var, _shift_term(item))
        c = self.offset(role, item)
        return _Lattice(frag, self, env, var, c)

    def offset(self, role: Role, item: Item) -> z3.ArithRef:
        """c such that every ring index of this class in the loop is (i + c) % S."""
        frag = self.frag
        found = None
        for bop in item.body:
            ref = bop.op.barrier
            if ref is None or ref.alloc not in self.cls.allocs:
                continue
            lhs = self.ring_lhs(ref, role.env)
            lin = linear_in(lhs, item.loop.var, role.env, frag.solver)
            if lin is None or lin[0] != 1:
                raise Unsupported(f"ring index `{ref}` is not (i + c) % {self.cls.ring}",
                                  bop.op.loc)
            if found is None:
                found = lin[1]
            elif not frag.solver.equal(found, lin[1]):
                raise Unsupported("one loop uses two different ring offsets on the same barriers",
                                  bop.op.loc)
        return found if found is not None else z3.IntVal(0)

    def ring_lhs(self, ref, env) -> Expr:
        return _ring_lhs(self.frag, ref, env, self.cls.ring)

    # -- operations ---------------------------------------------------------------------------------

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
        if op.kind == "unmodeled":
            return []
        ref = op.barrier
        if ref is None or ref.alloc not in self.cls.allocs:
            return []
        guard = ctx.guard(bop.conds)
        return self._cops(role, item, bop, ctx, rank, guard, ref)

    def _cops(self, role, item, bop, ctx, rank, guard, ref) -> list[COp]:
        op = bop.op
        out = []
        for g, inst in self.targets(role, ref, ctx):
            gg = z3.simplify(z3.And(guard, g))
            if z3.is_false(gg):
                continue
            text = op.describe()
            kind = op.kind
            if kind in ("barrier_arrive", "arrive"):
                count = ctx.int(op.count)
                self.frag.require_always(z3.And(count >= 1, count <= MAX_ARRIVALS),
                                         f"the arrival count of `{text}` is within "
                                         f"1..{MAX_ARRIVALS}", ctx)
                out.append(COp(ARRIVE, self.fan_out(inst), count, guard=gg, rank=rank,
                               text=text))
            elif kind == "arrive_drop":
                out.append(COp(ARRIVE_DROP, self.fan_out(inst), z3.IntVal(1), guard=gg,
                               rank=rank, text=text))
            elif kind in ("expect_tx", "arrive_expect_tx", "complete_tx"):
                nbytes = ctx.int(op.bytes)
                self.frag.require_always(z3.And(nbytes >= 0, nbytes <= MAX_TX),
                                         f"the byte count of `{text}` is within 0..{MAX_TX}", ctx)
                code = {"expect_tx": EXPECT_TX, "arrive_expect_tx": ARRIVE_TX,
                        "complete_tx": COMPLETE_TX}[kind]
                out.append(COp(code, self.fan_out(inst), nbytes, guard=gg, rank=rank, text=text))
            elif kind in ("barrier_wait", "wait_parity"):
                if ref.block is not None and self.cls.instances[inst][2] != role.block:
                    raise Unsupported("a wait on another block's barrier (BP112)", op.loc)
                parity = ctx.int(op.parity, parity=True) if kind == "wait_parity" else None
                out.append(COp(WAIT if kind == "barrier_wait" else WAIT_PARITY, (inst,),
                               parity=parity, guard=gg, rank=rank, text=text))
            elif kind in ("copy_gmem_to_smem", "tma_load"):
                nbytes = ctx.int(op.bytes)
                self.frag.require_always(z3.And(nbytes >= 0, nbytes <= MAX_TX),
                                         f"the byte count of `{text}` is within 0..{MAX_TX}", ctx)
                alloc, index, block = self.cls.instances[inst]
                peers = self.peers(block, op.collective_axes)
                share = z3.simplify(nbytes / len(peers)) if len(peers) > 1 else nbytes
                if len(peers) > 1:
                    self.frag.require_always(nbytes % len(peers) == 0,
                                             f"`{text}` splits evenly among {len(peers)} blocks",
                                             ctx)
                slots = tuple(self.slot("tx", self.cls.inst(alloc, index, p), share, "tma")
                              for p in peers)
                arrive = (inst,) if kind == "copy_gmem_to_smem" else ()
                out.append(COp(ISSUE, arrive, nbytes, slots=slots, guard=gg, rank=rank,
                               text=text))
            elif kind == "try_cluster_cancel":
                out.append(COp(ISSUE, (), z3.IntVal(0),
                               slots=(self.slot("arrive", inst, z3.IntVal(1), "async"),),
                               guard=gg, rank=rank, text=text))
            elif kind in ("tcgen05_mma", "tcgen05_commit_arrive"):
                alloc, index, block = self.cls.instances[inst]
                targets = [inst]
                if op.collective_axes:
                    targets = [self.cls.inst(alloc, index, p)
                               for p in self.peers(role.block, op.collective_axes)]
                slots = tuple(self.slot("arrive", t, z3.IntVal(1), "tcgen05") for t in targets)
                out.append(COp(ISSUE, (), z3.IntVal(0), slots=slots, guard=gg, rank=rank,
                               text=text))
            else:
                raise Unsupported(f"operation {kind} is outside the supported fragment", op.loc)
            out[-1].primary = inst
        return out

    def segments(self, role: Role) -> list[CSegment]:
        """The role's class program; `self.where[(role, item, op, instance)]` records where each
        operation landed (segment, index) for the cross-checks against model/semantics.py."""
        if not hasattr(self, "where"):
            self.where = {}
            self.offsets = {}
            self.shifts = {}
            self.group_base = {}
        segs = []
        for i, item in enumerate(role.items):
            if item.kind not in ("loop", "op"):
                continue
            ctx = self.context(role, item)
            cops = []
            placed = []
            for b, bop in enumerate(item.ops):
                made = self.cops(role, item, bop, ctx, item.ranks[b])
                for cop in made:
                    placed.append((b, cop))
                cops += made
            if not cops:
                continue
            for n, (b, cop) in enumerate(placed):
                self.where[(role.name, i, b, cop.primary)] = (len(segs), n)
            if self.cls.ring is not None:
                self.offsets[(role.name, i)] = ctx.c if item.kind == "loop" else \
                    z_int(self.ring_lhs(item.op.barrier, role.env), role.env)
            if item.kind == "loop":
                self.shifts[(role.name, i)] = _shift_term(item)
                if self.cls.ring is not None:
                    # Loops of one tau group are compared by lap k here, i.e. by v = i + c;
                    # tau compares i + shift. Both agree only if c - shift is the same for
                    # every loop of the group that uses the class.
                    base = z3.simplify(ctx.c - _shift_term(item))
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
                    sh = _shift_term(item)
                    lo, hi = z3.simplify(sh), z3.simplify(trip + sh)
                else:
                    c = ctx.c
                    lo, hi = self.U(c), self.U(c + trip)
                segs.append(CSegment(True, cops, item.group, guard, lo, hi,
                                     text=f"loop {item.loop.var} ({item.loop.loc})"))
            elif self.cls.ring is not None:
                # a single ring access c % S outside loops: a loop over [c, c + 1)
                ref = item.op.barrier
                lhs = self.ring_lhs(ref, role.env)
                c = z_int(lhs, role.env)
                segs.append(CSegment(True, cops, item.group, guard, self.U(c), self.U(c + 1),
                                     text=item.op.describe(), keyed=False))
            else:
                segs.append(CSegment(False, cops, item.group, guard, text=item.op.describe()))
        return segs


class _Plain:
    """Expressions with the loop variable as the class coordinate k (concrete class)."""

    def __init__(self, frag, env, var, shift=None):
        self.frag = frag
        self.env = dict(env)
        self.var = var
        self.shift = z3.IntVal(0) if shift is None else shift
        if var is not None:
            self.env[var] = z3.simplify(K - self.shift)

    def int(self, e, parity=False):
        t = z3.simplify(z_int(e, self.env, parity))
        if nonlinear(t):
            raise Unsupported(f"`{e}` is not linear in the parameters and the loop variable")
        return t

    def bool(self, e):
        t = z3.simplify(z_bool(e, self.env))
        if nonlinear(t):
            raise Unsupported(f"`{e}` is not linear in the parameters and the loop variable")
        return t

    def guard(self, conds):
        return z3.simplify(z3.And([self.bool(c) if pos else z3.Not(self.bool(c))
                                   for c, pos in conds] or [z3.BoolVal(True)]))

    def require_in_range(self, inside, ref):
        self.frag.require_always(inside, f"the index of `{ref}` is within num_barriers", self)

    def domain(self):
        return [] if self.var is None else [K >= self.shift]


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
                    return K if e.op == "//" else self.s
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
        if isinstance(e, BinOp) and (e.op in _CMP or e.op in ("and", "or")) or \
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
        if isinstance(e, BinOp) and e.op in _CMP:
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
            return _CMP[e.op](self.int(e.lhs), self.int(e.rhs))
        return self.int(e) != 0

    def compare(self, op: str, x):
        """v OP x for the lattice point v = s + k*S, as a condition on k."""
        U = self.builder.U
        if op == "<":
            return K < U(x)
        if op == "<=":
            return K < U(x + 1)
        if op == ">":
            return K >= U(x + 1)
        if op == ">=":
            return K >= U(x)
        eq = z3.And(K >= U(x), K < U(x + 1))
        return eq if op == "==" else z3.Not(eq)

    def require_in_range(self, inside, ref):
        pass   # (i + c) % S is always within 0..S-1


def _require_always(self, claim, text, ctx):
    """A range fact over every loop coordinate: proved, or kept as a side condition."""
    if any(c.eq(K) for c in _consts(claim)):
        if self.solver.valid(claim, *ctx.domain()):
            return
        raise Unsupported(f"cannot show that {text} in every iteration")
    self.require(claim, text)


def _consts(t) -> set:
    out = set()

    def walk(x):
        if z3.is_const(x) and not z3.is_int_value(x) and not z3.is_true(x) and \
                not z3.is_false(x):
            out.add(x)
        for ch in x.children():
            walk(ch)
    walk(t)
    return out


Fragment.require_always = _require_always


# ----------------------------------------------------------------------------------------------
# The static order tau
# ----------------------------------------------------------------------------------------------

@dataclass
class Node:
    kind: str                                   # loop, op, fork, join
    members: list[tuple[int, int]]              # (role, item)


@dataclass
class Tau:
    order: list[int]                            # node indices in tau order
    ranks: dict[tuple[int, int], list[int]]     # (role, item) -> rank of each of its ops
    nodes: list[Node] | None = None             # the alignment the order is over
    edges: set | None = None
    shifts: dict = field(default_factory=dict)  # (role, item) -> tau key shift of a loop


def _shift_term(item: Item) -> z3.ArithRef:
    sh = item.shift
    return z3.IntVal(sh) if isinstance(sh, int) else sh


@dataclass
class Alignment:
    """Loops of different roles merged into groups; a loop's iteration i has tau key i + shift."""
    nodes: list[Node]
    node_of: dict[tuple[int, int], int]
    edges: set[tuple[int, int]]
    shifts: dict[tuple[int, int], z3.ArithRef]


class TauSearch:
    """Candidate static orders, checked on the tau-ordered run of model/semantics.py.

    Two alignments of loops are tried, in order: the strict one (loops share a group when they
    run the same trip count with the same ring offsets; keys are the iterations), then a relaxed
    one (loops share a group when they use a ring class; each gets the key shift that makes the
    key its virtual iteration v = i + c relative to the group, so the trip counts may differ:
    a prefetch ring whose producer loop loads `(i + 1) % S` for `steps - 1` iterations is
    aligned with its consumers' loop over `i % S`). Only the orders are heuristic: every class
    system re-checks that its loops of one group are compared consistently (see
    ClassBuilder.segments), and the symbolic progress check decides."""

    def __init__(self, frag: "Fragment"):
        self.frag = frag
        self.alignments: list[Alignment] = []
        for relaxed in (False, True):
            al = self._align(relaxed)
            if not any(self._same(al, other) for other in self.alignments):
                self.alignments.append(al)
        self._use(self.alignments[0])

    def _use(self, al: Alignment) -> None:
        self.nodes, self.node_of, self.edges, self.shifts = \
            al.nodes, al.node_of, al.edges, al.shifts

    def _same(self, a: Alignment, b: Alignment) -> bool:
        if [n.members for n in a.nodes] != [n.members for n in b.nodes]:
            return False
        return all(self.frag.solver.equal(a.shifts[m], b.shifts[m]) for m in a.shifts)

    def _uses(self, item: Item, cls: BarrierClass) -> bool:
        return any(bop.op.barrier is not None and bop.op.barrier.alloc in cls.allocs
                   for bop in item.body)

    def _alignable(self, node: Node, shifts: dict, b: tuple[int, int],
                   relaxed: bool) -> z3.ArithRef | None:
        """The key shift of loop b in the group of `node`, or None if it does not fit."""
        frag = self.frag
        rb, ib = b
        itb = frag.roles[rb].items[ib]
        first = node.members[0]
        ita0 = frag.roles[first[0]].items[first[1]]
        if ita0.loop is itb.loop:
            return shifts[first]
        try:
            ta = z_int(ita0.loop.trip, frag.roles[first[0]].env)
            tb = z_int(itb.loop.trip, frag.roles[rb].env)
        except Unsupported:
            return None
        same_trip = frag.solver.equal(ta, tb)
        if not relaxed:
            if not same_trip:
                return None
            # ring accesses of a class both loops use must sit at the same virtual iterations
            for cls in frag.classes:
                if cls.ring is None or not (self._uses(ita0, cls) and self._uses(itb, cls)):
                    continue
                b1 = ClassBuilder(frag, cls)
                try:
                    ca = b1.offset(frag.roles[first[0]], ita0)
                    cb = b1.offset(frag.roles[rb], itb)
                except Unsupported:
                    return None
                if not frag.solver.equal(ca, cb):
                    return None
            return z3.IntVal(0)
        # relaxed: the shift that puts the ring accesses of every shared class at the same key
        shift = None
        for m in node.members:
            ita = frag.roles[m[0]].items[m[1]]
            for cls in frag.classes:
                if cls.ring is None or not (self._uses(ita, cls) and self._uses(itb, cls)):
                    continue
                b1 = ClassBuilder(frag, cls)
                try:
                    ca = b1.offset(frag.roles[m[0]], ita)
                    cb = b1.offset(frag.roles[rb], itb)
                except Unsupported:
                    return None
                cand = z3.simplify(shifts[m] + cb - ca)
                if nonlinear(cand):
                    return None
                if shift is None:
                    shift = cand
                elif not frag.solver.equal(shift, cand):
                    return None
        if shift is None:
            return shifts[first] if same_trip else None
        return shift

    def _align(self, relaxed: bool) -> Alignment:
        frag = self.frag
        nodes: list[Node] = []
        node_of: dict[tuple[int, int], int] = {}
        edges: set[tuple[int, int]] = set()
        shifts: dict[tuple[int, int], z3.ArithRef] = {}
        loops: list[int] = []
        regions: dict[tuple, int] = {}
        joins: dict[tuple, int] = {}
        for r, role in enumerate(frag.roles):
            last = -1
            for i, item in enumerate(role.items):
                if item.kind == "loop":
                    target = None
                    for pos in range(last + 1, len(loops)):
                        node = nodes[loops[pos]]
                        if r in [m[0] for m in node.members]:
                            continue
                        shift = self._alignable(node, shifts, (r, i), relaxed)
                        if shift is not None:
                            target = pos
                            break
                    if target is None:
                        nodes.append(Node("loop", [(r, i)]))
                        loops.append(len(nodes) - 1)
                        target = len(loops) - 1
                        shift = z3.IntVal(0)
                    else:
                        nodes[loops[target]].members.append((r, i))
                    shifts[(r, i)] = shift
                    last = target
                    node_of[(r, i)] = loops[target]
                elif item.kind in ("fork", "await"):
                    key = (role.block, _thread_key(role), id(item.region))
                    if key not in regions:
                        nodes.append(Node("fork", []))
                        regions[key] = len(nodes) - 1
                    nodes[regions[key]].members.append((r, i))
                    node_of[(r, i)] = regions[key]
                elif item.kind == "join":
                    nodes.append(Node("join", [(r, i)]))
                    joins[(role.block, _thread_key(role), id(item.region))] = len(nodes) - 1
                    node_of[(r, i)] = len(nodes) - 1
                else:
                    nodes.append(Node("op", [(r, i)]))
                    node_of[(r, i)] = len(nodes) - 1
        for r, role in enumerate(frag.roles):
            chain = [node_of[(r, i)] for i in range(len(role.items))]
            for a, b in zip(chain, chain[1:]):
                if a != b:
                    edges.add((a, b))
            if role.warp is not None:
                # everything a warp does in a region precedes the warpgroup's join
                for i, item in enumerate(role.items):
                    key = (role.block, _thread_key(role), id(item.region)) if item.region else None
                    if item.kind == "await" and key in joins:
                        for j in range(i, len(role.items)):
                            edges.add((node_of[(r, j)], joins[key]))
        return Alignment(nodes, node_of, edges, shifts)

    def orders(self, limit: int = 24) -> Iterator[list[int]]:
        """Topological orders of the nodes (a few, in a heuristic order)."""
        n = len(self.nodes)
        preds = {v: {a for a, b in self.edges if b == v} for v in range(n)}
        seen = set()
        for prefer in ("low", "high", "loops"):
            order, done = [], set()
            while len(order) < n:
                ready = [v for v in range(n) if v not in done and preds[v] <= done]
                if not ready:
                    return
                if prefer == "low":
                    v = min(ready, key=lambda x: min(m[0] for m in self.nodes[x].members or
                                                     [(0, 0)]))
                elif prefer == "high":
                    v = max(ready, key=lambda x: min(m[0] for m in self.nodes[x].members or
                                                     [(0, 0)]))
                else:
                    v = min(ready, key=lambda x: (self.nodes[x].kind != "loop", x))
                order.append(v)
                done.add(v)
            if tuple(order) not in seen:
                seen.add(tuple(order))
                yield order
        # then every other order, up to the limit
        count = 0

        def dfs(order, done):
            nonlocal count
            if count >= limit:
                return
            if len(order) == n:
                if tuple(order) not in seen:
                    seen.add(tuple(order))
                    count += 1
                    yield list(order)
                return
            for v in range(n):
                if v not in done and preds[v] <= done:
                    order.append(v)
                    done.add(v)
                    yield from dfs(order, done)
                    order.pop()
                    done.discard(v)
        yield from dfs([], set())

    def rank_merges(self, node: Node, limit: int = 400) -> Iterator[dict]:
        """Interleavings of the operations of a node's members (each keeps its order)."""
        frag = self.frag
        if node.kind == "fork":
            ranks = {}
            for r, i in node.members:
                ranks[(r, i)] = [0 if frag.roles[r].items[i].kind == "fork" else 1]
            yield ranks
            return
        seqs = [(m, len(frag.roles[m[0]].items[m[1]].ops)) for m in node.members]
        if len(seqs) == 1:
            m, length = seqs[0]
            yield {m: list(range(length))}
            return
        # waits last among ready operations first, then everything else
        count = 0

        def is_wait(m, k):
            op = frag.roles[m[0]].items[m[1]].ops[k].op
            return op.kind in ("barrier_wait", "wait_parity")

        results = []

        def rec(pos, taken, ranks):
            nonlocal count
            if count >= limit:
                return
            if all(pos[j] == seqs[j][1] for j in range(len(seqs))):
                count += 1
                results.append({m: list(ranks[m]) for m, _ in seqs})
                return
            ready = [j for j in range(len(seqs)) if pos[j] < seqs[j][1]]
            ready.sort(key=lambda j: (is_wait(seqs[j][0], pos[j]), j))
            for j in ready:
                m = seqs[j][0]
                ranks[m].append(taken)
                pos[j] += 1
                rec(pos, taken + 1, ranks)
                pos[j] -= 1
                ranks[m].pop()
        rec([0] * len(seqs), 0, {m: [] for m, _ in seqs})
        yield from results

    def candidates(self, limit: int = 3000) -> Iterator[Tau]:
        """Candidate orders, per alignment (at most `limit` each)."""
        for al in self.alignments:
            self._use(al)
            count = 0
            for order in self.orders():
                per_node = [list(self.rank_merges(self.nodes[v])) for v in order]
                for combo in itertools.product(*per_node):
                    ranks = {}
                    for d in combo:
                        ranks.update(d)
                    yield Tau(order, ranks, al.nodes, al.edges, dict(al.shifts))
                    count += 1
                    if count >= limit:
                        break
                if count >= limit:
                    break

    def apply(self, tau: Tau) -> None:
        if tau.nodes is not None:
            self.nodes, self.edges = tau.nodes, tau.edges
            self.shifts = tau.shifts
        for g, v in enumerate(tau.order):
            for r, i in self.nodes[v].members:
                item = self.frag.roles[r].items[i]
                item.group = g
                item.ranks = tau.ranks.get((r, i)) or [0] * max(1, len(item.ops))
                item.shift = tau.shifts.get((r, i), z3.IntVal(0)) if item.kind == "loop" else 0


def _thread_key(role: Role) -> str:
    return str(z3.simplify(role.lo))


# ----------------------------------------------------------------------------------------------
# Concrete check of a tau candidate: the tau-ordered run of model/semantics.py
# ----------------------------------------------------------------------------------------------

class TauRun:
    """The agents of a concrete System annotated with the role items their instructions come
    from, to replay candidate orders on model/semantics.py."""

    def __init__(self, frag: "Fragment", system, values: Mapping[str, int]):
        self.frag = frag
        self.system = system
        self.values = values
        self.annotations = self._annotate()

    def _value(self, t, agent) -> int:
        """A term over the parameters and the grid position at this run's values."""
        frag = self.frag
        sub = [(frag.params[n], z3.IntVal(v)) for n, v in self.values.items()
               if n in frag.params and not z3.is_int_value(frag.params[n])]
        for g, v in self.system.grid_position.items():
            if g in frag.grid_vars:
                sub.append((frag.grid_vars[g], z3.IntVal(v)))
        return _evaluate(t, sub)

    def _role_of(self, agent) -> int:
        frag = self.frag
        sub = [(frag.params[n], z3.IntVal(v)) for n, v in self.values.items()
               if n in frag.params and not z3.is_int_value(frag.params[n])]
        for g, v in self.system.grid_position.items():
            if g in frag.grid_vars:
                sub.append((frag.grid_vars[g], z3.IntVal(v)))
        for r, role in enumerate(frag.roles):
            if role.block != agent.block or role.warp != agent.warp:
                continue
            lo = z3.simplify(z3.substitute(role.lo, *sub)).as_long() if sub else \
                z3.simplify(role.lo).as_long()
            size = z3.simplify(z3.substitute(role.size, *sub)).as_long() if sub else \
                z3.simplify(role.size).as_long()
            if lo <= agent.thread < lo + size:
                return r
        raise Unsupported(f"agent {agent.name} belongs to no role")

    def _annotate(self):
        sysm = self.system
        k = self.frag.kernel
        env0 = {**sysm.params, **sysm.grid_position}
        out = [[] for _ in sysm.agents]
        index = {(a.block, a.thread, a.warp): i for i, a in enumerate(sysm.agents)}
        for a, agent in enumerate(sysm.agents):
            if agent.warp is not None:
                continue
            env = dict(env0)
            for axis, c in zip(self.frag.cluster_axes, agent.block):
                env[axis] = c
            env[k.thread_axis] = agent.thread
            env[k.warp_axis] = 0
            self.walk(k.body, env, a, None, out, index, agent)
        roles = [self._role_of(agent) for agent in sysm.agents]
        lookup = []
        for r, role in enumerate(self.frag.roles):
            table = {}
            for i, item in enumerate(role.items):
                if item.kind == "loop":
                    for b, bop in enumerate(item.body):
                        table[("op", id(bop.op))] = (i, b)
                elif item.kind == "op":
                    table[("op", id(item.op))] = (i, 0)
                else:
                    table[(item.kind, id(item.region))] = (i, 0)
            for twin, op in getattr(role, "twins", {}).items():   # ranges merged into the role
                table[("op", twin)] = table[("op", op)]
            lookup.append(table)
        ann = []
        for a, entries in enumerate(out):
            if len(entries) != len(sysm.programs[a]):
                raise Unsupported("internal: the tau walk disagrees with the unrolled program")
            r = roles[a]
            rows = []
            for key, iteration in entries:
                if key not in lookup[r]:
                    raise Unsupported("internal: an instruction has no role item")
                i, b = lookup[r][key]
                rows.append((r, i, b, iteration))
            ann.append(rows)
        return ann

    def walk(self, body, env, agent, region_warps, out, index, ag, iteration=None):
        from ...model.ir import evaluate
        k = self.frag.kernel
        for stmt in body:
            if isinstance(stmt, Op):
                out[agent].append((("op", id(stmt)), iteration))
            elif isinstance(stmt, Loop):
                trip = evaluate(stmt.trip, env)
                saved = env.get(stmt.var)
                for i in range(max(trip, 0)):
                    env[stmt.var] = i
                    self.walk(stmt.body, env, agent, region_warps, out, index, ag, i)
                if saved is None:
                    env.pop(stmt.var, None)
                else:
                    env[stmt.var] = saved
            elif isinstance(stmt, When):
                branch = stmt.then if evaluate(stmt.cond, env) else stmt.orelse
                self.walk(branch, env, agent, region_warps, out, index, ag, iteration)
            elif isinstance(stmt, WarpRegion):
                out[agent].append((("fork", id(stmt)), None))
                for w in range(1, k.num_warps):
                    wa = index[(ag.block, ag.thread, w)]
                    out[wa].append((("await", id(stmt)), None))
                    wenv = dict(env)
                    wenv[stmt.axis] = wenv[k.warp_axis] = w
                    self.walk(stmt.body, wenv, wa, None, out, index, ag, iteration)
                wenv = dict(env)
                wenv[stmt.axis] = wenv[k.warp_axis] = 0
                self.walk(stmt.body, wenv, agent, None, out, index, ag, iteration)
                out[agent].append((("join", id(stmt)), None))

    def check(self, search: TauSearch) -> str | None:
        """None when the tau-ordered run passes every wait and ends cleanly; else why not."""
        sysm = self.system
        frag = self.frag
        events = []
        shift_of = {}
        for a, rows in enumerate(self.annotations):
            for pc, (r, i, b, iteration) in enumerate(rows):
                item = frag.roles[r].items[i]
                keyed = item.kind == "loop"
                key = 0
                if keyed:
                    if (r, i) not in shift_of:
                        shift_of[(r, i)] = self._value(_shift_term(item), sysm.agents[a])
                    key = iteration + shift_of[(r, i)]
                events.append(((item.group, key, item.ranks[b], a, pc), a))
        events.sort()
        state = sysm.initial_state()
        A = sysm.n_agents

        def settle(state):
            moved = True
            while moved:
                moved = False
                for action in range(A, sysm.n_actions):
                    if sysm.enabled(state, action):
                        state, v = sysm.step(state, action)
                        if v is not None:
                            return state, v.code
                        moved = True
            return state, None

        for key, a in events:
            state, code = settle(state)
            if code:
                return f"{code} while landing"
            if not sysm.enabled(state, a):
                instr = sysm.current(state, a)
                what = sysm.sources[instr.src].text if instr is not None else "its end"
                return f"{sysm.agents[a].name} blocked at {what} at {dict(self.values)}"
            state, v = sysm.step(state, a)
            if v is not None:
                return f"{v.code} at {sysm.agents[a].name} at {dict(self.values)}"
            bad = sysm.state_violations(state)
            if bad:
                return f"{bad[0].code} at {dict(self.values)}"
        state, code = settle(state)
        if code:
            return f"{code} at {dict(self.values)}"
        if not sysm.is_done(state):
            return f"not done at {dict(self.values)}"
        bad = sysm.state_violations(state)
        return f"{bad[0].code} at exit at {dict(self.values)}" if bad else None


def tau_static_ok(frag: "Fragment", search: TauSearch, tau: Tau) -> bool:
    """Fork before every await of its region, join after everything the warps do in it."""
    group = {v: g for g, v in enumerate(tau.order)}
    for a, b in (tau.edges if tau.edges is not None else search.edges):
        if group[a] >= group[b]:
            return False
    return True


# ----------------------------------------------------------------------------------------------
# Classes and systems
# ----------------------------------------------------------------------------------------------

def _ring_lhs(frag: "Fragment", ref, env, S) -> Expr:
    """v in a ring index `v % S`; a plain index e counts as `e % S` when 0 <= e < S always
    (outside loops)."""
    idx = ref.index
    if len(idx) != 1:
        raise Unsupported(f"ring barrier `{ref}` needs one index")
    e = idx[0]
    if isinstance(e, BinOp) and e.op == "%" and frag.solver.equal(z_int(e.rhs, env), S):
        return e.lhs
    try:
        t = z_int(e, env)
    except Unsupported:
        t = None
    if t is not None and frag.solver.valid(z3.And(t >= 0, t < S)):
        return e
    raise Unsupported(f"ring barrier `{ref}` must be indexed as `expr % {S}`")


def _ring_groups(self: "Fragment", allocs: list[BarrierAlloc], S) -> list[list[BarrierAlloc]]:
    """Split the arrays of one symbolic size into classes: arrays used with the same offset in
    a loop share a class (a ring's full and empty barriers); arrays used with different offsets
    in one loop (two pipelines one iteration apart) go to different classes. Any partition is
    sound -- classes are projections -- this one keeps what a ring needs together."""
    parent = {a.name: a.name for a in allocs}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    conflicts = []
    for role in self.roles:
        for item in role.items:
            if item.kind != "loop":
                continue
            offsets: dict[str, list] = {}
            for bop in item.body:
                ref = bop.op.barrier
                if ref is None or ref.alloc not in allocs:
                    continue
                lhs = _ring_lhs(self, ref, role.env, S)
                lin = linear_in(lhs, item.loop.var, role.env, self.solver)
                if lin is None or lin[0] != 1:
                    raise Unsupported(f"ring index `{ref}` is not (i + c) % {S}", bop.op.loc)
                offsets.setdefault(ref.alloc.name, []).append(lin[1])
            names = list(offsets)
            for name in names:
                first = offsets[name][0]
                if any(not self.solver.equal(first, o) for o in offsets[name][1:]):
                    raise Unsupported(f"`{name}` is used with two offsets in one loop",
                                      item.loop.loc)
            for a, b in itertools.combinations(names, 2):
                if self.solver.equal(offsets[a][0], offsets[b][0]):
                    parent[find(a)] = find(b)
                else:
                    conflicts.append((a, b, item.loop.loc))
    for a, b, loc in conflicts:
        if find(a) == find(b):
            raise Unsupported(f"`{a}` and `{b}` are used together with different offsets", loc)
    groups: dict[str, list] = {}
    for a in allocs:
        groups.setdefault(find(a.name), []).append(a)
    return list(groups.values())


def _build_classes(self: "Fragment") -> list[BarrierClass]:
    k = self.kernel
    concrete = BarrierClass("barriers", None, [])
    rings: list[BarrierClass] = []
    for alloc in k.barriers:
        dims = [z3.simplify(z_int(d, self.base_env)) for d in alloc.shape]
        for d in dims:
            self.require(d >= 1, f"`{alloc.name}` has at least one barrier")
        if all(z3.is_int_value(d) for d in dims):
            concrete.allocs.append(alloc)
            continue
        if len(dims) != 1:
            raise Unsupported(f"`{alloc.name}`: a multi-dimensional barrier array with a "
                              "symbolic size", alloc.loc)
        S = dims[0]
        if nonlinear(S):
            raise Unsupported(f"`{alloc.name}`: the number of barriers is not linear", alloc.loc)
        for cls in rings:
            if self.solver.equal(cls.ring, S):
                cls.allocs.append(alloc)
                break
        else:
            rings.append(BarrierClass(f"ring of {S}", S, [alloc]))
    split = []
    for ring in rings:
        groups = _ring_groups(self, ring.allocs, ring.ring)
        for g in groups:
            name = ring.name if len(groups) == 1 else \
                f"{ring.name} ({', '.join(a.name for a in g)})"
            split.append(BarrierClass(name, ring.ring, g))
    classes = ([concrete] if concrete.allocs else []) + split
    multi = len(self.blocks) > 1
    for n, cls in enumerate(classes):
        if cls.ring is not None:
            cls.s = z3.Int(f"s{n}" if n else "s")
        for alloc in cls.allocs:
            fan_in = 1
            if alloc.cluster:
                fan_in += sum(self.cluster_shape[self.cluster_axes.index(a)] - 1
                              for a in alloc.collective_axes)
            expected = z3.simplify(z_int(alloc.num_arrivals, self.base_env) * fan_in)
            self.require(z3.And(expected >= 1, expected <= MAX_ARRIVALS),
                         f"`{alloc.name}` expects 1..{MAX_ARRIVALS} arrivals")
            if cls.ring is None:
                shape = [self.concrete(d, "num_barriers") for d in alloc.shape]
                indices = list(itertools.product(*[range(d) for d in shape]))
            else:
                indices = [None]
            for block in self.blocks:
                for index in indices:
                    name = alloc.name
                    if index is None:
                        name += "[s]"
                    elif not alloc.scalar:
                        name += "[" + ",".join(map(str, index)) + "]"
                    if multi:
                        name += "@" + ",".join(map(str, block))
                    cls.instances.append((alloc, index, block))
                    cls.names.append(name)
                    cls.expected.append(expected)
    self.classes = classes
    return classes


def _build_systems(self: "Fragment") -> list[tuple[BarrierClass, CounterSystem, ClassBuilder]]:
    built = []
    for cls in self.classes:
        cls.thresholds = []
        builder = ClassBuilder(self, cls)
        croles = []
        for role in self.roles:
            segs = builder.segments(role)
            if segs:
                croles.append(CRole(role.name, role.size, segs, role.single))
        built.append((cls, croles, builder))
    out = []
    for cls, croles, builder in built:
        frozen = [self.params[n] for n in self.symbolic] + list(self.grid_vars.values())
        constraints = list(self.assumptions) + list(self.facts) + \
            [c for c, _ in self.side_conditions]
        if cls.ring is not None:
            frozen += [cls.s] + [u for _, u in cls.thresholds]
            constraints += [cls.ring >= 1, cls.s >= 0, cls.s < cls.ring] + builder.facts()
        insts = [CInst(n, e) for n, e in zip(cls.names, cls.expected)]
        system = CounterSystem(f"{self.kernel.name}:{cls.name}", frozen, constraints, insts,
                               builder.slots, croles)
        out.append((cls, system, builder))
    return out


def _evaluate(t, sub) -> int:
    v = z3.simplify(z3.substitute(t, *sub) if sub else t)
    if not z3.is_int_value(v):
        raise Unsupported(f"cannot evaluate `{t}`")
    return v.as_long()


def _valuations(self: "Fragment", cls: BarrierClass, system: CounterSystem,
                point: Mapping[str, int]) -> list[list[int]]:
    """Concrete values of a class system's frozen variables for parameter values `point`
    (every representative slot, every grid position)."""
    sub = [(self.params[n], z3.IntVal(point[n])) for n in self.symbolic]
    grids = [[]]
    for axis, size in self.kernel.grid:
        n = _evaluate(z_int(size, self.params), sub)
        grids = [g + [(self.grid_vars[axis], z3.IntVal(v))] for g in grids for v in range(min(n, 3))]
    out = []
    for g in grids:
        full = sub + g
        base = [point[n] for n in self.symbolic] + [v.as_long() for _, v in g]
        if cls.ring is None:
            out.append(base)
            continue
        S = _evaluate(cls.ring, full)
        for s in range(S):
            us = []
            for x, _ in cls.thresholds:
                xv = _evaluate(x, full)
                us.append(max(0, -((s - xv) // S)))     # ceil((x - s) / S), at least 0
            out.append(base + [s] + us)
    return out


Fragment.build_classes = _build_classes
Fragment.build_systems = _build_systems
Fragment.valuations = _valuations
