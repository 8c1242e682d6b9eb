/* Native kernel of the canonical branch-and-bound in search.py.
 *
 * Same search, same pruning rules as the Python `_search` (canonical placements
 * in non-decreasing offset order, dominance, section inference with monotonic
 * and unallocated floors, hatless pruning, twins, dynamic decomposition and the
 * refutation memo); only the per-node work runs compiled, which is what the
 * hard MiniMalloc instances need (millions of nodes).  Built on first use by
 * native.py with the system C compiler; search.py falls back to Python where no
 * compiler is present.
 *
 * Return codes of roam_search: 1 found, 0 proved infeasible, -1 node limit,
 * -2 time limit. `flags`: bit 0 the energetic test, bit 1 the unallocated
 * floors (SearchParams.suffix_check / unallocated_floor). The energetic test
 * costs O(span x members) per try, the floor test a scan of each section's
 * members up to the first one low enough; on groups of thousands of buffers
 * that the search packs without backtracking they are most of the time and
 * prune nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int64_t i64;
typedef uint64_t u64;
typedef int32_t i32;

typedef struct {
    int m;
    const i64 *sl, *su, *size, *align, *length;
    i64 *rank; /* mutable: a decomposed subproblem re-ranks its own buffers */
    const char *key; /* preorder key string (T, W, A, S, L), or NULL: keep ranks */
    i64 *feat_t; /* scratch: current section total per buffer */
    const i32 *twin, *nbr_ptr, *nbr_idx, *sec_ptr, *sec_idx;
    i64 cap;
    i64 *mo, *off, *best, *total, *cuts;
    int nsec, max_members, energetic, unfloor;
    i64 stamp, *mark;
    i32 *hint; /* per section: where its floor scan last found a low member */
    i64 nodes, node_limit, tries;
    double deadline;
    u64 *memo;
    i64 memo_mask, memo_used, memo_max;
    int status; /* 0 running, -1 node limit, -2 time limit */
} State;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static u64 mix(u64 h, u64 v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

static int memo_has(const State *s, u64 key) {
    if (!s->memo) return 0;
    for (i64 k = (i64)(key & (u64)s->memo_mask);; k = (k + 1) & s->memo_mask) {
        if (s->memo[k] == 0) return 0;
        if (s->memo[k] == key) return 1;
    }
}

static void memo_add(State *s, u64 key) {
    if (!s->memo || s->memo_used >= s->memo_max) return;
    for (i64 k = (i64)(key & (u64)s->memo_mask);; k = (k + 1) & s->memo_mask) {
        if (s->memo[k] == key) return;
        if (s->memo[k] == 0) {
            s->memo[k] = key;
            s->memo_used++;
            return;
        }
    }
}

typedef struct {
    i64 mo, rank;
    i32 idx;
} Cand;

static int cand_cmp(const void *a, const void *b) {
    const Cand *x = (const Cand *)a, *y = (const Cand *)b;
    if (x->mo != y->mo) return x->mo < y->mo ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Section inference: every section of [slo, shi) keeps its unplaced bytes under cap
   above `o` (later placements never go lower) and, with the unallocated floors, above
   its floor (the lowest minimum offset of its unplaced members). The floor test asks
   only whether some unplaced member has a minimum offset of at most cap - total, so
   the scan stops at the first one; `hint` remembers where it was found last time.
   No floor is stored, so placing a buffer costs nothing per section: on traces with
   long-lived buffers (thousands of sections, ~100 members each) keeping stored floors
   up to date was most of the kernel's time. */
static int sections_fit(State *s, int slo, int shi, i64 o) {
    for (int sec = slo; sec < shi; sec++) {
        i64 t = s->total[sec];
        if (t == 0) continue;
        i64 lim = s->cap - t;
        if (o > lim) return 0;
        if (!s->unfloor) continue;
        i32 lo = s->sec_ptr[sec], n = s->sec_ptr[sec + 1] - lo, h = s->hint[sec];
        int ok = 0;
        for (i32 c = 0; c < n; c++) {
            i32 k = h + c < n ? h + c : h + c - n;
            i32 j = s->sec_idx[lo + k];
            if (s->off[j] < 0 && s->mo[j] <= lim) { s->hint[sec] = k; ok = 1; break; }
        }
        if (!ok) return 0;
    }
    return 1;
}

typedef struct { i64 mo, size; } Item;

static int item_desc(const void *a, const void *b) {
    const Item *x = (const Item *)a, *y = (const Item *)b;
    return (x->mo < y->mo) - (x->mo > y->mo);
}

/* Energetic test of one section: the unplaced members whose minimum offset is at
   least x need their total size above max(x, o). Only x above cap - total can
   bind (below it the plain floor test already covers the sum), so few members
   are sorted. */
static int energetic_fit(const State *s, int sec, i64 o, Item *buf) {
    i64 theta = s->cap - s->total[sec];
    int n = 0;
    for (i32 k = s->sec_ptr[sec]; k < s->sec_ptr[sec + 1]; k++) {
        i32 j = s->sec_idx[k];
        if (s->off[j] < 0 && s->mo[j] > theta) { buf[n].mo = s->mo[j]; buf[n].size = s->size[j]; n++; }
    }
    if (n < 2) return 1;
    qsort(buf, (size_t)n, sizeof(Item), item_desc);
    i64 sum = 0;
    for (int k = 0; k < n; k++) {
        sum += buf[k].size;
        if (k + 1 < n && buf[k + 1].mo == buf[k].mo) continue;
        i64 x = buf[k].mo > o ? buf[k].mo : o;
        if (x + sum > s->cap) return 0;
    }
    return 1;
}

static int rec(State *s, const i32 *part, int np, int slo, int shi, i64 last_off, i64 last_rank);

/* Preorder comparison of buffers a and b under the key string (all keys descending,
   then input order). */
static int pre_less(const State *s, i32 a, i32 b) {
    for (const char *c = s->key; *c; c++) {
        i64 x = 0, y = 0;
        switch (*c) {
            case 'T': x = s->feat_t[a]; y = s->feat_t[b]; break;
            case 'W': x = s->su[a] - s->sl[a]; y = s->su[b] - s->sl[b]; break;
            case 'A': x = s->size[a] * s->length[a]; y = s->size[b] * s->length[b]; break;
            case 'S': x = s->size[a]; y = s->size[b]; break;
            case 'L': x = s->length[a]; y = s->length[b]; break;
            default: break;
        }
        if (x != y) return x > y;
    }
    return a < b;
}

/* Re-rank the buffers of a subproblem by the preorder with T from the current
   section totals (stable merge sort; `tmp` holds n entries). */
static void rerank(State *s, i32 *v, int n, i32 *tmp) {
    for (int k = 0; k < n; k++) {
        i32 j = v[k];
        i64 t = 0;
        for (int sec = (int)s->sl[j]; sec < (int)s->su[j]; sec++)
            if (s->total[sec] > t) t = s->total[sec];
        s->feat_t[j] = t;
    }
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int x = lo, y = mid, k = lo;
            while (x < mid && y < hi) tmp[k++] = pre_less(s, v[y], v[x]) ? v[y++] : v[x++];
            while (x < mid) tmp[k++] = v[x++];
            while (y < hi) tmp[k++] = v[y++];
        }
        memcpy(v, tmp, sizeof(i32) * (size_t)n);
    }
    for (int k = 0; k < n; k++) s->rank[v[k]] = k;
}

