"""Suppressions: a finding the user accepts, silenced where it is and reported as suppressed.

Two scopes, as in ruff's `# noqa`:

- a comment on the finding's own line, `# barrierproof: ignore[BP103]` (several codes:
  `ignore[BP103, BP105]`), silences that code's finding at that line;
- `@protocol(ignore=["BP103"])` silences the code for the whole protocol.

An engine reports one violation per target (the shortest). When that finding is suppressed, the
target is checked again, and the verdict is that second check's, with the suppressed finding
listed in `Verdict.suppressed` and a note (so every report format shows it):

- a comment suppresses one place: the check again tolerates that code at that line only
  (`Options.tolerate`; the explorer does not report it and does not search past it,
  checker/engines/explore.py), so the same code elsewhere, or another code, is still reported
  with its own counterexample;
- `@protocol(ignore=...)`, and a comment under an engine that cannot tell places apart
  (`locates_suppressions` in checker/engine_registry.py: tlc, symbolic), check again with the
  code ignored for the whole target; the note says so, so a suppression never hides more than
  it states.

>>> sorted(comment_codes("    k.barrier_arrive(x)  # barrierproof: ignore[BP103, BP105]"))
['BP103', 'BP105']
>>> comment_codes("k.barrier_arrive(x)  # noqa")
frozenset()
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable, Sequence

from .checker.verdict import Diagnostic, Verdict
from .model.ir import ModelError
from .model.semantics import CODES
from .model.violations import Place

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


def _place(d: Diagnostic) -> Place | None:
    where = _line_of(d.location)
    return (d.code, os.path.realpath(where[0]), where[1]) if where else None


def apply(verdict: Verdict, protocol_ignore: frozenset[str],
          recheck: Callable[[frozenset[str], frozenset[Place]], Verdict],
          precise: bool = False, engine: str = "explore") -> Verdict:
    """`verdict` with its suppressed findings silenced: while the reported violation is
    suppressed, check again (`recheck(codes, places)`) with it tolerated at its place (a
    comment, when the engine is `precise`) or its code ignored (otherwise). Returns the final
    verdict, carrying every suppressed finding."""
    silenced: list[dict] = []
    ignored: frozenset[str] = frozenset()
    places: frozenset[Place] = frozenset()
    while verdict.verdict == "violation":
        # every suppressed one of its findings (found statically there may be several)
        marked = [(d, by) for d in verdict.diagnostics
                  if (by := suppressed_by(d, protocol_ignore)) is not None]
        new = []
        for d, by in marked:
            at = _place(d) if precise and by.startswith("#") else None
            if d.code in ignored or at in places:
                # checked again with it suppressed, the engine still reports it (a finding
                # made while tracing, before any search): it stands, and the note says why
                verdict.notes.append(f"{by} at {d.location} could not be applied: checked "
                                     f"again with it suppressed, the finding stands "
                                     f"({verdict.coverage or 'before any search'})")
            else:
                new.append((d, by, at))
        if not new:
            break
        for d, by, at in new:
            silenced.append({"code": d.code, "name": d.name, "message": d.message,
                             "location": d.location, "by": by, "place": at is not None})
            if at is not None:
                places |= {at}
            else:
                ignored |= {d.code}
        verdict = recheck(ignored, places)
    if silenced:
        verdict.suppressed = [{k: v for k, v in s.items() if k != "place"} for s in silenced] \
            + verdict.suppressed
        for s in silenced:
            head = (f"suppressed: {s['code']} [{s['name']}] at {s['location'] or 'the kernel'} "
                    f"by {s['by']}; ")
            if s["place"]:
                tail = f"that place only: any other {s['code']} or other finding is reported"
            elif s["by"].startswith("#"):
                tail = (f"the {engine} engine cannot suppress at one place, so {s['code']} is "
                        f"then ignored for this target and no other {s['code']} in it is "
                        "reported")
            else:
                tail = (f"{s['code']} is then ignored for this target, so no other "
                        f"{s['code']} in it is reported")
            verdict.notes.append(head + tail)
    return verdict


def apply_all(verdicts: list[Verdict], targets: Sequence, options,
              run: Callable[[object, object], list[Verdict]], precise: bool = False,
              engine: str = "explore") -> tuple[list[Verdict], int]:
    """`apply` to every verdict of a run: `run(target, options)` checks one target again with
    the options given (the run's own, with the suppressed places tolerated and the suppressed
    codes added to its ignore set). `precise`: the engine suppresses at a place
    (`locates_suppressions`). Returns the verdicts and how many checks ran again."""
    by_ref = {t.ref: t for t in targets}
    out = []
    rechecks = 0
    for v in verdicts:
        target = by_ref.get((v.source or "").partition("#")[0])
        if target is None or v.verdict != "violation":
            out.append(v)
            continue

        def recheck(codes: frozenset[str], places: frozenset[Place], target=target,
                    source=v.source) -> Verdict:
            nonlocal rechecks
            rechecks += 1
            again = run(target, dataclasses.replace(options, ignore=options.ignore | codes,
                                                    tolerate=options.tolerate | places))
            return next((a for a in again if a.source == source), again[0])
        out.append(apply(v, target.ignore, recheck, precise, engine))
    return out, rechecks
