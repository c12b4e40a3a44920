"""Structure: `ttg.warp_specialize` partitions as threads (with the fork and join around them),
`scf.for` as loops whose carried counters get closed forms (carries.py), `scf.if` as branches."""

from __future__ import annotations

import re

from ..expr import mk, opaque, opaque_vars, same, stmt_vars, substitute, substitute_stmts
from ..ir import (BarrierAlloc, BarrierRef, BinOp, Const, Expr, Loop, Op, Var, When,
                  free_vars)
from .arith import implied_constant, implied_positive
from .carries import discharged, solve
from .clc_loops import ClcRules
from .ttgir import Operation, Region
from .values import CARRY_PREFIX, Alloc, Unread
from .. import primitives as K

_GRID_QUERIES = ("tt.get_num_programs", "tt.get_program_id")
UNROLL_LIMIT = 64        # a loop whose carries have no closed form is unrolled up to this trip


class ControlRules(ClcRules):
    def warp_specialize(self, op: Operation, out: list):
        """One warp-specialized region: the default partition's code continues the kernel's
        (the code before it, and after an earlier region's join); its workers are threads of
        their own. A later region's workers start after the earlier region has joined."""
        captures = op.operands
        default = next((r for r in op.regions if r.label == "default"), None)
        workers = [r for r in op.regions if r.label.startswith("partition")]
        pre = list(out)
        out.clear()
        region = len(self.regions)
        self.current_thread = 0
        stmts = self.block(default.ops) if default else []
        if not self.threads:
            self.threads.append(("default", self.launch.num_warps, []))
        mine = []
        for wr in workers:
            for arg, cap in zip(wr.args, captures):
                self.values[arg] = self.value(cap)
            m = re.search(r"num_warps\((\d+)\)", wr.header)
            warps = int(m.group(1)) if m else 0
            self.warps = warps        # the partition's warps, for per-thread ops (0: unread)
            self.current_thread = len(self.threads)
            label = wr.label if not region else f"{wr.label} of region {region + 1}"
            try:
                self.threads.append((label, warps, self.block(wr.ops)))
            finally:
                self.warps = self.launch.num_warps
                self.current_thread = 0
            mine.append(self.threads[-1])
        self.regions.append((pre, stmts, mine))
        # its results are what the default partition yields: the code after the join runs in
        # that partition, so a phase carried out of its loop is read there (else: opaque)
        last = default.ops[-1] if default and default.ops else None
        if last is None or last.name != "ttg.warp_yield":
            return None
        return [self.value(v) for v in last.operands]

    def _fork_join(self, post: list) -> list:
        """Workers start at their warp_specialize, after the default partition's code before
        it (and after the join of an earlier region); the code after it runs once every
        partition of the region has returned. Each order becomes a barrier (arrived by the side
        that goes first) when there is code or a region to order."""
        loc = self.loc
        default, threads = [], []
        for r, (pre, inner, workers) in enumerate(self.regions):
            after = post if r == len(self.regions) - 1 else [None]
            suffix = str(r + 1) if r else ""
            if pre or r:
                start = self._order_barrier("warp_specialize_start" + suffix, 1)
                pre = pre + [Op(K.ARRIVE, BarrierRef(start), loc=loc)]
                workers = [(lb, w, [Op(K.WAIT_PARITY, BarrierRef(start), parity=Const(0),
                                       loc=loc)] + list(stmts)) for lb, w, stmts in workers]
            join = []
            if after:
                end = self._order_barrier("warp_specialize_end" + suffix, len(workers))
                workers = [(lb, w, list(stmts) + [Op(K.ARRIVE, BarrierRef(end), loc=loc)])
                           for lb, w, stmts in workers]
                join = [Op(K.WAIT_PARITY, BarrierRef(end), parity=Const(0), loc=loc)]
            default += pre + inner + join
            threads += workers
        label, warps, _ = self.threads[0]
        return [(label, warps, default + post)] + threads

    def _order_barrier(self, name: str, count: int) -> BarrierAlloc:
        bar = BarrierAlloc(name, Const(count), loc=self.loc)
        self.barriers[Alloc(name, (1,), "i64", "smem", self.loc)] = bar
        return bar

    def scf_for(self, op: Operation, out: list):
        m = re.match(r"^scf\.for\s+(%[\w.$-]+)\s*=\s*(%[\w.$#-]+)\s+to\s+(%[\w.$#-]+)\s+step\s+"
                     r"(%[\w.$#-]+)", op.text)
        if not m:
            raise Unread("the loop header cannot be read")
        ivar, lb, ub, step = m.groups()
        lo = self.int_value(lb, "the lower bound")
        hi = self.int_value(ub, "the upper bound")
        st = self.int_value(step, "the step")
        if not (isinstance(st, Const) and st.value > 0) and not free_vars(st):
            raise Unread("a loop step that is not positive")
        span = self._constant_span(mk("-", hi, lo))
        trip = span if same(st, Const(1)) else mk("//", mk("+", span, mk("-", st, Const(1))), st)
        trip = trip if isinstance(trip, Const) and trip.value >= 0 else mk("max", Const(0), trip)
        if isinstance(trip, Const):
            trip = Const(max(0, trip.value))
        inits = []
        if "iter_args" in op.text:
            inits = re.findall(r"%[\w.$-]+\s*=\s*(%[\w.$#-]+)", op.text.split("iter_args", 1)[1])
        region = op.regions[0]
        carried = region.args[1:]
        j = Var(self.fresh(ivar))
        index = mk("+", lo, mk("*", j, st))
        placeholders = {}
        for arg, init in zip(carried, inits):
            ph = Var(CARRY_PREFIX + self.fresh(arg))
            placeholders[arg] = (ph, self.value(init))
            self.values[arg] = ph
        self.values[ivar] = index
        self.loop_vars.append(j.name)
        self.loop_ranges.append(mk("and", j >= 0, j < trip))
        try:
            body = self.block(region.ops)
        finally:
            self.loop_vars.pop()
            self.loop_ranges.pop()
        yields = self._yields(region)
        carries = {ph.name: (init if isinstance(init, Expr) else opaque("carry"),
                             yields[k] if k < len(yields) and isinstance(yields[k], Expr)
                             else opaque("carry"))
                   for k, (ph, init) in enumerate(placeholders.values())}
        assumed: list = []
        at, after = solve(carries, j, trip, assumed)
        self.assumed_ranges += [(p, m) for p, m in assumed if p not in carries]
        for p, m in [(p, m) for p, m in self.assumed_ranges if p in carries]:
            if p not in at or not discharged(at[p], m):
                raise Unread(f"an inner loop takes `{p}` as a ring slot below {m}, which this "
                             "loop does not keep it")
        self.assumed_ranges = [(p, m) for p, m in self.assumed_ranges if p not in carries]
        needed = {p for p in carries if p in stmt_vars(body)}
        if needed - set(at):
            names = ", ".join(sorted(re.sub(r"_\d+$", "", a.lstrip("%"))
                                     for a, (ph, _) in placeholders.items()
                                     if ph.name in needed - set(at)))
            if isinstance(trip, Const) and trip.value <= UNROLL_LIMIT:
                return self._unrolled(op, region, ivar, lo, st, trip.value, placeholders, inits,
                                      out)
            pinned = self._at_launch(trip)
            if pinned is not None and isinstance(st, Const):
                # a counter advanced under a predicate, a phase flipped in a branch: the loop
                # is run at the launch's values, which the kernel is then checked at only
                value, params = pinned
                self.pinned.append((params, f"the loop-carried {names} of the loop at "
                                    f"{self.where(op)} has no closed form"))
                return self._unrolled(op, region, ivar, lo, st, value, placeholders, inits, out)
            raise Unread(f"the loop-carried {names} has no closed form and the trip count "
                         f"`{trip}` is not a constant")
        body = substitute_stmts(body, at)
        if body:
            out.append(Loop(j.name, trip, tuple(body), self.where(op)))
        return [after.get(ph.name, opaque("carry")) for ph, _ in placeholders.values()]

    def scf_while(self, op: Operation, out: list):
        """`while i < n: ...; i += c` (a Python `while` over a counter, a signed `<`) is the
        `scf.for` it counts; `while` over a cluster launch control response's `is_canceled` runs
        `clc_tiles` iterations (clc_loops.py). Any other `while` (a condition from data) has no
        trip count the model can follow: BP190 at its line."""
        if len(op.regions) != 2 or not op.regions[0].ops:
            raise Unread("the regions of the `while` loop cannot be read")
        clc = self.clc_while(op, out)
        if clc is not None:
            return clc
        before, after = op.regions
        inits = re.findall(r"%[\w.$-]+\s*=\s*(%[\w.$#-]+)", op.text.split(") :", 1)[0])
        condition = before.ops[-1]
        if condition.name != "scf.condition" or \
                any(not o.name.startswith("arith.") for o in before.ops[:-1]) or \
                not len(inits) == len(before.args) == len(after.args) or \
                condition.operands[1:] != before.args:
            raise Unread("a `while` loop whose condition is not a comparison of its counter")
        marks = [Var(CARRY_PREFIX + self.fresh(a)) for a in before.args]
        self.values.update(zip(before.args, marks))
        self.block(before.ops[:-1])
        test = self.value(condition.operands[0])
        compare = next((o for o in before.ops if condition.operands[0] in o.results), None)
        signed = compare is not None and re.match(r"^arith\.cmpi\s+slt\b", compare.text)
        k = next((k for k, m in enumerate(marks) if isinstance(test, BinOp) and test.op == "<"
                  and same(test.lhs, m)), None)
        if k is None or not signed or opaque_vars(test.rhs) or \
                free_vars(test.rhs) & {m.name for m in marks}:
            raise Unread("the condition of the `while` loop is not `counter < bound` over "
                         "values the model tracks (a trip count from data)")
        step = self._while_step(after, after.args[k])
        n = next(self._ids)
        bounds = [f"%while_lo{n}", f"%while_hi{n}", f"%while_step{n}"]
        self.values.update(zip(bounds, (self.value(inits[k]), test.rhs, step)))
        rest = [i for i in range(len(inits)) if i != k]
        text = f"scf.for {after.args[k]} = {bounds[0]} to {bounds[1]} step {bounds[2]}"
        if rest:
            text += " iter_args(" + ", ".join(f"{after.args[i]} = {inits[i]}" for i in rest) + ")"
        yields = after.ops[-1].operands
        tail = Operation("scf.yield", [], "scf.yield " + ", ".join(yields[i] for i in rest),
                         after.ops[-1].loc)
        body = Region("body", [after.args[k]] + [after.args[i] for i in rest],
                      after.ops[:-1] + [tail])
        results = iter(self.scf_for(Operation("scf.for", [], text, op.loc, [body], op.line),
                                    out) or [])
        # the counter's value after the loop is not tracked (an opaque value if used)
        return [None if i == k else next(results, None) for i in range(len(inits))]

    def _while_step(self, after: Region, counter: str) -> Expr:
        """What a `while` loop's body adds to its counter (`counter + c`): a positive constant,
        or a value the model tracks that the launch's assumptions make positive (a persistent
        loop's `tile += gl.num_programs(0)`)."""
        last = after.ops[-1] if after.ops else None
        k = after.args.index(counter)
        if last is None or last.name != "scf.yield" or len(last.operands) != len(after.args):
            raise Unread("the values the `while` loop carries cannot be read")
        step = next((o for o in after.ops if last.operands[k] in o.results), None)
        if step is None or step.name != "arith.addi" or counter not in step.operands[:2]:
            raise Unread("the counter of the `while` loop is not advanced by a constant")
        other = [self._invariant(after, a) for a in step.operands[:2] if a != counter]
        if len(other) != 1 or not isinstance(other[0], Expr) or opaque_vars(other[0]) or \
                any(n.startswith(CARRY_PREFIX) for n in free_vars(other[0])) or \
                not (isinstance(other[0], Const) and other[0].value > 0 or
                     implied_positive([*self.loop_ranges, *self.assumptions], other[0])):
            raise Unread("the counter of the `while` loop is not advanced by a value the "
                         "model tracks and knows to be positive")
        return other[0]

    def _invariant(self, body: Region, name: str):
        """The value of `name` where the loop body defines it from nothing the loop changes
        (the compiler leaves `gl.num_programs(0)` inside the loop): arithmetic and grid
        queries are pure, so reading them before the body is reading them in it. None where
        the definition depends on the iteration."""
        op = next((o for o in body.ops if name in o.results), None)
        if op is None:
            return self.value(name)
        if op.regions or any(a in body.args for a in op.operands) or \
                not (op.name.startswith("arith.") or op.name in _GRID_QUERIES) or \
                any(self._invariant(body, a) is None for a in op.operands):
            return None
        self.block([op], branch=True)
        return self.value(name)

    def _constant_span(self, span: Expr) -> Expr:
        """`hi - lo` as the constant it is for every parameter value (`range(n - 2, n)`, a
        pipeline's drain, runs 2 iterations), proved by Z3 from the enclosing loops' ranges
        and the launch's assumptions; otherwise as it is."""
        names = free_vars(span)
        if not names or any(n not in self.params or self.params[n].default is None
                            for n in names):
            return span
        value = substitute(span, {n: Const(self.params[n].default) for n in names})
        if isinstance(value, Const) and \
                implied_constant([*self.loop_ranges, *self.assumptions], span, value.value):
            return value
        return span

    def _at_launch(self, trip: Expr) -> tuple[int, set[str]] | None:
        """The trip count at the parameters' launch values, if small enough to unroll."""
        names = free_vars(trip)
        if not names or any(n not in self.params or self.params[n].default is None
                            for n in names):
            return None
        value = substitute(trip, {n: Const(self.params[n].default) for n in names})
        if not isinstance(value, Const) or not 0 <= value.value <= UNROLL_LIMIT:
            return None
        return max(0, value.value), names

    def _unrolled(self, op, region, ivar, lo, st, trip, placeholders, inits, out):
        current = [self.value(i) for i in inits]
        for k in range(trip):
            self.values[ivar] = mk("+", lo, Const(k * st.value)) if isinstance(st, Const) \
                else mk("+", lo, mk("*", Const(k), st))
            for arg, v in zip(placeholders, current):
                self.values[arg] = v
            out.extend(self.block(region.ops))
            current = self._yields(region)
        return current

    def _yields(self, region: Region) -> list:
        last = region.ops[-1] if region.ops else None
        if last is None or last.name != "scf.yield":
            return []
        return [self.value(v) for v in last.operands]

    def scf_if(self, op: Operation, out: list):
        cond = self.int_value(op.operands[0], "the condition")
        then = self.cp_branch(cond, True, op.regions[0].ops)
        then_y = self._yields(op.regions[0])
        orelse, else_y = [], []
        if len(op.regions) > 1:
            orelse = self.cp_branch(cond, False, op.regions[1].ops)
            else_y = self._yields(op.regions[1])
        if isinstance(cond, Const):
            out.extend(then if cond.value else orelse)
            return then_y if cond.value else else_y
        if then or orelse:
            out.append(When(cond, tuple(then), tuple(orelse), self.where(op)))
        return [self._select(cond, a, b) for a, b in zip(then_y, else_y)]
