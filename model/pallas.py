"""The Pallas frontend: trace a Mosaic GPU kernel on the CPU and read its synchronization as IR.

`jax.make_jaxpr` runs the kernel's Python code without a GPU; the resulting jaxpr holds one
`mpmd_map` per `plgpu.kernel` call, whose body is the program every Pallas thread runs. This module
walks that body the way `jax.core.eval_jaxpr` does (one loop over equations, one table from
primitive to rule) but evaluates *integers symbolically*: axis indices become `Var`s of the IR,
index arithmetic becomes `Expr`s, `cond` becomes `When`, `scan`/`while` become `Loop`s with their
trip counts, and the barrier primitives become `Op`s that point at the kernel's source line.

Values that come from memory (a ragged group size, a cluster-cancel response) are *data*: they are
tracked as opaque variables (`?name`), so a branch or trip count that depends on them becomes a
stated parameter with a default, and a barrier index that depends on them is an error. A primitive
that synchronizes but is not modelled (semaphores, ...) becomes an `unmodeled` op: it is never
dropped silently.

JAX is imported lazily: the rest of barrierproof works without it.

>>> import jax, jax.numpy as jnp                                      # doctest: +SKIP
>>> from jax.experimental.pallas import mosaic_gpu as plgpu          # doctest: +SKIP
>>> def handoff():                                                   # doctest: +SKIP
...     @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
...                   thread_name="wg", scratch_types=[plgpu.Barrier()])
...     def k(x_ref, o_ref, bar):
...         ...
...     return k(jnp.zeros(128, jnp.float32))
>>> [k.name for k in load(handoff)]                                  # doctest: +SKIP
['handoff']
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import itertools
import math
import os
import re
import sys
import traceback as _traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from .ir import (BarrierAlloc, BarrierRef, BinOp, Const, Expr, Kernel, Loc, Loop, ModelError, Op,
                 Param, UNKNOWN_LOC, UnOp, Var, WarpRegion, When, free_vars, walk)

DEFAULT_CORE_COUNT = 132          # H100 SXM; what the shipped kernels size their grids by
DEFAULT_TRIPS = 3                 # data-dependent loops: enough to reuse a double-buffered slot
UNROLL_LIMIT = 64                 # loops whose carried index has no closed form are unrolled

# Primitives that synchronize threads or async agents and are modelled.
MODELED = {"barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_mma",
           "tcgen05_commit_arrive", "try_cluster_cancel"}
# Mosaic GPU / Pallas primitives that cannot block another thread or complete a barrier phase:
# local waits for the thread's own async work, data movement, fences, register hints.
LOCAL = {
    "copy_smem_to_gmem", "wait_smem_to_gmem", "commit_group", "commit_smem", "wgmma", "wgmma_ref",
    "wgmma_wait", "wgmma_accumulator_deref_p", "wgmma_accumulator_store_p",
    "set_max_registers_p", "load", "async_load", "wait_load_tmem", "async_store_tmem",
    "commit_tmem", "async_store_smem", "async_prefetch", "print_layout", "layout_cast",
    "broadcasted_iota", "query_cluster_cancel", "async_copy_smem_to_tmem",
    "async_copy_scales_to_tmem", "async_copy_sparse_metadata_to_tmem", "get_global",
    "program_id", "num_programs", "debug_print", "mgpu_atomic_store", "atomic_rmw",
    "multimem_load_reduce", "multimem_store", "delay", "semaphore_read", "masked_load",
    "masked_swap", "reciprocal",
}
# Synchronization outside the model: kept as `unmodeled` ops (BP190).
UNMODELED = {"semaphore_signal", "semaphore_wait", "semaphore_signal_parallel",
             "semaphore_signal_multicast", "barrier_test", "griddepcontrol_wait",
             "griddepcontrol_launch_dependents", "inline_mgpu_p", "pallas_call"}
# jnp's integer floor remainder and floor division (jitted helpers): the IR's `%` and `//`.
_FLOOR_OPS = {"remainder": "%", "floor_divide": "//"}
# Wrappers whose single sub-jaxpr is called with the equation's operands and gives its results.
INLINE_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr", "call")

_EXPECT_TRACE_ERRORS = (
    # (pattern in a tracing error, diagnostic code, one-line message, help)
    ("MMA barrier must have orders_tensor_core", "BP110",
     "tcgen05 arrival on a Barrier that does not order the tensor core "
     "(JAX: \"MMA barrier must have orders_tensor_core set to True.\")",
     "declare the barrier with plgpu.Barrier(..., orders_tensor_core=True)"),
)


# ----------------------------------------------------------------------------------------------
# Device facts: what the kernels ask the (absent) GPU while they are traced
# ----------------------------------------------------------------------------------------------

class _GpuDevice:
    """A stand-in for a GPU device: the real (CPU) device plus the facts kernels read."""

    def __init__(self, real, core_count: int):
        self._real = real
        self.core_count = core_count
        self.device_kind = "NVIDIA H100 80GB HBM3"
        self.platform = "gpu"

    def __getattr__(self, name):
        return getattr(self._real, name)


class _CudaVersions:
    """`jax._src.lib.cuda_versions` is None without CUDA; attention asks for the runtime."""

    @staticmethod
    def cuda_runtime_get_version() -> int:
        return 12090 + 1    # outside the 12.8.0 .. 12.9.0 window where causal attention is off


@contextlib.contextmanager
def device_facts(core_count: int = DEFAULT_CORE_COUNT, device_count: int | None = None):
    """Make `jax.devices()[0].core_count` (and friends) answer as on an H100, while tracing.

    Kernels size persistent grids by the SM count (`backend.get_default_device().core_count`,
    `jax.devices()[0].core_count`, `jax.local_devices()[0].core_count`) and attention checks the
    CUDA runtime version; on a CPU those facts are missing. Only the public lookups are patched,
    and only for the duration of the `with` block.
    """
    import jax
    import jax.extend.backend as jeb

    saved_devices, saved_local = jax.devices, jax.local_devices
    saved_default = jeb.get_default_device
    saved_count, saved_local_count = jax.device_count, jax.local_device_count
    jax.devices = lambda *a, **k: [_GpuDevice(d, core_count) for d in saved_devices(*a, **k)]
    jax.local_devices = lambda *a, **k: [_GpuDevice(d, core_count) for d in saved_local(*a, **k)]
    jeb.get_default_device = lambda: _GpuDevice(saved_default(), core_count)
    if device_count is not None:
        jax.device_count = lambda *a, **k: device_count
        jax.local_device_count = lambda *a, **k: device_count
    patched = []
    for name, module in list(sys.modules.items()):
        if (name.startswith("jax") and module is not None
                and getattr(module, "cuda_versions", 0) is None):
            module.cuda_versions = _CudaVersions
            patched.append(module)
    try:
        yield
    finally:
        jax.devices, jax.local_devices = saved_devices, saved_local
        jeb.get_default_device = saved_default
        jax.device_count, jax.local_device_count = saved_count, saved_local_count
        for module in patched:
            module.cuda_versions = None


# ----------------------------------------------------------------------------------------------
# Source locations
# ----------------------------------------------------------------------------------------------

_THIS_DIR = os.path.dirname(os.path.abspath(__file__))


def _internal(filename: str) -> bool:
    """Frames of JAX itself, of the standard library and of barrierproof are not the user's."""
    if filename.startswith("<"):
        return True
    path = filename.replace("\\", "/")
    if "/jax/experimental/pallas/ops/" in path:
        return False          # JAX's shipped kernels are the code being checked
    if "/jax/" in path or "/jaxlib/" in path or path.startswith(_THIS_DIR):
        return True
    stdlib = os.path.dirname(os.__file__).replace("\\", "/")
    return path.startswith(stdlib + "/") and "site-packages" not in path


def _display_path(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1]
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def _frames(traceback) -> list:
    if traceback is None:
        return []
    try:
        return list(traceback.frames)
    except Exception:   # pragma: no cover - jaxlib without frames
        return []


