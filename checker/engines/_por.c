/* The persistent-set chooser of por.py (`PersistentSets.chooser`), stated again over the
 * tables flatten_por.py takes from it: included by _core.c. Resource masks are RW chunks of 30
 * bits, memory masks MW; actor sets one 64-bit word (at most 64 actors: flatten_por.py). The
 * closure is por.py's step by step (the same seeds, order, horizons and tie-breaks), so both
 * choose the same set in every state; por.py's caches (per mask, per state) change no choice
 * and are left out. */

typedef struct Por {
    int RW, MW, memory;
    /* per instruction: reads, writes, future reads and writes, guard-only reads, blocks it
     * stops reaching into (RW each); memory it stops touching (MW); the resource bit and seen
     * position of a Pallas wait it moves onto (-1: none); whether it is local; its stops */
    uint32_t *r, *w, *fr, *fw, *only, *leaves, *rel_r, *rel_w;
    int *onto_bit, *onto_pos, *local, *st_off;
    /* stops: the guard's reads, its instruction, the future before it (reads, writes) */
    uint32_t *st_gr, *st_hr, *st_hw;
    int *st_instr;
    uint32_t *fm_r, *fm_w;          /* per (agent, pc) at `issued`'s index: future memory */
    uint32_t *block_bit, *slot_w, *slot_mem, *entry_w, *entry_r_mem, *entry_w_mem;
    /* scratch, per actor (at most 64): masks, stops taken, horizons */
    uint32_t *cur_r, *cur_w, *f_r, *f_w, *f_t, *mem_r, *mem_w;
    int *act, *hz, *stop_n, *stop_ids;
    uint64_t *conflicts, *stop_need;
    int n_stops;
    char *keep;                     /* per action: in the chosen set */
    /* sets that keep BP101 and BP102 (por_overrun.py): per Pallas barrier k its resource bit,
     * instance and waiters (agent, seen position, last pc waiting on it); per (agent, pc) at
     * `issued`'s index the prefix sums of arrivals on each (and of uncounted steps); per slot
     * its barrier k and arrivals per delivery (-1 uncounted); per queue entry its arrivals */
    int overruns, n_ov;
    int *ov_bit, *ov_inst, *ov_w_off, *ov_w_agent, *ov_w_pos, *ov_w_last, *ov_cum, *ov_unb,
        *ov_slot_k, *ov_slot_per, *ov_entry;
    int *ov_k, *ov_lag;             /* scratch: the barriers at risk in this state */
    uint64_t *ov_wr, *ov_to;
} Por;

enum { POR_ARRAYS = 35, POR_SCALARS = 5 };

static int any_and(const uint32_t *a, const uint32_t *b, int n) {
    for (int k = 0; k < n; k++) if (a[k] & b[k]) return 1;
    return 0;
}

static int is_zero(const uint32_t *a, int n) {
    for (int k = 0; k < n; k++) if (a[k]) return 0;
    return 1;
}

static int popcount64(uint64_t x) { return __builtin_popcountll(x); }
static int low_index(uint64_t x) { return __builtin_ctzll(x); }

/* The thread of `cands` (a mask over threads) dragging the fewest actors in: a blocked one
 * with the fewest enablers, else the first (por.py `quietest`). */
static int quietest(const Por *p, uint64_t cands, uint64_t on) {
    int best = -1, best_n = 0;
    for (uint64_t m = cands; m; m &= m - 1) {
        int k = low_index(m);
        if ((on >> k) & 1) continue;
        int n = popcount64(p->conflicts[k] & ~(1ULL << k));
        if (best < 0 || n < best_n) { best = k; best_n = n; }
    }
    return best >= 0 ? best : low_index(cands);
}

/* Actor j's stops whose guard is false now, with their other writers (once per state; a
 * thread taken first by `overruns` keeps its place in `staged`, which changes no choice: its
 * whole future, without a stop, conflicts with the step that pulls it in). */
static void take_stops(const Model *m, Por *p, const int32_t *s, int L, int j) {
    int RW = p->RW, a = p->act[j], ii = m->off[a] + s[a], n = 0, base = p->n_stops;
    for (int t = p->st_off[ii]; t < p->st_off[ii + 1]; t++) {
        if (guard(m, s, p->st_instr[t])) continue;
        uint64_t wr = 0;
        for (int k = 0; k < L; k++)
            if (any_and(p->st_gr + (size_t)t * RW, p->f_w + k * RW, RW)) wr |= 1ULL << k;
        p->stop_ids[base + n] = t;
        p->stop_need[base + n] = wr & ~(1ULL << j);
        n++;
    }
    p->stop_n[j] = n;
    p->hz[j + 64] = base;     /* where its stops start */
    p->n_stops += n;
}

