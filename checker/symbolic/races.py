"""Races (BP200 smem-race, BP201 tmem-race) in the class systems, for every parameter value.

model/memory.py states the rule: an access is *live* while it may still be happening (a
thread's loads and stores between its two neighbouring synchronization instructions, a TMA
copy's destination from issue to landing, a tcgen05 MMA's operands and accumulator until it
completes); a reachable state with two live overlapping accesses of different agents, one a
write, is a race. The prover checks it on the class systems of prove.py:

- Cells. Every buffer is judged in one barrier class: a buffer of concrete size in the concrete
  class (slot by slot), a ring buffer of symbolic size S at the representative slot s of the
  ring class whose barriers its loops index with the same offset (`tiles.at[i % S]` beside
  `full.at[i % S]`). All accesses to a cell are in its class, so every race on it is a race of
  that class system.
- Thread accesses. A `k.read` / `k.write` is an operation of the class program with no barrier
  effect (ACCESS). A thread of the class system may stop there at any time between its
  neighbouring class events, and the class system has every interleaving of the kernel's class
  events, so a state of the kernel where the access is live projects to a class state where the
  thread stands at it: the class system over-approximates the access's live interval.
- Asynchronous accesses. A copy's destination (in every block a multicast reaches) and an
  MMA's operands and accumulator are attached to the in-flight counter of their delivery
  (AsyncSlot): live while it is non-zero. Deliveries that land on one barrier instance are one
  transaction (as in model/memory.py) and never race each other; tcgen05 deliveries of one
  issuing thread are its tensor-core queue, one agent.
- The error condition "race" is the disjunction, over conflicting pairs, of both being live;
  Houdini (houdini.py) must prove it unreachable for every parameter value, exactly as the
  barrier rules. `prove` then says race-free only where Z3 proved it.

- Accesses a thread waits for itself (TMA stores, WGMMA, tcgen05.st) retired by the very next
  instruction (a wait of their group leaving none in flight, under the same conditions): live
  from issue to that wait, i.e. in one gap, so a load or store there over-approximates them.
- A buffer of a symbolic number of slots that threads index by their own index and others use
  whole: one cell; two accesses to their own slots by threads of one role never conflict, nor
  two accesses to regions indexed by the thread that Z3 proves no two distinct threads share
  (own_regions.py: `acc.at[k.ds(k.thread * rows, rows)]` in a group of symbolic size).
- Regions of such a buffer that Z3 proves apart for every parameter value (the two halves of
  a stage two copies fill, the padding past them): one cell per pair of its references that
  may meet (region_cells.py), so accesses to regions that never meet never conflict.
- Regions (`buf.at[i, k.ds(start, size, stride)]`) of a buffer of concrete shape: its cells
  are the explorer's (the frontend's granule, model/memory.py), and an access covers a cell
  under the condition (over the parameters and the loop coordinate) that its run reaches the
  cell in every dimension (`_run_member`: exact for one-slot cells or contiguous runs, the
  hull of a strided run over wider cells; the stride must be a number, the run within the
  buffer for every value). So accesses to disjoint regions never share a cell, for every
  parameter value. A region of a ring's representative slot or of a
  thread-private buffer is judged as that whole slot (`coarse_regions`, named in the reason of
  a failed proof); races_proof.py retries a kernel whose regions are outside the fragment on whole
  buffers (coarser, so a proof there holds too).

- The same accesses in a ring loop retired later (`wgmma_wait(1)` keeping one WGMMA in
  flight), when no class event of their slot lies between issue and retirement on any way the
  thread can go (retired.py, also for a peeled stage issued before the loop): the ACCESS at the
  issue still covers them.
- cp.async copies, TMA stores, WGMMAs and tcgen05.st into (from) buffers only their own
  thread touches, or cells no other agent touches (own_cells: two warpgroups storing from
  their own staging slots): proved along that thread's program (own_copies.py), with no place
  in the class systems; a buffer all of whose accesses are so (owned_buffer) has none either.
- A tcgen05 MMA that arrives on no barrier of the class owning its cells (a plain MMA, whose
  operands a commit releases in one class and whose accumulator another commit hands off in
  another): its thread's tensor-core queue completes in order, so it is done once a later
  tcgen05 arrival of its thread lands. When the thread's next operations of the class, on every
  way, are such MMAs up to a tcgen05 arrival on the class that runs whenever the MMA does, its
  cells are live at its ACCESS and those MMAs', then until that arrival and the ones issued
  right after it have all landed, as accesses of the queue (queued_plan, queue_holds.py);
  otherwise Unsupported.
- Cells ride only on the deliveries whose guard can hold with theirs (`_carry`).

Outside this fragment (`Unsupported`, so `unknown` with the reason): other accesses that stay
live until a later wait of the issuing thread past other instructions (their interval is not
delimited by class events), a tcgen05 MMA touching memory whose next operation of the class is
not a tcgen05 arrival there (or another such MMA), a copy and its delivery's barrier in
different classes, a ring buffer used unindexed or at another offset than its ring's barriers.

prove_races tries concrete arrays as rings at one representative slot first (a buffer of as
many slots indexed like them judged there), then the halves of a ping-pong (a buffer at
constant slots split per slot beside its barriers: partition.py `split_constant_buffers`), then
one class for all concrete barriers, then the hand-off classes of partition.py (each buffer
judged by the class of the barriers its accesses go through): any partition is sound, as
above.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import z3

from ...model import kinds, primitives
from ...model.ir import Var, free_vars
from ...model.compile import ASYNC_GROUPS, ASYNC_WAITS
from .classes import BarrierClass, _ring_indexed, placed, ring_lhs
from .counters import ACCESS, K, COp
from .own_copies import own_cells, own_copies_retired, owned_buffer, private_buffers
from .own_regions import own_region_keys, ref_key
from .region_cells import region_cells, within_buffer
from .retired import retired_before_next_slot_event
from .plain import Plain
from . import queue_holds
from .queue_holds import arrival as _arrival, compatible
from .terms import Unsupported, linear_in, z_int

if TYPE_CHECKING:
    from .encode import Encoder, SymState
    from .fragment import BodyOp, Fragment, Item, Role
    from .program import ClassBuilder

SPACE_CODE = {"smem": "BP200", "tmem": "BP201"}
# TMA loads: their destination, in every block the copy reaches, is live until it lands (the
# memory of an st.async into a peer's SMEM is left to the explorer)
COPY_KINDS = (primitives.COPY_GMEM_TO_SMEM, primitives.TMA_LOAD)
# a thread's own loads and stores, live in the gap where it stands
THREAD_ACCESSES = kinds.kinds_where(lambda p: p.memory == "thread")
# accesses live until a later wait of the issuing thread (model/memory.py), but cp.async,
# which has a rule of its own (access_cops: thread-private destinations only)
WAITED_KINDS = kinds.kinds_where(lambda p: p.memory == "issue") - {primitives.CP_ASYNC}
PHASE_WAITS = kinds.blocking_waits("phase")


# ----------------------------------------------------------------------------------------------
# Which class judges which buffer
# ----------------------------------------------------------------------------------------------

def assign_buffers(frag: "Fragment") -> None:
    """Give every buffer of the kernel to one class of `frag.classes` and name its cells."""
    k = frag.kernel
    concretes = [c for c in frag.classes if c.ring is None]
    frag.private_buffers = set()
    frag.own_regions = set()
    frag.region_cells = {}
    frag.owned_buffers = set()
    for alloc in k.buffers:
        if owned_buffer(frag, alloc):      # judged along its threads' programs alone
            frag.owned_buffers.add(alloc.name)
            continue
        dims = [z3.simplify(z_int(d, frag.base_env)) for d in alloc.shape]
        private = not all(z3.is_int_value(d) for d in dims) and _thread_private(k, alloc)
        if private:
            frag.private_buffers.add(alloc.name)
            frag.own_regions |= own_region_keys(frag, alloc)
            split = region_cells(frag, alloc)
            if split is not None:
                frag.region_cells[alloc.name] = split
        ring = None if private else _concrete_ring_of(frag, alloc, dims)
        if ring is not None:
            ring.buffers.append(alloc)
            continue
        if private or all(z3.is_int_value(d) for d in dims):
            if not concretes:
                concretes.append(BarrierClass("barriers", None, []))
                frag.classes.append(concretes[0])
            _concrete_class_of(frag, alloc, concretes).buffers.append(alloc)
            continue
        if len(dims) != 1:
            raise Unsupported(f"buffer `{alloc.name}`: several slot dimensions with a symbolic "
                              "size", alloc.loc)
        S = dims[0]
        rings = [c for c in frag.classes if c.ring is not None and frag.solver.equal(c.ring, S)]
        chosen = _ring_of(frag, alloc, S, rings)
        if chosen is None:
            raise Unsupported(f"buffer `{alloc.name}` of {S} slots is not indexed like the "
                              "barriers of one ring", alloc.loc)
        chosen.buffers.append(alloc)
    for cls in frag.classes:
        for alloc in cls.buffers:
            if alloc.name in frag.private_buffers:       # one cell: the slot of "the thread"
                split = frag.region_cells.get(alloc.name)  # or one per pair that may meet
                for block in frag.blocks:
                    at = "@" + ",".join(map(str, block)) if len(frag.blocks) > 1 else ""
                    for key, name in split[0] if split else [(None, alloc.name + "[thread]")]:
                        cls.cells.append((alloc, key, block))
                        cls.cell_names.append(name + at)
                continue
            for key, name in (placed(frag, alloc, cls.ring, "the slots of a buffer")
                              if cls.ring is not None else _granule_cells(frag, alloc)):
                cls.cells.append(key)
                cls.cell_names.append(name)


def _granule(frag: "Fragment", alloc) -> tuple[list[int], list[int]]:
    """The buffer's shape and, per dimension, its cell size (the frontend's granule: the
    explorer judges races per cell, model/memory.py)."""
    shape = [frag.concrete(d, "the slots of a buffer") for d in alloc.shape]
    granule = list(getattr(alloc, "granule", ()) or ())
    granule = [max(1, g) for g in granule] + [1] * (len(shape) - len(granule))
    return shape, granule[:len(shape)]


def _granule_cells(frag: "Fragment", alloc) -> list[tuple[tuple, str]]:
    """((alloc, cell index, block), name) of each cell of a buffer of concrete shape, the name
    the slots the cell holds (`acc[64:128]`)."""
    shape, granule = _granule(frag, alloc)
    out = []
    for block in frag.blocks:
        for combo in itertools.product(*[range(-(-n // g)) for n, g in zip(shape, granule)]):
            name = alloc.name
            if not alloc.scalar:
                name += "[" + ",".join(str(c) if g == 1 else f"{c * g}:{min(n, c * g + g)}"
                                       for c, g, n in zip(combo, granule, shape)) + "]"
            if len(frag.blocks) > 1:
                name += "@" + ",".join(map(str, block))
            out.append(((alloc, combo, block), name))
    return out


def _concrete_ring_of(frag: "Fragment", alloc, dims) -> BarrierClass | None:
    """A buffer of concrete size S (its leading dimension) beside barriers of S slots analysed
    as a ring at one representative slot (`concrete_rings`, classes.py): the ring class whose
    barriers every loop touching it indexes at the same offset, when every use of it is a ring
    access too. Then it is judged there, slot s for slot s, as a ring buffer of symbolic size is."""
    # further concrete dimensions (an accumulator stage's rows: `acc.at[t % 2, ds(0, 128)]`)
    # are judged whole at the slot, coarser (`coarse_regions`)
    if not dims or not all(z3.is_int_value(d) for d in dims):
        return None
    rings = [c for c in frag.classes if c.ring is not None and frag.solver.equal(c.ring, dims[0])]
    if not rings or not _ring_indexed(frag, alloc, dims[0], memory=True):
        return None
    try:
        return _ring_of(frag, alloc, dims[0], rings)
    except Unsupported:
        return None


def _concrete_class_of(frag: "Fragment", alloc, concretes: list[BarrierClass]) -> BarrierClass:
    """The class of concrete barriers that judges a buffer of concrete size: the first (all
    concrete barriers are one class there) unless they are cut into hand-off classes; among
    those (partition.py), the class of the barriers its accesses go through -- a copy's or
    MMA's own barrier, the last wait of the thread before a load or store. Any choice is sound
    (every access to the buffer is then an operation of that class, or Unsupported:
    access_cops); this one is the class whose protocol orders the accesses."""
    if len(concretes) == 1 or not getattr(frag, "handoff_split", False):
        return concretes[0]

    def class_of(ref):
        return next((c for c in concretes if ref.alloc in c.allocs), None)

    linked = []
    for role in frag.roles:
        last = None
        for item in role.items:
            for bop in item.ops:
                op = bop.op
                if op.barrier is not None and op.kind in PHASE_WAITS:
                    last = class_of(op.barrier)
                if not any(m.alloc is alloc for m in op.reads + op.writes):
                    continue
                if op.kind in THREAD_ACCESSES | WAITED_KINDS:
                    found = last
                elif op.barrier is not None:
                    found = class_of(op.barrier)
                else:
                    continue
                if found is not None and all(found is not c for c in linked):
                    linked.append(found)
    if len(linked) > 1:
        raise Unsupported(f"buffer `{alloc.name}` is used under barriers of "
                          f"{', '.join(c.name for c in linked)}", alloc.loc)
    return linked[0] if linked else concretes[0]


def _thread_private(kernel, alloc) -> bool:
    """A buffer of a symbolic number of slots that each thread indexes by its own index
    (`buf.at[thread]`, one slot per thread) and others use whole (`buf`). Its slots are judged
    as one cell: an access to the whole buffer conflicts with every thread's slot, and two
    threads' own slots never overlap (races.py: `private` accesses)."""
    used = False
    for op in kernel.ops():
        for ref in op.reads + op.writes:
            if ref.alloc is not alloc:
                continue
            used = True
            if ref.index and not _own_slot(kernel, ref):
                return False
    return used


