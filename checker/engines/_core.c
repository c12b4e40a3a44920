/* The compiled exploration core: the explorer's raw breadth-first search (no symmetry, no
 * partial-order reduction) over the flat integer states of `semantics.System`, for the opcodes
 * flatten.py accepts. compiled.py rebuilds and replays what it finds with the Python rules.
 *
 * A state is the System's tuple as int32 words:
 *   pc[agent]                              next instruction of each thread
 *   (phase, pending, tx, expected)[inst]   completions so far, missing arrivals of the open
 *                                          phase, tx bytes outstanding, arrival count
 *   seen[...]                              completions a thread observed at its last wait
 *   in_flight[slot]                        TMA landings / async arrivals not yet delivered
 *   delivered[tcgen05 queue]              entries of the issuer's queue completed so far
 *   (hardware barriers; init visibility)  as hw_barriers.py and init_visibility.py lay them
 * Every rule returns its code as an integer (101 for BP101); 0 is "no rule broken". The order
 * of every check follows semantics.py and model/primitives, including where a broken rule
 * stops the rest of a step (`violation or ...` there), since a step whose code the user
 * ignores goes on to be searched.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Opcodes as flatten.py numbers them (its CORE_OPS). */
enum { OP_ARRIVE, OP_ARRIVE_DROP, OP_EXPECT_TX, OP_ARRIVE_TX, OP_COMPLETE_TX, OP_WAIT,
       OP_WAIT_PARITY, OP_WAIT_PHASE, OP_BARRIER_TEST, OP_ISSUE_ASYNC, OP_NOP, OP_SEM_SIGNAL,
       OP_SEM_WAIT, OP_AWAIT_FORK, OP_JOIN, OP_ISSUE_TCGEN05, OP_HW_ARRIVE, OP_HW_WAIT,
       OP_SEM_SIGNAL_SET, OP_SIGNALS_LANDED, OP_MBAR_INIT, OP_FENCE_INIT, OP_FENCE_ASYNC };
/* Hardware barrier fields (hw_barriers.py); an arrival's flags (its aux2 operand). */
enum { HW_PHASE, HW_ARRIVED, HW_COUNT, HW_SITE, HW_FIELDS };
enum { HW_PARTIAL = 1, HW_RELAXED = 2 };
/* Barrier instance fields; effects an in-flight slot delivers (instructions.py). */
enum { PHASE, PENDING, TX, EXPECTED, FIELDS };
enum { EFFECT_COMPLETE_TX, EFFECT_ARRIVE, EFFECT_SIGNAL };
/* Search outcomes (compiled.py names them). */
enum { VERIFIED, VIOLATION, STATE_LIMIT, TIME_LIMIT, MEMORY_LIMIT, DEPTH_LIMIT, INTERRUPTED };
/* What a violation is: the initial state's, a step's, a new state's, a deadlock, two returns
 * of one bare parity wait. */
enum { AT_INITIAL, BY_STEP, IN_STATE, DEADLOCK, ALIASING };

typedef struct {
    int W, A, n_inst, slot_base, n_slots, max_tx, exit_async, track_returns;
    int *len, *off;                         /* per agent: program length, first instruction */
    int *op, *t0, *t1, *amount, *x0, *x1;   /* per instruction: opcode and operands */
    int *insts, *slot_list;                 /* arrival sets, issued slot lists */
    int *slot_effect, *slot_inst, *slot_amount;
    /* per instance: its Pallas waiters (seen entry, last pc waiting on it), exit rules */
    int *part_off, *part_waiter, *part_pos, *part_last, *unwaited;
    /* a cluster of several blocks: each agent's and instance's block, and the slots whose
     * deliveries go into another block than their issuer's (BP146 once it has exited) */
    int n_blocks, n_remote, *agent_block, *inst_block, *remote_slots;
    int *aux2;                              /* per instruction: a hardware arrival's flags */
    /* tcgen05 queues: a queue is the issuer's entries from `delivered` (its state field) to
     * the number issued before its pc (`issued[off[a] + a + pc]`), so its one field and the
     * pc say the tuple semantics.py keeps; per queue its agent and its entries' arrival sets */
    int n_queues, queue_base, *issued, *queue_agent, *q_off, *q_t0, *q_t1;
    /* hardware barriers (hw_barriers.py): per instance its kind (1 cluster) and block, the
     * top-level agents of that block and those of them arriving on it (BP144) */
    int n_hw, hw_base, block_threads, *hw_kind, *hw_block, *hw_mem_off, *hw_mem, *hw_arr_off,
        *hw_arr;
    /* explicit-init instances (init_visibility.py), numbered k: the position of vis[k], the
     * instance, rel[k, h] (-1: none), relc[k] (-1: none); per instruction its uses (k, and 1
     * when through the async proxy) in use_off ranges */
    int n_init, *init_vis, *init_inst, *init_rel, *init_relc, *use_off, *use_k, *use_proxy;
    /* the race rule (memory.py), judged per space (0 smem: BP200, 1 tmem: BP201): per
     * (agent, pc) at `issued`'s index its live accesses' entry (-1: none) and its self race's
     * code; slot groups of (slot, entry); per tcgen05 queue entry its entry; the entries'
     * (reads, writes) masks per space in `words` chunks of 30 bits; scratch for two masks;
     * per (agent, pc) a warp's tail that its warpgroup's JOIN retires: the parent (-1: none),
     * the pc of its JOIN and the entry left live once the parent is past it */
    int races, words, n_entries, n_groups, *lane, *self_code, *group_off, *group_slot,
        *group_entry, *q_entry, *chunks, *ret_parent, *ret_pc, *ret_entry;
    uint32_t *scratch;
    /* thread symmetry (symmetry.py, flatten.py `symmetric`): classes of interchangeable
     * threads (cls_off ranges of cls_member, in agent order), each agent's local part (its
     * loc_off range of state positions) and its class's first member (`root`, the key of the
     * side table of bare parity waits); scratch for a class's local parts */
    int n_classes, *cls_off, *cls_member, *loc_off, *loc_pos, *root;
    /* the race rule under thread symmetry (symmetry.py `race_permutations`): per permutation
     * of threads that touch different memory, the (from, to) state positions of its image */
    int n_perms, *perm_off, *perm_from, *perm_to;
    int32_t *sym_scratch;
    struct Por *por;        /* partial-order reduction (_por.c), or NULL: every step */
    char ignored[1000];
} Model;

static int barrier(const Model *m, int inst) { return m->A + FIELDS * inst; }

static int is_wait(int op) {
    return op == OP_WAIT || op == OP_WAIT_PARITY || op == OP_WAIT_PHASE || op == OP_BARRIER_TEST;
}

/* -- the barrier micro-steps (System._arrive, _tx, _maybe_complete) ------------------------ */

static int waits_on(const Model *m, const int32_t *s, int agent, int inst) {
    int pc = s[agent];
    if (pc >= m->len[agent]) return 0;
    int i = m->off[agent] + pc;
    return is_wait(m->op[i]) && m->t0[i] == inst;
}

/* A phase completes when its arrivals and its tx bytes are all in; a Pallas waiter that will
 * wait again and has fallen a completion behind aliases its parity (BP101). */
