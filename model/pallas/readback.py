"""Global rows a kernel reads back while its TMA store of them may still be writing.

A TMA store (`copy_smem_to_gmem`) writes global memory until a full `wait_smem_to_gmem(0)`
retires it; `wait_read_only=True` or a count above 0 leaves its writes in flight. Global memory
is not modelled, so a read of a global ref (TMA load, cp.async, thread load) that a TMA store of
the kernel to the same ref may precede with no full wait since is BP190 at the read. Stores to a
peer device's memory (`remote_ref`) are left to the semaphores that order them.

Every global read leaves a marker while the kernel is translated (the store may come later in
the program text, before the read in a loop's next iteration); `settle_readbacks` follows the
program (both arms of a branch, a loop to its fixpoint), keeps the markers a pending store
reaches and drops the rest.
"""

from __future__ import annotations

from typing import Any

from ..ir import Const, Loc, Loop, Op, WarpRegion, When, map_ops
from .values import MemRef
from .. import primitives as K

READBACK = "readback#"     # the name of a read's marker starts so (data_control.is_site)


class ReadbackRules:
    """Mixed into the Translator: which TMA stores write which global refs, and their reads."""

    def _readback_init(self) -> None:
        self._stores: dict[str, int] = {}          # store marker -> id(global ref written)
        self._reads: dict[str, int] = {}           # read marker -> id(global ref read)
        self._full_waits: set[str] = set()         # markers of wait_smem_to_gmem(0)
        self._stored_at: dict[int, Loc] = {}       # id(global ref) -> a store's location

    def _marker(self, kind: str, loc: Loc, out: list) -> str:
        # markers, not the ops themselves: loop rules rebuild ops, and keep names
        name = f"{READBACK}{kind}#{len(self._stores) + len(self._reads) + len(self._full_waits)}"
        out.append(Op(K.UNMODELED, None, name=name, loc=loc))
        return name

    @staticmethod
    def _is_global(value: Any) -> bool:
        return isinstance(value, MemRef) and value.alloc is None

    def _readback_store(self, dst: Any, transforms, loc: Loc, out: list) -> None:
        peer = any(type(t).__name__ in ("PeerMemRef", "MulticastRef") for t in transforms or ())
        if self._is_global(dst) and not peer:
            self._stores[self._marker("store", loc, out)] = id(dst)
            self._stored_at.setdefault(id(dst), loc)

    def _readback_wait(self, count, read_only: bool, loc: Loc, out: list) -> None:
        if not read_only and isinstance(count, Const) and count.value == 0:
            self._full_waits.add(self._marker("wait", loc, out))

    def _readback_read(self, src: Any, loc: Loc, out: list) -> None:
        if self._is_global(src):
            self._reads[self._marker("read", loc, out)] = id(src)

    def _flow(self, body, pending: frozenset, hit: set) -> frozenset:
        for stmt in body:
            if isinstance(stmt, Op):
                if stmt.name in self._stores:
                    pending = pending | {self._stores[stmt.name]}
                elif stmt.name in self._full_waits:
                    pending = frozenset()
                elif stmt.name in self._reads and self._reads[stmt.name] in pending:
                    hit.add(stmt.name)
            elif isinstance(stmt, Loop):           # zero or more iterations
                seen = pending
                while True:
                    more = seen | self._flow(stmt.body, seen, hit)
                    if more == seen:
                        break
                    seen = more
                pending = seen
            elif isinstance(stmt, When):
                pending = self._flow(stmt.then, pending, hit) | \
                    self._flow(stmt.orelse, pending, hit)
            elif isinstance(stmt, WarpRegion):
                pending = self._flow(stmt.body, pending, hit)
        return pending

    def settle_readbacks(self, body) -> tuple:
        if not (self._reads or self._stores or self._full_waits):
            return tuple(body)
        hit: set[str] = set()
        self._flow(body, frozenset(), hit)

        def keep(op: Op):
            if op.kind != K.UNMODELED or not op.name.startswith(READBACK):
                return op
            if op.name not in hit:
                return ()
            store = self._stored_at[self._reads[op.name]]
            return Op(K.UNMODELED, None, loc=op.loc, name=(
                f"reads global memory the TMA store at line {store.line} writes, with no "
                "wait_smem_to_gmem(0) (without wait_read_only) in between: the store's writes "
                "may still be in flight, and global memory is not modelled (wait for the store "
                "with wait_smem_to_gmem(0) before reading the rows back)."))
        return map_ops(body, keep)
