"""Race proofs (BP200/BP201) for every parameter value, beside a barrier proof of the same
kernel: its partitions and class proofs (prove.py, passed in as a BarrierProver) run again on
the class systems with the kernel's accesses added (races.py). The barrier rules are not
re-proved here."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Mapping, Sequence

from ...model.ir import Kernel, has_regions, whole_buffers
from .budget import Budget, own_context, z3_limits
from .laps import queue_only_buffers_dropped
from .lowering import lowered
from .partition import split_constant_arrays, split_constant_buffers
from .positions import by_position, split_positions
from .proofs import BarrierProver, ClassProof, Proof
from .races import assign_buffers
from .races_nested import joined_race_proofs, race_kernels
from .races_tiles import prove_races_by_tile
from .read_hulls import widen_thread_reads
from .terms import Unsupported


@own_context()     # the same course and units after any other proof (budget.py)
def prove_races(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                budget: Budget, barriers: BarrierProver) -> Proof:
    """Prove `kernel` free of BP200/BP201 races for every value of `symbolic` (races.py), on
    the class systems of its barrier proof with the kernel's accesses added. Sound only beside
    a barrier proof of the same kernel: the barrier rules are not re-proved here.

    Concrete arrays used as rings at one representative slot (with the buffers indexed like
    them; reads whose region mentions the thread widened to their slots, so that consumers
    reading their own rows are one counted role: read_hulls.py) first, with a third of the
    budget; when that is not proved, the halves of a
    ping-pong (partition.py `role_components`, barrier arrays and buffers at constant slots
    split per slot) with half of what is left, then one class for all concrete barriers, then
    the hand-off classes (partition.py), each judging the buffers its
    barriers guard (races.py: a tcgen05 MMA whose operands are released through one commit and
    whose accumulator through another is proved where the two are apart). Any partition is
    sound for races: every access to a cell is an operation of the cell's class system
    (races.py), so every race on it is a race of that system."""
    start = time.perf_counter()
    parts = split_positions(kernel, symbolic, fixed)    # positions with nests of their own
    if parts is not None:
        return by_position(parts, budget, lambda k, names, share: prove_races(
            k, names, fixed, share, barriers), " (races)")
    proof = _prove_races_of(kernel, symbolic, fixed, budget, start, barriers)
    if proof.status == "unknown" and has_regions(kernel) and not budget.exhausted():
        # regions outside the fragment (a symbolic shape or stride, a region depending on the
        # thread inside a counted role): judged as their whole buffers, coarser, a proof still
        # holds; a failure there says nothing about the regions, so the first answer stands
        whole = _prove_races_of(whole_buffers(kernel), symbolic, fixed, budget, start,
                                 barriers)
        if whole.status == "proved":
            return replace(whole, reason=(whole.reason + "; " if whole.reason else "") +
                           "regions judged as their whole buffers")
    return proof


def races_by_tile(kernel: Kernel, symbolic, fixed, budget: Budget,
                  barriers: BarrierProver, check_at=None) -> Proof:
    """One tile of a persistent kernel where its accesses end within their tiles
    (races_tiles.py), else the kernel whole. `check_at(kernel, values)` -> (ok, text): the
    explorer, for a tile with nothing symbolic left."""
    proof = prove_races_by_tile(kernel, symbolic, fixed,
                                lambda k, s, f: prove_races(k, s, f, budget, barriers),
                                check_at)
    return proof if proof is not None else prove_races(kernel, symbolic, fixed, budget, barriers)


def _prove_races_of(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                    budget: Budget, start: float, barriers: BarrierProver) -> Proof:
    try:
        kernel, _ = lowered(kernel, symbolic, fixed)
    except Unsupported as err:
        return Proof("unknown", time.perf_counter() - start,
                     f"outside the supported fragment for races: {err}")
    try:    # nested loops: the barrier proof's rewrites, with the accesses (races_nested.py)
        parts = race_kernels(kernel, symbolic, fixed)
    except Unsupported as err:
        return Proof("unknown", time.perf_counter() - start,
                     f"outside the supported fragment for races: {err}")
    return joined_race_proofs(parts, fixed, lambda k, s: _prove_races_flat(
        k, s, fixed, budget, start, barriers))


def _prove_races_flat(kernel: Kernel, symbolic: Sequence[str], fixed: Mapping[str, int],
                      budget: Budget, start: float, barriers: BarrierProver) -> Proof:
    # Concrete rings at one representative slot first, with a third of the budget: where
    # they apply, their class is far smaller than the one holding every instance (a multicast
    # ring's all-instance class is sampled in hundreds of thousands of states).
    rings = _prove_races_on(widen_thread_reads(kernel), symbolic, fixed, budget.share(1 / 3),
                            start, barriers, concrete_rings=True)
    if rings is not None and rings.status == "proved":
        return rings
    # the halves of a ping-pong (partition.py `role_components`), each constant slot of a
    # barrier array and of a buffer a class of its own (the Q ring's `ready[0]` guarding
    # `q[0]`), with half of what is left: each half's class is far smaller than the one of
    # every concrete barrier
    halves = _prove_races_on(split_constant_buffers(split_constant_arrays(kernel, fixed), fixed),
                             symbolic, fixed, budget.share_of_left(1 / 2), start, barriers,
                             handoffs=True, halves=True)
    if halves is not None and halves.status == "proved":
        return halves
    first = _prove_races_on(kernel, symbolic, fixed, budget, start, barriers)
    if rings is not None and rings.status != "proved" and first.status != "proved" and \
            first.reason.startswith("outside the supported fragment") and \
            not rings.reason.startswith("outside the supported fragment"):
        # the rings' class is in the fragment and ran out or failed: that is the reason
        first = replace(rings, reason=f"{rings.reason} (with every concrete barrier in one "
                        f"class: {first.reason})")
    if first.status == "proved" or budget.exhausted():
        return first
    other = _prove_races_on(split_constant_arrays(kernel, fixed), symbolic, fixed, budget, start,
                            barriers, handoffs=True)
    if other is not None and other.status == "proved" or budget.exhausted():
        return other if other is not None and other.status == "proved" else first
    # a hand-off through a named barrier (warps writing their parts of a buffer, bar.sync, one
    # of them storing it whole): the buffer is judged in the class of every concrete barrier,
    # where the named barriers are apart; joined with them, its accesses meet their order
    joined = _prove_races_on(kernel, symbolic, fixed, budget, start, barriers, join_named=True)
    if joined is None or joined.status == "proved":
        return joined or first
    return replace(first, reason=f"{first.reason}; the named barriers are a class apart from "
                   "the one judging the buffers, so a hand-off through bar.sync is not seen "
                   f"there; with them joined to every concrete barrier: {joined.reason}")


def races_of_lap_case(kernel: Kernel, symbolic, fixed, budget: Budget,
                      barriers: BarrierProver) -> Proof:
    """Races of a case of laps.py: its slots are numbers, so hand-off pairs first (with half
    of what is left), then the usual course."""
    start = time.perf_counter()
    with z3_limits(budget):
        pairs = _prove_races_on(split_constant_arrays(queue_only_buffers_dropped(kernel), fixed),
                                symbolic, fixed,
                                budget.share_of_left(1 / 2), start, barriers, handoffs=True)
    if pairs is not None and pairs.status == "proved":
        return pairs
    return prove_races(kernel, symbolic, fixed, budget, barriers)


def _prove_races_on(kernel: Kernel, symbolic, fixed, budget: Budget, start: float,
                    barriers: BarrierProver,
                    concrete_rings: bool = False, handoffs: bool = False,
                    join_named: bool = False, halves: bool = False) -> Proof | None:
    """prove_races on one partition; None when `concrete_rings` or `handoffs` changes
    nothing."""
    try:
        frag = barriers.partition(kernel, symbolic, fixed, concrete_rings, handoffs, join_named,
                                  halves=halves)
        if frag is None:
            return None
        assign_buffers(frag)
        # no static order: the race systems have no progress condition
        group = 0
        for role in frag.roles:
            for item in role.items:
                item.group, group = group, group + 1
                item.ranks = [0] * max(1, len(item.ops))
                item.shift = 0
        systems = [(c, s, b) for c, s, b in frag.build_systems() if s.cells]
    except Unsupported as err:
        return Proof("unknown", time.perf_counter() - start,
                     f"outside the supported fragment for races: {err}")
    for _, system, _ in systems:
        system.progress = False
        system.races_only = True
    proofs: list[ClassProof] = []
    with z3_limits(budget):
        failed = barriers.prove_systems(frag, systems, kernel, symbolic, fixed, budget, proofs)
    side = [text for _, text in frag.side_conditions]
    seconds = time.perf_counter() - start
    if failed is not None:
        coarse = sorted(getattr(frag, "coarse_regions", ()))
        why = failed[1] + ("; regions judged as whole slots of " + ", ".join(
            f"`{n}`" for n in coarse) + " (a ring slot, or a symbolic number of slots)"
            if coarse else "")
        paired = sorted(getattr(frag, "paired_regions", ()))
        why += ("; regions of " + ", ".join(f"`{n}`" for n in paired) + " judged by the pairs "
                "that may meet at some parameter values and loop positions" if paired else "")
        return Proof(failed[0], seconds, why, proofs, side)
    return Proof("proved", seconds, "", proofs, side)
