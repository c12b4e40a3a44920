"""`prove` against the explorer on generated protocols (a differential test: the explorer is the
engine that decides every rule; the prover shares its IR, not its search).

Three families, each a correct protocol with switches that break it, some only at some sizes:
blocks of a cluster handing tiles over with remote arrives (BP146, BP100, BP103), warpgroups
taking turns on named barriers (BP142, BP144, BP100), and a TMA ring whose consumer reads its
slots (BP200). For every combination of switches: a `proved` must agree with the explorer at every point of a grid
of small sizes, and a `violation` must be a violation of the explorer at the values it names."""

from __future__ import annotations

import itertools

import pytest

from barrierproof import minimum
from barrierproof.checker.check import Options, check_kernel
from barrierproof.checker.engines.explore import Limits
from barrierproof.checker.symbolic.prove import prove_kernel
from barrierproof.model.dsl import protocol

GRID = range(0, 4)
PROVE = Options(Limits(timeout=20))


def cluster_handoff(m):
    @protocol(symbolic=("tiles",))
    def handoff(k, tiles=2):
        k.cluster(x=2)
        k.threads(1, name="wg")
        k.assume(tiles >= 0)
        full = k.Barrier(num_arrivals=1)
        empty = k.Barrier(num_arrivals=1)
        done = k.Barrier(num_arrivals=1)
        with k.when(k.block("x") == 0):
            with k.loop(tiles + 1) as i:
                with k.when(i >= 1):
                    k.barrier_wait(empty)
                k.arrive(full.on(1))
            if m["done_wait"]:
                k.barrier_wait(done)
        with k.otherwise():
            trips = tiles + 1 if m["trips"] == "all" else tiles
            with k.loop(trips) as i:
                k.barrier_wait(full)
                with k.when(i < tiles):
                    k.arrive(empty.on(0))
            k.arrive(done.on(0))
            if m["trailing"]:
                with k.when(tiles >= m["trailing_from"]):
                    k.arrive(empty.on(0))
        if m["final_sync"]:
            bye = k.ClusterBarrier(collective_axes="x", num_arrivals=1)
            k.barrier_arrive(bye)
            k.barrier_wait(bye)
    return handoff


def named_turns(m):
    @protocol(symbolic=("steps",))
    def turns(k, steps=2):
        k.threads(2, name="wg")
        k.assume(steps >= 0)
        mine = [k.named_barrier(1, 256), k.named_barrier(2, 256 if m["counts_agree"] else 128)]
        for c in (0, 1):
            with k.when(k.thread == c):
                if c == 1 and m["first_turn"]:
                    mine[0].arrive()
                with k.loop(steps) as i:
                    mine[c].sync()
                    if c == 0 and m["skip_last"]:
                        with k.when(i < steps - 1):
                            mine[1].arrive()
                    else:
                        mine[1 - c].arrive()
                if c == 0 and m["close"]:
                    mine[0].sync()                 # the turn handed over last
    return turns


def slot_ring(m):
    @protocol(symbolic=("steps",))
    def ring(k, steps=3, stages=2):
        k.threads(2, name="wg")
        k.assume(steps >= 0)
        full = k.Barrier(num_arrivals=1, num_barriers=stages)
        empty = k.Barrier(num_arrivals=1, num_barriers=stages)
        tiles = k.SMEM(slots=stages)
        with k.when(k.thread == 1):
            with k.loop(steps) as i:
                with k.when(i >= stages - m["early_refill"]):
                    k.barrier_wait(empty.at[i % stages])
                k.copy_gmem_to_smem(full.at[i % stages], bytes=4096, dst=tiles.at[i % stages])
            tail = minimum(steps, stages)          # drain the last releases
            with k.loop(tail) as j:
                k.barrier_wait(empty.at[(steps - tail + j) % stages])
        with k.otherwise():
            with k.loop(steps) as i:
                if m["read_first"]:
                    k.read(tiles.at[i % stages])
                k.barrier_wait(full.at[i % stages])
                if m["release_first"]:
                    k.barrier_arrive(empty.at[i % stages])
                k.read(tiles.at[i % stages])
                if not m["release_first"]:
                    k.barrier_arrive(empty.at[i % stages])
    return ring


def bare_turns(m):
    """A producer hands round r to consumer r % 2 and waits for its ack, every wait a bare
    parity bit: each consumer skips the other's phases of `data` on purpose, which only its
    turns make safe (the ping-pong's order barrier); the bits may be off by one."""
    @protocol(symbolic=("pairs",))
    def alternating(k, pairs=2):
        k.threads(3, name="wg")
        k.assume(pairs >= 0)
        data = k.Barrier(num_arrivals=1)
        ack = k.Barrier(num_arrivals=1)
        turn = k.Barrier(num_arrivals=1, num_barriers=2)
        with k.when(k.thread == 2):
            with k.loop(2 * pairs) as r:
                k.arrive(data)
                k.wait_parity(ack, (r + m["ack_bit"]) % 2)
        with k.otherwise():
            w = k.thread
            with k.loop(pairs) as i:
                if m["turns"]:
                    k.wait_parity(turn.at[w], (i - 1 + w + m["turn_bit"]) % 2)
                k.wait_parity(data, (2 * i + w + m["data_bit"]) % 2)
                k.arrive(ack)
                if m["turns"]:
                    k.arrive(turn.at[1 - w])
    return alternating