static int maybe_complete(const Model *m, int32_t *s, int inst) {
    int b = barrier(m, inst);
    if (s[b + PENDING] != 0 || s[b + TX] != 0) return 0;
    int completed = s[b + PHASE];
    s[b + PHASE] = completed + 1;
    s[b + PENDING] = s[b + EXPECTED];
    for (int k = m->part_off[inst]; k < m->part_off[inst + 1]; k++) {
        int waiter = m->part_waiter[k], seen = s[m->part_pos[k]];
        if ((seen > 0 ? seen : 0) >= completed) continue;
        if (s[waiter] > m->part_last[k]) continue;       /* it never waits on inst again */
        if (seen >= 0 || waits_on(m, s, waiter, inst)) return 101;
    }
    return 0;
}

static int arrive(const Model *m, int32_t *s, int inst, int count) {
    int b = barrier(m, inst);
    int pending = s[b + PENDING] - count;
    s[b + PENDING] = pending;
    if (pending > 0) return 0;
    if (pending < 0) return 121;                          /* more arrivals than the count */
    return maybe_complete(m, s, inst);
}

static int tx_bytes(const Model *m, int32_t *s, int inst, int delta) {
    int b = barrier(m, inst);
    int64_t tx = (int64_t)s[b + TX] + delta;
    s[b + TX] = (int32_t)tx;
    if (tx < -m->max_tx || tx > m->max_tx) return 121;    /* tx-count out of range */
    if (tx || s[b + PENDING]) return 0;
    return maybe_complete(m, s, inst);
}

/* -- hardware barriers and init visibility (hw_barriers.py, init_visibility.py) ----------- */

static int hw_field(const Model *m, int h) { return m->hw_base + HW_FIELDS * h; }

/* bar.arrive / bar.sync's arrival / barrier.cluster.arrive (effect_arrive), then the inits the
 * agent sees released into the phase it arrived in (effect_hw_arrive). */
static int hw_arrive(const Model *m, int32_t *s, int i, int agent) {
    int h = m->t0[i], b = hw_field(m, h), pos = m->t1[i], count = m->x0[i], site = m->x1[i];
    int phase = s[b + HW_PHASE];
    if (pos >= 0) s[pos] = phase;
    if (m->aux2[i] & HW_PARTIAL) return 141;      /* part of a warp: divergent */
    int open = s[b + HW_COUNT];
    if (open && open != count) return 142;        /* another count for the open phase */
    s[b + HW_COUNT] = count;
    if (site) {
        if (s[b + HW_SITE] && s[b + HW_SITE] != site) return 141;   /* another aligned sync */
        s[b + HW_SITE] = site;
    }
    int arrived = s[b + HW_ARRIVED] + m->amount[i];
    if (arrived > count) return 142;
    if (arrived == count) {
        s[b + HW_PHASE] += 1;
        s[b + HW_ARRIVED] = 0; s[b + HW_COUNT] = 0; s[b + HW_SITE] = 0;
    } else {
        s[b + HW_ARRIVED] = arrived;
    }
    for (int k = 0; k < m->n_init; k++) {
        int vis = s[m->init_vis[k]];
        if (!(vis & (1 << agent))) continue;
        int rel = m->init_rel[k * m->n_hw + h];
        if (rel >= 0 && !s[rel]) s[rel] = phase + 1;
        if (m->hw_kind[h] && ((vis & (1 << (m->A + 1))) || !(m->aux2[i] & HW_RELAXED))) {
            rel = m->init_relc[k];
            if (!s[rel]) s[rel] = phase + 1;
        }
    }
    return 0;
}

/* Passing a hardware wait: the agent learns the inits released in the phase it arrived in or
 * before (effect_hw_wait). */
static void hw_wait_learns(const Model *m, int32_t *s, int i, int agent) {
    int h = m->t0[i], upto = s[m->x0[i]] + 1;
    for (int k = 0; k < m->n_init; k++) {
        if (s[m->init_vis[k]] & (1 << agent)) continue;
        int rel = m->inst_block[m->init_inst[k]] == m->agent_block[agent]
                      ? m->init_rel[k * m->n_hw + h]
                      : (m->hw_kind[h] ? m->init_relc[k] : -1);
        if (rel >= 0 && s[rel] > 0 && s[rel] <= upto) s[m->init_vis[k]] |= 1 << agent;
    }
}

/* -- guards and effects (model/primitives/: mbarrier, waits, tma, semaphores) -------------- */

static int phase_of(const Model *m, const int32_t *s, int inst) { return s[barrier(m, inst)]; }

/* barrier_wait: passes iff the barrier's parity differs from the private parity bit (the
 * parity of the completions the thread observed at its last wait). */
static int pallas_passes(const Model *m, const int32_t *s, int i) {
    int seen = s[m->x0[i]];
    return (phase_of(m, s, m->t0[i]) & 1) != (seen > 0 ? seen & 1 : 0);
}

static int guard(const Model *m, const int32_t *s, int i) {
    switch (m->op[i]) {
    case OP_WAIT:
        return pallas_passes(m, s, i);
    case OP_WAIT_PARITY:         /* the phase of parity P has completed */
        return (phase_of(m, s, m->t0[i]) & 1) != m->amount[i];
    case OP_WAIT_PHASE:          /* the barrier's parity is that of the completion meant */
        return (phase_of(m, s, m->t0[i]) & 1) == (m->amount[i] & 1);
    case OP_SEM_WAIT:            /* the semaphore has reached the value */
        return phase_of(m, s, m->t0[i]) >= m->amount[i];
    case OP_AWAIT_FORK:          /* a warp waits for its warpgroup to fork (pc past the fork) */
        return s[m->t0[i]] >= m->amount[i];
    case OP_JOIN:                /* the warpgroup waits for every warp to end its body */
        for (int k = m->t0[i]; k < m->t1[i]; k += 2)
            if (s[m->insts[k]] < m->insts[k + 1]) return 0;
        return 1;
    case OP_HW_WAIT:             /* the phase the agent arrived in has completed */
        return s[hw_field(m, m->t0[i])] > s[m->x0[i]];
    case OP_SIGNALS_LANDED:      /* every signal of its set has landed */
        for (int k = m->x0[i]; k < m->x1[i]; k++)
            if (s[m->slot_base + m->slot_list[k]]) return 0;
        return 1;
    default:
        return 1;
    }
}

