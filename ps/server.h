/* server.h - the parameter server: sums the workers' pushes, applies a swappable update rule, answers with the result */
#ifndef RS_PS_SERVER_H
#define RS_PS_SERVER_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "../base/config.h"
#include "../kernels/device.h"
#include "../net/link.h"
#include "../net/msg.h"
#include "../engine/sync.h"
#include "shard.h"
#include "wire.h"

/* ---- Types ---- */

typedef struct PsServer PsServer;

/* What a server needs; copied by ps_server_create (pointers must outlive the server). */
typedef struct {
    const Config *cfg;
    Device *dev;            /* where the buffers live (MEM_SERVER): rank 0's device, or the CPU */
    void *zctx;             /* ZeroMQ context (owned by the caller) */
    const char *addr;       /* interface to bind the TCP endpoint on (NULL: 127.0.0.1) */
    const char *token;      /* the job token text; its hash is checked on every message */
    int id, nservers;       /* this server's index and the count K (keys sharded by range) */
    ShardWeights weights;   /* the servers' shares of the keys (ps/shard.h); K = 0: even over
                             * nservers (otherwise K must be nservers) */
    int per_bucket;         /* 1 (byteps): the training keys are every bucket split by the weights
                             * (shard_bucket_plan), not one range; the allreduce keeps ranges */
    int striped;            /* 1 (--ps-partition-kb): buckets are partitions, each wholly on the
                             * server shard_stripe_plan gives it (over the weights); per_bucket
                             * then does not apply */
    int nworkers;
    size_t nparams;         /* training keys (0: collective use only, no optimizer state) */
    const Bucket *buckets;  /* the trainer's buckets over nparams (nbuckets of them) */
    int nbuckets;
    int colocated;          /* 1: a thread of worker local_rank (rank 0's, or under --ps-placement
                             * sharded every worker's shard): that worker comes over inproc (not
                             * counted as traffic), and waiting between steps never times out */
    int local_rank;         /* colocated: the worker this server lives in (0 unless sharded) */
    double timeout;         /* seconds a step may wait for a missing worker, counted from its
                             * first contribution (rank 0's early STEP starts no clock) */
    int dataparallel;       /* 1 (--ps-mode dataparallel): a step's new parameters go back to
                             * rank 0 only, which replicates them at the next step's start */
    struct Trace *trace;    /* NULL, or where its work goes as spans (tid 2): rank 0's trace
                             * (colocated) or its own (dedicated) */
} PsServerArgs;

/* One slice's update: n keys of this server, sum = the step's contributions summed in rank
 * order (device memory of dev, like params, mom and mom2). */
typedef struct {
    Device *dev;
    const Config *cfg;
    float *params, *mom, *sum;
    float *mom2;            /* AdamW's second moment (NULL under SGD) */
    size_t n;
    long long global_samples;
    int t;                  /* the update's number, from 1 (AdamW's bias correction) */
} PsUpdate;

/* An update rule: applies the step to one slice (queued on dev's compute stream) and returns
 * the device pointer whose n values go back to every worker. */
typedef const float *(*PsRuleFn)(const PsUpdate *u);

/* ---- Prototypes ---- */

/* The rules: SGD with momentum and weight decay (kernels' sgd_step, grads scaled by
 * 1/global_samples; returns params) or AdamW (kernels' adamw_step, --optimizer adamw: mom and
 * mom2 its moments, t the step; returns params) for WIRE_PUSH, and the plain sum (returns sum)
 * for WIRE_SUM. */
const float *ps_rule_sgd(const PsUpdate *u);
const float *ps_rule_adamw(const PsUpdate *u);
const float *ps_rule_sum(const PsUpdate *u);

/* Creates a server: binds a ROUTER (ZMQ_ROUTER_MANDATORY) on tcp://addr:* and, colocated, on an
 * inproc endpoint; allocates its buffers on a->dev under MEM_SERVER (a receive buffer per
 * worker, the sum, master parameters and SGD's momentum over its key range; AdamW's two moments
 * under MEM_OPTIMIZER instead; on a 16-bit --wire (a->cfg->wire, docs/ps-protocol.md),
 * host buffers for the replies encoded, 2 bytes a key, and where the device is not host memory
 * for a contribution decoded, 4). 0, or RS_ERR_INPUT
 * (bad arguments), RS_ERR_RUNTIME (bind, memory) with rs_errmsg() set; *out NULL on failure. */
