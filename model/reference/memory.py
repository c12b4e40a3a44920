"""Memory effects and the two race rules, BP200 (shared memory) and BP201 (tensor memory), as
SEMANTICS.md states them: a region written while another agent may still read or write an
overlapping region, or read before the wait that orders it, is a race.

An access is in progress ("live") while it may still be happening:
- a thread's own load or store (`read`, `write`) anywhere between its two neighbouring steps:
  loads and stores are not steps, so a thread stopped before step g may be doing any access of
  the gap before g (after its last step, any access of its trailing gap);
- an access retired by an asynchronous step: a TMA copy's destination (in every block that
  copy lands in) until that landing, a tcgen05 MMA's operands and accumulator until that MMA
  completes (tcgen05 ops of one thread complete in issue order);
- an access retired by the thread's own wait, none of them steps: a WGMMA's operands until a
  `wgmma_wait(n)` leaves at most n later WGMMAs in flight (`wgmma.wait_group`), a TMA store's
  source until `wait_smem_to_gmem(n)` (`cp.async.bulk.wait_group.read`), a cp.async
  destination until `wait_gmem_to_smem(n)` (`cp.async.wait_group`), a tcgen05.st's destination
  until `tcgen05_wait_store` (`tcgen05.wait::st`), a tcgen05.ld left running (Pallas's
  `async_load_tmem`) reading TMEM until `tcgen05_wait_load` (`tcgen05.wait::ld`); one never
  waited for stays live, and if it touches shared memory the kernel's exit breaks BP105 (the
  block's shared memory is released while the access may still be running).

A state in which two live accesses of different agents touch a common slot of one buffer in one
block, one of them a write, is a race. Two accesses in one thread's program are ordered by their
positions in it: its own load or store conflicts with its own asynchronous access only between
that access's issue and its retiring wait. Regions are exact: each dimension of a reference is a
set of slot indices (a leading index, a `ds(start, size, stride)` progression, or the whole
dimension) and two references meet iff every dimension's sets meet. Copies that land on one
barrier instance are parts of one transaction and do not conflict with each other, except TMA
copies issued by two threads, not both multicast, that write a common slot.

What it does not state, `unmatched` names (fail closed): memory effects of an operation kind
not listed here, regions whose indices depend on the lane, and accesses in a branch on the lane
(a warp is one thread here, so its lanes' accesses could not conflict).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from ..ir import MemRef, ModelError, Op, When, evaluate, free_vars, iter_ops, walk
from .machine import LANE, Finding, Machine, Thread

NEVER = float("inf")

# Operations retired by the thread's own wait: kind -> (the unit that runs it, its wait kind).
PROGRAM_ASYNC = {"wgmma": ("a WGMMA", "wgmma_wait"),
                 "copy_smem_to_gmem": ("a TMA store", "wait_smem_to_gmem"),
                 "cp_async": ("a cp.async copy", "wait_gmem_to_smem"),
                 "tcgen05_store": ("a tcgen05.st", "tcgen05_wait_store"),
                 "tcgen05_load": ("a tcgen05.ld", "tcgen05_wait_load")}
# Waits that retire every earlier issue of their group (no count).
WAIT_ALL = ("tcgen05_wait_store", "tcgen05_wait_load")
WAITS = {wait: kind for kind, (_, wait) in PROGRAM_ASYNC.items()}
PLAIN = ("read", "write")
# Operations whose memory effects are retired by an asynchronous step of the machine.
STEP_ASYNC = ("copy_gmem_to_smem", "tma_load", "async_store_smem", "tcgen05_mma")
STATED = set(PLAIN) | set(PROGRAM_ASYNC) | set(WAITS) | set(STEP_ASYNC)


@dataclass(frozen=True)
class Access:
    uid: int
    agent: str                  # the thread, or the asynchronous unit that does it
    thread: str                 # the thread whose program issues it
    write: bool
    space: str                  # smem / tmem
    block: tuple[int, ...]
    alloc: str
    buffer: str                 # the reference as the program spells it
    slots: tuple[frozenset, ...]    # per dimension, the slot indices it touches
    loc: object
    start: tuple = (0, 0)       # (gap, position) of the access or its issue, in the program
    end: tuple | None = None    # (gap, position) of the retiring wait; None: a plain access
    landing: tuple | None = None    # TMA: the landing it ends with
    dest: str = ""              # TMA: the slots it writes, as its landing step names them
    multicast: bool = False     # TMA: a share of a multicast copy (collective axes)

    def describe(self) -> str:
        return f"{self.agent} {'writes' if self.write else 'reads'} {self.buffer} ({self.loc})"


def unmatched(kernel) -> set[str]:
    """The memory effects of `kernel` this module does not state."""
    out = set()
    for op in iter_ops(kernel.body):
        refs = op.reads + op.writes
        if refs and op.kind not in STATED:
            out.add(f"memory effects of {op.kind}")
        if any(LANE in free_vars(e) for r in refs for e in r.exprs()):
            out.add("memory regions indexed by the lane")
    # The lanes on the two sides of a branch on the lane are different hardware threads; here
    # a warp is one thread, so their accesses would never conflict.
    for stmt in walk(kernel.body):
        if isinstance(stmt, When) and LANE in free_vars(stmt.cond) and \
                any(op.reads or op.writes for op in iter_ops(stmt.then + stmt.orelse)):
            out.add("memory effects in a branch on the lane")
    return out


class ClusterMemory:
    """Building each thread's accesses (a mixin of Cluster)."""

    def _memory_setup(self) -> None:
        self.buffers = {b.name: b for b in self.kernel.buffers}
        self.plain: dict[str, list[Access]] = {}        # thread -> its own loads and stores
        self.program_async: dict[str, list[Access]] = {}
        self._pending: dict[tuple[str, str], list[Access]] = {}
        self._position: dict[str, int] = {}
        self._uid = itertools.count()
        self.joined: dict[tuple[str, int], tuple[str, int]] = {}   # (warp, gap) -> its join

    def _where(self, thread: Thread) -> tuple[int, int]:
        """(gap, position) of the next event of `thread`'s program: the gap is the index of the
        step it comes before."""
        n = self._position.get(thread.name, 0)
        self._position[thread.name] = n + 1
        return (len(thread.actions), n)

    def _slots(self, ref: MemRef, env) -> tuple[str, tuple[frozenset, ...]]:
        alloc = self.buffers.get(ref.alloc.name)
        if alloc is not ref.alloc:
            raise ModelError(f"buffer `{ref.alloc.name}` is not allocated by this kernel")
        shape = [evaluate(n, env) for n in alloc.shape]
        dims = [frozenset({evaluate(i, env)}) for i in ref.index]
        for s in ref.region:
            start, size, stride = (evaluate(e, env) for e in s.exprs())
            dims.append(frozenset(start + k * stride for k in range(size)))
        dims += [frozenset(range(n)) for n in shape[len(dims):]]
        return alloc, tuple(dims)

    def _access(self, ref: MemRef, env, write: bool, agent: str, thread: Thread, block, loc,
                **more) -> Access:
        alloc, dims = self._slots(ref, env)
        return Access(next(self._uid), agent, thread.name, write, alloc.space, tuple(block),
                      alloc.name, repr(ref), dims, loc, **more)

    def _accesses(self, op: Op, env, agent, thread, block, **more) -> list[Access]:
        return [self._access(r, env, False, agent, thread, block, op.loc, **more)
                for r in op.reads] + \
            [self._access(w, env, True, agent, thread, block, op.loc, **more) for w in op.writes]

    def _memory_op(self, op: Op, env, thread: Thread) -> None:
        """A memory-only operation: a load or store, an asynchronous access retired by the
        thread's own wait, or such a wait. None of them is a step."""
        where = self._where(thread)
        if op.kind in PLAIN:
            self.plain.setdefault(thread.name, []).extend(
                self._accesses(op, env, thread.name, thread, thread.block, start=where))
        elif op.kind in PROGRAM_ASYNC:
            unit = f"{PROGRAM_ASYNC[op.kind][0]} of {thread.name}"
            issued = self._accesses(op, env, unit, thread, thread.block, start=where,
                                    end=(NEVER, NEVER))
            # One issue is one group: the wait counts issues, not accesses.
            self._pending.setdefault((thread.name, op.kind), []).append(issued)
        elif op.kind in WAITS:
            pending = self._pending.get((thread.name, WAITS[op.kind]), [])
            keep = 0 if op.kind in WAIT_ALL else evaluate(op.count, env)
            done, pending[:] = pending[:max(0, len(pending) - keep)], \
                pending[max(0, len(pending) - keep):]
            for group in done:
                self._retire(thread, group, where)

    def hand_over_copies(self, thread: Thread, landing, env) -> tuple:
        """cp.async.mbarrier.arrive: every cp.async copy of the thread not yet waited for is
        retired from its program here and written until the arrival `landing` lands."""
        pending = self._pending.pop((thread.name, "cp_async"), [])
        if not pending:
            return ()
        where = self._where(thread)
        for group in pending:
            self._retire(thread, group, where)
        return tuple(dataclasses.replace(a, agent=f"a cp.async copy of {thread.name}",
                                         start=(0, 0), end=None, landing=landing,
                                         dest=self._dest_text(self.buffers[a.alloc], a.slots,
                                                              env))
                     for group in pending for a in group)

    def _retire(self, thread: Thread, group: list[Access], where) -> None:
        self.program_async.setdefault(thread.name, []).extend(
            dataclasses.replace(a, end=where) for a in group)

    def _memory_finish(self) -> None:
        """Accesses never waited for stay live to the end."""
        for (name, _), pending in self._pending.items():
            for group in pending:
                self.program_async.setdefault(name, []).extend(group)
        self._pending = {}

    def copy_accesses(self, op: Op, env, thread: Thread, landings, own: bool = False) -> tuple:
        """A TMA copy's destination, per landing, in the block the landing's barrier is in
        (every block a multicast reaches, the peer an st.async writes to); a tma_load on a
        peer's barrier (leader-tracked, 2-CTA; `own`) lands in the issuer's own block."""
        out = []
        for landing in landings:
            block = thread.block if own else self.block_of_instance[landing[1]]
            out.append(tuple(self._access(w, env, True, "a TMA copy", thread, block, op.loc,
                                          landing=landing, dest=self._dest(w, env),
                                          multicast=bool(op.collective_axes))
                             for w in op.writes))
        return tuple(out)

    def _dest(self, ref: MemRef, env) -> str:
        """`ring[1]`, `acc[0:64]`: the slots a copy writes per dimension, whole trailing
        dimensions left out (how a trace names the destination of a landing)."""
        return self._dest_text(*self._slots(ref, env), env)

    def _dest_text(self, alloc, dims, env) -> str:
        parts = []
        for slots, n in zip(dims, (evaluate(x, env) for x in alloc.shape)):
            xs = sorted(slots)
            if xs == list(range(n)):
                parts.append(":")
            elif len(xs) == 1:
                parts.append(str(xs[0]))
            else:
                stride = xs[1] - xs[0]
                parts.append(f"{xs[0]}:{xs[-1] + 1}" + (f":{stride}" if stride != 1 else ""))
        while parts and parts[-1] == ":":
            parts.pop()
        return alloc.name + ("[" + ",".join(parts) + "]" if parts else "")

    def mma_accesses(self, op: Op, env, thread: Thread) -> tuple:
        """A collective (2-CTA) MMA touches its operands and accumulator in every block of
        the pair."""
        blocks = self._peers(thread.block, op.collective_axes, op.loc) if op.collective_axes \
            else [thread.block]
        return tuple(a for b in blocks
                     for a in self._accesses(op, env, f"a tcgen05 MMA of {thread.name}",
                                             thread, b))

    def live_in_gap(self, name: str, gap: int) -> list[Access]:
        """The accesses of `name`'s program that may be in progress while it stands at `gap`."""
        key = (name, gap)
        cache = self.__dict__.setdefault("_live_cache", {})
        if key not in cache:
            cache[key] = [a for a in self.plain.get(name, ()) if a.start[0] == gap] + \
                [a for a in self.program_async.get(name, ()) if a.start[0] <= gap <= a.end[0]]
        return cache[key]


