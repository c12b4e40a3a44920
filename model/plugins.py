"""The one place the plug-ins join the core: imported by the package (model/__init__.py), so
every System is built with all of them. The order is the order of their state fields and of
their effects (init visibility wraps the hardware barriers' arrival and wait)."""

from . import extensions
from . import hw_barriers, init_visibility

for _plugin in (hw_barriers, init_visibility):
    extensions.install(_plugin.EXTENSION)
extensions.check_complete()
