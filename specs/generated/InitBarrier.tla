----------------------------- MODULE InitBarrier -----------------------------
(***************************************************************************)
(* mbarrier initialisation and who it is visible to, as a sibling of      *)
(* HwBarrier.tla: the TLA+ statement of model/init_visibility.py, field    *)
(* for field.  Kernels with barriers declared explicit_init=True extend   *)
(* this module; the others extend HwBarrier or MBarrier.                   *)
(*                                                                         *)
(* For explicit-init instance number e (InitOf[e] is the mbarrier):        *)
(*   initvis[e]    a bit per agent (1 = the init is visible to it), then  *)
(*                 one for the async proxy and one for the release at     *)
(*                 cluster scope (fence_mbarrier_init): bit k of the      *)
(*                 Python bitmask is element k + 1                         *)
(*   initrel[r]    for RelOf[r] = <<e, h>>: 1 + the first phase of         *)
(*                 hardware barrier h in which an agent that sees the      *)
(*                 init arrived (0: none)                                  *)
(*   initrelc[e]   the same at cluster scope, on the cluster barrier      *)
(*                 (<<>> when the kernel has no cluster barrier)           *)
(* An agent that passes a hardware wait for the phase it arrived in       *)
(* (hwseen) learns the inits released in that phase or before.  A thread  *)
(* at an operation on an instance whose init it does not see, or at a     *)
(* copy or commit whose arrival the async proxy would make without        *)
(* seeing the init, breaks BP147.                                          *)
(***************************************************************************)
EXTENDS HwBarrier

CONSTANTS
    InitOf,       \* InitOf[e]: the mbarrier instance of explicit-init entry e
    RelOf,        \* RelOf[r] = <<e, h>>: entry e's release field on hardware barrier h
    ClusterHw,    \* the cluster barrier's number (0: the kernel has none)
    RelaxedAt     \* <<a, pc>> of every barrier.cluster.arrive.relaxed (no release of its own)

VARIABLES initvis, initrel, initrelc

initvars == <<initvis, initrel, initrelc>>
initallvars == <<vars, hwvars, initvars>>
InitEntries == DOMAIN InitOf
NAgents == Len(Prog)
AsyncBit == NAgents + 1
FencedBit == NAgents + 2
EntryOf(i) == CHOOSE e \in InitEntries : InitOf[e] = i
Explicit == {InitOf[e] : e \in InitEntries}
Sees(e, k) == initvis[e][k] = 1
Set1(bits, ks) == [k \in DOMAIN bits |-> IF k \in ks THEN 1 ELSE bits[k]]

mbarrier_init(inst)  == Instr("mbarrier_init", <<>>, inst, 0, 0, <<>>, 0, 0, 0, <<>>)
fence_mbarrier_init  == Instr("fence_mbarrier_init", <<>>, 0, 0, 0, <<>>, 0, 0, 0, <<>>)
fence_proxy_async    == Instr("fence_proxy_async", <<>>, 0, 0, 0, <<>>, 0, 0, 0, <<>>)

-----------------------------------------------------------------------------
DoInit(a, i) ==
    /\ pc' = Advance(a)
    /\ initvis' = [initvis EXCEPT ![EntryOf(i.inst)] = Set1(@, {a})]
    /\ UNCHANGED <<mvars, hwvars, initrel, initrelc>>

\* Every init the agent sees becomes visible to the async proxy (and, for
\* fence.mbarrier_init, is released at cluster scope).
DoFence(a, bits) ==
    /\ pc' = Advance(a)
    /\ initvis' = [e \in InitEntries |-> IF Sees(e, a) THEN Set1(initvis[e], bits)
                                          ELSE initvis[e]]
    /\ UNCHANGED <<mvars, hwvars, initrel, initrelc>>

\* A hardware arrival that breaks no rule releases the inits the agent sees into the phase.
DoInitHwArrive(a, i) ==
    LET h == i.inst IN
    /\ DoHwArrive(a, i)
    /\ initrel' = [r \in DOMAIN RelOf |->
                     IF RelOf[r][2] = h /\ Sees(RelOf[r][1], a) /\ initrel[r] = 0 /\ Adds(i)
                     THEN hwphase[h] + 1 ELSE initrel[r]]
    /\ initrelc' = [e \in DOMAIN initrelc |->
                      IF h = ClusterHw /\ Sees(e, a) /\ initrelc[e] = 0 /\ Adds(i)
                         /\ (Sees(e, FencedBit) \/ <<a, pc[a]>> \notin RelaxedAt)
                      THEN hwphase[h] + 1 ELSE initrelc[e]]
    /\ UNCHANGED initvis

