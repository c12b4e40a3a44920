"""One scope of names per protocol: its thread, warp, cluster and grid axes, its parameters and
its loop variables.

Every one of these names is a variable the interpreter binds by name, so two of them spelled
alike would silently refer to the same value: a loop variable named like the thread axis makes
`k.thread == 1` a test on the loop, and a protocol in which thread 1 waits forever would pass.
A collision is therefore an input error naming both places. Sequential loops may reuse a name
(Python does the same); a loop inside another may not take the outer one's name.
"""

from __future__ import annotations

from .ir import Loc, Loop, ModelError, WarpRegion, When

# Bound by the interpreter in every thread: the lane of a thread in its warp.
LANE = "lane"


class Scope:
    """Names declared so far, with what each is and where it was declared."""

    def __init__(self, protocol: str):
        self.protocol = protocol
        self.names: dict[str, tuple[str, Loc | None]] = {}

    def declare(self, name: str, what: str, loc: Loc | None) -> None:
        if not isinstance(name, str) or not name:
            raise ModelError(f"{what} name {name!r} of {self.protocol} is not a name",
                             loc=loc, hint="name it with a non-empty string")
        if name in self.names:
            other, where = self.names[name]
            raise ModelError(f"{what} {name!r} of {self.protocol} has the same name as its "
                             f"{other}{_at(where)}: inside the body one would hide the other",
                             loc=loc, hint=f"rename one of them (e.g. {name}_{_short(what)})")
        self.names[name] = (what, loc)

    def check_loops(self, body) -> None:
        """Loop variables against the protocol's names and the loops around them."""
        for stmt in body:
            if isinstance(stmt, Loop):
                inner = Scope(self.protocol)
                inner.names = dict(self.names)
                inner.declare(stmt.var, "loop variable", stmt.loc)
                inner.check_loops(stmt.body)
            elif isinstance(stmt, When):
                self.check_loops(stmt.then)
                self.check_loops(stmt.orelse)
            elif isinstance(stmt, WarpRegion):
                self.check_loops(stmt.body)


def _at(loc: Loc | None) -> str:
    return f" (line {loc.line})" if loc is not None and loc.line else ""


def _short(what: str) -> str:
    return what.split()[0]
