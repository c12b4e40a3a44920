"""The primitive registry: what every IR operation kind is, as data the engines read.

Each primitive family is one module (model/primitives/*, hw_barriers.py, init_visibility.py)
that declares its kinds as `Primitive`s in the `primitives` of its `Extension`; installing the
extension (model/plugins.py) enters them here. The core reads this table and never a family
module: `Op.describe`, the compiler's dispatch (`compile`), the memory classification
(`MEMORY_KINDS`, `ASYNC_GROUPS`, `ASYNC_WAITS`), the static rules' classes (`async_arrival`,
`tensor_core`, `local_wait`), Pallas's own API (`PALLAS_KINDS`), the prover's counter program
(`counter`). Engines and the repair search ask `having(tag)` / `kinds_where(...)` /
`blocking_waits(...)` rather than listing kind strings.

Fail closed: every field without a default must be declared (a family that leaves one out
fails at import), `check_complete` refuses an unknown tag or opcode name, an opcode no
primitive compiles to, and a kind compiled by nobody; `lookup` of an unknown kind is None and
the compiler turns it into a ModelError.

The tables below are filled in place by `register`, so a module that imported one before the
plug-ins were installed still sees every kind.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

# Operands an op reads (`Primitive.needs`): "barrier" (required), "barrier?" (optional),
# "count", "bytes", "parity" (parity or phase), "bar_id", "signals", "memory" (reads/writes),
# "name".
OPERANDS = frozenset({"barrier", "barrier?", "count", "bytes", "parity", "bar_id", "signals",
                      "memory", "name"})
# How an op touches memory (`Primitive.memory`): "none" (a barrier operation; copies and MMAs
# may still carry reads/writes), "thread" (a load/store of the thread, at once), "issue" (an
# asynchronous access of `group`, live until a "retire" of the same group), "retire".
MEMORY_CLASSES = frozenset({"none", "thread", "issue", "retire"})
# The repair search's classes (checker/repair/candidates.py): "arrives" (arrives on its
# barrier, now or when it lands), "fills" (a producer's release of a ring slot), "refills" (also
# counts as the release that refills a slot), "waits" (a wait a fix may insert or move).
REPAIR_CLASSES = frozenset({"arrives", "fills", "refills", "waits"})
# What a thread waits for at an op (`Primitive.waits_for`; with `blocking`: whether it stops
# there): "" (nothing another thread does), "phase" (a completion of its mbarrier's phase, or a
# test for one), "value" (a semaphore reaching a value), "hardware" (the phase of a named or
# cluster hardware barrier).
WAIT_TARGETS = frozenset({"", "phase", "value", "hardware"})
# What the prover's counter program (checker/symbolic/program.py) makes of an op on a barrier
# of the class (`Primitive.counter`; "" for a kind it does not encode there, whose `prover`
# then says which part of the prover decides it, or "outside"): "arrive" (arrive(count),
# fanned out along a ClusterBarrier's axes), "arrive_drop", "expect_tx", "arrive_tx",
# "complete_tx" (the transaction counts), "wait" (Pallas's wait on its private parity bit),
# "wait_parity" (a stated phase, or a bare parity), "copy" (the issuer's arrive.expect_tx, the
# landing's complete_tx on every block the copy reaches), "landing" (a copy's complete_tx only),
# "async_arrival" (one arrival landing after the issue), "tcgen05" (an arrival when the
# issuing thread's tensor-core queue drains).
COUNTER_OPS = frozenset({"arrive", "arrive_drop", "expect_tx", "arrive_tx", "complete_tx",
                         "wait", "wait_parity", "copy", "landing", "async_arrival", "tcgen05"})
# The `prover` status of a kind with a counter-program op.
IN_COUNTER_PROGRAM = "counter program (program.py)"
# Opcodes that belong to no primitive: the warp regions' fork and join (ir.WarpRegion).
STRUCTURAL_OPCODES = frozenset({"fork", "await_fork", "join"})


@dataclass(frozen=True)
class Primitive:
    """One IR operation kind. Fields without a default are required declarations."""

    kind: str
    doc: str                        # one line: what it does (the step rule is SEMANTICS.md's)
    needs: frozenset[str]           # its operands (OPERANDS)
    blocking: bool                  # a thread may stop at it
    waits_for: str                  # what a thread waits for (or tests) at it (WAIT_TARGETS)
    opcodes: tuple[str, ...]        # the opcodes it compiles to (instructions.OPCODE_NAMES)
    dsl: str                        # its model/dsl.py KernelBuilder spelling ("" if none)
    reference: str                  # the model/reference module that re-states it, or "uncovered"
    prover: str                     # how `prove` decides it, or "outside: why"
    repair: frozenset[str]          # its repair classes (REPAIR_CLASSES)
    counter: str = ""               # its op in the prover's counter program (COUNTER_OPS)
    memory: str = "none"            # MEMORY_CLASSES
    group: str = ""                 # issue/retire: the asynchronous group ("TMA store", ...)
    counted: bool = False           # retire: leaves `count` of the newest in flight
    pallas: bool = False            # part of Pallas's own API (Pallas's rules 1-2 hold)
    async_arrival: bool = False     # arrives asynchronously: never on a ClusterBarrier (BP111)
    tensor_core: bool = False       # arrives through the tensor core (BP110)
    local_wait: bool = False        # observes its own block's instance only (BP112)
    unmodelled: bool = False        # synchronization the model does not cover (BP190)
    cluster_wide: bool = False      # synchronizes every thread of every block of the cluster
    consumes: bool = False          # takes what it waits for from a shared counter (decrement)
    shows: tuple[str, ...] = ()     # operands `describe` prints (generic form)
    # (op) -> str: its own description, replacing the generic form
    describe: Callable | None = None
    # (op, barrier name, bytes, env) -> str: the text of its compiled instructions
    text: Callable | None = None
    # (system, op, env, agent, block) -> None; None: its extension's compile_op
    compile: Callable | None = None
    family: str = ""                # filled in by `register`: its extension's name


PRIMITIVES: dict[str, Primitive] = {}
# Derived tables, filled in place as primitives are registered.
MEMORY_KINDS: set[str] = set()          # kinds that exist only for their memory effects
PALLAS_KINDS: set[str] = set()
ASYNC_GROUPS: dict[str, str] = {}       # issuing kind -> group
ASYNC_WAITS: dict[str, tuple[str, bool]] = {}   # retiring kind -> (group, counted)


def register(prim: Primitive, family: str, compile_op: Callable | None) -> Primitive:
    """Enter one primitive of `family` (extensions.install calls this)."""
    if prim.kind in PRIMITIVES:
        raise AssertionError(f"{family}: kind {prim.kind} is declared by "
                             f"{PRIMITIVES[prim.kind].family}")
    _check_fields(prim, family)
    prim = _with(prim, family=family, compile=prim.compile or compile_op)
    PRIMITIVES[prim.kind] = prim
    if prim.memory != "none":
        MEMORY_KINDS.add(prim.kind)
    if prim.memory == "issue":
        ASYNC_GROUPS[prim.kind] = prim.group
    if prim.memory == "retire":
        ASYNC_WAITS[prim.kind] = (prim.group, prim.counted)
    if prim.pallas:
        PALLAS_KINDS.add(prim.kind)
    return prim


def _with(prim: Primitive, **changes) -> Primitive:
    return dataclasses.replace(prim, **changes)


def _check_fields(prim: Primitive, family: str) -> None:
    where = f"{family}: {prim.kind}"
    if not prim.doc or not prim.reference or not prim.prover:
        raise AssertionError(f"{where} needs a doc line, a reference and a prover status")
    for name, got, allowed in (("needs", prim.needs, OPERANDS),
                               ("repair", prim.repair, REPAIR_CLASSES),
                               ("memory", {prim.memory}, MEMORY_CLASSES),
                               ("waits_for", {prim.waits_for}, WAIT_TARGETS)):
        if not set(got) <= allowed:
            raise AssertionError(f"{where}: {name} {sorted(set(got) - allowed)} unknown")
    if prim.memory in ("issue", "retire") and not prim.group:
        raise AssertionError(f"{where}: an asynchronous access needs its group")
    if prim.counter and prim.counter not in COUNTER_OPS:
        raise AssertionError(f"{where}: counter-program op {prim.counter!r} unknown")
    if bool(prim.counter) != prim.prover.startswith(IN_COUNTER_PROGRAM):
        raise AssertionError(f"{where}: the prover status {prim.prover!r} and the counter-"
                             f"program op {prim.counter!r} disagree")
    if prim.local_wait and prim.waits_for != "phase":
        raise AssertionError(f"{where}: a local wait waits for its mbarrier's phase")


def lookup(kind: str) -> Primitive | None:
    """The primitive of `kind`, or None (an unknown kind: the caller fails closed)."""
    return PRIMITIVES.get(kind)


def kinds_where(test: Callable[[Primitive], bool]) -> frozenset[str]:
    """The kinds whose primitive passes `test` (e.g. `lambda p: p.async_arrival`)."""
    return frozenset(k for k, p in PRIMITIVES.items() if test(p))


def having(repair_class: str) -> frozenset[str]:
    """The kinds in one repair class (REPAIR_CLASSES)."""
    if repair_class not in REPAIR_CLASSES:
        raise KeyError(repair_class)
    return kinds_where(lambda p: repair_class in p.repair)


def blocking_waits(*targets: str) -> frozenset[str]:
    """The kinds at which a thread stops until another thread's action gives it one of
    `targets` (WAIT_TARGETS): `blocking_waits("phase")` are the waits on an mbarrier."""
    unknown = set(targets) - (WAIT_TARGETS - {""})
    if unknown:
        raise KeyError(sorted(unknown))
    return kinds_where(lambda p: p.blocking and p.waits_for in targets)


def family_kinds(family: str) -> frozenset[str]:
    return kinds_where(lambda p: p.family == family)


def check_complete(opcode_names) -> None:
    """Every primitive compiles somehow and names real opcodes; every opcode is some
    primitive's (or structural)."""
    if not PRIMITIVES:
        raise AssertionError("no primitive is registered: install the families "
                             "(model/plugins.py)")
    known = set(opcode_names)
    used = set(STRUCTURAL_OPCODES)
    for prim in PRIMITIVES.values():
        if prim.compile is None:
            raise AssertionError(f"{prim.family}: {prim.kind} has no compile hook")
        unknown = set(prim.opcodes) - known
        if unknown:
            raise AssertionError(f"{prim.family}: {prim.kind} names unknown opcodes "
                                 f"{sorted(unknown)}")
        used |= set(prim.opcodes)
    orphans = known - used
    if orphans:
        raise AssertionError(f"opcodes {sorted(orphans)} belong to no primitive: declare "
                             "them in a family's `opcodes`")
