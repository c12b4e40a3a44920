"""The intermediate representation of a kernel's synchronization.

Frontends (the DSL, the Pallas tracer) build it; engines (explorer, TLA+, Z3) read it and never
import a frontend. A kernel is SPMD: every Pallas thread of every block of a cluster runs the same
structured `body`, and roles are `When` branches on the thread or block index. Loops keep their
trip counts as integer expressions over named parameters, so the symbolic engine can reason about
every value while the explorer unrolls one concrete choice.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence, Union

from . import kinds as _kinds

# Hardware limits of an mbarrier (PTX ISA): arrival counts and tx-counts must stay below 2^20.
MAX_ARRIVALS = (1 << 20) - 1
MAX_TX = (1 << 20) - 1


@dataclass(frozen=True)
class Loc:
    """A source location: where the user wrote the operation."""

    file: str
    line: int
    function: str | None = None

    def __str__(self) -> str:
        # Relative to the working directory when below it: what a user would click on.
        path = self.file
        if os.path.isabs(path):
            rel = os.path.relpath(path)
            if not rel.startswith(".."):
                path = rel
        return f"{path}:{self.line}"


UNKNOWN_LOC = Loc("<unknown>", 0)


class ModelError(Exception):
    """The input cannot be modelled. Carries a location and a hint for the fix (exit code 3)."""

    def __init__(self, message: str, loc: Loc | None = None, hint: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.hint = hint
        self.code = code

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc and self.loc != UNKNOWN_LOC else ""
        code = f"{self.code} " if self.code else ""
        text = f"{where}{code}{self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


# ----------------------------------------------------------------------------------------------
# Integer expressions
# ----------------------------------------------------------------------------------------------

ExprLike = Union["Expr", int]

# Binary operators: Python spelling -> evaluation. Comparisons and logic yield 0/1, as in C.
BINARY_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "min": min,
    "max": max,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
    "and": lambda a, b: int(bool(a) and bool(b)),
    "or": lambda a, b: int(bool(a) or bool(b)),
    "xor": lambda a, b: a ^ b,
}
UNARY_OPS = {
    "neg": lambda a: -a,
    "not": lambda a: int(not a),
}


class Expr:
    """An integer expression over parameters, loop variables and thread/block indices.

    Python operators build expressions (`i % stages`, `k.thread == 2`); `&`, `|`, `~` are logical
    and/or/not of truth values, refused on numbers (Python's `and`/`if` cannot be overloaded, so
    truth-testing raises a clear error).
    """

    __slots__ = ()

    def _bin(self, op: str, other: ExprLike, flip: bool = False) -> "Expr":
        other = as_expr(other)
        return BinOp(op, other, self) if flip else BinOp(op, self, other)

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __floordiv__(self, o): return self._bin("//", o)
    def __rfloordiv__(self, o): return self._bin("//", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __rmod__(self, o): return self._bin("%", o, True)
    def __xor__(self, o): return self._bin("xor", o)
    def __rxor__(self, o): return self._bin("xor", o, True)
    def __and__(self, o): return self._logical("and", o)
    def __rand__(self, o): return self._logical("and", o, True)
    def __or__(self, o): return self._logical("or", o)
    def __ror__(self, o): return self._logical("or", o, True)

    def _logical(self, op: str, other: ExprLike, flip: bool = False) -> "Expr":
        """`&` / `|` of truth values. An operand that is a number (`i & (stages - 1)`, `i & 1`)
        would be read as true or false, not as bits: refused, with the arithmetic to write."""
        for x in (self, as_expr(other)):
            if isinstance(x, Const) and x.value not in (0, 1) or \
                    isinstance(x, BinOp) and x.op not in _TRUTH_OPS or \
                    isinstance(x, UnOp) and x.op == "neg":
                sym = "&" if op == "and" else "|"
                raise ModelError(
                    f"`{sym}` in a protocol expression is logical {op} (for conditions), but "
                    f"`{x!r}` is a number, not a truth value",
                    hint="for a stage of a power-of-two ring write `i % stages`, for a parity "
                         "`(i // stages) % 2`; compare numbers to get truth values "
                         "(`(i % 2 == 0) & (k > 0)`)")
        return self._bin(op, other, flip)
    def __lt__(self, o): return self._bin("<", o)
    def __le__(self, o): return self._bin("<=", o)
    def __gt__(self, o): return self._bin(">", o)
    def __ge__(self, o): return self._bin(">=", o)
    def __eq__(self, o): return self._bin("==", o)  # type: ignore[override]
    def __ne__(self, o): return self._bin("!=", o)  # type: ignore[override]
    def __neg__(self): return UnOp("neg", self)
    def __invert__(self): return UnOp("not", self)
    def __hash__(self): return hash(repr(self))

    def __bool__(self):
        raise ModelError(
            f"the symbolic expression `{self}` has no truth value while the protocol is built "
            "(a Python `if`, `and`/`or`/`not`, `min`/`max` or comparison chain on a parameter?)",
            hint="branch with `with k.when(cond):` / `k.otherwise()`, combine conditions with "
                 "& | ~, and use barrierproof.minimum / maximum",
        )

    def __index__(self):
        raise ModelError(
            f"the symbolic expression `{self}` is not a Python integer (a `range()` or list "
            "index over a parameter?)",
            hint="loop with `with k.loop(n) as i:` and index barriers with `bar.at[expr]`",
        )


# the operators whose value is a truth value (0 or 1): what `&` and `|` may combine
_TRUTH_OPS = frozenset({"==", "!=", "<", "<=", ">", ">=", "and", "or"})


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int

    def __repr__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A named integer: a parameter, a loop variable, or an index (thread, warp, block axis)."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class BinOp(Expr):
    op: str
    lhs: Expr
    rhs: Expr

    def __repr__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.lhs!r}, {self.rhs!r})"
        sym = {"and": "&", "or": "|", "xor": "^"}.get(self.op, self.op)
        return f"({self.lhs!r} {sym} {self.rhs!r})"


@dataclass(frozen=True, eq=False)
class UnOp(Expr):
    op: str
    arg: Expr

    def __repr__(self) -> str:
        return f"-{self.arg!r}" if self.op == "neg" else f"~{self.arg!r}"


def as_expr(value: ExprLike) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Const(int(value))
    if isinstance(value, int):
        return Const(value)
    try:  # numpy integers and other integral scalars
        import operator
        return Const(operator.index(value))
    except TypeError:
        raise ModelError(
            f"{value!r} ({type(value).__name__}) is not an integer expression",
            hint="barrier indices, counts, bytes and trip counts must be ints or parameters",
        ) from None


def emin(a: ExprLike, b: ExprLike) -> Expr:
    return BinOp("min", as_expr(a), as_expr(b))


def emax(a: ExprLike, b: ExprLike) -> Expr:
    return BinOp("max", as_expr(a), as_expr(b))


def evaluate(expr: ExprLike, env: Mapping[str, int]) -> int:
    """Evaluate an expression with every free variable bound in `env`.

    >>> evaluate(Var("i") % 3 + 1, {"i": 7})
    2
    """
    if isinstance(expr, int):
        return expr
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        try:
            return env[expr.name]
        except KeyError:
            raise ModelError(f"`{expr.name}` has no value",
                             hint=f"give it one, e.g. --param {expr.name}=2") from None
    if isinstance(expr, BinOp):
        a, b = evaluate(expr.lhs, env), evaluate(expr.rhs, env)
        if expr.op in ("//", "%") and b == 0:
            raise ModelError(f"division by zero in `{expr}`", hint="check the parameter values")
        return BINARY_OPS[expr.op](a, b)
    if isinstance(expr, UnOp):
        return UNARY_OPS[expr.op](evaluate(expr.arg, env))
    raise TypeError(f"not an expression: {expr!r}")


def free_vars(expr: ExprLike) -> set[str]:
    if isinstance(expr, Var):
        return {expr.name}
    if isinstance(expr, BinOp):
        return free_vars(expr.lhs) | free_vars(expr.rhs)
    if isinstance(expr, UnOp):
        return free_vars(expr.arg)
    return set()


# ----------------------------------------------------------------------------------------------
# Allocations
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class BarrierAlloc:
    """`plgpu.Barrier` (cluster=False) or `plgpu.ClusterBarrier` (cluster=True): an array of
    mbarriers in every block's shared memory."""

    name: str
    num_arrivals: Expr
    shape: tuple[Expr, ...] = (Const(1),)
    orders_tensor_core: bool = False
    cluster: bool = False
    collective_axes: tuple[str, ...] = ()
    loc: Loc = UNKNOWN_LOC
    # An unindexed reference is allowed only when the array was declared without num_barriers.
    scalar: bool = True
    # A global semaphore (`pl.get_global(SemaphoreType.REGULAR)`): one counter for the whole
    # cluster, signalled and waited on; `copies` clusters of the grid run the same program in
    # lockstep with the modelled one and signal alongside it (1: the modelled blocks only).
    semaphore: bool = False
    copies: Expr = Const(1)
    # ClusterBarrier(leader_tracked=True): every arrival goes to the leader block's instance
    # only (coordinate 0 along the one collective axis); the other blocks' instances never
    # complete, so only the leader may wait.
    leader_tracked: bool = False
    # PTX-level: the protocol initialises each instance itself (`mbarrier_init`) and must make
    # the init visible (fences, a CTA or cluster sync) before anyone else uses it
    # (model/init_visibility.py). False: initialised before the kernel body, as Pallas does.
    explicit_init: bool = False

    @property
    def kind(self) -> str:
        if self.semaphore:
            return "Semaphore"
        return "ClusterBarrier" if self.cluster else "Barrier"


