"""GitHub Actions workflow annotations (`--format github`): one `::error` line per finding, on
the kernel's line in the pull request's diff, without code scanning.

The workflow-command syntax is `::LEVEL file=PATH,line=N,title=TITLE::MESSAGE`. GitHub reads
`%`, CR and LF in the message as `%25`, `%0D`, `%0A`, and in property values also `:` and `,`
as `%3A`, `%2C` (the escaping of actions/toolkit's command.ts); anything else is literal, so a
user's name cannot end the command early or open another one.

>>> escape_property("ring.py::a,b")
'ring.py%3A%3Aa%2Cb'
>>> escape_data("50% done\\nnext")
'50%25 done%0Anext'
"""

from __future__ import annotations

from typing import Sequence

from ..rules import docs_url
from ..verdict import Verdict
from .safe import printable_copy
from .text import text_report
from .views import split_location


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, title: str, location: str | None = None,
               file: str | None = None) -> str:
    path, line = split_location(location)
    props = []
    if path or file:
        props.append(f"file={escape_property(path or file)}")
    if line:
        props.append(f"line={line}")
    props.append(f"title={escape_property(title)}")
    return f"::{level} {','.join(props)}::{escape_data(message)}"


def _annotations(v: Verdict, expect: bool) -> list[str]:
    ref = v.source or v.name
    kernel_file = ref.partition("::")[0] if "::" in ref else None
    met = expect and bool(v.expected) and v.matches(v.expected)
    out = []
    if v.verdict in ("violation", "error"):
        level = "notice" if met else "error"
        for d in v.diagnostics:
            message = f"{ref}: {d.message}"
            if d.help:
                message += f"\nhelp: {d.help}"
            if docs_url(d.code):
                message += f"\ndocs: {docs_url(d.code)}"
            title = f"{d.code} {d.name}" + (" (as expected)" if met else "")
            out.append(annotation(level, message, title, d.location, kernel_file))
        if not v.diagnostics:
            out.append(annotation(level, f"{ref}: {v.label}", v.label, file=kernel_file))
    elif v.verdict in ("bounded", "unknown"):
        out.append(annotation("notice" if met else "warning",
                              f"{ref}: {v.verdict}: {v.coverage or 'nothing was proved'}",
                              f"barrierproof {v.verdict}", file=kernel_file))
    elif expect and v.expected and not met:
        out.append(annotation("error", f"{ref}: {v.label}, but it declares {v.expected}",
                              f"expected {v.expected}", file=kernel_file))
    for s in v.suppressed:
        out.append(annotation("notice", f"{ref}: {s['message']} (suppressed by {s['by']})",
                              f"{s['code']} {s['name']} (suppressed)", s["location"],
                              kernel_file))
    return out


def github_report(verdicts: Sequence[Verdict], expect: bool = False) -> str:
    """The annotations, then the text report's summary line (a plain line in the log)."""
    safe = [printable_copy(v) for v in verdicts]     # names from users' files: safe.py
    lines = [a for v in safe for a in _annotations(v, expect)]
    summary = text_report(verdicts, only=[]).strip()
    return "\n".join(lines + [summary]) + "\n"
