"""The independent reference (model/reference/) against the tool, on every example and Pallas
kernel: static findings are the same codes; every counterexample replays, by agent names and step
texts, to the same code with the same barrier states at every step; every `verified` model is
verified by the reference's own search (without reductions), or, when that search is too small
for the model, survives the reference's random schedules."""

import ast
import glob
import os
import sys

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.loader import import_file, targets_in_module
from barrierproof.model import pallas, reference
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import ModelError, without_memory

from conftest import EXAMPLES

FILES = sorted(f for f in glob.glob(os.path.join(EXAMPLES, "**", "*.py"), recursive=True)
               if os.sep + "pallas" + os.sep not in f and not os.path.basename(f).startswith("_"))
ALL_DSL = [t for f in FILES for t in targets_in_module(f, import_file(f)) if t.kind == "dsl"]
DSL = [t for t in ALL_DSL if reference.covers(t.build())]
# Outside the reference: an unaligned barrier.sync by part of a warp, lockstep clusters taking
# from one semaphore, init visibility across a warpgroup's fork; memory regions indexed by the
# lane or in a branch on it (a warp is one thread of the reference).
OUTSIDE = {"bar_sync(aligned=False) in a lane branch",
           "semaphore_wait(decrement=True) with lockstep copies",
           "explicit_init barriers with warp regions",
           "memory regions indexed by the lane", "memory effects in a branch on the lane"}
PALLAS = os.path.join(EXAMPLES, "pallas")
PALLAS_FILES = sorted(os.path.basename(f) for f in glob.glob(os.path.join(PALLAS, "*.py"))
                      if not os.path.basename(f).startswith("_"))
PALLAS_TARGETS = [(f, n) for f in PALLAS_FILES
                  for n in pallas.import_file(os.path.join(PALLAS, f)).EXPECT]

SEARCH_STATES = 20_000      # the reference's own search; beyond it, random schedules
RANDOM_RUNS = 30
INPUT_ERRORS = {"BP120", "BP121"}


def cross_check(kernel, source):
    """Check `kernel` with the tool and with the reference; return which comparison applied."""
    verdict = check_kernel(kernel, source=source)
    static = {f.code for f in reference.static_findings(kernel, verdict.params)} - {"BP190"}
    if static:
        assert verdict.coverage == "found statically, before exploration" or \
            verdict.verdict == "error", verdict.label
        want = static & INPUT_ERRORS if static & INPUT_ERRORS else static
        assert set(verdict.codes) == want, (verdict.codes, static)
        return "static"
    assert verdict.verdict not in ("error",), verdict.diagnostics
    if verdict.verdict == "violation":
        trace = verdict.trace
        result = reference.replay_trace(kernel, trace)
        assert result.code == verdict.codes[0], (result.outcome, result.finding, verdict.label)
        assert result.outcome == trace.outcome
        assert not result.barrier_mismatches, result.barrier_mismatches[:3]
        return "trace"
    assert verdict.verdict in ("verified", "unknown"), verdict.label
    behaviours = {}
    for position in reference.positions(kernel, verdict.params):
        cluster = reference.Cluster(kernel, verdict.params, position)
        key = tuple(tuple(a.text for a in t.actions) for t in cluster.threads.values())
        behaviours.setdefault(key, position)
    how = "search"
    for position in behaviours.values():
        search = reference.explore(kernel, verdict.params, position, SEARCH_STATES)
        assert search.status != "violation", (position, search.finding)
        if search.status == "bounded":
            how = "random"
            for seed in range(RANDOM_RUNS):
                run = reference.random_run(kernel, verdict.params, position, seed)
                assert run.outcome == "terminated", (position, seed, run.outcome, run.finding)
    return how


@pytest.mark.parametrize("target", DSL, ids=lambda t: t.ref.split("examples/")[-1])
def test_dsl_example_agrees_with_the_reference(target):
    cross_check(target.build(), target.ref)


@pytest.mark.parametrize("file,name", PALLAS_TARGETS, ids=[f"{f[:-3]}.{n}"
                                                           for f, n in PALLAS_TARGETS])
