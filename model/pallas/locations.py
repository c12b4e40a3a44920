"""Source locations: the kernel line an equation or an error comes from (never JAX's own frames)."""

from __future__ import annotations

import os
import re
import traceback as _traceback
from typing import Callable, Sequence

from ..ir import Loc, UNKNOWN_LOC

# Frames inside barrierproof's model package are the checker's, not the user's.
_THIS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_THIS_DIR = os.path.dirname(os.path.abspath(__file__))


def _internal(filename: str) -> bool:
    """Frames of JAX itself, of the standard library and of barrierproof are not the user's."""
    if filename.startswith("<"):
        return True
    path = filename.replace("\\", "/")
    if "/jax/experimental/pallas/ops/" in path:
        return False          # JAX's shipped kernels are the code being checked
    if "/jax/" in path or "/jaxlib/" in path or path.startswith(_THIS_DIR):
        return True
    stdlib = os.path.dirname(os.__file__).replace("\\", "/")
    return path.startswith(stdlib + "/") and "site-packages" not in path


def _display_path(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1]
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def _frames(traceback) -> list:
    if traceback is None:
        return []
    try:
        return list(traceback.frames)
    except Exception:   # pragma: no cover - jaxlib without frames
        return []


def _loc_from_tracebacks(tracebacks: Sequence) -> Loc:
    """The innermost user frame of an equation, following its enclosing equations outward.

    A jaxpr equation's traceback stops where its sub-jaxpr was traced; the parent equation's
    traceback continues from there, so the chain of tracebacks is the full stack.
    """
    for tb in tracebacks:
        for frame in _frames(tb):
            if not _internal(frame.file_name):
                line = getattr(frame, "line_num", None) or getattr(frame, "start_line", 0)
                return Loc(_display_path(frame.file_name), int(line), frame.function_name)
    return UNKNOWN_LOC


def _loc_from_exception(exc: BaseException) -> Loc:
    frames = _traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if not _internal(frame.filename):
            return Loc(_display_path(frame.filename), frame.lineno or 0, frame.name)
    return UNKNOWN_LOC



def _stem(loc: Loc) -> str:
    base = os.path.basename(loc.file)
    return re.sub(r"\W+", "_", os.path.splitext(base)[0]) or "kernel"


def _loc_of_function(fn: Callable) -> Loc | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return Loc(_display_path(code.co_filename), code.co_firstlineno,
               getattr(fn, "__name__", "kernel"))

