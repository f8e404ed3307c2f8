/* engine.h - the training engine every data-parallel back end shares: buckets, the communication thread, host staging, the optimizer, the per-step timeline */
#ifndef RS_ENGINE_H
#define RS_ENGINE_H

#include <stddef.h>
#include "../base/config.h"
#include "../model/model.h"
#include "sync.h"

/* The engine runs one rank's steps. A back end (engine/sync.h) only exchanges buckets; the
 * engine hands it each bucket as backward completes it (DDP's overlap), on its communication
 * thread for host back ends, staged through pinned host memory where the device's is not
 * host-visible; it runs the optimizer when the back end returns sums, and times every step
 * the same way whatever the back end:
 *
 *   data       staging the step's batch (the caller's part, from engine_step_begin; under
 *              --accum-steps, every micro-batch's)
 *   forward    the forward pass and the loss (device time on a GPU), plus --straggler's sleep
 *              and, under DataParallel's driver, rank 0's loss over the gathered outputs
 *   backward   the backward pass (device time on a GPU)
 *   optimizer  the local optimizer step (0 where a server runs it)
 *   blocked    the time the compute thread waited on the back end or the step driver (and on a
 *              sharding back end's parameter gathers inside forward and backward); the
 *              report splits it into idle (waiting for the last rank to arrive at the step's
 *              synchronisation, from every rank's arrival time on rank 0's clock) and
 *              comm_exposed (the rest)
 *   other      the rest of the step (staging copies, bookkeeping)
 *   comm_total the union of the intervals during which any bucket (or a driver's message) of
 *              the step was in communication; it overlaps the phases above.
 *
 * Errors: every function returns 0 or RS_ERR_* with rs_errmsg() set; a failed step leaves the
 * engine unusable but safe to free. */

/* ---- Types ---- */

typedef struct Engine Engine;

/* One step on this rank, in seconds on this rank's clock (clock_now). */
typedef struct {
    double start;       /* when the step began (engine_step_begin) */
    double step;        /* its whole duration */
    double data, forward, backward, optimizer;
    double blocked;     /* waited on the back end or the step driver */
    double arrival;     /* when this rank reached the step's synchronisation */
    double comm_total;  /* union of the step's communication intervals */
} StepTimes;

/* A step driver's part of one step (DataParallel's scatter or loss), for the timeline. */
typedef struct {
    double comm_t0, comm_t1; /* its communication interval (both 0: none) */
    double blocked;          /* of which waiting for peers */
    double compute;          /* model computation done inside it (rank 0's loss) */
    double arrival;          /* when this rank reached the step's synchronisation here (0: not here) */
} DriverSpan;

/* Health check a driver polls while it waits: 0, or RS_ERR_* naming what failed. */
typedef int (*HealthFn)(void *arg);

/* A different step around the same exchange: DataParallel's (ps/dataparallel.c), where rank 0
 * scatters the global batch and the parameters and gathers the outputs for the loss. The DDP
 * step needs no driver. */
typedef struct StepDriver {
    const char *name;
    /* Checks the options and sets up (rank 0 binds); writes this rank's endpoint text into
     * endpoint (no tab). health(arg) is polled during its waits. 0 or RS_ERR_*. */
    int (*init)(const SyncJob *job, Model *m, HealthFn health, void *arg, void **state, char *endpoint,
                size_t len);
    /* Every member's endpoint text from init. 0 or RS_ERR_*. */
    int (*connect)(void *state, char *const *endpoints, int n);
    /* Once before the first step, after the parameters are broadcast. 0 or RS_ERR_*. */
    int (*hello)(void *state);
    /* Rank 0 passes the step's global batch from host memory (the others NULL, NULL, 0); every
     * rank returns with its chunk in model->act[0] / labels, its row count in *local_rows, and
     * rank 0's parameters in model->params. */
    int (*scatter)(void *state, int step, const float *x, const int *y, int global_rows, int *local_rows,
                   DriverSpan *sp);
    /* Replaces model_loss after forward: every rank returns with its rows' output gradient in
     * model->dbuf[0]; rank 0's model->stats gets the loss over the global batch. */
    int (*loss)(void *state, int local_rows, DriverSpan *sp);
    /* Adds its counters to *out. */
    void (*traffic)(void *state, SyncTraffic *out);
    void (*destroy)(void *state);
} StepDriver;

/* What the engine needs; pointers must outlive it. */
typedef struct {
    const Config *cfg;
    Model *model;
    Device *dev;
    const struct RankEnv *env;
    int rank, world, local_rank, local_world;
    void *zctx;
    struct Trace *trace;       /* --trace recorder or NULL */
    double wall_offset;        /* clock_wall() - clock_now(), for trace timestamps */
    const SyncOps *ops;
    const StepDriver *driver;  /* NULL: DDP's step */
    int steps;                 /* steps the run will take (the timeline's length) */
    int layer_buckets;         /* one bucket a layer instead of DDP's plan (BackendShape.layer_buckets: zero's stage 3) */
} EngineArgs;

