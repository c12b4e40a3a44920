"""Persistent loops driven by cluster launch control: `while` over a CLC response's
`is_canceled`, as a loop of `clc_tiles` iterations.

How many tiles a CTA runs under CLC is the hardware scheduler's choice: each
`clc.try_cancel` either cancels a cluster not yet launched (one more tile) or fails (the
loop ends), so every schedule of cancels is a run of some N >= 1 iterations (the first
tile is the CTA's own), with the response read in iteration j cancelled iff j + 1 < N.
The loop becomes a `Loop` of the named parameter `clc_tiles` (the explorer checks
its launch value, `prove` every value >= 1 when it is symbolic), its body and the
try_cancel/response protocol inside it kept as they are, so races on the response buffer
and waits on its barrier are checked as any others.

Every partition reads the same response (one buffer, written by one try_cancel per
iteration, read once per iteration by each loop), so each runs the same N: the
`agreement` check states this structurally for the whole kernel, and a loop that does
not meet it is BP190 at its `while`, as is any `while` whose continuation is not exactly
the `is_canceled` of a response loaded unconditionally in its own body."""

from __future__ import annotations

import dataclasses
import re

from ..expr import mk, same, substitute
from ..ir import Const, Loc, Loop, Op, Var, iter_ops, walk
from .ttgir import Operation, Region
from .values import Mem, Unread
from .. import primitives as K

CLC_TILES = 3     # the launch value of `clc_tiles`: the CTA's own tile and two cancelled ones


@dataclasses.dataclass
class ClcLoop:
    thread: int              # the partition it runs in (0: the default partition)
    response: object         # the Alloc of the response buffer its condition reads
    loc: Loc
    var: str = ""            # the IR loop variable once translated
    nested: bool = False     # inside another loop (a run of N per outer iteration)