def _own_slot(kernel, ref) -> bool:
    return len(ref.index) == 1 and isinstance(ref.index[0], Var) and \
        ref.index[0].name == kernel.thread_axis


def _ring_of(frag, alloc, S, rings: list[BarrierClass]) -> BarrierClass | None:
    """The ring class whose barriers every loop touching `alloc` indexes at the same offset."""
    if not rings:
        return None
    fits = list(rings)
    for role in frag.roles:
        for item in role.items:
            if item.kind != "loop":
                continue
            mine, theirs = [], {id(c): [] for c in rings}
            for bop in item.body:
                op = bop.op
                for ref in op.reads + op.writes:
                    if ref.alloc is alloc:
                        mine.append(_offset(frag, ref, role.env, item.loop.var, S, op.loc))
                if op.barrier is not None:
                    for c in rings:
                        if op.barrier.alloc in c.allocs:
                            theirs[id(c)].append(_offset(frag, op.barrier, role.env,
                                                         item.loop.var, S, op.loc))
            if not mine:
                continue
            fits = [c for c in fits if theirs[id(c)] and all(
                frag.solver.equal(a, b) for a in mine for b in theirs[id(c)])]
    if len(fits) >= 1:
        return fits[0]
    return rings[0] if len(rings) == 1 else None