def test_pallas_kernel_agrees_with_the_reference(file, name):
    module = pallas.import_file(os.path.join(PALLAS, file))
    try:
        kernels = pallas.load(getattr(module, name), name=name)
    except ModelError as err:
        # Rejected while JAX traces it (e.g. tcgen05 without orders_tensor_core): no IR exists
        # for either side to read; the declared code is the one the tracer's error carries.
        assert err.code and module.EXPECT[name].endswith(err.code), (str(err), module.EXPECT)
        return
    for kernel in kernels:
        if not reference.covers(kernel):
            # the few shapes outside the reference (it says which): their barrier rules at most
            assert set(reference.uncovered(kernel)) <= OUTSIDE, reference.uncovered(kernel)
            kernel = without_memory(kernel)
            if not reference.covers(kernel):
                continue
        cross_check(kernel, f"{file}::{name}")


def test_only_the_stated_shapes_are_outside_the_reference():
    outside = {t.ref: reference.uncovered(t.build()) for t in ALL_DSL}
    outside = {ref: kinds for ref, kinds in outside.items() if kinds}
    assert all(set(kinds) <= OUTSIDE for kinds in outside.values()), outside
    assert len(DSL) >= 60 and len(outside) <= len(ALL_DSL) - len(DSL)


def test_the_reference_disagrees_with_a_wrong_trace():
    """A trace whose steps the rules do not allow, or whose claimed state is wrong, is refused."""
    @protocol
    def handoff(k):
        k.threads(2, name="wg")
        bar = k.Barrier()
        with k.when(k.thread == 0):
            k.barrier_arrive(bar)
        with k.otherwise():
            k.barrier_wait(bar)

    kernel = handoff.build()
    with pytest.raises(reference.ReferenceError, match="blocked"):
        reference.replay(kernel, [("wg1", "barrier_wait(bar)")])
    with pytest.raises(reference.ReferenceError, match="not at"):
        reference.replay(kernel, [("wg0", "barrier_wait(bar)")])
    wrong = [{"bar": {"phase": 0, "arrived": 1, "expected": 1, "tx": 0}}]
    result = reference.replay(kernel, [("wg0", "barrier_arrive(bar)")], barriers=wrong)
    assert result.barrier_mismatches and result.outcome == "running"
    done = reference.replay(kernel, [("wg0", "barrier_arrive(bar)"), ("wg1", "barrier_wait(bar)")])
    assert done.outcome == "terminated" and done.code is None


def test_the_reference_search_finds_what_the_rules_forbid():
    """The reference's own search is not a rubber stamp: it finds an overrun and a deadlock."""
    @protocol
    def overrun(k):
        k.threads(2)
        bar = k.Barrier()
        with k.when(k.thread == 0):
            k.barrier_arrive(bar)
            k.barrier_arrive(bar)
        with k.otherwise():
            k.barrier_wait(bar)
            k.barrier_wait(bar)

    @protocol
    def starved(k):
        k.threads(2)
        bar = k.Barrier(num_arrivals=2)
        with k.when(k.thread == 0):
            k.barrier_arrive(bar)
        with k.otherwise():
            k.barrier_wait(bar)

    assert reference.explore(overrun.build()).finding.code == "BP101"
    assert reference.explore(starved.build()).finding.code == "BP100"
    assert check_kernel(overrun.build(), options=Options()).codes == ["BP101"]