/* Apply instruction i of `agent` (its pc already moved on); the code of the rule it breaks. */
static int effect(const Model *m, int32_t *s, int i, int agent) {
    int v = 0;
    switch (m->op[i]) {
    case OP_ARRIVE:
        for (int k = m->t0[i]; k < m->t1[i]; k++)
            if (!v) v = arrive(m, s, m->insts[k], m->amount[i]);
        return v;
    case OP_ARRIVE_DROP:
        for (int k = m->t0[i]; k < m->t1[i]; k++) {
            int b = barrier(m, m->insts[k]);
            s[b + EXPECTED] -= 1;                  /* arrive_drop lowers the count below 0 */
            if (s[b + EXPECTED] < 0 && !v) v = 121;
            if (!v) v = arrive(m, s, m->insts[k], 1);
        }
        return v;
    case OP_EXPECT_TX:
        for (int k = m->t0[i]; k < m->t1[i]; k++)
            if (!v) v = tx_bytes(m, s, m->insts[k], m->amount[i]);
        return v;
    case OP_ISSUE_ASYNC:         /* the issuer's arrive.expect_tx, then the copies fly */
    case OP_ARRIVE_TX:
        for (int k = m->t0[i]; k < m->t1[i]; k++) {
            if (!v) v = tx_bytes(m, s, m->insts[k], m->amount[i]);
            if (!v) v = arrive(m, s, m->insts[k], 1);
        }
        if (m->op[i] == OP_ISSUE_ASYNC)
            for (int k = m->x0[i]; k < m->x1[i]; k++) s[m->slot_base + m->slot_list[k]] += 1;
        return v;
    case OP_COMPLETE_TX:
        for (int k = m->t0[i]; k < m->t1[i]; k++)
            if (!v) v = tx_bytes(m, s, m->insts[k], -m->amount[i]);
        return v;
    case OP_WAIT:                /* observes every completion so far */
        s[m->x0[i]] = phase_of(m, s, m->t0[i]);
        return 0;
    case OP_BARRIER_TEST:        /* flips the private bit only if the wait would pass */
        if (pallas_passes(m, s, i)) s[m->x0[i]] = phase_of(m, s, m->t0[i]);
        return 0;
    case OP_WAIT_PARITY:
    case OP_WAIT_PHASE: {        /* a stated phase must be the one it returns after */
        int now = phase_of(m, s, m->t0[i]);
        s[m->x0[i]] = now;
        return (m->op[i] == OP_WAIT_PHASE && now != m->amount[i]) ? 101 : 0;
    }
    case OP_SEM_SIGNAL:
        s[barrier(m, m->t0[i])] += m->amount[i];
        return 0;
    case OP_SEM_WAIT:
        if (m->x0[i]) s[barrier(m, m->t0[i])] -= m->amount[i];
        return 0;
    case OP_SEM_SIGNAL_SET:      /* one signal in flight per slot, landing in any order */
        for (int k = m->x0[i]; k < m->x1[i]; k++) s[m->slot_base + m->slot_list[k]] += 1;
        return 0;
    case OP_HW_ARRIVE:
        return hw_arrive(m, s, i, agent);
    case OP_HW_WAIT:
        hw_wait_learns(m, s, i, agent);
        return 0;
    case OP_MBAR_INIT:           /* visible to the initialising agent only */
        for (int k = 0; k < m->n_init; k++)
            if (m->init_inst[k] == m->t0[i]) s[m->init_vis[k]] |= 1 << agent;
        return 0;
    case OP_FENCE_INIT:          /* the inits it sees: to the async proxy, released to the */
    case OP_FENCE_ASYNC: {       /* cluster (fence.mbarrier_init only) */
        if (!m->n_init) return 0;                 /* nothing to publish (and A may be > 29) */
        int bits = (1 << m->A) | (m->op[i] == OP_FENCE_INIT ? 1 << (m->A + 1) : 0);
        for (int k = 0; k < m->n_init; k++)
            if (s[m->init_vis[k]] & (1 << agent)) s[m->init_vis[k]] |= bits;
        return 0;
    }
    default:                     /* ISSUE_TCGEN05: the queue grows with the pc */
        return 0;
    }
}

/* The tcgen05 entries queue k's agent has issued so far. */
static int queued_to(const Model *m, const int32_t *s, int k) {
    int a = m->queue_agent[k];
    return m->issued[m->off[a] + a + s[a]];
}

/* Whether `action` (an agent, an in-flight slot, then a tcgen05 queue) is enabled in s. */
static int enabled(const Model *m, const int32_t *s, int action) {
    if (action < m->A) {
        int pc = s[action];
        return pc < m->len[action] && guard(m, s, m->off[action] + pc);
    }
    int k = action - m->A;
    if (k < m->n_slots) return s[m->slot_base + k] > 0;
    k -= m->n_slots;
    return s[m->queue_base + k] < queued_to(m, s, k);
}

/* Take an enabled action in place; the code of the rule the step breaks, or 0. */
static int step(const Model *m, int32_t *s, int action) {
    if (action < m->A) {
        int i = m->off[action] + s[action];
        s[action] += 1;
        return effect(m, s, i, action);
    }
    int k = action - m->A;
    if (k >= m->n_slots) {       /* the oldest tcgen05 op completes: arrives on its set */
        k -= m->n_slots;
        int e = m->q_off[k] + s[m->queue_base + k], v = 0;
        s[m->queue_base + k] += 1;
        for (int j = m->q_t0[e]; j < m->q_t1[e]; j++)
            if (!v) v = arrive(m, s, m->insts[j], 1);
        return v;
    }
    s[m->slot_base + k] -= 1;
    int inst = m->slot_inst[k];
    if (m->slot_effect[k] == EFFECT_COMPLETE_TX) return tx_bytes(m, s, inst, -m->slot_amount[k]);
    if (m->slot_effect[k] == EFFECT_SIGNAL) { s[barrier(m, inst)] += m->slot_amount[k]; return 0; }
    return arrive(m, s, inst, 1);
}

/* -- rules judged on a state (System.state_violations, exit_violations, deadlock) ---------- */

/* One order of the codes for every choice among findings (violations.py `rank`): by number,
 * but the rules judged at the kernel's exit (BP103, BP104, BP105, BP130) after every other, so
 * a race in the last gaps is named at its access, not as the copy it races with left running. */
#define RANK(c) ((c) == 103 || (c) == 104 || (c) == 105 || (c) == 130 ? (c) + 1000 : (c))
#define BEFORE(c, best) ((best) == 0 || RANK(c) < RANK(best))
#define SEE(c) do { int c_ = (c); if (!m->ignored[c_] && BEFORE(c_, best)) best = c_; } while (0)

static int is_done(const Model *m, const int32_t *s) {
    for (int a = 0; a < m->A; a++)
        if (s[a] < m->len[a]) return 0;
    return 1;
}

/* BP146: some block's threads have all exited while a peer still reaches into its shared
 * memory: an arrival or tx step of a thread standing at it, or a delivery in flight into it
 * from another block (hw_barriers.peer_exit_violations). Only while some thread runs. */
