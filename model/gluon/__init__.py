"""The Gluon frontend: compile a `@gluon.jit` kernel to TTGIR on the CPU and read its barrier
protocol as IR.

- launch.py: `Launch` (a kernel with its arguments and target) and `tensor_desc`, no Triton
  import, so the loader can recognise a declared launch in any file;
- compile.py: Triton's Gluon code generator and `gluon_to_ttgir` for an explicit GPUTarget;
- ttgir.py: the printed TTGIR and its locations as a tree of operations;
- translate.py: the translator, its barrier rules and the table from TTGIR op to handler;
- control.py: warp_specialize partitions, scf.for loops, scf.if branches;
- carries.py: closed forms of loop-carried slot and phase counters;
- arith.py: integer ops as folding expressions, program ids as parameters;
- memory.py: shared/tensor memory buffers and the accesses checked for races;
- values.py: allocations, memory descriptors, and `Unread` (an operand it cannot follow).

An op the frontend does not model becomes an `unmodeled` op (BP190) at the kernel's source line.
"""

from __future__ import annotations

import inspect

from ..built import built_once, source_file
from ..ir import Kernel, Loc, ModelError
from .launch import Launch, TensorDesc, is_launch, tensor_desc

__all__ = ["Launch", "TensorDesc", "tensor_desc", "is_launch", "load", "ttgir_of"]


def ttgir_of(launch: Launch) -> str:
    from .compile import to_ttgir
    return to_ttgir(launch)


def load(launch: Launch, name: str | None = None, expect: str | None = None,
         text: str | None = None) -> Kernel:
    """The IR of a declared launch (`text`: its TTGIR, when already compiled); compiled once
    per process while the files of its kernel and of its declaration are unchanged."""
    if text is None:
        fn = getattr(launch.kernel, "fn", launch.kernel)
        files = (source_file(fn), launch.site[0] if launch.site else None)
        # the launch is frozen but its `args` dict is not: what it holds now is in the key
        arguments = (name, expect, repr(sorted(launch.args.items(), key=lambda kv: str(kv[0]))))
        [kernel] = built_once(launch, arguments, lambda: [_loaded(launch, name, expect)], files)
        return kernel
    return _loaded(launch, name, expect, text)


def _loaded(launch: Launch, name: str | None, expect: str | None,
            text: str | None = None) -> Kernel:
    from .translate import Translator
    from .ttgir import parse
    try:
        text = text if text is not None else ttgir_of(launch)
    except ModelError as err:
        if err.loc is None and launch.site is not None:    # an argument of the launch
            err.loc = Loc(*launch.site)
        raise
    fn = getattr(launch.kernel, "fn", launch.kernel)
    try:
        loc = Loc(inspect.getsourcefile(fn) or "<gluon>", inspect.getsourcelines(fn)[1])
    except (OSError, TypeError):
        loc = Loc("<gluon>", 0)
    name = name or launch.name or getattr(fn, "__name__", "kernel")
    return Translator(parse(text), name, loc, expect, launch).kernel()
