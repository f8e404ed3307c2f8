/* shard.h - the range slicer: K servers own contiguous key ranges; buckets cut into (server, offset, count) slices */
#ifndef RS_PS_SHARD_H
#define RS_PS_SHARD_H

#include <stddef.h>
#include "../common/sync.h"

/* ---- Types ---- */

/* Keys [lo, hi) of one server. */
typedef struct {
    size_t lo, hi;
} ShardRange;

/* One bucket's part on one server: keys [off, off + count). */
typedef struct {
    int server, bucket;
    size_t off, count;
} ShardSlice;

/* Every bucket cut by the server ranges, buckets in order, each bucket's slices by server. */
typedef struct {
    int K, nbuckets, nslices;
    size_t total;
    int *first;          /* [nbuckets + 1]: bucket b's slices are slices[first[b] .. first[b+1]) */
    ShardSlice *slices;  /* [nslices] */
    int *per_server;     /* [K]: slices each server holds */
} ShardPlan;

/* ---- Helpers ---- */

/* Server s's keys of total over K servers, as ps-lite's range slicer: an even split, the first
 * total % K servers one key more. Empty when K > total and s >= total. */
static inline ShardRange shard_range(size_t total, int K, int s) {
    size_t base = total / (size_t)K, rem = total % (size_t)K, us = (size_t)s;
    ShardRange r;
    r.lo = us * base + (us < rem ? us : rem);
    r.hi = r.lo + base + (us < rem ? 1 : 0);
    return r;
}

/* The server holding key (key < total). */
static inline int shard_of(size_t total, int K, size_t key) {
    size_t base = total / (size_t)K, rem = total % (size_t)K;
    if (key < rem * (base + 1)) return (int)(key / (base + 1));
    return (int)(rem + (key - rem * (base + 1)) / base);
}

/* Chunks of an allreduce of total elements cut every per elements from the end (as
 * sync_plan_buckets cuts buckets): how many, and chunk b's [lo, hi). */
static inline int shard_nchunks(size_t total, size_t per) {
    size_t n = (total + per - 1) / per;
    return n < 1 ? 1 : (int)n;
}

static inline void shard_chunk(size_t total, size_t per, int b, size_t *lo, size_t *hi) {
    size_t h = total - (size_t)b * per;
    *hi = h;
    *lo = h > per ? h - per : 0;
}

/* ---- Prototypes ---- */

/* Cuts keys [lo, hi) of total by the K server ranges into out (room for K), leaving empty
 * parts out. Returns how many slices were written (bucket fields -1). */
int shard_split(size_t total, int K, size_t lo, size_t hi, ShardSlice *out);

/* Plans nb buckets (each within [0, total)) over K servers. 0, or RS_ERR_INPUT when K < 1 or
 * K > total ("--ps-servers 9: more servers than the model's 8 parameters") or a bucket lies
 * outside the keys, RS_ERR_RUNTIME on OOM. The plan owns its arrays (shard_plan_free). */
int shard_plan(ShardPlan *p, size_t total, int K, const Bucket *b, int nb);
void shard_plan_free(ShardPlan *p);

#endif
