"""A Python DSL for barrier protocols whose names mirror Pallas Mosaic GPU.

>>> from barrierproof.model.dsl import protocol
>>> @protocol(expect="verified")
... def handoff(k):
...     k.threads(2, name="wg")
...     full = k.Barrier(num_arrivals=1)
...     with k.when(k.thread == 0):
...         k.barrier_arrive(full)
...     with k.otherwise():
...         k.barrier_wait(full)
>>> kernel = handoff.build()
>>> [op.kind for op in kernel.ops()]
['barrier_arrive', 'barrier_wait']

Keyword arguments of the protocol function are its integer parameters (`def ring(k, stages=2)`);
inside the body they are symbolic expressions, so loops and indices stay symbolic for `prove`.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from contextlib import contextmanager
from typing import Callable, Iterable, Sequence

from .ir import (MAX_ARRIVALS, BarrierAlloc, BarrierRef, Const, Expr, ExprLike, Kernel, Loc,
                 Loop, MemAlloc, MemRef, ModelError, Op, Param, Slice, Var, WarpRegion, When,
                 as_expr, unique_name)
from .block_limits import MAX_BARRIER_INSTANCES
from .declaration import check_expect, check_ignore, check_name, def_loc, integer_params
from .scope import LANE, Scope
from . import primitives as K
from .ir import emax as maximum  # noqa: F401  (symbolic max/min for protocol code)
from .ir import emin as minimum  # noqa: F401

import contextlib as _contextlib

# Frames of this module and of contextlib (the `with` blocks) are not the user's code.
_SKIPPED = {os.path.abspath(__file__), os.path.abspath(_contextlib.__file__)}
_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*=")
_WITH_AS = re.compile(r"as\s+([A-Za-z_]\w*)\s*:")


def _caller() -> tuple[Loc, str]:
    """The user's source location (the first frame outside this module) and its line text."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename) in _SKIPPED:
        frame = frame.f_back
    if frame is None:
        return Loc("<dsl>", 0), ""
    info = inspect.getframeinfo(frame, context=1)
    text = info.code_context[0] if info.code_context else ""
    return Loc(info.filename, info.lineno, info.function), text


class _At:
    def __init__(self, handle: "BarrierHandle"):
        self._handle = handle

    def __getitem__(self, index) -> BarrierRef:
        if not isinstance(index, tuple):
            index = (index,)
        loc, _ = _caller()
        exprs = tuple(_int_expr(i, loc, "barrier index") for i in index)
        self._handle._check_index(exprs, loc)
        return BarrierRef(self._handle.alloc, exprs)


class BarrierHandle:
    """What `k.Barrier(...)` returns: index it with `.at[i]` like a Pallas barrier ref."""

    def __init__(self, alloc: BarrierAlloc, kernel: "KernelBuilder"):
        self.alloc = alloc
        self.kernel = kernel
        self.at = _At(self)

    def _check_index(self, index: tuple[Expr, ...], loc: Loc) -> None:
        shape = self.alloc.shape
        if len(index) != len(shape):
            raise ModelError(f"`{self.alloc.name}` has {len(shape)} dimension(s), indexed with "
                             f"{len(index)}", loc=loc, code="BP120",
                             hint=f"use {self.alloc.name}.at[{', '.join('i' * 1 for _ in shape)}]")
        for i, n in zip(index, shape):
            if isinstance(i, Const) and isinstance(n, Const) and not 0 <= i.value < n.value:
                raise ModelError(f"index {i.value} is out of range for `{self.alloc.name}` with "
                                 f"num_barriers={n.value}", loc=loc, code="BP120",
                                 hint=f"indices of `{self.alloc.name}` run from 0 to {n.value - 1}")

    def on(self, *block: ExprLike, index: Sequence[ExprLike] | ExprLike = ()) -> BarrierRef:
        """This barrier's instance in another block of the cluster (remote arrive/expect_tx)."""
        loc, _ = _caller()
        if not isinstance(index, (tuple, list)):
            index = (index,)
        exprs = tuple(_int_expr(i, loc, "barrier index") for i in index)
        if exprs:
            self._check_index(exprs, loc)
        return BarrierRef(self.alloc, exprs, tuple(_int_expr(c, loc, "block") for c in block))

    def __repr__(self) -> str:
        return f"<{self.alloc.kind} {self.alloc.name}>"


class _MemAt:
    def __init__(self, handle: "BufferHandle"):
        self._handle = handle

    def __getitem__(self, index) -> MemRef:
        if not isinstance(index, tuple):
            index = (index,)
        loc, _ = _caller()
        alloc = self._handle.alloc
        if len(index) > len(alloc.shape):
            raise ModelError(f"buffer `{alloc.name}` has {len(alloc.shape)} slot dimension(s), "
                             f"indexed with {len(index)}", loc=loc,
                             hint=f"declare it with slots=(...) of {len(index)} dimensions")
        # leading indices select slots; from the first slice on, every dimension is a region
        # (an index there is a slice of one slot)
        cut = next((d for d, i in enumerate(index) if isinstance(i, Slice)), len(index))
        exprs = tuple(_int_expr(i, loc, "slot index") for i in index[:cut])
        region = tuple(i if isinstance(i, Slice) else Slice(_int_expr(i, loc, "slot index"),
                                                              Const(1))
                       for i in index[cut:])
        for i, n in zip(exprs, alloc.shape):
            if isinstance(i, Const) and isinstance(n, Const) and not 0 <= i.value < n.value:
                raise ModelError(f"slot {i.value} is out of range for buffer `{alloc.name}` with "
                                 f"{n.value} slot(s)", loc=loc,
                                 hint=f"slots of `{alloc.name}` run from 0 to {n.value - 1}")
        for s, n in zip(region, alloc.shape[cut:]):
            _check_slice(s, n, alloc.name, loc)
        return MemRef(alloc, exprs, region)


