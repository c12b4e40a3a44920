"""Whether the compiled core was built from the C sources beside it.

An editable install builds `_core` and `_mproc` once; a checkout updated afterwards keeps the old
binaries next to new sources, whose flattened layout (flatten.py) the old core no longer reads.
setup.py bakes a digest of the sources into each extension (SOURCE_DIGEST); at import the digest
of the sources present is compared with it, and a core built from other sources is not used. An
installed wheel ships no C sources: nothing to compare, its binaries are its own. Standard
library only: setup.py loads this file before the package exists."""

from __future__ import annotations

import hashlib
import os

SOURCES = ("_core.c", "_por.c", "_symmetry.c", "_mproc.c")


def digest(folder: str) -> str | None:
    """SHA-256 of the C sources in `folder`, in SOURCES' order; None when any is missing."""
    h = hashlib.sha256()
    for name in SOURCES:
        try:
            with open(os.path.join(folder, name), "rb") as f:
                h.update(f.read())
        except OSError:
            return None
    return h.hexdigest()


def stale(module) -> str | None:
    """Why `module` (a built extension) must not be used, or None: built from sources other
    than those now beside it."""
    here = digest(os.path.dirname(os.path.abspath(module.__file__)))
    if here is None or getattr(module, "SOURCE_DIGEST", None) == here:
        return None
    return ("the compiled core was built from older C sources than this checkout's "
            "(reinstall: pip install -e .)")