def copy_dest(accesses: tuple) -> str:
    """A copy's destination as its landing step names it (`lands on full (4096B) into ring[1]`)."""
    return ", ".join(a.dest for a in accesses)


def overlap(a: Access, b: Access) -> bool:
    return (a.block == b.block and a.alloc == b.alloc and len(a.slots) == len(b.slots)
            and all(x & y for x, y in zip(a.slots, b.slots)))


def ordered(a: Access, b: Access) -> bool:
    """Do the rules keep `a` and `b` from being in progress together, whatever the schedule?"""
    if a.landing is not None and b.landing is not None and a.landing[1] == b.landing[1]:
        # Parts of one transaction on one barrier instance: one thread's copies, cp.async
        # arrivals, the shares of multicasts (each written as the whole destination). TMA
        # copies of two threads that write a common slot are two writers, not one.
        two_writers = a.landing[0] == b.landing[0] == "tma" and a.thread != b.thread
        return not two_writers or (a.multicast and b.multicast)
    if a.thread != b.thread:
        return False
    if a.agent == b.agent == a.thread:
        return True             # one thread's own loads and stores
    if a.agent == b.agent and a.agent.startswith("a tcgen05 MMA"):
        return True             # one thread's MMAs complete in issue order
    if a.landing is not None or b.landing is not None or \
            a.agent.startswith("a tcgen05 MMA") or b.agent.startswith("a tcgen05 MMA"):
        return False            # in flight by the machine's state: live together is a race
    # Both in the thread's program: a plain access at x meets an asynchronous one only between
    # its issue and its retiring wait; two asynchronous ones when their intervals meet.
    span = lambda x: (x.start[1], x.start[1]) if x.end is None else (x.start[1], x.end[1])
    (s1, e1), (s2, e2) = span(a), span(b)
    if a.end is None:
        return not s2 < s1 < e2
    if b.end is None:
        return not s1 < s2 < e1
    return not (s1 < e2 and s2 < e1)


