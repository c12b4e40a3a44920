"""The stride rewrite of checker/symbolic/stride_split.py: consumers that take alternate k-blocks
of one ring (stride 2 beside the producer's stride 1) become, per residue of the trip count,
loops that all step one slot of a relabelled (sub-)ring per iteration. The rewrite must be the
same program: every case keeps the explorer's verdict (and first rule) at every point of a grid,
on the correct protocols and on their broken twins, and what it cannot rewrite it refuses with
a reason."""

from __future__ import annotations

import os
import re

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.stride_split import stride_cases
from barrierproof.checker.symbolic.stride_split import stride_mismatch
from barrierproof.model.dsl import protocol
from barrierproof.model.ir import Const, Loop, Op, walk


def _example(name):
    from barrierproof.loader import resolve
    from conftest import EXAMPLES
    (target,) = resolve(os.path.join(EXAMPLES, "patterns", "parity_skipping.py") + "::" + name)
    return target.build()


def _fixed(kernel, symbolic):
    return {n: p.default for n, p in kernel.params.items() if n not in symbolic}


def _residue(case):
    """(M, b) of a case labelled `K = M*X + b`."""
    _, rhs = case.label.split(" = ")
    m, b = rhs.split(" + ")
    return int(m.split("*")[0]), int(b)


def _agrees(case, k, fixed, K: str, xs) -> set:
    """The explorer's verdicts of `k` at K = M*x + b for x in xs, each the case's verdict (and
    first rule) at its parameter x."""
    m, b = _residue(case)
    (q,) = case.symbolic
    verdicts = set()
    for x in xs:
        got = check_kernel(case.kernel, {**fixed, q: x})
        want = check_kernel(k, {**fixed, K: m * x + b})
        assert (got.verdict, got.codes[:1]) == (want.verdict, want.codes[:1]), \
            (case.label, x, got.label, want.label)
        verdicts.add(want.verdict)
    return verdicts


# (example, its stage count for the rewrite: an even one, which the rewrite takes; the
# defaults of the odd-stage examples are refused, see below), whether it breaks on the grid
STRIDED = [("alternate_k_blocks", 4, False), ("alternate_k_blocks_in_turn", 4, False),
           ("alternate_k_blocks_no_turns_in_order", 4, False),
           ("alternate_k_blocks_overtaken", 4, False),
           ("alternate_k_blocks_odd_stages_shortcut", 6, False),
           ("bit_from_the_loop_index", 4, True), ("bit_flipped_one_block_early", 4, True)]


