"""The Pallas frontend: Mosaic GPU kernels traced on the CPU become IR that points at the kernel's
source lines, and every example kernel gets the verdict it declares."""

import os
import re
import textwrap

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from barrierproof.checker.check import Options, check_kernel
from barrierproof.cli import main
from barrierproof.model import pallas
from barrierproof.model.ir import (Const, Loop, ModelError, Op, Var, WarpRegion, When, iter_ops,
                                    walk)
from barrierproof.testing import check

from conftest import EXAMPLES, ROOT

PALLAS = os.path.join(EXAMPLES, "pallas")
CORPUS = ["handoff.py", "ring.py", "roles.py", "hardware.py", "audit_kernels.py"]
MODULES = {name: pallas.import_file(os.path.join(PALLAS, name)) for name in CORPUS}
TARGETS = [(file, fn) for file, mod in MODULES.items() for fn in mod.EXPECT]




def test_corpus_is_big_and_covers_the_bug_patterns():
    assert len(TARGETS) >= 20
    labels = [MODULES[f].EXPECT[n] for f, n in TARGETS]
    assert sum(label == "verified" for label in labels) >= 8
    codes = {label.split(":")[1] for label in labels if ":" in label}
    assert {"BP100", "BP101", "BP103", "BP104", "BP105", "BP110", "BP120", "BP121",
            "BP130"} <= codes
    for mod in MODULES.values():
        assert set(mod.EXPECT) == set(mod.INTERPRETER)


@pytest.mark.parametrize("file,name", TARGETS, ids=[f"{f[:-3]}.{n}" for f, n in TARGETS])
def test_example_verdict(file, name):
    mod = MODULES[file]
    (verdict,) = check(getattr(mod, name))
    assert verdict.label == mod.EXPECT[name], [d.one_line() for d in verdict.diagnostics]
    for d in verdict.diagnostics:   # every diagnostic points into the example's source
        assert d.location and d.location.split(":")[0].endswith(file), d.one_line()


def test_handoff_ir_maps_every_op_to_its_source_line():
    (kernel,) = pallas.load(MODULES["ring.py"].ring, name="ring")
    assert kernel.source == "pallas" and kernel.num_threads.value == 2
    assert kernel.thread_axis == "wg"
    assert [(b.name, b.num_arrivals.value, len(b.shape)) for b in kernel.barriers] == \
        [("full", 1, 1), ("empty", 1, 1)]
    lines = open(os.path.join(PALLAS, "ring.py")).read().splitlines()
    seen = set()
    for op in iter_ops(kernel.body):
        text = lines[op.loc.line - 1]
        if op.kind == "read":                                 # the consumer's ref load
            assert "smem[slot]" in text, (op.describe(), op.loc, text)
        else:
            assert f"plgpu.{op.kind}(" in text, (op.describe(), op.loc, text)
        seen.add(op.kind)
    assert seen == {"barrier_wait", "barrier_arrive", "copy_gmem_to_smem", "read"}
    copy = next(o for o in iter_ops(kernel.body) if o.kind == "copy_gmem_to_smem")
    assert copy.bytes.value == 128 * 4                         # one f32 tile of the ring
    assert repr(copy.barrier) == "full[(i % 2)]"              # the slot is the loop index mod 2


def test_roles_become_whens_on_the_thread_axis_and_loops_keep_trip_counts():
    (kernel,) = pallas.load(MODULES["ring.py"].ring, name="ring")
    whens = [s for s in kernel.body if isinstance(s, When)]
    assert [repr(w.cond) for w in whens] == ["(wg == 1)", "(wg == 0)"]
    loops = [s for s in whens[0].then if isinstance(s, Loop)]
    assert [l.trip.value for l in loops] == [4, 2]


def test_carried_slot_gets_a_closed_form():
    (kernel,) = pallas.load(MODULES["roles.py"].carried_slot_ring, name="c")
    indices = {repr(o.barrier) for o in iter_ops(kernel.body)}
    assert any("% 2" in i for i in indices), indices
    assert not any("%c" in i or "?" in i for i in indices), indices


def test_data_dependent_trip_count_is_one_shared_parameter():
    (kernel,) = pallas.load(MODULES["roles.py"].data_dependent_trips, name="d")
    assert len(kernel.params) == 1
    (param,) = kernel.params.values()
    assert param.default == pallas.DEFAULT_TRIPS
    trips = {repr(s.trip) for s in walk(kernel.body) if isinstance(s, Loop)}
    assert trips == {param.name}                    # both roles loop over the same value
    assert any("depends on data" in n and "roles.py" in n for n in kernel.notes)
    for n in (1, 2, 5):
        assert check_kernel(kernel, {param.name: n}).verdict == "verified"




