"""The compiled exploration core (checker/engines/_core.c) against the Python explorer's raw
breadth-first search: the same distinct states, transitions, depth, verdict and code, and the
same counterexample (schedule and witness), on every example it accepts and on generated
protocols; what it refuses is named and searched by Python. About 8 s on one core."""

import collections
import os
import shutil
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import compiled
from barrierproof.checker.engines.explore import Limits, explore
from barrierproof.checker.engines.flatten import flatten, refusal
from barrierproof.model.ir import BarrierAlloc, BarrierRef, Const, Kernel, ModelError, Op, Var, When
from barrierproof.model.semantics import System, compile_systems

from test_examples import TARGETS
from test_properties import protocols

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from family import cluster, pipeline  # noqa: E402

CAP = Limits(max_states=50_000, timeout=None)
built = pytest.mark.skipif(not compiled.available(), reason="the compiled core is not built")


def _outcome(r):
    return (r.status, r.states, r.transitions, r.depth, r.reason,
            r.violation.code if r.violation else None, r.actions, r.witness)


def _same(system, ignore=frozenset(), limits=CAP):
    """Both cores on one System; the compiled one must have run (its note)."""
    python = explore(system, limits, reduction=False, ignore=ignore, order="bfs", core="python")
    core = explore(system, limits, reduction=False, ignore=ignore, order="bfs", core="compiled")
    assert compiled.NOTE in core.notes and compiled.NOTE not in python.notes
    assert _outcome(core) == _outcome(python)
    if core.violation is not None:
        assert core.violation.message == python.violation.message
    return core


def test_the_core_is_built_where_a_compiler_is():
    """pip builds the extension wherever a C compiler is (CI has gcc): optional only for a
    user without one."""
    if shutil.which("gcc") or shutil.which("cc"):
        assert compiled.available()


@pytest.fixture(scope="module")
def examples():
    """Every distinct cluster behaviour of every example kernel: (accepted, refusal counts)."""
    accepted, refused = [], collections.Counter()
    for target in TARGETS:
        try:
            systems = compile_systems(target.build())
        except ModelError:          # input errors: covered by test_examples
            continue
        for system in systems:
            why = refusal(system)
            if why is None:
                accepted.append(system)
            else:
                refused[why.split(",")[0] if why.startswith("opcode") else why] += 1
    return accepted, refused


@built
def test_every_accepted_example_searches_the_same_graph(examples):
    systems, refused = examples
    for system in systems:
        _same(system)
    accepted = len(systems)
    print(f"\ncompiled core: {accepted} example systems accepted; refused: "
          + "; ".join(f"{n} x {why}" for why, n in refused.most_common()))
    assert accepted >= 205
    assert all(why.startswith("memory effects") for why in refused), refused


@built
@pytest.mark.parametrize("ignore", [frozenset({"BP101"}), frozenset({"BP121", "BP146"}),
                                    frozenset({"BP100", "BP103", "BP104"})],
                         ids=["BP101", "BP121-146", "BP100-104"])
def test_ignored_codes_are_searched_past_alike(ignore, examples):
    """An ignored step violation goes on to be searched; BP101 ignored drops the bare parity
    table: both cores alike (every third accepted example)."""
    systems = examples[0][::3]
    for system in systems:
        _same(system, ignore)
    assert len(systems) > 30


@built
@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(protocols(), st.sampled_from([frozenset(), frozenset({"BP121"}), frozenset({"BP101"})]))
def test_generated_protocols_search_the_same_graph(kernel, ignore):
    system = System(kernel)
    assert refusal(system) is None, refusal(system)
    _same(system, ignore)


@built
@pytest.mark.parametrize("proto, params", [(pipeline, dict(stages=2, consumers=2, steps=4)),
                                           (pipeline, dict(stages=3, consumers=2, steps=5)),
                                           (cluster, dict(blocks=2, consumers=1, steps=4)),
                                           (cluster, dict(blocks=3, consumers=1, steps=2))],
                         ids=["pipeline-2-2-4", "pipeline-3-2-5", "cluster-2-1-4",
                              "cluster-3-1-2"])
def test_the_bench_families_search_the_same_graph(proto, params):
    assert _same(System(proto.build(), params)).states > 100


@built
def test_limits_stop_both_cores_alike():
    system = System(pipeline.build(), dict(stages=2, consumers=3, steps=4))
    for limits in (Limits(max_states=300, timeout=None), Limits(max_depth=7, timeout=None)):
        assert _same(system, limits=limits).status == "bounded"


def _big_copy(nbytes: int) -> Kernel:
    """A TMA copy of `nbytes` and a wait for it: tx-counts beyond 16-bit words."""
    bar = BarrierAlloc("full", Const(1), (Const(1),), scalar=False)
    ref = BarrierRef(bar, (Const(0),))
    body = (When(Var("t") == 0, (Op("copy_gmem_to_smem", ref, bytes=Const(nbytes)),),
                 (Op("barrier_wait", ref),)),)
    return Kernel("big_copy", body, (bar,), num_threads=Const(2), thread_axis="t")


