"""A Gluon kernel launch declared for checking: the kernel, its arguments, its target.

Nothing here imports Triton, so the loader can recognise a declared launch in any file; the
kernel is compiled (compile.py) only when it is checked.

>>> d = tensor_desc("fp16", [128, 64])
>>> d.nbytes
16384
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

_DTYPE_BYTES = {"fp8e4nv": 1, "fp8e5": 1, "i8": 1, "u8": 1, "fp16": 2, "bf16": 2, "i16": 2,
                "fp32": 4, "i32": 4, "tf32": 4, "fp64": 8, "i64": 8}


@dataclass(frozen=True)
class TensorDesc:
    """A TMA tensor descriptor argument: element type and block shape (what the kernel's
    `desc.block_type` says), with the NVMMA shared layout Triton picks by default."""

    dtype: str
    block_shape: tuple[int, ...]
    layout: Any = None           # a gl.NVMMASharedLayout; None: the default for the block
    shape: tuple[int, ...] | None = None   # the global tensor's shape (`desc.shape`), if used

    @property
    def nbytes(self) -> int:
        return math.prod(self.block_shape) * _DTYPE_BYTES[self.dtype]


def tensor_desc(dtype: str, block_shape: Sequence[int], layout: Any = None,
                shape: Sequence[int] | None = None) -> TensorDesc:
    """A descriptor argument; `shape` gives `desc.shape` (a parameter of the model when a loop
    bound depends on it)."""
    if dtype not in _DTYPE_BYTES:
        from ..ir import ModelError
        raise ModelError(f"tensor_desc: unknown element type {dtype!r}",
                         hint=f"one of {', '.join(_DTYPE_BYTES)}")
    return TensorDesc(dtype, tuple(int(n) for n in block_shape), layout,
                      None if shape is None else tuple(int(n) for n in shape))


@dataclass(frozen=True)
class Launch:
    """`Launch(kernel, args={...})`: check `kernel` (a `@gluon.jit` function, or a `@triton.jit`
    one, compiled with Triton's own warp specialization) as launched with
    `args` (descriptors via `tensor_desc`, ints, constexpr values by name).

    Integer runtime arguments become parameters of the model, with the given value as their
    default; those named in `symbolic` (all of them unless given) are quantified by `prove`.
    `grid` gives `gl.num_programs` per axis (`gl.program_id` becomes a parameter below it).
    `assume` states the range a proof covers, as a function of the integer arguments named by
    its parameters (a descriptor's global shape as `desc_shape_0`, ...), returning a condition
    or a list of them: `assume=lambda K: K >= 64`."""

    kernel: Any
    args: Mapping[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 3          # a `tl` kernel's software pipelining depth
    target: str = "cuda:100"
    grid: tuple[int, ...] = (1,)
    symbolic: tuple[str, ...] | None = None
    name: str | None = None
    assume: Callable[..., Any] | None = None
    # (file, line) of the `Launch(...)` call, where an error in its arguments is reported
    site: tuple[str, int] | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "site", _caller())

    def __hash__(self) -> int:
        return id(self)


def _caller() -> tuple[str, int] | None:
    """The first frame outside this module and `dataclasses` (`dataclasses.replace` builds a
    launch too): the user's line."""
    import dataclasses
    skip = {os.path.abspath(__file__), os.path.abspath(dataclasses.__file__)}
    frame = sys._getframe(1)
    while frame is not None and (os.path.abspath(frame.f_code.co_filename) in skip
                                 or frame.f_code.co_filename.startswith("<")):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None


def is_launch(obj: Any) -> bool:
    return isinstance(obj, Launch)