/* por_overrun.py `completions`: 0, 1 or 2 (standing for more) completions of a barrier with
 * at most `arrivals` more. */
static int ov_completions(int64_t arrivals, int wild, int pending, int expected) {
    if (wild || expected <= 0) return 2;
    int64_t c;
    if (pending > 0) {
        if (arrivals < pending) return 0;
        c = 1 + (arrivals - pending) / expected;
    } else c = 1 + arrivals / expected;
    return c < 2 ? (int)c : 2;
}

/* por.py's `overruns`: the actors outside `inside` that must join it so that no path outside
 * it leaves a Pallas waiter two completions behind. The barriers at risk (a waiter that will
 * wait again) with their lag, writers and touchers are taken once per state (*risk_n < 0). */
static uint64_t overruns(const Model *m, Por *p, const int32_t *s, int L, uint64_t inside,
                         int *risk_n) {
    int A = m->A, RW = p->RW, N = p->n_ov;
    if (*risk_n < 0) {
        int n = 0;
        for (int k = 0; k < N; k++) {
            int phase = s[barrier(m, p->ov_inst[k]) + PHASE], worst = -1;
            for (int t = p->ov_w_off[k]; t < p->ov_w_off[k + 1]; t++) {
                if (s[p->ov_w_agent[t]] > p->ov_w_last[t]) continue;
                int seen = s[p->ov_w_pos[t]], behind = phase - (seen > 0 ? seen : 0);
                if (behind > worst) worst = behind;
            }
            if (worst < 0) continue;
            int word = p->ov_bit[k] / 30;
            uint32_t b = 1u << (p->ov_bit[k] % 30);
            uint64_t wr = 0, to = 0;
            for (int j = 0; j < L; j++) {
                if (p->f_w[j * RW + word] & b) wr |= 1ULL << j;
                if (p->f_t[j * RW + word] & b) to |= 1ULL << j;
            }
            p->ov_k[n] = k; p->ov_lag[n] = worst; p->ov_wr[n] = wr; p->ov_to[n] = to;
            n++;
        }
        *risk_n = n;
    }
    uint64_t add = 0;
    for (int r = 0; r < *risk_n; r++) {
        int k = p->ov_k[r], behind = p->ov_lag[r];
        if (behind >= 2) { add |= p->ov_to[r] & ~inside; continue; }
        uint64_t out = p->ov_wr[r] & ~inside;
        if (!out) continue;
        int64_t total = 0, got;
        int wild = 0, loose;
        uint64_t arrivers = 0;
        for (uint64_t mm = out; mm; mm &= mm - 1) {
            int j = low_index(mm), x = p->act[j];
            if (x < A) {
                int pc = s[x], end = m->len[x];
                if (p->stop_n[j] < 0) take_stops(m, p, s, L, j);
                for (int t = 0, base = p->hz[j + 64]; t < p->stop_n[j]; t++)
                    if (!(p->stop_need[base + t] & ~inside)) {
                        end = p->st_instr[p->stop_ids[base + t]] - m->off[x];
                        break;
                    }
                size_t at = (size_t)(m->off[x] + x) * N + k;
                loose = p->ov_unb[at + (size_t)end * N] > p->ov_unb[at + (size_t)pc * N];
                got = p->ov_cum[at + (size_t)end * N] - p->ov_cum[at + (size_t)pc * N];
            } else if (x < A + m->n_slots) {
                int sl = x - A, mine = p->ov_slot_k[sl] == k;
                loose = mine && p->ov_slot_per[sl] < 0;
                got = mine && p->ov_slot_per[sl] > 0 ?
                    (int64_t)p->ov_slot_per[sl] * s[m->slot_base + sl] : 0;
            } else {
                int q = x - A - m->n_slots;
                got = 0; loose = 0;
                for (int e = s[m->queue_base + q]; e < queued_to(m, s, q); e++)
                    got += p->ov_entry[(size_t)(m->q_off[q] + e) * N + k];
            }
            total += got;
            wild |= loose;
            if (got || loose) arrivers |= 1ULL << j;
        }
        int b = barrier(m, p->ov_inst[k]);
        /* those that arrive first (the set is checked again once closed), the writers that
         * may complete a phase by tx bytes alone after */
        if (behind + ov_completions(total, wild, s[b + PENDING], s[b + EXPECTED]) > 1)
            add |= arrivers ? arrivers : out;
    }
    return add;
}