def _loc_from_tracebacks(tracebacks: Sequence) -> Loc:
    """The innermost user frame of an equation, following its enclosing equations outward.

    A jaxpr equation's traceback stops where its sub-jaxpr was traced; the parent equation's
    traceback continues from there, so the chain of tracebacks is the full stack.
    """
    for tb in tracebacks:
        for frame in _frames(tb):
            if not _internal(frame.file_name):
                line = getattr(frame, "line_num", None) or getattr(frame, "start_line", 0)
                return Loc(_display_path(frame.file_name), int(line), frame.function_name)
    return UNKNOWN_LOC


def _loc_from_exception(exc: BaseException) -> Loc:
    frames = _traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if not _internal(frame.filename):
            return Loc(_display_path(frame.filename), frame.lineno or 0, frame.name)
    return UNKNOWN_LOC


# ----------------------------------------------------------------------------------------------
# Integer expressions: smart constructors that fold constants as they build
# ----------------------------------------------------------------------------------------------

OPAQUE_PREFIX = "?"


_OPAQUE_IDS = itertools.count(1)


def opaque(what: str) -> Var:
    """A fresh value only known at run time (data in memory, a float, a loop-varying carry)."""
    return Var(f"{OPAQUE_PREFIX}{what}{next(_OPAQUE_IDS)}")


def opaques(what: str, n: int) -> list[Var]:
    return [opaque(what) for _ in range(n)]


def opaque_vars(expr: Expr) -> list[str]:
    return sorted(v for v in free_vars(expr) if v.startswith(OPAQUE_PREFIX))


def _is_opaque(expr: Expr) -> bool:
    return isinstance(expr, Var) and expr.name.startswith(OPAQUE_PREFIX)


_BOOL_OPS = {"==", "!=", "<", "<=", ">", ">=", "and", "or"}


def is_bool(expr: Expr) -> bool:
    if isinstance(expr, Const):
        return expr.value in (0, 1)
    if isinstance(expr, BinOp):
        return expr.op in _BOOL_OPS
    if isinstance(expr, UnOp):
        return expr.op == "not"
    return False


# Known ranges of variables (loop indices, axis indices) while a kernel is translated: they let
# the folding below simplify C division and remainder of indices such as `(3 - i) % 2`.
_RANGES: dict[str, tuple[int, int | None]] = {}


