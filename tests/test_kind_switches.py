"""No module outside the primitive registry switches on a kind string (the independent
reference apart, held at its counts).

What a primitive *is* lives in its family module (model/primitives/, hw_barriers.py,
init_visibility.py; model/kinds.py reads them). Anywhere else a consumer should ask the
registry (`kinds.lookup(kind).async_arrival`, `kinds.having("waits")`, ...) or name a kind
through its constant (`primitives.WAIT_PARITY`), not compare op kinds with string literals.
This test reads every module of the package with `ast` and counts the string literals equal to
a registered kind name that
- are compared with something named `kind` (`op.kind == "arrive"`, `kind in ("a", "b")`),
- are keys of a dict literal whose string keys are all kind names (a dispatch table),
- are elements of a tuple/list/set literal of kind names and kind constants only (a kind table
  such as `ARRIVING = ("barrier_arrive", K.ARRIVE)`: its literals).
Building an op (`Op("arrive", ...)`) is not counted, and neither are words that merely equal a
kind name elsewhere (an event called "arrive" in a report).

A module outside the registry must have none. A table of kind constants alone
(`NAMED_KINDS = (K.BAR_SYNC, K.BAR_ARRIVE)`) is not counted: most name the kinds an argument
was made for, so a new kind falls outside it (`Unsupported`), and no syntax tells those apart
from a classification the registry should answer (docs/ARCHITECTURE.md, "Add a primitive").

`INDEPENDENT` is not debt: model/reference/ re-states the rules in its own words for the
cross-check and imports nothing of the model but ir.py (tests/test_reference.py), so it names
the kinds itself; its counts are held all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

from barrierproof.model import kinds

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("model", "checker", "barrierproof")
# The registry itself: the family modules declare their kinds, kinds.py reads them.
REGISTRY = {"model/kinds.py", "model/hw_barriers.py", "model/init_visibility.py"}
REGISTRY_PACKAGE = "model/primitives/"

INDEPENDENT = {
    "model/reference/__init__.py": 84,    # +1: cp.async's arrival takes over the copies
    "model/reference/hardware.py": 11,
    "model/reference/inits.py": 4,
    "model/reference/memory.py": 13,      # +2: a tcgen05.ld left running and its wait
    "model/reference/semaphores.py": 3,
}


def _mentions_kind(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Attribute) and "kind" in n.attr)
               or (isinstance(n, ast.Name) and "kind" in n.id.lower())
               for n in ast.walk(node))


def _kind_constant(node: ast.AST, constants: set[str]) -> bool:
    """A reference to a kind constant: `K.ARRIVE`, `primitives.ARRIVE`, `ARRIVE`."""
    return (isinstance(node, ast.Attribute) and node.attr in constants) or \
        (isinstance(node, ast.Name) and node.id in constants)


def _kind_strings(node: ast.AST, names: set[str]) -> list[ast.Constant]:
    """The kind-name literals of `node`: itself, or the elements of a literal collection."""
    if isinstance(node, ast.Constant) and node.value in names:
        return [node]
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("frozenset", "set",
                                                                        "tuple") and node.args:
        return _kind_strings(node.args[0], names)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
    return []


def kind_switches(source: str, names: set[str], constants: set[str] = frozenset()) -> int:
    """How many kind-name literals `source` switches on (the module docstring's three forms);
    `constants` are the names of the kind constants."""
    counted: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and _mentions_kind(node):
            for side in [node.left, *node.comparators]:
                counted |= {id(c) for c in _kind_strings(side, names)}
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value,
                                                                                      str)]
            if keys and all(k.value in names for k in keys):
                counted |= {id(k) for k in keys}
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
            if all((isinstance(e, ast.Constant) and e.value in names)
                   or _kind_constant(e, constants) for e in node.elts):
                counted |= {id(e) for e in node.elts if isinstance(e, ast.Constant)}
    return len(counted)


def kind_constants() -> set[str]:
    """The names of the kind constants (model/primitives exports one per kind)."""
    from barrierproof.model import primitives
    return {k for k, v in vars(primitives).items()
            if k.isupper() and isinstance(v, str) and v in kinds.PRIMITIVES}


def debt(root: Path = ROOT, names: set[str] | None = None) -> dict[str, int]:
    """module path -> its kind switches, for every module outside the registry with any."""
    names = set(kinds.PRIMITIVES) if names is None else names
    constants = kind_constants()
    found = {}
    for folder in FOLDERS:
        for file in sorted((root / folder).rglob("*.py")):
            rel = file.relative_to(root).as_posix()
            if rel in REGISTRY or rel.startswith(REGISTRY_PACKAGE):
                continue
            n = kind_switches(file.read_text(), names, constants)
            if n:
                found[rel] = n
    return found


def test_the_counter_sees_the_three_forms_and_nothing_else():
    names = {"arrive", "barrier_wait"}
    assert kind_switches('if op.kind == "arrive": pass', names) == 1
    assert kind_switches('x = kind in ("arrive", "barrier_wait")', names) == 2
    assert kind_switches('T = {"arrive": 1, "barrier_wait": 2}', names) == 2
    assert kind_switches('A = frozenset({"arrive", "barrier_wait"})', names) == 2
    assert kind_switches('A = ("arrive", K.BARRIER_WAIT, BARRIER_WAIT)', names,
                         {"BARRIER_WAIT"}) == 1
    assert kind_switches('A = ("arrive", K.OTHER)', names, {"BARRIER_WAIT"}) == 0
    assert kind_switches('op = Op("arrive", ref)', names) == 0
    assert kind_switches('STYLE = {"arrive": "blue", "land": "green"}', names) == 0
    assert kind_switches('if event == "arrive": pass', names) == 0


def test_no_module_outside_the_registry_switches_on_a_kind_string():
    found = debt()
    grown = {m: (n, INDEPENDENT.get(m, 0)) for m, n in found.items()
             if n > INDEPENDENT.get(m, 0)}
    assert not grown, (
        "modules switch on more kind strings than allowed (found, allowed): "
        f"{grown}; ask the primitive registry (model/kinds.py) or use the kind constants "
        "(model/primitives/)")


def test_the_registry_modules_declare_every_kind():
    from barrierproof.model import primitives
    declared = {p.kind for family in primitives.FAMILIES for p in family.EXTENSION.primitives}
    assert declared == set(kinds.PRIMITIVES)
    constants = {v for k, v in vars(primitives).items() if k.isupper() and isinstance(v, str)}
    assert constants == set(kinds.PRIMITIVES), "every kind has a constant in model/primitives"
