"""Branches on a runtime K (model/cute/guards.py) and loops whose last iteration differs (roll.py's
drain peel): the synthetic forms first, then CuTe kernels compiled on the CPU with K (and a tile
count) set at run time, where `prove` answers for every value and agrees with the explorer at
several concrete ones."""


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
