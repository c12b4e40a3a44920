"""JUnit XML: one test case per protocol or kernel, for CI test-result viewers.

verified/proved pass; a violation is a <failure> (its message the diagnostic, its text the whole
report with the counterexample timeline); an input error is an <error>; bounded and unknown are
an <error> too, of type `bounded`/`unknown` with the reason as message: nothing was proved, and
a viewer that counted them as skipped would show green for a target nobody checked (the run's
exit code is 2). With `expect=True` a case passes exactly when the verdict matches the one the
example declares (a declared `unknown` that stays unknown passes), and fails otherwise.

>>> from barrierproof.checker.verdict import Verdict
>>> print(junit_report([Verdict("p", "verified", source="k.py::p")]).splitlines()[1])
<testsuites name="barrierproof" tests="1" failures="0" errors="0" skipped="0" time="0.000">
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import Sequence

from .text import describe
from ..verdict import Verdict
from .safe import printable_copy

# Characters XML 1.0 cannot carry, even escaped.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _INVALID_XML.sub("?", text)


def _classname(verdict: Verdict) -> str:
    """`examples/handoff.py::p` -> `examples.handoff`, as test viewers group by class."""
    ref = verdict.source or verdict.name
    path = ref.partition("::")[0] if "::" in ref else ref
    stem = os.path.splitext(path)[0].lstrip("./")
    return stem.replace(os.sep, ".").replace("/", ".") or "barrierproof"


def _unproved_reason(verdict: Verdict) -> str:
    """Why a bounded or unknown verdict proved nothing: for unknown, the construct outside the
    model (or what the engine left open); for bounded, the limit that stopped the search."""
    first = verdict.diagnostics[0].one_line() if verdict.diagnostics else verdict.verdict
    if verdict.verdict == "bounded" or not verdict.diagnostics:
        return f"{verdict.verdict}: {verdict.coverage or first}"
    return f"{verdict.verdict}: {first}"


def _outcome(verdict: Verdict, expect: bool) -> tuple[str | None, str, str]:
    """(element or None for a pass, message, type)."""
    unproved = verdict.verdict in ("bounded", "unknown")
    if expect:
        if verdict.expected and verdict.matches(verdict.expected):
            return None, "", ""
        want = f"expected {verdict.expected or 'a declared expectation'}"
        if unproved:
            return "error", f"{want}, got {_unproved_reason(verdict)}", verdict.verdict
        return "failure", f"{want}, got {verdict.label}", "expectation"
    if verdict.verdict in ("verified", "proved"):
        return None, "", ""
    if unproved:
        return "error", _unproved_reason(verdict), verdict.verdict
    first = verdict.diagnostics[0].one_line() if verdict.diagnostics else verdict.verdict
    code = verdict.diagnostics[0].code if verdict.diagnostics else verdict.verdict
    return ("failure" if verdict.verdict == "violation" else "error"), first, code


def junit_tree(verdicts: Sequence[Verdict], expect: bool = False) -> ET.Element:
    counts = {"failure": 0, "error": 0, "skipped": 0}
    total = sum(v.seconds for v in verdicts)
    root = ET.Element("testsuites", name="barrierproof")
    suite = ET.SubElement(root, "testsuite", name="barrierproof")
    for v in (printable_copy(v) for v in verdicts):     # names from users' files: safe.py
        case = ET.SubElement(suite, "testcase", name=v.name, classname=_classname(v),
                             time=f"{v.seconds:.3f}")
        ref = v.source or v.name
        if "::" in ref:
            case.set("file", ref.partition("::")[0])
        kind, message, type_ = _outcome(v, expect)
        if kind is not None:
            counts[kind] += 1
            element = ET.SubElement(case, kind, message=_clean(message), type=type_)
            element.text = _clean(describe(v))
        out = ET.SubElement(case, "system-out")
        out.text = _clean(f"{v.label}: {v.coverage or ''} ({v.states} states, engine {v.engine})"
                          + "".join(f"\nsuppressed: {s['code']} at {s['location']} by {s['by']}"
                                    for s in v.suppressed))
    for element in (root, suite):
        element.set("tests", str(len(verdicts)))
        element.set("failures", str(counts["failure"]))
        element.set("errors", str(counts["error"]))
        element.set("skipped", str(counts["skipped"]))
        element.set("time", f"{total:.3f}")
    return root


def junit_report(verdicts: Sequence[Verdict], expect: bool = False) -> str:
    root = junit_tree(verdicts, expect)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