/* Mark in `keep` (n_actions entries) the enabled actions of the chosen persistent set; 0 when
 * the set is every enabled action (or no seed qualifies), 1 when chosen. */
static int choose(const Model *m, Por *p, const int32_t *s, char *keep) {
    int A = m->A, RW = p->RW, MW = p->MW;
    /* a local step first (unless it must keep overruns: others may complete a barrier) */
    for (int a = 0; a < A && !p->overruns; a++) {
        int pc = s[a];
        if (pc >= m->len[a]) continue;
        int i = m->off[a] + pc;
        if (!p->local[i]) continue;
        if ((p->onto_bit[i] < 0 || s[p->onto_pos[i]] >= 0) && guard(m, s, i)) {
            memset(keep, 0, n_actions_of(m));
            keep[a] = 1;
            return 1;
        }
    }
    int L = 0, n_threads;
    uint64_t on = 0, staged = 0;
    for (int a = 0; a < A; a++) {
        int pc = s[a];
        if (pc >= m->len[a]) continue;
        int i = m->off[a] + pc, j = L++;
        p->act[j] = a;
        memcpy(p->cur_r + j * RW, p->r + (size_t)i * RW, RW * 4);
        memcpy(p->cur_w + j * RW, p->w + (size_t)i * RW, RW * 4);
        memcpy(p->f_r + j * RW, p->fr + (size_t)i * RW, RW * 4);
        memcpy(p->f_w + j * RW, p->fw + (size_t)i * RW, RW * 4);
        if (p->onto_bit[i] >= 0 && s[p->onto_pos[i]] < 0)
            p->cur_r[j * RW + p->onto_bit[i] / 30] |= 1u << (p->onto_bit[i] % 30);
        if (guard(m, s, i)) on |= 1ULL << j;
        else for (int k = 0; k < RW; k++) p->cur_r[j * RW + k] |= p->only[(size_t)i * RW + k];
        if (p->st_off[i + 1] > p->st_off[i]) staged |= 1ULL << j;
    }
    n_threads = L;
    for (int k = 0; k < m->n_slots; k++) {
        if (!s[m->slot_base + k]) continue;
        int j = L++;
        on |= 1ULL << j;
        p->act[j] = A + k;
        memset(p->cur_r + j * RW, 0, RW * 4);
        memcpy(p->cur_w + j * RW, p->slot_w + (size_t)k * RW, RW * 4);
        memset(p->f_r + j * RW, 0, RW * 4);
        memcpy(p->f_w + j * RW, p->slot_w + (size_t)k * RW, RW * 4);
    }
    for (int q = 0; q < m->n_queues; q++) {
        int first = s[m->queue_base + q], end = queued_to(m, s, q);
        if (first >= end) continue;
        int j = L++;
        on |= 1ULL << j;
        p->act[j] = A + m->n_slots + q;
        memset(p->cur_r + j * RW, 0, RW * 4);
        memcpy(p->cur_w + j * RW, p->entry_w + (size_t)(m->q_off[q] + first) * RW, RW * 4);
        memset(p->f_r + j * RW, 0, RW * 4);
        memset(p->f_w + j * RW, 0, RW * 4);
        for (int e = first; e < end; e++)
            for (int k = 0; k < RW; k++)
                p->f_w[j * RW + k] |= p->entry_w[(size_t)(m->q_off[q] + e) * RW + k];
    }
    for (int j = 0; j < L; j++)
        for (int k = 0; k < RW; k++) p->f_t[j * RW + k] = p->f_r[j * RW + k] | p->f_w[j * RW + k];
    int n_on = popcount64(on);
    if (n_on <= 1) return 0;
    /* per actor: those whose future writes what its step (or guard) reads, and for an
     * enabled step those whose future touches what it writes */
    for (int i = 0; i < L; i++) {
        uint64_t c = 0;
        for (int j = 0; j < L; j++) {
            if (any_and(p->cur_r + i * RW, p->f_w + j * RW, RW)) c |= 1ULL << j;
            else if (((on >> i) & 1) && any_and(p->cur_w + i * RW, p->f_t + j * RW, RW))
                c |= 1ULL << j;
        }
        p->conflicts[i] = c;
    }
    int mem_done = 0;
    uint64_t blocked = (n_threads ? (~0ULL >> (64 - n_threads)) : 0) & ~on;
    uint64_t best = 0;
    int best_size = n_on;
    /* starts: (count, seed, extra), sorted stably by count */
    int n_starts = 0, seeds[64], counts[64];
    uint64_t extras[64];
    int anchor = -1;
    for (int j = 0; j < n_threads; j++) {
        if (!((on >> j) & 1)) continue;
        int a = p->act[j], i = m->off[a] + s[a];
        uint64_t extra = 0;
        const uint32_t *gone = p->leaves + (size_t)i * RW;
        for (int k = 0; k < RW; k++)
            for (uint32_t g = gone[k]; g; g &= g - 1) {
                int bit = k * 30 + __builtin_ctz(g);
                uint64_t members = 0;
                for (int t = 0; t < n_threads; t++) {
                    const uint32_t *bb = p->block_bit + (size_t)p->act[t] * RW;
                    if (bb[bit / 30] >> (bit % 30) & 1) members |= 1ULL << t;
                }
                if (members) extra |= 1ULL << quietest(p, members, on);
            }
        seeds[n_starts] = j; extras[n_starts] = extra;
        counts[n_starts++] = popcount64(p->conflicts[j] | extra);
    }
    if (n_threads)
        for (int j = n_threads; j < L; j++) {
            if (anchor < 0) anchor = quietest(p, ~0ULL >> (64 - n_threads), on);
            seeds[n_starts] = j; extras[n_starts] = 1ULL << anchor;
            counts[n_starts++] = popcount64(p->conflicts[j] | (1ULL << anchor));
        }
    for (int x = 1; x < n_starts; x++)       /* a stable insertion sort by count */
        for (int y = x; y > 0 && counts[y - 1] > counts[y]; y--) {
            int t = counts[y]; counts[y] = counts[y - 1]; counts[y - 1] = t;
            t = seeds[y]; seeds[y] = seeds[y - 1]; seeds[y - 1] = t;
            uint64_t e = extras[y]; extras[y] = extras[y - 1]; extras[y - 1] = e;
        }
    for (int j = 0; j < L; j++) p->stop_n[j] = -1;     /* stops not taken yet this state */
    p->n_stops = 0;
    uint64_t sure = on & ~staged;
    int risk_n = -1;                /* the barriers at risk: taken when first needed */
    for (int x = 0; x < n_starts; x++) {
        int seed = seeds[x];
        uint64_t inside = (1ULL << seed) | extras[x];
        if (popcount64((inside | (p->conflicts[seed] & sure)) & on) >= best_size) continue;
        for (int j = 0; j < L; j++) p->hz[j] = -2;      /* horizons not taken for this seed */
        if (p->memory) {
            const uint32_t *sr, *sw;
            if (seed >= n_threads) {
                int k = p->act[seed] - A;
                if (k < m->n_slots) { sr = NULL; sw = p->slot_mem + (size_t)k * MW; }
                else {
                    int q = k - m->n_slots, e = m->q_off[q] + s[m->queue_base + q];
                    sr = p->entry_r_mem + (size_t)e * MW; sw = p->entry_w_mem + (size_t)e * MW;
                }
            } else {
                int a = p->act[seed], i = m->off[a] + s[a];
                sr = p->rel_r + (size_t)i * MW; sw = p->rel_w + (size_t)i * MW;
            }
            if ((sr && !is_zero(sr, MW)) || !is_zero(sw, MW)) {
                if (!mem_done) {
                    for (int j = 0; j < L; j++) {
                        int xa = p->act[j];
                        uint32_t *mr = p->mem_r + j * MW, *mw = p->mem_w + j * MW;
                        if (xa < A) {
                            size_t at = (size_t)(m->off[xa] + xa + s[xa]) * MW;
                            memcpy(mr, p->fm_r + at, MW * 4); memcpy(mw, p->fm_w + at, MW * 4);
                        } else if (xa < A + m->n_slots) {
                            memset(mr, 0, MW * 4);
                            memcpy(mw, p->slot_mem + (size_t)(xa - A) * MW, MW * 4);
                        } else {
                            int q = xa - A - m->n_slots;
                            memset(mr, 0, MW * 4); memset(mw, 0, MW * 4);
                            for (int e = s[m->queue_base + q]; e < queued_to(m, s, q); e++)
                                for (int k = 0; k < MW; k++) {
                                    mr[k] |= p->entry_r_mem[(size_t)(m->q_off[q] + e) * MW + k];
                                    mw[k] |= p->entry_w_mem[(size_t)(m->q_off[q] + e) * MW + k];
                                }
                        }
                    }
                    mem_done = 1;
                }
                for (int j = 0; j < L; j++) {
                    const uint32_t *mr = p->mem_r + j * MW, *mw = p->mem_w + j * MW;
                    int hit = (sr && any_and(sr, mw, MW)) || any_and(sw, mr, MW) ||
                              any_and(sw, mw, MW);
                    if (hit) inside |= 1ULL << j;
                }
            }
        }
        uint64_t todo = inside;
        while (todo) {
            int i = low_index(todo);
            todo &= todo - 1;
            uint64_t new_ = p->conflicts[i] & ~inside;
            for (uint64_t b = new_ & blocked; b; b &= b - 1) {
                uint64_t low = b & -b;
                if (!(p->conflicts[low_index(low)] & ~inside & ~low)) new_ ^= low;
            }
            uint64_t mm = new_ & staged;
            if (mm) {
                const uint32_t *r = p->cur_r + i * RW, *w = p->cur_w + i * RW;
                int enabled_u = (on >> i) & 1;
                for (; mm; mm &= mm - 1) {
                    uint64_t low = mm & -mm;
                    int j = low_index(low);
                    if (p->hz[j] == -2) {
                        if (p->stop_n[j] < 0) {
                            take_stops(m, p, s, L, j);
                            if (!p->stop_n[j]) staged &= ~low;
                        }
                        int hz = -1, base = p->hz[j + 64];
                        for (int t = 0; t < p->stop_n[j]; t++)
                            if (!(p->stop_need[base + t] & ~inside)) {
                                hz = p->stop_ids[base + t];
                                break;
                            }
                        p->hz[j] = hz;
                    }
                    const uint32_t *hr, *hw;
                    if (p->hz[j] == -1) { hr = p->f_r + j * RW; hw = p->f_w + j * RW; }
                    else {
                        hr = p->st_hr + (size_t)p->hz[j] * RW;
                        hw = p->st_hw + (size_t)p->hz[j] * RW;
                    }
                    int clear = enabled_u ? !(any_and(w, hr, RW) || any_and(w, hw, RW) ||
                                              any_and(r, hw, RW))
                                          : !any_and(r, hw, RW);
                    if (clear) new_ ^= low;
                }
            }
            if (new_) {
                inside |= new_;
                todo |= new_;
                if (popcount64(inside & on) >= best_size) break;
            }
            if (p->overruns && !todo) {
                /* closed: the actors that could overrun a phase outside it join */
                todo = overruns(m, p, s, L, inside, &risk_n);
                inside |= todo;
                if (todo && popcount64(inside & on) >= best_size) break;
            }
        }
        int size = popcount64(inside & on);
        if (size < best_size) {
            best = inside; best_size = size;
            if (size == 1) break;
        }
    }
    if (!best) return 0;
    best &= on;
    memset(keep, 0, n_actions_of(m));
    for (uint64_t b = best; b; b &= b - 1) keep[p->act[low_index(b)]] = 1;
    return 1;
}

