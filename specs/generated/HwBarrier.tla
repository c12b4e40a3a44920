------------------------------ MODULE HwBarrier ------------------------------
(***************************************************************************)
(* The hardware barriers that are not mbarriers, as a sibling of          *)
(* MBarrier.tla: named barriers (PTX bar.sync / bar.arrive, barrier.sync, *)
(* __syncthreads = bar.sync 0 with every thread of the block) and the     *)
(* cluster barrier (barrier.cluster.arrive / .wait).  It is the TLA+      *)
(* statement of model/hw_barriers.py and mirrors its state field for      *)
(* field.  It also states the rule that no thread reaches into the shared *)
(* memory of a block of its cluster whose threads have all exited         *)
(* (BP146), so every kernel with hardware barriers or with more than one  *)
(* block EXTENDS this module; the others extend MBarrier directly.        *)
(*                                                                         *)
(* One hardware barrier instance h holds                                   *)
(*   hwphase[h]    completions so far                                      *)
(*   hwarrived[h]  threads arrived in the open phase                       *)
(*   hwcount[h]    the open phase's thread count (0: no phase open); the   *)
(*                 first arrival of a phase fixes it                       *)
(*   hwsite[h]     the instruction (source index + 1) of the phase's first *)
(*                 blocking aligned bar.sync (0: none yet)                 *)
(* and hwseen[e] the phase an agent last arrived in, for its waits.        *)
(* A phase completes when hwarrived reaches hwcount: phase + 1, and the    *)
(* other fields reset.  Thread counts are hardware threads: a warpgroup    *)
(* arrives with 128, a warp of a warp region with 32.                      *)
(***************************************************************************)
EXTENDS MBarrier

CONSTANTS
    HwKind,        \* HwKind[h]: "named" or "cluster"
    HwBlock,       \* HwBlock[h]: the block of a named barrier (0 for the cluster barrier)
    HwSeenOf,      \* HwSeenOf[e] = <<a, h>>: entry e is the phase agent a last arrived in at h
    BlockOf,       \* BlockOf[a]: the block (numbered from 1) of agent a
    TopAgents,     \* the agents that are warpgroups (a warp's end is not its exit)
    InstBlock,     \* InstBlock[i]: the block of mbarrier instance i
    BlockThreads,  \* hardware threads of one block (the count of __syncthreads)
    RemoteSlots    \* slots some block issues into another block's barrier (multicast shares,
                   \* async_store_smem)

VARIABLES
    hwphase, hwarrived, hwcount, hwsite, hwseen

hwvars == <<hwphase, hwarrived, hwcount, hwsite, hwseen>>
allvars == <<vars, hwvars>>
HwInsts == DOMAIN HwKind

\* tgt = <<thread count of the phase, aligned site or 0, 1 if reached by part of a warp>>,
\* inst = the hardware barrier, pos = the agent's hwseen entry (0: it never waits on it),
\* amt = the threads this arrival stands for.
hw_arrive(h, threads, count, site, partial, pos) ==
    Instr("hw_arrive", <<count, site, partial>>, h, pos, threads, <<>>, 0, 0, 0, <<>>)
hw_wait(h, pos) == Instr("hw_wait", <<>>, h, pos, 0, <<>>, 0, 0, 0, <<>>)

-----------------------------------------------------------------------------
(***************************************************************************)
(* An arrival's checks, in semantics order: a broken rule stops the       *)
(* instruction where it stands, exactly like model/hw_barriers.py.        *)
(***************************************************************************)
Partial(i)    == i.tgt[3] = 1                                            \* BP141
CountClash(i) == ~Partial(i) /\ hwcount[i.inst] # 0 /\ hwcount[i.inst] # i.tgt[1]  \* BP142
CountSet(i)   == ~Partial(i) /\ ~CountClash(i)
SiteClash(i)  == CountSet(i) /\ i.tgt[2] # 0 /\ hwsite[i.inst] # 0
                 /\ hwsite[i.inst] # i.tgt[2]                             \* BP141
Applies(i)    == CountSet(i) /\ ~SiteClash(i)
Arrived(i)    == hwarrived[i.inst] + i.amt
TooMany(i)    == Applies(i) /\ Arrived(i) > i.tgt[1]                       \* BP142
Adds(i)       == Applies(i) /\ ~TooMany(i)
Completes(i)  == Adds(i) /\ Arrived(i) = i.tgt[1]

mvars == <<phase, pending, tx, expected, seen, inflight, queue>>

DoHwArrive(a, i) ==
    LET h == i.inst IN
    /\ pc' = Advance(a)
    /\ hwseen' = IF i.pos > 0 THEN [hwseen EXCEPT ![i.pos] = hwphase[h]] ELSE hwseen
    /\ hwphase' = IF Completes(i) THEN [hwphase EXCEPT ![h] = @ + 1] ELSE hwphase
    /\ hwarrived' = [hwarrived EXCEPT ![h] = IF Completes(i) THEN 0
                                             ELSE IF Adds(i) THEN Arrived(i) ELSE @]
    /\ hwcount' = [hwcount EXCEPT ![h] = IF Completes(i) THEN 0
                                         ELSE IF CountSet(i) THEN i.tgt[1] ELSE @]
    /\ hwsite' = [hwsite EXCEPT ![h] = IF Completes(i) THEN 0
                                       ELSE IF Applies(i) /\ i.tgt[2] # 0 THEN i.tgt[2]
                                       ELSE @]
    /\ UNCHANGED mvars

