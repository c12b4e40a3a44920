"""Edits of a protocol's DSL source: IR expressions and operations printed back as DSL code, and
line-range replacements (an argument's value, an inserted block, a removed guard).

An edit maps to source only where the mapping is exact: the line was written in the protocol's
own function (not in a helper shared with other protocols) and holds the text being changed.
Otherwise the fix is described in words at the line.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass

from ...model.ir import BarrierRef, BinOp, Const, Expr, Kernel, Loc, Op, UnOp, Var
from ...model import primitives as K

# Python precedence of the DSL operators: comparisons bind loosest, then | ^ &, + -, * // %.
_PREC = {"or": 2, "xor": 3, "and": 4, "+": 6, "-": 6, "*": 7, "//": 7, "%": 7,
         "==": 1, "!=": 1, "<": 1, "<=": 1, ">": 1, ">=": 1}
_SYM = {"or": "|", "xor": "^", "and": "&"}


def dsl_expr(expr: Expr, kernel: Kernel, prec: int = 0) -> str:
    """An IR expression as the DSL code that builds it.

    >>> from barrierproof.model.ir import Var
    >>> from barrierproof.model.dsl import protocol
    >>> @protocol
    ... def p(k, steps=2):
    ...     k.threads(2)
    >>> dsl_expr((Var("i") // Var("stages")) % 2 ^ 1, p.build())
    '((i // stages) % 2) ^ 1'
    """
    if isinstance(expr, Const):
        return str(expr.value) if expr.value >= 0 or prec == 0 else f"({expr.value})"
    if isinstance(expr, Var):
        if kernel.source != "dsl":       # a traced kernel: its own axis and loop names
            return expr.name
        if expr.name == kernel.thread_axis:
            return "k.thread"
        if expr.name == kernel.warp_axis:
            return "k.warp"
        if expr.name in dict(kernel.cluster):
            return f'k.block("{expr.name}")'
        if expr.name in dict(kernel.grid):
            return f'k.program_id("{expr.name}")'
        return expr.name
    if isinstance(expr, UnOp):
        inner = dsl_expr(expr.arg, kernel, 8)
        return f"-{inner}" if expr.op == "neg" else f"~{inner}"
    if isinstance(expr, BinOp):
        if expr.op in ("min", "max"):
            fn = expr.op if kernel.source != "dsl" else \
                ("minimum" if expr.op == "min" else "maximum")
            return f"{fn}({dsl_expr(expr.lhs, kernel)}, {dsl_expr(expr.rhs, kernel)})"
        mine = _PREC[expr.op]
        # Parentheses where Python would group differently; comparisons never chain, and the
        # logical operators get explicit parentheses around anything compound (as users write).
        same = isinstance(expr.lhs, BinOp) and expr.lhs.op == expr.op
        # `(i // stages) % 2`: parentheses where a mixed chain would read ambiguously.
        lhs_prec = mine if same or (mine > 4 and not isinstance(expr.lhs, BinOp)) else mine + 1
        if expr.op in _SYM:     # `a & b`, `x ^ 1`: compound operands in parentheses
            lhs_prec = lhs_prec if same else 9
            rhs_prec = 9
        else:
            rhs_prec = mine + 1
        lhs = dsl_expr(expr.lhs, kernel, lhs_prec)
        rhs = dsl_expr(expr.rhs, kernel, rhs_prec)
        text = f"{lhs} {_SYM.get(expr.op, expr.op)} {rhs}"
        return f"({text})" if mine < prec else text
    raise TypeError(f"not an expression: {expr!r}")


def dsl_ref(ref: BarrierRef, kernel: Kernel) -> str:
    name = ref.alloc.name
    index = ", ".join(dsl_expr(i, kernel) for i in ref.index)
    if ref.block is not None:
        block = ", ".join(dsl_expr(b, kernel) for b in ref.block)
        return f"{name}.on({block}, index={index})" if index else f"{name}.on({block})"
    return f"{name}.at[{index}]" if ref.index else name


def dsl_op(op: Op, kernel: Kernel) -> str:
    """One operation as its DSL call, e.g. `k.barrier_wait(empty.at[i % stages])`."""
    bar = dsl_ref(op.barrier, kernel) if op.barrier is not None else ""
    e = lambda x: dsl_expr(x, kernel)  # noqa: E731
    if op.kind in (K.COPY_GMEM_TO_SMEM,):
        args = [bar, f"bytes={e(op.bytes)}"]
    elif op.kind in (K.TMA_LOAD, K.EXPECT_TX, K.ARRIVE_EXPECT_TX, K.COMPLETE_TX):
        args = [bar, e(op.bytes)]
    elif op.kind == K.WAIT_PARITY:
        args = [bar, f"phase={e(op.phase)}" if op.phase is not None else e(op.parity)]
    elif op.kind == K.SEMAPHORE_SIGNAL:
        args = [bar, e(op.count)]
    elif op.kind == K.SEMAPHORE_WAIT:
        args = [bar, e(op.count)] + ([] if op.decrement else ["decrement=False"])
    elif op.kind == K.ARRIVE and repr(op.count) != "1":
        args = [bar, e(op.count)]
    elif op.kind == K.TCGEN05_MMA:
        args = [f"barrier={bar}"] if bar else []
    else:
        args = [bar] if bar else []
    if op.collective_axes and op.kind in (K.COPY_GMEM_TO_SMEM, K.TMA_LOAD):
        axes = op.collective_axes
        args.append(f"collective_axes={axes[0]!r}" if len(axes) == 1 else
                    f"collective_axes={axes!r}")
    prefix = "k." if kernel.source == "dsl" else ""
    return f"{prefix}{op.kind}({', '.join(args)})"


@dataclass
class SourceEdit:
    """Replace lines start..end (1-based, inclusive; end = start - 1 inserts before `start`) of
    `file` by `text` (whole lines, newline-terminated, possibly empty)."""

    file: str
    start: int
    end: int
    text: str

    def to_json(self) -> dict:
        return {"kind": "replace_lines", "file": str(Loc(self.file, self.start)).rsplit(":", 1)[0],
                "start_line": self.start, "end_line": self.end, "text": self.text}


class Sources:
    """Source files read once, and the checks that make an edit exact."""

    def __init__(self, kernel: Kernel, values: dict[str, int] | None = None):
        self.kernel = kernel
        self.values = values          # the parameter values the repair is checked at
        self._lines: dict[str, list[str]] = {}

    def lines(self, file: str) -> list[str] | None:
        if file not in self._lines:
            try:
                with open(file) as f:
                    self._lines[file] = f.read().splitlines(keepends=True)
            except OSError:
                self._lines[file] = None  # type: ignore[assignment]
        return self._lines[file]

    def own(self, loc: Loc) -> list[str] | None:
        """The file's lines if `loc` is in the protocol's own function of a DSL source."""
        k = self.kernel
        if k.source != "dsl" or loc.line <= 0 or loc.function != k.loc.function \
                or os.path.abspath(loc.file) != os.path.abspath(k.loc.file):
            return None
        lines = self.lines(loc.file)
        if lines is None or loc.line > len(lines):
            return None
        return lines

    def line(self, loc: Loc) -> str | None:
        lines = self.own(loc)
        return None if lines is None else lines[loc.line - 1]

    def block_end(self, loc: Loc) -> int | None:
        """The last line of the `with` block opened at `loc` (by indentation)."""
        lines = self.own(loc)
        if lines is None:
            return None
        indent = _indent(lines[loc.line - 1])
        last = loc.line
        for n in range(loc.line, len(lines)):
            text = lines[n]
            if not text.strip():
                continue
            if _indent(text) <= indent:
                break
            last = n + 1
        return last

    def indent(self, loc: Loc) -> str:
        text = self.line(loc) or ""
        return text[:len(text) - len(text.lstrip())]

    def body_indent(self, loc: Loc) -> str | None:
        """The indentation of the first statement inside the `with` block at `loc`."""
        lines = self.own(loc)
        if lines is None:
            return None
        for n in range(loc.line, len(lines)):
            if lines[n].strip():
                text = lines[n]
                return text[:len(text) - len(text.lstrip())]
        return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def replace_argument(sources: Sources, loc: Loc, name: str, old: str, new: str) -> SourceEdit | None:
    """`name=old` -> `name=new` on the line at `loc`, if the line holds exactly that."""
    text = sources.line(loc)
    if text is None:
        return None
    pattern = re.compile(rf"\b{re.escape(name)}\s*=\s*{re.escape(old)}(?=\s*[,)])")
    if len(pattern.findall(text)) != 1:
        return None
    return SourceEdit(loc.file, loc.line, loc.line, pattern.sub(f"{name}={new}", text))


def replace_call_arg(sources: Sources, loc: Loc, old_call: str, new_call: str) -> SourceEdit | None:
    """Replace the whole DSL call `old_call` (as printed) by `new_call` on the line at `loc`."""
    text = sources.line(loc)
    if text is None or text.count(old_call) != 1:
        return None
    return SourceEdit(loc.file, loc.line, loc.line, text.replace(old_call, new_call))


def replace_condition(sources: Sources, loc: Loc, new_cond: str) -> SourceEdit | None:
    """`with k.when(OLD):` -> `with k.when(NEW):` on the line at `loc`."""
    text = sources.line(loc)
    if text is None:
        return None
    m = re.match(r"^(\s*with\s+k\.when\()(.*)(\):\s*(#.*)?)$", text.rstrip("\n"))
    if not m or not _balanced(m.group(2)):
        return None
    return SourceEdit(loc.file, loc.line, loc.line, f"{m.group(1)}{new_cond}{m.group(3)}\n")


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def unwrap_block(sources: Sources, loc: Loc) -> SourceEdit | None:
    """Remove the `with k.when(...):` line at `loc` and dedent its block."""
    text = sources.line(loc)
    end = sources.block_end(loc)
    inner = sources.body_indent(loc)
    if text is None or end is None or inner is None or not text.lstrip().startswith("with k.when("):
        return None
    lines = sources.own(loc)
    shift = len(inner) - len(sources.indent(loc))
    body = []
    for n in range(loc.line, end):
        line = lines[n]
        body.append(line[shift:] if line[:shift].strip() == "" else line)
    return SourceEdit(loc.file, loc.line, end, "".join(body))


def insert_lines(sources: Sources, at: Loc, indent: str, code: list[str],
                 after_block: bool = False) -> SourceEdit | None:
    """Insert `code` (lines without indentation) before the line at `at`, or after the block
    that starts there."""
    if sources.line(at) is None:
        return None
    line = (sources.block_end(at) + 1) if after_block else at.line
    text = "".join(f"{indent}{c}\n" for c in code)
    return SourceEdit(at.file, line, line - 1, text)


def apply_edits(lines: list[str], edits: list[SourceEdit]) -> list[str]:
    """The file's lines after the edits (applied bottom-up so line numbers stay valid)."""
    out = list(lines)
    for e in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        out[e.start - 1:e.end] = e.text.splitlines(keepends=True)
    return out


def unified_diff(file: str, edits: list[SourceEdit]) -> str:
    with open(file) as f:
        before = f.read().splitlines(keepends=True)
    after = apply_edits(before, edits)
    rel = str(Loc(file, 1)).rsplit(":", 1)[0]
    return "".join(difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}"))
