"""From each warp's events to one Kernel: barrier allocations, roles, operations.

One IR thread per warp (`thread_axis="warp"`, `num_warps=1`, so a named barrier counts 32
hardware threads per agent): the frontend does not merge the warps of a warpgroup, which would
assume they run in lockstep. Warps whose event sequences are equal share a role, a `When` on
the warp index. Every mbarrier is a slot of a shared-memory allocation (the Python name it was
assigned to); slots initialised with the same arrival count next to each other form one
BarrierAlloc, named after the allocation, with its first slot when the allocation holds several
groups (a 2-stage pipeline's full and empty barriers: `bars_0` and `bars_2`). A pipeline given
a struct field (`storage.pipeline_bars.data_ptr()`) names its barriers after the field
(`pipeline_bars`, `pipeline_bars_2`), and a field always starts a group of its own. The barriers are
initialised by the kernel itself (explicit_init), so init visibility is checked too.

A kernel that reads its block index (a tile scheduler, a leader test on `bidx`) is run once per
block of a grid of at most MAX_BLOCKS blocks; blocks with different programs are positions of a
grid axis `block`, each checked (model/grid.py).
"""

from __future__ import annotations

import dataclasses


from .. import kinds, primitives as K
from ..ir import (BarrierAlloc, BarrierRef, BinOp, Const, Kernel, Loc, ModelError, Loop, Op,
                  Var, When)
from ..proxy_fence import COMMIT_SMEM, check_threads
from . import guards, tmem, walks
from .buffers import data_buffers, memory_notes
from .interpreter import Event, Warp
from .roll import Iterations, nest, roll, roll_runs
from .tree import MAX_BLOCKS, KernelTree, reads_block_index
from .values import WARP

MBARRIER_BYTES = 8
AXIS = "warp"
BLOCK_AXIS = "block"
# Blocks of a grid the warps are run for one by one when the program reads its block index;
# a larger grid leaves the index unknown (BP190 where it decides synchronization).


def kernel_ir(tree: KernelTree, expect: str | None = None) -> Kernel:
    """The kernel's IR; a trip count from an integer kernel argument becomes a parameter
    (family.py), else it is BP190 at its loop."""
    from .family import runtime_family
    first = kernel_at(tree, expect)
    kernel = runtime_family(tree, expect, kernel_at, first) or first
    return kernel.replace(body=_without_empty_loops(kernel.body))


def _without_empty_loops(body) -> tuple:
    """The body without loops that hold no operation (a loop of no iteration in a run is kept
    as one until the runs are joined, roll.py)."""
    out = []
    for s in body:
        if isinstance(s, Loop):
            inner = _without_empty_loops(s.body)
            if inner:
                out.append(Loop(s.var, s.trip, inner, s.loc))
        elif isinstance(s, When):
            out.append(When(s.cond, _without_empty_loops(s.then),
                            _without_empty_loops(s.orelse), s.loc))
        else:
            out.append(s)
    return tuple(out)


