"""Candidate repairs, one generator per bug class seen in real kernels.

Each generator proposes small edits of the IR; none is trusted: the search verifies every one
with the explorer (and the prover) before it is suggested. `size` ranks them: 1 for a changed
value, 2 for a removed or changed guard, 3 for an inserted operation, 4 for an inserted loop.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterator

from ...model.ir import (BarrierRef, BinOp, Const, Expr, Kernel, Loc, Loop, Op, UnOp, Var,
                         WarpRegion, When, emin)
from . import ir_edit as E
from .spelling import argument_text, spellings, written_value
from .source import (SourceEdit, Sources, dsl_expr, dsl_op, insert_lines, replace_argument,
                     replace_condition, unwrap_block)
from ...model import kinds, primitives as K

# The repair classes of the primitive registry (model/kinds.py REPAIR_CLASSES).
ARRIVING = kinds.having("arrives")
FILLING = kinds.having("fills")
WAITING = kinds.having("waits")
TENSOR_CORE = kinds.kinds_where(lambda p: p.tensor_core)


@dataclass
class Candidate:
    """One proposed repair: the repaired kernel, what it changes in words, and (where exact)
    the source edit that makes it."""

    fix_class: str
    description: str
    loc: Loc
    size: int
    kernel: Kernel
    source: list[SourceEdit] | None = None
    words: str = ""                       # the edit in words when it has no exact source form
    parents: list["Candidate"] = field(default_factory=list)
    cost: int = 0                         # tie-break within a size: simpler, more general first

    @property
    def key(self) -> str:
        return E.canonical(self.kernel)


def _text(expr: Expr, kernel: Kernel) -> str:
    return dsl_expr(expr, kernel)


# -- 1. num_arrivals ------------------------------------------------------------------------------

def num_arrivals(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    """The arrival count to the number of arriving threads, agents or cluster members."""
    # (value, cost): parameters and per-cluster counts generalize, constants least.
    pool: list[tuple[Expr, int]] = [(Const(n), 2) for n in (1, 2, 3, 4)]
    pool += [(Var(p), 0) for p in kernel.params]
    pool += [(kernel.num_threads, 1), (kernel.num_threads - 1, 1)]
    for axis, size in kernel.cluster:
        pool += [(Var(p) * size, 0) for p in kernel.params] + [(size, 2)]
    spelled = spellings(kernel)         # `STAGES - 1` stays `STAGES - 1`, not `3`
    for alloc in kernel.barriers:
        seen = {repr(alloc.num_arrivals)}
        line = src.line(alloc.loc)
        written = argument_text(line, "num_arrivals") if line else None
        for value, cost in pool:
            value = _simplify(value)
            if repr(value) in seen or (isinstance(value, Const) and value.value < 1):
                continue
            seen.add(repr(value))
            old, new = _text(alloc.num_arrivals, kernel), _text(value, kernel)
            if isinstance(value, Const) and value.value in spelled:
                new = spelled[value.value]
            if written is not None and written != old and isinstance(alloc.num_arrivals, Const) \
                    and written_value(kernel, written) == alloc.num_arrivals.value:
                old = written           # the argument as written, e.g. `STAGES`
            edit = replace_argument(src, alloc.loc, "num_arrivals", old, new)
            if edit is None and isinstance(alloc.num_arrivals, Const) \
                    and alloc.num_arrivals.value == 1:
                edit = _add_keyword(src, alloc.loc, f"num_arrivals={new}")
            yield Candidate("num_arrivals", f"`{alloc.name}`: num_arrivals={new} (was {old})",
                            alloc.loc, 1, E.replace_alloc(kernel, alloc, num_arrivals=value),
                            [edit] if edit else None,
                            f"declare `{alloc.name}` with num_arrivals={new}",
                            cost=2 if isinstance(value, Const) else cost)


def _simplify(expr: Expr) -> Expr:
    if isinstance(expr, BinOp) and isinstance(expr.lhs, Const) and isinstance(expr.rhs, Const):
        from ...model.ir import BINARY_OPS
        return Const(BINARY_OPS[expr.op](expr.lhs.value, expr.rhs.value))
    if isinstance(expr, BinOp) and expr.op == "*" and repr(expr.rhs) == "1":
        return expr.lhs
    if isinstance(expr, BinOp) and expr.op == "-" and isinstance(expr.lhs, BinOp) \
            and expr.lhs.op == "+" and repr(expr.lhs.rhs) == repr(expr.rhs):
        return expr.lhs.lhs
    return expr


def _add_keyword(src: Sources, loc: Loc, keyword: str) -> SourceEdit | None:
    """Add `keyword` as the last argument of the single Barrier call on the line."""
    text = src.line(loc)
    if text is None:
        return None
    for call in ("k.Barrier(", "k.ClusterBarrier("):
        start = text.find(call)
        if start < 0:
            continue
        depth, i = 0, start + len(call) - 1
        for i in range(start + len(call) - 1, len(text)):
            depth += text[i] == "("
            depth -= text[i] == ")"
            if depth == 0:
                break
        if depth != 0:
            return None
        inside = text[start + len(call):i].strip()
        new = f"{text[:i]}{', ' if inside else ''}{keyword}{text[i:]}"
        return SourceEdit(loc.file, loc.line, loc.line, new)
    return None


# -- 2. barrier kind: orders_tensor_core, Barrier <-> ClusterBarrier ------------------------------

def barrier_kind(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    tensor_core = {op.barrier.alloc for op in kernel.ops()
                   if op.kind in TENSOR_CORE and op.barrier is not None}
    async_arrivals = tensor_core | {op.barrier.alloc for op in kernel.ops() if op.barrier is not None
                                    and op.kind in (K.COPY_GMEM_TO_SMEM, K.TRY_CLUSTER_CANCEL)}
    for alloc in kernel.barriers:
        if alloc in tensor_core and not alloc.orders_tensor_core:
            edit = (replace_argument(src, alloc.loc, "orders_tensor_core", "False", "True")
                    or _add_keyword(src, alloc.loc, "orders_tensor_core=True"))
            yield Candidate("orders_tensor_core", f"`{alloc.name}`: orders_tensor_core=True",
                            alloc.loc, 1,
                            E.replace_alloc(kernel, alloc, orders_tensor_core=True),
                            [edit] if edit else None,
                            f"declare `{alloc.name}` with orders_tensor_core=True")
        if alloc.cluster and alloc in async_arrivals:
            line = src.line(alloc.loc)
            edit = None
            if line is not None and line.count("k.ClusterBarrier(") == 1:
                import re
                new = re.sub(r"k\.ClusterBarrier\(\s*(collective_axes\s*=\s*)?(\"[^\"]*\"|'[^']*'|"
                             r"\([^)]*\))\s*,\s*", "k.Barrier(", line)
                if new != line:
                    edit = SourceEdit(alloc.loc.file, alloc.loc.line, alloc.loc.line, new)
            yield Candidate("barrier_kind", f"`{alloc.name}`: a plain Barrier, not a ClusterBarrier "
                            "(TMA and tcgen05 arrive on plain Barriers only)", alloc.loc, 1,
                            E.replace_alloc(kernel, alloc, cluster=False, collective_axes=()),
                            [edit] if edit else None,
                            f"declare `{alloc.name}` with k.Barrier(...)")
        if not alloc.cluster and kernel.cluster and alloc not in async_arrivals:
            axes = tuple(a for a, _ in kernel.cluster)
            yield Candidate("barrier_kind", f"`{alloc.name}`: a ClusterBarrier over "
                            f"{', '.join(axes)} (its arrivals must reach every block)", alloc.loc,
                            1, E.replace_alloc(kernel, alloc, cluster=True, collective_axes=axes),
                            None, f"declare `{alloc.name}` with k.ClusterBarrier("
                            f"collective_axes={axes[0]!r}, ...)")


# -- 3. guards: remove one, drop a conjunct, fix a trip-count threshold -----------------------------

def guards(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not isinstance(stmt, When) or stmt.orelse or not _has_sync(stmt.then):
            continue
        cond = _text(stmt.cond, kernel)
        yield Candidate("guard", f"remove the guard `when({cond})`: its body runs every time",
                        stmt.loc, 2, kernel.replace(body=E.splice(kernel.body, path, stmt.then)),
                        _one(unwrap_block(src, stmt.loc)),
                        f"remove the condition `{cond}` (run its body unconditionally)", cost=1)
        parts = E.conjuncts(stmt.cond)
        if len(parts) > 1:
            for n, part in enumerate(parts):
                rest = E.conjoin(parts[:n] + parts[n + 1:])
                new = dataclasses.replace(stmt, cond=rest)
                yield Candidate("guard", f"drop `{_text(part, kernel)}` from the guard "
                                f"`when({cond})`", stmt.loc, 2,
                                kernel.replace(body=E.splice(kernel.body, path, (new,))),
                                _one(replace_condition(src, stmt.loc, _text(rest, kernel))),
                                f"guard with `{_text(rest, kernel)}` instead of `{cond}`")
        # A role meant for one warp (TMA issue, MMA issue) written for several.
        warp = Var(kernel.warp_axis)
        if any(isinstance(s, WarpRegion) for s in scope) and E.mentions(stmt.cond, warp.name) \
                and not (isinstance(stmt.cond, BinOp) and stmt.cond.op == "=="):
            one = BinOp("==", warp, Const(0))
            new = dataclasses.replace(stmt, cond=one)
            # One value in a condition, and it removes duplicate copies rather than counting
            # them: ranked before a changed arrival count.
            yield Candidate("guard", f"only warp 0 runs this (`when({_text(one, kernel)})`, was "
                            f"`when({cond})`)", stmt.loc, 1,
                            kernel.replace(body=E.splice(kernel.body, path, (new,))),
                            _one(replace_condition(src, stmt.loc, _text(one, kernel))),
                            f"guard with `{_text(one, kernel)}` instead of `{cond}`", cost=-1)
        # A reuse guard `i >= X` / `i > X` in a ring: the first reuse is at i >= slots.
        loops = [s for s in scope if isinstance(s, Loop)]
        sizes = {repr(E.shape_of(op.barrier)): E.shape_of(op.barrier) for op in
                 _ops(stmt.then) if op.barrier is not None and E.shape_of(op.barrier) is not None}
        if loops and isinstance(stmt.cond, BinOp) and stmt.cond.op in (">=", ">"):
            for size in sizes.values():
                new_cond = BinOp(">=", stmt.cond.lhs, size)
                if repr(new_cond) == repr(stmt.cond):
                    continue
                new = dataclasses.replace(stmt, cond=new_cond)
                text = _text(new_cond, kernel)
                yield Candidate("trip_guard", f"guard the slot reuse with `{text}` (was `{cond}`)",
                                stmt.loc, 2,
                                kernel.replace(body=E.splice(kernel.body, path, (new,))),
                                _one(replace_condition(src, stmt.loc, text)),
                                f"guard with `{text}` instead of `{cond}`", cost=0)


def missing_trip_guard(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    """A prologue operation on slot c outside any loop, run even when the loop over that ring
    has c steps or fewer (trip count 1): guard it with `trips > c`."""
    trips: dict = {}
    for _, stmt, _ in E.walk_paths(kernel.body):
        if isinstance(stmt, Loop):
            for op in _ops(stmt.body):
                if op.barrier is not None and E.shape_of(op.barrier) is not None:
                    trips.setdefault(op.barrier.alloc, {})[repr(stmt.trip)] = stmt.trip
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not (isinstance(stmt, Op) and stmt.barrier is not None and stmt.kind in
                FILLING | WAITING) or any(isinstance(s, Loop) for s in scope):
            continue
        index = stmt.barrier.index
        if len(index) != 1 or not isinstance(index[0], Const):
            continue
        for trip in trips.get(stmt.barrier.alloc, {}).values():
            guard = BinOp(">", trip, index[0])      # as Python builds `steps > 1`
            if isinstance(trip, Const) and trip.value > index[0].value:
                continue            # always true at these values: nothing to guard
            code = [f"with k.when({_text(guard, kernel)}):", f"    {dsl_op(stmt, kernel)}"]
            line = src.line(stmt.loc)
            edit = None
            if line is not None and line.strip() == dsl_op(stmt, kernel):
                indent = src.indent(stmt.loc)
                edit = SourceEdit(stmt.loc.file, stmt.loc.line, stmt.loc.line,
                                  "".join(f"{indent}{c}\n" for c in code))
            yield Candidate("trip_guard", f"run `{dsl_op(stmt, kernel)}` only when the loop has "
                            f"that step (`when({_text(guard, kernel)})`)", stmt.loc, 2,
                            kernel.replace(body=E.splice(kernel.body, path,
                                                         (When(guard, (stmt,), (), stmt.loc),))),
                            _one(edit), f"guard this line with `{code[0]}`")


def unwaited_fill(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    """A copy or arrival on a slot that no thread ever waits on at these parameter values (a
    prologue that fills more slots than there are steps): remove it."""
    if src.values is None:
        return
    try:
        program = E.unrolled(kernel, src.values)
    except Exception:       # a kernel the unrolling cannot evaluate: no candidate
        return
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not (isinstance(stmt, Op) and stmt.barrier is not None and stmt.kind in FILLING) \
                or any(isinstance(s, Loop) for s in scope):
            continue
        index = stmt.barrier.index
        if not index or not all(isinstance(i, Const) for i in index):
            continue
        slot = f"{stmt.barrier.alloc.name}{[i.value for i in index]}"
        if any(f"{kind} {slot}" in program for kind in WAITING):
            continue
        edit = None
        line = src.line(stmt.loc)
        if line is not None and line.strip() == dsl_op(stmt, kernel):
            edit = SourceEdit(stmt.loc.file, stmt.loc.line, stmt.loc.line, "")
        yield Candidate("unwaited_fill", f"remove `{dsl_op(stmt, kernel)}`: no step waits on "
                        f"slot {slot}", stmt.loc, 2,
                        kernel.replace(body=E.splice(kernel.body, path, ())), _one(edit),
                        "remove this operation (no step consumes that slot)")


def _one(edit: SourceEdit | None) -> list[SourceEdit] | None:
    return [edit] if edit else None


def _ops(body: tuple) -> list[Op]:
    return [s for _, s, _ in E.walk_paths(body) if isinstance(s, Op)]


def _has_sync(body: tuple) -> bool:
    return any(op.barrier is not None for op in _ops(body))


# -- 4. the missing wait before refilling a slot --------------------------------------------------

def _style(kernel: Kernel) -> str:
    return "parity" if any(op.kind == K.WAIT_PARITY for op in kernel.ops()) else "pallas"


def _released(kernel: Kernel) -> list:
    """Barriers on which some role arrives without copying: the `empty` side of a ring."""
    out = []
    for op in kernel.ops():
        if op.barrier is not None and op.kind in (K.BARRIER_ARRIVE, K.ARRIVE, K.TCGEN05_MMA,
                                                  K.TCGEN05_COMMIT_ARRIVE) \
                and op.barrier.alloc not in out:
            out.append(op.barrier.alloc)
    return out


REFILLING = FILLING | kinds.having("refills")


def missing_wait(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    """A slot (or a single buffer) refilled without waiting for its release."""
    style = _style(kernel)
    released = _released(kernel)
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not isinstance(stmt, Loop):
            continue
        waited = {op.barrier.alloc for op in _ops(stmt.body) if op.kind in WAITING}
        fills, seen = [], set()
        for op in stmt.body:
            if isinstance(op, Op) and op.kind in REFILLING and op.barrier is not None \
                    and op.barrier.alloc not in seen and op.barrier.block is None:
                seen.add(op.barrier.alloc)
                fills.append(op)
        for fill in fills:
            size, position = E.shape_of(fill.barrier), E.ring_position(fill.barrier)
            ring = size is not None and position is not None
            if not ring and not fill.barrier.alloc.scalar:
                continue
            for empty in released:
                if empty is fill.barrier.alloc or empty in waited:
                    continue
                if ring and (empty.scalar or repr(empty.shape[0]) != repr(size)):
                    continue
                if not ring and not empty.scalar:
                    continue
                ref = BarrierRef(empty, fill.barrier.index)
                i = Var(stmt.var)
                first_reuse = BinOp(">=", i, size) if ring else BinOp(">", i, Const(0))
                if style == "parity" and ring:
                    wait = Op(K.WAIT_PARITY, ref,
                              parity=BinOp("xor", (position // size) % 2, Const(1)), loc=fill.loc)
                    new: tuple = (wait,)
                    code = [dsl_op(wait, kernel)]
                else:
                    wait = Op(K.BARRIER_WAIT, ref, loc=fill.loc)
                    new = (When(first_reuse, (wait,), (), fill.loc),)
                    code = [f"with k.when({_text(first_reuse, kernel)}):",
                            f"    {dsl_op(wait, kernel)}"]
                first = path + ("body", 0)
                repaired = kernel.replace(body=E.insert(kernel.body, first, new))
                at = stmt.body[0].loc
                edit = insert_lines(src, at, src.indent(at), code) \
                    if src.line(at) is not None else None
                where = " ".join(c.strip() for c in code)
                yield Candidate("missing_wait", f"wait on `{empty.name}` for the release before "
                                f"refilling `{fill.barrier.alloc.name}` (`{where}`)", stmt.loc, 3,
                                repaired, _one(edit), f"insert `{where}` at the top of the loop")


# -- 5. the drain after the last step (producer tail) ---------------------------------------------

def drain(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    style = _style(kernel)
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not isinstance(stmt, Loop):
            continue
        waits = [op for op in _ops(stmt.body) if op.kind in WAITING and op.barrier is not None
                 and E.ring_position(op.barrier) is not None]
        if not waits:
            continue
        wait = waits[0]
        alloc, size = wait.barrier.alloc, E.shape_of(wait.barrier)
        # Already drained: a later loop of the same sequence waits on the same array.
        parent = E.get(kernel.body, path[:-2]) if len(path) > 1 else None
        seq = kernel.body if parent is None else getattr(parent, path[-2])
        later = seq[path[-1] + 1:]
        if any(op.kind in WAITING and op.barrier is not None and op.barrier.alloc is alloc
               for op in _ops(later)):
            continue
        var = "j" if "j" not in {s.var for _, s, _ in E.walk_paths(kernel.body)
                                 if isinstance(s, Loop)} - {stmt.var} else "drain_j"
        n, j = stmt.trip, Var(var)
        if style == "parity":
            v = n + j
            op = Op(K.WAIT_PARITY, BarrierRef(alloc, (v % size,)),
                    parity=BinOp("xor", (v // size) % 2, Const(1)), loc=stmt.loc)
            loop = Loop(var, size, (op,), stmt.loc)
            code = [f"with k.loop({_text(size, kernel)}) as {var}:", f"    {dsl_op(op, kernel)}"]
        else:
            tail = emin(n, size)
            op = Op(K.BARRIER_WAIT, BarrierRef(alloc, ((n - tail + j) % size,)), loc=stmt.loc)
            loop = Loop(var, tail, (op,), stmt.loc)
            code = [f"with k.loop({_text(tail, kernel)}) as {var}:", f"    {dsl_op(op, kernel)}"]
        repaired = kernel.replace(body=E.insert(kernel.body, path, (loop,), after=True))
        edit = insert_lines(src, stmt.loc, src.indent(stmt.loc), code, after_block=True) \
            if src.line(stmt.loc) is not None else None
        yield Candidate("drain", f"drain the last releases of `{alloc.name}` after the loop "
                        f"(wait on its last {_text(loop.trip, kernel)} slots)", stmt.loc, 4, repaired, _one(edit),
                        f"after this loop insert `{' '.join(c.strip() for c in code)}`")


def final_wait(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    """A barrier waited on in every iteration but the first (its slot is the same each time):
    after the loop, observe the last completion too."""
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not (isinstance(stmt, Op) and stmt.kind == K.BARRIER_WAIT and stmt.barrier is not None):
            continue
        outer = next((n for n, s in enumerate(scope) if isinstance(s, Loop)), None)
        if outer is None:
            continue
        loop = scope[outer]
        if any(E.mentions(i, loop.var) for i in stmt.barrier.index):
            continue
        # The role conditions between the loop and the wait (not those on the iteration).
        roles = []
        for n in range(outer + 1, len(scope)):
            when = scope[n]
            if not isinstance(when, When):
                break
            branch = path[2 * n + 1]
            cond = when.cond if branch == "then" else UnOp("not", when.cond)
            if not E.mentions(when.cond, loop.var):
                roles.append(cond)
        loop_path = path[:2 * outer + 1]
        guard = E.conjoin(roles + [BinOp(">", loop.trip, Const(0))])
        wait = Op(K.BARRIER_WAIT, stmt.barrier, loc=loop.loc)
        new = When(guard, (wait,), (), loop.loc)
        code = [f"with k.when({_text(guard, kernel)}):", f"    {dsl_op(wait, kernel)}"]
        edit = insert_lines(src, loop.loc, src.indent(loop.loc), code, after_block=True) \
            if src.line(loop.loc) is not None else None
        yield Candidate("drain", f"observe the last completion of "
                        f"`{dsl_op(wait, kernel)[len('k.barrier_wait('):-1]}` after the loop "
                        f"(`{code[0]} {code[1].strip()}`)", loop.loc, 3,
                        kernel.replace(body=E.insert(kernel.body, loop_path, (new,), after=True)),
                        _one(edit), f"after this loop insert `{code[0]} {code[1].strip()}`")


# -- 6. loop trip counts: align the roles, bound a drain by the steps ------------------------------

def trip_counts(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    loops = [(p, s) for p, s, _ in E.walk_paths(kernel.body) if isinstance(s, Loop)]
    for path, loop in loops:
        allocs = {op.barrier.alloc for op in _ops(loop.body) if op.barrier is not None}
        seen = {repr(loop.trip)}
        for other_path, other in loops:
            if other is loop or repr(other.trip) in seen:
                continue
            shares = allocs & {op.barrier.alloc for op in _ops(other.body) if op.barrier}
            if shares:
                seen.add(repr(other.trip))
                new = dataclasses.replace(loop, trip=other.trip)
                old_t, new_t = _text(loop.trip, kernel), _text(other.trip, kernel)
                yield Candidate("trip_count", f"loop {new_t} times like the other role's loop "
                                f"(was {old_t})", loop.loc, 1,
                                kernel.replace(body=E.splice(kernel.body, path, (new,))),
                                _one(_loop_trip_edit(src, loop, old_t, new_t)),
                                f"loop {new_t} times instead of {old_t}", cost=len(new_t))
        # A drain over every slot when fewer steps ran: bound it by the previous loop's trips.
        if len(path) >= 1 and path[-1] > 0:
            parent = E.get(kernel.body, path[:-2]) if len(path) > 1 else None
            seq = kernel.body if parent is None else getattr(parent, path[-2])
            before = seq[path[-1] - 1]
            if isinstance(before, Loop) and repr(before.trip) != repr(loop.trip) \
                    and not (isinstance(loop.trip, BinOp) and loop.trip.op == "min"):
                bound = emin(before.trip, loop.trip)
                new = E.map_stmts((dataclasses.replace(loop, trip=bound),),
                                  lambda s: E.map_exprs(s, lambda x: E.substitute(
                                      x, loop.trip, bound)))[0]
                new = dataclasses.replace(new, trip=bound)
                text = _text(bound, kernel)
                yield Candidate("drain_bound", f"bound the drain by the steps that ran: "
                                f"{text} instead of {_text(loop.trip, kernel)}", loop.loc, 2,
                                kernel.replace(body=E.splice(kernel.body, path, (new,))), None,
                                f"drain {text} slots (and index from steps - {text})")


def _loop_trip_edit(src: Sources, loop: Loop, old: str, new: str) -> SourceEdit | None:
    text = src.line(loop.loc)
    if text is None or text.count(f"k.loop({old})") != 1:
        return None
    return SourceEdit(loop.loc.file, loop.loc.line, loop.loc.line,
                      text.replace(f"k.loop({old})", f"k.loop({new})"))


# -- 7. slot index and parity ----------------------------------------------------------------------

def index_and_parity(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not isinstance(stmt, Op) or stmt.barrier is None:
            continue
        loops = [s for s in scope if isinstance(s, Loop)]
        ref, size = stmt.barrier, E.shape_of(stmt.barrier)
        if size is not None and ref.index and E.ring_position(ref) is None \
                and not isinstance(ref.index[0], Const):
            yield _slot_index(kernel, src, ref, size)
        if stmt.kind != K.WAIT_PARITY or not loops:
            continue
        position = E.ring_position(ref) if size is not None else None
        if position is None:
            position = Var(loops[-1].var)
        slots = size if size is not None else Const(1)
        base = position % 2 if repr(slots) == "1" else (position // slots) % 2
        # The parity offset: the same phase formula with the opposite starting phase.
        old = stmt.parity
        if isinstance(old, BinOp) and old.op == "xor" and isinstance(old.rhs, Const):
            flipped = old.lhs if old.rhs.value == 1 else BinOp("xor", old.lhs, Const(1))
        else:
            flipped = BinOp("xor", old, Const(1))
        for parity in (base, BinOp("xor", base, Const(1)), flipped):
            if repr(parity) == repr(stmt.parity):
                continue
            new = dataclasses.replace(stmt, parity=parity)
            yield _op_candidate(kernel, src, path, stmt, new, "parity",
                                f"wait for parity {_text(parity, kernel)} "
                                f"(was {_text(stmt.parity, kernel)})")


def _slot_index(kernel: Kernel, src: Sources, ref: BarrierRef, size: Expr) -> Candidate:
    """`bar.at[v]` -> `bar.at[v % slots]` in every operation that indexes the ring with v."""
    index = ref.index[0]
    fixed = BarrierRef(ref.alloc, (index % size,), ref.block)
    edits: list[SourceEdit] | None = []
    locs = []

    def fix(stmt):
        nonlocal edits
        if isinstance(stmt, Op) and stmt.barrier is not None and stmt.barrier.alloc is ref.alloc \
                and repr(stmt.barrier.index) == repr(ref.index):
            new = dataclasses.replace(stmt, barrier=dataclasses.replace(stmt.barrier,
                                                                        index=fixed.index))
            locs.append(stmt.loc)
            text = src.line(stmt.loc)
            old_call, new_call = dsl_op(stmt, kernel), dsl_op(new, kernel)
            if edits is not None and text is not None and text.count(old_call) == 1:
                edits.append(SourceEdit(stmt.loc.file, stmt.loc.line, stmt.loc.line,
                                        text.replace(old_call, new_call)))
            else:
                edits = None
            return new
        return stmt
    body = E.map_stmts(kernel.body, fix)
    new_ref = dsl_expr(index % size, kernel)
    return Candidate("slot_index", f"index `{ref.alloc.name}` modulo its slots: "
                     f"{ref.alloc.name}.at[{new_ref}] ({len(locs)} place(s))", locs[0], 1,
                     kernel.replace(body=body), edits or None,
                     f"index `{ref.alloc.name}` with [{new_ref}] wherever it uses "
                     f"[{dsl_expr(index, kernel)}]")


def _op_candidate(kernel: Kernel, src: Sources, path, old: Op, new: Op, fix_class: str,
                  description: str) -> Candidate:
    edit = None
    text = src.line(old.loc)
    old_call, new_call = dsl_op(old, kernel), dsl_op(new, kernel)
    if text is not None and text.count(old_call) == 1:
        edit = SourceEdit(old.loc.file, old.loc.line, old.loc.line,
                          text.replace(old_call, new_call))
    return Candidate(fix_class, description, old.loc, 1,
                     kernel.replace(body=E.splice(kernel.body, path, (new,))), _one(edit),
                     f"write `{new_call}`")


# -- 8. transaction bytes: expect_tx against the copies ---------------------------------------------

def tx_bytes(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not isinstance(stmt, Op) or stmt.kind not in (K.ARRIVE_EXPECT_TX, K.EXPECT_TX):
            continue
        parent_path, index = path[:-1], path[-1]
        seq = kernel.body if len(path) == 1 else getattr(E.get(kernel.body, path[:-2]), path[-2])
        same = lambda op: (isinstance(op, Op) and op.barrier is not None  # noqa: E731
                           and repr(op.barrier) == repr(stmt.barrier))
        loads = [(n, op) for n, op in enumerate(seq) if same(op) and op.kind == K.TMA_LOAD]
        if not loads:
            load = Op(K.TMA_LOAD, stmt.barrier, bytes=stmt.bytes, loc=stmt.loc)
            repaired = kernel.replace(body=E.insert(kernel.body, path, (load,), after=True))
            code = dsl_op(load, kernel)
            edit = insert_lines(src, stmt.loc, src.indent(stmt.loc), [code]) \
                if src.line(stmt.loc) is not None else None
            if edit is not None:
                edit = SourceEdit(edit.file, edit.start + 1, edit.end + 1, edit.text)
            yield Candidate("tx_bytes", f"issue the copy that expect_tx announces: insert "
                            f"`{code}` after it", stmt.loc, 3, repaired, _one(edit),
                            f"insert `{code}` after this line")
            continue
        total = loads[0][1].bytes
        for _, op in loads[1:]:
            total = total + op.bytes
        total = _simplify(total)
        if repr(total) != repr(stmt.bytes):
            new = dataclasses.replace(stmt, bytes=total)
            yield _op_candidate(kernel, src, path, stmt, new, "tx_bytes",
                                f"expect the bytes the copies deliver: {_text(total, kernel)} "
                                f"(was {_text(stmt.bytes, kernel)})")
        if len(loads) == 1 and repr(loads[0][1].bytes) != repr(stmt.bytes):
            n, load = loads[0]
            new = dataclasses.replace(load, bytes=stmt.bytes)
            yield _op_candidate(kernel, src, parent_path + (n,), load, new, "tx_bytes",
                                f"copy the bytes expect_tx announces: {_text(stmt.bytes, kernel)}"
                                f" (was {_text(load.bytes, kernel)})")


def move_into_branch(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    """An expect_tx / arrive run by every thread while only one branch issues the copy: move it
    into that branch, just before the copy."""
    for path, stmt, scope in E.walk_paths(kernel.body):
        if not (isinstance(stmt, Op) and stmt.barrier is not None
                and stmt.kind in (K.EXPECT_TX, K.ARRIVE_EXPECT_TX, K.ARRIVE, K.BARRIER_ARRIVE)):
            continue
        seq_path, index = path[:-1], path[-1]
        seq = kernel.body if len(path) == 1 else getattr(E.get(kernel.body, path[:-2]), path[-2])
        for n, other in enumerate(seq):
            if n == index or not isinstance(other, When):
                continue
            for branch in ("then", "orelse"):
                body = getattr(other, branch)
                copies = [m for m, op in enumerate(body) if isinstance(op, Op) and op.kind in
                          (K.TMA_LOAD, K.COPY_GMEM_TO_SMEM) and op.barrier is not None
                          and repr(op.barrier) == repr(stmt.barrier)]
                if not copies:
                    continue
                moved = dataclasses.replace(other, **{branch: body[:copies[0]] + (stmt,)
                                                      + body[copies[0]:]})
                new_seq = list(seq)
                new_seq[n] = moved
                del new_seq[index]
                if len(path) == 1:
                    new_body = tuple(new_seq)
                else:
                    parent = E.get(kernel.body, path[:-2])
                    new_body = E.splice(kernel.body, path[:-2], (dataclasses.replace(
                        parent, **{path[-2]: tuple(new_seq)}),))
                target = body[copies[0]]
                edits = None
                line, at = src.line(stmt.loc), src.line(target.loc)
                if line is not None and at is not None and stmt.loc.line != target.loc.line:
                    indent = src.indent(target.loc)
                    edits = [SourceEdit(stmt.loc.file, stmt.loc.line, stmt.loc.line, ""),
                             SourceEdit(target.loc.file, target.loc.line, target.loc.line - 1,
                                        indent + line.lstrip())]
                where = "the branch" if branch == "then" else "the else branch"
                yield Candidate("move_into_branch", f"move `{dsl_op(stmt, kernel)}` into {where} "
                                f"that issues the copy (`when({_text(other.cond, kernel)})`)",
                                stmt.loc, 2, kernel.replace(body=new_body), edits,
                                f"move this line to just before line {target.loc.line}")


# -- 9. a wait on a peer's instance -----------------------------------------------------------------

def local_wait(kernel: Kernel, src: Sources) -> Iterator[Candidate]:
    for path, stmt, _ in E.walk_paths(kernel.body):
        if isinstance(stmt, Op) and stmt.kind in WAITING and stmt.barrier is not None \
                and stmt.barrier.block is not None:
            new = dataclasses.replace(stmt, barrier=dataclasses.replace(stmt.barrier, block=None))
            yield _op_candidate(kernel, src, path, stmt, new, "local_wait",
                                f"wait on the block's own instance: {dsl_op(new, kernel)}")


GENERATORS = (num_arrivals, barrier_kind, index_and_parity, tx_bytes, local_wait, guards,
              move_into_branch, missing_trip_guard, unwaited_fill,
              trip_counts, missing_wait, drain, final_wait)


def candidates(kernel: Kernel, src: Sources | None = None) -> list[Candidate]:
    """Every candidate repair of `kernel`, smallest edits first, without duplicates."""
    src = src or Sources(kernel)
    original = E.canonical(kernel)
    out, seen = [], {original}
    for generate in GENERATORS:
        for cand in generate(kernel, src):
            key = cand.key
            if key not in seen:
                seen.add(key)
                out.append(cand)
    out.sort(key=lambda c: (c.size, c.cost))
    return out
