"""Every reduction states, per opcode, how it sees the instruction (fail closed).

A reduction that met an opcode it does not know would have to guess (no resources: "local";
no operands: "the same"), and a guess makes the reduction unsound the day a primitive is
added. So each reduction reads a table over every opcode of `OPCODE_NAMES`, assembled from the
rows the families declare (model/steps.py), and checks it when it is imported: a missing opcode
is an error there, before any kernel is explored."""

from __future__ import annotations

from collections.abc import Mapping


class UnclassifiedOpcode(RuntimeError):
    """An opcode that a reduction's table does not classify."""


def require_classified(table: Mapping[int, str], opcodes: Mapping[int, str], reduction: str,
                       where: str) -> None:
    """Raise unless `table` classifies every opcode of `opcodes` (and nothing else)."""
    missing = sorted(set(opcodes) - set(table))
    if missing:
        names = ", ".join(f"{opcodes[op]} ({op})" for op in missing)
        raise UnclassifiedOpcode(
            f"{reduction} does not classify the opcode(s) {names}: add each to the table in "
            f"{where} (what it reads and writes, or that the reduction is off where it occurs); "
            f"an unclassified opcode is never taken as touching nothing")
    unknown = sorted(set(table) - set(opcodes))
    if unknown:
        raise UnclassifiedOpcode(f"{reduction} classifies opcode(s) {unknown} that "
                                 f"OPCODE_NAMES does not name ({where})")