static int peer_exit(const Model *m, const int32_t *s) {
    char gone[256];
    int any = 0;
    for (int b = 0; b < m->n_blocks; b++) gone[b] = 1;
    for (int a = 0; a < m->A; a++)
        if (s[a] < m->len[a]) gone[m->agent_block[a]] = 0;
    for (int b = 0; b < m->n_blocks; b++) any |= gone[b];
    if (!any) return 0;
    for (int k = 0; k < m->n_remote; k++) {
        int slot = m->remote_slots[k];
        if (s[m->slot_base + slot] && gone[m->inst_block[m->slot_inst[slot]]]) return 146;
    }
    for (int k = 0; k < m->n_queues; k++) {       /* a queued tcgen05 arrival into it */
        int own = m->agent_block[m->queue_agent[k]], to = queued_to(m, s, k);
        for (int e = m->q_off[k] + s[m->queue_base + k]; e < m->q_off[k] + to; e++)
            for (int j = m->q_t0[e]; j < m->q_t1[e]; j++) {
                int b = m->inst_block[m->insts[j]];
                if (b != own && gone[b]) return 146;
            }
    }
    for (int a = 0; a < m->A; a++) {
        if (s[a] >= m->len[a]) continue;
        int i = m->off[a] + s[a], op = m->op[i], own = m->agent_block[a];
        if (op != OP_ARRIVE && op != OP_ARRIVE_DROP && op != OP_EXPECT_TX && op != OP_ARRIVE_TX &&
            op != OP_COMPLETE_TX && op != OP_ISSUE_ASYNC)
            continue;
        for (int k = m->t0[i]; k < m->t1[i]; k++) {
            int b = m->inst_block[m->insts[k]];
            if (b != own && gone[b]) return 146;
        }
        if (op == OP_ISSUE_ASYNC)
            for (int k = m->x0[i]; k < m->x1[i]; k++) {
                int b = m->inst_block[m->slot_inst[m->slot_list[k]]];
                if (b != own && gone[b]) return 146;
            }
    }
    return 0;
}

/* Entry e's reads (rw 0) or writes (rw 1) in space sp. */
static const uint32_t *mask_of(const Model *m, int sp, int e, int rw) {
    return (const uint32_t *)m->chunks + ((size_t)(sp * m->n_entries + e) * 2 + rw) * m->words;
}

/* One lane's reads and writes against those of the lanes before it (acc_r, acc_w): whether
 * they conflict; then they join them. */
static int lane_meets(const Model *m, uint32_t *acc_r, uint32_t *acc_w, const uint32_t *r,
                      const uint32_t *w) {
    uint32_t hit = 0;
    for (int j = 0; j < m->words; j++) {
        hit |= (w[j] & (acc_r[j] | acc_w[j])) | (r[j] & acc_w[j]);
        acc_r[j] |= r[j];
        acc_w[j] |= w[j];
    }
    return hit != 0;
}

/* memory.py's `racing` in space sp: two live accesses of different lanes (a thread, a group of
 * copies landing on one instance, a thread's tcgen05 queue) overlap and one writes. */
static int racing(const Model *m, const int32_t *s, int sp) {
    int W = m->words;
    uint32_t *acc_r = m->scratch, *acc_w = acc_r + W, *r = acc_w + W, *w = r + W;
    memset(acc_r, 0, 2 * W * sizeof(uint32_t));
    for (int a = 0; a < m->A; a++) {
        int i = m->off[a] + a + s[a], e = m->lane[i];
        if (m->ret_parent[i] >= 0 && s[m->ret_parent[i]] > m->ret_pc[i])
            e = m->ret_entry[i];                  /* joined: its loads and stores have ended */
        if (e >= 0 && lane_meets(m, acc_r, acc_w, mask_of(m, sp, e, 0), mask_of(m, sp, e, 1)))
            return 1;
    }
    for (int g = 0; g < m->n_groups; g++) {       /* copies in flight write their slots */
        int any = 0;
        memset(r, 0, 2 * W * sizeof(uint32_t));
        for (int k = m->group_off[g]; k < m->group_off[g + 1]; k++) {
            if (!s[m->slot_base + m->group_slot[k]] || m->group_entry[k] < 0) continue;
            const uint32_t *x = mask_of(m, sp, m->group_entry[k], 1);
            for (int j = 0; j < W; j++) w[j] |= x[j];
            any = 1;
        }
        if (any && lane_meets(m, acc_r, acc_w, r, w)) return 1;
    }
    for (int k = 0; k < m->n_queues; k++) {       /* queued tcgen05 ops read and write */
        int any = 0;
        memset(r, 0, 2 * W * sizeof(uint32_t));
        for (int e = m->q_off[k] + s[m->queue_base + k]; e < m->q_off[k] + queued_to(m, s, k);
             e++) {
            int x = m->q_entry[e];
            if (x < 0) continue;
            const uint32_t *xr = mask_of(m, sp, x, 0), *xw = mask_of(m, sp, x, 1);
            for (int j = 0; j < W; j++) { r[j] |= xr[j]; w[j] |= xw[j]; }
            any = 1;
        }
        if (any && lane_meets(m, acc_r, acc_w, r, w)) return 1;
    }
    return 0;
}

/* The race codes state s shows (memory.py `violations`): a thread's own race at its gap, and
 * per space a conflict between lanes. */
static int race_code(const Model *m, const int32_t *s) {
    int best = 0;
    for (int a = 0; a < m->A; a++) {
        int c = m->self_code[m->off[a] + a + s[a]];
        if (c) SEE(c);
    }
    for (int sp = 0; sp < 2; sp++)
        if (!m->ignored[200 + sp] && racing(m, s, sp)) SEE(200 + sp);
    return best;
}

/* The least code, among those not ignored, of the rules state s breaks (0: none). */
static int state_code(const Model *m, const int32_t *s) {
    int best = 0, done = 1;
    for (int a = 0; a < m->A; a++) {
        if (s[a] >= m->len[a]) continue;
        done = 0;
        int i = m->off[a] + s[a];
        for (int u = m->use_off[i]; u < m->use_off[i + 1]; u++) {
            int vis = s[m->init_vis[m->use_k[u]]];     /* BP147: an init it cannot see yet */
            if (!(vis & (1 << (m->use_proxy[u] ? m->A : a)))) { SEE(147); break; }
        }
        if (m->op[i] == OP_WAIT_PHASE && phase_of(m, s, m->t0[i]) > m->amount[i])
            SEE(101);            /* a wait for a phase the barrier has already run past */
        else if (m->op[i] == OP_WAIT && s[m->x0[i]] < 0 && phase_of(m, s, m->t0[i]) >= 2)
            SEE(102);            /* a first wait after two completions: a late join */
    }
    if (m->races) {
        int c = race_code(m, s);
        if (c) SEE(c);
    }
    if (!done) {
        if (m->n_blocks > 1) {
            int c = peer_exit(m, s);
            if (c) SEE(c);
        }
        return best;
    }
    /* at kernel exit */
    for (int k = 0; k < m->n_slots; k++)
        if (s[m->slot_base + k]) SEE(105);        /* copies still in flight */
    for (int k = 0; k < m->n_queues; k++)
        if (s[m->queue_base + k] < queued_to(m, s, k)) SEE(105);   /* tcgen05 ops too */
    if (m->exit_async) SEE(105);                  /* a thread's own accesses left running */
    for (int inst = 0; inst < m->n_inst; inst++) {
        const int32_t *b = s + barrier(m, inst);
        if (b[TX] != 0) SEE(130);                 /* tx bytes never delivered or expected */
        else if (b[PENDING] != b[EXPECTED]) SEE(104);   /* a phase left half arrived */
        if (b[PHASE] && m->unwaited[inst]) SEE(103);
        for (int k = m->part_off[inst]; k < m->part_off[inst + 1]; k++)
            if (s[m->part_pos[k]] < b[PHASE]) SEE(103);  /* completions a waiter never saw */
    }
    return best;
}

