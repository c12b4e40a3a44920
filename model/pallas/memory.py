"""Memory effects of a Pallas kernel: which SMEM / TMEM slots each equation reads or writes.

An SMEM or TMEM allocation becomes an IR buffer whose slots are its elements, down to the
deepest dimension the kernel ever names: `smem.at[slot]` names one slot of a ring,
`acc.at[pl.ds(wg * 64, 64)]` a region of rows (ir.MemRef), composed through `.at[...]` chains
and `ref[...]` indexers; `slots_by_use` trims the dimensions no reference names and picks the
cells (model/regions.py) so that a warpgroup's half is one cell. What the frontend cannot pin
down (a data-dependent start, a gather, the dimensions of a layout transform such as tiling
before an indexer) is the whole rest of the buffer: coarser, never missing a race. Races are
judged by model/memory.py.

Handled: ref loads and stores (`get` / `swap`), TMA copies (their destination, model/pallas
handlers), TMA stores and `wait_smem_to_gmem`, WGMMA operands and `wgmma_wait`, tcgen05 MMA
operands and accumulator, `async_load_tmem` / `wait_load_tmem`, `async_store_tmem` /
`commit_tmem`.
"""

from __future__ import annotations

from typing import Any

from ..ir import Const, Expr, MemAlloc, ModelError, Op, Slice
from ..ir import MemRef as IRMemRef
from ..expr import mk, opaque_vars
from ..regions import divisor, granules
from ..proxy_fence import commit_marker
from .values import MemRef
from .. import kinds, primitives as K

SPACES = {"smem": "smem", "tmem": "tmem"}


