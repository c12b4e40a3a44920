"""Races at the granularity kernels split buffers by: rows, column stripes, lanes, halves of a
stage. Threads that touch disjoint regions of one buffer (`acc.at[k.ds(start, size)]`) never
race; two accesses conflict only where their slots overlap, and a counterexample names the
slots both touch.

`k.SMEM(slots=(rows, cols))` declares the buffer's slots; `buf.at[i, k.ds(start, size,
stride)]` names one slot of the leading dimension and a strided range of the next.

`symbolic=` names the parameters `barrierproof prove` keeps symbolic, sizes of the regions
included: the prover judges a buffer of symbolic size by the pairs of its regions that may meet
(two regions Z3 proves apart for every value never conflict), and regions split by the thread
index are proved disjoint between threads.
"""

from barrierproof import protocol


# ---------------------------------------------------------------------------------------------
# Two consumer warpgroups each accumulate their own half of the rows of one SMEM tile, fed by
# a TMA ring; the epilogue warpgroup reads the whole tile once both are done.
# ---------------------------------------------------------------------------------------------

def _row_halves(k, rows, steps, first_row):
    k.threads(4, name="wg")                           # wg0, wg1: consumers; wg2: TMA; wg3: epilogue
    k.assume(steps >= 2)                              # the drain waits for two releases
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    empty = k.Barrier(num_arrivals=2, num_barriers=2)
    done = k.Barrier(num_arrivals=2)
    tiles = k.SMEM(slots=2)
    acc = k.SMEM(slots=(rows,))
    half = rows // 2
    with k.when(k.thread == 2):
        with k.loop(steps) as i:
            with k.when(i >= 2):
                k.barrier_wait(empty.at[i % 2])
            k.copy_gmem_to_smem(full.at[i % 2], bytes=4096, dst=tiles.at[i % 2])
        with k.loop(2) as j:
            k.barrier_wait(empty.at[(steps - 2 + j) % 2])
    with k.when(k.thread < 2):
        with k.loop(steps) as i:
            k.barrier_wait(full.at[i % 2])
            k.read(tiles.at[i % 2])
            k.write(acc.at[k.ds(first_row(k.thread, half), half)])
            k.barrier_arrive(empty.at[i % 2])
        k.barrier_arrive(done)
    with k.when(k.thread == 3):
        k.barrier_wait(done)
        k.read(acc)


@protocol(expect="verified", symbolic=("rows", "steps"))
def row_halves(k, rows=8, steps=3):
    """wg0 owns rows 0..3, wg1 rows 4..7: disjoint, race-free without a barrier between them."""
    _row_halves(k, rows, steps, lambda wg, half: wg * half)


@protocol(expect="violation:BP200", symbolic=("rows", "steps"))
def row_halves_off_by_one(k, rows=8, steps=3):
    """wg1's half starts one row early (rows 3..6): row 3 is written by both warpgroups."""
    _row_halves(k, rows, steps, lambda wg, half: wg * (half - 1))


# ---------------------------------------------------------------------------------------------
# Warps own column stripes of a 2-D tile; one warp then reads every column of its row band.
# ---------------------------------------------------------------------------------------------

def _column_stripes(k, warps, width, stripe_of):
    k.threads(warps + 1, name="w")                    # w0..: stripe writers, the last: reader
    k.assume(warps >= 1)
    written = k.Barrier(num_arrivals=warps)
    tile = k.SMEM(slots=(4, warps * width))
    with k.when(k.thread < warps):
        k.write(tile.at[k.ds(0, 4), k.ds(stripe_of(k.thread, width), width)])
        k.barrier_arrive(written)
    with k.otherwise():
        k.barrier_wait(written)
        k.read(tile)


@protocol(expect="verified", symbolic=("warps", "width"))
def column_stripes(k, warps=3, width=2):
    """Warp w writes columns w*width .. w*width+width-1 of every row."""
    _column_stripes(k, warps, width, lambda w, width: w * width)


@protocol(expect="violation:BP200", symbolic=("warps", "width"))
def column_stripes_overlap(k, warps=3, width=2):
    """Stripes placed one column apart instead of `width`: neighbours share a column."""
    _column_stripes(k, warps, width, lambda w, width: w)


