"""The text report on a terminal: the same content as `report.text_report`, with colour and
tables (rich). When stdout is not a terminal the CLI prints `text_report` instead, unchanged."""

from __future__ import annotations

from typing import Sequence

from ..rules import help_line
from .text import CELL, steps_text
from ..verdict import Verdict
from .safe import printable_copy
from .views import barrier_cell, blocked, event_kind, lanes, stuck

STYLE = {"verified": "bold green", "proved": "bold green", "violation": "bold red",
         "bounded": "bold yellow", "unknown": "bold yellow", "error": "bold magenta"}
EVENT_STYLE = {"arrive": "blue", "wait": "magenta", "copy": "cyan", "land": "green",
               "mma": "yellow", "other": ""}


def _timeline(v: Verdict):
    from rich.table import Table
    from rich.text import Text
    trace = v.trace
    names = [n for n in lanes(trace) if any(s.agent == n for s in trace.steps)
             or n in stuck(trace)]
    table = Table(show_lines=False, header_style="bold", pad_edge=False, expand=False)
    table.add_column("step", justify="right", style="dim")
    for n in names:     # Text, not str: a `[/]` in a thread name is not rich markup
        table.add_column(Text(n), max_width=CELL, overflow="fold")
    table.add_column("barriers")
    for step in trace.steps:
        cells: list = ["" for _ in names]
        text = Text(step.text, style=EVENT_STYLE[event_kind(step)])
        if step.location:
            text.append(f"  {step.location.rsplit('/', 1)[-1]}", style="dim")
        cells[names.index(step.agent)] = text
        done = {c.split(" completes")[0] for c in step.completions}
        effects = Text()
        for c in step.completions:
            effects.append(c + "  ", style="bold green")
        for name, view in step.barriers.items():
            if name not in done:
                effects.append(f"{name}: {barrier_cell(view)}  ")
        table.add_row(Text(str(step.index)), *cells, effects)
    by_agent = stuck(trace)
    if any(by_agent.get(n) for n in names):
        label = "stuck" if blocked(trace) else "at"
        cells = []
        for n in names:
            lines = by_agent.get(n)
            cells.append(Text("; ".join(x[len(n) + 1:].split(";")[0] for x in lines),
                              style="bold white on red" if blocked(trace) else "bold yellow")
                         if lines else "")
        table.add_row(Text(label, style="bold red"), *cells, Text(""))
    return table


def print_report(verdicts: Sequence[Verdict], console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    console = console or Console()
    verdicts = [printable_copy(v) for v in verdicts]   # names from users' files: safe.py
    for v in verdicts:
        head = Text(f"{v.source or v.name}: ", style="bold")
        head.append(v.label, style=STYLE.get(v.verdict, ""))
        if v.coverage:
            head.append(f"  ({v.coverage})", style="dim")
        if v.expected and not v.matches(v.expected):
            head.append(f"  EXPECTED {v.expected}", style="bold red")
        console.print(head)
        for d in v.diagnostics:
            line = Text("  ")
            if d.location:
                line.append(f"{d.location}: ", style="cyan")
            line.append(f"{d.code} [{d.name}] ", style="bold red" if d.code != "BP190"
                        else "bold yellow")
            line.append(d.message)
            console.print(line)
            if d.help:
                console.print(Text(f"    help: {help_line(d.code, d.help)}", style="green"))
        for note in v.notes:
            console.print(Text(f"  note: {note}", style="dim"))
        from .text import fix_lines
        for row in fix_lines(v):
            console.print(Text(row, style="green" if row.startswith("  fix") else ""))
        if v.trace is not None:
            t = v.trace
            console.print(Text(f"  counterexample: {steps_text(len(t.steps))}, replayed on "
                               "the interpreter" + (f"; parameters {t.params}" if t.params else ""),
                               style="bold"))
            console.print(_timeline(v))
            for d in (t.violation or {}).get("details") or []:
                console.print(Text(f"    {'stuck: ' if blocked(t) else ''}{d}",
                                   style="red" if blocked(t) else ""))
        console.print()
    summary = Table(title=f"{len(verdicts)} checked", title_justify="left", header_style="bold")
    for col in ("protocol", "verdict", "states", "time", "expected"):
        summary.add_column(col, justify="right" if col in ("states", "time") else "left")
    for v in verdicts:
        expected = ""
        if v.expected:
            expected = Text("as expected", style="green") if v.matches(v.expected) else \
                Text(f"EXPECTED {v.expected}", style="bold red")
        summary.add_row(Text(v.source or v.name), Text(v.label, style=STYLE.get(v.verdict, "")),
                        Text(f"{v.states:,}"), Text(f"{v.seconds:.2f}s"), expected or Text(""))
    console.print(summary)