def test_warp_mesh_becomes_a_warp_region():
    (kernel,) = pallas.load(MODULES["hardware.py"].warp_handoff, name="w")
    regions = [s for s in kernel.body if isinstance(s, WarpRegion)]
    assert len(regions) == 1 and regions[0].axis == "warp"
    conds = {repr(s.cond) for s in walk(regions[0].body) if isinstance(s, When)}
    assert conds == {"(warp == 0)", "(warp > 0)"}


def test_cluster_barrier_and_multicast_copy():
    (kernel,) = pallas.load(MODULES["hardware.py"].cluster_rendezvous, name="c")
    assert [(a, n.value) for a, n in kernel.cluster] == [("x", 2)]
    (bar,) = kernel.barriers
    assert bar.cluster and bar.collective_axes == ("x",)
    (kernel,) = pallas.load(MODULES["hardware.py"].multicast_copy, name="m")
    copy = next(o for o in iter_ops(kernel.body) if o.kind == "copy_gmem_to_smem")
    assert copy.collective_axes == ("x",) and copy.bytes.value == 128 * 128 * 2


def test_tcgen05_ops():
    (kernel,) = pallas.load(MODULES["hardware.py"].tcgen05_commit, name="t")
    kinds = [o.kind for o in iter_ops(kernel.body)]
    assert kinds == ["tcgen05_mma", "tcgen05_commit_arrive", "barrier_wait"]
    assert kernel.barriers[0].orders_tensor_core


def test_tracing_error_for_tensor_core_order_is_bp110_at_the_kernel_line():
    with pytest.raises(ModelError) as info:
        pallas.load(MODULES["hardware.py"].tcgen05_commit_plain_barrier)
    err = info.value
    assert err.code == "BP110"
    line = open(os.path.join(PALLAS, "hardware.py")).read().splitlines()[err.loc.line - 1]
    assert "tcgen05_commit_arrive" in line and err.loc.file.endswith("hardware.py")


def _semaphores(shape):
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.SemaphoreType.REGULAR(shape)])
    def kernel(o_ref, sem):
        wg = jax.lax.axis_index("wg")
        one = sem if shape == () else sem.at[0]

        @pl.when(wg == 0)
        def _():
            pl.semaphore_signal(one)

        @pl.when(wg == 1)
        def _():
            pl.semaphore_wait(one)

    return kernel()


def test_unmodeled_synchronization_is_never_dropped():
    # an array of semaphores is outside the model: kept, reported, never verified
    (kernel,) = pallas.load(lambda: _semaphores((2,)), name="s")
    names = [o.name for o in iter_ops(kernel.body) if o.kind == "unmodeled"]
    assert names == ["semaphore_signal", "semaphore_wait"]
    verdict = check_kernel(kernel)
    assert verdict.verdict == "unknown" and set(verdict.codes) == {"BP190"}
    assert check_kernel(kernel, options=Options(ignore=frozenset({"BP190"}))).verdict == \
        "verified"


def test_programmatic_dependent_launch_orders_kernels_not_threads():
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.Barrier()])
    def kernel(o_ref, bar):
        plgpu.griddepcontrol_wait()          # for the previous kernel of the stream
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            plgpu.barrier_arrive(bar)

        @pl.when(wg == 1)
        def _():
            plgpu.barrier_wait(bar)
        plgpu.griddepcontrol_launch_dependents()

    (k,) = pallas.load(lambda: kernel(), name="pdl")
    assert [o.kind for o in iter_ops(k.body)] == ["barrier_arrive", "barrier_wait"]
    assert check_kernel(k).verdict == "verified"


def test_a_scratch_semaphore_is_modelled():
    (kernel,) = pallas.load(lambda: _semaphores(()), name="s")
    kinds = [o.kind for o in iter_ops(kernel.body)]
    assert kinds == ["semaphore_signal", "semaphore_wait"]
    assert check_kernel(kernel).verdict == "verified"


