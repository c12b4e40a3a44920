"""Which jaxpr primitives synchronize: the frontend's one table of primitive names.

Every Pallas primitive is in exactly one class: MODELED (its own handler builds an IR op),
LOCAL (cannot block another thread or complete a barrier phase), UNMODELED (synchronizes, kept
as an `unmodeled` op, BP190). A Pallas GPU primitive in none of them is treated as unmodelled,
never dropped.
"""

from __future__ import annotations

import inspect
import re

from ..ir import ModelError

# JAX releases whose jaxprs this frontend reads: at least the first, below the second. Within
# the range, a Pallas primitive missing from the tables below is treated as unmodelled (BP190)
# and a changed parameter layout makes translation fail with an error naming the line, so a
# newer JAX can cost a verdict but never make one wrong. TESTED_JAX is what the suite runs.
JAX_RANGE = ((0, 10, 2), (0, 13))
TESTED_JAX = ("0.10.2",)


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def supported_range() -> str:
    low, high = (".".join(map(str, v)) for v in JAX_RANGE)
    return f"{low} <= jax < {high}"


def check_jax_version(version: str) -> None:
    """A clear error for a JAX outside the range, before tracing anything.

    >>> check_jax_version("0.10.2"); check_jax_version("0.12.0.1")
    >>> check_jax_version("0.9.1")
    Traceback (most recent call last):
    ...
    barrierproof.model.ir.ModelError: JAX 0.9.1 is outside the versions the Pallas frontend reads (0.10.2 <= jax < 0.13) (hint: pip install 'jax>=0.10.2,<0.13' jaxlib, or the barrierproof[pallas] extra)
    """
    v = _version_tuple(version)
    low, high = JAX_RANGE
    if not low <= v < high:
        raise ModelError(f"JAX {version} is outside the versions the Pallas frontend reads "
                         f"({supported_range()})",
                         hint=f"pip install 'jax>={'.'.join(map(str, low))},"
                              f"<{'.'.join(map(str, high))}' jaxlib, or the barrierproof[pallas]"
                              " extra")

# Primitives that synchronize threads or async agents and are modelled.
MODELED = {"barrier_arrive", "barrier_wait", "copy_gmem_to_smem", "tcgen05_mma",
           "tcgen05_commit_arrive", "try_cluster_cancel", "semaphore_signal", "semaphore_wait",
           "async_store_smem", "barrier_test", "semaphore_signal_parallel",
           # newer JAX than the one tested (recognised by name, like the rest of this table)
           "semaphore_signal_multicast"}
# Mosaic GPU / Pallas primitives that cannot block another thread or complete a barrier phase:
# local waits for the thread's own async work, data movement, fences, register hints.
LOCAL = {
    "copy_smem_to_gmem", "wait_smem_to_gmem", "wait_gmem_to_smem", "commit_group", "commit_smem",
    "wgmma", "wgmma_ref",
    "wgmma_wait", "wgmma_accumulator_deref_p", "wgmma_accumulator_store_p",
    "set_max_registers_p", "load", "async_load", "wait_load_tmem", "async_store_tmem",
    "commit_tmem", "async_prefetch", "print_layout", "layout_cast",
    "broadcasted_iota", "query_cluster_cancel", "async_copy_smem_to_tmem",
    "async_copy_scales_to_tmem", "async_copy_sparse_metadata_to_tmem", "get_global",
    "program_id", "num_programs", "debug_print", "mgpu_atomic_store", "atomic_rmw",
    "multimem_load_reduce", "multimem_store", "delay", "semaphore_read", "masked_load",
    "masked_swap", "reciprocal",
    "mma",      # JAX 0.11: a register-level MMA on loaded values (no barrier, no async agent)
    # Programmatic dependent launch: griddepcontrol.wait waits for the *previous* kernel in the
    # stream (which never waits for this one), launch_dependents lets the next one start; no
    # thread of this kernel waits for another through them.
    "griddepcontrol_wait", "griddepcontrol_launch_dependents",
}
# Synchronization outside the model: kept as `unmodeled` ops (BP190).
UNMODELED = {"inline_mgpu_p", "pallas_call"}
# jnp's integer floor remainder and floor division (jitted helpers): the IR's `%` and `//`.
_FLOOR_OPS = {"remainder": "%", "floor_divide": "//"}
# Wrappers whose single sub-jaxpr is called with the equation's operands and gives its results.
INLINE_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr", "call")


