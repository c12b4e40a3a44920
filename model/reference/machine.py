"""The reference's state: findings, mbarriers, the actions a thread takes, the machine."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..ir import Loc

PALLAS_WAIT = "barrier_wait"
PALLAS_TEST = "barrier_test"     # a barrier_wait that does not block
PARITY_WAIT = "wait_parity"

# Hardware barriers (PTX `bar` / `barrier`, `barrier.cluster`) count hardware threads.
WARP_THREADS = 32
NAMED_BARRIERS = 16          # barrier ids 0..15 per block
LANE = "lane"                # a thread's lane in its warp: a branch on it splits the warp
IN_REGION = " in a warp region"   # env marks (not valid names, so no program can bind them)
LANE_SPLIT = " in a lane branch"


class ReferenceError(Exception):
    """The trace asks for a step the reference rules do not allow: the engines and the reference
    disagree."""


@dataclass
class Finding:
    code: str
    message: str
    loc: Loc | None = None


@dataclass
class Mbarrier:
    """One mbarrier instance (PTX): completions so far, missing arrivals, tx bytes, count."""

    name: str
    expected: int
    phase: int = 0
    pending: int = 0
    tx: int = 0

    def view(self) -> dict:
        return {"phase": self.phase, "arrived": self.expected - self.pending,
                "expected": self.expected, "tx": self.tx}


@dataclass
class Action:
    """One step a thread takes. `kind` is the IR's operation kind, or fork / enter / join / nop."""

    kind: str
    text: str
    loc: Loc | None
    targets: tuple[str, ...] = ()       # barrier instances it arrives on / expects bytes on
    amount: int = 0                     # arrival count, bytes, or parity
    wait_on: str | None = None          # the instance a wait waits on
    landings: tuple[tuple[str, str, int], ...] = ()   # (kind, barrier, bytes) put in flight
    tcgen05_targets: tuple[str, ...] | None = None    # queued tcgen05 op: where it arrives
    link: object = None                 # enter: (parent, fork index); join: ((warp, end), ...)
    memory: tuple = ()                  # copy: the accesses of each landing; MMA: its accesses


@dataclass
class Thread:
    name: str
    block: tuple[int, ...]
    thread: int
    warp: int | None
    actions: list[Action] = field(default_factory=list)
    pc: int = 0

    @property
    def done(self) -> bool:
        return self.pc >= len(self.actions)

    def next(self) -> Action | None:
        return None if self.done else self.actions[self.pc]


@dataclass
class Machine:
    """The whole cluster at one moment."""

    threads: dict[str, Thread]
    barriers: dict[str, Mbarrier]
    waits: dict[tuple[str, str], int] = field(default_factory=dict)      # barrier_waits
    observed: dict[tuple[str, str], int] = field(default_factory=dict)   # phase at last wait
    landings: list[tuple[str, str, int]] = field(default_factory=list)   # in-flight, any order
    queues: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    # Named barriers: (block, id) -> (completed phases, threads arrived in the open phase, the
    # open phase's count or None, the site of its first aligned bar.sync or None).
    named: dict[tuple, tuple] = field(default_factory=dict)
    # The cluster barrier: (completed phases, threads arrived in the open phase).
    cluster_bar: tuple[int, int] = (0, 0)
    # thread -> the phase of a hardware barrier it arrived in and has not yet waited for
    hw_arrived: dict[tuple[str, object], int] = field(default_factory=dict)
    # semaphore_signal_parallel's signals in flight: (semaphore, increment, issuing thread)
    signals: list[tuple[str, int, str]] = field(default_factory=list)
    # Init visibility of explicit_init barriers (PTX mbarrier.init): the instances each thread
    # sees initialised, those it released at cluster scope (fence.mbarrier_init), those the
    # async proxy sees, and what each hardware barrier phase publishes to the threads that
    # wait for it ((barrier, phase) -> instances; "open" phases still take arrivals).
    sees: dict[str, frozenset] = field(default_factory=dict)
    released: dict[str, frozenset] = field(default_factory=dict)
    async_sees: frozenset = frozenset()
    published: dict[tuple, frozenset] = field(default_factory=dict)
    # Memory effects in flight (memory.py): each landing with the destination it writes, and
    # each queued tcgen05 op's accesses, beside `queues`.
    copy_memory: list[tuple[tuple, tuple]] = field(default_factory=list)
    mma_memory: dict[str, list[tuple]] = field(default_factory=dict)

    def clone(self) -> "Machine":
        threads = {n: Thread(t.name, t.block, t.thread, t.warp, t.actions, t.pc)
                   for n, t in self.threads.items()}
        return Machine(threads, copy.deepcopy(self.barriers), dict(self.waits),
                       dict(self.observed), list(self.landings),
                       {n: list(q) for n, q in self.queues.items()}, dict(self.named),
                       self.cluster_bar, dict(self.hw_arrived), list(self.signals),
                       dict(self.sees), dict(self.released), self.async_sees,
                       dict(self.published), list(self.copy_memory),
                       {n: list(q) for n, q in self.mma_memory.items()})

    def key(self) -> tuple:
        return (tuple(t.pc for t in self.threads.values()),
                tuple((b.phase, b.pending, b.tx, b.expected) for b in self.barriers.values()),
                tuple(sorted(self.waits.items())), tuple(sorted(self.observed.items())),
                tuple(sorted(self.landings)), tuple((n, tuple(q)) for n, q in self.queues.items()),
                tuple(sorted(self.named.items(), key=repr)), self.cluster_bar,
                tuple(sorted(self.hw_arrived.items(), key=repr)), tuple(sorted(self.signals)),
                tuple(sorted((n, tuple(sorted(v))) for n, v in self.sees.items() if v)),
                tuple(sorted((n, tuple(sorted(v))) for n, v in self.released.items() if v)),
                tuple(sorted(self.async_sees)),
                tuple(sorted(((repr(k), tuple(sorted(v))) for k, v in self.published.items()
                              if v))),
                tuple(sorted((landing, tuple(a.uid for a in accesses))
                             for landing, accesses in self.copy_memory)),
                tuple((n, tuple(tuple(a.uid for a in e) for e in q))
                      for n, q in self.mma_memory.items()))


