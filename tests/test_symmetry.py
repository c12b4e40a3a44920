"""Block and thread symmetry: the canonical form is constant on orbits, every block symmetry is
an automorphism of the transition system, and verdicts, shortest counterexamples and replays do
not change (random cluster protocols, and the cluster examples)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barrierproof import protocol
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import explore
from barrierproof.checker.engines.symmetry import Symmetry
from barrierproof.loader import import_file
from barrierproof.model.interpreter import replay
from barrierproof.model.ir import BarrierAlloc, BarrierRef, Const, Kernel, Op, Var, When
from barrierproof.model.ir import ModelError
from barrierproof.model.semantics import System

from conftest import EXAMPLES
from test_properties import protocols as thread_protocols

OP_KINDS = ["barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_commit_arrive",
            "remote_arrive", "wait_parity"]


@st.composite
def cluster_protocols(draw):
    """Every block runs the same two roles, except that some ops only run in block 0 (which
    breaks the block symmetry) or name a peer block (`bar.on(0)`)."""
    blocks = draw(st.integers(2, 3))
    bars = []
    for i in range(draw(st.integers(1, 2))):
        cluster = draw(st.booleans())
        bars.append(BarrierAlloc(f"b{i}", Const(draw(st.integers(1, 2))),
                                 (Const(draw(st.integers(1, 2))),), orders_tensor_core=True,
                                 cluster=cluster, collective_axes=("x",) if cluster else (),
                                 scalar=False))

    def op():
        kind = draw(st.sampled_from(OP_KINDS))
        alloc = draw(st.sampled_from(bars))
        index = (Const(draw(st.integers(0, alloc.shape[0].value - 1))),)
        if alloc.cluster and kind in ("copy_gmem_to_smem", "tcgen05_commit_arrive"):
            kind = "barrier_arrive"
        block = None
        if kind == "remote_arrive":
            kind, block = "arrive", (Const(0),)
        multicast = ("x",) if draw(st.booleans()) and kind in (
            "copy_gmem_to_smem", "tcgen05_commit_arrive") else ()
        made = Op(kind, BarrierRef(alloc, index, block), bytes=Const(draw(st.sampled_from(
            [0, 192]))), parity=Const(draw(st.integers(0, 1))), collective_axes=multicast)
        if draw(st.integers(0, 5)) == 0:
            return When(Var("x") == 0, (made,), ())
        return made

    roles = [tuple(op() for _ in range(draw(st.integers(1, 3)))) for _ in range(2)]
    body = (When(Var("t") == 0, roles[0], roles[1]),)
    # Three threads only with two blocks: 3 x 3 agents make the unreduced search (and the one
    # without partial-order reduction that re-checks a counterexample) take minutes.
    threads = draw(st.integers(2, 3 if blocks == 2 else 2))
    return Kernel("random_cluster", body, tuple(bars), num_threads=Const(threads),
                  thread_axis="t", cluster=(("x", Const(blocks)),))


SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def reachable(system: System) -> set:
    """Every state of the unreduced space, violating states not expanded (as the explorer)."""
    init = system.initial_state()
    seen, frontier = {init}, [init]
    while frontier:
        nxt_frontier = []
        for state in frontier:
            if system.state_violations(state):
                continue
            for _, nxt, violation in system.successors(state):
                if violation is None and nxt not in seen:
                    seen.add(nxt)
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    return seen


def _model(kernel):
    try:
        return System(kernel)
    except ModelError:     # the generated protocol is rejected as input
        return None


@SETTINGS
@given(cluster_protocols())
def test_block_symmetries_are_automorphisms_and_canon_is_constant_on_orbits(kernel):
    system = _model(kernel)
    if system is None or system.findings:
        return
    symmetry = Symmetry(system)
    canon = symmetry.canonicalizer() or (lambda s: s)
    states = reachable(system)
    if len(states) > 1000:
        return
    for g in symmetry.blocks[1:]:
        apply = g.state_map(system)
        for state in states:
            image = apply(state)
            assert image in states                       # reachable maps to reachable
            assert canon(image) == canon(state)
            succ = {(g.action(system, a), apply(n)) for a, n, v in system.successors(state)
                    if v is None}
            assert succ == {(a, n) for a, n, v in system.successors(image) if v is None}
    for state in states:
        assert canon(canon(state)) == canon(state)
    # The quotient search visits exactly one state per orbit of the violation-free part.
    # (partial-order reduction off: it may skip states of an orbit altogether)
    result = explore(system, partial_order=False)
    if result.status == "verified":
        assert result.states == len({canon(s) for s in states})


@SETTINGS
@given(cluster_protocols())
def test_block_symmetry_keeps_verdicts_and_shortest_counterexamples(kernel):
    if _model(kernel) is None:
        return
    reduced = check_kernel(kernel, options=Options(reduction=True))
    full = check_kernel(kernel, options=Options(reduction=False))
    assert reduced.label == full.label, (reduced.label, full.label)
    assert reduced.states <= full.states
    if reduced.trace is not None and full.trace is not None:
        assert len(reduced.trace.steps) == len(full.trace.steps)
        run = replay(System(kernel), reduced.trace.actions, witness=reduced.trace.witness_actions)
        assert run.violation.code == reduced.codes[0]


def _example(name):
    module = import_file(f"{EXAMPLES}/cluster.py")
    return getattr(module, name).build()


def test_identical_blocks_are_permuted():
    system = System(_example("cluster_exchange"))
    symmetry = Symmetry(system)
    assert len(symmetry.blocks) == 2
    threads_only = explore(system, block_symmetry=False)
    both = explore(system)
    none = explore(system, reduction=False)
    assert both.status == threads_only.status == none.status == "verified"
    assert both.states < threads_only.states <= none.states


@protocol(expect="verified")
def peer_exchange(k, to_peer=1):
    k.cluster(x=2)
    k.threads(2, name="wg")
    ready = k.Barrier(num_arrivals=4 - 2 * to_peer)
    k.arrive(ready.on(to_peer * (1 - k.block("x"))))   # to_peer=0: all arrive on block 0
    with k.when(k.block("x") * (1 - to_peer) == 0):    # ... and only block 0 waits
        k.barrier_wait(ready)


def test_a_swap_is_kept_only_when_it_maps_each_block_onto_its_image():
    crossed = System(peer_exchange.build(), {"to_peer": 1})
    assert len(Symmetry(crossed).blocks) == 2      # each block arrives on its peer: symmetric
    one_sided = System(peer_exchange.build(), {"to_peer": 0})
    assert Symmetry(one_sided).blocks == []        # both arrive on block 0: no block symmetry
    for system in (crossed, one_sided):
        assert explore(system).status == explore(system, reduction=False).status == "verified"


@SETTINGS
@given(thread_protocols())
def test_incremental_canonical_form_equals_the_full_one(kernel):
    system = _model(kernel)
    if system is None:
        return
    symmetry = Symmetry(system)
    after_step, canon = symmetry.after_step(), symmetry.canonicalizer()
    if after_step is None:
        return
    for state in {canon(s) for s in reachable(system)}:
        for action, nxt, violation in system.successors(state):
            assert after_step(nxt, action) == canon(nxt)
