/* sync.h - the gradient-synchronisation contract every back end implements (none, ring, nccl, ps) */
#ifndef RS_SYNC_H
#define RS_SYNC_H

#include <stddef.h>
#include "config.h"
#include "model.h"

struct Ctrl;

/* ---- Types ---- */

/* A contiguous slice [lo, hi) of the flat gradient buffer. Buckets are numbered from the end of
 * the buffer (bucket 0 holds the last layer), the order backward completes them. */
typedef struct {
    size_t lo, hi;
} Bucket;

/* Everything a back end may use; owned by the trainer, valid for the back end's lifetime. */
typedef struct {
    const Config *cfg;
    Model *model;                /* NULL for collective-only use (bench, tests): no optimizer */
    Device *dev;
    int rank, world, local_rank, local_world;
    struct Ctrl *ctrl;           /* control plane (NULL with one rank and no launcher) */
    void *zctx;                  /* ZeroMQ context the data plane shares (never NULL) */
    const char *addr;            /* interface address to bind data-plane sockets on */
    const char *token;           /* the job token (hex) every data-plane message carries */
    const Bucket *buckets;
    int nbuckets;
    double timeout;              /* seconds for any wait */
    struct Trace *trace;         /* --trace recorder or NULL: back ends may call trace_span
                                  * (common/trace.h) with "comm" spans on tid 1 */
} SyncJob;

/* What a back end measured in one step (seconds). */
typedef struct {
    double comm_s;       /* summed time buckets spent in communication (comm_total) */
    double idle_s;       /* time blocked waiting for the first peer data of the step */
    double optimizer_s;  /* time of the optimizer step done inside finish */
    double compute_s;    /* model computation a back end did for the trainer outside the optimizer
                          * (DataParallel's loss over the global batch, on rank 0) */
} SyncStep;

/* Cumulative data-plane counters of this process. */
typedef struct {
    unsigned long long bytes_sent, bytes_received, messages_sent, messages_received;
    unsigned long long dropped;  /* messages refused (bad header, token, ...) */
    const char *transport;       /* how this rank's data moves, a static string: "shm", "ipc", "tcp",
                                  * "inproc" (one process), "nccl", or "" (nothing moves: one rank) */
} SyncTraffic;