/* The code of a deadlock: BP130 when a blocked waiter's barrier has every arrival but its tx
 * bytes never come, else BP100. */
static int deadlock_code(const Model *m, const int32_t *s) {
    for (int a = 0; a < m->A; a++) {
        if (s[a] >= m->len[a]) continue;
        int i = m->off[a] + s[a];
        if (!is_wait(m->op[i])) continue;
        const int32_t *b = s + barrier(m, m->t0[i]);
        if (b[PENDING] == 0 && b[TX] != 0) return 130;
    }
    /* BP144: a named barrier waits while a thread its open phase counts has exited (every
     * thread of the block for a count-less bar.sync, else those arriving on it) */
    for (int a = 0; a < m->A; a++) {
        if (s[a] >= m->len[a]) continue;
        int i = m->off[a] + s[a], h = m->t0[i];
        if (m->op[i] != OP_HW_WAIT || m->hw_kind[h]) continue;
        int everyone = s[hw_field(m, h) + HW_COUNT] == m->block_threads;
        const int *who = everyone ? m->hw_mem : m->hw_arr;
        const int *off = everyone ? m->hw_mem_off : m->hw_arr_off;
        for (int k = off[h]; k < off[h + 1]; k++)
            if (s[who[k]] >= m->len[who[k]]) return 144;
    }
    return 100;
}

/* -- the visited set: every state once, packed in one array, found by open addressing ------ */

/* States are stored in 16-bit words when every value fits (pcs, phase counts, arrivals and tx
 * bytes of real protocols do), else in 32-bit ones: a value beyond 16 bits stops a narrow
 * search (WIDE) and compiled.py runs it again wide. */
typedef struct {
    int W, word;                /* fields per state, bytes per field (2 or 4) */
    size_t bytes;               /* W * word */
    uint8_t *states;            /* state id -> its packed fields */
    int32_t *parent, *action;   /* the breadth-first tree (-1 at the initial state) */
    size_t n, cap;              /* states stored, room for */
    /* 0 empty, else (hash high 32 bits << 32) | (id + 1); the slot is taken from the same
     * high 32 bits, so the table grows without reading a state again */
    uint64_t *table;
    size_t table_cap;
} Store;

/* Pack an int32 state into the store's words; -1 if a value does not fit. */
static int pack(const Store *st, const int32_t *s, uint8_t *out) {
    if (st->word == 4) {
        memcpy(out, s, st->bytes);
        return 0;
    }
    int16_t *w = (int16_t *)out;
    uint32_t beyond = 0;          /* no early exit: the loop vectorizes */
    for (int k = 0; k < st->W; k++) {
        beyond |= (uint32_t)(s[k] - INT16_MIN) > (uint32_t)(INT16_MAX - INT16_MIN);
        w[k] = (int16_t)s[k];
    }
    return beyond ? -1 : 0;
}

static void unpack(const Store *st, size_t id, int32_t *s) {
    const uint8_t *p = st->states + id * st->bytes;
    if (st->word == 4) { memcpy(s, p, st->bytes); return; }
    const int16_t *w = (const int16_t *)p;
    for (int k = 0; k < st->W; k++) s[k] = w[k];
}

/* Two independent multiply-xorshift lanes over 8-byte words, then a final mix. */
static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h1 = 0x9E3779B97F4A7C15ull ^ n, h2 = 0xC2B2AE3D27D4EB4Full;
    size_t k = 0;
    for (; k + 16 <= n; k += 16) {
        uint64_t a, b;
        memcpy(&a, p + k, 8);
        memcpy(&b, p + k + 8, 8);
        h1 = (h1 ^ a) * 0xff51afd7ed558ccdull;
        h2 = (h2 ^ b) * 0xc4ceb9fe1a85ec53ull;
        h1 ^= h1 >> 31;
        h2 ^= h2 >> 29;
    }
    uint64_t tail = 0;
    if (k < n) memcpy(&tail, p + k, n - k < 8 ? n - k : 8);
    h1 = (h1 ^ tail) * 0xff51afd7ed558ccdull;
    if (k + 8 < n) {
        tail = 0;
        memcpy(&tail, p + k + 8, n - k - 8);
        h2 = (h2 ^ tail) * 0xc4ceb9fe1a85ec53ull;
    }
    uint64_t h = h1 ^ (h2 >> 17) ^ (h2 << 47);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static size_t store_bytes(const Store *st) {
    return st->cap * (st->bytes + 8) + st->table_cap * 8;
}

static size_t slot_of(uint64_t h, size_t cap) { return (size_t)(h >> 32) & (cap - 1); }

static int store_grow_table(Store *st) {
    size_t cap = st->table_cap * 2;
    uint64_t *t = calloc(cap, sizeof(uint64_t));
    if (!t) return -1;
    for (size_t k = 0; k < st->table_cap; k++) {
        uint64_t e = st->table[k];
        if (!e) continue;
        size_t j = slot_of(e, cap);
        while (t[j]) j = (j + 1) & (cap - 1);
        t[j] = e;
    }
    free(st->table);
    st->table = t;
    st->table_cap = cap;
    return 0;
}

static void store_prefetch(const Store *st, uint64_t h) {
    __builtin_prefetch(st->table + slot_of(h, st->table_cap));
}

/* The id of the packed state p (hash h), adding it (with its place in the tree) if new;
 * *is_new says which; -1 when out of memory. */
static int64_t store_add(Store *st, const uint8_t *p, uint64_t h, int parent, int action,
                         int *is_new) {
    uint64_t tag = h >> 32;
    size_t j = slot_of(h, st->table_cap);
    for (;;) {
        uint64_t e = st->table[j];
        if (!e) break;
        if ((e >> 32) == tag) {
            size_t id = (size_t)(e & 0xffffffffu) - 1;
            if (!memcmp(st->states + id * st->bytes, p, st->bytes)) {
                *is_new = 0;
                return (int64_t)id;
            }
        }
        j = (j + 1) & (st->table_cap - 1);
    }
    if (st->n == st->cap) {
        size_t cap = st->cap * 2;
        uint8_t *states = realloc(st->states, cap * st->bytes);
        if (!states) return -1;
        st->states = states;
        int32_t *pa = realloc(st->parent, cap * sizeof(int32_t));
        if (!pa) return -1;
        st->parent = pa;
        int32_t *ac = realloc(st->action, cap * sizeof(int32_t));
        if (!ac) return -1;
        st->action = ac;
        st->cap = cap;
    }
    size_t id = st->n++;
    memcpy(st->states + id * st->bytes, p, st->bytes);
    st->parent[id] = parent;
    st->action[id] = action;
    st->table[j] = (tag << 32) | (uint64_t)(id + 1);
    *is_new = 1;
    if (st->n * 2 > st->table_cap && store_grow_table(st) < 0) return -1;
    return (int64_t)id;
}

static void store_free(Store *st) {
    free(st->states);
    free(st->parent);
    free(st->action);
    free(st->table);
}

/* -- the side table of bare parity waits (parity_returns.py) ------------------------------- */

