"""The sizes one block of a GPU can have, checked on a kernel's concrete sizes before it is
compiled. Compiling makes one object per thread, barrier and buffer cell, so a size no GPU
runs (`--param stages=100000000`) would spend minutes and gigabytes before any search and its
`--timeout` began; it is an input error instead, at the allocation's line. The limits are the
hardware's, not settings: a protocol checked beyond them says nothing about a real kernel.
"""

from __future__ import annotations

from typing import Mapping

from .ir import Kernel, Loc, ModelError, evaluate

# 8-byte mbarriers in a block's shared memory (228 KB on Hopper and Blackwell): far above what
# a kernel uses, and far below what would exhaust the checker's memory.
MAX_BARRIER_INSTANCES = 2 ** 15
# Threads of a block (CUDA's limit on every compute capability); a protocol's thread stands
# for one or more of them.
MAX_THREADS = 1024
# Blocks of a cluster (16 with the non-portable cluster size on Hopper and Blackwell).
MAX_CLUSTER_BLOCKS = 16
# Cells of a block's buffers: each is at least a byte of its shared memory (228 KB) or tensor
# memory (256 KB).
MAX_BUFFER_CELLS = 2 ** 19


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _size(expr, env: Mapping[str, int]) -> int:
    """A size's value, 1 where it cannot be evaluated yet (compiling reports that itself)."""
    try:
        return max(1, evaluate(expr, env))
    except ModelError:
        return 1


def check_block_sizes(kernel: Kernel, env: Mapping[str, int]) -> None:
    """Raise an input error for a cluster, thread count, barrier array or buffer larger than
    one block or cluster can hold, with the parameter values that made it."""
    def refuse(what: str, limit: str, loc: Loc | None) -> None:
        given = {n: env[n] for n in kernel.params if n in env}
        at = " with " + ", ".join(f"{n}={v}" for n, v in given.items()) if given else ""
        raise ModelError(f"{kernel.name}{at}: {what}; {limit}", loc=loc or kernel.loc,
                         hint="this is the hardware's limit: check smaller sizes "
                              "(--param NAME=N, or the protocol's defaults)")

    blocks = _product(_size(n, env) for _, n in kernel.cluster)
    if blocks > MAX_CLUSTER_BLOCKS:
        refuse(f"a cluster of {blocks:,} blocks",
               f"a cluster holds at most {MAX_CLUSTER_BLOCKS} blocks", kernel.loc)
    threads = _size(kernel.num_threads, env)
    if threads > MAX_THREADS:
        refuse(f"{threads:,} threads in one block", f"a block runs at most {MAX_THREADS:,}",
               kernel.loc)
    total = 0
    for alloc in kernel.barriers:
        if alloc.semaphore:
            continue
        count = _product(_size(n, env) for n in alloc.shape)
        total += count
        if total > MAX_BARRIER_INSTANCES:
            refuse(f"`{alloc.name}` makes {total:,} barriers in one block",
                   f"a block's shared memory holds at most {MAX_BARRIER_INSTANCES:,} mbarriers "
                   "(8 bytes each)", alloc.loc)
    cells = 0
    for buf in kernel.buffers:
        granule = tuple(buf.granule) + (1,) * (len(buf.shape) - len(buf.granule))
        cells += _product(-(-_size(n, env) // g) for n, g in zip(buf.shape, granule))
        if cells > MAX_BUFFER_CELLS:
            refuse(f"`{buf.name}` makes {cells:,} buffer cells in one block",
                   f"a block's shared and tensor memory hold at most {MAX_BUFFER_CELLS:,} "
                   "(a byte each)", buf.loc)
