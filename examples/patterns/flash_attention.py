"""FlashAttention-3 forward (hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp), warp specialized:

- a producer warpgroup loads Q once, then K and V through two separate TMA pipelines
  (pipeline_k, pipeline_v) in the order K0, K1, V0, K2, V1, ..., V_{N-1};
- two consumer warpgroups each own half of the query rows and both read every K and V tile, so
  each empty barrier counts two releases;
- intra-warpgroup overlap: iteration n issues S = Q K_n^T, then O += P_{n-1} V_{n-1}, releases
  K_n and V_{n-1} (softmax of n overlaps the PV GEMM of n-1); the tail does the last PV;
- inter-warpgroup ping-pong (warp_scheduler_barrier): a warpgroup waits for its turn before its
  GEMMs and hands the turn to the other after issuing them. FA3 uses named barriers
  (bar.sync/bar.arrive); here they are mbarriers with the turn protocol of attention.py, and
  warpgroup 0 observes the final hand-back before it exits.
"""

from barrierproof import minimum, protocol


def fa3(k, stages, blocks, *, v_empty_count=2, wg1_blocks=None):
    k.threads(3, name="wg")                      # wg0, wg1: consumers; wg2: producer
    q_full = k.Barrier(num_arrivals=1)
    k_full = k.Barrier(num_arrivals=1, num_barriers=stages)
    k_empty = k.Barrier(num_arrivals=2, num_barriers=stages)
    v_full = k.Barrier(num_arrivals=1, num_barriers=stages)
    v_empty = k.Barrier(num_arrivals=v_empty_count, num_barriers=stages)
    turn = k.Barrier(num_arrivals=1, num_barriers=2)

    def load(full, empty, n):
        with k.when(n >= stages):
            k.barrier_wait(empty.at[n % stages])
        k.copy_gmem_to_smem(full.at[n % stages], bytes=8192)

    def drain(empty):
        tail = minimum(blocks, stages)
        with k.loop(tail) as j:
            k.barrier_wait(empty.at[(blocks - tail + j) % stages])

    with k.when(k.thread == 2):                                  # producer warpgroup
        k.copy_gmem_to_smem(q_full, bytes=16384)
        load(k_full, k_empty, 0)
        with k.loop(blocks - 1) as t:
            load(k_full, k_empty, t + 1)
            load(v_full, v_empty, t)
        load(v_full, v_empty, blocks - 1)
        drain(k_empty)
        drain(v_empty)
    with k.otherwise():                                          # consumer warpgroups
        g = k.thread
        mine = blocks if wg1_blocks is None else k.thread * (wg1_blocks - blocks) + blocks
        k.barrier_wait(q_full)
        with k.loop(mine) as n:
            k.barrier_wait(k_full.at[n % stages])
            with k.when((g == 1) | (n > 0)):                     # warp_scheduler_barrier_sync
                k.barrier_wait(turn.at[g])
            # S = Q K_n^T issued
            with k.when(n > 0):
                k.barrier_wait(v_full.at[(n - 1) % stages])
                # O += P_{n-1} V_{n-1} issued
            k.barrier_arrive(turn.at[1 - g])                     # warp_scheduler_barrier_arrive
            k.barrier_arrive(k_empty.at[n % stages])             # release K_n
            with k.when(n > 0):
                k.barrier_arrive(v_empty.at[(n - 1) % stages])   # release V_{n-1}
        k.barrier_wait(v_full.at[(mine - 1) % stages])           # tail: last PV
        k.barrier_arrive(v_empty.at[(mine - 1) % stages])
        with k.when((g == 0) & (mine > 0)):
            k.barrier_wait(turn.at[0])                           # observe the last hand-back


@protocol(expect="verified", symbolic=("stages", "blocks"))
def fa3_forward_pingpong(k, stages=2, blocks=3):
    """FA3 forward with K/V pipelines, two consumer warpgroups, intra-warpgroup overlap and
    ping-pong scheduling: correct for every stage count and every number of KV blocks >= 1."""
    k.assume(stages >= 1, blocks >= 1)      # the tail's PV reads block blocks - 1
    fa3(k, stages, blocks)



@protocol(expect="violation:BP101")
def fa3_v_empty_counts_one_warpgroup(k, stages=2, blocks=3):
    """pipeline_v's empty barrier initialised for one consumer warpgroup (a config copied from
    the single-warpgroup kernel): both warpgroups' releases each complete a phase, the second
    one behind the producer's back."""
    fa3(k, stages, blocks, v_empty_count=1)


@protocol(expect="violation:BP100")
def fa3_warpgroup_skips_last_block(k, stages=2, blocks=3):
    """Warpgroup 1 computes its own n_block_max (causal mask) and stops one KV block early:
    it never releases the last K tile, so the producer's drain (and warpgroup 0's last turn
    wait) hang."""
    fa3(k, stages, blocks, wg1_blocks=blocks - 1)
