"""Where a run's reports go: the console plus any number of files, all from one run.

`-o FORMAT=PATH` (repeatable) writes that format to PATH and leaves the console report on;
a plain `-o PATH` writes `--format` there instead of the console (the older single-report form).
`-q` shows only the failures on the console (the summary still counts every target),
`--statistics` adds a count per code, `--exit-zero` turns findings into exit 0 (input errors
stay 3: a gate must not pass on a file it could not read).

>>> split_output("sarif=reports/bp.sarif")
('sarif', 'reports/bp.sarif')
>>> split_output("report.txt")
(None, 'report.txt')
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

from .checker.verdict import Verdict
from .model.ir import ModelError
from .safe_write import write_output

# --format NAME -> (module, function(verdicts) -> str); junit also takes `expect`.
REPORTERS = {
    "text": ("barrierproof.checker.report.text", "text_report"),
    "json": ("barrierproof.checker.report.text", "json_report"),
    "sarif": ("barrierproof.checker.report.sarif", "sarif_report"),
    "junit": ("barrierproof.checker.report.junit", "junit_report"),
    "html": ("barrierproof.checker.report.html", "html_report"),
    "github": ("barrierproof.checker.report.github", "github_report"),
}


def render(fmt: str, verdicts: list[Verdict], expect: bool = False) -> str:
    module, fn = REPORTERS[fmt]
    report = getattr(importlib.import_module(module), fn)
    text = report(verdicts, expect=expect) if fmt in ("junit", "github") else report(verdicts)
    # A lone surrogate from a user's name that a reporter passed on: escaped, never a crash.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def split_output(value: str) -> tuple[str | None, str]:
    """`FORMAT=PATH` -> (FORMAT, PATH) when FORMAT is a report format; else (None, value)."""
    fmt, sep, path = value.partition("=")
    if sep and fmt in REPORTERS:
        if not path:
            raise ModelError(f"-o {value}: no path after {fmt}=",
                             hint=f"e.g. -o {fmt}=barrierproof.{fmt}")
        return fmt, path
    if sep and fmt.isidentifier():      # `-o xml=out.xml`: a format misspelt, not a file name
        raise ModelError(f"-o {value}: {fmt!r} is not a report format (formats: "
                         f"{', '.join(REPORTERS)})",
                         hint=f"e.g. -o junit={path or 'report.xml'}; a file whose name has '=' "
                              f"in it: -o ./{value}")
    return None, value


def output_paths(args) -> list[str]:
    """The paths of `-o [FORMAT=]PATH` (repeatable)."""
    values = getattr(args, "output", None) or []
    return [split_output(v)[1] for v in ([values] if isinstance(values, str) else values)]


def plan(args) -> tuple[str | None, list[tuple[str, str]]]:
    """(the console's format, or None when a plain -o takes its place; [(format, path)])."""
    default = getattr(args, "format", None) or "text"
    values = getattr(args, "output", None) or []
    files, plain = [], False
    for value in [values] if isinstance(values, str) else values:
        fmt, path = split_output(value)
        plain |= fmt is None
        files.append((fmt or default, path))
    paths = [p for _, p in files]
    for p in paths:
        if paths.count(p) > 1:
            raise ModelError(f"-o names {p} twice; each report needs a file of its own",
                             hint="e.g. -o sarif=bp.sarif -o junit=bp-junit.xml")
    return (None if plain else default), files


def failures(verdicts: Sequence[Verdict], expect: bool) -> list[Verdict]:
    """What fails the run: a verdict that does not match its expectation (with --expect), or
    else one that is not verified/proved."""
    if expect:
        return [v for v in verdicts if not (v.expected and v.matches(v.expected))]
    return [v for v in verdicts if v.exit_code != 0]


def statistics(verdicts: Sequence[Verdict]) -> str:
    """One line per code, most frequent first: count, code, name (suppressed ones apart)."""
    from .model.semantics import CODES
    counts: dict[tuple[str, bool], int] = {}
    for v in verdicts:
        for d in v.diagnostics:
            counts[d.code, False] = counts.get((d.code, False), 0) + 1
        for s in v.suppressed:
            counts[s["code"], True] = counts.get((s["code"], True), 0) + 1
    if not counts:
        return "no findings\n"
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    width = max(len(str(n)) for n in counts.values())
    return "".join(f"{n:>{width}}  {code:<6} {CODES.get(code, 'input error')}"
                   f"{' (suppressed)' if quiet else ''}\n" for (code, quiet), n in rows)


def exit_status(code: int, args) -> int:
    """--exit-zero: findings (1) and open verdicts (2) pass; an input error (3) never does."""
    return 0 if getattr(args, "exit_zero", False) and code in (1, 2) else code


def write_reports(verdicts: list[Verdict], args) -> None:
    """Every file of -o, then the console; a failed write raises OSError (the caller's one
    line, exit 3)."""
    console, files = plan(args)
    for fmt, path in files:
        text = render(fmt, verdicts, args.expect)
        try:
            write_output(path, text)        # whole or not at all, never through a symlink
        except OSError as err:
            err.filename = err.filename or path     # a failed flush names no file
            raise
    quiet = getattr(args, "quiet", False)
    if console == "text":
        if quiet:
            from .checker.report.text import text_report
            sys.stdout.write(text_report(verdicts, only=failures(verdicts, args.expect)))
        elif sys.stdout.isatty():
            from .checker.report.console import print_report
            print_report(verdicts)
        else:
            sys.stdout.write(render("text", verdicts, args.expect))
    elif console is not None:
        text = render(console, verdicts, args.expect)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if getattr(args, "statistics", False):
        # beside a machine-read console report (json, sarif, ...) on stderr, so stdout parses
        out = sys.stdout if console in ("text", "github", None) else sys.stderr
        out.write(statistics(verdicts))


def add_flags(p) -> None:
    """The CI conventions' flags of check / prove / tlc."""
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="skip files below a PATH directory whose path, name or a parent "
                        "folder's name matches GLOB (repeatable); they are not imported")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 even with violations or open verdicts (input errors still 3)")
    p.add_argument("--statistics", action="store_true",
                   help="after the report, count the findings per code")