def _check_slice(s: Slice, n: Expr, name: str, loc: Loc) -> None:
    """A slice with constant bounds that leaves its dimension: an error where it is written."""
    start, size, stride = s.exprs()
    if not all(isinstance(e, Const) for e in (start, size, stride, n)):
        return                             # symbolic: checked per state by the explorer
    last = start.value + (size.value - 1) * stride.value
    if size.value < 1 or stride.value < 1 or start.value < 0 or last >= n.value:
        raise ModelError(f"region {s!r} leaves buffer `{name}` with {n.value} slot(s) there",
                         loc=loc, hint=f"keep start..start+(size-1)*stride within 0..{n.value - 1}"
                                       ", with size and stride at least 1")


class BufferHandle:
    """What `k.SMEM(...)` / `k.TMEM(...)` returns: the whole buffer, or `.at[slot]`."""

    def __init__(self, alloc: MemAlloc):
        self.alloc = alloc
        self.at = _MemAt(self)

    def __repr__(self) -> str:
        return f"<{self.alloc.space.upper()} {self.alloc.name}>"


def _int_expr(value, loc: Loc, what: str) -> Expr:
    if isinstance(value, float) and not isinstance(value, bool):
        raise ModelError(f"{what} {value!r} is a float, not an integer expression", loc=loc,
                         hint="use integers and // for division")
    try:
        return as_expr(value)
    except ModelError as err:
        raise ModelError(f"{what}: {err.message}", loc=loc, hint=err.hint) from None


