"""Standard output that is closed, or a pipe whose reader went away: never a pass.

`barrierproof check p.py >&-` has nowhere to write its report, and `check p.py | head -c1`
loses most of it. Neither may end in exit 0: a CI step reading only the exit code would take a
refuted protocol for a verified one. A closed stream is found before any work (an input error);
a broken pipe ends the run with the verdict's own exit code, or 2 when that was 0, because the
report that says so was not delivered.
"""

from __future__ import annotations

import io
import os
import sys

from .model.ir import ModelError

# Exit code of a run whose report could not be delivered, when the verdict itself was a pass.
UNDELIVERED = 2


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def reopen_closed() -> set[int]:
    """Put /dev/null on a closed fd 1 or 2, so no file this run opens lands there (a report
    written to fd 1 by accident, a child inheriting it); the fds that were closed."""
    closed = set()
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if _closed(fd):
            closed.add(fd)
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False),
                                                encoding="utf-8", errors="backslashreplace",
                                                line_buffering=True))
    return closed


def writes_stdout(args) -> bool:
    """Whether this command's result goes to standard output."""
    command = getattr(args, "command", None)
    if command == "tla":
        return False
    return not getattr(args, "output", None)


def require_stdout(args, closed: set[int]) -> None:
    """A command whose report goes to stdout refuses to run with stdout closed."""
    if 1 in closed and writes_stdout(args):
        raise ModelError("standard output is closed: the report would be lost",
                         hint="redirect it (> report.txt) or pass -o FILE")


def broken_pipe(code: int | None) -> int:
    """The exit code after the reader of stdout went away; stdout is pointed at /dev/null so
    the interpreter's own flush at exit does not fail again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
    try:
        print("error: the output pipe was closed before the report was written; "
              "the exit code is the verdict's" + ("" if code else
                                                 f" ({UNDELIVERED}: nothing was delivered)"),
              file=sys.stderr)
    except (OSError, ValueError):
        pass
    return code if code else UNDELIVERED
