"""Every opcode is classified for both reductions; a new one left out is an error at import."""

import subprocess
import sys

import pytest

from barrierproof.checker.engines import por, symmetry
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