def test_the_reference_finds_the_hardware_barrier_rules_on_its_own():
    """Its own search, not a replay: each hardware barrier, semaphore and init rule is found by
    the reference's statement of it, on the smallest protocol that breaks it."""
    @protocol
    def two_sites(k):                       # BP141: one aligned phase, two instructions
        k.threads(2)
        with k.when(k.thread == 0):
            k.named_barrier(1, 256).sync()
        with k.otherwise():
            k.named_barrier(1, 256).sync()

    @protocol
    def two_counts(k):                      # BP142
        k.threads(2)
        with k.when(k.thread == 0):
            k.named_barrier(1, 256).arrive()
        with k.otherwise():
            k.named_barrier(1, 128).sync()

    @protocol
    def early_exit(k):                      # BP144: syncthreads waits for an exited thread
        k.threads(2)
        with k.when(k.thread == 0):
            k.syncthreads()

    @protocol
    def whole_block_count(k):               # BP144: a count of the whole block counts everyone
        k.threads(3)
        with k.when(k.thread == 1):
            k.named_barrier(1, 384).sync()

    @protocol
    def one_warp_only(k):                   # BP100: the cluster barrier counts every thread
        k.cluster(x=2)
        k.threads(1)
        k.warps(4)
        with k.warp_region():
            with k.when(k.warp == 0):
                k.cluster_sync()

    @protocol
    def too_few_signals(k):                 # BP100: a semaphore waits for a second signal
        k.threads(2)
        sem = k.Semaphore()
        with k.when(k.thread == 0):
            k.semaphore_signal(sem)
        with k.otherwise():
            k.semaphore_wait(sem, 2)

    @protocol
    def init_unsynced(k):                   # BP147: no sync publishes the init
        k.threads(2)
        bar = k.Barrier(num_arrivals=1, explicit_init=True)
        with k.when(k.thread == 0):
            k.mbarrier_init(bar)
            k.fence_mbarrier_init()
            k.barrier_arrive(bar)
        with k.otherwise():
            k.barrier_wait(bar)

    @protocol
    def wait_first(k):                      # BP145, read off the program
        k.cluster(x=2)
        k.cluster_wait()

    cases = {two_sites: "BP141", two_counts: "BP142", early_exit: "BP144",
             whole_block_count: "BP144", one_warp_only: "BP100", too_few_signals: "BP100", init_unsynced: "BP147"}
    for case, code in cases.items():
        search = reference.explore(case.build())
        assert search.status == "violation" and search.finding.code == code, (case, search)
    assert {f.code for f in reference.static_findings(wait_first.build())} == {"BP145"}

    @protocol
    def init_twice(k):                      # re-initialisation is not stated: refused
        k.threads(2)
        bar = k.Barrier(num_arrivals=1, explicit_init=True)
        k.mbarrier_init(bar)

    with pytest.raises(ModelError, match="initialised more than once"):
        reference.Cluster(init_twice.build())


def test_lockstep_copies_are_clusters_of_their_own_in_both():
    """A decrementing wait on a semaphore two lockstep clusters share: both the tool and the
    reference build the copies as clusters of their own (one counter), and a remote arrive
    reaches the peer in its own copy. Taking one signal each terminates; taking two starves
    the last two threads (the counter holds four signals for eight takes)."""
    def peer_then_semaphore(needed):
        @protocol
        def lockstep(k):
            k.cluster(x=2)
            k.threads(1, name="wg")
            sem = k.Semaphore(copies=2)
            bar = k.Barrier(num_arrivals=1)
            with k.when(k.block("x") == 1):
                k.barrier_arrive(bar.on(0))
            with k.otherwise():
                k.barrier_wait(bar)
            k.semaphore_signal(sem)
            k.semaphore_wait(sem, needed, decrement=True)
        return lockstep.build()

    for needed, want in ((1, "verified"), (2, "violation")):
        kernel = peer_then_semaphore(needed)
        assert reference.covers(kernel), reference.uncovered(kernel)
        assert len(reference.Cluster(kernel).threads) == 4
        search = reference.explore(kernel)
        assert search.status == want, search
        verdict = check_kernel(kernel, options=Options())
        assert verdict.verdict == want, verdict.label
        assert cross_check(kernel, "lockstep") in ("search", "trace")
    assert verdict.codes == ["BP100"] and search.finding.code == "BP100"


