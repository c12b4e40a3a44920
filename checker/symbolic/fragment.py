"""From a kernel's IR to the fragment `prove` supports: roles, their items, and the parameters.

Supported (anything else raises `Unsupported`, and the verdict says why):
- cluster shape, warps per warpgroup: concrete; the number of threads may be symbolic when the
  roles are cut out of the thread range by comparisons `thread OP expr` (OP in == != < <= > >=);
- loops are not nested (unroll.py and nested.py have made the nests they can one level);
  trip counts, conditions, counts and bytes are linear in the parameters
  and the loop variable (division and modulo by constants allowed);
- barrier arrays have a concrete number of barriers, or one symbolic dimension S (a ring) indexed
  with `(i + c) % S` (i the loop variable, c free of it) or `c % S` outside loops;
- a plain tcgen05_mma (no barrier) is followed in its thread by a tcgen05 op that arrives;
- a thread waits on one barrier either by stated phases (`wait_parity(phase=)`) or by what it
  observed (`barrier_wait`, `wait_parity(bar, P)`), not both.
- no cluster barrier, no named barrier (prove.py lowers those to mbarriers first, hw.py), no
  `semaphore_signal_parallel` (semaphores are classes of their own, semaphores.py).

The rest of the pipeline lives beside this module: classes.py splits the barrier instances into
classes, program.py turns each role into the counter program of one class, order.py searches the
static order tau that rules out deadlocks.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import z3

from ...model import kinds, primitives
from ...model.expr import same
from ...model.ir import BinOp, Expr, Kernel, Loop, Op, UnOp, WarpRegion, When, free_vars, walk
from ...model.hw_barriers import HARDWARE_BARRIER_KINDS
from .classes import BarrierClass, build_classes
from .counters import K, CounterSystem
from .program import ClassBuilder, build_systems, valuations
from .semaphores import takes
from .terms import CMP, FLIP, LOOPVAR, Solver, Unsupported, consts, linear_in, z_bool, z_int

# Waits on an mbarrier's phase, and tests for one that may observe nothing.
PHASE_WAITS = kinds.blocking_waits("phase")
TESTS = kinds.kinds_where(lambda p: p.waits_for != "" and not p.blocking)
# Pallas operations that wait for nothing: its arrivals (Pallas's rule 2 is about them).
PALLAS_ARRIVALS = kinds.kinds_where(lambda p: p.pallas and p.waits_for == "")
# Arrivals through the tensor core (on a barrier, if the op names one).
TENSOR_CORE = kinds.kinds_where(lambda p: p.tensor_core)


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

    def shift_term(self) -> z3.ArithRef:
        """The tau key shift of a loop as a term."""
        return z3.IntVal(self.shift) if isinstance(self.shift, int) else self.shift


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

    def __init__(self, kernel: Kernel, symbolic: Sequence[str], concrete: Mapping[str, int],
                 concrete_rings: bool = False):
        # analyse 1-D barrier arrays of concrete size used as rings at one representative slot
        # (classes.py), as rings of symbolic size are
        self.concrete_rings = concrete_rings
        explicit = next((b for b in kernel.barriers if b.explicit_init), None)
        if explicit is not None:
            # Who sees an init is a bit per thread and per sync phase (init_visibility.py):
            # the counter abstraction counts threads of a role, not what each has seen.
            raise Unsupported(f"`{explicit.name}` is initialised by the protocol "
                              "(explicit_init=True): init visibility is outside the prover's "
                              "fragment", explicit.loc)
        for op in kernel.ops():
            if op.kind in HARDWARE_BARRIER_KINDS:
                # Named and cluster barriers count threads, not mbarrier arrivals: the counter
                # abstraction has no class for them, and dropping them would be unsound.
                raise Unsupported(f"`{op.describe()}` (a named or cluster hardware barrier) is "
                                  "outside the prover's fragment", op.loc)
            if op.kind in TESTS:
                # Whether a test observes a completion depends on the schedule: the counter
                # abstraction's waits always do.
                raise Unsupported(f"`{op.describe()}` (a non-blocking wait that may or may not "
                                  "observe a completion) is outside the prover's fragment", op.loc)
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
                  if op.kind in PHASE_WAITS and op.barrier is not None}
        for op in k.ops():
            if op.barrier is not None and op.barrier.alloc.name not in waited \
                    and op.kind in PALLAS_ARRIVALS:
                # Pallas rule 2 on a barrier nobody waits on is left to the explorer
                raise Unsupported(f"`{op.barrier.alloc.name}` receives Pallas arrivals but no "
                                  "thread waits on it", op.loc)
            if op.kind == primitives.SEMAPHORE_SIGNAL_PARALLEL:
                raise Unsupported(f"`{op.describe()}`: signals landing in no guaranteed order "
                                  "are left to the explorer", op.loc)
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
                    _check_phase_waits(role)
                    roles.append(role)
        self.roles = self.merge_roles(roles)
        return self.roles

    def merge_roles(self, roles: list[Role]) -> list[Role]:
        """Adjacent thread ranges of one block and warp whose programs are the same (a leader
        consumer coded apart from the others, with the same operations) become one role: the
        same interchangeable threads, one counter. `twins` maps each op of a merged range to
        the op of the role's program it equals (for the replay on model/semantics.py)."""
        out: list[Role] = []
        # Decrementing semaphore waits take any thread's signal, so threads of one program may
        # drift apart without bound: a counter role's offset bound would fail, single threads
        # keep their own positions.
        drift = any(takes(op) for op in self.kernel.ops())
        for role in roles:
            prev = out[-1] if out else None
            if prev is not None and not drift and prev.block == role.block and \
                    prev.warp == role.warp and \
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
                ea[ia.loop.var], eb[ib.loop.var] = LOOPVAR(), LOOPVAR()
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
                            (oa.parity, ob.parity), (oa.phase, ob.phase))):
                    return False
                mem_a, mem_b = oa.reads + oa.writes, ob.reads + ob.writes
                if len(oa.reads) != len(ob.reads) or len(mem_a) != len(mem_b) or any(
                        ma.alloc is not mb.alloc or len(ma.index) != len(mb.index) or
                        len(ma.region) != len(mb.region) or
                        not all(same_int(x, y, ea, eb) for x, y in zip(ma.exprs(), mb.exprs()))
                        for ma, mb in zip(mem_a, mem_b)):
                    return False            # other memory: other accesses (races.py)
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
                    for e in [oa.count, oa.bytes, oa.parity, oa.phase] + \
                            (list(oa.barrier.index) + list(oa.barrier.block or ())
                             if oa.barrier is not None else []) + \
                            [i for m in mem_a for i in m.exprs()]:
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
                if not (isinstance(atom, BinOp) and atom.op in CMP):
                    raise Unsupported(f"condition `{atom}` on the thread index is not a "
                                      "comparison", None)
                lin = linear_in(BinOp("-", atom.lhs, atom.rhs), axis, self.base_env, self.solver)
                if lin is None or lin[0] not in (1, -1):
                    raise Unsupported(f"condition `{atom}` is not of the form thread OP expr")
                a, b = lin
                x = z3.simplify(-b if a == 1 else b)     # thread OP' x
                op = atom.op if a == 1 else FLIP[atom.op]
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
        exprs = [op.count, op.bytes] + [e for e in (op.parity, op.phase) if e is not None]
        if op.barrier is not None:
            exprs += list(op.barrier.index) + list(op.barrier.block or ())
        for e in exprs:
            if axis in free_vars(e):
                raise Unsupported(f"`{op.describe()}` depends on the thread index inside a "
                                  "group of threads whose size is symbolic", op.loc)

    def require_always(self, claim, text, ctx):
        """A range fact over every loop coordinate: proved, or kept as a side condition."""
        if any(c.eq(K()) for c in consts(claim)):
            if self.solver.valid(claim, *ctx.domain()):
                return
            raise Unsupported(f"cannot show that {text} in every iteration")
        self.require(claim, text)

    # -- barrier classes and their counter systems (classes.py, program.py) --------------------

    def build_classes(self) -> list[BarrierClass]:
        self.classes = build_classes(self)
        return self.classes

    def build_systems(self) -> list[tuple[BarrierClass, CounterSystem, ClassBuilder]]:
        return build_systems(self)

    def valuations(self, cls: BarrierClass, system: CounterSystem,
                   point: Mapping[str, int]) -> list[list[int]]:
        return valuations(self, cls, system, point)


