"""The typed settings of each engine (checker/engine_registry.py): what the command line's
engine flags become, and what a library caller passes as `engine_options`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class ExploreSettings:
    """The explorer has no settings of its own: `Options` (limits, reduction, store, order)."""


@dataclass(frozen=True)
class TlcSettings:
    workers: int = 1                    # TLC worker threads
    distributed: int = 0                # K > 0: a TLC server and K worker processes
    port: int | None = None             # the distributed server's port (None: a free one)
    bind: str | None = None             # the address it listens on (None: loopback)
    timeout: float | None = None        # seconds; None: options.limits.timeout


@dataclass(frozen=True)
class ProveSettings:
    symbolic: tuple[str, ...] = ()      # parameters to quantify over; (): the declared ones
    # with memory effects in play, search a little for breaking values before the proofs (a
    # racy buffer under a correct barrier protocol is found without a barrier proof first);
    # False runs the race proof on every kernel, what its soundness tests need
    search_first: bool = True


def settings_of(cls: type, values: Mapping[str, Any] | Any = None):
    """An engine's settings from an instance, a mapping, or the attributes of any object (a
    parsed command line): only the fields `cls` declares are read; a missing or None value
    keeps the default."""
    if isinstance(values, cls):
        return values
    if values is None:
        values = {}
    if isinstance(values, Mapping):
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"{cls.__name__} has no setting {', '.join(map(str, unknown))} "
                            f"(its settings: {', '.join(f.name for f in dataclasses.fields(cls)) or 'none'})")
    get = values.get if isinstance(values, Mapping) else \
        (lambda key, default=None: getattr(values, key, default))
    given = {}
    for f in dataclasses.fields(cls):
        value = get(f.name, None)
        if value is not None:
            given[f.name] = tuple(value) if isinstance(f.default, tuple) else value
    return cls(**given)
