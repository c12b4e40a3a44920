"""Gluon, CuTe DSL and Pallas kernels a new user wrote in the tutorials' style
(tests/data/unseen_gluon.py, unseen_cute.py, unseen_pallas.py and their sequels
unseen_gluon2.py, unseen_cute2.py, unseen_pallas2.py, unseen_gluon3.py, unseen_cute3.py,
unseen_pallas3.py, unseen_gluon4.py, unseen_cute4.py, unseen_pallas4.py, unseen_gluon5.py,
unseen_pallas6.py, unseen_cute6.py, unseen_gluon7.py, unseen_pallas7.py, unseen_cute7.py,
unseen_pallas8.py, unseen_cute8.py, unseen_gluon8.py),
correct ones and the bugs the field reports. Each verdict in those files' EXPECT tables (the one place
it is stated) follows from the hardware semantics; where a verdict may surprise (a code other
than the obvious one), the kernel's docstring or comment says why. Synchronization the frontends
do not read (hand-written PTX, a TMA reduction, a cluster launch) must be BP190 at its line.
Cost: about 40 s (each kernel compiled once on the CPU, then explored)."""

from __future__ import annotations

import os

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.loader import import_file, resolve

from conftest import ROOT

DATA = os.path.join(ROOT, "tests", "data")

# what each kernel outside the model leaves unread, on which source text
UNREAD = {
    "asm_mbarrier_arrive": "gl.inline_asm_elementwise(",
    "tma_atomic_add": "tma.async_atomic_add(",
    # a one-element barrier with a per-CTA layout (where each CTA's barrier lives is not read):
    # BP190 at its init and every use
    "multicast_two_ctas": "mbarrier.init(bar, count=1)",
    "ptx_named_barrier": "_bar_sync_ptx(1, 64)",
    # the launch's cluster shape is a fact of the kernel (the host's launch line is not in
    # its IR): named at the kernel's decorator, with the cluster size in the message
    "cluster_of_two": "@cute.kernel",
    # Pallas: the proxy fence a TMA store needs after the threads' stores (commit_smem)
    "store_epilogue_without_commit_smem": "plgpu.copy_smem_to_gmem(",
    # Gluon: the same fence (fence_async_shared) before a TMA store, and before an MMA of the
    # default partition reading what a worker partition stored
    "store_ring_no_fence": "tma.async_store(",
    "scaled_a_no_fence": "tcgen05_mma(",
    "alloc_store_no_fence": "tma.async_store(",
    # Gluon: cp.async copies no commit_group puts in a group no wait_group counts
    "cp_ring_never_commits": "async_copy.async_load(",
    "cp_ring_reads_before_commit": "# before the commit",
    # Gluon: cp.async copies completed through an mbarrier with the pending-count increment
    # (not ordered across the partition's warps)
    "cp_arrive_inc": "async_copy.mbarrier_arrive(",
    # CuTe: the proxy fence (fence_proxy async.shared) before a TMA store and a tcgen05 MMA
    # read what the threads stored
    "c_store_ring_no_proxy_fence": "cute.copy(tma_c,",
    "fused_operands_no_proxy_fence": "cute.gemm(",
    # Pallas: a data branch issuing TMA stores a wait with a count above 0 keeps in flight
    # (a real race when a group is empty; the model cannot count what stays in flight)
    "ladder_two_slots_wait_one": "@pl.when(size & n != 0)",
    # Pallas: arms of a data branch that exclude each other but touch one buffer (checked one
    # after the other they would be ordered as no execution is)
    "group_epilogue_exclusive_arms": "lax.cond(sizes_gmem[g] == 0",
    # Pallas: global rows loaded back while the TMA store that writes them may still be
    # writing (only a read-only wait between): global memory is outside the model
    "store_then_load_read_only_wait": "plgpu.copy_gmem_to_smem(o_gmem,",
    # Gluon: a barrier initialised again after its invalidation (a fresh phase 0 on the same
    # memory), and a warp_specialize region inside a loop (Triton gives the region the loop's
    # line)
    "reinit_rounds": "mbarrier.init(bar, count=1)",
    "region_per_tile": "# one region per tile",
}


def _kernels(name: str, frontend: str) -> tuple[dict, dict]:
    """The data file's EXPECT table (the one statement of each kernel's verdict, the one
    `barrierproof check --expect` reads) and its targets by name."""
    pytest.importorskip(frontend)
    path = os.path.join(DATA, name)
    targets = {t.name: t for t in resolve(path)}
    expect = import_file(path).EXPECT
    # every kernel has a verdict and every verdict a kernel; `unknown` only where a construct
    # outside the model is named at its line (never a way to leave a kernel unchecked)
    assert set(targets) == set(expect), set(targets) ^ set(expect)
    assert {k for k, v in expect.items() if v == "unknown"} <= set(UNREAD), expect
    return expect, targets


