"""The kernel's MLIR as plain Python data: what the interpreter walks, once per warp.

The MLIR bindings are slow to query and their values overload `==` (the DSL builds IR from it),
so every kernel is copied once into `Node`s: op name, operand and result ids, result types as
text, attributes as ints or text, regions, and the user's source line.
"""

from __future__ import annotations

import ctypes
import functools
import linecache
import os
import re
import traceback
from dataclasses import dataclass, field

from ..ir import Loc

_FILE_LOC = re.compile(r'"([^"<>]+)":(\d+):(\d+)')


def _dsl_dir() -> str:
    try:
        import cutlass
        return os.path.dirname(os.path.dirname(os.path.abspath(cutlass.__file__)))
    except ImportError:          # pragma: no cover - the capture needs the DSL anyway
        return "\0"


_MODEL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=1)
def _internal() -> tuple[str, ...]:
    """Folders whose frames are not the user's: the DSL's package and barrierproof's."""
    return (_dsl_dir(), _MODEL_DIR)


def _display(path: str) -> str:
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def user_loc(text: str, function: str | None = None, module: bool = False) -> Loc | None:
    """The first file location in an MLIR location's text that is the user's code. The DSL
    names the ops it makes for control flow (scf.if, scf.for) `<module>` at the host
    function: no line of the user's there."""
    if text.startswith('loc("<module>"') and not module:
        return None
    for path, line, _col in _FILE_LOC.findall(text):
        if not os.path.abspath(path).startswith(_internal()):
            return Loc(_display(path), int(line), function)
    return None


def loc_of_exception(exc: BaseException) -> Loc | None:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not os.path.abspath(frame.filename).startswith(_internal()) \
                and not frame.filename.startswith("<"):
            return Loc(_display(frame.filename), frame.lineno or 0, frame.name)
    return None


@dataclass(eq=False)
class Block:
    args: tuple[int, ...]
    ops: tuple["Node", ...]


@dataclass(eq=False)
class Node:
    name: str
    operands: tuple[int, ...]
    results: tuple[int, ...]
    types: tuple[str, ...]                  # result types, as MLIR prints them
    operand_types: tuple[str, ...]
    attrs: dict
    regions: tuple[tuple[Block, ...], ...]
    loc: Loc | None

    def walk(self):
        yield self
        for region in self.regions:
            for block in region:
                for op in block.ops:
                    yield from op.walk()


@dataclass(eq=False)
class KernelTree:
    """One `@cute.kernel` as launched: its body, block shape and cluster shape."""

    name: str
    symbol: str
    body: Block
    arg_types: tuple[str, ...]
    block_dim: tuple[int, int, int]
    grid_dim: tuple[int, int, int] | None
    cluster_dim: tuple[int, int, int]
    loc: Loc | None
    facts: str = field(default="", repr=False)


def _attr(attr):
    text = None
    try:
        value = attr.value
        if isinstance(value, (bool, int)):
            return value
    except (AttributeError, ValueError, TypeError):
        pass
    text = str(attr)
    return text


_pythonapi = ctypes.pythonapi
_pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pythonapi.PyCapsule_GetName.restype = ctypes.c_char_p
_pythonapi.PyCapsule_GetName.argtypes = [ctypes.py_object]


def _vid(value) -> int:
    """A value's identity (its C pointer): the DSL replaces Value's `==` (it builds IR from
    it), so a value cannot be a dict key itself."""
    capsule = value._CAPIPtr
    return _pythonapi.PyCapsule_GetPointer(capsule, _pythonapi.PyCapsule_GetName(capsule))


def _keys(attributes) -> list[str]:
    return [getattr(a, "name", a) for a in attributes]


def _node(op, function: str) -> Node:
    op = op.operation
    attrs = {k: _attr(op.attributes[k]) for k in _keys(op.attributes)}
    regions = tuple(tuple(_block(b, function) for b in r.blocks) for r in op.regions)
    return Node(op.name, tuple(_vid(v) for v in op.operands),
                tuple(_vid(v) for v in op.results), tuple(str(v.type) for v in op.results),
                tuple(str(v.type) for v in op.operands),
                attrs, regions, user_loc(str(op.location), function))


def _block(block, function: str) -> Block:
    return Block(tuple(_vid(a) for a in block.arguments),
                 tuple(_node(op, function) for op in block.operations))


def _dims(facts: str, key: str) -> tuple[int, int, int] | None:
    m = re.search(key + r"\s*=\s*array<i\d+:\s*([\d,\s]+)>", facts)
    if not m:
        return None
    dims = [int(x) for x in m.group(1).split(",")]
    return tuple((dims + [1, 1, 1])[:3])


def _python_name(loc: Loc | None, symbol: str) -> str:
    """The kernel's Python name: the `def` at or after the decorator line the DSL records."""
    if loc is not None:
        for n in range(loc.line, loc.line + 8):
            m = re.match(r"\s*(?:async\s+)?def\s+(\w+)", linecache.getline(
                os.path.abspath(loc.file), n))
            if m:
                return m.group(1)
    m = re.match(r"kernel_cutlass_(.+?)_\w*_\d+$", symbol)
    return m.group(1) if m else symbol


def kernels_of_module(module) -> list[KernelTree]:
    """Every kernel of a built module, as a tree (call inside `with module.context`)."""
    out = []
    for top in module.body.operations:
        if top.operation.name != "gpu.module":
            continue
        for op in top.operation.regions[0].blocks[0].operations:
            op = op.operation
            if op.name not in ("cuda.kernel", "gpu.func", "func.func"):
                continue
            attrs = {k: str(op.attributes[k]) for k in _keys(op.attributes)}
            symbol = attrs.get("sym_name", "kernel").strip('"')
            loc = user_loc(str(op.location), module=True)    # the kernel's decorator line
            name = _python_name(loc, symbol)
            facts = attrs.get("cutlass_launch_facts", "")
            block_dim = _dims(facts, "exact_block_dim") or _dims(
                "reqntid = " + attrs.get("nvvm.reqntid", ""), "reqntid") or (0, 0, 0)
            cluster = _dims(facts, "exact_cluster_dim") or _dims(facts, "cluster_dim") \
                or (1, 1, 1)
            region = op.regions[0].blocks[0]
            out.append(KernelTree(
                name, symbol, _block(region, name),
                tuple(str(a.type) for a in region.arguments), block_dim,
                _dims(facts, "exact_grid_dim"), cluster,
                Loc(loc.file, loc.line, name) if loc else None, facts))
    return out


# blocks of a grid enumerated one by one (translate.py); a bigger grid keeps its index unknown
MAX_BLOCKS = 16
_BLOCK_REGISTERS = ("nvvm.read.ptx.sreg.ctaid.", "nvvm.read.ptx.sreg.clusterid.")


def reads_block_index(tree: KernelTree) -> bool:
    """Does the kernel read its block (or cluster) index anywhere?"""
    return any(op.name.startswith(_BLOCK_REGISTERS) for top in tree.body.ops
               for op in top.walk())