def test_expression_folding():
    i, n = Var("i"), Var("n")
    assert repr(pallas.mk("+", pallas.mk("+", i, Const(1)), Const(2))) == "(i + 3)"
    assert repr(pallas.mk_rem(i, Const(2))) == "(i % 2)"            # loop vars are >= 0
    assert repr(pallas.mk_div(Const(-7), Const(2))) == "-3"         # C division truncates
    assert repr(pallas.mk_rem(Const(-7), Const(2))) == "-1"
    assert repr(pallas.mk("max", pallas.mk("<", n, Const(8)), Const(0))) == "(n < 8)"
    assert repr(pallas.mk_select(pallas.mk("<", i, Const(2)), [Const(0), Const(1)])) == \
        "(i < 2)"


def test_device_facts_are_patched_only_while_tracing():
    import jax.extend.backend as jeb
    # Compared with what was there before (not with a bare CPU device): a trace that another
    # test left running in a thread may still hold its own patch in this worker.
    before = (jax.devices, jax.local_devices, jeb.get_default_device, jax.device_count)
    with pallas.device_facts(core_count=7, device_count=3):
        assert jax.devices()[0].core_count == 7
        assert jeb.get_default_device().core_count == 7
        assert jax.device_count() == 3
    after = (jax.devices, jax.local_devices, jeb.get_default_device, jax.device_count)
    assert all(a is b for a, b in zip(after, before))


