/* matrix_row.h - one summary row per matrix run (headline figures from its report) and the summary files */
#ifndef RS_MATRIX_ROW_H
#define RS_MATRIX_ROW_H

#include "matrix_spec.h"

struct cJSON;

/* ---- Types ---- */

/* How a run ended, as the driver saw it. */
typedef struct {
    const char *status;  /* "ok", "failed", "timeout", "diverged" (the report says "diverged": true) */
    int exit_code;       /* the child's exit status (128 + signal when killed); 0 for a resumed run */
    const char *error;   /* "" when none: the child's last stderr line, or what went wrong */
    double wall_s;       /* seconds the child ran (0 when resumed) */
    int resumed;         /* 1: the report existed and was kept (--resume) */
    const char *report;  /* the report's file name inside OUT */
} MatrixOutcome;

/* ---- Prototypes ---- */

/* The row of run rep (1-based) of cell c: axis values, outcome, and the headline figures of
 * report (NULL when the run left none: the figures are null): throughput, step time median and
 * p95, comm_exposed, comm_total and idle (mean over workers), peak memory max/min/mean over workers
 * and rank 0's, rank 0's traffic, the dedicated servers' count, largest peak and traffic, the
 * report's imbalance ratios (over workers) and the same over every process, final loss and
 * accuracy (null when the run diverged: never a loss it did not reach), the first step whose loss
 * was not finite (diverged_step, null when none), the parameter and bucket counts, the transport and emulated link, and the alpha-beta
 * prediction (with the link it used) beside the measured comm time when m has a link for that
 * transport. NULL on OOM. */
struct cJSON *matrix_row_make(const MatrixSpec *m, const MatrixCell *c, int rep,
                              const MatrixOutcome *o, const struct cJSON *report);

/* 1 when report's run diverged (summary.diverged is true), with *step (may be NULL) its
 * summary.diverged_step (-1 when that is missing); 0 otherwise, also for a NULL report. */
int matrix_row_diverged(const struct cJSON *report, int *step);

/* 1 when report's ranks ended with different parameters where the back end promises them equal
 * (summary.params_agree is false), with why (len bytes) naming the ranks; 0 otherwise, also for a
 * NULL report. */
int matrix_row_differ(const struct cJSON *report, char *why, size_t len);

/* The transport a report's run moved at (summary.transport), "" when it does not say. */
const char *matrix_row_transport(const struct cJSON *report);

/* The alpha-beta prediction of comm seconds per step for cell c run over transport, with the link
 * matrix_spec_link picks for it; where m has none and the cell runs over an emulated --link, with
 * that link itself (beta 1 / its rate, alpha its latency + PREDICT_EMULATED_ALPHA_S; emulated 1).
 * *used (may be NULL) gets a copy of the link it used. A negative number when there is no link
 * for it or the back end has no model. */
double matrix_row_predict(const MatrixSpec *m, const MatrixCell *c, const char *transport, MatrixLink *used);

/* Writes rows (an array of matrix_row_make objects) as CSV to path atomically (a temporary file
 * in the same directory, then rename). 0 or RS_ERR_RUNTIME. */
int matrix_row_write_csv(const MatrixSpec *m, const struct cJSON *rows, const char *path);

#endif