class KernelBuilder:
    """The `k` handed to a protocol function: allocations, control flow and operations."""

    def __init__(self, name: str, loc: Loc, params: dict[str, Param]):
        self.name = name
        self.loc = loc
        self.params = params
        self._barriers: list[BarrierAlloc] = []
        self._buffers: list[MemAlloc] = []
        self._stack: list[list] = [[]]
        self._num_threads: Expr = Const(1)
        self._thread_axis = "thread"
        self._num_warps = 4
        self._warp_axis = "warp"
        # Whether the body names the warp axis (k.warp, k.warp_region): a default name it never
        # uses yields to the user's names (a thread axis called "warp" is common)
        self._warp_axis_used = False
        self._cluster: list[tuple[str, Expr]] = []
        self._grid: list[tuple[str, Expr]] = []
        self._assumptions: list[Expr] = []
        self._loops = 0
        self._names: set[str] = set()
        self._threads_called = False
        # Where each axis was named (None: the default name), for collision errors.
        self._axis_locs: dict[str, Loc | None] = {}

    # -- shape -------------------------------------------------------------------------------

    def threads(self, n: ExprLike, name: str = "thread") -> None:
        """Pallas threads per block (`num_threads=`, `thread_name=`)."""
        loc, _ = _caller()
        self._threads_called = True
        self._num_threads = _int_expr(n, loc, "num_threads")
        if isinstance(self._num_threads, Const) and self._num_threads.value < 1:
            raise ModelError(f"num_threads={self._num_threads.value}", loc=loc,
                             hint="a kernel has at least one thread")
        self._thread_axis = name
        self._axis_locs["thread"] = loc

    def warps(self, n: int = 4, name: str = "warp") -> None:
        """Warps per warpgroup, for `k.warp_region()` (plgpu.WarpMesh)."""
        loc, _ = _caller()
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ModelError(f"warps({n!r}): the number of warps is a positive integer", loc=loc,
                             hint="e.g. k.warps(4)")
        self._num_warps = n
        self._warp_axis = name
        self._axis_locs["warp"] = loc

    def cluster(self, **axes: ExprLike) -> None:
        """The cluster shape, e.g. `k.cluster(x=2)`; its blocks share ClusterBarriers."""
        loc, _ = _caller()
        self._cluster = [(a, _int_expr(n, loc, f"cluster size {a}")) for a, n in axes.items()]
        self._axis_locs["cluster"] = loc

    def grid(self, **axes: ExprLike) -> None:
        """Clusters along each grid axis; each cluster is checked for its own behaviour."""
        loc, _ = _caller()
        self._grid = [(a, _int_expr(n, loc, f"grid size {a}")) for a, n in axes.items()]
        self._axis_locs["grid"] = loc

    def assume(self, *conditions: Expr) -> None:
        """Constraints on the parameters, for proofs over all their values."""
        loc, _ = _caller()
        for c in conditions:
            if not isinstance(c, Expr):
                raise ModelError(f"assume({c!r}) needs a condition over parameters", loc=loc)
            self._assumptions.append(c)

    def _uses_thread_index(self) -> bool:
        from .ir import free_vars
        names = {self._thread_axis, "thread"}

        def walk(body) -> bool:
            for stmt in body:
                if isinstance(stmt, When) and (free_vars(stmt.cond) & names or walk(stmt.then)
                                               or walk(stmt.orelse)):
                    return True
                if isinstance(stmt, (Loop, WarpRegion)) and walk(stmt.body):
                    return True
            return False
        return walk(self._stack[0])

    @property
    def thread(self) -> Var:
        return Var(self._thread_axis)

    @property
    def warp(self) -> Var:
        self._warp_axis_used = True
        return Var(self._warp_axis)

    @property
    def lane(self) -> Var:
        """The thread's lane in its warp (0..31). A `k.when` on it splits a warp: each side runs
        with part of the warp's threads (only named barriers may be reached there)."""
        return Var("lane")

    def block(self, axis: str) -> Var:
        """This block's coordinate along a cluster axis."""
        if axis not in [a for a, _ in self._cluster]:
            loc, _ = _caller()
            raise ModelError(f"{axis!r} is not a cluster axis", loc=loc,
                             hint="declare it first with k.cluster(...)")
        return Var(axis)

    def program_id(self, axis: str) -> Var:
        """The cluster's position along a grid axis."""
        if axis not in [a for a, _ in self._grid]:
            loc, _ = _caller()
            raise ModelError(f"{axis!r} is not a grid axis", loc=loc,
                             hint="declare it first with k.grid(...)")
        return Var(axis)

    # -- allocations -------------------------------------------------------------------------

    def _name(self, given: str | None, text: str, default: str) -> str:
        name = given or (m.group(1) if (m := _ASSIGN.match(text)) else None) or default
        return unique_name(name, self._names)

    def _alloc(self, cluster: bool, num_arrivals, num_barriers, orders_tensor_core,
               collective_axes, name, leader_tracked: bool = False,
               explicit_init: bool = False) -> BarrierHandle:
        loc, text = _caller()
        arrivals = _int_expr(num_arrivals, loc, "num_arrivals")
        if isinstance(arrivals, Const) and not 1 <= arrivals.value <= MAX_ARRIVALS:
            raise ModelError(f"num_arrivals={arrivals.value}: an mbarrier needs 1.."
                             f"{MAX_ARRIVALS} arrivals per phase", loc=loc, code="BP121",
                             hint="count one arrival per arriving thread, copy or commit")
        scalar = num_barriers is None
        dims = (1,) if scalar else (num_barriers if isinstance(num_barriers, (tuple, list))
                                    else (num_barriers,))
        shape = tuple(_int_expr(d, loc, "num_barriers") for d in dims)
        for d in shape:
            if isinstance(d, Const) and d.value < 1:
                raise ModelError(f"num_barriers={d.value}", loc=loc, code="BP120",
                                 hint="allocate at least one barrier")
        count = 1
        for d in shape:
            count *= d.value if isinstance(d, Const) else 1
        if count > MAX_BARRIER_INSTANCES:
            raise ModelError(f"num_barriers={num_barriers!r} is {count:,} barriers in one block; "
                             f"a block's shared memory holds at most {MAX_BARRIER_INSTANCES:,} "
                             "mbarriers (8 bytes each)", loc=loc,
                             hint="allocate one barrier per pipeline stage")
        axes = (collective_axes,) if isinstance(collective_axes, str) else tuple(collective_axes)
        if cluster:
            known = [a for a, _ in self._cluster]
            for a in axes:
                if a not in known:
                    raise ModelError(f"collective axis {a!r} is not a cluster axis", loc=loc,
                                     hint=f"declare the cluster first: k.cluster({a}=2)")
        if leader_tracked and len(axes) != 1:
            raise ModelError(f"a leader_tracked ClusterBarrier needs exactly one collective axis, "
                             f"not {len(axes)}", loc=loc,
                             hint="Mosaic GPU tracks a leader along a single cluster axis")
        default = "cluster_bar" if cluster else "bar"
        alloc = BarrierAlloc(self._name(name, text, f"{default}{len(self._barriers)}"), arrivals,
                             shape, bool(orders_tensor_core), cluster, axes, loc, scalar,
                             leader_tracked=bool(leader_tracked),
                             explicit_init=bool(explicit_init))
        self._barriers.append(alloc)
        return BarrierHandle(alloc, self)

    def Semaphore(self, copies: ExprLike = 1, name: str | None = None) -> BarrierHandle:
        """A global semaphore (`pl.get_global(plgpu.SemaphoreType.REGULAR)`): one counter the
        blocks of the cluster signal and wait on. `copies` > 1 says that many clusters of the
        grid run this same program and signal it in lockstep with this one (each signal counts
        `copies` times); their waits must then not decrement (a monotone counter)."""
        loc, text = _caller()
        alloc = BarrierAlloc(self._name(name, text, f"sem{len(self._barriers)}"), Const(1),
                             loc=loc, semaphore=True, copies=_int_expr(copies, loc, "copies"))
        self._barriers.append(alloc)
        return BarrierHandle(alloc, self)

    def semaphore_signal(self, sem, inc: ExprLike = 1) -> None:
        """`pl.semaphore_signal(sem, inc)`: add `inc` to the counter (never blocks)."""
        self._op(K.SEMAPHORE_SIGNAL, sem, count=inc)

    def semaphore_signal_parallel(self, *signals) -> None:
        """`plgpu.semaphore_signal_parallel(*signals)`: each signal is a semaphore or a
        `(semaphore, inc)` pair; they land in no guaranteed order, all before this thread's next
        operation."""
        loc, _ = _caller()
        if not signals:
            raise ModelError("semaphore_signal_parallel needs at least one signal", loc=loc)
        out = []
        for sig in signals:
            sem, inc = sig if isinstance(sig, tuple) else (sig, 1)
            out.append((self._ref(sem, loc), _int_expr(inc, loc, "inc")))
        self._stack[-1].append(Op(K.SEMAPHORE_SIGNAL_PARALLEL, None, signals=tuple(out),
                                  loc=loc))

    def semaphore_wait(self, sem, value: ExprLike = 1, decrement: bool = True) -> None:
        """`pl.semaphore_wait(sem, value, decrement=)`: block until the counter reaches `value`,
        then take `value` off it if `decrement`."""
        self._op(K.SEMAPHORE_WAIT, sem, count=value, decrement=bool(decrement))

    def Barrier(self, num_arrivals: ExprLike = 1, num_barriers=None,
                orders_tensor_core: bool = False, name: str | None = None,
                explicit_init: bool = False) -> BarrierHandle:
        """`plgpu.Barrier`: one mbarrier per block, or an array of them (`num_barriers=`).
        `explicit_init=True`: a PTX-level barrier the protocol initialises itself
        (`mbarrier_init`), and must make visible before any other thread, block or the async
        proxy uses it."""
        return self._alloc(False, num_arrivals, num_barriers, orders_tensor_core, (), name,
                           explicit_init=explicit_init)

    def ClusterBarrier(self, collective_axes, num_arrivals: ExprLike = 1, num_barriers=None,
                       orders_tensor_core: bool = False, name: str | None = None,
                       leader_tracked: bool = False, explicit_init: bool = False
                       ) -> BarrierHandle:
        """`plgpu.ClusterBarrier`: arrivals fan out to the blocks along `collective_axes`.
        `leader_tracked=True`: every block's arrival goes to the leader's instance only (block 0
        along the one collective axis), which counts them all; only the leader may wait."""
        return self._alloc(True, num_arrivals, num_barriers, orders_tensor_core, collective_axes,
                           name, leader_tracked, explicit_init)

    def _buffer(self, space: str, slots, name: str | None) -> BufferHandle:
        loc, text = _caller()
        scalar = slots is None
        dims = (1,) if scalar else (slots if isinstance(slots, (tuple, list)) else (slots,))
        shape = tuple(_int_expr(d, loc, "slots") for d in dims)
        for d in shape:
            if isinstance(d, Const) and d.value < 1:
                raise ModelError(f"slots={d.value}", loc=loc, hint="a buffer has at least 1 slot")
        alloc = MemAlloc(self._name(name, text, f"{space}{len(self._buffers)}"), space, shape,
                         loc, scalar)
        self._buffers.append(alloc)
        return BufferHandle(alloc)

    def ds(self, start: ExprLike, size: ExprLike, stride: ExprLike = 1) -> Slice:
        """`pl.ds(start, size, stride)`: `size` slots of one dimension from `start`, `stride`
        apart, for `buf.at[...]` (`acc.at[k.ds(k.thread * 64, 64)]`: a thread's rows)."""
        loc, _ = _caller()
        return Slice(_int_expr(start, loc, "ds start"), _int_expr(size, loc, "ds size"),
                     _int_expr(stride, loc, "ds stride"))

    def SMEM(self, slots=None, name: str | None = None) -> BufferHandle:
        """A shared-memory buffer in every block (`plgpu.SMEM`), optionally split into `slots`
        (a ring's stages): accesses to it are checked for races (BP200)."""
        return self._buffer("smem", slots, name)

    def TMEM(self, slots=None, name: str | None = None) -> BufferHandle:
        """A tensor-memory buffer (`plgpu.TMEM`, tcgen05 accumulators): races are BP201."""
        return self._buffer("tmem", slots, name)

    # -- control flow ------------------------------------------------------------------------

    @contextmanager
    def loop(self, trip: ExprLike, name: str | None = None):
        """`for i in range(trip)` with a symbolic trip count (fori_loop / scan)."""
        loc, text = _caller()
        trip_e = _int_expr(trip, loc, "trip count")
        if isinstance(trip_e, Const) and trip_e.value < 0:
            # range() of a negative count is empty: the body would silently never run
            raise ModelError(f"k.loop({trip_e.value}): a negative trip count, so the loop body "
                             "would never run", loc=loc,
                             hint="a trip count is a number of iterations, 0 or more: "
                                  "k.loop(n) runs i = 0 .. n-1")
        m = _WITH_AS.search(text)
        var = name or (m.group(1) if m else f"i{self._loops}")
        self._loops += 1
        self._stack.append([])
        yield Var(var)
        body = self._stack.pop()
        self._stack[-1].append(Loop(var, trip_e, tuple(body), loc))

    @contextmanager
    def when(self, cond: Expr):
        """`pl.when(cond)` / `lax.cond`: the body runs where `cond` holds."""
        loc, _ = _caller()
        if not isinstance(cond, Expr):
            # A Python value was computed while the protocol was built (`k.thread is one`,
            # `bool(...)`, a plain int): it is the same for every thread, never the condition
            # meant.
            raise ModelError(f"k.when({cond!r}) needs a symbolic condition, not a Python "
                             f"{type(cond).__name__}", loc=loc,
                             hint="compare DSL values with ==, <, ... (e.g. k.when(k.thread == 0)); "
                                  "`is`, `and`, `or`, `not` and bool() are evaluated by Python")
        cond_e = _int_expr(cond, loc, "condition")
        self._stack.append([])
        yield
        body = self._stack.pop()
        self._stack[-1].append(When(cond_e, tuple(body), (), loc))

    @contextmanager
    def otherwise(self):
        """The else branch of the `when` just before it."""
        loc, _ = _caller()
        block = self._stack[-1]
        if not block or not isinstance(block[-1], When) or block[-1].orelse:
            raise ModelError("otherwise() must follow a `with k.when(...)` block", loc=loc)
        self._stack.append([])
        yield
        body = self._stack.pop()
        previous = block.pop()
        block.append(When(previous.cond, previous.then, tuple(body), previous.loc))

    @contextmanager
    def warp_region(self):
        """`pl.core_map(plgpu.WarpMesh(axis_name=...))`: every warp runs the body."""
        loc, _ = _caller()
        self._warp_axis_used = True
        self._stack.append([])
        yield Var(self._warp_axis)
        body = self._stack.pop()
        self._stack[-1].append(WarpRegion(self._warp_axis, tuple(body), loc))

    # -- operations --------------------------------------------------------------------------

    def _ref(self, barrier, loc: Loc) -> BarrierRef:
        if isinstance(barrier, BarrierHandle):
            barrier = BarrierRef(barrier.alloc, ())
        if not isinstance(barrier, BarrierRef):
            raise ModelError(f"{barrier!r} is not a barrier", loc=loc,
                             hint="pass a barrier made by k.Barrier(...) or its .at[i]")
        if barrier.alloc not in self._barriers:
            raise ModelError(f"barrier `{barrier.alloc.name}` is not allocated by this protocol",
                             loc=loc, hint="allocate it with k.Barrier(...) in this protocol")
        if not barrier.index and not barrier.alloc.scalar:
            raise ModelError(f"array barrier `{barrier.alloc.name}` used without an index",
                             loc=loc, code="BP120", hint=f"index it: {barrier.alloc.name}.at[i]")
        return barrier

    def _mem(self, refs, loc: Loc, what: str) -> tuple[MemRef, ...]:
        if refs is None:
            return ()
        if not isinstance(refs, (tuple, list)):
            refs = (refs,)
        out = []
        for ref in refs:
            if isinstance(ref, BufferHandle):
                ref = MemRef(ref.alloc, ())
            if not isinstance(ref, MemRef):
                raise ModelError(f"{what}={ref!r} is not a buffer", loc=loc,
                                 hint="pass a buffer made by k.SMEM(...) / k.TMEM(...) or its "
                                      ".at[slot]")
            if ref.alloc not in self._buffers:
                raise ModelError(f"buffer `{ref.alloc.name}` is not allocated by this protocol",
                                 loc=loc, hint="allocate it with k.SMEM(...) in this protocol")
            out.append(ref)
        return tuple(out)

    def _op(self, kind: str, barrier=None, **fields) -> None:
        loc, _ = _caller()
        for key in ("reads", "writes"):
            if key in fields:
                fields[key] = self._mem(fields[key], loc, key)
        ref = self._ref(barrier, loc) if barrier is not None else None
        for key in ("count", "bytes", "parity", "phase"):
            if key in fields and fields[key] is not None:
                fields[key] = _int_expr(fields[key], loc, key)
        if "collective_axes" in fields:
            axes = fields["collective_axes"]
            fields["collective_axes"] = (() if axes is None else
                                         (axes,) if isinstance(axes, str) else tuple(axes))
        self._stack[-1].append(Op(kind, ref, loc=loc, **fields))

    def barrier_arrive(self, barrier) -> None:
        self._op(K.BARRIER_ARRIVE, barrier)

    def barrier_wait(self, barrier) -> None:
        self._op(K.BARRIER_WAIT, barrier)

    def barrier_test(self, barrier, retry: bool = False) -> None:
        """`plgpu.barrier_test(barrier)` (warp context): a non-blocking barrier_wait. If the
        completion this thread's parity bit waits for has happened, it observes it (the bit
        flips, so a later barrier_wait waits for the next one); else nothing changes. The
        protocol does not branch on the answer. `retry=True`: a poll repeated until it
        succeeds (`while not barrier_test(b)`), which is a barrier_wait."""
        self._op(K.BARRIER_WAIT if retry else K.BARRIER_TEST, barrier)

    def copy_gmem_to_smem(self, barrier, bytes: ExprLike = 1024,
                          collective_axes: str | Iterable[str] | None = None, dst=None) -> None:
        """TMA load that arrives on `barrier` once its `bytes` land; it writes `dst` (in every
        block a multicast reaches) until then."""
        self._op(K.COPY_GMEM_TO_SMEM, barrier, bytes=bytes, collective_axes=collective_axes,
                 writes=dst)

    def tcgen05_mma(self, barrier=None, a=None, b=None, acc=None) -> None:
        """An MMA; with `barrier=` it arrives there when it completes. Until then it reads the
        operands `a`, `b` (SMEM or TMEM) and writes the accumulator `acc` (TMEM)."""
        loc, _ = _caller()
        reads = self._mem(a, loc, "a") + self._mem(b, loc, "b")
        self._op(K.TCGEN05_MMA, barrier, reads=reads, writes=acc)

    # -- memory effects ----------------------------------------------------------------------

    def read(self, *refs) -> None:
        """The thread loads from these buffers (ref loads, ld.shared, a waited tcgen05.ld)."""
        self._op(K.READ, reads=refs)

    def write(self, *refs) -> None:
        """The thread stores to these buffers (ref stores, st.shared)."""
        self._op(K.WRITE, writes=refs)

    def copy_smem_to_gmem(self, src) -> None:
        """TMA store: reads `src` until a `wait_smem_to_gmem` covers it."""
        self._op(K.COPY_SMEM_TO_GMEM, reads=src)

    def wait_smem_to_gmem(self, n: ExprLike = 0) -> None:
        """Wait until at most `n` of this thread's TMA stores are still reading their source."""
        self._op(K.WAIT_SMEM_TO_GMEM, count=n)

    def cp_async(self, dst) -> None:
        """`plgpu.copy_gmem_to_smem(src, dst)` without a barrier (cp.async, pre-Hopper GPUs):
        writes `dst` until a `wait_gmem_to_smem` covers it; no barrier hears of it."""
        self._op(K.CP_ASYNC, writes=dst)

    def wait_gmem_to_smem(self, n: ExprLike = 0) -> None:
        """`plgpu.wait_gmem_to_smem(n)`: at most `n` of this thread's cp.async copies are still
        in flight."""
        self._op(K.WAIT_GMEM_TO_SMEM, count=n)

    def tcgen05_store(self, dst) -> None:
        """tcgen05.st: writes `dst` (TMEM) asynchronously until `tcgen05_wait_store`."""
        self._op(K.TCGEN05_STORE, writes=dst)

    def tcgen05_wait_store(self) -> None:
        """tcgen05.wait::st: every earlier tcgen05.st of this thread has written TMEM."""
        self._op(K.TCGEN05_WAIT_STORE)

    def tcgen05_load(self, src) -> None:
        """tcgen05.ld left running (`plgpu.async_load_tmem`): reads `src` (TMEM) until
        `tcgen05_wait_load`."""
        self._op(K.TCGEN05_LOAD, reads=src)

    def tcgen05_wait_load(self) -> None:
        """tcgen05.wait::ld (`plgpu.wait_load_tmem`): every earlier tcgen05.ld of this thread
        has read TMEM."""
        self._op(K.TCGEN05_WAIT_LOAD)

    def wgmma(self, a=None, b=None) -> None:
        """Hopper WGMMA (`plgpu.wgmma`): reads its SMEM operands until a `wgmma_wait` covers
        it (the accumulator lives in registers)."""
        loc, _ = _caller()
        self._op(K.WGMMA, reads=self._mem(a, loc, "a") + self._mem(b, loc, "b"))

    def wgmma_wait(self, n: ExprLike = 0) -> None:
        """`plgpu.wgmma_wait(n)`: at most `n` of this thread's WGMMAs are still in flight."""
        self._op(K.WGMMA_WAIT, count=n)

    def tcgen05_commit_arrive(self, barrier, collective_axis: str | None = None) -> None:
        """Arrive on `barrier` after every earlier tcgen05 op of this thread completes."""
        self._op(K.TCGEN05_COMMIT_ARRIVE, barrier, collective_axes=collective_axis)

    def async_store_smem(self, barrier, bytes: ExprLike, dst=None) -> None:
        """`plgpu.async_store_smem(src, ref, barrier, cluster_idx=, cluster_dim=)`: st.async of
        registers into the shared memory of the block `barrier.on(...)` names (or this block).
        The issuer does arrive.expect_tx(bytes) on that block's barrier at once; the bytes
        complete there when the store lands. It writes `dst` there until then."""
        self._op(K.ASYNC_STORE_SMEM, barrier, bytes=bytes, writes=dst)

    def try_cluster_cancel(self, barrier) -> None:
        self._op(K.TRY_CLUSTER_CANCEL, barrier)

    def cp_async_arrive(self, barrier) -> None:
        """cp.async.mbarrier.arrive.noinc: one arrival on `barrier`, landing once this thread's
        earlier cp.async copies are done (at any time after it is issued)."""
        self._op(K.CP_ASYNC_ARRIVE, barrier)

    # PTX-level operations for CUTLASS-style protocols.
    def arrive(self, barrier, count: ExprLike = 1) -> None:
        self._op(K.ARRIVE, barrier, count=count)

    def arrive_drop(self, barrier) -> None:
        self._op(K.ARRIVE_DROP, barrier)

    def expect_tx(self, barrier, bytes: ExprLike) -> None:
        self._op(K.EXPECT_TX, barrier, bytes=bytes)

    def arrive_expect_tx(self, barrier, bytes: ExprLike) -> None:
        self._op(K.ARRIVE_EXPECT_TX, barrier, bytes=bytes)

    def complete_tx(self, barrier, bytes: ExprLike) -> None:
        self._op(K.COMPLETE_TX, barrier, bytes=bytes)

    def tma_load(self, barrier, bytes: ExprLike,
                 collective_axes: str | Iterable[str] | None = None, dst=None) -> None:
        """cp.async.bulk with mbarrier::complete_tx: no arrival, only bytes when it lands.
        With `collective_axes`, `bytes` is the whole tile each block of the axes receives:
        this block's copy is an even share of it, multicast to every block (as
        `copy_gmem_to_smem`), so every block issuing its share fills `bytes` in each."""
        self._op(K.TMA_LOAD, barrier, bytes=bytes, collective_axes=collective_axes, writes=dst)

    def wait_parity(self, barrier, parity: ExprLike | None = None, *,
                    phase: ExprLike | None = None) -> None:
        """mbarrier.try_wait.parity in a loop until it succeeds.

        `parity` alone: it passes once the barrier's parity differs from it, and must return
        after the same completion on every schedule (it may skip phases on purpose).
        `phase=n`: the thread keeps its own phase count (CUTLASS's PipelineState) and means
        phase n, counted from 0 (-1: the phase before the first); the parity is n % 2, and the
        wait must return for that phase and no other (docs/parity.md)."""
        if (parity is None) == (phase is None):
            loc, _ = _caller()
            raise ModelError("wait_parity takes a parity or a phase=, not both and not neither",
                             loc=loc, hint="k.wait_parity(bar, (i // stages) % 2) or "
                                           "k.wait_parity(bar, phase=i // stages)")
        if phase is not None:
            parity = as_expr(phase) % 2
        self._op(K.WAIT_PARITY, barrier, parity=parity, phase=phase)

    # Hardware barriers that are not mbarriers (PTX bar / barrier.cluster).
    def named_barrier(self, id: ExprLike, count: ExprLike) -> "NamedBarrier":
        """CUTLASS `NamedBarrier(count, id)`: hardware barrier `id` (0..15) of the block, whose
        phases complete when `count` threads (whole warps) have arrived."""
        loc, _ = _caller()
        return NamedBarrier(self, _int_expr(id, loc, "named barrier id"),
                            _int_expr(count, loc, "thread count"))

    def syncthreads(self) -> None:
        """`__syncthreads()` / `bar.sync 0`: every thread of the block, at one instruction."""
        loc, _ = _caller()
        self._stack[-1].append(Op(K.BAR_SYNC, None, count=Const(0), bar_id=Const(0),
                                  name="syncthreads", loc=loc))

    def cluster_arrive(self, relaxed: bool = False) -> None:
        """`barrier.cluster.arrive`: this thread reached the cluster barrier. Its default
        .release semantics publish the thread's earlier writes (an mbarrier init included) to
        the threads that then pass cluster_wait; `relaxed=True` (`.relaxed`, CUTLASS
        `cluster_arrive_relaxed`) does not, so an init needs `fence_mbarrier_init` first."""
        loc, _ = _caller()
        self._stack[-1].append(Op(K.CLUSTER_ARRIVE, None, name="relaxed" if relaxed else "",
                                  loc=loc))

    def cluster_wait(self) -> None:
        """`barrier.cluster.wait`: until every thread of every block of the cluster arrived."""
        loc, _ = _caller()
        self._stack[-1].append(Op(K.CLUSTER_WAIT, None, loc=loc))

    def cluster_sync(self) -> None:
        """CUTLASS `cute::cluster_sync()`: cluster_arrive then cluster_wait."""
        loc, _ = _caller()
        self._stack[-1].append(Op(K.CLUSTER_ARRIVE, None, loc=loc))
        self._stack[-1].append(Op(K.CLUSTER_WAIT, None, loc=loc))

    # PTX-level mbarrier initialisation (barriers declared with explicit_init=True).
    def mbarrier_init(self, barrier) -> None:
        """`mbarrier.init`: this thread initialises one instance (its count is the barrier's
        num_arrivals). Until a CTA sync (syncthreads, a named barrier, the cluster barrier) in
        which this thread arrives after the init, no other thread may use it; remote blocks
        need `fence_mbarrier_init` before the cluster barrier, the async proxy a fence."""
        self._op(K.MBARRIER_INIT, barrier)

    def fence_mbarrier_init(self) -> None:
        """`fence.mbarrier_init.release.cluster` (CUTLASS `fence_barrier_init`): the inits
        this thread sees are released to the cluster (for the next cluster barrier) and made
        visible to the async proxy."""
        loc, _ = _caller()
        self._stack[-1].append(Op(K.FENCE_MBARRIER_INIT, None, loc=loc))

    def fence_proxy_async(self) -> None:
        """`fence.proxy.async.shared::cta` (CUTLASS `fence_view_async_shared`): the inits this
        thread sees become visible to the async proxy (TMA landings, tcgen05 commits)."""
        loc, _ = _caller()
        self._stack[-1].append(Op(K.FENCE_PROXY_ASYNC, None, loc=loc))

    def unmodeled(self, name: str) -> None:
        """Synchronization outside the model (kept so the verdict says so)."""
        loc, _ = _caller()
        self._stack[-1].append(Op(K.UNMODELED, None, name=name, loc=loc))

    def build(self, expect: str | None, symbolic: Sequence[str]) -> Kernel:
        if len(self._stack) != 1:
            raise ModelError("a `with` block of the protocol was not closed", loc=self.loc)
        if not self._threads_called and self._uses_thread_index():
            raise ModelError(f"{self.name} branches on k.thread but never says how many threads "
                             "it has", loc=self.loc, hint="call k.threads(n, name=...) first")
        self._check_names()
        params = dict(self.params)
        for name in symbolic:
            if name not in params:
                raise ModelError(f"symbolic parameter {name!r} is not a parameter of {self.name}",
                                 loc=self.loc)
            params[name] = Param(name, params[name].default, True)
        return Kernel(
            name=self.name, body=tuple(self._stack[0]), barriers=tuple(self._barriers),
            buffers=tuple(self._buffers),
            params=params, num_threads=self._num_threads, thread_axis=self._thread_axis,
            num_warps=self._num_warps, warp_axis=self._warp_axis, cluster=tuple(self._cluster),
            grid=tuple(self._grid), assumptions=tuple(self._assumptions), loc=self.loc,
            source="dsl", expect=expect)


    def _check_names(self) -> None:
        """One scope for every name the interpreter binds (model/scope.py)."""
        scope = Scope(self.name)
        for pname in self.params:
            scope.declare(pname, "parameter", self.loc)
        scope.declare(self._thread_axis, "thread axis", self._axis_locs.get("thread"))
        if "warp" not in self._axis_locs and not self._warp_axis_used:
            self._warp_axis = _fresh(self._warp_axis, _names_in(self, scope))
        scope.declare(self._warp_axis, "warp axis", self._axis_locs.get("warp"))
        scope.declare(LANE, "lane index (k.lane)", None)
        for axis, _ in self._cluster:
            scope.declare(axis, "cluster axis", self._axis_locs.get("cluster"))
        for axis, _ in self._grid:
            scope.declare(axis, "grid axis", self._axis_locs.get("grid"))
        scope.check_loops(self._stack[0])


