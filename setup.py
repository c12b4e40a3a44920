"""The package list, discovered from the layout: pyproject.toml's package-dir maps the top-level
folders (barrierproof/, model/, checker/, specs/) into the `barrierproof` namespace, and every
folder under them with an __init__.py is a subpackage. Nothing else is configured here."""

from setuptools import find_packages, setup

# The import name of each top-level folder (the same table as pyproject.toml's package-dir).
LAYOUT = {"barrierproof": "barrierproof", "barrierproof.model": "model",
          "barrierproof.checker": "checker", "barrierproof.specs": "specs"}


def packages() -> list[str]:
    found = []
    for name, folder in LAYOUT.items():
        found += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]
    return found


setup(packages=packages())
