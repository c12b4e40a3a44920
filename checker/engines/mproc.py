"""The raw breadth-first search over several processes: `barrierproof check --workers N`.

Each worker owns the states whose hash falls in its partition (the low 32 bits modulo the
workers; the visited set's slots use the high 32): its visited set, its part of the
breadth-first tree and its part of each level's frontier; nothing is shared but the rank array
below. A level goes in lockstep: every worker expands its frontier on the compiled core's rules
(_mproc.c includes _core.c) into one buffer of successor records per owner, the buffers cross
the pipes between workers, and each owner stores what it received. The coordinator (this
process) only gathers each level's small summaries and turns the rank array into prefix sums.

The order of the one-process search is kept exactly, so the verdict, the state and transition
counts, the depth and the counterexample (the first met among the violations of least code at
the shallowest level) are those of compiled.py's search: a frontier state carries a rank that
orders the level as that search's queue does; each parent writes its number of moves at its
rank, the coordinator makes the array exclusive prefix sums, and an owner merges the records it
received by (parent rank, move index), the order that search meets them in, so the first record
of a state names the parent and action it stores and prefix[parent rank] + move index is the
new state's rank. The counterexample is then rebuilt from the workers' trees and replayed by
compiled.py's `outcome`, as the one-process core's is.

Per level each worker sends each successor it generated to its owner, itself included (the
packed state plus 28 bytes), unless a cache of the successors it sent before holds it (a repeat
is already stored by its owner, first met); the rank array holds 8 bytes per transition of the
level before; the coordinator touches it once per level (a prefix sum, linear) and otherwise
moves a few tuples per worker. Limits (states, time, memory: the partitions' stores) are checked
between levels, so a level is finished past a time limit. Workers ignore Ctrl-C: the
coordinator takes it, ends them, and reports what the levels completed covered; a worker that
dies ends the search `bounded` with the reason (no verdict is drawn from part of the states).

What it does not search (reductions on, a System the compiled core refuses, no fork or no
memfd on this platform, the extension not built) runs the ordinary search with a note saying so.
"""

from __future__ import annotations

import mmap
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import threading
import time
from array import array

from ...model.semantics import System
from ...model.violations import rank as code_rank
from .compiled import (ALIASING, AT_INITIAL, BY_STEP, DEADLOCK, DEPTH_LIMIT, IN_STATE,
                       INTERRUPTED, MEMORY_LIMIT, STATE_LIMIT, TIME_LIMIT, VERIFIED, VIOLATION,
                       outcome)
from .core_sources import stale
from .flatten import Refused, flatten
from .search_result import ExploreResult, Limits, _rss_bytes

try:
    from . import _mproc
except ImportError:     # built without a C compiler: one process searches
    _mproc = None
if _mproc is not None and stale(_mproc) is not None:    # as compiled.py's core
    _mproc = None

NOTE = ("searched breadth first by {n} worker processes on the compiled core's rules (a visited "
        "set partitioned by hash), which reach the states, verdict and shortest counterexample of "
        "the one-process search")


class WorkerDied(Exception):
    """A worker process ended without answering."""


def workers_count(value: str | int | None) -> int:
    """`--workers`: a positive count, or `auto` for every core of the machine."""
    if value is None:
        return 1
    if str(value) == "auto":
        return os.cpu_count() or 1
    n = int(value)
    if n < 1:
        raise ValueError("--workers takes a positive count or auto")
    return n


def refusal(reduced: bool, tolerate, order: str, core: str | None) -> str | None:
    """Why the parallel search cannot run this search, or None when it can."""
    if _mproc is None:
        return ("its compiled extension is not built (no C compiler at install), or was built "
                "from older sources (reinstall: pip install -e .)")
    if reduced:
        return "it searches without reductions (give --no-reduction)"
    if tolerate:
        return "a suppressed finding is searched around by the Python explorer only"
    if order != "bfs":
        return "it searches breadth first only"
    if core == "python":
        return "--core python asks for the Python explorer"
    if "fork" not in multiprocessing.get_all_start_methods() or not hasattr(os, "memfd_create"):
        return "this platform has no fork or memfd_create"
    if multiprocessing.current_process().daemon:
        return "it runs inside a daemon process, which cannot start workers"
    return None


def parallel_or_why(system: System, limits: Limits, ignore: frozenset[str], workers: int,
                    progress, reduced: bool, tolerate, order: str, core: str | None):
    """(the parallel search's result, None), or (None, why it does not run this search)."""
    from .compiled import chosen
    why = refusal(reduced, tolerate, order, chosen(core))
    if why is None:
        try:
            return explore_parallel(system, limits, ignore, workers, progress), None
        except Refused as refused:
            why = f"the compiled core does not state {refused}"
    return None, f"the parallel explorer does not run it ({why})"