\* bar.sync's wait and barrier.cluster.wait: the phase the agent arrived in has completed.
DoHwWait(a, i) ==
    /\ hwphase[i.inst] > hwseen[i.pos]
    /\ pc' = Advance(a)
    /\ UNCHANGED <<mvars, hwvars>>

HwArrive(a) == At(a, "hw_arrive") /\ DoHwArrive(a, Cur(a))
HwWait(a)   == At(a, "hw_wait")   /\ DoHwWait(a, Cur(a))

\* One CASE on the opcode, as MBarrier's ThreadStep (which handles the mbarrier opcodes).
HwThreadStep(a) ==
    /\ Running(a)
    /\ LET i == Cur(a) IN
       CASE i.op = "hw_arrive" -> DoHwArrive(a, i)
         [] i.op = "hw_wait"   -> DoHwWait(a, i)
         [] OTHER              -> Execute(a, i) /\ UNCHANGED hwvars

-----------------------------------------------------------------------------
HwInit ==
    /\ Init
    /\ hwphase = [h \in HwInsts |-> 0]
    /\ hwarrived = [h \in HwInsts |-> 0]
    /\ hwcount = [h \in HwInsts |-> 0]
    /\ hwsite = [h \in HwInsts |-> 0]
    /\ hwseen = [e \in DOMAIN HwSeenOf |-> -1]

HwProgress ==
    \/ \E a \in Agents : HwThreadStep(a)
    \/ AsyncStep /\ UNCHANGED hwvars

\* A finished kernel stutters; any other state without a successor is a deadlock.
HwNext == HwProgress \/ (Terminated /\ UNCHANGED allvars)

HwSpec == HwInit /\ [][HwNext]_allvars

\* The same specification with the named thread actions (the same state graph; slower).
HwNamedProgress ==
    \/ NamedProgress /\ UNCHANGED hwvars
    \/ \E a \in Agents : HwArrive(a) \/ HwWait(a)
HwNamedSpec == HwInit /\ [][HwNamedProgress \/ (Terminated /\ UNCHANGED allvars)]_allvars

-----------------------------------------------------------------------------
(***************************************************************************)
(* The rules of the hardware barriers.                                     *)
(***************************************************************************)
HwStepOf(a) == At(a, "hw_arrive") /\ pc'[a] = pc[a] + 1
\* The agents with a hw_arrive in their program (a constant: TLC evaluates it once).
HwArrivers == {a \in Agents : \E p \in DOMAIN Prog[a] : Prog[a][p].op = "hw_arrive"}

\* BP141 divergent-barrier: part of a warp arrives (lanes split across instructions), or a
\* blocking aligned bar.sync of an open phase is another instruction than its first.
Breaks141 == \E a \in HwArrivers : HwStepOf(a) /\ (Partial(Cur(a)) \/ SiteClash(Cur(a)))
\* BP142 barrier-count-mismatch: another count than the open phase's, or more threads.
Breaks142 == \E a \in HwArrivers : HwStepOf(a) /\ (CountClash(Cur(a)) \/ TooMany(Cur(a)))

BP141_NoDivergentBarrier == [][~Breaks141]_allvars
BP142_CountsAgree        == [][~Breaks142]_allvars