/* Place the buffers of `part` that lie in each zero-cut range independently. */
static int solve_ranges(State *s, const i32 *part, int np, const int *bounds, int nb) {
    size_t cap = (size_t)(np > 0 ? np : 1);
    i32 *sub = (i32 *)malloc(sizeof(i32) * cap), *sorted = (i32 *)malloc(sizeof(i32) * cap);
    i32 *tmp = (i32 *)malloc(sizeof(i32) * cap);
    i64 *saved = (i64 *)malloc(sizeof(i64) * cap);
    int ok = 1;
    for (int r = 0; r + 1 < nb && ok; r++) {
        int lo = bounds[r], hi = bounds[r + 1], ns = 0;
        for (int k = 0; k < np; k++) {
            i32 j = part[k];
            if (s->off[j] < 0 && s->sl[j] >= lo && s->su[j] <= hi) sub[ns++] = j;
        }
        if (!ns) continue;
        for (int k = 0; k < ns; k++) saved[k] = s->rank[sub[k]];
        if (s->key) {
            memcpy(sorted, sub, sizeof(i32) * (size_t)ns);
            rerank(s, sorted, ns, tmp);
        }
        if (!rec(s, sub, ns, lo, hi, 0, -1)) ok = 0;
        for (int k = 0; k < ns; k++) s->rank[sub[k]] = saved[k];
    }
    if (ok) /* every range done (some may have had nothing left): record this path's placements */
        for (int i = 0; i < s->m; i++)
            if (s->off[i] >= 0) s->best[i] = s->off[i];
    free(saved); free(tmp); free(sorted); free(sub);
    return ok;
}