@dataclass(frozen=True, eq=False)
class BarrierRef:
    """`bar` or `bar.at[i, j]`, optionally on another block of the cluster (`block=`)."""

    alloc: BarrierAlloc
    index: tuple[Expr, ...] = ()
    block: tuple[Expr, ...] | None = None   # cluster coordinates of a remote block

    def __repr__(self) -> str:
        text = self.alloc.name
        if self.index:
            text += "[" + ", ".join(map(repr, self.index)) + "]"
        if self.block is not None:
            text += "@block(" + ", ".join(map(repr, self.block)) + ")"
        return text


@dataclass(frozen=True, eq=False)
class MemAlloc:
    """A buffer in shared memory (`space="smem"`) or tensor memory (`space="tmem"`) of every
    block, split into `shape` slots (a k-stage ring's stages, or a tile's rows and columns).
    Races are judged per cell: `granule[d]` consecutive slots of dimension d make one cell (a
    frontend picks it so that every region the kernel names is a union of whole cells, which
    keeps the overlap exact with few cells); none given, every slot is a cell."""

    name: str
    space: str = "smem"
    shape: tuple[Expr, ...] = (Const(1),)
    loc: Loc = UNKNOWN_LOC
    scalar: bool = True          # declared without slots: one slot, referenced unindexed
    granule: tuple[int, ...] = ()


