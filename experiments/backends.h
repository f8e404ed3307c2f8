/* backends.h - the registry of gradient-sync back ends: one row each (name, help, family, constructor, cost model) */
#ifndef RS_BACKENDS_H
#define RS_BACKENDS_H

#include "../base/config.h"
#include "../engine/engine.h"
#include "../engine/sync.h"
#include "../net/ctrl.h"

#include <stdio.h>

/* ---- Types ---- */

/* Coefficients of the alpha-beta model (experiments/predict.h) for one reduction of n_bytes
 * over nranks ranks: t = alpha * *a + beta * *b. placement and servers are ps's options. 0, or
 * -1 for a combination the model does not cover. */
typedef int (*BackendCostFn)(const char *placement, int servers, int nranks, int pipelined, double n_bytes, double *a, double *b);

/* The shapes of synchronisation a report names (its backend.architecture): what the claims, the
 * plots and the validator read instead of --sync's names. ring and nccl are one shape; student is
 * lab 5's all-reduce, held apart (it may be wrong); ps's three placements are three shapes. */
typedef enum {
    ARCH_NONE,          /* "none": no communication */
    ARCH_RING,          /* "ring": ring all-reduce (ring, nccl) */
    ARCH_TREE,          /* "tree": double binary tree all-reduce */
    ARCH_STUDENT,       /* "student": lab 5's all-reduce */
    ARCH_PS_COLOCATED,  /* "ps-colocated": the server in rank 0 (DataParallel's) */
    ARCH_PS_SHARDED,    /* "ps-sharded": a shard of the server in every worker */
    ARCH_PS_DEDICATED,  /* "ps-dedicated": K server processes of their own */
    ARCH_BYTEPS,        /* "byteps": a shard in every worker and k CPU servers */
    ARCH_COUNT
} Arch;

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
} BackendShape;

typedef struct Backend {
    const char *name;         /* the --sync value */
    const char *family;       /* "none", "allreduce" or "ps" */
    const char *help;         /* one line for --help */
    const SyncOps *(*ops)(void); /* NULL where this build lacks it (nccl without CUDA) */
    BackendCostFn cost;
    /* The back end's own rules on the parsed options (-n as cfg->nranks; 1 when the world comes
     * from a launcher): 0, or RS_ERR_INPUT naming the options. NULL: none. */
    int (*check)(const Config *cfg);
    int consistency;          /* 1: has --ps-consistency's asynchronous models (else sync only) */
    Arch arch;                /* its architecture (shape may say otherwise for a configuration) */
    int host_ring;            /* the ring in host memory: its lanes spin, so bench binds its ranks to cores and
                               * aligns them with an all-reduce of N floats before each call */
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

/* The row whose cost model prices a run of cfg (experiments/predict.h's sync argument): its own,
 * or the tree's for --sync nccl --nccl-algo tree; cfg->sync for a --sync no row has. */
const char *backend_model(const Config *cfg);

/* The server processes a run of cfg starts beside its workers (the launcher's, Slurm's and
 * mpirun's last tasks): 0 for a --sync no row has. */
int backend_servers(const Config *cfg);

/* A report's "backend" object for cfg: {name, family, architecture, servers, lockstep} (docs/
 * report-schema.md), or NULL (a --sync no row has; out of memory). The caller owns it. */
struct cJSON *backend_json(const Config *cfg);

/* An architecture's report name ("ring", "ps-dedicated", ...; "?" out of range). */
const char *arch_name(Arch a);

/* The architecture a report names: 0 and *out set, or -1 for a name that is none. */
int arch_parse(const char *name, Arch *out);

/* Whether a is a parameter server of some kind (ps's placements, byteps): family "ps". */
static inline int arch_is_server(Arch a) { return a == ARCH_PS_COLOCATED || a == ARCH_PS_SHARDED || a == ARCH_PS_DEDICATED || a == ARCH_BYTEPS; }

/* Prints the back ends (--sync's values) with their family and help line, "(not in this
 * build)" beside a row whose ops this build lacks: the registry's own words for --help. */
void backend_usage(FILE *f);

/* Every row, in order: *n gets the count. */
const Backend *backend_all(int *n);

/* report_env_json (engine/report.h) with the NCCL library this process loaded and the headers it
 * was built against ("nccl", "nccl_built"), where the build has NCCL. Caller owns the result. */
struct cJSON *backend_env_json(void);

/* Bytes on the wire per fp32 byte of gradient for --sync sync under --wire wire (base/codec.h's
 * codec_wire_ratio), by the row's family: a parameter server's replies carry the parameters in
 * their own codec (bf16 under FP8). A sync no row has is priced as an all-reduce. */
double backend_wire_ratio(const char *sync, const char *wire);

#endif
