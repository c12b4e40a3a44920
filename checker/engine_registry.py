"""The engines by name: what `--engine`, `[tool.barrierproof] engine` and
`barrierproof.check(..., engine=...)` choose from.

An engine is a function `(kernel, params, options, source, settings) -> Verdict`: the IR, the
parameter values, the shared `Options` (limits, reduction, ignored codes), the `--source`
reference for locations, and its own typed settings (a dataclass of engine_settings.py). The
command line and the config file only parse flags into these; nothing here reads argparse.
Modules are imported when an engine is first run, so a missing extra (z3 for `symbolic`, the
TLA+ tools for `tlc`) is an input error naming it, not an import error at start-up.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Mapping

from ..model.ir import Kernel, ModelError
from .check import LOAD_ALLOWANCE, WALL_NET_FACTOR
from .engine_settings import ExploreSettings, ProveSettings, TlcSettings, settings_of
from .verdict import Verdict


@dataclass(frozen=True)
class Engine:
    name: str
    module: str                         # relative to barrierproof.checker
    function: str                       # (kernel, params, options, source, settings) -> Verdict
    settings: type
    extra: str                          # how to get what it needs, when the import fails
    # the watchdog's wall-clock net is this many times --timeout (prove's timeout is a work
    # budget, checker/check.py WALL_NET_FACTOR)
    wall_factor: float = 1.0
    interrupt: str | None = None        # a function of `module` that makes a running query return
    # what a watchdog's stop makes of its verdict: a search covered something (`bounded`), a
    # proof that did not finish concluded nothing (`unknown`)
    when_stopped: str = "bounded"
    # reads one IR for every size of a Pallas function that declares its sizes (@sizes)
    reads_families: bool = False
    # suppresses a finding at its place only (Options.tolerate, checker/engines/explore.py);
    # otherwise a suppressed finding's code is ignored for the whole target (suppress.py)
    locates_suppressions: bool = False

    def load(self) -> Callable[..., Verdict]:
        try:
            return getattr(importlib.import_module(self.module, __package__), self.function)
        except (ImportError, AttributeError) as err:
            raise ModelError(f"engine {self.name!r} is not available: {err}",
                             hint=self.extra) from None

    def make_settings(self, values=None):
        return settings_of(self.settings, values)

    def stop_solver(self) -> None:
        if self.interrupt is not None:
            getattr(importlib.import_module(self.module, __package__), self.interrupt)()


EXTRAS = "install the extra it needs (barrierproof[tla] for tlc)"

ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("explore", ".check", "explore_kernel", ExploreSettings, EXTRAS,
           locates_suppressions=True),
    Engine("tlc", ".engines.tlc", "check_kernel_tlc", TlcSettings, EXTRAS),
    Engine("symbolic", ".symbolic.prove", "prove_kernel", ProveSettings, EXTRAS,
           wall_factor=WALL_NET_FACTOR * LOAD_ALLOWANCE, interrupt="interrupt_solver", when_stopped="unknown",
           reads_families=True),
)}


def engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except (KeyError, TypeError):
        raise ModelError(f"no engine named {name!r}",
                         hint=f"choose one of {', '.join(sorted(ENGINES))}") from None


def run(kernel: Kernel, params: Mapping[str, int] | None = None, options=None,
        source: str | None = None, name: str = "explore", settings=None) -> Verdict:
    """Check one kernel with the engine `name`; `settings` is its settings dataclass (or a
    mapping of its fields)."""
    chosen = engine(name)
    return chosen.load()(kernel, params, options, source, chosen.make_settings(settings))
