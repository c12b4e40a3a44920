"""Global semaphores (Pallas `semaphore_signal` / `semaphore_wait`): counters without phases."""

from __future__ import annotations

import itertools

from ..ir import ModelError, Op, evaluate
from .machine import Action, Mbarrier, Thread


class ClusterSemaphores:
    """Allocating semaphores and building the actions of their operations (a mixin of Cluster).
    Their step rules are a few lines of Rules.thread_effect / can_move."""

    def _allocate_semaphore(self, alloc) -> None:
        """A global semaphore is one counter for the whole grid, whichever block names it. Its
        value shows as the barrier view's phase (no arrivals, no count)."""
        shape = [evaluate(n, self.env) for n in alloc.shape]
        if any(n < 1 for n in shape):
            raise ModelError(f"`{alloc.name}` has an empty dimension", loc=alloc.loc)
        for index in itertools.product(*[range(n) for n in shape]):
            name = alloc.name if alloc.scalar else \
                alloc.name + "[" + ",".join(map(str, index)) + "]"
            for block in self.blocks:
                self.instance_of[(alloc.name, index, block)] = name
            self.barriers[name] = Mbarrier(name, 0)

    def _semaphore(self, op: Op, env, thread: Thread) -> None:
        """semaphore_signal: value += inc, times the clusters that signal in lockstep with this
        one; semaphore_wait: until value >= n, then value -= n if it decrements;
        semaphore_signal_parallel: on one semaphore the signals in turn, on several one signal
        in flight each, landing in any order, all before the thread goes on."""
        loc, add = op.loc, thread.actions.append
        refs = [ref for ref, _ in op.signals] if op.kind == "semaphore_signal_parallel" \
            else [op.barrier]
        found = [self._instance(ref, env, thread.block, loc) for ref in refs]
        if any(f is None for f in found):
            return
        for ref in refs:
            if not ref.alloc.semaphore:
                raise ModelError(f"{op.kind} on `{ref.alloc.name}`, which is not a semaphore",
                                 loc=loc)
        # the lockstep copies signal from clusters of their own when the reference builds them
        copies = [1 if self.lockstep > 1 else evaluate(ref.alloc.copies, env) for ref in refs]
        if op.kind == "semaphore_wait":
            n = evaluate(op.count, env)
            text = f"semaphore_wait({op.barrier.alloc.name}, >={n}" + \
                (", decrement)" if op.decrement else ")")
            add(Action("sem_wait", text, loc, (found[0][0],), n, link=op.decrement))
            return
        if op.kind == "semaphore_signal":
            n = evaluate(op.count, env)
            text = f"semaphore_signal({op.barrier.alloc.name}, +{n}" + \
                (f" x{copies[0]} clusters)" if copies[0] > 1 else ")")
            add(Action("sem_signal", text, loc, (found[0][0],), n * copies[0]))
            return
        signals = [(f[0], evaluate(inc, env) * c)
                   for f, (_, inc), c in zip(found, op.signals, copies)]
        text = "semaphore_signal_parallel(" + ", ".join(f"{s} +{n}" for s, n in signals) + ")"
        if len({s for s, _ in signals}) == 1:
            for sem, n in signals:
                add(Action("sem_signal", text, loc, (sem,), n))
            return
        add(Action("sem_send", text, loc, landings=tuple(("signal", s, n) for s, n in signals)))
        add(Action("sem_landed", "semaphore_signal_parallel: signals landed", loc,
                   link=len(thread.actions) - 1))