typedef struct SyncOps {
    const char *name;
    /* Sets up the back end (binds sockets, starts threads, allocates buffers); *state gets its
     * private state. May write this rank's data-plane endpoint (any text up to len-1 chars: an
     * address, or rank 0's NCCL unique id in hex) into endpoint; the control plane hands every
     * rank's text to connect. 0, or RS_ERR_* with rs_errmsg() set. */
    int (*init)(const SyncJob *job, void **state, char *endpoint, size_t len);
    /* Called once every member has joined: endpoints[i] is member i's text from init
     * (workers 0..world-1, then dedicated servers). 0 or RS_ERR_*. */
    int (*connect)(void *state, char *const *endpoints, int nmembers);
    /* Called once before the first step, after every rank has initialised: make every rank's
     * parameters equal to rank 0's (DDP's broadcast at start). */
    int (*broadcast_params)(void *state);
    /* Bucket b's gradients are complete on the compute stream: start reducing it. */
    int (*bucket_ready)(void *state, int b);
    /* Returns when every bucket of the step is reduced and the optimizer has run, so every rank
     * holds the same new parameters. global_samples is the step's sample count over all ranks
     * (the gradients are sums over samples). Fills *out. 0 or RS_ERR_PEER/RS_ERR_RUNTIME.
     * With scatter_batch (DataParallel) only rank 0 holds the new parameters when finish
     * returns; the others get them from the next step's scatter_batch (the replicate). */
    int (*finish)(void *state, int step, int global_samples, SyncStep *out);
    /* Collective use: in-place sum over all ranks of count floats at buf (device memory of
     * job->dev); returns when buf holds the sum on every rank. 0 or RS_ERR_*. */
    int (*allreduce)(void *state, float *buf, size_t count);
    /* Copies the cumulative traffic counters. */
    void (*traffic)(void *state, SyncTraffic *out);
    /* Releases everything; safe after a failed init (state may be NULL). */
    void (*destroy)(void *state);

    /* ---- Optional ops: NULL where a back end has no use for them (the trainer checks) ---- */

    /* The run's last step is done: say goodbye to peers (dedicated servers then hand in their
     * report entries). Called once, after the last finish and before the report is gathered
     * (bench: after the sweep); traffic counts what it sends. 0 or RS_ERR_*. */
    int (*close)(void *state);
    /* Called at the start of every step, before scatter_batch and forward, with the step's
     * global sample count (the same on every rank): lets a back end tell its reducers early,
     * so that each bucket is reduced and updated as soon as it is complete. finish still works
     * for a step without it. 0 or RS_ERR_*. */
    int (*begin_step)(void *state, int step, int global_samples);

    /* DataParallel's whole step (--sync ps --ps-mode dataparallel). When scatter_batch is set,
     * so is loss, and the trainer stages the step's whole global batch on rank 0 only. */

    /* Rank 0 passes the step's global batch from host memory (global_rows rows of x, the
     * inputs, and y, the labels; other ranks pass NULL, NULL, 0); every rank returns with its
     * chunk (ceil(global_rows / N) rows, later ranks fewer or none) in model->act[0] and
     * model->labels and its row count in *local_rows, and with rank 0's current parameters in
     * model->params (DataParallel's replicate). Adds what it measured to *acc (comm_s, idle_s).
     * 0 or RS_ERR_PEER/RS_ERR_RUNTIME. */
    int (*scatter_batch)(void *state, int step, const float *x, const int *y, int global_rows, int *local_rows,
                         SyncStep *acc);
    /* Replaces model_loss after forward on local_rows rows: the logits are gathered to rank 0,
     * which computes the loss over the global batch (its sum and correct count added to rank
     * 0's model->stats only) and scatters the output gradients back; every rank returns with
     * its rows' output gradient in model->dbuf[0], ready for model_backward. Adds what it
     * measured to *acc (comm_s, idle_s, compute_s). 0 or RS_ERR_PEER/RS_ERR_RUNTIME. */
    int (*loss)(void *state, int local_rows, SyncStep *acc);
} SyncOps;

/* ---- Prototypes ---- */

/* The back end called name, or NULL (rs_errmsg() lists the known names). */
const SyncOps *sync_find(const char *name);

/* Splits nparams into buckets of bucket_bytes from the end. *out is malloc'd (caller frees);
 * returns the count, or -1 on OOM. */
int sync_plan_buckets(size_t nparams, double bucket_bytes, Bucket **out);

/* Starts a back end for this rank: ops->init, then (when env->launched) joins the control plane
 * with canonical, the options every member must share, and ops->connect with every member's
 * endpoint; a lone rank connects to itself. *state and *ctrl (NULL for a lone rank) are the
 * caller's to release (ops->destroy, ctrl_close), on failure too. 0, or RS_ERR_* with rs_errmsg() set. */
struct RankEnv;
int sync_start(const SyncOps *ops, const SyncJob *job, const struct RankEnv *env, const char *canonical,
               void **state, struct Ctrl **ctrl);

/* The slower of two SyncTraffic transports (tcp, then ipc, shm, inproc, nccl, ""), as a static
 * string: a ring or a server moves at the pace of its slowest link. NULL or an unknown name counts
 * as "". */
const char *sync_transport_slower(const char *a, const char *b);

/* The built-in back ends. */
const SyncOps *sync_none(void);
const SyncOps *sync_ring(void);
const SyncOps *sync_nccl(void);  /* NULL in a build without CUDA */
const SyncOps *sync_student(void); /* lab 5: allreduce/student.c, a skeleton to complete */

#endif