def _names_in(builder: "KernelBuilder", scope: Scope) -> set[str]:
    """Every name a protocol binds: its scope so far, its axes, its loop variables."""
    names = set(scope.names) | {LANE} | {a for a, _ in builder._cluster} | {
        a for a, _ in builder._grid}

    def walk(body) -> None:
        for stmt in body:
            if isinstance(stmt, Loop):
                names.add(stmt.var)
                walk(stmt.body)
            elif isinstance(stmt, When):
                walk(stmt.then)
                walk(stmt.orelse)
            elif isinstance(stmt, WarpRegion):
                walk(stmt.body)
    walk(builder._stack[0])
    return names


def _fresh(name: str, taken: set[str]) -> str:
    """`name`, or `name_axis`, `name_axis2`, ... : the first not in `taken`."""
    candidates = [name, f"{name}_axis"] + [f"{name}_axis{n}" for n in range(2, len(taken) + 3)]
    return next(c for c in candidates if c not in taken)


class NamedBarrier:
    """What `k.named_barrier(id, count)` returns; mirrors CUTLASS's NamedBarrier."""

    def __init__(self, kernel: KernelBuilder, bar_id: Expr, count: Expr):
        self.kernel = kernel
        self.bar_id = bar_id
        self.count = count

    def _op(self, kind: str, aligned: bool = True) -> None:
        loc, _ = _caller()
        self.kernel._stack[-1].append(Op(kind, None, count=self.count, bar_id=self.bar_id,
                                         aligned=aligned, loc=loc))

    def sync(self, aligned: bool = True) -> None:
        """`bar.sync id, count` (arrive, then wait for the phase); `aligned=False` is the
        unaligned `barrier.sync`, which participants may reach from different branches."""
        self._op(K.BAR_SYNC, aligned)

    arrive_and_wait = sync

    def arrive(self) -> None:
        """`bar.arrive id, count`: arrive without waiting."""
        self._op(K.BAR_ARRIVE)

    def __repr__(self) -> str:
        return f"<NamedBarrier {self.bar_id!r}, {self.count!r} threads>"