/* ---- Prototypes ---- */

/* Plans the buckets (DDP's: engine/sync.h), allocates the staging, starts the back end and the
 * driver on the control plane, measures every member's clock offset to rank 0 (rank 0 keeps
 * them), makes every rank's parameters rank 0's (momentum zeroed elsewhere), starts the
 * communication thread. *out is set on success; on failure nothing is left to free. */
int engine_create(Engine **out, const EngineArgs *a);

/* Whether rank 0 stages the whole global batch and the driver scatters it (DataParallel). */
int engine_scatters(const Engine *e);

/* Marks the start of step `step` (before the caller stages its batch). */
void engine_step_begin(Engine *e, int step);

/* --accum-steps K > 1: the next of micro-batches 0 .. K-2 of step `step`, whose rows rows the caller
 * has staged in model->act[0] and labels (after engine_step_begin, then after the previous
 * micro-batch): forward, loss (model->stats adds up over the step's micro-batches), backward,
 * and its gradients added to the engine's sum, with nothing handed to the back end (DDP's
 * no_sync). The step's last micro-batch is engine_step's, which adds the sum into each bucket
 * before handing it over. The timeline's data, forward and backward add up over the step's
 * micro-batches. RS_ERR_RUNTIME for a call out of order. */
int engine_accumulate(Engine *e, int step, int rows);

/* Runs the step: the batch is staged (DDP: rows rows in model->act[0] and labels; a
 * scattering driver: rank 0's global batch at x, y with rows rows, others NULL, NULL, 0).
 * global_samples is the step's sample count over every rank. Returns once this rank holds the
 * step's new parameters (a scattering driver's other ranks: with the next step's replicate);
 * *local_rows is the rows this rank computed on. model->stats holds the step's loss sums. Under
 * --accum-steps K this is the step's last micro-batch, after K-1 engine_accumulate calls, and
 * global_samples counts every micro-batch's. */
int engine_step(Engine *e, int step, const float *x, const int *y, int rows, int global_samples,
                int *local_rows);

/* After a step: whether the run ends here, in *stop. budget_spent is the caller's verdict on
 * its step budget (under async: the server has applied --steps updates' worth). With
 * --time-budget, ranks that step in lockstep decide together (a one-float sum over the back
 * end: every rank stops after the same step, once any rank's clock has passed the budget
 * since the first step); a rank that runs at its own pace (ps async, ssp) decides alone and,
 * stopping, says goodbye to its servers at once. 0 or RS_ERR_*. */
int engine_should_stop(Engine *e, int budget_spent, int *stop);

/* The back end's progress after the last step (SyncOps.progress): 1 with *applied and
 * *staleness set, 0 for a back end without it. */
int engine_progress(const Engine *e, long long *applied, int *staleness);

/* The timeline so far: times[0..*n) (owned by the engine). */
const StepTimes *engine_times(const Engine *e, int *n);

/* Cumulative traffic of the back end and the driver. */
void engine_traffic(const Engine *e, SyncTraffic *out);

/* Seconds of work of a server this process hosts and its completed steps (0, 0 without). */
void engine_server_busy(const Engine *e, double *busy_s, long long *steps);

/* The control plane (NULL for a lone rank), and on rank 0 member i's clock offset to rank 0
 * (member clock minus rank 0's, seconds) and its uncertainty (0, 0 elsewhere). */
struct Ctrl *engine_ctrl(const Engine *e);
void engine_clock_offset(const Engine *e, int member, double *offset_s, double *uncertainty_s);

/* The buckets (owned by the engine). */
const Bucket *engine_buckets(const Engine *e, int *n);

/* --resume: the next step is step (the checkpoint's), after engine_create; the timeline's steps
 * before it stay zero. */
void engine_resume_at(Engine *e, int step);

/* Every rank: makes the model's parameters whole on every rank where the back end shards them
 * (SyncOps.params_full: zero's stage 3 gathers every layer, FSDP's summon_full_params), before an
 * evaluation, a checkpoint or the end; the next step shards them again. Between steps only, on
 * every rank at the same point. 0 (nothing to do for other back ends) or RS_ERR_*. */
int engine_params_full(Engine *e);

/* The checkpoint part files the back end's servers write (SyncOps.checkpoint_servers; 0: none). */
int engine_checkpoint_servers(const Engine *e);

/* After the last step: the back end says goodbye (dedicated servers hand in their entries). */
int engine_close(Engine *e);

/* Stops the communication thread and frees everything. NULL is a no-op. */
void engine_free(Engine *e);

#endif
