"""The package list, discovered from the layout: pyproject.toml's package-dir maps the top-level
folders (barrierproof/, model/, checker/, specs/) into the `barrierproof` namespace, and every
folder under them with an __init__.py is a subpackage. And the one C extension, the compiled
exploration core (checker/engines/_core.c, which includes _symmetry.c and _por.c): optional, so
an install without a C compiler succeeds and runs the pure-Python explorer (the same verdicts,
slower)."""

import importlib.util
import os

from setuptools import Extension, find_packages, setup

# The import name of each top-level folder (the same table as pyproject.toml's package-dir).
LAYOUT = {"barrierproof": "barrierproof", "barrierproof.model": "model",
          "barrierproof.checker": "checker", "barrierproof.specs": "specs"}


def packages() -> list[str]:
    found = []
    for name, folder in LAYOUT.items():
        found += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]
    return found


def _sources_digest() -> str:
    """The digest of the C sources the extensions are built from (core_sources.py), baked into
    them: an editable install whose sources changed since is told apart at import."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "core_sources", os.path.join(here, "checker", "engines", "core_sources.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.digest(os.path.join(here, "checker", "engines")) or ""


DIGEST = [("BP_SOURCE_DIGEST", '"%s"' % _sources_digest())]

CORE = Extension("barrierproof.checker.engines._core", sources=["checker/engines/_core.c"],
                 depends=["checker/engines/_por.c", "checker/engines/_symmetry.c"],
                 extra_compile_args=["-O3"], define_macros=DIGEST, optional=True)

# A worker of the multi-process explorer (checker/engines/mproc.py): _core.c's rules included.
MPROC = Extension("barrierproof.checker.engines._mproc", sources=["checker/engines/_mproc.c"],
                  depends=["checker/engines/_core.c", "checker/engines/_por.c",
                           "checker/engines/_symmetry.c"],
                  extra_compile_args=["-O3"], define_macros=DIGEST, optional=True)

setup(packages=packages(), ext_modules=[CORE, MPROC])
