"""A static persistent scheduler's walk with the tile count at run time (model/cute/walks.py):
block b of a grid of m walks ceil((tiles - b) / m) tiles, fitted as a floor quotient of the tile
count and proved (Z3) equal to its scf.for's count; and prove naming the explorer's finding at
the declared values when the smallest breaking values show the same fault as another rule
(checker/symbolic/declared.py)."""

import os

import pytest

from barrierproof.model.cute import walks
from barrierproof.model.cute.counts import NoJoin, Scope, fit_ring, fit_value
from barrierproof.model.expr import mk
from barrierproof.model.ir import Const, Loc, Loop, Op, Var, When

from conftest import EXAMPLES

LOC = Loc("k.py", 7, "k")
SAMPLES = (1, 2, 3, 5)


def _walk_bounds(start_of, step=2, samples=SAMPLES, upper=lambda n: n):
    """The bounds the interpreter records for `range(start_of(b), upper(tiles), step)` in
    blocks 0 and 1, one run per tile count."""
    table = {}
    for n in samples:
        for b in (0, 1):
            lo, hi = start_of(b), upper(n)
            count = max(0, (hi - lo + step - 1) // step)
            table.setdefault((b, LOC), []).append(({"arg": n}, lo, hi, step, count))
    return table


def _per_block(trip0, trip1):
    """`when block == 0: loop trip0 else: loop trip1`, an arrive in each."""
    arrive = Op("arrive", loc=LOC)
    return (When(mk("==", Var("block"), Const(0)), (Loop("i0", trip0, (arrive,), LOC),),
                 (Loop("i0", trip1, (arrive,), LOC),)),)


def _check(body, table):
    token = walks.BOUNDS.set(table)
    try:
        walks.check(body, [{"arg": n} for n in SAMPLES], {"tiles": "arg"}, 2)
    finally:
        walks.BOUNDS.reset(token)


def test_a_block_walk_is_a_floor_quotient_of_the_count():
    """Each block's trip count over the runs is no affine or multilinear form of the tile count,
    but a floor quotient by the grid's size: found only when the scope has the grid's stride."""
    tiles = [{"tiles": n} for n in SAMPLES]
    block0 = [Const((n + 1) // 2) for n in SAMPLES]
    with pytest.raises(NoJoin):
        fit_value(block0, Scope(tiles, ["tiles"]))
    assert repr(fit_value(block0, Scope(tiles, ["tiles"], strides=(2,)))) == \
        "((tiles + 1) // 2)"
    assert repr(fit_value([Const(n // 2) for n in SAMPLES],
                          Scope(tiles, ["tiles"], strides=(2,)))) == "(tiles // 2)"
    # a producer tail after the walk: the stage and parity of the walk count on a 2-stage ring
    walked = [(n + 1) // 2 for n in SAMPLES]
    slot, parity = fit_ring([Const(w % 2) for w in walked],
                            [Const((w // 2 + 1) % 2) for w in walked], 2,
                            Scope(tiles, ["tiles"], strides=(2,)))
    for n, w in zip(SAMPLES, walked):
        from barrierproof.model.ir import evaluate
        assert (evaluate(slot, {"tiles": n}), evaluate(parity, {"tiles": n})) == \
            (w % 2, (w // 2 + 1) % 2)


def test_a_walk_trip_count_is_proved_against_its_loop_bounds():
    """The fitted counts of `range(b, tiles, 2)` are proved for every tile count; a count that
    is not the loop's (block 0 given block 1's, even where the runs read agree), a loop whose start
    differs between runs, or one whose bound is not the runtime value, leave the runs unjoined."""
    right = _per_block(mk("//", mk("+", Var("tiles"), Const(1)), Const(2)),
                       mk("//", Var("tiles"), Const(2)))
    _check(right, _walk_bounds(lambda b: b))
    swapped = _per_block(mk("//", Var("tiles"), Const(2)),
                         mk("//", mk("+", Var("tiles"), Const(1)), Const(2)))
    with pytest.raises(NoJoin, match="peeled"):         # off by one at odd counts
        _check(swapped, _walk_bounds(lambda b: b))
    with pytest.raises(NoJoin, match="not proved"):     # right at the even counts read
        _check(swapped, _walk_bounds(lambda b: b, samples=(2, 4)))
    moving = _walk_bounds(lambda b: b)
    run, lo, hi, st, count = moving[(0, LOC)][0]
    moving[(0, LOC)][0] = (run, lo + 2, hi + 2, st, count)
    with pytest.raises(NoJoin, match="one start"):
        _check(right, moving)
    with pytest.raises(NoJoin, match="one start"):
        _check(right, _walk_bounds(lambda b: b, upper=lambda n: n + 1))
    with pytest.raises(NoJoin, match="no bounds"):
        _check(right, {})


def test_named_barrier_instructions_stay_one_op_across_block_positions():
    """The runs join each block apart: the bar.sync at one line in both positions is one op
    after the join (one aligned instruction, as in the kernel), unless a position holds two."""
    def bar(line=9):
        return Op("bar_sync", bar_id=Const(1), count=Const(64), loc=Loc("k.py", line, "k"))
    body = (When(mk("==", Var("block"), Const(0)), (bar(),), (bar(),)),)
    shared = walks.share_named_barriers(body, 2)
    assert shared[0].then[0] is shared[0].orelse[0]
    twice = (When(mk("==", Var("block"), Const(0)), (bar(), bar()), (bar(),)),)
    kept = walks.share_named_barriers(twice, 2)
    assert len({id(op) for op in kept[0].then + kept[0].orelse}) == 3


def _target(file, name):
    pytest.importorskip("cutlass.cute")
    from barrierproof.loader import import_file, targets_in_module
    path = os.path.join(EXAMPLES, "cute", file)
    target = next(t for t in targets_in_module(path, import_file(path)) if t.name == name)
    return target.build(), target.ref


def test_the_two_block_persistent_gemm_takes_its_tile_count_at_run_time():
    """umma_persistent on a grid of two: the tile count and K are parameters, each block's tile
    loops walk its share of the tiles, and the explorer gives the joined IR's verdict at tile
    counts where the blocks walk alike (even) and apart (odd). A few seconds."""
    from barrierproof.checker.check import check_kernel
    from barrierproof.model.ir import iter_ops
    kernel, _ = _target("umma_persistent.py", "persistent")
    assert list(kernel.params) == ["num_tiles", "k_tiles"]
    assert [(a, repr(n)) for a, n in kernel.grid] == [("block", "2")]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    [per_block] = [s for s in kernel.body if isinstance(s, When)]
    trips = [{repr(s.trip) for s in _loops(side) if "num_tiles" in repr(s.trip)}
             for side in (per_block.then, per_block.orelse)]
    assert trips == [{"((num_tiles + 1) // 2)"}, {"(num_tiles // 2)"}]
    # the epilogue's named barrier is one instruction in both positions
    syncs = {id(op) for op in iter_ops(kernel.body) if op.kind == "bar_sync" and
             repr(op.bar_id) == "1"}
    assert len(syncs) == 1
    for point in ({"num_tiles": 1, "k_tiles": 1}, {"num_tiles": 2, "k_tiles": 2},
                  {"num_tiles": 4, "k_tiles": 1}):
        assert check_kernel(kernel, point).verdict == "verified", point
    twin, _ = _target("umma_persistent.py", "acc_release_counts_warps")
    assert list(twin.params) == ["num_tiles", "k_tiles"]
    assert check_kernel(twin, {"num_tiles": 2, "k_tiles": 1}).codes[0] == "BP121"


def _loops(body):
    for s in body:
        if isinstance(s, Loop):
            yield s
            yield from _loops(s.body)
        elif isinstance(s, When):
            yield from _loops(s.then)
            yield from _loops(s.orelse)


def test_prove_names_the_explorers_finding_at_the_declared_values():
    """A stage released before its MMA: at the smallest K (1) the MMA is left running at exit
    (BP105), at the declared K (4) the next copy overwrites the stage it reads (BP200, what
    `check` reports). prove's codes are the smallest values'; the declared values' finding is
    kept apart, and the example's expectation holds under both engines. A few seconds."""
    from barrierproof.checker.check import check_kernel
    from barrierproof.checker.symbolic.prove import prove_kernel
    kernel, ref = _target("umma_ring.py", "umma_ring_released_before_the_mma")
    answer = prove_kernel(kernel, source=ref)
    assert answer.verdict == "violation"
    assert answer.codes == check_kernel(kernel, {"k_tiles": 1}).codes == ["BP105"]
    declared = [d.code for d in answer.at_declared]
    assert declared == [check_kernel(kernel, {"k_tiles": 4}).codes[0]] == ["BP200"]
    assert answer.to_json()["at_declared"][0]["code"] == "BP200"
    assert any("at the declared values (k_tiles=4)" in n for n in answer.notes)
    assert answer.matches(kernel.expect)


def _two_position_kernel(grid=Const(2), bound_b1=None, extra=(), k1=Var("k")):
    """Block 0 walks (n + 1) // 2 tiles of k steps, block 1 n // 2 (or `bound_b1`), each step
    an arrive that two roles reach at one instruction."""
    from barrierproof.model.ir import Kernel, Param, WarpRegion
    arrive = Op("arrive", loc=LOC)
    n, k = Var("n"), Var("k")

    def nest(tiles, steps=k):
        return (Loop("t", tiles, (Loop("kk", steps, (arrive,) + extra, LOC),), LOC),)
    b1 = mk("//", n, Const(2)) if bound_b1 is None else bound_b1
    body = (When(mk("==", Var("block"), Const(0)),
                 nest(mk("//", mk("+", n, Const(1)), Const(2))), nest(b1, k1), LOC),
            WarpRegion("w", (arrive,), LOC), WarpRegion("w", (arrive,), LOC))
    return Kernel("two", body, params={"n": Param("n", 3, True), "k": Param("k", 2, True)},
                  grid=(("block", grid),), assumptions=(mk(">=", n, Const(1)),
                                                        mk(">=", k, Const(1))))


def test_grid_positions_with_nests_of_their_own_are_proved_apart():
    """positions.py: each block's program is the kernel with the axis bound (its branch kept),
    an op held at two places stays one op, the block's share of n (read only through it) is a
    parameter from its least value up (Z3), and positions alike but for that bound are one
    program from the lesser bound. Instant."""
    from barrierproof.checker.symbolic.positions import split_positions
    from barrierproof.model.ir import iter_ops
    kernel = _two_position_kernel()
    [part] = split_positions(kernel, ["n", "k"], {})
    assert part.positions == [{"block": 0}, {"block": 1}]
    program = part.program
    assert program.grid == () and "n" not in program.params
    assert part.symbolic == ["k", "n_share"]
    assert sorted(map(repr, program.assumptions)) == ["(k >= 1)", "(n_share >= 0)"]
    [loop] = [s for s in program.body if isinstance(s, Loop)]
    assert repr(loop.trip) == "n_share"
    assert len({id(op) for op in iter_ops(program.body)}) == 1
    # block 1 walks n // 3 tiles of k - 1 steps: two programs, each from its own bound
    apart = split_positions(_two_position_kernel(bound_b1=mk("//", Var("n"), Const(3)),
                                                 k1=mk("-", Var("k"), Const(1))), ["n", "k"], {})
    assert [p.positions for p in apart] == [[{"block": 0}], [{"block": 1}]]
    assert [[repr(a) for a in p.program.assumptions if "share" in repr(a)] for p in apart] \
        == [["(n_share >= 1)"], ["(n_share >= 0)"]]
    # n read beside its share (a slot index) stays n
    beside = Op("arrive", barrier=None, count=mk("%", Var("n"), Const(2)), loc=LOC)
    kept = split_positions(_two_position_kernel(extra=(beside,)), ["n", "k"], {})
    assert all("n" in p.symbolic for p in kept)


def test_grid_positions_are_not_split_when_the_grid_is_symbolic_or_large():
    """A grid sized by a symbolic parameter, or of more than MAX_POSITIONS positions, is proved
    as it is (the positions to prove would depend on the values). Instant."""
    from barrierproof.checker.symbolic.positions import MAX_POSITIONS, split_positions
    assert split_positions(_two_position_kernel(grid=Var("n")), ["n", "k"], {}) is None
    assert split_positions(_two_position_kernel(grid=Const(MAX_POSITIONS + 1)),
                           ["n", "k"], {}) is None
