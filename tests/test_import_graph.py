"""The import graph of the package, read with `ast` from every module (imports at module level
and inside functions alike): dependencies point one way.

- No circle of files. An import under `if TYPE_CHECKING:` is not an edge: it never runs.
  Importing `a.b.c` is an edge to `a.b.c` only (its packages' __init__ files run first, but
  a package that re-exports its submodules is not a circle through them).
- model/'s core (the instruction set, the codes, the step rules, the compiler and the System)
  never reaches a plug-in (a module that declares an `EXTENSION`), even lazily: plug-ins join
  the core through model/plugins.py.
- Nothing in checker/ or model/, and no reporter, reaches barrierproof.cli.

The circles allowed, each with why it stays:

- checker.engines.tlc <-> checker.engines.tlc_distributed: the distributed mode is part of the
  TLC engine, split out for its size; tlc starts it only when --distributed asks, and it runs
  TLC through tlc's runner and reads its output with tlc's parser. Both imports are inside
  functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Top-level folders and their import names (setup.py LAYOUT).
LAYOUT = {"barrierproof": "barrierproof", "model": "barrierproof.model",
          "checker": "barrierproof.checker", "specs": "barrierproof.specs"}
ALLOWED_CIRCLES = [
    {"barrierproof.checker.engines.tlc", "barrierproof.checker.engines.tlc_distributed"},
]
CORE = ["barrierproof.model." + m for m in
        ("instructions", "violations", "steps", "compile", "semantics", "extensions")]
CLI = "barrierproof.cli"


def _modules() -> dict[str, tuple[Path, str]]:
    """module name -> (file, the package its relative imports start from)."""
    found = {}
    for folder, name in LAYOUT.items():
        for file in sorted((ROOT / folder).rglob("*.py")):
            parts = [name, *file.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
                found[".".join(parts)] = (file, ".".join(parts))
            else:
                found[".".join(parts)] = (file, ".".join(parts[:-1]))
    return found


MODULES = _modules()


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or \
        getattr(test, "attr", None) == "TYPE_CHECKING"


def _imports(file: Path, package: str) -> set[str]:
    out: set[str] = set()

    def visit(node) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module
                subs = [f"{module}.{a.name}" for a in child.names
                        if f"{module}.{a.name}" in MODULES]
                out.update(subs)
                if len(subs) < len(child.names):    # names from the module itself
                    out.add(module)
            elif isinstance(child, ast.Constant) and isinstance(child.value, str) and \
                    child.value.startswith("barrierproof.") and child.value in MODULES:
                out.add(child.value)        # importlib.import_module("barrierproof.x")
            visit(child)
    visit(ast.parse(file.read_text(encoding="utf-8")))
    return out


GRAPH = {m: sorted(d for d in _imports(f, p) if d in MODULES and d != m)
         for m, (f, p) in MODULES.items()}


def _circles() -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            deps = GRAPH[node]
            if i < len(deps):
                work.append((node, i + 1))
                nxt = deps[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.add(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _reach(start: str) -> dict[str, str]:
    """Every module `start` imports, directly or not, with the module that imports it."""
    seen = {start: ""}
    todo = [start]
    while todo:
        m = todo.pop()
        for d in GRAPH[m]:
            if d not in seen:
                seen[d] = m
                todo.append(d)
    return seen


def _path(seen: dict[str, str], end: str) -> str:
    chain = [end]
    while seen[chain[-1]]:
        chain.append(seen[chain[-1]])
    return " -> ".join(reversed(chain))


def test_the_graph_reads_every_module():
    assert len(MODULES) > 100 and "barrierproof.model.semantics" in MODULES
    assert "barrierproof.model.instructions" in GRAPH["barrierproof.model.semantics"]


def test_no_circle_of_files_but_the_ones_the_docstring_explains():
    circles = _circles()
    unexplained = [sorted(c) for c in circles if c not in ALLOWED_CIRCLES]
    assert not unexplained, unexplained
    stale = [sorted(c) for c in ALLOWED_CIRCLES if c not in circles]
    assert not stale, f"allowed circles that are gone (drop them from the list): {stale}"


def test_the_core_never_reaches_a_plug_in():
    plugins = {m for m, (f, _) in MODULES.items() if m.startswith("barrierproof.model.")
               and "\nEXTENSION = Extension(" in f.read_text(encoding="utf-8")}
    assert {"barrierproof.model.hw_barriers", "barrierproof.model.init_visibility"} <= plugins
    for core in CORE:
        seen = _reach(core)
        reached = sorted(plugins & set(seen))
        assert not reached, [_path(seen, p) for p in reached]


def test_engines_models_and_reporters_never_reach_the_command_line():
    below = [m for m in MODULES if m.startswith(("barrierproof.checker", "barrierproof.model"))]
    below += ["barrierproof.outputs", "barrierproof.api", "barrierproof.loader",
              "barrierproof.config"]
    for m in below:
        seen = _reach(m)
        assert CLI not in seen, _path(seen, CLI)


def test_a_circle_is_found():
    """The check itself: a circle made up here is reported."""
    GRAPH["barrierproof.model.ir"].append("barrierproof.model.semantics")
    try:
        assert any("barrierproof.model.ir" in c for c in _circles())
    finally:
        GRAPH["barrierproof.model.ir"].remove("barrierproof.model.semantics")