# each data file and the package it needs
FILES = {"gluon": ("unseen_gluon.py", "triton"), "gluon2": ("unseen_gluon2.py", "triton"),
         "cute": ("unseen_cute.py", "cutlass"), "cute2": ("unseen_cute2.py", "cutlass"),
         "pallas": ("unseen_pallas.py", "jax"), "pallas2": ("unseen_pallas2.py", "jax"),
         "gluon3": ("unseen_gluon3.py", "triton"), "cute3": ("unseen_cute3.py", "cutlass"),
         "pallas3": ("unseen_pallas3.py", "jax"), "cute4": ("unseen_cute4.py", "cutlass"),
         "gluon4": ("unseen_gluon4.py", "triton"), "pallas4": ("unseen_pallas4.py", "jax"),
         "gluon5": ("unseen_gluon5.py", "triton"), "pallas6": ("unseen_pallas6.py", "jax"),
         "cute6": ("unseen_cute6.py", "cutlass"), "gluon7": ("unseen_gluon7.py", "triton"),
         "pallas7": ("unseen_pallas7.py", "jax"), "cute7": ("unseen_cute7.py", "cutlass"),
         "pallas8": ("unseen_pallas8.py", "jax"), "cute8": ("unseen_cute8.py", "cutlass"),
         "gluon8": ("unseen_gluon8.py", "triton")}


@pytest.fixture(scope="module")
def gluon():
    return _kernels(*FILES["gluon"])


def _check(target, expected: str, name: str) -> None:
    assert target.expect == expected, (name, target.expect)
    kernel = target.build()
    v = check_kernel(kernel, source=target.ref)
    assert v.matches(expected), (name, v.label, [d.message for d in v.diagnostics])
    lines = open(target.ref.partition("::")[0], encoding="utf-8").read().splitlines()
    unread = [d for d in v.diagnostics if d.code == "BP190"]
    if name in UNREAD:
        # the construct is named at its own line, never dropped
        assert unread, name
        texts = [lines[int(d.location.rsplit(":", 1)[1]) - 1] for d in unread]
        assert any(UNREAD[name] in t for t in texts), texts
    else:
        assert not unread and not [op for op in kernel.ops() if op.kind == "unmodeled"], name


@pytest.mark.parametrize("data", ["pallas", "pallas2", "pallas3", "pallas4", "pallas6", "pallas7",
                                  "pallas8"])
def test_pallas_kernels(data):
    from barrierproof.model.ir import ModelError
    expect, targets = _kernels(*FILES[data])
    for name, expected in expect.items():
        try:
            _check(targets[name], expected, name)
        except ModelError as err:
            # JAX refuses a few rules itself while tracing: the rule's code, at the kernel
            assert f"violation:{err.code}" == expected, (name, err)
            assert err.loc.file.endswith(FILES[data][0]), err.loc


@pytest.mark.parametrize("data", ["gluon", "gluon2", "gluon3", "gluon4", "gluon5", "gluon7",
                                  "gluon8", "cute", "cute2", "cute3", "cute4", "cute6", "cute7",
                                  "cute8"])
def test_gluon_and_cute_kernels(data):
    expect, targets = _kernels(*FILES[data])
    for name, expected in expect.items():
        _check(targets[name], expected, name)


def test_inline_ptx_is_read_for_synchronization_only():
    """Hand-written math (and a fence or PDL wait, local as their named ops are) stays local;
    an mbarrier, named barrier, async copy or atomic in PTX is BP190."""
    from barrierproof.model.inline_ptx import SYNC_PTX
    assert not SYNC_PTX.search("cvt.rn.f16x2.f32 $0, $2, $1;")
    assert not SYNC_PTX.search("max.bf16x2 $0, $1, $2;")
    assert not SYNC_PTX.search("griddepcontrol.wait;")
    assert not SYNC_PTX.search("fence.proxy.async.shared::cta;")
    for asm in ("mbarrier.arrive.shared::cta.b64 _, [$1];",
                "bar.sync 1, 256;", "cp.async.bulk.tensor.2d.shared::cluster.global [$0];",
                "red.release.gpu.global.add.u32 [$0], 1;"):
        assert SYNC_PTX.search(asm), asm


def test_a_launch_for_hardware_that_lacks_its_operations_is_an_input_error(gluon):
    """TTGIR is printed before Triton lowers to PTX, where a TMA on Ampere or wgmma on
    Blackwell would fail: the frontend says so at the op's line instead of checking it."""
    import dataclasses

    from barrierproof.model.gluon import load
    from barrierproof.model.ir import ModelError
    data = import_file(os.path.join(DATA, "unseen_gluon.py"))
    for launch, target, what in ((data.roundtrip_ok, "cuda:80", "TMA .* does not exist on cuda:80"),
                                 (data.wgmma_ok, "cuda:100", "wgmma"),
                                 (data.ring_sum_ok, "cuda:1000", "compute capability"),
                                 (data.ring_sum_ok, "sm_100", "not a CUDA target")):
        with pytest.raises(ModelError, match=what) as err:
            load(dataclasses.replace(launch, target=target))
        if target in ("cuda:80", "cuda:100"):
            assert err.value.loc is not None and err.value.loc.file.endswith("unseen_gluon.py")


def test_a_param_named_like_a_pallas_keyword_says_how_to_declare_a_size(capsys):
    """A Pallas function's Python keywords are fixed when it is traced: `--param` naming one
    (here on a kernel with none) is refused with the way to declare a size (@sizes)."""
    pytest.importorskip("jax")
    from barrierproof.cli import main
    path = os.path.join(DATA, "unseen_pallas.py")
    assert main(["check", "--no-cache", "--param", "tiles=2", path + "::cluster_exchange"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "no protocol has parameter(s) tiles" in err
    assert "@sizes" in err
