"""One in-flight counter per TMA copy destination (model/compile.py `_slot`): one `full` barrier
serving two buffers is race-free when the copy in flight writes the other buffer, and a race
when it writes the buffer being read. Every engine states the same: the Python explorer, the
compiled core (same graph) and the independent reference (its own search and the replay of
the counterexample); TLC is compared on examples/regions.py's split stage, whose two copies of
one stage are alike but for their halves (tests/test_tla.py). Under 1 s."""

import pytest

from barrierproof import protocol
from barrierproof.checker.check import Options, ReplayError, _agree_with_reference, check_kernel
from barrierproof.checker.engines import compiled
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.model import reference
from barrierproof.model.semantics import compile_systems


def _one_full(k, steps, into):
    """The producer issues copy i into tiles[into(i)], waits for it to land and for the
    consumer's `seen` (so the consumer never falls a phase behind), then issues the next copy
    while the consumer still reads tiles[i % 2]."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    seen = k.Barrier(num_arrivals=1)
    empty = k.Barrier(num_arrivals=1, num_barriers=2)
    tiles = k.SMEM(slots=2)
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            with k.when(i >= 2):
                k.barrier_wait(empty.at[i % 2])
            k.copy_gmem_to_smem(full, bytes=4096, dst=tiles.at[into(i)])
            k.barrier_wait(full)
            k.barrier_wait(seen)
        with k.loop(2) as j:
            k.barrier_wait(empty.at[(steps - 2 + j) % 2])
    with k.otherwise():
        with k.loop(steps) as i:
            k.barrier_wait(full)
            k.barrier_arrive(seen)
            k.read(tiles.at[i % 2])
            k.barrier_arrive(empty.at[i % 2])


@protocol(expect="verified")
def one_full_two_buffers(k, steps=4):
    _one_full(k, steps, lambda i: i % 2)


@protocol(expect="violation:BP200")
def one_full_one_buffer(k, steps=4):
    """Every copy writes tiles[0]: copy 1 lands there while the consumer reads step 0's tile."""
    _one_full(k, steps, lambda i: 0)


GOOD, BAD = one_full_two_buffers.build(), one_full_one_buffer.build()


def test_the_copy_in_flight_writes_only_its_own_buffer():
    assert check_kernel(GOOD).label == "verified"
    bad = check_kernel(BAD)
    assert bad.label == "violation:BP200"
    assert "a TMA copy writes tiles[0]" in bad.diagnostics[0].message
    # the landing steps name their destinations
    assert any(s.text == "lands on full (4096B) into tiles[0]" for s in bad.trace.steps)
    (system,) = compile_systems(GOOD)
    assert sorted(s.dest for s in system.slots) == ["tiles[0]", "tiles[1]"]


def test_without_memory_effects_alike_copies_share_one_counter():
    """With races ignored nothing is compiled to tell the destinations apart: one counter,
    and the landing step names no destination."""
    (system,) = compile_systems(GOOD, races=False)
    assert [s.dest for s in system.slots] == [""]
    assert check_kernel(GOOD, options=Options(ignore=frozenset({"BP200", "BP201"}))).verdict \
        == "verified"


def test_the_reference_searches_each_landing_order():
    assert reference.explore(GOOD).status == "verified"
    assert reference.explore(BAD).finding.code == "BP200"


@pytest.mark.skipif(not compiled.available(), reason="the compiled core is not built")
def test_the_compiled_core_searches_the_same_graph():
    for kernel in (GOOD, BAD):
        (system,) = compile_systems(kernel)
        limits = Limits(max_states=50_000, timeout=None)
        runs = [explore(system, limits, reduction=False, order="bfs", core=core)
                for core in ("python", "compiled")]
        assert compiled.NOTE in runs[1].notes
        python, core = [(r.status, r.states, r.transitions, r.actions) for r in runs]
        assert python == core


def test_a_counterexample_the_reference_rejects_says_so_plainly():
    """A trace whose claimed race its steps do not reach (cut before the racing landing) is
    refused (fail closed), and the error says the reference found no violation."""
    trace = check_kernel(BAD).trace
    cut = trace.steps[:-1]
    trace.steps, trace.actions = cut, trace.actions[:len(cut)]
    with pytest.raises(ReplayError, match=r"\(BP200\) replays on the independent reference to "
                       r"no violation"):
        _agree_with_reference(BAD, trace, frozenset(), "explorer")