def kernel_at(tree: KernelTree, expect: str | None = None,
              bindings: dict[int, int] | None = None) -> Kernel:
    """The kernel's IR with the integer kernel arguments in `bindings` at those values."""
    threads = tree.block_dim[0] * tree.block_dim[1] * tree.block_dim[2]
    if threads <= 0 or threads % WARP:
        raise ModelError(f"{tree.name} launches blocks of {threads} threads; the CuTe frontend "
                         "reads blocks of whole warps", loc=tree.loc,
                         hint="launch with block=[a multiple of 32, 1, 1]")
    allocations: dict = {}
    warps = threads // WARP
    blocks, why = _blocks(tree)
    # one run per block when the program reads its block index and the grid is small; blocks
    # whose warps run the same programs are one grid position
    by_block: dict[tuple, list[int]] = {}
    runs: list[Warp] = []
    private_tmem = False
    for b, block in enumerate(blocks):
        ran = [Warp(tree, w, allocations, block, why, bindings) for w in range(warps)]
        programs, dropped = tmem.unshared([warp.run() for warp in ran])
        private_tmem = private_tmem or dropped
        runs.extend(ran)
        tag = b if walks.EVERY_BLOCK.get() else None    # (tag, programs): blocks alike share one
        by_block.setdefault((tag, tuple(map(tuple, programs))), []).append(b)
    cluster = tree.cluster_dim[0] * tree.cluster_dim[1] * tree.cluster_dim[2]
    if cluster > 1:
        # the peers of a cluster are not modelled: a block alone would lose their multicast
        # copies, remote arrivals and commits (a violation found without them is no finding),
        # so each warp keeps only what was not read, the cluster first: `unknown`, not a guess
        cut = Event(K.UNMODELED, tree.loc, name=f"a cluster of {cluster} blocks")
        by_block = {(tag, tuple((cut,) + tuple(e for e in p if e.kind == K.UNMODELED)
                                for p in programs)): b
                    for (tag, programs), b in by_block.items()}
    published = cluster == 1 and all(_init_prefix(programs) is not None
                                     for _, programs in by_block)
    barriers, refs = _barriers(tree, [p for _, programs in by_block for p in programs],
                               allocations, explicit_init=not published)
    holders = {key[0] for key in refs}                 # allocations that hold barriers
    buffers, mem_refs = data_buffers([p for _, programs in by_block for p in programs],
                                     allocations, holders | {b.name for b in barriers},
                                     tree.loc or Loc(tree.name, 0))
    refs.update(mem_refs)
    if published:   # the barriers start initialised: the rendezvous before their use is gone
        trimmed: dict[tuple, list[int]] = {}
        for (tag, programs), members in by_block.items():
            cuts = _init_prefix(programs)
            # later init fences order no barrier once the barriers start initialised; a
            # fence.proxy.async still orders data (threads' stores before an async read):
            # it stays as the proxy-fence marker _roles reads and removes
            key = tuple(tuple(_data_fence(e) for e in p[cut:] if e.kind != K.FENCE_MBARRIER_INIT)
                        for p, cut in zip(programs, cuts))
            trimmed.setdefault((tag, key), []).extend(members)
        by_block = {key: sorted(members) for key, members in trimmed.items()}
    made: dict = {}
    variants = sorted(((programs, members) for (_, programs), members in by_block.items()),
                      key=lambda kv: kv[1][0])
    body = _roles(tree, variants[-1][0], refs, made)
    for programs, members in reversed(variants[:-1]):   # `when block in B: ... else: ...`
        ops = _roles(tree, programs, refs, made)
        body = (When(_member(members, BLOCK_AXIS), ops, body, tree.loc or Loc(tree.name, 0)),)
    grid = ((BLOCK_AXIS, Const(len(blocks))),) if len(variants) > 1 else ()
    notes = (f"one agent per warp: {warps} warps of {tree.name}",)
    if published:
        notes += ("every mbarrier is initialised, fenced (fence.mbarrier_init) and published "
                  "by a block-wide barrier before any warp uses one: checked from there on "
                  "with initialised barriers",)
    notes += memory_notes(runs, buffers, holders)
    if private_tmem:
        notes += ("tensor memory is touched only by one warp's tcgen05 MMAs (in order in its "
                  "queue, read by no other access): no race on it to check",)
    if len(variants) > 1:
        notes += (f"{len(blocks)} blocks, {len(variants)} distinct block programs "
                  f"(grid axis `{BLOCK_AXIS}`: the block's linear index)",)
    # warp_axis must differ from the thread axis: the agents are the warps themselves
    return Kernel(name=tree.name, body=body, barriers=barriers, buffers=buffers,
                  num_threads=Const(warps),
                  thread_axis=AXIS, num_warps=1, warp_axis="warp_of_agent", grid=grid,
                  loc=tree.loc or Loc(tree.name, 0), source="cute", expect=expect, notes=notes)


_INIT_FENCES = (K.FENCE_MBARRIER_INIT, K.FENCE_PROXY_ASYNC)


def _data_fence(e: Event) -> Event:
    """A fence.proxy.async after the barriers' set-up: only the proxy-fence marker."""
    return dataclasses.replace(e, kind=K.READ, name=COMMIT_SMEM) \
        if e.kind == K.FENCE_PROXY_ASYNC else e
_PREFIX_KINDS = (K.MBARRIER_INIT, K.BAR_SYNC) + _INIT_FENCES


