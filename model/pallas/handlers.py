"""Handlers of the synchronizing primitives: barrier references, arrivals, waits, TMA, tcgen05.

Each `_op_<primitive>` reads one jaxpr equation and appends the IR ops it stands for; the
dispatch table in translate.py names them. Barrier references resolve a `plgpu.Barrier` /
`ClusterBarrier` allocation, its indexers and cluster transforms to an IR `BarrierRef`.
"""

from __future__ import annotations

import math
from typing import Any

from ..expr import mk, opaque_vars
from ..expr import opaque
from ..ir import BarrierAlloc, BarrierRef, Const, Expr, ModelError, Op, Var, When
from .values import BarrierVal, MemRef, _clean_name
from .. import primitives as K


class SyncHandlers:
    """The Translator's handlers of barrier primitives (mixed into Translator)."""

    # -- barrier references ------------------------------------------------------------------

    def _barrier(self, value, transforms, frame) -> BarrierRef:
        loc = self.where(frame)
        if not isinstance(value, BarrierVal):
            raise ModelError("this barrier operation's barrier is not a plgpu.Barrier or "
                             "ClusterBarrier allocation", loc=loc)
        alloc = value.alloc
        shape = [n.value for n in alloc.shape][len(value.prefix):]
        dims = list(range(len(shape)))          # remaining dims
        offsets: list[Expr] = [Const(0)] * len(shape)
        fixed: dict[int, Expr] = {}
        block = value.block
        for t in transforms or ():
            tname = type(t).__name__
            if tname == "NDIndexer":
                new_dims = []
                for d, idx in zip(list(dims), t.indices):
                    if type(idx).__name__ == "Slice":
                        start = self._leaf(idx.start)
                        offsets[d] = mk("+", offsets[d], start)
                        new_dims.append(d)
                    else:
                        fixed[d] = mk("+", offsets[d], self._int(self._leaf(idx)))
                dims = new_dims + dims[len(t.indices):]
            elif tname == "ClusterRefTransform":
                coords = {self._axis(n): self._int(self._leaf(i)) for n, i in zip(t.dims, t.idxs)}
                block = tuple(coords.get(a, Var(a)) for a, _ in self.cluster)
            else:
                raise ModelError(f"barrier reference transform {tname} is not supported",
                                 loc=loc)
        if fixed and dims:
            raise ModelError(f"barrier `{alloc.name}` is partially indexed", loc=loc,
                             hint="index every dimension of the barrier array")
        index = tuple(fixed[d] for d in sorted(fixed))
        if value.prefix:
            index = value.prefix + (index or (Const(0),) * len(shape))
        # an index over data is resolved by LoopRules._lift_stmts once the data's trip-count
        # parameters exist (a drain's `(n - 1) % slots` after `pl.loop(0, n)`)
        for e in block or ():
            if opaque_vars(e):
                raise ModelError(f"the index of barrier `{alloc.name}` depends on data loaded "
                                 "from memory; barrierproof cannot follow it", loc=loc,
                                 hint="compute barrier slots from loop indices and axis indices")
        return BarrierRef(alloc, index, block)

    def _leaf(self, leaf) -> Any:
        if isinstance(leaf, (int,)) or leaf is None:
            return Const(int(leaf or 0))
        return self.read(self._env, leaf)

    def _transforms(self, env, treedef, leaves):
        self._env = env
        if treedef is None:
            return ()
        return treedef.unflatten(list(leaves))

    def _bytes(self, ref, transforms, loc) -> int:
        if not isinstance(ref, MemRef):
            return 0
        import numpy as np
        shape = tuple(ref.shape)
        dtype = ref.dtype
        try:
            from jax._src import core as jcore
            aval = jcore.ShapedArray(shape, dtype)
            for t in transforms or ():
                if type(t).__name__ == "NDIndexer":
                    aval = aval.update(shape=tuple(int(n) for n in t.get_indexer_shape()))
                else:
                    aval = t.transform_type(aval)
            shape, dtype = aval.shape, aval.dtype
        except Exception:
            self._note(f"{loc}: could not follow the copy's destination transforms; its size is "
                       "taken from the whole destination buffer")
        try:
            itemsize = np.dtype(dtype).itemsize
        except TypeError:
            itemsize = 1
        return int(math.prod(shape)) * int(itemsize)

    # -- modelled operations -----------------------------------------------------------------

    def _op_barrier_arrive(self, eqn, env, frame, out):
        ref = self.read(env, eqn.invars[0])
        t = self._transforms(env, eqn.params["transforms_treedef"], eqn.invars[1:])
        out.append(Op(K.BARRIER_ARRIVE, self._barrier(ref, t, frame), loc=self.where(frame)))
        return []

    def _op_barrier_wait(self, eqn, env, frame, out):
        ref = self.read(env, eqn.invars[0])
        t = self._transforms(env, eqn.params["transforms_treedef"], eqn.invars[1:])
        out.append(Op(K.BARRIER_WAIT, self._barrier(ref, t, frame), loc=self.where(frame)))
        return []

    def _op_barrier_test(self, eqn, env, frame, out):
        """A non-blocking barrier_wait; its answer is data the model does not follow (a branch
        on it that synchronizes is reported as an error, never guessed)."""
        ref = self.read(env, eqn.invars[0])
        t = self._transforms(env, eqn.params["transforms_treedef"], eqn.invars[1:])
        out.append(Op(K.BARRIER_TEST, self._barrier(ref, t, frame), loc=self.where(frame)))
        return opaque("barrier_test")

    def _op_copy_gmem_to_smem(self, eqn, env, frame, out):
        p = eqn.params
        loc = self.where(frame)
        if not p.get("has_barrier", True):
            # No barrier (JAX >= 0.11, pre-Hopper): a cp.async copy that the issuing thread
            # awaits with wait_gmem_to_smem; it synchronizes no other thread.
            src, dst, *leaves = eqn.invars
            nd = p["dst_transforms_treedef"].num_leaves
            ns = p["src_transforms_treedef"].num_leaves
            dst_t = self._transforms(env, p["dst_transforms_treedef"], leaves[ns:ns + nd])
            target = self._mem_ref(self.read(env, dst), dst_t)
            out.append(Op(K.CP_ASYNC, writes=(target,) if target is not None else (), loc=loc))
            self._readback_read(self.read(env, src), loc, out)
            if p.get("has_user_predicate"):
                self._note(f"{loc}: a predicated cp.async copy is taken as always issued")
            return []
        src, dst, bar, *leaves = eqn.invars
        if p.get("has_user_predicate"):
            # `predicate=` (JAX >= 0.11): where it is false the copy is not issued, but the
            # lowering still does arrive.expect_tx with 0 bytes: the arrival happens.
            *leaves, pred = leaves
            cond = self._int(self.read(env, pred))
            if opaque_vars(cond):
                raise ModelError("the predicate of this copy_gmem_to_smem depends on data "
                                 "loaded from memory; barrierproof cannot follow it", loc=loc,
                                 hint="compute the predicate from axis and loop indices")
            body: list = []
            self._op_copy_gmem_to_smem_unpredicated(eqn, env, frame, body, src, dst, bar, leaves)
            out.append(When(mk("!=", cond, Const(0)), tuple(body),
                            tuple(_arrival_only(body)), loc))
            return []
        return self._op_copy_gmem_to_smem_unpredicated(eqn, env, frame, out, src, dst, bar,
                                                       leaves)

    def _op_wait_gmem_to_smem(self, eqn, env, frame, out):
        n = self._int(self.read(env, eqn.invars[0]))
        if opaque_vars(n):
            raise ModelError("the count of wait_gmem_to_smem depends on data loaded from "
                             "memory; barrierproof cannot follow it", loc=self.where(frame))
        out.append(Op(K.WAIT_GMEM_TO_SMEM, count=n, loc=self.where(frame)))
        return []

    def _op_copy_gmem_to_smem_unpredicated(self, eqn, env, frame, out, src, dst, bar, leaves):
        p = eqn.params
        ns = p["src_transforms_treedef"].num_leaves
        nd = p["dst_transforms_treedef"].num_leaves
        dst_t = self._transforms(env, p["dst_transforms_treedef"], leaves[ns:ns + nd])
        bar_t = self._transforms(env, p["barrier_transforms_treedef"], leaves[ns + nd:])
        loc = self.where(frame)
        ref = self._barrier(self.read(env, bar), bar_t, frame)
        nbytes = self._bytes(self.read(env, dst), dst_t, loc)
        target = self._mem_ref(self.read(env, dst), dst_t)
        writes = (target,) if target is not None else ()
        self._readback_read(self.read(env, src), loc, out)
        axes = tuple(self._axis(a) for a in (p.get("collective_axes") or ()))
        leader = p.get("leader_tracked")
        if leader is None or not axes:
            out.append(Op(K.COPY_GMEM_TO_SMEM, ref, bytes=Const(nbytes), collective_axes=axes,
                          loc=loc, writes=writes))
            return []
        # Leader-tracked (partitioned or replicated) copy: only the first block along the axis
        # expects the bytes of every block; each block's TMA completes them on the leader's
        # barrier (the lowering's `bytes *= 2` for a cluster of 2).
        axis = axes[0]
        n = self.axis_sizes.get(axis, 1)
        leader_block = tuple(Const(0) if a == axis else Var(a) for a, _ in self.cluster)
        out.append(When(mk("==", Var(axis), Const(0)),
                        (Op(K.ARRIVE_EXPECT_TX, ref, bytes=Const(nbytes * n), loc=loc),), (),
                        loc))
        out.append(Op(K.TMA_LOAD, BarrierRef(ref.alloc, ref.index, leader_block),
                      bytes=Const(nbytes), loc=loc, writes=writes))
        self._note(f"{loc}: leader-tracked copy: block 0 along `{axis}` expects "
                   f"{n}x{nbytes} bytes, every block's TMA completes on block 0's barrier")
        return []

    def _op_async_store_smem(self, eqn, env, frame, out):
        """st.async of registers into the SMEM of block `cluster_idx` along `cluster_dim`: the
        lowering's arrive.expect_tx and the store's complete_tx both hit that block's barrier."""
        p = eqn.params
        _src, dst, bar, cluster_idx, *leaves = eqn.invars
        nr = p["ref_transforms_treedef"].num_leaves
        dst_t = self._transforms(env, p["ref_transforms_treedef"], leaves[:nr])
        bar_t = self._transforms(env, p["barrier_transforms_treedef"], leaves[nr:])
        loc = self.where(frame)
        ref = self._barrier(self.read(env, bar), bar_t, frame)
        axis = self._axis(p["cluster_dim"])
        coord = self._int(self._leaf(cluster_idx))
        if opaque_vars(coord):
            raise ModelError("the destination block of async_store_smem depends on data loaded "
                             "from memory; barrierproof cannot follow it", loc=loc,
                             hint="compute cluster_idx from axis indices and loop indices")
        block = tuple(coord if a == axis else (ref.block[i] if ref.block is not None else Var(a))
                      for i, (a, _) in enumerate(self.cluster))
        nbytes = self._bytes(self.read(env, dst), dst_t, loc)
        target = self._mem_ref(self.read(env, dst), dst_t)
        out.append(Op(K.ASYNC_STORE_SMEM, BarrierRef(ref.alloc, ref.index, block),
                      bytes=Const(nbytes), loc=loc, writes=(target,) if target is not None else ()))
        return []

    def _op_tcgen05_mma(self, eqn, env, frame, out):
        p = eqn.params
        loc = self.where(frame)
        axis = p.get("collective_axis")
        axes = (self._axis(axis),) if axis is not None else ()
        n_scales = 2 if p.get("scaled") else 0
        n_meta = 1 if p.get("sparse") else 0
        n_bar = 1 if p.get("arrive") else 0
        reads, writes = self._mma_operands(eqn, env,
                                           list(eqn.invars[4 + n_bar + n_scales + n_meta:]))
        if not p.get("arrive"):
            out.append(Op(K.TCGEN05_MMA, None, collective_axes=axes, loc=loc, reads=reads,
                          writes=writes))
            return []
        leaves = list(eqn.invars[5 + n_scales + n_meta:])
        skip = 0
        for key in ("acc_transforms_tree", "a_transforms_tree", "b_transforms_tree"):
            tree = p.get(key)
            skip += tree.num_leaves if tree is not None else 0
        tree = p.get("barrier_transforms_tree")
        nb = tree.num_leaves if tree is not None else 0
        t = self._transforms(env, tree, leaves[skip:skip + nb])
        ref = self._barrier(self.read(env, eqn.invars[4]), t, frame)
        out.append(Op(K.TCGEN05_MMA, ref, collective_axes=axes, loc=loc, reads=reads,
                      writes=writes))
        return []

    def _op_tcgen05_commit_arrive(self, eqn, env, frame, out):
        p = eqn.params
        t = self._transforms(env, p.get("barrier_transforms_tree"), eqn.invars[1:])
        ref = self._barrier(self.read(env, eqn.invars[0]), t, frame)
        axis = p.get("collective_axis")
        axes = (self._axis(axis),) if axis is not None else ()
        out.append(Op(K.TCGEN05_COMMIT_ARRIVE, ref, collective_axes=axes, loc=self.where(frame)))
        return []

    # -- global semaphores ---------------------------------------------------------------------

    def _op_get_global(self, eqn, env, frame, out):
        """`pl.get_global(SemaphoreType.REGULAR)`: one counter for the whole grid. The other
        clusters of the grid (not other devices: each has its own) run this program and signal
        it in lockstep with the modelled one (`copies`)."""
        what = eqn.params.get("what")
        inner = getattr(what, "inner_aval", what)
        if type(getattr(inner, "dtype", None)).__name__ != "Semaphore" \
                or tuple(getattr(inner, "shape", (1,))) not in ((), (1,)):
            return opaque("global")
        return self._semaphore(None, frame)

    def _semaphore(self, pname, frame) -> BarrierVal:
        loc = self.where(frame)
        copies = math.prod(self.grid_sizes)
        name = self._fresh(_clean_name(pname) if pname else "sem")
        alloc = BarrierAlloc(name=name, num_arrivals=Const(1), loc=loc, semaphore=True,
                             copies=Const(copies))
        self.barriers.append(alloc)
        if copies > 1:
            self._note(f"{loc}: global semaphore `{alloc.name}`: the {copies} clusters of the "
                       "grid run this program and signal it in lockstep with the checked one")
        return BarrierVal(alloc)

    def _semaphore_args(self, eqn, env):
        from jax import tree_util
        return tree_util.tree_unflatten(eqn.params["args_tree"],
                                        [self.read(env, v) for v in eqn.invars])

    def _op_semaphore_signal(self, eqn, env, frame, out):
        ref, transforms, inc, _device, _core = self._semaphore_args(eqn, env)
        if not isinstance(ref, BarrierVal) or not ref.alloc.semaphore or transforms \
                or not isinstance(inc, Const):
            return self._unmodeled(eqn, env, frame, out)
        out.append(Op(K.SEMAPHORE_SIGNAL, BarrierRef(ref.alloc, ()), count=inc,
                      loc=self.where(frame)))
        return []

    def _op_semaphore_signal_parallel(self, eqn, env, frame, out):
        """`plgpu.semaphore_signal_parallel(*signals)`: the signals arrive in no guaranteed
        order. When they all hit one counter the order cannot matter, and they are the signals
        one after the other; signals to different semaphores land in any order (one in-flight
        signal each, all before the thread's next operation: semantics.SEM_SIGNAL_SET)."""
        refs, transforms, incs, _devices = self._semaphore_args(eqn, env)
        if not refs or any(not isinstance(r, BarrierVal) or not r.alloc.semaphore for r in refs) \
                or any(transforms) or any(not isinstance(i, Const) for i in incs):
            return self._unmodeled(eqn, env, frame, out)
        if len({id(r.alloc) for r in refs}) > 1:
            out.append(Op(K.SEMAPHORE_SIGNAL_PARALLEL, None, loc=self.where(frame),
                          signals=tuple((BarrierRef(r.alloc, ()), inc)
                                        for r, inc in zip(refs, incs))))
            return []
        for ref, inc in zip(refs, incs):
            out.append(Op(K.SEMAPHORE_SIGNAL, BarrierRef(ref.alloc, ()), count=inc,
                          loc=self.where(frame)))
        return []

    def _op_semaphore_signal_multicast(self, eqn, env, frame, out):
        """`plgpu.semaphore_signal_multicast(sem, value, collective_axes=)` (newer JAX): signal
        the semaphore on every device along the axes (all of the mesh). Each device runs this
        program in lockstep, so each device's copy receives `value` from every one of them."""
        ref, transforms, value = self._semaphore_args(eqn, env)
        axes = eqn.params.get("collective_axes") or ()
        axes = axes if isinstance(axes, tuple) else (axes,)
        names = [self._axis(a) for a in axes]
        if not isinstance(ref, BarrierVal) or not ref.alloc.semaphore or transforms \
                or not isinstance(value, Const) or any(n not in self.axis_sizes for n in names):
            return self._unmodeled(eqn, env, frame, out)
        devices = math.prod(self.axis_sizes[n] for n in names)
        out.append(Op(K.SEMAPHORE_SIGNAL, BarrierRef(ref.alloc, ()),
                      count=Const(value.value * devices), loc=self.where(frame)))
        if devices > 1:
            self._note(f"{self.where(frame)}: semaphore_signal_multicast: each of the {devices} "
                       f"devices along {tuple(axes)} signals `{ref.alloc.name}` of every device "
                       "in lockstep")
        return []

    def _op_semaphore_wait(self, eqn, env, frame, out):
        ref, transforms, value, decrement = self._semaphore_args(eqn, env)
        if isinstance(decrement, Const):
            decrement = bool(decrement.value)
        if not isinstance(ref, BarrierVal) or not ref.alloc.semaphore or transforms \
                or not isinstance(value, Expr) or opaque_vars(value) \
                or not isinstance(decrement, bool):
            return self._unmodeled(eqn, env, frame, out)
        out.append(Op(K.SEMAPHORE_WAIT, BarrierRef(ref.alloc, ()), count=value,
                      decrement=decrement, loc=self.where(frame)))
        return []

    def _op_try_cluster_cancel(self, eqn, env, frame, out):
        p = eqn.params
        rtree = p.get("result_transforms_tree")
        nr = rtree.num_leaves if rtree is not None else 0
        t = self._transforms(env, p.get("barrier_transforms_tree"), eqn.invars[2 + nr:])
        ref = self._barrier(self.read(env, eqn.invars[1]), t, frame)
        out.append(Op(K.TRY_CLUSTER_CANCEL, ref, loc=self.where(frame)))
        return []


def _arrival_only(body) -> list:
    """A copy's statements with the copy predicated off: the issuer's arrival stays (with 0
    bytes), the data and its completion bytes go."""
    out = []
    for stmt in body:
        if isinstance(stmt, When):
            out.append(When(stmt.cond, tuple(_arrival_only(stmt.then)),
                            tuple(_arrival_only(stmt.orelse)), stmt.loc))
        elif stmt.kind in (K.COPY_GMEM_TO_SMEM, K.ARRIVE_EXPECT_TX):
            out.append(Op(K.BARRIER_ARRIVE, stmt.barrier, loc=stmt.loc))
        # tma_load (the bytes of a leader-tracked copy) is not issued
    return out