static int rec(State *s, const i32 *part, int np, int slo, int shi, i64 last_off, i64 last_rank) {
    s->nodes++;
    if (s->nodes > s->node_limit) { s->status = -1; return 0; }
    if ((s->nodes & 1023) == 0 && now_s() > s->deadline) { s->status = -2; return 0; }
    i32 *U = (i32 *)malloc(sizeof(i32) * (size_t)(np > 0 ? np : 1));
    int nu = 0;
    for (int k = 0; k < np; k++)
        if (s->off[part[k]] < 0) U[nu++] = part[k];
    if (nu == 0) {
        for (int i = 0; i < s->m; i++)
            if (s->off[i] >= 0) s->best[i] = s->off[i];
        free(U);
        return 1;
    }
    u64 key = 0;
    if (s->memo) {
        /* Independent of the preorder: the tie rule enters as the set of buffers
           still allowed at last_off. */
        key = mix(mix(mix(0x1234567ULL, (u64)slo), (u64)shi), (u64)last_off);
        for (int k = 0; k < nu; k++) {
            i32 j = U[k];
            int tie = s->mo[j] == last_off && s->rank[j] > last_rank;
            key = mix(key, ((u64)j << 1) | (u64)tie);
            key = mix(key, (u64)s->mo[j]);
        }
        if (key == 0) key = 1;
        if (memo_has(s, key)) { free(U); return 0; }
    }
    i64 min_height = INT64_MAX;
    for (int k = 0; k < nu; k++) {
        i32 j = U[k];
        i64 h = s->mo[j] + s->size[j];
        if (h > s->cap) { memo_add(s, key); free(U); return 0; }
        if (h < min_height) min_height = h;
    }
    Cand *C = (Cand *)malloc(sizeof(Cand) * (size_t)nu);
    int nc = 0;
    for (int k = 0; k < nu; k++) {
        i32 j = U[k];
        i64 o = s->mo[j], r = s->rank[j];
        if (o >= min_height) continue;                       /* dominance: leaves a fillable gap */
        if (o < last_off || (o == last_off && r < last_rank)) continue; /* canonical order */
        if (o == last_off && r == last_rank) continue;
        C[nc].mo = o; C[nc].rank = r; C[nc].idx = j; nc++;
    }
    qsort(C, (size_t)nc, sizeof(Cand), cand_cmp);
    int maxdeg = 0;
    for (int k = 0; k < nc; k++) {
        int d = s->nbr_ptr[C[k].idx + 1] - s->nbr_ptr[C[k].idx];
        if (d > maxdeg) maxdeg = d;
    }
    i32 *chj = (i32 *)malloc(sizeof(i32) * (size_t)(maxdeg + 1));
    i64 *cho = (i64 *)malloc(sizeof(i64) * (size_t)(maxdeg + 1));
    int *bounds = (int *)malloc(sizeof(int) * (size_t)(shi - slo + 2));
    Item *items = (Item *)malloc(sizeof(Item) * (size_t)(s->max_members + 1));
    /* prefix / suffix maxima of the unplaced bytes per section over [slo, shi): the cheap
       monotonic test below needs no state change, so it runs before the floor work */
    int span = shi - slo;
    i64 *pre = (i64 *)malloc(sizeof(i64) * (size_t)(span + 1)), *suf = (i64 *)malloc(sizeof(i64) * (size_t)(span + 1));
    for (int k = 0; k < span; k++) {
        i64 t = s->total[slo + k];
        pre[k] = k && pre[k - 1] > t ? pre[k - 1] : t;
    }
    for (int k = span - 1; k >= 0; k--) {
        i64 t = s->total[slo + k];
        suf[k] = k + 1 < span && suf[k + 1] > t ? suf[k + 1] : t;
    }
    int found = 0;
    for (int c = 0; c < nc && !found && !s->status; c++) {
        i32 i = C[c].idx;
        i64 o = C[c].mo;
        if (s->twin[i] >= 0 && s->off[s->twin[i]] < 0) continue; /* place identical buffers in rank order */
        /* a node can try many candidates that each fail after costly floor work: the clock is
           read per 256 tries too, so a limit holds however few nodes a second are made */
        if ((++s->tries & 255) == 0 && now_s() > s->deadline) { s->status = -2; break; }
        i64 sz = s->size[i], top = o + sz;
        int a = (int)s->sl[i], b = (int)s->su[i];
        {
            /* monotonic test: after placing i at o, every section's unplaced bytes fit above o */
            i64 worst = 0;
            if (a > slo) worst = pre[a - 1 - slo];
            if (b < shi && suf[b - slo] > worst) worst = suf[b - slo];
            for (int sec = a; sec < b && o + worst <= s->cap; sec++)
                if (s->total[sec] - sz > worst) worst = s->total[sec] - sz;
            if (o + worst > s->cap) continue;
        }
        s->off[i] = o;
        for (int sec = a; sec < b; sec++) s->total[sec] -= sz;
        int nch = 0, hat = 0;
        for (i32 k = s->nbr_ptr[i]; k < s->nbr_ptr[i + 1]; k++) {
            i32 j = s->nbr_idx[k];
            if (s->off[j] >= 0) continue;
            hat = 1;
            if (s->mo[j] < top) {
                chj[nch] = j; cho[nch] = s->mo[j]; nch++;
                i64 al = s->align[j];
                s->mo[j] = al > 1 ? ((top + al - 1) / al) * al : top;
            }
        }
        int ok = sections_fit(s, slo, shi, o);
        if (ok && s->energetic) {
            /* only sections whose members moved can newly fail */
            s->stamp++;
            for (int sec = a; sec < b && ok; sec++) {
                s->mark[sec] = s->stamp;
                ok = energetic_fit(s, sec, o, items);
            }
            for (int k = 0; k < nch && ok; k++)
                for (int sec = (int)s->sl[chj[k]]; sec < (int)s->su[chj[k]] && ok; sec++)
                    if (s->mark[sec] != s->stamp) { s->mark[sec] = s->stamp; ok = energetic_fit(s, sec, o, items); }
        }
        if (ok) {
            int nb = 0;
            if (b - a > 1) {
                bounds[nb++] = slo;
                for (int p = a + 1; p < b; p++)
                    if (--s->cuts[p] == 0) bounds[nb++] = p;
                bounds[nb++] = shi;
            }
            if (nb > 2)
                ok = solve_ranges(s, U, nu, bounds, nb);
            else
                ok = rec(s, U, nu, slo, shi, o, C[c].rank);
            if (b - a > 1)
                for (int p = a + 1; p < b; p++) s->cuts[p]++;
        }
        for (int k = nch - 1; k >= 0; k--) s->mo[chj[k]] = cho[k];
        for (int sec = a; sec < b; sec++) s->total[sec] += sz;
        s->off[i] = -1;
        if (ok) found = 1;
        else if (!hat) break; /* nothing unplaced beside i: any solution could place it here first */
    }
    if (!found && !s->status) memo_add(s, key);
    free(suf); free(pre); free(items); free(bounds); free(cho); free(chj); free(C); free(U);
    return found;
}

