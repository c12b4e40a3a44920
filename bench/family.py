"""The benchmark family: correct protocols of growing size, all `verified`.

- `pipeline(stages, consumers, steps)`: a Hopper-style TMA ring. One producer warpgroup issues a
  TMA copy per step into slot `i % stages` (waiting for the slot's release once the ring is
  full) and drains the last releases; `consumers` compute warpgroups wait for each slot to fill
  and release it. Its state space grows with all three sizes: stages bound how far the producer
  runs ahead, consumers interleave freely, steps lengthen every run.
- `cluster(blocks, consumers, steps)`: the same pipeline (2 stages) in every block of a 1-D
  cluster, and after each step the compute warpgroups of all blocks meet at a ClusterBarrier
  (every arrival fans out to every block's instance): blocks advance step by step together,
  and interleave freely within a step.
"""

from barrierproof import minimum, protocol


def _ring(k, stages, consumers, steps, full, empty, meet=None, tiles=None):
    with k.when(k.thread == consumers):                    # the TMA producer
        with k.loop(steps) as i:
            with k.when(i >= stages):
                k.barrier_wait(empty.at[i % stages])
            k.copy_gmem_to_smem(full.at[i % stages], bytes=16384,
                                dst=None if tiles is None else tiles.at[i % stages])
        tail = minimum(steps, stages)
        with k.loop(tail) as j:                            # observe the last releases
            k.barrier_wait(empty.at[(steps - tail + j) % stages])
    with k.otherwise():                                    # compute warpgroups
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % stages])
            if tiles is not None:                          # read the slot before releasing it
                k.read(tiles.at[i % stages])
            k.barrier_arrive(empty.at[i % stages])
            if meet is not None:                           # cluster-wide step barrier
                k.barrier_arrive(meet)
                k.barrier_wait(meet)


@protocol(expect="verified")
def pipeline(k, stages=2, consumers=2, steps=4):
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    _ring(k, stages, consumers, steps, full, empty)


@protocol(expect="verified")
def cluster(k, blocks=2, consumers=1, steps=2):
    k.cluster(x=blocks)
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=2)
    meet = k.ClusterBarrier(collective_axes="x", num_arrivals=consumers)
    _ring(k, 2, consumers, steps, full, empty, meet)


@protocol(expect="verified")
def pipeline_buffers(k, stages=2, consumers=2, steps=4):
    """`pipeline` with its memory effects: copies write the slot, consumers read it."""
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=stages)
    _ring(k, stages, consumers, steps, full, empty, tiles=k.SMEM(slots=stages, name="tiles"))


@protocol(expect="verified")
def cluster_buffers(k, blocks=2, consumers=1, steps=2):
    """`cluster` with its memory effects."""
    k.cluster(x=blocks)
    k.threads(consumers + 1, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=consumers, num_barriers=2)
    meet = k.ClusterBarrier(collective_axes="x", num_arrivals=consumers)
    _ring(k, 2, consumers, steps, full, empty, meet, tiles=k.SMEM(slots=2, name="tiles"))


# (protocol, parameters) in growing size. Parameters are plain ints: the explorer unrolls them.
PIPELINE = [(pipeline, dict(stages=s, consumers=c, steps=n))
            for s, c, n in [(2, 1, 4), (2, 2, 4), (2, 2, 8), (3, 2, 8), (2, 3, 8), (2, 4, 6),
                            (3, 3, 8), (3, 3, 12), (3, 4, 8), (2, 6, 4)]]
CLUSTER = [(cluster, dict(blocks=b, consumers=c, steps=n))
           for b, c, n in [(2, 1, 4), (2, 2, 2), (2, 1, 8), (3, 1, 2), (2, 2, 4)]]
FAMILY = PIPELINE + CLUSTER

# the family's protocols by name (tables name members `name(param=value, ...)`)
MEMBERS_BY_NAME = {p.name: p for p in (pipeline, cluster, pipeline_buffers, cluster_buffers)}
