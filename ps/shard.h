/* shard.h - the key slicer: K servers own contiguous key ranges (even or weighted), or buckets cut into partitions striped over every server; buckets cut into (server, offset, count) slices */
#ifndef RS_PS_SHARD_H
#define RS_PS_SHARD_H

#include <stddef.h>
#include "../engine/sync.h"
#include "../base/split.h"

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

/* Weights of K servers' shares of the keys: servers 0..lead-1 weigh wlead each, servers
 * lead..K-1 wrest each (every weight a server has is at least 1). shard_even(K) is ps-lite's
 * even split; shard_byteps(n, k) is BytePS's (OSDI'20 section 4.1): the n workers' summation
 * shards (servers 0..n-1) weigh n - k and the k CPU servers (n..n+k-1) 2(n - 1), out of
 * n^2 + kn - 2k; at k = n the workers' weight is 0 and they hold no shard, so the servers are
 * the k CPU servers alone (0..k-1, lead 0). Weights split the keys into ranges
 * (shard_weighted_plan) or every bucket (shard_bucket_plan, byteps's training keys). */
typedef struct {
    int K, lead;
    unsigned long long wlead, wrest;
} ShardWeights;

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
    ShardRange r;
    split_even(total, K, s, &r.lo, &r.hi);
    return r;
}

/* The server holding key (key < total). */
static inline int shard_of(size_t total, int K, size_t key) {
    size_t base = total / (size_t)K, rem = total % (size_t)K;
    if (key < rem * (base + 1)) return (int)(key / (base + 1));
    return (int)(rem + (key - rem * (base + 1)) / base);
}

static inline ShardWeights shard_even(int K) {
    ShardWeights w = {K, K, 1, 1};
    return w;
}

/* BytePS's split for n >= 1 workers and 0 <= k <= n CPU servers (n = 1 needs k = 0: the
 * weights' total n^2 + kn - 2k is 0 at n = k = 1). */
static inline ShardWeights shard_byteps(int n, int k) {
    ShardWeights w = {n + k, n, (unsigned long long)(n - k), 2ULL * (unsigned long long)(n - 1)};
    if (k == n) w = (ShardWeights){k, 0, 0, 1}; /* the workers' shards are empty: k CPU servers alone */
    return w;
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

/* The allreduce's chunks striped (--ps-partition-kb): owner[b] for the nchunks chunks of total
 * elements cut every per from the end (shard_chunk), each wholly on the server shard_stripe_plan
 * would give it (the least loaded over its weight, ties to the lower: a round robin under equal
 * weights). A pure function both sides compute. */
void shard_stripe_chunks(size_t total, size_t per, int nchunks, const ShardWeights *w, int *owner);

/* Server s's keys of total weighed by w: server i gets floor(total w_i / W) keys (W the weights'
 * sum), and the first total - sum of those servers one key more, so that the ranges, in server
 * order, partition [0, total). Under equal weights the same ranges as shard_range. total * W
 * must fit 64 bits. */
ShardRange shard_weighted_range(size_t total, const ShardWeights *w, int s);

/* The server holding key (key < total) under w. */
int shard_weighted_of(size_t total, const ShardWeights *w, size_t key);

/* Cuts keys [lo, hi) of total by the K server ranges into out (room for K), leaving empty
 * parts out. Returns how many slices were written (bucket fields -1). */
int shard_split(size_t total, int K, size_t lo, size_t hi, ShardSlice *out);

/* shard_split by w's ranges (room for w->K slices). */
int shard_weighted_split(size_t total, const ShardWeights *w, size_t lo, size_t hi, ShardSlice *out);

/* Plans nb buckets (each within [0, total)) over K servers. 0, or RS_ERR_INPUT when K < 1 or
 * K > total ("--ps-servers 9: more servers than the model's 8 parameters") or a bucket lies
 * outside the keys, RS_ERR_RUNTIME on OOM. The plan owns its arrays (shard_plan_free). */
int shard_plan(ShardPlan *p, size_t total, int K, const Bucket *b, int nb);

/* shard_plan by w's ranges. RS_ERR_INPUT when w->K < 1 or a server would hold no key
 * (shard_plan's "more servers than the model's 8 parameters" under equal weights; under
 * BytePS's "--sync byteps: server 3 of 4 would hold no key of the model's 8 parameters"). */
int shard_weighted_plan(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *b, int nb);

/* BytePS's plan: every bucket split over the K servers by w's weights (server s gets
 * shard_weighted_range of the bucket's length, from its lo), so that each bucket loads every
 * server in the weights' proportions; a server's keys are then one piece of every bucket, not
 * one range. RS_ERR_INPUT as shard_weighted_plan, a server with no piece of any bucket holding no
 * key. */
int shard_bucket_plan(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *b, int nb);

/* 0 when every server of w holds at least one key of total, else RS_ERR_INPUT as
 * shard_weighted_plan says. */
int shard_weighted_check(size_t total, const ShardWeights *w);
void shard_plan_free(ShardPlan *p);

/* ---- Partitions (--ps-partition-kb) ---- */

/* The most partitions a run may have: the wire header's bucket field is a u32. */
#define SHARD_MAX_PARTS 0xfffffffeu

/* Cuts each of nb buckets into partitions of at most keys keys (keys 0: whole buckets), each
 * bucket's partitions in key order from its lo, so that the servers sum and answer partitions,
 * not buckets. When that gives fewer partitions than K servers, keys is halved until it gives
 * K or each partition is one key, so that every server can hold one (a pure function of its
 * arguments: workers and servers compute the same). On success returns the partition count np
 * with *parts [np] and *first [nb + 1] (bucket b's partitions are parts[first[b] .. first[b+1]))
 * owned by the caller (free), and *used the keys per partition it settled on; -RS_ERR_INPUT
 * when np would exceed SHARD_MAX_PARTS ("--ps-partition-kb: N partitions, more than the wire
 * header addresses"), -RS_ERR_RUNTIME on OOM, rs_errmsg() set either way. */
int shard_partition(const Bucket *b, int nb, size_t keys, int K, Bucket **parts, int **first, size_t *used);

/* A run's partitions of its nb buckets for K servers (cfg's --ps-partition-kb, by
 * config_partition_keys): *keys 0 when the run has none (off, or auto without --link), and then
 * *parts is a copy of the buckets, one partition each; else shard_partition's. *np, *parts
 * [*np] and *first [nb + 1] as shard_partition's, owned by the caller (free). 0 or RS_ERR_*. */
int shard_partition_run(const Config *cfg, const Bucket *b, int nb, int K, Bucket **parts, int **first, int *np,
                        size_t *keys);

/* The striped plan of np partitions over w's servers: each partition wholly on one server,
 * partitions taken in order and each given to the server whose load (keys held, over its weight)
 * would be least with it, ties to the lower server: under equal weights and equal partitions a
 * round robin, so that consecutive partitions of a bucket load every server's link at once, and
 * no two servers' keys differ by more than one partition (weighted: in the weights' proportions
 * within one partition each). A pure function of its arguments, which the workers and every
 * server compute alike. One slice per partition (slices[j].bucket = j). 0, RS_ERR_INPUT when a
 * server would hold no partition ("--ps-partition-kb: server 3 of 4 would hold no partition"),
 * or RS_ERR_RUNTIME on OOM. */
int shard_stripe_plan(ShardPlan *p, size_t total, const ShardWeights *w, const Bucket *parts, int np);

#endif
