"""Names come from users' files: a protocol or thread name may hold an ESC sequence, a NUL or a
newline. Reports for people (text, terminal) show such characters escaped, so a name cannot
rewrite a CI log's colours or forge a line; XML gets only what XML 1.0 can carry.

>>> printable("ring\\x1b[2J\\nverified")
'ring\\\\x1b[2J\\\\nverified'
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

# C0 and C1 controls, DEL, the Unicode line/paragraph separators and bidi overrides, lone
# surrogates (no encoding can write them) and the noncharacters XML refuses (U+FFFE, U+FFFF).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")


def _escape(match: re.Match) -> str:
    ch = match.group()
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{ord(ch):02x}" if ord(ch) < 256
                                                        else f"\\u{ord(ch):04x}")


def printable(text: str) -> str:
    """`text` on one line with every control character escaped."""
    return _CONTROL.sub(_escape, text)


# Fields printed as several lines (a fix's diff): each line is escaped on its own, so the
# newlines between them stay newlines and a control character inside one is still escaped.
_MULTILINE = {"patch"}


def printable_lines(text: str) -> str:
    return "\n".join(printable(row) for row in text.split("\n"))


def printable_copy(obj: Any) -> Any:
    """A copy of a Verdict (or any dataclass, list, dict of them) with every string printable."""
    if isinstance(obj, str):
        return printable(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        def copy(name: str, value: Any) -> Any:
            if name in _MULTILINE and isinstance(value, str):
                return printable_lines(value)
            return printable_copy(value)
        return dataclasses.replace(obj, **{f.name: copy(f.name, getattr(obj, f.name))
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, list):
        return [printable_copy(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(printable_copy(x) for x in obj)
    if isinstance(obj, dict):
        return {printable_copy(k): printable_copy(v) for k, v in obj.items()}
    return obj
