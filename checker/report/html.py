"""A self-contained HTML report: one file, no network, readable without knowing model checking.

For every verdict a row in the summary; for every violation its diagnostic (what the code means
and how to fix it) and the counterexample as a timeline: one lane per thread, warp and
asynchronous agent (TMA landings, tcgen05 queues), one row per step, each step an event coloured
by its kind (arrive, wait, copy issue, landing, tensor-core completion) with its source line, the
completions it caused, and the state of every barrier after it (changed cells marked). A deadlock
ends with a row of the stuck waits, highlighted, each saying which completion it waits for and
which arrivals are missing.

>>> from barrierproof.checker.verdict import Verdict
>>> page = html_report([Verdict("p", "verified", source="k.py::p")])
>>> page.startswith("<!doctype html>") and "k.py::p" in page
True
"""

from __future__ import annotations

import html
from typing import Sequence

from .sarif import MEANING
from ..verdict import Verdict
from .text import barrier_state, steps_text
from .views import (barrier_rows, blocked, event_kind, lane_kind, lanes, location_in_text,
                    stuck, trace_stem)

CSS = """
:root { --fg:#1d2330; --muted:#5d6678; --line:#d8dce4; --bg:#ffffff; --panel:#f5f7fa;
  --ok:#1a7f37; --bad:#c62828; --warn:#9a6700; --err:#8250df;
  --arrive:#dbeafe; --wait:#ede9fe; --copy:#e0f2fe; --land:#ccfbf1; --mma:#fef3c7;
  --other:#f1f5f9; --stuck:#fde2e2; --stuck-edge:#c62828; --changed:#fff7cc; --done:#dcfce7; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
header { padding: 16px 24px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { margin: 0 0 4px; font-size: 20px; }
main { padding: 8px 24px 40px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12.5px; }
table { border-collapse: collapse; }
.verdicts td, .verdicts th { padding: 4px 10px; border-bottom: 1px solid var(--line);
  text-align: left; vertical-align: top; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600;
  font-size: 12px; color: #fff; white-space: nowrap; }
.badge.verified, .badge.proved { background: var(--ok); }
.badge.violation { background: var(--bad); }
.badge.bounded, .badge.unknown { background: var(--warn); }
.badge.error { background: var(--err); }
.mismatch { color: var(--bad); font-weight: 600; }
section.verdict { margin-top: 28px; padding-top: 8px; border-top: 2px solid var(--line); }
section.verdict h2 { font-size: 17px; margin: 6px 0; }
.diag { background: var(--panel); border-left: 4px solid var(--bad); padding: 8px 12px;
  margin: 8px 0; }
.diag.warning { border-left-color: var(--warn); }
.diag p { margin: 3px 0; }
.meaning { color: var(--muted); }
.help { color: var(--ok); }
.legend span { display: inline-block; margin: 0 8px 4px 0; padding: 1px 8px; border-radius: 4px;
  border: 1px solid var(--line); font-size: 12px; }
.scroll { overflow-x: auto; max-width: 100%; }
table.timeline { margin-top: 6px; }
.timeline th, .timeline td { border: 1px solid var(--line); padding: 4px 6px;
  vertical-align: top; min-width: 90px; }
.timeline thead th { background: var(--panel); position: sticky; top: 0; }
.timeline th.group { text-align: center; font-weight: 600; color: var(--muted); }
.timeline th .kind { display: block; font-weight: 400; font-size: 11px; color: var(--muted); }
.timeline td.step { text-align: right; color: var(--muted); min-width: 40px; }
.timeline th.barrier, .timeline td.state { background: #fafbfc; }
.timeline td.state { white-space: nowrap; }
.timeline td.state .flight { display: block; font-size: 11px; color: var(--muted);
  font-weight: 400; white-space: normal; min-width: 120px; }
.timeline td.state.changed { background: var(--changed); font-weight: 600; }
.timeline td.state.completed { background: var(--done); }
.timeline td.gap { border-left: 3px double var(--line); min-width: 4px; padding: 0; }
.ev { border-radius: 4px; }
.ev.arrive { background: var(--arrive); } .ev.wait { background: var(--wait); }
.ev.copy { background: var(--copy); } .ev.land { background: var(--land); }
.ev.mma { background: var(--mma); } .ev.other { background: var(--other); }
.ev .loc { display: block; color: var(--muted); font-size: 11px; }
.ev .completion { display: block; margin-top: 2px; color: var(--ok); font-weight: 600;
  font-size: 12px; }
tr.initial td { color: var(--muted); font-style: italic; }
tr.final-row td.stuck { background: var(--stuck); border: 2px solid var(--stuck-edge);
  color: #7f1d1d; font-weight: 600; }
tr.final-row td.where { background: #fff1d6; border: 2px solid var(--warn); }
tr.selected td { outline: 2px solid #2563eb; outline-offset: -2px; }
tr[data-step] { cursor: pointer; }
ul.details { margin: 6px 0; padding-left: 18px; }
ul.details li.stuck { color: #7f1d1d; }
.note { color: var(--muted); }
footer { padding: 12px 24px; color: var(--muted); border-top: 1px solid var(--line); }
"""

