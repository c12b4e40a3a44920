"""Find what to check: `PATH`, `PATH::NAME` or a directory of Python files.

A DSL file defines protocols with `@protocol`, a Gluon file declares `Launch(...)`s (each at
module level is a target; EXPECT may give its verdict); a Pallas or CuTe DSL file names its
kernel functions in a module-level `EXPECT = {"fn": "verified", ...}` (or is addressed as
`file.py::fn`); FRONTENDS says which frontend an object belongs to, each asked in turn. Importing a
user's file runs their code: any error there becomes a one-line ModelError at their line.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import importlib.util
import inspect
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from .collect import candidates, protocols_of
from .guard import LimitReached, safe_text, user_code
from .model.dsl import Protocol
from .model.ir import Kernel, Loc, ModelError


@dataclass
class Target:
    ref: str                       # path::name
    name: str
    kind: str                      # its frontend's name (set from FRONTENDS), or "error"
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
    # The user's code half of replay_family: the kernel traced at a violation's sizes
    # (family.retrace_member), for a caller that runs user code in a child (isolate.py).
    retrace: Callable | None = None
    # The target as plain data (isolate.py): its kernels as a child built them, sent to a
    # worker of a parallel run instead of building them again there.
    entry: dict | None = None

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
    if isinstance(err, ModuleNotFoundError):   # a frontend's framework is missing: its extra
        root = (err.name or "").split(".")[0]
        hint = next((f.install for f in FRONTENDS if root in f.frameworks), hint)
    if isinstance(err, RecursionError):
        hint = "an expression or a call nests too deeply; build it in smaller steps"
    return ModelError(f"{type(err).__name__}: {safe_text(err)}", loc=loc, hint=hint)


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
    return Target(f"{path}::{name}", proto.name, "", build, proto.expect, path,
                  ignore=proto.ignore)


def _check_expect(path: str, name: str, expect: str | None) -> None:
    """An EXPECT entry's verdict is one barrierproof can give (read without importing jax)."""
    if expect is not None:
        from .model.pallas import check_expect, expect_loc
        check_expect(expect, name, expect_loc(path))


def _pallas_target(path: str, name: str, fn: Callable, expect: str | None) -> Target:
    _check_expect(path, name, expect)

    def build() -> Kernel:
        from .model import pallas  # jax is imported only for Pallas kernels
        with user_code(path, f"tracing {name}"):
            return pallas.trace_function(fn, name=name, path=path)

    def build_many() -> list[Kernel]:
        from .model import pallas
        with user_code(path, f"tracing {name}"):
            return pallas.load(fn, name=name)
    target = Target(f"{path}::{name}", name, "", build, expect, path, build_many)
    from .model.pallas.family import SIZES_ATTR     # no jax import
    if getattr(fn, SIZES_ATTR, None):
        def build_family() -> Kernel:
            from .family import family_kernel
            with user_code(path, f"tracing {name} at several sizes"):
                return family_kernel(fn, name, expect)

        def retrace(values):
            from .family import retrace_member
            with user_code(path, f"tracing {name} again"):
                return retrace_member(fn, name, expect, values)

        def replay_family(verdict, options):
            from .family import judge_member
            return judge_member(verdict, name, retrace(verdict.params), options)
        target.build_family, target.replay_family = build_family, replay_family
        target.retrace = retrace
    return target


def _gluon_target(path: str, name: str, launch, expect: str | None) -> Target:
    _check_expect(path, name, expect)

    def build() -> Kernel:
        from .model import gluon    # triton is imported only when the kernel is compiled
        with user_code(path, f"compiling {name}"):
            return gluon.load(launch, name=name, expect=expect)
    return Target(f"{path}::{name}", name, "", build, expect, path)


def _is_gluon_launch(obj) -> bool:
    from .model.gluon.launch import is_launch   # no triton import
    return is_launch(obj)


def _cute_target(path: str, name: str, fn: Callable, expect: str | None) -> Target:
    _check_expect(path, name, expect)

    def build() -> Kernel:
        from .model import cute      # the DSL is imported only for CuTe kernels
        with user_code(path, f"compiling {name}"):
            return cute.trace_function(fn, name=name, expect=expect)

    def build_many() -> list[Kernel]:
        from .model import cute
        with user_code(path, f"compiling {name}"):
            return cute.load(fn, name=name, expect=expect)
    return Target(f"{path}::{name}", name, "", build, expect, path, build_many)


