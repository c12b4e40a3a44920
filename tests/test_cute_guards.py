"""Branches on a runtime K (model/cute/guards.py) and loops whose last iteration differs (roll.py's
drain peel): the synthetic forms first, then CuTe kernels compiled on the CPU with K (and a tile
count) set at run time, where `prove` answers for every value and agrees with the explorer at
several concrete ones."""

import os

import pytest

from barrierproof.model.cute import guards
from barrierproof.model.cute.roll import PEELS, roll
from barrierproof.model.expr import mk
from barrierproof.model.ir import BarrierAlloc, BarrierRef, Const, Loc, Loop, Op, Var

BARS = BarrierAlloc("bars", Const(1), (Const(2),), scalar=False)


def _arrive(slot: int, line: int) -> Op:
    return Op("arrive", BarrierRef(BARS, (Const(slot),)), loc=Loc("k.py", line, "k"))


def _guard(lhs, rhs, outcome: bool, line: int = 9) -> Op:
    """`lhs < rhs` as the interpreter records it (predicate slt)."""
    return Op(guards.KIND, count=lhs if not isinstance(lhs, int) else Const(lhs),
              bytes=rhs if not isinstance(rhs, int) else Const(rhs),
              name=guards.describe(2, int(outcome)), loc=Loc("k.py", line, "k"))


def _peeking(n: int) -> list[tuple]:
    """Iteration t of a consumer that peeks at the next stage while one is left: an arrive on
    slot t % 2, then the comparison `t + 1 < n` (false in the last iteration)."""
    return [(_arrive(t % 2, 3), _guard(t + 1, n, t + 1 < n)) for t in range(n)]


def test_a_last_iteration_that_differs_is_peeled_after_the_loop():
    """The last iteration's comparison went the other way: the loop rolls the others and keeps
    the last as it is; a shorter run of the family takes the same peels (PEELS), so every run
    has the same shape (prologue, loop, drain), even a run of one iteration."""
    token = PEELS.set({})
    try:
        long = roll(_peeking(6), "i0", Loc("k.py", 2, "k"), site="for")
        short = roll(_peeking(1), "i0", Loc("k.py", 2, "k"), site="for")
        two = roll(_peeking(2), "i0", Loc("k.py", 2, "k"), site="for")
    finally:
        PEELS.reset(token)
    assert [type(s).__name__ for s in long] == [type(s).__name__ for s in short] == \
        [type(s).__name__ for s in two] == ["Loop", "Op", "Op"]
    loop, arrive, last = long
    assert repr(loop.trip) == "5" and repr(short[0].trip) == "0" and repr(two[0].trip) == "1"
    assert [repr(op.count) for op in loop.body if op.kind == guards.KIND] == ["(i0 + 1)"]
    assert (repr(last.count), repr(last.bytes), last.name) == ("6", "6", "< false")
    assert repr(arrive.barrier.index[0]) == "1"
    # a loop of two iterations: the line through both is exact there (t takes no other value)
    assert repr(two[0].body[1].count) == "1"


def test_a_guard_is_proved_for_every_value_or_named():
    """A guard holds at every value and iteration (Z3 over the loop ranges and assumptions), or
    the comparison that may go another way is named; `strip` removes every guard."""
    k = Var("k")
    assumptions = (mk(">=", k, Const(1)),)
    loop = Loop("i0", mk("-", k, Const(1)), (_guard(mk("+", Var("i0"), Const(1)), k, True),))
    body = (_guard(0, k, True), loop, _guard(k, k, False))
    assert guards.unproved(body, ["k"], assumptions) is None
    assert guards.note(body, ["k"]) and "line 9" in guards.note(body, ["k"])[0]
    wrong = (Loop("i0", k, (_guard(mk("+", Var("i0"), Const(1)), k, True, line=12),)),)
    why = guards.unproved(wrong, ["k"], assumptions)
    assert why is not None and "line 12" in why and "not proved true" in why
    # a value no loop or parameter binds is not guessed
    assert "bound by no loop" in guards.unproved((_guard(Var("m"), k, True),), ["k"],
                                                 assumptions)
    assert guards.has_guards(body) and not guards.has_guards(guards.strip(body))


# -- CuTe kernels compiled on the CPU -----------------------------------------------------------
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                        "cute")
_BUILT: dict = {}


def _kernel(file: str, name: str):
    """The target's IR, built once per session (a few seconds each: the kernel is read at nine
    values of K, or at a grid of tile counts and K)."""
    pytest.importorskip("cutlass.cute")
    from barrierproof.loader import import_file, targets_in_module
    path = os.path.join(EXAMPLES, file)
    if (file, name) not in _BUILT:
        target = next(t for t in targets_in_module(path, import_file(path)) if t.name == name)
        _BUILT[file, name] = (target.build(), target.ref)
    return _BUILT[file, name]


