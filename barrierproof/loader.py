"""Find what to check: `PATH`, `PATH::NAME` or a directory of Python files.

A DSL file defines protocols with `@protocol`; a Pallas file names its kernel functions in a
module-level `EXPECT = {"fn": "verified", ...}` (or is addressed as `file.py::fn`). Importing a
user's file runs their code: any error there becomes a one-line ModelError at their line.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from .guard import LimitReached, user_code
from .model.dsl import Protocol
from .model.ir import Kernel, Loc, ModelError


@dataclass
class Target:
    ref: str                       # path::name
    name: str
    kind: str                      # "dsl" or "pallas"
    build: Callable[[], Kernel]
    expect: str | None
    path: str
    # A Pallas function may launch several kernels: all of them, traced once.
    build_many: Callable[[], list[Kernel]] | None = None
    # A Pallas function that declares its sizes (@sizes): `prove` reads one IR for every size,
    # and replays a violation by tracing again at the breaking sizes.
    build_family: Callable[[], Kernel] | None = None
    replay_family: Callable | None = None
    # Codes the target's own declaration suppresses (`@protocol(ignore=...)`; suppress.py).
    ignore: frozenset[str] = frozenset()

    def build_all(self) -> list[Kernel]:
        return self.build_many() if self.build_many is not None else [self.build()]


def _user_error(err: BaseException, path: str) -> ModelError:
    """The innermost frame of a traceback that lies in the user's file."""
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(path)]
    frame = mine[-1] if mine else (frames[-1] if frames else None)
    loc = Loc(frame.filename, frame.lineno or 1) if frame else Loc(path, 1)
    if isinstance(err, ModelError):
        if err.loc is None and mine:  # raised by an expression: the user's line is the place
            err.loc = loc
        return err
    if isinstance(err, SyntaxError):
        loc = Loc(err.filename or path, err.lineno or 0)
    hint = "fix the Python error in the protocol file"
    if isinstance(err, ModuleNotFoundError) and err.name in ("jax", "jaxlib"):
        hint = "install the Pallas extra: pip install 'barrierproof[pallas]'"
    return ModelError(f"{type(err).__name__}: {err}", loc=loc, hint=hint)


def forget_file(path: str) -> None:
    """Drop a file's module, so the next import reads the file again (after an edit)."""
    path = os.path.abspath(path)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    sys.modules.pop(f"_barrierproof_user_{Path(path).stem}_{digest}", None)


def import_file(path: str):
    """Import a Python file as a fresh module; its directory is importable while it loads."""
    path = os.path.abspath(path)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    name = f"_barrierproof_user_{Path(path).stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"cannot import {path}", hint="give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(path))
    try:
        with user_code(path, f"importing {os.path.basename(path)}"):
            spec.loader.exec_module(module)
    except BaseException as err:  # the user's code: any error is an input error
        sys.modules.pop(name, None)
        if isinstance(err, (KeyboardInterrupt, LimitReached)):
            raise               # a signal, or the watchdog: the caller reports it
        raise _user_error(err, path) from None
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


def _dsl_target(path: str, name: str, proto: Protocol) -> Target:
    def build() -> Kernel:
        try:
            with user_code(path, f"building {name}"):
                return proto.build()
        except Exception as err:  # an error in the protocol body
            raise _user_error(err, path) from None
    return Target(f"{path}::{name}", proto.name, "dsl", build, proto.expect, path,
                  ignore=proto.ignore)


def _pallas_target(path: str, name: str, fn: Callable, expect: str | None) -> Target:
    if expect is not None:
        from .model.pallas import check_expect, expect_loc   # no jax import
        check_expect(expect, name, expect_loc(path))
    def build() -> Kernel:
        from .model import pallas  # jax is imported only for Pallas kernels
        with user_code(path, f"tracing {name}"):
            return pallas.trace_function(fn, name=name, path=path)

    def build_many() -> list[Kernel]:
        from .model import pallas
        with user_code(path, f"tracing {name}"):
            return pallas.load(fn, name=name)
    target = Target(f"{path}::{name}", name, "pallas", build, expect, path, build_many)
    from .model.pallas.family import SIZES_ATTR     # no jax import
    if getattr(fn, SIZES_ATTR, None):
        def build_family() -> Kernel:
            from .family import family_kernel
            with user_code(path, f"tracing {name} at several sizes"):
                return family_kernel(fn, name, expect)

        def replay_family(verdict, options):
            from .family import replay_by_retracing
            with user_code(path, f"tracing {name} again"):
                return replay_by_retracing(fn, name, expect, verdict, options)
        target.build_family, target.replay_family = build_family, replay_family
    return target


