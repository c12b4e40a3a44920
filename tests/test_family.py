"""Shape families (model/pallas/family.py): one IR for every size of a Pallas kernel.

- the fit finds affine and clipped expressions and refuses what it cannot pin down;
- the family IR of a kernel, at a grid of small sizes, is what tracing the kernel at those sizes
  gives: same verdict, same number of states under the explorer (so a proof of the family is a
  proof of the kernel's traces, and no family the explorer refutes at a grid point can be proved);
- a broken kernel's smallest breaking size is found and replayed by tracing it again there;
- traces that disagree in structure at every size fall back to the traced shape and say so.
"""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("jax")

from barrierproof.checker.check import Options, check_kernel  # noqa: E402
from barrierproof.cli import main  # noqa: E402
from barrierproof.loader import resolve  # noqa: E402
from barrierproof.model import pallas  # noqa: E402
from barrierproof.model.ir import Const, Var  # noqa: E402
from barrierproof.model.pallas.family import (fit, fit_1d, same_kernel, size_params,  # noqa: E402
                                              trace_family, trace_member)

from conftest import EXAMPLES  # noqa: E402

SIZES = os.path.join(EXAMPLES, "pallas", "sizes.py")
MODULE = pallas.import_file(SIZES)


def test_fit_1d_affine_and_clipped():
    k = Var("k")
    assert repr(fit_1d([1, 2, 3, 4, 5], [64, 128, 192, 256, 320], k)) == "(k * 64)"
    assert repr(fit_1d([2, 3, 4, 5, 6], [0, 1, 2, 3, 4], k)) == "(k - 2)"
    assert repr(fit_1d([1, 2, 3, 4, 5], [1, 2, 2, 2, 2], k)) == "min(k, 2)"
    assert repr(fit_1d([1, 2, 3, 4, 5], [0, 0, 1, 2, 3], k)) == "(k - min(k, 2))"
    assert repr(fit_1d([1, 2, 3], [7, 7, 7], k)) == "7"


def test_fit_refuses_what_the_points_do_not_pin_down():
    k = Var("k")
    assert fit_1d([1, 2], [3, 5], k) is None                 # two points: no check left
    assert fit_1d([1, 2, 3, 4, 5], [1, 4, 9, 16, 25], k) is None   # not affine nor clipped
    assert fit_1d([1, 2, 3], [1, 2, 2], k) is None           # a clip needs four points
    # one point after the plateau: min(12 - 2k, 4) and min(17 - 3k, 4) both fit, and differ
    # from k = 6 on
    assert fit_1d([1, 2, 3, 4, 5], [4, 4, 4, 4, 2], k) is None


def test_fit_over_two_sizes_is_checked_at_every_point():
    base = {"a": 2, "b": 2}
    pts = [base, {"a": 1, "b": 2}, {"a": 3, "b": 2}, {"a": 4, "b": 2},
           {"a": 2, "b": 1}, {"a": 2, "b": 3}, {"a": 2, "b": 4}]
    ys = [x["a"] + 2 * x["b"] for x in pts]
    assert repr(fit(pts, ys, ["a", "b"], base)) == "(a + (b * 2))"
    ys_joint = [x["a"] * x["b"] for x in pts] + [12]     # a*b is not a sum of 1-D fits
    assert fit(pts + [{"a": 3, "b": 4}], ys_joint, ["a", "b"], base) is None


@pytest.fixture(scope="module")
def hopper_family():
    fn = MODULE.hopper_matmul_any_k
    return trace_family(fn, "hopper_matmul_any_k", None, pallas.load)


def test_hopper_matmul_family_ties_the_k_loops(hopper_family):
    fam = hopper_family
    assert [p.name for p in fam.sizes] == ["k_steps"]
    trips = {f.split(": trip count: ")[1] for f in fam.fits if ": trip count: " in f}
    # the consumers' K loop, the producer's steady state, and the drain's first slot share k_steps
    assert trips == {"k_steps", "(k_steps - 2)"}
    assert any("barrier_wait: (k_steps - min(k_steps, 2))" in f or
               "barrier_wait: (k_steps - 2)" in f for f in fam.fits), fam.fits
    assert fam.exceptions == {"k_steps": [1]}       # one step: one stage, other barriers
    assert fam.tiles == ["tiles"]
    assert "cluster_grid" not in dict(fam.kernel.grid)
    assert repr(fam.kernel.assumptions[0]) == "(k_steps >= 1)"