/* Per instruction that is a bare parity wait: the completions it was seen returning after, in
 * the order met (breadth first: by depth), each with the shallowest state showing it. A second
 * completion is a conflict and ends the search at the end of its level, so two suffice. */
typedef struct {
    int *count, *completion, *depth, *id;   /* 2 entries per instruction */
    int64_t *rank;                          /* the state's rank (_mproc.c), or NULL */
} Returns;

/* Note the returns state s (id, met at depth) shows; the instruction of its first conflict, or
 * -1. Every agent's return is noted, past a conflict too, as parity_returns.py does: a deadlock
 * in the same level reads the table. */
static int record_returns(const Model *m, Returns *r, const int32_t *s, int depth, int id,
                          int64_t rank) {
    int conflict = -1;
    for (int a = 0; a < m->A; a++) {
        if (s[a] >= m->len[a]) continue;
        int i = m->off[a] + s[a];
        if (m->op[i] != OP_WAIT_PARITY) continue;
        int phase = phase_of(m, s, m->t0[i]);
        i = m->off[m->root[a]] + s[a];    /* keyed by the orbit: its class's first member */
        if ((phase & 1) == m->amount[i]) continue;        /* it cannot return yet */
        int n = r->count[i];
        if ((n > 0 && r->completion[2 * i] == phase) || (n > 1 && r->completion[2 * i + 1] == phase))
            continue;                                      /* shown before, no deeper */
        if (n == 2) continue;
        r->completion[2 * i + n] = phase;
        r->depth[2 * i + n] = depth;
        r->id[2 * i + n] = id;
        if (r->rank) r->rank[2 * i + n] = rank;
        r->count[i] = n + 1;
        if (n + 1 == 2 && conflict < 0) conflict = i;      /* two completions: aliasing */
    }
    return conflict;
}

/* -- the breadth-first search -------------------------------------------------------------- */

typedef struct {
    int status, kind, code, depth, unexpanded, conflict;
    int perm;                   /* a race in a symmetric image: its permutation (-1: none) */
    int64_t pred, action, transitions;
} Outcome;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct { int32_t *ids; size_t n, cap; } Ids;

static int ids_push(Ids *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 1024;
        int32_t *p = realloc(v->ids, cap * sizeof(int32_t));
        if (!p) return -1;
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return 0;
}

/* Report progress to the Python callable every quarter second, as explore.py does; -1 when it
 * raised. */
static int report(PyObject *progress, const Store *st, int depth, size_t frontier, double start,
                  double *next_report) {
    double now = now_seconds();
    if (progress == Py_None || now < *next_report) return 0;
    *next_report = now + 0.25;
    double seconds = now - start;
    PyObject *info = Py_BuildValue("{s:n,s:i,s:n,s:d,s:d,s:d}", "states", (Py_ssize_t)st->n,
                                   "depth", depth, "frontier", (Py_ssize_t)frontier, "rate",
                                   st->n / (seconds > 1e-9 ? seconds : 1e-9), "seconds", seconds,
                                   "bytes_per_state", (double)store_bytes(st) / st->n);
    if (!info) return -1;
    PyObject *res = PyObject_CallOneArg(progress, info);
    Py_DECREF(info);
    if (!res) return -1;
    Py_DECREF(res);
    return 0;
}

/* The actions a state can take: each agent's next instruction, each in-flight slot's
 * delivery, each tcgen05 queue's head. */
static int n_actions_of(const Model *m) { return m->A + m->n_slots + m->n_queues; }

static int ints(PyObject *seq, int **out, Py_ssize_t *n_out);
#include "_symmetry.c"      /* thread symmetry: canonical, twins */
#include "_por.c"           /* persistent sets: choose */

/* Every enabled action of cur in action order (the one-process and the multi-process search
 * both take a state's moves from here): move k's action taken[k], its step's code codes[k],
 * its successor at succ + k * W, packed and hashed unless the step breaks a rule. The number of
 * moves, or -2 when a value does not fit the store's words. */
static int successors(const Model *m, const Store *st, const int32_t *cur, int32_t *succ,
                      uint8_t *packed, uint64_t *hashes, int *codes, int *taken) {
    int W = m->W, n_actions = n_actions_of(m), moves = 0;
    /* a persistent set's steps, else every step but the twins (explore.py `expand`) */
    const char *keep = NULL, *skip = NULL;
    if (m->por && choose(m, m->por, cur, m->por->keep)) keep = m->por->keep;
    else if (m->n_classes) {
        twins(m, cur, (char *)(m->sym_scratch + m->W));
        skip = (const char *)(m->sym_scratch + m->W);
    }
    for (int action = 0; action < n_actions; action++) {
        if (keep ? !keep[action] : (skip && skip[action])) continue;
        if (!enabled(m, cur, action)) continue;
        int32_t *next = succ + (size_t)moves * W;
        memcpy(next, cur, W * sizeof(int32_t));
        codes[moves] = step(m, next, action);
        taken[moves] = action;
        if (m->n_classes) canonical(m, next);
        if (!codes[moves] || m->ignored[codes[moves]]) {
            uint8_t *p = packed + (size_t)moves * st->bytes;
            if (pack(st, next, p) < 0) return -2;
            hashes[moves] = hash_bytes(p, st->bytes);
        }
        moves++;
    }
    return moves;
}

/* Limits: max_states, max_depth (-1: none), timeout seconds (< 0: none), memory bytes.
 * 0 when done (out says how), -1 out of memory, -2 a value beyond the store's words, -3 a
 * Python exception (from the progress callable, or a signal handler's other than Ctrl-C's). */
