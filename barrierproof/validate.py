"""Everything a user gives, checked before any protocol is imported or explored.

A gate must not pass because of a typo: an unknown rule code, a negative limit, a NaN timeout or
an output path that cannot be written are input errors (exit 3) with a one-line message, found
before the work starts, not after an hour of checking.
"""

from __future__ import annotations

import difflib
import math
import os

from .model.ir import Loc, ModelError
from .model.semantics import CODES

# argparse dest -> (flag, smallest value, what it is)
LIMITS = {
    "max_states": ("--max-states", 1, "a number of states"),
    "max_depth": ("--max-depth", 1, "a search depth"),
    "max_memory": ("--max-memory", 1, "megabytes"),
    "timeout": ("--timeout", None, "seconds"),
    "build_timeout": ("--build-timeout", None, "seconds"),
    "runs": ("--runs", 1, "a number of runs"),
    "workers": ("--workers", 1, "a number of TLC workers"),
    "distributed": ("--distributed", 1, "a number of TLC worker processes"),
    "port": ("--port", 1, "a TCP port"),
    "max_steps": ("--max-steps", 1, "a number of steps"),
    "quiet": ("--quiet-seconds", None, "seconds"),
    "pick": ("--pick", 1, "a suggestion's number"),
    "max_fixes": ("--max-fixes", 1, "a number of suggestions"),
    "budget": ("--budget", None, "seconds"),
    "jobs": ("--jobs", 1, "a number of processes"),
    "seed": ("--seed", 0, "a random seed"),
}
EXAMPLE = {"max_states": 1_000_000, "max_depth": 200, "max_memory": 8000, "max_steps": 10_000}


def check_limit(dest: str, value, where: Loc | None = None, flag: str | None = None) -> None:
    """A limit is a positive, finite number (integers where a count is meant)."""
    if value is None:
        return
    name, least, what = LIMITS[dest]
    name = flag or name
    example = EXAMPLE.get(dest, 1 if least else 60)
    hint = f"e.g. {name} {example}" if name.startswith("-") else \
        f"e.g. {name.split()[-1]} = {example}"
    if least is None:       # seconds: any positive finite number
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value > 0):
            raise ModelError(f"{name} must be a positive number of {what}, not {value!r}",
                             loc=where, hint=hint)
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ModelError(f"{name} must be an integer >= {least} ({what}), not {value!r}",
                         loc=where, hint=hint)


def check_codes(text: str | None, flag: str, where: Loc | None = None) -> frozenset[str]:
    """Diagnostic codes named by --select/--ignore or `select = [...]`: each must exist, or a
    typo (`BP10O`) would silently ignore every real finding."""
    if not text:
        return frozenset()
    codes = []
    for raw in text.split(","):
        code = raw.strip().upper()
        if not code:
            continue
        if code not in CODES:
            # letters typed for digits first (BP10O, BPl00), then codes that look alike
            digits = "BP" + code[2:].translate(str.maketrans("OQDILS", "001115"))
            close = [digits] if digits in CODES else \
                difflib.get_close_matches(code, list(CODES), n=3)
            hint = f"did you mean {' or '.join(close)}?" if close else \
                f"codes: {', '.join(CODES)}"
            raise ModelError(f"{flag}: unknown diagnostic code {raw.strip()!r}", loc=where,
                             hint=hint)
        codes.append(code)
    return frozenset(codes)


def _existing_ancestor(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def writable_file(path: str, flag: str) -> None:
    """`-o FILE`: a file we may create or replace, in a directory that exists."""
    if not path or "\0" in path:
        raise ModelError(f"{flag} {path!r} is not a file name", hint=f"e.g. {flag} report.json")
    if os.path.isdir(path):
        raise ModelError(f"{flag} {path}: is a directory", hint="give a file name inside it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ModelError(f"{flag} {path}: directory {os.path.dirname(path) or parent} does not "
                         "exist", hint="create it first, or write elsewhere")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ModelError(f"{flag} {path}: not writable", hint="check its permissions")
    if not os.path.exists(path) and not os.access(parent, os.W_OK | os.X_OK):
        raise ModelError(f"{flag} {path}: cannot create a file in {parent}",
                         hint="check the directory's permissions, or write elsewhere")


def writable_dir(path: str, flag: str) -> None:
    """A directory we may create (with its parents) or write files into."""
    if not path or "\0" in path:
        raise ModelError(f"{flag} {path!r} is not a directory name", hint=f"e.g. {flag} out/")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ModelError(f"{flag} {path}: is a file, not a directory",
                         hint="give a directory (it is created when missing)")
    base = _existing_ancestor(path)
    if not os.path.isdir(base):
        raise ModelError(f"{flag} {path}: {base} is a file, not a directory",
                         hint="give a directory path")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ModelError(f"{flag} {path}: {base} is not writable",
                         hint="check its permissions, or write elsewhere")


def check_args(args) -> None:
    """The flags of any command: limits, codes and where the output goes."""
    for dest in LIMITS:
        if dest == "quiet" and getattr(args, "command", None) != "confirm":
            continue        # `check --quiet` is a switch, not seconds
        value = getattr(args, dest, None)
        if value is not None:
            check_limit(dest, value)
    if isinstance(getattr(args, "port", None), int) and args.port > 65535:
        raise ModelError(f"--port must be a TCP port (1-65535), not {args.port}",
                         hint="e.g. --port 10997, or leave it out to use a free one")
    for flag in ("distributed", "port", "bind"):
        # an engine still unset comes from the config: checked again once it is read
        if getattr(args, flag, None) is not None and \
                getattr(args, "engine", None) not in ("tlc", None):
            raise ModelError(f"--{flag} is an option of TLC's distributed mode: it needs "
                             "--engine tlc", hint="e.g. barrierproof check --engine tlc "
                                                  "--distributed 2 PATH")
    if getattr(args, "bind", None) is not None and getattr(args, "distributed", None) is None:
        raise ModelError("--bind is the address of TLC's distributed server: it needs "
                         "--distributed K", hint="e.g. barrierproof tlc --distributed 2 PATH")
    if getattr(args, "port", None) is not None and getattr(args, "distributed", None) is None:
        raise ModelError("--port is the port of TLC's distributed server: it needs "
                         "--distributed K", hint="e.g. barrierproof tlc --distributed 2 "
                                                 "--port 10997 PATH")
    for dest, flag in (("select", "--select"), ("ignore", "--ignore")):
        if isinstance(getattr(args, dest, None), str):
            check_codes(getattr(args, dest), flag)
    output = getattr(args, "output", None)
    if output is not None:
        if getattr(args, "command", None) == "tla":
            writable_dir(output, "-o")
        else:
            from .outputs import plan       # -o [FORMAT=]PATH, repeatable
            for _, path in plan(args)[1]:
                writable_file(path, "-o")
    if getattr(args, "trace_dir", None) is not None:
        writable_dir(args.trace_dir, "--trace-dir")