class MemoryHandlers:
    """The Translator's handlers of memory effects (mixed into Translator)."""

    def _mem_alloc(self, value: Any, pname: str | None, frame) -> Any:
        """Give an SMEM / TMEM ref an IR buffer (called where it is allocated)."""
        if not isinstance(value, MemRef) or value.space not in SPACES:
            return value
        from .values import _clean_name
        shape = tuple(int(n) for n in value.shape)
        name = self._fresh(_clean_name(pname) if pname else value.space)
        # Every dimension for now; `slots_by_use` keeps those the kernel indexes with integers.
        alloc = MemAlloc(name, SPACES[value.space], tuple(Const(n) for n in shape) or (Const(1),),
                         self.where(frame), scalar=False)
        self.buffers.append(alloc)
        return MemRef(value.shape, value.dtype, value.space, alloc)

    def _mem_ref(self, value: Any, transforms) -> IRMemRef | None:
        """The slots a (transformed) reference names; None when it is not SMEM / TMEM."""
        if not isinstance(value, MemRef) or value.alloc is None:
            return None
        alloc = value.alloc
        transforms = tuple(transforms or ())
        indexers = [n for n, t in enumerate(transforms) if type(t).__name__ == "NDIndexer"]
        if not indexers:
            return IRMemRef(alloc)
        layout = transforms[:indexers[0]]
        tiled = _tiling(layout, transforms[indexers[0]:indexers[-1]], len(alloc.shape))
        if tiled is not None:
            return self._tiled_region(alloc, tiled, [transforms[n] for n in indexers])
        if any(type(t).__name__ != "NDIndexer" for t in transforms[:indexers[-1]]):
            # a layout before an indexer that is no plain tiling: its dimensions are not
            # the buffer's, except the leading ones, which it keeps
            index = self._leading_slots(transforms[indexers[0]], alloc)
            if any(type(i).__name__ == "Slice" and not _full(i, n)
                   for t in (transforms[k] for k in indexers)
                   for i, n in zip(t.indices, t.shape)):
                self._note(f"a slice of `{alloc.name}` behind a layout transform is judged as "
                           "the whole rest of the buffer past its leading slots")
            return IRMemRef(alloc, index)
        return self._region(alloc, [transforms[n] for n in indexers])

    def _leading_slots(self, indexer, alloc) -> tuple[Expr, ...]:
        index: list[Expr] = []
        for idx in indexer.indices:
            if len(index) >= len(alloc.shape) or type(idx).__name__ == "Slice":
                break                 # a range of slots: the rest of the buffer
            e = self._leaf(idx)
            if not isinstance(e, Expr) or opaque_vars(e):
                break                 # a data-dependent slot: every slot
            index.append(e)
        return tuple(index)

    def _tiled_region(self, alloc, tiling: tuple[int, ...], indexers) -> IRMemRef:
        """A region of a tiled buffer (UntilingTransform, maybe behind a swizzle), indexed in
        its logical shape: leading dimensions as they are; a tiled dimension by whole tiles
        (a slice whose start and size are multiples of the tile is exact there, anything else
        is every tile); the dimensions within a tile whole (a swizzle permutes them)."""
        shape = [int(n.value) for n in alloc.shape]
        r = len(tiling)
        lead = len(shape) - 2 * r
        logical = shape[:lead] + [shape[lead + i] * tiling[i] for i in range(r)]
        ref = self._region(alloc, indexers, logical)
        named = list(ref.index) + list(ref.region)
        out: list = named[:lead]
        for i, t in enumerate(tiling):
            if lead + i >= len(named):
                break
            entry = named[lead + i]
            if isinstance(entry, Slice):
                unit = isinstance(entry.stride, Const) and entry.stride.value == 1
                aligned = isinstance(entry.size, Const) and entry.size.value % t == 0 and \
                    divisor(entry.start) % t == 0
                out.append(Slice(mk("//", entry.start, Const(t)), Const(entry.size.value // t))
                           if unit and aligned else Slice(Const(0), Const(shape[lead + i])))
            else:
                out.append(Slice(mk("//", entry, Const(t)), Const(1)))
        cut = next((d for d, e in enumerate(out) if isinstance(e, Slice)), len(out))
        region = list(out[cut:])
        while region and _whole(region[-1], shape[cut + len(region) - 1]):
            region.pop()
        return IRMemRef(alloc, tuple(out[:cut]), tuple(region))

    def _region(self, alloc, indexers, logical=None) -> IRMemRef:
        """The region a chain of indexers (`acc.at[pl.ds(wg * 64, 64)].at[:, 0:32]`) names:
        each indexer's dimensions are those its predecessors left open, so starts and strides
        compose; a dimension the chain cannot follow (a gather, data) and those after it are
        whole."""
        shape = logical or [int(n.value) for n in alloc.shape]
        dims: list[list[Expr] | Expr] = [[Const(0), Const(n), Const(1)] for n in shape]
        open_dims = list(range(len(shape)))
        known = len(shape)            # dimensions before this one are followed exactly
        for t in indexers:
            kept = []
            for j, idx in enumerate(t.indices[:len(open_dims)]):
                d = open_dims[j]
                start, _, stride = dims[d]
                if type(idx).__name__ == "Slice":
                    first, size = self._leaf(idx.start), int(idx.size)
                    step = int(getattr(idx, "stride", 1) or 1)
                    kept.append(d)
                    if not isinstance(first, Expr) or opaque_vars(first):
                        known = min(known, d)         # a data-dependent start
                        continue
                    dims[d] = [mk("+", start, mk("*", stride, first)), Const(size),
                               mk("*", stride, Const(step))]
                    continue
                if _array_shape(idx):
                    known = min(known, d)             # a gather: later indexers only narrow
                    break                             # what is left, so they may be dropped
                e = self._leaf(idx)
                if not isinstance(e, Expr) or opaque_vars(e):
                    known = min(known, d)             # a data-dependent slot: every slot
                    continue
                dims[d] = mk("+", start, mk("*", stride, e))
            else:
                open_dims = kept + open_dims[len(t.indices):]
                continue
            break
        if known < len(shape):
            self._note(f"a region of `{alloc.name}` is not followed from dimension {known} on "
                       "(a gather or a data-dependent start): races are judged on the whole "
                       "rest of the buffer there")
        index: list[Expr] = []
        region: list[Slice] = []
        for d in range(known):
            entry = dims[d]
            if not region and not isinstance(entry, list):
                index.append(entry)
            elif isinstance(entry, list):
                region.append(Slice(*entry))
            else:
                region.append(Slice(entry, Const(1)))
        while region and _whole(region[-1], shape[len(index) + len(region) - 1]):
            region.pop()              # trailing whole dimensions say nothing
        return IRMemRef(alloc, tuple(index), tuple(region))

    def _mem_op(self, kind: str, frame, out, reads=(), writes=(), **fields) -> None:
        reads = tuple(r for r in reads if r is not None)
        writes = tuple(w for w in writes if w is not None)
        # a wait retiring a group touches no memory itself, but orders what it retires
        if reads or writes or kinds.lookup(kind).memory == "retire":
            out.append(Op(kind, None, reads=reads, writes=writes, loc=self.where(frame),
                          **fields))

    # -- thread loads and stores -------------------------------------------------------------

    def _mem_get(self, eqn, env, frame, out) -> None:
        tree = eqn.params.get("tree")
        t = self._transforms(env, tree, eqn.invars[1:])
        ref = self.read(env, eqn.invars[0])
        self._mem_op(K.READ, frame, out, reads=(self._mem_ref(ref, t),))
        self._readback_read(ref, self.where(frame), out)

    def _mem_swap(self, eqn, env, frame, out) -> None:
        tree = eqn.params.get("tree")
        t = self._transforms(env, tree, eqn.invars[2:])
        self._mem_op(K.WRITE, frame, out,
                     writes=(self._mem_ref(self.read(env, eqn.invars[0]), t),))

    # -- asynchronous accesses ---------------------------------------------------------------

    def _op_copy_smem_to_gmem(self, eqn, env, frame, out):
        p = eqn.params
        ns = p["src_transforms_treedef"].num_leaves
        t = self._transforms(env, p["src_transforms_treedef"], eqn.invars[2:2 + ns])
        self._mem_op(K.COPY_SMEM_TO_GMEM, frame, out,
                     reads=(self._mem_ref(self.read(env, eqn.invars[0]), t),))
        nd = p["dst_transforms_treedef"].num_leaves
        dst_t = self._transforms(env, p["dst_transforms_treedef"], eqn.invars[2 + ns:2 + ns + nd])
        self._readback_store(self.read(env, eqn.invars[1]), dst_t, self.where(frame), out)
        return []

    def _op_commit_smem(self, eqn, env, frame, out):
        out.append(commit_marker(self.where(frame)))      # read by proxy_fence.check_commits
        return []

    def _op_wait_smem_to_gmem(self, eqn, env, frame, out):
        n = self.read(env, eqn.invars[0]) if eqn.invars else Const(int(eqn.params["n"]))
        if not isinstance(n, Const):
            raise ModelError("wait_smem_to_gmem with a data-dependent count",
                             loc=self.where(frame), hint="pass a Python int")
        self._mem_op(K.WAIT_SMEM_TO_GMEM, frame, out, count=n)
        self._readback_wait(n, bool(eqn.params.get("wait_read_only")), self.where(frame), out)
        return []

    def _op_wgmma_ref(self, eqn, env, frame, out):
        p = eqn.params
        leaves = list(eqn.invars[3:])
        trees = [p.get("acc_transforms_tree"), p.get("a_transforms_tree"),
                 p.get("b_transforms_tree")]
        sizes = [tr.num_leaves if tr is not None else 0 for tr in trees]
        a_t = self._transforms(env, trees[1], leaves[sizes[0]:sizes[0] + sizes[1]])
        b_t = self._transforms(env, trees[2], leaves[sum(sizes[:2]):sum(sizes)])
        self._mem_op(K.WGMMA, frame, out,
                     reads=(self._mem_ref(self.read(env, eqn.invars[1]), a_t),
                            self._mem_ref(self.read(env, eqn.invars[2]), b_t)))
        return []

    def _op_wgmma_wait(self, eqn, env, frame, out):
        n = self.read(env, eqn.invars[0]) if eqn.invars else Const(int(eqn.params.get("n", 0)))
        if not isinstance(n, Const):
            raise ModelError("wgmma_wait with a data-dependent count", loc=self.where(frame))
        self._mem_op(K.WGMMA_WAIT, frame, out, count=n)
        return []

    def _op_wgmma_accumulator_deref(self, eqn, env, frame, out):
        """`acc_ref[...]`: reading a WGMMA accumulator waits for the WGMMAs (all but `wait_n`)."""
        n = eqn.params.get("wait_n", 0)
        if n is not None:
            self._mem_op(K.WGMMA_WAIT, frame, out, count=Const(int(n)))
        return None

    def _op_load(self, eqn, env, frame, out):
        """`plgpu.load(ref, idx, layout=...)`: a thread load, as `ref[idx]`."""
        self._mem_get(eqn, env, frame, out)
        return None

    def _op_async_load_tmem(self, eqn, env, frame, out):
        """The registers are usable at once, but the TMEM read is done only at the thread's
        `wait_load_tmem` (its docstring: overwriting the region before it is a race)."""
        t = self._transforms(env, eqn.params.get("tree"), eqn.invars[1:])
        self._mem_op(K.TCGEN05_LOAD, frame, out,
                     reads=(self._mem_ref(self.read(env, eqn.invars[0]), t),))
        return None

    def _op_wait_load_tmem(self, eqn, env, frame, out):
        self._mem_op(K.TCGEN05_WAIT_LOAD, frame, out)
        return []

    def _op_async_store_tmem(self, eqn, env, frame, out):
        t = self._transforms(env, eqn.params.get("tree"), eqn.invars[2:])
        self._mem_op(K.TCGEN05_STORE, frame, out,
                     writes=(self._mem_ref(self.read(env, eqn.invars[0]), t),))
        return []

    def _op_commit_tmem(self, eqn, env, frame, out):
        self._mem_op(K.TCGEN05_WAIT_STORE, frame, out)
        return []

    def _mma_operands(self, eqn, env, leaves) -> tuple[tuple, tuple]:
        """(reads, writes) of a tcgen05_mma: operands a, b and accumulator acc."""
        p = eqn.params
        trees = [p.get("acc_transforms_tree"), p.get("a_transforms_tree"),
                 p.get("b_transforms_tree")]
        sizes = [tr.num_leaves if tr is not None else 0 for tr in trees]
        ts, at = [], 0
        for tr, n in zip(trees, sizes):
            ts.append(self._transforms(env, tr, leaves[at:at + n]))
            at += n
        acc, a, b = (self._mem_ref(self.read(env, eqn.invars[i]), ts[i]) for i in range(3))
        return tuple(x for x in (a, b) if x is not None), (() if acc is None else (acc,))


def _tiling(layout, between, rank: int) -> tuple[int, ...] | None:
    """The tiling of a layout that is an UntilingTransform, maybe behind an UnswizzleRef, with
    only indexers after it; None for any other layout."""
    names = [type(t).__name__ for t in layout]
    if names not in (["UntilingTransform"], ["UnswizzleRef", "UntilingTransform"]) or \
            any(type(t).__name__ != "NDIndexer" for t in between):
        return None
    tiling = tuple(int(n) for n in layout[-1].tiling)
    return tiling if 0 < 2 * len(tiling) <= rank else None


def _full(idx, n: int) -> bool:
    """A jaxpr Slice that takes its whole dimension (`:`)."""
    return isinstance(idx.start, int) and idx.start == 0 and int(idx.size) == int(n) and \
        int(getattr(idx, "stride", 1) or 1) == 1


def _array_shape(idx) -> tuple:
    """The shape of an indexer that is an array (a gather), () for a scalar index."""
    aval = getattr(idx, "aval", None)
    return tuple(getattr(aval, "shape", None) or getattr(idx, "shape", None) or ())


def _whole(s: Slice, n: int) -> bool:
    return all(isinstance(e, Const) for e in s.exprs()) and \
        (s.start.value, s.size.value, s.stride.value) == (0, n, 1)


def slots_by_use(body, buffers: list) -> tuple[tuple, list]:
    """Each buffer's slots: its leading dimensions the kernel ever indexes with an integer
    (`smem.at[slot]`, `out_smem[wg, slot] = ...`); the tile dimensions stay whole."""
    import dataclasses
    from ..ir import iter_ops
    depth: dict[str, int] = {b.name: 0 for b in buffers}
    refs: dict[str, list] = {b.name: [] for b in buffers}
    for op in iter_ops(body):
        for ref in op.reads + op.writes:
            depth[ref.alloc.name] = max(depth[ref.alloc.name], len(ref.index) + len(ref.region))
            refs[ref.alloc.name].append(ref)
    trimmed = {}
    for b in buffers:
        n = depth[b.name]
        shape = b.shape[:n]
        # cells as coarse as every region allows (model/regions.py): a row half is one cell
        granule = granules(refs[b.name], [c.value for c in shape])
        trimmed[b.name] = dataclasses.replace(b, shape=shape or (Const(1),), scalar=n == 0,
                                              granule=granule)

    def fix(ref):
        return dataclasses.replace(ref, alloc=trimmed[ref.alloc.name])
    return _map_refs(body, fix), [trimmed[b.name] for b in buffers]


def _map_refs(body, fix) -> tuple:
    import dataclasses
    from ..ir import Loop, When, WarpRegion
    out = []
    for s in body:
        if isinstance(s, Op) and (s.reads or s.writes):
            s = dataclasses.replace(s, reads=tuple(map(fix, s.reads)),
                                    writes=tuple(map(fix, s.writes)))
        elif isinstance(s, Loop):
            s = Loop(s.var, s.trip, _map_refs(s.body, fix), s.loc)
        elif isinstance(s, When):
            s = When(s.cond, _map_refs(s.then, fix), _map_refs(s.orelse, fix), s.loc)
        elif isinstance(s, WarpRegion):
            s = WarpRegion(s.axis, _map_refs(s.body, fix), s.loc)
        out.append(s)
    return tuple(out)


def has_barrier_ops(body) -> bool:
    """Does a translated body synchronize (anything but memory effects and the markers of
    data_control.py)?"""
    from ..ir import MEMORY_KINDS, iter_ops, walk, WarpRegion
    from .data_control import is_site
    return any(op.kind not in MEMORY_KINDS and not is_site(op) for op in iter_ops(body)) or \
        any(isinstance(s, WarpRegion) for s in walk(body))


def whole_where_data_dependent(body) -> tuple:
    """Slots computed from data the frontend cannot follow (a loaded value, a carry without a
    closed form) become the whole rest of the buffer: every slot it might be."""
    import dataclasses
    from ..ir import Loop, When, WarpRegion

    def fix(ref):
        for n, e in enumerate(ref.index):
            if opaque_vars(e):
                return dataclasses.replace(ref, index=ref.index[:n], region=())
        for n, s in enumerate(ref.region):
            if any(opaque_vars(e) for e in s.exprs()):
                return dataclasses.replace(ref, region=ref.region[:n])
        return ref

    out = []
    for s in body:
        if isinstance(s, Op) and (s.reads or s.writes):
            s = dataclasses.replace(s, reads=tuple(map(fix, s.reads)),
                                    writes=tuple(map(fix, s.writes)))
        elif isinstance(s, Loop):
            s = Loop(s.var, s.trip, whole_where_data_dependent(s.body), s.loc)
        elif isinstance(s, When):
            s = When(s.cond, whole_where_data_dependent(s.then),
                     whole_where_data_dependent(s.orelse), s.loc)
        elif isinstance(s, WarpRegion):
            s = WarpRegion(s.axis, whole_where_data_dependent(s.body), s.loc)
        out.append(s)
    return tuple(out)


def unguard_memory(body, names: set[str], always) -> tuple:
    """Branches on `names` that hold only memory effects, flattened by `always(arms, loc,
    what)`: their accesses taken as always happening (data_control.py says when that is
    sound and marks the rest unmodelled)."""
    from ..ir import Loop, When, WarpRegion, free_vars
    out = []
    for s in body:
        if isinstance(s, When):
            then = unguard_memory(s.then, names, always)
            orelse = unguard_memory(s.orelse, names, always)
            if free_vars(s.cond) & names and not has_barrier_ops(then + orelse):
                out.extend(always((then, orelse), s.loc, "branch"))
                continue
            s = When(s.cond, then, orelse, s.loc)
        elif isinstance(s, Loop):
            s = Loop(s.var, s.trip, unguard_memory(s.body, names, always), s.loc)
        elif isinstance(s, WarpRegion):
            s = WarpRegion(s.axis, unguard_memory(s.body, names, always), s.loc)
        out.append(s)
    return tuple(out)
