"""Read printed TTGIR (with its `loc`s) into a tree of operations.

Triton's Python bindings can walk a module but not its regions' blocks, nor tell an operation's
source location; the printed module has both. The printer puts one operation on a line, opens a
region with `{` at the end of the line and closes it with a line starting with `}`, and prints
locations as `loc(#locN)` aliases that the module's tail defines. This parser follows exactly
that layout; a line it cannot read is kept as an operation of unknown name, so the translator
reports it (BP190) instead of losing it.

>>> m = parse('''
... module {
...   tt.func public @k(%n: i32 loc("n"(#loc1))) {
...     %c1 = arith.constant 1 : i32 loc(#loc)
...     scf.for %i = %c1 to %n step %c1  : i32 {
...       ttng.arrive_barrier %b, 1, %true : !ttg.memdesc<1xi64> loc(#loc2)
...     } loc(#loc2)
...     tt.return loc(#loc1)
...   } loc(#loc1)
... } loc(#loc)
... #loc = loc(unknown)
... #loc1 = loc("k.py":3:1)
... #loc2 = loc("k.py":5:9)
... ''')
>>> f = m.entry()
>>> [op.name for op in f.body], f.args
(['arith.constant', 'scf.for', 'tt.return'], ['%n'])
>>> loop = f.body[1]
>>> loop.regions[0].ops[0].name, m.frames(loop.regions[0].ops[0].loc)
('ttng.arrive_barrier', [('k.py', 5)])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VALUE = re.compile(r"%[\w.$-]+(?:#\d+)?")
_RESULTS = re.compile(r"^((?:%[\w.$-]+(?::\d+)?)(?:\s*,\s*%[\w.$-]+(?::\d+)?)*)\s*=\s*")
# `dialect.op`, or the generic form `"dialect.op"(...)` (a reduction with its combiner region)
_NAME = re.compile(r'^"?([A-Za-z_][\w]*\.[\w.]+|[A-Za-z_]\w*)"?')
_TRAILING_LOC = re.compile(r"\s*loc\((.*)\)\s*$")
_ALIAS = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
# `#shared1 = #ttg.swizzled_shared<{...}>`: a layout alias (its CTA layout says where a
# multi-CTA kernel's shared memory lives)
_LAYOUT = re.compile(r"^(#(?!loc)[\w]+)\s*=\s*(#ttg\..*)$")


@dataclass
class Region:
    """A region of one block: its arguments and operations (`label`: `default`, `partition0`,
    `then`, `else` or `body`)."""

    label: str
    args: list[str]
    ops: list["Operation"]
    header: str = ""          # a partition's `partitionN(...) num_warps(W)` line


@dataclass
class Operation:
    name: str
    results: list[str]
    text: str                 # the line after `results =`, without its location
    loc: str = ""             # the location as printed: `#loc7`, `"f.py":3:1`, ...
    regions: list[Region] = field(default_factory=list)
    line: int = 0             # line in the printed module

    @property
    def operands(self) -> list[str]:
        """SSA values named on the line (types and attributes name none)."""
        head = self.text[len(self.name):]
        return VALUE.findall(head)

    def __repr__(self) -> str:
        return f"<{self.name} at {self.loc}>"


@dataclass
class Function:
    name: str
    args: list[str]
    arg_types: list[str]
    body: list[Operation]


class Module:
    def __init__(self, functions: list[Function], aliases: dict[str, str], attrs: str,
                 layouts: dict[str, str] | None = None):
        self.functions = functions
        self.aliases = aliases
        self.attrs = attrs
        self.layouts = layouts or {}

    def entry(self) -> Function:
        if len(self.functions) != 1:
            names = ", ".join(f.name for f in self.functions)
            raise ValueError(f"expected one kernel function after inlining, found: {names}")
        return self.functions[0]

    def int_attr(self, name: str) -> int | None:
        m = re.search(rf'"?{re.escape(name)}"?\s*=\s*(-?\d+)', self.attrs)
        return int(m.group(1)) if m else None

    def frames(self, loc: str, depth: int = 0) -> list[tuple[str, int]]:
        """The (file, line) frames of a location, innermost (the callee) first."""
        loc = loc.strip()
        if depth > 64 or not loc or loc == "unknown":
            return []
        if loc.startswith("#"):
            return self.frames(self.aliases.get(loc, ""), depth + 1)
        m = re.match(r'^"((?:[^"\\]|\\.)*)":(\d+)(?::\d+)?', loc)
        if m:
            return [(m.group(1), int(m.group(2)))]
        m = re.match(r'^callsite\((.*) at (.*)\)$', loc)
        if m:
            return self.frames(m.group(1), depth + 1) + self.frames(m.group(2), depth + 1)
        m = re.match(r'^"(?:[^"\\]|\\.)*"\((.*)\)$', loc)      # a name: "x"(#loc3)
        if m:
            return self.frames(m.group(1), depth + 1)
        m = re.match(r'^fused(?:<[^>]*>)?\[(.*)\]$', loc)
        if m:
            out: list[tuple[str, int]] = []
            for part in _split_top(m.group(1)):
                out += self.frames(part, depth + 1)
            return out
        return []


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets and quotes."""
    parts, depth, cur, quoted = [], 0, [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([<{":
            depth += 1
        elif not quoted and ch in ")]>}":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if cur:
        parts.append("".join(cur).strip())
    return parts


def split_operands(text: str) -> list[str]:
    """The comma-separated operand list of an op line, up to its attributes (` {`) or type
    signature (` : `)."""
    depth, quoted = 0, False
    for k, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif not quoted and depth == 0 and text.startswith(" {", k):
            text = text[:k]
            break
        elif not quoted and ch in "([<{":
            depth += 1
        elif not quoted and ch in ")]>}":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(" : ", k):
            text = text[:k]
            break
    return _split_top(text)


def _strip_loc(line: str) -> tuple[str, str]:
    """Split `... loc(X)` into the text and X (balanced parentheses)."""
    line = " " + line if line.startswith("loc(") else line
    idx = line.rfind(" loc(")
    if idx < 0 or not line.rstrip().endswith(")"):
        return line.rstrip(), ""
    inner = line[idx + 5:].rstrip()[:-1]
    return line[:idx].strip(), inner


class _Reader:
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.pos = 0

    def peek(self) -> str:
        return self.lines[self.pos].strip() if self.pos < len(self.lines) else ""

    def next(self) -> str:
        line = self.peek()
        self.pos += 1
        return line

    def block(self) -> list[Operation]:
        """Operations until the line that closes the enclosing region (left unread)."""
        ops: list[Operation] = []
        while self.pos < len(self.lines):
            line = self.peek()
            if not line:
                self.pos += 1
                continue
            if line.startswith("}"):
                return ops
            if line.startswith("^"):                # a block label: `^bb0(%a: f32, ...):`
                self.pos += 1
                continue
            ops.append(self.operation())
        return ops

    def operation(self) -> Operation:
        lineno = self.pos + 1
        raw = self.next()
        results: list[str] = []
        m = _RESULTS.match(raw)
        rest = raw
        if m:
            rest = raw[m.end():]
            for r in (x.strip() for x in m.group(1).split(",")):
                name, _, n = r.partition(":")
                results += [f"{name}#{k}" for k in range(int(n))] if n else [name]
        nm = _NAME.match(rest)
        name = nm.group(1) if nm else "<unreadable>"
        if rest.endswith("{"):                      # opens a region
            op = Operation(name, results, rest[:-1].rstrip(), line=lineno)
            label = "then" if name == "scf.if" else ("before" if name == "scf.while" else "body")
            op.regions.append(Region(label, _region_args(op), self.block()))
            while True:
                close = self.next()                 # `}` ...
                tail = close[1:].strip()
                if tail.endswith("{"):              # `} else {`, `} do {`
                    lab = tail[:-1].strip() or "region"
                    args = VALUE.findall(lab.split("(", 1)[1]) if "(" in lab else []
                    # a `do` region names its arguments in its block label (`^bb0(%t: i32)`)
                    if not args and self.peek().startswith("^"):
                        args = re.findall(r"(%[\w.$-]+)\s*:", self.peek())
                    op.regions.append(Region(lab.split("(")[0].split()[0] if lab else "region",
                                             [a for a in args if ":" not in a], self.block()))
                    continue
                _, op.loc = _strip_loc(tail)
                return op
        text, loc = _strip_loc(rest)
        op = Operation(name, results, text, loc, line=lineno)
        if name == "ttg.warp_specialize":
            self._partitions(op)
        return op

    def _partitions(self, op: Operation) -> None:
        """`default { ... }` then `partitionN(%args) num_warps(W) { ... }`, closed by
        `} : (types) -> () loc(...)`."""
        while True:
            head = self.peek()
            m = re.match(r"^(default|partition\d+)\b(.*)\{$", head)
            if not m:
                return
            self.next()
            args = [a for a in re.findall(r"(%[\w.$-]+)\s*:", m.group(2))]
            op.regions.append(Region(m.group(1), args, self.block(), header=head))
            close = self.next()
            tail = close[1:].strip()
            if tail:
                _, loc = _strip_loc(tail)
                op.loc = loc or op.loc
                if not self.peek().startswith("partition"):
                    return


def _region_args(op: Operation) -> list[str]:
    if op.name == "scf.for":
        m = re.match(r"^scf\.for\s+(%[\w.$-]+)\s*=", op.text)
        carried = re.findall(r"(%[\w.$-]+)\s*=\s*%", op.text.split("iter_args", 1)[1]) \
            if "iter_args" in op.text else []
        return ([m.group(1)] if m else []) + carried
    if op.name == "scf.while":
        return re.findall(r"(%[\w.$-]+)\s*=\s*%", op.text)
    return []


def parse(text: str) -> Module:
    lines = text.splitlines()
    aliases: dict[str, str] = {}
    layouts: dict[str, str] = {}
    for line in lines:
        m = _ALIAS.match(line.strip())
        if m:
            aliases[m.group(1)] = m.group(2)
        m = _LAYOUT.match(line.strip())
        if m:
            layouts[m.group(1)] = m.group(2)
    reader = _Reader(lines)
    functions: list[Function] = []
    attrs = ""
    while reader.pos < len(lines):
        line = reader.next()
        if line.startswith("module"):
            attrs = line
        m = re.match(r"^tt\.func\s+(?:public\s+)?@([\w.$\"-]+)\((.*)\)(?:\s*->.*)?(?:\s+attributes.*)?"
                     r"\s*\{$", line)
        if m and "private" not in line.split("@")[0]:
            args, types = [], []
            for part in _split_top(m.group(2)):
                name, _, ty = part.partition(":")
                args.append(name.strip())
                types.append(_strip_loc(ty.strip())[0])
            body = reader.block()
            reader.next()
            functions.append(Function(m.group(1).strip('"'), args, types, body))
    return Module(functions, aliases, attrs, layouts)
