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
  Houdini (invariants.py) must prove it unreachable for every parameter value, exactly as the
  barrier rules. `prove` then says race-free only where Z3 proved it.

- Accesses a thread waits for itself (TMA stores, WGMMA, tcgen05.st) retired by the very next
  instruction (a wait of their group leaving none in flight, under the same conditions): live
  from issue to that wait, i.e. in one gap, so a load or store there over-approximates them.
- A buffer of a symbolic number of slots that threads index by their own index and others use
  whole: one cell; two accesses to their own slots by threads of one role never conflict.

- The same accesses in a ring loop retired later (`wgmma_wait(1)` keeping one WGMMA in
  flight), when no class event of their slot lies between issue and retirement on any way the
  thread can go (`_retired_before_next_slot_event`): the ACCESS at the issue still covers them.
- cp.async copies into buffers only their own thread touches: proved along that thread's
  program (own_copies.py), with no place in the class systems.

Outside this fragment (`Unsupported`, so `unknown` with the reason): other accesses that stay
live until a later wait of the issuing thread past other instructions (their interval is not
delimited by class events), a tcgen05 MMA without a barrier that touches memory, an access and
its delivery's barrier in different classes, a ring buffer used unindexed or at another offset
than its ring's barriers.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import z3

from ...model.ir import Var, free_vars
from ...model.compile import ASYNC_GROUPS, ASYNC_WAITS
from .classes import BarrierClass, placed, ring_lhs
from .counters import ACCESS, COp
from .own_copies import own_copies_retired, private_buffers
from .terms import Unsupported, linear_in, z_int

if TYPE_CHECKING:
    from .encode import Encoder, SymState
    from .fragment import BodyOp, Fragment, Item, Role
    from .program import ClassBuilder

SPACE_CODE = {"smem": "BP200", "tmem": "BP201"}
COPY_KINDS = ("copy_gmem_to_smem", "tma_load")
# accesses live until a later wait of the issuing thread (model/memory.py)
WAITED_KINDS = ("copy_smem_to_gmem", "wgmma", "tcgen05_store")


# ----------------------------------------------------------------------------------------------
# Which class judges which buffer
# ----------------------------------------------------------------------------------------------

def assign_buffers(frag: "Fragment") -> None:
    """Give every buffer of the kernel to one class of `frag.classes` and name its cells."""
    k = frag.kernel
    concrete = next((c for c in frag.classes if c.ring is None), None)
    frag.private_buffers = set()
    for alloc in k.buffers:
        dims = [z3.simplify(z_int(d, frag.base_env)) for d in alloc.shape]
        private = not all(z3.is_int_value(d) for d in dims) and _thread_private(k, alloc)
        if private:
            frag.private_buffers.add(alloc.name)
        if not private and len(dims) == 1 and z3.is_int_value(dims[0]):
            # a buffer of S slots beside a ring class of concrete size S (classes.py,
            # `concrete_rings`) whose loops index it at the offset of that ring's barriers:
            # judged at the ring's representative slot s, exactly as a ring buffer of symbolic
            # size (cells_of refuses any other index)
            rings = [c for c in frag.classes if c.ring is not None and z3.is_int_value(
                z3.simplify(c.ring)) and frag.solver.equal(c.ring, dims[0])]
            try:
                chosen = _ring_of(frag, alloc, dims[0], rings) if rings else None
            except Unsupported:             # not ring-indexed: slot by slot, below
                chosen = None
            if chosen is not None:
                chosen.buffers.append(alloc)
                continue
        if private or all(z3.is_int_value(d) for d in dims):
            if concrete is None:
                concrete = BarrierClass("barriers", None, [])
                frag.classes.append(concrete)
            concrete.buffers.append(alloc)
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
                for block in frag.blocks:
                    cls.cells.append((alloc, None, block))
                    cls.cell_names.append(alloc.name + "[thread]" + (
                        "@" + ",".join(map(str, block)) if len(frag.blocks) > 1 else ""))
                continue
            for key, name in placed(frag, alloc, cls.ring, "the slots of a buffer"):
                cls.cells.append(key)
                cls.cell_names.append(name)


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
    if ref.alloc.name in getattr(frag, "private_buffers", ()):
        return [(z3.BoolVal(True), cls.cell(ref.alloc, None, block))]
    if role.thread_free and frag.kernel.thread_axis in set().union(
            *[free_vars(i) for i in ref.index]):
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
    shape = [frag.concrete(d, "the slots of a buffer") for d in ref.alloc.shape]
    terms = [ctx.int(i) for i in ref.index]
    inside = z3.And([z3.And(t >= 0, t < n) for t, n in zip(terms, shape)] or [z3.BoolVal(True)])
    frag.require_always(inside, f"the slot of `{ref}` is within the buffer", ctx)
    out = []
    for combo in itertools.product(*[range(n) for n in shape]):
        g = z3.simplify(z3.And([t == c for t, c in zip(terms, combo)] or [z3.BoolVal(True)]))
        if not z3.is_false(g):
            out.append((g, cls.cell(ref.alloc, combo, block)))
    return out


