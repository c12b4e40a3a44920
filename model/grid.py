"""Where a System sits in the grid and what its cluster holds: the cluster positions a kernel's
grid is checked at, the clusters modelled in lockstep as blocks of their own, and the blocks a
multicast along cluster axes reaches. Pure functions of the kernel and its parameter values;
semantics.py builds one System per position (`compile_systems`).
"""

from __future__ import annotations

import itertools
from typing import Mapping

from . import kinds
from .ir import Kernel, evaluate

# Above this many cluster positions a grid is checked at a few positions per axis (the check
# says so).
GRID_LIMIT = 4096
# Lockstep clusters modelled as blocks of their own: the axis's name (not an identifier, so no
# name of the protocol can clash) and the most blocks this may make.
LOCKSTEP_AXIS = "·lockstep"
LOCKSTEP_LIMIT = 16


def lockstep_blocks(kernel: Kernel, env: Mapping[str, int], blocks: int) -> int:
    """How many clusters a System models explicitly, as blocks along LOCKSTEP_AXIS (1: none).

    A global semaphore signalled in lockstep by `copies` clusters is one counter; while its waits
    only read it, one modelled cluster whose signals count `copies` times stands for all of them.
    A decrementing wait takes from the counter what the other clusters' waits then lack, so the
    copies are modelled as clusters of their own (each its own barriers, the one counter shared)
    when every semaphore has the same `copies`, the kernel has no cluster barrier (which would
    then span them) and they make at most LOCKSTEP_LIMIT blocks."""
    sems = [a for a in kernel.barriers if a.semaphore]
    copies = {evaluate(a.copies, env) for a in sems}
    if len(copies) != 1 or (n := copies.pop()) <= 1 or n * blocks > LOCKSTEP_LIMIT:
        return 1
    ops = list(kernel.ops())
    classes = [kinds.lookup(op.kind) for op in ops]
    if not any(p is not None and p.consumes and op.decrement for p, op in zip(classes, ops)) \
            or any(p is not None and p.cluster_wide for p in classes):
        return 1
    return n


def grid_size(kernel: Kernel, params: Mapping[str, int]) -> int:
    total = 1
    for _, n in kernel.grid:
        total *= max(1, evaluate(n, kernel.param_values(params)))
    return total


def grid_positions(kernel: Kernel, params: Mapping[str, int], limit: int = GRID_LIMIT
                   ) -> list[dict[str, int]]:
    """Every cluster position of the grid while there are at most `limit`; beyond that the
    first, second and last position along each axis (the caller must say so)."""
    values = kernel.param_values(params)
    sizes = [(axis, max(1, evaluate(n, values))) for axis, n in kernel.grid]
    if grid_size(kernel, values) > limit:
        ranges = [sorted({0, min(1, n - 1), n - 1}) for _, n in sizes]
    else:
        ranges = [range(n) for _, n in sizes]
    return [dict(zip([a for a, _ in sizes], combo)) for combo in itertools.product(*ranges)]


def peer_blocks(block: tuple[int, ...], dims: list[int], shape: tuple[int, ...]) -> list[tuple]:
    """Every block of the cluster that agrees with `block` outside the dimensions `dims` (the
    blocks a multicast along those cluster axes reaches, `block` included)."""
    peers = []
    for coords in itertools.product(*[range(shape[d]) for d in dims]):
        b = list(block)
        for d, c in zip(dims, coords):
            b[d] = c
        peers.append(tuple(b))
    return peers