BAD = {
    "missing_name": ("""
        def ok():
            return 1
        """, "::nope", "has no"),
    "import_error": ("""
        import not_a_module_anywhere
        """, "::f", "ModuleNotFoundError"),
    "raises_while_tracing": ("""
        import jax, jax.numpy as jnp
        from jax.experimental.pallas import mosaic_gpu as plgpu

        def f():
            @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                          scratch_types=[plgpu.Barrier()])
            def k(x_ref, o_ref, bar):
                raise RuntimeError("boom in the kernel body")
            return k(jnp.zeros(128, jnp.float32))
        """, "::f", "boom in the kernel body"),
    "index_from_data": ("""
        import jax, jax.numpy as jnp
        from jax.experimental.pallas import mosaic_gpu as plgpu

        def f():
            @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                          scratch_types=[plgpu.Barrier(num_barriers=2)])
            def k(i_ref, o_ref, bar):
                plgpu.barrier_arrive(bar.at[i_ref[0]])
                plgpu.barrier_wait(bar.at[i_ref[0]])
            return k(jnp.zeros(1, jnp.int32))
        """, "::f", "depends on data"),
    "takes_arguments": ("""
        def f(x):
            return x
        """, "::f", "takes arguments (x)"),
    "sys_exit_while_tracing": ("""
        import sys

        def f():
            sys.exit(3)
        """, "::f", "SystemExit: 3"),
    "bad_expect_label": ("""
        EXPECT = {"f": 3}

        def f():
            pass
        """, "::f", "must map kernel function names to verdicts"),
    "no_kernel": ("""
        import jax.numpy as jnp

        def f():
            return jnp.zeros(3) + 1
        """, "::f", "calls no Pallas"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_with_location_and_exit_3(tmp_path, case, capsys):
    body, suffix, needle = BAD[case]
    path = tmp_path / f"{case}.py"
    path.write_text(textwrap.dedent(body))
    code = main(["check", str(path) + suffix])
    out, err = capsys.readouterr()
    text = out + err
    assert code == 3, text
    assert "Traceback" not in text and needle in text, text
    if case not in ("missing_name",):
        assert re.search(rf"{case}\.py:\d+", text), text


def test_cli_checks_pallas_targets_next_to_dsl_protocols(capsys):
    code = main(["check", os.path.join(PALLAS, "handoff.py::handoff"),
                 os.path.join(EXAMPLES, "handoff.py::single_handoff")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "handoff.py::handoff: verified" in out and "single_handoff: verified" in out
    assert main(["check", os.path.join(PALLAS, "handoff.py::missing_arrival")]) == 1
    out = capsys.readouterr().out
    assert re.search(r"pallas/handoff\.py:\d+: BP100", out), out


def test_docstring_examples():
    import doctest
    result = doctest.testmod(pallas)
    assert result.attempted > 0 and result.failed == 0


def _handoff_kernel(body, scratch, n=2):
    return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=n,
                        thread_name="wg", scratch_types=scratch)


def _data_guarded(wait_cond, arrive_cond=lambda f: f > 0):
    def body(flag_ref, x_ref, o_ref, bar):
        wg = jax.lax.axis_index("wg")
        flag = flag_ref[0]

        @pl.when(jnp.logical_and(wg == 0, arrive_cond(flag)))
        def _():
            plgpu.barrier_arrive(bar)

        @pl.when(jnp.logical_and(wg == 1, wait_cond(flag)))
        def _():
            plgpu.barrier_wait(bar)
    return _handoff_kernel(body, [plgpu.Barrier()])(jnp.array([1], jnp.int32),
                                                    jnp.zeros(128, jnp.float32))


def test_data_that_only_decides_branches_is_checked_for_every_small_value():
    """`pl.when(flag > 0)` arrives, `pl.when(flag >= 0)` waits: flag == 0 deadlocks. A single
    default value (3) hid it; the data value is now an axis of the grid (0..3, and the
    constants it is compared with, +-1), so every value is explored."""
    (kernel,) = pallas.load(lambda: _data_guarded(lambda f: f >= 0), name="mismatch")
    assert not kernel.params
    (axis, size), = [(a, n) for a, n in kernel.grid if a.startswith("data_")]
    assert size.value == 4
    assert any("checked for every value" in n for n in kernel.notes)
    verdict = check_kernel(kernel)
    assert verdict.label == "violation:BP100"
    assert verdict.trace.grid_position == {axis: 0}
    (ok,) = pallas.load(lambda: _data_guarded(lambda f: f > 0), name="same")
    assert check_kernel(ok).verdict == "verified"
    (big,) = pallas.load(lambda: _data_guarded(lambda f: f >= 7, lambda f: f >= 8), name="far")
    (axis, size), = [(a, n) for a, n in big.grid if a.startswith("data_")]
    assert size.value == 8             # 0..3 and 6..9: both sides of `flag >= 7`, `flag >= 8`
    verdict = check_kernel(big)        # only flag == 7 deadlocks (position 5 of 0..3, 6..9)
    assert verdict.label == "violation:BP100" and verdict.trace.grid_position == {axis: 5}


def test_reversed_and_jnp_remainder_indices_stay_readable():
    """`(3 - i) % 2` with jnp's floor `%`: the index folds to the IR's `%`, not to a C-division
    expansion hundreds of characters long; a negative-step pl.loop keeps JAX's trip count."""
    def body(x_ref, o_ref, bar, ack):
        wg = jax.lax.axis_index("wg")

        @pl.when(wg == 0)
        def _():
            @pl.loop(0, 4)
            def _(k):
                plgpu.barrier_arrive(bar.at[(3 - k) % 2])
                plgpu.barrier_wait(ack)

        @pl.when(wg == 1)
        def _():
            def step(k, c):
                plgpu.barrier_wait(bar.at[jax.lax.rem(3 - k, 2)])
                plgpu.barrier_arrive(ack)
                return c
            jax.lax.fori_loop(0, 4, step, 0)

    def f():
        return _handoff_kernel(body, [plgpu.Barrier(num_barriers=2), plgpu.Barrier()])(
            jnp.zeros(128, jnp.float32))
    (kernel,) = pallas.load(f, name="rev")
    indices = [repr(o.barrier) for o in iter_ops(kernel.body) if o.barrier.alloc.name == "bar"]
    assert indices == ["bar[((3 - i) % 2)]", "bar[((3 - i2) % 2)]"], indices
    assert check_kernel(kernel).verdict == "verified"


def test_a_frontend_failure_is_a_one_line_input_error(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise KeyError("branches")
    monkeypatch.setitem(pallas._RULES, "cond", broken)
    code = main(["check", "--no-cache", os.path.join(PALLAS, "ring.py::ring")])
    out, err = capsys.readouterr()
    assert code == 3 and "Traceback" not in out + err
    assert re.search(r"ring\.py:\d+: input \[error\] the Pallas frontend could not translate "
                     r"`cond`", out), out


# -- primitives of the Mosaic GPU API beyond barrier_arrive / barrier_wait ----------------------

def _two_semaphores_in_parallel():
    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.SemaphoreType.REGULAR(()),
                                                   plgpu.SemaphoreType.REGULAR(())])
    def kernel(x_ref, o_ref, a, b):
        @pl.when(jax.lax.axis_index("wg") == 0)
        def _():
            plgpu.semaphore_signal_parallel(plgpu.SemaphoreSignal(a, device_id=None),
                                            plgpu.SemaphoreSignal(b, device_id=None))

        @pl.when(jax.lax.axis_index("wg") == 1)
        def _():
            pl.semaphore_wait(b)
            pl.semaphore_wait(a)

    return kernel(jnp.zeros(128, jnp.float32))


def test_unordered_signals_to_different_semaphores_are_modelled():
    # the waiter may see b's signal before a's: one in-flight signal each, landing in any order
    (kernel,) = pallas.load(_two_semaphores_in_parallel, name="p")
    kinds = [op.kind for op in iter_ops(kernel.body)]
    assert kinds == ["semaphore_signal_parallel", "semaphore_wait", "semaphore_wait"]
    verdict = check_kernel(kernel)
    assert verdict.label == "verified" and "BP190" not in verdict.codes


def _with_primitive(name, **params):
    """A kernel that binds a primitive of a newer JAX (here a stand-in with its name and
    parameter layout), so the frontend can be tested on the JAX installed here."""
    from jax import tree_util
    from jax._src import core as jax_core
    from jax._src.pallas import primitives as pallas_primitives

    prim = jax_core.Primitive(name)
    prim.multiple_results = True
    prim.def_effectful_abstract_eval(lambda *avals, **kw: ([], set()))

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.SemaphoreType.REGULAR(())])
    def kernel(x_ref, o_ref, sem):
        @pl.when(jax.lax.axis_index("wg") == 0)
        def _():
            ref, transforms = pallas_primitives._get_ref_and_transforms(sem)
            flat, tree = tree_util.tree_flatten([ref, transforms, jnp.asarray(2, jnp.int32)])
            prim.bind(*flat, args_tree=tree, **params)

        @pl.when(jax.lax.axis_index("wg") == 1)
        def _():
            pl.semaphore_wait(sem, 2)

    return kernel(jnp.zeros(128, jnp.float32))


