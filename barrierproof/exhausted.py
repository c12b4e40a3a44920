"""Python's own limits reached on a user's protocol: a verdict, never a traceback.

An expression nested thousands deep exhausts the interpreter's stack (RecursionError) in the
compiler or an engine; a barrier array of 2**40 instances exhausts memory (MemoryError). The
first is an input the checker cannot read (`error`, exit 3); the second is a limit (`bounded`,
exit 2), like the watchdog's stop. A size beyond a machine word (`--param stages=10**20`: an
OverflowError where Python needs a C integer) is an input error too.
"""

from __future__ import annotations

from .checker.check import error_verdict
from .checker.verdict import Verdict
from .model.ir import ModelError

EXHAUSTED = (RecursionError, MemoryError, OverflowError)


def exhausted_verdict(name: str, ref: str, err: BaseException, doing: str,
                      expected: str | None = None, engine: str = "explore") -> Verdict:
    if isinstance(err, RecursionError):
        verdict = error_verdict(name, ModelError(
            f"an expression or statement of {name} nests too deeply (Python's recursion "
            f"limit reached while {doing} it)",
            hint="build deep sums in smaller steps, e.g. with a loop variable"), ref)
    elif isinstance(err, OverflowError):
        verdict = error_verdict(name, ModelError(
            f"a size of {name} is too large to build (OverflowError while {doing} it: {err})",
            hint="pass smaller parameter values (--param NAME=VALUE), or prove it with `prove`"),
            ref)
    else:
        verdict = Verdict(name, "unknown" if engine == "symbolic" else "bounded", source=ref,
                          coverage=f"stopped: memory ran out while {doing} it; nothing was "
                                   "concluded", engine=engine)
        verdict.notes.append("a smaller instance (fewer barriers, threads or steps) or "
                             "--max-memory gives a clear limit")
    verdict.expected = expected
    return verdict
