/* One worker of the multi-process breadth-first search (checker/engines/mproc.py): the states
 * whose hash falls in its partition, their part of the breadth-first tree, and the steps of a
 * level over the compiled core's rules (_core.c is included, and its model_load, successors,
 * record_returns, packing, hashing and visited set are called here, not restated: the two
 * searches cannot load a System or state a rule differently).
 *
 * A level goes in two calls. `expand` takes the worker's frontier in rank order, steps every
 * enabled action, and returns one buffer of records per owner (the successor packed, the
 * parent's rank, the move's index among the parent's moves, the action, the parent's global id
 * and the successor's hash; a successor it sent before is not sent again), writing each
 * parent's number of moves at its rank into the shared `counts` array. The
 * coordinator turns counts into exclusive prefix sums; `insert` then merges the records every
 * worker sent it by (parent rank, move index), which is the order in which the one-process
 * search meets them, so the first record of a state is the parent and action that search
 * stores, and each new state's rank prefix[parent rank] + move index orders the next level as
 * that search's queue does. Ranks are not dense (a level's ranks run up to the transitions of
 * the level before) but their order is the single search's order: every tie-break it makes
 * (the first met among equal codes, the side table of bare parity waits) is made again here.
 *
 * A global id is local id * workers + worker.
 */
#include "_core.c"

/* A record: packed state, then int64 parent rank, int32 move index, int32 action, int32
 * parent's global id, uint64 the state's hash. */
#define META 28
/* Records ahead whose visited-set slot insert fetches while it stores the current one. */
#define AHEAD 8

typedef struct { int64_t rank; int32_t j, action, pgid; } Meta;   /* a record's, less its hash */

/* A worker's outgoing records for one owner (kept from level to level: no page is faulted in
 * again). */
typedef struct { uint8_t *p; size_t n, cap; } Buf;

typedef struct {
    Model m;
    Store st;
    Buf *out;                   /* per owner */
    Returns r;                  /* this partition's side table: id is the global id */
    int n_workers, me, n_instr;
    int32_t *front;             /* the frontier's local ids, in rank order */
    int64_t *front_rank;
    size_t n_front, cap_front;
    int32_t *next;              /* the next level's, built by insert */
    int64_t *next_rank;
    size_t n_next, cap_next;
    int64_t violations;         /* states reached that break a rule (stored, not expanded) */
    /* the successors sent most recently, one per slot of a direct-mapped cache: a successor
     * equal to one sent before (at an earlier level, or earlier in this one, so with a smaller
     * key) is stored by its owner with the parent it would get anyway, and is not sent again.
     * Most successors of an interleaving are such repeats within a level (a diamond) */
    uint8_t *sent, *sent_used;
} Worker;

#define SENT_SLOTS (1u << 16)

static size_t sent_slot(uint64_t h) { return (size_t)(h >> 17) & (SENT_SLOTS - 1); }

static int owner_of(const Worker *w, uint64_t h) {
    return (int)((uint32_t)h % (uint32_t)w->n_workers);   /* the table's slot: high 32 bits */
}

static int push_next(Worker *w, int32_t id, int64_t rank) {
    if (w->n_next == w->cap_next) {
        size_t cap = w->cap_next ? w->cap_next * 2 : 1024;
        int32_t *a = realloc(w->next, cap * sizeof(int32_t));
        if (!a) return -1;
        w->next = a;
        int64_t *b = realloc(w->next_rank, cap * sizeof(int64_t));
        if (!b) return -1;
        w->next_rank = b;
        w->cap_next = cap;
    }
    w->next[w->n_next] = id;
    w->next_rank[w->n_next++] = rank;
    return 0;
}

static void next_becomes_frontier(Worker *w) {
    int32_t *a = w->front; int64_t *b = w->front_rank; size_t cap = w->cap_front;
    w->front = w->next; w->front_rank = w->next_rank; w->cap_front = w->cap_next;
    w->n_front = w->n_next;
    w->next = a; w->next_rank = b; w->cap_next = cap; w->n_next = 0;
}

static void worker_free(PyObject *capsule) {
    Worker *w = PyCapsule_GetPointer(capsule, "barrierproof.worker");
    if (!w) return;
    store_free(&w->st);
    free(w->r.count); free(w->r.completion); free(w->r.depth); free(w->r.id); free(w->r.rank);
    free(w->front); free(w->front_rank); free(w->next); free(w->next_rank);
    if (w->out) for (int o = 0; o < w->n_workers; o++) free(w->out[o].p);
    free(w->out);
    free(w->sent); free(w->sent_used);
    model_free(&w->m);
    free(w);
}

