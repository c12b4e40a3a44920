"""barrierproof.model: what a kernel's synchronization is (IR, DSL, semantics, interpreter)."""

from . import plugins  # noqa: F401  (the plug-ins join the core before any System is built)
