"""Races (BP200 smem-race, BP201 tmem-race): memory effects in the IR, the race rule of
model/memory.py inside the exploration, and both accesses in every report format."""

import json
import os

import pytest

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.report.html import html_report
from barrierproof.checker.report.sarif import sarif_log
from barrierproof.checker.report.text import text_report
from barrierproof.loader import import_file, targets_in_module
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System

from conftest import EXAMPLES

RACES = os.path.join(EXAMPLES, "races.py")
TARGETS = {t.name: t for t in targets_in_module(RACES, import_file(RACES))}
RACY = sorted(n for n, t in TARGETS.items() if t.expect.startswith("violation:BP20"))
FIXED = sorted(n for n, t in TARGETS.items() if t.expect == "verified")


def _check(name, **options):
    target = TARGETS[name]
    return check_kernel(target.build(), options=Options(**options), source=target.ref)


def _line(location: str) -> int:
    return int(location.rsplit(":", 1)[1])


def test_every_pattern_has_a_racy_and_a_fixed_version():
    assert len(RACY) >= 10 and len(FIXED) >= 9
    codes = {TARGETS[n].expect.split(":")[1] for n in RACY}
    assert codes == {"BP200", "BP201"}


@pytest.mark.parametrize("name", RACY)
def test_racy_version_names_both_accesses_and_replays(name):
    v = _check(name)
    assert v.matches(TARGETS[name].expect), (v.label, v.diagnostics)
    diag = v.diagnostics[0]
    assert diag.location.startswith("examples/races.py:") or "races.py:" in diag.location
    assert len(diag.related) == 1 and "races.py:" in diag.related[0]["location"]
    # both accesses are in the message, each with its line
    assert str(_line(diag.location)) in diag.message
    assert str(_line(diag.related[0]["location"])) in diag.message
    # the schedule replays on the interpreter to the same race
    system = System(TARGETS[name].build(), v.trace.params, v.trace.grid_position)
    run = replay(system, v.trace.actions)
    assert run.violation is not None and run.violation.code == diag.code
    assert run.violation.related[0][1].line == _line(diag.related[0]["location"])
    # and ignoring races, the barrier protocol alone is what it was before races existed
    alone = _check(name, ignore=frozenset({"BP200", "BP201"}))
    assert not {"BP200", "BP201"} & set(alone.codes)


@pytest.mark.parametrize("name", RACY)
def test_the_racing_schedule_is_shortest(name):
    """The race state is reached by no shorter schedule: every state at a smaller depth of the
    unreduced search is race-free (the BFS checks each state as it is reached)."""
    full = _check(name, reduction=False)
    reduced = _check(name)
    assert len(full.trace.steps) == len(reduced.trace.steps)
    system = System(TARGETS[name].build(), full.trace.params, full.trace.grid_position)
    states = {system.initial_state()}
    for _ in range(len(full.trace.steps) - 1):
        for s in states:
            assert system.memory.violation(system, s) is None
        states = {n for s in states for _, n, v in system.successors(s) if v is None}


@pytest.mark.parametrize("name", FIXED)
def test_fixed_version_is_race_free_in_both_searches(name):
    for reduction in (True, False):
        assert _check(name, reduction=reduction).verdict == "verified"


def test_both_accesses_in_every_format():
    v = _check("tcgen05_accumulator_reuse")
    first, second = v.diagnostics[0].location, v.diagnostics[0].related[0]["location"]
    assert v.codes == ["BP201"] and first != second
    data = json.loads(json.dumps(v.to_json()))
    assert data["diagnostics"][0]["related"][0]["location"] == second
    assert data["trace"]["violation"]["related"][0]["location"] == second
    text = text_report([v])
    assert first in text and f"and: {second}" in text
    result = sarif_log([v])["runs"][0]["results"][0]
    assert result["ruleId"] == "BP201"
    related = result["relatedLocations"][0]["physicalLocation"]
    assert related["region"]["startLine"] == _line(second)
    assert related["artifactLocation"]["uri"].endswith("races.py")
    html = html_report([v])
    assert first.rsplit("/", 1)[-1] in html and second in html
    # the lanes of the two racing agents say what each is doing
    assert "<strong>AT</strong> reads acc: read(acc)" in html
    assert "<strong>AT</strong> writes acc: tcgen05_mma()" in html
    assert 'data-lane="tcgen05(wg0)"' in html


