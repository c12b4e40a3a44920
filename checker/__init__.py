"""barrierproof.checker: how a verdict is reached (explorer, TLC, Z3, reports)."""