def _alternate(k, stages, k_blocks, bit):
    """Consumers on alternate k-blocks (as in the examples) with `bit(j, kb)` as the phase bit
    of consumer c's j-th block kb = 2j + c."""
    k.threads(3, name="wg")
    k.assume(k_blocks >= 0)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 2):
        with k.loop(k_blocks) as n:
            k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
            k.arrive_expect_tx(full.at[n % stages], 4096)
            k.tma_load(full.at[n % stages], 4096)
    with k.otherwise():
        c = k.thread
        with k.loop((k_blocks + 1 - c) // 2) as j:
            kb = 2 * j + c
            k.wait_parity(full.at[kb % stages], bit(j, kb, stages))
            k.arrive(empty.at[kb % stages])


@protocol(expect="violation:BP101", symbolic=("k_blocks",))
def bit_from_the_loop_index(k, stages=4, k_blocks=4):
    """The consumer's bit is j % 2 where its lap is j // 2 (tilelang#2927's shape)."""
    _alternate(k, stages, k_blocks, lambda j, kb, s: j % 2)


@protocol(expect="violation:BP101", symbolic=("k_blocks",))
def bit_flipped_one_block_early(k, stages=4, k_blocks=4):
    """The bit flips one block before the lap ends, ((kb + 1) // stages) % 2 (cutlass#2404's
    shape)."""
    _alternate(k, stages, k_blocks, lambda j, kb, s: ((kb + 1) // s) % 2)


@pytest.mark.parametrize("name,stages,breaks", STRIDED)
def test_every_residue_case_keeps_the_explorers_verdict_on_a_grid(name, stages, breaks):
    """~1-3 s each: 2 residues x 4 points (k_blocks 0..7), the rewritten and the original
    kernel checked; a broken one must break somewhere on the grid (else nothing is compared)."""
    k = globals()[name].build() if name in globals() else _example(name)
    fixed = {"stages": stages}
    cases, why = stride_cases(k, ["k_blocks"], fixed)
    assert why is None and cases, why
    verdicts = set()
    assert [c.label for c in cases] == ["k_blocks = 2*k_blocks_q + 0",
                                        "k_blocks = 2*k_blocks_q + 1"]
    for case in cases:
        # every loop on the rewritten rings steps one slot per iteration
        assert stride_mismatch(case.kernel, fixed) is None
        verdicts |= _agrees(case, k, fixed, "k_blocks", range(4))
    assert verdicts == ({"verified", "violation"} if breaks else {"verified"}), verdicts


def _deep_ring(offset=True, order=True, turn_bit=1, stages=3, k_tiles=2):
    """The ping-pong whose tile does not take whole laps of the ring (3 stages and 2 k-tiles:
    4 ring positions per tile; 4 and 3: 6 per tile), broken by the switches of
    tests/test_prove_bare_parity.py."""
    from test_prove_bare_parity import _pingpong
    s, kt = stages, k_tiles

    @protocol(expect="verified" if offset and order and turn_bit else "violation:BP101",
              symbolic=("tiles",))
    def deep_ring(k, stages=s, k_tiles=kt, tiles=2):
        _pingpong(k, stages, k_tiles, tiles, offset=offset, order=order, turn_bit=turn_bit)
    return deep_ring.build()


# a stride that does not divide the ring: strip-mined S / gcd(A, S) times further, to whole
# laps (every slot a number); (kernel, parameter, residues, whether it breaks on the grid)
WHOLE_LAPS = [(lambda: _example("alternate_k_blocks_in_turn"), "k_blocks", 6, False),
              (lambda: _example("alternate_k_blocks_odd_stages_shortcut"), "k_blocks", 6, True),
              (lambda: _example("pingpong_bare_parity_deep_ring"), "tiles_per_wg", 3, False),
              (lambda: _deep_ring(order=False), "tiles", 3, True),
              (lambda: _deep_ring(offset=False), "tiles", 3, True),
              # 6 positions per tile on 4 slots: two tiles per iteration, tiles modulo 2
              (lambda: _deep_ring(stages=4, k_tiles=3), "tiles", 2, False),
              (lambda: _deep_ring(stages=4, k_tiles=3, turn_bit=0), "tiles", 2, True)]


@pytest.mark.parametrize("make,K,M,breaks", WHOLE_LAPS, ids=[
    "in_turn", "odd_stages_shortcut", "deep_ring", "deep_ring_without_order",
    "deep_ring_not_offset", "ring_of_4_by_3", "ring_of_4_by_3_turns_not_offset"])
def test_a_stride_that_does_not_divide_the_ring_is_strip_mined_to_whole_laps(make, K, M, breaks):
    """~2-6 s each: stride 2 on 3 slots (the deep-ring ping-pong's 4 positions per tile on 3;
    its kin's 6 per tile on 4) becomes, per residue of K modulo M, loops that each take a
    multiple of the ring's size per iteration, so number_slots.py writes every slot as a
    number; each case keeps the explorer's verdict (and first rule) at q = 0, 1, 2 (a broken
    one at q = 0, where every residue already breaks but the empty one)."""
    from barrierproof.checker.symbolic.number_slots import number_slots
    k = make()
    fixed = _fixed(k, [K])
    cases, why = stride_cases(k, [K], fixed)
    assert why is None and [c.label for c in cases] == [f"{K} = {M}*{K}_q + {b}"
                                                        for b in range(M)], why
    verdicts = set()
    for case in cases:
        m, b = _residue(case)
        (q,) = case.symbolic
        # the case is made with its slots as numbers (every partition of the proof sees
        # them so), and number_slots.py finds nothing more to write
        for kernel in (case.kernel, number_slots(case.kernel, case.symbolic, fixed)):
            slots = [op.barrier.index for op in walk(kernel.body) if isinstance(op, Op)
                     and op.barrier is not None and op.barrier.alloc.name == "full"]
            assert slots and all(isinstance(i, Const) for ix in slots for i in ix), slots
        for x in range(1 if breaks else 3):
            got = check_kernel(case.kernel, {**fixed, q: x})
            want = check_kernel(k, {**fixed, K: m * x + b})
            assert (got.verdict, got.codes[:1]) == (want.verdict, want.codes[:1]), \
                (case.label, x, got.label, want.label)
            verdicts.add(want.verdict)
    assert verdicts == ({"verified", "violation"} if breaks else {"verified"}), verdicts


@pytest.mark.parametrize("stages,k_tiles", [(3, 2), (4, 3)])
def test_the_explorer_verifies_the_deep_rings_on_a_grid_of_tile_counts(stages, k_tiles):
    """~1-2 s each: what `prove` may claim for every tile count, the explorer finds at each of
    0..4 tiles per warpgroup (the example's ring and one more of its family); the twins whose
    turns are not offset break on the same grid from one tile on."""
    for n in range(5):
        values = {"stages": stages, "k_tiles": k_tiles, "tiles": n}
        v = check_kernel(_deep_ring(stages=stages, k_tiles=k_tiles), values)
        assert v.verdict == "verified", (values, v.label)
    broken = {n: check_kernel(_deep_ring(stages=stages, k_tiles=k_tiles, turn_bit=0),
                              {"stages": stages, "k_tiles": k_tiles, "tiles": n})
              for n in range(3)}
    assert [v.verdict for v in broken.values()] == ["verified", "violation", "violation"], \
        {n: v.label for n, v in broken.items()}
    assert broken[1].codes[:1] == ["BP101"], broken[1].label
    example = _example("pingpong_bare_parity_deep_ring")
    for n in range(5):
        assert check_kernel(example, {"tiles_per_wg": n}).verdict == "verified", n


def test_a_stride_that_needs_too_many_residues_is_refused_naming_the_phase_terms():
    """Stride 2 on 5 slots needs K modulo 10 to reach whole laps: past the limit of 8, the
    `unknown` says why the ring classes cannot read it as it is."""
    k = _example("alternate_k_blocks_in_turn")
    fixed = {**_fixed(k, ["k_blocks"]), "stages": 5}
    cases, why = stride_cases(k, ["k_blocks"], fixed)
    assert cases is None and "do not divide the 5 slots" in why, why
    assert "modulo 10" in why and "phase bit counts blocks" in stride_mismatch(k, fixed)


def test_an_even_ring_splits_into_one_sub_ring_per_consumer():
    """Stride 2 on 4 slots: two sub-rings of 2 (slots 0, 2 and 1, 3), each consumer's blocks
    in one of them, one slot per iteration; the phase bit is the sub-ring's lap."""
    k = _example("alternate_k_blocks")
    cases, _ = stride_cases(k, ["k_blocks"], {"stages": 4})
    case = cases[0]
    names = [a.name for a in case.kernel.barriers]
    assert {"full[0::2]", "full[1::2]", "empty[0::2]", "empty[1::2]"} <= set(names), names
    waits = [op.describe() for op in walk(case.kernel.body) if isinstance(op, Op)
             and op.kind == "wait_parity" and op.barrier.alloc.name.startswith("empty")]
    assert "wait_parity(empty[0::2][(n_t % 2)], parity=(((n_t // 2) + 1) % 2))" in waits, waits
    # the producer's loop, its tail over the 4 stages (2 sub-ring positions per iteration), the
    # consumers' loops
    loops = [repr(s.trip) for s in walk(case.kernel.body) if isinstance(s, Loop)]
    assert loops == ["k_blocks_q", "2", "k_blocks_q", "k_blocks_q"], loops


@protocol(expect="verified", symbolic=("k_blocks",))
def alternate_without_lower_bound(k, stages=4, k_blocks=4):
    """Correct, but nothing says k_blocks >= 0: k_blocks = 2q + b with q >= 0 would not cover
    negative values, so the rewrite refuses."""
    k.threads(3, name="wg")
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 2):
        with k.loop(k_blocks) as n:
            k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
            k.arrive(full.at[n % stages])
    with k.otherwise():
        c = k.thread
        with k.loop((k_blocks + 1 - c) // 2) as j:
            kb = 2 * j + c
            k.wait_parity(full.at[kb % stages], (kb // stages) % 2)
            k.arrive(empty.at[kb % stages])


@protocol(expect="verified", symbolic=("k_blocks",))
def alternate_on_a_symbolic_ring(k, stages=4, k_blocks=4):
    k.threads(3, name="wg")
    k.assume(k_blocks >= 0, stages >= 2)
    full = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    with k.when(k.thread == 2):
        with k.loop(k_blocks) as n:
            k.wait_parity(empty.at[n % stages], (n // stages + 1) % 2)
            k.arrive(full.at[n % stages])
    with k.otherwise():
        c = k.thread
        with k.loop((k_blocks + 1 - c) // 2) as j:
            kb = 2 * j + c
            k.wait_parity(full.at[kb % stages], (kb // stages) % 2)
            k.arrive(empty.at[kb % stages])


def test_the_rewrite_refuses_what_it_cannot_show_equal_and_says_why():
    k = alternate_without_lower_bound.build()
    cases, why = stride_cases(k, ["k_blocks"], {"stages": 4})
    assert cases is None and "k_blocks >= 0" in why, why
    assert "k_blocks >= 0" in stride_mismatch(k, {"stages": 4})
    k = alternate_on_a_symbolic_ring.build()
    cases, why = stride_cases(k, ["k_blocks", "stages"], {})
    assert cases is None and "symbolic size" in why, why


def test_the_overtaken_consumer_is_an_over_arrival_first_as_its_docstring_says():
    """~1 s: the over-arrival (16 steps) is shorter than the longer of the two schedules the
    parity alias needs (20 steps); ignoring BP121 shows the alias."""
    from barrierproof.checker.check import Options
    k = _example("alternate_k_blocks_overtaken")
    v = check_kernel(k)
    assert v.codes[:1] == ["BP121"] and len(v.trace.actions) == 16, (v.label, v.trace.actions)
    v = check_kernel(k, None, Options(ignore=frozenset({"BP121"})))
    assert v.codes[:1] == ["BP101"] and len(v.trace.actions) == 20, v.label
    assert v.trace.witness is not None


@pytest.mark.slow
def test_alternate_k_blocks_is_proved_for_every_k_blocks_and_agrees_with_the_explorer():
    """~25 s (the proof of two residue cases ~20 s, the explorer's cross-check and grid ~3 s):
    the example's consumers take alternate k-blocks of a ring of 4 with bare parity waits."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    k = _example("alternate_k_blocks")
    for n in range(6):
        assert check_kernel(k, {"k_blocks": n}).verdict == "verified", n
    v = prove_kernel(k)
    assert v.verdict == "proved", v.coverage
    assert "proved for all k_blocks" in v.coverage
    assert any("k_blocks = 2*k_blocks_q + 1" in n for n in v.notes), v.notes


@pytest.mark.parametrize("proto", [bit_from_the_loop_index, bit_flipped_one_block_early])
def test_broken_alternating_consumers_are_refuted_at_their_smallest_values(proto):
    """~2-5 s each: no proof (the residue cases fail), and the explorer's smallest breaking
    k_blocks, whose violation `check` confirms."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    k = proto.build()
    v = prove_kernel(k)
    assert v.verdict == "violation" and v.matches(proto.expect), (v.label, v.coverage)
    n = v.params["k_blocks"]
    again = check_kernel(k, {"k_blocks": n})
    assert again.verdict == "violation" and again.codes == v.codes
    assert all(check_kernel(k, {"k_blocks": m}).verdict == "verified" for m in range(n))


@pytest.mark.parametrize("stages,k_tiles", [(3, 2), (4, 3)])
def test_broken_deep_rings_are_refuted_at_their_smallest_tile_count(stages, k_tiles):
    """The twins whose order barriers start on one phase: `prove` refutes them at one tile per
    warpgroup, the smallest count where the explorer breaks them, and the violation replays."""
    from barrierproof.checker.check import Options
    from barrierproof.checker.symbolic.prove import prove_kernel
    from barrierproof.checker.engines.explore import Limits
    k = _deep_ring(stages=stages, k_tiles=k_tiles, turn_bit=0)
    v = prove_kernel(k, options=Options(Limits(timeout=60)))
    assert v.verdict == "violation" and v.codes[:1] == ["BP101"], (v.label, v.coverage)
    assert v.params["tiles"] == 1 and v.trace is not None, v.params
    again = check_kernel(k, {"stages": stages, "k_tiles": k_tiles, "tiles": 1})
    assert again.verdict == "violation" and again.codes == v.codes


# -- one stride in every loop: K then V of one ring ------------------------------------------

def _kv_ring(k, stages, blocks, flip):
    """A loader filling K then V of one ring of `stages` per block (two positions per
    iteration, as the Gluon attention's), an MMA thread reading both with the cursor's closed
    form for V's slot (`((2*i % S) + 1) % S`), and a softmax thread in a hand-off with it on
    the same trip count (a loop beside the ring's). `flip`: the loader waits `empty` with the
    consumer's phase (the field's wrong phase on `empty`)."""
    k.threads(3, name="wg")
    k.assume(blocks >= 0)
    ready = k.Barrier(num_arrivals=1, num_barriers=stages)
    empty = k.Barrier(num_arrivals=1, num_barriers=stages)
    s_ready = k.Barrier(num_arrivals=1)
    s_free = k.Barrier(num_arrivals=1)
    with k.when(k.thread == 0):
        with k.loop(blocks) as i:
            for j in range(2):
                n = 2 * i + j
                k.wait_parity(empty.at[n % stages], (n // stages + 1 + flip) % 2)
                k.arrive_expect_tx(ready.at[n % stages], 4096)
                k.tma_load(ready.at[n % stages], 4096)
    with k.when(k.thread == 1):
        with k.loop(blocks) as i:
            k.wait_parity(ready.at[(2 * i) % stages], ((2 * i) // stages) % 2)
            k.wait_parity(s_free, (i + 1) % 2)
            k.arrive(s_ready)
            k.arrive(empty.at[(2 * i) % stages])
            v = ((2 * i) % stages + 1) % stages
            k.wait_parity(ready.at[v], ((2 * i + 1) // stages) % 2)
            k.arrive(empty.at[v])
    with k.when(k.thread == 2):
        with k.loop(blocks) as i:
            k.wait_parity(s_ready, i % 2)
            k.arrive(s_free)


@protocol(expect="verified", symbolic=("blocks",))
def kv_ring(k, stages=3, blocks=4):
    _kv_ring(k, stages, blocks, 0)


@protocol(expect="violation:BP100", symbolic=("blocks",))
def kv_ring_empty_phase_flipped(k, stages=3, blocks=4):
    _kv_ring(k, stages, blocks, 1)


def test_one_ring_stride_that_does_not_divide_the_ring_is_strip_mined_to_whole_laps():
    """~2-4 s: K then V on 3 slots is 2 positions per iteration in every loop (no second
    stride, so strides.py's `strided_arrays` finds nothing): a case per residue of blocks
    modulo 3, every loop on the ring and the one beside it on the same trip count taking 3
    blocks per iteration, every slot a number and every phase bit a number or a loop's
    parity; each case keeps the explorer's verdict (and first rule) at q = 0, 1 (the broken
    twin breaks from blocks = 1 on)."""
    from barrierproof.checker.symbolic.strides import lap_arrays, strided_arrays
    for proto, breaks in ((kv_ring, False), (kv_ring_empty_phase_flipped, True)):
        k = proto.build()
        fixed = {"stages": 3}
        names = {a.name for a in k.barriers[:2]}       # `ready` and `empty`
        assert not strided_arrays(k, fixed) and lap_arrays(k, fixed) == names
        cases, why = stride_cases(k, ["blocks"], fixed)
        assert why is None and [c.label for c in cases] == [
            f"blocks = 3*blocks_q + {b}" for b in range(3)], why
        verdicts = set()
        for case in cases:
            loops = [s for s in walk(case.kernel.body) if isinstance(s, Loop)]
            assert [repr(lp.trip) for lp in loops] == ["blocks_q"] * 3, loops
            ring = [op for op in walk(case.kernel.body) if isinstance(op, Op)
                    and op.barrier is not None and op.barrier.alloc.name in names]
            assert all(isinstance(i, Const) for op in ring for i in op.barrier.index), ring
            bits = {repr(op.parity) for op in ring if op.parity is not None}
            assert all(re.fullmatch(r"[01]|\(\(?\w+( \+ 1\))? % 2\)", b) for b in bits), bits
            verdicts |= _agrees(case, k, fixed, "blocks", range(2))
        assert verdicts == ({"verified", "violation"} if breaks else {"verified"}), verdicts


def test_a_ring_at_numbered_slots_splits_into_hand_off_pairs_of_one_slot():
    """~4-40 s: in each residue case the K/V ring's slots are numbers, so the halves' partition
    (prove.py) splits the arrays a loop uses into one barrier per slot (partition.py
    `split_constant_arrays(looped=True)`, the same program: the explorer's verdict and first
    rule at q = 0, 1 are those of the case, on the correct ring and on its broken twin), and
    `role_components` keeps each slot's `ready` and `empty` a class of its own: a role that
    waits on the slot joins no half through it."""
    from barrierproof.checker.symbolic.partition import (handoff_components, role_components,
                                                         slot_of, split_constant_arrays)
    from barrierproof.checker.symbolic.fragment import Fragment
    for proto, breaks in ((kv_ring, False), (kv_ring_empty_phase_flipped, True)):
        k = proto.build()
        fixed = {"stages": 3}
        ring = [a.name for a in k.barriers[:2]]
        cases, _ = stride_cases(k, ["blocks"], fixed)
        verdicts = set()
        for case in cases:
            split = split_constant_arrays(case.kernel, fixed, looped=True)
            slots = {a.name: slot_of(a) for a in split.barriers if slot_of(a) is not None}
            assert sorted(slots) == sorted(f"{n}[{j}]" for n in ring for j in range(3))
            assert set(slots.values()) == set(ring)
            (q,) = case.symbolic
            for x in range(2):
                got = check_kernel(split, {**fixed, q: x})
                want = check_kernel(case.kernel, {**fixed, q: x})
                assert (got.verdict, got.codes[:1]) == (want.verdict, want.codes[:1]), \
                    (case.label, x, got.label, want.label)
                verdicts.add(want.verdict)
            frag = Fragment(split, case.symbolic, fixed)
            roles = frag.build_roles()
            names = [a.name for a in split.barriers]
            comp = handoff_components(roles, names, alike=True)
            for j in range(3):
                assert comp[f"{ring[0]}[{j}]"] == comp[f"{ring[1]}[{j}]"], comp
            assert len({comp[n] for n in slots}) == 3, comp
            joined = role_components(roles, names)
            assert joined is None or len({joined[n] for n in slots}) == 3, joined
        assert verdicts == ({"verified", "violation"} if breaks else {"verified"}), verdicts


def test_a_ring_stepped_slot_by_slot_or_by_a_divisor_is_no_lap_array():
    """The rewrite is for strides that neither divide the ring nor are a multiple of it: a
    ring of 4 taken 2 positions at a time, or 1, is left to the ring classes."""
    from barrierproof.checker.symbolic.strides import lap_arrays
    k = kv_ring.build()
    assert lap_arrays(k, {"stages": 4}) == set() and lap_arrays(k, {"stages": 6}) == set()
    assert lap_arrays(k, {"stages": 5}) == {a.name for a in k.barriers[:2]}


def test_a_broken_kv_ring_is_refuted_at_its_smallest_block_count():
    """~5-10 s: no proof (the residue cases fail), and the explorer's smallest breaking count,
    blocks = 1, which `check` confirms; below it the explorer verifies."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    k = kv_ring_empty_phase_flipped.build()
    v = prove_kernel(k)
    assert v.verdict == "violation" and v.matches(kv_ring_empty_phase_flipped.expect), v.label
    assert v.params["blocks"] == 1, v.params
    again = check_kernel(k, {"stages": 3, "blocks": 1})
    assert again.verdict == "violation" and again.codes == v.codes
    assert check_kernel(k, {"stages": 3, "blocks": 0}).verdict == "verified"


@pytest.mark.slow
def test_the_kv_ring_is_proved_for_every_block_count_and_agrees_with_the_explorer():
    """~60-150 s (three residue cases of 4 classes each): `prove` claims no more than the
    explorer finds, which verifies every count 0..5."""
    from barrierproof.checker.symbolic.prove import prove_kernel
    k = kv_ring.build()
    for n in range(6):
        assert check_kernel(k, {"stages": 3, "blocks": n}).verdict == "verified", n
    v = prove_kernel(k)
    assert v.verdict == "proved", v.coverage
    assert any("blocks = 3*blocks_q + 2" in n for n in v.notes), v.notes
