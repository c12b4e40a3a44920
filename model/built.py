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


def source_file(fn) -> str | None:
    code = getattr(fn, "__code__", None)
    return code.co_filename if code is not None else None


def _digest(files) -> str | None:
    digest = hashlib.sha256()
    for file in sorted(set(files)):
        try:
            with open(file, "rb") as f:
                digest.update(f.read())
        except (TypeError, OSError):      # no source file: nothing to say it is unchanged
            return None
    return digest.hexdigest()


def _own(kernels: tuple[Kernel, ...]) -> list[Kernel]:
    return [k.replace(params=dict(k.params)) for k in kernels]


def built_once(fn, arguments: tuple, build: Callable[[], list[Kernel]],
               files: tuple | None = None) -> list[Kernel]:
    """`build()`, or what it returned the last time for `fn`, its source `files` (by default
    the file that defines `fn`) as they are now and the same `arguments` (hashable: whatever
    else the build's result depends on)."""
    digest = _digest(files if files is not None else (source_file(fn),))
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
