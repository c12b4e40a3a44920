"""Family: cp.async's mbarrier arrival (`cp.async.mbarrier.arrive.noinc`), CuTe's
PipelineCpAsync producer commit.

Each executing thread's arrival reaches the barrier asynchronously, once the thread's earlier
cp.async copies are done; the copies themselves are not tracked, so the arrival may land at any
time after it is issued (as try_cluster_cancel's response does). The form without `.noinc`
also raises the expected count for the phase; it is not modelled (the frontend says BP190).
"""

from __future__ import annotations

from ..extensions import Extension
from ..kinds import Primitive
from .clc import compile_async_arrival

CP_ASYNC_ARRIVE = "cp_async_arrive"

EXTENSION = Extension("cp.async arrivals", primitives=(
    Primitive(CP_ASYNC_ARRIVE, "an asynchronous arrive(1) once the thread's earlier cp.async "
              "copies are done", needs=frozenset({"barrier"}), blocking=False, waits_for="",
              opcodes=("issue_async",), dsl="cp_async_arrive", reference="machine",
              prover="counter program (program.py)", repair=frozenset({"arrives"}),
              counter="async_arrival", async_arrival=True, compile=compile_async_arrival),
))
