"""A counter system: the program of one barrier class, as plain data with Z3 terms.

`program.py` builds one per barrier class from the kernel's roles; `encode.py` turns it into
transitions. Roles are groups of identical threads running the same class program (segments of
operations, loops with symbolic bounds), so a symbolic number of threads is one role.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

def K() -> z3.ArithRef:
    """Placeholder for the loop coordinate in guards, amounts and parities of loop bodies (a
    function: the term of the Z3 context in force, budget.own_context)."""
    return z3.Int("k!")

# Operation kinds of a class program.
ARRIVE, ARRIVE_DROP, EXPECT_TX, ARRIVE_TX, COMPLETE_TX, WAIT, WAIT_PARITY, ISSUE = (
    "arrive", "arrive_drop", "expect_tx", "arrive_expect_tx", "complete_tx", "wait",
    "wait_parity", "issue")
WAITS = (WAIT, WAIT_PARITY)
# A parity wait for a phase the thread states (`wait_parity(phase=n)`, CUTLASS's PipelineState):
# held to the hardware's rule on that phase (docs/parity.md), not to "observe every completion",
# so it keeps no observation and may skip phases on purpose (encode.py: phase_ahead).
WAIT_PHASE = "wait_phase"
BLOCKING = WAITS + (WAIT_PHASE,)

# What a thread has observed of an instance it waits on (encode.py).
UNJOINED, J0, J1 = 0, 1, 2
# A thread's loads and stores (races.py): no barrier effect; a thread that stops there has
# them live, which covers every point of the gap between its neighbouring class events.
ACCESS = "access"



@dataclass
class AsyncSlot:
    """Deliveries to one instance: `complete_tx(amount)` (effect "tx") or `arrive(1)`."""

    effect: str
    inst: int
    amount: z3.ArithRef
    kind: str
    # memory the deliveries' agents touch while in flight (races.py): cells of the class
    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)
    issuers: set = field(default_factory=set)     # roles that issue them
    # TMA copies: per issuing role, the cells its copies write and whether all are multicast
    copies: dict = field(default_factory=dict)


@dataclass
class QueueHold:
    """The cells of a thread's queued tcgen05 MMAs, held until the arrivals it issues right
    after them (queue_holds.py): live while every one of those arrivals is in flight, each on
    one of its slots. `arrivals`: the arrival's position in the role -> its slots."""

    issuer: tuple                                  # (role name, single)
    guard: z3.BoolRef | None = None                # the cell's, over the arrival's coordinate
    arrivals: dict = field(default_factory=dict)
    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)


@dataclass
class COp:
    kind: str
    targets: tuple[int, ...]              # instances (one for waits)
    amount: z3.ArithRef = None            # count or bytes, may mention K
    parity: z3.ArithRef | None = None     # wait_parity, may mention K
    slots: tuple[int, ...] = ()           # ISSUE: in-flight slots incremented
    guard: z3.BoolRef = None              # may mention K
    rank: int = 0                         # position in the tau order of its group
    text: str = ""
    primary: int | None = None            # the instance the IR operation addresses
    access: tuple[tuple[int, bool], ...] = ()   # ACCESS: (cell, writes) pairs
    sync: bool = False                    # ARRIVE of a lowered bar.sync (hw.py): the thread
    #                                       must have observed every completion so far
    phase: z3.ArithRef | None = None      # WAIT_PHASE: the phase meant (completion phase + 1)

    def __post_init__(self):
        if self.amount is None:
            self.amount = z3.IntVal(0)
        if self.guard is None:
            self.guard = z3.BoolVal(True)


@dataclass
class CSegment:
    loop: bool
    body: list[COp]
    group: int
    guard: z3.BoolRef = None              # over frozen only
    lo: z3.ArithRef = None                # loops: k runs over [lo, hi)
    hi: z3.ArithRef = None
    text: str = ""
    keyed: bool | None = None             # tau compares loop coordinates (default: loop)

    def __post_init__(self):
        if self.keyed is None:
            self.keyed = self.loop
        if self.guard is None:
            self.guard = z3.BoolVal(True)
        if self.lo is None:
            self.lo = z3.IntVal(0)
        if self.hi is None:
            self.hi = z3.IntVal(1)


@dataclass
class CRole:
    name: str
    size: z3.ArithRef
    segments: list[CSegment]
    single: bool = False                  # provably one thread: explicit encoding
    block: tuple | None = None            # the block its threads run in (a cluster)


@dataclass
class CInst:
    name: str
    expected: z3.ArithRef
    hw: bool = False                      # a lowered named barrier (hw.py): no BP104 at exit
    block: tuple | None = None            # the block whose shared memory holds it
    alloc: str = ""                       # the allocation it is an instance of
    peer_exit: bool = False               # other blocks' arrivals on it are BP146 obligations


@dataclass
class CounterSystem:
    name: str
    frozen: list[z3.ArithRef]
    constraints: list[z3.BoolRef]
    instances: list[CInst]
    slots: list[AsyncSlot]
    roles: list[CRole]
    offset_bound: int = 2
    progress: bool = True                 # add the tau-progress error conditions
    cells: list[tuple[str, str]] = field(default_factory=list)  # (name, "smem"/"tmem")
    races_only: bool = False              # the error conditions are the races alone
    notes: list[str] = field(default_factory=list)
    # tcgen05 slots every real exit finds landed, their queue's tail being held to the exit
    # rules (queue_tail.py): the exit conditions are checked once they are empty, each slot
    # under its condition on the frozen values (True: always)
    drained: dict = field(default_factory=dict)
    # cells of queued tcgen05 MMAs held until their arrivals land (queue_holds.py)
    holds: list[QueueHold] = field(default_factory=list)