def _check_plain_mma(role: Role) -> None:
    """A tcgen05_mma without a barrier leaves nothing to observe: it must be followed, in its
    thread and unconditionally, by a tcgen05 op that arrives (the tcgen05 queue is in order, so
    that arrival implies its completion; BP105 at exit is then checked on that arrival)."""
    flat = []
    for item in role.items:
        for bop in item.ops:
            flat.append((item, bop))
    plain = [n for n, (_, bop) in enumerate(flat)
             if bop.op.kind == primitives.TCGEN05_MMA and bop.op.barrier is None]
    if not plain:
        return

    def arrives(bop) -> bool:
        return bop.op.kind in TENSOR_CORE and bop.op.barrier is not None

    # In a loop, each iteration's plain MMAs may be covered by an arrival later in the same
    # iteration (a K-loop's MMA and its commit) under no condition the MMA's own do not include
    # (a pipeline's steady state guarded by `v >= stages`): every instance is then followed by
    # one, since nothing between them changes the loop variable or the parameters.
    covered = set()

    def implied(later_conds, conds) -> bool:
        return all(any(same(c, d) and p == q for d, q in conds) for c, p in later_conds)
    for n in plain:
        item, bop = flat[n]
        if item.kind == "loop" and any(
                arrives(later) and implied(later.conds, bop.conds)
                for later in item.body[next(i for i, b in enumerate(item.body) if b is bop) + 1:]):
            covered.add(n)
    plain = [n for n in plain if n not in covered]
    if not plain:
        return
    for n in range(plain[-1] + 1, len(flat)):
        item, bop = flat[n]
        if arrives(bop) and item.kind == "op" and not item.conds:
            return
    op = flat[plain[-1]][1].op
    raise Unsupported("a tcgen05_mma without a barrier is not followed by an unconditional "
                      "tcgen05_commit_arrive", op.loc)


def _check_phase_waits(role: Role) -> None:
    """A thread that states the phases it waits for on a barrier (`wait_parity(phase=)`) must
    not also wait on it by its observations (`barrier_wait`, `wait_parity(bar, P)`): the class
    systems hold the first kind to its stated phase and keep no observation for it, so the
    second kind would see a history that skips the phases the first one observed."""
    kinds: dict[str, tuple[bool, Op]] = {}
    for item in role.items:
        for bop in item.ops:
            op = bop.op
            if op.kind not in PHASE_WAITS or op.barrier is None:
                continue
            stated = op.kind == primitives.WAIT_PARITY and op.phase is not None
            name = op.barrier.alloc.name
            seen = kinds.setdefault(name, (stated, op))
            if seen[0] != stated:
                raise Unsupported(f"{role.name} waits on `{name}` both for stated phases "
                                  f"(wait_parity(phase=)) and by what it observed "
                                  f"(`{seen[1].describe()}` and `{op.describe()}`): outside the "
                                  "prover's fragment", op.loc)


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
