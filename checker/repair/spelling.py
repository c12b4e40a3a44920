"""How the user spelled a value, so a source fix keeps it: a protocol that counts its threads as
`STAGES - 1` gets `num_arrivals=STAGES - 1`, not the literal `3` the IR holds.

The IR keeps only values: a module constant (`STAGES = 4`) is folded in when the protocol is
built. The spellings are read back from the protocol's own function: every expression over
module-level integer constants (names, `+ - * // %`, unary minus) is evaluated in the module
the loader imported, and each value keeps its first spelling. Names the function binds itself
(parameters, loop variables, assignments) are never constants. The edit is still checked the
usual way: the patched file must build exactly the repaired protocol.

>>> import textwrap
>>> src = textwrap.dedent('''
...     def p(k, steps=2):
...         k.threads(STAGES)
...         with k.when(k.thread < STAGES - 1):
...             pass
... ''')
>>> spellings_in(src, "p", {"STAGES": 4})
{4: 'STAGES', 3: 'STAGES - 1'}
>>> argument_text("    ready = k.Barrier(num_arrivals=STAGES, num_barriers=2)\\n", "num_arrivals")
'STAGES'
"""

from __future__ import annotations

import ast
import os
import sys

from ...model.ir import Kernel

_ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load, ast.Add, ast.Sub,
               ast.Mult, ast.FloorDiv, ast.Mod, ast.USub)


# A file's module-level integer constants, as a process that imported it in a child sent them
# (barrierproof/isolate.py): the command line never imports the user's module itself.
_SENT: dict[str, dict[str, int]] = {}


def remember_constants(file: str, constants: dict[str, int]) -> None:
    _SENT[os.path.realpath(file)] = dict(constants)


def module_constants(namespace: dict) -> dict[str, int]:
    """The integer constants of a module's globals (what a spelling may name)."""
    return {k: v for k, v in namespace.items() if isinstance(k, str) and type(v) is int}


def _module_namespace(file: str) -> dict:
    """The globals of the module the loader imported from `file`, or the constants a child sent
    for it (empty if neither)."""
    want = os.path.realpath(file)
    if want in _SENT:
        return _SENT[want]
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and os.path.realpath(path) == want:
            return vars(module)
    return {}


def _function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name),
                None)


def spellings_in(source: str, function: str, namespace: dict) -> dict[int, str]:
    """Value -> its first spelling over module constants in `function` of `source`."""
    try:
        fn = _function(ast.parse(source), function)
    except SyntaxError:
        return {}
    if fn is None:
        return {}
    bound = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    bound |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    constants = {name: v for name, v in namespace.items()
                 if type(v) is int and name not in bound}
    found: dict[int, str] = {}
    for node in ast.walk(fn):
        value = _value(node, constants)
        if value is not None:
            found.setdefault(value, ast.unparse(node))
    return found


def _value(node: ast.AST, constants: dict[str, int]) -> int | None:
    """The value of an expression over `constants` (None: not such an expression)."""
    if not isinstance(node, (ast.Name, ast.BinOp, ast.UnaryOp)):
        return None
    parts = list(ast.walk(node))
    names = [n.id for n in parts if isinstance(n, ast.Name)]
    if not names or not all(isinstance(n, _ARITHMETIC) for n in parts) \
            or not all(n in constants for n in names) \
            or not all(type(n.value) is int for n in parts if isinstance(n, ast.Constant)):
        return None
    try:
        return eval(compile(ast.Expression(node), "<spelling>", "eval"),
                    {"__builtins__": {}}, constants)
    except ArithmeticError:
        return None


def spellings(kernel: Kernel) -> dict[int, str]:
    """The spellings of a DSL protocol's constants, read from its own function."""
    loc = kernel.loc
    if kernel.source != "dsl" or loc is None or not loc.function:
        return {}
    try:
        with open(loc.file, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return {}
    return spellings_in(source, loc.function, _module_namespace(loc.file))


def written_value(kernel: Kernel, text: str) -> int | None:
    """The value of `text`, an expression over the protocol module's integer constants."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    namespace = _module_namespace(kernel.loc.file) if kernel.loc else {}
    return _value(node, {k: v for k, v in namespace.items() if type(v) is int})


def argument_text(line: str, name: str) -> str | None:
    """The source text of keyword argument `name` in the one call on `line`, if it parses."""
    text = line.strip()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    values = [kw.value for n in ast.walk(tree) if isinstance(n, ast.Call)
              for kw in n.keywords if kw.arg == name]
    if len(values) != 1:
        return None
    return ast.get_source_segment(text, values[0])
