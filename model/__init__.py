"""barrierproof.model: what a kernel's synchronization is (IR, DSL, semantics, interpreter)."""
