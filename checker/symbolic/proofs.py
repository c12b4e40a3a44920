"""What the prover concludes: a Proof of a kernel and the ClassProof of each barrier class (the
records prove.py returns and cases.py / tiles.py build for their splits), and the barrier
proof's steps that the race proof and the engine run (BarrierProver)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class ClassProof:
    name: str
    status: str                 # proved, failed, unknown
    seconds: float
    reason: str = ""
    invariant_size: int = 0
    samples: int = 0
    peer_exit: tuple[str, ...] = ()     # barriers whose BP146 condition it proves (peer_exit.py)
    renamed: str = ""           # the proved class this one is renamed from (renamed.py)


@dataclass
class Proof:
    status: str                 # proved, failed, unknown
    seconds: float
    reason: str = ""
    classes: list[ClassProof] = field(default_factory=list)
    side_conditions: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    tau: str = ""
    cases: list[str] = field(default_factory=list)     # case splits (cases.py)


@dataclass(frozen=True)
class BarrierProver:
    """prove.py's barrier proof, handed to the modules prove.py re-exports (races_proof.py,
    engine.py), which therefore cannot import it: `prove` for a kernel, and the partition and
    the class proofs the race proof runs again with the accesses added."""
    prove: Callable
    partition: Callable
    prove_systems: Callable