def _offset(frag, ref, env, var, S, loc):
    if not ref.index:
        raise Unsupported(f"ring buffer `{ref.alloc.name}` used without a slot index inside a "
                          "loop (every slot at every iteration)", loc)
    lin = linear_in(ring_lhs(frag, ref, env, S), var, env, frag.solver)
    if lin is None or lin[0] != 1:
        raise Unsupported(f"ring index `{ref}` is not (i + c) % {S}", loc)
    return lin[1]


# ----------------------------------------------------------------------------------------------
# Accesses of a class program (called by ClassBuilder.cops)
# ----------------------------------------------------------------------------------------------

def _refs(builder: "ClassBuilder", op) -> list[tuple[object, bool]]:
    bufs = builder.cls.buffers
    return [(m, False) for m in op.reads if m.alloc in bufs] + \
        [(m, True) for m in op.writes if m.alloc in bufs]


def cells_of(builder: "ClassBuilder", role: "Role", op, ref, ctx,
             block) -> list[tuple[z3.BoolRef, int]]:
    """(guard over the class coordinate, cell) pairs a reference may touch in `block`."""
    frag, cls = builder.frag, builder.cls
    split = getattr(frag, "region_cells", {}).get(ref.alloc.name)
    if ref.region and (cls.ring is not None or
                       ref.alloc.name in getattr(frag, "private_buffers", ())):
        # one cell for the slot (or the thread's slot): the region judged whole, coarser;
        # or the cells of the pairs it may meet (region_cells.py), coarser over loops
        frag.__dict__.setdefault("paired_regions" if split else "coarse_regions",
                                 set()).add(ref.alloc.name)
    if ref.alloc.name in getattr(frag, "private_buffers", ()):
        if split:
            within_buffer(frag, ref, ctx)
            return [(z3.BoolVal(True), cls.cell(ref.alloc, key, block))
                    for key in split[1][ref_key(ref)]]
        return [(z3.BoolVal(True), cls.cell(ref.alloc, None, block))]
    if role.thread_free and frag.kernel.thread_axis in set().union(
            *[free_vars(i) for i in ref.exprs()]):
        raise Unsupported(f"`{ref}` depends on the thread index inside a group of threads "
                          "whose size is symbolic", op.loc)
    if cls.ring is not None:
        if len(ref.index) != 1:
            raise Unsupported(f"ring buffer `{ref.alloc.name}` needs one slot index, got "
                              f"`{ref}`", op.loc)
        if getattr(ctx, "c", None) is not None:        # a ring loop: slot s at every lap
            t = ctx.int(ref.index[0])
            if not t.eq(cls.s):
                raise Unsupported(f"`{ref}` is not indexed (i + c) % {cls.ring} at the offset "
                                  "of its ring's barriers in this loop", op.loc)
        else:                                          # outside loops: the op's one lap
            first = builder.class_refs(op)[0]
            here = z_int(ring_lhs(frag, ref, role.env, cls.ring), role.env)
            there = z_int(ring_lhs(frag, first, role.env, cls.ring), role.env)
            if not frag.solver.equal(here, there):
                raise Unsupported(f"`{op.describe()}` addresses two slots of one ring", op.loc)
        return [(z3.BoolVal(True), cls.cell(ref.alloc, None, block))]
    shape, granule = _granule(frag, ref.alloc)
    terms = [ctx.int(i) for i in ref.index]
    inside = z3.And([z3.And(t >= 0, t < n) for t, n in zip(terms, shape)] or [z3.BoolVal(True)])
    frag.require_always(inside, f"the slot of `{ref}` is within the buffer", ctx)
    # per dimension, the condition that cell c (slots c*g .. c*g + g - 1) holds a slot of ref
    members = [lambda c, t=t, g=g: z3.And(c * g <= t, t < c * g + g)
               for t, g in zip(terms, granule)]
    members += [_run_member(frag, ref, s, n, g, op, ctx)
                for s, n, g in zip(ref.region, shape[len(terms):], granule[len(terms):])]
    out = []
    cells = [range(-(-n // g)) for n, g in zip(shape, granule)]
    for combo in itertools.product(*cells):
        g = z3.simplify(z3.And([m(c) for m, c in zip(members, combo)] or [z3.BoolVal(True)]))
        if not z3.is_false(g):
            out.append((g, cls.cell(ref.alloc, combo, block)))
    return out


def _run_member(frag, ref, s, n: int, g: int, op, ctx):
    """The condition that cell c (slots c*g .. c*g + g - 1 of a dimension of n slots) holds a
    slot of the run `k.ds(start, size, stride)` (s) of `ref`: a guard over the class
    coordinate, for every parameter value (model/regions.py's runs, symbolically); exact for
    a contiguous run or one-slot cells, else the run's hull (coarser). The run must lie within
    the dimension (as the explorer requires, or a side condition) and its stride be a number
    once the fixed parameters are (a symbolic stride would make membership nonlinear:
    Unsupported)."""
    start, size = ctx.int(s.start), ctx.int(s.size)
    stride = z3.simplify(ctx.int(s.stride))
    if z3.is_int_value(size) and size.as_long() == 1:
        stride = z3.IntVal(1)                    # one slot: the stride says nothing
    if not z3.is_int_value(stride):
        raise Unsupported(f"the stride of `{ref}` is symbolic: regions of a symbolic stride are "
                          "outside the prover's fragment", op.loc)
    m = stride.as_long()
    if m < 1:
        raise Unsupported(f"`{ref}`: a region's stride must be at least 1", op.loc)
    last = z3.simplify(start + (size - 1) * m)
    frag.require_always(z3.And(size >= 1, start >= 0, last < n),
                        f"the region of `{ref}` is within the buffer", ctx)
    if m == 1 or g > 1:
        return lambda c: z3.And(start < c * g + g, c * g <= last)
    return lambda c: z3.And(start <= c, c <= last, (c - start) % m == 0)


def access_cops(builder: "ClassBuilder", role: "Role", item: "Item", bop: "BodyOp", ctx,
                rank: int) -> list[COp] | None:
    """The ACCESS operation of a thread's load or store in this class; None when the
    operation's memory effects, if any here, ride on its barrier's delivery (attach_async)."""
    op = bop.op
    refs = _refs(builder, op)
    if not refs:
        return None
    if op.kind in THREAD_ACCESSES:
        access = []
        for ref, write in refs:
            own = _owner(builder, role, ref)
            for g, cell in cells_of(builder, role, op, ref, ctx, role.block):
                access.append((cell, write, g, own, False))
        return [COp(ACCESS, (), guard=ctx.guard(bop.conds), rank=rank, text=op.describe(),
                    access=tuple(access))]
    if op.kind in WAITED_KINDS:
        if _own(builder, role, item, bop) and own_copies_retired(builder.frag, role, item, bop):
            return []           # only its own thread touches the cells, never while in flight
        if not _waited_next(builder, role, item, bop, ctx) and \
                not retired_before_next_slot_event(builder, role, item, bop):
            raise Unsupported(f"`{op.describe()}` stays live until a later wait of its thread "
                              "(not the next instruction, or one that leaves it in flight): its "
                              "races are left to the explorer", op.loc)
        # Covered at issue: live only inside the gap of its thread's position, like a load or
        # store there.
        access = [(cell, write, g, _owner(builder, role, ref), False) for ref, write in refs
                  for g, cell in cells_of(builder, role, op, ref, ctx, role.block)]
        return [COp(ACCESS, (), guard=ctx.guard(bop.conds), rank=rank, text=op.describe(),
                    access=tuple(access))]
    if _queued(builder, op):
        return queue_access(builder, role, item, bop, ctx, rank)
    if op.kind in COPY_KINDS or op.kind == primitives.TCGEN05_MMA:
        if op.barrier is None or op.barrier.alloc not in builder.cls.allocs:
            raise Unsupported(f"`{op.describe()}` touches a buffer of one barrier class and "
                              "completes on a barrier of another (or on none)", op.loc)
        return None
    if op.kind == primitives.CP_ASYNC and _own(builder, role, item, bop):
        if own_copies_retired(builder.frag, role, item, bop):
            return []           # only its own thread touches the cells, never while in flight
        raise Unsupported(f"`{op.describe()}` may still be in flight when its thread touches "
                          "the cells again (or the proof along its program failed): its races "
                          "are left to the explorer", op.loc)
    raise Unsupported(f"the memory effects of `{op.describe()}` are outside the prover's "
                      "fragment", op.loc)


def _own(builder: "ClassBuilder", role: "Role", item: "Item", bop: "BodyOp") -> bool:
    """Only the issuing thread touches what `bop` touches: its buffers, or its cells (own_cells:
    two warpgroups storing from their own staging slots)."""
    return private_buffers(builder.frag, role, bop.op) or \
        own_cells(builder.frag, role, item, bop)


def _owner(builder: "ClassBuilder", role: "Role", ref):
    """Who owns the access (`_private_ref`): its role's warp (the warpgroup agent: None), the
    agents whose threads are told apart by their thread index alone; None when not owned."""
    return ("warp", role.warp) if _private_ref(builder, ref) else None


def _private_ref(builder: "ClassBuilder", ref) -> bool:
    """An access to the issuing thread's own slot of a thread-private buffer, or to a region
    own_regions.py proves no other thread's region meets."""
    frag = builder.frag
    return ref.alloc.name in getattr(frag, "private_buffers", ()) and \
        (_own_slot(frag.kernel, ref) or ref_key(ref) in getattr(frag, "own_regions", ()))


def _waited_next(builder: "ClassBuilder", role: "Role", item: "Item", bop: "BodyOp",
                 ctx) -> bool:
    """Whether the instruction right after the issue `bop` (in its loop body, or the next item
    of its role) is a wait of the same group that leaves none of it in flight, and runs
    whenever the issue does. Then nothing happens between issue and retirement (model/memory.py:
    the access is live through the gap of the issue and of the wait, here one gap), and no
    earlier issue of the group is still in flight (each was retired the same way)."""
    group = ASYNC_GROUPS[bop.op.kind]
    if item.kind == "loop":
        seq = [(b.op, b.conds) for b in item.body]
        at = next(n for n, b in enumerate(item.body) if b is bop)
    else:
        items = role.items
        at = next(n for n, it in enumerate(items) if it is item)
        seq = [(it.op, it.conds) if it.kind == "op" else (None, None) for it in items]
    if at + 1 >= len(seq) or seq[at + 1][0] is None:
        return False
    nxt, conds = seq[at + 1]
    if ASYNC_WAITS.get(nxt.kind, (None,))[0] != group:
        return False
    if ASYNC_WAITS[nxt.kind][1]:                         # wait(n): at most n still in flight
        keep = z3.simplify(ctx.int(nxt.count))
        if not (z3.is_int_value(keep) and keep.as_long() == 0):
            return False
    mine = list(bop.conds) if item.kind == "loop" else list(item.conds)
    return len(conds) <= len(mine) and all(c is m or c == m for c, m in zip(conds, mine))


# ----------------------------------------------------------------------------------------------
# tcgen05 MMAs whose completion this class observes through a later tcgen05 arrival
# ----------------------------------------------------------------------------------------------

def _queued(builder: "ClassBuilder", op) -> bool:
    """A tcgen05 MMA touching this class's buffers that arrives on no barrier of the class (no
    barrier at all, or one of another class): its accesses here end, at the latest, when a
    later tcgen05 arrival of its thread on this class lands (queued_plan)."""
    return op.kind == primitives.TCGEN05_MMA and bool(_refs(builder, op)) and (
        op.barrier is None or op.barrier.alloc not in builder.cls.allocs)


def queue_access(builder: "ClassBuilder", role: "Role", item: "Item", bop: "BodyOp", ctx,
                 rank: int) -> list[COp]:
    """The ACCESS of a queued MMA (see queued_plan): its own cells, and those of the queued MMAs
    of its thread still possibly live when it is issued, as accesses of the thread's tensor-core
    queue (not of the thread: `race_conditions` checks them against the thread's own in-flight
    deliveries apart)."""
    op = bop.op
    plan = queued_plan(builder, role)
    guard = ctx.guard(bop.conds)
    access = [(cell, write, z3.simplify(z3.And(guard, g)), _owner(builder, role, ref), True)
              for ref, write in _refs(builder, op)
              for g, cell in cells_of(builder, role, op, ref, ctx, role.block)]
    access += [(cell, write, g, False, True)
               for cell, write, g in plan[0].get(_position(role, item, bop), ())]
    # the guards are on the accesses: an earlier MMA's cells stay live here whether or not
    # this one runs (a move off an ACCESS has no effect, skipped or not)
    return [COp(ACCESS, (), guard=z3.BoolVal(True), rank=rank, text=op.describe(),
                access=tuple(access))]


def attach_queued(builder: "ClassBuilder", role: "Role", item: "Item", bop: "BodyOp",
                  cops: list[COp]) -> None:
    """Hold, until a tcgen05 arrival and the ones right after it land, the cells of the queued
    MMAs of its thread it proves completed (queued_plan, queue_holds.py); a cell only with the
    deliveries whose guard can hold together with the MMA's guard for that cell."""
    if not builder.cls.buffers or not _arrival(builder, bop.op):
        return
    pos = _position(role, item, bop)
    cells = queued_plan(builder, role)[1].get(pos)
    if cells:
        queue_holds.hold(builder, role, pos, cells, cops)
    queue_holds.extend(builder, role, pos, cops)


def _position(role: "Role", item: "Item", bop: "BodyOp") -> tuple[int, int]:
    i = next(n for n, it in enumerate(role.items) if it is item)
    if item.kind != "loop":
        return i, 0
    return i, next(n for n, b in enumerate(item.body) if b is bop)


def queued_plan(builder: "ClassBuilder", role: "Role") -> tuple[dict, dict]:
    """Where the accesses of the role's queued MMAs are live in this class: (members, arrivals),
    each mapping a position (item, body index) of the role to (cell, writes, guard) triples,
    the guard over the loop coordinate at that position.

    Why it is sound. model/memory.py: a tcgen05 MMA's operands and accumulator are live from its
    issue until it completes, and model/semantics.py completes a thread's tcgen05 ops in issue
    order (one queue), so an MMA has completed once any later tcgen05 arrival of its thread has
    landed. `_queued_ways` follows every way the thread can go from the MMA through its next
    operations of this class, requiring each to be another queued MMA (a member) or a tcgen05
    arrival on this class that runs whenever the MMA did (the arrival), else Unsupported; the
    thread's loads and stores of this class are operations of the class too, so none lies in
    between. In the class system the thread may stay at the MMA's ACCESS until it issues the
    next of those operations (the moves off an ACCESS have no effect, so delaying them is one of
    its interleavings), then at each member's ACCESS, which carries the cells of the MMAs before
    it, until it issues the arrival; from there they are held until the arrival lands, and
    the arrivals issued right after it (attach_queued, queue_holds.py). So every instant the MMA may be live, the class state has
    its cells live, as the tensor core's: the queue is one agent (race_conditions does not
    check the thread's queued accesses against each other or against its own tcgen05
    deliveries, and checks them against everything else)."""
    plans = builder.__dict__.setdefault("_queued_plans", {})
    if role.name in plans:
        return plans[role.name]
    members: dict = {}
    arrivals: dict = {}
    plans[role.name] = (members, arrivals)
    for i, item in enumerate(role.items):
        if item.kind not in ("loop", "op"):
            continue
        for b, bop in enumerate(item.ops):
            op = bop.op
            if not _queued(builder, op):
                continue
            if not role.single:
                raise Unsupported(f"`{op.describe()}`: tcgen05 MMAs of several threads of one "
                                  "role, observed through later arrivals: their queues are not "
                                  "told apart", op.loc)
            ctx = builder.context(role, item)
            if builder.cls.ring is not None and item.kind == "loop":   # its own ring offset
                ctx = builder.op_context(role, item, ctx, builder.op_offsets(role, item)[1][b])
            guard = ctx.guard(bop.conds)
            cells = [(cell, write, z3.And(guard, g)) for ref, write in _refs(builder, op)
                     for g, cell in cells_of(builder, role, op, ref, ctx, role.block)]
            for (j, n, shift), kind in _queued_ways(builder, role, i, b):
                dest = members if kind == "member" else arrivals
                for cell, write, g in cells:
                    if shift is None:          # some earlier iteration, or outside the loop
                        g = z3.BoolVal(True)
                    elif shift:                # the MMA ran one iteration before
                        g = z3.substitute(g, (K(), K() - shift))
                    dest.setdefault((j, n), []).append((cell, write, z3.simplify(g)))
    return members, arrivals


def _queued_ways(builder: "ClassBuilder", role: "Role", i: int, b: int
                 ) -> list[tuple[tuple[int, int, int | None], str]]:
    """The operations of this class the thread can reach from the queued MMA at (item i, body
    index b) up to a tcgen05 arrival on the class, along every way: ((item, body index, shift),
    "member" or "arrival"), shift the iterations after the MMA's (0, 1) or None (any)."""
    cls, frag = builder.cls, builder.frag
    items = role.items
    item = items[i]
    ops = item.ops
    mma = ops[b].op
    out: list = []

    def c_op(op) -> bool:
        return op.kind != primitives.UNMODELED and bool(builder.class_refs(op))

    def fail(why: str):
        raise Unsupported(f"`{mma.describe()}` touches memory of {cls.name} and arrives on none "
                          f"of its barriers, and {why}: its completion is not observed through "
                          "a later tcgen05 arrival of its thread on that class", mma.loc)

    def runs_with(theirs, mine) -> bool:
        return frag.solver.valid(z3.Implies(mine, theirs))

    def after(j0: int, mine) -> list:
        """Out of the item: the next items, to the first arrival."""
        for j in range(j0, len(items)):
            it = items[j]
            if it.kind == "loop":
                if any(c_op(o.op) for o in it.body):
                    fail(f"the next operation of the class is in loop {it.loop.var}, which may "
                         "not run")
                continue
            if it.kind != "op" or not c_op(it.op):
                continue
            if cls.ring is not None:
                fail("in a ring class, its arrival is not in the same loop iteration")
            if _queued(builder, it.op):
                out.append(((j, 0, None), "member"))
                continue
            plain = Plain(frag, role.env, None)
            if _arrival(builder, it.op) and runs_with(plain.guard(it.conds), mine):
                out.append(((j, 0, None), "arrival"))
                return out
            fail(f"the next operation of the class, `{it.op.describe()}`, is not a tcgen05 "
                 "arrival that runs whenever the MMA does")
        fail("no tcgen05 arrival of its thread on the class follows it")

    if item.kind != "loop":
        return after(i + 1, Plain(frag, role.env, None).guard(item.conds))
    ctx = builder.context(role, item)
    mine = ctx.guard(ops[b].conds)
    deltas = builder.op_offsets(role, item)[1] if cls.ring is not None else None

    def step(n: int, shift: int) -> bool:
        """Operation n of the body, `shift` iterations later: True at the arrival."""
        o = ops[n]
        if not c_op(o.op):
            return False
        if deltas is not None and deltas[n] != deltas[b]:
            fail("the next operation of the class is at another ring offset")
        if _queued(builder, o.op):
            out.append(((i, n, shift), "member"))
            return False
        theirs = ctx.guard(o.conds)
        if shift:
            theirs = z3.substitute(theirs, (K(), K() + shift))
        if _arrival(builder, o.op) and runs_with(theirs, mine):
            out.append(((i, n, shift), "arrival"))
            return True
        fail(f"the next operation of the class, `{o.op.describe()}`, is not a tcgen05 arrival "
             "that runs whenever the MMA does")

    for n in range(b + 1, len(ops)):            # on in the same iteration
        if step(n, 0):
            return out
    if cls.ring is not None:
        fail("in a ring class, its arrival is not later in the same loop iteration")
    for n in range(b):                          # the next iteration, if any
        if step(n, 1):
            break
    else:
        # no arrival in the body: every iteration's queued MMAs stay live to the loop's end
        out[:] = [((i, n, None), "member") for n, o in enumerate(ops)
                  if _queued(builder, o.op)]
    return after(i + 1, Plain(frag, role.env, None).guard(item.conds))


def attach_async(builder: "ClassBuilder", role: "Role", op, ctx, cops: list[COp]) -> None:
    """Record, on the deliveries an issue puts in flight, the cells they touch until landing."""
    refs = _refs(builder, op)
    if not refs:
        return
    cls = builder.cls
    for cop in cops:
        for q in cop.slots:
            slot = builder.slots[q]
            slot.issuers.add((role.name, role.single))
            if op.kind in COPY_KINDS:
                block = cls.instances[slot.inst][2]       # the block this part lands in
            else:
                block = role.block
            carried = _carry(builder, slot, cop, [(cell, write, g) for ref, write in refs
                                                  for g, cell in cells_of(builder, role, op,
                                                                          ref, ctx, block)])
            if op.kind in COPY_KINDS:
                cells, multicast = slot.copies.get((role.name, role.single), (set(), True))
                slot.copies[(role.name, role.single)] = (
                    cells | carried, multicast and bool(op.collective_axes))
            _one_queue(slot, role, op)


def _carry(builder: "ClassBuilder", slot, cop: COp, cells) -> None:
    """Put (cell, writes, guard) triples on a slot the issue `cop` delivers to: a cell only when
    its guard (over the issue's loop coordinate) can hold together with the issue's guard for
    this instance -- otherwise no delivery to the instance ever carries it (a ring of concrete
    slots indexed `i % 2`: slot 1's cells never ride on the delivery to `full[0]`)."""
    written = set()
    for cell, write, g in cells:
        if compatible(builder, cop, g):
            (slot.writes if write else slot.reads).add(cell)
            if write:
                written.add(cell)
    return written


def two_writers(a, b) -> set:
    """The cells TMA copies of two different threads write, one on slot `a`, one on `b` (both
    landing on one instance; `a is b` for one slot): those copies race (model/memory.py
    `clashes`), unless both are multicast, whose shares are written coarsely as the whole
    destination (one transaction, as before). A role of several threads is two writers of its
    own cells (its members' copies are not told apart: fail closed)."""
    out = set()
    for (r1, (c1, m1)), (r2, (c2, m2)) in itertools.product(a.copies.items(), b.copies.items()):
        if (r1 != r2 or not r1[1]) and not (m1 and m2):
            out |= c1 & c2
    return out


def _one_queue(slot, role: "Role", op) -> None:
    if slot.kind == "tcgen05" and (len(slot.issuers) > 1 or not role.single):
        raise Unsupported(f"`{op.describe()}`: tcgen05 operations of several threads touch "
                          "memory and arrive on one barrier; their queues are not told apart",
                          op.loc)


# ----------------------------------------------------------------------------------------------
# The error condition
# ----------------------------------------------------------------------------------------------

def race_conditions(enc: "Encoder", st: "SymState") -> list[tuple[str, z3.BoolRef]]:
    """(label, condition) of every pair of conflicting accesses being live together."""
    sysm = enc.system
    names = sysm.cells

    def code(cell):
        return SPACE_CODE[names[cell][1]]

    # thread accesses: (role, (segment, pc), cell, writes, guard, text, owner (_owner), queued: of
    # the thread's tensor-core queue, queue_access)
    entries = []
    for r, c in enumerate(enc.codes):
        for j, seg in enumerate(c.role.segments):
            for pc, op in enumerate(seg.body):
                if op.kind == ACCESS:
                    for cell, write, g, own, queued in op.access:
                        entries.append((r, (j, pc), cell, write, z3.And(op.guard, g), op.text,
                                        own, queued))

    def live(e):
        r, (j, pc), _, _, g, _, _, _ = e
        terms = []
        for p, _, k, n in enc.threads(st, r):
            if p.where == "at" and p.seg == j and p.pc == pc:
                cond = z3.simplify(enc.term(st, g, k))
                if not z3.is_false(cond):
                    terms.append(n if z3.is_true(cond) else z3.If(cond, n, 0))
        return z3.Sum(terms) if terms else z3.IntVal(0)

    def at(r, where):
        return z3.Sum([n for p, _, _, n in enc.threads(st, r)
                       if p.where == "at" and (p.seg, p.pc) == where] or [z3.IntVal(0)])

    out = []
    for e1, e2 in itertools.combinations_with_replacement(entries, 2):
        if e1[2] != e2[2] or not (e1[3] or e2[3]):
            continue
        if e1[6] and e2[6] and (e1[0] == e2[0] or
                                (e1[6] == e2[6] and not (e1[7] or e2[7]))):
            # distinct threads' own slots or regions: threads of one role, or of two roles of
            # one warp (disjoint thread ranges; a role of another warp may be the same thread)
            continue
        single = enc.codes[e1[0]].role.single
        if e1[0] == e2[0]:
            if single:
                # one thread: one agent; its queued MMAs, one queue, are never live beside its
                # own loads and stores (queued_plan: none lies between an MMA and its arrival)
                continue
            if e1 is e2:
                cond = live(e1) >= 2
            elif e1[1] == e2[1]:
                cond = z3.And(live(e1) >= 1, live(e2) >= 1, at(e1[0], e1[1]) >= 2)
            else:
                cond = z3.And(live(e1) >= 1, live(e2) >= 1)
        else:
            cond = z3.And(live(e1) >= 1, live(e2) >= 1)
        who1, who2 = enc.codes[e1[0]].role.name, enc.codes[e2[0]].role.name
        out.append((f"race ({code(e1[2])}): {who1}: {e1[5]} / {who2}: {e2[5]} on "
                    f"{names[e1[2]][0]}", cond))
    slots = sysm.slots
    for e in entries:
        me = (enc.codes[e[0]].role.name, enc.codes[e[0]].role.single)
        for q, slot in enumerate(slots):
            if e[7] and slot.kind == "tcgen05" and slot.issuers == {me}:
                continue                                  # one thread's tensor-core queue
            hit = e[2] in slot.writes or (e[3] and e[2] in slot.reads)
            if hit:
                out.append((f"race ({code(e[2])}): {enc.codes[e[0]].role.name}: {e[5]} / "
                            f"{slot.kind} in flight to {sysm.instances[slot.inst].name} on "
                            f"{names[e[2]][0]}", z3.And(live(e) >= 1, st.fly[q] >= 1)))
    out += _hold_conditions(enc, st, entries, live, code)
    for (q1, a), (q2, b) in itertools.combinations_with_replacement(enumerate(slots), 2):
        if a.kind == b.kind == "tma" and a.inst == b.inst:
            # one transaction, but for the copies of two threads writing common cells
            for cell in sorted(two_writers(a, b)):
                out.append((f"race ({code(cell)}): TMA copies of two threads in flight to "
                            f"{sysm.instances[a.inst].name} on {names[cell][0]}",
                            st.fly[q1] >= 2 if q1 == q2 else
                            z3.And(st.fly[q1] >= 1, st.fly[q2] >= 1)))
            continue
        if a.kind == b.kind == "tcgen05" and a.issuers == b.issuers:
            continue                                      # one thread's tensor-core queue
        if q1 == q2:
            continue
        cells = (a.writes & (b.writes | b.reads)) | (b.writes & a.reads)
        for cell in sorted(cells):
            out.append((f"race ({code(cell)}): {a.kind} in flight to "
                        f"{sysm.instances[a.inst].name} / {b.kind} in flight to "
                        f"{sysm.instances[b.inst].name} on {names[cell][0]}",
                        z3.And(st.fly[q1] >= 1, st.fly[q2] >= 1)))
    return out


def _hold_conditions(enc: "Encoder", st: "SymState", entries, live, code) -> list:
    """The races of queued MMAs' cells held until their arrivals land (queue_holds.py) with the
    threads' accesses, the deliveries and each other; never within one thread's queue."""
    sysm = enc.system
    names = sysm.cells
    out = []
    for h in sysm.holds:
        held = queue_holds.held(st, h)
        what = queue_holds.describe(sysm, h)
        for e in entries:
            if e[7] and h.issuer == (enc.codes[e[0]].role.name, enc.codes[e[0]].role.single):
                continue                                  # one thread's tensor-core queue
            if e[2] in h.writes or (e[3] and e[2] in h.reads):
                out.append((f"race ({code(e[2])}): {enc.codes[e[0]].role.name}: {e[5]} / "
                            f"{what} on {names[e[2]][0]}", z3.And(live(e) >= 1, held)))
        for q, slot in enumerate(sysm.slots):
            if slot.kind == "tcgen05" and slot.issuers == {h.issuer}:
                continue
            for cell in sorted((slot.writes & (h.writes | h.reads)) | (h.writes & slot.reads)):
                out.append((f"race ({code(cell)}): {slot.kind} in flight to "
                            f"{sysm.instances[slot.inst].name} / {what} on {names[cell][0]}",
                            z3.And(st.fly[q] >= 1, held)))
    for a, b in itertools.combinations(sysm.holds, 2):
        if a.issuer == b.issuer:
            continue                                      # one thread's tensor-core queue
        for cell in sorted((a.writes & (b.writes | b.reads)) | (b.writes & a.reads)):
            out.append((f"race ({code(cell)}): {queue_holds.describe(sysm, a)} / "
                        f"{queue_holds.describe(sysm, b)} on {names[cell][0]}",
                        z3.And(queue_holds.held(st, a), queue_holds.held(st, b))))
    return out
