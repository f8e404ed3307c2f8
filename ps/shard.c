/* shard.c - the key slicer's weighted ranges and plans: every bucket cut by the K servers' key ranges, or into partitions striped over them */
#include "shard.h"
#include "../base/err.h"
#include "../engine/config_check.h"

#include <stdlib.h>
#include <string.h>

ShardRange shard_weighted_range(size_t total, const ShardWeights *w, int s) {
    unsigned long long T = total, nl = (unsigned long long)w->lead, nr = (unsigned long long)(w->K - w->lead);
    unsigned long long W = nl * w->wlead + nr * w->wrest, us = (unsigned long long)s;
    unsigned long long ql = W ? T * w->wlead / W : 0, qr = W ? T * w->wrest / W : 0;
    unsigned long long rem = T - nl * ql - nr * qr; /* < K: each floor drops less than one key */
    unsigned long long before = us <= nl ? us * ql : nl * ql + (us - nl) * qr;
    ShardRange r;
    r.lo = (size_t)(before + (us < rem ? us : rem));
    r.hi = r.lo + (size_t)((us < nl ? ql : qr) + (us < rem ? 1 : 0));
    return r;
}

int shard_weighted_of(size_t total, const ShardWeights *w, size_t key) {
    int lo = 0, hi = w->K - 1; /* the first server whose range ends past key */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (shard_weighted_range(total, w, mid).hi > key) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

int shard_weighted_split(size_t total, const ShardWeights *w, size_t lo, size_t hi, ShardSlice *out) {
    int n = 0;
    if (hi <= lo || lo >= total) return 0;
    if (hi > total) hi = total;
    for (int s = shard_weighted_of(total, w, lo); s < w->K; s++) {
        ShardRange r = shard_weighted_range(total, w, s);
        if (r.lo >= hi) break;
        size_t a = lo > r.lo ? lo : r.lo, z = hi < r.hi ? hi : r.hi;
        if (z <= a) continue;
        out[n++] = (ShardSlice){.server = s, .bucket = -1, .off = a, .count = z - a};
    }
    return n;
}

int shard_split(size_t total, int K, size_t lo, size_t hi, ShardSlice *out) {
    ShardWeights w = shard_even(K);
    return shard_weighted_split(total, &w, lo, hi, out);
}

int shard_weighted_check(size_t total, const ShardWeights *w) {
    for (int s = 0; s < w->K; s++) {
        ShardRange r = shard_weighted_range(total, w, s);
        if (r.hi > r.lo) continue;
        if (w->lead == 0 || w->lead == w->K || w->wlead == w->wrest)
            return rs_error(RS_ERR_INPUT, "--ps-servers %d: more servers than the model's %zu parameters", w->K, total);
        return rs_error(RS_ERR_INPUT, "--sync byteps: server %d of %d would hold no key of the model's %zu parameters",
                        s, w->K, total);
    }
    return RS_OK;
}

static int shard_plan_build(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *b, int nb,
                            int per_bucket);

void shard_plan_free(ShardPlan *p) {
    free(p->first);
    free(p->slices);
    free(p->per_server);
    memset(p, 0, sizeof *p);
}

int shard_plan(ShardPlan *p, size_t total, int K, const Bucket *b, int nb) {
    ShardWeights w = shard_even(K);
    return shard_weighted_plan(p, total, &w, b, nb);
}

/* Bucket [lo, hi) split by w's weights into out (room for w->K), empty pieces left out. */
static int shard_bucket_split(const ShardWeights *w, size_t lo, size_t hi, ShardSlice *out) {
    int n = 0;
    for (int s = 0; s < w->K && hi > lo; s++) {
        ShardRange r = shard_weighted_range(hi - lo, w, s);
        if (r.hi > r.lo) out[n++] = (ShardSlice){.server = s, .bucket = -1, .off = lo + r.lo, .count = r.hi - r.lo};
    }
    return n;
}

int shard_weighted_plan(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *b, int nb) {
    return shard_plan_build(p, total, w, b, nb, 0);
}

int shard_bucket_plan(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *b, int nb) {
    RS_TRY(shard_plan_build(p, total, w, b, nb, 1));
    for (int s = 0; s < w->K; s++)
        if (p->per_server[s] == 0) {
            shard_plan_free(p);
            return rs_error(RS_ERR_INPUT, "--sync byteps: server %d of %d would hold no key of the model's %zu "
                                          "parameters", s, w->K, total);
        }
    return RS_OK;
}

/* The plan of nb buckets over w's servers: cut by the servers' key ranges, or (per_bucket) each
 * bucket split by the weights. */
static int shard_plan_build(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *b, int nb, int per_bucket) {
    int K = w->K;
    memset(p, 0, sizeof *p);
    if (K < 1) return rs_error(RS_ERR_INPUT, "--ps-servers %d: must be at least 1", K);
    if (!per_bucket) RS_TRY(shard_weighted_check(total, w));
    for (int i = 0; i < nb; i++)
        if (b[i].hi > total || b[i].lo > b[i].hi)
            return rs_error(RS_ERR_INPUT, "bucket %d [%zu, %zu) lies outside the %zu keys", i, b[i].lo, b[i].hi, total);
    p->K = K;
    p->nbuckets = nb;
    p->total = total;
    p->first = calloc((size_t)nb + 1, sizeof *p->first);
    p->slices = calloc((size_t)nb * (size_t)K + 1, sizeof *p->slices);
    p->per_server = calloc((size_t)K, sizeof *p->per_server);
    if (!p->first || !p->slices || !p->per_server) {
        shard_plan_free(p);
        return rs_error(RS_ERR_RUNTIME, "out of memory planning %d buckets over %d servers", nb, K);
    }
    for (int i = 0; i < nb; i++) {
        p->first[i] = p->nslices;
        int n = per_bucket ? shard_bucket_split(w, b[i].lo, b[i].hi, p->slices + p->nslices)
                           : shard_weighted_split(total, w, b[i].lo, b[i].hi, p->slices + p->nslices);
        for (int j = 0; j < n; j++) {
            p->slices[p->nslices + j].bucket = i;
            p->per_server[p->slices[p->nslices + j].server]++;
        }
        p->nslices += n;
    }
    p->first[nb] = p->nslices;
    return RS_OK;
}

/* ---- partitions ------------------------------------------------------------------------------ */

/* Partitions of at most keys keys that nb buckets cut into (keys > 0). */
static unsigned long long shard_count_parts(const Bucket *b, int nb, size_t keys) {
    unsigned long long n = 0;
    for (int i = 0; i < nb; i++) {
        size_t m = b[i].hi - b[i].lo;
        n += m ? (m + keys - 1) / keys : 1;
    }
    return n;
}

int shard_partition(const Bucket *b, int nb, size_t keys, int K, Bucket **parts, int **first, size_t *used) {
    *parts = NULL;
    *first = NULL;
    size_t most = 0;
    for (int i = 0; i < nb; i++)
        if (b[i].hi - b[i].lo > most) most = b[i].hi - b[i].lo;
    if (keys == 0 || keys > most) keys = most ? most : 1;
    while (keys > 1 && shard_count_parts(b, nb, keys) < (unsigned long long)K) keys = (keys + 1) / 2;
    unsigned long long np = shard_count_parts(b, nb, keys);
    if (np > SHARD_MAX_PARTS)
        return -rs_error(RS_ERR_INPUT, "--ps-partition-kb: %llu partitions of %zu keys, more than the wire header "
                                       "addresses (%u): larger partitions", np, keys, SHARD_MAX_PARTS);
    Bucket *pp = calloc((size_t)np + 1, sizeof *pp);
    int *f = calloc((size_t)nb + 1, sizeof *f);
    if (!pp || !f) {
        free(pp);
        free(f);
        return -rs_error(RS_ERR_RUNTIME, "out of memory for %llu partitions", np);
    }
    int n = 0;
    for (int i = 0; i < nb; i++) {
        f[i] = n;
        size_t lo = b[i].lo;
        do {
            size_t hi = b[i].hi - lo > keys ? lo + keys : b[i].hi;
            pp[n++] = (Bucket){.lo = lo, .hi = hi};
            lo = hi;
        } while (lo < b[i].hi);
    }
    f[nb] = n;
    *parts = pp;
    *first = f;
    *used = keys;
    return n;
}

int shard_partition_run(const Config *cfg, const Bucket *b, int nb, int K, Bucket **parts, int **first, int *np,
                        size_t *keys) {
    size_t want = config_partition_keys(cfg);
    *np = 0;
    *keys = 0;
    if (want == 0) { /* whole buckets: one partition each */
        *parts = calloc((size_t)nb + 1, sizeof **parts);
        *first = calloc((size_t)nb + 1, sizeof **first);
        if (!*parts || !*first) {
            free(*parts);
            free(*first);
            *parts = NULL;
            *first = NULL;
            return rs_error(RS_ERR_RUNTIME, "out of memory");
        }
        for (int i = 0; i <= nb; i++) (*first)[i] = i;
        if (nb > 0) memcpy(*parts, b, (size_t)nb * sizeof *b);
        *np = nb;
        return RS_OK;
    }
    int n = shard_partition(b, nb, want, K, parts, first, keys);
    if (n < 0) return -n;
    *np = n;
    return RS_OK;
}

/* Server s's weight under w. */
static unsigned long long shard_weight(const ShardWeights *w, int s) { return s < w->lead ? w->wlead : w->wrest; }

/* The server the stripe gives a piece of m keys, with load[] so far; adds it to that load. */
static int shard_stripe_next(const ShardWeights *w, unsigned long long *load, unsigned long long m) {
    int best = 0;
    for (int s = 1; s < w->K; s++) { /* (load_s + m) / w_s < (load_best + m) / w_best, in integers */
        unsigned __int128 a = (unsigned __int128)(load[s] + m) * shard_weight(w, best),
                          z = (unsigned __int128)(load[best] + m) * shard_weight(w, s);
        if (a < z) best = s;
    }
    load[best] += m;
    return best;
}

void shard_stripe_chunks(size_t total, size_t per, int nchunks, const ShardWeights *w, int *owner) {
    unsigned long long load[64] = {0}, *ld = w->K <= 64 ? load : calloc((size_t)w->K, sizeof *ld);
    for (int b = 0; b < nchunks; b++) {
        size_t lo, hi;
        shard_chunk(total, per, b, &lo, &hi);
        owner[b] = ld ? shard_stripe_next(w, ld, hi - lo) : b % w->K; /* no memory: the equal weights' round robin */
    }
    if (ld != load) free(ld);
}

int shard_stripe_plan(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *parts, int np) {
    int K = w->K;
    memset(p, 0, sizeof *p);
    if (K < 1) return rs_error(RS_ERR_INPUT, "--ps-servers %d: must be at least 1", K);
    for (int i = 0; i < np; i++)
        if (parts[i].hi > total || parts[i].lo > parts[i].hi)
            return rs_error(RS_ERR_INPUT, "partition %d [%zu, %zu) lies outside the %zu keys", i, parts[i].lo,
                            parts[i].hi, total);
    p->K = K;
    p->nbuckets = np;
    p->total = total;
    p->first = calloc((size_t)np + 1, sizeof *p->first);
    p->slices = calloc((size_t)np + 1, sizeof *p->slices);
    p->per_server = calloc((size_t)K, sizeof *p->per_server);
    unsigned long long *load = calloc((size_t)K, sizeof *load);
    if (!p->first || !p->slices || !p->per_server || !load) {
        free(load);
        shard_plan_free(p);
        return rs_error(RS_ERR_RUNTIME, "out of memory planning %d partitions over %d servers", np, K);
    }
    for (int i = 0; i < np; i++) {
        unsigned long long m = parts[i].hi - parts[i].lo;
        int best = shard_stripe_next(w, load, m);
        p->first[i] = i;
        p->slices[i] = (ShardSlice){.server = best, .bucket = i, .off = parts[i].lo, .count = (size_t)m};
        p->per_server[best]++;
    }
    p->first[np] = np;
    p->nslices = np;
    free(load);
    for (int s = 0; s < K; s++)
        if (p->per_server[s] == 0) {
            shard_plan_free(p);
            return rs_error(RS_ERR_INPUT, "--ps-partition-kb: server %d of %d would hold no partition of the %d", s, K,
                            np);
        }
    return RS_OK;
}