static int search(const Model *m, Store *st, Returns *r, const int32_t *init, int64_t max_states,
                  int64_t max_depth, double timeout, int64_t max_bytes, PyObject *progress,
                  Outcome *out) {
    int W = m->W, n_actions = n_actions_of(m), is_new, fail = -1;
    double start = now_seconds(), next_report = start + 0.25;
    /* one state's successors, generated before any is looked up, so that the table slots
     * they land in are fetched from memory together */
    int32_t *cur = malloc(W * sizeof(int32_t));
    int32_t *succ = malloc((size_t)(n_actions + 1) * W * sizeof(int32_t));
    uint8_t *packed = malloc((size_t)(n_actions + 1) * st->bytes);
    uint64_t *hashes = malloc((n_actions + 1) * sizeof(uint64_t));
    int *codes = malloc((n_actions + 1) * sizeof(int)), *taken = malloc((n_actions + 1) * sizeof(int));
    Ids frontier = {0}, upcoming = {0};
    memset(out, 0, sizeof(*out));
    out->conflict = -1;
    out->perm = -1;
    if (!cur || !succ || !packed || !hashes || !codes || !taken) goto fail;
    if (pack(st, init, packed) < 0) { fail = -2; goto fail; }
    if (store_add(st, packed, hash_bytes(packed, st->bytes), -1, -1, &is_new) < 0) goto fail;
    int code = state_code_images(m, init, &out->perm);
    if (code) {
        out->status = VIOLATION; out->kind = AT_INITIAL; out->code = code;
        goto done;
    }
    if (ids_push(&frontier, 0) < 0) goto fail;
    while (frontier.n) {
        if (max_depth >= 0 && out->depth >= max_depth) {
            out->status = DEPTH_LIMIT; out->unexpanded = (int)frontier.n;
            goto done;
        }
        upcoming.n = 0;
        /* The level is finished before a verdict; ties go to the first code in RANK order, then the first
         * met, as the Python explorer decides. */
        int dead = 0, best = 0, best_kind = 0, conflict = -1;
        int64_t dead_id = 0, best_pred = 0, best_action = 0;
        int best_perm = -1;
        for (size_t n = 0; n < frontier.n; n++) {
            int32_t id = frontier.ids[n];
            unpack(st, id, cur);
            if (m->track_returns && conflict < 0)
                conflict = record_returns(m, r, cur, out->depth, id, 0);
            int moves = successors(m, st, cur, succ, packed, hashes, codes, taken);
            if (moves < 0) { fail = -2; goto fail; }
            for (int k = 0; k < moves; k++)
                if (!codes[k] || m->ignored[codes[k]]) store_prefetch(st, hashes[k]);
            out->transitions += moves;
            for (int k = 0; k < moves; k++) {
                int v = codes[k], action = taken[k];
                if (v && !m->ignored[v]) {             /* the step itself breaks a rule */
                    if (BEFORE(v, best)) {
                        best = v; best_kind = BY_STEP; best_pred = id; best_action = action;
                    }
                    continue;
                }
                int64_t nid = store_add(st, packed + (size_t)k * st->bytes, hashes[k], id,
                                        action, &is_new);
                if (nid < 0) goto fail;
                if (!is_new) continue;
                int perm = -1, c = state_code_images(m, succ + (size_t)k * W, &perm);
                if (c) {                               /* the state reached breaks a rule */
                    if (BEFORE(c, best)) {
                        best = c; best_kind = IN_STATE; best_pred = id; best_action = action;
                        best_perm = perm;
                    }
                    continue;
                }
                if (ids_push(&upcoming, (int32_t)nid) < 0) goto fail;
            }
            if (!moves && !is_done(m, cur)) {
                int c = deadlock_code(m, cur);
                if (!m->ignored[c] && BEFORE(c, dead)) { dead = c; dead_id = id; }
            }
            if ((n & 255) == 0) {
                if (timeout >= 0 && now_seconds() - start > timeout) {
                    out->status = TIME_LIMIT; goto done;
                }
                if (max_states >= 0 && (int64_t)st->n > max_states) {
                    out->status = STATE_LIMIT; goto done;
                }
                if (max_bytes >= 0 && (int64_t)(store_bytes(st) + 4 * (frontier.cap +
                                                   upcoming.cap)) > max_bytes) {
                    out->status = MEMORY_LIMIT; goto done;
                }
                if (PyErr_CheckSignals() < 0) {     /* Ctrl-C stops the search, reported */
                    if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) { fail = -3; goto fail; }
                    PyErr_Clear();
                    out->status = INTERRUPTED; goto done;
                }
                if (report(progress, st, out->depth, frontier.n - n + upcoming.n, start,
                           &next_report) < 0) { fail = -3; goto fail; }
            }
        }
        if (dead) {
            out->status = VIOLATION; out->kind = DEADLOCK; out->code = dead; out->pred = dead_id;
            goto done;
        }
        if (best && (conflict < 0 || best <= 101)) {
            out->status = VIOLATION; out->kind = best_kind; out->code = best;
            out->pred = best_pred; out->action = best_action;
            out->perm = best_kind == IN_STATE ? best_perm : -1;
            goto done;
        }
        if (conflict >= 0) {
            out->status = VIOLATION; out->kind = ALIASING; out->code = 101;
            out->conflict = conflict;
            goto done;
        }
        if (upcoming.n) out->depth++;
        Ids t = frontier; frontier = upcoming; upcoming = t;
    }
    out->status = VERIFIED;
done:
    fail = 0;
fail:
    free(cur); free(succ); free(packed); free(hashes); free(codes); free(taken);
    free(frontier.ids); free(upcoming.ids);
    return fail;
}

/* -- Python glue --------------------------------------------------------------------------- */

/* A sequence of ints as a freshly allocated int array (at least one element). */
static int ints(PyObject *seq, int **out, Py_ssize_t *n_out) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int *a = malloc((n ? n : 1) * sizeof(int));
    if (!a) { Py_DECREF(fast); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t k = 0; k < n; k++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, k));
        if (v == -1 && PyErr_Occurred()) { free(a); Py_DECREF(fast); return -1; }
        a[k] = (int)v;
    }
    Py_DECREF(fast);
    *out = a;
    if (n_out) *n_out = n;
    return 0;
}

#define N_ARRAYS 58
#define N_SCALARS 22

/* The Model's arrays in the order flatten.py lists them. */
static void model_arrays(Model *m, int **slots[N_ARRAYS]) {
    int **all[N_ARRAYS] = {&m->len, &m->off, &m->op, &m->t0, &m->t1, &m->amount, &m->x0,
                           &m->x1, &m->insts, &m->slot_list, &m->slot_effect, &m->slot_inst,
                           &m->slot_amount, &m->part_off, &m->part_waiter, &m->part_pos,
                           &m->part_last, &m->agent_block, &m->inst_block, &m->remote_slots,
                           &m->unwaited, &m->aux2, &m->issued, &m->queue_agent, &m->q_off,
                           &m->q_t0, &m->q_t1, &m->hw_kind, &m->hw_block, &m->hw_mem_off,
                           &m->hw_mem, &m->hw_arr_off, &m->hw_arr, &m->init_vis, &m->init_inst,
                           &m->init_rel, &m->init_relc, &m->use_off, &m->use_k, &m->use_proxy,
                           &m->lane, &m->self_code, &m->group_off, &m->group_slot,
                           &m->group_entry, &m->q_entry, &m->chunks, &m->ret_parent,
                           &m->ret_pc, &m->ret_entry, &m->cls_off,
                           &m->cls_member, &m->loc_off, &m->loc_pos, &m->root, &m->perm_off,
                           &m->perm_from, &m->perm_to};
    memcpy(slots, all, sizeof(all));
}

static void model_free(Model *m) {
    int **slots[N_ARRAYS];
    model_arrays(m, slots);
    for (int k = 0; k < N_ARRAYS; k++) { free(*slots[k]); *slots[k] = NULL; }
    free(m->scratch);
    free(m->sym_scratch);
    m->scratch = NULL;
    m->sym_scratch = NULL;
}

/* A flattened System (flatten.py) into m, zeroed first; -1 with a Python exception set (what
 * was loaded is freed by model_free). Both searches (this file's and _mproc.c's) load here. */
