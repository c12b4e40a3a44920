"""Markdown tables that a bench script writes and the docs quote, and their comparison.

A bench script produces rows of cells; `markdown` prints them, `compare` reads a page's table
with the same header and lists every cell that differs (the columns named in `compared`; seconds
depend on the machine and are left out by the callers).
"""

from __future__ import annotations

import re


def markdown(header: list[str], table: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    return "\n".join(lines)


def readme_rows(path: str, header: list[str]) -> dict[str, list[str]]:
    """The rows of the table in `path` whose header starts with `header`: label -> cells."""
    text = open(path, encoding="utf-8").read()
    start = text.find("| " + " | ".join(header))
    if start < 0:
        return {}
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


def compare(table: list[list[str]], path: str, header: list[str],
            compared: list[str]) -> list[str]:
    """Every difference between a fresh table and the one in `path`, in the named columns
    (whitespace runs count as one space)."""
    theirs = readme_rows(path, header)
    problems = []
    for row in table:
        recorded = theirs.get(row[0])
        if recorded is None:
            problems.append(f"{path} has no row {row[0]!r}")
            continue
        for name in compared:
            i = header.index(name)
            mine, old = (re.sub(r"\s+", " ", cells[i]) if i < len(cells) else ""
                         for cells in (row, recorded))
            if mine != old:
                problems.append(f"{row[0]}: {name} is {mine!r}, {path} says {old!r}")
    return problems
