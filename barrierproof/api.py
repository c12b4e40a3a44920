"""The library's entry: `barrierproof.check(target, engine=...)`, the same choice of engine as
`barrierproof check --engine`."""

from __future__ import annotations

import inspect
import os
from typing import Callable

from .checker.check import Options
from .checker.engine_registry import engine as engine_named
from .checker.engines.explore import Limits
from .checker.verdict import Verdict
from .model.dsl import Protocol
from .model.ir import Kernel, ModelError

__all__ = ["check"]


def _kernels(target) -> list[tuple[Kernel, str | None]]:
    """(kernel, path::name) for a Protocol, a Kernel, a Pallas kernel function, or what the
    command line takes (`file.py`, `file.py::NAME`)."""
    if isinstance(target, (str, os.PathLike)):     # `file.py`, `file.py::NAME`, a directory
        from .loader import resolve
        return [(k if k.expect or not t.expect else k.replace(expect=t.expect),
                 t.ref if i == 0 else f"{t.ref}#{i + 1}")
                for t in resolve(os.fspath(target)) for i, k in enumerate(t.build_all())]
    if isinstance(target, Protocol):
        return [(target.build(), f"{_path(target.fn)}::{target.name}")]
    if isinstance(target, Kernel):
        return [(target, None)]
    if callable(target):
        from .model import pallas  # jax is imported only for Pallas kernels
        name = getattr(target, "__name__", "kernel")
        return [(k, f"{_path(target)}::{k.name}") for k in pallas.load(target, name=name)]
    raise TypeError(f"{target!r} is not a @protocol, a Kernel, a Pallas kernel function or a "
                    "path (file.py, file.py::NAME)")


def _path(fn: Callable) -> str:
    try:
        path = inspect.getsourcefile(fn) or "<unknown>"
    except TypeError:
        return "<unknown>"
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def check(target, *, options: Options | None = None, max_states: int | None = None,
          ignore: tuple[str, ...] = (), engine: str = "explore", engine_options=None,
          **params: int) -> list[Verdict]:
    """Check a protocol, kernel, Pallas kernel function or path; one Verdict per kernel it
    holds.

    `engine` is one of `--engine`'s choices (checker/engine_registry.py ENGINES: "explore",
    "tlc", "symbolic"); `engine_options` its settings, a dataclass of
    checker/engine_settings.py or a mapping of its fields (e.g. `{"symbolic": ["steps"]}`).
    An input error (a Python error in the protocol, a missing parameter value) becomes an
    `error` verdict, as on the command line.

    >>> from barrierproof.model.samples import handoff
    >>> [v.label for v in check(handoff, engine="explore")]
    ['verified']
    >>> check(handoff, engine="z3")
    Traceback (most recent call last):
    ...
    barrierproof.model.ir.ModelError: no engine named 'z3' (hint: choose one of explore, symbolic, tlc)
    """
    chosen = engine_named(engine)       # an unknown name or setting fails before any work
    settings = chosen.make_settings(engine_options)
    if options is None:
        limits = Limits() if max_states is None else Limits(max_states=max_states)
        options = Options(limits, ignore=frozenset(ignore))
    try:
        kernels = _kernels(target)
    except ModelError as err:
        from .checker.check import error_verdict
        return [error_verdict(getattr(target, "name", getattr(target, "__name__", "kernel")),
                              err)]
    verdicts = []
    for kernel, source in kernels:
        own = {k: v for k, v in params.items() if k in kernel.params}
        unknown = sorted(set(params) - set(kernel.params))
        if unknown and len(kernels) == 1:
            raise TypeError(f"{kernel.name} has no parameter {', '.join(unknown)} (its "
                            f"parameters: {', '.join(kernel.params) or 'none'})")
        verdicts.append(chosen.load()(kernel, own, options, source, settings))
    return verdicts