# Click a step to select it; j/k (or arrow keys) move the selection.
JS = """
(function () {
  function select(row) {
    document.querySelectorAll('tr.selected').forEach(function (r) { r.classList.remove('selected'); });
    if (row) { row.classList.add('selected'); row.scrollIntoView({block: 'nearest'}); }
  }
  document.addEventListener('click', function (e) {
    var row = e.target.closest('tr[data-step]');
    if (row) { select(row); }
  });
  document.addEventListener('keydown', function (e) {
    var current = document.querySelector('tr.selected');
    if (!current) { return; }
    var next = null;
    if (e.key === 'j' || e.key === 'ArrowDown') { next = current.nextElementSibling; }
    if (e.key === 'k' || e.key === 'ArrowUp') { next = current.previousElementSibling; }
    if (next && next.hasAttribute('data-step')) { e.preventDefault(); select(next); }
  });
})();
"""

LEGEND = [("arrive", "arrive / expect_tx"), ("wait", "wait"), ("copy", "TMA copy issued"),
          ("land", "TMA landing / async arrival"), ("mma", "tensor-core op"),
          ("other", "other step")]


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _badge(verdict: Verdict) -> str:
    return f'<span class="badge {_e(verdict.verdict)}">{_e(verdict.label)}</span>'


def _summary(verdicts: Sequence[Verdict], anchors: dict[int, str]) -> str:
    rows = []
    for i, v in enumerate(verdicts):
        ref = _e(v.source or v.name)
        name = f'<a href="#{anchors[i]}">{ref}</a>' if i in anchors else ref
        what = v.diagnostics[0].one_line() if v.diagnostics else (v.coverage or "")
        expected = ""
        if v.expected:
            ok = v.matches(v.expected)
            expected = (f'<span class="{"" if ok else "mismatch"}">'
                        f'{"as expected" if ok else "EXPECTED " + _e(v.expected)}</span>')
        rows.append(f"<tr><td class=mono>{name}</td><td>{_badge(v)}</td><td>{_e(what)}</td>"
                    f"<td>{v.states:,}</td><td>{v.seconds:.2f}s</td><td>{expected}</td></tr>")
    return ('<table class="verdicts"><thead><tr><th>protocol</th><th>verdict</th><th>finding or '
            'coverage</th><th>states</th><th>time</th><th>expectation</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _diagnostics(v: Verdict) -> str:
    out = []
    for d in v.diagnostics:
        level = "warning" if d.code == "BP190" else "error"
        parts = [f'<p><code>{_e(d.location or "")}</code> <strong>{_e(d.code)} [{_e(d.name)}]'
                 f'</strong> {_e(d.message)}</p>']
        for r in d.related:
            parts.append(f'<p class="related">and <code>{_e(r["location"])}</code> '
                         f'{_e(r["message"])}</p>')
        if d.code in MEANING:
            parts.append(f'<p class="meaning">{_e(MEANING[d.code])}</p>')
        if d.help:
            parts.append(f'<p class="help">help: {_e(d.help)}</p>')
        out.append(f'<div class="diag {level}">' + "".join(parts) + "</div>")
    for note in v.notes:
        out.append(f'<p class="note">note: {_e(note)}</p>')
    for n, fix in enumerate(v.fixes or [], 1):
        body = (f"<pre>{_e(fix.patch)}</pre>" if fix.patch else
                f"<p>edit at <code>{_e(fix.location or '')}</code>: {_e(fix.edit.get('text', ''))}"
                "</p>")
        out.append(f'<div class="fix"><p class="help">fix {n} ({_e(fix.verdict)} after the '
                   f'edit): {_e(fix.description)} <code>{_e(fix.location or "")}</code></p>'
                   f"{body}</div>")
    return "".join(out)


def _short(location: str | None) -> str:
    if not location:
        return ""
    path, _, line = location.rpartition(":")
    return f"{path.rsplit('/', 1)[-1]}:{line}"


def timeline_html(v: Verdict) -> str:
    """The counterexample of one verdict: lanes across, steps down, barrier states on the right."""
    trace = v.trace
    lane_names = lanes(trace)
    rows = barrier_rows(trace)
    barriers = list(rows[0].states)
    head1 = (f'<tr><th rowspan="2">step</th><th class="group" colspan="{len(lane_names)}">'
             f'threads and asynchronous agents</th><td class="gap" rowspan="2"></td>'
             f'<th class="group" colspan="{len(barriers)}">barrier state after the step '
             f'(phase, arrivals/expected, tx bytes)</th></tr>')
    head2 = "<tr>" + "".join(
        f'<th class="lane {_e(lane_kind(trace, n))}" data-lane="{_e(n)}">{_e(n)}'
        f'<span class="kind">{_e(lane_kind(trace, n))}</span></th>' for n in lane_names) + \
        "".join(f'<th class="barrier">{_e(b)}</th>' for b in barriers) + "</tr>"

    def states(row, final: bool = False) -> str:
        cells = []
        for b in barriers:
            classes = ["state", "mono"]
            if final:
                pass     # the end state, repeated beside the stuck waits: nothing changed
            elif b in row.completed:
                classes.append("completed")
            elif b in row.changed:
                classes.append("changed")
            view = row.states[b]
            title = f"{b}: phase {view.get('phase', 0)}, {view.get('arrived', 0)} of " \
                    f"{view.get('expected', 0)} arrivals, tx {view.get('tx', 0)}"
            inner = _e(barrier_state(view))
            if view.get("in_flight"):
                inner += ('<span class="flight">in flight: '
                          + _e("; ".join(view["in_flight"])) + "</span>")
            cells.append(f'<td class="{" ".join(classes)}" title="{_e(title)}">{inner}</td>')
        return "".join(cells)

    body = [f'<tr class="initial" data-step="0"><td class="step">0</td>'
            f'<td colspan="{len(lane_names)}">initial state</td><td class="gap"></td>'
            f'{states(rows[0])}</tr>']
    for step, row in zip(trace.steps, rows[1:]):
        cells = []
        for lane in lane_names:
            if lane != step.agent:
                cells.append("<td></td>")
                continue
            kind = event_kind(step)
            inner = f'<span class="mono">{_e(step.text)}</span>'
            if step.location:
                inner += f'<span class="loc">{_e(_short(step.location))}</span>'
            for c in step.completions:
                inner += f'<span class="completion">&#10003; {_e(c)}</span>'
            cells.append(f'<td class="ev {kind}" title="{_e(step.location or "")}">{inner}</td>')
        body.append(f'<tr data-step="{step.index}"><td class="step">{step.index}</td>'
                    + "".join(cells) + '<td class="gap"></td>' + states(row) + "</tr>")

    by_agent = stuck(trace)
    if any(a for a in by_agent):
        is_blocked = blocked(trace)
        label = "stuck" if is_blocked else "where"
        cells = []
        for lane in lane_names:
            lines = by_agent.get(lane)
            if not lines:
                cells.append("<td></td>")
                continue
            text = "; ".join(line[len(lane) + 1:] for line in lines)
            path, line_no = location_in_text(lines[0])
            mark = "<strong>STUCK</strong> " if is_blocked else "<strong>AT</strong> "
            cells.append(f'<td class="{label}" title="{_e(f"{path}:{line_no}" if path else "")}">'
                         f'{mark}{_e(text)}</td>')
        body.append(f'<tr class="final-row {label}-row"><td class="step">{label}</td>'
                    + "".join(cells) + '<td class="gap"></td>'
                    + states(rows[-1], final=True) + "</tr>")

    table = (f'<div class="scroll"><table class="timeline" data-protocol="{_e(v.source or v.name)}">'
             f"<thead>{head1}{head2}</thead><tbody>{''.join(body)}</tbody></table></div>")
    legend = '<p class="legend">' + "".join(
        f'<span class="ev {k}">{_e(text)}</span>' for k, text in LEGEND) + \
        '<span class="ev completion">&#10003; phase completed</span>' \
        '<span style="background:var(--changed)">barrier changed</span>' \
        '<span style="background:var(--done)">phase completed</span>' \
        '<span style="background:var(--stuck)">stuck wait</span></p>'
    details = by_agent.get("", [])     # the details no lane shows
    items = "".join(
        f'<li class="{"stuck" if blocked(trace) else ""}">{_e(d)}</li>' for d in details)
    params = f"; parameters {_e(trace.params)}" if trace.params else ""
    return (f"<h3>Counterexample: {steps_text(len(trace.steps))}, replayed on the interpreter"
            f"{params}</h3>{legend}{table}" + (f'<ul class="details">{items}</ul>' if items else "")
            + f'<p class="note">Re-run it: <code>barrierproof check {_e(v.source or v.name)} '
              f'--trace-dir DIR</code>, then <code>barrierproof replay DIR/{_e(trace_stem(v.name))}'
              f'.trace.json --protocol {_e(v.source or v.name)}</code>.</p>')


def _section(v: Verdict, anchor: str) -> str:
    meta = []
    if v.params:
        meta.append(f"parameters {_e(v.params)}")
    if v.coverage:
        meta.append(_e(v.coverage))
    meta.append(f"{v.states:,} states, engine {_e(v.engine)}")
    parts = [f'<section class="verdict {_e(v.verdict)}" id="{anchor}">',
             f'<h2>{_badge(v)} <span class="mono">{_e(v.source or v.name)}</span></h2>',
             f'<p class="note">{"; ".join(meta)}</p>', _diagnostics(v)]
    if v.trace is not None:
        parts.append(timeline_html(v))
    parts.append("</section>")
    return "".join(parts)


def html_report(verdicts: Sequence[Verdict]) -> str:
    """The whole report as one HTML document (inline CSS and script, nothing fetched)."""
    from ... import __version__
    # a section for every verdict that is not clean, and for every one with a suppressed finding
    anchors = {i: f"v{i}" for i, v in enumerate(verdicts)
               if v.verdict not in ("verified", "proved") or v.suppressed}
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing checked"
    sections = "".join(_section(verdicts[i], a) for i, a in anchors.items())
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>barrierproof: {len(verdicts)} checked, {_e(summary)}</title>"
        f"<style>{CSS}</style></head><body>"
        f"<header><h1>barrierproof report</h1><div>{len(verdicts)} checked: {_e(summary)}"
        "</div></header><main>"
        f"{_summary(verdicts, anchors)}{sections}</main>"
        f"<footer>barrierproof {_e(__version__)}: every counterexample here was replayed on the "
        "concrete interpreter before it was reported.</footer>"
        f"<script>{JS}</script></body></html>\n")
