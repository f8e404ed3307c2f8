/* config.h - the resolved options of a run: one table drives parsing, help, validation, hashing and the report */
#ifndef RS_CONFIG_H
#define RS_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#define CONFIG_MAX_LAYERS 16
#define CONFIG_MAX_STRAGGLERS 16
#define CONFIG_MAX_ACCUM 1024 /* --accum-steps: micro-batches a step (a step is never cut short by --time-budget) */
#define CONFIG_ASYNC (-1)     /* ps_staleness of --ps-consistency async: no bound */

/* ---- Types ---- */
typedef struct {
    /* model and data */
    char device[16];          /* auto | cpu | cuda */
    char data[512];           /* synthetic | DIR | text:FILE */
    char model[16];           /* mlp | lenet | gpt */
    int layers[CONFIG_MAX_LAYERS];
    int nlayers;
    int train_samples;        /* synthetic only */
    int eval_samples;         /* synthetic only */
    int n_layer, n_head, n_embd, seq_len, vocab; /* gpt: blocks, heads, width, sequence, synthetic vocabulary */
    /* optimisation */
    int batch;                /* per rank (DDP) */
    int global_batch;         /* 0: unset; else DataParallel's scatter of one batch */
    int accum_steps;          /* K >= 1: micro-batches a step accumulates before it synchronises */
    int steps;                /* 0: derived from epochs */
    int epochs;
    double lr;
    double momentum;
    double weight_decay;      /* SGD: L2 added to the gradient; AdamW: decoupled */
    char optimizer[16];       /* sgd | adamw */
    double beta1, beta2, eps; /* AdamW */
    long long seed;
    int drop_last;
    int shuffle;
    int eval_every;
    int warmup;               /* steps excluded from timing statistics */
    /* ranks and synchronisation */
    int nranks;               /* -n: ranks the launcher starts */
    char sync[16];            /* none | ring | nccl | ps | student ... */
    double bucket_mb;
    int overlap;
    double timeout;           /* seconds, every blocking wait */
    char ps_placement[16];    /* colocated | dedicated | sharded */
    int ps_servers;
    char ps_partition[16];    /* --ps-partition-kb: auto | off | KiB (config_partition_keys) */
    char ps_mode[16];         /* push | dataparallel */
    char ps_consistency[16];  /* sync | async | ssp:S */
    int ps_staleness;         /* from ps_consistency: 0 sync (and ssp:0), S for ssp:S, CONFIG_ASYNC */
    char wire[8];             /* fp32 | bf16 | fp16 | fp8e4m3 | fp8e5m2: the type gradients travel in */
    double loss_scale;        /* static loss scale (fp16 wire: gradients scaled before rounding) */
    int threads;              /* BLAS threads per rank; 0: cores / local ranks */
    char secure[512];         /* CURVE key file: encrypt and authenticate every socket ("": off) */
    char bind[256];           /* address data-plane and rank 0's sockets bind to ("": the route to MASTER_ADDR) */
    /* experiments */
    char link[64];            /* --link BW[,LAT]: an emulated network interface per process, per node with --nodes ("": none) */
    int zero_stage;           /* --zero-stage 1..3 with --sync zero (0: not given) */
    int hierarchical;         /* --hierarchical: the machine-aware form of the algorithm under --nodes */
    int nodes;                /* --nodes M: the ranks are M machines sharing a NIC each (0: every rank a machine) */
    char intra_link[64];      /* --intra-link BW[,LAT]: a node's fabric, per rank ("": unpaced) */
    char transport[8];        /* auto | shm | ipc | tcp: how data moves between ranks of one host */
    char msg_layer[8];        /* zeromq | direct: the message layer's engine (net/msg.h) */
    char nccl_algo[8];        /* ring | tree: the algorithm --sync nccl pins (NCCL_ALGO) */
    char straggler[256];      /* --straggler RANK:MS[,RANK:MS...] as given (repeatable: appended) */
    int nstragglers;
    int straggler_rank[CONFIG_MAX_STRAGGLERS];
    double straggler_ms[CONFIG_MAX_STRAGGLERS];
    double time_budget;       /* seconds of training for every rank (0: none) */
    /* checkpoints (docs/reliability.md) */
    char checkpoint[512];     /* --checkpoint DIR: where every process writes its part ("": none) */
    int checkpoint_every;     /* --checkpoint-every S: a checkpoint after every S-th step (>= 1) */
    int checkpoint_every_given; /* --checkpoint-every was on the command line (a resume keeps the checkpoint's otherwise) */
    char resume[512];         /* --resume DIR: the newest complete checkpoint there ("": a fresh run) */
    /* output */
    char report[512];
    char trace[512];
    char save_params[512];    /* rank 0 writes the final parameters here (raw fp32) */
    int quiet;
    int verbose;
} Config;

/* ---- Prototypes ---- */

/* Fills c with every option's default. */
void config_defaults(Config *c);

/* Parses argv[0..argc) (the options after "train") into c, which holds defaults.
 * On a bad option or value returns RS_ERR_INPUT with rs_errmsg() naming the option.
 * Sets *help when --help/-h is seen (and stops). */
int config_parse(Config *c, int argc, char **argv, int *help);

/* Prints every option with its default and meaning. */
void config_usage(FILE *f);

/* Canonical "key=value\n" text of every option that must agree across ranks.
 * Writes into buf (NUL-terminated, truncated to len). Returns the length needed. */
size_t config_canonical(const Config *c, char *buf, size_t len);

/* 1 when option name (without "--") changes nothing a run measures: where its outputs go
 * (--report, --trace, --save-params), what it prints (--quiet, --verbose), how long a wait may
 * take (--timeout), and its checkpoints (--checkpoint, --checkpoint-every, --resume: a resumed run
 * is the uninterrupted one, bit for bit). The option table's column, read by the matrix driver
 * (which reports may stand for a cell), the claims (which runs are one configuration) and the
 * resume check; 0 for any other name. */
int config_changes_no_result(const char *name);

/* The first option whose value differs between two canonical texts, as
 * "--bucket-mb (1 here, 25 on rank 0)"; writes into out. Returns 0 when equal. */
int config_diff(const char *mine, const char *theirs, char *out, size_t len);

/* The canonical text (config_canonical's form) of the options a resumed run must share with the
 * run that wrote its checkpoint: the shared options and --device, less those that may differ
 * (--steps, --epochs, --warmup, --timeout, --time-budget, --straggler, --checkpoint, --checkpoint-every,
 * --resume).
 * Same contract as config_canonical. */
size_t config_resume_text(const Config *c, char *buf, size_t len);
/* As config_diff, for config_resume_text's texts: the first option that differs between this run
 * (mine) and the checkpoint (theirs), as "--lr (0.1 here, 0.05 in the checkpoint)". 0 when equal. */
int config_resume_diff(const char *mine, const char *theirs, char *out, size_t len);
/* 64-bit FNV-1a hash of a text. */
unsigned long long config_hash(const char *text);

/* Milliseconds rank sleeps after its forward in every step (--straggler; summed when a rank is
 * named twice), 0 for a rank not named. */
double config_straggler_ms(const Config *c, int rank);

/* 1 when every rank takes the same steps in lockstep (every back end but ps under async or
 * ssp:S with S >= 1, whose workers each run at their own pace). */
int config_lockstep(const Config *c);

/* Every option, resolved, as a JSON object (the report's "config"). Caller owns it; NULL on OOM. */
struct cJSON *config_json(const Config *c);

#endif
