/* backends.h - the registry of gradient-sync back ends: one row each (name, help, family, constructor, cost model) */
#ifndef RS_BACKENDS_H
#define RS_BACKENDS_H

#include "../base/config.h"
#include "../engine/engine.h"
#include "../engine/sync.h"
#include "../net/ctrl.h"
#include "arch.h"

#include <stdio.h>

/* ---- Types ---- */

struct Backend;

/* What one configuration of a back end is (backend_shape): its row, its architecture, the server
 * processes it starts beside the workers and the entry point they run, whether every rank takes
 * the same steps, and the step driver it asks for (NULL: DDP's step). */
typedef struct {
    const struct Backend *row;
    Arch arch;
    int servers;                                        /* processes of their own (ps dedicated, byteps's k) */
    /* what they run (ps/ps.h's contract: nparams PS_MODEL_KEYS for training, 0 for bench); NULL
     * when servers is 0 */
    int (*server_main)(const Config *, const RankEnv *, size_t nparams, const char *job);
    int lockstep;                                       /* not --ps-consistency async or ssp:S */
    const StepDriver *driver;                           /* DataParallel's for --ps-mode dataparallel */
    const SyncOps *ops;                                 /* what runs it: the row's, or its hierarchical form's */
    int model_flags;                                    /* model_create's flags beyond the optimizer's (zero's
                                                         * stage 2: MODEL_GRADS_PAGED) */
    int host_only;                                      /* runs on a device whose memory the host sees only (zero) */
    int layer_buckets;                                  /* one bucket a layer (zero's stage 3: FSDP's per-layer units) */
} BackendShape;

typedef struct Backend {
    const char *name;         /* the --sync value */
    const char *family;       /* "none", "allreduce", "ps" or "zero" */
    const char *help;         /* one line for --help */
    const SyncOps *(*ops)(void); /* NULL where this build lacks it (nccl without CUDA) */
    /* The back end's own rules on the parsed options (-n as cfg->nranks; 1 when the world comes
     * from a launcher): 0, or RS_ERR_INPUT naming the options. NULL: none. */
    int (*check)(const Config *cfg);
    int consistency;          /* 1: has --ps-consistency's asynchronous models (else sync only) */
    Arch arch;                /* its architecture (shape may say otherwise for a configuration) */
    int hierarchical;         /* has a machine-aware form under --nodes (--hierarchical): the shape picks it */
    int host_ring;            /* the ring in host memory: its lanes spin, so bench binds its ranks to cores */
    int line_up;              /* bench lines the ranks up before each timed call with an all-reduce of N floats
                               * of the back end's own, so that its time does not carry the control plane's
                               * release skew (set only where every configuration is lockstep, with no server
                               * processes: the ring, the tree, zero); not the ps
                               * rows: a server thread counts some of a call's messages when it next reads,
                               * after the call, so the barrier's bytes could not be taken out exactly */
    /* The row's say on a configuration's shape, after backend_shape filled the defaults (arch,
     * no servers, config_lockstep, no driver). NULL: the defaults. */
    void (*shape)(const Config *cfg, BackendShape *out);
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

/* What cfg's back end is (BackendShape): 0, or RS_ERR_INPUT naming the --sync no row has (or one
 * this build lacks). */
int backend_shape(const Config *cfg, BackendShape *out);

/* The step driver a configuration asks for: DataParallel's for --sync ps --ps-mode
 * dataparallel, else NULL (DDP's step; also for a --sync no row has). */
const StepDriver *backend_driver(const Config *cfg);

/* The architecture of a run of cfg (backend_shape's; the ring's for a --sync no row has): what
 * prices it (arch_cost) and what the claims read. */
Arch backend_arch(const Config *cfg);

/* The server processes a run of cfg starts beside its workers (the launcher's, Slurm's and
 * mpirun's last tasks): 0 for a --sync no row has. */
int backend_servers(const Config *cfg);

/* A report's "backend" object for cfg: {name, family, architecture, servers, lockstep} (docs/
 * report-schema.md), or NULL (a --sync no row has; out of memory). The caller owns it. */
struct cJSON *backend_json(const Config *cfg);

/* Prints the back ends (--sync's values) with their family and help line, "(not in this
 * build)" beside a row whose ops this build lacks: the registry's own words for --help. */
void backend_usage(FILE *f);

/* Every row, in order: *n gets the count. */
const Backend *backend_all(int *n);

/* report_env_json (engine/report.h) with the NCCL library this process loaded and the headers it
 * was built against ("nccl", "nccl_built"), where the build has NCCL. Caller owns the result. */
struct cJSON *backend_env_json(void);

#endif
