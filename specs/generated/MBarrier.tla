------------------------------ MODULE MBarrier ------------------------------
(***************************************************************************)
(* The barrier semantics of barrierproof (shared/SEMANTICS.md), as a TLA+  *)
(* library module.  It is the TLA+ statement of model/semantics.py and     *)
(* mirrors its compact state variable for variable, so TLC and the         *)
(* explicit explorer search the same state graph: the same distinct-state *)
(* count, by construction (tests/test_tla.py checks it on every example).  *)
(*                                                                         *)
(* A kernel is compiled (model/semantics.py: System) for concrete          *)
(* parameters and one cluster of blocks into                               *)
(*   - agents: every Pallas thread (warpgroup) of every block, and every   *)
(*     warp of a WarpMesh region, each running a straight-line program;   *)
(*   - barrier instances: every mbarrier of every allocation in every      *)
(*     block (a ClusterBarrier has one instance per block, and an arrival  *)
(*     fans out to the instances of the blocks that differ from the        *)
(*     arriver's along exactly one collective axis: that fan-out is        *)
(*     resolved at compile time into the instruction's target list);      *)
(*   - asynchronous agents: in-flight TMA landings and try_cluster_cancel  *)
(*     arrivals, counted per (instance, effect) "slot", and one in-order   *)
(*     tcgen05 queue per issuing thread.                                   *)
(*                                                                         *)
(* A generated module (specs/generated/*.tla, from checker/engines/tla.py) *)
(* EXTENDS this one and only supplies the constants: the programs, the     *)
(* arrival counts, the slots, the participants.  Everything that says what *)
(* a barrier does is here.                                                 *)
(*                                                                         *)
(* Indexing: agents, instances, slots, seen entries and queues are         *)
(* numbered from 1 (TLA+ sequences); the VALUES of the state are exactly   *)
(* those of semantics.py: program counters count from 0, seen is -1 before *)
(* the first wait, queue entries are semantics.py's arrival-set indices.   *)
(***************************************************************************)
EXTENDS Integers, Sequences

CONSTANTS
    Prog,          \* Prog[a]: the unrolled program of agent a, a sequence of instructions
    ExpectedInit,  \* ExpectedInit[i]: the arrival count of barrier instance i
    SeenOf,        \* SeenOf[e] = <<a, i, p>>: seen entry e records agent a's waits on instance i;
                   \* p is the pc of a's last wait on i
    Participants,  \* Participants[i]: the seen entries of instance i (agents that wait on it)
    Slots,         \* Slots[k] = [effect |-> "complete_tx" or "arrive", inst |-> i, amount |-> n]
    ArrivalSets,   \* ArrivalSets[s + 1]: instances a tcgen05 op arrives on (s: semantics index)
    QueueAgents,   \* QueueAgents[q]: the agent whose tcgen05 queue is queue[q]
    Unwaited,      \* instances of barriers used only through Pallas operations that no thread
                   \* waits on (Pallas rule 2 holds them to no completion at all)
    ExitLive,      \* agents whose program ends with an asynchronous shared-memory access no
                   \* wait of theirs retired (a TMA store reading its source, a WGMMA, a cp.async)
    Races,         \* Races[n] = <<code, x, y>>: holders x and y make conflicting accesses (a
                   \* race of code "BP200" or "BP201") when both are live; see Live below
    MaxTx,         \* hardware range of the tx-count: |tx| <= MaxTx (2^20 - 1)
    Ignored        \* diagnostic codes the user ignores ({"BP104"}, ...): used only by the
                   \* Exact_* properties, which mirror which rule semantics.py reports

VARIABLES
    pc,        \* pc[a]: index (from 0) of agent a's next instruction; Len(Prog[a]) when done
    phase,     \* phase[i]: completions of instance i so far (the hardware keeps its parity)
    pending,   \* pending[i]: arrivals still missing in the current phase
    tx,        \* tx[i]: outstanding transaction bytes (signed: a copy may land first)
    expected,  \* expected[i]: the arrival count restored at each completion (arrive_drop lowers it)
    seen,      \* seen[e]: completions agent SeenOf[e][1] had observed at its last successful
               \*          wait on instance SeenOf[e][2]; -1 before its first wait
    inflight,  \* inflight[k]: deliveries of slot k not yet made (TMA landings, async arrivals)
    queue      \* queue[q]: tcgen05 ops of agent QueueAgents[q] in flight, oldest first

vars == <<pc, phase, pending, tx, expected, seen, inflight, queue>>

Agents == DOMAIN Prog
Insts  == DOMAIN ExpectedInit
Max(x, y) == IF x >= y THEN x ELSE y
Abs(x) == IF x < 0 THEN -x ELSE x

-----------------------------------------------------------------------------
(***************************************************************************)
(* Instructions.  Every instruction is a record with the same fields so    *)
(* that programs are plain sequences; a generated module writes them with  *)
(* these constructors, one per opcode of semantics.py.                     *)
(*   tgt:   the instances an arrival goes to (ClusterBarrier fan-out and   *)
(*          multicast already resolved), in semantics.py's order           *)
(*   inst:  the instance a wait waits on;  pos: its seen entry             *)
(*   amt:   arrival count, tx bytes, the parity of wait_parity, or the     *)
(*          completion a wait_phase means (its phase + 1)                  *)
(*   slots: the in-flight slots an asynchronous issue adds one to          *)
(*   set:   the arrival set (semantics index) a tcgen05 op arrives on      *)
(*   parent, at: a warp waits until agent `parent` has passed pc `at`      *)
(*   joins: <<warp, end pc>> pairs a warpgroup waits for at a join         *)
(***************************************************************************)
Instr(op, tgt, inst, pos, amt, slots, set, parent, at, joins) ==
    [op |-> op, tgt |-> tgt, inst |-> inst, pos |-> pos, amt |-> amt, slots |-> slots,
     set |-> set, parent |-> parent, at |-> at, joins |-> joins]

arrive(tgt, count)        == Instr("arrive", tgt, 0, 0, count, <<>>, 0, 0, 0, <<>>)
arrive_drop(tgt)          == Instr("arrive_drop", tgt, 0, 0, 1, <<>>, 0, 0, 0, <<>>)
expect_tx(tgt, bytes)     == Instr("expect_tx", tgt, 0, 0, bytes, <<>>, 0, 0, 0, <<>>)
arrive_expect_tx(tgt, bytes) == Instr("arrive_expect_tx", tgt, 0, 0, bytes, <<>>, 0, 0, 0, <<>>)
complete_tx(tgt, bytes)   == Instr("complete_tx", tgt, 0, 0, bytes, <<>>, 0, 0, 0, <<>>)
wait(inst, pos)           == Instr("wait", <<>>, inst, pos, 0, <<>>, 0, 0, 0, <<>>)
barrier_test(inst, pos)   == Instr("barrier_test", <<>>, inst, pos, 0, <<>>, 0, 0, 0, <<>>)
wait_parity(inst, parity, pos) == Instr("wait_parity", <<>>, inst, pos, parity, <<>>, 0, 0, 0, <<>>)
wait_phase(inst, completion, pos) == Instr("wait_phase", <<>>, inst, pos, completion, <<>>, 0, 0, 0, <<>>)
\* Global semaphores: a counter kept in the phase variable of its instance (it has no
\* arrivals).  sem_wait's `pos` field holds 1 when the wait decrements, else 0.
sem_signal(inst, inc)     == Instr("sem_signal", <<>>, inst, 0, inc, <<>>, 0, 0, 0, <<>>)
sem_wait(inst, value, dec) == Instr("sem_wait", <<>>, inst, dec, value, <<>>, 0, 0, 0, <<>>)
\* semaphore_signal_parallel to different semaphores: one signal in flight in each slot (they
\* land in any order); the thread goes on once they all have.
sem_signal_set(slots)     == Instr("sem_signal_set", <<>>, 0, 0, 0, slots, 0, 0, 0, <<>>)
signals_landed(slots)     == Instr("signals_landed", <<>>, 0, 0, 0, slots, 0, 0, 0, <<>>)
\* A TMA copy (or try_cluster_cancel): the issuer's arrive.expect_tx(bytes) on `tgt` (empty
\* for a bare tma_load or an async arrival), then one more delivery in flight in each slot.
issue_async(tgt, bytes, slots) == Instr("issue_async", tgt, 0, 0, bytes, slots, 0, 0, 0, <<>>)
issue_tcgen05(set)        == Instr("issue_tcgen05", <<>>, 0, 0, 0, <<>>, set, 0, 0, <<>>)
fork                      == Instr("fork", <<>>, 0, 0, 0, <<>>, 0, 0, 0, <<>>)
await_fork(parent, at)    == Instr("await_fork", <<>>, 0, 0, 0, <<>>, 0, parent, at, <<>>)
join(joins)               == Instr("join", <<>>, 0, 0, 0, <<>>, 0, 0, 0, joins)
unmodeled                 == Instr("unmodeled", <<>>, 0, 0, 0, <<>>, 0, 0, 0, <<>>)

\* A slot: what one in-flight delivery does when it happens.
complete_tx_slot(inst, bytes) == [effect |-> "complete_tx", inst |-> inst, amount |-> bytes]
arrive_slot(inst)             == [effect |-> "arrive", inst |-> inst, amount |-> 1]
signal_slot(inst, inc)        == [effect |-> "signal", inst |-> inst, amount |-> inc]

Running(a) == pc[a] < Len(Prog[a])
Cur(a) == Prog[a][pc[a] + 1]
\* Agent a has not finished and its next instruction is an `op`.
At(a, op) == Running(a) /\ Cur(a).op = op
Terminated == \A a \in Agents : ~Running(a)

WaitOps == {"wait", "wait_parity", "wait_phase", "barrier_test"}
ParityWaitOps == {"wait_parity", "wait_phase"}

\* Seen entry e belongs to a Pallas waiter: its agent waits on the instance with barrier_wait
\* somewhere. The Pallas rules (BP101 at a completion, BP103 at exit) hold only such entries
\* to every completion; parity waits follow the hardware (Meant, below).
\* (PallasEntries is a constant: TLC evaluates it once, not at every completion.)
PallasEntries ==
    {e \in DOMAIN SeenOf :
        \E p \in DOMAIN Prog[SeenOf[e][1]] :
            /\ Prog[SeenOf[e][1]][p].op \in {"wait", "barrier_test"}
            /\ Prog[SeenOf[e][1]][p].inst = SeenOf[e][2]}
PallasEntry(e) == e \in PallasEntries

\* The completion a wait for a stated phase means (steps.py: intended_completion). A bare
\* wait_parity states none: it is judged by what it returns after on different behaviours
\* (model/parity.py), which one behaviour cannot show, so no rule here reads Meant for it
\* and TLC leaves BP101 open for kernels with bare parity waits (checker/rules.py).
Meant(instr, s) ==
    IF instr.op = "wait_phase" THEN instr.amt
    ELSE IF (s - instr.amt) % 2 = 0 THEN s + 1 ELSE s + 2

-----------------------------------------------------------------------------
(***************************************************************************)
(* One barrier instance.                                                   *)
(*   init(count): phase 0, pending = expected = count, tx = 0.             *)
(*   arrive(c): pending -= c.  expect_tx(n): tx += n.  complete_tx(n):     *)
(*   tx -= n.  arrive_drop: expected -= 1, then arrive(1).                 *)
(*   The phase completes when pending = 0 and tx = 0: phase += 1 and       *)
(*   pending = expected, atomically.                                       *)
(* The step rules below work on a record b of one instance's four fields   *)
(* plus `bad`, set when the step breaks a rule (BP101 or BP121); after     *)
(* that the instruction does nothing more, exactly like semantics.py.      *)
(***************************************************************************)

\* Agent w is "joined" to instance i: it has waited on i before, or sits at a wait on i now.
\* npc: the program counters after the step (the mover has already advanced).
WaitsOn(npc, w, i) ==
    /\ npc[w] < Len(Prog[w])
    /\ Prog[w][npc[w] + 1].op \in WaitOps
    /\ Prog[w][npc[w] + 1].inst = i

\* BP101 phase-overrun: completion number `completed` + 1 of instance i happens while a
\* participant that has joined i (waited on it, or sits at a wait on it now) and will wait on it
\* again has observed fewer than `completed` completions: its next wait aliases parity. (A
\* participant that will never wait again is judged at exit, BP103; one that has not started
\* waiting, when it starts, BP102.)
Overrun(i, completed, npc) ==
    \E k \in DOMAIN Participants[i] :
        LET e == Participants[i][k]
            w == SeenOf[e][1]
        IN  /\ PallasEntry(e)
            /\ Max(seen[e], 0) < completed
            /\ npc[w] <= SeenOf[e][3]
            /\ seen[e] >= 0 \/ WaitsOn(npc, w, i)

MaybeComplete(b, i, npc) ==
    IF b.pending # 0 \/ b.tx # 0 THEN b
    ELSE [b EXCEPT !.phase = b.phase + 1, !.pending = b.expected,
                   !.bad = Overrun(i, b.phase, npc)]

ArriveOn(b, i, count, npc) ==
    IF b.pending - count < 0
    THEN [b EXCEPT !.pending = b.pending - count, !.bad = TRUE]       \* BP121: too many arrivals
    ELSE MaybeComplete([b EXCEPT !.pending = b.pending - count], i, npc)

TxOn(b, i, delta, npc) ==
    IF Abs(b.tx + delta) > MaxTx
    THEN [b EXCEPT !.tx = b.tx + delta, !.bad = TRUE]                 \* BP121: tx out of range
    ELSE MaybeComplete([b EXCEPT !.tx = b.tx + delta], i, npc)

DropOn(b) ==
    IF b.expected - 1 < 0
    THEN [b EXCEPT !.expected = b.expected - 1, !.bad = TRUE]         \* BP121: count below zero
    ELSE [b EXCEPT !.expected = b.expected - 1]

\* Micro-steps: <<"arrive", count>>, <<"tx", delta>>, <<"drop", 0>>, applied in order to one
\* instance.  Once a rule is broken (b.bad) the instruction's remaining arrivals and tx
\* changes are skipped, on this instance and on the later targets; an arrive_drop still
\* lowers every target's count (semantics.py: `violation = violation or ...`).
RECURSIVE Micro(_, _, _, _)
Micro(b, i, steps, npc) ==
    IF steps = <<>> THEN b
    ELSE LET s == Head(steps)
             nb == CASE s[1] = "drop"   -> DropOn(b)
                     [] b.bad           -> b
                     [] s[1] = "arrive" -> ArriveOn(b, i, s[2], npc)
                     [] s[1] = "tx"     -> TxOn(b, i, s[2], npc)
         IN Micro(nb, i, Tail(steps), npc)

\* The barrier arrays as one record, to thread through a multi-target instruction.
Bars == [ph |-> phase, pe |-> pending, tx |-> tx, ex |-> expected, bad |-> FALSE]

\* Apply `steps` to every instance of `tgts` in turn.
RECURSIVE OnTargets(_, _, _, _)
OnTargets(acc, tgts, steps, npc) ==
    IF tgts = <<>> THEN acc
    ELSE LET i == Head(tgts)
             b == Micro([phase |-> acc.ph[i], pending |-> acc.pe[i], tx |-> acc.tx[i],
                         expected |-> acc.ex[i], bad |-> acc.bad], i, steps, npc)
             nacc == [ph |-> [acc.ph EXCEPT ![i] = b.phase],
                      pe |-> [acc.pe EXCEPT ![i] = b.pending],
                      tx |-> [acc.tx EXCEPT ![i] = b.tx],
                      ex |-> [acc.ex EXCEPT ![i] = b.expected],
                      bad |-> b.bad]
         IN OnTargets(nacc, Tail(tgts), steps, npc)

SetBars(r) == /\ phase' = r.ph /\ pending' = r.pe /\ tx' = r.tx /\ expected' = r.ex

-----------------------------------------------------------------------------
(***************************************************************************)
(* Thread actions: agent a executes its current instruction i = Cur(a).    *)
(* One action per opcode; the generated module's comments say which source *)
(* line each instruction comes from.  ThreadStep dispatches on the opcode  *)
(* with one CASE, so for each agent TLC evaluates the action of its        *)
(* current instruction only, not the guard of every action (bench/perf.py  *)
(* measures both in bench/PERF.md); NamedThreadStep states the same        *)
(* relation as a disjunction of the named actions (traces then name them). *)
(***************************************************************************)
Advance(a) == [pc EXCEPT ![a] = @ + 1]

\* An instruction that only changes barriers: `steps` applied to each target in turn.
BarrierStep(a, tgts, steps) ==
    LET npc == Advance(a) IN
    /\ pc' = npc
    /\ SetBars(OnTargets(Bars, tgts, steps, npc))
    /\ UNCHANGED <<seen, inflight, queue>>

\* What OnTargets does for one instance and one micro-step, without its records: the `bad`
\* flag it would set changes no variable when nothing of the instruction is left to skip.
\* ArriveDirect: pending -= count (BP121 below zero: no completion).  TxDirect: tx += delta
\* (back to zero with no arrival missing completes the phase; out of range never does).
ArriveDirect(i, count) ==
    LET p == pending[i] - count IN
    /\ IF p = 0 /\ tx[i] = 0
       THEN /\ phase' = [phase EXCEPT ![i] = @ + 1]
            /\ pending' = [pending EXCEPT ![i] = expected[i]]
       ELSE /\ phase' = phase
            /\ pending' = [pending EXCEPT ![i] = p]
    /\ UNCHANGED <<tx, expected>>

TxDirect(i, delta) ==
    LET t == tx[i] + delta IN
    /\ IF t = 0 /\ pending[i] = 0
       THEN /\ phase' = [phase EXCEPT ![i] = @ + 1]
            /\ pending' = [pending EXCEPT ![i] = expected[i]]
       ELSE UNCHANGED <<phase, pending>>
    /\ tx' = [tx EXCEPT ![i] = t]
    /\ UNCHANGED expected

\* arrive.expect_tx on one instance with arrivals missing: the tx change cannot complete the
\* phase, and in range it breaks no rule, so the arrival follows with the new tx.
TxArriveDirect(i, bytes) ==
    LET t == tx[i] + bytes
        p == pending[i] - 1
    IN  /\ IF p = 0 /\ t = 0
           THEN /\ phase' = [phase EXCEPT ![i] = @ + 1]
                /\ pending' = [pending EXCEPT ![i] = expected[i]]
           ELSE /\ phase' = phase
                /\ pending' = [pending EXCEPT ![i] = p]
        /\ tx' = [tx EXCEPT ![i] = t]
        /\ UNCHANGED expected
CanTxArriveDirect(i) ==
    Len(i.tgt) = 1 /\ pending[i.tgt[1]] # 0 /\ Abs(tx[i.tgt[1]] + i.amt) <= MaxTx

\* arrive, expect_tx, complete_tx: one micro-step on each target; direct on a single one.
OneMicroStep(a, i, kind, amount) ==
    IF Len(i.tgt) = 1
    THEN /\ pc' = Advance(a)
         /\ IF kind = "arrive" THEN ArriveDirect(i.tgt[1], amount)
                               ELSE TxDirect(i.tgt[1], amount)
         /\ UNCHANGED <<seen, inflight, queue>>
    ELSE BarrierStep(a, i.tgt, << <<kind, amount>> >>)

DoArrive(a, i)         == OneMicroStep(a, i, "arrive", i.amt)
DoArriveDrop(a, i)     == BarrierStep(a, i.tgt, << <<"drop", 0>>, <<"arrive", 1>> >>)
DoExpectTx(a, i)       == OneMicroStep(a, i, "tx", i.amt)
DoArriveExpectTx(a, i) ==
    IF CanTxArriveDirect(i)
    THEN pc' = Advance(a) /\ TxArriveDirect(i.tgt[1], i.amt) /\ UNCHANGED <<seen, inflight, queue>>
    ELSE BarrierStep(a, i.tgt, << <<"tx", i.amt>>, <<"arrive", 1>> >>)
DoCompleteTx(a, i)     == OneMicroStep(a, i, "tx", -i.amt)

\* A wait that passes: the agent records the completions it has observed.
Observe(a, i) ==
    /\ pc' = Advance(a)
    /\ seen' = [seen EXCEPT ![i.pos] = phase[i.inst]]
    /\ UNCHANGED <<phase, pending, tx, expected, inflight, queue>>

\* Pallas barrier_wait: the thread's private parity bit says which completion it waits for
\* (its k-th wait waits for completion k); it passes when the barrier's parity differs.
WaitParityBit(e) == IF seen[e] > 0 THEN seen[e] % 2 ELSE 0
DoWait(a, i) == phase[i.inst] % 2 # WaitParityBit(i.pos) /\ Observe(a, i)

\* Pallas barrier_test: a barrier_wait that never blocks. It always moves on, and observes the
\* completion its parity bit waits for (flipping the bit) if that has happened.
DoBarrierTest(a, i) ==
    /\ pc' = Advance(a)
    /\ seen' = IF phase[i.inst] % 2 # WaitParityBit(i.pos)
               THEN [seen EXCEPT ![i.pos] = phase[i.inst]] ELSE seen
    /\ UNCHANGED <<phase, pending, tx, expected, inflight, queue>>

\* PTX try_wait.parity(P): passes iff the phase with parity P has completed.
DoWaitParity(a, i) == phase[i.inst] % 2 # i.amt /\ Observe(a, i)

\* try_wait.parity for the completion c the thread's own phase count means: it passes iff the
\* barrier's parity is that of c.
DoWaitPhase(a, i) == phase[i.inst] % 2 = i.amt % 2 /\ Observe(a, i)

\* semaphore_signal: the counter grows by the increment (times the lockstep copies).
DoSemSignal(a, i) ==
    /\ pc' = Advance(a)
    /\ phase' = [phase EXCEPT ![i.inst] = @ + i.amt]
    /\ UNCHANGED <<pending, tx, expected, seen, inflight, queue>>

\* semaphore_wait: blocks until the counter reaches the value; takes it off if it decrements.
DoSemWait(a, i) ==
    /\ phase[i.inst] >= i.amt
    /\ pc' = Advance(a)
    /\ phase' = [phase EXCEPT ![i.inst] = @ - i.amt * i.pos]
    /\ UNCHANGED <<pending, tx, expected, seen, inflight, queue>>

DoSemSignalSet(a, i) ==
    /\ pc' = Advance(a)
    /\ inflight' = [k \in DOMAIN inflight |->
                      inflight[k] + Len(SelectSeq(i.slots, LAMBDA x : x = k))]
    /\ UNCHANGED <<phase, pending, tx, expected, seen, queue>>
DoSignalsLanded(a, i) ==
    /\ \A k \in DOMAIN i.slots : inflight[i.slots[k]] = 0
    /\ pc' = Advance(a)
    /\ UNCHANGED <<phase, pending, tx, expected, seen, inflight, queue>>

\* TMA copy issue: the issuer's arrive.expect_tx, then the landing(s) go in flight.
DoIssueAsync(a, i) ==
    LET npc == Advance(a) IN
    /\ pc' = npc
    /\ IF CanTxArriveDirect(i) THEN TxArriveDirect(i.tgt[1], i.amt)
       ELSE SetBars(OnTargets(Bars, i.tgt, << <<"tx", i.amt>>, <<"arrive", 1>> >>, npc))
    /\ inflight' = IF Len(i.slots) = 1 THEN [inflight EXCEPT ![i.slots[1]] = @ + 1]
                   ELSE [k \in DOMAIN inflight |->
                            inflight[k] + Len(SelectSeq(i.slots, LAMBDA x : x = k))]
    /\ UNCHANGED <<seen, queue>>

QueueOf(a) == CHOOSE q \in DOMAIN QueueAgents : QueueAgents[q] = a

\* tcgen05_mma / tcgen05_commit_arrive: goes to the back of the thread's tcgen05 queue.
DoIssueTcgen05(a, i) ==
    /\ pc' = Advance(a)
    /\ queue' = [queue EXCEPT ![QueueOf(a)] = Append(@, i.set)]
    /\ UNCHANGED <<phase, pending, tx, expected, seen, inflight>>

\* An instruction that changes nothing but the pc: fork, and synchronization outside the
\* model (unmodeled, reported statically as BP190).
Pass(a) ==
    /\ pc' = Advance(a)
    /\ UNCHANGED <<phase, pending, tx, expected, seen, inflight, queue>>

\* WarpMesh regions: the warpgroup forks, its warps wait for the fork, it joins them at the end.
DoAwaitFork(a, i) == pc[i.parent] >= i.at /\ Pass(a)
DoJoin(a, i) == (\A j \in DOMAIN i.joins : pc[i.joins[j][1]] >= i.joins[j][2]) /\ Pass(a)

\* Agent a, not finished, executes instruction i (its current one).
Execute(a, i) ==
    CASE i.op = "wait"             -> DoWait(a, i)
      [] i.op = "arrive"           -> DoArrive(a, i)
      [] i.op = "issue_async"      -> DoIssueAsync(a, i)
      [] i.op = "wait_parity"      -> DoWaitParity(a, i)
      [] i.op = "wait_phase"       -> DoWaitPhase(a, i)
      [] i.op = "arrive_expect_tx" -> DoArriveExpectTx(a, i)
      [] i.op = "expect_tx"        -> DoExpectTx(a, i)
      [] i.op = "complete_tx"      -> DoCompleteTx(a, i)
      [] i.op = "arrive_drop"      -> DoArriveDrop(a, i)
      [] i.op = "issue_tcgen05"    -> DoIssueTcgen05(a, i)
      [] i.op = "sem_signal"       -> DoSemSignal(a, i)
      [] i.op = "sem_wait"         -> DoSemWait(a, i)
      [] i.op = "barrier_test"     -> DoBarrierTest(a, i)
      [] i.op = "sem_signal_set"   -> DoSemSignalSet(a, i)
      [] i.op = "signals_landed"   -> DoSignalsLanded(a, i)
      [] i.op = "await_fork"       -> DoAwaitFork(a, i)
      [] i.op = "join"             -> DoJoin(a, i)
      [] i.op \in {"fork", "unmodeled"} -> Pass(a)
      [] OTHER                     -> FALSE     \* an opcode of HwBarrier

ThreadStep(a) == Running(a) /\ Execute(a, Cur(a))

\* The same actions by name, each guarded by its opcode.
Arrive(a)         == At(a, "arrive")           /\ DoArrive(a, Cur(a))
ArriveDrop(a)     == At(a, "arrive_drop")      /\ DoArriveDrop(a, Cur(a))
ExpectTx(a)       == At(a, "expect_tx")        /\ DoExpectTx(a, Cur(a))
ArriveExpectTx(a) == At(a, "arrive_expect_tx") /\ DoArriveExpectTx(a, Cur(a))
CompleteTx(a)     == At(a, "complete_tx")      /\ DoCompleteTx(a, Cur(a))
Wait(a)           == At(a, "wait")             /\ DoWait(a, Cur(a))
WaitParity(a)     == At(a, "wait_parity")      /\ DoWaitParity(a, Cur(a))
WaitPhase(a)      == At(a, "wait_phase")       /\ DoWaitPhase(a, Cur(a))
SemSignal(a)      == At(a, "sem_signal")       /\ DoSemSignal(a, Cur(a))
SemWait(a)        == At(a, "sem_wait")         /\ DoSemWait(a, Cur(a))
BarrierTest(a)    == At(a, "barrier_test")     /\ DoBarrierTest(a, Cur(a))
IssueAsync(a)     == At(a, "issue_async")      /\ DoIssueAsync(a, Cur(a))
IssueTcgen05(a)   == At(a, "issue_tcgen05")    /\ DoIssueTcgen05(a, Cur(a))
Fork(a)           == At(a, "fork")             /\ Pass(a)
Unmodeled(a)      == At(a, "unmodeled")        /\ Pass(a)
AwaitFork(a)      == At(a, "await_fork")       /\ DoAwaitFork(a, Cur(a))
Join(a)           == At(a, "join")             /\ DoJoin(a, Cur(a))
SemSignalSet(a)   == At(a, "sem_signal_set")   /\ DoSemSignalSet(a, Cur(a))
SignalsLanded(a)  == At(a, "signals_landed")   /\ DoSignalsLanded(a, Cur(a))

NamedThreadStep(a) ==
    \/ Arrive(a) \/ ArriveDrop(a) \/ ExpectTx(a) \/ ArriveExpectTx(a) \/ CompleteTx(a)
    \/ Wait(a) \/ WaitParity(a) \/ WaitPhase(a) \/ IssueAsync(a) \/ IssueTcgen05(a)
    \/ SemSignal(a) \/ SemWait(a) \/ BarrierTest(a) \/ SemSignalSet(a) \/ SignalsLanded(a)
    \/ Fork(a) \/ AwaitFork(a) \/ Join(a) \/ Unmodeled(a)

-----------------------------------------------------------------------------
(***************************************************************************)
(* Asynchronous agents: they can act at any later time, in any order with  *)
(* the threads (JAX's interpreter, which lands copies at issue, is one of  *)
(* these schedules).                                                       *)
(***************************************************************************)

\* One in-flight delivery of slot k: a TMA copy lands (complete_tx), an async arrival, or a
\* semaphore signal (the counter grows).
Deliver(k) ==
    /\ inflight[k] > 0
    /\ inflight' = [inflight EXCEPT ![k] = @ - 1]
    /\ CASE Slots[k].effect = "complete_tx" -> TxDirect(Slots[k].inst, -Slots[k].amount)
         [] Slots[k].effect = "signal" ->
                /\ phase' = [phase EXCEPT ![Slots[k].inst] = @ + Slots[k].amount]
                /\ UNCHANGED <<pending, tx, expected>>
         [] OTHER -> ArriveDirect(Slots[k].inst, 1)
    /\ UNCHANGED <<pc, seen, queue>>

\* The oldest tcgen05 op of queue q completes and arrives on its barriers (a commit completes
\* only after every op issued before it, hence one queue per thread).
Tcgen05Complete(q) ==
    /\ queue[q] # <<>>
    /\ queue' = [queue EXCEPT ![q] = Tail(@)]
    /\ LET tgts == ArrivalSets[Head(queue[q]) + 1] IN
       IF Len(tgts) = 1 THEN ArriveDirect(tgts[1], 1)
                        ELSE SetBars(OnTargets(Bars, tgts, << <<"arrive", 1>> >>, pc))
    /\ UNCHANGED <<pc, seen, inflight>>

\* Some asynchronous agent moves.
AsyncStep ==
    \/ \E k \in DOMAIN Slots : Deliver(k)
    \/ \E q \in DOMAIN QueueAgents : Tcgen05Complete(q)

-----------------------------------------------------------------------------
Init ==
    /\ pc = [a \in Agents |-> 0]
    /\ phase = [i \in Insts |-> 0]
    /\ pending = ExpectedInit
    /\ tx = [i \in Insts |-> 0]
    /\ expected = ExpectedInit
    /\ seen = [e \in DOMAIN SeenOf |-> -1]
    /\ inflight = [k \in DOMAIN Slots |-> 0]
    /\ queue = [q \in DOMAIN QueueAgents |-> <<>>]

\* A finished kernel stutters, so TLC does not call its end a deadlock; any other state
\* without a successor is one (BP100, or BP130 when a wait's phase has all arrivals but
\* not all bytes).
Done == Terminated /\ UNCHANGED vars

\* Some thread or asynchronous agent can move.
Progress == (\E a \in Agents : ThreadStep(a)) \/ AsyncStep

Next == Progress \/ Done

Spec == Init /\ [][Next]_vars

\* The same specification with the named thread actions (the same state graph; slower).
NamedProgress == (\E a \in Agents : NamedThreadStep(a)) \/ AsyncStep
NamedSpec == Init /\ [][NamedProgress \/ Done]_vars

-----------------------------------------------------------------------------
(***************************************************************************)
(* The rules (SEMANTICS.md section 3), one named property per diagnostic.  *)
(* semantics.py judges BP101 on the step that completes a phase, so it is  *)
(* an action property here; the others are state invariants.               *)
(***************************************************************************)

\* BP101 phase-overrun: no step completes a phase of instance i while a participant that has
\* joined i and will wait on it again has not observed the previous completion.  (phase only grows by completions, and
\* an instruction that completes i twice is judged at its last completion.)
PhaseOverrunStep ==
    \E i \in Insts :
        /\ phase'[i] > phase[i]
        /\ \E k \in DOMAIN Participants[i] :
              LET e == Participants[i][k]
                  w == SeenOf[e][1]
              IN  /\ PallasEntry(e)
                  /\ Max(seen[e], 0) < phase'[i] - 1
                  /\ pc'[w] <= SeenOf[e][3]
                  /\ seen[e] >= 0 \/ WaitsOn(pc', w, i)
\* The agents with a parity wait in their program (a constant: TLC evaluates it once).
ParityWaiters ==
    {a \in Agents : \E p \in DOMAIN Prog[a] : Prog[a][p].op \in ParityWaitOps}
\* BP101 for waits with a stated phase: one returns after a completion other than the one
\* it means ...
ParityReturnStep ==
    \E a \in ParityWaiters :
        /\ Running(a) /\ pc'[a] = pc[a] + 1 /\ Cur(a).op = "wait_phase"
        /\ phase[Cur(a).inst] # Meant(Cur(a), seen[Cur(a).pos])
\* ... or sits at its wait while the barrier has run past the completion it means.
ParityAhead ==
    \E a \in ParityWaiters :
        /\ Running(a) /\ Cur(a).op = "wait_phase"
        /\ phase[Cur(a).inst] > Meant(Cur(a), seen[Cur(a).pos])
BP101_NoPhaseOverrun == [][~PhaseOverrunStep /\ ~ParityReturnStep /\ ~ParityAhead']_vars

\* BP102 late-join: no Pallas thread makes its first wait on a barrier that has already
\* completed two or more phases (its parity bit would point at the wrong phase).
BP102_NoLateJoin ==
    \A a \in Agents :
        At(a, "wait") => ~(seen[Cur(a).pos] < 0 /\ phase[Cur(a).inst] >= 2)

\* BP121 out-of-range: arrivals beyond the count, tx-count beyond 2^20 - 1, a negative count.
BP121_InRange ==
    \A i \in Insts : pending[i] >= 0 /\ expected[i] >= 0 /\ Abs(tx[i]) <= MaxTx

\* At kernel exit (every agent finished):
\* BP103 unobserved-completion: every waiter has observed every completion.
BP103_AllCompletionsObserved ==
    Terminated => /\ \A e \in DOMAIN SeenOf : PallasEntry(e) => seen[e] >= phase[SeenOf[e][2]]
                  /\ \A i \in Unwaited : phase[i] = 0
\* BP104 pending-arrivals: no phase has arrivals that never completed it.
BP104_NoPendingArrivals ==
    Terminated => \A i \in Insts : tx[i] # 0 \/ pending[i] = expected[i]
\* BP105 async-in-flight: no TMA copy, async arrival or tcgen05 op still in flight, and no
\* thread's own asynchronous access still running on the shared memory the exit releases.
BP105_NoAsyncInFlight ==
    Terminated => /\ \A k \in DOMAIN Slots : inflight[k] = 0
                  /\ \A q \in DOMAIN QueueAgents : queue[q] = <<>>
                  /\ ExitLive = {}
\* BP130 tx-imbalance: every tx-count returned to zero.
BP130_TxBalanced ==
    Terminated => \A i \in Insts : tx[i] = 0

-----------------------------------------------------------------------------
(***************************************************************************)
(* Races (model/memory.py): a state in which two live accesses of          *)
(* different agents overlap and one of them writes.  Accesses are fixed at *)
(* compile time by who holds them, so the generated module lists the pairs *)
(* of holders whose accesses conflict (model/race_pairs.py) and a state    *)
(* races iff both holders of a pair are live.  A holder is                 *)
(*   <<"pc", a, P>>     agent a stands at a gap (its pc) in P: its loads   *)
(*                      and stores there, its own asynchronous accesses    *)
(*                      still live, or its own program racing there;       *)
(*   <<"tail", a, P, w, j>>  warp a at a gap in P: its loads and           *)
(*                      stores after its last instruction in a warp        *)
(*                      region, until its warpgroup w passes the           *)
(*                      region's JOIN at j;                                *)
(*   <<"slots", g, K>>  a TMA copy of some slot in K is in flight;         *)
(*   <<"queue", q, E>>  queue q holds a tcgen05 op of an entry in E.       *)
(***************************************************************************)
Live(x) ==
    CASE x[1] = "pc"    -> pc[x[2]] \in x[3]
      [] x[1] = "tail"  -> pc[x[2]] \in x[3] /\ pc[x[4]] <= x[5]
      [] x[1] = "slots" -> \E k \in x[3] : inflight[k] > 0
      [] x[1] = "queue" -> \E k \in DOMAIN queue[x[2]] : queue[x[2]][k] \in x[3]
\* The pairs by code, as sets: definitions of no argument over constants, which TLC evaluates
\* once at startup.  Races itself is substituted from the kernel's module (Races <- KernelRaces),
\* and TLC evaluates such a substitution again at every reference (it keeps it lazy on purpose:
\* tlaplus issue 648): read per state, a table of a few dozen pairs cost more than the step.
RacePairs == {Races[n] : n \in DOMAIN Races}
SmemRacePairs == {r \in RacePairs : r[1] = "BP200"}
TmemRacePairs == {r \in RacePairs : r[1] = "BP201"}
Racing(code) ==
    \E r \in IF code = "BP200" THEN SmemRacePairs ELSE TmemRacePairs : Live(r[2]) /\ Live(r[3])

\* BP200 smem-race, BP201 tmem-race.
BP200_NoSmemRace == ~Racing("BP200")
BP201_NoTmemRace == ~Racing("BP201")

-----------------------------------------------------------------------------
(***************************************************************************)
(* Deadlock, in the two flavours semantics.py names.  TLC's own deadlock   *)
(* check finds both; these invariants (which need ENABLED) let a search    *)
(* look for one flavour only, e.g. when the user ignores the other.        *)
(***************************************************************************)
\* The opcodes whose step has a guard (steps.py GUARDS); at any other opcode a running thread
\* can always move.  A stuck state has every running thread at one of them: checked first, it
\* spares TLC the ENABLED of multi-target arrivals, which it evaluates without sharing the
\* LETs of OnTargets (minutes for one state of a 2x2 cluster barrier).
BlockingOps == WaitOps \cup {"await_fork", "join", "sem_wait", "signals_landed"}
AllBlocked(ops) == \A a \in Agents : Running(a) => Cur(a).op \in ops

Stuck == ~Terminated /\ AllBlocked(BlockingOps) /\ ~ENABLED Progress

\* A blocked wait whose phase has all its arrivals but not all its bytes.
TxStuck ==
    \E a \in Agents :
        /\ Running(a) /\ Cur(a).op \in WaitOps
        /\ pending[Cur(a).inst] = 0 /\ tx[Cur(a).inst] # 0

BP100_NoDeadlock   == ~(Stuck /\ ~TxStuck)    \* BP100 deadlock
BP130_NoTxDeadlock == ~(Stuck /\ TxStuck)     \* BP130 tx-imbalance: a phase that cannot complete

-----------------------------------------------------------------------------
(***************************************************************************)
(* Which rule semantics.py reports for a step (taken from a state that     *)
(* broke none): the rule the step itself breaks (BP101 or BP121: one at    *)
(* most, an instruction stops at its first), else the lowest code among    *)
(* the rules the new state breaks, codes in Ignored left out.  Exact_BPxxx *)
(* fails exactly on the steps semantics.py reports as BPxxx; a search      *)
(* with only some of them finds the shortest violation with those codes.   *)
(***************************************************************************)
LateJoin        == ~BP102_NoLateJoin
Unobserved      == ~BP103_AllCompletionsObserved
PendingAtExit   == ~BP104_NoPendingArrivals
InFlightAtExit  == ~BP105_NoAsyncInFlight
TxAtExit        == ~BP130_TxBalanced

\* Which steps the Exact_* properties judge: every one.  A run that settles the code of a
\* violation whose length it already knows overrides it in its .cfg (`Judged <- ...`,
\* checker/engines/tlc.py) to judge only the steps of that length: the properties then cost
\* nothing on the way there, and say the same on the steps they judge.
Judged == TRUE
Counts(code) == Judged /\ code \notin Ignored
StepBreaks ==
    \/ Counts("BP101") /\ (PhaseOverrunStep \/ ParityReturnStep)
    \/ Counts("BP121") /\ ~BP121_InRange'
StateBreaks(code) ==
    /\ Counts(code)
    /\ CASE code = "BP101" -> ParityAhead'
         [] code = "BP102" -> LateJoin'
         [] code = "BP103" -> Unobserved'
         [] code = "BP104" -> PendingAtExit'
         [] code = "BP105" -> InFlightAtExit'
         [] code = "BP130" -> TxAtExit'
LowerCodes == [BP101 |-> {}, BP102 |-> {"BP101"}, BP103 |-> {"BP101", "BP102"},
               BP104 |-> {"BP101", "BP102", "BP103"},
               BP105 |-> {"BP101", "BP102", "BP103", "BP104"},
               BP130 |-> {"BP101", "BP102", "BP103", "BP104", "BP105"}]
\* The new state breaks a rule with this code and none with a lower one.
StateCode(code) == StateBreaks(code) /\ \A c \in LowerCodes[code] : ~StateBreaks(c)

\* Each conjunction puts the part that is rarely true first: TLC evaluates /\ from the left and
\* stops at the first FALSE, so a step that breaks no rule skips the rest (StepBreaks, and
\* BreaksBarrierRule with its six primed rules) on most of the search's transitions.
Exact_BP101 == [][~(Counts("BP101") /\ (PhaseOverrunStep \/ ParityReturnStep))
                  /\ ~(StateCode("BP101") /\ ~StepBreaks)]_vars
Exact_BP121 == [][~(Counts("BP121") /\ ~BP121_InRange')]_vars
Exact_BP102 == [][~(StateCode("BP102") /\ ~StepBreaks)]_vars
Exact_BP103 == [][~(StateCode("BP103") /\ ~StepBreaks)]_vars
Exact_BP104 == [][~(StateCode("BP104") /\ ~StepBreaks)]_vars
Exact_BP105 == [][~(StateCode("BP105") /\ ~StepBreaks)]_vars
Exact_BP130 == [][~(StateCode("BP130") /\ ~StepBreaks)]_vars

\* A race is reported when the step breaks no rule itself and the new state breaks no rule of a
\* lower code (every BP1xx; BP201 yields to BP200).
BreaksBarrierRule == \E c \in DOMAIN LowerCodes : StateBreaks(c)
RaceCode(code) ==
    /\ Counts(code) /\ Racing(code)'
    /\ code = "BP201" => ~(Counts("BP200") /\ Racing("BP200")')
Exact_BP200 == [][~(RaceCode("BP200") /\ ~StepBreaks /\ ~BreaksBarrierRule)]_vars
Exact_BP201 == [][~(RaceCode("BP201") /\ ~StepBreaks /\ ~BreaksBarrierRule)]_vars

\* Type invariant: the shape of the state (not checked by default; useful when editing).
TypeOK ==
    /\ pc \in [Agents -> Nat]
    /\ phase \in [Insts -> Nat]
    /\ pending \in [Insts -> Int] /\ tx \in [Insts -> Int] /\ expected \in [Insts -> Int]
    /\ seen \in [DOMAIN SeenOf -> Int]
    /\ inflight \in [DOMAIN Slots -> Nat]
    /\ \A q \in DOMAIN QueueAgents : queue[q] \in Seq(Nat)
=============================================================================
