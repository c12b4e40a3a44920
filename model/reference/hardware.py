"""The hardware barriers that are not mbarriers, from the PTX ISA: `bar.sync` / `bar.arrive`
(named barriers 0..15 of a block; `__syncthreads` is barrier 0 with every thread of the block)
and `barrier.cluster.arrive` / `.wait` (one barrier for every thread of the cluster). They count
hardware threads: a warpgroup outside a warp region arrives as all its warps, a warp as 32."""

from __future__ import annotations

from ..ir import Op, evaluate
from .machine import (IN_REGION, LANE_SPLIT, NAMED_BARRIERS, WARP_THREADS, Action, Finding,
                      Machine, Thread)


class ClusterHardware:
    """Building the actions of hardware barrier operations (a mixin of Cluster)."""

    def _hw_barrier(self, op: Op, env, thread: Thread) -> None:
        """bar.sync / bar.arrive on a named barrier of the block (syncthreads: id 0, every
        thread), barrier.cluster.arrive / wait. A thread arrives with its hardware threads: a
        whole warpgroup outside a warp region, one warp inside."""
        loc, add = op.loc, thread.actions.append
        width = WARP_THREADS if IN_REGION in env else self.kernel.num_warps * WARP_THREADS
        if op.kind in ("cluster_arrive", "cluster_wait"):
            text = "cluster_arrive(relaxed=True)" if op.name == "relaxed" else f"{op.kind}()"
            add(Action(op.kind, text, loc, amount=width, link=op.name))
            return
        nthreads = evaluate(self.kernel.num_threads, self.env) * self.kernel.num_warps * \
            WARP_THREADS
        everyone = op.name == "syncthreads"
        bar_id = 0 if everyone else evaluate(op.bar_id, env)
        count = nthreads if everyone else evaluate(op.count, env)
        if not 0 <= bar_id < NAMED_BARRIERS:
            self.findings.append(Finding("BP143", f"named barrier id {bar_id}", loc))
            return
        if count < WARP_THREADS or count % WARP_THREADS or count > nthreads:
            self.findings.append(Finding("BP140", f"named barrier {bar_id} counts {count} "
                                         f"threads (a block has {nthreads})", loc))
            return
        if everyone:
            text = "syncthreads()"
        else:
            spelled = "bar.arrive" if op.kind == "bar_arrive" else \
                "bar.sync" if op.aligned else "barrier.sync"
            text = f"{spelled}({bar_id}, {count})"
        key = (thread.block, bar_id)
        # The instruction is the IR operation, not its source line: a helper that emits
        # `bar.sync` from two branches puts two instructions on one line.
        site = id(op) if op.kind == "bar_sync" and op.aligned else None
        if LANE_SPLIT in env:
            # Part of a warp at this copy of the instruction: the aligned form requires the
            # whole warp at one instruction (PTX), and none of the copies ever sees it.
            add(Action("hw_split", text, loc, (key,), width, link=op.kind == "bar_sync"))
            if op.kind == "bar_sync":       # and then at its wait, for a phase left open
                add(Action("hw_wait", text, loc, (key,), count))
            return
        add(Action("hw_arrive", text, loc, (key,), width,
                   link=(count, site, op.kind == "bar_sync")))
        if op.kind == "bar_sync":
            add(Action("hw_wait", text, loc, (key,), count))

    def cluster_order(self) -> None:
        """BP145, read off each thread's actions: barrier.cluster.arrive and .wait alternate,
        starting with the arrive."""
        for thread in self.threads.values():
            armed = False
            for action in thread.actions:
                if action.kind == "cluster_arrive" or action.kind == "cluster_wait":
                    if (action.kind == "cluster_arrive") == armed:
                        self.findings.append(Finding(
                            "BP145", f"{thread.name}: {action.text} out of order", action.loc))
                        break
                    armed = not armed


class RulesHardware:
    """The step rules of hardware barrier arrivals (a mixin of Rules; waits are in can_move)."""

    def named_arrive(self, m: Machine, agent: str, action: Action) -> Finding | None:
        """bar.sync / bar.arrive: the thread's hardware threads arrive on the open phase; the
        phase completes at its count and the barrier resets (PTX bar)."""
        key = action.targets[0]
        count, site, sync = action.link
        phase, arrived, open_count, open_site = m.named.get(key, (0, 0, None, None))
        label = f"named barrier {key[1]}" + (f" of block {key[0]}" if self.cluster.multi_block
                                              else "")
        # The thread is at the barrier whatever rule its arrival breaks: with that rule
        # ignored, its wait is for this phase, which the uncounted arrival leaves open.
        if sync:
            m.hw_arrived[(agent, key)] = phase
        if open_count is not None and open_count != count:
            return Finding("BP142", f"{agent} arrives on {label} counting {count} threads while "
                           f"its open phase counts {open_count}", action.loc)
        if site is not None:
            if open_site is not None and open_site != site:
                return Finding("BP141", f"{agent}'s aligned bar.sync on {label} is not the "
                               "instruction its open phase started at", action.loc)
            open_site = site
        arrived += action.amount
        if arrived > count:
            return Finding("BP142", f"{arrived} threads arrive on {label}, which counts {count}",
                           action.loc)
        self.publish(m, agent, key, phase, True)
        m.named[key] = (phase + 1, 0, None, None) if arrived == count else \
            (phase, arrived, count, open_site)
        return None

    def cluster_arrive(self, m: Machine, agent: str, action: Action) -> Finding | None:
        """barrier.cluster.arrive: completes the phase once every thread of the cluster did."""
        if (agent, "cluster") in m.hw_arrived:
            return Finding("BP145", f"{agent} arrives twice on the cluster barrier", action.loc)
        phase, arrived = m.cluster_bar
        m.hw_arrived[(agent, "cluster")] = phase
        self.publish(m, agent, "cluster", phase, action.link != "relaxed")
        arrived += action.amount
        m.cluster_bar = (phase + 1, 0) if arrived == self.cluster_threads else (phase, arrived)
        return None
