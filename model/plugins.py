"""The one place the plug-ins join the core: imported by the package (model/__init__.py), so
every System is built with all of them. The primitive families of the mbarrier core come first
(they add no state); then the hardware barriers and init visibility, whose order is the order
of their state fields and of their effects (init visibility wraps the hardware barriers'
arrival and wait)."""

from . import extensions
from . import hw_barriers, init_visibility
from .primitives import CORE_FAMILIES

for _plugin in (*CORE_FAMILIES, hw_barriers, init_visibility):
    extensions.install(_plugin.EXTENSION)
extensions.check_complete()
