"""The jaxpr Translator: one Pallas kernel body (an `mpmd_map`) to an IR `Kernel`.

`Translator.jaxpr` is JAX's `eval_jaxpr` loop with integers evaluated symbolically: axis indices
become `Var`s, index arithmetic `Expr`s (arith.py), `cond` becomes `When`, `scan`/`while` become
`Loop`s (loops.py), and each synchronizing primitive goes to its handler (handlers.py). RULES is
the one dispatch table from primitive name to handler; primitives.py says which of the rest
synchronize.

Values that come from memory (a ragged group size, a cluster-cancel response) are *data*: they are
tracked as opaque variables (`?name`), so a branch or trip count that depends on them becomes a
stated parameter with a default, and a barrier index that depends on them is an error. What such
control guards with no barrier inside is taken as always happening, or BP190 (data_control.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..expr import (OPAQUE_PREFIX, RANGES, is_bool, mk, mk_not, mk_select, opaque, opaque_vars,
                    opaques)
from ..ir import (BarrierAlloc, Const, Expr, Kernel, Loc, ModelError, Op, Param, UNKNOWN_LOC,
                  Var, WarpRegion, When, as_expr, unique_name)
from .arith import _ARITH, _integral
from .handlers import SyncHandlers
from .data_control import (counted_site, exclusive_site, issued_groups, overlapping_arms,
                           retired_groups, retiring_site, settle)
from .memory import MemoryHandlers, slots_by_use, whole_where_data_dependent
from ..proxy_fence import check_commits, maybe
from .locations import _loc_from_tracebacks
from .loops import LoopRules
from .readback import ReadbackRules
from .scopes import ScopeRules, ScopeStack
from .primitives import (INLINE_PARAMS, LOCAL, MODELED, UNMODELED, _FLOOR_OPS, _has_sync,
                         _is_fence, _pallas_primitives, bar_operation)
from .values import BarrierVal, Cell, MemRef, _clean_name, _Frame
from .. import primitives as K


class Translator(LoopRules, SyncHandlers, MemoryHandlers, ReadbackRules, ScopeRules):
    """Translates one `mpmd_map` body (one Pallas kernel) into an IR `Kernel`."""

    def __init__(self, mesh, name: str, loc: Loc, expect: str | None = None,
                 devices: Mapping | None = None):
        self.name = name
        self.loc = loc
        self.expect = expect
        self.mesh = mesh
        self.axis_names: dict[Any, str] = {}
        self.axis_sizes: dict[str, int] = {}
        self.grid = []
        # Devices of an enclosing shard_map run independent copies of the kernel: to the
        # barriers of one block they are like more grid axes.
        for n, s in (devices or {}).items():
            self.grid.append((self._axis(n), Const(int(s))))
        for n, s in zip(mesh.grid_names, mesh.grid):
            self.grid.append((self._axis(n), Const(int(s))))
        self.grid_sizes = [int(s) for s in mesh.grid]     # clusters per device
        self.cluster = []
        for n, s in zip(mesh.cluster_names, mesh.cluster):
            self.cluster.append((self._axis(n), Const(int(s))))
        for a, s in self.grid + self.cluster:
            self.axis_sizes[a] = s.value
        self.num_threads = int(mesh.num_threads) if mesh.num_threads is not None else 1
        self.thread_axis = (self._axis(mesh.thread_name) if mesh.thread_name is not None
                            else "thread")
        self.axis_sizes[self.thread_axis] = self.num_threads
        self.warp_axis = "warp"
        self.barriers: list[BarrierAlloc] = []
        self.buffers: list = []          # SMEM / TMEM, for races (memory.py)
        self.params: dict[str, Param] = {}
        self.notes: list[str] = []
        self.collective_tmem = False    # Mosaic GPU then ends the kernel with a cluster sync
        self.scopes = ScopeStack()      # scoped SMEM as Mosaic GPU stacks it (scopes.py)
        self._emitted = False           # an op was translated (a scope barrier then orders it)
        self._names: set[str] = set(self.axis_sizes) | {self.warp_axis}
        self._counter = itertools.count()
        self.origins: dict[str, tuple] = {}        # opaque var -> (primitive, frame)
        self._at: _Frame | None = None             # the equation being translated
        self._lifted: dict[str, str] = {}          # repr of a data term -> its parameter
        self._data_terms: dict[str, tuple] = {}    # parameter -> (loc, what, its sources)
        self._always: dict[str, tuple] = {}    # as-if-always marker -> (groups, note)
        self._readback_init()

    def _at_primitive(self) -> str:
        return getattr(self, "_at_name", None) or "an equation"

    # -- names -------------------------------------------------------------------------------

    def _axis(self, name) -> str:
        if name not in self.axis_names:
            text = name if isinstance(name, str) else f"axis{len(self.axis_names)}"
            self.axis_names[name] = text
        return self.axis_names[name]

    def _fresh(self, base: str) -> str:
        base = re.sub(r"\W+", "_", base).strip("_") or "v"
        if base[0].isdigit():
            base = "_" + base
        return unique_name(base, self._names)

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _as_if_always(self, arms: Sequence[tuple], loc: Loc, what: str) -> tuple:
        """Memory effects under data-dependent control (each arm of a branch, or a loop), taken
        as always happening one after the other, after the BP190 marker of whatever makes that
        unsound (data_control.py); each arm bracketed for the fence check (proxy_fence.py)."""
        body = tuple(op for arm in arms for op in maybe(tuple(arm), loc))
        if retired_groups(body):
            return (retiring_site(loc, what, body),) + body
        shared = overlapping_arms([arm for arm in arms if arm])
        if shared is not None:
            return (exclusive_site(loc, shared),) + body
        note = (f"{loc}: the memory effects of this {what}, which depends on data, are "
                "checked as if it always happens (no wait inside; no counted wait keeps what "
                "it issues in flight)")
        groups = issued_groups(body)
        if not groups:
            self._note(note)
            return body
        marker = counted_site(loc, what, groups)
        self._always[marker.name] = (groups, note)      # noted if `settle` removes the marker
        return (marker,) + body

    # -- the kernel --------------------------------------------------------------------------

    def kernel(self, jaxpr, consts: Sequence = (), tracebacks: tuple = ()) -> Kernel:
        env: dict = {}
        for v, c in zip(jaxpr.constvars, consts):
            env[v] = self._const_value(c)
        for v in jaxpr.invars:
            env[v] = self._mem_alloc(self._ref_value(v, None), None, _Frame(tracebacks))
        saved = dict(RANGES)
        RANGES.clear()
        RANGES.update({a: (0, n - 1) for a, n in self.axis_sizes.items()})
        try:
            body, kept = settle(self.settle_readbacks(self.jaxpr(jaxpr, env, _Frame(tracebacks))),
                                {name: g for name, (g, _) in self._always.items()})
            for name in kept:
                self._note(self._always[name][1])
            body, self.buffers = slots_by_use(whole_where_data_dependent(
                check_commits(body)), self.buffers)
            body = self._data_axes(self._lift_stmts(body))
        finally:
            RANGES.clear()
            RANGES.update(saved)
        if self.collective_tmem and self.cluster:
            body = body + self._collective_tmem_teardown()
        return Kernel(
            name=self.name, body=body, barriers=tuple(self.barriers),
            buffers=tuple(self.buffers), params=self.params,
            num_threads=Const(self.num_threads), thread_axis=self.thread_axis,
            warp_axis=self.warp_axis, cluster=tuple(self.cluster), grid=tuple(self.grid),
            loc=self.loc, source="pallas", expect=self.expect, notes=tuple(self.notes))

    # -- values ------------------------------------------------------------------------------

    @staticmethod
    def _const_value(c) -> Any:
        import numpy as np
        try:
            arr = np.asarray(c)
        except Exception:
            return opaque("const")
        if arr.shape == () and (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
            return Const(int(arr))
        return opaque("const")

    def _ref_value(self, var, name: str | None) -> Any:
        aval = var.aval
        inner = getattr(aval, "inner_aval", None)
        if inner is None:
            if getattr(aval, "shape", None) == ():
                return opaque("arg")
            return opaque("array")
        space = str(getattr(aval, "memory_space", ""))
        dtype = inner.dtype
        return MemRef(tuple(inner.shape), dtype, space)

    def read(self, env: dict, atom) -> Any:
        from jax._src import core as jcore
        if isinstance(atom, jcore.Literal):
            return self._const_value(atom.val)
        try:
            return env[atom]
        except KeyError:
            return opaque("unbound")

    def _int(self, value) -> Expr:
        return value if isinstance(value, Expr) else opaque("data")

    # -- equations ---------------------------------------------------------------------------

    def jaxpr(self, jaxpr, env: dict, frame: _Frame) -> tuple:
        """Translate the equations of a jaxpr whose inputs are already bound in `env`."""
        out: list = []
        for eqn in jaxpr.eqns:
            sub = dataclasses.replace(frame, tracebacks=(eqn.source_info.traceback,)
                                      + frame.tracebacks)
            name = eqn.primitive.name
            self._at, self._at_name = sub, name
            rule = _RULES.get(name)
            if rule is not None:
                results = rule(self, eqn, env, sub, out)
            elif name in UNMODELED:
                results = self._unmodeled(eqn, env, sub, out)
            elif self._sub_jaxprs(eqn):
                results = self._higher_order(eqn, env, sub, out)
            elif name not in LOCAL and name not in _ARITH and name in _pallas_primitives():
                # a Pallas GPU primitive this frontend does not know: it may synchronize
                results = self._unmodeled(eqn, env, sub, out)
            else:
                results = self._compute(eqn, env)
            self._emitted = self._emitted or bool(out)
            if not eqn.primitive.multiple_results:
                results = [results]
            for v, r in zip(eqn.outvars, results or [None] * len(eqn.outvars)):
                value = r if r is not None else opaque("data")
                env[v] = value
                if isinstance(value, Var) and value.name.startswith(OPAQUE_PREFIX):
                    self.origins.setdefault(value.name, (name, sub))
        return tuple(out)

    def where(self, frame: _Frame) -> Loc:
        return _loc_from_tracebacks(frame.tracebacks)

    @staticmethod
    def _sub_jaxprs(eqn) -> list:
        from jax._src import core as jcore
        found = []
        for v in eqn.params.values():
            for s in (v if isinstance(v, (tuple, list)) else [v]):
                if isinstance(s, jcore.ClosedJaxpr):
                    found.append((s.jaxpr, s.consts))
                elif isinstance(s, jcore.Jaxpr):
                    found.append((s, ()))
        return found

    def _compute(self, eqn, env) -> Any:
        """A primitive that only computes: integers symbolically, everything else is data."""
        fn = _ARITH.get(eqn.primitive.name)
        scalar_out = all(getattr(v.aval, "shape", None) == () for v in eqn.outvars)
        if fn is None or not scalar_out:
            outs = opaques(eqn.primitive.name, len(eqn.outvars))
            return outs if eqn.primitive.multiple_results else outs[0]
        args = [self.read(env, a) for a in eqn.invars]
        if any(not isinstance(a, Expr) for a in args):
            return opaque(eqn.primitive.name)
        out_dtype = getattr(eqn.outvars[0].aval, "dtype", None)
        if out_dtype is not None and not _integral(out_dtype):
            return opaque("float")
        in_dtypes = [getattr(getattr(a, "aval", None), "dtype", None) for a in eqn.invars]
        return fn(eqn, args, in_dtypes)

    def _inline(self, jaxpr, consts, args, frame, out) -> list:
        """Translate a sub-jaxpr called with `args`; its statements go to `out`. Constants may
        be given separately or as the leading arguments (loop bodies)."""
        n = len(jaxpr.constvars)
        if n and not consts and len(args) == n + len(jaxpr.invars):
            consts, args = args[:n], args[n:]
        env: dict = {}
        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c if isinstance(c, (Expr, BarrierVal, MemRef, Cell)) \
                else self._const_value(c)
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        out.extend(self.jaxpr(jaxpr, env, frame))
        return [self.read(env, v) for v in jaxpr.outvars]

    def _higher_order(self, eqn, env, frame, out) -> Any:
        """Call-like wrappers (jit, custom_vjp_call, remat, ...) are inlined; anything else
        with synchronization inside is unmodeled."""
        subs = self._sub_jaxprs(eqn)
        args = [self.read(env, a) for a in eqn.invars]
        floor_op = _FLOOR_OPS.get(str(eqn.params.get("name")))
        if floor_op and len(args) == 2 and len(eqn.outvars) == 1 \
                and all(isinstance(a, Expr) for a in args) \
                and isinstance(args[1], Const) and args[1].value != 0 \
                and _integral(getattr(eqn.outvars[0].aval, "dtype", None)):
            # jnp's `%` and `//` on integers round toward -inf, like the IR's: keep them whole
            # instead of inlining their C-division-with-sign-fix expansion
            return [mk(floor_op, args[0], args[1])]
        for key in INLINE_PARAMS:
            if key in eqn.params:
                from jax._src import core as jcore
                p = eqn.params[key]
                if isinstance(p, jcore.ClosedJaxpr):
                    j, c = p.jaxpr, p.consts
                elif isinstance(p, jcore.Jaxpr):
                    j, c = p, ()
                else:
                    continue
                if len(j.invars) == len(args) and len(j.outvars) == len(eqn.outvars):
                    return self._inline(j, c, args, frame, out)
        if eqn.primitive.name == "shard_map" and len(subs) == 1:
            j, c = subs[0]
            if len(j.invars) == len(args):
                return self._inline(j, c, args, frame, out)
        if any(_has_sync(j) for j, _ in subs) or self._models_anything(subs, args, frame):
            return self._unmodeled(eqn, env, frame, out)
        return opaques(eqn.primitive.name, len(eqn.outvars))

    def _models_anything(self, subs, args, frame) -> bool:
        """Would the sub-jaxprs of a construct the frontend cannot read give the model an op
        (a store, a TMA copy, a WGMMA)? Then the construct is unmodelled (BP190), as a
        data-dependent `cond` with ops is kept (`_cond`): what it does is never dropped. A
        buffer or barrier handed to sub-jaxprs whose operands are not the equation's counts as
        used. The trial translation leaves no allocation, parameter or note behind."""
        def takes_args(j) -> bool:        # the operands, maybe after the constants (`_inline`)
            return len(args) in (len(j.invars), len(j.invars) + len(j.constvars))
        tracked = any(isinstance(a, BarrierVal) or isinstance(a, MemRef) and a.alloc is not None
                      for a in args)
        if tracked and not all(takes_args(j) for j, _ in subs):
            return True
        saved = list(self.barriers), list(self.buffers), dict(self.params), list(self.notes)
        inner = dataclasses.replace(frame, control=frame.control + 1)
        body: list = []
        try:
            for j, c in subs:
                self._inline(j, c, args if takes_args(j) else [], inner, body)
        except ModelError:          # something inside was read, and it cannot be modelled
            return True
        finally:
            self.barriers[:], self.buffers[:], self.notes[:] = saved[0], saved[1], saved[3]
            self.params.clear()
            self.params.update(saved[2])
        return bool(body)

    def _unmodeled(self, eqn, env, frame, out) -> Any:
        name = eqn.primitive.name
        if name == "inline_mgpu_p" and _is_fence(eqn):
            return opaques("inline", len(eqn.outvars))
        if name == "inline_mgpu_p" and (bar := bar_operation(eqn)) is not None:
            op = self._named_barrier(eqn, env, frame, *bar)
            if op is not None:
                out.append(op)
                return opaques("inline", len(eqn.outvars))
        if name == "pallas_call":
            raise ModelError("a pallas_call inside a Mosaic GPU kernel is not supported",
                             loc=self.where(frame),
                             hint="write the kernel with plgpu.kernel")
        out.append(Op(K.UNMODELED, name=name, loc=self.where(frame)))   # BP190, statically
        return opaques(name, len(eqn.outvars))

    def _named_barrier(self, eqn, env, frame, operation, bar_id, count, aligned) -> Op | None:
        """A named barrier from inline PTX; a Pallas thread arrives as a warpgroup."""
        if bar_id == "warpgroup":       # Mosaic GPU: one named barrier per warpgroup, id wg + 1
            bar_id = Var(self.thread_axis) + 1
        elif bar_id == "operand":
            bar_id = self.read(env, eqn.invars[0])
            if not isinstance(bar_id, Expr):
                return None
        kind = "bar_sync" if operation == "sync" else "bar_arrive"
        return Op(kind, None, count=Const(count), bar_id=as_expr(bar_id), aligned=aligned,
                  loc=self.where(frame))

    # -- structure ---------------------------------------------------------------------------

    def _run_scoped(self, eqn, env, frame, out):
        jaxpr = eqn.params["jaxpr"]
        names = list(getattr(jaxpr.debug_info, "arg_names", None) or [])
        collective = eqn.params.get("collective_axes") or ()
        args = [self.read(env, a) for a in eqn.invars]
        sub_env: dict = {}
        if len(jaxpr.constvars) == len(args):       # operands are the body's constvars
            for v, a in zip(jaxpr.constvars, args):
                sub_env[v] = a
            allocs = jaxpr.invars
        else:
            for v, a in zip(jaxpr.invars[:len(args)], args):
                sub_env[v] = a
            allocs = jaxpr.invars[len(args):]
        alloc_names = names[len(names) - len(allocs):] if len(names) >= len(allocs) else []
        transforms = eqn.params.get("ref_transforms") or ((),) * len(allocs)
        self._scope_barrier(collective, frame, out)
        mark, placed = self.scopes.top, []
        for i, v in enumerate(allocs):
            pname = alloc_names[i] if i < len(alloc_names) else None
            smem = self._scoped_smem(v, pname, transforms[i] if i < len(transforms) else (),
                                     frame, out, placed)
            sub_env[v] = (smem if smem is not None
                          else self._allocate(v, pname, collective, frame))
        body = self.jaxpr(jaxpr, sub_env, frame)
        out.extend(body)
        self.scopes.leave(mark, placed)
        return [self.read(sub_env, v) for v in jaxpr.outvars]

    def _collective_tmem_teardown(self) -> tuple:
        """Mosaic GPU ends a kernel that allocates collective TMEM with a block barrier and a
        cluster barrier in every thread (no block releases TMEM while its peer still uses it):
        they also keep every block alive until its peers are done (BP146)."""
        loc = self.loc
        self._note(f"{loc}: collective TMEM: the kernel ends with Mosaic GPU's block and "
                   "cluster barriers")
        return (Op(K.BAR_SYNC, None, count=Const(0), bar_id=Const(0), name="syncthreads",
                   loc=loc),
                Op(K.CLUSTER_ARRIVE, None, loc=loc), Op(K.CLUSTER_WAIT, None, loc=loc))

    def _allocate(self, var, pname, collective, frame) -> Any:
        aval = var.aval
        if type(aval).__name__ == "AbstractTMEMRef" and getattr(aval, "collective", False):
            self.collective_tmem = True
        inner = getattr(aval, "inner_aval", None)
        dtype = getattr(inner, "dtype", None)
        kind = type(dtype).__name__
        if kind == "Semaphore" and tuple(getattr(inner, "shape", ())) in ((), (1,)):
            return self._semaphore(pname, frame)        # a scratch semaphore, in GMEM
        if kind not in ("BarrierType", "ClusterBarrierType"):
            return self._mem_alloc(self._ref_value(var, pname), pname, frame)
        loc = self.where(frame)
        shape = tuple(int(n) for n in inner.shape)
        name = self._fresh(_clean_name(pname) if pname else "barrier")
        prefix: tuple[Expr, ...] = ()
        if self.num_threads > 1 and self.thread_axis not in [
                self.axis_names.get(a, a) for a in collective]:
            # each thread allocates its own barriers (e.g. emit_pipeline inside pl.when(wg==0))
            prefix = (Var(self.thread_axis),)
            self._note(f"{loc}: `{name}` is allocated by each thread separately; modelled as "
                       f"`{name}[{self.thread_axis}, ...]`")
        if frame.loop_depth:
            self._note(f"{loc}: `{name}` is allocated inside a loop; it is modelled as one "
                       "allocation for the whole kernel (its state carries across iterations)")
        cluster = kind == "ClusterBarrierType"
        leader = False
        axes: tuple[str, ...] = ()
        if cluster:
            flat = []
            for a in dtype.collective_axes:
                flat.extend(a if isinstance(a, tuple) else (a,))
            axes = tuple(self._axis(a) for a in flat)
            leader = bool(getattr(dtype, "leader_tracked", False))
            if leader and len(axes) != 1:
                raise ModelError(f"leader_tracked ClusterBarrier `{name}` has {len(axes)} "
                                 "collective axes; Mosaic GPU supports exactly one", loc=loc)
        full = ((self.num_threads,) if prefix else ()) + shape
        alloc = BarrierAlloc(
            name=name, num_arrivals=Const(int(dtype.num_arrivals)),
            shape=tuple(Const(n) for n in full),
            orders_tensor_core=bool(dtype.orders_tensor_core), cluster=cluster,
            collective_axes=axes, loc=loc, scalar=full == (1,),
            leader_tracked=cluster and leader)
        self.barriers.append(alloc)
        return BarrierVal(alloc, prefix)

    def _cond(self, eqn, env, frame, out):
        branches = eqn.params["branches"]
        idx = self.read(env, eqn.invars[0])
        args = [self.read(env, a) for a in eqn.invars[1:]]
        idx = self._int(idx)
        loc = self.where(frame)
        if isinstance(idx, Const):
            k = max(0, min(idx.value, len(branches) - 1))
            return self._inline(branches[k].jaxpr, branches[k].consts, args, frame, out)
        inner = dataclasses.replace(frame, control=frame.control + 1)
        if opaque_vars(idx) and not any(_has_sync(b.jaxpr) for b in branches):
            # No barrier in any arm: every arm's memory effects, one after the other, rather
            # than an axis of data values to explore (data_control.py says when that is sound)
            arms = []
            for b in branches:
                arm: list = []
                self._inline(b.jaxpr, b.consts, args, inner, arm)
                arms.append(tuple(arm))
            if any(arms):
                out.extend(self._as_if_always(arms, loc, "branch"))
            return opaques("cond", len(eqn.outvars))
        bodies, results = [], []
        for b in branches:
            body: list = []
            results.append(self._inline(b.jaxpr, b.consts, args, inner, body))
            bodies.append(tuple(body))
        stmt = _switch(idx, bodies, loc)
        out.extend(stmt)
        outs = []
        for j in range(len(eqn.outvars)):
            vals = [r[j] for r in results]
            if all(isinstance(v, Expr) for v in vals):
                outs.append(mk_select(idx, vals))
            elif all(v is vals[0] for v in vals):
                outs.append(vals[0])
            else:
                outs.append(opaque("cond"))
        return outs

    def _run_state(self, eqn, env, frame, out):
        """`pl.run_state(f)(*values)`: f sees each value as a Ref; scalars become Cells."""
        jaxpr = eqn.params["jaxpr"]
        args = []
        for a in eqn.invars:
            v = self.read(env, a)
            args.append(Cell(v, frame.control) if isinstance(v, Expr) else v)
        self._inline(jaxpr, (), args, frame, out)
        # Its lowering waits for every WGMMA before it hands the accumulators back.
        self._mem_op(K.WGMMA_WAIT, frame, out, count=Const(0))
        return [a.value if isinstance(a, Cell) else a for a in args]

    def _get(self, eqn, env, frame, out):
        ref = self.read(env, eqn.invars[0])
        if isinstance(ref, Cell) and len(eqn.invars) == 1:
            return ref.value
        self._mem_get(eqn, env, frame, out)
        return opaque("load")

    def _swap(self, eqn, env, frame, out):
        ref = self.read(env, eqn.invars[0])
        if isinstance(ref, Cell) and len(eqn.invars) == 2:
            old = ref.value
            new = self.read(env, eqn.invars[1])
            ref.value = new if isinstance(new, Expr) and frame.control == ref.control \
                else opaque("store")
            return old
        self._mem_swap(eqn, env, frame, out)
        return opaque("load")

    def _core_map(self, eqn, env, frame, out):
        mesh = eqn.params["mesh"]
        if type(mesh).__name__ != "WarpMesh":
            raise ModelError(f"core_map over {type(mesh).__name__} inside a kernel is not "
                             "supported", loc=self.where(frame))
        axis = self._axis(mesh.axis_name)
        if not isinstance(mesh.axis_name, str):
            self.axis_names[mesh.axis_name] = axis = self.warp_axis
        self.axis_sizes[axis] = 4
        jaxpr = eqn.params["jaxpr"]
        args = [self.read(env, a) for a in eqn.invars]
        body: list = []
        self._inline(jaxpr, (), args, frame, body)
        if body:
            out.append(WarpRegion(axis, tuple(body), self.where(frame)))
        return []

    def _axis_index(self, eqn, env, frame, out):
        names = eqn.params["axis_name"]
        names = names if isinstance(names, tuple) else (names,)
        total: Expr = Const(0)
        for n in names:
            axis = self._axis(n)
            if axis not in self.axis_sizes:
                raise ModelError(f"axis_index({n!r}) names an axis of no mesh",
                                 loc=self.where(frame))
            size = self.axis_sizes[axis]
            var: Expr = Var(axis) if size > 1 else Const(0)
            total = mk("+", mk("*", total, Const(size)), var)
        return total



def _switch(idx: Expr, bodies: list[tuple], loc: Loc) -> tuple:
    """`cond` as `When`s: branch 1 when idx is true for a two-way cond, else a chain."""
    if not any(bodies):
        return ()
    if len(bodies) == 2:
        if is_bool(idx):
            cond = idx
        else:
            cond = mk("!=", idx, Const(0))
        then, orelse = bodies[1], bodies[0]
        if not then:
            return (When(mk_not(cond), orelse, (), loc),)
        return (When(cond, then, orelse, loc),)
    rest: tuple = bodies[-1]
    for k in range(len(bodies) - 2, -1, -1):
        if bodies[k] or rest:
            rest = (When(mk("<=", idx, Const(k)), bodies[k], rest, loc),)
    return rest


def _optimization_barrier(tr: Translator, eqn, env, frame, out):
    return [tr.read(env, a) for a in eqn.invars]


# The dispatch table: primitive name -> handler(translator, eqn, env, frame, out) returning the
# equation's results. Structure first, then the modelled synchronization (one per MODELED name).
_RULES: dict[str, Callable] = {
    "run_scoped": Translator._run_scoped,
    "cond": Translator._cond,
    "scan": Translator._scan,
    "while": Translator._while,
    "core_map": Translator._core_map,
    "axis_index": Translator._axis_index,
    "optimization_barrier": _optimization_barrier,
    "run_state": Translator._run_state,
    "get": Translator._get,
    "swap": Translator._swap,
    # synchronization (handlers.py)
    "barrier_arrive": Translator._op_barrier_arrive,
    "barrier_wait": Translator._op_barrier_wait,
    "barrier_test": Translator._op_barrier_test,
    "copy_gmem_to_smem": Translator._op_copy_gmem_to_smem,
    "tcgen05_mma": Translator._op_tcgen05_mma,
    "tcgen05_commit_arrive": Translator._op_tcgen05_commit_arrive,
    "try_cluster_cancel": Translator._op_try_cluster_cancel,
    "async_store_smem": Translator._op_async_store_smem,
    # memory effects (memory.py)
    "copy_smem_to_gmem": Translator._op_copy_smem_to_gmem,
    "commit_smem": Translator._op_commit_smem,
    "wait_smem_to_gmem": Translator._op_wait_smem_to_gmem,
    "wait_gmem_to_smem": Translator._op_wait_gmem_to_smem,
    "wgmma_ref": Translator._op_wgmma_ref,
    "wgmma_wait": Translator._op_wgmma_wait,
    "wgmma_accumulator_deref_p": Translator._op_wgmma_accumulator_deref,
    # JAX names these two primitives after what they do, not after their plgpu functions
    "async_load": Translator._op_async_load_tmem,
    "load": Translator._op_load,
    "wait_load_tmem": Translator._op_wait_load_tmem,
    "async_store_tmem": Translator._op_async_store_tmem,
    "commit_tmem": Translator._op_commit_tmem,
    "get_global": Translator._op_get_global,
    "semaphore_signal": Translator._op_semaphore_signal,
    "semaphore_wait": Translator._op_semaphore_wait,
    "semaphore_signal_parallel": Translator._op_semaphore_signal_parallel,
    "semaphore_signal_multicast": Translator._op_semaphore_signal_multicast,
}
RULES = _RULES
assert MODELED <= set(_RULES), "every modelled primitive has a handler"




def _mesh_axes(mesh) -> dict:
    try:
        return {name: int(size) for name, size in dict(mesh.shape).items()}
    except Exception:
        return {}


def _find_kernels(jaxpr, consts, tracebacks=(), devices=None) -> Iterable[tuple]:
    """(mesh, body jaxpr, consts, name, tracebacks, device axes) for every Mosaic GPU kernel
    call; device axes are those of enclosing `shard_map`s (each device runs its own copy)."""
    from jax._src import core as jcore
    devices = dict(devices or {})
    for eqn in jaxpr.eqns:
        tbs = (eqn.source_info.traceback,) + tuple(tracebacks)
        name = eqn.primitive.name
        if name == "mpmd_map":
            meshes, bodies = eqn.params["meshes"], eqn.params["jaxprs"]
            for mesh, body in zip(meshes, bodies):
                j = body.jaxpr if isinstance(body, jcore.ClosedJaxpr) else body
                c = body.consts if isinstance(body, jcore.ClosedJaxpr) else ()
                yield mesh, j, c, str(eqn.params.get("name") or "kernel"), tbs, devices
            continue
        if name == "core_map" and type(eqn.params["mesh"]).__name__ == "Mesh":
            yield eqn.params["mesh"], eqn.params["jaxpr"], (), str(eqn.params.get("name")
                                                                  or "kernel"), tbs, devices
            continue
        inner = dict(devices)
        if name == "shard_map" and "mesh" in eqn.params:
            inner.update(_mesh_axes(eqn.params["mesh"]))
        if name == "pallas_call":
            raise ModelError("pallas_call with a grid is not supported by the Pallas frontend",
                             loc=_loc_from_tracebacks(tbs),
                             hint="write Mosaic GPU kernels with plgpu.kernel")
        for v in eqn.params.values():
            for s in (v if isinstance(v, (tuple, list)) else [v]):
                if isinstance(s, jcore.ClosedJaxpr):
                    yield from _find_kernels(s.jaxpr, s.consts, tbs, inner)
                elif isinstance(s, jcore.Jaxpr):
                    yield from _find_kernels(s, (), tbs, inner)


def kernels_from_jaxpr(closed, name: str, expect: str | None = None) -> list[Kernel]:
    """Every Mosaic GPU kernel called in a traced function, as IR kernels.

    The first kernel is called `name`; further ones `name#2.kernel_fn`, ... in call order.
    """
    found = list(_find_kernels(closed.jaxpr, closed.consts))
    kernels = []
    for n, (mesh, body, consts, kname, tbs, devices) in enumerate(found):
        label = name if n == 0 else f"{name}#{n + 1}.{kname}"
        loc = _loc_from_tracebacks(tbs)
        tr = Translator(mesh, label, loc, expect, devices)
        try:
            kernels.append(tr.kernel(body, consts, tbs))
        except ModelError:
            raise
        except Exception as exc:    # a construct this frontend mistranslates: never a traceback
            at = tr.where(tr._at) if tr._at is not None else loc
            text = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise ModelError(
                f"the Pallas frontend could not translate `{tr._at_primitive()}` here ({text})",
                loc=at if at != UNKNOWN_LOC else loc,
                hint="this is a barrierproof limitation, not a kernel bug: simplify the "
                     "construct or report it with this line") from exc
    return kernels


