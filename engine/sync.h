/* sync.h - the exchange contract every gradient-sync back end implements (none, ring, nccl, ps, byteps, student) */
#ifndef RS_SYNC_H
#define RS_SYNC_H

#include "../net/msg.h"
#include <stddef.h>
#include "../base/config.h"
#include "../kernels/device.h"
#include "../model/model.h"

/* A back end implements only its exchange: it gets one bucket of this rank's gradients and
 * returns, for that bucket, either the sum over every rank (the engine then runs the
 * optimizer) or the updated parameters (a server ran it). Everything every data-parallel back
 * end shares (buckets, the communication thread, host staging of device buffers, the
 * optimizer, the per-step timeline, the report entry) is the engine's (engine/engine.h). */

/* ---- Types ---- */

/* A contiguous slice [lo, hi) of the flat gradient buffer. Buckets are numbered from the end of
 * the buffer (bucket 0 holds the last layer), the order backward completes them. */
typedef struct {
    size_t lo, hi;
} Bucket;

/* Where a back end's buffers live and which thread calls its exchange ops. */
typedef enum {
    SYNC_ON_HOST = 0,   /* host memory (the engine stages device buffers through pinned host
                         * memory); start / poll / end_step run on the engine's communication
                         * thread, never at the same time as the caller's ops */
    SYNC_ON_DEVICE = 1, /* device memory of job->dev; every op runs on the caller's thread (nccl) */
} SyncPlace;

/* What start leaves in a bucket's `out` slice. */
typedef enum {
    SYNC_SUMS = 0,    /* the sum of every rank's gradients (the engine runs the optimizer) */
    SYNC_UPDATES = 1, /* the updated parameters (the back end's server ran the optimizer) */
} SyncResult;

/* Everything a back end may use; owned by the caller, valid for the back end's lifetime. */
typedef struct {
    const Config *cfg;
    Device *dev;
    int rank, world, local_rank, local_world;
    void *zctx;                  /* ZeroMQ context the data plane shares (never NULL) */
    const char *addr;            /* interface address to bind data-plane sockets on */
    const char *token;           /* the job token (hex) every data-plane message carries */
    const Bucket *buckets;       /* the training buckets (NULL, 0 for collective use: bench) */
    int nbuckets;
    size_t nparams;              /* elements the buckets cover (0 for collective use) */
    size_t max_count;            /* collective use: the most elements one allreduce call may take
                                  * (bench's largest size), which bounds what a peer may send; 0:
                                  * unknown (no bound beyond the back end's own) */
    double timeout;              /* seconds for any wait */
    struct Trace *trace;         /* --trace recorder or NULL: back ends may add spans of their own
                                  * (a server's work) with trace_span on tid 2 */
    int dataparallel;            /* ps under DataParallel's step: the server answers rank 0 only,
                                  * the others' parameters come with the next step's replicate */
    struct Model *model;         /* the model being trained (NULL for collective use): a sharding back end reads its
                                  * flat buffers, whether they are paged (model.h: grads_paged, params_paged: it
                                  * gives their pages back and counts what is resident) and sets its param_need */
} SyncJob;

/* Cumulative data-plane counters of this process. */
typedef struct {
    unsigned long long bytes_sent, bytes_received, messages_sent, messages_received;
    unsigned long long dropped;  /* messages refused (bad header, token, ...) */
    const char *transport;       /* how this rank's data moves, a static string: "shm", "ipc", "tcp",
                                  * "inproc" (one process), "nccl", or "" (nothing moves: one rank) */
    int derived;                 /* 1: the counts are the algorithm's figures, not measured (nccl) */
    int split;                   /* 1: node_sent and node_received below are counted: every byte above is known to
                                  * have stayed on this host (a cluster's node) or to have crossed the network */
    unsigned long long node_sent, node_received; /* of bytes_sent and bytes_received, those to and from processes
                                                  * of this host (shared memory, a Unix socket, or TCP on it) */
    char algorithm[64];          /* what chose the route, where a library chooses ("Ring/auto":
                                  * NCCL_ALGO / NCCL_PROTO in force); "" otherwise */
    char wire_collective[16];    /* where a library reduces (nccl): the element type its collective
                                  * moves ("fp8e4m3" natively, "fp32" around FP8 rounding, ...); "" otherwise */
    char broadcast[16];          /* where a library moves the start's broadcast (nccl): the call that
                                  * ran it ("allreduce": a sum with zeros off rank 0); "" otherwise */
} SyncTraffic;

