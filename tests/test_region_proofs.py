"""`prove` and regions: threads splitting one buffer by disjoint slices (rows, column stripes,
strided lanes, a loop counter inside a thread's own rows) are race-free for every value of the
symbolic parameters; an overlap, even of one slot, is never proved.

The prover cuts a buffer of concrete shape into one cell per slot and gives every access, per
cell, the exact condition (over the parameters and the loop coordinate) that its region covers
it (checker/symbolic/races.py). A generated family of layouts is judged by both `prove_races`
and the explorer on a grid: a proof never meets an explicit race, and the disjoint layouts are
proved (so the comparison is not vacuous)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.symbolic.prove import Budget, prove_kernel, prove_races
from barrierproof.loader import import_file, targets_in_module
from barrierproof.model.dsl import protocol
from barrierproof.model.interpreter import replay
from barrierproof.model.semantics import System

from conftest import EXAMPLES

REGIONS = os.path.join(EXAMPLES, "regions.py")
TARGETS = {t.name: t for t in targets_in_module(REGIONS, import_file(REGIONS))}

# the parameters each protocol's proof keeps symbolic (the others set the buffer's shape,
# which the prover needs concrete to cut it into cells)
SYMBOLIC = {"row_halves": ["steps"], "row_halves_off_by_one": ["steps"],
            "loop_rows_own": ["trips"], "loop_rows_wrap": ["trips"]}
CORRECT = ["row_halves", "column_stripes", "lanes_interleaved", "split_stage", "loop_rows_own"]
RACY = ["row_halves_off_by_one", "column_stripes_overlap", "lanes_stride_too_short",
        "split_stage_pad_overlaps", "loop_rows_wrap"]


def _prove(name):
    kernel = TARGETS[name].build()
    return kernel, prove_kernel(kernel, {}, Options(), None,
                                SimpleNamespace(symbolic=SYMBOLIC.get(name, [])))


def _fixed(kernel, symbolic):
    return {n: v for n, v in kernel.param_values({}).items() if n not in symbolic}


def test_the_examples_cover_every_protocol():
    assert sorted(CORRECT + RACY) == sorted(TARGETS)


@pytest.mark.parametrize("name", [n for n in CORRECT if n in SYMBOLIC])
def test_disjoint_regions_are_proved_for_every_value(name):
    _, v = _prove(name)
    assert v.verdict == "proved", (v.label, v.coverage, v.notes)
    assert "race-free (BP200/BP201)" in v.coverage


@pytest.mark.parametrize("name", CORRECT)
def test_disjoint_regions_are_race_free_in_the_prover(name):
    kernel = TARGETS[name].build()
    symbolic = SYMBOLIC.get(name, [])
    proof = prove_races(kernel, symbolic, _fixed(kernel, symbolic), Budget(30))
    assert proof.status == "proved", proof.reason
    assert not proof.side_conditions, proof.side_conditions


@pytest.mark.parametrize("name", RACY)
def test_overlapping_regions_are_refuted_and_never_proved(name):
    kernel, v = _prove(name)
    assert v.label == "violation:BP200", (v.label, v.coverage, v.notes)
    run = replay(System(kernel, v.trace.params, v.trace.grid_position), v.trace.actions)
    assert run.violation is not None and run.violation.code == "BP200"
    symbolic = SYMBOLIC.get(name, [])
    proof = prove_races(kernel, symbolic, _fixed(kernel, symbolic), Budget(30))
    assert proof.status != "proved", proof.reason


# the sizes of regions split by the thread, symbolic: the lemma of own_regions.py per pair of
# the threads that run them (lanes: the consumer, which writes none, is not among them)
# (rows: `wg * (rows // 2)`, the warpgroups' halves of the examples' first layout)
SIZES = [("column_stripes", ["width"], True), ("lanes_interleaved", ["per_lane"], True),
         ("row_halves", ["rows"], True), ("column_stripes_overlap", ["width"], False),
         ("lanes_stride_too_short", ["per_lane"], False), ("row_halves_off_by_one", ["rows"], False)]


@pytest.mark.parametrize("name,symbolic,disjoint", SIZES, ids=[s[0] for s in SIZES])
def test_regions_of_a_symbolic_size_split_by_the_thread(name, symbolic, disjoint):
    kernel = TARGETS[name].build()
    assert set(symbolic) <= {n for n, p in kernel.params.items() if p.symbolic}   # declared
    proof = prove_races(kernel, symbolic, _fixed(kernel, symbolic), Budget(30))
    assert (proof.status == "proved") == disjoint, proof.reason


# -- a differential test over generated layouts --------------------------------------------------

def _layout(kind: str):
    """Two or three threads writing their regions of one buffer with no barrier between them,
    then (for all but the loop walk) a reader of the whole buffer after a barrier."""
    def body(k, n=4, trips=2):
        if kind in ("walk_own", "walk_wrap"):
            k.threads(2, name="wg")
            acc = k.SMEM(slots=(2 * n,))
            with k.loop(trips) as i:
                row = k.thread * n + i % n if kind == "walk_own" else (k.thread * n + i) % (2 * n)
                k.write(acc.at[k.ds(row, 1)])
            return
        k.threads(3, name="t")
        done = k.Barrier(num_arrivals=2)
        if kind in ("stripes", "stripes_overlap"):
            buf = k.SMEM(slots=(2, 2 * n))
            start = k.thread * (n if kind == "stripes" else n - 1)
            ref = buf.at[k.ds(0, 2), k.ds(start, n)]
        elif kind in ("lanes", "lanes_short"):
            buf = k.SMEM(slots=(2 * n,))
            ref = buf.at[k.ds(k.thread, n, stride=2 if kind == "lanes" else 1)]
        else:
            buf = k.SMEM(slots=(2 * n,))
            start = k.thread * (n if kind == "halves" else n - 1)
            ref = buf.at[k.ds(start, n)]
        with k.when(k.thread < 2):
            with k.loop(trips):
                k.write(ref)
            k.barrier_arrive(done)
        with k.otherwise():
            k.barrier_wait(done)
            k.read(buf)
    body.__name__ = kind
    return protocol(symbolic=("trips",))(body)


DISJOINT = ["halves", "stripes", "lanes", "walk_own"]
OVERLAPPING = ["off_by_one", "stripes_overlap", "lanes_short", "walk_wrap"]


@pytest.mark.parametrize("kind", DISJOINT + OVERLAPPING)
def test_prove_agrees_with_the_explorer_on_generated_layouts(kind):
    target = _layout(kind)
    proved = 0
    kernel = target.build()
    for n in (2, 3, 4):
        proof = prove_races(kernel, ["trips"], {"n": n}, Budget(30))
        raced = [trips for trips in range(0, 5)
                 if check_kernel(kernel, {"n": n, "trips": trips}).codes == ["BP200"]]
        if proof.status == "proved":
            proved += 1
            assert not raced, (n, raced)      # a proof never meets an explicit race
        elif kind in DISJOINT:
            pytest.fail(f"n={n}: {proof.status}: {proof.reason}")
        if kind in OVERLAPPING and kind != "walk_wrap":
            assert raced and proof.status != "proved", (n, raced, proof.status)
    assert proved == (3 if kind in DISJOINT else 0)


# -- cells of the frontend's granule -------------------------------------------------------------

def test_pallas_regions_are_judged_in_cells_of_their_granule():
    from barrierproof.model import pallas
    pallas_regions = os.path.join(EXAMPLES, "pallas", "regions.py")
    (split,) = pallas.load_target(f"{pallas_regions}::split_copy")
    assert next(b for b in split.buffers if b.name == "stage").granule == (64,)
    proof = prove_races(split, [], {}, Budget(30))
    assert proof.status == "proved", proof.reason
    (wrong,) = pallas.load_target(f"{pallas_regions}::split_copy_wrong_barrier")
    proof = prove_races(wrong, [], {}, Budget(30))
    # a copy's half and a read half are one cell of 64 rows, named by its rows
    assert proof.status != "proved" and ("on stage[64:128]" in proof.reason or
                                         "on stage[0:64]" in proof.reason), proof.reason
    (off,) = pallas.load_target(f"{pallas_regions}::row_halves_off_by_one")
    proof = prove_races(off, [], {}, Budget(30))
    assert proof.status != "proved" and "on acc[63]" in proof.reason, proof.reason


# -- a group of threads of symbolic size, each owning rows picked by its index -----------------

def _group(name, start, read_early=False):
    """`n` warpgroups (n symbolic) each write their `rows` rows of one buffer of n * rows,
    arrive on `done`; the last warpgroup reads the whole buffer after waiting (or, racy,
    before)."""
    def body(k, n=3, rows=4):
        k.threads(n + 1, name="wg")
        k.assume(n >= 1)
        done = k.Barrier(num_arrivals=n)
        acc = k.SMEM(slots=(n * rows,))
        with k.when(k.thread < n):
            k.write(acc.at[k.ds(start(k.thread, rows), rows)])
            k.barrier_arrive(done)
        with k.otherwise():
            if read_early:
                k.read(acc)
            k.barrier_wait(done)
            k.read(acc)
    body.__name__ = name
    return protocol(symbolic=("n",))(body)


GROUP_OWN = _group("group_rows", lambda wg, rows: wg * rows)
GROUP_RACY = [_group("group_rows_off_by_one", lambda wg, rows: wg * (rows - 1)),
              _group("group_rows_read_early", lambda wg, rows: wg * rows, read_early=True)]


def test_rows_indexed_by_the_thread_are_proved_for_every_group_size():
    """Two distinct threads' rows never meet (a Z3 lemma over the thread indices), so a group
    of symbolic size writing its rows without a barrier between them is race-free for every n."""
    kernel = GROUP_OWN.build()
    proof = prove_races(kernel, ["n"], {"rows": 4}, Budget(30))
    assert proof.status == "proved", proof.reason
    v = prove_kernel(kernel, {}, Options(), None, SimpleNamespace(symbolic=["n"]))
    assert v.verdict == "proved" and "race-free (BP200/BP201)" in v.coverage, (v.label, v.coverage)
    assert all(check_kernel(kernel, {"n": n}).verdict == "verified" for n in (1, 2, 3))


@pytest.mark.parametrize("target", GROUP_RACY, ids=lambda t: t.name)
def test_overlapping_or_unordered_group_rows_are_refuted(target):
    kernel = target.build()
    assert prove_races(kernel, ["n"], {"rows": 4}, Budget(30)).status != "proved"
    v = prove_kernel(kernel, {}, Options(), None, SimpleNamespace(symbolic=["n"]))
    assert v.label == "violation:BP200", (v.label, v.coverage)
    run = replay(System(kernel, v.trace.params, v.trace.grid_position), v.trace.actions)
    assert run.violation is not None and run.violation.code == "BP200"


STARTS = {"rows": lambda t: t * 4, "rows_shifted": lambda t: t * 4 + 3,
          "stride_lanes": lambda t: t, "off_by_one": lambda t: t * 3,
          "same": lambda t: t * 0, "wrap": lambda t: (t * 4) % 8}


@pytest.mark.parametrize("kind", sorted(STARTS) + ["lanes_stride_short"])
def test_the_ownership_lemma_agrees_with_enumeration(kind):
    """The lemma (own_regions.py) against every pair of threads, for groups of 2 to 5: proved
    only where no two threads' regions meet at any of these sizes (lanes of stride 4 meet from
    5 threads on), and proved for the
    layouts that are disjoint for every size."""
    from barrierproof.checker.symbolic.fragment import Fragment
    from barrierproof.checker.symbolic.own_regions import disjoint_between_threads
    from barrierproof.model.regions import meet

    strided = kind in ("stride_lanes", "lanes_stride_short")
    start = STARTS.get(kind, lambda t: t)
    size, stride = 4, (4 if kind == "stride_lanes" else 3 if strided else 1)

    def body(k, n=2):
        k.threads(n, name="t")
        k.assume(n >= 1)
        buf = k.SMEM(slots=(16 * n + 16,))
        k.write(buf.at[k.ds(start(k.thread), size, stride=stride)])
    body.__name__ = kind
    kernel = protocol(symbolic=("n",))(body).build()
    frag = Fragment(kernel, ["n"], {})
    refs = [ref for op in kernel.ops() for ref in op.writes]
    lemma = disjoint_between_threads(frag, refs)
    clash = any(meet((start(a), size, stride), (start(b), size, stride)) is not None
                for n in range(2, 6) for a in range(n) for b in range(n) if a != b)
    assert not (lemma and clash), kind
    assert lemma == (kind in ("rows", "rows_shifted")), kind



# -- regions of a buffer of symbolic size apart by their bounds; thread counts symbolic --------
# The examples' layouts (examples/regions.py) with the thread count or the region size
# symbolic, and the range the layout is meant for stated (no kernel has 0 warps).

MODULE = import_file(REGIONS)


@protocol(symbolic=("rows",))
def split_stage_any_rows(k, rows=4):
    k.assume(rows >= 2)
    MODULE._split_stage(k, rows, pad_start=rows)


@protocol(symbolic=("rows",))
def split_stage_pad_overlaps_any_rows(k, rows=4):
    k.assume(rows >= 2)
    MODULE._split_stage(k, rows, pad_start=rows - 1)


@protocol(symbolic=("warps", "width"))
def column_stripes_any_warps(k, warps=3, width=2):
    k.assume(warps >= 1)
    MODULE._column_stripes(k, warps, width, lambda w, width: w * width)


@protocol(symbolic=("warps", "width"))
def column_stripes_overlap_any_warps(k, warps=3, width=2):
    k.assume(warps >= 1)
    MODULE._column_stripes(k, warps, width, lambda w, width: w)


@protocol(symbolic=("rows_each", "trips"))
def loop_rows_own_any_rows(k, rows_each=2, trips=4):
    k.assume(rows_each >= 1)
    MODULE._walk(k, rows_each, trips, lambda wg, i, n: wg * n + i % n)


@protocol(symbolic=("rows_each", "trips"))
def loop_rows_wrap_any_rows(k, rows_each=2, trips=3):
    k.assume(rows_each >= 1)
    MODULE._walk(k, rows_each, trips, lambda wg, i, n: (wg * n + i) % (2 * n))


ANY = [(split_stage_any_rows, True), (split_stage_pad_overlaps_any_rows, False),
       (column_stripes_any_warps, True), (column_stripes_overlap_any_warps, False),
       (loop_rows_own_any_rows, True), (loop_rows_wrap_any_rows, False)]


@pytest.mark.parametrize("target,disjoint", ANY, ids=[t.name for t, _ in ANY])
def test_layouts_with_symbolic_counts_and_sizes_are_proved_or_refuted(target, disjoint):
    """Every parameter symbolic: the disjoint layouts are proved race-free for every value the
    assumptions allow, the overlapping twins refuted with a trace that replays to BP200."""
    kernel = target.build()
    symbolic = [n for n, p in kernel.params.items() if p.symbolic]
    v = prove_kernel(kernel, {}, Options(), None, SimpleNamespace(symbolic=symbolic))
    if disjoint:
        assert v.verdict == "proved" and "race-free (BP200/BP201)" in v.coverage, \
            (v.label, v.coverage)
        return
    assert v.label == "violation:BP200", (v.label, v.coverage)
    run = replay(System(kernel, v.trace.params, v.trace.grid_position), v.trace.actions)
    assert run.violation is not None and run.violation.code == "BP200"
    proof = prove_races(kernel, symbolic, {}, Budget(30))
    assert proof.status != "proved", proof.reason
    if target is split_stage_pad_overlaps_any_rows:   # the halves apart, the padding not
        assert "judged by the pairs that may meet" in proof.reason, proof.reason


def test_a_stage_split_by_its_copies_has_a_cell_per_pair_of_regions_that_may_meet():
    """region_cells.py: the two copied halves, the padding and the consumer's rows of a stage
    of symbolic size; the padding meets none of the others, every other pair may meet (the
    halves meet the consumer's rows). The padding one row early meets the second half."""
    from barrierproof.checker.symbolic.fragment import Fragment
    from barrierproof.checker.symbolic.region_cells import buffer_refs, may_meet, region_cells

    for target, pad_apart in ((split_stage_any_rows, True),
                              (split_stage_pad_overlaps_any_rows, False)):
        kernel = target.build()
        frag = Fragment(kernel, ["rows"], {})
        stage = next(b for b in kernel.buffers if b.name == "stage")
        first, second, pad, consumer = buffer_refs(kernel, stage)
        assert may_meet(frag, first, consumer) and may_meet(frag, second, consumer)
        assert not may_meet(frag, first, second)
        assert not may_meet(frag, pad, first)
        assert may_meet(frag, pad, second) != pad_apart
        assert may_meet(frag, pad, consumer) != pad_apart     # row rows-1: the consumer's too
        cells, of_ref = region_cells(frag, stage)
        # each with itself, both halves with the consumer's rows (and the early padding with
        # the second half and the consumer's rows)
        assert len(cells) == (6 if pad_apart else 8)
        from barrierproof.checker.symbolic.own_regions import ref_key
        assert len(of_ref[ref_key(pad)]) == (1 if pad_apart else 3)


def test_the_shipped_split_stage_is_proved_for_every_size_with_its_regions_stated():
    """examples/regions.py::split_stage with `rows` symbolic and no range assumed: race-free
    for every size at which its regions lie within the stage, which the proof states (below 2
    rows a half is empty: the explorer rejects the kernel there)."""
    kernel = TARGETS["split_stage"].build()
    proof = prove_races(kernel, ["rows"], {}, Budget(30))
    assert proof.status == "proved", proof.reason
    assert any("is within the buffer" in str(c) for c in proof.side_conditions), \
        proof.side_conditions
    assert check_kernel(kernel, {"rows": 1}).verdict == "error"
    assert check_kernel(kernel, {"rows": 2}).verdict == "verified"
