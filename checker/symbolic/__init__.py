"""The Z3 parametric prover: fragment (what it accepts), encode, invariants, prove."""
