"""The primitive families: one module per family of IR operation kinds, each declaring its
kinds (`kinds.Primitive`: operands, opcodes, compile hook, memory class, Pallas or PTX, rule
classes, reference, prover status, repair classes, DSL spelling) and the rows of the opcodes
it owns (`steps.Step`: step rule, partial-order reduction, symmetry, TLA+ action) in its
`EXTENSION`.

The kind names are constants exported here: frontends and engines build and test ops through
them, never through string literals. model/plugins.py installs the families (these first, then
hw_barriers.py and init_visibility.py, which own state of their own).
"""

from . import (clc, cp_async_arrive, mbarrier, memory, semaphores, tcgen05, tma, unmodeled,
               waits, warp_regions)
from .. import hw_barriers, init_visibility
from .clc import TRY_CLUSTER_CANCEL
from .cp_async_arrive import CP_ASYNC_ARRIVE
from .mbarrier import (ARRIVE, ARRIVE_DROP, ARRIVE_EXPECT_TX, BARRIER_ARRIVE, COMPLETE_TX,
                       EXPECT_TX)
from .memory import (COPY_SMEM_TO_GMEM, CP_ASYNC, READ, TCGEN05_LOAD, TCGEN05_STORE,
                     TCGEN05_WAIT_LOAD, TCGEN05_WAIT_STORE, WAIT_GMEM_TO_SMEM, WAIT_SMEM_TO_GMEM, WGMMA, WGMMA_WAIT, WRITE)
from .semaphores import SEMAPHORE_SIGNAL, SEMAPHORE_SIGNAL_PARALLEL, SEMAPHORE_WAIT
from .tcgen05 import TCGEN05_COMMIT_ARRIVE, TCGEN05_MMA
from .tma import ASYNC_STORE_SMEM, COPY_GMEM_TO_SMEM, TMA_LOAD
from .unmodeled import UNMODELED
from .waits import BARRIER_TEST, BARRIER_WAIT, WAIT_PARITY
from ..hw_barriers import BAR_ARRIVE, BAR_SYNC, CLUSTER_ARRIVE, CLUSTER_WAIT
from ..init_visibility import FENCE_MBARRIER_INIT, FENCE_PROXY_ASYNC, MBARRIER_INIT

# The families without state of their own, in installation order.
CORE_FAMILIES = (mbarrier, waits, tma, tcgen05, clc, cp_async_arrive, semaphores, memory,
                 unmodeled, warp_regions)
# Every family module, the two with state included.
FAMILIES = CORE_FAMILIES + (hw_barriers, init_visibility)
