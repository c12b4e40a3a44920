"""The shapes of the JSON barrierproof reads back: traces (`replay`) and verdicts (the cache).

Valid JSON of the wrong shape must be refused with the path of the first wrong field, not crash
a reporter three steps later. Hand-written rather than a JSON Schema library: the shapes are
small, and the checks run on every cache hit.

>>> check_trace({"protocol": "p"})
Traceback (most recent call last):
...
barrierproof.schema.ShapeError: $.source: missing
"""

from __future__ import annotations

from typing import Any, Callable

from .checker.verdict import VERDICTS


class ShapeError(ValueError):
    pass


Check = Callable[[Any, str], None]


def _is(kind, what: str) -> Check:
    def check(value, path: str) -> None:
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise ShapeError(f"{path}: expected {what}, got {type(value).__name__}")
    return check


STR = _is(str, "a string")
INT = _is(int, "an integer")
NUMBER = _is((int, float), "a number")
BOOL = _is(bool, "true or false")


def optional(check: Check) -> Check:
    def run(value, path: str) -> None:
        if value is not None:
            check(value, path)
    return run


def list_of(check: Check) -> Check:
    def run(value, path: str) -> None:
        _is(list, "a list")(value, path)
        for i, item in enumerate(value):
            check(item, f"{path}[{i}]")
    return run


def map_of(check: Check) -> Check:
    def run(value, path: str) -> None:
        _is(dict, "an object")(value, path)
        for key, item in value.items():
            STR(key, f"{path} key")
            check(item, f"{path}.{key}")
    return run


def one_of(values, what: str) -> Check:
    def run(value, path: str) -> None:
        if value not in values:
            raise ShapeError(f"{path}: expected {what}, got {value!r}"[:200])
    return run


def record(fields: dict[str, Check], required: tuple[str, ...]) -> Check:
    def run(value, path: str) -> None:
        _is(dict, "an object")(value, path)
        for name in required:
            if name not in value:
                raise ShapeError(f"{path}.{name}: missing")
        for name, check in fields.items():
            if name in value:
                check(value[name], f"{path}.{name}")
    return run


ANY_MAP = _is(dict, "an object")
STEP = record({"index": INT, "action": INT, "agent": STR, "agent_kind": STR, "text": STR,
               "location": optional(STR), "completions": list_of(STR),
               "barriers": map_of(ANY_MAP)},
              ("index", "action", "agent", "agent_kind", "text", "location"))
VIOLATION = record({"code": STR, "name": optional(STR), "message": STR,
                    "details": list_of(STR)}, ("code",))
TRACE = record({"protocol": STR, "source": optional(STR), "params": map_of(INT),
                "grid_position": map_of(INT), "agents": list_of(STR), "actions": list_of(INT),
                "steps": list_of(STEP), "outcome": STR, "violation": optional(VIOLATION),
                "final_barriers": map_of(ANY_MAP), "initial_barriers": map_of(ANY_MAP)},
               ("protocol", "source", "params", "grid_position", "agents", "actions",
                "outcome"))
DIAGNOSTIC = record({"code": STR, "message": STR, "location": optional(STR),
                     "help": optional(STR), "details": list_of(STR)}, ("code", "message"))
VERDICT = record({"name": STR, "verdict": one_of(VERDICTS, "a verdict"),
                  "diagnostics": list_of(DIAGNOSTIC), "trace": optional(TRACE),
                  "states": INT, "transitions": INT, "depth": INT, "seconds": NUMBER,
                  "engine": STR, "params": map_of(INT), "source": optional(STR),
                  "reduction": BOOL, "coverage": optional(STR), "notes": list_of(STR),
                  "expected": optional(STR)}, ("name", "verdict"))


def check_trace(data: Any) -> None:
    """A trace as `check --trace-dir` writes it."""
    TRACE(data, "$")


def check_verdict(data: Any) -> None:
    """A verdict as `--format json` writes one (and the cache stores it)."""
    VERDICT(data, "$")
