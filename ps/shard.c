/* shard.c - the range slicer's plan: every bucket cut by the K servers' key ranges */
#include "shard.h"
#include "../common/err.h"

#include <stdlib.h>
#include <string.h>

int shard_split(size_t total, int K, size_t lo, size_t hi, ShardSlice *out) {
    int n = 0;
    if (hi <= lo || lo >= total) return 0;
    if (hi > total) hi = total;
    for (int s = shard_of(total, K, lo); s < K; s++) {
        ShardRange r = shard_range(total, K, s);
        if (r.lo >= hi) break;
        size_t a = lo > r.lo ? lo : r.lo, z = hi < r.hi ? hi : r.hi;
        if (z <= a) continue;
        out[n++] = (ShardSlice){.server = s, .bucket = -1, .off = a, .count = z - a};
    }
    return n;
}

void shard_plan_free(ShardPlan *p) {
    free(p->first);
    free(p->slices);
    free(p->per_server);
    memset(p, 0, sizeof *p);
}

int shard_plan(ShardPlan *p, size_t total, int K, const Bucket *b, int nb) {
    memset(p, 0, sizeof *p);
    if (K < 1) return rs_error(RS_ERR_INPUT, "--ps-servers %d: must be at least 1", K);
    if ((size_t)K > total)
        return rs_error(RS_ERR_INPUT, "--ps-servers %d: more servers than the model's %zu parameters", K, total);
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
        int n = shard_split(total, K, b[i].lo, b[i].hi, p->slices + p->nslices);
        for (int j = 0; j < n; j++) {
            p->slices[p->nslices + j].bucket = i;
            p->per_server[p->slices[p->nslices + j].server]++;
        }
        p->nslices += n;
    }
    p->first[nb] = p->nslices;
    return RS_OK;
}