def _init_prefix(programs) -> list[int] | None:
    """Where the barrier set-up ends in each warp of one block, when it is a rendezvous the
    rest cannot see into (else None): up to the cut each warp runs only inits, init fences and
    the block's `__syncthreads`, every warp the same barriers at the same instructions; each
    init is followed by its warp's fence.mbarrier_init and then by one of those barriers; no
    barrier is initialised after the cut. Every init is then visible to every warp and to the
    async proxy before any use, and the kernel can be checked from the cut with its barriers
    initialised (fewer states: the explorer's reductions do not track init visibility)."""
    cuts, sites = [], None
    for events in programs:
        cut, seen, fenced, pending = 0, [], True, False
        for i, e in enumerate(events):
            if e.kind not in _PREFIX_KINDS or (e.kind == K.BAR_SYNC and e.name != "syncthreads"):
                break
            if e.kind == K.MBARRIER_INIT:
                fenced, pending = False, True
            elif e.kind == K.FENCE_MBARRIER_INIT:
                fenced = True
            elif e.kind == K.BAR_SYNC:
                seen.append(e.site)
                pending = pending and not fenced
                cut = i + 1
        if pending or any(e.kind == K.MBARRIER_INIT for e in events[cut:]):
            return None
        synced = tuple(seen[:sum(e.kind == K.BAR_SYNC for e in events[:cut])])
        if sites is None:
            sites = synced
        if not synced or synced != sites:
            return None
        cuts.append(cut)
    return cuts


def _blocks(tree: KernelTree) -> tuple[list, str]:
    """The blocks to run the warps for (None: one run, the block index unknown) and why the
    index is unknown when it is."""
    if not reads_block_index(tree):
        return [None], ""
    if tree.grid_dim is None:
        return [None], "a size set at run time"
    gx, gy, gz = tree.grid_dim
    if gx * gy * gz > MAX_BLOCKS:
        return [None], f"{gx * gy * gz} blocks (more than {MAX_BLOCKS} are not enumerated)"
    return [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)], ""


def _roles(tree: KernelTree, programs, refs, made) -> tuple:
    """One block's warps as roles: warps with equal programs share one."""
    roles: dict[tuple, list[int]] = {}
    for w, events in enumerate(programs):
        roles.setdefault(tuple(events), []).append(w)
    groups = sorted(roles.items(), key=lambda kv: kv[1][0])
    # the proxy fence: threads' stores an async read (TMA store, MMA) of any warp may see
    # unfenced are BP190 at the read
    bodies = check_threads([_ops(events, refs, made) for events, _ in groups], _FENCE,
                           [len(warps) > 1 for _, warps in groups])
    if len(groups) == 1:
        return bodies[0]
    body = ()       # a chain of roles: `when warp in A: ... else: when warp in B: ...`
    for ops, (_, warps) in reversed(list(zip(bodies, groups))):
        body = (When(_member(warps), ops, body, ops[0].loc if ops else tree.loc),)
    return body


_FENCE = 'cute.arch.fence_proxy("async.shared", space="cta")'


def _member(warps: list[int], axis: str = AXIS):
    """`axis` is one of these (as ranges: consecutive values are one comparison pair)."""
    runs: list[list[int]] = []
    for w in warps:
        if runs and runs[-1][1] == w - 1:
            runs[-1][1] = w
        else:
            runs.append([w, w])
    var = Var(axis)
    terms = [BinOp("==", var, Const(a)) if a == b else
             BinOp("and", BinOp(">=", var, Const(a)), BinOp("<=", var, Const(b)))
             for a, b in runs]
    cond = terms[0]
    for t in terms[1:]:
        cond = BinOp("or", cond, t)
    return cond


