"""What a jaxpr variable holds while a kernel is translated (besides integer expressions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..expr import Expr
from ..ir import BarrierAlloc


@dataclass(frozen=True)
class BarrierVal:
    """A barrier allocation as the kernel sees it. A per-thread allocation (run_scoped without
    the thread axis among its collective axes) is one IR array with a leading thread dimension,
    which every reference indexes with the thread index (`prefix`)."""

    alloc: BarrierAlloc
    prefix: tuple[Expr, ...] = ()
    block: tuple[Expr, ...] | None = None


@dataclass(frozen=True)
class MemRef:
    """A non-barrier ref: enough to count the bytes a copy moves."""

    shape: tuple[int, ...]
    dtype: Any
    space: str


@dataclass(eq=False)
class Cell:
    """A scalar `Ref` of `pl.run_state` (a loop index passed in, say): reads give its value."""

    value: Expr
    control: int        # control depth it was created at; writes deeper make it data


@dataclass
class _Frame:
    """Translation context: where we are in the kernel."""

    tracebacks: tuple = ()
    loop_depth: int = 0
    control: int = 0     # enclosing conds and loops