@dataclass(frozen=True, eq=False)
class Slice:
    """`k.ds(start, size, stride)` / `pl.ds(...)` along one dimension: the `size` slots
    start, start + stride, ..., start + (size - 1) * stride."""

    start: Expr
    size: Expr
    stride: Expr = Const(1)

    def exprs(self) -> tuple[Expr, Expr, Expr]:
        return (self.start, self.size, self.stride)

    def __repr__(self) -> str:
        text = f"ds({self.start!r}, {self.size!r}"
        unit = isinstance(self.stride, Const) and self.stride.value == 1
        return text + (")" if unit else f", stride={self.stride!r})")


@dataclass(frozen=True, eq=False)
class MemRef:
    """`buf` (every slot), `buf.at[i]` (leading indices select slots) or a region
    `buf.at[i, k.ds(start, size)]`: after the leading indices `index`, one Slice per further
    dimension in `region`; dimensions named by neither are whole. An engine that reads only
    `index` judges the region as the whole rest of the buffer: coarser, never missing a race."""

    alloc: MemAlloc
    index: tuple[Expr, ...] = ()
    region: tuple[Slice, ...] = ()

    def exprs(self) -> tuple[Expr, ...]:
        """Every expression the reference depends on."""
        return self.index + tuple(e for s in self.region for e in s.exprs())

    def __repr__(self) -> str:
        if not self.index and not self.region:
            return self.alloc.name
        return self.alloc.name + "[" + ", ".join(map(repr, self.index + self.region)) + "]"


def has_regions(kernel: "Kernel") -> bool:
    """Does some memory effect of `kernel` name a region (a slice), not only slots?"""
    return any(ref.region for op in kernel.ops() for ref in op.reads + op.writes)


# ----------------------------------------------------------------------------------------------
# Program
# ----------------------------------------------------------------------------------------------

# Operation kinds: the primitive registry (model/kinds.py), filled by the families that
# declare them (model/primitives/, hw_barriers.py, init_visibility.py) when the package is
# imported. Each kind's doc line, operands, opcodes and compile hook are its `Primitive`.
OP_KINDS = _kinds.PRIMITIVES


def _describe_args(op: "Op", show: str) -> list[str]:
    """The arguments `describe` prints for one of a primitive's `shows`."""
    if show == "bytes":
        return [f"bytes={op.bytes!r}"]
    if show == "count_if_not_1":
        return [] if isinstance(op.count, Const) and op.count.value == 1 \
            else [f"count={op.count!r}"]
    if show == "signals":
        return [f"{ref!r} +{inc!r}" for ref, inc in op.signals]
    if show == "inc":
        return [f"inc={op.count!r}"]
    if show == "value":
        return [f"value={op.count!r}"] + ([] if op.decrement else ["decrement=False"])
    if show == "parity":
        return [f"phase={op.phase!r}" if op.phase is not None else f"parity={op.parity!r}"]
    if show == "count_last":
        return []           # after the collective axes (`describe`)
    raise AssertionError(f"{op.kind}: unknown `shows` entry {show!r}")