def _agrees_at(kernel, points: list[dict], verdict: str) -> None:
    from barrierproof.checker.check import check_kernel
    for point in points:
        assert check_kernel(kernel, point).verdict == verdict, point


def test_the_peeking_mainloop_is_read_for_every_k_through_its_guards():
    """pipeline_tma's consumer peeks at the first stage before the loop and at the next one
    after each release while one is left: its loop is read with the last iteration peeled (no
    peek there), both comparisons with K proved for every K and removed, and the explorer
    agrees with the joined IR at several K."""
    kernel, _ = _kernel("pipeline_tma.py", "mainloop_peeking")
    assert list(kernel.params) == ["k_tiles"] and kernel.params["k_tiles"].symbolic
    assert not any(op.kind in ("unmodeled", guards.KIND) for op in kernel.ops())
    assert any("are proved to go the way the runs went" in n for n in kernel.notes)
    consumer = kernel.body[0].then
    loop, wait, release = consumer
    assert repr(loop.trip) == "(k_tiles - 1)"
    assert [op.kind for op in loop.body] == ["wait_parity", "arrive"]
    assert (wait.kind, repr(wait.barrier.index[0])) == ("wait_parity", "((k_tiles + 1) % 2)")
    assert release.kind == "arrive"
    _agrees_at(kernel, [{"k_tiles": k} for k in (1, 2, 3, 5)], "verified")


def test_prove_answers_for_every_k_on_the_tma_mainloop():
    """pipeline_tma with K from A's shape: proved for every K (barriers and races), each twin
    refuted at k_tiles=1 with the code the explorer finds there first. About 30 s of CPU."""
    from barrierproof.checker.check import check_kernel
    from barrierproof.checker.symbolic.prove import prove_kernel
    kernel, ref = _kernel("pipeline_tma.py", "mainloop")
    proved = prove_kernel(kernel, source=ref)
    assert proved.verdict == "proved", (proved.label, proved.notes)
    assert "for all k_tiles" in proved.coverage and "race-free" in proved.coverage
    for name in ("consumer_count_in_threads", "release_wrong_slot", "tx_count_doubled",
                 "mainloop_umma_two_releases_expected"):
        twin, twin_ref = _kernel("pipeline_tma.py", name)
        refuted = prove_kernel(twin, source=twin_ref)
        assert refuted.verdict == "violation", name
        assert any("smallest breaking values found: k_tiles=1" in n for n in refuted.notes), name
        assert refuted.codes[0] == check_kernel(twin, {"k_tiles": 1}).codes[0], name


@pytest.mark.slow
def test_prove_answers_for_every_k_on_the_peeking_mainloop():
    """The peeking consumer is proved for every K (its drain peel makes the classes larger than
    the plain mainloop's). About 30 s of CPU: with the one above, the slowest of these tests."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    kernel, ref = _kernel("pipeline_tma.py", "mainloop_peeking")
    proved = prove_kernel(kernel, source=ref)
    assert proved.verdict == "proved", (proved.label, proved.notes)
    assert "for all k_tiles" in proved.coverage


def test_the_persistent_umma_gemm_takes_its_tile_count_and_k_at_run_time():
    """umma_persistent with one block walking every tile: the tile count (a kernel argument) and
    K (A's shape) are parameters; the explorer agrees at several points; prove proves the
    barrier rules and races for every tile count and K (races through the nest flattened in
    the K loop's projection, races_nested.py). About 30 s of CPU (two minutes on a loaded
    machine)."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    kernel, ref = _kernel("umma_persistent.py", "persistent_one_block")
    assert list(kernel.params) == ["num_tiles", "k_tiles"]
    assert not any(op.kind == "unmodeled" for op in kernel.ops())
    _agrees_at(kernel, [{"num_tiles": t, "k_tiles": k} for t, k in ((1, 1), (2, 3), (4, 2))],
               "verified")
    answer = prove_kernel(kernel, source=ref)
    assert answer.verdict == "proved", (answer.label, answer.coverage)
    assert "for all num_tiles, k_tiles" in answer.coverage
    assert "race-free (BP200/BP201)" in answer.coverage
    # two blocks: both counts at run time too, each block walking its share (test_cute_walks.py)
    grid, grid_ref = _kernel("umma_persistent.py", "persistent")
    assert list(grid.params) == ["num_tiles", "k_tiles"]