def _bounds(expr: Expr) -> tuple[int | None, int | None]:
    """An interval holding every value of `expr` (None: unbounded), from `_RANGES`."""
    if isinstance(expr, Const):
        return expr.value, expr.value
    if isinstance(expr, Var):
        if expr.name in _RANGES:
            return _RANGES[expr.name]
        return (None, None) if expr.name.startswith(OPAQUE_PREFIX) else (0, None)
    if isinstance(expr, UnOp):
        lo, hi = _bounds(expr.arg)
        if expr.op == "neg":
            return (None if hi is None else -hi), (None if lo is None else -lo)
        return 0, 1
    if not isinstance(expr, BinOp):
        return None, None
    if expr.op in _BOOL_OPS:
        return 0, 1
    (alo, ahi), (blo, bhi) = _bounds(expr.lhs), _bounds(expr.rhs)
    add = lambda x, y: None if x is None or y is None else x + y
    if expr.op == "+":
        return add(alo, blo), add(ahi, bhi)
    if expr.op == "-":
        return (add(alo, None if bhi is None else -bhi), add(ahi, None if blo is None else -blo))
    if expr.op in ("*", "//") and None not in (alo, ahi, blo, bhi):
        if expr.op == "//" and blo <= 0 <= bhi:
            return None, None
        f = (lambda x, y: x * y) if expr.op == "*" else (lambda x, y: x // y)
        vals = [f(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(vals), max(vals)
    if expr.op == "%" and blo is not None and blo > 0:    # floor remainder: [0, b - 1]
        hi = None if bhi is None else bhi - 1
        if alo is not None and alo >= 0 and ahi is not None:
            hi = ahi if hi is None else min(hi, ahi)
        return 0, hi
    if expr.op in ("min", "max"):
        pick = min if expr.op == "min" else max
        lo = None if None in (alo, blo) else pick(alo, blo)
        hi = None if None in (ahi, bhi) else pick(ahi, bhi)
        if expr.op == "max" and lo is None:
            lo = alo if alo is not None else blo
        if expr.op == "min" and hi is None:
            hi = ahi if ahi is not None else bhi
        return lo, hi
    return None, None


def nonneg(expr: Expr) -> bool:
    """A sufficient check that `expr` is never negative (indices, trip counts)."""
    if _syntactic_nonneg(expr):
        return True
    if not _RANGES:
        return False
    lo, _ = _bounds(expr)
    return lo is not None and lo >= 0


def _syntactic_nonneg(expr: Expr) -> bool:
    if isinstance(expr, Const):
        return expr.value >= 0
    if isinstance(expr, Var):
        return not expr.name.startswith(OPAQUE_PREFIX)
    if isinstance(expr, BinOp):
        if expr.op in _BOOL_OPS:
            return True
        if expr.op in ("+", "*", "//", "min", "max"):
            return nonneg(expr.lhs) and nonneg(expr.rhs)
        if expr.op == "%":
            return nonneg(expr.lhs) and nonneg(expr.rhs)
        return False
    if isinstance(expr, UnOp):
        return expr.op == "not"
    return False


def _same(a: Expr, b: Expr) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


def mk(op: str, a: Expr, b: Expr) -> Expr:
    """`BinOp(op, a, b)`, folded: constants, identities, affine constant offsets.

    >>> mk("+", mk("+", Var("i"), Const(1)), Const(2))
    (i + 3)
    >>> mk("max", mk("<", Var("block"), Const(8)), Const(0))   # a comparison is never negative
    (block < 8)
    """
    from .ir import BINARY_OPS
    if isinstance(a, Const) and isinstance(b, Const):
        if op in ("//", "%") and b.value == 0:
            return BinOp(op, a, b)   # let evaluation report it where it matters
        return Const(BINARY_OPS[op](a.value, b.value))
    if op == "+":
        if isinstance(a, Const):
            a, b = b, a
        if isinstance(b, Const):
            if b.value == 0:
                return a
            if isinstance(a, BinOp) and a.op == "+" and isinstance(a.rhs, Const):
                return mk("+", a.lhs, Const(a.rhs.value + b.value))
            if isinstance(a, BinOp) and a.op == "-" and isinstance(a.rhs, Const):
                return mk("+", a.lhs, Const(b.value - a.rhs.value))
            if b.value < 0:
                return BinOp("-", a, Const(-b.value))
        if isinstance(b, UnOp) and b.op == "neg":
            return mk("-", a, b.arg)
    elif op == "-":
        if isinstance(b, Const):
            return mk("+", a, Const(-b.value))
        if _same(a, b):
            return Const(0)
        # a - (a // c) * c is a % c (floor division and remainder, as in the IR)
        if isinstance(b, BinOp) and b.op == "*" and isinstance(b.rhs, Const) \
                and b.rhs.value > 0 and isinstance(b.lhs, BinOp) and b.lhs.op == "//" \
                and _same(b.lhs.lhs, a) and isinstance(b.lhs.rhs, Const) \
                and b.lhs.rhs.value == b.rhs.value:
            return mk("%", a, b.rhs)
    elif op == "*":
        if isinstance(a, Const):
            a, b = b, a
        if isinstance(b, Const):
            if b.value == 0:
                return Const(0)
            if b.value == 1:
                return a
            if isinstance(a, BinOp) and a.op == "*" and isinstance(a.rhs, Const):
                return mk("*", a.lhs, Const(a.rhs.value * b.value))
    elif op == "//":
        if isinstance(b, Const) and b.value == 1:
            return a
        if isinstance(a, Const) and a.value == 0:
            return Const(0)
    elif op == "%":
        if isinstance(b, Const) and b.value == 1:
            return Const(0)
        if isinstance(a, Const) and a.value == 0:
            return Const(0)
        if isinstance(b, Const) and isinstance(a, BinOp) and a.op == "%" \
                and isinstance(a.rhs, Const) and a.rhs.value == b.value:
            return a
    elif op in ("min", "max"):
        if _same(a, b):
            return a
        if op == "max":          # |x| of an x known to be >= 0
            for x, y in ((a, b), (b, a)):
                if isinstance(y, UnOp) and y.op == "neg" and _same(y.arg, x) and nonneg(x):
                    return x
            for x, y in ((a, b), (b, a)):
                if isinstance(y, Const) and y.value == 0 and nonneg(x):
                    return x
    elif op in ("==", "<=", ">="):
        if _same(a, b):
            return Const(1)
        if op == ">=" and isinstance(b, Const) and b.value <= 0 and nonneg(a):
            return Const(1)
    elif op in ("!=", "<", ">"):
        if _same(a, b):
            return Const(0)
        if op == "<" and isinstance(b, Const) and b.value <= 0 and nonneg(a):
            return Const(0)
    elif op == "xor":
        for x, y in ((a, b), (b, a)):
            if isinstance(y, Const) and y.value == 0:
                return x
    elif op == "and":
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if x.value == 0:
                    return Const(0)
                if is_bool(y):
                    return y
    elif op == "or":
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if x.value != 0:
                    return Const(1)
                if is_bool(y):
                    return y
    return BinOp(op, a, b)


def mk_not(a: Expr) -> Expr:
    if isinstance(a, Const):
        return Const(int(not a.value))
    if isinstance(a, UnOp) and a.op == "not" and is_bool(a.arg):
        return a.arg
    negated = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
    if isinstance(a, BinOp) and a.op in negated:
        return mk(negated[a.op], a.lhs, a.rhs)
    return UnOp("not", a)


def mk_neg(a: Expr) -> Expr:
    if isinstance(a, Const):
        return Const(-a.value)
    if isinstance(a, UnOp) and a.op == "neg":
        return a.arg
    return UnOp("neg", a)


def mk_select(pred: Expr, cases: Sequence[Expr]) -> Expr:
    """`lax.select_n(pred, *cases)`: case `pred` (0/1 for a boolean predicate)."""
    if isinstance(pred, Const):
        return cases[max(0, min(pred.value, len(cases) - 1))]
    if all(_same(c, cases[0]) for c in cases):
        return cases[0]
    if len(cases) == 2:
        a, b = cases
        if is_bool(pred):
            if isinstance(a, Const) and isinstance(b, Const):
                if (a.value, b.value) == (0, 1):
                    return pred
                if (a.value, b.value) == (1, 0):
                    return mk_not(pred)
            return mk("+", mk("*", mk_not(pred), a), mk("*", pred, b))
    total: Expr = Const(0)
    for k, c in enumerate(cases):
        total = mk("+", total, mk("*", mk("==", pred, Const(k)), c))
    return total


def _abs(a: Expr) -> Expr:
    return a if nonneg(a) else mk("max", a, mk_neg(a))


def mk_div(a: Expr, b: Expr) -> Expr:
    """`lax.div`: C division, rounding toward zero; plain `//` when both sides are indices.

    >>> mk_div(Const(-7), Const(2)), mk_div(Var("i"), Const(2))
    (-3, (i // 2))
    """
    if isinstance(b, Const) and b.value in (1, -1):
        return a if b.value == 1 else mk_neg(a)
    if nonneg(a) and nonneg(b):
        return mk("//", a, b)
    if isinstance(a, Const) and isinstance(b, Const) and b.value:
        q = abs(a.value) // abs(b.value)
        return Const(q if (a.value < 0) == (b.value < 0) else -q)
    q = mk("//", _abs(a), _abs(b))
    flip = mk("xor", mk("<", a, Const(0)), mk("<", b, Const(0)))
    return mk("-", q, mk("*", Const(2), mk("*", flip, q)))


def mk_rem(a: Expr, b: Expr) -> Expr:
    """`lax.rem`: C remainder, with the sign of the dividend."""
    if isinstance(b, Const) and b.value in (1, -1):
        return Const(0)
    if nonneg(a) and nonneg(b):
        return mk("%", a, b)
    return mk("-", a, mk("*", b, mk_div(a, b)))


def substitute(expr: Expr, env: Mapping[str, Expr]) -> Expr:
    """Replace variables by expressions, folding again as the expression is rebuilt.

    >>> substitute(mk("%", mk("+", Var("i"), Var("c")), Const(2)), {"c": Const(1)})
    ((i + 1) % 2)
    """
    if isinstance(expr, Var):
        return env.get(expr.name, expr)
    if isinstance(expr, BinOp):
        return mk(expr.op, substitute(expr.lhs, env), substitute(expr.rhs, env))
    if isinstance(expr, UnOp):
        arg = substitute(expr.arg, env)
        return mk_not(arg) if expr.op == "not" else mk_neg(arg)
    return expr


def _subst_ref(ref: BarrierRef | None, env: Mapping[str, Expr]) -> BarrierRef | None:
    if ref is None:
        return None
    block = None if ref.block is None else tuple(substitute(e, env) for e in ref.block)
    return BarrierRef(ref.alloc, tuple(substitute(e, env) for e in ref.index), block)


def substitute_stmts(body: Sequence, env: Mapping[str, Expr]) -> tuple:
    out = []
    for s in body:
        if isinstance(s, Op):
            out.append(dataclasses.replace(
                s, barrier=_subst_ref(s.barrier, env), count=substitute(s.count, env),
                bytes=substitute(s.bytes, env),
                parity=None if s.parity is None else substitute(s.parity, env)))
        elif isinstance(s, Loop):
            out.append(Loop(s.var, substitute(s.trip, env), substitute_stmts(s.body, env), s.loc))
        elif isinstance(s, When):
            cond = substitute(s.cond, env)
            then, orelse = substitute_stmts(s.then, env), substitute_stmts(s.orelse, env)
            if isinstance(cond, Const):
                out.extend(then if cond.value else orelse)
            else:
                out.append(When(cond, then, orelse, s.loc))
        elif isinstance(s, WarpRegion):
            out.append(WarpRegion(s.axis, substitute_stmts(s.body, env), s.loc))
        else:
            raise TypeError(f"not a statement: {s!r}")
    return tuple(out)


def stmt_vars(body: Sequence) -> set[str]:
    """Variables that synchronization depends on: indices, counts, conditions, trip counts."""
    names: set[str] = set()
    for s in body:
        if isinstance(s, Op):
            for e in (s.count, s.bytes, s.parity):
                if e is not None:
                    names |= free_vars(e)
            if s.barrier is not None:
                for e in s.barrier.index + (s.barrier.block or ()):
                    names |= free_vars(e)
        elif isinstance(s, Loop):
            names |= free_vars(s.trip) | (stmt_vars(s.body) - {s.var})
        elif isinstance(s, When):
            names |= free_vars(s.cond) | stmt_vars(s.then) | stmt_vars(s.orelse)
        elif isinstance(s, WarpRegion):
            names |= stmt_vars(s.body)
    return names


# ----------------------------------------------------------------------------------------------
# Values of jaxpr variables
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BarrierVal:
    """A barrier allocation as the kernel sees it. A per-thread allocation (run_scoped without
    the thread axis among its collective axes) is one IR array with a leading thread dimension,
    which every reference indexes with the thread index (`prefix`)."""

    alloc: BarrierAlloc
    prefix: tuple[Expr, ...] = ()
    block: tuple[Expr, ...] | None = None


@dataclass(frozen=True)
class MemRef:
    """A non-barrier ref: enough to count the bytes a copy moves."""

    shape: tuple[int, ...]
    dtype: Any
    space: str


@dataclass(eq=False)
class Cell:
    """A scalar `Ref` of `pl.run_state` (a loop index passed in, say): reads give its value."""

    value: Expr
    control: int        # control depth it was created at; writes deeper make it data


@dataclass
class _Frame:
    """Translation context: where we are in the kernel."""

    tracebacks: tuple = ()
    loop_depth: int = 0
    control: int = 0     # enclosing conds and loops


class _Untranslatable(Exception):
    pass


class Translator:
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
        self.params: dict[str, Param] = {}
        self.notes: list[str] = []
        self._names: set[str] = set(self.axis_sizes) | {self.warp_axis}
        self._counter = itertools.count()
        self.origins: dict[str, tuple] = {}        # opaque var -> (primitive, frame)
        self._at: _Frame | None = None             # the equation being translated
        self._lifted: dict[str, str] = {}          # repr of a data term -> its parameter
        self._data_terms: dict[str, tuple] = {}    # parameter -> (loc, what, its sources)

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
        name, n = base, 1
        while name in self._names:
            n += 1
            name = f"{base}{n}"
        self._names.add(name)
        return name

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # -- the kernel --------------------------------------------------------------------------

    def kernel(self, jaxpr, consts: Sequence = (), tracebacks: tuple = ()) -> Kernel:
        env: dict = {}
        for v, c in zip(jaxpr.constvars, consts):
            env[v] = self._const_value(c)
        for v in jaxpr.invars:
            env[v] = self._ref_value(v, None)
        saved = dict(_RANGES)
        _RANGES.clear()
        _RANGES.update({a: (0, n - 1) for a, n in self.axis_sizes.items()})
        try:
            body = self._data_axes(self._lift_stmts(self.jaxpr(jaxpr, env,
                                                               _Frame(tracebacks))))
        finally:
            _RANGES.clear()
            _RANGES.update(saved)
        return Kernel(
            name=self.name, body=body, barriers=tuple(self.barriers), params=self.params,
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
            elif name in MODELED:
                results = getattr(self, "_op_" + name)(eqn, env, sub, out)
            elif name in UNMODELED:
                results = self._unmodeled(eqn, env, sub, out)
            elif self._sub_jaxprs(eqn):
                results = self._higher_order(eqn, env, sub, out)
            elif name not in LOCAL and name not in _ARITH and name in _pallas_primitives():
                # a Pallas GPU primitive this frontend does not know: it may synchronize
                results = self._unmodeled(eqn, env, sub, out)
            else:
                results = self._compute(eqn, env)
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
        if any(_has_sync(j) for j, _ in subs):
            return self._unmodeled(eqn, env, frame, out)
        return opaques(eqn.primitive.name, len(eqn.outvars))

    def _unmodeled(self, eqn, env, frame, out) -> Any:
        name = eqn.primitive.name
        if name == "inline_mgpu_p" and _is_fence(eqn):
            return opaques("inline", len(eqn.outvars))
        if name == "pallas_call":
            raise ModelError("a pallas_call inside a Mosaic GPU kernel is not supported",
                             loc=self.where(frame),
                             hint="write the kernel with plgpu.kernel")
        out.append(Op("unmodeled", name=name, loc=self.where(frame)))   # BP190, statically
        return opaques(name, len(eqn.outvars))

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
        for i, v in enumerate(allocs):
            pname = alloc_names[i] if i < len(alloc_names) else None
            sub_env[v] = self._allocate(v, pname, collective, frame)
        body = self.jaxpr(jaxpr, sub_env, frame)
        out.extend(body)
        return [self.read(sub_env, v) for v in jaxpr.outvars]

    def _allocate(self, var, pname, collective, frame) -> Any:
        aval = var.aval
        inner = getattr(aval, "inner_aval", None)
        dtype = getattr(inner, "dtype", None)
        kind = type(dtype).__name__
        if kind not in ("BarrierType", "ClusterBarrierType"):
            return self._ref_value(var, pname)
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
        axes: tuple[str, ...] = ()
        if cluster:
            flat = []
            for a in dtype.collective_axes:
                flat.extend(a if isinstance(a, tuple) else (a,))
            axes = tuple(self._axis(a) for a in flat)
            if getattr(dtype, "leader_tracked", False):
                self._note(f"{loc}: `{name}` is leader_tracked; modelled as a plain "
                           "ClusterBarrier")
        full = ((self.num_threads,) if prefix else ()) + shape
        alloc = BarrierAlloc(
            name=name, num_arrivals=Const(int(dtype.num_arrivals)),
            shape=tuple(Const(n) for n in full),
            orders_tensor_core=bool(dtype.orders_tensor_core), cluster=cluster,
            collective_axes=axes, loc=loc, scalar=full == (1,))
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
        if opaque_vars(idx) and not any(_has_sync(b.jaxpr) for b in branches):
            for b in branches:    # still compute what the branches return
                self._inline(b.jaxpr, b.consts, args, frame, [])
            return opaques("cond", len(eqn.outvars))
        bodies, results = [], []
        inner = dataclasses.replace(frame, control=frame.control + 1)
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

    # Loops: carries get closed forms in the loop variable when they are inductions.

    def _carry_forms(self, jaxpr, consts_vals, carry_init, extra_args, frame):
        """Translate a loop body once with placeholder carries; classify each carry."""
        placeholders = []
        for k, init in enumerate(carry_init):
            placeholders.append(Var(f"%c{next(self._counter)}") if isinstance(init, Expr)
                                else init)
        loopvar = self._fresh("i")
        body: list = []
        results = self._inline(jaxpr, (), [*consts_vals, *placeholders, *extra_args],
                               dataclasses.replace(frame, loop_depth=frame.loop_depth + 1,
                                                   control=frame.control + 1),
                               body)
        return placeholders, loopvar, tuple(body), results

    def _closed_forms(self, placeholders, carry_init, new_carry, loopvar, trip: Expr | None):
        """For each carry: its value at iteration `loopvar` and after the loop (or None)."""
        forms: dict[str, Expr] = {}
        finals: list[Expr | None] = []
        i = Var(loopvar)
        pnames = {p.name for p in placeholders if isinstance(p, Var)}
        for p, init, new in zip(placeholders, carry_init, new_carry):
            if not isinstance(p, Var) or not isinstance(new, Expr):
                finals.append(None)
                continue
            at, final = _induction(p, init, new, i, trip, pnames)
            if at is None:
                finals.append(None)
                continue
            forms[p.name] = at
            finals.append(final)
        return forms, finals

    def _loop(self, eqn, env, frame, out, *, jaxpr, consts_vals, carry_init, extra_args,
              trip_of: Callable, carry_slice: tuple[int, int], ys: int, what: str):
        loc = self.where(frame)
        placeholders, loopvar, body, results = self._carry_forms(
            jaxpr, consts_vals, carry_init, extra_args, frame)
        new_carry = results[carry_slice[0]:carry_slice[1]]
        trip = trip_of(placeholders, carry_init, new_carry)
        if trip is None:
            trip = self._trip_param(loc, what)
        forms, finals = self._closed_forms(placeholders, carry_init, new_carry, loopvar, trip)
        unknown = {p.name for p in placeholders if isinstance(p, Var)} - set(forms)
        if unknown & stmt_vars(body):
            return self._unroll(loc, jaxpr, consts_vals, carry_init, extra_args, trip, frame,
                                out, carry_slice, ys)
        for name in unknown:
            forms[name] = opaque("carry")
        _RANGES[loopvar] = (0, trip.value - 1 if isinstance(trip, Const) else None)
        stmts = substitute_stmts(body, forms)
        if not isinstance(trip, Const) or trip.value > 0:
            if isinstance(trip, Const) and trip.value == 1:
                stmts = substitute_stmts(stmts, {loopvar: Const(0)})
                out.extend(stmts)
            elif stmts:
                out.append(Loop(loopvar, trip, stmts, loc))
        outs = []
        for k, final in enumerate(finals):
            outs.append(final if final is not None else
                        (carry_init[k] if isinstance(trip, Const) and trip.value == 0
                         else opaque("carry")))
        return outs + opaques("ys", ys)

    def _unroll(self, loc, jaxpr, consts_vals, carry_init, extra_args, trip, frame, out,
                carry_slice, ys):
        if not isinstance(trip, Const) or trip.value > UNROLL_LIMIT:
            raise ModelError(
                "a loop-carried value that barrier indices or branches depend on has no closed "
                f"form, and the loop's trip count ({trip}) is too large to unroll", loc=loc,
                hint="compute barrier slots from the loop index (e.g. i % num_slots)")
        self._note(f"{loc}: loop unrolled ({trip.value} iterations): its carried state has no "
                   "closed form")
        carry = list(carry_init)
        sub = dataclasses.replace(frame, loop_depth=frame.loop_depth + 1,
                                  control=frame.control + 1)
        for _ in range(trip.value):
            results = self._inline(jaxpr, (), [*consts_vals, *carry, *extra_args], sub, out)
            carry = results[carry_slice[0]:carry_slice[1]]
        return list(carry) + opaques("ys", ys)

    # Data-dependent control: the opaque part of a trip count or a branch condition becomes a
    # parameter. Only the data term itself is replaced, so `min(2, n)`, `n` and `i + 1 < n` in
    # one pipeline keep sharing the same `n`.

    def _lift_stmts(self, body: Sequence) -> tuple:
        out = []
        for s in body:
            if isinstance(s, Op):
                for e in (s.count, s.bytes):
                    if opaque_vars(e):
                        raise ModelError(f"{s.kind} depends on data loaded from memory",
                                         loc=s.loc)
                out.append(s)
            elif isinstance(s, Loop):
                trip = self._lift(s.trip, s.loc, "trips")
                out.append(Loop(s.var, trip, self._lift_stmts(s.body), s.loc))
            elif isinstance(s, When):
                cond = self._lift(s.cond, s.loc, "data")
                then, orelse = self._lift_stmts(s.then), self._lift_stmts(s.orelse)
                if isinstance(cond, Const):
                    out.extend(then if cond.value else orelse)
                else:
                    out.append(When(cond, then, orelse, s.loc))
            elif isinstance(s, WarpRegion):
                out.append(WarpRegion(s.axis, self._lift_stmts(s.body), s.loc))
        return tuple(out)

    def _lift(self, e: Expr, loc: Loc, role: str) -> Expr:
        if not opaque_vars(e):
            return e
        structural = {"min", "max", "==", "!=", "<", "<=", ">", ">=", "and", "or"}
        if isinstance(e, BinOp) and (e.op in structural or (
                e.op in ("+", "-", "*") and not (opaque_vars(e.lhs) and opaque_vars(e.rhs)))):
            return mk(e.op, self._lift(e.lhs, loc, role), self._lift(e.rhs, loc, role))
        if isinstance(e, UnOp) and e.op == "not":
            return mk_not(self._lift(e.arg, loc, role))
        key = repr(e)
        if key not in self._lifted:
            pname = self._fresh(f"{role}_{_stem(loc)}_{loc.line}")
            self._lifted[key] = pname
            self.params[pname] = Param(pname, DEFAULT_TRIPS)
            sources = []
            for v in opaque_vars(e):
                prim, frame = self.origins.get(v, ("?", None))
                where = self.where(frame) if frame is not None else UNKNOWN_LOC
                sources.append(f"{prim} at {where}" if where != UNKNOWN_LOC else prim)
            what = "trip count" if role == "trips" else "branch condition"
            self._data_terms[pname] = (loc, what, ", ".join(sorted(set(sources))))
        return Var(self._lifted[key])

    def _data_constants(self, e: Expr, out: dict[str, set[int]]) -> None:
        """Constants that a data term is compared with, e.g. `n > 4` -> {4} for `n`."""
        if isinstance(e, BinOp):
            if e.op in ("==", "!=", "<", "<=", ">", ">="):
                for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                    if isinstance(x, Var) and x.name in self._data_terms \
                            and isinstance(y, Const):
                        out.setdefault(x.name, set()).add(y.value)
            self._data_constants(e.lhs, out)
            self._data_constants(e.rhs, out)
        elif isinstance(e, UnOp):
            self._data_constants(e.arg, out)

    def _data_axes(self, body: tuple) -> tuple:
        """A data value that only decides branches (`pl.when(flag > 0)`) is checked for every
        value that matters, not one default: it becomes an axis of the grid, whose positions
        the checker explores one by one, over 0..3 and the constants it is compared with (each
        +-1). Data that is also a trip count stays a parameter with a stated default."""
        trip_vars: set[str] = set()
        constants: dict[str, set[int]] = {}
        for s in walk(body):
            if isinstance(s, Loop):
                trip_vars |= free_vars(s.trip)
            elif isinstance(s, When):
                self._data_constants(s.cond, constants)
        env: dict[str, Expr] = {}
        for pname, (loc, what, sources) in self._data_terms.items():
            if pname in trip_vars or what != "branch condition":
                self._note(f"{loc}: this {what} depends on data ({sources}); parameter "
                           f"`{pname}` stands for it (default {DEFAULT_TRIPS}, the same at "
                           "every execution)")
                continue
            values = set(range(DEFAULT_TRIPS + 1))
            for c in constants.get(pname, ()):
                values |= {v for v in (c - 1, c, c + 1) if v >= 0}
            values = sorted(values)
            del self.params[pname]
            if values == list(range(len(values))):
                env[pname] = Var(pname)
                shown = f"0..{values[-1]}"
            else:
                axis = Var(pname)
                env[pname] = mk_select(axis, [Const(v) for v in values])
                shown = ", ".join(str(v) for v in values) + \
                    f" (grid position k of `{pname}` stands for the k-th)"
            self.grid.append((pname, Const(len(values))))
            self.axis_sizes[pname] = len(values)
            self._note(f"{loc}: this branch condition depends on data ({sources}); it is "
                       f"checked for every value of `{pname}` in {shown}, as an axis of the "
                       "grid (the same value for every thread of a block)")
        return substitute_stmts(body, env) if env else body

    def _trip_param(self, loc: Loc, what: str) -> Var:
        pname = self._fresh(f"trips_{_stem(loc)}_{loc.line}")
        self.params[pname] = Param(pname, DEFAULT_TRIPS)
        self._note(f"{loc}: the trip count of this {what} depends on data; parameter `{pname}` "
                   f"(default {DEFAULT_TRIPS})")
        return Var(pname)

    def _scan(self, eqn, env, frame, out):
        p = eqn.params
        nc, ncarry = p["num_consts"], p["num_carry"]
        args = [self.read(env, a) for a in eqn.invars]
        consts, init, xs = args[:nc], args[nc:nc + ncarry], args[nc + ncarry:]
        # A reversed scan walks its xs backwards; carries still evolve in execution order, and
        # xs are data, so the loop translates the same way.
        length = Const(int(p["length"]))
        xs_vals = opaques("xs", len(xs))
        jaxpr = p["jaxpr"]
        return self._loop(eqn, env, frame, out, jaxpr=_closed_as_open(jaxpr),
                          consts_vals=_closed_consts(self, jaxpr) + list(consts),
                          carry_init=init, extra_args=xs_vals,
                          trip_of=lambda *_: length, carry_slice=(0, ncarry),
                          ys=len(eqn.outvars) - ncarry, what="scan")

    def _while(self, eqn, env, frame, out):
        p = eqn.params
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        args = [self.read(env, a) for a in eqn.invars]
        cconsts, bconsts, init = args[:cn], args[cn:cn + bn], args[cn + bn:]
        cond_jaxpr, body_jaxpr = p["cond_jaxpr"], p["body_jaxpr"]
        if _has_sync(cond_jaxpr.jaxpr):
            raise ModelError("synchronization inside a while loop's condition is not supported",
                             loc=self.where(frame))

        def trip_of(placeholders, carry_init, new_carry):
            cond_out = self._inline(_closed_as_open(cond_jaxpr),
                                    (), _closed_consts(self, cond_jaxpr) + list(cconsts)
                                    + list(placeholders), frame, [])
            return _while_trip(cond_out[0], placeholders, carry_init, new_carry)

        return self._loop(eqn, env, frame, out, jaxpr=_closed_as_open(body_jaxpr),
                          consts_vals=_closed_consts(self, body_jaxpr) + list(bconsts),
                          carry_init=init, extra_args=[], trip_of=trip_of,
                          carry_slice=(0, len(init)), ys=0, what="while loop")

    def _run_state(self, eqn, env, frame, out):
        """`pl.run_state(f)(*values)`: f sees each value as a Ref; scalars become Cells."""
        jaxpr = eqn.params["jaxpr"]
        args = []
        for a in eqn.invars:
            v = self.read(env, a)
            args.append(Cell(v, frame.control) if isinstance(v, Expr) else v)
        self._inline(jaxpr, (), args, frame, out)
        return [a.value if isinstance(a, Cell) else a for a in args]

    def _get(self, eqn, env, frame, out):
        ref = self.read(env, eqn.invars[0])
        if isinstance(ref, Cell) and len(eqn.invars) == 1:
            return ref.value
        return opaque("load")

    def _swap(self, eqn, env, frame, out):
        ref = self.read(env, eqn.invars[0])
        if isinstance(ref, Cell) and len(eqn.invars) == 2:
            old = ref.value
            new = self.read(env, eqn.invars[1])
            ref.value = new if isinstance(new, Expr) and frame.control == ref.control \
                else opaque("store")
            return old
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
        for e in index + (block or ()):
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
        out.append(Op("barrier_arrive", self._barrier(ref, t, frame), loc=self.where(frame)))
        return []

    def _op_barrier_wait(self, eqn, env, frame, out):
        ref = self.read(env, eqn.invars[0])
        t = self._transforms(env, eqn.params["transforms_treedef"], eqn.invars[1:])
        out.append(Op("barrier_wait", self._barrier(ref, t, frame), loc=self.where(frame)))
        return []

    def _op_copy_gmem_to_smem(self, eqn, env, frame, out):
        p = eqn.params
        src, dst, bar, *leaves = eqn.invars
        ns = p["src_transforms_treedef"].num_leaves
        nd = p["dst_transforms_treedef"].num_leaves
        dst_t = self._transforms(env, p["dst_transforms_treedef"], leaves[ns:ns + nd])
        bar_t = self._transforms(env, p["barrier_transforms_treedef"], leaves[ns + nd:])
        loc = self.where(frame)
        ref = self._barrier(self.read(env, bar), bar_t, frame)
        nbytes = self._bytes(self.read(env, dst), dst_t, loc)
        axes = tuple(self._axis(a) for a in (p.get("collective_axes") or ()))
        leader = p.get("leader_tracked")
        if leader is None or not axes:
            out.append(Op("copy_gmem_to_smem", ref, bytes=Const(nbytes), collective_axes=axes,
                          loc=loc))
            return []
        # Leader-tracked (partitioned or replicated) copy: only the first block along the axis
        # expects the bytes of every block; each block's TMA completes them on the leader's
        # barrier (the lowering's `bytes *= 2` for a cluster of 2).
        axis = axes[0]
        n = self.axis_sizes.get(axis, 1)
        leader_block = tuple(Const(0) if a == axis else Var(a) for a, _ in self.cluster)
        out.append(When(mk("==", Var(axis), Const(0)),
                        (Op("arrive_expect_tx", ref, bytes=Const(nbytes * n), loc=loc),), (),
                        loc))
        out.append(Op("tma_load", BarrierRef(ref.alloc, ref.index, leader_block),
                      bytes=Const(nbytes), loc=loc))
        self._note(f"{loc}: leader-tracked copy: block 0 along `{axis}` expects "
                   f"{n}x{nbytes} bytes, every block's TMA completes on block 0's barrier")
        return []

    def _op_tcgen05_mma(self, eqn, env, frame, out):
        p = eqn.params
        loc = self.where(frame)
        axis = p.get("collective_axis")
        axes = (self._axis(axis),) if axis is not None else ()
        if not p.get("arrive"):
            out.append(Op("tcgen05_mma", None, collective_axes=axes, loc=loc))
            return []
        n_scales = 2 if p.get("scaled") else 0
        n_meta = 1 if p.get("sparse") else 0
        leaves = list(eqn.invars[5 + n_scales + n_meta:])
        skip = 0
        for key in ("acc_transforms_tree", "a_transforms_tree", "b_transforms_tree"):
            tree = p.get(key)
            skip += tree.num_leaves if tree is not None else 0
        tree = p.get("barrier_transforms_tree")
        nb = tree.num_leaves if tree is not None else 0
        t = self._transforms(env, tree, leaves[skip:skip + nb])
        ref = self._barrier(self.read(env, eqn.invars[4]), t, frame)
        out.append(Op("tcgen05_mma", ref, collective_axes=axes, loc=loc))
        return []

    def _op_tcgen05_commit_arrive(self, eqn, env, frame, out):
        p = eqn.params
        t = self._transforms(env, p.get("barrier_transforms_tree"), eqn.invars[1:])
        ref = self._barrier(self.read(env, eqn.invars[0]), t, frame)
        axis = p.get("collective_axis")
        axes = (self._axis(axis),) if axis is not None else ()
        out.append(Op("tcgen05_commit_arrive", ref, collective_axes=axes, loc=self.where(frame)))
        return []

    def _op_try_cluster_cancel(self, eqn, env, frame, out):
        p = eqn.params
        rtree = p.get("result_transforms_tree")
        nr = rtree.num_leaves if rtree is not None else 0
        t = self._transforms(env, p.get("barrier_transforms_tree"), eqn.invars[2 + nr:])
        ref = self._barrier(self.read(env, eqn.invars[1]), t, frame)
        out.append(Op("try_cluster_cancel", ref, loc=self.where(frame)))
        return []


def _closed_as_open(closed):
    return closed.jaxpr if hasattr(closed, "jaxpr") else closed


def _closed_consts(tr: Translator, closed) -> list:
    jaxpr = _closed_as_open(closed)
    consts = list(getattr(closed, "consts", ()) or ())
    if jaxpr.constvars:
        return [tr._const_value(c) for c in consts]
    return []


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


def _induction(p: Var, init, new: Expr, i: Var, trip: Expr | None, pnames: set[str]):
    """Closed form of a loop carry: (value at iteration i, value after `trip` iterations).

    >>> c, i = Var("%c"), Var("i")
    >>> _induction(c, Const(0), mk("%", mk("+", c, Const(1)), Const(2)), i, Const(5), {"%c"})
    ((i % 2), 1)
    >>> _induction(c, Const(0), mk("-", Const(1), c), i, None, {"%c"})[0]
    (i % 2)
    """
    if not isinstance(init, Expr):
        return None, None
    if _same(new, p):                                         # loop-invariant
        return init, init
    others = free_vars(new) - {p.name}
    if others & pnames:
        return None, None

    def after(at: Expr) -> Expr | None:
        return None if trip is None else substitute(at, {i.name: trip})

    # c' = c + s
    if isinstance(new, BinOp) and new.op in ("+", "-"):
        lhs, rhs = new.lhs, new.rhs
        step = None
        if _same(lhs, p) and p.name not in free_vars(rhs):
            step = rhs if new.op == "+" else mk_neg(rhs)
        elif new.op == "+" and _same(rhs, p) and p.name not in free_vars(lhs):
            step = lhs
        if step is not None and i.name not in free_vars(step):
            at = mk("+", init, mk("*", i, step))
            return at, after(at)
        # c' = 1 - c  (a parity toggle)
        if new.op == "-" and isinstance(lhs, Const) and lhs.value == 1 and _same(rhs, p) \
                and isinstance(init, Const) and init.value in (0, 1):
            at = mk("%", mk("+", i, init), Const(2))
            return at, after(at)
    # c' = (c + s) % m
    if isinstance(new, BinOp) and new.op == "%" and isinstance(new.rhs, Const) \
            and new.rhs.value > 0 and isinstance(init, Const) \
            and 0 <= init.value < new.rhs.value:
        inner = new.lhs
        if isinstance(inner, BinOp) and inner.op == "+" and _same(inner.lhs, p) \
                and isinstance(inner.rhs, Const) and inner.rhs.value >= 0:
            at = mk("%", mk("+", init, mk("*", i, inner.rhs)), new.rhs)
            return at, after(at)
    # c' = c ^ 1, c' = not c
    if ((isinstance(new, BinOp) and new.op == "xor" and _same(new.lhs, p)
         and isinstance(new.rhs, Const) and new.rhs.value == 1)
            or (isinstance(new, UnOp) and new.op == "not" and _same(new.arg, p))) \
            and isinstance(init, Const) and init.value in (0, 1):
        at = mk("%", mk("+", i, init), Const(2))
        return at, after(at)
    return None, None


def _while_trip(cond: Any, placeholders, carry_init, new_carry) -> Expr | None:
    """Trip count of `while c < bound` with c an induction variable of constant step."""
    if not isinstance(cond, BinOp):
        return None
    names = {p.name: k for k, p in enumerate(placeholders) if isinstance(p, Var)}
    invariant = {}
    for p, init, new in zip(placeholders, carry_init, new_carry):
        if isinstance(p, Var) and isinstance(new, Expr) and _same(new, p) \
                and isinstance(init, Expr):
            invariant[p.name] = init
    op, lhs, rhs = cond.op, cond.lhs, cond.rhs
    flip = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "!=": "!="}
    if isinstance(rhs, Var) and rhs.name in names and rhs.name not in invariant \
            and op in flip:
        op, lhs, rhs = flip[op], rhs, lhs
    if not (isinstance(lhs, Var) and lhs.name in names):
        return None
    k = names[lhs.name]
    init, new = carry_init[k], new_carry[k]
    if not isinstance(init, Expr) or not isinstance(new, BinOp) or new.op != "+":
        return None
    if _same(new.lhs, lhs):
        step = new.rhs
    elif _same(new.rhs, lhs):
        step = new.lhs
    else:
        return None
    if free_vars(step) & set(names):
        return None
    bound = substitute(rhs, invariant)
    if free_vars(bound) & set(names):
        return None
    if not isinstance(step, Const) or step.value <= 0:
        return None
    s = step.value
    if op == "<":
        span = mk("-", bound, init)
    elif op == "<=":
        span = mk("+", mk("-", bound, init), Const(1))
    elif op == "!=" and s == 1:
        span = mk("-", bound, init)
    else:
        return None
    trip = mk("//", mk("+", span, Const(s - 1)), Const(s)) if s > 1 else span
    if isinstance(trip, Const):
        return Const(max(trip.value, 0))
    return mk("max", trip, Const(0))


def _stem(loc: Loc) -> str:
    base = os.path.basename(loc.file)
    return re.sub(r"\W+", "_", os.path.splitext(base)[0]) or "kernel"


def _clean_name(text: str) -> str:
    """`pipeline_allocs['flat_consumed_barrier_refs'][0]` -> `consumed_barrier_refs_0`,
    `args[2][1]` -> `args_2_1`."""
    parts = re.findall(r"[A-Za-z_]\w*|\d+", text)
    words = [p for p in parts if not p.isdigit()]
    if not words:
        return "barrier"
    digits = [p for p in parts[parts.index(words[-1]) + 1:] if p.isdigit()]
    return "_".join([words[-1].removeprefix("flat_")] + digits)


def _integral(dtype) -> bool:
    import numpy as np
    try:
        return np.issubdtype(dtype, np.integer) or np.dtype(dtype) == np.bool_
    except TypeError:
        return False


def _is_fence(eqn) -> bool:
    """`inline_mgpu` that only emits a proxy fence (plgpu helpers' inline_ptx): no barrier."""
    fn = eqn.params.get("mgpu_fn")
    cells = getattr(fn, "__closure__", None) or ()
    texts = []
    for c in cells:
        try:
            v = c.cell_contents
        except ValueError:
            continue
        if isinstance(v, str):
            texts.append(v)
    return bool(texts) and all(t.strip().startswith("fence.") for t in texts)


# Keyed by id() but holding the jaxpr itself: a freed jaxpr's id may be reused by another.
_SYNC_CACHE: dict[int, tuple[object, bool]] = {}


def _has_sync(jaxpr) -> bool:
    """Does a jaxpr contain any barrier or unmodelled synchronization (recursively)?"""
    from jax._src import core as jcore
    key = id(jaxpr)
    cached = _SYNC_CACHE.get(key)
    if cached is not None and cached[0] is jaxpr:
        return cached[1]
    found = False
    for eqn in jaxpr.eqns:
        n = eqn.primitive.name
        if n in MODELED or (n in UNMODELED and not (n == "inline_mgpu_p" and _is_fence(eqn))):
            found = True
            break
        for v in eqn.params.values():
            for s in (v if isinstance(v, (tuple, list)) else [v]):
                if isinstance(s, jcore.ClosedJaxpr):
                    s = s.jaxpr
                if isinstance(s, jcore.Jaxpr) and _has_sync(s):
                    found = True
                    break
            if found:
                break
        if found:
            break
    _SYNC_CACHE[key] = (jaxpr, found)
    return found


# ----------------------------------------------------------------------------------------------
# Arithmetic: the integer part of lax, symbolically
# ----------------------------------------------------------------------------------------------

def _bitwise(op: str):
    def rule(eqn, args, dtypes):
        a, b = args
        if all(d is not None and str(d) == "bool" for d in dtypes):
            return mk({"and": "and", "or": "or", "xor": "!="}[op], a, b)
        if op == "xor":
            return mk("xor", a, b)
        if op == "and":
            for x, y in ((a, b), (b, a)):
                if isinstance(y, Const) and y.value > 0 and (y.value + 1) & y.value == 0 \
                        and nonneg(x):
                    return mk("%", x, Const(y.value + 1))   # x & (2^k - 1)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(a.value & b.value if op == "and" else a.value | b.value)
        return opaque("bits")
    return rule


def _not_rule(eqn, args, dtypes):
    (a,) = args
    if dtypes[0] is not None and str(dtypes[0]) == "bool":
        return mk_not(a)
    return mk("-", mk_neg(a), Const(1))


def _cmp(op):
    return lambda eqn, args, dtypes: mk(op, args[0], args[1])


def _sign(eqn, args, dtypes):
    (a,) = args
    return mk("-", mk(">", a, Const(0)), mk("<", a, Const(0)))


def _clamp(eqn, args, dtypes):
    lo, x, hi = args
    return mk("min", mk("max", x, lo), hi)


def _integer_pow(eqn, args, dtypes):
    (a,) = args
    y = int(eqn.params["y"])
    if y < 0:
        return opaque("pow")
    out: Expr = Const(1)
    for _ in range(y):
        out = mk("*", out, a)
    return out


def _shift_left(eqn, args, dtypes):
    a, b = args
    if isinstance(b, Const) and 0 <= b.value < 31:
        return mk("*", a, Const(1 << b.value))
    return opaque("shift")


def _shift_right(eqn, args, dtypes):
    a, b = args
    if isinstance(b, Const) and 0 <= b.value < 31 and nonneg(a):
        return mk("//", a, Const(1 << b.value))
    return opaque("shift")


def _identity(eqn, args, dtypes):
    return args[0]


_ARITH: dict[str, Callable] = {
    "add": lambda e, a, d: mk("+", a[0], a[1]),
    "sub": lambda e, a, d: mk("-", a[0], a[1]),
    "mul": lambda e, a, d: mk("*", a[0], a[1]),
    "div": lambda e, a, d: mk_div(a[0], a[1]),
    "rem": lambda e, a, d: mk_rem(a[0], a[1]),
    "max": lambda e, a, d: mk("max", a[0], a[1]),
    "min": lambda e, a, d: mk("min", a[0], a[1]),
    "neg": lambda e, a, d: mk_neg(a[0]),
    "abs": lambda e, a, d: _abs(a[0]),
    "sign": _sign,
    "eq": _cmp("=="), "ne": _cmp("!="), "lt": _cmp("<"), "le": _cmp("<="),
    "gt": _cmp(">"), "ge": _cmp(">="),
    "and": _bitwise("and"), "or": _bitwise("or"), "xor": _bitwise("xor"),
    "not": _not_rule,
    "select_n": lambda e, a, d: mk_select(a[0], a[1:]),
    "clamp": _clamp,
    "integer_pow": _integer_pow,
    "shift_left": _shift_left,
    "shift_right_logical": _shift_right,
    "shift_right_arithmetic": _shift_right,
    "convert_element_type": _identity,
    "squeeze": _identity, "reshape": _identity, "broadcast_in_dim": _identity,
    "copy": _identity, "copy_p": _identity, "optimization_barrier": _identity,
    "reduce_precision": _identity,
    "multiple_of": _identity,
}


def _optimization_barrier(tr: Translator, eqn, env, frame, out):
    return [tr.read(env, a) for a in eqn.invars]


_PALLAS_PRIMITIVES: set[str] | None = None


def _pallas_primitives() -> set[str]:
    """Names of the primitives Pallas defines (core and Mosaic GPU), for the rule that an
    unknown one is reported as unmodelled rather than ignored."""
    global _PALLAS_PRIMITIVES
    if _PALLAS_PRIMITIVES is None:
        import importlib
        from jax._src import core as jcore
        names: set[str] = set()
        for mod in ("jax._src.pallas.primitives", "jax._src.pallas.mosaic_gpu.primitives",
                    "jax._src.pallas.mosaic_gpu.core"):
            try:
                module = importlib.import_module(mod)
            except ImportError:
                continue
            names |= {v.name for v in vars(module).values() if isinstance(v, jcore.Primitive)}
        _PALLAS_PRIMITIVES = names - {"run_scoped", "get", "swap", "axis_index"}
    return _PALLAS_PRIMITIVES


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
}


# ----------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------

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


def trace(fn: Callable, *args, core_count: int = DEFAULT_CORE_COUNT,
          device_count: int | None = None, **kwargs):
    """`jax.make_jaxpr(fn)(*args)` with the device facts a GPU kernel asks for.

    A tracing error that JAX raises for a rule barrierproof checks (tcgen05 on a barrier without
    orders_tensor_core) becomes a ModelError with that rule's code and the kernel's line.
    """
    import jax
    try:
        with device_facts(core_count, device_count):
            return jax.make_jaxpr(fn)(*args, **kwargs)
    except ModelError:
        raise
    except (Exception, SystemExit) as exc:     # sys.exit() in a kernel function, too
        text = (f"{type(exc).__name__}: {exc}".splitlines() or [type(exc).__name__])[0]
        loc = _loc_from_exception(exc)
        if loc == UNKNOWN_LOC:
            loc = _loc_of_function(fn) or loc
        for pattern, code, message, hint in _EXPECT_TRACE_ERRORS:
            if pattern in str(exc):
                raise ModelError(message, loc=loc, hint=hint, code=code) from exc
        raise ModelError(f"tracing failed: {text}", loc=loc,
                         hint="the function must trace with jax.make_jaxpr on a CPU") from exc


def _loc_of_function(fn: Callable) -> Loc | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return Loc(_display_path(code.co_filename), code.co_firstlineno,
               getattr(fn, "__name__", "kernel"))


def _check_arity(fn: Callable, name: str) -> None:
    """A target is called with no arguments: say so before tracing, at its `def` line."""
    import inspect
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    required = [p.name for p in sig.parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                       p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        raise ModelError(f"{name} takes arguments ({', '.join(required)}); a kernel target is "
                         "called with none", loc=_loc_of_function(fn),
                         hint="give every argument a default, or wrap the call in a "
                              "zero-argument function that builds the inputs")


VERDICT_NAMES = ("proved", "verified", "bounded", "unknown", "violation", "error")


def check_expect(expect: Any, name: str, where: Loc | None = None) -> None:
    """An `EXPECT` entry must be a verdict label such as "verified" or "violation:BP101"."""
    from .semantics import CODES
    ok = isinstance(expect, str)
    if ok:
        verdict, _, code = expect.partition(":")
        ok = verdict in VERDICT_NAMES and (not code or code in CODES or code == "input")
    if not ok:
        raise ModelError(f"EXPECT[{name!r}] = {expect!r} is not a verdict", loc=where,
                         hint="use e.g. 'verified', 'unknown', 'violation:BP100' or "
                              "'error:BP120'")


def expect_loc(path: str | None) -> Loc | None:
    """The line of a module's `EXPECT = {...}`, for errors about it."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if re.match(r"EXPECT\s*(:[^=]*)?=", line):
                    return Loc(_display_path(path), n, "EXPECT")
    except OSError:
        pass
    return Loc(_display_path(path), 0, "EXPECT")


def device_facts_of(fn: Callable) -> dict:
    """Device facts a target module declares for its kernels, e.g.
    `DEVICE_FACTS = {"core_count": 132, "device_count": 2}` (collective kernels check
    `jax.device_count()` against their mesh)."""
    facts = dict(getattr(fn, "__globals__", {}).get("DEVICE_FACTS", None) or {})
    unknown = set(facts) - {"core_count", "device_count"}
    if unknown:
        raise ModelError(f"DEVICE_FACTS has unknown keys {sorted(unknown)}",
                         hint="use core_count and device_count")
    return facts


def load(fn: Callable, name: str | None = None, expect: str | None = None,
         core_count: int | None = None, device_count: int | None = None) -> list[Kernel]:
    """Trace a zero-argument function that calls Pallas kernels; return their IR, one Kernel
    per kernel launch, in call order."""
    name = name or getattr(fn, "__name__", "kernel")
    _check_arity(fn, name)
    facts = device_facts_of(fn)
    closed = trace(fn, core_count=core_count or facts.get("core_count", DEFAULT_CORE_COUNT),
                   device_count=device_count or facts.get("device_count"))
    _SYNC_CACHE.clear()          # the cache pins jaxprs: keep it to one trace
    kernels = kernels_from_jaxpr(closed, name, expect)
    if not kernels:
        code = getattr(fn, "__code__", None)
        loc = Loc(_display_path(code.co_filename), code.co_firstlineno, name) if code else None
        raise ModelError(f"{name} calls no Pallas Mosaic GPU kernel", loc=loc,
                         hint="call a plgpu.kernel inside the function")
    return kernels


def trace_function(fn: Callable, name: str | None = None, path: str | None = None) -> Kernel:
    """The one kernel a target function launches (the CLI's `file.py::NAME`)."""
    kernels = load(fn, name=name)
    if len(kernels) > 1:
        code = getattr(fn, "__code__", None)
        loc = Loc(_display_path(code.co_filename), code.co_firstlineno, name) if code else None
        raise ModelError(f"{name} launches {len(kernels)} kernels "
                         f"({', '.join(k.name for k in kernels)}); check them one by one",
                         loc=loc, hint="call one plgpu.kernel per target function")
    return kernels[0]


def import_file(path: str):
    """Import a Python file as a module; failures become one-line ModelErrors."""
    if not os.path.exists(path):
        raise ModelError(f"no such file: {path}")
    modname = "_barrierproof_target_" + re.sub(r"\W", "_", os.path.abspath(path))
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(modname, None)
        loc = _loc_from_exception(exc)
        text = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ModelError(f"importing {path} failed: {text}", loc=loc) from exc
    finally:
        sys.path.pop(0)
    return module


def targets(module) -> dict[str, str | None]:
    """The Pallas targets a module declares: `EXPECT = {"fn": "verified", ...}` (name ->
    expected verdict), else every public zero-argument function named `check_*`."""
    expect = getattr(module, "EXPECT", None)
    if isinstance(expect, dict):
        for name, label in expect.items():
            check_expect(label, name, expect_loc(getattr(module, "__file__", None)))
        return dict(expect)
    import inspect
    found = {}
    for name, obj in vars(module).items():
        if name.startswith("check_") and inspect.isfunction(obj) \
                and obj.__module__ == module.__name__:
            found[name] = None
    return found


def load_target(spec: str) -> list[Kernel]:
    """`path.py::NAME` -> the IR of the kernels NAME calls (NAME takes no arguments)."""
    path, sep, name = spec.partition("::")
    if not sep or not name:
        raise ModelError(f"{spec!r} is not of the form path.py::NAME")
    module = import_file(path)
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        known = ", ".join(sorted(targets(module))) or "none declared"
        raise ModelError(f"{path} has no function {name}", hint=f"targets: {known}")
    expect = targets(module).get(name)
    return load(fn, name=name, expect=expect)
