"""SARIF 2.1.0 for code scanning: one result per diagnostic, at the kernel's source line.

- Each diagnostic code is a rule (`BP100` ...); input errors are the rule `input-error`, and a
  search that stopped at a limit is the rule `bounded` (a warning: nothing was proved).
- A result's location is the diagnostic's `path:line`, relative to the working directory
  (`%SRCROOT%`), which is the repository's top when CI runs there.
- A counterexample is a codeFlow with one threadFlow per thread or asynchronous agent; every step
  carries its `executionOrder`, so a viewer can interleave them; the stuck waits come last.
- `partialFingerprints` keep an alert the same alert across runs while the finding is the same.

>>> from barrierproof.checker.verdict import Diagnostic, Verdict
>>> v = Verdict("p", "violation", [Diagnostic("BP100", "deadlock", "k.py:3")], source="k.py::p")
>>> log = sarif_log([v])
>>> r = log["runs"][0]["results"][0]
>>> r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["region"]["startLine"]
('BP100', 'error', 3)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from ...model.semantics import CODES
from ..check import HELP
from ..rules import docs_url
from ..verdict import Verdict
from .text import steps_text
from .views import event_kind, lanes, location_in_text, split_location, stuck

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
SYNC_KINDS = {"wait": "acquire", "arrive": "release", "land": "release", "mma": "release"}

# What each rule means, for someone who has never seen a model checker.
MEANING = {
    "BP100": "Some thread has not finished and nothing (no thread, TMA copy or tensor-core op) can "
             "move: the kernel hangs.",
    "BP101": "A barrier completes a phase while a thread that waits on it has not yet observed the "
             "previous completion; its parity bit now points at the wrong phase. For a parity "
             "wait: it can return for a phase other than the one the thread means.",
    "BP102": "A thread waits on a barrier for the first time after it has already completed two or "
             "more phases, so its parity bit points at the wrong phase.",
    "BP103": "At kernel exit (or deallocation) a thread that waits on a barrier has not observed "
             "every completion of it.",
    "BP104": "At kernel exit a barrier holds arrivals of a phase that never completed.",
    "BP105": "At kernel exit a TMA copy or tcgen05 operation that arrives on a barrier is still in "
             "flight, or a thread's TMA store, WGMMA or cp.async still runs on shared memory.",
    "BP110": "tcgen05_mma or tcgen05_commit_arrive arrives on a Barrier declared without "
             "orders_tensor_core=True.",
    "BP111": "A TMA or tcgen05 arrival targets a ClusterBarrier or another object that is not a "
             "plain Barrier.",
    "BP112": "A thread waits on another block's instance of a barrier; waits are local.",
    "BP120": "A barrier index is out of range, or an array barrier is used without an index.",
    "BP121": "An arrival count or tx-count goes outside the mbarrier's hardware range.",
    "BP130": "A phase can never complete because its tx-count never returns to zero.",
    "BP190": "The kernel uses synchronization the model does not cover, so the verdict can be at "
             "best unknown.",
    "BP200": "Two accesses to the same shared-memory slot (thread loads/stores, TMA copies and "
             "stores, MMA operand reads), at least one a write, that no barrier orders: on some "
             "schedule they overlap.",
    "BP201": "The same for tensor memory: tcgen05 accumulators and operands, tcgen05.ld/st.",
    "input-error": "The input could not be modelled: a Python error, a missing parameter value, "
                   "an unsupported construct.",
    "bounded": "The search stopped at a limit (states, depth, time, memory, Ctrl-C) before it "
               "could prove or refute the protocol.",
}
NAMES = {**CODES, "input-error": "input-error", "bounded": "bounded-search"}
HELP_TEXT = {**HELP,
             "input-error": "fix the input at the reported location; the message says what",
             "bounded": "raise --max-states / --timeout / --max-memory, check smaller parameter "
                        "values, or prove it for all values with `barrierproof prove`"}


def _tool_version() -> str:
    from ... import __version__
    return __version__


def _artifact(path: str) -> dict:
    """An artifactLocation: relative to %SRCROOT% when below the working directory."""
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if rel.startswith(".."):
            return {"uri": Path(path).as_uri()}
        path = rel
    return {"uri": quote(path.replace(os.sep, "/")), "uriBaseId": SRCROOT}


def _location(path: str | None, line: int | None, message: str | None = None) -> dict:
    loc: dict = {}
    if path:
        physical: dict = {"artifactLocation": _artifact(path)}
        if line:
            physical["region"] = {"startLine": line}
        loc["physicalLocation"] = physical
    if message:
        loc["message"] = {"text": message}
    return loc


def _rule_id(code: str) -> str:
    return code if code in CODES else "input-error"


def _level(rule: str) -> str:
    return "warning" if rule in ("BP190", "bounded") else "error"


def _rule(rule: str) -> dict:
    descriptor = {
        "id": rule,
        "name": NAMES.get(rule, rule),
        "shortDescription": {"text": NAMES.get(rule, rule).replace("-", " ")},
        "fullDescription": {"text": MEANING.get(rule, NAMES.get(rule, rule))},
        "defaultConfiguration": {"level": _level(rule)},
        "properties": {"tags": ["concurrency", "gpu", "barrier"], "precision": "very-high",
                       "problem.severity": "error" if _level(rule) == "error" else "warning"},
    }
    if HELP_TEXT.get(rule):
        descriptor["help"] = {"text": HELP_TEXT[rule]}
    if docs_url(rule):
        descriptor["helpUri"] = docs_url(rule)
    return descriptor


def _code_flow(verdict: Verdict) -> dict | None:
    trace = verdict.trace
    if trace is None or not trace.steps and not stuck(trace):
        return None
    flows: dict[str, list] = {lane: [] for lane in lanes(trace)}
    for step in trace.steps:
        path, line = split_location(step.location)
        text = f"step {step.index}: {step.agent} {step.text}"
        if step.completions:
            text += " -> " + "; ".join(step.completions)
        loc = {"location": _location(path, line, text), "executionOrder": step.index}
        kind = event_kind(step)
        if kind in SYNC_KINDS:
            loc["kinds"] = [SYNC_KINDS[kind]]
        flows[step.agent].append(loc)
    end = len(trace.steps) + 1
    for who, lines in stuck(trace).items():
        if who not in flows:
            continue
        for text in lines:
            path, line = location_in_text(text)
            flows[who].append({"location": _location(path, line, text), "executionOrder": end,
                               "importance": "essential"})
    thread_flows = []
    for lane, locs in flows.items():
        if not locs:
            continue
        thread_flows.append({"id": lane, "message": {"text": lane}, "locations": locs})
    if not thread_flows:
        return None
    return {"message": {"text": f"shortest counterexample: {steps_text(len(trace.steps))}, "
                                "replayed on the interpreter"}, "threadFlows": thread_flows}


def _fix(fix) -> dict:
    """A verified fix as SARIF replacements: whole lines start..end replaced by the new text
    (an insertion deletes the empty region at the start of its line)."""
    changes: dict[str, list] = {}
    for change in fix.edit["changes"]:
        start, end = change["start_line"], change["end_line"]
        region = ({"startLine": start, "startColumn": 1, "endLine": start, "endColumn": 1}
                  if end < start else
                  {"startLine": start, "startColumn": 1, "endLine": end + 1, "endColumn": 1})
        changes.setdefault(change["file"], []).append(
            {"deletedRegion": region, "insertedContent": {"text": change["text"]}})
    return {"description": {"text": f"{fix.description} ({fix.verdict} after the edit)"},
            "artifactChanges": [{"artifactLocation": _artifact(path), "replacements": reps}
                                for path, reps in changes.items()]}


def _fingerprint(rule: str, verdict: Verdict, message: str) -> dict:
    digest = hashlib.sha256(f"{rule}\0{verdict.source or verdict.name}\0{message}".encode())
    return {"barrierproof/v1": digest.hexdigest()[:32]}


def _results(verdict: Verdict, rules: dict[str, int]) -> list[dict]:
    ref = verdict.source or verdict.name
    kernel_path = ref.partition("::")[0] if "::" in ref or ref.endswith(".py") else None
    logical = [{"name": verdict.name, "fullyQualifiedName": ref, "kind": "function"}]
    out = []
    items = [(_rule_id(d.code), d.message, d.location, d.help, d.details, d.related)
             for d in verdict.diagnostics]
    if verdict.verdict == "bounded":
        items.append(("bounded", f"not proved: {verdict.coverage or 'the search stopped early'}",
                      None, HELP_TEXT["bounded"], [], []))
    flow = _code_flow(verdict) if verdict.verdict == "violation" else None
    for n, (rule, message, location, help_line, details, related) in enumerate(items):
        rules.setdefault(rule, len(rules))
        path, line = split_location(location)
        if path is None:              # a finding about the kernel as a whole: its file
            path, line = kernel_path, None
        text = f"{ref}: {message}"
        if help_line:
            text += f" (help: {help_line})"
        result = {"ruleId": rule, "ruleIndex": rules[rule], "level": _level(rule),
                  "message": {"text": text},
                  "partialFingerprints": _fingerprint(rule, verdict, message),
                  "properties": {"verdict": verdict.verdict, "protocol": ref,
                                 "params": verdict.params, "details": list(details)}}
        physical = _location(path, line)
        result["locations"] = [dict(physical, logicalLocations=logical)] if physical else \
            [{"logicalLocations": logical}]
        if related:   # the other access of a race
            result["relatedLocations"] = [
                dict(_location(*split_location(r["location"]), r["message"]), id=i + 1)
                for i, r in enumerate(related)]
        if flow is not None and n == 0:
            result["codeFlows"] = [flow]
        if n == 0 and verdict.fixes:
            result["properties"]["fixes"] = [f.to_json() for f in verdict.fixes]
            fixes = [_fix(f) for f in verdict.fixes if f.edit.get("kind") == "source"]
            if fixes:
                result["fixes"] = fixes
        out.append(result)
    for s in verdict.suppressed:     # kept in the log, marked: viewers hide them, audits see them
        rules.setdefault(s["code"], len(rules))
        path, line = split_location(s["location"])
        physical = _location(path or kernel_path, line)
        out.append({"ruleId": s["code"], "ruleIndex": rules[s["code"]], "level": _level(s["code"]),
                    "message": {"text": f"{ref}: {s['message']}"},
                    "partialFingerprints": _fingerprint(s["code"], verdict, s["message"]),
                    "suppressions": [{"kind": "inSource", "justification": s["by"]}],
                    "locations": [dict(physical, logicalLocations=logical)] if physical else
                    [{"logicalLocations": logical}]})
    return out


def sarif_log(verdicts: Sequence[Verdict]) -> dict:
    """The SARIF log of one run over `verdicts`, as a dict."""
    rules: dict[str, int] = {}
    results = [r for v in verdicts for r in _results(v, rules)]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "barrierproof",
                "version": _tool_version(),
                "semanticVersion": _tool_version(),
                "rules": [_rule(r) for r in rules],
            }},
            "originalUriBaseIds": {SRCROOT: {"uri": Path(os.getcwd()).as_uri() + "/"}},
            "invocations": [{"executionSuccessful": all(v.verdict != "error" for v in verdicts),
                             "workingDirectory": {"uri": Path(os.getcwd()).as_uri() + "/"}}],
            "results": results,
            "properties": {"verdicts": [
                {"protocol": v.source or v.name, "verdict": v.verdict, "coverage": v.coverage,
                 "states": v.states, "seconds": round(v.seconds, 4)} for v in verdicts]},
        }],
    }


def sarif_report(verdicts: Sequence[Verdict]) -> str:
    return json.dumps(sarif_log(verdicts), indent=2)