@dataclass(frozen=True, eq=False)
class Op:
    kind: str
    barrier: BarrierRef | None = None
    count: Expr = Const(1)          # arrivals (arrive)
    bytes: Expr = Const(0)          # tx bytes (copies, expect/complete_tx)
    parity: Expr | None = None      # wait_parity
    # wait_parity with the thread's own phase bookkeeping: the phase it means, counted from 0
    # (-1: the phase before the first, which a fresh barrier has already passed); parity is
    # phase % 2. None: a bare parity, judged by what it returns after (docs/parity.md)
    phase: Expr | None = None
    decrement: bool = True          # semaphore_wait
    collective_axes: tuple[str, ...] = ()   # multicast copies
    name: str = ""                  # unmodeled: the primitive's name; "syncthreads": a bar_sync
    #                                 without a count operand (every thread of the block)
    loc: Loc = UNKNOWN_LOC
    reads: tuple[MemRef, ...] = ()  # memory the op reads (MMA operands, a store's source)
    writes: tuple[MemRef, ...] = ()  # memory it writes (a copy's destination, an accumulator)
    bar_id: Expr | None = None      # bar_sync / bar_arrive: the named barrier (0..15)
    aligned: bool = True            # bar_sync: the .aligned form (`bar.sync`), which every
    #                                 blocking participant of a phase must reach at one site
    signals: tuple = ()             # semaphore_signal_parallel: ((BarrierRef, inc Expr), ...)

    def describe(self) -> str:
        """The op as the user would write it (its primitive's `describe`, else its kind, its
        barrier and the operands its primitive `shows`)."""
        prim = _kinds.lookup(self.kind)
        if prim is not None and prim.describe is not None:
            return prim.describe(self)
        shows = prim.shows if prim is not None else ()
        args = [repr(self.barrier)] if self.barrier is not None else []
        for show in shows:
            args += _describe_args(self, show)
        if self.collective_axes:
            args.append(f"collective_axes={self.collective_axes}")
        if "count_last" in shows:
            args.append(f"{self.count!r}")
        args += [f"reads={r!r}" for r in self.reads] + [f"writes={w!r}" for w in self.writes]
        return f"{self.kind}({', '.join(args)})"


@dataclass(frozen=True, eq=False)
class Loop:
    var: str
    trip: Expr
    body: tuple["Stmt", ...]
    loc: Loc = UNKNOWN_LOC


@dataclass(frozen=True, eq=False)
class When:
    cond: Expr
    then: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...] = ()
    loc: Loc = UNKNOWN_LOC


@dataclass(frozen=True, eq=False)
class WarpRegion:
    """`pl.core_map(plgpu.WarpMesh(axis_name=...))`: every warp of the thread runs `body`; the
    warpgroup forks at entry and joins at exit. Arrivals inside count one per warp."""

    axis: str
    body: tuple["Stmt", ...]
    loc: Loc = UNKNOWN_LOC


Stmt = Union[Op, Loop, When, WarpRegion]


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or `base2`, `base3`, ...: the first that is not in `taken`, which it joins.

    >>> taken = {"i"}
    >>> unique_name("i", taken), unique_name("i", taken)
    ('i2', 'i3')
    """
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    taken.add(name)
    return name


@dataclass(frozen=True, eq=False)
class Param:
    name: str
    default: int | None
    symbolic: bool = False


@dataclass(eq=False)
class Kernel:
    """One kernel's synchronization: shape, allocations, program."""

    name: str
    body: tuple[Stmt, ...]
    barriers: tuple[BarrierAlloc, ...] = ()
    buffers: tuple[MemAlloc, ...] = ()        # SMEM / TMEM whose accesses are checked for races
    params: dict[str, Param] = field(default_factory=dict)
    num_threads: Expr = Const(1)
    thread_axis: str = "thread"
    num_warps: int = 4                       # warps per warpgroup, used by WarpRegion
    warp_axis: str = "warp"
    cluster: tuple[tuple[str, Expr], ...] = ()  # (axis name, size) of one cluster of blocks
    grid: tuple[tuple[str, Expr], ...] = ()     # (axis name, number of clusters along it)
    assumptions: tuple[Expr, ...] = ()        # constraints on parameters (symbolic proofs)
    loc: Loc = UNKNOWN_LOC
    source: str = "dsl"                        # "dsl" or "pallas"
    expect: str | None = None                  # expected verdict of an example: "verified",
    #                                            "proved", "violation:BP100", ...
    notes: tuple[str, ...] = ()                # frontend remarks shown in reports

    def replace(self, **changes) -> "Kernel":
        return dataclasses.replace(self, **changes)

    def ops(self) -> Iterator[Op]:
        """Every operation in the program, in source order."""
        yield from iter_ops(self.body)

    def param_values(self, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        """Concrete parameter values: defaults, then overrides. Missing values are an error."""
        values: dict[str, int] = {}
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - set(self.params))
        if unknown:
            known = ", ".join(sorted(self.params)) or "none"
            raise ModelError(f"{self.name} has no parameter {', '.join(unknown)}",
                             loc=self.loc, hint=f"its parameters: {known}")
        for name, param in self.params.items():
            value = overrides.get(name, param.default)
            if value is None:
                raise ModelError(f"parameter `{name}` of {self.name} has no value",
                                 loc=self.loc, hint=f"pass --param {name}=N or give it a default")
            values[name] = int(value)
        return values


