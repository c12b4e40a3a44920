"""Barrier bugs of the field written as a new user would, from their public descriptions, each
beside its fix. Not in examples/ (no generated specs); tests/test_unseen_dsl.py checks them.

Each `expect` follows from the hardware semantics; where the code is not the obvious one, the
test file says why.
"""

from barrierproof import minimum, protocol

TILE_A, TILE_B = 8192, 4096
CLAMPED, BOX = 1024, 2048


# -- 1. A 3-stage ring feeding two consumer warpgroups, CUTLASS style: one arrive.expect_tx for
#       the A and B tiles together, two bulk copies, each consumer releases with its own arrive.

def _ab_ring(k, stages, steps, *, expect=TILE_A + TILE_B, early_release=False):
    k.threads(3, name="wg")                            # wg0, wg1 consume; wg2 loads
    k.assume(stages >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=2, num_barriers=stages)
    a, b = k.SMEM(slots=stages), k.SMEM(slots=stages)
    with k.when(k.thread == 2):
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(empty.at[s], phase ^ 1)      # producer_acquire: starts at phase 1
            k.arrive_expect_tx(full.at[s], expect)
            k.tma_load(full.at[s], TILE_A, dst=a.at[s])
            k.tma_load(full.at[s], TILE_B, dst=b.at[s])
        tail = minimum(steps, stages)                  # producer_tail
        with k.loop(tail) as j:
            v = steps - tail + j
            k.wait_parity(empty.at[v % stages], (v // stages) % 2)
    with k.otherwise():
        with k.loop(steps) as i:
            s = i % stages
            k.wait_parity(full.at[s], (i // stages) % 2)
            if early_release:                          # only wg1 releases before its GEMM
                with k.when(k.thread == 1):
                    k.arrive(empty.at[s])
                k.read(a.at[s], b.at[s])
                with k.when(k.thread == 0):
                    k.arrive(empty.at[s])
            else:
                k.read(a.at[s], b.at[s])
                k.arrive(empty.at[s])


@protocol(expect="verified", symbolic=("stages", "steps"))
def ab_ring_two_consumers(k, stages=3, steps=5):
    """Correct: `empty` counts both consumers, expect_tx covers both tiles."""
    _ab_ring(k, stages, steps)


@protocol(expect="violation:BP200")
def ab_ring_one_consumer_releases_before_reading(k, stages=3, steps=5):
    """wg1 arrives on `empty` before its GEMM reads the slot: once wg0 released too, the
    producer refills the slot under wg1's reads."""
    _ab_ring(k, stages, steps, early_release=True)


@protocol(expect="violation:BP200")
def ab_ring_expect_tx_for_a_only(k, stages=3, steps=5):
    """expect_tx announces only the A tile. Not a hang: the phase completes when A lands (tx
    back to 0), so the consumers read B while its copy is still in flight; B's bytes then
    drive the next phase's tx negative."""
    _ab_ring(k, stages, steps, expect=TILE_A)


# -- 2. CUTLASS's producer start state: the producer's first wait on a fresh `empty` must be for
#       parity 1 (PipelineState starts at phase 1), so it passes at once.

def _parity_ring(k, stages, steps, producer_start_phase):
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(empty.at[s], phase ^ producer_start_phase)
            k.arrive_expect_tx(full.at[s], TILE_A)
            k.tma_load(full.at[s], TILE_A)
        with k.loop(stages) as j:                      # producer_tail (all slots)
            v = steps + j
            k.wait_parity(empty.at[v % stages], ((v // stages) % 2) ^ 1)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full.at[i % stages], (i // stages) % 2)
            k.arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def producer_starts_at_phase_one(k, stages=2, steps=3):
    _parity_ring(k, stages, steps, producer_start_phase=1)


@protocol(expect="violation:BP100")
def producer_starts_at_phase_zero(k, stages=2, steps=3):
    """The producer waits for parity 0 on a fresh `empty`: that phase has not completed, and
    only the consumer, which waits for the producer's first tile, could complete it."""
    _parity_ring(k, stages, steps, producer_start_phase=0)


# -- 3. A named barrier whose thread count leaves out a participant: a TMA warpgroup arrives,
#       two math warpgroups sync, but the count was written for one math warpgroup.

def _named_epilogue(k, count):
    k.threads(3, name="wg")                            # wg0 stores, wg1 and wg2 compute
    staged = k.named_barrier(3, count)
    out = k.SMEM(slots=2)
    with k.when(k.thread == 0):
        staged.sync()
        k.read(out.at[0], out.at[1])                   # the TMA store of both halves
    with k.otherwise():
        k.write(out.at[k.thread - 1])
        staged.arrive()


@protocol(expect="verified")
def named_barrier_counts_every_participant(k):
    _named_epilogue(k, 384)


@protocol(expect="violation:BP200")
def named_barrier_count_misses_a_warpgroup(k):
    """Count 256 for three warpgroups: the storer and the first math warpgroup to arrive
    complete the phase, so the store reads the other half while it is being written; the
    late arrival opens a phase nobody completes."""
    _named_epilogue(k, 256)


@protocol(expect="violation:BP144")
def named_barrier_counts_an_idle_warpgroup(k):
    """The other way round: count 384 written for the whole block, but the producer warpgroup
    exits without reaching the barrier, so the two math warpgroups wait for 128 threads
    forever (a count of the whole block names every thread of it as a participant)."""
    k.threads(3, name="wg")
    with k.when(k.thread < 2):
        k.named_barrier(4, 384).sync()


# -- 3b. A leader consumer releases the slot for both consumer warpgroups (arrive count 2)
#        while the other may still be behind: the producer refills the slot under it.

def _leader_release(k, steps, leader_counts_both):
    k.threads(3, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=2, num_barriers=2)
    tiles = k.SMEM(slots=2)
    with k.when(k.thread == 2):
        with k.loop(steps) as i:
            with k.when(i >= 2):
                k.barrier_wait(empty.at[i % 2])
            k.copy_gmem_to_smem(full.at[i % 2], bytes=TILE_B, dst=tiles.at[i % 2])
        tail = minimum(steps, 2)
        with k.loop(tail) as j:
            k.barrier_wait(empty.at[(steps - tail + j) % 2])
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % 2])
            k.read(tiles.at[i % 2])
            if leader_counts_both:
                with k.when(k.thread == 0):
                    k.arrive(empty.at[i % 2], 2)
            else:
                k.barrier_arrive(empty.at[i % 2])


@protocol(expect="verified", symbolic=("steps",))
def each_consumer_releases_its_share(k, steps=4):
    k.assume(steps >= 0)
    _leader_release(k, steps, leader_counts_both=False)


@protocol(expect="violation:BP101")
def leader_releases_for_both_consumers(k, steps=4):
    """wg0's arrive(count=2) completes `empty` before wg1 even waited: the producer refills the
    slot and its copy completes `full` a second time while wg1 has not seen the first."""
    _leader_release(k, steps, leader_counts_both=True)


# -- 4. A persistent kernel whose k-loop restarts its stage index and phase at every tile
#       instead of carrying one pipeline state across tiles.

def _persistent(k, tiles, ksteps, stages, carry_state):
    k.threads(2, name="wg")
    k.assume(tiles >= 0, ksteps >= 1, stages >= 1)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    smem = k.SMEM(slots=stages)

    def state(t, kk):
        i = t * ksteps + kk if carry_state else kk
        return i % stages, (i // stages) % 2

    with k.when(k.thread == 1):
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                s, phase = state(t, kk)
                k.wait_parity(empty.at[s], phase ^ 1)
                k.arrive_expect_tx(full.at[s], TILE_A)
                k.tma_load(full.at[s], TILE_A, dst=smem.at[s])
        n = tiles * ksteps
        tail = minimum(n, stages)
        with k.loop(tail) as j:
            v = n - tail + j
            if carry_state:
                k.wait_parity(empty.at[v % stages], (v // stages) % 2)
            else:                                      # the same per-tile restart
                vk = v % ksteps
                k.wait_parity(empty.at[vk % stages], (vk // stages) % 2)
    with k.otherwise():
        with k.loop(tiles) as t:
            with k.loop(ksteps) as kk:
                s, phase = state(t, kk)
                k.wait_parity(full.at[s], phase)
                k.read(smem.at[s])
                k.arrive(empty.at[s])


@protocol(expect="verified", symbolic=("tiles", "ksteps", "stages"))
def persistent_carries_pipeline_state(k, tiles=2, ksteps=3, stages=2):
    _persistent(k, tiles, ksteps, stages, carry_state=True)


@protocol(expect="violation:BP100")
def persistent_resets_phase_per_tile(k, tiles=2, ksteps=3, stages=2):
    """With 3 k-steps on 2 stages slot 1 is used once per tile. In tile 1 the consumer's
    parity-0 wait on slot 1 passes at once on tile 0's completion (always: the producer is
    held back on `empty` until that consumer releases), so it reads the stale tile; tile 1's
    copy then completes a phase nobody waits for, and the producer's drain, also restarted,
    waits for a parity `empty` already shows: it hangs."""
    _persistent(k, tiles, ksteps, stages, carry_state=False)


@protocol(expect="verified")
def persistent_resets_phase_harmlessly(k, tiles=2, ksteps=4, stages=2):
    """The same restart, but 4 k-steps on 2 stages use every slot an even number of times per
    tile: the restarted phase equals the carried one, so it is correct at these values."""
    _persistent(k, tiles, ksteps, stages, carry_state=False)


# -- 5. A 2-block cluster where block 1 acknowledges through block 0's shared memory; the
#       cluster sync meant to keep block 0 alive sits before the acknowledgement.

def _ack(k, sync, wait_ack=False):
    k.cluster(x=2)
    k.threads(1, name="wg")
    ready = k.Barrier(num_arrivals=1)
    ack = k.Barrier(num_arrivals=1)
    with k.when(k.block("x") == 0):
        k.arrive(ready.on(1))
        if wait_ack:
            k.barrier_wait(ack)
    with k.otherwise():
        k.barrier_wait(ready)
    if sync == "middle":
        k.cluster_sync()
    with k.when(k.block("x") == 1):
        k.arrive(ack.on(0))                            # remote arrive into block 0
    if sync == "end":
        k.cluster_sync()


@protocol(expect="violation:BP146")
def cluster_sync_before_remote_arrive(k):
    """Block 0 passes the cluster sync and exits; block 1's remote arrive then lands in the
    shared memory of a block that has exited."""
    _ack(k, "middle")


@protocol(expect="verified")
def cluster_sync_after_remote_arrive(k):
    """The fix: the cluster sync is the last thing each block does. Nobody waits on `ack`,
    so its completion has no observer to miss it."""
    _ack(k, "end")


@protocol(expect="violation:BP100")
def remote_arrive_awaited_inside_cluster_sync(k):
    """Block 0 waits for the acknowledgement before the cluster sync, block 1 sends it only
    after the sync: each waits for the other."""
    _ack(k, "middle", wait_ack=True)


@protocol(expect="verified")
def remote_arrive_awaited(k):
    """The other fix: no cluster sync; block 0 waits for the acknowledgement, so it cannot
    exit before it lands (block 1 has nothing of its own a peer reaches into after `ready`)."""
    _ack(k, None, wait_ack=True)


# -- 5b. Distributed shared memory: block 0 pushes a partial result into block 1 with st.async;
#        block 1 must not exit before the bytes land.

def _push(k, peer_waits):
    k.cluster(x=2)
    k.threads(1, name="wg")
    got = k.Barrier(num_arrivals=1)
    with k.when(k.block("x") == 0):
        k.async_store_smem(got.on(1), 4096)       # st.async into block 1's shared memory
    with k.otherwise():
        if peer_waits:
            k.barrier_wait(got)


@protocol(expect="violation:BP146")
def dsmem_push_into_exited_peer(k):
    """Block 1 has nothing to wait for in its own code path and exits at once."""
    _push(k, peer_waits=False)


@protocol(expect="verified")
def dsmem_push_awaited(k):
    _push(k, peer_waits=True)


# -- 6. triton-lang/triton#10035: an mbarrier arrive is issued by one leader warp of a partition.
#       If the leader releases the slot before its sibling warps have left their wait, the
#       producer refills it and completes `ready` again: a sibling still polling its parity sees
#       the barrier two phases on. The fix syncs the partition's warps before the arrive.

def _leader_arrive(k, steps, sync_before_arrive):
    k.threads(2, name="wg")                      # wg0: producer; wg1: 4 consumer warps
    k.warps(4)
    k.assume(steps >= 0)
    ready = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    partition = k.named_barrier(1, 128)          # the consumer warpgroup's own bar.sync
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            k.wait_parity(empty.at[i % 2], ((i // 2) % 2) ^ 1)
            k.arrive(ready.at[i % 2])
        tail = minimum(steps, 2)
        with k.loop(tail) as j:
            v = steps - tail + j
            k.wait_parity(empty.at[v % 2], (v // 2) % 2)
    with k.otherwise():
        with k.warp_region():
            with k.loop(steps) as i:
                k.wait_parity(ready.at[i % 2], (i // 2) % 2)
                if sync_before_arrive:
                    partition.sync()
                with k.when(k.warp == 0):
                    k.arrive(empty.at[i % 2])


@protocol(expect="violation:BP101")
def leader_warp_releases_before_siblings_wait(k, steps=3):
    """Warp 0 arrives on `empty` as soon as its own wait returns; the producer then completes
    the slot's `ready` a second time while warp 3 has not observed the first: its parity wait
    no longer names one phase."""
    _leader_arrive(k, steps, sync_before_arrive=False)


@protocol(expect="verified")
def leader_warp_releases_after_partition_sync(k, steps=3):
    """The fix: a bar.sync of the consumer warpgroup before the leader's arrive."""
    _leader_arrive(k, steps, sync_before_arrive=True)


# -- 7. tile-ai/tilelang#374: a block-sparse matmul skips the TMA copy of a masked-out K block,
#       but the consumer still waits on that stage's `full` barrier. The fix arrives on the
#       barrier without a copy (JAX's predicated copy does the same), so every stage completes.

def _sparse_ring(k, steps, arrive_when_skipped):
    k.threads(2, name="wg")                      # wg0: TMA producer; wg1: consumer
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            with k.when(i >= 2):
                k.barrier_wait(empty.at[i % 2])
            with k.when(i % 3 != 1):             # K block i is kept by the mask
                k.copy_gmem_to_smem(full.at[i % 2], bytes=8192)
            with k.otherwise():
                if arrive_when_skipped:
                    k.barrier_arrive(full.at[i % 2])
        tail = minimum(steps, 2)
        with k.loop(tail) as j:
            k.barrier_wait(empty.at[(steps - tail + j) % 2])
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % 2])
            k.barrier_arrive(empty.at[i % 2])


@protocol(expect="violation:BP100")
def sparse_block_skipped_without_arrival(k, steps=4):
    """K block 1 is masked out: no copy lands on full[1], and the consumer waits on it forever."""
    _sparse_ring(k, steps, arrive_when_skipped=False)


@protocol(expect="verified")
def sparse_block_skipped_with_arrival(k, steps=4):
    _sparse_ring(k, steps, arrive_when_skipped=True)


# -- 8. intel/sycl-tla#830: in a causal FMHA forward, each warpgroup's K-loop trip count depends
#       on its rows, but the loop holds a block-wide barrier: the warpgroup with fewer blocks
#       leaves the loop (and the kernel) while the other waits for it. The fix syncs only the
#       warpgroup's own threads.

def _causal(k, blocks, per_warpgroup):
    k.threads(2, name="wg")
    k.assume(blocks >= 1)
    own = k.named_barrier(1 + k.thread, 128)     # one id per warpgroup
    # one loop, one barrier instruction, run by both warpgroups: the lower rows (wg1) see one
    # K block more
    with k.loop(blocks + k.thread):
        if per_warpgroup:
            own.sync()
        else:
            k.syncthreads()


@protocol(expect="violation:BP144")
def causal_trip_counts_with_block_barrier(k, blocks=2):
    """wg0 runs `blocks` iterations, wg1 one more: wg1's last __syncthreads counts wg0, which
    has exited."""
    _causal(k, blocks, per_warpgroup=False)


@protocol(expect="verified")
def causal_trip_counts_with_warpgroup_barrier(k, blocks=2):
    _causal(k, blocks, per_warpgroup=True)


# -- 9. tile-ai/tilelang#2360: two warpgroups reduce concurrently through shared memory, each
#       with its own scratch row, but both use named barrier 1 with a count of 128. Warps of
#       either warpgroup complete a phase together, so a warp reads its partner warps' partial
#       sums before they are written. The fix gives each warpgroup its own barrier id.

def _reduce(k, per_warpgroup_id):
    k.threads(2, name="wg")
    k.warps(4)
    partial = k.SMEM(slots=8)                    # one partial sum per warp of the block
    # both warpgroups run this one code path: the barrier id is 1, or 1 + 2 * wg
    done = k.named_barrier(1 + 2 * k.thread if per_warpgroup_id else 1, 128)
    with k.warp_region():
        k.write(partial.at[4 * k.thread + k.warp])
        done.sync()
        k.read(partial.at[4 * k.thread + (k.warp + 1) % 4])


@protocol(expect="violation:BP200")
def concurrent_reductions_share_a_barrier_id(k):
    _reduce(k, per_warpgroup_id=False)


@protocol(expect="verified")
def concurrent_reductions_own_barrier_ids(k):
    _reduce(k, per_warpgroup_id=True)


# -- 10. Dao-AILab/flash-attention#1389: the epilogue's "smem free" named barrier counts the two
#        MMA warpgroups and one producer warp (256 + 32): the MMA warpgroups arrive after their
#        TMA store has read the buffer, the producer warp syncs before it reuses it. Counting
#        256 only lets the MMA warpgroups complete the phase alone, and the warp's sync then
#        opens a phase of its own that nobody completes.

def _epilogue_free(k, count):
    k.threads(3, name="wg")                      # wg0, wg1: MMA; wg2: producer
    k.warps(4)
    free = k.named_barrier(5, count)
    with k.when(k.thread < 2):
        free.arrive()
    with k.otherwise():
        with k.warp_region():
            with k.when(k.warp == 0):
                free.sync()


@protocol(expect="verified")
def epilogue_barrier_counts_producer_warp(k):
    _epilogue_free(k, 256 + 32)


@protocol(expect="violation:BP142")
def epilogue_barrier_misses_producer_warp(k):
    _epilogue_free(k, 256)


# -- 11. mirage-project/mirage#705: the kernel's expect_tx counts a box clamped to the batch
#        (8 rows: 1024 bytes) while the TMA descriptor of one task kind still loads the full
#        box (16 rows: 2048 bytes). The phase's tx-count goes to -1024 and never back to zero:
#        the MMA warp waits forever on `full`. The fix clamps the descriptor's box too.

def _box(k, steps, stages, expect):
    k.threads(2, name="wg")                      # wg0: TMA producer, wg1: MMA consumer
    k.assume(steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    x = k.SMEM(slots=stages)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            s = i % stages
            k.wait_parity(empty.at[s], (i // stages) % 2 ^ 1)
            k.arrive_expect_tx(full.at[s], expect)
            k.tma_load(full.at[s], BOX, dst=x.at[s])
    with k.otherwise():
        with k.loop(steps) as i:
            s = i % stages
            k.wait_parity(full.at[s], (i // stages) % 2)
            k.read(x.at[s])
            k.arrive(empty.at[s])


@protocol(expect="violation:BP130")
def expect_tx_of_the_clamped_box(k, steps=3, stages=2):
    _box(k, steps, stages, CLAMPED)


@protocol(expect="verified", symbolic=("steps",))
def expect_tx_of_the_box_the_descriptor_loads(k, steps=3, stages=2):
    _box(k, steps, stages, BOX)


# -- 12. flashinfer-ai/flashinfer#2996: the compute warps call __syncthreads() inside their own
#        branch while the TMA warps (one elected lane each) never reach it: the compute warps
#        wait for threads that exit. The fix moves the barrier where every warp reaches it.

def _tiny(k, sync_outside):
    k.threads(3, name="wg")                      # wg0 computes; wg1, wg2 issue TMA
    k.warps(4)
    red = k.SMEM(slots=4)
    with k.warp_region():
        with k.when(k.thread == 0):
            k.write(red.at[k.warp])
            if not sync_outside:
                k.syncthreads()                  # only the compute warps get here
                k.read(red.at[(k.warp + 1) % 4])
        with k.otherwise():
            with k.when(k.lane == 0):            # elect_one_sync: one lane issues the copies
                pass
        if sync_outside:
            k.syncthreads()                      # every warp of the block, one instruction
            with k.when(k.thread == 0):
                k.read(red.at[(k.warp + 1) % 4])


@protocol(expect="violation:BP144")
def syncthreads_in_the_compute_branch(k):
    _tiny(k, sync_outside=False)


@protocol(expect="verified")
def syncthreads_reached_by_every_warp(k):
    _tiny(k, sync_outside=True)


# -- 13. tile-ai/tilelang#2613: two warpgroups copy their halves of one shared operand, sync,
#        and issue an asynchronous WGMMA reading both halves; each waits for its own WGMMA
#        only, so without a barrier at the top of the next iteration one warpgroup's copy
#        overwrites a half the other's WGMMA may still read.

def _shared_a(k, steps, loop_back_sync):
    k.threads(2, name="wg")
    a = k.SMEM(slots=2)                          # each warpgroup copies its half of A
    with k.loop(steps):
        if loop_back_sync:
            k.syncthreads()                      # the other warpgroup's WGMMA has retired
        k.write(a.at[k.thread])
        k.syncthreads()
        k.wgmma(a)                               # both halves, asynchronously
        k.wgmma_wait(0)


@protocol(expect="violation:BP200")
def shared_operand_without_loop_back_barrier(k, steps=2):
    _shared_a(k, steps, loop_back_sync=False)


@protocol(expect="verified")
def shared_operand_with_loop_back_barrier(k, steps=2):
    _shared_a(k, steps, loop_back_sync=True)


# -- 14. An epilogue bias tile: loaded by TMA in the prologue, read in the epilogue. Without the
#        wait, the read races with the copy still writing the tile, and the kernel then exits
#        with the copy in flight and its bytes undelivered: the race is the cause reported.

def _bias_epilogue(k, waited):
    k.threads(1, name="wg")
    loaded = k.Barrier(num_arrivals=1)
    bias = k.SMEM()
    k.arrive_expect_tx(loaded, 512)
    k.tma_load(loaded, 512, dst=bias)
    if waited:
        k.wait_parity(loaded, 0)
    k.read(bias)


@protocol(expect="violation:BP200")
def bias_read_without_waiting_for_its_load(k):
    _bias_epilogue(k, waited=False)


@protocol(expect="verified")
def bias_read_after_its_load_landed(k):
    _bias_epilogue(k, waited=True)


# -- 15. CUTLASS's PipelineCpAsync: the producer's cp.async copies complete through
#        cp.async.mbarrier.arrive.noinc on the stage's `full` barrier; the consumer waits on it
#        and reads the stage. An arrive issued before the copy tracks none of it.

def _cp_async_ring(k, steps, stages, arrive_first):
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    bufs = k.SMEM(slots=stages)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(empty.at[s], phase ^ 1)
            if arrive_first:
                k.cp_async_arrive(full.at[s])
                k.cp_async(bufs.at[s])
            else:
                k.cp_async(bufs.at[s])
                k.cp_async_arrive(full.at[s])
        k.wait_gmem_to_smem(0)
    with k.otherwise():
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(full.at[s], phase)
            k.read(bufs.at[s])
            k.arrive(empty.at[s])


@protocol(expect="verified")
def cp_async_stage_completes_through_its_barrier(k, steps=4, stages=2):
    """The arrival lands only once the copy has written the stage: the consumer's read after
    its wait is ordered after the copy, without a wait_group in the producer."""
    _cp_async_ring(k, steps, stages, arrive_first=False)


@protocol(expect="violation:BP200")
def cp_async_arrive_before_the_copy(k, steps=4, stages=2):
    """The arrival is issued before the copy: it tracks no copy, lands at once, and the consumer
    reads the stage while the copy still writes it."""
    _cp_async_ring(k, steps, stages, arrive_first=True)


# -- 16. Stage and phase of a three-stage ring: `i % stages` and `(i // stages) % 2`. Two
#        slips seen in hand-written pipelines: the stage as `i & (stages - 1)`, right only for
#        a power of two, and the phase as `i % 2` (the parity of the step, not of the lap).

def _three_stage_ring(k, steps, stages, stage_of, phase_of):
    k.threads(2, name="wg")
    k.assume(stages >= 1, steps >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    bufs = k.SMEM(slots=stages)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            s, phase = i % stages, (i // stages) % 2
            k.wait_parity(empty.at[s], phase ^ 1)
            k.arrive_expect_tx(full.at[s], 4096)
            k.tma_load(full.at[s], 4096, dst=bufs.at[s])
        with k.loop(minimum(steps, stages)) as j:      # drain: the last releases are seen
            v = steps - minimum(steps, stages) + j
            k.wait_parity(empty.at[v % stages], (v // stages) % 2)
    with k.otherwise():
        with k.loop(steps) as i:
            s = stage_of(i, stages)
            k.wait_parity(full.at[s], phase_of(i, stages))
            k.read(bufs.at[s])
            k.arrive(empty.at[s])


@protocol(expect="verified")
def three_stages_by_modulo(k, steps=7, stages=3):
    _three_stage_ring(k, steps, stages, lambda i, n: i % n, lambda i, n: (i // n) % 2)


@protocol(expect="violation:BP200")
def three_stages_by_mask(k, steps=7, stages=3):
    """The consumer's stage is what `i & (stages - 1)` computes for stages = 3: 0, 0, 2, 2, 0,
    ... (the DSL's `&` is logical, so the bits are spelled out). At step 1 the consumer's wait
    on stage 0 for parity 0 returns at once (stage 0 completed its first phase at step 0) and
    it reads stage 0 again, while the producer, told by the consumer's step-0 release that
    stage 0 is free, loads step 3's tile into it."""
    _three_stage_ring(k, steps, stages, lambda i, n: ((i // 2) % 2) * 2,
                      lambda i, n: (i // n) % 2)


@protocol(expect="violation:BP101")
def three_stages_phase_of_the_step(k, steps=7, stages=3):
    """Phase `i % 2`: at step 1 the consumer waits on the fresh stage 1 for parity 1, which a
    barrier in its first phase reports complete, and releases stage 1 at once. Its read before
    the load lands (BP200) takes longer to reach than what the early release does to the
    producer: its first acquire of stage 1 (parity 1, meant to pass on the fresh barrier) now
    meets a barrier one completion on, and returns or hangs by schedule (BP101, parity
    aliasing)."""
    _three_stage_ring(k, steps, stages, lambda i, n: i % n, lambda i, n: i % 2)
