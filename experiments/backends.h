/* backends.h - the registry of gradient-sync back ends: one row each (name, help, family, constructor, cost model) */
#ifndef RS_BACKENDS_H
#define RS_BACKENDS_H

#include "../base/config.h"
#include "../engine/engine.h"
#include "../engine/sync.h"

#include <stdio.h>

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
    /* The back end's own rules on the parsed options (-n as cfg->nranks; 1 when the world comes
     * from a launcher): 0, or RS_ERR_INPUT naming the options. NULL: none. */
    int (*check)(const Config *cfg);
    int consistency;          /* 1: has --ps-consistency's asynchronous models (else sync only) */
} Backend;

/* ---- Prototypes ---- */

/* The row called name, or NULL with rs_errmsg() listing the known names ("not in this build"
 * for a row whose ops this build lacks). */
const Backend *backend_find(const char *name);

/* config_validate, then the rules of cfg's back end's row (its check, and --ps-consistency only
 * where the row has consistency models): what every command runs on parsed options. 0, or
 * RS_ERR_INPUT naming the option. A --sync no row has passes here (the engine refuses it,
 * naming the back ends this build has). */
int backend_validate(const Config *cfg);

/* The rules of cfg's back end's row alone (its check, and --ps-consistency only where the row
 * has consistency models), for a command that fills its Config itself (bench). 0, or
 * RS_ERR_INPUT naming the option; a --sync no row has passes. */
int backend_check(const Config *cfg);

/* The back end called name (backend_find's row's ops), or NULL with rs_errmsg() set. */
const SyncOps *sync_find(const char *name);

/* The step driver a configuration asks for: DataParallel's for --sync ps --ps-mode
 * dataparallel, else NULL (DDP's step). */
const StepDriver *backend_driver(const Config *cfg);

/* Prints the back ends (--sync's values) with their family and help line, "(not in this
 * build)" beside a row whose ops this build lacks: the registry's own words for --help. */
void backend_usage(FILE *f);

/* Every row, in order: *n gets the count. */
const Backend *backend_all(int *n);

#endif
