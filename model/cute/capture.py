"""Capture: run a target's `cute.compile` on the CPU and keep the kernel's MLIR before lowering.

The DSL turns the traced Python into an MLIR module in `BaseDSL.build_module`, then lowers it
to PTX and cubin. The frontend reads the module as built (cute, scf, arith and nvvm ops, with
the user's source lines when compiled with `--generate-line-info`), copies each kernel into a
plain tree (tree.py) and stops the compilation there: lowering would only cost time.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable

from ..ir import Loc, ModelError
from .tree import KernelTree, kernels_of_module

# nvidia-cutlass-dsl releases whose MLIR this frontend reads: at least the first, below the
# second. An op it does not know is BP190 at its line; a newer DSL can cost a verdict, not make
# one wrong.
DSL_RANGE = ((4, 8), (4, 9))


class _Captured(BaseException):
    """Raised from inside the compiler once the module is read: nothing after it runs."""


@dataclass
class Capture:
    kernels: list[KernelTree]
    seconds: float            # tracing the Python into MLIR, lowering not included


def _one_line(exc: BaseException) -> str:
    """The error the user's code raised (the DSL wraps it, over several coloured lines)."""
    import re
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _innermost_loc(exc: BaseException):
    """The user's line nearest to where the error was raised, cause by cause."""
    from .tree import loc_of_exception
    chain = [exc]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return next((loc for loc in map(loc_of_exception, reversed(chain)) if loc), None)


def check_dsl_version() -> None:
    from importlib import metadata
    try:
        version = metadata.version("nvidia-cutlass-dsl")
    except metadata.PackageNotFoundError:
        raise ModelError("the CuTe DSL frontend needs nvidia-cutlass-dsl",
                         hint="pip install 'barrierproof[cute]'") from None
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    low, high = DSL_RANGE
    if not low <= parts < high:
        raise ModelError(f"nvidia-cutlass-dsl {version} is outside the versions the CuTe "
                         f"frontend reads (>={'.'.join(map(str, low))},"
                         f"<{'.'.join(map(str, high))})",
                         hint="pip install 'barrierproof[cute]'")


def _plain(value):
    return value


@contextlib.contextmanager
def _plain_values():
    """Values as plain MLIR values while the frontend reads the module: the DSL casts a value
    of a CuTe type (layout, pointer, tensor) into a Python object whose construction builds IR,
    which corrupts the module being read."""
    from cutlass._mlir import ir
    from cutlass.cute import core, tensor
    from cutlass._mlir.dialects import cute as cute_ir, cute_nvgpu as cute_nvgpu_ir
    casters = [(cute_ir.SwizzleType, core.Swizzle), (cute_ir.LayoutType, core._Layout),
               (cute_ir.ComposedLayoutType, core._ComposedLayout),
               (cute_ir.PtrType, core._Pointer), (cute_ir.SparseElemType, core.SparseElem),
               (cute_ir.MemRefType, tensor._Tensor), (cute_ir.CoordTensorType, tensor._Tensor),
               (cute_nvgpu_ir.SmemDescViewType, tensor._Tensor)]
    for kind, _ in casters:
        ir.register_value_caster(kind.get_static_typeid(), replace=True)(_plain)
    try:
        yield
    finally:
        for kind, cast in casters:
            ir.register_value_caster(kind.get_static_typeid(), replace=True)(cast)


@contextlib.contextmanager
def _intercept(sink: list):
    from cutlass.base_dsl import dsl
    original = dsl.BaseDSL.build_module

    def build_module(self, *args, **kwargs):
        module = original(self, *args, **kwargs)
        with module.context, _plain_values():
            sink.extend(kernels_of_module(module))
        raise _Captured()
    dsl.BaseDSL.build_module = build_module
    try:
        yield
    finally:
        dsl.BaseDSL.build_module = original


def capture(fn: Callable, where: Loc | None = None) -> Capture:
    """Call `fn` (which compiles a CuTe DSL host function) and return the kernels it builds."""
    check_dsl_version()
    _takes_nothing(fn, where)
    kernels: list[KernelTree] = []
    start = time.perf_counter()
    try:
        with _intercept(kernels):
            fn()
    except _Captured:
        pass
    except ModelError:
        raise
    except Exception as exc:  # the user's kernel failed to trace: an input error at its line
        what = "compiling the CuTe DSL kernel failed" if _in_dsl(exc) else "the target raised"
        raise ModelError(f"{what}: {_one_line(exc)}", loc=_innermost_loc(exc) or where,
                         hint="the target must compile with cute.compile on a CPU: "
                              "make_fake_compact_tensor(...) for each cute.Tensor argument, "
                              "Python values for Constexpr ones") from None
    seconds = time.perf_counter() - start
    if not kernels:
        raise ModelError("the target compiled no CuTe DSL kernel", loc=where,
                         hint="call cute.compile on a @cute.jit function that launches a "
                              "@cute.kernel, and return its result")
    return Capture(kernels, seconds)


def _takes_nothing(fn: Callable, where: Loc | None) -> None:
    """A target is called with no arguments: one that needs some is refused by name."""
    import inspect
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    needed = [p.name for p in params if p.default is p.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if needed:
        raise ModelError(f"the CuTe DSL target takes arguments ({', '.join(needed)}); a target "
                         "is called with none", loc=where,
                         hint="give each a default, or wrap the call in a zero-argument "
                              "function that returns cute.compile(...)")


def _in_dsl(exc: BaseException) -> bool:
    """Whether the error was raised inside the DSL (a kernel that does not compile) rather than
    by the target's own code before it compiled anything."""
    import os
    import traceback

    import cutlass
    root = os.path.dirname(os.path.dirname(os.path.abspath(cutlass.__file__))) + os.sep
    chain = [exc]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return any(os.path.abspath(frame.filename).startswith(root)
               for e in chain for frame in traceback.extract_tb(e.__traceback__))
