/* claims_load.h - reads a folder of training reports into per-configuration records (median of repeats) */
#ifndef RS_CLAIMS_LOAD_H
#define RS_CLAIMS_LOAD_H

#include "backends.h"

#define CLAIMS_MAX_RANKS 256

/* ---- Types ---- */

/* One configuration's measured figures, the median over its repeats (per rank, workers only). */
typedef struct {
    char label[256];          /* the first report's file name without "-rK.json" / ".json" */
    char sync[16], placement[16], mode[16];
    Arch arch;                /* backend.architecture: what the claims ask of a run, instead of its --sync */
    int ranks, servers, batch, global_batch, steps;
    int accum;              /* --accum-steps: micro-batches a step accumulates (1: none) */
    long long seed;
    double grad_bytes;        /* the gradient on the wire: 4 (fp32) or 2 (bf16, fp16) x the parameter count */
    char group[4096];         /* the configuration (repeats share it) */
    char family[4096];        /* the configuration less ranks and the sync options (ps and ring series beside each other) */
    char series[4096];        /* the configuration less ranks: one back end, one law over N (claims 2 and 3) */
    char model[16];           /* config.model ("mlp" when absent) */
    int dp_in, dp_classes;    /* DataParallel's data messages per row (predict_dp_shape): values out, outputs in */
    char math[4096];          /* what fixes the loss curve, less the batch split (claim 5) */
    int repeats;
    int nw;                   /* worker ranks */
    double peak[CLAIMS_MAX_RANKS], sent[CLAIMS_MAX_RANKS], received[CLAIMS_MAX_RANKS];
    double samples[CLAIMS_MAX_RANKS], busy[CLAIMS_MAX_RANKS], forward[CLAIMS_MAX_RANKS];
    double comm_total[CLAIMS_MAX_RANKS], comm_exposed[CLAIMS_MAX_RANKS];
    double bucket_mb;         /* config.bucket-mb (0 when absent: one bucket) */
    char partition[16];       /* config.ps-partition-kb ("auto", "off", KiB; "" when absent) */
    double steps_run;         /* summary.steps */
    int timed_steps;          /* the fewest steps a worker timed (time_s.timed_steps: after warm-up); -1 unknown */
    double *loss;             /* the first repeat's loss curve (owned; NAN where it was not finite) */
    int nloss;
    int diverged;             /* some repeat's loss stopped being finite (summary.diverged, or a point that is none) */
    int diverged_step;        /* the earliest such step over the repeats; -1 when none diverged */
    double pred_comm_s;       /* alpha-beta prediction per step; NAN when none */
    char link[16];            /* the prediction's link (summary.prediction.link: "shm", "tcp", "default"); "" unknown */
    int pred_emulated;        /* the prediction came from the run's emulated --link (summary.prediction.from_emulated_link) */
    double pred_alpha;        /* the prediction's alpha_s (NAN when none) */
    int pred_given;           /* its constants are the matrix file's own (source "matrix file"), not fitted on this machine */
    char emulated[64];        /* config.link: the emulated network interface it ran over ("": none) */
    int nodes;                /* config.nodes: machines of several ranks (0 or absent: every rank a machine) */
    char transport[16];       /* summary.transport: how its data moved ("" unknown) */
    char hash[CLAIMS_MAX_RANKS][20]; /* each worker's params_hash ("" when the report has none) */
    int cores;                /* the host's cores (env.cores; 0 when unknown) */
    char consistency[16];     /* config.ps-consistency ("sync" when absent) */
    char wire[8];             /* config.wire ("fp32" when absent): grad_bytes counts the gradient on it */
    char straggler[256];      /* config.straggler ("": none) */
    double time_budget;       /* config.time-budget (0: none) */
    double throughput;        /* summary.throughput_samples_per_s, median over repeats */
    char pair[4096];          /* the configuration less the back end and its options (claims 7 and 12's pairs) */
    char optimizer[8];        /* config.optimizer ("sgd" when absent) */
    double psi;               /* the model's parameters, from its options (config_param_count); 0 unknown */
    int nbuckets;             /* DDP's buckets of psi under --bucket-mb (sync_plan_run): ZeRO-1's and -2's shards are chunks of each */
    int nlayers;              /* the model's layers (parameter groups): ZeRO-3's shards are chunks of each */
    double kept;              /* the parameters of the layers ZeRO-3 keeps gathered through a step (gpt's tied embedding) */
    /* each worker's peak bytes under a tag (memory.by_tag; NAN where the report has none): claim 12 */
    double tag_params[CLAIMS_MAX_RANKS], tag_grads[CLAIMS_MAX_RANKS], tag_optimizer[CLAIMS_MAX_RANKS];
    double tag_activations[CLAIMS_MAX_RANKS], tag_comm[CLAIMS_MAX_RANKS];
} ClaimsRun;

/* One bench configuration (schema ringside.bench/1): its rows, the median of its repeats' times
 * at each size (claims 10 and 11 read the all-reduce itself, not a training step). */
#define CLAIMS_BENCH_REPEATS 16
typedef struct {
    char label[256];          /* the first report's file name without ".json" */
    Arch arch;                /* backend.architecture */
    int ranks, nodes, servers, cores;
    char link[64];            /* config.link.text: the emulated NIC ("": none) */
    double bytes_per_s, latency_s; /* its rate and latency (0: none) */
    char wire[8];             /* config.wire ("fp32" when absent) */
    int pipelined;            /* config.ps_partition_keys > 0: a server answers partitions as they land */
    char layer[8];            /* config.msg_layer ("zeromq" when absent) */
    char barrier[8];          /* config.barrier ("each" when absent): how the calls were timed */
    int nrows, repeats;
    double *size;             /* [nrows] bytes per call */
    double *time_s;           /* [nrows] seconds per call: the median over the repeats */
    double *times;            /* [nrows * CLAIMS_BENCH_REPEATS] each repeat's (the loader's) */
} ClaimsBench;

typedef struct {
    ClaimsRun *runs;
    int nruns;                /* configurations */
    int nreports;             /* report files read */
    ClaimsBench *benches;     /* bench configurations */
    int nbenches;
} ClaimsSet;

/* ---- Prototypes ---- */

/* Reads every *.json report in dir except summary.json and claims.json (training reports, and
 * bench reports into set->benches, repeats of one configuration merged; files of another kind
 * are skipped with a note on stdout), groups them by
 * configuration and takes the median of repeats. Predictions come from each report's summary.prediction,
 * else from dir/summary.json's row for it. 0, or RS_ERR_INPUT with rs_errmsg() naming the file
 * (malformed JSON with line:col, another schema version with both versions, a report without
 * config or ranks). An empty folder is not an error. */
int claims_load(const char *dir, ClaimsSet *set);

/* Whether benches a and b were timed alike: the same message layer and the same --barrier rule
 * (the only pairs claim 11 compares, and what repeats of one configuration share). 1 or 0. */
int claims_bench_timed_alike(const ClaimsBench *a, const ClaimsBench *b);

/* The alpha-beta model's seconds for one all-reduce of bench b at row i on its own emulated NIC
 * (alpha its latency + the software's, beta 1/its rate; its nodes, servers, partitions and wire),
 * split into the per-message part (*lat: the NIC's rounds, and the rounds inside the node at the
 * software's cost) and the bytes' (*bw). 0, or -1 where the model has no form for it or b had no
 * emulated link. What claims 10 and 11 and `ringside predict --check` price a bench row by. */
int claims_bench_model(const ClaimsBench *b, int i, double *lat, double *bw);

/* Releases what claims_load allocated. */
void claims_free(ClaimsSet *set);

#endif
