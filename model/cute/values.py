"""What one warp's SIMT code computes, as far as its synchronization needs it.

A value is an `int` (the same in every lane), `Lanes` (one int per lane: the thread index and
what is computed from it), a `Ptr` into shared memory (an allocation and a byte offset, how a
barrier is named), an `Atom` (a copy atom, with the mbarrier a TMA copy arrives on), a tuple
(a CuTe int tuple) or `Unknown` (data, or an op the frontend does not evaluate). Unknown is only
an error where it decides synchronization: a branch, a trip count, a barrier, a count.
"""

from __future__ import annotations

from dataclasses import dataclass

WARP = 32


@dataclass(frozen=True)
class Lanes:
    values: tuple[int, ...]          # one per lane, lane 0 first

    def __getitem__(self, lane: int) -> int:
        return self.values[lane]


@dataclass(frozen=True)
class Unknown:
    why: str                         # what the value came from, for the BP190 message


@dataclass(frozen=True)
class Tested(Unknown):
    """The answer of a non-blocking try_wait / test_wait on `barrier` for `parity`: unknown
    until run time, but it is `failed_when` exactly when the phase had not completed (kept
    through negations, so `if not try_wait(...): wait(...)` can be read as the wait it is)."""

    barrier: tuple = ()
    parity: int = 0
    failed_when: int = 0


@dataclass(frozen=True)
class Ptr:
    buffer: str                      # the shared-memory allocation
    offset: int                      # bytes from its start
    elem_bytes: int
    space: str = "smem"


@dataclass(frozen=True)
class Data(Unknown):
    """A tensor or pointer into a shared-memory buffer that holds data (smem.py): unknown to
    everything that synchronizes (`why` is what the value was before data was tracked), but
    its position is kept for the footprint of the accesses made through it. `offset`: bytes
    from the buffer's start, an int, Lanes (one per lane), or None (not followed: the whole
    buffer)."""

    buffer: str = ""
    offset: object = None
    elem_bytes: int = 1
    # an MMA's shared-memory descriptors (`make_fragment_A`): the layout of the tensor they
    # were made from, (shape, stride, swizzle block), which a slice of them slices too
    desc: object = None


@dataclass(frozen=True)
class Coord(Unknown):
    """A CuTe coordinate (`cute.make_coord`): nested tuples of ints, Lanes, Unknown and `_`;
    unknown to everything but the slices and element accesses that read it (smem.py)."""

    tree: object = None


@dataclass(frozen=True)
class Layout:
    """A layout whose shape is known (a tile scheduler's problem layout, built in the kernel
    from the tile counts it was given): what `cute.size` of it needs."""

    shape: object                    # an int, a tuple of ints, or Unknown


@dataclass(frozen=True)
class Atom:
    kind: str                        # "tma_load", "tma_store", "other"
    text: str                        # its MLIR type
    barrier: object = None           # the Ptr set by set_value<tma_bar>


def uniform(value, active: tuple[int, ...]):
    """The value if every active lane agrees on it, else None (Lanes) or the value itself."""
    if isinstance(value, Lanes):
        seen = {value[lane] for lane in active}
        return seen.pop() if len(seen) == 1 else None
    return value


def lane_values(value, lane: int):
    return value[lane] if isinstance(value, Lanes) else value


def lift(fn, *args):
    """Apply an integer function lane by lane; Unknown in, Unknown out."""
    for a in args:
        if isinstance(a, Unknown):
            # a test's answer, a data pointer or a coordinate is no operand of arithmetic
            return Unknown(a.why) if isinstance(a, (Tested, Data, Coord)) else a
    if not all(isinstance(a, (int, Lanes)) for a in args):
        kinds = ", ".join(type(a).__name__ for a in args)
        return Unknown(f"integer arithmetic on ({kinds})")
    if any(isinstance(a, Lanes) for a in args):
        out = tuple(fn(*(lane_values(a, lane) for a in args)) for lane in range(WARP))
        return out[0] if len(set(out)) == 1 else Lanes(out)
    return fn(*args)


_ELEM_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2,
               "f32": 4, "f64": 8, "tf32": 4, "f8E4M3FN": 1, "f8E5M2": 1, "f8E4M3": 1,
               "f8E8M0FNU": 1, "f4E2M1FN": 1, "f6E2M3FN": 1, "f6E3M2FN": 1}


def elem_bytes(type_text: str) -> int | None:
    """The element size of a `!cute.ptr<T, ...>` or `!cute.memref<T, ...>` type."""
    import re
    m = re.search(r"<\s*([A-Za-z0-9]+)\s*,", type_text)
    return _ELEM_BYTES.get(m.group(1)) if m else None
