"""The instruction set of a compiled System and the parts it is made of (SEMANTICS.md).

What every engine shares about a System without stepping it: the opcodes of the unrolled
programs (`OPCODE_NAMES`; hw_barriers.py owns 20-29, init_visibility.py 60-69), which of them
wait, the effects an in-flight slot delivers, the fields of one barrier instance in the state
vector, and the records a System is built from (`Instr`, `Source`, `Agent`, `Instance`, `Slot`).
semantics.py compiles kernels into them; steps.py gives each opcode its step rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from . import hw_barriers as hw
from . import init_visibility as init
from .ir import BarrierAlloc, Loc, Op

# Instruction opcodes of an unrolled program.
ARRIVE = 0          # target=arrival set, amount=count
ARRIVE_DROP = 1     # target=arrival set
EXPECT_TX = 2       # target=arrival set, amount=bytes
ARRIVE_TX = 3       # arrive.expect_tx: target=arrival set, amount=bytes
COMPLETE_TX = 4     # target=arrival set, amount=bytes
WAIT = 5            # Pallas barrier_wait: target=instance, aux=seen position
WAIT_PARITY = 6     # try_wait.parity: target=instance, amount=parity, aux=seen position; a
#                     bare parity, judged by what it returns after (model/parity.py)
ISSUE_ASYNC = 7     # TMA / try_cluster_cancel issue: target=arrival set arrived with expect_tx
#                     at issue (or ()), amount=bytes expected, aux=tuple of in-flight slots
ISSUE_TCGEN05 = 8   # tcgen05_mma / commit: aux=index of the arrival set to arrive on when done
FORK = 9            # warpgroup enters a WarpRegion
AWAIT_FORK = 10     # a warp waits for its warpgroup to enter: aux=(parent agent, pc after FORK)
JOIN = 11           # warpgroup leaves a WarpRegion: aux=((warp agent, pc after its body), ...)
UNMODELED = 12      # synchronization outside the model: a no-op, reported statically
# Memory effects are not instructions: they touch no barrier, so they annotate the gaps between
# a thread's instructions (model/memory.py) and add no step and no state.

WAIT_PHASE = 40     # try_wait.parity with the agent's own phase count: target=instance,
#                     amount=the completion it means (phase + 1; parity (amount - 1) % 2),
#                     aux=seen position
SEM_SIGNAL = 41     # semaphore_signal: target=semaphore instance, amount=increment (x copies)
SEM_WAIT = 42       # semaphore_wait: target=instance, amount=value, aux=1 if it decrements
BARRIER_TEST = 50   # Pallas barrier_test: a non-blocking barrier_wait (target=instance,
#                     aux=seen position); it always moves on, and observes the completion its
#                     private parity bit waits for if that has happened (the bit flips)
# Named and cluster hardware barriers (model/hw_barriers.py, opcodes 20-29).
HW_ARRIVE = hw.HW_ARRIVE    # target=hw instance, amount=threads, aux=hw.HwArrival
HW_WAIT = hw.HW_WAIT        # target=hw instance, aux=position of the agent's arrived_in entry
HARDWARE_BARRIER_KINDS = hw.HARDWARE_BARRIER_KINDS
# mbarrier init and its visibility (model/init_visibility.py, opcodes 60-69).
MBAR_INIT = init.MBAR_INIT      # target=instance
FENCE_INIT = init.FENCE_INIT    # fence.mbarrier_init.release.cluster
FENCE_ASYNC = init.FENCE_ASYNC  # fence.proxy.async.shared::cta
SEM_SIGNAL_SET = 63  # semaphore_signal_parallel to different semaphores: aux=tuple of in-flight
#                      slots (one signal each), which land in any order
SIGNALS_LANDED = 64  # the thread goes on once those signals have landed: aux=the same slots

OPCODE_NAMES = {ARRIVE: "arrive", ARRIVE_DROP: "arrive_drop", EXPECT_TX: "expect_tx",
                ARRIVE_TX: "arrive_expect_tx", COMPLETE_TX: "complete_tx", WAIT: "wait",
                WAIT_PARITY: "wait_parity", ISSUE_ASYNC: "issue_async",
                ISSUE_TCGEN05: "issue_tcgen05", FORK: "fork", AWAIT_FORK: "await_fork",
                JOIN: "join", UNMODELED: "unmodeled", WAIT_PHASE: "wait_phase",
                SEM_SIGNAL: "sem_signal", SEM_WAIT: "sem_wait", HW_ARRIVE: "hw_arrive",
                HW_WAIT: "hw_wait", BARRIER_TEST: "barrier_test", MBAR_INIT: "mbarrier_init",
                FENCE_INIT: "fence_mbarrier_init", FENCE_ASYNC: "fence_proxy_async",
                SEM_SIGNAL_SET: "sem_signal_set", SIGNALS_LANDED: "signals_landed"}
# Every wait: each has a seen entry. Pallas waits (WAIT) follow the Pallas rules (observe every
# completion); parity waits follow the hardware's (a stated phase: return for it, see
# `intended_completion`; a bare parity: the same completion on every schedule, model/parity.py).
WAITS = (WAIT, WAIT_PARITY, WAIT_PHASE, BARRIER_TEST)
PARITY_WAITS = (WAIT_PARITY, WAIT_PHASE)
# Operations on the Pallas private parity bit: the Pallas rules hold their threads.
PALLAS_WAITS = (WAIT, BARRIER_TEST)

# Effects of an in-flight slot when it is delivered.
EFFECT_COMPLETE_TX = 0   # complete_tx(bytes) on the instance
EFFECT_ARRIVE = 1        # arrive(1) on the instance
EFFECT_SIGNAL = 2        # semaphore += amount (one of a semaphore_signal_parallel's signals)

# Fields of one barrier instance in the state vector.
PHASE, PENDING, TX, EXPECTED = 0, 1, 2, 3
BARRIER_FIELDS = 4


class Instr(NamedTuple):
    op: int
    target: object      # arrival set (tuple of instances) or one instance, per opcode
    amount: int
    aux: object
    src: int            # index into System.sources


@dataclass(frozen=True)
class Source:
    """What an instruction came from: the IR op, its text with concrete indices, its location."""

    op: Op | None
    text: str
    loc: Loc


@dataclass(frozen=True)
class Agent:
    name: str
    block: tuple[int, ...]
    thread: int
    warp: int | None = None   # None: the warpgroup itself


@dataclass(frozen=True)
class Instance:
    alloc: BarrierAlloc
    index: tuple[int, ...]
    block: tuple[int, ...]
    expected: int
    name: str


@dataclass(frozen=True)
class Slot:
    """An in-flight counter: deliveries of `effect` (`amount` bytes) to barrier `inst`."""

    effect: int
    inst: int
    amount: int
    kind: str        # "tma" or "async"
