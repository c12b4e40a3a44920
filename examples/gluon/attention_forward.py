"""A warp-specialized Blackwell attention forward in Gluon, in the shape of Triton's attention
tutorial: a BLOCK_M = 256 tile of queries split into two halves of 128 rows, each with its own
softmax partition (the ping-pong pair), one TMA load partition, one MMA partition issuing
tcgen05 MMAs, and the correction partition (the default one) rescaling each half's output
accumulator in tensor memory when its softmax finds a new row maximum.

Per K/V block `i` of `N_CTX // BLOCK_N`, for each half h:

- load:       K then V into one STAGES-deep ring whose slots both halves' MMAs release
              (`kv.empty` counts two arrivals);
- MMA:        S_h = Q_h K^T into tensor memory once the PV MMA of the previous block has read
              P_h from the same columns (`s_free`), completing on `s_ready` and on the K slot's
              `empty`; then O_h += P_h V once P_h is written and O_h corrected, completing on
              the V slot's `empty`, `s_free` and `o_ready`;
- softmax h:  loads S_h, hands the rescale factor alpha to the correction partition in shared
              memory (`alpha_ready` / `alpha_free`), writes P_h over S_h (fp16, the first half
              of its columns) and arrives `p_ready`; after the last block it waits `epi_ready`,
              reads O_h and stores it with TMA;
- correction: for every block after the first, waits until the previous PV MMA is done and
              rescales O_h by alpha in place; arrives `o_fixed` to let the next PV MMA in.

The kernel takes one tile per program (`attention`), or walks tiles `pid, pid + num_programs,
...` keeping every ring position across tiles (`attention_persistent`). `N_CTX` is a runtime
argument (a parameter of the model); the K/V ring position is a `Cursor` advanced twice per
block, whose closed form keeps the loop a loop.

The knobs give the bugs the field reports: the loader waiting on `empty` with the consumer's
phase, the correction partition letting the next PV MMA in (`o_fixed`) before it has rescaled
O, and a persistent kernel whose MMA partition restarts its K/V ring position at every tile.
The protocol is more synchronized than it needs to be, and the checker says so: waiting for
`o_ready` before the rescale is implied by `s_free` (the softmax's alpha comes after the next
QK MMA, which waits for the previous PV MMA), so dropping that wait alone is still `verified`.

    barrierproof check examples/gluon/attention_forward.py
    barrierproof prove examples/gluon/attention_forward.py::attention --timeout 2000

`prove` answers `proved` for every N_CTX there (633.8M work units, 35 min on 2 shared cores:
bench/SYMBOLIC.md); at the default --timeout 300 it is `unknown`, its races not yet proved.
`check` takes `attention_persistent` to the tutorial's launch (heads = Z*H = 128, 148 programs:
`--param heads=128 --param num_programs_x=148`; 28 tiles of 64 K/V blocks for program 0 at
N_CTX=8192, 495,832 states); `prove` is `unknown` there: every partition runs operations per
tile beside its K/V loop, outside what the prover flattens (bench/SYMBOLIC.md).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                 allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.language.core import _aggregate as aggregate

from barrierproof.model.gluon import Launch, tensor_desc


@aggregate
class Cursor:
    """A position in a ring of barriers: the slot and the phase to wait for."""

    index: gl.tensor
    phase: gl.tensor
    depth: gl.constexpr

    @gluon.jit
    def start(phase, depth: gl.constexpr):
        return Cursor(gl.to_tensor(0), gl.to_tensor(phase), depth)

    @gluon.must_use_result
    @gluon.jit
    def advance(self):
        bumped = self.index + 1
        wrap = bumped == self.depth
        return Cursor(gl.where(wrap, 0, bumped), gl.where(wrap, self.phase ^ 1, self.phase),
                      self.depth)


@aggregate
class Ring:
    """Slots with a `ready` barrier (one arrival and the bytes of the copy) and an `empty` one
    (one arrival per consumer)."""

    ready: gl.shared_memory_descriptor
    empty: gl.shared_memory_descriptor
    depth: gl.constexpr

    @gluon.constexpr_function
    def __init__(self, ready, empty, depth):
        self.ready = ready
        self.empty = empty
        self.depth = gl.constexpr(depth)

    @gluon.jit
    def make(depth: gl.constexpr, consumers: gl.constexpr):
        ready = gl.allocate_shared_memory(gl.int64, [depth, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [depth, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(depth):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=consumers)
        return Ring(ready, empty, depth)


@aggregate
class Half:
    """The barriers between the partitions that work on one half of the query tile."""

    s_ready: gl.shared_memory_descriptor      # QK MMA done: S in tensor memory
    s_free: gl.shared_memory_descriptor       # PV MMA done: S/P columns may be overwritten
    p_ready: gl.shared_memory_descriptor      # softmax wrote P over S
    alpha_ready: gl.shared_memory_descriptor  # softmax wrote alpha to shared memory
    alpha_free: gl.shared_memory_descriptor   # correction read alpha
    o_ready: gl.shared_memory_descriptor      # PV MMA done: O holds this block's sum
    o_fixed: gl.shared_memory_descriptor      # correction rescaled O: the next PV may add
    epi_ready: gl.shared_memory_descriptor    # last PV MMA of the tile done
    epi_done: gl.shared_memory_descriptor     # softmax read O: the next tile may overwrite it

    @gluon.constexpr_function
    def __init__(self, s_ready, s_free, p_ready, alpha_ready, alpha_free, o_ready, o_fixed,
                 epi_ready, epi_done):
        self.s_ready = s_ready
        self.s_free = s_free
        self.p_ready = p_ready
        self.alpha_ready = alpha_ready
        self.alpha_free = alpha_free
        self.o_ready = o_ready
        self.o_fixed = o_fixed
        self.epi_ready = epi_ready
        self.epi_done = epi_done

    @gluon.jit
    def make():
        layout: gl.constexpr = mbarrier.MBarrierLayout()
        s_ready = gl.allocate_shared_memory(gl.int64, [1], layout)
        s_free = gl.allocate_shared_memory(gl.int64, [1], layout)
        p_ready = gl.allocate_shared_memory(gl.int64, [1], layout)
        alpha_ready = gl.allocate_shared_memory(gl.int64, [1], layout)
        alpha_free = gl.allocate_shared_memory(gl.int64, [1], layout)
        o_ready = gl.allocate_shared_memory(gl.int64, [1], layout)
        o_fixed = gl.allocate_shared_memory(gl.int64, [1], layout)
        epi_ready = gl.allocate_shared_memory(gl.int64, [1], layout)
        epi_done = gl.allocate_shared_memory(gl.int64, [1], layout)
        half = Half(s_ready, s_free, p_ready, alpha_ready, alpha_free, o_ready, o_fixed,
                    epi_ready, epi_done)
        mbarrier.init(half.s_ready, count=1)
        mbarrier.init(half.s_free, count=1)
        mbarrier.init(half.p_ready, count=1)
        mbarrier.init(half.alpha_ready, count=1)
        mbarrier.init(half.alpha_free, count=1)
        mbarrier.init(half.o_ready, count=1)
        mbarrier.init(half.o_fixed, count=1)
        mbarrier.init(half.epi_ready, count=1)
        mbarrier.init(half.epi_done, count=1)
        return half


@gluon.jit
def num_tiles_of(N_CTX, BLOCK_M: gl.constexpr, heads):
    return gl.cdiv(N_CTX, BLOCK_M) * heads


# -- the load partition ------------------------------------------------------------------------

@gluon.jit
def load_tile(q_desc, k_desc, v_desc, q_bufs, kv_bufs, q_ring, kv_ring, kv_at, q_phase, n_kv,
              EMPTY_FLIP: gl.constexpr):
    HALF_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    for h in gl.static_range(2):
        mbarrier.wait(q_ring.empty.index(h), q_phase ^ 1)
        mbarrier.expect(q_ring.ready.index(h), q_desc.block_type.nbytes)
        tma.async_load(q_desc, [h * HALF_M, 0], q_ring.ready.index(h), q_bufs.index(h))
    for i in range(n_kv):
        mbarrier.wait(kv_ring.empty.index(kv_at.index), kv_at.phase ^ 1 ^ EMPTY_FLIP)
        mbarrier.expect(kv_ring.ready.index(kv_at.index), k_desc.block_type.nbytes)
        tma.async_load(k_desc, [i * BLOCK_N, 0], kv_ring.ready.index(kv_at.index),
                       kv_bufs.index(kv_at.index))
        kv_at = kv_at.advance()
        mbarrier.wait(kv_ring.empty.index(kv_at.index), kv_at.phase ^ 1 ^ EMPTY_FLIP)
        mbarrier.expect(kv_ring.ready.index(kv_at.index), v_desc.block_type.nbytes)
        tma.async_load(v_desc, [i * BLOCK_N, 0], kv_ring.ready.index(kv_at.index),
                       kv_bufs.index(kv_at.index))
        kv_at = kv_at.advance()
    return kv_at


@gluon.jit
def load_partition(q_desc, k_desc, v_desc, q_bufs, kv_bufs, q_ring, kv_ring, N_CTX, heads,
                   PERSISTENT: gl.constexpr, EMPTY_FLIP: gl.constexpr):
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    n_kv = N_CTX // BLOCK_N
    kv_at = Cursor.start(0, kv_ring.depth)
    if PERSISTENT:
        BLOCK_M: gl.constexpr = 2 * q_desc.block_type.shape[0]
        q_phase = 0
        for tile in range(gl.program_id(0), num_tiles_of(N_CTX, BLOCK_M, heads),
                          gl.num_programs(0)):
            kv_at = load_tile(q_desc, k_desc, v_desc, q_bufs, kv_bufs, q_ring, kv_ring, kv_at,
                              q_phase, n_kv, EMPTY_FLIP)
            q_phase ^= 1
    else:
        kv_at = load_tile(q_desc, k_desc, v_desc, q_bufs, kv_bufs, q_ring, kv_ring, kv_at, 0,
                          n_kv, EMPTY_FLIP)
        q_phase = 1
    # the producer's tail: the last commits on Q's `empty` land before the kernel exits
    for h in gl.static_range(2):
        mbarrier.wait(q_ring.empty.index(h), q_phase ^ 1)


# -- the MMA partition -------------------------------------------------------------------------

@gluon.jit
def mma_tile(q_bufs, kv_bufs, s_tmem, o_tmem, q_ring, kv_ring, half0, half1, kv_at, q_phase,
             it, n_kv):
    HALF_M: gl.constexpr = s_tmem.shape[1]
    BLOCK_N: gl.constexpr = s_tmem.shape[2]
    p_layout: gl.constexpr = TensorMemoryLayout([HALF_M, BLOCK_N], col_stride=1)
    for h in gl.static_range(2):
        mbarrier.wait(q_ring.ready.index(h), q_phase)
    for i in range(n_kv):
        phase = it & 1
        k_slot = kv_at.index
        mbarrier.wait(kv_ring.ready.index(k_slot), kv_at.phase)
        kv_at = kv_at.advance()
        k_t = kv_bufs.index(k_slot).permute((1, 0))
        mbarrier.wait(half0.s_free, phase ^ 1)
        tcgen05_mma(q_bufs.index(0), k_t, s_tmem.index(0), use_acc=False,
                    mbarriers=[half0.s_ready, kv_ring.empty.index(k_slot)])
        mbarrier.wait(half1.s_free, phase ^ 1)
        tcgen05_mma(q_bufs.index(1), k_t, s_tmem.index(1), use_acc=False,
                    mbarriers=[half1.s_ready, kv_ring.empty.index(k_slot)])
        v_slot = kv_at.index
        mbarrier.wait(kv_ring.ready.index(v_slot), kv_at.phase)
        kv_at = kv_at.advance()
        v = kv_bufs.index(v_slot)
        mbarrier.wait(half0.p_ready, phase)
        mbarrier.wait(half0.o_fixed, phase)
        p0 = s_tmem.index(0).reinterpret(gl.float16, [HALF_M, 2 * BLOCK_N], p_layout)
        tcgen05_mma(p0.slice(0, BLOCK_N), v, o_tmem.index(0), use_acc=i > 0,
                    mbarriers=[kv_ring.empty.index(v_slot), half0.s_free, half0.o_ready])
        mbarrier.wait(half1.p_ready, phase)
        mbarrier.wait(half1.o_fixed, phase)
        p1 = s_tmem.index(1).reinterpret(gl.float16, [HALF_M, 2 * BLOCK_N], p_layout)
        tcgen05_mma(p1.slice(0, BLOCK_N), v, o_tmem.index(1), use_acc=i > 0,
                    mbarriers=[kv_ring.empty.index(v_slot), half1.s_free, half1.o_ready])
        it += 1
    # every QK MMA of the tile has been issued: Q's buffers are free once they are done
    for h in gl.static_range(2):
        tcgen05_commit(q_ring.empty.index(h))
    return kv_at, it


@gluon.jit
def mma_partition(q_bufs, kv_bufs, s_tmem, o_tmem, q_ring, kv_ring, half0, half1, N_CTX, heads,
                  PERSISTENT: gl.constexpr, KV_RESET_PER_TILE: gl.constexpr):
    BLOCK_N: gl.constexpr = s_tmem.shape[2]
    n_kv = N_CTX // BLOCK_N
    kv_at = Cursor.start(0, kv_ring.depth)
    it = 0
    if PERSISTENT:
        BLOCK_M: gl.constexpr = 2 * s_tmem.shape[1]
        q_phase = 0
        for tile in range(gl.program_id(0), num_tiles_of(N_CTX, BLOCK_M, heads),
                          gl.num_programs(0)):
            if KV_RESET_PER_TILE:
                kv_at = Cursor.start(0, kv_ring.depth)
            kv_at, it = mma_tile(q_bufs, kv_bufs, s_tmem, o_tmem, q_ring, kv_ring, half0, half1,
                                 kv_at, q_phase, it, n_kv)
            q_phase ^= 1
    else:
        kv_at, it = mma_tile(q_bufs, kv_bufs, s_tmem, o_tmem, q_ring, kv_ring, half0, half1,
                             kv_at, 0, it, n_kv)


# -- the softmax partitions (one per half) -----------------------------------------------------

@gluon.jit
def softmax_tile(s_tmem, o_tmem, alpha_smem, o_smem, o_desc, half, it, tile_phase, row0, n_kv,
                 num_warps: gl.constexpr):
    HALF_M: gl.constexpr = s_tmem.shape[0]
    BLOCK_N: gl.constexpr = s_tmem.shape[1]
    s_layout: gl.constexpr = s_tmem.get_reg_layout(num_warps=num_warps)
    p_layout: gl.constexpr = TensorMemoryLayout([HALF_M, BLOCK_N], col_stride=1)
    p_tmem = s_tmem.reinterpret(gl.float16, [HALF_M, 2 * BLOCK_N], p_layout).slice(0, BLOCK_N)
    m_i = gl.full([HALF_M], -float("inf"), gl.float32, gl.SliceLayout(1, s_layout))
    for i in range(n_kv):
        phase = it & 1
        mbarrier.wait(half.s_ready, phase)
        s = s_tmem.load(s_layout)
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        mbarrier.wait(half.alpha_free, phase ^ 1)
        alpha_smem.store(gl.exp2(m_i - m_new))
        mbarrier.arrive(half.alpha_ready, count=1)
        p = gl.exp2(s - m_new[:, None]).to(gl.float16)
        p_tmem.store(gl.convert_layout(p, p_tmem.get_reg_layout(num_warps=num_warps)))
        mbarrier.arrive(half.p_ready, count=1)
        m_i = m_new
        it += 1
    # the epilogue: O_h once its last PV MMA is done
    mbarrier.wait(half.epi_ready, tile_phase)
    o = o_tmem.load(o_tmem.get_reg_layout(num_warps=num_warps))
    mbarrier.arrive(half.epi_done, count=1)
    tma.store_wait(0)
    o_smem.store(o.to(o_desc.dtype))
    fence_async_shared()
    tma.async_store(o_desc, [row0, 0], o_smem)
    return it


@gluon.jit
def softmax_partition(s_tmem, o_tmem, alpha_smem, o_smem, o_desc, half, N_CTX, heads,
                      H: gl.constexpr, PERSISTENT: gl.constexpr, num_warps: gl.constexpr):
    HALF_M: gl.constexpr = s_tmem.shape[0]
    BLOCK_N: gl.constexpr = s_tmem.shape[1]
    n_kv = N_CTX // BLOCK_N
    it = 0
    if PERSISTENT:
        tile_phase = 0
        for tile in range(gl.program_id(0), num_tiles_of(N_CTX, 2 * HALF_M, heads),
                          gl.num_programs(0)):
            it = softmax_tile(s_tmem, o_tmem, alpha_smem, o_smem, o_desc, half, it, tile_phase,
                              tile * 2 * HALF_M + H * HALF_M, n_kv, num_warps)
            tile_phase ^= 1
    else:
        it = softmax_tile(s_tmem, o_tmem, alpha_smem, o_smem, o_desc, half, it, 0,
                          gl.program_id(0) * 2 * HALF_M + H * HALF_M, n_kv, num_warps)
    tma.store_wait(0)


# -- the correction partition (the default one) ------------------------------------------------

@gluon.jit
def correct_block(o_tmem, alpha_smem, half, phase, first, EARLY_RELEASE: gl.constexpr,
                  num_warps: gl.constexpr):
    o_layout: gl.constexpr = o_tmem.get_reg_layout(num_warps=num_warps)
    mbarrier.wait(half.alpha_ready, phase)
    alpha = alpha_smem.load(gl.SliceLayout(1, o_layout))
    mbarrier.arrive(half.alpha_free, count=1)
    if EARLY_RELEASE:
        mbarrier.arrive(half.o_fixed, count=1)
    if not first:
        # O holds the previous block's sum once its PV MMA is done
        mbarrier.wait(half.o_ready, phase ^ 1)
        o = o_tmem.load(o_layout)
        o_tmem.store(o * alpha[:, None])
    if not EARLY_RELEASE:
        mbarrier.arrive(half.o_fixed, count=1)


@gluon.jit
def correct_tile(o_tmem, alpha_smem, half0, half1, it, tile_phase, n_kv,
                 EARLY_RELEASE: gl.constexpr, num_warps: gl.constexpr):
    # O is this tile's once the epilogue of the previous one has read it
    mbarrier.wait(half0.epi_done, tile_phase ^ 1)
    mbarrier.wait(half1.epi_done, tile_phase ^ 1)
    for i in range(n_kv):
        # the halves in the order the MMA partition issues their PV MMAs
        correct_block(o_tmem.index(0), alpha_smem.index(0), half0, it & 1, i == 0,
                      EARLY_RELEASE, num_warps)
        correct_block(o_tmem.index(1), alpha_smem.index(1), half1, it & 1, i == 0,
                      EARLY_RELEASE, num_warps)
        it += 1
    mbarrier.wait(half0.o_ready, (it - 1) & 1)
    mbarrier.arrive(half0.epi_ready, count=1)
    mbarrier.wait(half1.o_ready, (it - 1) & 1)
    mbarrier.arrive(half1.epi_ready, count=1)
    return it


@gluon.jit
def correction_partition(o_tmem, alpha_smem, half0, half1, N_CTX, heads,
                         BLOCK_N: gl.constexpr, PERSISTENT: gl.constexpr,
                         EARLY_RELEASE: gl.constexpr, num_warps: gl.constexpr):
    n_kv = N_CTX // BLOCK_N
    it = 0
    if PERSISTENT:
        tile_phase = 0
        for tile in range(gl.program_id(0), num_tiles_of(N_CTX, 2 * o_tmem.shape[1], heads),
                          gl.num_programs(0)):
            it = correct_tile(o_tmem, alpha_smem, half0, half1, it, tile_phase, n_kv,
                              EARLY_RELEASE, num_warps)
            tile_phase ^= 1
    else:
        it = correct_tile(o_tmem, alpha_smem, half0, half1, it, 0, n_kv, EARLY_RELEASE,
                          num_warps)


@gluon.jit
def attention_fwd(q_desc, k_desc, v_desc, o_desc, N_CTX, heads, STAGES: gl.constexpr,
                  PERSISTENT: gl.constexpr, EMPTY_FLIP: gl.constexpr, EARLY_RELEASE: gl.constexpr,
                  KV_RESET_PER_TILE: gl.constexpr, num_warps: gl.constexpr):
    HALF_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    q_bufs = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape, q_desc.layout)
    kv_bufs = gl.allocate_shared_memory(k_desc.dtype, [STAGES] + k_desc.block_type.shape,
                                        k_desc.layout)
    o_smem0 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    o_smem1 = gl.allocate_shared_memory(o_desc.dtype, o_desc.block_type.shape, o_desc.layout)
    alpha_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    alpha_smem = gl.allocate_shared_memory(gl.float32, [2, HALF_M], alpha_layout)
    s_tmem = allocate_tensor_memory(gl.float32, [2, HALF_M, BLOCK_N],
                                    TensorMemoryLayout([HALF_M, BLOCK_N], col_stride=1))
    o_tmem = allocate_tensor_memory(gl.float32, [2, HALF_M, HEAD_DIM],
                                    TensorMemoryLayout([HALF_M, HEAD_DIM], col_stride=1))
    q_ring = Ring.make(2, 1)
    kv_ring = Ring.make(STAGES, 2)        # both halves' MMAs read every K and V tile
    half0 = Half.make()
    half1 = Half.make()
    gl.warp_specialize([
        (correction_partition, (o_tmem, alpha_smem, half0, half1, N_CTX, heads, BLOCK_N,
                                PERSISTENT, EARLY_RELEASE, num_warps)),
        (softmax_partition, (s_tmem.index(0), o_tmem.index(0), alpha_smem.index(0), o_smem0,
                             o_desc, half0, N_CTX, heads, 0, PERSISTENT, 4)),
        (softmax_partition, (s_tmem.index(1), o_tmem.index(1), alpha_smem.index(1), o_smem1,
                             o_desc, half1, N_CTX, heads, 1, PERSISTENT, 4)),
        (mma_partition, (q_bufs, kv_bufs, s_tmem, o_tmem, q_ring, kv_ring, half0, half1, N_CTX,
                         heads, PERSISTENT, KV_RESET_PER_TILE)),
        (load_partition, (q_desc, k_desc, v_desc, q_bufs, kv_bufs, q_ring, kv_ring, N_CTX, heads,
                          PERSISTENT, EMPTY_FLIP)),
    ], [4, 4, 1, 1], [192, 192, 24, 24])


def _launch(**knobs):
    # the tutorial's configuration: BLOCK_M = 256 in two halves, BLOCK_N = 128, HEAD_DIM = 128,
    # fp16, three K/V buffers; a sequence of 1024 keys is eight K/V blocks
    args = dict(q_desc=tensor_desc("fp16", [128, 128]), k_desc=tensor_desc("fp16", [128, 128]),
                v_desc=tensor_desc("fp16", [128, 128]), o_desc=tensor_desc("fp16", [128, 128]),
                N_CTX=1024, heads=1, STAGES=3, PERSISTENT=False, EMPTY_FLIP=0, EARLY_RELEASE=False,
                KV_RESET_PER_TILE=False)
    args.update(knobs)
    # N_CTX is a sequence length, a tensor extent: never negative. The proof covers that range
    # only; with N_CTX < 0 the K/V loops run no block and the correction partition's post-loop
    # wait on `o_ready` has no matching MMA commit, a deadlock the explorer shows
    # (`check ...::attention --param N_CTX=-128`).
    return Launch(attention_fwd, args=args, num_warps=4, target="cuda:100",
                  assume=lambda N_CTX: N_CTX >= 0)


attention = _launch()
attention_wrong_empty_phase = _launch(EMPTY_FLIP=1)
attention_o_released_before_rescale = _launch(EARLY_RELEASE=True)
attention_persistent = _launch(PERSISTENT=True, N_CTX=512, heads=2)
attention_persistent_kv_reset_per_tile = _launch(PERSISTENT=True, KV_RESET_PER_TILE=True,
                                                 N_CTX=512, heads=2)

EXPECT = {
    "attention": "verified",
    "attention_wrong_empty_phase": "violation:BP100",
    "attention_o_released_before_rescale": "violation:BP201",
    "attention_persistent": "verified",
    "attention_persistent_kv_reset_per_tile": "violation:BP200",
}
