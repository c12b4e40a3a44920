"""One row per MLIR op the CuTe frontend reads: thread indices, shared-memory pointers, copy
atoms and the synchronizing nvvm ops (mbarrier, named and cluster barriers, fences, TMA,
tcgen05 commits). A handler returns the op's results (None: Unknown) and records events.

`synchronizes(node)` says whether an op without a row could block a thread or complete a
barrier phase: those are BP190 at their line, never dropped.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .. import kinds, primitives as K
from ..inline_ptx import synchronizing_instruction
from . import cp_async, smem, tmem
from .layouts import cosize, layout_of
from .values import (WARP, Atom, Data, Lanes, Layout, Ptr, Tested, Unknown, elem_bytes, lift,
                     uniform)

# Ops that look like synchronization by name but only order memory or move data: no thread
# waits on them and no barrier phase depends on them.
LOCAL = frozenset({
    "nvvm.fence.proxy.acquire", "nvvm.fence.proxy.release", "nvvm.fence.sc.cluster",
    "nvvm.memory.barrier",
    "nvvm.wgmma.fence.aligned", "nvvm.tcgen05.fence", "nvvm.shfl.sync", "nvvm.vote.sync",
    "cute_nvgpu.arch.make_warp_uniform", "cf.assert",
    # TMEM allocation: one warp writes the columns' address to shared memory and the others
    # read it after a named barrier (which is read); allocation is a resource of the SM, not a
    # barrier phase
    "cute_nvgpu.arch.sm100.alloc_tmem", "cute_nvgpu.arch.sm100.dealloc_tmem",
    "cute_nvgpu.arch.sm100.relinquish_tmem_alloc_permit",
    "cute_nvgpu.arch.sm100.retrieve_tmem_ptr",
})
LOCAL_PREFIXES = ("arith.", "cute.", "math.", "vector.", "llvm.", "builtin.")
_SYNC_NAME = re.compile(r"mbarrier|barrier|cluster\.(arrive|wait)|tcgen05\.commit|\belect\b|"
                        r"clusterlaunchcontrol|cp\.async\.bulk\.tensor\.shared|arrive|wait|"
                        r"^cute_nvgpu\.arch\.|^cf\.|^func\.call|^gpu\.")


def synchronizes(node) -> bool:
    if node.name == "llvm.inline_asm":         # hand-written PTX: math, or a hidden barrier
        return synchronizing_instruction(str(node.attrs.get("asm_string", ""))) is not None
    if node.name == "cute.copy":
        return any("tma_load" in t for t in node.operand_types[:1])
    if node.name in RULES or node.name in LOCAL:
        return node.name in RULES and node.name not in _VALUES
    return bool(_SYNC_NAME.search(node.name))


def kernel_argument(index: int, type_text: str):
    if "tma_load" in type_text:
        return Atom("tma_load", type_text)
    return Unknown(f"kernel argument {index} ({type_text.split('<')[0]})")


# -- indices -----------------------------------------------------------------------------------
def _thread(axis: int):
    def rule(warp, node, active):
        bx, by, bz = warp.kernel.block_dim
        flat = [warp.warp * WARP + lane for lane in range(WARP)]
        per_axis = [[t % bx for t in flat], [(t // bx) % by for t in flat],
                    [t // (bx * by) for t in flat]][axis]
        return [Lanes(tuple(per_axis)) if len(set(per_axis)) > 1 else per_axis[0]]
    return rule


def _block_dim(axis: int):
    return lambda warp, node, active: [warp.kernel.block_dim[axis]]


_AXES = "xyz"


def _block_index(axis: int):
    """ctaid: the block this run is for (translate.py runs the warps once per block of a small
    grid), else Unknown: a grid axis whose size is not known or too large to enumerate."""
    def rule(warp, node, active):
        if warp.block_index is not None:
            return [warp.block_index[axis]]
        return [Unknown(f"the block index ({node.name.rsplit('.', 2)[-2]}.{_AXES[axis]}) of a "
                        f"grid of {warp.grid_why}")]
    return rule


def _grid_dim(axis: int):
    def rule(warp, node, active):
        grid = warp.kernel.grid_dim
        return [grid[axis]] if grid else [Unknown("the grid size, set at run time")]
    return rule


def _single_block_cluster(value):
    """A cluster register of a kernel launched without clusters (one block each), else Unknown."""
    def rule(warp, node, active):
        if warp.kernel.cluster_dim != (1, 1, 1):
            return [Unknown(f"{node.name}: the block's place in a cluster of several")]
        return value(warp, node, active)
    return rule


def _lane(warp, node, active):
    return [Lanes(tuple(range(WARP)))]


def _cluster_rank(warp, node, active):
    if warp.kernel.cluster_dim == (1, 1, 1):
        return [0]
    return [Unknown("the block's rank in its cluster")]


def _cluster_size(warp, node, active):
    x, y, z = warp.kernel.cluster_dim
    return [x * y * z]


def _elect(warp, node, active):
    first = min(active)
    return [Lanes(tuple(int(lane == first) for lane in range(WARP)))]


def _warp_uniform(warp, node, active):
    value = warp.get(node.operands[0])
    same = uniform(value, active)
    return [same if same is not None else value]


def _identity(warp, node, active):
    return [warp.get(node.operands[0])]


# -- shared memory pointers --------------------------------------------------------------------
def _alloca(warp, node, active):
    name = warp.allocations.get(id(node))
    if name is None:
        name = _buffer_name(node, len(warp.allocations))
        taken = set(warp.allocations.values())
        base, n = name, 1
        while name in taken:
            n += 1
            name = f"{base}{n}"
        warp.allocations[id(node)] = name
    space = "smem" if "smem" in node.types[0] else "rmem"
    size = elem_bytes(node.types[0]) or 1
    layout = layout_of(node.types[0])
    if space == "smem" and layout is not None:     # its bytes, for data accesses (smem.py)
        warp.allocations[("bytes", name)] = cosize(*layout) * size
    return [Ptr(name, 0, size, space)]


def _buffer_name(node, n: int) -> str:
    """The Python name the allocation is assigned to (`bars = smem.allocate_array(...)`)."""
    import linecache
    import os
    if node.loc is not None:
        text = linecache.getline(os.path.abspath(node.loc.file), node.loc.line)
        m = re.match(r"\s*(\w+)\s*(?::[^=]*)?=", text)
        if m:
            return m.group(1)
    return f"smem{n}"


def _get_iter(warp, node, active):
    value = warp.get(node.operands[0])
    if isinstance(value, Data):
        return [Data("the iterator of a tensor", value.buffer, value.offset, value.elem_bytes)]
    return [value if isinstance(value, Ptr) else Unknown("the iterator of a tensor")]


def _recast(warp, node, active):
    ptr = warp.get(node.operands[0])
    size = elem_bytes(node.types[0])
    if isinstance(ptr, Ptr) and size:
        recast = Ptr(ptr.buffer, ptr.offset, size, ptr.space)
        _label_field(warp, node, recast)
        return [recast]
    if isinstance(ptr, Data) and size:
        return [Data("a recast pointer", ptr.buffer, ptr.offset, size)]
    return [Unknown("a recast pointer")]


_FIELD = re.compile(r"\b(\w+)\.(\w+)\.(?:data_ptr\(\)|ptr\b)")


def _add_offset(warp, node, active):
    ptr, offset = warp.args(node)[:2]
    offset = uniform(offset, active) if isinstance(offset, (int, Lanes)) else offset
    if isinstance(ptr, Ptr) and isinstance(offset, int):
        moved = Ptr(ptr.buffer, ptr.offset + offset * ptr.elem_bytes, ptr.elem_bytes, ptr.space)
        _label_field(warp, node, moved)
        return [moved]
    data = smem.data_of(ptr)
    if data is not None and isinstance(offset, (int, Lanes)):   # a thread's own place in data
        moved = smem.moved(data.offset, offset, data.elem_bytes)
        return [Data("a pointer offset", data.buffer, moved, data.elem_bytes)]
    return [Unknown("a pointer offset")]


def _label_field(warp, node, ptr: Ptr) -> None:
    """`storage.full_bars.data_ptr()` on the op's line: the struct field the address is, so the
    barriers initialised from it are named after the field rather than a byte offset."""
    import linecache
    import os
    if node.loc is None:
        return
    m = _FIELD.search(linecache.getline(os.path.abspath(node.loc.file), node.loc.line))
    if not m or m.group(1) != ptr.buffer:
        return
    # A pipeline's `create(barrier_storage=storage.bars.data_ptr(), ...)` on one line also
    # offsets that address to each of its barriers there: the field starts at the lowest.
    same = [key for key, name in warp.allocations.items() if isinstance(key, tuple)
            and key[:2] == ("field", ptr.buffer) and name == m.group(2)]
    if any(key[2] <= ptr.offset for key in same):
        return
    for key in same:
        del warp.allocations[key]
    warp.allocations[("field", ptr.buffer, ptr.offset)] = m.group(2)


def _make_view(warp, node, active):
    ptr = warp.get(node.operands[0])
    if isinstance(ptr, Data):
        return [Data("a tensor view", ptr.buffer, ptr.offset,
                     elem_bytes(node.types[0]) or ptr.elem_bytes)]
    return [ptr if isinstance(ptr, Ptr) else Unknown("a tensor view")]


_TUPLE_TYPE = re.compile(r'(?:int_tuple|shape)<"([^"]*)">')


def _make_int_tuple(warp, node, active):
    """`cute.make_int_tuple`: its static text, with `?` filled by the operands in order."""
    m = _TUPLE_TYPE.search(node.types[0])
    if not m:
        return None
    operands = iter(warp.args(node))
    leaves = []
    for token in re.findall(r"\?(?:\{[^}]*\})?|-?\d+", m.group(1)):
        leaves.append(next(operands, Unknown("an int tuple")) if token.startswith("?")
                      else int(token))
    if len(leaves) == 1:
        return [leaves[0]]
    return [tuple(leaves)]


_STATIC = re.compile(r'^!cute\.(?:int_tuple|shape|stride|coord)<"([-\d(),\s]+)">$')


@lru_cache(maxsize=4096)       # the interpreter asks it of every op's types, every run
def static_value(type_text: str):
    """The value of a fully static CuTe int tuple type (`!cute.int_tuple<"(2,1,1)">`: the DSL
    folds what it knows at trace time into the type), else None (an int or a tuple: shared
    by every caller, never changed)."""
    m = _STATIC.match(type_text)
    if not m:
        return None
    text = m.group(1).replace(" ", "")
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"\((-?\d+,)*-?\d+\)", text):      # a flat tuple
        return tuple(int(x) for x in text[1:-1].split(","))
    return None


def _tuple_arith(fn):
    """cute.tuple_add / tuple_mul / ... on scalars (what index arithmetic makes of them)."""
    def rule(warp, node, active):
        static = static_value(node.types[0])
        if static is not None:
            return [static]
        a, b = warp.args(node)[:2]
        from .arith import binary
        if fn == "arith.floordivsi" and not (isinstance(a, int) and isinstance(b, int)
                                             and b and a % b == 0):
            # CuTe's shape division rounds other quotients its own way: not guessed
            return [Unknown(f"{node.name} of {a} by {b}")]
        return [binary(fn, a, b)]
    return rule


def _size(warp, node, active):
    """cute.size of an int tuple: the product of its leaves (of every mode)."""
    static = static_value(node.types[0])
    if static is not None:
        return [static]
    value = warp.get(node.operands[0])
    if isinstance(value, Layout):            # the size of a layout is the size of its shape
        value = value.shape
    mode = str(node.attrs.get("mode", "array<i32>")).replace(" ", "")
    leaves = value if isinstance(value, tuple) else (value,)
    if mode != "array<i32>" or not all(isinstance(v, int) for v in leaves):
        # a leaf from a kernel argument keeps its origin (a trip count from it, family.py)
        unknown = next((v for v in leaves if isinstance(v, Unknown)), None)
        if mode == "array<i32>" and unknown is not None and \
                unknown.why.startswith("kernel argument"):
            return [unknown]
        return [Unknown("cute.size of a dynamic shape")]
    total = 1
    for v in leaves:
        total *= v
    return [total]


_TILE_MODES = re.compile(r'tile<"\[([^"]*)\]">')


def _ceil_div(warp, node, active):
    """cute.ceil_div of an int tuple by a tile of static sizes (`[128:1;64:1]`, a mode each)
    or by a static int tuple: mode by mode; a leaf from a kernel argument stays that unknown
    (the tile count it gives is the argument's, read at each value the family binds)."""
    value = warp.get(node.operands[0])
    kind = node.operand_types[1] if len(node.operand_types) > 1 else ""
    tile = _TILE_MODES.search(kind)
    if tile:
        sizes = [re.match(r"\s*(\d+)", mode) for mode in tile.group(1).split(";")]
        if not all(sizes):
            return warp.other(node, active)
        divisors = [int(m.group(1)) for m in sizes]
    else:
        divisors = static_value(kind)
        if divisors is None:
            return warp.other(node, active)
        divisors = list(divisors) if isinstance(divisors, tuple) else [divisors]
    leaves = list(value) if isinstance(value, tuple) else [value]
    if len(divisors) > len(leaves) or any(d <= 0 for d in divisors):
        return warp.other(node, active)
    out = [lift(lambda x, d=d: -(-x // d), v) if k < len(divisors) and (d := divisors[k])
           else v for k, v in enumerate(leaves)]
    return [tuple(out) if isinstance(value, tuple) else out[0]]


def _make_layout(warp, node, active):
    """cute.make_layout: its shape (the first operand), for cute.size."""
    if not node.operands or not node.operand_types[0].startswith(("!cute.int_tuple",
                                                                   "!cute.shape")):
        return warp.other(node, active)
    return [Layout(warp.get(node.operands[0]))]


def _divisor(warp, node, active):
    """cute.fast_divmod.create_divisor: the divisor itself, as a number."""
    return [warp.get(node.operands[0])]


def _divmod(warp, node, active):
    from .arith import binary
    a, d = warp.args(node)[:2]
    return [binary("arith.floordivsi", a, d), binary("arith.remsi", a, d)]


def _leaves(warp, node, active):
    value = warp.get(node.operands[0])
    leaves = list(value) if isinstance(value, tuple) else [value]
    if len(leaves) != len(node.results):
        leaves = [Unknown(node.name)] * len(node.results)
    return [static_value(t) if static_value(t) is not None else v
            for t, v in zip(node.types, leaves)]


# -- copy atoms --------------------------------------------------------------------------------
def _make_exec_tma(warp, node, active):
    text = node.types[0]
    kind = "tma_load" if "tma_load" in text else "tma_store" if "tma_store" in text else "other"
    return [Atom(kind, text)]


def _set_value(warp, node, active):
    atom, value = warp.args(node)[:2]
    field = " ".join(str(v) for v in node.attrs.values())
    if isinstance(atom, Atom) and "tma_bar" in field:
        return [Atom(atom.kind, atom.text, value)]
    if isinstance(atom, Atom):
        return [Atom(atom.kind, atom.text + f" [{field}]", atom.barrier)]
    return None


_LAYOUT = re.compile(r'"([^"]*)">\s*$')


def _tile_bytes(type_text: str) -> int | None:
    """Bytes of a shared-memory tensor: its element size times the size of its layout."""
    size = elem_bytes(type_text.replace("!cute.memref<", "<"))
    m = _LAYOUT.search(type_text)
    if not size or not m or "?" in m.group(1).split(":")[0]:
        return None
    count = 1
    for n in re.findall(r"\d+", m.group(1).split(":")[0]):
        count *= int(n)
    return count * size


def _copy(warp, node, active):
    """`cute.copy(atom, src, dst)`: a TMA load completes its bytes on its atom's mbarrier;
    other copies only move data. The DSL lowers a TMA copy inside `elect.sync`: a warp that
    reaches it issues it once, whatever lanes are active."""
    atom = warp.get(node.operands[0])
    atom_type = node.operand_types[0] if node.operand_types else ""
    if "tma_store" in atom_type:
        smem.tma_store(warp, node, active)
        return None
    if tmem.copy(warp, node, active):
        return None
    if "tma_load" not in atom_type:
        if "async" in atom_type and smem.touches_memory(node):
            cp_async.copy(warp, node, active)     # written until its group is waited for
        elif smem.touches_memory(node):
            smem.simt_copy(warp, node, active)
        elif any(smem.data_of(v) is not None for v in warp.args(node)[1:]):
            smem.unread_access(warp, node, active)
        return None
    if not isinstance(atom, Atom) or not isinstance(atom.barrier, Ptr):
        warp.unmodeled(node, "a TMA load whose mbarrier is not known")
        return None
    if not re.search(r"num_cta = 1\b", atom_type) or \
            ("mcast" in atom.text and not _alone(warp)):
        warp.unmodeled(node, "a multicast TMA load (cluster)")
        return None
    nbytes = _tile_bytes(node.operand_types[2]) if len(node.operand_types) > 2 else None
    if nbytes is None:
        warp.unmodeled(node, "a TMA load whose byte count is not static")
        return None
    dst = smem.data_of(warp.get(node.operands[2]))
    writes = smem.footprint(warp, node, dst, node.operand_types[2], [min(active)]) \
        if dst is not None else ()
    if dst is None:
        smem.not_followed(warp, node, "a TMA load")
    warp.emit(K.TMA_LOAD, node, barrier=_key(atom.barrier), bytes=nbytes, writes=writes)
    return None


# -- mbarriers ---------------------------------------------------------------------------------
def _key(ptr: Ptr) -> tuple:
    return (ptr.buffer, ptr.offset)


def _alone(warp) -> bool:
    """Launched without clusters: a multicast can only reach the block itself."""
    return warp.kernel.cluster_dim == (1, 1, 1)


def _mapa(warp, node, active):
    """nvvm.mapa: a shared::cluster address of a block's variable. In a kernel launched
    without clusters rank 0 is the block itself (its own barrier); any other is not read."""
    ptr, rank = warp.args(node)[:2]
    rank = uniform(rank, active) if isinstance(rank, (int, Lanes)) else rank
    if _alone(warp) and rank == 0 and isinstance(ptr, Ptr):
        return [ptr]
    why = f"rank {rank}" if isinstance(rank, int) else "a rank not known"
    return [Unknown(f"another block's address (mapa to {why})")]


def _barrier(warp, node, active, index: int = 0):
    """The mbarrier an op addresses, or None after recording why it is not known."""
    ptr = warp.get(node.operands[index])
    operand_type = node.operand_types[index] if node.operand_types else ""
    if "ptr<7>" in operand_type and not isinstance(ptr, Ptr):
        why = f": {ptr.why}" if isinstance(ptr, Unknown) else ""
        warp.unmodeled(node, f"{node.name} on another block's barrier (shared::cluster{why})")
        return None
    if not isinstance(ptr, Ptr) or ptr.space != "smem":
        why = ptr.why if isinstance(ptr, Unknown) else type(ptr).__name__
        warp.unmodeled(node, f"{node.name} on an mbarrier address from {why}")
        return None
    return _key(ptr)


def _number(warp, node, active, index: int, what: str):
    value = warp.get(node.operands[index])
    same = uniform(value, active) if isinstance(value, (int, Lanes)) else None
    if not isinstance(same, int):
        why = value.why if isinstance(value, Unknown) else "lanes that disagree"
        warp.unmodeled(node, f"{node.name} with a {what} from {why}")
    return same


def _segments(node) -> list[int] | None:
    text = str(node.attrs.get("operandSegmentSizes", ""))
    m = re.search(r"array<i32:\s*([\d,\s]+)>", text)
    return [int(x) for x in m.group(1).split(",")] if m else None


def _mbarrier_init(warp, node, active):
    bar = _barrier(warp, node, active)
    count = _number(warp, node, active, 1, "count")
    if bar is not None and count is not None:
        # every active lane initialises the same barrier with the same count: one init
        warp.emit(K.MBARRIER_INIT, node, barrier=bar, count=count)


def _mbarrier_arrive(warp, node, active):
    segments = _segments(node)
    if segments and len(segments) > 2 and segments[2] and not _alone(warp):
        warp.unmodeled(node, "a multicast mbarrier arrive (cluster)")
        return None
    bar = _barrier(warp, node, active)
    has_count = segments[1] if segments else len(node.operands) > 1
    count = _number(warp, node, active, 1, "count") if has_count else 1
    if bar is not None and count is not None:
        warp.emit(K.ARRIVE, node, barrier=bar, count=count * len(active))
    return None


def _cp_async_arrive(warp, node, active):
    """cp.async.mbarrier.arrive.noinc: each executing thread's arrival, made asynchronously
    once its earlier cp.async copies are done, counts towards the phase (the barrier's count
    includes it). One asynchronous arrival per lane. Without .noinc the barrier's pending count
    is raised at issue and lowered by the arrival, which the IR has no operation for: BP190."""
    if not _flag(node.attrs.get("noinc")):
        warp.unmodeled(node, "cp.async.mbarrier.arrive without .noinc (its pending-count "
                             "increment at issue)")
        return None
    cp_async.arrive(warp, node)
    bar = _barrier(warp, node, active)
    if bar is not None:
        for _ in active:
            warp.emit(K.CP_ASYNC_ARRIVE, node, barrier=bar)
    return None


def _flag(attr) -> bool:
    return attr is not None and str(attr).strip().lower() not in ("false", "0")


def _mbarrier_arrive_expect_tx(warp, node, active):
    bar = _barrier(warp, node, active)
    nbytes = _number(warp, node, active, 1, "tx count")
    if bar is None or nbytes is None:
        return None
    if len(active) == 1:
        warp.emit(K.ARRIVE_EXPECT_TX, node, barrier=bar, bytes=nbytes)
    else:      # every lane: expect_tx then arrive, lane after lane
        warp.emit(K.EXPECT_TX, node, barrier=bar, bytes=nbytes * len(active))
        warp.emit(K.ARRIVE, node, barrier=bar, count=len(active))
    return None


def _mbarrier_expect_tx(warp, node, active):
    segments = _segments(node)
    if segments and len(segments) > 2 and segments[2] and not _alone(warp):
        warp.unmodeled(node, "a multicast expect_tx (cluster)")
        return None
    bar = _barrier(warp, node, active)
    nbytes = _number(warp, node, active, 1, "tx count")
    if bar is not None and nbytes is not None:
        warp.emit(K.EXPECT_TX, node, barrier=bar, bytes=nbytes * len(active))


def _mbarrier_wait_parity(warp, node, active):
    bar = _barrier(warp, node, active)
    parity = _number(warp, node, active, 1, "parity")
    if bar is not None and parity is not None:
        warp.emit(K.WAIT_PARITY, node, barrier=bar, parity=parity & 1)


def _mbarrier_wait_or_test(warp, node, active):
    """`nvvm.mbarrier.wait.parity`: with a result it is a try_wait / test_wait that does not
    block (cute.arch.mbarrier_try_wait, a pipeline's try_acquire): its answer is data, so what
    depends on it is BP190 where it decides synchronization. Without one it blocks."""
    if not node.results:
        return _mbarrier_wait_parity(warp, node, active)
    why = "the answer of a non-blocking mbarrier try_wait/test_wait"
    ptr = warp.get(node.operands[0])
    parity = warp.get(node.operands[1]) if len(node.operands) > 1 else None
    parity = uniform(parity, active) if isinstance(parity, (int, Lanes)) else None
    if isinstance(ptr, Ptr) and ptr.space == "smem" and isinstance(parity, int):
        return [Tested(why, _key(ptr), parity & 1, 0)]
    return [Unknown(why)]


def _tcgen05_commit(warp, node, active):
    if len(node.operands) > 1 and not _alone(warp):
        warp.unmodeled(node, "a multicast tcgen05.commit (cluster)")
        return None
    bar = _barrier(warp, node, active)
    if bar is not None:
        for _ in active:
            warp.emit(K.TCGEN05_COMMIT_ARRIVE, node, barrier=bar)


# -- hardware barriers and fences --------------------------------------------------------------
def _whole_warp(warp, node, active) -> bool:
    if len(active) != WARP:
        warp.unmodeled(node, f"{node.name} executed by {len(active)} lanes of a warp")
        return False
    return True


def _named_barrier(kind: str):
    def rule(warp, node, active):
        if not _whole_warp(warp, node, active):
            return None
        segments = _segments(node)
        if kind == K.BAR_ARRIVE:      # the optional barrierId first, then numberOfThreads
            two = len(node.operands) > 1
            id_at, count_at = (0, 1) if two else (None, 0)
        elif segments:
            id_at = 0 if segments[0] else None
            count_at = segments[0] if len(segments) > 1 and segments[1] else None
        else:
            id_at = 0 if node.operands else None
            count_at = 1 if len(node.operands) > 1 else None
        bar_id = _number(warp, node, active, id_at, "barrier id") if id_at is not None else 0
        count = _number(warp, node, active, count_at, "thread count") \
            if count_at is not None else None
        if bar_id is None or (count_at is not None and count is None):
            return None
        if count is None:          # PTX: every thread of the block takes part
            if kind != K.BAR_SYNC:
                warp.unmodeled(node, f"{node.name} without a thread count")
                return None
            if bar_id == 0:
                warp.emit(K.BAR_SYNC, node, bar_id=0, count=0, name="syncthreads")
            else:
                bx, by, bz = warp.kernel.block_dim
                warp.emit(K.BAR_SYNC, node, bar_id=bar_id, count=bx * by * bz)
        else:
            warp.emit(kind, node, bar_id=bar_id, count=count)
        return None
    return rule


def _cta_barrier(kind: str):
    """nvvm.barrier.cta.sync / .arrive (barrierId, threadCount): the spelling with an explicit
    `aligned` attribute (NamedBarrier.arrive_unaligned emits the unaligned arrive)."""
    def rule(warp, node, active):
        if not _whole_warp(warp, node, active):
            return None
        bar_id = _number(warp, node, active, 0, "barrier id")
        if len(node.operands) > 1:
            count = _number(warp, node, active, 1, "thread count")
        else:                      # sync without a count: every thread of the block
            bx, by, bz = warp.kernel.block_dim
            count = bx * by * bz
        if bar_id is not None and count is not None:
            warp.emit(kind, node, bar_id=bar_id, count=count,
                      aligned=bool(node.attrs.get("aligned", False)))
        return None
    return rule


def _plain(kind: str, name: str = ""):
    def rule(warp, node, active):
        # a cluster barrier counts every thread of the cluster: a part of a warp is BP190
        if kinds.lookup(kind).cluster_wide and not _whole_warp(warp, node, active):
            return None
        warp.emit(kind, node, name=name)
        return None
    return rule


def _fence_proxy(warp, node, active):
    kind = " ".join(str(v) for v in node.attrs.values())
    if "async" in kind and "shared" in kind or kind.strip() in ("#nvvm.proxy_kind<async>",):
        warp.emit(K.FENCE_PROXY_ASYNC, node)
    return None


RULES = {
    "nvvm.read.ptx.sreg.tid.x": _thread(0), "nvvm.read.ptx.sreg.tid.y": _thread(1),
    "nvvm.read.ptx.sreg.tid.z": _thread(2), "nvvm.read.ptx.sreg.ntid.x": _block_dim(0),
    "nvvm.read.ptx.sreg.ntid.y": _block_dim(1), "nvvm.read.ptx.sreg.ntid.z": _block_dim(2),
    "nvvm.read.ptx.sreg.laneid": _lane,
    **{f"nvvm.read.ptx.sreg.ctaid.{a}": _block_index(i) for i, a in enumerate(_AXES)},
    **{f"nvvm.read.ptx.sreg.nctaid.{a}": _grid_dim(i) for i, a in enumerate(_AXES)},
    **{f"nvvm.read.ptx.sreg.clusterid.{a}": _single_block_cluster(_block_index(i))
       for i, a in enumerate(_AXES)},
    **{f"nvvm.read.ptx.sreg.nclusterid.{a}": _single_block_cluster(_grid_dim(i))
       for i, a in enumerate(_AXES)},
    **{f"nvvm.read.ptx.sreg.cluster.ctaid.{a}": _single_block_cluster(lambda *_: [0])
       for a in _AXES},
    **{f"nvvm.read.ptx.sreg.cluster.nctaid.{a}": _single_block_cluster(lambda *_: [1])
       for a in _AXES},
    "nvvm.read.ptx.sreg.cluster.ctarank": _cluster_rank,
    "nvvm.read.ptx.sreg.cluster.nctarank": _cluster_size,
    "nvvm.elect.sync": _elect,
    "cute_nvgpu.arch.make_warp_uniform": _warp_uniform,
    "builtin.unrealized_conversion_cast": _identity,
    "cute.memref.alloca": _alloca, "cute.get_iter": _get_iter, "cute.recast_iter": _recast,
    "cute.add_offset": _add_offset, "cute.make_view": _make_view,
    "cute.make_int_tuple": _make_int_tuple, "cute.get_leaves": _leaves,
    "cute.get_scalars": _leaves,
    "cute.tuple_add": _tuple_arith("arith.addi"), "cute.tuple_sub": _tuple_arith("arith.subi"),
    "cute.tuple_mul": _tuple_arith("arith.muli"),
    "cute.tuple_div": _tuple_arith("arith.floordivsi"),
    "cute.size": _size, "cute.make_layout": _make_layout, "cute.ceil_div": _ceil_div,
    "cute.make_shape": _make_int_tuple, "cute.fast_divmod.create_divisor": _divisor, "cute.fast_divmod.compute": _divmod,
    "cute_nvgpu.atom.make_exec_tma": _make_exec_tma, "cute_nvgpu.atom.set_value": _set_value,
    "cute.copy": _copy,
    "nvvm.mapa": _mapa,
    "nvvm.mbarrier.init": _mbarrier_init,
    "nvvm.mbarrier.arrive": _mbarrier_arrive,
    "nvvm.cp.async.mbarrier.arrive": _cp_async_arrive,
    "nvvm.cp.async.mbarrier.arrive.shared": _cp_async_arrive,
    "nvvm.mbarrier.arrive.expect_tx": _mbarrier_arrive_expect_tx,
    "nvvm.mbarrier.expect_tx": _mbarrier_expect_tx,
    "nvvm.mbarrier.try_wait.parity": _mbarrier_wait_parity,
    "nvvm.mbarrier.wait.parity": _mbarrier_wait_or_test,
    "nvvm.tcgen05.commit": _tcgen05_commit,
    "nvvm.tcgen05.wait": tmem.wait,
    "cute_nvgpu.arch.sm100.retrieve_tmem_ptr": tmem.retrieve_ptr,
    "cute_nvgpu.arch.sm100.alloc_tmem": tmem.allocate,
    "nvvm.barrier": _named_barrier(K.BAR_SYNC), "nvvm.barrier0": _named_barrier(K.BAR_SYNC),
    "nvvm.barrier.arrive": _named_barrier(K.BAR_ARRIVE),
    "nvvm.barrier.cta.sync": _cta_barrier(K.BAR_SYNC),
    "nvvm.barrier.cta.arrive": _cta_barrier(K.BAR_ARRIVE),
    "nvvm.cluster.arrive": _plain(K.CLUSTER_ARRIVE),
    "nvvm.cluster.arrive.relaxed": _plain(K.CLUSTER_ARRIVE, "relaxed"),
    "nvvm.cluster.wait": _plain(K.CLUSTER_WAIT),
    "nvvm.fence.mbarrier.init": _plain(K.FENCE_MBARRIER_INIT),
    "nvvm.fence.proxy": _fence_proxy,
}

RULES.update(smem.RULES)
RULES.update(cp_async.RULES)

# Rows that only compute values (no event): an op among them never counts as synchronizing.
_VALUES = frozenset(name for name in RULES if name.startswith(
    ("nvvm.read.", "cute.", "cute_nvgpu.", "builtin.")) and name != "cute.copy") \
    | {"nvvm.elect.sync", "nvvm.mapa"} | smem.MEMORY_ONLY
