"""The Pallas frontend: trace a Mosaic GPU kernel on the CPU and read its synchronization as IR.

`jax.make_jaxpr` runs the kernel's Python code without a GPU; the resulting jaxpr holds one
`mpmd_map` per `plgpu.kernel` call, whose body is the program every Pallas thread runs. The
package follows the path of a kernel:

- targets.py: import a file, read EXPECT, trace a target function (`load`, `load_target`);
- device.py: the GPU facts a kernel asks for while traced on a CPU (SM count, CUDA version);
- translate.py: the jaxpr Translator and its dispatch table from primitive to handler;
- handlers.py: the synchronizing primitives (arrive, wait, TMA, tcgen05, cluster cancel);
- loops.py: trip counts, closed forms of loop carries, data-dependent control;
- family.py, antiunify.py: traces at several sizes joined into one IR (`@sizes`, `prove`);
- arith.py: lax's integer arithmetic as folding expressions (model/expr.py);
- primitives.py: which primitive names synchronize (modelled, local, unmodelled);
- locations.py: the user's source line of an equation or an error.

A primitive that synchronizes but is not modelled becomes an `unmodeled` op (BP190): it is never
dropped silently. JAX is imported lazily: the rest of barrierproof works without it.

>>> import jax, jax.numpy as jnp                                      # doctest: +SKIP
>>> from jax.experimental.pallas import mosaic_gpu as plgpu          # doctest: +SKIP
>>> def handoff():                                                   # doctest: +SKIP
...     @plgpu.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32), num_threads=2,
...                   thread_name="wg", scratch_types=[plgpu.Barrier()])
...     def k(x_ref, o_ref, bar):
...         ...
...     return k(jnp.zeros(128, jnp.float32))
>>> [k.name for k in load(handoff)]                                  # doctest: +SKIP
['handoff']
"""

from ..expr import (OPAQUE_PREFIX, is_bool, mk, mk_div, mk_neg, mk_not, mk_rem, mk_select,
                    nonneg, opaque, opaque_vars, stmt_vars, substitute, substitute_stmts)
from ..ir import BinOp, Const, Expr, Var  # noqa: F401 (the IR terms the examples build)
from .device import DEFAULT_CORE_COUNT, _GpuDevice, device_facts, device_facts_of  # noqa: F401
from .loops import DEFAULT_TRIPS, UNROLL_LIMIT, _induction
from .primitives import INLINE_PARAMS, LOCAL, MODELED, UNMODELED
from .targets import (VERDICT_NAMES, check_expect, expect_loc, import_file, load, load_target,
                      targets, trace, trace_function)
from .translate import RULES, _RULES, Translator, kernels_from_jaxpr  # noqa: F401 (_RULES: tests)

__all__ = [
    "DEFAULT_CORE_COUNT", "DEFAULT_TRIPS", "UNROLL_LIMIT", "MODELED", "LOCAL", "UNMODELED",
    "INLINE_PARAMS", "OPAQUE_PREFIX", "RULES", "Translator", "VERDICT_NAMES", "check_expect",
    "device_facts", "device_facts_of", "expect_loc", "import_file", "is_bool",
    "kernels_from_jaxpr", "load", "load_target", "mk", "mk_div", "mk_neg", "mk_not", "mk_rem",
    "mk_select", "nonneg", "opaque", "opaque_vars", "stmt_vars", "substitute",
    "substitute_stmts", "targets", "trace", "trace_function",
]

# The package's runnable examples live in its modules: doctest.testmod(pallas) runs them.
__test__ = {"mk": mk, "mk_div": mk_div, "substitute": substitute, "induction": _induction}