static Worker *get(PyObject *capsule) {
    return PyCapsule_GetPointer(capsule, "barrierproof.worker");
}

/* worker(scalars, arrays, ignored, word, n_workers, me): a worker with an empty partition. */
static PyObject *mp_worker(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *scalars, *arrays, *ignored;
    int word, n_workers, me;
    if (!PyArg_ParseTuple(args, "OOOiii", &scalars, &arrays, &ignored, &word, &n_workers, &me))
        return NULL;
    Worker *w = calloc(1, sizeof(Worker));
    if (!w) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(w, "barrierproof.worker", worker_free);
    if (!capsule) { free(w); return NULL; }
    Model *m = &w->m;
    if (n_workers < 1 || me < 0 || me >= n_workers) {
        PyErr_SetString(PyExc_ValueError, "a worker's number out of range");
        Py_DECREF(capsule);
        return NULL;
    }
    if (model_load(m, scalars, arrays, ignored) < 0) {   /* _core.c's loading, shared */
        Py_DECREF(capsule);
        return NULL;
    }
    w->n_workers = n_workers;
    w->me = me;
    w->n_instr = m->off[m->A];
    Store *st = &w->st;
    st->W = m->W;
    st->word = word == 2 ? 2 : 4;
    st->bytes = (size_t)m->W * st->word;
    st->cap = 1024;
    st->table_cap = 4096;
    st->states = malloc(st->cap * st->bytes);
    st->parent = malloc(st->cap * sizeof(int32_t));
    st->action = malloc(st->cap * sizeof(int32_t));
    st->table = calloc(st->table_cap, sizeof(uint64_t));
    int n = w->n_instr;
    w->r.count = calloc(n + 1, sizeof(int));
    w->r.completion = calloc(2 * n + 2, sizeof(int));
    w->r.depth = calloc(2 * n + 2, sizeof(int));
    w->r.id = calloc(2 * n + 2, sizeof(int));
    w->r.rank = calloc(2 * n + 2, sizeof(int64_t));
    w->out = calloc(n_workers, sizeof(Buf));
    w->sent = malloc(SENT_SLOTS * st->bytes);
    w->sent_used = calloc(SENT_SLOTS, 1);
    if (!w->out || !w->sent || !w->sent_used || !st->states || !st->parent || !st->action ||
        !st->table || !w->r.count ||
        !w->r.completion || !w->r.depth || !w->r.id || !w->r.rank) {
        Py_DECREF(capsule);
        return PyErr_NoMemory();
    }
    return capsule;
}

/* seed(worker, initial): (owner, code) of the initial state; the owner stores it at rank 0.
 * None when a value does not fit the store's words. */
static PyObject *mp_seed(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *init_obj;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &init_obj)) return NULL;
    Worker *w = get(capsule);
    if (!w) return NULL;
    int *init;
    Py_ssize_t n;
    if (ints(init_obj, &init, &n) < 0) return NULL;
    if (n != w->m.W) {
        free(init);
        PyErr_SetString(PyExc_ValueError, "initial state width");
        return NULL;
    }
    uint8_t *p = malloc(w->st.bytes);
    if (!p) { free(init); return PyErr_NoMemory(); }
    if (pack(&w->st, (int32_t *)init, p) < 0) { free(init); free(p); Py_RETURN_NONE; }
    uint64_t h = hash_bytes(p, w->st.bytes);
    int owner = owner_of(w, h), code = state_code(&w->m, (int32_t *)init), is_new;
    if (owner == w->me) {
        if (store_add(&w->st, p, h, -1, -1, &is_new) < 0 || push_next(w, 0, 0) < 0) {
            free(init); free(p); return PyErr_NoMemory();
        }
        next_becomes_frontier(w);
    }
    free(init);
    free(p);
    return Py_BuildValue("(ii)", owner, code);
}

