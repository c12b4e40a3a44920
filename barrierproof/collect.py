"""Which files of a directory `check DIR` imports, and which protocols a module holds.

Importing a file runs it, so a directory is not imported wholesale: like pytest, tests,
conftest.py, setup.py, noxfile.py and names starting with `_` or `.` are never imported. Of the
rest, a file is imported when its syntax tree (read, never run) could declare a protocol or a
kernel: it imports from barrierproof (under any alias: `from barrierproof import protocol as
P`), imports a module of its own project (which may re-export `protocol`), or assigns a
module-level `EXPECT`. A file that cannot be parsed is imported too, so its error is reported.
A word in a docstring or a comment decides nothing.

After the import, what the module defines decides: every `Protocol` object it holds, however it
was made (`@protocol`, `@P`, `bad = protocol(fn)`, a factory), except one it imported from
another module that holds it already (that module reports it).
"""

from __future__ import annotations

import ast
import sys
import functools
from pathlib import Path

from .model.dsl import Protocol

SKIPPED_FILES = ("conftest.py", "setup.py", "noxfile.py")


def skipped_by_name(file: Path, root: Path) -> str | None:
    """Why a file is never imported by its name or its directory, or None."""
    name = file.name
    if name in SKIPPED_FILES:
        return f"{name} is never imported"
    if name.startswith("test_") or name.endswith("_test.py"):
        return "a test file"
    if name.startswith(("_", ".")):
        return "its name starts with _ or ."
    if any(p.startswith((".", "_")) for p in file.relative_to(root).parts[:-1]):
        return "it lies in a directory whose name starts with _ or ."
    return None


def _local_modules(root: Path) -> set[str]:
    """Top-level names a file of this project may import its own helpers by."""
    names = {p.stem for p in root.rglob("*.py")}
    names |= {p.name for p in root.rglob("*") if p.is_dir()}
    return names


def could_declare(file: Path, local: set[str]) -> str | None:
    """None when the file may declare protocols or kernels (import it); else why not."""
    try:
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None         # importing it reports what is wrong
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if top == "barrierproof" or top in local:
                    return None
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").partition(".")[0]
            if node.level or top == "barrierproof" or top in local:
                return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == "EXPECT" for t in targets):
            return None
    return "it imports neither barrierproof nor a module of its project, and has no EXPECT"


def candidates(root: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The files of `root` to import, and the others with the reason each is skipped."""
    files = sorted(root.rglob("*.py"))
    local = _local_modules(root)
    chosen, skipped = [], []
    for file in files:
        why = skipped_by_name(file, root) or could_declare(file, local)
        if why is None:
            chosen.append(file)
        else:
            skipped.append((file, why))
    return chosen, skipped


def collected(file: Path, root: Path) -> bool:
    """Whether `check DIR` would import this file of `root` (the pytest plugin's question)."""
    return skipped_by_name(file, root) is None and \
        could_declare(file, _local_modules_cached(root.resolve())) is None


@functools.lru_cache(maxsize=8)
def _local_modules_cached(root: Path) -> frozenset[str]:
    return frozenset(_local_modules(root))


def owns(module, proto: Protocol) -> bool:
    """Whether `module` reports this protocol: it was made there, or by code in a module that
    does not hold it itself (a factory in a helper)."""
    home = getattr(proto.fn, "__module__", None)
    if home == module.__name__:
        return True
    origin = sys.modules.get(home) if isinstance(home, str) else None
    return origin is None or not any(v is proto for v in vars(origin).values())


def protocols_of(module) -> list[tuple[str, Protocol]]:
    """(attribute, protocol) for every protocol the module reports, each object once."""
    seen: set[int] = set()
    found = []
    for attr, obj in vars(module).items():
        if isinstance(obj, Protocol) and id(obj) not in seen and owns(module, obj):
            seen.add(id(obj))
            found.append((attr, obj))
    return found