@pytest.mark.parametrize("k_steps", [1, 2, 3, 4])
@pytest.mark.parametrize("tiles", [0, 1, 2])
def test_hopper_family_agrees_with_its_traces(hopper_family, k_steps, tiles):
    fam = hopper_family
    member = trace_member(MODULE.hopper_matmul_any_k, "hopper_matmul_any_k", None, fam.sizes,
                          {"k_steps": k_steps}, pallas.load)
    a = check_kernel(fam.kernel, {"k_steps": k_steps, "tiles": tiles})
    b = check_kernel(member, {"tiles": tiles})
    assert (a.label, a.states) == (b.label, b.states)
    assert a.verdict == "verified"


def test_the_family_predicts_traces_it_did_not_see(hopper_family):
    from barrierproof.model.pallas.family import instantiate
    fam = hopper_family
    member = trace_member(MODULE.hopper_matmul_any_k, "hopper_matmul_any_k", None, fam.sizes,
                          {"k_steps": 21}, pallas.load)
    assert same_kernel(instantiate(fam.fitted, {"k_steps": 21}), member) is None
    other = trace_member(MODULE.hopper_matmul_any_k, "hopper_matmul_any_k", None, fam.sizes,
                         {"k_steps": 20}, pallas.load)
    assert same_kernel(instantiate(fam.fitted, {"k_steps": 21}), other) is not None


@pytest.mark.parametrize("name", ["ring_any_steps", "guarded_ring_any_steps"])
def test_ring_families_agree_with_the_explorer_on_a_grid(name):
    fn = getattr(MODULE, name)
    fam = trace_family(fn, name, None, pallas.load)
    for steps in range(1, 7):
        member = trace_member(fn, name, None, fam.sizes, {"steps": steps}, pallas.load)
        a = check_kernel(fam.kernel, {"steps": steps})
        b = check_kernel(member, {})
        assert (a.label, a.states) == (b.label, b.states), steps
        if MODULE.PROVE[name] == "proved":
            assert a.verdict == "verified", steps


def test_ring_of_any_size_is_proved_and_the_explorer_agrees_on_a_grid(capsys):
    """Steps and slots both sizes: the family is the DSL ring's shape, proved for all of them;
    at every point of a grid of small sizes the kernel traced there is verified, and so is the
    family's IR (no proof of what the explorer refutes)."""
    fn = MODULE.ring_any_size
    fam = trace_family(fn, "ring_any_size", None, pallas.load)
    assert {repr(b.shape) for b in fam.kernel.barriers} == {"(slots,)"}
    assert [repr(a) for a in fam.kernel.assumptions] == ["(steps >= 1)", "(slots >= 2)"]
    code = main(["prove", f"{SIZES}::ring_any_size", "--ignore", "BP200,BP201", "--format",
                 "json", "--no-cache", "--timeout", "120"])
    (report,) = json.loads(capsys.readouterr().out)
    assert (code, report["verdict"]) == (0, MODULE.PROVE["ring_any_size"]) == (0, "proved")
    assert "steps, slots with (steps >= 1) and (slots >= 2)" in report["coverage"]
    for steps in range(1, 6):
        for slots in range(2, 5):
            member = trace_member(fn, "ring_any_size", None, fam.sizes,
                                  {"steps": steps, "slots": slots}, pallas.load)
            a = check_kernel(fam.kernel, {"steps": steps, "slots": slots})
            b = check_kernel(member, {})
            assert (a.label, a.states) == (b.label, b.states) == ("verified", b.states)


def test_broken_ring_smallest_breaking_size_is_replayed_by_retracing(capsys):
    code = main(["prove", f"{SIZES}::ring_any_steps", "--format", "json", "--no-cache",
                 "--timeout", "20"])
    (report,) = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["verdict"] == "violation" and report["params"] == {"steps": 1}
    assert report["diagnostics"][0]["code"] == MODULE.PROVE["ring_any_steps"].split(":")[1]
    notes = " | ".join(report["notes"])
    assert "smallest breaking values found: steps=1" in notes
    assert "replayed by tracing ring_any_steps again at steps=1 (steps=1): violation:BP100" \
        in notes


def test_sizes_declaration_errors_name_the_function():
    from barrierproof import sizes
    from barrierproof.model.ir import ModelError

    @sizes(k_steps=("k", 64))
    def no_such_argument(m=128):
        return None

    @sizes(k_steps=("k", 64))
    def bad_default(k=100):
        return None

    @sizes(k_steps=64)
    def bad_spec(k=128):
        return None

    for fn, text in ((no_such_argument, "names argument 'k'"),
                     (bad_default, "not a positive multiple of 64"),
                     (bad_spec, "is not (argument, unit)")):
        with pytest.raises(ModelError) as err:
            size_params(fn, fn.__name__)
        assert text in err.value.message
        assert err.value.loc is not None and err.value.loc.line > 0


