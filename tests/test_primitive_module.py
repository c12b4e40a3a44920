"""A primitive with an opcode of its own is one family module: a throwaway one, written here,
supplies its IR kind, opcode, compile rule, step rule, partial-order reduction and symmetry rows
and its TLA+ instruction, and the explorer, both reductions and the TLA+ emitter use it with no
other file touched. Leaving one row out fails at install, naming the row.

It runs in a fresh interpreter: installing a family grows the process's tables for good."""

import subprocess
import sys
import textwrap

FAMILY = '''
"""Family (a test's throwaway): arrive_n(count) arrives `count` times on one barrier in one
step."""

from barrierproof.model import instructions as ins
from barrierproof.model.extensions import Extension
from barrierproof.model.ir import evaluate
from barrierproof.model.kinds import Primitive
from barrierproof.model.steps import NOT_IN_TLA, UNREDUCED, Step, Tla, Touch, barriers, tla_seq


def make(name, **overrides):
    """The family of kind `name`, with opcode `name` (allocated here), and its rows."""
    opcode = ins.opcode(name)

    def compile_op(system, op, env, agent, block):
        inst, src, _ = system.barrier_site(op, env, block)
        system._emit(agent, ins.Instr(opcode, (inst,), evaluate(op.count, env), None, src))

    def effect(system, s, instr, agent, events):
        return system._arrive(s, instr.target[0], instr.amount, agent, instr.src, events)

    rows = dict(
        guard=None, effect=effect,
        touches=lambda system, agent, instr: Touch(writes=barriers(instr.target),
                                                   reaches=instr.target),
        resources="writes P(target)", waits=False, symmetry="arrival set",
        # it maps onto MBarrier's Arrive: no change to the specs
        tla=Tla("arrive(tgt, amount)", "Arrive", lambda system, instr:
                f"arrive({tla_seq(i + 1 for i in instr.target)}, {instr.amount})"))
    rows.update(overrides)
    primitive = Primitive(name, "arrive(count) in one step", needs=frozenset({"barrier", "count"}),
                          blocking=False, waits_for="", opcodes=(name,), dsl="",
                          reference="uncovered", prover="outside: a test primitive",
                          repair=frozenset(), compile=compile_op)

    def extension(**rows):
        return Extension(f"{name} (test)", primitives=(primitive,), steps=(Step(opcode, **rows),))
    return opcode, rows, extension
'''

SCRIPT = '''
import sys
sys.path.insert(0, sys.argv[1])
import barrierproof.model            # installs the families of the package
from barrierproof.model import extensions, kinds, steps
from barrierproof.model.ir import ModelError
from barrierproof.model.dsl import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines import por, symmetry, tla
from barrierproof.checker.engines.explore import explore
from barrierproof.model.semantics import System
import arrive_n

opcode, rows, extension = arrive_n.make("arrive_n")

# Each row left out: install refuses the family, naming the row, and leaves nothing behind.
for row in steps.ROWS:
    try:
        extensions.install(extension(**{k: v for k, v in rows.items() if k != row}))
    except AssertionError as err:
        assert f"opcode arrive_n has no `{row}` row" in str(err), err
        print("refused:", err)
    else:
        raise SystemExit(f"installed without its {row} row")
assert "arrive_n" not in kinds.PRIMITIVES and opcode not in steps.STEPS
try:                          # the allocated opcode has no row yet: incomplete
    extensions.check_complete()
except AssertionError as err:
    assert "opcode arrive_n has no step row" in str(err), err
else:
    raise SystemExit("an opcode without a row passed the completeness check")

# The module alone: every table is complete again and every engine reads its rows.
extensions.install(extension(**rows))
extensions.check_complete()
por.check_classified()
symmetry.check_classified()


def kernel(name, count):
    @protocol()
    def k(k):
        k.threads(3, name="wg")
        full = k.Barrier(num_arrivals=2)
        with k.when(k.thread == 0):
            k._op(name, full, count=count)
        with k.otherwise():
            k.wait_parity(full, 0)
    return k.build()


good, bad = check_kernel(kernel("arrive_n", 2)), check_kernel(kernel("arrive_n", 1))
assert good.verdict == "verified", good.label
assert bad.verdict == "violation" and bad.codes == ["BP100"], (bad.label, bad.codes)
system = System(kernel("arrive_n", 2))
reduced, full = explore(system), explore(system, reduction=False)
assert reduced.status == full.status == "verified"
assert reduced.states < full.states, (reduced.states, full.states)  # the waiters are twins
assert "arrive(<<1>>, 2)" in tla.emit_module(system).tla

# Declared outside the reductions and the TLA+ model: the explorer searches without the
# reductions (same verdict), TLC decides nothing, the emitter says why.
opcode2, rows2, extension2 = arrive_n.make("arrive_n_outside")
extensions.install(extension2(**dict(rows2, touches=arrive_n.UNREDUCED,
                                     resources=arrive_n.UNREDUCED, symmetry=arrive_n.UNREDUCED,
                                     tla=arrive_n.NOT_IN_TLA)))
extensions.check_complete()
outside = System(kernel("arrive_n_outside", 2))
assert explore(outside).states == full.states
assert check_kernel(kernel("arrive_n_outside", 1)).codes == ["BP100"]
try:
    tla.emit_module(outside)
except ModelError as err:
    assert "arrive_n_outside" in str(err) and "not in the TLA+ model" in str(err), err
else:
    raise SystemExit("the emitter wrote an opcode that is not in the TLA+ model")
from barrierproof.checker.engines.tlc import run_tlc
weaker = run_tlc(kernel("arrive_n_outside", 2))
assert weaker.verdict == "bounded" and "not in the TLA+ model" in weaker.coverage, weaker.label
print("ok", reduced.states, full.states)
'''


def test_a_primitive_is_one_module_and_a_missing_row_fails_at_install(tmp_path):
    (tmp_path / "arrive_n.py").write_text(FAMILY)
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    refused = [line for line in run.stdout.splitlines() if line.startswith("refused:")]
    assert len(refused) == 7            # guard, effect, touches, resources, waits, symmetry, tla
    assert run.stdout.splitlines()[-1].startswith("ok")
