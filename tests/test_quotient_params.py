"""A parameter read only as `P // D` is proved as its quotient, and the verdict still speaks of P
(checker/symbolic/quotients.py). About 10 s."""

from __future__ import annotations

import pytest

from barrierproof.checker.engine_settings import ProveSettings
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.checker.symbolic.quotients import quotient_rewrite, translate
from barrierproof.checker.verdict import Verdict
from barrierproof.model.dsl import protocol

QUICK = Options(Limits(timeout=20))


def tail_wait(assume_nonnegative: bool):
    """Tiles of 128 rows handed over one barrier; after the loop the consumer waits for a tail
    signal the producer only sends for a negative count -- the shape of a post-loop wait whose
    guard is missing, a deadlock for every negative length."""
    @protocol(symbolic=("n_ctx",))
    def handoff(k, n_ctx=512):
        k.threads(2, name="wg")
        if assume_nonnegative:
            k.assume(n_ctx >= 0)
        full = k.Barrier()
        empty = k.Barrier()
        tail = k.Barrier()
        with k.when(k.thread == 0):
            with k.loop(n_ctx // 128) as i:
                with k.when(i >= 1):
                    k.barrier_wait(empty)
                k.barrier_arrive(full)
        with k.otherwise():
            with k.loop(n_ctx // 128) as j:
                k.barrier_wait(full)
                with k.when(j + 1 < n_ctx // 128):
                    k.barrier_arrive(empty)
            with k.when(n_ctx // 128 < 0):
                k.barrier_wait(tail)
    return handoff.build()


def test_the_quotient_stands_for_the_parameter_with_its_range_translated():
    kernel, done = quotient_rewrite(tail_wait(True), ["n_ctx"], {})
    assert [(q.param, q.divisor, q.lo, q.hi) for q in done] == [("n_ctx", 128, 0, None)]
    assert "n_ctx" not in kernel.params and done[0].name in kernel.params
    assert [repr(a) for a in kernel.assumptions] == [f"({done[0].name} >= 0)"]


@pytest.mark.parametrize("asked", [(), ("n_ctx",)])
def test_proved_over_the_quotient_and_reported_for_the_parameter(asked):
    v = prove_kernel(tail_wait(True), options=QUICK, settings=ProveSettings(symbolic=asked))
    assert v.verdict == "proved", v.coverage
    text = " ".join(v.notes) + (v.coverage or "")
    assert "n_ctx // 128" in text and "n_ctx_div_128" not in text


def test_a_negative_length_is_never_proved():
    kernel = tail_wait(False)
    v = prove_kernel(kernel, options=Options(Limits(timeout=5)))
    assert v.verdict != "proved"
    assert check_kernel(kernel, {"n_ctx": -1}).verdict == "violation"
    assert check_kernel(kernel, {"n_ctx": 0}).verdict == "verified"


def test_values_of_the_quotient_are_reported_as_values_of_the_parameter():
    _, (q,) = quotient_rewrite(tail_wait(False), ["n_ctx"], {})
    v = translate(Verdict("handoff", "violation", params={q.name: -1},
                          coverage=f"first found at {q.name}=2; {q.name} in 0..8; up to "
                                   f"{{'{q.name}': 8}}"), [q])
    assert v.params == {"n_ctx": -1}
    assert v.coverage == "first found at n_ctx=256; n_ctx // 128 in 0..8; up to {'n_ctx': 1024}"


def test_a_parameter_also_read_directly_is_left_alone():
    @protocol(symbolic=("n",))
    def counted(k, n=256):
        k.threads(2)
        k.assume(n >= 0)
        bar = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            with k.loop(n // 128):
                k.barrier_arrive(bar)
            k.copy_gmem_to_smem(bar, bytes=n)
        with k.otherwise():
            with k.loop(n // 128 + 1):
                k.barrier_wait(bar)
    kernel = counted.build()
    assert quotient_rewrite(kernel, ["n"], {}) == (kernel, [])


def test_a_range_that_links_parameters_is_not_translated():
    @protocol(symbolic=("n", "m"))
    def linked(k, n=256, m=1):
        k.threads(1)
        k.assume(n >= 128 * m)
        bar = k.Barrier()
        with k.loop(n // 128 + m):
            k.barrier_arrive(bar)
            k.barrier_wait(bar)
    kernel = linked.build()
    assert quotient_rewrite(kernel, ["n", "m"], {})[1] == []
    # with m fixed the range is one of n alone: 128 * 2 <= n, so n // 128 >= 2
    (q,) = quotient_rewrite(kernel, ["n"], {"m": 2})[1]
    assert (q.lo, q.hi) == (2, None)


def test_the_quotient_range_is_exact_or_not_taken():
    from barrierproof.checker.symbolic.quotients import _quotient_range
    from barrierproof.model.ir import BinOp, Const, Var
    n = Var("n")
    assert _quotient_range("n", 128, []) == (None, None)
    assert _quotient_range("n", 128, [BinOp("<=", n, Const(-1))]) == (None, -1)
    assert _quotient_range("n", 128, [BinOp(">=", n, Const(1)), BinOp("<=", n, Const(300))]) \
        == (0, 2)
    # multiples of 256 up to 512: quotients 0, 2, 4 by 128 -- no interval, no rewrite
    gaps = [BinOp("==", BinOp("%", n, Const(256)), Const(0)), BinOp(">=", n, Const(0)),
            BinOp("<=", n, Const(512))]
    assert _quotient_range("n", 128, gaps) is None
