"""The program every proof of a kernel reads: the barrier proof (prove.py) and the race proof
(races_proof.py) must start from the same rewrites, so they are made in one place. Hardware
barriers, lockstep semaphores and cluster syncs are lowered to mbarrier operations; loops of a
concrete count unrolled or strip-mined; ring arrays with one symbolic dimension split; ring
indices and parities put in canonical form where Z3 proves them equal."""

from __future__ import annotations

from typing import Mapping, Sequence

from ...model.ir import Kernel
from .cluster_sync import lower_cluster_sync
from .hw import lower_named_barriers
from .ring_index import normalise_ring_indices
from .semaphores import lower_lockstep
from .unroll import split_ring_arrays, strip_mine_loops, unroll_fixed_loops


def lowered(kernel: Kernel, symbolic: Sequence[str],
            fixed: Mapping[str, int]) -> tuple[Kernel, list[str]]:
    """The rewritten kernel and the notes on ring-like indices left as written. Raises
    terms.Unsupported where a lowering does not apply (the proof is then `unknown`)."""
    kernel = lower_cluster_sync(lower_lockstep(lower_named_barriers(kernel, fixed), fixed))
    kernel = split_ring_arrays(unroll_fixed_loops(strip_mine_loops(kernel, fixed), fixed), fixed)
    return normalise_ring_indices(kernel, symbolic, fixed)