int ps_server_create(PsServer **out, const PsServerArgs *a);

/* The TCP endpoint workers connect to ("tcp://127.0.0.1:40123") and the inproc one ("" unless
 * colocated). Owned by the server. */
const char *ps_server_endpoint(const PsServer *s);
const char *ps_server_inproc(const PsServer *s);

/* Serves in the calling thread until every worker has said goodbye (0), ps_server_stop was
 * called (0), or a failure: RS_ERR_PEER naming the missing rank ("ps server: no push from rank 3
 * for step 12 within 60 s"), RS_ERR_RUNTIME. On failure the workers are sent the reason. */
int ps_server_run(PsServer *s);

/* Runs ps_server_run in a thread of its own (bound to the device with its own stream). 0 or
 * RS_ERR_RUNTIME. */
int ps_server_start(PsServer *s);

/* The thread's state: 0 while serving or after a clean end, else its status, with the reason
 * copied into why (may be NULL). Thread-safe. */
int ps_server_status(PsServer *s, char *why, size_t len);

/* Asks the serving loop to end (it notices within 100 ms). Thread-safe. */
void ps_server_stop(PsServer *s);

/* Cumulative traffic with other processes (its host worker's inproc messages are not counted) and
 * dropped messages; after ps_server_set_nodes, split by the links they took (SyncTraffic.split).
 * Thread-safe. */
void ps_server_traffic(PsServer *s, SyncTraffic *out);

/* Which workers run on this server's host: node[r] 1 for worker r (n of them; the caller keeps
 * node), so that its traffic says which bytes stayed on the node. Call before ps_server_start's
 * first message is counted (ps_connect does); 0, or RS_ERR_RUNTIME (out of memory). */
int ps_server_set_nodes(PsServer *s, const unsigned char *node, int n);

/* Seconds spent reducing and updating, and steps completed. Thread-safe. */
void ps_server_busy(PsServer *s, double *busy_s, long long *steps);

/* Stops and joins the thread (if started), closes the socket, waits (bounded) for zero-copy
 * messages to let go of its buffers, frees everything. NULL is a no-op. */
void ps_server_destroy(PsServer *s);

/* ---- Transport helper shared by the server, the client and DataParallel's driver ---- */

/* Sends [id?][header][payload?] on sock through the message layer (net/msg.h): the header
 * encoded here (ps/wire.h), the payload lent without a copy where lend is given and it is large
 * enough (the caller keeps it unchanged until lend's count is back to zero), paced on the
 * emulated link and counted into c unless local (inproc: this process's own server); node: the
 * peer is on this host. *start as msg_send's. 0 or -1 with zmq_errno() set. */
static inline int ps_send(void *sock, const void *id, size_t idlen, const WireHeader *h, const void *payload,
                          size_t bytes, MsgLend *lend, int local, int node, MsgCount *c, double *start) {
    unsigned char hb[WIRE_HEADER_BYTES];
    wire_encode(h, hb);
    MsgOut m = {.id = id, .idlen = id ? idlen : 0, .head = hb, .head_bytes = sizeof hb, .payload = payload,
                .bytes = payload ? bytes : 0, .lend = lend, .local = local, .node = node};
    return msg_send(sock, &m, c, start);
}

/* The most elements one ps message carries: an allreduce chunk of per elements, or the largest
 * of the n training buckets (what the server's socket takes and the heap keeps warm). */
static inline size_t ps_largest_slice(size_t per, const Bucket *buckets, int n) {
    size_t most = per;
    for (int b = 0; b < n; b++)
        if (buckets[b].hi - buckets[b].lo > most) most = buckets[b].hi - buckets[b].lo;
    return most;
}

/* ZeroMQ routing identity of worker rank ("w3"); returns its length. */
static inline size_t ps_identity(int rank, char *buf, size_t len) {
    int n = snprintf(buf, len, "w%d", rank);
    return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

#endif