def access_cops(builder: "ClassBuilder", role: "Role", item: "Item", bop: "BodyOp", ctx,
                rank: int) -> list[COp] | None:
    """The ACCESS operation of a thread's load or store in this class; None when the
    operation's memory effects, if any here, ride on its barrier's delivery (attach_async)."""
    op = bop.op
    refs = _refs(builder, op)
    if not refs:
        return None
    if op.kind in ("read", "write"):
        access = []
        for ref, write in refs:
            own = _private_ref(builder, ref)
            for g, cell in cells_of(builder, role, op, ref, ctx, role.block):
                access.append((cell, write, g, own))
        return [COp(ACCESS, (), guard=ctx.guard(bop.conds), rank=rank, text=op.describe(),
                    access=tuple(access))]
    if op.kind in WAITED_KINDS:
        if not _waited_next(builder, role, item, bop, ctx) and \
                not _retired_before_next_slot_event(builder, role, item, bop):
            raise Unsupported(f"`{op.describe()}` stays live until a later wait of its thread "
                              "(not the next instruction, or one that leaves it in flight): its "
                              "races are left to the explorer", op.loc)
        # Covered at issue: live only inside the gap of its thread's position, like a load or
        # store there.
        access = [(cell, write, g, _private_ref(builder, ref)) for ref, write in refs
                  for g, cell in cells_of(builder, role, op, ref, ctx, role.block)]
        return [COp(ACCESS, (), guard=ctx.guard(bop.conds), rank=rank, text=op.describe(),
                    access=tuple(access))]
    if op.kind in COPY_KINDS or op.kind == "tcgen05_mma":
        if op.barrier is None or op.barrier.alloc not in builder.cls.allocs:
            raise Unsupported(f"`{op.describe()}` touches a buffer of one barrier class and "
                              "completes on a barrier of another (or on none)", op.loc)
        return None
    if op.kind == "cp_async" and private_buffers(builder.frag, role, op):
        if own_copies_retired(builder.frag, role, item, bop):
            return []           # only its own thread touches the cells, never while in flight
        raise Unsupported(f"`{op.describe()}` may still be in flight when its thread touches "
                          "the cells again (or the proof along its program failed): its races "
                          "are left to the explorer", op.loc)
    raise Unsupported(f"the memory effects of `{op.describe()}` are outside the prover's "
                      "fragment", op.loc)


def _private_ref(builder: "ClassBuilder", ref) -> bool:
    """An access to the issuing thread's own slot of a thread-private buffer."""
    return ref.alloc.name in getattr(builder.frag, "private_buffers", ()) and \
        _own_slot(builder.frag.kernel, ref)


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


def _retired_before_next_slot_event(builder: "ClassBuilder", role: "Role", item: "Item",
                                    bop: "BodyOp") -> bool:
    """Whether an issue in a ring loop (CUTLASS's `wgmma_wait(1)` keeping one WGMMA in flight)
    is retired before its thread's next event on the same slot of the ring.

    The access is live from the issue at iteration i to the first wait of its group that
    leaves at most n in flight with n later issues since (groups retire in order), along both
    ways the thread can go: on in the same iteration, then through iteration i + 1 (at most
    one more iteration), or out of the loop after iteration i. If no operation on that way is
    a class event of slot (i + c) % S (they address other slots, proved for every ring size,
    or other classes), the thread's class position does not change while the access is live:
    the class system may keep the thread at the issue's ACCESS for the whole interval (the move
    off an ACCESS has no effect, so delaying it to the thread's next class event is one of its
    interleavings). Then the ACCESS at the issue covers the interval, as for an access retired
    by the next instruction; the thread's own accesses on the way touch other slots, so it
    cannot race its own access either."""
    cls, frag = builder.cls, builder.frag
    if cls.ring is None or item.kind != "loop":
        return False
    op = bop.op
    group = ASYNC_GROUPS[op.kind]
    var, env, S = item.loop.var, role.env, cls.ring
    mine = _ring_offset(builder, op, env, var)
    if mine is None:
        return False
    at = next(n for n, b in enumerate(item.body) if b is bop)
    body = item.body

    def other_slot(o, shift: int) -> bool:
        """`o`, run `shift` iterations after the issue, addresses no slot-s class event."""
        refs = builder.class_refs(o)
        if not refs:
            return True
        c = _ring_offset(builder, o, env, var)
        if c is None:
            return False
        d = z3.simplify(c + shift - mine)
        if not z3.is_int_value(d) or d.as_long() == 0:
            return False
        return frag.solver.valid(S > abs(d.as_long()))

    def retires(o, conds, later: int) -> bool:
        wait = ASYNC_WAITS.get(o.kind)
        if wait is None or wait[0] != group:
            return False
        if conds:                          # a wait that may be skipped retires nothing
            return False
        if not wait[1]:
            return True
        keep = z3.simplify(z_int(o.count, env))
        return z3.is_int_value(keep) and keep.as_long() <= later

    def counts(b) -> int:
        return 1 if b.op.kind in ASYNC_GROUPS and ASYNC_GROUPS[b.op.kind] == group and \
            not b.conds else 0

    later = 0
    for b in body[at + 1:]:                # on in the same iteration
        if retires(b.op, b.conds, later):
            return True
        if not other_slot(b.op, 0):
            return False
        later += counts(b)
    through, nxt = False, later            # through iteration i + 1 (and no further)
    for b in body:
        if retires(b.op, b.conds, nxt):
            through = True
            break
        if not other_slot(b.op, 1):
            break
        nxt += counts(b)
    if not through:
        return False
    items = role.items                     # out of the loop after iteration i
    for after in items[items.index(item) + 1:]:
        if after.kind != "op":
            return False
        if retires(after.op, after.conds, later):
            return True
        if builder.class_refs(after.op):
            return False
        later += 1 if after.op.kind in ASYNC_GROUPS and \
            ASYNC_GROUPS[after.op.kind] == group and not after.conds else 0
    return False