def test_traces_that_never_agree_fall_back_to_the_traced_shape(tmp_path):
    src = tmp_path / "unrolled.py"
    src.write_text(
        "import jax, jax.numpy as jnp\n"
        "from jax.experimental import pallas as pl\n"
        "from jax.experimental.pallas import mosaic_gpu as plgpu\n"
        "from barrierproof import sizes\n"
        "EXPECT = {'unrolled': 'violation:BP101'}\n"
        "@sizes(steps=('steps', 1))\n"
        "def unrolled(steps=3):\n"
        "    def body(o_ref, bar):\n"
        "        wg = jax.lax.axis_index('wg')\n"
        "        for s in range(steps):       # a Python loop: one more op per step\n"
        "            @pl.when(wg == 0)\n"
        "            def _():\n"
        "                plgpu.barrier_arrive(bar)\n"
        "            @pl.when(wg == 1)\n"
        "            def _():\n"
        "                plgpu.barrier_wait(bar)\n"
        "    k = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32),\n"
        "                     num_threads=2, thread_name='wg', scratch_types=[plgpu.Barrier()])\n"
        "    return k()\n")
    (target,) = resolve(f"{src}::unrolled")
    kernel = target.build_family()
    assert any(n.startswith("no shape family:") and "cannot be joined" in n
               for n in kernel.notes), kernel.notes
    assert not any(p.symbolic for p in kernel.params.values())
    # the fallback is the kernel at its defaults, exactly what `check` traces
    assert check_kernel(kernel).label == check_kernel(target.build()).label


def test_readme_family_table_fast_rows():
    """The table of `prove` over every size (docs/prove.md): the rows that take seconds."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(EXAMPLES), "bench"))
    import family_table
    readme = os.path.join(os.path.dirname(EXAMPLES), "docs", "prove.md")
    fast = [r for r in family_table.ROWS if r[1] in ("attention_forward_any_kv",
                                                      "blackwell_matmul_any_k")]
    table = family_table.run(fast)
    assert family_table.compare(table, readme) == []
    for (label, name, _), row in zip(fast, table):
        assert row[2] == MODULE.PROVE[name]


def test_an_odd_size_is_no_branch_when_other_sizes_would_be_frozen_in_it(tmp_path):
    """With two sizes, a branch `slots == 1` traced at one step count would claim that trace
    for every step count: refused, and the target falls back to its traced shape."""
    src = tmp_path / "any_slots.py"
    src.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.join(EXAMPLES, 'pallas')!r})\n"
        "from barrierproof import sizes\n"
        "import sizes as family_examples\n"
        "EXPECT = {'ring_any_slots': 'verified'}\n"
        "@sizes(steps=('steps', 1), slots=('slots', 1))\n"
        "def ring_any_slots(steps=4, slots=2):\n"
        "    return family_examples._ring_any_slots(steps, slots)\n")
    (target,) = resolve(f"{src}::ring_any_slots")
    kernel = target.build_family()
    assert any("traces differently at slots = 1, and with several sizes" in n
               for n in kernel.notes), kernel.notes
    assert not any(p.symbolic for p in kernel.params.values())


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(a=st.integers(-4, 4), b=st.integers(-12, 12), c=st.integers(-6, 12),
       clip=st.sampled_from(["none", "min", "max"]))
def test_a_fit_never_extrapolates_what_the_points_do_not_show(a, b, c, clip):
    """Sampled at 1..5, a trip count `a*n + b` (clipped by c where the clip shows among the
    points) is either refused or fitted with an expression equal to it for every n up to 40."""
    from barrierproof.model.ir import evaluate

    def f(v):
        y = a * v + b
        return y if clip == "none" else min(y, c) if clip == "min" else max(y, c)
    vs = [1, 2, 3, 4, 5]
    ys = [f(v) for v in vs]
    if clip != "none":
        clipped = [v for v in vs if f(v) != a * v + b]
        free = [v for v in vs if f(v) == a * v + b != c]
        if not clipped or not free:
            return          # the kink does not show among the points: nothing to recover
    g = fit_1d(vs, ys, Var("n"))
    if g is not None:
        assert all(evaluate(g, {"n": v}) == f(v) for v in range(1, 41)), (g, ys)