# ---------------------------------------------------------------------------------------------
# Lanes own interleaved elements (lane t: t, t + lanes, ...); every lane arrives, and the
# elected lane 0 publishes the whole vector to the consumer.
# ---------------------------------------------------------------------------------------------

def _lanes(k, lanes, per_lane, stride):
    k.threads(lanes + 1, name="t")                    # t0..: lanes; the last: consumer
    k.assume(lanes >= 1)
    stored = k.Barrier(num_arrivals=lanes)
    published = k.Barrier(num_arrivals=1)
    vec = k.SMEM(slots=lanes * per_lane)
    with k.when(k.thread < lanes):
        k.write(vec.at[k.ds(k.thread, per_lane, stride=stride)])
        k.barrier_arrive(stored)
        with k.when(k.thread == 0):                   # elect_one(): lane 0 publishes
            k.barrier_wait(stored)
            k.barrier_arrive(published)
    with k.otherwise():
        k.barrier_wait(published)
        k.read(vec)


@protocol(expect="verified", symbolic=("lanes", "per_lane"))
def lanes_interleaved(k, lanes=3, per_lane=2):
    """Stride `lanes`: lane t's elements t, t+lanes never meet another lane's."""
    _lanes(k, lanes, per_lane, stride=lanes)


@protocol(expect="violation:BP200", symbolic=("per_lane",))
def lanes_stride_too_short(k, lanes=3, per_lane=2):
    """Stride lanes-1: lane 0's second element (2) is lane 2's first."""
    _lanes(k, lanes, per_lane, stride=lanes - 1)


# ---------------------------------------------------------------------------------------------
# Two TMA copies fill the two halves of one stage, while the issuing thread zeroes a third
# part of the same buffer (the padding rows past both copies, which only it uses).
# ---------------------------------------------------------------------------------------------

def _split_stage(k, rows, pad_start):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=2)
    stage = k.SMEM(slots=(rows + 2,))
    half = rows // 2
    with k.when(k.thread == 0):                       # producer
        k.copy_gmem_to_smem(full, bytes=2048, dst=stage.at[k.ds(0, half)])
        k.copy_gmem_to_smem(full, bytes=2048, dst=stage.at[k.ds(half, half)])
        k.write(stage.at[k.ds(pad_start, 2)])         # padding, while the copies fly
    with k.otherwise():
        k.barrier_wait(full)
        k.read(stage.at[k.ds(0, rows)])               # the copied rows, not the padding


@protocol(expect="verified", symbolic=("rows",))
def split_stage(k, rows=4):
    """The padding rows lie past both halves: nothing overlaps the copies in flight, and the
    consumer reads only the copied rows (the padding is not published to it)."""
    _split_stage(k, rows, pad_start=rows)


@protocol(expect="violation:BP200", symbolic=("rows",))
def split_stage_pad_overlaps(k, rows=4):
    """The padding starts one row early, inside the second copy's half."""
    _split_stage(k, rows, pad_start=rows - 1)


# ---------------------------------------------------------------------------------------------
# A row indexed by a loop counter: each warpgroup walks its own rows, or wraps onto the other's.
# ---------------------------------------------------------------------------------------------

def _walk(k, rows_each, trips, row):
    k.threads(2, name="wg")
    k.assume(rows_each >= 1)
    acc = k.SMEM(slots=(2 * rows_each,))
    with k.loop(trips) as i:
        k.write(acc.at[k.ds(row(k.thread, i, rows_each), 1)])


@protocol(expect="verified", symbolic=("rows_each", "trips"))
def loop_rows_own(k, rows_each=2, trips=4):
    """Row wg*rows_each + i % rows_each: every trip stays in the warpgroup's own rows."""
    _walk(k, rows_each, trips, lambda wg, i, n: wg * n + i % n)


@protocol(expect="violation:BP200", symbolic=("rows_each", "trips"))
def loop_rows_wrap(k, rows_each=2, trips=3):
    """Row (wg*rows_each + i) % (2*rows_each): the third trip wraps onto the other's rows."""
    _walk(k, rows_each, trips, lambda wg, i, n: (wg * n + i) % (2 * n))