@built
def test_values_beyond_16_bits_are_searched_in_wider_words():
    system = System(_big_copy(100_000))
    narrow = compiled._core.explore(*flatten(system, frozenset()), -1, -1, -1.0, -1, 2)
    assert narrow == {"status": "wide"}
    assert _same(system).status == "verified"


@built
def test_a_refused_system_runs_on_python_and_says_why(monkeypatch):
    """A step rule a plug-in replaced (extensions.py `wraps`) is no longer the one _core.c
    states: refused, searched by Python, with the reason in a note."""
    from barrierproof.model import instructions as ins
    from barrierproof.model.steps import EFFECTS
    arrive = EFFECTS[ins.ARRIVE]
    monkeypatch.setitem(EFFECTS, ins.ARRIVE, lambda *args: arrive(*args))
    system = System(pipeline.build(), dict(stages=2, consumers=2, steps=3))
    r = explore(system, CAP, reduction=False, order="bfs", core="compiled")
    assert compiled.NOTE not in r.notes
    assert "searched by the Python explorer: the compiled core does not state the step rule " \
        "of arrive is replaced by a plug-in" in " ".join(r.notes), r.notes


def _systems(target):
    try:
        return compile_systems(target.build())
    except ModelError:
        return []


@built
def test_the_verdict_pipeline_replays_the_compiled_counterexample():
    """check_kernel replays the schedule and agrees with the independent reference; the
    verdict names the core in its notes and nothing else differs."""
    bad = next(t for t in TARGETS if t.name == "early_exit_skips_wait")
    python = check_kernel(bad.build(), options=Options(reduction=False, order="bfs",
                                                       core="python"))
    core = check_kernel(bad.build(), options=Options(reduction=False, order="bfs",
                                                     core="compiled"))
    assert compiled.NOTE in core.notes
    assert (core.label, core.codes, core.states, core.trace.actions) == \
        (python.label, python.codes, python.states, python.trace.actions)


def test_asking_for_a_core_that_is_not_built_is_an_error(monkeypatch):
    monkeypatch.setattr(compiled, "_core", None)
    with pytest.raises(RuntimeError, match="not built"):
        compiled.chosen("compiled")
    assert compiled.chosen("auto") == "auto"
    monkeypatch.setenv("BARRIERPROOF_CORE", "python")
    assert compiled.chosen(None) == "python"


def test_the_readme_quotes_the_last_bench_run():
    """README's performance figures are bench/COMPILED.md's (python bench/compiled_core.py
    --tlc-big): the 3,6,8 member's compiled states per CPU second, its CPU ratio to Python and
    TLC's time over the compiled core's."""
    root = os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(root, "bench", "COMPILED.md")) as f:
        rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                for line in f if line.startswith("| pipeline_tma_async")}
    with open(os.path.join(root, "README.md")) as f:
        readme = " ".join(f.read().split())
    big = rows["pipeline_tma_async(stages=3, consumers=6, steps=8)"]
    per_cpu = int(big[4].split("(")[1].rstrip(")").replace(",", ""))
    assert f"({big[0]} states) at {per_cpu / 1e6:.2f}M states per CPU second, " \
           f"{big[5].split('(')[1].rstrip(')')} Python, TLC {big[7]} slower" in readme


@built
def test_a_reduced_search_confirms_its_shortest_counterexample_alike(examples):
    """With partial-order reduction a violation is confirmed shortest by a search without it;
    where the symmetry relates nothing that search is raw and runs on the compiled core: the
    outcome is the Python one's."""
    compared = 0
    for system in examples[0]:
        auto = explore(system, CAP)
        if auto.status != "violation" or auto.partial_order_off is not None:
            continue
        python = explore(system, CAP, core="python")
        assert _outcome(auto) == _outcome(python)
        compared += compiled.NOTE in auto.notes
    assert compared >= 5


# Generated protocols over the families the core states beside the mbarrier core: tcgen05
# commits (a 2-CTA one in a cluster), named barriers and the cluster barrier, explicit inits
# with their fences, parallel semaphore signals, and memory effects (the race rule, BP200 /
# BP201). Thread 0 plays one role, the others another.
HW_MENU = ["arrive", "wait", "copy", "mma", "commit", "commit_pair", "mma_bare", "sync",
           "bar_arrive", "bar_sync_half", "bar_arrive_one", "cluster_arrive",
           "cluster_arrive_relaxed", "cluster_wait", "fence_init", "fence_async",
           "signal_parallel", "sem_wait", "read", "write", "load_tile", "mma_tiles", "read_acc",
           "store", "wait_store"]


