"""Small things a new user hits: trip counts that differ only where a loop runs no iteration
(`steps - 2` and `max(steps - 2, 0)`) are one count to `prove`'s static order, a negative
literal trip count is an input error, and a misspelt --param names the real parameters.
About 4 s (two proofs)."""

import textwrap

from barrierproof import protocol
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.cli import main
from barrierproof.model.dsl import maximum


def _trips(k, steps, consumer_trip):
    """wg0 arrives on `full` steps - 2 times, each after wg1's release of the previous one;
    wg1 waits `consumer_trip` times. No assumption: steps may be below 2."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(steps - 2) as i:
            with k.when(i > 0):
                k.barrier_wait(empty)
            k.barrier_arrive(full)
        with k.when(steps - 2 > 0):
            k.barrier_wait(empty)
    with k.otherwise():
        with k.loop(consumer_trip) as i:
            k.barrier_wait(full)
            k.barrier_arrive(empty)


@protocol(symbolic=("steps",))
def clamped_trip(k, steps=4):
    _trips(k, steps, maximum(steps - 2, 0))


@protocol(symbolic=("steps",))
def one_wait_short(k, steps=4):
    _trips(k, steps, maximum(steps - 3, 0))


def test_trip_counts_equal_as_iteration_counts_share_the_order():
    assert prove_kernel(clamped_trip.build()).verdict == "proved"
    assert prove_kernel(one_wait_short.build()).verdict == "violation"


def _run(tmp_path, capsys, body, *flags):
    path = tmp_path / "user.py"
    path.write_text("from barrierproof import protocol\n" + textwrap.dedent(body))
    code = main(["check", str(path), *flags])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def test_a_negative_literal_trip_count_is_an_input_error(tmp_path, capsys):
    code, text = _run(tmp_path, capsys, """
        @protocol
        def countdown(k):
            bar = k.Barrier(num_arrivals=1)
            with k.loop(-1):
                k.barrier_arrive(bar)
                k.barrier_wait(bar)
        """)
    assert code == 3
    assert "user.py:6" in text and "k.loop(-1): a negative trip count" in text
    assert "help: a trip count is a number of iterations, 0 or more" in text


def test_a_misspelt_param_names_the_real_ones(tmp_path, capsys):
    code, text = _run(tmp_path, capsys, """
        @protocol
        def ring(k, stages=2, steps=4):
            bar = k.Barrier(num_arrivals=1)
            with k.loop(steps):
                k.barrier_arrive(bar)
                k.barrier_wait(bar)
        """, "--param", "stagez=3")
    assert code == 3
    assert "no protocol has parameter(s) stagez" in text
    assert "did you mean --param stages=...?" in text
    assert "the protocols' parameters: stages, steps" in text