def test_semaphore_signal_multicast_of_newer_jax_is_recognised_by_name():
    (kernel,) = pallas.load(lambda: _with_primitive("semaphore_signal_multicast",
                                                    collective_axes=()), name="m")
    signal = next(op for op in iter_ops(kernel.body) if op.kind == "semaphore_signal")
    assert repr(signal.count) == "2"     # one device: its own signal only
    assert check_kernel(kernel).verdict == "verified"
    # an axis the kernel does not know: kept as unmodelled, never guessed
    (kernel,) = pallas.load(lambda: _with_primitive("semaphore_signal_multicast",
                                                    collective_axes=("devices",)), name="m")
    assert "BP190" in check_kernel(kernel).codes


def _predicated_copy(wait_in_every_block: bool):
    """copy_gmem_to_smem(..., predicate=block == 0) through a stand-in primitive with the name
    and parameter layout of JAX versions that have `predicate=` on TMA loads."""
    from jax import tree_util
    from jax._src import core as jax_core
    from jax._src.pallas import primitives as pallas_primitives

    prim = jax_core.Primitive("copy_gmem_to_smem")
    prim.multiple_results = True
    prim.def_effectful_abstract_eval(lambda *avals, **kw: ([], set()))
    _, empty = tree_util.tree_flatten(())

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((2, 128), jnp.float32), cluster=(2,),
                  cluster_names=("x",), scratch_types=[plgpu.SMEM((128,), jnp.float32),
                                                       plgpu.Barrier()])
    def kernel(x_ref, o_ref, buf, landed):
        block = jax.lax.axis_index("x")
        src, _ = pallas_primitives._get_ref_and_transforms(x_ref)
        dst, _ = pallas_primitives._get_ref_and_transforms(buf)
        bar, _ = pallas_primitives._get_ref_and_transforms(landed)
        prim.bind(src, dst, bar, block == 0, src_transforms_treedef=empty,
                  dst_transforms_treedef=empty, barrier_transforms_treedef=empty,
                  collective_axes=None, leader_tracked=None, has_user_predicate=True)
        if wait_in_every_block:
            plgpu.barrier_wait(landed)
        else:
            @pl.when(block == 0)
            def _():
                plgpu.barrier_wait(landed)

    return kernel(jnp.zeros(128, jnp.float32))


def test_a_predicated_copy_still_arrives_where_its_predicate_is_false():
    # JAX's lowering: arrive.expect_tx(predicate ? bytes : 0), the copy itself predicated
    (kernel,) = pallas.load(lambda: _predicated_copy(True), name="p")
    (when,) = [s for s in walk(kernel.body) if isinstance(s, When)
               and any(isinstance(o, Op) and o.kind == "copy_gmem_to_smem" for o in s.then)]
    assert [o.kind for o in when.orelse] == ["barrier_arrive"]
    assert check_kernel(kernel).verdict == "verified"
    # block 1's barrier completes with the bytes-less arrival, and nobody waits for it
    (kernel,) = pallas.load(lambda: _predicated_copy(False), name="p")
    assert check_kernel(kernel).label == "violation:BP103"


