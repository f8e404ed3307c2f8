/* train_run.h - one rank's run as train.c holds it, shared with train_report.c, which turns it into the report */
#ifndef RS_TRAIN_RUN_H
#define RS_TRAIN_RUN_H

#include "backends.h"
#include "../base/config.h"
#include "../data/data.h"
#include "../engine/engine.h"
#include "../engine/trace.h"
#include "../engine/zctx.h"
#include "../kernels/device.h"
#include "../model/model.h"
#include "../net/ctrl.h"

#include <cJSON.h>

/* ---- Types ---- */

/* Everything one rank's run holds. */
typedef struct {
    Config cfg;
    RankEnv env;
    void *zctx;
    int rank, world, local_rank, local_world;
    Device dev;
    DataPair data;
    Sampler sampler;
    Model model;
    const Backend *backend;
    const SyncOps *ops;         /* what runs the back end: its row's, or its hierarchical form's (backend_shape) */
    const StepDriver *driver;
    Engine *engine;
    int steps, steps_per_epoch;
    int micro_per_epoch;  /* micro-batches of the sampler's order an epoch holds (steps x --accum-steps) */
    int lockstep;         /* every rank takes the same steps (config_lockstep) */
    int maxsteps;         /* the most steps this rank may take: steps, or under async N x steps */
    int done;             /* steps this rank took (under --resume: the checkpoint's, then this run's) */
    int first;            /* --resume: the checkpoint's step, where this run's steps begin (else 0) */
    /* per-step records */
    double *loss_sum, *correct;
    int *samples, *global_samples;
    long long *pulled, *applied; /* async: pushes applied when the step's parameters left the server, and after its push */
    int *stale;           /* async: the staleness of the step's parameters, in steps */
    /* eval curve */
    cJSON *eval_curve;
    double final_acc, final_eval_loss;
    /* host staging */
    float *hx;
    int *hy;
    double t_start, t_end;
    Trace *trace;         /* --trace: spans of this rank */
    double gemm_s0, gemm_s1;  /* CPU GEMM seconds at the end of warm-up and of the run */
    double gemm_eval;         /* of those, the evaluations' (--eval-every) after warm-up: not a step's */
    double wall_offset;   /* clock_wall() - clock_now(), for trace timestamps */
    char params_hash[20]; /* FNV-1a of the final parameters' bytes, hex */
    int diverged_step;    /* rank 0, once the report is built: the first step whose global loss is not finite; -1 none */
    double diverged_loss; /* its loss (NaN, an infinity) */
    double final_loss;    /* rank 0, likewise: the loss curve's last point */
    int ndiffer;          /* rank 0, likewise: workers whose params_hash is not rank 0's, where equality is promised */
    char differ[512];     /* their ranks, "1, 2" */
    char cmdline[2048];
} Run;

/* ---- Prototypes (train_report.c) ---- */

/* Hashes this rank's final parameters into r->params_hash (FNV-1a of their bytes): ranks that
 * should hold the same bits can be checked to. 0, or RS_ERR_RUNTIME (out of memory, a copy). */
int train_hash_params(Run *r);

/* The end of a run, after the goodbyes: every member's entry gathered to rank 0, which computes
 * the phases, writes the report (atomically), then the trace and --save-params, and says when the
 * run diverged or its replicas drifted apart. Logs every failure it returns. 0; the gather's or
 * the report's failure; else the first of the trace's or the parameters' failures, then
 * TRAIN_ERR_DIVERGED, then TRAIN_ERR_REPLICAS. */
int train_report(Run *r);

/* ---- Prototypes (train_ckpt.c: checkpoints, docs/reliability.md) ---- */

/* Before any work (the launcher, a lone process, rank 0): --resume's newest complete checkpoint
 * checked against these options for world workers (its step in *step, -1 without --resume), and
 * --checkpoint's folder made, locked for the process's life (the launcher's lock inherited by its
 * ranks: ckpt_dir_lock), checked writable and (clean: rank 0) rid of unfinished step folders. 0,
 * or RS_ERR_INPUT naming why, CKPT_ERR_BUSY when another job holds the folder. */
int train_ckpt_prepare(const Config *c, int world, int clean, long *step);

/* After engine_create, under --resume: this rank's part put in place (parameters, optimizer
 * state, the step, the sampler's epoch, the per-step records, rank 0's evaluations); r->first and
 * r->done set to the checkpoint's step. 0, or RS_ERR_INPUT naming the file. */
int train_ckpt_restore(Run *r);

/* After step `step` (counted from 1) where --checkpoint-every says: this rank's part written;
 * rank 0 then waits for every part (workers' and servers') and writes the manifest. 0 or
 * RS_ERR_*. */
int train_ckpt_save(Run *r, int step);

/* The first step of the timing statistics: warm-up counted from the first step this run took. */
static inline int train_warm(const Run *r, int n) {
    return r->first + r->cfg.warmup < n ? r->first + r->cfg.warmup : r->first < n ? r->first : 0;
}

#endif