class Protocol:
    """A protocol function and how to build its IR."""

    def __init__(self, fn: Callable, expect: str | None, symbolic: Sequence[str], name: str,
                 ignore: Sequence[str] = ()):
        self.fn = fn
        self.expect = expect
        self.symbolic = tuple(symbolic)
        self.name = name
        self.ignore = check_ignore(ignore, fn)
        self.loc = def_loc(fn)
        self.params: dict[str, Param] = integer_params(fn, name)

    def build(self) -> Kernel:
        builder = KernelBuilder(self.name, self.loc, self.params)
        self.fn(builder, **{p: Var(p) for p in self.params})
        return builder.build(self.expect, self.symbolic)

    def __repr__(self) -> str:
        return f"<protocol {self.name}>"


def protocol(fn: Callable | None = None, *, expect: str | None = None,
             symbolic: Sequence[str] = (), name: str | None = None,
             ignore: Sequence[str] = ()):
    """Declare a protocol. `expect` is the verdict an example must get ("verified",
    "violation:BP100", ...); `symbolic` names the parameters `prove` quantifies over; `ignore`
    the codes this protocol suppresses (each suppressed finding is still reported)."""

    def wrap(f: Callable) -> Protocol:
        if not callable(f) or not hasattr(f, "__code__"):
            loc, _ = _caller()
            raise ModelError(f"@protocol decorates a function, not {type(f).__name__}", loc=loc,
                             hint="def my_protocol(k, ...): ... under @protocol")
        if name is not None:
            check_name(name, f)
        if expect is not None:
            check_expect(expect, f)
        return Protocol(f, expect, symbolic, name or f.__name__, ignore)

    return wrap(fn) if fn is not None else wrap
