/* Thread symmetry of symmetry.py stated again over flatten.py's `symmetric` arrays: included
 * by _core.c. */

/* Lexicographic order of two agents' local parts (equal widths within a class). */
static int local_cmp(const Model *m, const int32_t *s, int a, int b) {
    int w = m->loc_off[a + 1] - m->loc_off[a];
    const int *pa = m->loc_pos + m->loc_off[a], *pb = m->loc_pos + m->loc_off[b];
    for (int k = 0; k < w; k++)
        if (s[pa[k]] != s[pb[k]]) return s[pa[k]] < s[pb[k]] ? -1 : 1;
    return 0;
}

/* The representative of s's orbit under thread symmetry, in place: each class's local parts
 * sorted (an insertion sort of the parts, then written back member by member). */
static void canonical(const Model *m, int32_t *s) {
    for (int c = 0; c < m->n_classes; c++) {
        const int *mem = m->cls_member + m->cls_off[c];
        int n = m->cls_off[c + 1] - m->cls_off[c], sorted = 1;
        for (int k = 1; k < n && sorted; k++) sorted = local_cmp(m, s, mem[k - 1], mem[k]) <= 0;
        if (sorted) continue;
        int w = m->loc_off[mem[0] + 1] - m->loc_off[mem[0]];
        int32_t *buf = m->sym_scratch;
        for (int k = 0; k < n; k++) {
            const int *pos = m->loc_pos + m->loc_off[mem[k]];
            int32_t *part = buf + (size_t)k * w;
            for (int j = 0; j < w; j++) part[j] = s[pos[j]];
            for (int i = k; i > 0; i--) {           /* insert part among the sorted ones */
                int32_t *lo = buf + (size_t)(i - 1) * w, *hi = buf + (size_t)i * w;
                int j = 0;
                while (j < w && lo[j] == hi[j]) j++;
                if (j == w || lo[j] < hi[j]) break;
                for (j = 0; j < w; j++) { int32_t t = lo[j]; lo[j] = hi[j]; hi[j] = t; }
            }
        }
        for (int k = 0; k < n; k++) {
            const int *pos = m->loc_pos + m->loc_off[mem[k]];
            for (int j = 0; j < w; j++) s[pos[j]] = buf[(size_t)k * w + j];
        }
    }
}

/* Twin steps (symmetry.py `twins`): of a run of class members with equal local parts in a
 * canonical state only the last steps (a symmetry fixing the state swaps them), and likewise
 * its tcgen05 queue; marked in skip (n_actions entries, cleared here). */
static void twins(const Model *m, const int32_t *s, char *skip) {
    int n_actions = m->A + m->n_slots + m->n_queues;
    memset(skip, 0, n_actions);
    for (int c = 0; c < m->n_classes; c++) {
        const int *mem = m->cls_member + m->cls_off[c];
        int n = m->cls_off[c + 1] - m->cls_off[c];
        for (int k = 1; k < n; k++) {
            if (local_cmp(m, s, mem[k - 1], mem[k]) != 0) continue;
            skip[mem[k - 1]] = 1;
            for (int q = 0; q < m->n_queues; q++)
                if (m->queue_agent[q] == mem[k - 1]) skip[m->A + m->n_slots + q] = 1;
        }
    }
}


/* The rules state s breaks (state_code), or else a race of one of its images under the
 * permutations of threads that touch different memory (explore.py `violations`): the first
 * image, in flatten.py's order, whose race is not ignored; its permutation in *perm. */
static int state_code_images(const Model *m, const int32_t *s, int *perm) {
    *perm = -1;
    int c = state_code(m, s);
    if (c || !m->n_perms) return c;
    int32_t *image = m->sym_scratch;
    for (int k = 0; k < m->n_perms; k++) {
        memcpy(image, s, m->W * sizeof(int32_t));
        for (int j = m->perm_off[k]; j < m->perm_off[k + 1]; j++)
            image[m->perm_to[j]] = s[m->perm_from[j]];
        c = race_code(m, image);
        if (c) { *perm = k; return c; }
    }
    return 0;
}
