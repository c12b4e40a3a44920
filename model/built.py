"""Kernels a frontend built from a user's function, kept for the rest of the process: the same
function, its file unchanged, built again with the same arguments (another test, another
command of one session) is not compiled again.

Keyed on the function object, weakly (a re-imported module's functions are new objects, and a
forgotten module's entries go with it), on the digest of its file's text (an edited file is
built again) and on the build's own arguments. Errors are not kept: a build that fails runs
again, and fails alike, the next time. Kernel is the one IR class that can be changed in place
(its `params` dict; the rest are frozen dataclasses and tuples), so each caller gets its own.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import Callable

from .ir import Kernel

_BUILT: "weakref.WeakKeyDictionary[Callable, dict[tuple, tuple[Kernel, ...]]]" = \
    weakref.WeakKeyDictionary()


def _file_digest(fn: Callable) -> str | None:
    code = getattr(fn, "__code__", None)
    try:
        with open(code.co_filename, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except (AttributeError, OSError):     # no source file: nothing to say it is unchanged
        return None


def _own(kernels: tuple[Kernel, ...]) -> list[Kernel]:
    return [k.replace(params=dict(k.params)) for k in kernels]


def built_once(fn: Callable, arguments: tuple, build: Callable[[], list[Kernel]]) -> list[Kernel]:
    """`build()`, or what it returned the last time for `fn`, its file as it is now and the same
    `arguments` (hashable: whatever else the build's result depends on)."""
    digest = _file_digest(fn)
    try:
        entries = _BUILT.setdefault(fn, {}) if digest is not None else None
    except TypeError:                     # not weakly referenceable: built every time
        entries = None
    if entries is None:
        return build()
    key = (digest, *arguments)
    if key not in entries:
        entries[key] = tuple(build())
    return _own(entries[key])
