"""The CuTe DSL frontend: compile a CUTLASS CuTe DSL kernel on the CPU and read its
synchronization from the DSL's MLIR as IR.

`cute.compile` traces a `@cute.jit` host function and the `@cute.kernel` it launches into an
MLIR module without a GPU. The package follows the path of a kernel:

- targets.py: a zero-argument target function, compiled with line info (`load`);
- capture.py: the module as built, before lowering (the compilation stops there);
- tree.py: the kernel's ops as plain data, with the user's source lines;
- interpreter.py: the body run once per warp with its 32 lanes as vectors: roles from
  `scf.if` on thread and warp indices, `elect_one`, loops to their trip counts;
- handlers.py: one row per op read (indices, smem pointers, copy atoms, mbarrier, named and
  cluster barriers, fences, TMA, tcgen05 commits);
- arith.py: the integer arithmetic of the index computations;
- translate.py: warps with equal programs become roles; barriers become allocations.
- roll.py: a loop's iterations rolled back into one IR loop (ring slots and parities in i);
- family.py: a trip count from an integer kernel argument as a parameter (runs joined);
- counts.py: several runtime counts (tiles and K) read at a grid of values, joined into
  nested loops whose ring positions are running counts over both.

The cutlass.pipeline classes (PipelineTmaAsync, PipelineAsync, PipelineState, ...) lower to
these ops, so the frontend reads them without knowing them. An op that synchronizes and has no
row, or whose operands depend on data, is an `unmodeled` op at its line (BP190): never dropped.
The DSL is imported only when a CuTe kernel is loaded.
"""

from .targets import claims, load, trace_function

__all__ = ["claims", "load", "trace_function"]