int roam_search(int m, int nsec, const i64 *sl, const i64 *su, const i64 *size, const i64 *align,
                const i64 *length, const char *key, int flags, i64 cap, const i64 *rank, const i32 *twin, const i32 *nbr_ptr, const i32 *nbr_idx,
                const i32 *sec_ptr, const i32 *sec_idx, const i64 *total0, const i64 *cuts0,
                i64 node_limit, double seconds, u64 *memo, i64 memo_size, i64 *out, i64 *nodes) {
    State s;
    memset(&s, 0, sizeof s);
    s.m = m; s.sl = sl; s.su = su; s.size = size; s.align = align; s.length = length; s.twin = twin;
    s.key = key && *key ? key : NULL;
    s.rank = (i64 *)malloc(sizeof(i64) * ((size_t)m + 1));
    memcpy(s.rank, rank, sizeof(i64) * (size_t)m);
    s.feat_t = (i64 *)calloc((size_t)m + 1, sizeof(i64));
    s.nbr_ptr = nbr_ptr; s.nbr_idx = nbr_idx; s.sec_ptr = sec_ptr; s.sec_idx = sec_idx; s.cap = cap;
    s.node_limit = node_limit;
    s.deadline = now_s() + seconds;
    s.memo = memo_size > 0 ? memo : NULL;
    s.memo_mask = memo_size - 1;
    s.memo_max = memo_size / 2;
    for (i64 k = 0; k < memo_size; k++) if (memo[k]) s.memo_used++;
    s.mo = (i64 *)calloc((size_t)m + 1, sizeof(i64));
    s.off = (i64 *)malloc(sizeof(i64) * ((size_t)m + 1));
    s.best = out;
    s.total = (i64 *)malloc(sizeof(i64) * ((size_t)nsec + 1));
    s.cuts = (i64 *)malloc(sizeof(i64) * ((size_t)nsec + 2));
    s.hint = (i32 *)calloc((size_t)nsec + 1, sizeof(i32));
    s.mark = (i64 *)calloc((size_t)nsec + 1, sizeof(i64));
    s.nsec = nsec;
    s.energetic = (flags & 1) != 0;
    s.unfloor = (flags & 2) != 0;
    for (int sec = 0; sec < nsec; sec++)
        if (sec_ptr[sec + 1] - sec_ptr[sec] > s.max_members) s.max_members = sec_ptr[sec + 1] - sec_ptr[sec];
    for (int i = 0; i < m; i++) s.off[i] = -1;
    memcpy(s.total, total0, sizeof(i64) * (size_t)nsec);
    memcpy(s.cuts, cuts0, sizeof(i64) * ((size_t)nsec + 1));
    i32 *all = (i32 *)malloc(sizeof(i32) * ((size_t)m + 1));
    for (int i = 0; i < m; i++) all[i] = i;
    int ok = 1;
    for (int sec = 0; sec < nsec; sec++) if (total0[sec] > cap) ok = 0;
    for (int i = 0; i < m; i++) if (size[i] > cap) ok = 0;
    if (ok) ok = rec(&s, all, m, 0, nsec, 0, -1);
    *nodes = s.nodes;
    int status = s.status;
    free(all); free(s.feat_t); free(s.rank); free(s.mark); free(s.hint); free(s.cuts); free(s.total); free(s.off); free(s.mo);
    if (status) return status;
    return ok ? 1 : 0;
}

