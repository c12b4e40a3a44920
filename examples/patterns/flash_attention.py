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


def fa3(k, stages, blocks, *, v_empty_count=2, wg1_blocks=None, bare=False):
    k.threads(3, name="wg")                      # wg0, wg1: consumers; wg2: producer
    q_full = k.Barrier(num_arrivals=1)
    k_full = k.Barrier(num_arrivals=1, num_barriers=stages)
    k_empty = k.Barrier(num_arrivals=2, num_barriers=stages)
    v_full = k.Barrier(num_arrivals=1, num_barriers=stages)
    v_empty = k.Barrier(num_arrivals=v_empty_count, num_barriers=stages)
    turn = k.Barrier(num_arrivals=1, num_barriers=2)

    # `bare`: the waits FA3's PipelineStates compile to, bare parity bits (try_wait.parity):
    # a state n is slot n % stages, phase bit (n // stages) % 2; producer_acquire waits for
    # the opposite bit (a fresh slot passes at once) and producer_tail acquires `stages` more
    def load(full, empty, n):
        if bare:
            k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
        else:
            with k.when(n >= stages):
                k.barrier_wait(empty.at[n % stages])
        k.copy_gmem_to_smem(full.at[n % stages], bytes=8192)

    def drain(empty):
        if bare:
            with k.loop(stages) as j:
                n = blocks + j
                k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
            return
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
        if bare:
            k.wait_parity(q_full, 0)
        else:
            k.barrier_wait(q_full)
        with k.loop(mine) as n:
            if bare:
                k.wait_parity(k_full.at[n % stages], (n // stages) % 2)
            else:
                k.barrier_wait(k_full.at[n % stages])
            with k.when((g == 1) | (n > 0)):                     # warp_scheduler_barrier_sync
                if bare:
                    k.wait_parity(turn.at[g], (n + 1 + g) % 2)   # wg0 skips its first turn
                else:
                    k.barrier_wait(turn.at[g])
            # S = Q K_n^T issued
            with k.when(n > 0):
                if bare:
                    k.wait_parity(v_full.at[(n - 1) % stages], ((n - 1) // stages) % 2)
                else:
                    k.barrier_wait(v_full.at[(n - 1) % stages])
                # O += P_{n-1} V_{n-1} issued
            k.barrier_arrive(turn.at[1 - g])                     # warp_scheduler_barrier_arrive
            k.barrier_arrive(k_empty.at[n % stages])             # release K_n
            with k.when(n > 0):
                k.barrier_arrive(v_empty.at[(n - 1) % stages])   # release V_{n-1}
        if bare:                                                 # tail: last PV
            k.wait_parity(v_full.at[(mine - 1) % stages], ((mine - 1) // stages) % 2)
        else:
            k.barrier_wait(v_full.at[(mine - 1) % stages])
        k.barrier_arrive(v_empty.at[(mine - 1) % stages])
        with k.when((g == 0) & (mine > 0)):
            if bare:                                             # observe the last hand-back
                k.wait_parity(turn.at[0], (mine + 1) % 2)
            else:
                k.barrier_wait(turn.at[0])


@protocol(expect="verified", symbolic=("stages", "blocks"))
def fa3_forward_pingpong(k, stages=2, blocks=3):
    """FA3 forward with K/V pipelines, two consumer warpgroups, intra-warpgroup overlap and
    ping-pong scheduling: correct for every stage count and every number of KV blocks >= 1."""
    k.assume(stages >= 1, blocks >= 1)      # the tail's PV reads block blocks - 1
    fa3(k, stages, blocks)



@protocol(expect="verified", symbolic=("blocks",))
def fa3_forward_pingpong_bare_parity(k, stages=2, blocks=3):
    """The same with the bare parity bits FA3's PipelineStates compile to (try_wait.parity):
    both warpgroups wait on every phase of every K and V slot, and every wait returns after
    the completion of its own block on every schedule. `prove` proves it for every number of
    KV blocks at a fixed stage count: with `stages` symbolic too, the tail's bit
    ((blocks - 1) // stages) % 2 is no linear term of the fragment."""
    k.assume(stages >= 1, blocks >= 1)
    fa3(k, stages, blocks, bare=True)


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
