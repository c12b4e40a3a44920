"""The primitive registry (model/kinds.py) and its families (model/primitives/, hw_barriers.py,
init_visibility.py): complete, fail closed, and true to what the compiler emits."""

from __future__ import annotations

import dataclasses
import glob
import os
from pathlib import Path

import pytest

from barrierproof.loader import import_file, targets_in_module
from barrierproof.model import kinds, primitives
from barrierproof.model.instructions import OPCODE_NAMES
from barrierproof.model.ir import Const, Kernel, ModelError, Op
from barrierproof.model.semantics import compile_systems

from conftest import EXAMPLES


def test_every_kind_has_a_family_and_every_declaration():
    assert len(kinds.PRIMITIVES) == 39
    for prim in kinds.PRIMITIVES.values():
        assert prim.family and prim.compile is not None and prim.doc
        assert prim.memory != "none" or prim.opcodes, f"{prim.kind} compiles to nothing"
    kinds.check_complete(OPCODE_NAMES.values())


def test_a_missing_declaration_is_an_error_at_import():
    with pytest.raises(TypeError):
        kinds.Primitive("new_kind", "doc", needs=frozenset(), blocking=False, opcodes=())
    prim = kinds.PRIMITIVES[primitives.ARRIVE]
    with pytest.raises(AssertionError, match="unknown"):
        kinds._check_fields(dataclasses.replace(prim, repair=frozenset({"teleports"})), "test")
    with pytest.raises(AssertionError, match="group"):
        kinds._check_fields(dataclasses.replace(prim, memory="issue"), "test")
    with pytest.raises(AssertionError, match="waits_for"):
        kinds._check_fields(dataclasses.replace(prim, waits_for="a miracle"), "test")
    wait = kinds.PRIMITIVES[primitives.BARRIER_WAIT]
    with pytest.raises(AssertionError, match="local wait"):
        kinds._check_fields(dataclasses.replace(wait, waits_for="value"), "test")
    with pytest.raises(AssertionError, match="belong to no primitive"):
        kinds.check_complete([*OPCODE_NAMES.values(), "orphan_opcode"])
    with pytest.raises(AssertionError, match="already|declared by"):
        kinds.register(prim, "again", None)


def test_an_unknown_kind_fails_closed_in_the_compiler():
    kernel = Kernel("k", (Op("teleport", None, count=Const(1)),))
    with pytest.raises(ModelError, match="unknown operation kind"):
        compile_systems(kernel)


def _dsl_kernels():
    for f in sorted(glob.glob(os.path.join(EXAMPLES, "*.py"))):
        if not os.path.basename(f).startswith("_"):
            yield from (t.build() for t in targets_in_module(f, import_file(f))
                        if t.kind == "dsl")


def test_the_compiler_emits_only_the_opcodes_a_primitive_declares():
    emitted = set()
    for kernel in _dsl_kernels():
        for system in compile_systems(kernel):
            for program in system.programs:
                for instr in program:
                    op = system.sources[instr.src].op
                    name = OPCODE_NAMES[instr.op]
                    if op is None:
                        assert name in kinds.STRUCTURAL_OPCODES
                        continue
                    assert name in kinds.PRIMITIVES[op.kind].opcodes, (op.kind, name)
                    emitted.add(op.kind)
    assert len(emitted) >= 15       # the DSL examples drive 15 kinds that emit instructions


def test_the_declared_dsl_spelling_and_reference_exist():
    import re

    from barrierproof.model import reference
    from barrierproof.model.dsl import KernelBuilder
    modules = {p.stem for p in Path(reference.__file__).parent.glob("*.py")}
    for prim in kinds.PRIMITIVES.values():
        for spelling in prim.dsl.split(" / "):
            name = re.match(r"\w+", spelling).group()
            assert hasattr(KernelBuilder, name), (prim.kind, spelling)
        assert prim.reference in modules | {"uncovered"}, (prim.kind, prim.reference)


def test_a_primitive_added_by_its_module_alone_is_read_by_every_engine():
    """cp_async_arrive joined as one family module (model/primitives/cp_async_arrive.py) plus its
    DSL spelling: the explorer verifies a PipelineCpAsync-style hand-off, and a barrier that
    counts one arrival too many deadlocks."""
    from barrierproof.checker.check import check_kernel
    from barrierproof.model.dsl import protocol

    def handoff(arrivals):
        @protocol()
        def cp_async_handoff(k):
            k.threads(3, name="wg")
            full = k.Barrier(num_arrivals=arrivals)
            with k.when(k.thread < 2):                 # two producers, one arrival each
                k.cp_async_arrive(full)
            with k.otherwise():
                k.wait_parity(full, 0)
        return cp_async_handoff.build()

    assert kinds.lookup("cp_async_arrive").family == "cp.async arrivals"
    good = check_kernel(handoff(2), {})
    assert good.verdict == "verified", good.label
    bad = check_kernel(handoff(3), {})
    assert bad.verdict == "violation" and bad.codes == ["BP100"], (bad.label, bad.codes)


def test_what_a_thread_waits_for_is_declared_and_asked():
    assert kinds.blocking_waits("phase") == {primitives.BARRIER_WAIT, primitives.WAIT_PARITY}
    assert kinds.blocking_waits("value") == {primitives.SEMAPHORE_WAIT}
    assert kinds.blocking_waits("hardware") == {primitives.BAR_SYNC, primitives.CLUSTER_WAIT}
    # a test waits for a phase without stopping; a wait blocks
    assert kinds.PRIMITIVES[primitives.BARRIER_TEST].waits_for == "phase"
    assert all(p.blocking for k in kinds.blocking_waits("phase", "value", "hardware")
               for p in [kinds.PRIMITIVES[k]])
    with pytest.raises(KeyError):
        kinds.blocking_waits("")
    with pytest.raises(KeyError):
        kinds.blocking_waits("a miracle")


def test_the_prover_encodes_a_kind_by_its_counter_op_or_not_at_all():
    from barrierproof.checker.symbolic import program
    assert set(program._ENCODINGS) == kinds.COUNTER_OPS
    encoded = kinds.kinds_where(lambda p: p.counter != "")
    assert encoded == kinds.kinds_where(lambda p: p.prover.startswith(kinds.IN_COUNTER_PROGRAM))
    assert primitives.BARRIER_TEST not in encoded and primitives.WAIT_PARITY in encoded
    prim = kinds.PRIMITIVES[primitives.ARRIVE]
    with pytest.raises(AssertionError, match="counter-program op"):
        kinds._check_fields(dataclasses.replace(prim, counter="teleport"), "test")
    with pytest.raises(AssertionError, match="disagree"):
        kinds._check_fields(dataclasses.replace(prim, counter=""), "test")
    with pytest.raises(AssertionError, match="disagree"):
        kinds._check_fields(dataclasses.replace(prim, prover="outside: a test"), "test")