def _declared_launches(module) -> list:
    """(attribute, launch) for every Gluon launch a module declares at its top level, each
    object once: a `Launch` is an explicit declaration, so it needs no EXPECT entry."""
    seen: set[int] = set()
    found = []
    for attr, obj in vars(module).items():
        if not attr.startswith("_") and _is_gluon_launch(obj) and id(obj) not in seen:
            seen.add(id(obj))
            found.append((attr, obj))
    return found


def _claims_cute(fn) -> bool:
    from .model.cute.targets import claims     # reads the function's module, imports no DSL
    return callable(fn) and claims(fn)


def _claims_protocol(obj) -> bool:
    return isinstance(obj, Protocol)


@dataclass(frozen=True)
class Frontend:
    """A frontend as the loader sees it: whether a module attribute is its own (cheap: the
    frontend's framework is not imported), and the Target that builds its IR."""

    name: str                                   # the kind of its targets
    claims: Callable[[object], bool]
    make: Callable[[str, str, object, "str | None"], Target]    # (path, attribute, it, EXPECT's verdict)
    frameworks: tuple[str, ...] = ()            # modules it imports to build, when missing ...
    install: str = ""                           # ... the hint that names its extra
    # (attribute, object) of a module that are targets without an EXPECT entry (DSL
    # protocols, each object once); the other frontends' are found by EXPECT or `::NAME`.
    discover: Callable[[object], list] | None = None
    # Takes any callable no frontend before it claims: `available` names only the public
    # functions a file defines, not every callable it imports.
    any_function: bool = False


# Asked in order; the first that claims an attribute builds it.
FRONTENDS: list[Frontend] = [
    Frontend("gluon", _is_gluon_launch, _gluon_target, ("triton",),
             "install the Gluon extra: pip install 'barrierproof[gluon]'",
             discover=_declared_launches),
    Frontend("dsl", _claims_protocol, lambda path, name, proto, expect: _dsl_target(path, name, proto),
             discover=protocols_of),
    Frontend("cute", _claims_cute, _cute_target, ("cutlass",),
             "install the CuTe DSL extra: pip install 'barrierproof[cute]'"),
    Frontend("pallas", callable, _pallas_target, ("jax", "jaxlib"),
             "install the Pallas extra: pip install 'barrierproof[pallas]'", any_function=True),
]


def build_target(frontend: Frontend, path: str, name: str, obj, expect: str | None) -> Target:
    target = frontend.make(path, name, obj, expect)
    target.kind = frontend.name
    return target


def claimant(obj, among: Sequence[Frontend] | None = None) -> Frontend | None:
    """The first frontend that claims `obj`, or None."""
    return next((f for f in (FRONTENDS if among is None else among) if f.claims(obj)), None)


def _broken_target(path: str, err: BaseException) -> Target:
    """A file that could not be loaded: its error (or the limit it hit) is its verdict."""
    def build() -> Kernel:
        raise err
    return Target(path, Path(path).stem, "error", build, None, path)


def available(module) -> list[str]:
    """What `file.py::NAME` accepts in this module: the objects a frontend finds by itself (its
    protocols), the kernels its EXPECT names, what a frontend claims by its kind, and the
    public functions defined in it (a Pallas kernel needs no EXPECT entry to be named)."""
    names = [n for n, v in vars(module).items()
             if (f := claimant(v)) is not None and f.discover is not None]
    expect = getattr(module, "EXPECT", None)
    names += [k for k in expect if isinstance(k, str)] if isinstance(expect, dict) else []
    names += [n for n, v in vars(module).items()       # functions: only those defined here
              if not inspect.isfunction(v) and (f := claimant(v)) is not None
              and not f.any_function]
    names += [n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
              and v.__module__ == module.__name__]
    return list(dict.fromkeys(names))