def _ring_offset(builder: "ClassBuilder", op, env, var):
    """c when every reference of `op` into the ring class is (i + c) % S, else None."""
    found = None
    for ref in builder.class_refs(op):
        try:
            lin = linear_in(ring_lhs(builder.frag, ref, env, builder.cls.ring), var, env,
                            builder.frag.solver)
        except Unsupported:
            return None
        if lin is None or lin[0] != 1:
            return None
        if found is not None and not builder.frag.solver.equal(found, lin[1]):
            return None
        found = lin[1]
    return found


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
            for ref, write in refs:
                for g, cell in cells_of(builder, role, op, ref, ctx, block):
                    # a slot of the buffer the operation touches only where this delivery is
                    # not made (`tiles.at[i % 2]` beside `full.at[i % 2]`: full[1]'s delivery
                    # never writes tiles[0]) is not its cell; a guard Z3 cannot rule out stays
                    if not builder.frag.solver.possible(z3.And(cop.guard, g)):
                        continue
                    (slot.writes if write else slot.reads).add(cell)
            if slot.kind == "tcgen05" and (len(slot.issuers) > 1 or not role.single):
                raise Unsupported(f"`{op.describe()}`: tcgen05 operations of several threads "
                                  "touch memory and arrive on one barrier; their queues are "
                                  "not told apart", op.loc)


# ----------------------------------------------------------------------------------------------
# The error condition
# ----------------------------------------------------------------------------------------------

def race_conditions(enc: "Encoder", st: "SymState") -> list[tuple[str, z3.BoolRef]]:
    """(label, condition) of every pair of conflicting accesses being live together."""
    sysm = enc.system
    names = sysm.cells

    def code(cell):
        return SPACE_CODE[names[cell][1]]

    # thread accesses: (role, (segment, pc), cell, writes, guard, text, own slot)
    entries = []
    for r, c in enumerate(enc.codes):
        for j, seg in enumerate(c.role.segments):
            for pc, op in enumerate(seg.body):
                if op.kind == ACCESS:
                    for cell, write, g, own in op.access:
                        entries.append((r, (j, pc), cell, write, z3.And(op.guard, g), op.text,
                                        own))

    def live(e):
        r, (j, pc), _, _, g, _, _ = e
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
        if e1[6] and e2[6] and e1[0] == e2[0]:
            continue        # threads of one role (one warp, distinct threads): their own slots
        single = enc.codes[e1[0]].role.single
        if e1[0] == e2[0]:
            if single:
                continue                                  # one thread: one agent
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
        for q, slot in enumerate(slots):
            hit = e[2] in slot.writes or (e[3] and e[2] in slot.reads)
            if hit:
                out.append((f"race ({code(e[2])}): {enc.codes[e[0]].role.name}: {e[5]} / "
                            f"{slot.kind} in flight to {sysm.instances[slot.inst].name} on "
                            f"{names[e[2]][0]}", z3.And(live(e) >= 1, st.fly[q] >= 1)))
    for (q1, a), (q2, b) in itertools.combinations_with_replacement(enumerate(slots), 2):
        if a.kind == b.kind == "tma" and a.inst == b.inst:
            continue                                      # one transaction
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
