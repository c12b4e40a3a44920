"""Run a kernel's MLIR for one warp, lane by lane, and record what it synchronizes on.

The kernel is SIMT code: every lane of every warp runs the same body, and roles come from
`scf.if` on values computed from `nvvm.read.ptx.sreg.tid.x`. The interpreter runs the body for
one warp at a time with the 32 lanes as vectors (values.Lanes): a branch that is the same in
every lane is taken by the warp; one that differs splits the warp, each side run with its lanes
active (so `elect_one` or `tidx % 32 < n` picks lanes, and an arrive counts its active lanes).
Loops run to their trip counts, so PipelineState's index and phase are plain numbers in each
iteration. What decides synchronization but cannot be computed (data, a kernel argument, an
op the table does not know) is an `unmodeled` event at its line: BP190, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import primitives as K
from ..ir import Loc, ModelError
from . import arith, guards, walks
from .handlers import RULES, synchronizes
from .tree import Block, KernelTree, Node
from .values import WARP, Coord, Data, Lanes, Tested, Unknown, uniform

# Iterations of one loop the interpreter runs before it gives up on it (BP190), and the
# synchronizing operations one warp may run before the kernel is too large to explore.
MAX_TRIPS = 4096
MAX_EVENTS = 20_000


@dataclass(frozen=True)
class Event:
    """One synchronizing operation of one warp, in program order."""

    kind: str                          # an IR op kind (model/ir.py OP_KINDS)
    loc: Loc | None
    barrier: tuple | None = None       # (buffer, byte offset) of an mbarrier
    count: int = 1                     # arrivals, or threads of a named barrier
    bytes: int = 0
    parity: int | None = None
    bar_id: int | None = None
    name: str = ""                     # unmodeled: what was not read
    aligned: bool = True               # a named barrier: bar.sync (aligned) or barrier.sync
    site: int = 0                      # the MLIR op: one IR op per op and operands, so warps
    #                                    running the same bar.sync share its instruction
    reads: tuple = ()                  # shared-memory footprints (smem.py) it reads
    writes: tuple = ()                 # and writes


class _Stop(Exception):
    pass


class Warp:
    """The interpreter for one warp of one kernel."""

    def __init__(self, kernel: KernelTree, warp: int, allocations: dict,
                 block: tuple[int, int, int] | None = None, grid_why: str = "",
                 bindings: dict[int, int] | None = None):
        self.kernel = kernel
        # kernel argument index, or ("node", id) of an op, -> its value in this run
        self.bindings = bindings or {}
        self.warp = warp
        self.block_index = block                # this block's index, if runs are per block
        self.grid_why = grid_why                # else why not: for the BP190 message
        self.env: dict[int, object] = {}
        self.events: list[Event] = []
        self.allocations = allocations          # alloca node id -> buffer name (shared)
        self._syncs: dict[int, bool] = {}
        self.defined_at: dict[tuple, Loc] = {}    # (value,) -> the line that computed it
        # shared-memory data (smem.py): what was not read exactly, per buffer, for the notes;
        # TMA stores issued since the last bulk commit, and the size of each group committed
        self.memory_notes: dict[tuple[str, str], Loc | None] = {}
        self.bulk_pending = 0
        # cp.async (cp_async.py): copies of the group being built, the event count at its first
        # copy, and whether the warp committed a group yet
        self.cp_pending: list = []
        self.cp_since = 0
        self.cp_used = False
        self.bulk_groups: list[int] = []
        # WGMMAs of the commit group being built, each group's count, and the event count
        # after the last MMA (the next one joins it when nothing came between)
        self.wgmma_open = 0
        self.wgmma_groups: list[int] = []
        self.mma_joinable = -1

    # -- values ------------------------------------------------------------------------------
    def get(self, key: int):
        return self.env.get(key, Unknown("a value defined outside the kernel"))

    def args(self, node: Node) -> list:
        return [self.get(k) for k in node.operands]

    def emit(self, kind: str, node: Node, **fields) -> None:
        if len(self.events) >= MAX_EVENTS:
            raise ModelError(f"warp {self.warp} of {self.kernel.name} runs more than "
                             f"{MAX_EVENTS} synchronizing operations", loc=self.where(node),
                             hint="compile the target at a smaller size (fewer K tiles or "
                                  "steps): the checker unrolls every loop")
        self.events.append(Event(kind, self.where(node), site=id(node), **fields))

    def where(self, node: Node) -> Loc | None:
        """The user's line of an op. Control flow has none of its own: a branch is at the
        line of its condition, a loop at the first line of its body."""
        if node.loc is not None:
            return node.loc
        if node.name == "scf.if" and node.operands in self.defined_at:
            return self.defined_at[node.operands]
        located = next((op.loc for op in node.walk() if op.loc is not None), None)
        return located or self.kernel.loc

    def unmodeled(self, node: Node, what: str) -> None:
        self.emit(K.UNMODELED, node, name=what)

    def memory_note(self, node: Node, buffer: str, what: str) -> None:
        """A shared-memory access read coarsely or not at all: said in the verdict's notes
        (translate.py drops the ones about buffers that hold only barriers)."""
        self.memory_notes.setdefault((buffer, what), self.where(node))

    def region_touches_memory(self, node: Node) -> bool:
        from .smem import touches_memory
        return any(touches_memory(op) for op in node.walk() if op is not node)

    def region_synchronizes(self, node: Node) -> bool:
        key = id(node)
        if key not in self._syncs:
            self._syncs[key] = any(synchronizes(op) for op in node.walk() if op is not node)
        return self._syncs[key]

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> list[Event]:
        body = self.kernel.body
        from .handlers import kernel_argument
        for i, (key, text) in enumerate(zip(body.args, self.kernel.arg_types)):
            self.env[key] = self.bindings[i] if i in self.bindings else kernel_argument(i, text)
        self.block(body, tuple(range(WARP)), ())
        if self.cp_pending:
            from .cp_async import leftover
            leftover(self, "a cp.async copy never committed to a group (commit_group) nor "
                           "completed on an mbarrier")
        return self.events

    def block(self, block: Block, active: tuple[int, ...], args) -> list | None:
        """Run a block with `args` bound to its arguments; the values its terminator yields."""
        for key, value in zip(block.args, args):
            self.env[key] = value
        for node in block.ops:
            if node.name in ("scf.yield", "scf.condition"):
                return self.args(node)
            self.step(node, active)
        return None

    def step(self, node: Node, active: tuple[int, ...]) -> None:
        control = _CONTROL.get(node.name)
        bound = self.bindings.get(("node", id(node)))
        if bound is not None:               # a runtime value this run fixes (family.py)
            results = [bound]
        elif control is not None:
            results = control(self, node, active)
        else:
            rule = RULES.get(node.name)
            if rule is not None:
                results = rule(self, node, active)
            elif node.name in _ARITH:
                results = _ARITH[node.name](self, node)
            else:
                results = self.other(node, active)
        if results is None:
            results = [Unknown(node.name)] * len(node.results)
        for key, value in zip(node.results, results):
            self.env[key] = value
        if node.loc is not None and len(node.results) == 1:
            self.defined_at[node.results] = node.loc

    def other(self, node: Node, active) -> list | None:
        """An op with no row: BP190 if it (or its regions) synchronizes, else its results are
        Unknown (layout algebra, math, memory access: nothing a barrier depends on)."""
        if synchronizes(node) or (node.regions and self.region_synchronizes(node)):
            self.unmodeled(node, node.name)
        from . import smem, tmem
        views = tmem.view(self, node)                  # a view of a tensor in TMEM
        if views is not None:
            return [v if v is not None else Unknown(node.name) for v in views]
        views = smem.smem_result(self, node, active)     # a view of shared-memory data
        if views is not None:
            return views
        smem.unread_access(self, node, active)
        from .handlers import static_value      # a CuTe op whose result type is its value
        return [static_value(t) if static_value(t) is not None else Unknown(node.name)
                for t in node.types]

    # -- control flow ------------------------------------------------------------------------
    def scf_if(self, node: Node, active) -> list | None:
        cond = self.get(node.operands[0])
        then = node.regions[0][0] if node.regions and node.regions[0] else None
        orelse = node.regions[1][0] if len(node.regions) > 1 and node.regions[1] else None
        if isinstance(cond, Tested) and self.region_synchronizes(node):
            return self.after_test(node, cond, then, orelse, active)
        if isinstance(cond, Unknown):
            if self.region_synchronizes(node):
                self.unmodeled(node, f"scf.if on {cond.why}")
            elif self.region_touches_memory(node):
                # shared-memory accesses on either side count as made (coarser, never missing)
                self.memory_note(node, "", "shared-memory accesses under a branch on data "
                                           "count as always made")
                for block in (then, orelse):
                    if block is not None:
                        self.block(block, active, ())
            return None
        if not isinstance(cond, Lanes):
            chosen = then if cond else orelse
            return self.block(chosen, active, ()) if chosen is not None else None
        taken = tuple(lane for lane in active if cond[lane])
        other = tuple(lane for lane in active if not cond[lane])
        out_then = self.block(then, taken, ()) if taken and then is not None else None
        out_else = self.block(orelse, other, ()) if other and orelse is not None else None
        if not node.results:
            return None
        if out_then is None or out_else is None:
            return out_then if out_else is None else out_else
        return [_merge(a, b, set(taken)) for a, b in zip(out_then, out_else)]

    def after_test(self, node: Node, test: Tested, then, orelse, active) -> list | None:
        """`if the try_wait failed: wait on the same phase`, and nothing that synchronizes on
        the other side: the warp has observed that phase either way, as one blocking wait.
        Any other use of the answer is BP190."""
        failed, passed = (then, orelse) if test.failed_when else (orelse, then)
        sides = []
        for block in (failed, passed):
            mark = len(self.events)
            out = self.block(block, active, ()) if block is not None else None
            sides.append((out, self.events[mark:]))
            del self.events[mark:]
        (out_failed, waits), (out_passed, others) = sides
        if not others and len(waits) == 1 and waits[0].kind == K.WAIT_PARITY \
                and (waits[0].barrier, waits[0].parity) == (test.barrier, test.parity):
            self.events.extend(waits)
            return out_failed if out_failed == out_passed else None
        self.unmodeled(node, f"scf.if on {test.why}")
        return None

    def scf_for(self, node: Node, active) -> list | None:
        lower, upper, step, *init = self.args(node)
        bounds = [uniform(v, active) for v in (lower, upper, step)]
        if not all(isinstance(b, int) for b in bounds) or bounds[2] <= 0:
            if self.region_synchronizes(node):
                why = next((v.why for v in (lower, upper, step) if isinstance(v, Unknown)),
                           "bounds that differ between lanes")
                self.unmodeled(node, f"scf.for with a trip count from {why}")
            elif self.region_touches_memory(node):
                self._loop_left_out(node)
            return None
        lo, hi, st = bounds
        if (hi - lo + st - 1) // st > MAX_TRIPS:
            if self.region_synchronizes(node):
                self.unmodeled(node, f"scf.for of more than {MAX_TRIPS} iterations")
            elif self.region_touches_memory(node):
                self._loop_left_out(node)
            return None
        body = node.regions[0][0]
        carried = list(init)
        # iteration marks around a loop that synchronizes: translate.py rolls the iterations
        # back into one IR loop when they differ only in ring slots and parities
        marked = self.region_synchronizes(node)
        if marked:
            self.emit("loop", node, name="begin")
            walks.record(self.kernel, self.block_index, self.where(node), self.bindings,
                         lo, hi, st)
        for i in range(lo, hi, st):
            if marked:
                self.emit("loop", node, name="iteration")
            carried = self.block(body, active, [i] + carried) or []
        if marked:
            self.emit("loop", node, name="end")
        return carried

    def _loop_left_out(self, node: Node) -> None:
        self.memory_note(node, "", "the shared-memory accesses of a loop that holds nothing "
                                   "else and whose trip count is not known are not read: "
                                   "races through them are not checked")

    def scf_while(self, node: Node, active) -> list | None:
        before, after = node.regions[0][0], node.regions[1][0]
        carried = self.args(node)
        # iteration marks, as scf.for's, when only the body synchronizes (a tile scheduler's
        # `while work.is_valid_tile`): each iteration is one run of the body
        marked = self.region_synchronizes(node) and \
            not any(synchronizes(op) for top in before.ops for op in top.walk())
        if marked:
            self.emit("loop", node, name="begin")
        for _ in range(MAX_TRIPS):
            mark = len(self.events)
            cond, *passed = self.block(before, active, carried) or [Unknown("scf.while")]
            if isinstance(cond, Tested) and not marked:
                return self.spin(node, cond, carried, passed, active, mark)
            cond = uniform(cond, active)
            if not isinstance(cond, int):
                if marked:
                    self.emit("loop", node, name="end")
                if self.region_synchronizes(node):
                    why = cond.why if isinstance(cond, Unknown) else "lanes that disagree"
                    self.unmodeled(node, f"scf.while on {why}")
                return None
            if not cond:
                if marked:
                    self.emit("loop", node, name="end")
                return passed
            if marked:
                self.emit("loop", node, name="iteration")
            carried = self.block(after, active, passed) or []
        if marked:
            self.emit("loop", node, name="end")
        if self.region_synchronizes(node):      # after the marks: outside the loop
            self.unmodeled(node, f"scf.while of more than {MAX_TRIPS} iterations")
        return None

    def spin(self, node: Node, test: Tested, carried, passed: list, active, mark: int) -> list | None:
        """`while not try_wait(bar, parity): <nothing that synchronizes>`: the loop leaves
        once that phase has completed, as one blocking wait does. Any other loop on the
        answer is BP190."""
        after = node.regions[1][0]
        before_events = self.events[mark:]
        del self.events[mark:]
        body_mark = len(self.events)
        out = self.block(after, active, passed) or []
        body_events = self.events[body_mark:]
        del self.events[body_mark:]
        if test.failed_when != 1 or before_events or body_events:
            self.unmodeled(node, f"scf.while on {test.why}")
            return None
        self.emit(K.WAIT_PARITY, node, barrier=test.barrier, parity=test.parity)
        # the values the loop leaves with: those of its one test, unless the body changes them
        return passed if list(out) == list(carried) else None


def _merge(a, b, taken: set):
    """A result of a split branch: lane by lane from the side that lane took."""
    if isinstance(a, (Data, Coord)) or isinstance(b, (Data, Coord)):
        # a data pointer from either side: the same on both, else not followed (smem.py)
        return a if a == b else Data(a.why if isinstance(a, Unknown) else b.why,
                                     a.buffer, None, a.elem_bytes) \
            if isinstance(a, Data) and isinstance(b, Data) and a.buffer == b.buffer \
            else Unknown("a value that differs between the lanes of a warp")
    if isinstance(a, Unknown):
        return a
    if isinstance(b, Unknown):
        return b
    if isinstance(a, (int, Lanes)) and isinstance(b, (int, Lanes)):
        values = tuple((a[l] if isinstance(a, Lanes) else a) if l in taken
                       else (b[l] if isinstance(b, Lanes) else b) for l in range(WARP))
        return values[0] if len(set(values)) == 1 else Lanes(values)
    return a if a == b else Unknown("a value that differs between the lanes of a warp")


def _constant(warp: Warp, node: Node):
    value = node.attrs.get("value")
    return [int(value) if isinstance(value, (bool, int)) else Unknown("a non-integer constant")]


def _binary(warp: Warp, node: Node):
    a, b = warp.args(node)[:2]
    if node.name == "arith.xori" and isinstance(a, Tested) and b == 1:      # `not answer`
        return [Tested(a.why, a.barrier, a.parity, 1 - a.failed_when)]
    return [arith.binary(node.name, a, b)]


def _cmpi(warp: Warp, node: Node):
    a, b = warp.args(node)[:2]
    predicate = node.attrs.get("predicate")
    if isinstance(a, Tested) and b in (0, 1) and predicate in (0, 1):   # answer == / != 0|1
        same = int(b == a.failed_when)
        return [Tested(a.why, a.barrier, a.parity, same if predicate == 0 else 1 - same)]
    if not isinstance(predicate, int):
        return [Unknown(f"arith.cmpi {predicate}")]
    outcome = arith.compare(predicate, a, b)
    if id(node) in guards.GUARDED.get():    # a comparison with a runtime value that steers
        if not (isinstance(a, int) and isinstance(b, int)):     # synchronization (guards.py)
            warp.unmodeled(node, "a comparison with a runtime value that is not one number "
                                 "per warp")
        else:
            warp.emit(guards.KIND, node, count=a, bytes=b,
                      name=guards.describe(predicate, outcome))
    return [outcome]


def _cast(warp: Warp, node: Node):
    value = warp.get(node.operands[0])
    if isinstance(value, Tested):           # widening an i1 answer keeps it
        return [value]
    return [arith.cast(value, node.types[0])]


def _select(warp: Warp, node: Node):
    return [arith.select(*warp.args(node)[:3])]


_ARITH = {"arith.constant": _constant, "arith.cmpi": _cmpi, "arith.select": _select}
_ARITH.update({name: _binary for name in arith.BINARY})
_ARITH.update({name: _cast for name in arith.CASTS})

_CONTROL = {"scf.if": Warp.scf_if, "scf.for": Warp.scf_for, "scf.while": Warp.scf_while}
