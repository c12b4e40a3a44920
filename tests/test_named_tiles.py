"""Tiles separated by named barriers (checker/symbolic/named_tiles.py): warp-specialized tiles x K
nests on bar.sync / bar.arrive with a per-tile epilogue are proved for every tile count and K,
the explorer agreeing on a grid; tiles whose named barriers run their phases across tiles are
refused and refuted at their smallest breaking sizes."""

import os
import types

import pytest

from barrierproof.checker.check import check_kernel
from barrierproof.checker.symbolic.tiles import tile_loop, why_not
from conftest import ROOT
from prove_files import build, prove, source_file

SOURCE = '''from barrierproof import protocol


def _mainloop(k, ksteps, loaded, freed, producer):
    with k.when(producer):
        with k.loop(ksteps):
            loaded.arrive()
            freed.sync()
    with k.otherwise():
        with k.loop(ksteps):
            loaded.sync()
            freed.arrive()


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def epilogue_after_k_loop(k, tiles=2, ksteps=2):
    """Per tile: the K loop's hand-over, then the consumer signals its stored accumulator to
    the producer on a fourth named barrier, then a joint epilogue sync."""
    k.threads(2, name="wg")
    k.assume(tiles >= 0, ksteps >= 0)
    loaded, freed = k.named_barrier(1, 256), k.named_barrier(2, 256)
    epilogue, stored = k.named_barrier(3, 256), k.named_barrier(4, 256)
    with k.loop(tiles):
        _mainloop(k, ksteps, loaded, freed, k.thread == 0)
        with k.when(k.thread == 0):
            stored.sync()
        with k.otherwise():
            stored.arrive()
        epilogue.sync()


@protocol(expect="verified", symbolic=("tiles", "ksteps"))
def syncthreads_epilogue(k, tiles=2, ksteps=2, consumers=1):
    """A producer and consumer warpgroups, each tile closed by __syncthreads() (a named
    barrier 0 counting the whole block)."""
    k.threads(1 + consumers, name="wg")
    k.assume(tiles >= 0, ksteps >= 0)
    n = 128 * (1 + consumers)
    loaded, freed = k.named_barrier(1, n), k.named_barrier(2, n)
    with k.loop(tiles):
        _mainloop(k, ksteps, loaded, freed, k.thread == 0)
        k.syncthreads()


@protocol(expect="violation:BP100", symbolic=("tiles", "ksteps"))
def prefetch_signal_after_epilogue(k, tiles=2, ksteps=2):
    """The producer signals `loaded` once more after the epilogue (a prefetch for the next
    tile): harmless in the last tile, but in the next one it completes a phase of `loaded`
    with the producer's own arrival, and the consumer's sync waits in the phase after."""
    k.threads(2, name="wg")
    k.assume(tiles >= 0, ksteps >= 0)
    loaded, freed = k.named_barrier(1, 256), k.named_barrier(2, 256)
    epilogue = k.named_barrier(3, 256)
    with k.loop(tiles):
        _mainloop(k, ksteps, loaded, freed, k.thread == 0)
        epilogue.sync()
        with k.when(k.thread == 0):
            loaded.arrive()
'''


source = source_file(SOURCE, "named_tiles.py")


def _prove(capsys, target):
    return prove(capsys, target, "--timeout", "60")


@pytest.mark.parametrize("name", ["epilogue_after_k_loop", "syncthreads_epilogue",
                                  "examples/prove_field.py::named_barriers_nested_tile_k"])
def test_named_barrier_tiles_are_proved_for_every_size_and_the_explorer_agrees(
        source, capsys, name):
    path, name = name.split("::") if "::" in name else (source, name)
    path = os.path.join(ROOT, path)
    code, report = _prove(capsys, f"{path}::{name}")
    assert (code, report["verdict"]) == (0, "proved"), report
    assert "all tiles, ksteps" in report["coverage"]
    (how,) = [n for n in report["notes"] if n.startswith("per tile (tiles)")]
    assert "checked by Z3" in how and "named_tiles.py" in how
    kernel = build(path, name)
    for tiles in range(4):
        for ksteps in range(4):
            found = check_kernel(kernel, {"tiles": tiles, "ksteps": ksteps})
            assert found.verdict == "verified", (tiles, ksteps, found.label)


def test_named_barriers_left_open_across_tiles_are_refused_and_refuted(source, capsys):
    kernel = build(source, "prefetch_signal_after_epilogue")
    why = why_not(kernel, tile_loop(kernel.body, "tiles"), {}, ["ksteps"])
    assert why == "a thread does not end its tile with a bar.sync outside loops"
    # one tile is clean at every K; two break at K = 1 (at K = 0 the extra arrivals pair up)
    for ksteps in range(4):
        assert check_kernel(kernel, {"tiles": 1, "ksteps": ksteps}).verdict == "verified"
    assert check_kernel(kernel, {"tiles": 2, "ksteps": 0}).verdict == "verified"
    assert check_kernel(kernel, {"tiles": 2, "ksteps": 1}).label == "violation:BP100"
    code, report = _prove(capsys, f"{source}::prefetch_signal_after_epilogue")
    assert (code, report["verdict"]) == (1, "violation")
    assert report["params"] == {"tiles": 2, "ksteps": 1}


def test_unmatched_arrivals_in_a_tile_are_found_by_z3(source):
    """The consumer's K loop one step short: `loaded` gets 2K - 1 arrivals of 128 threads per
    tile, not a multiple of 256 for every K, so its phases would run across tiles."""
    text = SOURCE.replace("def _mainloop(k, ksteps, loaded, freed, producer):",
                          "def _mainloop(k, ksteps, loaded, freed, producer, short=1):")
    text = text.replace("""        with k.loop(ksteps):
            loaded.sync()""", """        with k.loop(ksteps - short):
            loaded.sync()""")
    module = types.ModuleType("short_named")
    exec(compile(text, "short_named.py", "exec"), module.__dict__)
    kernel = module.epilogue_after_k_loop.build()
    why = why_not(kernel, tile_loop(kernel.body, "tiles"), {}, ["ksteps"])
    assert why is not None and "arrivals on named barrier 1 in one tile are not a multiple" in why


def test_two_consumer_tiles_are_separated(source):
    """With two consumer warpgroups (counts of 384) the tiles are still separated; proving the
    one tile of three roles is the class prover's business (it does not close within 60 s)."""
    kernel = build(source, "syncthreads_epilogue")
    assert why_not(kernel, tile_loop(kernel.body, "tiles"), {"consumers": 1}, ["ksteps"]) is None
    assert why_not(kernel, tile_loop(kernel.body, "tiles"), {"consumers": 2}, ["ksteps"]) is None
