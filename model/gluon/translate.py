"""TTGIR of one Gluon kernel to an IR `Kernel`.

The entry function is evaluated like a jaxpr: integers symbolically (kernel arguments become
parameters, `scf.for` induction variables loop variables, carried counters closed forms), shared
memory as allocations indexed by `ttg.memdesc_index`. `ttg.warp_specialize` makes each partition
a thread of the IR (`partition == 0` is the default partition, which also runs the code around
it), with its warp count in the notes. HANDLERS is the one table from TTGIR op to its rule;
LOCAL lists the ops that do not synchronize. Any other op, and any synchronizing op whose
operands the translator cannot follow, becomes an `unmodeled` op (BP190) at its source line.

Gluon's mbarrier operations are the PTX ones, issued once per partition: `barrier_expect` is
arrive.expect_tx (one arrival), `arrive_barrier` arrives `count` times, `wait_barrier` waits for
the phase of the given parity, a TMA load (or gather) only completes its bytes, and an MMA's
`mbarriers=` are tcgen05.commit arrivals issued right after it. An MMA without barriers is
synchronous: Triton commits it to a barrier of its own and waits (the thread's parity).
`tcgen05_copy` is a tcgen05 op like an MMA, in order with them on the tensor pipe.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
from typing import Any, Callable

from ..expr import mk, opaque, opaque_vars, same, stmt_vars
from ..inline_ptx import synchronizing_instruction
from ..proxy_fence import check_commits
from ..ir import (BarrierAlloc, BarrierRef, Const, Expr, Kernel, Loc, MemAlloc, MemRef,
                  ModelError, Op, Param, Var, When, free_vars, iter_ops, unique_name)
from .arith import ArithRules
from .cluster import ClusterRules
from .compile import arch_error
from .control import ControlRules
from .cp_async import COMMIT, COPY, WAIT, CpAsyncRules
from . import smem_views
from .memory import MemoryRules
from .two_cta import PairRules
from .ttgir import Module, Operation, split_operands
from .values import CARRY_PREFIX, _ELEM_BYTES, Alloc, Mem, Unread, _memdesc
from .. import primitives as K

# Ops that neither synchronize nor compute an integer the protocol depends on.
LOCAL = re.compile(r"^(math\.|arith\.(?!constant|addi|subi|muli|divsi|divui|remsi|remui|andi|"
                   r"ori|xori|cmpi|select|extsi|extui|trunci|index_cast|bitcast|minsi|maxsi|"
                   r"minui|maxui|shli|shrsi|shrui|ceildivsi|floordivsi)|ub\.poison|"
                   r"tt\.(splat|broadcast|expand_dims|make_range|addptr|load|store|reshape|trans|"
                   r"reduce|reduce\.return|scan|scan\.return|map_elementwise|"
                   r"map_elementwise\.return|extern_elementwise|unsplat|make_tensor_ptr|advance|"
                   r"dot|dot_scaled|fp_to_fp|bitcast|int_to_ptr|ptr_to_int|join|split|"
                   r"cat|histogram|gather|clampf|precise_sqrt|precise_divf|mulhiui|"
                   r"descriptor_load|descriptor_store|assert|print|return)$|"
                   r"ttg\.(convert_layout|local_dealloc|memdesc_trans|"
                   r"memdesc_reinterpret|memdesc_subslice|memdesc_reshape|warp_yield|"
                   r"warp_return|fp4_to_fp|upcast_mxfp)$|"
                   r"ttng\.(tmem_subslice|clc_get_program_id|"
                   r"reinterpret_tensor_descriptor|tensormap_create|tensormap_fenceproxy_acquire)$|"
                   r"scf\.yield$)")


def _rename_buffers(program: tuple, wider: dict[str, MemAlloc]) -> tuple:
    """Every access to a buffer named in `wider` names its new allocation (new shape or cells)."""
    from ..ir import map_ops
    if not wider:
        return program

    def rename(op: Op) -> Op:
        def refs(rs):
            return tuple(dataclasses.replace(r, alloc=wider[r.alloc.name])
                         if r.alloc.name in wider else r for r in rs)
        if not op.reads and not op.writes:
            return op
        return dataclasses.replace(op, reads=refs(op.reads), writes=refs(op.writes))
    return map_ops(program, rename)


class Translator(ArithRules, MemoryRules, ControlRules, ClusterRules, PairRules, CpAsyncRules):
    def __init__(self, module: Module, name: str, loc: Loc, expect: str | None, launch):
        self.module = module
        self.name = name
        self.loc = loc
        self.expect = expect
        self.launch = launch
        self.values: dict[str, Any] = {}
        self.barriers: dict[Alloc, BarrierAlloc] = {}
        self.invalidated: set[Alloc] = set()
        self.params: dict[str, Param] = {}
        self.assumptions: list[Expr] = []
        self.notes: list[str] = []
        self.assumed_ranges: list[tuple[str, int]] = []   # (carry, S) taken by inner loops
        self.buffers: dict[Alloc, MemAlloc] = {}   # SMEM / TMEM checked for races
        self.c_divisions: dict[str, tuple[Expr, Expr]] = {}   # see ArithRules._c_division
        # parameters fixed at their launch values by loops unrolled there (control.py), why
        self.pinned: list[tuple[set[str], str]] = []
        # barriers used, (array, constant index) or (array, None) for a computed index: an init
        # after that is not modelled (another barrier of the array may be initialised later)
        self.used: set[tuple[Alloc, str | None]] = set()
        self.sync_barriers: dict = {}        # synchronous MMA (its line) -> its own barrier
        self.cp_group: list = []             # cp.async copies not yet committed (cp_async.py)
        self.cp_conds: list[Expr] = []
        self.warps = launch.num_warps         # warps of the code being read (its partition)
        self.inited: set = set()
        self.loop_vars: list[str] = []
        self.loop_ranges: list[Expr] = []    # `0 <= j < trip` of the loops being read
        self.threads: list[tuple[str, int, list]] = []   # every partition of every region
        self.regions: list[tuple[list, list, list]] = []  # (code before, default, workers)
        self.current_thread = 0               # the partition being read, as a thread index
        self.cluster_syncs: list[Loc] = []   # ttng.cluster_barrier sites
        self.refused: dict[Alloc, str] = {}   # barriers whose layout is not modelled, why
        self.pair_barriers: set[str] = set()   # 2-CTA pair barriers, in the leader (two_cta.py)
        self._names: set[str] = set()
        self._ids = itertools.count()
        import triton
        self._triton_dir = os.path.dirname(triton.__file__) + os.sep

    # -- names and places --------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        base = re.sub(r"\W+", "_", base.lstrip("%")).strip("_") or "v"
        if base[0].isdigit():
            base = "v" + base
        return unique_name(base, self._names)

    def where(self, op: Operation | str) -> Loc:
        """The user's line: the innermost frame outside Triton's own library."""
        loc = op.loc if isinstance(op, Operation) else op
        frames = self.module.frames(loc)
        for file, line in frames:
            if not os.path.abspath(file).startswith(self._triton_dir):
                return Loc(file, line)
        return Loc(*frames[0]) if frames else self.loc

    def unmodeled(self, op: Operation, reason: str) -> Op:
        return Op(K.UNMODELED, name=f"{op.name}: {reason}", loc=self.where(op))

    def partition_barrier(self, op: Operation, out):
        """`gl.barrier()` (ttg.barrier: a bar.sync over the warps of its partition, of the whole
        CTA outside gl.warp_specialize): a partition is one agent of the model, its accesses
        already in program order, so the barrier orders nothing the model does not."""
        return None

    def cp_async_arrive(self, op: Operation, out):
        """`async_copy.mbarrier_arrive` (cp.async.mbarrier.arrive[.noinc]): each of the
        partition's num_warps x 32 threads arranges an arrive-on that fires once its own earlier
        cp.async copies, committed or not, are done.

        `.noinc` (increment_count=False): one `cp_async_arrive` per thread, each landing on its
        own (more arrivals than a phase's count spill into the next phase, as on hardware).
        The partition is one agent, so the first arrival takes all its copies in flight (those
        not yet committed become a group here: the arrival, not a commit, ends them); the
        landings are in any order, so some schedule keeps them written until the last lands.
        Alike landings share one counter (compile.py `_slot`): the states grow by the thread
        count, not exponentially.

        increment_count=True: each thread also raises the pending count at issue, lowered when
        its copies are done. The warps of a partition issue at different times, so one warp's
        arrivals may land, and the phase complete, before another warp has issued its copies;
        the agent's program order does not order the warps and the IR has no operation holding
        a phase open from issue to landing. BP190 at the line, never guessed."""
        if "noIncrement" not in op.text:
            self.cp_group.clear()   # its copies are the arrival's, not a commit's: one BP190
            raise Unread("each thread of the partition arrives once its own cp.async copies "
                         "are done: with increment_count=True each thread raises the pending "
                         "count at issue and lowers it once its copies are done; the warps of "
                         "the partition issue at different times (one warp's arrivals may "
                         "complete the phase before another warp issues its copies), which a "
                         "partition modelled as one agent cannot order")
        if not self.warps:
            self.cp_group.clear()
            raise Unread("the warp count of the partition cannot be read (one arrival per "
                         "thread)")
        bar = self.barrier(op.operands[0] if op.operands else "")
        if self.cp_group:
            self.async_commit(op, out)
        loc = self.where(op)
        out.extend(Op(K.CP_ASYNC_ARRIVE, bar, loc=loc) for _ in range(self.warps * 32))

    # -- values ------------------------------------------------------------------------------

    def value(self, name: str) -> Any:
        if name not in self.values:
            return opaque(name.lstrip("%"))
        return self.values[name]

    def int_value(self, name: str, what: str) -> Expr:
        v = self.value(name)
        if not isinstance(v, Expr):
            raise Unread(f"{what} `{name}` is not an integer")
        if opaque_vars(v):
            raise Unread(f"{what} depends on data the model does not track (`{name}`)")
        return v

    def barrier(self, name: str) -> BarrierRef:
        mem = self.value(name)
        if not isinstance(mem, Mem):
            raise Unread(f"`{name}` is not a barrier the translator can follow")
        alloc = mem.alloc
        if alloc in self.invalidated:
            raise Unread(f"barrier `{alloc.name}` is used after ttng.inval_barrier "
                         "(re-use of its memory is not modelled)")
        if alloc in self.refused:
            raise Unread(self.refused[alloc])
        bar = self.barriers.get(alloc)
        # one barrier of an array by its constant index; any other index stands for them all
        whole = any(not isinstance(i, Const) for i in mem.index)
        self.used.add((alloc, None if whole else repr(mem.index)))
        if bar is None:
            raise ModelError(f"barrier `{alloc.name}` is used before ttng.init_barrier",
                             loc=alloc.loc, hint="mbarrier.init every barrier before its use")
        index = tuple(mem.index)
        if any(opaque_vars(i) for i in index):
            raise Unread(f"the index of barrier `{alloc.name}` depends on data")
        if bar.scalar:
            index = ()
        elif len(index) != len(bar.shape):
            raise Unread(f"barrier `{alloc.name}` is used with {len(index)} of its "
                         f"{len(bar.shape)} indices")
        return BarrierRef(bar, index)

    def param(self, name: str, default: int | None, symbolic: bool = True) -> Var:
        var = self.fresh(name)
        self.params[var] = Param(var, default, symbolic)
        return Var(var)

    # -- the kernel --------------------------------------------------------------------------

    def kernel(self) -> Kernel:
        fn = self.module.entry()
        symbolic = self.launch.symbolic
        named: dict[str, Var] = {}
        for arg, ty in zip(fn.args, fn.arg_types):
            plain = arg.lstrip("%")
            if re.fullmatch(r"i(1|8|16|32|64)", ty):
                given = self.launch.args.get(plain)
                m = re.fullmatch(r"(\w+)\.(shape|stride)\.(\d+)", plain)
                if m and m.group(2) == "shape":          # a descriptor's global shape
                    desc = self.launch.args.get(m.group(1))
                    dims = getattr(desc, "shape", None)
                    given = dims[int(m.group(3))] if dims and int(m.group(3)) < len(dims) \
                        else None
                default = int(given) if isinstance(given, int) else None
                sym = symbolic is None or plain in symbolic
                self.values[arg] = self.param(plain, default, sym and default is not None)
                named[plain.replace(".", "_")] = self.values[arg]
            else:
                self.values[arg] = opaque(plain)
        self._assume(named)
        body = self.block(fn.body, top=True)
        body, cluster = self.cluster_shape(body, len(self.threads) + 1 if self.threads else 1)
        if not self.threads:
            threads = [("kernel", self.launch.num_warps, body)]
        else:
            threads = self._fork_join(body)
        threads = self.clc_agreement(threads)
        if len(threads) == 1:
            program = tuple(threads[0][2])
        else:
            program = tuple(When(Var("partition") == Const(k), tuple(stmts), (), self.loc)
                            for k, (_, _, stmts) in enumerate(threads))
            def role(k: int, label: str, warps: int, stmts) -> str:
                what = "the default partition" if label == "default" else \
                    f"worker {label.removeprefix('partition')}"
                first = next((op.loc for op in iter_ops(stmts) if op.loc.line), None)
                where = f", from {first}" if first is not None and label != "default" else ""
                return f"partition{k} = {what} ({warps} warp{'s' if warps != 1 else ''}{where})"
            self.notes.append("threads: " + "; ".join(
                role(k, *t) for k, t in enumerate(threads)))
        # the proxy fence: threads' stores an async read may see unfenced are BP190 there
        program = check_commits(program, "fence_async_shared()", concurrent=len(threads) > 1)
        program = self._granules(self._unsolved(self._pin(self._smem_bytes(
            self.restore_slots(program)))))
        used = stmt_vars(program)
        params = {n: p for n, p in self.params.items() if n in used}
        assumptions = tuple(a for a in self.assumptions if free_vars(a) <= set(params))
        return Kernel(
            name=self.name, body=program, barriers=tuple(self.barriers.values()),
            buffers=tuple(self.buffers.values()),
            params=params, num_threads=Const(len(threads)), thread_axis="partition",
            num_warps=self.launch.num_warps, cluster=cluster, assumptions=assumptions,
            loc=self.loc,
            source="gluon", expect=self.expect, notes=tuple(self.notes))

    def _assume(self, named: dict[str, Var]) -> None:
        """The launch's `assume`, over the parameters of the integer arguments it names."""
        fn = self.launch.assume
        if fn is None:
            return
        import inspect
        wanted = list(inspect.signature(fn).parameters)
        missing = [n for n in wanted if n not in named]
        if missing:
            raise ModelError(f"Launch(assume=...) names {', '.join(missing)}, not an integer "
                             f"argument of {self.name}",
                             loc=self.loc, hint=f"integer arguments: {', '.join(named) or 'none'}")
        result = fn(**{n: named[n] for n in wanted})
        for cond in result if isinstance(result, (list, tuple)) else [result]:
            if not isinstance(cond, Expr) or isinstance(cond, Const):
                raise ModelError(f"Launch(assume=...) returned {cond!r}, not a condition over "
                                 "the arguments", loc=self.loc,
                                 hint="e.g. assume=lambda K: K >= 64")
            self.assumptions.append(cond)

    def _pin(self, program: tuple) -> tuple:
        """Parameters a loop was unrolled at become their launch values everywhere."""
        if not self.pinned:
            return program
        from ..expr import substitute, substitute_stmts
        names = set().union(*(p for p, _ in self.pinned))
        env = {n: Const(self.params[n].default) for n in names}
        self.assumptions = [substitute(a, env) for a in self.assumptions]
        self.assumptions = [a for a in self.assumptions if not isinstance(a, Const)]
        for n in names:
            del self.params[n]
        values = ", ".join(f"{n} = {env[n].value}" for n in sorted(names))
        self.notes.append(f"checked at {values} only, not for every value: "
                          + "; ".join(why for _, why in self.pinned))
        return substitute_stmts(program, env)

    def _smem_bytes(self, program: tuple) -> tuple:
        """Shared-memory buffers accessed by windows of bytes get their bytes as a dimension."""
        wider = smem_views.widen(self.buffers, (r for op in iter_ops(program)
                                                for r in op.reads + op.writes))
        return _rename_buffers(program, wider)

    def _granules(self, program: tuple) -> tuple:
        """Tensor memory in cells as wide as the column slices the kernel names allow (one cell
        per slot for a tile only ever touched whole), so the columns cost no states or terms."""
        bounds = {b.name: [int(b.shape[1].value)] for b in self.buffers.values()
                  if b.space == "tmem"}
        for op in iter_ops(program):
            for ref in op.reads + op.writes:
                if ref.alloc.space == "tmem":
                    bounds[ref.alloc.name] += [int(e.value) for sl in ref.region
                                               for e in (sl.start, sl.size)]
        wider = {}
        for key, buf in list(self.buffers.items()):
            if buf.space == "tmem" and buf.name in bounds:
                g = math.gcd(*bounds[buf.name]) or 1
                wider[buf.name] = self.buffers[key] = dataclasses.replace(buf, granule=(1, g))
        return _rename_buffers(program, wider)

    def _unsolved(self, program: tuple) -> tuple:
        """An op still naming an opaque value (a carry with no closed form) is not modelled."""
        from ..ir import map_ops

        def untracked(e: Expr) -> bool:
            return bool(opaque_vars(e)) or any(v.startswith(CARRY_PREFIX) for v in free_vars(e))

        def whole(refs):     # a slot the model cannot follow: the access may be to any slot
            return tuple(MemRef(r.alloc, ()) if any(untracked(i) for i in r.index) else r
                         for r in refs)

        def check(op: Op):
            if op.reads or op.writes:
                op = dataclasses.replace(op, reads=whole(op.reads), writes=whole(op.writes))
            exprs = [op.count, op.bytes, op.parity, op.phase]
            if op.barrier is not None:
                exprs += list(op.barrier.index)
            if any(e is not None and (opaque_vars(e) or any(
                    v.startswith(CARRY_PREFIX) for v in free_vars(e))) for e in exprs):
                return Op(K.UNMODELED, name=f"{op.describe()}: depends on a value the model "
                          "does not track", loc=op.loc)
            return op
        return map_ops(program, check)

    # -- blocks ------------------------------------------------------------------------------

    def block(self, ops: list[Operation], top: bool = False, branch: bool = False) -> list:
        out: list = []
        pending = len(self.cp_group)
        for op in ops:
            before = len(out)
            handler = HANDLERS.get(op.name)
            wrong_arch = arch_error(op.name, self.launch.target) if self.launch else None
            if wrong_arch:
                raise ModelError(wrong_arch, loc=self.where(op),
                                 hint="launch it with a target that has it (cuda:90 Hopper, "
                                      "cuda:100 Blackwell)")
            try:
                if handler is not None:
                    results = handler(self, op, out)
                elif op.name == "ttg.warp_specialize" and top:
                    results = self.warp_specialize(op, out)
                elif LOCAL.match(op.name) and not any(self._syncs(r.ops) for r in op.regions):
                    results = None
                else:
                    out.append(self.unmodeled(op, "not modelled"))
                    results = None
            except Unread as why:
                out.append(self.unmodeled(op, str(why)))
                results = None
            self.cp_between(op, before, out)
            for k, r in enumerate(op.results):
                v = results[k] if results is not None and k < len(results) else None
                self.values[r] = v if v is not None else opaque(r.lstrip("%"))
        if not branch:
            self.cp_leftover(pending, out)
        return out

    def _syncs(self, ops: list[Operation]) -> bool:
        """Does a region of a local op (a reduction's combiner, ...) hold anything else?"""
        return any(not (LOCAL.match(op.name) or op.name.startswith("arith."))
                   or self._syncs([o for r in op.regions for o in r.ops]) for op in ops)

    def guarded(self, out: list, pred: Expr, stmt, op: Operation) -> None:
        if isinstance(pred, Const):
            if pred.value:      # unguarded: the loops' ranges and the assumptions still apply
                out.append(self._under(pred, stmt))
            return
        out.append(When(pred, (self._under(pred, stmt),), (), self.where(op)))

    def _under(self, pred: Expr, op: Op) -> Op:
        """The op's expressions as the predicate guarding it lets them read."""
        if not self.c_divisions:
            return op

        def at(e: Expr | None) -> Expr | None:
            return None if e is None else self.under(pred, e)

        def refs(rs: tuple) -> tuple:
            return tuple(dataclasses.replace(r, index=tuple(map(at, r.index))) for r in rs)
        barrier = op.barrier if op.barrier is None else dataclasses.replace(
            op.barrier, index=tuple(map(at, op.barrier.index)))
        return dataclasses.replace(op, barrier=barrier, count=at(op.count), bytes=at(op.bytes),
                                   parity=at(op.parity), phase=at(op.phase),
                                   reads=refs(op.reads), writes=refs(op.writes))

    # -- barriers ----------------------------------------------------------------------------

    def init_barrier(self, op: Operation, out):
        args = split_operands(op.text[len(op.name):])
        mem = self.value(op.operands[0])
        if not isinstance(mem, Mem) or len(args) < 2 or not args[1].strip().isdigit():
            raise Unread("the barrier or its count cannot be read")
        count = int(args[1])
        alloc = mem.alloc
        key = (alloc, repr(mem.index))
        in_loop_once = not self.loop_vars or self.loop_vars[-1] in set().union(
            *(free_vars(i) for i in mem.index))
        used = (alloc, None) in self.used or (alloc, repr(mem.index)) in self.used
        if used or self.threads or key in self.inited or not in_loop_once:
            raise Unread(f"barrier `{alloc.name}` initialised again or after its first use "
                         "(re-initialisation is not modelled)")
        self.inited.add(key)
        old = self.barriers.get(alloc)
        if old is not None:
            if alloc.name in self.pair_barriers:
                count *= 2
            if not same(old.num_arrivals, Const(count)):
                raise Unread(f"the barriers of `{alloc.name}` are initialised with different "
                             f"counts ({old.num_arrivals} and {count})")
            return None
        if alloc.elem != "i64" or alloc.space != "smem":
            raise Unread(f"`{alloc.name}` is not an array of mbarriers")
        try:
            pair = self.per_cta_barrier(op, (_memdesc(op.text) or ((), ""))[0])
        except Unread as err:       # every use of it is BP190 too, for the same reason
            self.refused[alloc] = str(err)
            raise
        if pair:        # initialised in the leader for the arrivals of both CTAs
            self.pair_barriers.add(alloc.name)
            count *= 2
        shape = alloc.dims[:-1]
        self.barriers[alloc] = BarrierAlloc(
            alloc.name, Const(count), tuple(Const(d) for d in shape) or (Const(1),),
            orders_tensor_core=True, loc=alloc.loc, scalar=not shape)
        return None

    def inval_barrier(self, op: Operation, out):
        mem = self.value(op.operands[0])
        if not isinstance(mem, Mem):
            raise Unread(f"`{op.operands[0]}` is not a barrier the translator can follow")
        if mem.alloc not in self.invalidated:      # one inval per barrier of an array
            self.barrier(op.operands[0])
            self.invalidated.add(mem.alloc)
        return None

    def _pred(self, name: str | None) -> Expr:
        return Const(1) if name is None else self.int_value(name, "the predicate")

    def _barrier_number_pred(self, op: Operation, what: str):
        """`%bar, N[ {fromCTA = m}][, %pred]`: the barrier, the constant N and the predicate."""
        text = re.sub(r"\s*\{[^{}]*\}", "", op.text[len(op.name):].split(" : ")[0])
        args = [a.strip() for a in split_operands(text)]
        if len(args) < 2 or not re.fullmatch(r"\d+", args[1]):
            raise Unread(f"the {what} cannot be read")
        if re.search(r"\bremote\b", op.text):
            raise Unread("a remote (cluster) arrival is not modelled yet")
        pred = self._pred(args[2] if len(args) > 2 else None)
        return self.barrier(op.operands[0]), Const(int(args[1])), pred

    def barrier_expect(self, op: Operation, out):
        bar, nbytes, pred = self._barrier_number_pred(op, "expected byte count")
        if self.is_pair(bar):
            if re.search(r"fromCTA\s*=", op.text):
                raise Unread("an expect routed with fromCTA on a 2-CTA pair barrier is not "
                             "modelled")
            return self.pair_expect(out, pred, bar, nbytes, op)
        for step in self.routed(op, lambda block: Op(
                K.ARRIVE_EXPECT_TX, self.on_block(bar, block), bytes=nbytes, loc=self.where(op))):
            self.guarded(out, pred, step, op)

    def arrive_barrier(self, op: Operation, out):
        bar, count, pred = self._barrier_number_pred(op, "arrival count")
        if self.is_pair(bar):
            if re.search(r"fromCTA\s*=", op.text):
                raise Unread("an arrival routed with fromCTA on a 2-CTA pair barrier is not "
                             "modelled")
            return self.guarded(out, pred, Op(K.ARRIVE, self.on_leader(bar), count=count,
                                              loc=self.where(op)), op)
        for step in self.routed(op, lambda block: Op(
                K.ARRIVE, self.on_block(bar, block), count=count, loc=self.where(op))):
            self.guarded(out, pred, step, op)

    def wait_barrier(self, op: Operation, out):
        # `%bar, %phase[, %pred][ deps %buffers...]`: the deps only order buffer lifetimes
        head = op.text[len(op.name):].split(" deps ")[0]
        args = [a.strip() for a in split_operands(head)]
        if len(args) < 2:
            raise Unread("the phase of the wait cannot be read")
        bar = self.barrier(op.operands[0])
        phase = self.int_value(args[1], "the phase")
        pred = self._pred(args[2] if len(args) > 2 and args[2].startswith("%") else None)
        wait = Op(K.WAIT_PARITY, bar, parity=mk("%", phase, Const(2)), loc=self.where(op))
        # a pair barrier is the leader's: only the leader waits on it
        if self.is_pair(bar):
            return self.on_leader_only(out, pred, (wait,), (), op)
        self.guarded(out, pred, wait, op)

    def tma_load(self, op: Operation, out):
        """A TMA load (and a gather of rows, `tile::gather4`): writes its destination and
        completes the destination's bytes on the barrier."""
        head = op.text.split(" : ")[0]
        m = re.match(r"^\S+\s+%[\w.$#-]+\[[^\]]*\]\s+(%[\w.$#-]+)\s*,\s*(%[\w.$#-]+)"
                     r"(?:\s*,\s*(%[\w.$#-]+))?", head)
        desc = _memdesc(op.text)
        if not m or desc is None or desc[1] not in _ELEM_BYTES:
            raise Unread("the destination or barrier of the copy cannot be read")
        bar = self.barrier(m.group(2))
        pred = self._pred(m.group(3))
        multicast = re.search(r"\{[^{}]*\bmulticast\b", op.text) is not None
        if multicast and self.ctas() == 1:
            multicast = False          # a cluster of one: the copy is the CTA's own
        axes, pieces = self.copy_axes(op, multicast)
        nbytes = math.prod(desc[0]) * _ELEM_BYTES[desc[1]] // pieces    # this CTA's piece
        if self.is_pair(bar):
            if axes:
                raise Unread("a multicast TMA load on a 2-CTA pair barrier is not modelled")
            bar = self.on_leader(bar)
        self.guarded(out, pred, Op(K.TMA_LOAD, bar, bytes=Const(nbytes), loc=self.where(op),
                                   collective_axes=axes, writes=self.memref(m.group(1))), op)

    def mma(self, op: Operation, out, scales: int = 0):
        # a, b, acc[token], (a_scale, b_scale,) use_acc, pred, then barrier[pred] pairs; a
        # block-scaled MMA names its operands' element types after the predicate
        pair = self.pair_mma(op)
        text = re.sub(r"\s+lhs\s*=\s*\w+\s+rhs\s*=\s*\w+", "", op.text[len(op.name):])
        args = [a.strip() for a in split_operands(text)]
        at = 3 + scales
        pred = self._pred(args[at + 1]) if len(args) > at + 1 and args[at + 1].startswith("%") \
            else Const(1)
        barriers = args[at + 2:]
        asynchronous = "is_async" in op.text or barriers
        loc = self.where(op)
        operand = [re.sub(r"\[.*\]$", "", a) for a in args[:at]]
        reads = self.memref(operand[0]) + self.memref(operand[1])
        for scale in operand[3:]:        # the scale factors, in tensor memory
            reads += self.memref(scale)
        issue = Op(K.TCGEN05_MMA, None, loc=loc, reads=reads, writes=self.memref(operand[2]),
                   collective_axes=pair)
        if not asynchronous:
            # Triton lowers an MMA without barriers to the MMA, a commit on a barrier of its
            # own and a wait for it: the thread goes on once it and every earlier tcgen05 op
            # of the thread (a tcgen05_copy into its accumulator) are done
            done = self._sync_barrier(op)
            self.tensor_core(out, pred, issue, op)
            self.tensor_core(out, pred, Op(K.TCGEN05_COMMIT_ARRIVE, done, loc=loc,
                                           collective_axes=pair), op)
            self.guarded(out, pred, Op(K.BARRIER_WAIT, done, loc=loc), op)
            return None
        self.tensor_core(out, pred, issue, op)
        for spec in barriers:
            m = re.match(r"^(%[\w.$#-]+)\[(%[\w.$#-]+)?\]$", spec)
            if not m:
                raise Unread(f"the completion barrier {spec!r} cannot be read")
            bar = self.barrier(m.group(1))
            when = mk("and", pred, self._pred(m.group(2))) if m.group(2) else pred
            self.tensor_core(out, when, Op(K.TCGEN05_COMMIT_ARRIVE, bar, loc=loc,
                                           collective_axes=pair), op)
        return None

    def tensor_core(self, out: list, pred: Expr, step: Op, op: Operation) -> None:
        """A tcgen05 op: in a 2-CTA kernel the leader issues it for the pair (two_cta.py)."""
        if not step.collective_axes:
            return self.guarded(out, pred, step, op)
        if step.barrier is not None and self.is_pair(step.barrier):
            raise Unread("a tcgen05 completion on a 2-CTA pair barrier is not modelled")
        self.on_leader_only(out, pred, (step,), (), op)

    def _sync_barrier(self, op: Operation) -> BarrierRef:
        """The barrier Triton gives a synchronous MMA, one per op (each partition translates
        its own ops), waited by the thread's own parity: only it commits to it and waits."""
        if op.line not in self.sync_barriers:
            name = self.fresh("mma_done")
            bar = BarrierAlloc(name, Const(1), loc=self.where(op), orders_tensor_core=True)
            self.barriers[Alloc(name, (1,), "i64", "smem", bar.loc)] = bar
            self.sync_barriers[op.line] = BarrierRef(bar)
        return self.sync_barriers[op.line]

    def tmem_copy(self, op: Operation, out):
        """tcgen05.cp: an asynchronous tensor-core op of the issuing thread, in order with its
        MMAs, from shared to tensor memory; a later tcgen05_commit arrives once it is done."""
        args = [a.strip() for a in split_operands(op.text[len(op.name):].split(" : ")[0])]
        if len(args) != 2:
            raise Unread("a tcgen05 copy with a completion barrier is not modelled yet")
        if self.two_ctas():
            raise Unread("a tcgen05 copy in a 2-CTA kernel is not modelled yet")
        out.append(Op(K.TCGEN05_MMA, None, loc=self.where(op),
                      reads=self.memref(args[0]), writes=self.memref(args[1])))
        return None

    def mma_scaled(self, op: Operation, out):
        return self.mma(op, out, scales=2)

    def inline_asm(self, op: Operation, out):
        # hand-written PTX is opaque math unless it names a synchronizing instruction: an
        # mbarrier arrive or a fence hidden there must not be dropped
        asm = op.text[len(op.name):].partition('"')[2].partition('"')[0]
        instruction = synchronizing_instruction(asm)
        if instruction:
            raise Unread(f"inline PTX that synchronizes ({instruction}) is not modelled")
        return None

    def commit(self, op: Operation, out):
        # `%bar[, %pred][ descs %a, %b]`: the descriptors say to which CTAs of the cluster the
        # commit is multicast (their shared layouts); in a one-CTA kernel, only to its own
        head, _, descs = op.text[len(op.name):].partition(" descs ")
        args = [a.strip() for a in split_operands(head)]
        pair = self.pair_mma(op)
        if descs and (self.module.int_attr("ttg.num-ctas") or 1) > 1 and not pair:
            raise Unread("a commit multicast to the CTAs of a cluster (descs=...) is not "
                         "modelled yet")
        bar = self.barrier(op.operands[0])
        if len(args) > 2:
            raise Unread("the operands of the commit cannot be read")
        pred = self._pred(args[1]) if len(args) > 1 and args[1].startswith("%") else Const(1)
        self.tensor_core(out, pred, Op(K.TCGEN05_COMMIT_ARRIVE, bar, loc=self.where(op),
                                       collective_axes=pair), op)


_BINARY = ("addi", "subi", "muli", "divsi", "divui", "remsi", "remui", "andi", "ori", "xori",
           "minsi", "maxsi", "minui", "maxui", "shli", "shrsi", "shrui", "ceildivsi",
           "floordivsi")

# TTGIR op -> its rule. Each returns the op's result values (None: opaque data).
HANDLERS: dict[str, Callable] = {
    "arith.constant": Translator.constant,
    **{f"arith.{k}": Translator.binary for k in _BINARY},
    "arith.cmpi": Translator.cmpi,
    "arith.select": Translator.select,
    **{f"arith.{k}": Translator.cast for k in ("extsi", "extui", "trunci", "index_cast",
                                               "bitcast")},
    "tt.elementwise_inline_asm": Translator.inline_asm,
    "tt.get_program_id": Translator.program_id,
    "tt.get_num_programs": Translator.num_programs,
    "scf.for": Translator.scf_for,
    "scf.if": Translator.scf_if,
    "scf.while": Translator.scf_while,
    "ttg.local_alloc": Translator.local_alloc,
    "ttng.tmem_alloc": Translator.local_alloc,
    "ttg.memdesc_index": Translator.memdesc_index,
    "ttg.memdesc_trans": Translator.view,
    "ttg.memdesc_reinterpret": Translator.view,
    "ttg.memdesc_subslice": Translator.view,
    "ttng.tmem_subslice": Translator.tmem_subslice,
    "ttng.init_barrier": Translator.init_barrier,
    "ttng.inval_barrier": Translator.inval_barrier,
    "ttng.barrier_expect": Translator.barrier_expect,
    "ttng.arrive_barrier": Translator.arrive_barrier,
    "ttng.wait_barrier": Translator.wait_barrier,
    "ttng.async_tma_copy_global_to_local": Translator.tma_load,
    "ttng.async_tma_gather": Translator.tma_load,
    "ttng.async_tma_scatter": Translator.tma_store,
    "ttng.tmem_copy": Translator.tmem_copy,
    "ttng.clc_try_cancel": Translator.clc_try_cancel,
    "ttng.clc_load_result": Translator.clc_load_result,
    "ttng.clc_is_canceled": Translator.clc_is_canceled,
    "ttng.tc_gen5_mma": Translator.mma,
    "ttng.tc_gen5_mma_scaled": Translator.mma_scaled,
    "ttng.tc_gen5_commit": Translator.commit,
    "ttng.cluster_barrier": Translator.cluster_barrier,
    "ttg.local_load": Translator.local_load,
    "ttng.tmem_load": Translator.local_load,
    "ttg.local_store": Translator.local_store,
    "ttng.tmem_store": Translator.local_store,
    "ttng.async_tma_copy_local_to_global": Translator.tma_store,
    "ttng.async_tma_store_wait": Translator.store_wait,
    "ttng.warp_group_dot": Translator.wgmma,
    "ttng.warp_group_dot_wait": Translator.wgmma_wait,
    "ttng.fence_async_shared": Translator.proxy_fence,
    "ttg.barrier": Translator.partition_barrier,
    "ttng.async_copy_mbarrier_arrive": Translator.cp_async_arrive,
    COPY: Translator.async_copy,
    COMMIT: Translator.async_commit,
    WAIT: Translator.async_wait,
}
