"""One budget for a whole `prove` run: what `--timeout T` allows, shared by every phase.

`--timeout T` buys T seconds of work at a reference speed, counted, not timed: Z3's resource
units (`rlimit`, counted by Z3 itself, the same on every machine and under any load) and the
Python work of the phases around the queries (states sampled, candidate facts read off them,
explicit states searched), each at its reference cost in the same units. So the verdict
depends on the input and T only: a phase that finds the budget spent stops there, and the
verdict is `unknown` naming that phase, never a stronger one.

Every phase draws from the one budget of the run (prove_kernel makes it): the partitions,
cases and tiles of the barrier proof, the race proof after it and the explorer's searches
(the cross-check of a proof, the search for breaking values) get what the phases before them
left; a share (`share`) caps what one part may spend, and what it spends is spent for the run.
Parts tried in turn pass on what they leave: a part that ends under its share (skipped,
refused, proved) adds the unused units to the next part's share (`unused`), so a fixed split
never strands budget that a later part needs. Units are counted, so the carry is too.

The nets behind the count are wall-clock and CPU time, one deadline each for the whole run:
this process's CPU seconds (WALL_NET_FACTOR times T plus a grace: a second CPU-bound process
beside this one slows it down without adding to its CPU time, so the net lands at the same
point of the work, idle or loaded), and the wall clock LOAD_ALLOWANCE times further (each Z3
query's own `timeout` is what it leaves). A net that hits first is reported as such: then a
busy machine, not the input, decided the verdict.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable

import z3

from ..check import LOAD_ALLOWANCE, WALL_NET_FACTOR
from . import work
from .work import BudgetSpent  # noqa: F401  (raised by work.tick, caught by the phases)

Z3_UNITS_PER_SECOND = 1_000_000
# the reference speed of the counted Python work, in units of the same scale (one unit is a
# microsecond at the reference speed)
UNITS_PER_SAMPLED_STATE = 100       # a state of a class system explored for samples
UNITS_PER_FACT_ROW = 1              # one sampled state read for one place's candidate facts
FACT_CELLS_PER_UNIT = 20            # entries of a feature table passed over in array code
UNITS_PER_ENCODED_CELL = 5          # a state variable of a transition's successor, as a Z3 term
UNITS_PER_ORDER_TERM = 150          # a (blocked place, earlier place) deadlock term
UNITS_PER_REPLAYED_EVENT = 50       # an event of a candidate order's concrete replay
STATES_PER_SECOND = 5_000           # explicit explorer states (the explorer counts them itself)
UNITS_PER_EXPLORED_STATE = Z3_UNITS_PER_SECOND // STATES_PER_SECOND
ORDERS_PER_SECOND = 0.5
MIN_ORDERS = 8
NET_GRACE = 2.0     # as the CLI's watchdog


def cpu_seconds() -> float:
    """CPU seconds this process has run (every thread, Z3's included)."""
    return time.process_time()


def _context_work() -> int:
    """The resource counter of the Z3 context in force (every solver of it adds to it), read
    off one idle solver of the context: making a solver costs a unit, so a reading that made
    one would make the count depend on how often it is read (the progress display reads it)."""
    global _reader
    ctx = z3.main_ctx()
    if _reader is None or _reader.ctx is not ctx:
        _reader = z3.Solver(ctx=ctx)
    stats = _reader.statistics()
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0


_reader: z3.Solver | None = None    # the idle solver of the context last read
_work_elsewhere = 0     # Z3 units of the contexts this process left, net of the one in force


def z3_work() -> int:
    """Z3's resource units spent by this process, in every context it used (own_context)."""
    return _work_elsewhere + _context_work()


@contextlib.contextmanager
def own_context():
    """Every Z3 term, solver and counter made inside in a fresh Z3 context (the one
    z3.main_ctx() returns meanwhile): Z3 numbers its terms in the order a context makes them
    and breaks ties by those numbers, and Spacer's and the solvers' courses follow, so in a
    shared context a proof could take another course, and spend other units, after other
    proofs. Nested: the context in force stays. What is spent inside still counts for the
    process (z3_work), so a budget made outside keeps its account."""
    global _work_elsewhere, _reader
    if _own:
        yield
        return
    outer, outer_work = z3.main_ctx(), _context_work()
    _work_elsewhere += outer_work
    _own.append(z3.Context())
    z3.z3._main_ctx = _own[-1]
    try:
        yield
    finally:
        _work_elsewhere += _context_work() - outer_work
        z3.z3._main_ctx, _reader = outer, None      # the proof's context is freed with its terms
        _own.pop()


_own: list = []     # the proof's own context while one is in force


def units_spent() -> int:
    """All counted work of this process: Z3's units and the Python work ticked (work.py)."""
    return z3_work() + work.ticks()


class Budget:
    """What `--timeout seconds` allows, and the nets behind it. A Budget made with `parent`
    is a share of it: it may spend `seconds` of work, never more than the parent has left, and
    it shares the parent's nets and phase."""

    def __init__(self, seconds: float, parent: "Budget | None" = None,
                 progress: Callable[[dict], None] | None = None):
        self.seconds = seconds
        self.parent = parent
        self.root = parent.root if parent is not None else self
        self.units = int(seconds * Z3_UNITS_PER_SECOND)
        self.start_units = units_spent()
        self.orders = max(MIN_ORDERS, int(seconds * ORDERS_PER_SECOND))
        self.states = int(seconds * STATES_PER_SECOND)
        if parent is None:
            self.cpu_start = cpu_seconds()
            self.wall_start = time.monotonic()
            self._phase = "start"
            self.progress = progress

    # -- the count ------------------------------------------------------------------------

    def spent(self) -> int:
        return units_spent() - self.start_units

    def z3_left(self) -> int:
        """Units left (Z3's and the counted Python work's): this share's, within its
        parent's."""
        left = self.units - self.spent()
        return left if self.parent is None else min(left, self.parent.z3_left())

    def share(self, fraction: float, carried: int = 0) -> "Budget":
        """A part of this budget: `fraction` of it, plus `carried` units (what the parts tried
        before it left unused: `unused`), within what is left of it."""
        return Budget(self.seconds * fraction + carried / Z3_UNITS_PER_SECOND, parent=self)

    def unused(self) -> int:
        """Units of this share not spent (0 once spent or over): what a part that ended early
        -- proved, refused or skipped under its share -- passes on to the parts after it."""
        return max(0, self.units - self.spent())

    def share_of_left(self, fraction: float) -> "Budget":
        return Budget(max(0.0, self.z3_left()) / Z3_UNITS_PER_SECOND * fraction, parent=self)

    def states_left(self, floor: int = 0) -> int:
        """Explicit states the rest of the budget buys (at least `floor`)."""
        return max(floor, int(max(0, self.z3_left()) / Z3_UNITS_PER_SECOND * STATES_PER_SECOND))

    # -- the nets (one deadline each for the run) --------------------------------------------

    def net_left(self) -> float:
        """CPU seconds until the run's net (WALL_NET_FACTOR * T + NET_GRACE), at least one."""
        root = self.root
        return max(1.0, root.seconds * WALL_NET_FACTOR + NET_GRACE
                   - (cpu_seconds() - root.cpu_start))

    def wall_left(self) -> float:
        """Wall seconds until the run's wall-clock net (LOAD_ALLOWANCE times the CPU net)."""
        root = self.root
        return (root.seconds * WALL_NET_FACTOR + NET_GRACE) * LOAD_ALLOWANCE \
            - (time.monotonic() - root.wall_start)

    def query_timeout(self) -> float:
        """A Z3 query's own timeout, in wall seconds: what the nets leave (a query cut by it is
        the net's, not the budget's)."""
        return max(1.0, min(self.net_left() * LOAD_ALLOWANCE, self.wall_left()))

    def exhausted(self) -> bool:
        return self.z3_left() <= 0 or self.net_left() <= 1.0 or self.wall_left() <= 1.0

    # -- phases --------------------------------------------------------------------------

    def enter(self, phase: str) -> None:
        """The run is now in `phase`: what a spent budget's reason names, and what progress
        shows."""
        root = self.root
        root._phase = phase
        if root.progress is not None:
            root.progress({"phase": phase, "spent": root.spent() / max(1, root.units),
                           "seconds": root.seconds})

    @property
    def phase(self) -> str:
        return self.root._phase

    def spent_text(self) -> str:
        where = f" during {self.phase}"
        if self.wall_left() <= 1.0:
            return (f"wall-clock net ({WALL_NET_FACTOR * LOAD_ALLOWANCE:g} x "
                    f"{self.root.seconds:g}s) reached{where}: the machine was too busy to "
                    "spend the work budget in time")
        if self.z3_left() > 0:
            return (f"CPU-time net ({WALL_NET_FACTOR:g} x {self.root.seconds:g}s) reached"
                    f"{where} before the work budget was spent (work the units do not count "
                    "took longer than the budget assumes)")
        return (f"work budget of --timeout {self.root.seconds:g} spent{where} "
                f"({self.root.units:,} units)")


class z3_limits:
    """Each Z3 query and each counted step inside may use at most what the budget has left
    (`rlimit`, deterministic); the nets are the queries' own timeouts."""

    def __init__(self, budget: Budget):
        self.budget = budget

    def __enter__(self):
        z3.set_param("rlimit", max(1, self.budget.z3_left()))
        work.push(self.budget)      # and, query by query, what is left (work.py)
        return self

    def __exit__(self, *exc):
        work.pop()
        z3.set_param("rlimit", max(1, work.top().z3_left()) if work.top() else 0)


__all__ = ["Budget", "BudgetSpent", "FACT_CELLS_PER_UNIT", "UNITS_PER_ENCODED_CELL",
           "UNITS_PER_ORDER_TERM", "MIN_ORDERS", "NET_GRACE", "ORDERS_PER_SECOND",
           "STATES_PER_SECOND", "UNITS_PER_EXPLORED_STATE", "UNITS_PER_FACT_ROW", "UNITS_PER_REPLAYED_EVENT", "UNITS_PER_SAMPLED_STATE",
           "Z3_UNITS_PER_SECOND", "cpu_seconds", "own_context", "units_spent", "z3_limits",
           "z3_work"]
