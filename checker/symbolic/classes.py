"""Barrier classes: the barrier instances cut into groups that the prover checks one at a time.

All instances of concrete arrays and scalar barriers form one class; arrays of the same symbolic
size S that loops use with the same offset form another (arrays used with different offsets in
one loop are kept apart), analysed at one representative slot s (0 <= s < S, symbolic). Any
partition is sound: a class system is a projection of the kernel that keeps every operation on
its barriers (program.py) and over-approximates the rest.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import z3

from ...model.ir import MAX_ARRIVALS, BarrierAlloc, BinOp, Expr
from .hw import is_named_barrier
from .partition import handoff_components, role_components
from .strides import ring_step_reason
from .terms import Unsupported, linear_in, nonlinear, z_int

if TYPE_CHECKING:
    from .fragment import Fragment


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
    # SMEM/TMEM buffers whose races this class judges (races.py): a ring buffer of size S at
    # the representative slot s (index None), a concrete buffer slot by slot, in every block
    buffers: list = field(default_factory=list)
    cells: list[tuple] = field(default_factory=list)        # (alloc, index or None, block)
    cell_names: list[str] = field(default_factory=list)

    def cell(self, alloc, index, block) -> int:
        key = (alloc.name, index, block)
        for i, (a, idx, b) in enumerate(self.cells):
            if (a.name, idx, b) == key:
                return i
        raise KeyError(key)

    def inst(self, alloc, index, block) -> int:
        key = (alloc.name, index, block)
        for i, (a, idx, b) in enumerate(self.instances):
            if (a.name, idx, b) == key:
                return i
        raise KeyError(key)


def ring_lhs(frag: "Fragment", ref, env, S) -> Expr:
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
                lhs = ring_lhs(self, ref, role.env, S)
                lin = linear_in(lhs, item.loop.var, role.env, self.solver)
                if lin is None or lin[0] != 1:
                    raise Unsupported(ring_step_reason(ref, item.loop.var, lin, S), bop.op.loc)
                offsets.setdefault(ref.alloc.name, []).append(lin[1])
            names = list(offsets)
            for name in names:
                # one array at offsets a constant apart (a K and a V tile per iteration) is one
                # ring whose lap orders its operations by offset (program.py's op_offsets)
                first = offsets[name][0]
                if any(not z3.is_int_value(z3.simplify(first - o)) for o in offsets[name][1:]):
                    raise Unsupported(f"`{name}` is used with two offsets in one loop that "
                                      "differ by a non-constant amount", item.loop.loc)
            for a, b in itertools.combinations(names, 2):
                if self.solver.equal(offsets[a][0], offsets[b][0]):
                    parent[find(a)] = find(b)
                else:           # one ring at two offsets: program.py's op_offsets
                    conflicts.append((a, b, item.loop.loc,
                                      z3.simplify(offsets[a][0] - offsets[b][0])))
    # with the halves (partition.py `role_components`), arrays no loop uses (a Q ring taken
    # once per tile, slots as numbers) are joined as their hand-offs join them: the `empty`
    # waited before the `ready` is filled is one ring
    looped = {n for role in self.roles for item in role.items if item.kind == "loop"
              for bop in item.body if bop.op.barrier is not None
              for n in [bop.op.barrier.alloc.name]}
    unlooped = [a.name for a in allocs if a.name not in looped] \
        if getattr(self, "role_classes", False) else []
    comp = handoff_components(self.roles, unlooped) if len(unlooped) > 1 else None
    for a, b in itertools.combinations(unlooped, 2):
        if comp is None or comp[a] == comp[b]:
            parent[find(a)] = find(b)
    for a, b, loc, lag in conflicts:
        if find(a) == find(b) and not z3.is_int_value(lag):
            raise Unsupported(f"`{a}` and `{b}` are used together with offsets that differ by "
                              f"a non-constant amount ({lag})", loc)
    groups: dict[str, list] = {}
    for a in allocs:
        groups.setdefault(find(a.name), []).append(a)
    return list(groups.values())


def _ring_indexed(self: "Fragment", alloc, S, memory: bool = False) -> bool:
    """Is every use of a 1-D array of concrete size S a ring access (`(i + c) % S` in a loop,
    a constant slot outside)? Then it may be analysed at one representative slot, like a ring
    of symbolic size: one slot's barriers instead of all of them (`concrete_rings`). With
    `memory`, `alloc` is a buffer and its uses are the operations' reads and writes."""
    for role in self.roles:
        for item in role.items:
            for bop in item.ops:
                refs = bop.op.reads + bop.op.writes if memory else [bop.op.barrier]
                for ref in refs:
                    if ref is None or ref.alloc is not alloc:
                        continue
                    if not _ring_ref(self, role, item, ref, S, remote=not memory):
                        return False
    return True


def _ring_ref(self: "Fragment", role, item, ref, S, remote: bool = False) -> bool:
    """`ref` is `(i + c) % S` in a loop over i, or a constant slot outside loops; on its own
    block or, with `remote` (barriers: the class holds the slot in every block, as a ring of
    symbolic size does), on a block the fixed parameters name (a peer's slot)."""
    if len(ref.index) != 1:
        return False
    if getattr(ref, "block", None) is not None:
        if not remote:
            return False
        try:
            for c in ref.block:
                self.concrete(c, "a remote block", role.env)
        except Unsupported:
            return False
    try:
        lhs = ring_lhs(self, ref, role.env, S)
    except Unsupported:
        return False
    if item.kind == "loop":
        lin = linear_in(lhs, item.loop.var, role.env, self.solver)
        if lin is None or lin[0] != 1:
            return False
    return True


