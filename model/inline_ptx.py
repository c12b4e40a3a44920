"""Hand-written PTX in a kernel (Gluon's `inline_asm_elementwise`, CuTe's `llvm.inline_asm`):
opaque math unless it names an instruction that orders or signals, which a frontend cannot read
and so reports as BP190 at its line rather than dropping it."""

import re

# barriers, async copies and their completion, tensor-core queues, register reallocation, and
# atomics another thread may wait on. Fences and griddepcontrol (PDL) are left out: no thread
# of the block waits on them, and the frontends read their named ops as local too.
SYNC_PTX = re.compile(r"\b(mbarrier|barrier|bar|cp\.async|cp\.reduce\.async|tcgen05|wgmma|"
                      r"setmaxnreg|clusterlaunchcontrol|red|atom|st\.async)\b")


def synchronizing_instruction(asm: str) -> str | None:
    """The first synchronizing instruction `asm` names, or None."""
    m = SYNC_PTX.search(asm)
    return m.group(0) if m else None
