"""The instruction set of a compiled System and the parts it is made of (SEMANTICS.md).

What every engine shares about a System without stepping it: the opcodes of the unrolled
programs (`OPCODE_NAMES`, allocated by `opcode`), which of them wait, the effects an in-flight
slot delivers, the fields of one barrier instance in the state vector, and the records a System is built from (`Instr`, `Source`, `Agent`, `Instance`, `Slot`).
semantics.py compiles kernels into them; steps.py gives each opcode its step rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .ir import BarrierAlloc, Loc, Op

# Instruction opcodes of an unrolled program, numbered in the order they are declared here
# (`opcode`): no module keeps a range by hand. The step rule of each is in steps.py, or in the
# plug-in that installs it (extensions.py); hw_barriers.py and init_visibility.py own theirs.
OPCODE_NAMES: dict[int, str] = {}


def opcode(name: str) -> int:
    """The next opcode, named `name` (unique)."""
    if name in OPCODE_NAMES.values():
        raise AssertionError(f"opcode {name} is declared twice")
    op = len(OPCODE_NAMES)
    OPCODE_NAMES[op] = name
    return op


ARRIVE = opcode("arrive")               # target=arrival set, amount=count
ARRIVE_DROP = opcode("arrive_drop")     # target=arrival set
EXPECT_TX = opcode("expect_tx")         # target=arrival set, amount=bytes
ARRIVE_TX = opcode("arrive_expect_tx")  # arrive.expect_tx: target=arrival set, amount=bytes
COMPLETE_TX = opcode("complete_tx")     # target=arrival set, amount=bytes
WAIT = opcode("wait")                   # Pallas barrier_wait: target=instance, aux=seen position
# try_wait.parity: target=instance, amount=parity, aux=seen position; a bare parity, judged by
# what it returns after (model/parity.py)
WAIT_PARITY = opcode("wait_parity")
# TMA / try_cluster_cancel issue: target=arrival set arrived with expect_tx at issue (or ()),
# amount=bytes expected, aux=tuple of in-flight slots
ISSUE_ASYNC = opcode("issue_async")
# tcgen05_mma / commit: aux=index of the arrival set to arrive on when done
ISSUE_TCGEN05 = opcode("issue_tcgen05")
FORK = opcode("fork")                   # warpgroup enters a WarpRegion
# a warp waits for its warpgroup to enter: aux=(parent agent, pc after FORK)
AWAIT_FORK = opcode("await_fork")
# warpgroup leaves a WarpRegion: aux=((warp agent, pc after its body), ...)
JOIN = opcode("join")
# synchronization outside the model: a no-op, reported statically
UNMODELED = opcode("unmodeled")
# Memory effects are not instructions: they touch no barrier, so they annotate the gaps between
# a thread's instructions (model/memory.py) and add no step and no state.

# try_wait.parity with the agent's own phase count: target=instance, amount=the completion it
# means (phase + 1; parity (amount - 1) % 2), aux=seen position
WAIT_PHASE = opcode("wait_phase")
# semaphore_signal: target=semaphore instance, amount=increment (x copies)
SEM_SIGNAL = opcode("sem_signal")
SEM_WAIT = opcode("sem_wait")   # semaphore_wait: target=instance, amount=value, aux=1 if it decrements
# Pallas barrier_test: a non-blocking barrier_wait (target=instance, aux=seen position); it
# always moves on, and observes the completion its private parity bit waits for if that has
# happened (the bit flips)
BARRIER_TEST = opcode("barrier_test")
# semaphore_signal_parallel to different semaphores: aux=tuple of in-flight slots (one signal
# each), which land in any order
SEM_SIGNAL_SET = opcode("sem_signal_set")
# the thread goes on once those signals have landed: aux=the same slots
SIGNALS_LANDED = opcode("signals_landed")
# Named and cluster hardware barriers (step rules in model/hw_barriers.py).
HW_ARRIVE = opcode("hw_arrive")     # target=hw instance, amount=threads, aux=hw.HwArrival
HW_WAIT = opcode("hw_wait")         # target=hw instance, aux=its arrived_in entry
# mbarrier init and its visibility (step rules in model/init_visibility.py).
MBAR_INIT = opcode("mbarrier_init")         # target=instance
FENCE_INIT = opcode("fence_mbarrier_init")  # fence.mbarrier_init.release.cluster: no operand
FENCE_ASYNC = opcode("fence_proxy_async")   # fence.proxy.async.shared::cta: no operand

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
    """An in-flight counter: deliveries of `effect` (`amount` bytes) to barrier `inst`, of
    copies into the destination `dest` (races checked; "" when no memory is tracked)."""

    effect: int
    inst: int
    amount: int
    kind: str        # "tma" or "async"
    dest: str = ""