def build_classes(self: "Fragment") -> list[BarrierClass]:
    k = self.kernel
    concrete = BarrierClass("barriers", None, [])
    rings: list[BarrierClass] = []
    semaphores = []
    named = BarrierClass("named barriers", None, [])
    for alloc in k.barriers:
        if alloc.semaphore:     # a counter, analysed alone (semaphores.py)
            semaphores.append(BarrierClass(f"semaphore {alloc.name}", None, [alloc]))
            continue
        if is_named_barrier(alloc):     # lowered named barriers: a class of their own (hw.py)
            named.allocs.append(alloc)
            continue
        dims = [z3.simplify(z_int(d, self.base_env)) for d in alloc.shape]
        for d in dims:
            self.require(d >= 1, f"`{alloc.name}` has at least one barrier")
        if all(z3.is_int_value(d) for d in dims) and not (
                self.concrete_rings and len(dims) == 1 and dims[0].as_long() >= 2
                and _ring_indexed(self, alloc, dims[0])):
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
    concretes = [concrete]
    self.handoff_split = False
    if getattr(self, "handoff_classes", False):     # hand-off pairs apart (partition.py)
        by = role_components if getattr(self, "role_classes", False) else handoff_components
        comp = by(self.roles, [a.name for a in concrete.allocs])
        if comp is not None:
            groups: dict[int, list] = {}
            for a in concrete.allocs:
                groups.setdefault(comp[a.name], []).append(a)
            concretes = [BarrierClass(f"barriers ({', '.join(a.name for a in g)})", None, g)
                         for g in groups.values()]
            self.handoff_split = True
            if getattr(self, "handoff_cover", False):
                covered = _with_order_barriers(groups)
                concretes = covered or concretes
                self.handoff_split = covered is not None
    self.joined_named = False
    if getattr(self, "join_named", False) and named.allocs and len(concretes) == 1 \
            and concrete.allocs:
        # the named barriers in one class with the mbarriers: a sync that orders a hand-off
        # (a wait on one, then the next fill of the other) is seen by the same system
        concrete.allocs.extend(named.allocs)
        named.allocs = []
        self.joined_named = True
    classes = [c for c in concretes + [named] if c.allocs] + split + semaphores
    for n, cls in enumerate(classes):
        if cls.ring is not None:
            cls.s = z3.Int(f"s{n}" if n else "s")
        for alloc in cls.allocs:
            if alloc.semaphore:     # one instance for the cluster; its phase is the value
                cls.instances.append((alloc, (0,), self.blocks[0]))
                cls.names.append(alloc.name)
                cls.expected.append(z3.IntVal(0))   # (pending and expected stay 0)
                continue
            fan_in = 1
            if alloc.cluster:
                fan_in += sum(self.cluster_shape[self.cluster_axes.index(a)] - 1
                              for a in alloc.collective_axes)
            expected = z3.simplify(z_int(alloc.num_arrivals, self.base_env) * fan_in)
            self.require(z3.And(expected >= 1, expected <= MAX_ARRIVALS),
                         f"`{alloc.name}` expects 1..{MAX_ARRIVALS} arrivals")
            for key, name in placed(self, alloc, cls.ring, "num_barriers"):
                cls.instances.append(key)
                cls.names.append(name)
                cls.expected.append(expected)
    return classes


def _with_order_barriers(groups: dict[int, list]) -> list | None:
    """Each hand-off pair's class joined with every barrier no hand-off joins to another (an
    order barrier: a thread waits on it, then on a slot of the ring): a cover of the barriers,
    not a partition, which is as sound (prove.py, point 1: every instance is in some class,
    whose system over-approximates the kernel on it, and every wait is proved enabled in tau
    by a class that holds it). The ping-pong's math warpgroups take a ring's slots in turn
    only through their order barrier: the pair alone lets the second one's wait pass on the
    slot's earlier phase. None when there is no such barrier, fewer than two pairs (one
    class of every barrier is the partition prove.py tries next), or a pair holds a whole
    array (a ring whose slots are no numbers: its class is hardly smaller than that one)."""
    single = [g[0] for g in groups.values() if len(g) == 1]
    pairs = [g for g in groups.values() if len(g) > 1]
    if not single or len(pairs) < 2 or not all(a.scalar for g in pairs for a in g):
        return None
    return [BarrierClass(f"barriers ({', '.join(a.name for a in g)}; ordered by "
                         f"{', '.join(a.name for a in single)})", None, g + single)
            for g in pairs]


def placed(frag: "Fragment", alloc, ring, what: str) -> list[tuple[tuple, str]]:
    """((alloc, index, block), name) of each copy of an allocation the classes track: one per
    block and index, or the representative slot `[s]` of a ring."""
    if ring is None:
        shape = [frag.concrete(d, what) for d in alloc.shape]
        indices = list(itertools.product(*[range(d) for d in shape]))
    else:
        indices = [None]
    out = []
    for block in frag.blocks:
        for index in indices:
            name = alloc.name
            if index is None:
                name += "[s]"
            elif not alloc.scalar:
                name += "[" + ",".join(map(str, index)) + "]"
            if len(frag.blocks) > 1:
                name += "@" + ",".join(map(str, block))
            out.append(((alloc, index, block), name))
    return out
