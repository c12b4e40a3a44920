"""The values the Gluon translator tracks besides integers: allocations and the memory
descriptors into them, and the signal that an operand cannot be followed."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir import Expr, Loc

# A loop-carried value while its loop is translated; replaced by its closed form after.
CARRY_PREFIX = "%"

_ELEM_BYTES = {"i1": 1, "i8": 1, "f8E4M3FN": 1, "f8E5M2": 1, "f16": 2, "bf16": 2, "i16": 2,
               "f32": 4, "i32": 4, "tf32": 4, "f64": 8, "i64": 8}


@dataclass(frozen=True)
class Alloc:
    """A `ttg.local_alloc` / `ttng.tmem_alloc`: its name in the kernel, dims, element type."""

    name: str
    dims: tuple[int, ...]
    elem: str
    space: str
    loc: Loc


@dataclass(frozen=True)
class Mem:
    """A memory descriptor: an allocation with its leading dimensions indexed; in tensor
    memory also the 32-bit columns of a row it spans (`[lo, hi)`: a `.slice` of a tile, or a
    `.reinterpret` of one as another element type) and the bytes of its view's elements; in
    shared memory, for a view that is not a slot (smem_views), the bytes `[lo, hi)` of the
    allocation it spans (`window`), or of the slot its symbolic index names (`span`)."""

    alloc: Alloc
    index: tuple[Expr, ...] = ()
    cols: tuple[int, int] | None = None
    elem_bytes: int = 4
    window: tuple[int, int] | None = None
    span: tuple[int, int] | None = None


class Unread(Exception):
    """An operand the translator cannot follow: the op becomes BP190 with this reason."""


def _memdesc(text: str) -> tuple[tuple[int, ...], str] | None:
    """Dims and element type of the last `!ttg.memdesc<AxBxT, ...>` on a line."""
    found = re.findall(r"memdesc<((?:\d+x)*)(\w+)\s*[,>]", text)
    if not found:
        return None
    dims, elem = found[-1]
    return tuple(int(d) for d in dims.split("x") if d), elem