/* The tables of flatten_por.py (scalars, arrays) into p, zeroed first; -1 with a Python
 * exception set (what was loaded is freed by por_free). */
static void por_arrays(Por *p, void **slots[POR_ARRAYS]) {
    void **all[POR_ARRAYS] = {(void **)&p->r, (void **)&p->w, (void **)&p->fr, (void **)&p->fw,
        (void **)&p->only, (void **)&p->leaves, (void **)&p->rel_r, (void **)&p->rel_w,
        (void **)&p->onto_bit, (void **)&p->onto_pos, (void **)&p->local, (void **)&p->st_off,
        (void **)&p->st_gr, (void **)&p->st_instr, (void **)&p->st_hr, (void **)&p->st_hw,
        (void **)&p->fm_r, (void **)&p->fm_w, (void **)&p->block_bit, (void **)&p->slot_w,
        (void **)&p->slot_mem, (void **)&p->entry_w, (void **)&p->entry_r_mem,
        (void **)&p->entry_w_mem, (void **)&p->ov_bit, (void **)&p->ov_inst,
        (void **)&p->ov_w_off, (void **)&p->ov_w_agent, (void **)&p->ov_w_pos,
        (void **)&p->ov_w_last, (void **)&p->ov_cum, (void **)&p->ov_unb, (void **)&p->ov_slot_k,
        (void **)&p->ov_slot_per, (void **)&p->ov_entry};
    memcpy(slots, all, sizeof(all));
}

