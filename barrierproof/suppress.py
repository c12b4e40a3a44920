"""Suppressions: a finding the user accepts, silenced where it is and reported as suppressed.

Two scopes, as in ruff's `# noqa`:

- a comment on the finding's own line, `# barrierproof: ignore[BP103]` (several codes:
  `ignore[BP103, BP105]`), silences that code's finding at that line;
- `@protocol(ignore=["BP103"])` silences the code for the whole protocol.

An engine reports one violation per target (the shortest). When that finding is suppressed, the
target is checked again with its code ignored for this target only, and the verdict is that
second check's, with the suppressed finding listed in `Verdict.suppressed` and a note (so every
report format shows it). Ignoring the code for the re-check also ignores any other finding of it
in that target; the note says so, so a suppression never hides more than it states.

>>> sorted(comment_codes("    k.barrier_arrive(x)  # barrierproof: ignore[BP103, BP105]"))
['BP103', 'BP105']
>>> comment_codes("k.barrier_arrive(x)  # noqa")
frozenset()
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Sequence

from .checker.verdict import Diagnostic, Verdict
from .model.ir import ModelError
from .model.semantics import CODES

COMMENT = re.compile(r"#\s*barrierproof:\s*ignore\[([^\]]*)\]")


def comment_codes(line: str) -> frozenset[str]:
    """The codes a line's `# barrierproof: ignore[...]` comment names (none: no comment)."""
    found: set[str] = set()
    for m in COMMENT.finditer(line):
        found |= {c.strip() for c in m.group(1).split(",") if c.strip()}
    return frozenset(found)


def _line_of(location: str | None) -> tuple[str, int] | None:
    if not location:
        return None
    path, _, line = location.rpartition(":")
    return (path, int(line)) if path and line.isdigit() else None


def _source_line(path: str, line: int) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, text in enumerate(f, 1):
                if n == line:
                    return text
    except OSError:
        pass
    return ""


def suppressed_by(d: Diagnostic, protocol_ignore: frozenset[str]) -> str | None:
    """What silences finding `d`: the comment on its line or the protocol's `ignore=`; None if
    nothing does. A comment naming an unknown code is an input error, never a silent no-op."""
    if d.code in protocol_ignore:
        return f"@protocol(ignore=[{d.code!r}])"
    where = _line_of(d.location)
    if where is None:
        return None
    codes = comment_codes(_source_line(*where))
    unknown = sorted(c for c in codes if c not in CODES)
    if unknown:
        raise ModelError(f"{d.location}: `# barrierproof: ignore[{', '.join(sorted(codes))}]` "
                         f"names {unknown[0]!r}, which is not a diagnostic code",
                         hint="use the codes the report prints, e.g. ignore[BP103]")
    return f"# barrierproof: ignore[{d.code}]" if d.code in codes else None


def apply(verdict: Verdict, protocol_ignore: frozenset[str],
          recheck: Callable[[frozenset[str]], Verdict]) -> Verdict:
    """`verdict` with its suppressed findings silenced: while the reported violation is
    suppressed, check again (`recheck(codes)`) with its code ignored too. Returns the final
    verdict, carrying every suppressed finding."""
    silenced: list[dict] = []
    ignored: frozenset[str] = frozenset()
    while verdict.verdict == "violation" and verdict.diagnostics:
        first = verdict.diagnostics[0]
        by = suppressed_by(first, protocol_ignore)
        if by is None or first.code in ignored:
            break
        silenced.append({"code": first.code, "name": first.name, "message": first.message,
                         "location": first.location, "by": by})
        ignored |= {first.code}
        verdict = recheck(ignored)
    if silenced:
        verdict.suppressed = silenced + verdict.suppressed
        for s in silenced:
            verdict.notes.append(
                f"suppressed: {s['code']} [{s['name']}] at {s['location'] or 'the kernel'} by "
                f"{s['by']}; {s['code']} is then ignored for this target, so no other "
                f"{s['code']} in it is reported")
    return verdict


def apply_all(verdicts: list[Verdict], targets: Sequence, options,
              run: Callable[[object, object], list[Verdict]]) -> tuple[list[Verdict], int]:
    """`apply` to every verdict of a run: `run(target, options)` checks one target again with
    the options given (the run's own, with the suppressed codes added to its ignore set).
    Returns the verdicts and how many checks ran again."""
    by_ref = {t.ref: t for t in targets}
    out = []
    rechecks = 0
    for v in verdicts:
        target = by_ref.get((v.source or "").partition("#")[0])
        if target is None or v.verdict != "violation":
            out.append(v)
            continue

        def recheck(codes: frozenset[str], target=target, source=v.source) -> Verdict:
            nonlocal rechecks
            rechecks += 1
            again = run(target, dataclasses.replace(options, ignore=options.ignore | codes))
            return next((a for a in again if a.source == source), again[0])
        out.append(apply(v, target.ignore, recheck))
    return out, rechecks
