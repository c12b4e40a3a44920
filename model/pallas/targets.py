"""Targets: import a file, read its EXPECT table, trace a target function, return its kernels.

`load(fn)` traces a zero-argument function with the device facts of an H100 and translates every
Mosaic GPU kernel it launches; `load_target("file.py::NAME")` does the same for the CLI.
Importing this module does not import JAX (the loader reads EXPECT tables without it).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
from typing import Any, Callable

from ..declaration import VERDICTS, is_verdict
from ..ir import Kernel, Loc, ModelError, UNKNOWN_LOC
from .device import DEFAULT_CORE_COUNT, device_facts, device_facts_of
from .locations import _display_path, _loc_from_exception, _loc_of_function
from .primitives import _SYNC_CACHE, check_jax_version
from .translate import kernels_from_jaxpr

_EXPECT_TRACE_ERRORS = (
    # (pattern in a tracing error, diagnostic code, one-line message, help)
    ("MMA barrier must have orders_tensor_core", "BP110",
     "tcgen05 arrival on a Barrier that does not order the tensor core "
     "(JAX: \"MMA barrier must have orders_tensor_core set to True.\")",
     "declare the barrier with plgpu.Barrier(..., orders_tensor_core=True)"),
)


def trace(fn: Callable, *args, core_count: int = DEFAULT_CORE_COUNT,
          device_count: int | None = None, **kwargs):
    """`jax.make_jaxpr(fn)(*args)` with the device facts a GPU kernel asks for.

    A tracing error that JAX raises for a rule barrierproof checks (tcgen05 on a barrier without
    orders_tensor_core) becomes a ModelError with that rule's code and the kernel's line.
    """
    import jax
    check_jax_version(jax.__version__)
    try:
        # jax caches a trace by the function object and the arguments' shapes: a target that
        # reads its sizes from globals changed since the last trace would get the stale one
        @functools.wraps(fn)
        def fresh(*a, **kw):
            return fn(*a, **kw)
        with device_facts(core_count, device_count):
            return jax.make_jaxpr(fresh)(*args, **kwargs)
    except ModelError:
        raise
    except (Exception, SystemExit) as exc:     # sys.exit() in a kernel function, too
        text = (f"{type(exc).__name__}: {exc}".splitlines() or [type(exc).__name__])[0]
        loc = _loc_from_exception(exc)
        if loc == UNKNOWN_LOC:
            loc = _loc_of_function(fn) or loc
        for pattern, code, message, hint in _EXPECT_TRACE_ERRORS:
            if pattern in str(exc):
                raise ModelError(message, loc=loc, hint=hint, code=code) from exc
        raise ModelError(f"tracing failed: {text}", loc=loc,
                         hint="the function must trace with jax.make_jaxpr on a CPU") from exc


def _check_arity(fn: Callable, name: str) -> None:
    """A target is called with no arguments: say so before tracing, at its `def` line."""
    import inspect
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    required = [p.name for p in sig.parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                       p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        raise ModelError(f"{name} takes arguments ({', '.join(required)}); a kernel target is "
                         "called with none", loc=_loc_of_function(fn),
                         hint="give every argument a default, or wrap the call in a "
                              "zero-argument function that builds the inputs")


VERDICT_NAMES = VERDICTS


def check_expect(expect: Any, name: str, where: Loc | None = None) -> None:
    """An `EXPECT` entry must be a verdict label such as "verified" or "violation:BP101"."""
    if not is_verdict(expect):
        raise ModelError(f"EXPECT[{name!r}] = {expect!r} is not a verdict", loc=where,
                         hint="use e.g. 'verified', 'unknown', 'violation:BP100' or "
                              "'error:BP120'")


def expect_loc(path: str | None) -> Loc | None:
    """The line of a module's `EXPECT = {...}`, for errors about it."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if re.match(r"EXPECT\s*(:[^=]*)?=", line):
                    return Loc(_display_path(path), n, "EXPECT")
    except OSError:
        pass
    return Loc(_display_path(path), 0, "EXPECT")


def load(fn: Callable, name: str | None = None, expect: str | None = None,
         core_count: int | None = None, device_count: int | None = None) -> list[Kernel]:
    """Trace a zero-argument function that calls Pallas kernels; return their IR, one Kernel
    per kernel launch, in call order."""
    name = name or getattr(fn, "__name__", "kernel")
    _check_arity(fn, name)
    facts = device_facts_of(fn)
    closed = trace(fn, core_count=core_count or facts.get("core_count", DEFAULT_CORE_COUNT),
                   device_count=device_count or facts.get("device_count"))
    _SYNC_CACHE.clear()          # the cache pins jaxprs: keep it to one trace
    kernels = kernels_from_jaxpr(closed, name, expect)
    if not kernels:
        code = getattr(fn, "__code__", None)
        loc = Loc(_display_path(code.co_filename), code.co_firstlineno, name) if code else None
        raise ModelError(f"{name} calls no Pallas Mosaic GPU kernel", loc=loc,
                         hint="call a plgpu.kernel inside the function")
    return kernels


def trace_function(fn: Callable, name: str | None = None, path: str | None = None) -> Kernel:
    """The one kernel a target function launches (the CLI's `file.py::NAME`)."""
    kernels = load(fn, name=name)
    if len(kernels) > 1:
        code = getattr(fn, "__code__", None)
        loc = Loc(_display_path(code.co_filename), code.co_firstlineno, name) if code else None
        raise ModelError(f"{name} launches {len(kernels)} kernels "
                         f"({', '.join(k.name for k in kernels)}); check them one by one",
                         loc=loc, hint="call one plgpu.kernel per target function")
    return kernels[0]


def import_file(path: str):
    """Import a Python file as a module; failures become one-line ModelErrors."""
    if not os.path.exists(path):
        raise ModelError(f"no such file: {path}")
    modname = "_barrierproof_target_" + re.sub(r"\W", "_", os.path.abspath(path))
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(modname, None)
        loc = _loc_from_exception(exc)
        text = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ModelError(f"importing {path} failed: {text}", loc=loc) from exc
    finally:
        sys.path.pop(0)
    return module


def targets(module) -> dict[str, str | None]:
    """The Pallas targets a module declares: `EXPECT = {"fn": "verified", ...}` (name ->
    expected verdict), else every public zero-argument function named `check_*`."""
    expect = getattr(module, "EXPECT", None)
    if isinstance(expect, dict):
        for name, label in expect.items():
            check_expect(label, name, expect_loc(getattr(module, "__file__", None)))
        return dict(expect)
    import inspect
    found = {}
    for name, obj in vars(module).items():
        if name.startswith("check_") and inspect.isfunction(obj) \
                and obj.__module__ == module.__name__:
            found[name] = None
    return found


def load_target(spec: str) -> list[Kernel]:
    """`path.py::NAME` -> the IR of the kernels NAME calls (NAME takes no arguments)."""
    path, sep, name = spec.partition("::")
    if not sep or not name:
        raise ModelError(f"{spec!r} is not of the form path.py::NAME")
    module = import_file(path)
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        known = ", ".join(sorted(targets(module))) or "none declared"
        raise ModelError(f"{path} has no function {name}", hint=f"targets: {known}")
    expect = targets(module).get(name)
    return load(fn, name=name, expect=expect)
