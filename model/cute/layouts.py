"""CuTe layouts as the MLIR types print them, for the shared-memory footprint of a tensor.

A memref type ends in its layout, `"(64,64,2):(64,1,4096)"` (shape : stride, nested tuples of
integers; `?` a value known at run time). The frontend needs three things of it: the element
index of a coordinate (`crd2idx`, for `cute.slice` and element loads), the span of elements the
layout reaches (`cosize`), and the swizzle the pointer carries (`S<B,M,S>`), which permutes
addresses within aligned blocks of 2^(B+M+S) bytes.
"""

from __future__ import annotations

import re

_LAYOUT = re.compile(r'"([^"]*)"\s*>\s*$')
_SWIZZLE = re.compile(r"\bS<(\d+),(\d+),(\d+)>")


def parse_tuple(text: str):
    """`(64,(8,2)),?` text -> nested tuples of ints; `?` (a run-time value) -> None, `_` -> '_'."""
    pos = 0

    def item():
        nonlocal pos
        if text[pos] == "(":
            pos += 1
            out = []
            while text[pos] != ")":
                out.append(item())
                if text[pos] == ",":
                    pos += 1
            pos += 1
            return tuple(out)
        m = re.compile(r"-?\d+|\?(?:\{[^}]*\})?|_").match(text, pos)
        if not m:
            raise ValueError(text)
        pos = m.end()
        token = m.group(0)
        return "_" if token == "_" else None if token.startswith("?") else int(token)
    value = item()
    if pos != len(text):
        raise ValueError(text)
    return value


def layout_of(type_text: str):
    """(shape, stride) of a memref type's layout, or None when it is not all static."""
    m = _LAYOUT.search(type_text)
    if not m or ":" not in m.group(1):
        return None
    try:
        shape, stride = (parse_tuple(part.replace(" ", "")) for part in m.group(1).split(":"))
    except (ValueError, IndexError):
        return None
    if not _congruent(shape, stride) or None in _leaves(shape) + _leaves(stride):
        return None
    if any(d < 0 for d in _leaves(stride)):     # its first element is then not its lowest
        return None
    return shape, stride


def swizzle_block(type_text: str) -> int:
    """Bytes of the aligned blocks a swizzle permutes within (1: no swizzle)."""
    m = _SWIZZLE.search(type_text)
    return 1 << sum(int(x) for x in m.groups()) if m else 1


def _leaves(t) -> list:
    return [x for s in t for x in _leaves(s)] if isinstance(t, tuple) else [t]


def _congruent(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            all(_congruent(x, y) for x, y in zip(a, b))
    return True


def cosize(shape, stride) -> int:
    """One past the largest element index the layout reaches (layout_of admits no negative
    stride)."""
    return 1 + sum((n - 1) * d for n, d in zip(_leaves(shape), _leaves(stride)))


def _size(shape) -> int:
    out = 1
    for n in _leaves(shape):
        out *= n
    return out


def crd2idx(coord, shape, stride):
    """The element index of `coord` (nested like the shape, or an integer for a whole mode,
    read colexicographically); `_` contributes nothing. Lane vectors are combined lane by lane
    by the caller: here every leaf is an int."""
    if coord == "_":
        return 0
    if isinstance(shape, tuple):
        if isinstance(coord, tuple):
            if len(coord) != len(shape):
                raise ValueError("a coordinate of another rank")
            return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
        out, rest = 0, coord                 # an integer for a nested mode: colexicographic
        for s, d in zip(shape, stride):
            n = _size(s)
            out += crd2idx(rest % n, s, d)
            rest //= n
        return out
    if isinstance(coord, tuple):
        raise ValueError("a nested coordinate for a flat mode")
    return coord * stride