\* BP146 peer-exited: a thread is at an operation on an mbarrier of another block of its
\* cluster whose threads have all exited.
BlockGone(b) == \A x \in Agents : BlockOf[x] = b => ~Running(x)
TouchesOf(i) ==
    CASE i.op \in {"arrive", "arrive_drop", "expect_tx", "arrive_expect_tx",
                   "complete_tx"} -> {i.tgt[k] : k \in DOMAIN i.tgt}
      [] i.op = "issue_async" -> {i.tgt[k] : k \in DOMAIN i.tgt}
                                 \cup {Slots[i.slots[k]].inst : k \in DOMAIN i.slots}
      [] OTHER -> {}
Touches(a) == TouchesOf(Cur(a))
\* The agents with an operation on another block's mbarrier (a constant).
RemoteTouchers ==
    {a \in Agents : \E p \in DOMAIN Prog[a] :
                        \E i \in TouchesOf(Prog[a][p]) : InstBlock[i] # BlockOf[a]}
\* Or an asynchronous delivery from another block is still in flight into an exited block.
QueuedRemote(q) ==
    \E k \in DOMAIN queue[q] : \E j \in DOMAIN ArrivalSets[queue[q][k] + 1] :
        LET i == ArrivalSets[queue[q][k] + 1][j]
        IN InstBlock[i] # BlockOf[QueueAgents[q]] /\ BlockGone(InstBlock[i])
PeerExited ==
    \/ \E a \in RemoteTouchers :
        /\ Running(a)
        /\ \E i \in Touches(a) : InstBlock[i] # BlockOf[a] /\ BlockGone(InstBlock[i])
    \/ /\ ~Terminated     \* at the kernel's exit, an in-flight delivery is BP105
       /\ \/ \E k \in RemoteSlots : inflight[k] > 0 /\ BlockGone(InstBlock[Slots[k].inst])
          \/ \E q \in DOMAIN QueueAgents : QueuedRemote(q)
BP146_NoPeerExited == ~PeerExited

\* Deadlock, in the three flavours semantics.py names: BP130 (a phase with all arrivals but
\* not all bytes), BP144 (a warpgroup counted in a named barrier's open phase has exited), BP100.
HwStuck == ~Terminated /\ AllBlocked(BlockingOps \cup {"hw_wait"}) /\ ~ENABLED HwProgress
ArrivesOn(o, h) == \E k \in DOMAIN Prog[o] : Prog[o][k].op = "hw_arrive" /\ Prog[o][k].inst = h
ExitStuck ==
    \E a \in Agents :
        /\ At(a, "hw_wait")
        /\ LET h == Cur(a).inst IN
           /\ HwKind[h] = "named"
           /\ \E o \in TopAgents :
                 /\ ~Running(o)
                 /\ BlockOf[o] = HwBlock[h]
                 /\ hwcount[h] = BlockThreads \/ ArrivesOn(o, h)

HwBP100_NoDeadlock   == ~(HwStuck /\ ~TxStuck /\ ~ExitStuck)
HwBP130_NoTxDeadlock == ~(HwStuck /\ TxStuck)
BP144_NoExitDeadlock == ~(HwStuck /\ ~TxStuck /\ ExitStuck)

\* Which rule semantics.py reports for a step (see MBarrier's Exact_*): a step's own break
\* first, then the lowest code the new state breaks.
HwStepBreaks ==
    \/ StepBreaks
    \/ Counts("BP141") /\ Breaks141
    \/ Counts("BP142") /\ Breaks142
Exact_BP141 == [][~(Counts("BP141") /\ Breaks141)]_allvars
Exact_BP142 == [][~(Counts("BP142") /\ Breaks142)]_allvars
Exact_BP146 == [][~(Counts("BP146") /\ PeerExited' /\ ~HwStepBreaks
                    /\ ~(Counts("BP102") /\ LateJoin'))]_allvars
\* Races (MBarrier's RaceCode) yield to these rules too.
HwBreaksRule == BreaksBarrierRule \/ (Counts("BP146") /\ PeerExited')
HwExact_BP200 == [][~(RaceCode("BP200") /\ ~HwStepBreaks /\ ~HwBreaksRule)]_allvars
HwExact_BP201 == [][~(RaceCode("BP201") /\ ~HwStepBreaks /\ ~HwBreaksRule)]_allvars
=============================================================================