def test_cache_round_trip_keeps_related_locations():
    from barrierproof.cache import verdict_from_json
    v = _check("ring_release_before_read")
    again = verdict_from_json(json.loads(json.dumps(v.to_json())))
    assert again.diagnostics[0].related == v.diagnostics[0].related


def test_races_add_no_state_for_loads_copies_and_mmas():
    """Thread loads/stores are not steps and copies keep their in-flight counters: with races
    on, the distinct-state count is the one of the barrier protocol alone. Compared without
    reductions: a kernel whose races are checked gets neither block symmetry nor partial-order
    reduction (a race is not invariant under them), which changes the count by itself."""
    for name in ("ring_slot_reuse", "multicast_ring_cluster_release", "tcgen05_pipeline",
                 "mailbox_ack_after_copy", "epilogue_store_waited", "ping_pong_attention",
                 "wgmma_release_previous", "every_lane_arrives", "tmem_stats_waited"):
        on, off = _check(name, reduction=False), _check(name, races=False, reduction=False)
        assert on.verdict == off.verdict == "verified"
        assert on.states == off.states, name
        # with reductions, races keep thread symmetry: never more states than the full search
        assert _check(name).states <= on.states, name


def test_ignoring_both_race_codes_compiles_no_memory():
    v = _check("ring_release_before_read", ignore=frozenset({"BP200", "BP201"}))
    off = _check("ring_release_before_read", races=False)
    assert v.verdict == off.verdict == "verified" and v.states == off.states


def _staging(k, buffers, keep):
    k.threads(1)
    out = k.SMEM(slots=buffers)
    with k.loop(4) as i:
        k.write(out.at[i % buffers])
        k.copy_smem_to_gmem(out.at[i % buffers])
        k.wait_smem_to_gmem(keep)
    k.wait_smem_to_gmem(0)          # the last stores, before the exit (BP105 otherwise)


def test_wait_smem_to_gmem_leaves_the_newest_stores_in_flight():
    @protocol
    def double_buffered(k):
        _staging(k, 2, 1)

    @protocol
    def single_buffered(k):
        _staging(k, 1, 1)

    assert check_kernel(double_buffered.build()).verdict == "verified"
    v = check_kernel(single_buffered.build())
    assert v.codes == ["BP200"] and "TMA store of thread0 reads out" in v.diagnostics[0].message


def test_multicast_copy_writes_every_peer_block():
    @protocol
    def peer_reads_early(k):
        k.cluster(x=2)
        k.threads(1)
        full = k.Barrier()
        tile = k.SMEM()
        with k.when(k.block("x") == 0):
            k.copy_gmem_to_smem(full, bytes=2048, dst=tile, collective_axes="x")
            k.barrier_wait(full)
        with k.otherwise():
            k.read(tile)                       # block 1 never waits for the landing
            k.copy_gmem_to_smem(full, bytes=2048, dst=tile, collective_axes="x")
            k.barrier_wait(full)

    v = check_kernel(peer_reads_early.build())
    assert v.codes == ["BP200"], v.diagnostics
    assert "tile@1" in v.diagnostics[0].message


def test_bad_memory_references_are_input_errors_with_a_location():
    @protocol
    def out_of_range(k):
        buf = k.SMEM(slots=2)
        k.read(buf.at[2])

    with pytest.raises(ModelError) as err:
        out_of_range.build()
    assert "slot 2 is out of range" in str(err.value) and "test_races.py" in str(err.value)

    @protocol
    def symbolic_out_of_range(k, n=2):
        buf = k.SMEM(slots=n)
        k.read(buf.at[n])

    v = check_kernel(symbolic_out_of_range.build())
    assert v.verdict == "error" and "out of range" in v.diagnostics[0].message
    assert "test_races.py" in v.diagnostics[0].location

    @protocol
    def not_a_buffer(k):
        bar = k.Barrier()
        k.read(bar)

    with pytest.raises(ModelError, match="is not a buffer"):
        not_a_buffer.build()