def test_the_reference_finds_the_race_rules_on_its_own():
    """Its own search finds each race of SEMANTICS.md (BP200 shared, BP201 tensor memory) on
    the smallest protocol that has it, and none in the fixed one: exact region overlap, a TMA
    copy live until it lands, an MMA until it completes, a TMA store and a WGMMA until the wait
    that covers them (wgmma_wait(1) keeps the latest in flight)."""
    def read_after_release(fixed):
        @protocol
        def ring(k, steps=2):
            k.threads(2)
            tile = k.SMEM()
            full, empty = k.Barrier(), k.Barrier()
            with k.when(k.thread == 0):
                with k.loop(steps) as i:
                    with k.when(i >= 1):
                        k.barrier_wait(empty)
                    k.copy_gmem_to_smem(full, bytes=64, dst=tile)
                k.barrier_wait(empty)
            with k.otherwise():
                with k.loop(steps):
                    k.barrier_wait(full)
                    if fixed:
                        k.read(tile)
                    k.barrier_arrive(empty)
                    if not fixed:
                        k.read(tile)
        return ring

    def mma_accumulator(fixed):
        @protocol
        def mma(k):
            k.threads(1)
            acc = k.TMEM()
            done = k.Barrier(orders_tensor_core=True)
            k.tcgen05_mma(barrier=done, acc=acc)
            if fixed:
                k.barrier_wait(done)
                k.read(acc)
            else:
                k.read(acc)
                k.barrier_wait(done)
        return mma

    def halves(size):                       # rows [t*2, t*2 + size): size 3 overlaps
        @protocol
        def rows(k):
            k.threads(2)
            acc = k.SMEM(slots=5)
            k.write(acc.at[k.ds(k.thread * 2, size)])
        return rows

    def store_then_write(wait):
        @protocol
        def epilogue(k):
            k.threads(1)
            out = k.SMEM()
            with k.loop(2):
                k.write(out)
                k.copy_smem_to_gmem(out)
                if wait:
                    k.wait_smem_to_gmem(0)
            k.wait_smem_to_gmem(0)              # none left running at the exit (BP105)
        return epilogue

    def wgmma_keeps_one(release_current):
        @protocol
        def consumer(k):
            k.threads(2)
            a = k.SMEM(slots=2)
            full, empty = k.Barrier(), k.Barrier()
            with k.when(k.thread == 0):             # refills slot 0 once it is released
                k.copy_gmem_to_smem(full, bytes=64, dst=a.at[0])
                k.barrier_wait(empty)
                k.write(a.at[0])
            with k.otherwise():
                k.barrier_wait(full)
                k.wgmma(a=a.at[0])
                k.wgmma(a=a.at[1])
                k.wgmma_wait(1)                     # the WGMMA on slot 1 may still read
                k.barrier_arrive(empty)
                if release_current:
                    k.write(a.at[1])
                k.wgmma_wait(0)
        return consumer

    cases = [(read_after_release, "BP200"), (mma_accumulator, "BP201"),
             (lambda fixed: halves(2 if fixed else 3), "BP200"),
             (store_then_write, "BP200"), (lambda fixed: wgmma_keeps_one(not fixed), "BP200")]
    for make, code in cases:
        racy, fixed = make(False).build(), make(True).build()
        assert reference.covers(racy) and reference.covers(fixed)
        search = reference.explore(racy)
        assert search.status == "violation" and search.finding.code == code, (make, search)
        assert reference.explore(fixed).status == "verified", make
        assert check_kernel(racy).codes == [code] and check_kernel(fixed).verdict == "verified"


def test_memory_shapes_outside_the_reference_are_named():
    """A region indexed by the lane, or an access in a branch on it, is not stated (a warp is
    one thread here): named, not judged."""
    @protocol
    def per_lane(k):
        k.threads(1)
        k.warps(1)
        v = k.SMEM(slots=64)
        with k.warp_region():
            k.write(v.at[k.ds(k.lane, 1)])

    @protocol
    def elected_lane_writes(k):
        k.threads(1)
        k.warps(1)
        v = k.SMEM()
        with k.warp_region():
            with k.when(k.lane == 0):
                k.write(v)
            k.read(v)

    assert reference.uncovered(per_lane.build()) == ["memory regions indexed by the lane"]
    assert reference.uncovered(elected_lane_writes.build()) == \
        ["memory effects in a branch on the lane"]