/* ------------------------------------------------------------------ skyline placement
 * Bottom-up greedy for traces too big for the search: repeatedly place the
 * unplaced buffer with the lowest minimum offset (the highest skyline point
 * over its lifespan), ties by rank, at that offset, and raise the skyline over
 * its lifespan. A lazy heap holds (offset seen, rank, buffer); a segment tree
 * with range-assign answers the skyline maxima in O(log sections).
 * Returns 1 on success, -2 past the time limit.
 */
typedef struct { i64 *mx, *lz; int n; } Seg;

static void seg_push(Seg *t, int node) {
    if (t->lz[node] >= 0) {
        for (int c = 2 * node; c <= 2 * node + 1; c++) { t->mx[c] = t->lz[node]; t->lz[c] = t->lz[node]; }
        t->lz[node] = -1;
    }
}

static i64 seg_max(Seg *t, int node, int lo, int hi, int a, int b) {
    if (b <= lo || hi <= a) return 0;
    if (a <= lo && hi <= b) return t->mx[node];
    seg_push(t, node);
    int mid = (lo + hi) / 2;
    i64 x = seg_max(t, 2 * node, lo, mid, a, b), y = seg_max(t, 2 * node + 1, mid, hi, a, b);
    return x > y ? x : y;
}

static void seg_set(Seg *t, int node, int lo, int hi, int a, int b, i64 v) {
    if (b <= lo || hi <= a) return;
    if (a <= lo && hi <= b) { t->mx[node] = v; t->lz[node] = v; return; }
    seg_push(t, node);
    int mid = (lo + hi) / 2;
    seg_set(t, 2 * node, lo, mid, a, b, v);
    seg_set(t, 2 * node + 1, mid, hi, a, b, v);
    t->mx[node] = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
}