static int buf_reserve(Buf *b, size_t more) {
    if (b->n + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* expand(worker, counts, depth) -> (buffers per owner, transitions, deadlock, step violation,
 * returns) or None when a value does not fit the store's words. deadlock: (code, rank, gid) or
 * None; step violation: (code, rank, move index, parent gid, action) or None; returns: the
 * partition's side table rows (instruction, completion, depth, rank, gid). */
static PyObject *mp_expand(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    Py_buffer counts;
    int depth;
    if (!PyArg_ParseTuple(args, "Ow*i", &capsule, &counts, &depth)) return NULL;
    Worker *w = get(capsule);
    if (!w) { PyBuffer_Release(&counts); return NULL; }
    const Model *m = &w->m;
    Store *st = &w->st;
    int W = m->W, n_actions = n_actions_of(m), N = w->n_workers, wide = 0, oom = 0;
    int64_t *count = counts.buf;
    Py_ssize_t room = counts.len / (Py_ssize_t)sizeof(int64_t);
    for (size_t n = 0; n < w->n_front; n++)
        if (w->front_rank[n] < 0 || w->front_rank[n] >= room) {
            PyBuffer_Release(&counts);
            PyErr_SetString(PyExc_ValueError, "a rank beyond the counts array");
            return NULL;
        }
    size_t rec = st->bytes + META;
    int32_t *cur = malloc(W * sizeof(int32_t));
    int32_t *succ = malloc((size_t)(n_actions + 1) * W * sizeof(int32_t));
    uint8_t *packed = malloc((size_t)(n_actions + 1) * st->bytes);
    uint64_t *hs = malloc((n_actions + 1) * sizeof(uint64_t));
    int *codes = malloc((n_actions + 1) * sizeof(int));
    int *acts = malloc((n_actions + 1) * sizeof(int));
    Buf *out = w->out;
    for (int o = 0; o < N; o++) out[o].n = 0;
    int dead = 0, best = 0;
    int64_t dead_rank = 0, dead_gid = 0, best_rank = 0, best_j = 0, best_gid = 0, best_action = 0;
    int64_t transitions = 0;
    PyObject *result = NULL;
    if (!cur || !succ || !packed || !hs || !codes || !acts) { oom = 1; goto end; }
    Py_BEGIN_ALLOW_THREADS
    for (size_t n = 0; n < w->n_front && !wide && !oom; n++) {
        int32_t id = w->front[n];
        int64_t rank = w->front_rank[n];
        int gid = (int)((int64_t)id * N + w->me);
        unpack(st, id, cur);
        if (m->track_returns) record_returns(m, &w->r, cur, depth, gid, rank);
        /* every successor first, its cache slot fetched; then each looked up and sent */
        int moves = successors(m, st, cur, succ, packed, hs, codes, acts);   /* _core.c's */
        if (moves < 0) { wide = 1; break; }
        for (int j = 0; j < moves; j++)
            if (!codes[j] || m->ignored[codes[j]]) {
                __builtin_prefetch(w->sent + sent_slot(hs[j]) * st->bytes);
                __builtin_prefetch(w->sent_used + sent_slot(hs[j]));
            }
        for (int j = 0; j < moves && !wide; j++) {
            int v = codes[j];
            if (v && !m->ignored[v]) {              /* the step itself breaks a rule */
                if (BEFORE(v, best)) {
                    best = v; best_rank = rank; best_j = j; best_gid = gid; best_action = acts[j];
                }
                continue;
            }
            const uint8_t *p = packed + (size_t)j * st->bytes;
            uint64_t h = hs[j];
            /* a successor sent before (to any owner, this worker among them) is no news */
            uint8_t *seen = w->sent + sent_slot(h) * st->bytes;
            if (w->sent_used[sent_slot(h)] && !memcmp(seen, p, st->bytes)) continue;
            memcpy(seen, p, st->bytes);
            w->sent_used[sent_slot(h)] = 1;
            Buf *b = &out[owner_of(w, h)];
            if (buf_reserve(b, rec) < 0) { oom = 1; break; }
            uint8_t *r = b->p + b->n;
            memcpy(r, p, st->bytes);
            memcpy(r + st->bytes, &rank, 8);
            int32_t jj = j, act = acts[j];
            memcpy(r + st->bytes + 8, &jj, 4);
            memcpy(r + st->bytes + 12, &act, 4);
            memcpy(r + st->bytes + 16, &gid, 4);
            memcpy(r + st->bytes + 20, &h, 8);
            b->n += rec;
        }
        count[rank] = moves;
        transitions += moves;
        if (!moves && !is_done(m, cur)) {
            int c = deadlock_code(m, cur);
            if (!m->ignored[c] && BEFORE(c, dead)) {
                dead = c; dead_rank = rank; dead_gid = gid;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (oom) goto end;
    if (wide) { result = Py_None; Py_INCREF(result); goto end; }
    PyObject *buffers = PyList_New(N);
    if (!buffers) goto end;
    for (int o = 0; o < N; o++) {
        PyObject *bytes = PyBytes_FromStringAndSize((const char *)out[o].p, (Py_ssize_t)out[o].n);
        if (!bytes) { Py_DECREF(buffers); goto end; }
        PyList_SET_ITEM(buffers, o, bytes);
    }
    PyObject *rows = PyList_New(0);
    for (int i = 0; rows && i < w->n_instr; i++)
        for (int k = 0; k < w->r.count[i]; k++) {
            PyObject *row = Py_BuildValue("(iiiLi)", i, w->r.completion[2 * i + k],
                                          w->r.depth[2 * i + k], (long long)w->r.rank[2 * i + k],
                                          w->r.id[2 * i + k]);
            if (!row || PyList_Append(rows, row) < 0) { Py_XDECREF(row); Py_CLEAR(rows); }
            else Py_DECREF(row);
        }
    if (!rows) { Py_DECREF(buffers); goto end; }
    PyObject *deadlock = dead ? Py_BuildValue("(iLL)", dead, (long long)dead_rank,
                                              (long long)dead_gid)
                              : (Py_INCREF(Py_None), Py_None);
    PyObject *by_step = best ? Py_BuildValue("(iLLLL)", best, (long long)best_rank,
                                             (long long)best_j,
                                             (long long)best_gid, (long long)best_action)
                             : (Py_INCREF(Py_None), Py_None);
    if (deadlock && by_step)
        result = Py_BuildValue("(OLOOO)", buffers, (long long)transitions, deadlock, by_step, rows);
    Py_DECREF(buffers); Py_DECREF(rows); Py_XDECREF(deadlock); Py_XDECREF(by_step);
end:
    if (oom && !PyErr_Occurred()) PyErr_NoMemory();
    free(cur); free(succ); free(packed); free(hs); free(codes); free(acts);
    PyBuffer_Release(&counts);
    return result;
}

/* insert(worker, buffers from each worker, prefix) -> (new states, frontier, violation, bytes):
 * the records merged in the one-process search's order, each state stored once with its first
 * record's parent and action. violation: (code, parent rank, move index, parent gid, action)
 * of the first least code among the new states that break a rule, or None. */
static PyObject *mp_insert(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *list;
    Py_buffer prefix;
    if (!PyArg_ParseTuple(args, "OOy*", &capsule, &list, &prefix)) return NULL;
    Worker *w = get(capsule);
    if (!w) { PyBuffer_Release(&prefix); return NULL; }
    int N = w->n_workers;
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != N) {
        PyBuffer_Release(&prefix);
        PyErr_SetString(PyExc_ValueError, "one buffer per worker");
        return NULL;
    }
    Store *st = &w->st;
    size_t rec = st->bytes + META;
    const uint8_t **at = calloc(N, sizeof(uint8_t *)), **end = calloc(N, sizeof(uint8_t *));
    int32_t *s = malloc(w->m.W * sizeof(int32_t));
    if (!at || !end || !s) {
        free(at); free(end); free(s);
        PyBuffer_Release(&prefix);
        return PyErr_NoMemory();
    }
    for (int k = 0; k < N; k++) {
        PyObject *b = PyList_GET_ITEM(list, k);
        if (!PyBytes_Check(b)) {
            free(at); free(end); free(s); PyBuffer_Release(&prefix);
            PyErr_SetString(PyExc_TypeError, "records are bytes");
            return NULL;
        }
        at[k] = (const uint8_t *)PyBytes_AS_STRING(b);
        end[k] = at[k] + PyBytes_GET_SIZE(b);
    }
    const int64_t *pre = prefix.buf;
    int64_t added = 0;
    int best = 0, oom = 0;
    Meta bm = {0, 0, 0, 0};
    w->n_next = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        /* the least (parent rank, move index) among the sources' next records */
        int k_min = -1;
        int64_t r_min = 0;
        int32_t j_min = 0;
        for (int k = 0; k < N; k++) {
            if (at[k] >= end[k]) continue;
            int64_t r; int32_t j;
            memcpy(&r, at[k] + st->bytes, 8);
            memcpy(&j, at[k] + st->bytes + 8, 4);
            if (k_min < 0 || r < r_min || (r == r_min && j < j_min)) {
                k_min = k; r_min = r; j_min = j;
            }
        }
        if (k_min < 0) break;
        const uint8_t *p = at[k_min];
        at[k_min] += rec;
        Meta meta;
        meta.rank = r_min; meta.j = j_min;
        memcpy(&meta.action, p + st->bytes + 12, 4);
        memcpy(&meta.pgid, p + st->bytes + 16, 4);
        uint64_t h;
        memcpy(&h, p + st->bytes + 20, 8);
        if (p + AHEAD * rec < end[k_min]) {
            uint64_t ahead;
            memcpy(&ahead, p + AHEAD * rec + st->bytes + 20, 8);
            store_prefetch(st, ahead);
        }
        int is_new;
        int64_t id = store_add(st, p, h, meta.pgid, meta.action, &is_new);
        if (id < 0) { oom = 1; break; }
        if (!is_new) continue;
        added++;
        unpack(st, (size_t)id, s);
        int c = state_code(&w->m, s);
        if (c) {                                    /* the state reached breaks a rule */
            w->violations++;
            if (BEFORE(c, best)) { best = c; bm = meta; }
            continue;
        }
        if (push_next(w, (int32_t)id, pre[meta.rank] + meta.j) < 0) { oom = 1; break; }
    }
    Py_END_ALLOW_THREADS
    free(at); free(end); free(s);
    PyBuffer_Release(&prefix);
    if (oom) return PyErr_NoMemory();
    next_becomes_frontier(w);
    PyObject *violation = best ? Py_BuildValue("(iLiii)", best, (long long)bm.rank, bm.j, bm.pgid,
                                               bm.action)
                               : (Py_INCREF(Py_None), Py_None);
    if (!violation) return NULL;
    return Py_BuildValue("(LnNn)", (long long)added, (Py_ssize_t)w->n_front, violation,
                         (Py_ssize_t)store_bytes(st));
}

/* tree(worker) -> (parents, actions): the partition's part of the breadth-first tree, by
 * local id, as int32 bytes (parents are global ids). */
static PyObject *mp_tree(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    Worker *w = get(capsule);
    if (!w) return NULL;
    return Py_BuildValue("(y#y#n)", (const char *)w->st.parent, (Py_ssize_t)(w->st.n * 4),
                         (const char *)w->st.action, (Py_ssize_t)(w->st.n * 4),
                         (Py_ssize_t)w->st.n);
}

/* prefix(counts, n) -> total: counts[0:n] made exclusive prefix sums in place. */
static PyObject *mp_prefix(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer counts;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "w*n", &counts, &n)) return NULL;
    if (n < 0 || n > counts.len / (Py_ssize_t)sizeof(int64_t)) {
        PyBuffer_Release(&counts);
        PyErr_SetString(PyExc_ValueError, "more counts than the array holds");
        return NULL;
    }
    int64_t *c = counts.buf, total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t v = c[k];
        c[k] = total;
        total += v;
    }
    PyBuffer_Release(&counts);
    return PyLong_FromLongLong(total);
}

static PyMethodDef mproc_methods[] = {
    {"prefix", mp_prefix, METH_VARARGS, "prefix(counts, n) -> total"},
    {"worker", mp_worker, METH_VARARGS, "worker(scalars, arrays, ignored, word, n_workers, me)"},
    {"seed", mp_seed, METH_VARARGS, "seed(worker, initial) -> (owner, code) or None"},
    {"expand", mp_expand, METH_VARARGS, "expand(worker, counts, depth)"},
    {"insert", mp_insert, METH_VARARGS, "insert(worker, buffers, prefix)"},
    {"tree", mp_tree, METH_VARARGS, "tree(worker) -> (parents, actions, n)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mproc_module = {PyModuleDef_HEAD_INIT, "_mproc",
                                          "A worker of the multi-process explorer (mproc.py).",
                                          -1, mproc_methods, NULL, NULL, NULL, NULL};

/* The digest of the sources it was built from (setup.py, core_sources.py). */
PyMODINIT_FUNC PyInit__mproc(void) {
    PyObject *m = PyModule_Create(&mproc_module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_DIGEST", BP_SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