class RulesMemory:
    """BP200 / BP201 on a Machine (a mixin of Rules)."""

    def live(self, m: Machine) -> list[Access]:
        out = []
        for name, thread in m.threads.items():
            gap = thread.pc
            joined = self.cluster.joined.get((name, gap))
            if joined is not None and m.threads[joined[0]].pc > joined[1]:
                # a warp's tail of its warp region, which the warpgroup's join has ordered
                out += [a for a in self.cluster.live_in_gap(name, gap) if a.end is not None]
                continue
            out += self.cluster.live_in_gap(name, gap)
        for _, accesses in m.copy_memory:
            out += accesses
        for queue in m.mma_memory.values():
            for accesses in queue:
                out += accesses
        return out

    def running_past_exit(self) -> list[Finding]:
        """BP105: a thread's own asynchronous access to shared memory that no wait of its
        program retires is still running when the kernel ends, on memory the block no longer
        owns (a TMA store reading its source, a WGMMA its operands, a cp.async writing)."""
        return [Finding("BP105", f"{a.agent} is still running at exit on {a.buffer} in shared "
                        "memory, never waited for", a.loc)
                for accesses in self.cluster.program_async.values() for a in accesses
                if a.end == (NEVER, NEVER) and a.space == "smem"]

    def races(self, m: Machine) -> list[Finding]:
        """The first race of each code: one ignored code must not hide the other."""
        found: dict[str, Finding] = {}
        for a, b in itertools.combinations(self.live(m), 2):
            if (a.write or b.write) and overlap(a, b) and not ordered(a, b):
                code = "BP201" if a.space == "tmem" else "BP200"
                found.setdefault(code, Finding(code, f"{a.describe()} while {b.describe()}",
                                               a.loc))
        return [found[code] for code in sorted(found)]