typedef struct { i64 key, rank; i32 idx; } HeapItem;

static int heap_less(const HeapItem *a, const HeapItem *b) {
    return a->key != b->key ? a->key < b->key : a->rank < b->rank;
}

static void heap_down(HeapItem *h, int n, int k) {
    for (;;) {
        int l = 2 * k + 1, r = l + 1, m = k;
        if (l < n && heap_less(&h[l], &h[m])) m = l;
        if (r < n && heap_less(&h[r], &h[m])) m = r;
        if (m == k) return;
        HeapItem tmp = h[k]; h[k] = h[m]; h[m] = tmp;
        k = m;
    }
}

int roam_skyline(int n, int nsec, const i64 *sl, const i64 *su, const i64 *size, const i64 *align,
                 const i64 *rank, i64 *out, double seconds) {
    double deadline = now_s() + seconds;
    Seg t;
    t.n = nsec > 0 ? nsec : 1;
    t.mx = (i64 *)calloc((size_t)(4 * t.n), sizeof(i64));
    t.lz = (i64 *)malloc(sizeof(i64) * (size_t)(4 * t.n));
    for (int k = 0; k < 4 * t.n; k++) t.lz[k] = -1;
    HeapItem *h = (HeapItem *)malloc(sizeof(HeapItem) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) { h[i].key = 0; h[i].rank = rank[i]; h[i].idx = i; }
    for (int k = n / 2 - 1; k >= 0; k--) heap_down(h, n, k);
    int size_h = n, status = 1;
    i64 pops = 0;
    while (size_h > 0) {
        if ((++pops & 4095) == 0 && now_s() > deadline) { status = -2; break; }
        HeapItem top = h[0];
        i32 i = top.idx;
        i64 m = seg_max(&t, 1, 0, t.n, (int)sl[i], (int)su[i]);
        if (align[i] > 1) m = ((m + align[i] - 1) / align[i]) * align[i];
        if (m > top.key) { h[0].key = m; heap_down(h, size_h, 0); continue; } /* stale: re-sift */
        out[i] = m;
        seg_set(&t, 1, 0, t.n, (int)sl[i], (int)su[i], m + size[i]);
        h[0] = h[--size_h];
        heap_down(h, size_h, 0);
    }
    free(h); free(t.lz); free(t.mx);
    return status;
}
