"""Verified fix suggestions: candidate edits of the IR drawn from real bug classes, each checked
by the explorer (and the prover, for symbolic protocols) before it is suggested."""

from .search import Repair, attach_fixes, repairable, suggest_fixes  # noqa: F401