def _cp_async(wait: bool):
    """copy_gmem_to_smem without a barrier (JAX >= 0.11, cp.async) and wait_gmem_to_smem,
    through stand-in primitives with those names and parameter layouts."""
    from jax import tree_util
    from jax._src import core as jax_core
    from jax._src.pallas import primitives as pallas_primitives

    copy = jax_core.Primitive("copy_gmem_to_smem")
    copy.multiple_results = True
    copy.def_effectful_abstract_eval(lambda *avals, **kw: ([], set()))
    wait_p = jax_core.Primitive("wait_gmem_to_smem")
    wait_p.multiple_results = True
    wait_p.def_effectful_abstract_eval(lambda *avals, **kw: ([], set()))
    _, empty = tree_util.tree_flatten(())

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                  scratch_types=[plgpu.SMEM((128,), jnp.float32)])
    def kernel(x_ref, o_ref, buf):
        src, _ = pallas_primitives._get_ref_and_transforms(x_ref)
        dst, _ = pallas_primitives._get_ref_and_transforms(buf)
        copy.bind(src, dst, src_transforms_treedef=empty, dst_transforms_treedef=empty,
                  barrier_transforms_treedef=empty, collective_axes=None, leader_tracked=None,
                  has_barrier=False, has_user_predicate=False)
        if wait:
            wait_p.bind(0)
        o_ref[...] = buf[...]
        if not wait:    # awaited only after the read, so the exit finds nothing in flight
            wait_p.bind(0)

    return kernel(jnp.zeros(128, jnp.float32))


def test_a_cp_async_copy_is_awaited_by_its_own_thread():
    (kernel,) = pallas.load(lambda: _cp_async(True), name="c")
    kinds = [op.kind for op in iter_ops(kernel.body)]
    assert kinds[:2] == ["cp_async", "wait_gmem_to_smem"], kinds
    assert check_kernel(kernel).verdict == "verified"
    # reading the buffer before the copy is awaited: a race with the copy
    (kernel,) = pallas.load(lambda: _cp_async(False), name="c")
    assert check_kernel(kernel).label == "violation:BP200"


def _unread_construct(stores: bool):
    """A primitive the frontend does not know, holding a sub-jaxpr (a stand-in for a newer
    JAX's region or a user's custom primitive): warpgroup 0 hands it the buffer, which it
    stores to when `stores`, else it only computes; warpgroup 1 reads the buffer unordered."""
    from jax._src import api_util, linear_util as lu
    from jax._src import core as jax_core
    from jax._src.interpreters import partial_eval as pe
    from jax._src.pallas import primitives as pallas_primitives

    prim = jax_core.Primitive("scoped_region")
    prim.multiple_results = True
    prim.def_effectful_abstract_eval(lambda *avals, **kw: ([], set()))

    def region(ref):
        if stores:
            ref[...] = jnp.ones((128,), jnp.float32)
        else:
            jnp.ones((128,), jnp.float32) * 2
        return []

    @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
                  thread_name="wg", scratch_types=[plgpu.SMEM((128,), jnp.float32)])
    def kernel(x_ref, o_ref, buf):
        @pl.when(jax.lax.axis_index("wg") == 0)
        def _():
            ref, _ = pallas_primitives._get_ref_and_transforms(buf)
            wrapped = lu.wrap_init(region, debug_info=api_util.debug_info("r", region, (ref,), {}))
            jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(wrapped, [ref.aval])
            prim.bind(ref, body=jax_core.ClosedJaxpr(jaxpr, consts))

        @pl.when(jax.lax.axis_index("wg") == 1)
        def _():
            o_ref[...] = buf[...]

    return kernel(jnp.zeros(128, jnp.float32))


def test_an_unread_construct_that_touches_memory_is_unmodelled_never_dropped():
    # its store would race with the other warpgroup's read: dropping it made the kernel verified
    (kernel,) = pallas.load(lambda: _unread_construct(True), name="u")
    (unread,) = [op for op in iter_ops(kernel.body) if op.kind == "unmodeled"]
    assert unread.name == "scoped_region"
    assert "prim.bind" in open(unread.loc.file).read().splitlines()[unread.loc.line - 1]
    verdict = check_kernel(kernel)
    assert verdict.verdict == "unknown" and set(verdict.codes) == {"BP190"}
    # one that only computes is data, as before
    (kernel,) = pallas.load(lambda: _unread_construct(False), name="u")
    assert [op.kind for op in iter_ops(kernel.body)] == ["read"]
    assert check_kernel(kernel).verdict == "verified"