def test_tla_states_the_races_unless_memory_is_left_out():
    from barrierproof.checker.engines import tla
    kernel = TARGETS["ring_release_before_read"].build()
    module = tla.emit_module(kernel)
    assert '<<"BP200", <<"pc", 1,' in module.tla and "INVARIANT BP200_NoSmemRace" in module.cfg
    barrier_only = tla.emit_system(System(kernel, races=False))
    assert "Not modelled here: the kernel's memory effects" in barrier_only.tla
    assert "KernelRaces == <<>>" in barrier_only.tla and "BP200" not in barrier_only.cfg


def test_tlc_decides_races(monkeypatch):
    """TLC's spec carries the races, so its `verified` on a kernel with memory effects stays
    `verified` (the search itself is replaced by the explorer here, so the test needs no Java;
    tests/test_tlc_races.py runs TLC)."""
    from barrierproof.checker import check
    from barrierproof.checker.engines import tlc
    monkeypatch.setattr(tlc, "tlc_search",
                        lambda workers, *args, **kw: check.explorer_search(Options()))
    v = tlc.run_tlc(TARGETS["ring_slot_reuse"].build())
    assert v.verdict == "verified" and "not in the TLA+ model" not in v.coverage
    v = tlc.run_tlc(TARGETS["ring_release_before_read"].build())
    assert v.label == "violation:BP200"


def test_the_races_page_shows_the_report_as_printed():
    from barrierproof.checker.report.text import describe
    v = _check("ring_release_before_read")
    v.source = "examples/races.py::ring_release_before_read"
    printed = describe(v, show_trace=False).splitlines()[:3]
    with open(os.path.join(os.path.dirname(EXAMPLES), "docs", "races.md")) as f:
        page = f.read()
    for line in printed:
        assert line in page, line


# -- Pallas: memory effects from the jaxpr ----------------------------------------------------

def _pallas_kernel(file, name):
    from barrierproof.model import pallas
    mod = pallas.import_file(os.path.join(EXAMPLES, "pallas", file))
    return mod, pallas.load(getattr(mod, name), name=name)


def test_pallas_race_has_both_lines_of_the_kernel():
    mod, (kernel,) = _pallas_kernel("races.py", "ring_release_then_read")
    kinds = {(op.kind, bool(op.writes), bool(op.reads)) for op in kernel.ops()}
    assert ("copy_gmem_to_smem", True, False) in kinds and ("read", False, True) in kinds
    v = check_kernel(kernel, source="races.py::ring_release_then_read")
    assert v.label == mod.EXPECT["ring_release_then_read"] == "violation:BP200"
    lines = {_line(v.diagnostics[0].location), _line(v.diagnostics[0].related[0]["location"])}
    src = open(os.path.join(EXAMPLES, "pallas", "races.py")).read().splitlines()
    assert any("copy_gmem_to_smem" in src[n - 1] for n in lines)
    assert any("smem[slot]" in src[n - 1] for n in lines)
    (fixed,) = _pallas_kernel("races.py", "ring_read_then_release")[1]
    assert check_kernel(fixed).verdict == "verified"


def test_jax_hopper_matmul_accesses_are_extracted_and_race_free():
    mod, (kernel,) = _pallas_kernel("jax_kernels.py", "hopper_matmul")
    kinds = {op.kind for op in kernel.ops() if op.reads or op.writes}
    assert {"copy_gmem_to_smem", "wgmma", "write", "copy_smem_to_gmem"} <= kinds
    assert {b.name for b in kernel.buffers} >= {"out_smem"}
    assert all(op.loc.file.startswith("jax/experimental/pallas/ops/gpu/")
               for op in kernel.ops() if op.reads or op.writes)
    v = check_kernel(kernel)
    assert v.verdict == "verified"
    # its two compute warpgroups write different out_smem slots and stay one symmetry class:
    # the race check looks at both permutations, the state count (without partial-order
    # reduction, whose sets also keep race partners together) is the barrier protocol's
    from barrierproof.checker.engines.explore import explore
    from barrierproof.model.semantics import compile_systems
    racy, plain = compile_systems(kernel, races=True), compile_systems(kernel, races=False)
    with_races = sum(explore(s, partial_order=False).states for s in racy)
    assert with_races == sum(explore(s, partial_order=False).states for s in plain)
    assert v.states <= with_races


