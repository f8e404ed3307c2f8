/* fit.h - `ringside fit`: alpha and beta per transport (and emulated link) from bench reports, with the fit's quality */
#ifndef RS_FIT_H
#define RS_FIT_H

#include "arch.h"

struct cJSON;

#define FIT_SCHEMA "ringside.fit/1"

/* ---- Types ---- */

/* One link's fit: t = alpha * A + beta * B over every (size, time) row of the bench reports that
 * moved over this transport and link, A and B from each report's back end and ranks
 * (experiments/predict.h), least squares on relative residuals, alpha, beta >= 0. */
typedef struct {
    char transport[16];      /* "tcp", "ipc", "shm", "inproc", "nccl"; "" when the reports do not say */
    char link[64];           /* the emulated link (a report's config.link), "" for none */
    char layer[8];           /* the message layer its reports ran on (config.msg_layer): "zeromq" or "direct" */
    char barrier[8];         /* how its reports timed the calls (config.barrier): "each" or "none" */
    double alpha_s;          /* seconds per message */
    double beta_s_per_byte;  /* seconds per byte */
    double r2;               /* of the times: 1 - sum (t - model)^2 / sum (t - mean t)^2 */
    double rms_rel;          /* root-mean-square relative residual, (model - t) / t */
    double worst_rel;        /* the relative residual of largest size, signed (+: the model is slower) */
    double worst_bytes;      /* the message size it is at */
    char worst_source[256];  /* and the report it comes from */
    int points, reports;     /* rows and reports fitted */
    int min_ranks, max_ranks; /* the N its bench reports ran at: where a prediction from it was measured */
    double min_bytes, max_bytes;
} FitLink;

typedef struct FitGroup FitGroup;

/* The points of every link seen so far, and after fit_solve, their fits. */
typedef struct {
    FitGroup *groups;
    int n;
} FitSet;

/* ---- Prototypes ---- */

/* Adds the rows of a bench report (schema ringside.bench/1: config.sync, config.ranks >= 2,
 * rows[].size_bytes and time_us) to the link it moved over (config.transport, else the first
 * rank's summary.traffic[].transport; config.link). name labels it in errors and residuals.
 * 0, or RS_ERR_INPUT naming name (another schema, one rank, no model for its back end, no rows). */
int fit_add(FitSet *set, const struct cJSON *bench, const char *name);

/* The architecture a bench report prices as: its backend.architecture (nccl's trees are the
 * tree's), or for a report without one its config's sync and ps_placement as the registry shapes
 * them; ARCH_COUNT for a --sync no row has. */
Arch fit_bench_arch(const struct cJSON *bench);

/* Fits every link of set. 0, or RS_ERR_INPUT naming the link whose rows cannot determine a fit
 * (fewer than 2 sizes). */
int fit_solve(FitSet *set);

/* The fit of link i (0 <= i < set->n), valid after fit_solve. */
const FitLink *fit_link(const FitSet *set, int i);

/* {"schema": FIT_SCHEMA, "links": {"<transport>[@<link>]": {alpha_s, beta_s_per_byte, r2, ...}}}:
 * the form `ringside fit --report` writes and a matrix's links read. Caller owns it; NULL on OOM. */
struct cJSON *fit_json(const FitSet *set);

/* Releases every point and fit; safe on an empty set. */
void fit_free(FitSet *set);

/* `ringside fit BENCH.json... [--report FILE]` with the arguments after "fit". Returns 0, or
 * RS_ERR_INPUT (2) for a bad argument or report (nothing written). */
int fit_main(int argc, char **argv);

#endif
