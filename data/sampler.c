/* sampler.c - DistributedSampler semantics: one shuffled (or not) order per epoch, padded or cut to the ranks */
#include "data.h"
#include "../base/err.h"
#include "../base/rng.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* See data.h. */
int sampler_init(Sampler *s, int n, int world, int rank, int shuffle, int drop_last, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->epoch = INT_MIN;   /* no order computed yet */
    if (n < 1)
        return rs_error(RS_ERR_INPUT, "sampler: the dataset has %d samples, need at least 1", n);
    if (world < 1)
        return rs_error(RS_ERR_INPUT, "sampler: world size %d, need at least 1", world);
    if (rank < 0 || rank >= world)
        return rs_error(RS_ERR_INPUT, "sampler: rank %d is outside [0, %d)", rank, world);

    long long per_rank = drop_last ? n / world : ((long long)n + world - 1) / world;
    if (per_rank < 1)
        return rs_error(RS_ERR_INPUT, "sampler: --drop-last with %d samples over %d ranks leaves "
                        "no sample per rank", n, world);
    long long total = per_rank * world;
    if (total > (long long)1 << 31)   /* ints index perm; padding can pass INT_MAX by world - 1 */
        return rs_error(RS_ERR_INPUT, "sampler: %d samples padded over %d ranks is too many", n,
                        world);

    /* Room for the whole permutation of n (drop_last cuts it) and for the padding. */
    size_t cap = (size_t)(total > n ? total : n);
    s->perm = malloc(cap * sizeof *s->perm);
    if (!s->perm)
        return rs_error(RS_ERR_RUNTIME, "sampler: out of memory for %zu indices", cap);
    s->n = n;
    s->world = world;
    s->rank = rank;
    s->shuffle = shuffle ? 1 : 0;
    s->drop_last = drop_last ? 1 : 0;
    s->seed = seed;
    s->per_rank = (int)per_rank;
    return RS_OK;
}

/* See data.h. */
void sampler_set_epoch(Sampler *s, int epoch) {
    if (!s->perm || s->epoch == epoch) return;
    int n = s->n;
    size_t total = (size_t)s->per_rank * s->world;

    for (int i = 0; i < n; i++) s->perm[i] = i;
    if (s->shuffle) {
        /* Fisher-Yates from seed + epoch, as DistributedSampler seeds randperm. */
        Rng r;
        rng_seed(&r, s->seed + (uint64_t)(int64_t)epoch);
        for (int i = n - 1; i > 0; i--) {
            int j = (int)rng_below(&r, (uint64_t)i + 1);
            int t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    /* Padding repeats the order from its start (wrapping again when world > n). drop_last
     * simply ignores what lies beyond total. */
    for (size_t i = (size_t)n; i < total; i++) s->perm[i] = s->perm[i - (size_t)n];
    s->epoch = epoch;
}

/* See data.h. */
void sampler_free(Sampler *s) {
    if (!s) return;
    free(s->perm);
    s->perm = NULL;
    s->per_rank = 0;
    s->epoch = INT_MIN;   /* no order computed yet */
}