class ClcRules:
    def _clc(self) -> dict:
        state = self.__dict__.get("_clc_state")
        if state is None:
            state = self.__dict__["_clc_state"] = {"loops": [], "canceled": {}, "cancels": [],
                                                   "current": None}
        return state

    def clc_is_canceled(self, op: Operation, out):
        """In iteration j of a CLC loop, the response that drives it says cancelled iff
        another iteration follows: j + 1 < clc_tiles. Any other response is data."""
        seen = self._clc()["canceled"].get(op.operands[0]) if op.operands else None
        if seen is None:
            return None
        ivar, trip = seen
        return [mk("<", mk("+", self.value(ivar), Const(1)), trip)]

    def clc_while(self, op: Operation, out) -> list | None:
        """`while has_work:` with `has_work` first True, then the `is_canceled` of the response
        loaded in the body: a loop of `clc_tiles` iterations. None when it is not that loop."""
        before, after = op.regions
        condition = before.ops[-1]
        if len(before.ops) != 1 or condition.name != "scf.condition" or \
                condition.operands[0] not in before.args:
            return None
        k = before.args.index(condition.operands[0])
        inits = re.findall(r"%[\w.$-]+\s*=\s*(%[\w.$#-]+)", op.text.split(") :", 1)[0])
        last = after.ops[-1] if after.ops else None
        if last is None or last.name != "scf.yield" or len(inits) != len(before.args) or \
                len(last.operands) != len(before.args):
            return None
        canceled = next((o for o in after.ops if last.operands[k] in o.results), None)
        if canceled is None or canceled.name != "ttng.clc_is_canceled":
            return None
        load = next((o for o in after.ops if canceled.operands[0] in o.results), None)
        if load is None or load.name != "ttng.clc_load_result":
            raise Unread("the `is_canceled` ending the loop is not of a response loaded in its "
                         "body")
        if not same(self.int_value(inits[k], "the first condition"), Const(1)):
            raise Unread("a CLC loop whose first condition is not True (its first tile is "
                         "the CTA's own)")
        rest = [i for i in range(len(inits)) if i != k]
        if condition.operands[1:] != [before.args[i] for i in rest]:
            raise Unread("the values the `while` loop carries cannot be read")
        response = self.value(load.operands[0])
        if not isinstance(response, Mem):
            raise Unread("the response buffer of the loop's condition cannot be followed")
        state = self._clc()
        loop = ClcLoop(self.current_thread, response.alloc, self.where(op),
                       nested=bool(self.loop_vars) or state["current"] is not None)
        state["loops"].append(loop)
        trip = self.clc_trip()
        n = next(self._ids)
        ivar, bounds = f"%clc_iter{n}", [f"%clc_lo{n}", f"%clc_hi{n}", f"%clc_step{n}"]
        self.values.update(zip(bounds, (Const(0), trip, Const(1))))
        state["canceled"][load.results[0]] = (ivar, trip)
        text = f"scf.for {ivar} = {bounds[0]} to {bounds[1]} step {bounds[2]}"
        if rest:
            text += " iter_args(" + ", ".join(f"{after.args[j]} = {inits[i]}"
                                               for j, i in enumerate(rest)) + ")"
        tail = Operation("scf.yield", [], "scf.yield " + ", ".join(last.operands[i]
                                                                   for i in rest), last.loc)
        body = Region("body", [ivar] + list(after.args), after.ops[:-1] + [tail])
        mark = len(out)
        outer, state["current"] = state["current"], loop
        try:
            results = iter(self.scf_for(Operation("scf.for", [], text, op.loc, [body],
                                                  op.line), out) or [])
        finally:
            state["current"] = outer
        loop.var = next((s.var for s in out[mark:] if isinstance(s, Loop)), "")
        # `has_work` after the loop is False
        return [Const(0) if i == k else next(results, None) for i in range(len(inits))]

    def clc_trip(self) -> Var:
        """The one `clc_tiles` parameter every CLC loop of the kernel runs."""
        state = self._clc()
        if "trip" not in state:
            symbolic = self.launch.symbolic
            sym = symbolic is None or "clc_tiles" in symbolic
            state["trip"] = self.param("clc_tiles", CLC_TILES, sym)
            self.assumptions.append(state["trip"] >= 1)
        return state["trip"]

    def clc_cancel_issued(self, response) -> None:
        state = self._clc()
        state["cancels"].append((response, state["current"]))

    def clc_agreement(self, threads: list) -> list:
        """Every partition's CLC loop runs the same clc_tiles only if they all read the one
        response, written by a try_cancel issued once per iteration of one of them, at the
        same slot in each iteration, each partition with one such loop at its top level.
        Otherwise each CLC loop is BP190 at its `while`."""
        state = self._clc()
        loops = state["loops"]
        if not loops:
            return threads
        why = self._disagreement(loops, state["cancels"], threads)
        if why is None:
            self.notes.append(f"cluster launch control: the persistent loop runs clc_tiles "
                              f"tiles in every partition (the hardware's cancels; "
                              f"{CLC_TILES} at launch)")
            return threads
        threads = [list(t) for t in threads]
        for loop in loops:
            t = threads[loop.thread if loop.thread < len(threads) else 0]
            t[2] = [Op(K.UNMODELED, name=f"a `while` over a cluster launch control response: "
                       f"{why}", loc=loop.loc)] + list(t[2])
        return [tuple(t) for t in threads]

    def _disagreement(self, loops: list, cancels: list, threads: list) -> str | None:
        if any(lp.nested for lp in loops):
            return "the loop runs inside another loop"
        if any(not lp.var for lp in loops):
            return "its body has no closed form over the iterations"
        if len({lp.thread for lp in loops}) != len(loops):
            return "a partition runs two loops over responses"
        if len({id(lp.response) for lp in loops} | {id(r.alloc) if isinstance(r, Mem) else 0
                                                     for r, _ in cancels}) != 1:
            return "the partitions' loops read different responses"
        issuers = [lp for _, lp in cancels]
        if len(issuers) != 1 or issuers[0] is None:
            return "the response is not requested once per iteration of one loop"
        # each loop reads the slot the request writes in the same iteration
        slots = []
        for lp in loops:
            stmts = threads[lp.thread][2] if lp.thread < len(threads) else []
            body = next((s for s in walk(stmts) if isinstance(s, Loop) and s.var == lp.var),
                        None)
            if body is None:
                return "the loop cannot be found in its partition"
            if lp is issuers[0] and not any(
                    isinstance(o, Op) and o.kind == K.TMA_LOAD and
                    any(r.alloc.name == lp.response.name for r in o.writes) for o in body.body):
                return "the response is requested under a condition"
            if sum(1 for o in body.body if isinstance(o, Op) and o.kind == K.READ and
                   any(r.alloc.name == lp.response.name for r in o.reads)) != 1:
                return "a partition does not read the response once in each iteration"
            j = Var("clc_j")
            for o in iter_ops(body.body):
                for ref in o.writes if o.kind == K.TMA_LOAD else o.reads:
                    if ref.alloc.name == lp.response.name:
                        slots.append(tuple(substitute(i, {lp.var: j}) for i in ref.index))
        if any(len(s) != len(slots[0]) or not all(same(a, b) for a, b in zip(s, slots[0]))
               for s in slots):
            return "the partitions read the response at different slots in one iteration"
        return None

