"""What every command does with its flags: parameters as integers, and the one-line input
error (exit 3) with its hint."""

from __future__ import annotations

import sys
from typing import Sequence

from .model.ir import Kernel, ModelError


def fail(message: str, hint: str | None = None) -> int:
    print(f"error: {message}" + (f" (hint: {hint})" if hint else ""), file=sys.stderr)
    return 3


def parse_params(items: Sequence[str]) -> dict[str, int]:
    params = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ModelError(f"--param {item!r} is not NAME=VALUE", hint="e.g. --param stages=3")
        try:
            params[name.strip()] = int(value, 0)
        except ValueError:
            raise ModelError(f"--param {item!r}: {value!r} is not an integer",
                             hint="parameters are integers, e.g. --param steps=8") from None
    return params


def params_for(kernel: Kernel, params: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in params.items() if k in kernel.params}