def targets_in_module(path: str, module, only: str | None = None) -> list[Target]:
    found: list[Target] = []
    expect = expect_table(path, module)
    if only is not None:
        if not hasattr(module, only):
            # what can be checked: a name EXPECT lists but the file does not define is not
            names = [n for n in available(module) if hasattr(module, n)]
            close = difflib.get_close_matches(only, names, n=1)
            raise ModelError(f"{path} has no protocol or kernel function named {only!r}",
                             hint=(f"did you mean {close[0]!r}? " if close else "")
                             + f"available: {', '.join(names) or 'none'}")
        obj = getattr(module, only)
        frontend = claimant(obj)
        if frontend is None:
            raise ModelError(f"{path}::{only} is a value of type {type(obj).__name__}, not a "
                             "protocol or function", hint="use @protocol or a zero-argument kernel function")
        return [build_target(frontend, path, only, obj, expect.get(only))]
    discovered: set[str] = set()
    for frontend in FRONTENDS:
        if frontend.discover is not None:
            for attr, obj in frontend.discover(module):
                # (a DSL protocol states its own expectation; its frontend ignores EXPECT's)
                found.append(build_target(frontend, path, attr, obj, expect.get(attr)))
                discovered.add(attr)
    named = [f for f in FRONTENDS if f.discover is None]    # what EXPECT names
    for fn_name, verdict in expect.items():
        if fn_name in discovered:
            continue
        obj = getattr(module, fn_name, None)
        frontend = claimant(obj, named)
        if frontend is None:
            from .model.pallas import expect_loc   # no jax import
            raise ModelError(f"EXPECT names {fn_name!r}, which {path} does not define",
                             loc=expect_loc(path) or Loc(path, 1),
                             hint="EXPECT maps kernel function names to verdicts")
        found.append(build_target(frontend, path, fn_name, obj, verdict))
    return found


def expect_table(path: str, module) -> dict[str, str]:
    """A Pallas file's `EXPECT = {"kernel_fn": "verified", ...}`, checked for its shape."""
    expect = getattr(module, "EXPECT", None)
    if expect is None:
        return {}
    if not isinstance(expect, dict) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in expect.items()):
        from .model.pallas import expect_loc   # no jax import
        raise ModelError(f"EXPECT of {path} must map kernel function names to verdicts, not "
                         f"{_shape(expect)}", loc=expect_loc(path) or Loc(path, 1),
                         hint='EXPECT = {"my_kernel": "verified"}')
    return expect


def _shape(value) -> str:
    if isinstance(value, dict):
        bad = next((k, v) for k, v in value.items()
                   if not isinstance(k, str) or not (v is None or isinstance(v, str)))
        return f"a dict with the entry {_short_repr(bad[0])}: {_short_repr(bad[1])}"
    return f"a {type(value).__name__}"


def _short_repr(value) -> str:
    try:
        text = repr(value)
    except Exception:       # a user's object whose repr fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


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


def directory_targets(path: str, skipped: list[tuple[str, str]] | None, exclude,
                      read: Callable[[str], list[Target]]) -> list[Target]:
    """The targets of the files below a directory that declare protocols, each read by
    `read(file)`; a file that cannot be read is its own error target (one broken file must not
    hide the others), and the files passed over go to `skipped` with the reason."""
    out: list[Target] = []
    chosen, passed = candidates(Path(path))
    for file, why in passed:
        if skipped is not None:
            skipped.append((str(file), f"not imported: {why}"))
    for file in chosen:
        if excluded(file, Path(path), exclude):
            if skipped is not None:
                skipped.append((str(file), "excluded"))
            continue
        try:
            found = read(str(file))
        except (ModelError, LimitReached) as err:
            out.append(_broken_target(str(file), err))
            continue
        if not found and skipped is not None:
            skipped.append((str(file), "imported, but it defines no protocol and its EXPECT "
                                       "names no kernel"))
        out += found
    return out


def resolve(spec: str, skipped: list[tuple[str, str]] | None = None,
            exclude: Sequence[str] = ()) -> list[Target]:
    """All targets named by one command-line argument; files of a directory that are not
    imported, or that hold no protocol, are added to `skipped` with the reason (`exclude`:
    globs of files a directory walk skips)."""
    path, _, only = spec.partition("::")
    if not os.path.exists(path):
        raise ModelError(f"{path} does not exist", loc=None,
                         hint="give a .py file, a directory, or file.py::NAME")
    if os.path.isdir(path):
        if only:
            raise ModelError(f"{spec}: ::NAME needs a file, not a directory")
        return directory_targets(path, skipped, exclude,
                                 lambda file: targets_in_module(file, import_file(file)))
    module = import_file(path)
    return targets_in_module(path, module, only or None)