def has_memory_effects(kernel: Kernel) -> bool:
    """Does the kernel say which memory its operations touch (so races can be checked)?"""
    return any(op.reads or op.writes or op.kind in MEMORY_KINDS for op in kernel.ops())


def without_memory(kernel: Kernel) -> Kernel:
    """The kernel's barrier protocol alone: memory-only ops dropped, no buffers, no accesses on
    copies and MMAs (what the engines that do not model memory effects read)."""

    def strip(body):
        out = []
        for s in body:
            if isinstance(s, Op):
                if s.kind in MEMORY_KINDS:
                    continue
                if s.reads or s.writes:
                    s = dataclasses.replace(s, reads=(), writes=())
            elif isinstance(s, Loop):
                s = Loop(s.var, s.trip, strip(s.body), s.loc)
            elif isinstance(s, When):
                s = When(s.cond, strip(s.then), strip(s.orelse), s.loc)
            elif isinstance(s, WarpRegion):
                s = WarpRegion(s.axis, strip(s.body), s.loc)
            out.append(s)
        return tuple(out)

    if not kernel.buffers and not has_memory_effects(kernel):
        return kernel
    return kernel.replace(body=strip(kernel.body), buffers=())


def whole_buffers(kernel: Kernel) -> Kernel:
    """The kernel with every region widened to its leading indices (the rest of the buffer
    whole): what an engine that does not decide regions judges, coarser and so never missing
    a race; it can only find races the regions would not have."""
    def widen(op: Op) -> Op:
        if not any(r.region for r in op.reads + op.writes):
            return op
        return dataclasses.replace(
            op, reads=tuple(MemRef(r.alloc, r.index) for r in op.reads),
            writes=tuple(MemRef(w.alloc, w.index) for w in op.writes))
    return kernel.replace(body=map_ops(kernel.body, widen)) if has_regions(kernel) else kernel


# Kinds that exist only for their memory effects (their primitives' `memory` class).
MEMORY_KINDS = _kinds.MEMORY_KINDS


def walk(body: Sequence[Stmt]) -> Iterator[Stmt]:
    """Every statement, nested ones included, in source order."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, Loop):
            yield from walk(stmt.body)
        elif isinstance(stmt, When):
            yield from walk(stmt.then)
            yield from walk(stmt.orelse)
        elif isinstance(stmt, WarpRegion):
            yield from walk(stmt.body)


def iter_ops(body: Sequence[Stmt]) -> Iterator[Op]:
    """Every operation, in source order."""
    return (stmt for stmt in walk(body) if isinstance(stmt, Op))


def map_ops(body: Sequence[Stmt], fn) -> tuple:
    """The statements with every operation replaced by `fn(op)`: an Op, or a sequence of
    statements spliced in its place; loops, branches and warp regions are rebuilt around them."""
    out: list = []
    for stmt in body:
        if isinstance(stmt, Op):
            new = fn(stmt)
            out.extend(new) if isinstance(new, (list, tuple)) else out.append(new)
        elif isinstance(stmt, Loop):
            out.append(Loop(stmt.var, stmt.trip, map_ops(stmt.body, fn), stmt.loc))
        elif isinstance(stmt, When):
            out.append(When(stmt.cond, map_ops(stmt.then, fn), map_ops(stmt.orelse, fn),
                            stmt.loc))
        elif isinstance(stmt, WarpRegion):
            out.append(WarpRegion(stmt.axis, map_ops(stmt.body, fn), stmt.loc))
        else:
            out.append(stmt)
    return tuple(out)


# IR-READY