def explore_parallel(system: System, limits: Limits, ignore: frozenset[str], workers: int,
                     progress=None, cpu: list | None = None) -> ExploreResult:
    """The raw breadth-first search in `workers` processes; raises `Refused` for a System the
    compiled core does not state. `cpu`, if given, receives each worker's CPU seconds (for
    bench/parallel.py: the busiest worker bounds the time on free cores)."""
    start = time.perf_counter()
    flat = flatten(system, ignore)
    for word in (2, 4):          # states in 16-bit words; a value beyond them: 32-bit ones
        if cpu is not None:
            cpu.clear()
        found = _search(system, flat, word, workers, limits, ignore, progress, start, cpu)
        if found is not None:
            return found
    raise AssertionError("a state does not fit 32-bit words")


class _Ranks:
    """The rank array the workers write each parent's moves into, in a memfd every worker maps
    (it grows between levels)."""

    def __init__(self):
        self.fd = os.memfd_create("barrierproof-ranks")
        self.room = 0
        self.map = None
        self.grow(1 << 16)

    def grow(self, need: int) -> None:
        if need <= self.room:
            return
        room = max(need, 2 * self.room)
        os.ftruncate(self.fd, room * 8)
        if self.map is not None:
            self.map.close()
        self.map = mmap.mmap(self.fd, room * 8)
        self.room = room

    def prefix(self, n: int) -> int:
        """Make counts[0:n] exclusive prefix sums; their total."""
        return _mproc.prefix(self.map, n)

    def clear(self, n: int) -> None:
        self.map[:n * 8] = bytes(n * 8)

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
        os.close(self.fd)


def _serve(me: int, n: int, flat: tuple, word: int, ctrl, peers: dict, fd: int) -> None:
    """A worker: answers the coordinator's commands until told to stop."""
    from ...guard import die_with_parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the coordinator takes Ctrl-C
    die_with_parent(os.getppid())
    scalars, arrays, codes, init = flat
    worker = _mproc.worker(scalars, arrays, codes, word, n, me)
    room, ranks, inbound, shown = 0, None, None, []
    while True:
        command = ctrl.recv()
        if command[0] == "seed":
            ctrl.send(_mproc.seed(worker, init))
        elif command[0] == "expand":
            _, depth, size = command
            if size != room:
                if ranks is not None:
                    ranks.close()
                ranks, room = mmap.mmap(fd, size * 8), size
            got = _mproc.expand(worker, ranks, depth)
            if got is None:                          # too wide: the others still exchange
                ctrl.send(None)
                got = ([b""] * n, 0, None, None, [])
            else:        # the side table's rows only when they changed (None: as before)
                rows = got[4] if got[4] != shown else None
                shown = got[4] if rows is not None else shown
                ctrl.send((*got[1:4], rows))
            inbound = _exchange(me, got[0], peers)
        elif command[0] == "insert":
            ctrl.send(_mproc.insert(worker, inbound, ranks))
            inbound = None
        elif command[0] == "tree":
            ctrl.send(_mproc.tree(worker))
        else:                                        # stop: the CPU seconds it spent
            usage = resource.getrusage(resource.RUSAGE_SELF)
            ctrl.send(usage.ru_utime + usage.ru_stime)
            return


def _exchange(me: int, buffers: list[bytes], peers: dict) -> list[bytes]:
    """Send each peer the records it owns, receive ours (a thread sends while we receive, so
    no pipe fills with both ends writing)."""
    inbound = [b""] * len(buffers)
    inbound[me] = buffers[me]
    sender = threading.Thread(target=lambda: [conn.send_bytes(buffers[o])
                                              for o, conn in sorted(peers.items())])
    sender.start()
    for o, conn in sorted(peers.items()):
        inbound[o] = conn.recv_bytes()
    sender.join()
    return inbound