typedef struct SyncOps {
    const char *name;
    SyncPlace place;
    SyncResult result;
    /* Sets up the back end (binds sockets, allocates buffers); *state gets its private state.
     * May write this rank's data-plane endpoint (any text up to len-1 chars without a tab: an
     * address, or rank 0's NCCL unique id in hex) into endpoint; the control plane hands every
     * rank's text to connect. 0, or RS_ERR_* with rs_errmsg() set. */
    int (*init)(const SyncJob *job, void **state, char *endpoint, size_t len);
    /* Called once every member has joined: endpoints[i] is member i's text from init
     * (workers 0..world-1, then dedicated servers). 0 or RS_ERR_*. */
    int (*connect)(void *state, char *const *endpoints, int nmembers);
    /* Makes count floats at buf (memory as `place` says) equal to rank 0's on every rank, once
     * before the first step (DDP's broadcast at start). 0 or RS_ERR_*. */
    int (*broadcast)(void *state, float *buf, size_t count);
    /* Exchanges bucket b of the current step: grad holds this rank's gradients of the bucket's
     * slice, out receives the result (`result`; out == grad for an in-place sum). Returns when
     * the bucket is done, or, for a back end with poll, once it is on its way (grad must then
     * stay unchanged until poll says done). Buckets come in order 0, 1, ... 0 or RS_ERR_*. */
    int (*start)(void *state, int step, int b, float *grad, float *out);
    /* Optional: waits up to wait_ms for bucket b: 1 when it is done, 0 when not yet, or a
     * negative RS_ERR_* (with rs_errmsg() set). A back end without it is done when start
     * returns. */
    int (*poll)(void *state, int b, int wait_ms);

    /* ---- Optional ops: NULL where a back end has no use for them ---- */

    /* Called on the caller's thread at the start of every step, before forward, with the step's
     * global sample count (the same on every rank): a server updates each bucket as soon as
     * its pushes are in. 0 or RS_ERR_*. */
    int (*begin_step)(void *state, int step, int global_samples);
    /* Every bucket of the step is done (called where start is). 0 or RS_ERR_*. */
    int (*end_step)(void *state, int step);
    /* Device timing (SYNC_ON_DEVICE): bucket b's communication interval in seconds on a clock
     * of the back end's choosing, the same for every bucket of the step. 0 or RS_ERR_*. */
    int (*bucket_time)(void *state, int b, double *t0, double *t1);
    /* Seconds of work a server hosted by this process (a colocated ps) has done, and the steps
     * it has completed. Thread-safe. */
    void (*server_busy)(void *state, double *busy_s, long long *steps);
    /* 0 while the back end's own parts are well, else RS_ERR_* naming what failed (rank 0:
     * its colocated server). Thread-safe; polled by waits outside the back end. */
    int (*health)(void *state);
    /* Back ends whose workers run at their own pace (ps under --ps-consistency async or ssp:S):
     * after a step, the updates (pushes) the server had applied in all when this rank's new
     * parameters left it, and their staleness in steps (this rank's next step minus the
     * slowest worker's). Thread-safe; NULL where every rank steps in lockstep. */
    void (*progress)(void *state, long long *applied, int *staleness);
    /* The run's last step is done: say goodbye to peers (dedicated servers then hand in their
     * report entries). Called after the last step and before the report is gathered (bench:
     * after the sweep), under async as soon as this rank stops stepping, so that a bounded
     * server stops waiting for it; a second call does nothing. Traffic counts what it sends.
     * 0 or RS_ERR_*. */
    int (*close)(void *state);

    /* ---- Collective use and the end ---- */

    /* In-place sum over all ranks of count floats at buf (device memory of job->dev; the back
     * end stages it as it needs); returns when buf holds the sum on every rank. Never during a
     * step. 0 or RS_ERR_*; on failure too nothing references buf once it returns (a back end
     * that lent it to messages waits for them up to the job's timeout, and where they outlive
     * that, its message says to keep buf until destroy). */
    int (*allreduce)(void *state, float *buf, size_t count);
    /* Copies the cumulative traffic counters. Thread-safe. */
    void (*traffic)(void *state, SyncTraffic *out);
    /* Releases everything; safe after a failed init (state may be NULL). */
    void (*destroy)(void *state);

    /* ---- Optional, last (positional initialisers end before it) ---- */

    /* Checkpoints (engine/checkpoint.h): the part files this back end's servers write, numbered
     * server-0.bin .. server-(n-1).bin, each server saving its parameters, optimizer state and
     * step once a step at --checkpoint-every is complete, and loading them under --resume.
     * Thread-safe; NULL where no server holds state (the workers' parts hold everything). */
    int (*checkpoint_servers)(void *state);
    /* Sharded parameters (zero's stage 3): the model's hook (model.h's ParamNeedFn), which the
     * engine installs where this is set, timed as communication the pass waits on; and making
     * every layer whole on every rank between steps (engine_params_full). NULL elsewhere. */
    int (*param_need)(void *state, int layer);
    int (*params_full)(void *state);
    /* Optional: the intervals (clock_now) of the step's communication the back end ran on a thread
     * of its own beside the buckets (stage 3's gathers, prefetched while layers compute), at most
     * max into out: their count. Called once every bucket of the step is done; comm_total takes
     * them in. NULL elsewhere. */
    int (*comm_spans)(void *state, double (*out)[2], int max);
} SyncOps;

