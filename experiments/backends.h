/* backends.h - the registry of gradient-sync back ends: one row each (name, help, family, constructor, cost model) */
#ifndef RS_BACKENDS_H
#define RS_BACKENDS_H

#include "../base/config.h"
#include "../engine/engine.h"
#include "../engine/sync.h"

/* ---- Types ---- */

/* Coefficients of the alpha-beta model (experiments/predict.h) for one reduction of n_bytes
 * over nranks ranks: t = alpha * *a + beta * *b. placement and servers are ps's options. 0, or
 * -1 for a combination the model does not cover. */
typedef int (*BackendCostFn)(const char *placement, int servers, int nranks, int pipelined, double n_bytes, double *a, double *b);

typedef struct {
    const char *name;         /* the --sync value */
    const char *family;       /* "none", "allreduce" or "ps" */
    const char *help;         /* one line for --help */
    const SyncOps *(*ops)(void); /* NULL where this build lacks it (nccl without CUDA) */
    BackendCostFn cost;
} Backend;

/* ---- Prototypes ---- */

/* The row called name, or NULL with rs_errmsg() listing the known names ("not in this build"
 * for a row whose ops this build lacks). */
const Backend *backend_find(const char *name);

/* The back end called name (backend_find's row's ops), or NULL with rs_errmsg() set. */
const SyncOps *sync_find(const char *name);

/* The step driver a configuration asks for: DataParallel's for --sync ps --ps-mode
 * dataparallel, else NULL (DDP's step). */
const StepDriver *backend_driver(const Config *cfg);

/* Every row, in order: *n gets the count. */
const Backend *backend_all(int *n);

#endif