class _Pool:
    """The worker processes and their pipes; ended (never left behind) on close."""

    def __init__(self, n: int, flat: tuple, word: int, ranks: _Ranks):
        context = multiprocessing.get_context("fork")
        peer_ends: list[dict] = [{} for _ in range(n)]
        for a in range(n):
            for b in range(a + 1, n):
                peer_ends[a][b], peer_ends[b][a] = context.Pipe()
        self.ctrl, self.procs = [], []
        for me in range(n):
            mine, theirs = context.Pipe()
            proc = context.Process(target=_serve, name=f"barrierproof-worker-{me}", daemon=True,
                                   args=(me, n, flat, word, theirs, peer_ends[me], ranks.fd))
            proc.start()
            theirs.close()
            self.ctrl.append(mine)
            self.procs.append(proc)
        for ends in peer_ends:
            for conn in ends.values():
                conn.close()

    def ask(self, *command) -> list:
        for n, conn in enumerate(self.ctrl):
            try:
                conn.send(command)
            except OSError:                      # its end is closed: it has died
                raise WorkerDied(self._death(n)) from None
        return self.gather()

    def gather(self) -> list:
        """Every worker's answer; WorkerDied when one ends first."""
        answers: dict[int, object] = {}
        waiting = {conn: n for n, conn in enumerate(self.ctrl)}
        sentinels = {p.sentinel: n for n, p in enumerate(self.procs)}
        while waiting:
            for ready in multiprocessing.connection.wait(list(waiting) + list(sentinels)):
                if ready in waiting:
                    try:
                        answers[waiting.pop(ready)] = ready.recv()
                    except (EOFError, OSError):
                        raise WorkerDied(self._death(waiting.get(ready, 0)))
                elif sentinels[ready] in waiting.values():
                    raise WorkerDied(self._death(sentinels[ready]))
        return [answers[n] for n in range(len(self.ctrl))]

    def _death(self, n: int) -> str:
        """Which workers ended, with their exit codes (one's death ends its peers in the
        exchange, so whichever the coordinator noticed first, every one is named)."""
        self.procs[n].join(0.5)
        time.sleep(0.1)
        ended = [f"worker {k} ended (exit code {p.exitcode})"
                 for k, p in enumerate(self.procs) if p.exitcode is not None]
        return "; ".join(ended)

    def close(self) -> list[float | None]:
        """End the workers; the CPU seconds each reports spending (None: it did not say)."""
        for conn in self.ctrl:
            try:
                conn.send(("stop",))
            except (OSError, ValueError):
                pass
        cpu: list[float | None] = []
        deadline = time.monotonic() + 1.0
        for conn in self.ctrl:
            try:
                cpu.append(conn.recv() if conn.poll(max(deadline - time.monotonic(), 0))
                           else None)
            except (EOFError, OSError):
                cpu.append(None)
        for proc in self.procs:
            proc.join(max(deadline - time.monotonic(), 0))
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self.ctrl:
            conn.close()
        return cpu


def _search(system, flat, word, n, limits, ignore, progress, start, cpu) -> ExploreResult | None:
    ranks = _Ranks()
    pool = _Pool(n, flat, word, ranks)
    budget = None if limits.max_memory_mb is None else \
        max(limits.max_memory_mb * 2**20 - _rss_bytes(), 0)
    out = {"status": VERIFIED, "states": 1, "transitions": 0, "depth": 0, "unexpanded": 0,
           "kind": 0, "code": 0, "pred": 0, "action": 0, "conflict": -1, "returns": [],
           "bytes": 0}
    note = NOTE.format(n=n)
    try:
        try:
            seeds = pool.ask("seed")
            if any(s is None for s in seeds):
                return None
            _, code = seeds[0]                 # every worker judges the initial state
            if code:
                out.update(status=VIOLATION, kind=AT_INITIAL, code=code)
                return _finish(system, out, pool, n, limits, ignore, start, note)
            found = _levels(pool, ranks, out, n, limits, budget, progress, start)
            if found is None:
                return None
        except KeyboardInterrupt:
            out["status"] = INTERRUPTED
        except WorkerDied as why:
            return ExploreResult("bounded", out["states"], out["transitions"], out["depth"],
                                 time.perf_counter() - start, reduction=False, store="compiled",
                                 reason=f"the parallel search stopped at depth {out['depth']}: "
                                        f"{why}", notes=[note])
        return _finish(system, out, pool, n, limits, ignore, start, note)
    finally:
        spent = pool.close()
        ranks.close()
        if cpu is not None:
            cpu.extend(spent)


