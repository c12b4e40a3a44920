"""What a protocol declares besides its body, checked at its `@protocol` line: the verdict it
expects, the codes it ignores, its name and its integer parameters. A wrong declaration is an
input error there, never a silent default (a typo in `ignore` must not suppress nothing)."""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

from .ir import Loc, ModelError, Param

# The verdict labels `expect=` (and a module's EXPECT) may name, before an optional `:CODE`.
VERDICTS = ("proved", "verified", "bounded", "unknown", "violation", "error")


def is_verdict(expect: object) -> bool:
    """`expect` is a verdict label such as "verified" or "violation:BP100"."""
    from .semantics import CODES
    if not isinstance(expect, str):
        return False
    verdict, _, code = expect.partition(":")
    return verdict in VERDICTS and (not code or code in CODES or code == "input")


def def_loc(fn: Callable) -> Loc:
    """The line of `fn`'s `def` (its decorator's error location)."""
    code = fn.__code__
    return Loc(code.co_filename, code.co_firstlineno, fn.__name__)


def check_expect(expect: object, fn: Callable) -> None:
    if not is_verdict(expect):
        raise ModelError(f"expect={expect!r} is not a verdict", loc=def_loc(fn),
                         hint="use e.g. 'verified', 'proved', 'unknown' or 'violation:BP100'")


def check_ignore(codes: Sequence[str] | str, fn: Callable) -> frozenset[str]:
    """`@protocol(ignore=...)`: codes this protocol suppresses, each a known code."""
    from .semantics import CODES
    codes = [codes] if isinstance(codes, str) else list(codes)
    unknown = [c for c in codes if c not in CODES]
    if unknown:
        raise ModelError(f"ignore={unknown[0]!r} is not a diagnostic code", loc=def_loc(fn),
                         hint="e.g. @protocol(ignore=[\"BP103\"]); the codes are in docs/rules/")
    return frozenset(codes)


def check_name(name: object, fn: Callable) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ModelError(f"protocol name={name!r} is not a name", loc=def_loc(fn),
                         hint="name='ring', a non-empty string")


def integer_params(fn: Callable, name: str) -> dict[str, Param]:
    """The protocol's parameters after the kernel builder `k`: integers, with or without a
    default (`def ring(k, stages=2)`)."""
    sig = inspect.signature(fn)
    names = list(sig.parameters)
    if not names:
        raise ModelError(f"protocol {name} must take the kernel builder as first argument",
                         loc=def_loc(fn), hint=f"def {fn.__name__}(k, ...):")
    params: dict[str, Param] = {}
    for pname in names[1:]:
        p = sig.parameters[pname]
        default = None if p.default is inspect.Parameter.empty else p.default
        if default is not None and (isinstance(default, bool) or not isinstance(default, int)):
            raise ModelError(f"parameter {pname}={default!r} of {name} is not an integer",
                             loc=def_loc(fn), hint="protocol parameters are integers")
        params[pname] = Param(pname, default)
    return params