@st.composite
def hw_protocols(draw):
    blocks = draw(st.integers(1, 2))
    threads = draw(st.integers(2, 3))
    arrivals = draw(st.integers(1, 2))
    explicit = draw(st.booleans())
    inits = draw(st.booleans())
    roles = [[draw(st.sampled_from(HW_MENU)) for _ in range(draw(st.integers(1, 5)))]
             for _ in range(2)]
    parity = draw(st.integers(0, 1))

    def body(k):
        if blocks > 1:
            k.cluster(x=2)
        k.threads(threads, name="wg")
        bar = k.Barrier(num_arrivals=arrivals, orders_tensor_core=True, explicit_init=explicit)
        s0, s1 = k.Semaphore(), k.Semaphore()
        half, one = k.named_barrier(1, 256), k.named_barrier(1, 128)   # one: BP142 beside half
        tiles, acc = k.SMEM(slots=2), k.TMEM()

        def play(role, first):
            if first and explicit and inits:
                k.mbarrier_init(bar)
            for what in role:
                {"arrive": lambda: k.arrive(bar),
                 "wait": lambda: k.wait_parity(bar, parity),
                 "copy": lambda: k.copy_gmem_to_smem(bar, bytes=64),
                 "mma": lambda: k.tcgen05_mma(bar),
                 "commit": lambda: k.tcgen05_commit_arrive(bar),
                 "commit_pair": lambda: k.tcgen05_commit_arrive(
                     bar, collective_axis="x" if blocks > 1 else None),
                 "mma_bare": lambda: k.tcgen05_mma(),
                 "sync": lambda: k.syncthreads(),
                 "bar_arrive": lambda: half.arrive(),
                 "bar_sync_half": lambda: half.sync(),
                 "bar_arrive_one": lambda: one.arrive(),
                 "cluster_arrive": lambda: k.cluster_arrive(),
                 "cluster_arrive_relaxed": lambda: k.cluster_arrive(relaxed=True),
                 "cluster_wait": lambda: k.cluster_wait(),
                 "fence_init": lambda: k.fence_mbarrier_init(),
                 "fence_async": lambda: k.fence_proxy_async(),
                 "signal_parallel": lambda: k.semaphore_signal_parallel(s0, (s1, 2)),
                 "sem_wait": lambda: k.semaphore_wait(s0),
                 "read": lambda: k.read(tiles.at[0]),
                 "write": lambda: k.write(tiles.at[1]),
                 "load_tile": lambda: k.copy_gmem_to_smem(bar, bytes=64, dst=tiles.at[0]),
                 "mma_tiles": lambda: k.tcgen05_mma(bar, a=tiles.at[0], b=tiles.at[1], acc=acc),
                 "read_acc": lambda: k.read(acc),
                 "store": lambda: k.copy_smem_to_gmem(tiles.at[1]),
                 "wait_store": lambda: k.wait_smem_to_gmem(0)}[what]()

        with k.when(k.thread == 0):
            play(roles[0], True)
        with k.otherwise():
            play(roles[1], False)

    body.__name__ = "generated"
    return protocol(body).build()


@built
@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hw_protocols(), st.sampled_from([frozenset(), frozenset({"BP141", "BP142"}),
                                        frozenset({"BP147", "BP200"}),
                                        frozenset({"BP100", "BP144"})]))
def test_generated_protocols_beyond_the_mbarrier_core_search_the_same_graph(kernel, ignore):
    try:
        systems = compile_systems(kernel)
    except ModelError:          # an input error (a thread mixing wait kinds, two inits)
        assume(False)
    for system in systems:
        assert refusal(system) is None, refusal(system)
        _same(system, ignore)


def _compiled_md() -> str:
    with open(os.path.join(os.path.dirname(__file__), "..", "bench", "COMPILED.md")) as f:
        return " ".join(f.read().split())


def test_the_bench_names_the_example_systems_the_core_accepts(examples):
    """bench/COMPILED.md's coverage sentence is what the examples give today."""
    accepted, refused = examples
    total = len(accepted) + sum(refused.values())
    assert f"The compiled core accepts {len(accepted)} of the {total} example systems" \
        in _compiled_md()


@built
def test_the_bench_jax_row_reproduces_its_states():
    """A JAX kernel at K = 4096 (bench/compiled_core.py --jax): the compiled search finds the
    verdict and distinct states its row records, exactly. About 3 s (tracing the kernel)."""
    pytest.importorskip("jax")
    from barrierproof.model import pallas
    from jax_sizes import with_contraction
    import compiled_core
    row = _compiled_md().split("| hopper_matmul |")[1]
    verdict, states = [c.strip() for c in row.split("|")[1:3]]
    kernels = os.path.join(os.path.dirname(__file__), "..", "examples", "pallas",
                           "jax_kernels.py")
    module = pallas.import_file(kernels)
    # with_contraction sets K in the module every test shares: put it back afterwards
    saved = {name: getattr(module, name) for name in ("K", "_qkv", "blackwell_matmul_collective")}
    try:
        with_contraction(module, compiled_core.JAX_K, square=True)
        found = [explore(system, Limits(max_states=None, timeout=None), reduction=False,
                         order="bfs", core="compiled")
                 for system in compile_systems(pallas.load(module.hopper_matmul,
                                                           name="hopper_matmul")[0])]
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
    assert all(compiled.NOTE in r.notes for r in found)
    assert (verdict, states) == ("verified", f"{sum(r.states for r in found):,}")
    assert all(r.status == "verified" for r in found)
