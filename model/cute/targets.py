"""Targets: a zero-argument function that compiles a CuTe DSL kernel on the CPU.

`load(fn)` calls it, captures the MLIR of every kernel it compiles (capture.py) and translates
each (translate.py). A target returns `cute.compile(host, *fake_args, options=...)`; compile
with `--generate-line-info` for the user's source lines (load adds it when the target passes
no options, see `compile_options`). The kernels must live in real files (the DSL reads their
source).
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable

from ..built import built_once
from ..ir import Kernel, Loc, ModelError
from .tree import _display

LINE_INFO = "--generate-line-info"


def _loc_of(fn: Callable, name: str) -> Loc | None:
    code = getattr(fn, "__code__", None)
    return Loc(_display(code.co_filename), code.co_firstlineno, name) if code else None


@contextlib.contextmanager
def compile_options():
    """Every `cute.compile` inside gets `--generate-line-info`: locations are what the
    frontend reports, and the DSL records them only with it."""
    import cutlass.cute as cute
    original = cute.compile

    class _WithLines:
        def __getitem__(self, item):
            return original[item]

        def __call__(self, *args, options: str | None = None, **kwargs):
            options = options or ""
            if LINE_INFO not in options:
                options = (options + " " + LINE_INFO).strip()
            return original(*args, options=options, **kwargs)
    cute.compile = _WithLines()
    try:
        yield
    finally:
        cute.compile = original


def load(fn: Callable, name: str | None = None, expect: str | None = None) -> list[Kernel]:
    """The IR of every kernel `fn` compiles, in compile order; compiled once per process for an
    unchanged file (a DSL compile takes about a second)."""
    name = name or getattr(fn, "__name__", "kernel")
    return built_once(fn, (name, expect), lambda: _compiled(fn, name, expect))


def _compiled(fn: Callable, name: str, expect: str | None) -> list[Kernel]:
    from .capture import capture
    from .translate import kernel_ir
    where = _loc_of(fn, name)
    with compile_options():
        captured = capture(fn, where)
    start = time.perf_counter()
    kernels = []
    for tree in captured.kernels:
        kernel = kernel_ir(tree, expect)
        spent = captured.seconds + time.perf_counter() - start
        kernels.append(kernel.replace(notes=kernel.notes + (
            f"CuTe DSL: traced and translated in {spent:.2f} s",)))
    if len(kernels) == 1:
        kernels[0] = kernels[0].replace(name=name)
    return kernels


def trace_function(fn: Callable, name: str | None = None, expect: str | None = None) -> Kernel:
    """The one kernel a target compiles (the CLI's `file.py::NAME`)."""
    name = name or getattr(fn, "__name__", "kernel")
    kernels = load(fn, name, expect)
    if len(kernels) > 1:
        raise ModelError(f"{name} compiles {len(kernels)} kernels "
                         f"({', '.join(k.name for k in kernels)}); check them one by one",
                         loc=_loc_of(fn, name), hint="compile one kernel per target function")
    return kernels[0]


def claims(fn) -> bool:
    """Is this function a CuTe DSL target? Its module imported the DSL (`import cutlass`,
    `cutlass.cute as cute`) and not JAX: read from the module, importing nothing."""
    import sys
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if module is None:
        return False
    roots = {(getattr(v, "__name__", "") or "").split(".")[0] for v in vars(module).values()
             if isinstance(v, type(sys))}
    return "cutlass" in roots and "jax" not in roots