def _broken_target(path: str, err: BaseException) -> Target:
    """A file that could not be loaded: its error (or the limit it hit) is its verdict."""
    def build() -> Kernel:
        raise err
    return Target(path, Path(path).stem, "error", build, None, path)


# `check DIR` collects, like pytest's rules but for protocols: .py files whose text declares a
# protocol (`@protocol`) or names kernels (`EXPECT = ...`); never tests, conftest.py, setup.py,
# or names starting with `_` or `.` (files and directories). Other files are not imported.
SKIPPED_FILES = ("conftest.py", "setup.py", "noxfile.py")
DECLARES = re.compile(rb"^[ \t]*@[\w.]*protocol\b|^EXPECT\s*(:[^=\n]*)?=", re.M)


def collected(file: Path, root: Path) -> bool:
    """Does `check DIR` import this file? (See the rules above.)"""
    name = file.name
    if name.startswith(("_", ".")) or name in SKIPPED_FILES or name.startswith("test_") \
            or name.endswith("_test.py"):
        return False
    if any(p.startswith((".", "_")) for p in file.relative_to(root).parts[:-1]):
        return False
    try:
        with open(file, "rb") as f:
            return DECLARES.search(f.read()) is not None
    except OSError:
        return True     # unreadable: importing it reports why

def available(module) -> list[str]:
    """What `file.py::NAME` accepts in this module: its protocols, the kernels its EXPECT names,
    and the public functions defined in it (a Pallas kernel needs no EXPECT entry to be named)."""
    names = [n for n, v in vars(module).items() if isinstance(v, Protocol)]
    names += list(getattr(module, "EXPECT", {}) or {})
    names += [n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
              and v.__module__ == module.__name__]
    return list(dict.fromkeys(names))


def targets_in_module(path: str, module, only: str | None = None) -> list[Target]:
    found: list[Target] = []
    expect = getattr(module, "EXPECT", {}) or {}
    if only is not None:
        if not hasattr(module, only):
            raise ModelError(f"{path} has no protocol or kernel function named {only!r}",
                             hint=f"available: {', '.join(available(module)) or 'none'}")
        obj = getattr(module, only)
        if isinstance(obj, Protocol):
            return [_dsl_target(path, only, obj)]
        if callable(obj):
            return [_pallas_target(path, only, obj, expect.get(only))]
        raise ModelError(f"{path}::{only} is a {type(obj).__name__}, not a protocol or function",
                         hint="use @protocol or a zero-argument kernel function")
    for attr, obj in vars(module).items():
        if isinstance(obj, Protocol) and getattr(obj.fn, "__module__", None) == module.__name__:
            found.append(_dsl_target(path, attr, obj))
    for fn_name, verdict in expect.items():
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            from .model.pallas import expect_loc   # no jax import
            raise ModelError(f"EXPECT names {fn_name!r}, which {path} does not define",
                             loc=expect_loc(path) or Loc(path, 1),
                             hint="EXPECT maps kernel function names to verdicts")
        found.append(_pallas_target(path, fn_name, fn, verdict))
    return found


def excluded(file: Path, root: Path, patterns: Sequence[str]) -> bool:
    """`--exclude GLOB`: does a glob match the file's path below `root`, its name, or the name
    of a folder between them?

    >>> excluded(Path("k/legacy/old.py"), Path("k"), ["legacy"])
    True
    >>> excluded(Path("k/ring.py"), Path("k"), ["*_old.py", "legacy/*"])
    False
    """
    rel = file.relative_to(root)
    names = [rel.as_posix(), str(file.as_posix()), *rel.parts]
    return any(fnmatch.fnmatchcase(n, g) for g in patterns for n in names)


def resolve(spec: str, exclude: Sequence[str] = ()) -> list[Target]:
    """All targets named by one command-line argument (`exclude`: globs of files a directory
    walk skips)."""
    path, _, only = spec.partition("::")
    if not os.path.exists(path):
        raise ModelError(f"{path} does not exist", loc=None,
                         hint="give a .py file, a directory, or file.py::NAME")
    if os.path.isdir(path):
        if only:
            raise ModelError(f"{spec}: ::NAME needs a file, not a directory")
        out: list[Target] = []
        for file in sorted(Path(path).rglob("*.py")):
            if not collected(file, Path(path)) or excluded(file, Path(path), exclude):
                continue
            try:
                out += targets_in_module(str(file), import_file(str(file)))
            except (ModelError, LimitReached) as err:  # one broken file must not hide the others
                out.append(_broken_target(str(file), err))
        return out
    module = import_file(path)
    return targets_in_module(path, module, only or None)