def _is_fence(eqn) -> bool:
    """`inline_mgpu` that only emits a proxy fence (plgpu helpers' inline_ptx): no barrier."""
    fn = eqn.params.get("mgpu_fn")
    cells = getattr(fn, "__closure__", None) or ()
    texts = []
    for c in cells:
        try:
            v = c.cell_contents
        except ValueError:
            continue
        if isinstance(v, str):
            texts.append(v)
    return bool(texts) and all(t.strip().startswith("fence.") for t in texts)


_BAR_ASM = re.compile(r"\b(bar|barrier)\.(sync|arrive|\{operation\})(\.aligned)?")


def bar_operation(eqn) -> tuple[str, object, object, bool] | None:
    """A named barrier written as inline PTX through `plgpu.inline_mgpu` (`bar.sync id, n;` /
    `bar.arrive id, n;`, as JAX's GPU kernel helpers do) or Mosaic GPU's `warpgroup_barrier()`
    (`bar.sync warpgroup + 1, 128`): ("sync" or "arrive", id, thread count, aligned), where id
    is an int, "operand" (the equation's first operand) or "warpgroup"; None when it is neither
    or its operands cannot be read (the equation then stays unmodelled, BP190)."""
    fn = eqn.params.get("mgpu_fn")
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    if "warpgroup_barrier" in code.co_names:
        return ("sync", "warpgroup", 128, True)
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    m = _BAR_ASM.search(source)
    if m is None:
        return None
    cells = {}
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            cells[name] = cell.cell_contents
        except ValueError:
            pass
    operation = m.group(2) if m.group(2) != "{operation}" else cells.get("operation")
    aligned = m.group(1) == "bar" or m.group(3) is not None
    count = cells.get("num_threads")
    bar_id = cells.get("barrier_id", "operand" if eqn.invars else None)
    if operation not in ("sync", "arrive") or not isinstance(count, int) or \
            not (isinstance(bar_id, int) or bar_id == "operand"):
        return None
    return (operation, bar_id, count, aligned)


# Keyed by id() but holding the jaxpr itself: a freed jaxpr's id may be reused by another.
_SYNC_CACHE: dict[int, tuple[object, bool]] = {}


def _has_sync(jaxpr) -> bool:
    """Does a jaxpr contain any barrier or unmodelled synchronization (recursively)?"""
    from jax._src import core as jcore
    key = id(jaxpr)
    cached = _SYNC_CACHE.get(key)
    if cached is not None and cached[0] is jaxpr:
        return cached[1]
    found = False
    for eqn in jaxpr.eqns:
        n = eqn.primitive.name
        if n in MODELED or (n in UNMODELED and not (n == "inline_mgpu_p" and _is_fence(eqn))):
            found = True
            break
        for v in eqn.params.values():
            for s in (v if isinstance(v, (tuple, list)) else [v]):
                if isinstance(s, jcore.ClosedJaxpr):
                    s = s.jaxpr
                if isinstance(s, jcore.Jaxpr) and _has_sync(s):
                    found = True
                    break
            if found:
                break
        if found:
            break
    _SYNC_CACHE[key] = (jaxpr, found)
    return found



_PALLAS_PRIMITIVES: set[str] | None = None


def _pallas_primitives() -> set[str]:
    """Names of the primitives Pallas defines (core and Mosaic GPU), for the rule that an
    unknown one is reported as unmodelled rather than ignored."""
    global _PALLAS_PRIMITIVES
    if _PALLAS_PRIMITIVES is None:
        import importlib
        from jax._src import core as jcore
        names: set[str] = set()
        for mod in ("jax._src.pallas.primitives", "jax._src.pallas.mosaic_gpu.primitives",
                    "jax._src.pallas.mosaic_gpu.core"):
            try:
                module = importlib.import_module(mod)
            except ImportError:
                continue
            names |= {v.name for v in vars(module).values() if isinstance(v, jcore.Primitive)}
        _PALLAS_PRIMITIVES = names - {"run_scoped", "get", "swap", "axis_index"}
    return _PALLAS_PRIMITIVES