@pytest.mark.parametrize("name", ["ragged_dot", "transposed_ragged_dot"])
def test_jax_delayed_release_pipelines_race_with_the_wgmma(name):
    """The finding the README explains: the refill of step i-1's slot is ordered after step
    i-1's WGMMA by nothing the program states (no wgmma_wait before it)."""
    mod, (kernel,) = _pallas_kernel("jax_kernels.py", name)
    v = check_kernel(kernel)
    assert v.label == mod.EXPECT[name] == "violation:BP200"
    assert "WGMMA" in v.diagnostics[0].message and "TMA copy" in v.diagnostics[0].message
    assert check_kernel(kernel, options=Options(ignore=frozenset({"BP200"}))).verdict == \
        "verified"


# -- prove: the barrier rules for every value, races for the values the explorer reaches ------

def _symbolic_ring(k, steps, release_first):
    k.threads(2, name="wg")
    k.assume(steps >= 1)
    full, empty = k.Barrier(name="full"), k.Barrier(name="empty")
    buf = k.SMEM()
    with k.when(k.thread == 1):
        with k.loop(steps) as i:
            with k.when(i >= 1):
                k.barrier_wait(empty)
            k.copy_gmem_to_smem(full, bytes=1024, dst=buf)
        k.barrier_wait(empty)
    with k.otherwise():
        with k.loop(steps):
            k.barrier_wait(full)
            if release_first:
                k.barrier_arrive(empty)
            k.read(buf)
            if not release_first:
                k.barrier_arrive(empty)


@protocol(symbolic=("steps",))
def symbolic_ring(k, steps=3):
    _symbolic_ring(k, steps, release_first=False)


@protocol(symbolic=("steps",))
def symbolic_ring_early_release(k, steps=3):
    _symbolic_ring(k, steps, release_first=True)


def _prove(p, **options):
    from types import SimpleNamespace
    from barrierproof.checker.symbolic.prove import prove_kernel
    return prove_kernel(p.build(), {}, Options(**options), None,
                        SimpleNamespace(symbolic=["steps"]))


def test_prove_proves_race_freedom_of_the_ring_for_every_trip_count():
    v = _prove(symbolic_ring)
    assert v.verdict == "proved", (v.label, v.coverage)
    assert "race-free (BP200/BP201)" in v.coverage
    v = _prove(symbolic_ring, ignore=frozenset({"BP200", "BP201"}))
    assert v.verdict == "proved" and "race-free" not in v.coverage


def test_prove_finds_the_smallest_racing_values():
    v = _prove(symbolic_ring_early_release)
    assert v.label == "violation:BP200" and v.params["steps"] == 2
    assert v.trace is not None


# -- JAX's interpreter, with its race detector, as an oracle ---------------------------------

def test_interpreter_race_detector_agrees_on_the_pallas_ring():
    """JAX's interpret mode (vector clocks, one schedule) sees the same race in the released-
    then-read ring and none in the fixed one."""
    from barrierproof import confirm
    path = os.path.join(EXAMPLES, "pallas", "races.py")
    racy, fixed = confirm.confirm_all([f"{path}::ring_release_then_read",
                                       f"{path}::ring_read_then_release"],
                                      timeout=120, jobs=1, races=True)
    if racy.outcome == "error" and "cannot import jax" in racy.message:
        pytest.skip(racy.message)
    assert racy.outcome == fixed.outcome == "completed", (racy.message, fixed.message)
    assert "found a race" in racy.message
    assert "found no race" in fixed.message
    assert confirm.agrees("violation:BP200", racy.outcome)