static void por_free(Por *p) {
    void **slots[POR_ARRAYS];
    por_arrays(p, slots);
    for (int k = 0; k < POR_ARRAYS; k++) { free(*slots[k]); *slots[k] = NULL; }
    free(p->cur_r); free(p->cur_w); free(p->f_r); free(p->f_w); free(p->f_t);
    free(p->mem_r); free(p->mem_w); free(p->act); free(p->hz); free(p->stop_n);
    free(p->stop_ids); free(p->conflicts); free(p->stop_need); free(p->keep);
    free(p->ov_k); free(p->ov_lag); free(p->ov_wr); free(p->ov_to);
    memset(p, 0, sizeof(*p));
}

static int por_load(const Model *m, Por *p, PyObject *tables) {
    memset(p, 0, sizeof(*p));
    PyObject *scalars, *arrays;
    int *sc = NULL;
    Py_ssize_t n_sc;
    if (!PyArg_ParseTuple(tables, "OO", &scalars, &arrays)) return -1;
    if (ints(scalars, &sc, &n_sc) < 0) return -1;
    if (n_sc != POR_SCALARS || !PySequence_Check(arrays) ||
        PySequence_Size(arrays) != POR_ARRAYS) {
        free(sc);
        PyErr_SetString(PyExc_ValueError, "malformed persistent-set tables");
        return -1;
    }
    p->RW = sc[0]; p->MW = sc[1]; p->memory = sc[2]; p->overruns = sc[3]; p->n_ov = sc[4];
    free(sc);
    void **slots[POR_ARRAYS];
    por_arrays(p, slots);
    for (int k = 0; k < POR_ARRAYS; k++) {
        PyObject *item = PySequence_GetItem(arrays, k);
        int ok = item && ints(item, (int **)slots[k], NULL) == 0;
        Py_XDECREF(item);
        if (!ok) return -1;
    }
    int n_act = n_actions_of(m);
    if (n_act > 64) { PyErr_SetString(PyExc_ValueError, "more than 64 actors"); return -1; }
    p->cur_r = malloc(64 * p->RW * 4); p->cur_w = malloc(64 * p->RW * 4);
    p->f_r = malloc(64 * p->RW * 4); p->f_w = malloc(64 * p->RW * 4);
    p->f_t = malloc(64 * p->RW * 4);
    p->mem_r = malloc(64 * p->MW * 4); p->mem_w = malloc(64 * p->MW * 4);
    p->act = malloc(64 * sizeof(int)); p->hz = malloc(128 * sizeof(int));
    p->stop_n = malloc(64 * sizeof(int));
    int max_stops = 1;
    for (int a = 0; a < m->A; a++)
        for (int pc = 0; pc < m->len[a]; pc++) {
            int i = m->off[a] + pc, n = p->st_off[i + 1] - p->st_off[i];
            if (n > max_stops) max_stops = n;
        }
    p->stop_ids = malloc((size_t)64 * max_stops * sizeof(int));
    p->stop_need = malloc((size_t)64 * max_stops * sizeof(uint64_t));
    p->conflicts = malloc(64 * sizeof(uint64_t));
    p->keep = malloc(n_act + 1);
    int n_ov = p->n_ov > 0 ? p->n_ov : 1;
    p->ov_k = malloc(n_ov * sizeof(int)); p->ov_lag = malloc(n_ov * sizeof(int));
    p->ov_wr = malloc(n_ov * sizeof(uint64_t)); p->ov_to = malloc(n_ov * sizeof(uint64_t));
    if (!p->ov_k || !p->ov_lag || !p->ov_wr || !p->ov_to) { PyErr_NoMemory(); return -1; }
    if (!p->cur_r || !p->cur_w || !p->f_r || !p->f_w || !p->f_t || !p->mem_r || !p->mem_w ||
        !p->act || !p->hz || !p->stop_n || !p->stop_ids || !p->stop_need || !p->conflicts ||
        !p->keep) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}