RelField(e, h) == {r \in DOMAIN RelOf : RelOf[r] = <<e, h>>}
Released(f, upto) == f > 0 /\ f <= upto
Learns(a, e, h, upto) ==
    IF InstBlock[InitOf[e]] = BlockOf[a]
    THEN \E r \in RelField(e, h) : Released(initrel[r], upto)
    ELSE h = ClusterHw /\ e \in DOMAIN initrelc /\ Released(initrelc[e], upto)

DoInitHwWait(a, i) ==
    LET h == i.inst
        upto == hwseen[i.pos] + 1 IN
    /\ DoHwWait(a, i)
    /\ initvis' = [e \in InitEntries |-> IF ~Sees(e, a) /\ Learns(a, e, h, upto)
                                          THEN Set1(initvis[e], {a}) ELSE initvis[e]]
    /\ UNCHANGED <<initrel, initrelc>>

InitThreadStep(a) ==
    /\ Running(a)
    /\ LET i == Cur(a) IN
       CASE i.op = "mbarrier_init"       -> DoInit(a, i)
         [] i.op = "fence_mbarrier_init" -> DoFence(a, {AsyncBit, FencedBit})
         [] i.op = "fence_proxy_async"   -> DoFence(a, {AsyncBit})
         [] i.op = "hw_arrive"           -> DoInitHwArrive(a, i)
         [] i.op = "hw_wait"             -> DoInitHwWait(a, i)
         [] OTHER                        -> Execute(a, i) /\ UNCHANGED <<hwvars, initvars>>

InitInit ==
    /\ HwInit
    /\ initvis = [e \in InitEntries |-> [k \in 1..(NAgents + 2) |-> 0]]
    /\ initrel = [r \in DOMAIN RelOf |-> 0]
    /\ initrelc = IF ClusterHw = 0 THEN <<>> ELSE [e \in InitEntries |-> 0]

InitProgress ==
    \/ \E a \in Agents : InitThreadStep(a)
    \/ AsyncStep /\ UNCHANGED <<hwvars, initvars>>

InitNext == InitProgress \/ (Terminated /\ UNCHANGED initallvars)
InitSpec == InitInit /\ [][InitNext]_initallvars

-----------------------------------------------------------------------------
(***************************************************************************)
(* BP147 init-not-visible.                                                  *)
(***************************************************************************)
Range(s) == {s[k] : k \in DOMAIN s}
ProxyOf(i) ==
    CASE i.op = "issue_async"   -> {Slots[i.slots[k]].inst : k \in DOMAIN i.slots}
      [] i.op = "issue_tcgen05" -> Range(ArrivalSets[i.set + 1])
      [] OTHER                  -> {}
MineOf(i) ==
    CASE i.op \in {"arrive", "arrive_drop", "expect_tx", "arrive_expect_tx",
                   "complete_tx"} -> Range(i.tgt)
      [] i.op \in WaitOps       -> {i.inst}
      [] i.op = "issue_async"   -> Range(i.tgt) \cup ProxyOf(i)
      [] i.op = "issue_tcgen05" -> ProxyOf(i)
      [] OTHER                  -> {}
InitHidden ==
    \E a \in Agents :
        /\ Running(a)
        /\ \/ \E x \in MineOf(Cur(a)) \cap Explicit : ~Sees(EntryOf(x), a)
           \/ \E x \in ProxyOf(Cur(a)) \cap Explicit : ~Sees(EntryOf(x), AsyncBit)
BP147_InitVisible == ~InitHidden

\* Deadlock flavours over this module's steps (as HwBarrier's).
InitStuck == ~Terminated /\ AllBlocked(BlockingOps \cup {"hw_wait"}) /\ ~ENABLED InitProgress
InitBP100_NoDeadlock   == ~(InitStuck /\ ~TxStuck /\ ~ExitStuck)
InitBP130_NoTxDeadlock == ~(InitStuck /\ TxStuck)
InitBP144_NoExitDeadlock == ~(InitStuck /\ ~TxStuck /\ ExitStuck)

\* semantics.py reports BP147 for a step that breaks no rule itself when the new state breaks
\* no rule of a lower code (BP101's parity state, BP102, BP146).
Exact_BP147 == [][~(/\ Counts("BP147") /\ InitHidden' /\ ~HwStepBreaks
                    /\ ~(Counts("BP101") /\ ParityAhead')
                    /\ ~(Counts("BP102") /\ LateJoin')
                    /\ ~(Counts("BP146") /\ PeerExited'))]_initallvars
\* Races (MBarrier's RaceCode) yield to BP147 too.
InitBreaksRule == HwBreaksRule \/ (Counts("BP147") /\ InitHidden')
InitExact_BP200 == [][~(RaceCode("BP200") /\ ~HwStepBreaks /\ ~InitBreaksRule)]_initallvars
InitExact_BP201 == [][~(RaceCode("BP201") /\ ~HwStepBreaks /\ ~InitBreaksRule)]_initallvars
=============================================================================