def test_the_reference_does_not_import_the_main_semantics():
    """Independence: the reference reads the IR, never the model's own statement of the rules
    (model/memory.py, regions.py, semantics.py, interpreter.py, checker/...). Each import of its
    modules names the standard library, a module of the reference itself, or model/ir.py."""
    folder = os.path.dirname(reference.__file__)
    own = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(folder, "*.py"))}
    for path in glob.glob(os.path.join(folder, "*.py")):
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom) and node.level:
                allowed = own if node.level == 1 else {"ir"} if node.level == 2 else set()
                assert node.module in allowed, (path, "." * node.level + (node.module or ""))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module] if isinstance(node, ast.ImportFrom) else \
                    [a.name for a in node.names]
                for name in names:
                    assert name.split(".")[0] in sys.stdlib_module_names or \
                        name == "barrierproof.model.ir", (path, name)


# --------------------------------------------------------------------------------------------
# How much of the bundled examples the reference cross-checks, as docs/oracles.md reports it
# --------------------------------------------------------------------------------------------

ORACLES = os.path.join(os.path.dirname(EXAMPLES), "docs", "oracles.md")
BEGIN, END = "<!-- coverage: begin (tests/test_reference.py) -->", "<!-- coverage: end -->"


def _outcome(expect: str) -> str:
    return "verified" if expect == "verified" else expect.split(":")[0]


def _coverage_rows():
    """(frontend, expected outcome) -> [targets, covered with every rule, covered once the
    memory effects are stripped]. A target is covered when the reference models every kernel
    it compiles to; check.py cross-checks a counterexample only then."""
    rows = {}

    def count(frontend, expect, kernels):
        row = rows.setdefault((frontend, _outcome(expect)), [0, 0, 0])
        row[0] += 1
        row[1] += all(reference.covers(k) for k in kernels)
        row[2] += all(reference.covers(without_memory(k)) for k in kernels)

    for target in ALL_DSL:
        count("DSL", target.expect, [target.build()])
    for file, name in PALLAS_TARGETS:
        module = pallas.import_file(os.path.join(PALLAS, file))
        try:
            kernels = pallas.load(getattr(module, name), name=name)
        except ModelError:          # rejected while tracing: no IR for either side
            kernels = None
        if kernels is not None:
            count("Pallas", module.EXPECT[name], kernels)
    return rows


def _coverage_table(rows) -> str:
    lines = ["| frontend | expected | targets | covered (every rule) | covered (barrier rules, "
             "memory stripped) |", "|---|---|---|---|---|"]
    total = [0, 0, 0]
    for (frontend, outcome), (n, full, barriers) in sorted(rows.items()):
        lines.append(f"| {frontend} | {outcome} | {n} | {full} | {barriers} |")
        total = [t + x for t, x in zip(total, (n, full, barriers))]
    lines.append(f"| all | all | {total[0]} | {total[1]} | {total[2]} |")
    return "\n".join([BEGIN] + lines + [END])


def test_the_oracle_coverage_page_states_the_measured_figures():
    """docs/oracles.md carries the figures this test measures (BP_UPDATE_DOCS=1 rewrites them)."""
    rows = _coverage_rows()
    table = _coverage_table(rows)
    with open(ORACLES) as f:
        page = f.read()
    assert BEGIN in page and END in page, f"{ORACLES} lost its coverage markers"
    now = page[page.index(BEGIN):page.index(END) + len(END)]
    if os.environ.get("BP_UPDATE_DOCS") == "1":
        with open(ORACLES, "w") as f:
            f.write(page.replace(now, table))
        now = table
    assert now == table, (f"{ORACLES} states other coverage figures than the examples give; "
                          f"rerun with BP_UPDATE_DOCS=1 to rewrite them:\n{table}")
    # the README states the total, every rule
    targets, covered = (sum(row[i] for row in rows.values()) for i in (0, 1))
    with open(os.path.join(os.path.dirname(ORACLES), os.pardir, "README.md")) as f:
        readme = " ".join(f.read().split())
    assert f"it covers {covered} of the {targets} bundled targets" in readme, (covered, targets)
    assert sum(n for (frontend, _), (n, _, _) in rows.items() if frontend == "DSL") == \
        len(ALL_DSL)
