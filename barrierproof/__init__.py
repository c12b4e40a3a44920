"""barrierproof: prove that a GPU kernel's barrier protocol cannot deadlock, or show the shortest
interleaving in which it does."""

from .model.dsl import Protocol, maximum, minimum, protocol
from .model.ir import Kernel, ModelError
from .model.pallas.family import sizes
from .checker.check import Options, check_kernel
from .checker.engines.explore import Limits
from .checker.verdict import Diagnostic, Verdict
from .checker.engine_settings import ProveSettings, TlcSettings
from .api import check

__version__ = "0.1.0"

__all__ = ["protocol", "minimum", "maximum", "Protocol", "Kernel", "ModelError", "Options", "check_kernel", "check",
           "ProveSettings", "TlcSettings", "Limits",
           "Diagnostic", "Verdict", "sizes", "__version__"]