static int model_load(Model *m, PyObject *scalars, PyObject *arrays, PyObject *ignored) {
    memset(m, 0, sizeof(*m));
    int **slots[N_ARRAYS];
    model_arrays(m, slots);
    int *sc = NULL, *ign = NULL, fail = -1;
    Py_ssize_t n_sc, n_ign;
    int ok = ints(scalars, &sc, &n_sc) == 0 && n_sc == N_SCALARS &&
             ints(ignored, &ign, &n_ign) == 0 &&
             PySequence_Check(arrays) && PySequence_Size(arrays) == N_ARRAYS;
    for (int k = 0; ok && k < N_ARRAYS; k++) {
        PyObject *item = PySequence_GetItem(arrays, k);
        ok = item && ints(item, slots[k], NULL) == 0;
        Py_XDECREF(item);
    }
    if (!ok) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "malformed flattened System");
        goto end;
    }
    m->W = sc[0]; m->A = sc[1]; m->n_inst = sc[2]; m->slot_base = sc[3]; m->n_slots = sc[4];
    m->max_tx = sc[5]; m->exit_async = sc[6]; m->track_returns = sc[7];
    m->n_blocks = sc[8]; m->n_remote = sc[9];
    m->n_queues = sc[10]; m->queue_base = sc[11]; m->n_hw = sc[12]; m->hw_base = sc[13];
    m->block_threads = sc[14]; m->n_init = sc[15];
    m->races = sc[16]; m->words = sc[17]; m->n_entries = sc[18]; m->n_groups = sc[19];
    m->n_classes = sc[20]; m->n_perms = sc[21];
    m->scratch = malloc(4 * (size_t)(m->words > 0 ? m->words : 1) * sizeof(uint32_t));
    /* a class's local parts or a race image (the state's width), then the twin steps' marks */
    m->sym_scratch = malloc((size_t)m->W * sizeof(int32_t) + m->A + m->n_slots + m->n_queues + 1);
    if (!m->scratch || !m->sym_scratch) { PyErr_NoMemory(); goto end; }
    if (m->n_init && m->A + 2 > 31) {
        PyErr_SetString(PyExc_ValueError, "init visibility of more than 29 agents");
        goto end;
    }
    if (m->n_blocks < 1 || m->n_blocks > 256) {
        PyErr_SetString(PyExc_ValueError, "1 to 256 blocks");
        goto end;
    }
    for (Py_ssize_t k = 0; k < n_ign; k++)
        if (ign[k] >= 0 && ign[k] < 1000) m->ignored[ign[k]] = 1;
    fail = 0;
end:
    free(sc); free(ign);
    return fail;
}

static PyObject *core_explore(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *scalars, *arrays, *ignored, *init_obj, *progress = Py_None, *tables = Py_None;
    long long max_states, max_depth, max_bytes;
    double timeout;
    int word;
    if (!PyArg_ParseTuple(args, "OOOOLLdLi|OO", &scalars, &arrays, &ignored, &init_obj,
                          &max_states, &max_depth, &timeout, &max_bytes, &word, &progress,
                          &tables))
        return NULL;
    Model m;
    Por por = {0};
    int *init = NULL;
    Py_ssize_t n_init;
    PyObject *result = NULL;
    Store st = {0};
    Returns r = {0};
    if (model_load(&m, scalars, arrays, ignored) < 0 || ints(init_obj, &init, &n_init) < 0)
        goto cleanup;
    if (tables != Py_None) {            /* partial-order reduction: flatten_por.py's tables */
        if (por_load(&m, &por, tables) < 0) goto cleanup;
        m.por = &por;
    }
    if (n_init != m.W) {
        PyErr_SetString(PyExc_ValueError, "initial state of the wrong width");
        goto cleanup;
    }
    int n_instr = m.off[m.A];
    st.W = m.W;
    st.word = word == 2 ? 2 : 4;
    st.bytes = (size_t)m.W * st.word;
    st.cap = 1024;
    st.table_cap = 4096;
    st.states = malloc(st.cap * st.bytes);
    st.parent = malloc(st.cap * sizeof(int32_t));
    st.action = malloc(st.cap * sizeof(int32_t));
    st.table = calloc(st.table_cap, sizeof(uint64_t));
    r.count = calloc(n_instr + 1, sizeof(int));
    r.completion = calloc(2 * n_instr + 2, sizeof(int));
    r.depth = calloc(2 * n_instr + 2, sizeof(int));
    r.id = calloc(2 * n_instr + 2, sizeof(int));
    int32_t *init32 = (int32_t *)init;     /* int is 32 bits on every platform CPython runs on */
    Outcome out;
    int done = -1;
    if (st.states && st.parent && st.action && st.table && r.count && r.completion && r.depth &&
        r.id)
        done = search(&m, &st, &r, init32, max_states, max_depth, timeout, max_bytes, progress,
                      &out);
    if (done == -3) goto cleanup;      /* the Python exception propagates */
    if (done == -2) {                  /* a value beyond 16 bits: compiled.py searches wide */
        result = Py_BuildValue("{s:s}", "status", "wide");
        goto cleanup;
    }
    if (done < 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    PyObject *table = PyList_New(0);
    if (!table) goto cleanup;
    for (int i = 0; i < n_instr; i++)
        for (int k = 0; k < r.count[i]; k++) {
            PyObject *row = Py_BuildValue("(iiii)", i, r.completion[2 * i + k],
                                          r.depth[2 * i + k], r.id[2 * i + k]);
            if (!row || PyList_Append(table, row) < 0) { Py_XDECREF(row); Py_DECREF(table); goto cleanup; }
            Py_DECREF(row);
        }
    /* The tree: each state's predecessor and the action that reached it, as int32 bytes. */
    PyObject *parents = PyBytes_FromStringAndSize((const char *)st.parent, st.n * sizeof(int32_t));
    PyObject *actions = PyBytes_FromStringAndSize((const char *)st.action, st.n * sizeof(int32_t));
    if (parents && actions)
        result = Py_BuildValue("{s:i,s:n,s:L,s:i,s:i,s:i,s:i,s:L,s:L,s:i,s:i,s:O,s:O,s:O,s:n}",
                               "status", out.status, "states", (Py_ssize_t)st.n,
                               "transitions", (long long)out.transitions, "depth", out.depth,
                               "unexpanded", out.unexpanded, "kind", out.kind, "code", out.code,
                               "pred", (long long)out.pred, "action", (long long)out.action,
                               "conflict", out.conflict, "perm", out.perm, "parents", parents,
                               "actions", actions,
                               "returns", table, "bytes", (Py_ssize_t)store_bytes(&st));
    Py_XDECREF(parents);
    Py_XDECREF(actions);
    Py_DECREF(table);
cleanup:
    store_free(&st);
    free(r.count); free(r.completion); free(r.depth); free(r.id);
    free(init);
    por_free(&por);
    model_free(&m);
    return result;
}

static PyMethodDef methods[] = {
    {"explore", core_explore, METH_VARARGS,
     "explore(scalars, arrays, ignored, initial, max_states, max_depth, timeout, max_bytes, "
     "word, progress=None) -> "
     "dict: the raw breadth-first search of a flattened System (checker/engines/flatten.py)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core",
                                    "The compiled exploration core (checker/engines/compiled.py).",
                                    -1, methods, NULL, NULL, NULL, NULL};

#ifndef BP_SOURCE_DIGEST
#define BP_SOURCE_DIGEST ""
#endif

/* The digest of the sources it was built from (setup.py, core_sources.py). */
PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_DIGEST", BP_SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