def bare_skip(m):
    """The waiter wants only the odd completions of `full`, with bare parity bits; `hold` keeps
    it from reaching its next wait before the completion it skips."""
    @protocol(symbolic=("steps",))
    def skipping(k, steps=2):
        k.threads(2, name="wg")
        k.assume(steps >= 0)
        full = k.Barrier(num_arrivals=1)
        ack = k.Barrier(num_arrivals=1)
        after = k.Barrier(num_arrivals=1)
        with k.when(k.thread == 0):
            with k.loop(steps) as i:
                k.arrive(full)
                k.wait_parity(ack, i % 2)
                k.arrive(full)
                if m["hold"]:
                    k.arrive(after)
        with k.otherwise():
            with k.loop(steps) as i:
                k.wait_parity(full, (2 * i + m["full_bit"]) % 2 if m["lap"] else m["full_bit"])
                k.arrive(ack)
                if m["hold"]:
                    k.wait_parity(after, i % 2)
    return skipping


def own_async(m):
    """One thread stages tiles in its own buffer for an access it waits for itself (a TMA store
    of the tile, or a WGMMA reading it), keeping up to `keep` of them in flight: safe iff no
    access still in flight reads the slot it writes next (`keep < slots`), or it only reads."""
    @protocol(symbolic=("tiles",))
    def staging(k, tiles=3):
        k.threads(1, name="wg")
        k.assume(tiles >= 0)
        buf = k.SMEM(slots=m["slots"])
        wait = k.wait_smem_to_gmem if m["kind"] == "store" else k.wgmma_wait
        with k.loop(tiles) as t:
            wait(m["keep"])
            (k.write if m["touch"] == "write" else k.read)(buf.at[t % m["slots"]])
            if m["kind"] == "store":
                k.copy_smem_to_gmem(buf.at[t % m["slots"]])
            else:
                k.wgmma(a=buf.at[t % m["slots"]])
        if m["drain"]:
            wait(0)
    return staging


# Every switch of every family: 128 protocols, each judged whole (a few minutes in all).
FAMILIES = {
    "cluster_handoff": (cluster_handoff, "tiles", dict(
        done_wait=[True, False], trips=["all", "fewer"], trailing=[True, False],
        trailing_from=[0, 2], final_sync=[True, False])),
    "named_turns": (named_turns, "steps", dict(
        counts_agree=[True, False], first_turn=[True, False], skip_last=[True, False],
        close=[True, False])),
    "slot_ring": (slot_ring, "steps", dict(
        early_refill=[0, 1], read_first=[True, False], release_first=[True, False])),
    "bare_turns": (bare_turns, "pairs", dict(
        turns=[True, False], ack_bit=[0, 1], turn_bit=[0, 1], data_bit=[0, 1])),
    "bare_skip": (bare_skip, "steps", dict(hold=[True, False], lap=[True, False],
                                           full_bit=[0, 1])),
    "own_async": (own_async, "tiles", dict(kind=["store", "wgmma"], slots=[1, 2], keep=[0, 1, 2],
                                           touch=["write", "read"], drain=[True, False])),
}
DRAWS = [(family, dict(zip(switches, combo)))
         for family, (_, _, switches) in FAMILIES.items()
         for combo in itertools.product(*switches.values())]


def _judge(family: str, m: dict) -> None:
    make, param, _ = FAMILIES[family]
    kernel = make(m).build()
    proof = prove_kernel(kernel, options=PROVE)
    if proof.verdict == "proved":
        for n in GRID:
            found = check_kernel(kernel, {param: n})
            assert found.verdict == "verified", (family, m, n, found.label, found.coverage)
    elif proof.verdict == "violation":
        again = check_kernel(kernel, {param: proof.params[param]})
        assert again.verdict == "violation" and again.codes == proof.codes, (family, m)
    else:
        assert proof.verdict == "unknown", (family, m, proof.verdict, proof.coverage)


@pytest.mark.parametrize("family,switches", DRAWS,
                         ids=[f"{f}-{'-'.join(str(v) for v in m.values())}" for f, m in DRAWS])
def test_prove_never_contradicts_the_explorer_on_generated_protocols(family, switches):
    _judge(family, switches)


def test_each_family_has_a_correct_member_that_is_proved():
    correct = {
        "cluster_handoff": dict(done_wait=True, trips="all", trailing=False, trailing_from=0,
                                final_sync=True),
        "named_turns": dict(counts_agree=True, first_turn=True, skip_last=False, close=False),
        "slot_ring": dict(early_refill=0, read_first=False, release_first=False),
        "bare_turns": dict(turns=True, ack_bit=0, turn_bit=0, data_bit=0),
        "bare_skip": dict(hold=True, lap=True, full_bit=0),
    }
    for family, m in correct.items():
        make, param, _ = FAMILIES[family]
        kernel = make(m).build()
        for n in GRID:
            assert check_kernel(kernel, {param: n}).verdict == "verified", (family, n)
        assert prove_kernel(kernel, options=PROVE).verdict == "proved", family