/* ---- Prototypes ---- */

/* Splits nparams into buckets as PyTorch DDP does, from the end: the first bucket (the last
 * layer's gradients, complete first) at most first_bytes (DDP: 1 MiB), the others at most
 * bucket_bytes each. *out is malloc'd (caller frees); returns the count, or -1 on OOM. */
int sync_plan_buckets(size_t nparams, double bucket_bytes, double first_bytes, Bucket **out);

/* The bucket plan every process of a run uses: --bucket-mb for the others, the first capped
 * at min(1 MiB, --bucket-mb). Same contract as sync_plan_buckets. */
int sync_plan_run(size_t nparams, const Config *cfg, Bucket **out);

/* Starts a back end for this rank: ops->init, then (when env->launched) joins the control plane
 * with canonical, the options every member must share, and ops->connect with every member's
 * endpoint; a lone rank connects to itself. extra (may be NULL) is a second endpoint text
 * published beside the back end's (a step driver's): its init has written it, and *extras gets
 * every member's (malloc'd array of nmembers strings, caller frees with free_texts; NULL
 * without extra). *state and *ctrl (NULL for a lone rank) are the caller's to release
 * (ops->destroy, ctrl_close), on failure too. 0, or RS_ERR_* with rs_errmsg() set. */
struct RankEnv;
struct Ctrl;
int sync_start(const SyncOps *ops, const SyncJob *job, const struct RankEnv *env, const char *canonical,
               const char *extra, void **state, struct Ctrl **ctrl, char ***extras);

/* The slower of two SyncTraffic transports (tcp, then ipc, shm, inproc, nccl, ""), as a static
 * string: a ring or a server moves at the pace of its slowest link. NULL or an unknown name counts
 * as "". */
const char *sync_transport_slower(const char *a, const char *b);

/* Copies the message layer's counts (net/msg.h: every host data plane counts there, by one rule)
 * into out's byte, message, dropped and node fields, leaving the rest of out as it is. */
void sync_traffic_counts(const MsgCount *c, SyncTraffic *out);

/* Adds more's byte, message, dropped and node counts to out's (a process's entry that sums two
 * members of it: a worker and its colocated server, a worker and DataParallel's channel). */
void sync_traffic_add(SyncTraffic *out, const SyncTraffic *more);

/* Takes times x less's byte, message, dropped and node counts from out's (what a measurement
 * subtracts from a process's counters: the bench's line-up barriers, a window's start). */
void sync_traffic_sub(SyncTraffic *out, const SyncTraffic *less, unsigned long long times);

/* The back ends themselves are declared on their own floors (allreduce/allreduce.h, ps/ps.h) and
 * listed by name in experiments/backends.c: the engine knows none of them. */

#endif