@protocol
def two_copies_into_one_slot(k):
    """Two TMA copies write one slot with no wait between them: a race made of operations the
    independent reference models (it checks the barrier states up to the race)."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2)
    tiles = k.SMEM(slots=1)
    with k.when(k.thread == 0):
        k.copy_gmem_to_smem(full.at[0], bytes=4096, dst=tiles.at[0])
        k.copy_gmem_to_smem(full.at[1], bytes=4096, dst=tiles.at[0])
    with k.otherwise():
        k.barrier_wait(full.at[0])
        k.barrier_wait(full.at[1])


def test_a_race_of_operations_the_reference_models_is_reported_not_refused():
    v = check_kernel(two_copies_into_one_slot.build())
    assert v.label == "violation:BP200", (v.label, v.coverage)
    assert v.trace is not None and len(v.trace.actions) == 2


def _own_async(first, second, wait_between):
    """One thread issues two asynchronous accesses of buffer `a`, with or without the wait
    that retires the first one before the second is issued."""
    def retire(k, kind):
        k.wait_gmem_to_smem(0) if kind == "cp_async" else \
            k.wait_smem_to_gmem(0) if kind == "copy_smem_to_gmem" else k.tcgen05_wait_store()

    @protocol
    def own(k):
        k.threads(1)
        a = k.TMEM() if "tcgen05_store" in (first, second) else k.SMEM()
        getattr(k, first)(a)
        if wait_between:
            retire(k, first)
        getattr(k, second)(a)
        for kind in dict.fromkeys((first, second)):     # none left running at the exit
            retire(k, kind)
    return own.build()


@pytest.mark.parametrize("first,second,code", [("cp_async", "cp_async", "BP200"),
                                               ("cp_async", "copy_smem_to_gmem", "BP200"),
                                               ("tcgen05_store", "tcgen05_store", "BP201")])
def test_a_threads_own_asynchronous_accesses_in_flight_together_race(first, second, code):
    """PTX orders no two cp.async without a wait between them, nor a TMA store of a cp.async
    destination, nor two tcgen05.st: one thread's two such accesses of one buffer, both in
    flight, race; the explorer and the independent reference both say so, and the wait that
    retires the first fixes it."""
    from barrierproof.model import reference
    racy, fixed = _own_async(first, second, False), _own_async(first, second, True)
    assert check_kernel(racy).codes == [code]
    assert reference.explore(racy).finding.code == code
    assert check_kernel(fixed).verdict == "verified"
    assert reference.explore(fixed).status == "verified"


def _tmem_load_handed_back(wait_first: bool):
    """Thread 0 reads the accumulator with a tcgen05.ld it leaves running (Pallas's
    `async_load_tmem`) and hands the slot back; thread 1 then overwrites it with a tcgen05.st."""
    @protocol
    def handback(k):
        k.threads(2)
        acc = k.TMEM()
        free = k.Barrier(name="free")
        with k.when(k.thread == 0):
            k.tcgen05_load(acc)
            if wait_first:
                k.tcgen05_wait_load()
            k.barrier_arrive(free)
            if not wait_first:
                k.tcgen05_wait_load()
        with k.otherwise():
            k.barrier_wait(free)
            k.tcgen05_store(acc)
            k.tcgen05_wait_store()
    return handback.build()


def test_a_tensor_memory_load_left_running_reads_until_its_wait():
    """A tcgen05.ld not yet waited for (tcgen05.wait::ld) still reads TMEM: handing the slot
    back before the wait lets the next write overtake it (BP201), in the explorer and the
    reference; the wait before the arrival fixes it."""
    from barrierproof.model import reference
    racy, fixed = _tmem_load_handed_back(False), _tmem_load_handed_back(True)
    assert check_kernel(racy).codes == ["BP201"]
    assert reference.explore(racy).finding.code == "BP201"
    assert check_kernel(fixed).verdict == "verified"
    assert reference.explore(fixed).status == "verified"