def _levels(pool, ranks, out, n, limits, budget, progress, start) -> bool | None:
    """The levels, until a verdict or a limit (in `out`); None when a state is too wide."""
    frontier, room = 1, 1
    returns: list[list] = [[] for _ in range(n)]     # each worker's side table rows
    while frontier:
        if limits.max_depth is not None and out["depth"] >= limits.max_depth:
            out.update(status=DEPTH_LIMIT, unexpanded=frontier)
            return True
        expanded = pool.ask("expand", out["depth"], ranks.room)
        if any(e is None for e in expanded):
            pool.ask("insert")                   # the exchange has happened: drain it
            return None
        transitions = sum(e[0] for e in expanded)
        out["transitions"] += transitions
        ranks.prefix(room)
        inserted = pool.ask("insert")
        out["states"] += sum(i[0] for i in inserted)
        out["bytes"] = sum(i[3] for i in inserted)
        frontier = sum(i[1] for i in inserted)
        dead = min((e[1] for e in expanded if e[1] is not None), default=None, key=_ranked)
        best = min([(_ranked(e[2][:3]), BY_STEP, e[2]) for e in expanded if e[2] is not None] +
                   [(_ranked(i[2][:3]), IN_STATE, i[2]) for i in inserted if i[2] is not None],
                   default=None)
        # a conflict needs a row new at this level: the table is merged again only then
        changed = any(e[3] is not None for e in expanded)
        for n_worker, e in enumerate(expanded):
            if e[3] is not None:
                returns[n_worker] = e[3]
        rows = [row for part in returns for row in part]
        conflict = _conflict(rows, out["depth"]) if rows and changed else None
        if dead is not None:
            out.update(status=VIOLATION, kind=DEADLOCK, code=dead[0], pred=dead[2])
        elif best is not None and (conflict is None or best[0][0] <= 101):
            out.update(status=VIOLATION, kind=best[1], code=best[2][0], pred=best[2][3],
                       action=best[2][4])
        elif conflict is not None:
            out.update(status=VIOLATION, kind=ALIASING, code=101, conflict=conflict[1])
        if out["status"] == VIOLATION:
            out["returns"] = _table(rows, out["depth"], conflict)
            return True
        if progress is not None:
            seconds = time.perf_counter() - start
            progress({"states": out["states"], "depth": out["depth"], "frontier": frontier,
                      "rate": out["states"] / max(seconds, 1e-9), "seconds": seconds,
                      "bytes_per_state": out["bytes"] / out["states"]})
        stop = _limit(limits, out, budget, start)
        if stop is not None:
            out["status"] = stop
            return True
        if frontier:
            out["depth"] += 1
        room = transitions
        ranks.grow(room)
        ranks.clear(room)
    out["status"] = VERIFIED
    return True


def _limit(limits: Limits, out: dict, budget, start) -> int | None:
    if limits.max_states is not None and out["states"] > limits.max_states:
        return STATE_LIMIT
    if limits.timeout is not None and time.perf_counter() - start > limits.timeout:
        return TIME_LIMIT
    if budget is not None and out["bytes"] > budget:
        return MEMORY_LIMIT
    return None


def _firsts(rows: list, depth: int, last_rank: int | None) -> dict:
    """Per bare parity wait, the first two distinct completions over every partition, in the
    one-process search's order (depth, rank); at `depth`, none past the state of rank
    `last_rank` (that search stops noting returns after a conflict's state)."""
    entries: dict[int, list] = {}
    for i, completion, d, rank, gid in rows:
        if last_rank is not None and d == depth and rank > last_rank:
            continue
        entries.setdefault(i, []).append((d, rank, completion, gid))
    table = {}
    for i, found in entries.items():
        firsts: list = []
        for entry in sorted(found):
            if all(entry[2] != f[2] for f in firsts):
                firsts.append(entry)
            if len(firsts) == 2:
                break
        table[i] = firsts
    return table


def _ranked(found: tuple) -> tuple:
    """A worker's (code, rank, ...) finding in the order of codes every engine uses
    (violations.py `rank`), then the rest of it."""
    return (code_rank(f"BP{found[0]}"),) + tuple(found[1:])


def _conflict(rows: list, depth: int) -> tuple[int, int] | None:
    """(rank, instruction) of the first state at `depth` showing a second completion of a
    bare parity wait, or None."""
    table = _firsts(rows, depth, None)
    return min(((f[1][1], i) for i, f in table.items() if len(f) == 2 and f[1][0] == depth),
               default=None)


def _table(rows: list, depth: int, conflict) -> list[tuple]:
    """The side table as the one-process core returns it: (instruction, completion, depth,
    state id) rows."""
    table = _firsts(rows, depth, conflict[0] if conflict is not None else None)
    return [(i, c, d, gid) for i in sorted(table) for d, _, c, gid in table[i]]


def _finish(system, out, pool, n, limits, ignore, start, note) -> ExploreResult:
    """The result: a violation's counterexample rebuilt from the workers' trees."""
    parents, actions = array("i"), array("i")
    if out["status"] == VIOLATION:
        trees = pool.ask("tree")
        longest = max(t[2] for t in trees)
        parents.extend([-1] * (longest * n))
        actions.extend([-1] * (longest * n))
        for w, (p, a, count) in enumerate(trees):       # global id: local id * n + worker
            part = array("i")
            part.frombytes(p)
            parents[w::n] = part + array("i", [-1] * (longest - count))
            part = array("i")
            part.frombytes(a)
            actions[w::n] = part + array("i", [-1] * (longest - count))
    return outcome(system, out, parents, actions, limits, ignore, start, [note])


__all__ = ["NOTE", "Refused", "WorkerDied", "explore_parallel", "parallel_or_why", "refusal",
           "workers_count"]
