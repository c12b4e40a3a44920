"""compile_systems compiles one grid position per class of `position_key` (positions at which
every expression the position enters has the same value): the Systems it returns are those of
compiling every position and keeping one per distinct program, and a position whose key cannot
be read off the expressions alone is compiled apart."""

from barrierproof.model import semantics
from barrierproof.model.dsl import protocol
from barrierproof.model.grid import grid_positions, position_key
from barrierproof.model.ir import Loop, Var


@protocol
def tiles(k):
    """Persistent-style: the first two clusters run one tile more; every third cluster's first
    tile takes a different barrier (a grid axis beside a loop variable)."""
    k.threads(2)
    k.grid(x=6)
    bars = k.Barrier(num_arrivals=1, num_barriers=2)
    x = k.program_id("x")
    with k.loop((x < 2) + 1) as i:
        with k.when((x % 3 == 0) & (i == 0)):
            handoff(k, bars.at[1])
        with k.otherwise():
            handoff(k, bars.at[0])


def handoff(k, bar):
    with k.when(k.thread == 0):
        k.barrier_arrive(bar)
    with k.otherwise():
        k.barrier_wait(bar)


def every_position(kernel):
    """The Systems compile_systems returned before positions were keyed: every position
    compiled, the first of each distinct program kept."""
    seen = {}
    values = kernel.param_values()
    for position in grid_positions(kernel, values):
        system = semantics.System(kernel, values, position)
        seen.setdefault(tuple(system.programs), system)
    return list(seen.values())


def summary(systems):
    return [(s.grid_position, s.programs) for s in systems]


def test_positions_alike_compile_once_with_the_same_systems(monkeypatch):
    kernel = tiles.build()
    key = position_key(kernel, kernel.param_values())
    keys = [key(p) for p in grid_positions(kernel, {})]
    # x: 0 (2 tiles, first apart), 1 (2 tiles), 2, 4, 5 (1 tile), 3 (1 tile, first apart)
    assert len(set(keys)) == 4 and keys[2] == keys[4] == keys[5] != keys[3]
    built = []
    real = semantics.System
    monkeypatch.setattr(semantics, "System", lambda *a, **kw: built.append(a[2]) or real(*a, **kw))
    systems = semantics.compile_systems(kernel)
    assert len(built) == 4
    monkeypatch.setattr(semantics, "System", real)
    assert summary(systems) == summary(every_position(kernel))


def test_an_axis_the_program_rebinds_keys_every_position_apart():
    kernel = tiles.build()
    shadowed = kernel.replace(body=(Loop("x", Var("x") + 1, kernel.body),))
    key = position_key(shadowed, shadowed.param_values())
    assert len({key(p) for p in grid_positions(shadowed, {})}) == 6


def test_an_expression_that_fails_at_a_position_keys_it_apart():
    @protocol
    def guarded(k):
        k.threads(2)
        k.grid(x=3)
        bars = k.Barrier(num_arrivals=1, num_barriers=2)
        x = k.program_id("x")
        with k.when(x > 0):
            with k.when(k.thread == 0):
                k.barrier_arrive(bars.at[2 // x - 1])     # no value at x = 0, never reached there
    kernel = guarded.build()
    key = position_key(kernel, {})
    assert key({"x": 0})[0] == "apart" and key({"x": 1}) != key({"x": 2})
    assert summary(semantics.compile_systems(kernel)) == summary(every_position(kernel))