def _barriers(tree: KernelTree, programs, allocations: dict, explicit_init: bool = True
              ) -> tuple[tuple[BarrierAlloc, ...], dict]:
    counts: dict[tuple, int] = {}
    first_use: dict[tuple, Event] = {}
    tensor_core: set = set()
    for events in programs:
        for e in events:
            if e.barrier is None:
                continue
            first_use.setdefault(e.barrier, e)
            if kinds.lookup(e.kind).tensor_core:     # it must order the tensor core (BP110)
                tensor_core.add(e.barrier)
            if e.kind == K.MBARRIER_INIT:
                if counts.setdefault(e.barrier, e.count) != e.count:
                    raise ModelError(f"mbarrier {_spell(e.barrier)} is initialised with "
                                     f"{counts[e.barrier]} and with {e.count} arrivals",
                                     loc=e.loc, hint="initialise each barrier once")
    for key, e in first_use.items():
        if key not in counts:
            raise ModelError(f"mbarrier {_spell(key)} is used but never initialised "
                             "(nvvm.mbarrier.init)", loc=e.loc,
                             hint="initialise it (cute.arch.mbarrier_init or a pipeline's "
                                  "create) before its first use")
        if key[1] % MBARRIER_BYTES:
            raise ModelError(f"mbarrier {_spell(key)} is not 8-byte aligned", loc=e.loc)
    by_buffer: dict[str, list[int]] = {}
    for buffer, offset in counts:
        by_buffer.setdefault(buffer, []).append(offset // MBARRIER_BYTES)
    allocs, refs = [], {}
    for buffer, slots in by_buffer.items():
        slots.sort()
        fields = sorted((key[2] // MBARRIER_BYTES, name) for key, name in allocations.items()
                        if isinstance(key, tuple) and key[:2] == ("field", buffer))
        starts = {start for start, _ in fields}          # a struct field starts a new run
        runs: list[list[int]] = []
        for s in slots:
            count = counts[(buffer, s * MBARRIER_BYTES)]
            if runs and runs[-1][-1] == s - 1 and s not in starts and \
                    counts[(buffer, runs[-1][0] * MBARRIER_BYTES)] == count:
                runs[-1].append(s)
            else:
                runs.append([s])
        for run in runs:
            # the struct field the run lies in (`storage.full_bars`), and its slot in it
            field = next(((start, name) for start, name in reversed(fields)
                          if start <= run[0]), None)
            if field is not None:
                start, label = field
                name = label if run[0] == start else f"{label}_{run[0] - start}"
            else:
                name = buffer if len(runs) == 1 and run[0] == 0 else f"{buffer}_{run[0]}"
            keys = [(buffer, s * MBARRIER_BYTES) for s in run]
            loc = first_use[keys[0]].loc
            alloc = BarrierAlloc(name, Const(counts[keys[0]]), (Const(len(run)),),
                                 orders_tensor_core=any(k in tensor_core for k in keys),
                                 loc=loc or tree.loc, scalar=len(run) == 1,
                                 explicit_init=explicit_init)
            allocs.append(alloc)
            for i, key in enumerate(keys):
                refs[key] = BarrierRef(alloc, () if len(run) == 1 else (Const(i),))
    return tuple(allocs), refs


def _spell(key: tuple) -> str:
    buffer, offset = key
    return f"{buffer}[{offset // MBARRIER_BYTES}]" if offset % MBARRIER_BYTES == 0 \
        else f"{buffer}+{offset}B"


def _ops(events, refs, made: dict, depth: int = 0) -> tuple:
    """The IR of a warp's events (marked loops rolled back, roll.py); `made` keeps one Op per
    distinct event across warps."""
    out: list = []
    for item in nest(events) if depth == 0 else events:
        if isinstance(item, Iterations):
            bodies = [_ops(body, refs, made, depth + 1) for body in item.bodies]
            out.extend(roll(bodies, f"i{depth}", item.loc or Loc("<unknown>", 0), item.site))
        else:
            out.append(_op(item, refs, made))
    return roll_runs(out, f"j{depth}")


# The operands an event carries (Primitive.needs); a kind needing another is no event's.
_EVENT_OPERANDS = frozenset({"barrier", "barrier?", "count", "bytes", "parity", "bar_id",
                             "name", "memory"})


def _op(e: Event, refs, made: dict) -> Op:
    """The IR op of an event: its kind with the operands its primitive needs, and the
    shared-memory regions it reads and writes (buffers.py)."""
    if e in made:
        return made[e]
    loc = e.loc or Loc("<unknown>", 0)
    if e.kind == guards.KIND:       # a comparison's operands and outcome, for family.py
        made[e] = Op(e.kind, count=Const(e.count), bytes=Const(e.bytes), name=e.name, loc=loc)
        return made[e]
    prim = kinds.lookup(e.kind)
    if prim is None or not prim.needs <= _EVENT_OPERANDS:  # pragma: no cover - no such event
        raise ModelError(f"no IR for the CuTe event {e.kind}", loc=loc)
    needs = prim.needs
    memory = "memory" in needs or prim.memory != "none"
    op = Op(e.kind, refs.get(e.barrier) if e.barrier is not None else None,
            reads=tuple(refs[("mem",) + fp] for fp in e.reads) if memory else (),
            writes=tuple(refs[("mem",) + fp] for fp in e.writes) if memory else (),
            count=Const(e.count) if "count" in needs else Const(1),
            bytes=Const(e.bytes) if "bytes" in needs else Const(0),
            parity=Const(e.parity) if "parity" in needs else None,
            bar_id=Const(e.bar_id) if "bar_id" in needs else None,
            name=e.name, aligned=e.aligned, loc=loc)
    made[e] = op
    return op
