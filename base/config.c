/* config.c - the option table: parsing, defaults, help, canonical text and JSON (the checks that need the models and the links: engine/config_check.c) */
#include "config.h"
#include "codec.h"
#include "err.h"
#include "hash.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OPT_COUNT: an integer of 1 or more where given; 0, its default, means not given. */
typedef enum { OPT_INT, OPT_COUNT, OPT_DBL, OPT_I64, OPT_STR, OPT_FLAG, OPT_NOFLAG, OPT_LAYERS, OPT_STRAGGLER, OPT_CONSISTENCY } OptType;

typedef struct {
    const char *name;   /* long name without "--" */
    char shortc;        /* short letter or 0 */
    OptType type;
    size_t off;
    size_t size;        /* for strings */
    const char *def;    /* default as text */
    int shared;         /* OPT_SHARED: must agree across ranks (in the canonical text); OPT_NO_RESULT: changes
                         * nothing a run measures (where outputs go, what is printed, how long a wait
                         * may take, checkpoints: a resumed run is the uninterrupted one, bit for bit) */
    const char *help;
} Opt;

#define OPT_SHARED 1
#define OPT_NO_RESULT 2
#define O(f) offsetof(Config, f)
#define S(f) sizeof(((Config *)0)->f)
static const Opt opts[] = {
    {"device", 0, OPT_STR, O(device), S(device), "auto", 0, "auto | cpu | cuda | cpu-async (auto: cuda:LOCAL_RANK%ngpu when a GPU is present; cpu-async: the CPU with a GPU's asynchronous copies, for tests)"},
    {"model", 0, OPT_STR, O(model), S(model), "mlp", 1, "mlp | lenet (LeNet-5, 28x28 images) | gpt (a GPT-2-style decoder)"},
    {"data", 0, OPT_STR, O(data), S(data), "synthetic", 1, "synthetic, a directory of MNIST IDX files (raw or .gz), or text:FILE (gpt: bytes as tokens)"},
    {"layers", 0, OPT_LAYERS, O(layers), 0, "784,1024,1024,10", 1, "MLP sizes, input first, classes last"},
    {"n-layer", 0, OPT_INT, O(n_layer), 0, "2", 1, "gpt: transformer blocks"},
    {"n-head", 0, OPT_INT, O(n_head), 0, "4", 1, "gpt: attention heads (must divide --n-embd)"},
    {"n-embd", 0, OPT_INT, O(n_embd), 0, "64", 1, "gpt: embedding width"},
    {"seq-len", 0, OPT_INT, O(seq_len), 0, "64", 1, "gpt: tokens per sequence"},
    {"vocab", 0, OPT_INT, O(vocab), 0, "256", 1, "gpt on synthetic data: vocabulary size (text: 256, bytes)"},
    {"train-samples", 0, OPT_INT, O(train_samples), 0, "8192", 1, "synthetic training set size"},
    {"eval-samples", 0, OPT_INT, O(eval_samples), 0, "2048", 1, "synthetic evaluation set size"},
    {"batch", 'b', OPT_INT, O(batch), 0, "64", 1, "samples per rank per step (DistributedDataParallel)"},
    {"global-batch", 0, OPT_INT, O(global_batch), 0, "0", 1, "one batch scattered over the ranks as DataParallel does (0: off)"},
    {"accum-steps", 0, OPT_INT, O(accum_steps), 0, "1", 1, "micro-batches of --batch (or --global-batch / K) accumulated before one synchronisation and one optimizer step (DDP's no_sync; 1 to 1024)"},
    {"steps", 0, OPT_INT, O(steps), 0, "0", 1, "training steps (0: from --epochs, or 100)"},
    {"epochs", 0, OPT_INT, O(epochs), 0, "0", 1, "passes over the training set (used when --steps is 0)"},
    {"lr", 0, OPT_DBL, O(lr), 0, "0.05", 1, "learning rate"},
    {"momentum", 0, OPT_DBL, O(momentum), 0, "0.9", 1, "SGD momentum"},
    {"weight-decay", 0, OPT_DBL, O(weight_decay), 0, "0", 1, "weight decay (SGD: L2 in the gradient; AdamW: decoupled)"},
    {"optimizer", 0, OPT_STR, O(optimizer), S(optimizer), "sgd", 1, "sgd (with --momentum) | adamw"},
    {"beta1", 0, OPT_DBL, O(beta1), 0, "0.9", 1, "AdamW: first moment's decay"},
    {"beta2", 0, OPT_DBL, O(beta2), 0, "0.999", 1, "AdamW: second moment's decay"},
    {"eps", 0, OPT_DBL, O(eps), 0, "1e-8", 1, "AdamW: epsilon"},
    {"seed", 0, OPT_I64, O(seed), 0, "1", 1, "seed of initialisation, data and shuffling"},
    {"drop-last", 0, OPT_FLAG, O(drop_last), 0, "0", 1, "drop the tail instead of padding to a multiple of the ranks"},
    {"no-shuffle", 0, OPT_NOFLAG, O(shuffle), 0, "1", 1, "keep the dataset's order"},
    {"eval-every", 0, OPT_INT, O(eval_every), 0, "0", 1, "evaluate every K steps (0: at the end only)"},
    {"warmup", 0, OPT_INT, O(warmup), 0, "2", 1, "first steps left out of timing statistics"},
    {"ranks", 'n', OPT_INT, O(nranks), 0, "1", 1, "local ranks to launch (one process each)"},
    {"sync", 0, OPT_STR, O(sync), S(sync), "ring", 1, "gradient sync: none | ring | tree | nccl | ps | byteps (BytePS: a shard in every worker and --ps-servers k CPU servers) | zero (ZeRO / FSDP: the model states sharded over the ranks, --zero-stage) | student (lab 5)"},
    {"zero-stage", 0, OPT_INT, O(zero_stage), 0, "0", 1, "with --sync zero: 1 the optimizer state sharded (ZeRO-1; FSDP has none), 2 the gradients too (ZeRO-2, FSDP's SHARD_GRAD_OP), 3 the parameters too (ZeRO-3, FSDP's FULL_SHARD); required with --sync zero"},
    {"bucket-mb", 0, OPT_DBL, O(bucket_mb), 0, "25", 1, "gradient bucket size in MiB (last layer first)"},
    {"no-overlap", 0, OPT_NOFLAG, O(overlap), 0, "1", 1, "wait for the whole backward before communicating"},
    {"timeout", 0, OPT_DBL, O(timeout), 0, "60", OPT_SHARED | OPT_NO_RESULT, "seconds any blocking wait may take before the job fails"},
    {"ps-placement", 0, OPT_STR, O(ps_placement), S(ps_placement), "colocated", 1, "colocated (inside rank 0) | dedicated (own process) | sharded (a server shard in every worker, 1/N of the keys each)"},
    {"ps-servers", 0, OPT_INT, O(ps_servers), 0, "1", 1, "parameter servers (dedicated placement), keys sharded by range; sharded placement: one per worker; byteps: k CPU servers, 0 <= k <= N, beside every worker's shard"},
    {"ps-partition-kb", 0, OPT_STR, O(ps_partition), S(ps_partition), "auto", 1, "ps, byteps: every bucket cut into partitions of at most K KiB on the wire, each summed and answered on its own and the partitions striped over every server (BytePS's partitions); auto: the bytes --link carries in 2 ms (64 KiB to 4 MiB), whole buckets without --link; off: whole buckets, each server its key range"},
    {"ps-mode", 0, OPT_STR, O(ps_mode), S(ps_mode), "push", 1, "push (push gradients, pull parameters) | dataparallel (DataParallel's whole step)"},
    {"ps-consistency", 0, OPT_CONSISTENCY, O(ps_consistency), S(ps_consistency), "sync", 1, "sync | async (each push applied as it arrives, no waiting for the others) | ssp:S (a worker at most S steps ahead of the slowest; ssp:0 is sync). Under async and ssp --steps counts the server's updates: N pushes make one step"},
    {"wire", 0, OPT_STR, O(wire), S(wire), "fp32", 1, "fp32, bf16, fp16, fp8e4m3 or fp8e5m2: the type gradients (and a server's parameters: bf16 under FP8) travel in; sums stay fp32; FP8 messages carry a scale each"},
    {"loss-scale", 0, OPT_DBL, O(loss_scale), 0, "1", 1, "static loss scale for a 16-bit --wire (not FP8: its messages scale themselves), a power of two: gradients x S before rounding, / S after (1: none)"},
    {"time-budget", 0, OPT_DBL, O(time_budget), 0, "0", 1, "seconds of training: every rank stops at the same moment, whatever --steps allows (0: none)"},
    {"checkpoint", 0, OPT_STR, O(checkpoint), S(checkpoint), "", OPT_SHARED | OPT_NO_RESULT, "DIR: every process writes its part of a checkpoint there every --checkpoint-every steps, then rank 0 a manifest (docs/reliability.md)"},
    {"checkpoint-every", 0, OPT_INT, O(checkpoint_every), 0, "100", OPT_SHARED | OPT_NO_RESULT, "steps between checkpoints (>= 1; with --checkpoint)"},
    {"resume", 0, OPT_STR, O(resume), S(resume), "", OPT_SHARED | OPT_NO_RESULT, "DIR: resume from the newest complete checkpoint there, bit for bit (the options must match it but for --steps, --epochs, --warmup, --timeout, --time-budget, --straggler and the outputs)"},
    {"secure", 0, OPT_STR, O(secure), S(secure), "", 0, "CURVE key file (ringside keygen FILE): encrypt and authenticate every socket"},
    {"bind", 0, OPT_STR, O(bind), S(bind), "", 0, "address to bind sockets on (default: this host's interface on the route to MASTER_ADDR; * for all)"},
    {"transport", 0, OPT_STR, O(transport), S(transport), "auto", 1, "auto | shm | ipc | tcp: how data moves between ranks of one host, for the ring and the server alike (auto: the fastest each has; ps has no shm)"},
    {"msg-layer", 0, OPT_STR, O(msg_layer), S(msg_layer), "zeromq", 1, "zeromq | direct: the engine under every host back end's messages (zeromq: ZeroMQ's sockets and I/O threads; direct: plain TCP and Unix sockets the rank's own thread writes and reads, as MPI's TCP transport does)"},
    {"nccl-algo", 0, OPT_STR, O(nccl_algo), S(nccl_algo), "ring", 1, "ring | tree: the all-reduce --sync nccl pins (NCCL_ALGO=Ring or Tree; NCCL_ALGO in the environment wins)"},
    {"link", 0, OPT_STR, O(link), S(link), "", 1, "BW[,LAT]: every process's data plane through an emulated interface of BW (1gbit, 100mbit, 125MB/s) each way, LAT (50us, 1ms) per message; with --nodes, the node's one NIC, shared by its ranks"},
    {"nodes", 0, OPT_COUNT, O(nodes), 0, "0", 1, "M: the ranks are M machines of N/M ranks each (rank r on node r / (N/M)): a node's ranks share one NIC (--link) for what leaves the node and talk over shared memory inside it; left out, every rank is a machine of its own"},
    {"hierarchical", 0, OPT_FLAG, O(hierarchical), 0, "0", 1, "with --nodes: the machine-aware form of the algorithm (Horovod's --hierarchical-allreduce for the ring: reduce-scatter inside each node, a ring over the nodes per local index, all-gather inside the node); M or N/M of 1: the flat one, said so"},
    {"intra-link", 0, OPT_STR, O(intra_link), S(intra_link), "", 1, "BW[,LAT] (with --nodes): each rank's port on its node's fabric (NVLink-like), pacing messages between ranks of one node; left out, they go unpaced"},
    {"straggler", 0, OPT_STRAGGLER, O(straggler), S(straggler), "", 1, "RANK:MS: rank RANK sleeps MS milliseconds (may be a fraction) after its forward in every step; repeatable, or RANK:MS,RANK:MS"},
    {"threads", 0, OPT_INT, O(threads), 0, "0", 0, "threads per rank, for GEMM blocks and the elementwise ops (BLAS itself single-threaded; 0: cores / local ranks)"},
    {"report", 0, OPT_STR, O(report), S(report), "ringside-report.json", OPT_NO_RESULT, "where rank 0 writes the JSON report"},
    {"trace", 0, OPT_STR, O(trace), S(trace), "", OPT_NO_RESULT, "write Chrome trace events to this file"},
    {"save-params", 0, OPT_STR, O(save_params), S(save_params), "", OPT_NO_RESULT, "write the final parameters to this file (raw little-endian float32, layer by layer: W then b)"},
    {"quiet", 'q', OPT_FLAG, O(quiet), 0, "0", OPT_NO_RESULT, "print nothing but errors"},
    {"verbose", 'v', OPT_FLAG, O(verbose), 0, "0", OPT_NO_RESULT, "every rank prints"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static int parse_layers(const char *v, Config *c) {
    int n = 0;
    const char *p = v;
    if (!*p) return rs_error(RS_ERR_INPUT, "--layers: empty (expected sizes such as 784,1024,10)");
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x <= 0 || x > (1 << 20))
            return rs_error(RS_ERR_INPUT, "--layers '%s': each size must be an integer in 1..1048576", v);
        if (n == CONFIG_MAX_LAYERS)
            return rs_error(RS_ERR_INPUT, "--layers '%s': at most %d sizes", v, CONFIG_MAX_LAYERS);
        c->layers[n++] = (int)x;
        p = end;
        if (*p == ',') p++;
        else if (*p) return rs_error(RS_ERR_INPUT, "--layers '%s': unexpected '%c'", v, *p);
    }
    if (n < 2) return rs_error(RS_ERR_INPUT, "--layers '%s': need at least two sizes (input,classes)", v);
    c->nlayers = n;
    return RS_OK;
}

/* Appends --straggler's RANK:MS[,RANK:MS...] to c (an empty value clears the list). */
static int parse_straggler(const char *v, Config *c) {
    if (!*v) {
        c->straggler[0] = 0;
        c->nstragglers = 0;
        return RS_OK;
    }
    const char *p = v;
    while (*p) {
        char *end;
        errno = 0;
        long rank = strtol(p, &end, 10);
        if (end == p || *end != ':' || errno || rank < 0 || rank > 1000000)
            return rs_error(RS_ERR_INPUT, "--straggler '%s': expected RANK:MS with RANK an integer >= 0", v);
        const char *q = end + 1;
        double ms = strtod(q, &end);
        if (end == q || errno || !isfinite(ms) || ms < 0 || ms > 3.6e6 || (*end && *end != ','))
            return rs_error(RS_ERR_INPUT, "--straggler '%s': MS must be a number of milliseconds in 0..3600000", v);
        if (c->nstragglers == CONFIG_MAX_STRAGGLERS)
            return rs_error(RS_ERR_INPUT, "--straggler '%s': at most %d stragglers", v, CONFIG_MAX_STRAGGLERS);
        c->straggler_rank[c->nstragglers] = (int)rank;
        c->straggler_ms[c->nstragglers++] = ms;
        p = *end ? end + 1 : end;
        if (*end && !*p) return rs_error(RS_ERR_INPUT, "--straggler '%s': a trailing comma", v);
    }
    size_t k = strlen(c->straggler);
    if (k + strlen(v) + 2 > sizeof c->straggler)
        return rs_error(RS_ERR_INPUT, "--straggler: more than %zu characters in all", sizeof c->straggler - 1);
    snprintf(c->straggler + k, sizeof c->straggler - k, "%s%s", k ? "," : "", v);
    return RS_OK;
}

/* Parses --ps-consistency's sync | async | ssp:S into c->ps_staleness. */
static int parse_consistency(const char *v, Config *c) {
    if (!strcmp(v, "sync")) c->ps_staleness = 0;
    else if (!strcmp(v, "async")) c->ps_staleness = CONFIG_ASYNC;
    else if (!strncmp(v, "ssp:", 4)) {
        char *end;
        errno = 0;
        long s = strtol(v + 4, &end, 10);
        if (!v[4] || *end || errno || v[4] == '-' || v[4] == '+' || s < 0 || s > 1000000)
            return rs_error(RS_ERR_INPUT, "--ps-consistency '%s': S in ssp:S must be an integer in 0..1000000", v);
        c->ps_staleness = (int)s;
    } else {
        return rs_error(RS_ERR_INPUT, "--ps-consistency '%s': expected sync, async or ssp:S", v);
    }
    if (strlen(v) >= sizeof c->ps_consistency)
        return rs_error(RS_ERR_INPUT, "--ps-consistency '%s': too long", v);
    strcpy(c->ps_consistency, v);
    return RS_OK;
}

int config_lockstep(const Config *c) { return c->ps_staleness == 0; } /* only ps has the others (backend_validate) */

double config_straggler_ms(const Config *c, int rank) {
    double ms = 0;
    for (int i = 0; i < c->nstragglers; i++)
        if (c->straggler_rank[i] == rank) ms += c->straggler_ms[i];
    return ms;
}

static int opt_set(const Opt *o, Config *c, const char *v) {
    char *base = (char *)c + o->off, *end;
    errno = 0;
    switch (o->type) {
    case OPT_COUNT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < 1 || x > 65536)
            return rs_error(RS_ERR_INPUT, "--%s '%s': expected a count from 1 to 65536 (leave it out for none)", o->name, v);
        *(int *)base = (int)x;
        return RS_OK;
    }
    case OPT_INT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < -2147483647L || x > 2147483647L)
            return rs_error(RS_ERR_INPUT, "--%s '%s': not an integer", o->name, v);
        *(int *)base = (int)x;
        return RS_OK;
    }
    case OPT_I64: {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno) return rs_error(RS_ERR_INPUT, "--%s '%s': not an integer", o->name, v);
        *(long long *)base = x;
        return RS_OK;
    }
    case OPT_DBL: {
        double x = strtod(v, &end);
        if (!*v || *end || errno) return rs_error(RS_ERR_INPUT, "--%s '%s': not a number", o->name, v);
        if (!isfinite(x)) return rs_error(RS_ERR_INPUT, "--%s '%s': not a finite number", o->name, v);
        *(double *)base = x;
        return RS_OK;
    }
    case OPT_STR:
        if (strlen(v) >= o->size)
            return rs_error(RS_ERR_INPUT, "--%s: value longer than %zu characters", o->name, o->size - 1);
        strcpy(base, v);
        return RS_OK;
    case OPT_FLAG: *(int *)base = atoi(v); return RS_OK;
    case OPT_NOFLAG: *(int *)base = atoi(v); return RS_OK;
    case OPT_LAYERS: return parse_layers(v, c);
    case OPT_STRAGGLER: return parse_straggler(v, c);
    case OPT_CONSISTENCY: return parse_consistency(v, c);
    }
    return RS_ERR_INPUT;
}

void config_defaults(Config *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].type != OPT_COUNT) opt_set(&opts[i], c, opts[i].def); /* a count's default: 0, not given */
}

static const Opt *opt_find(const char *name, size_t len, char shortc) {
    for (size_t i = 0; i < NOPTS; i++) {
        if (shortc ? opts[i].shortc == shortc
                   : (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0))
            return &opts[i];
    }
    return NULL;
}

int config_parse(Config *c, int argc, char **argv, int *help) {
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = 1;
            return RS_OK;
        }
        const Opt *o = NULL;
        const char *val = NULL;
        if (a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            o = opt_find(a + 2, len, 0);
            if (eq) val = eq + 1;
        } else if (a[0] == '-' && a[1] && !a[2]) {
            o = opt_find(NULL, 0, a[1]);
        } else {
            return rs_error(RS_ERR_INPUT, "unexpected argument '%s' (options start with --)", a);
        }
        if (!o) return rs_error(RS_ERR_INPUT, "unknown option '%s'", a);
        if (o->type == OPT_FLAG || o->type == OPT_NOFLAG) {
            if (val) return rs_error(RS_ERR_INPUT, "--%s takes no value", o->name);
            RS_TRY(opt_set(o, c, o->type == OPT_FLAG ? "1" : "0"));
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) return rs_error(RS_ERR_INPUT, "--%s needs a value", o->name);
            val = argv[++i];
        }
        RS_TRY(opt_set(o, c, val));
        if (o->off == O(checkpoint_every)) c->checkpoint_every_given = 1;
        if ((o->off == O(steps) || o->off == O(epochs)) && *(int *)((char *)c + o->off) < 1)
            return rs_error(RS_ERR_INPUT, "--%s %s: must be at least 1", o->name, val);
    }
    return RS_OK;
}

void config_usage(FILE *f) {
    for (size_t i = 0; i < NOPTS; i++) {
        const Opt *o = &opts[i];
        char left[64];
        const char *arg = (o->type == OPT_FLAG || o->type == OPT_NOFLAG) ? "" : " V";
        if (o->shortc) snprintf(left, sizeof left, "-%c, --%s%s", o->shortc, o->name, arg);
        else snprintf(left, sizeof left, "    --%s%s", o->name, arg);
        if (o->type == OPT_FLAG || o->type == OPT_NOFLAG) fprintf(f, "  %-26s %s\n", left, o->help);
        else fprintf(f, "  %-26s %s (default: %s)\n", left, o->help, o->def[0] ? o->def : "none");
    }
}

static void opt_text(const Opt *o, const Config *c, char *buf, size_t len) {
    const char *base = (const char *)c + o->off;
    switch (o->type) {
    case OPT_INT: case OPT_COUNT: case OPT_FLAG: case OPT_NOFLAG: snprintf(buf, len, "%d", *(const int *)base); break;
    case OPT_I64: snprintf(buf, len, "%lld", *(const long long *)base); break;
    case OPT_DBL: snprintf(buf, len, "%.17g", *(const double *)base); break;
    case OPT_STR: case OPT_STRAGGLER: case OPT_CONSISTENCY: snprintf(buf, len, "%s", base); break;
    case OPT_LAYERS: {
        size_t k = 0;
        buf[0] = 0;
        for (int i = 0; i < c->nlayers && k < len; i++)
            k += (size_t)snprintf(buf + k, len - k, i ? ",%d" : "%d", c->layers[i]);
        break;
    }
    }
}

static int opt_shared(size_t i) { return (opts[i].shared & OPT_SHARED) != 0; }

/* "name=value\n" for every option keep(i) selects, in the table's order, into buf (snprintf's
 * rules: the length it needs, truncated to len). */
static size_t canon_text(const Config *c, int (*keep)(size_t), char *buf, size_t len) {
    size_t k = 0;
    char v[600];
    if (len) buf[0] = 0;
    for (size_t i = 0; i < NOPTS; i++) {
        if (!keep(i)) continue;
        opt_text(&opts[i], c, v, sizeof v);
        int w = snprintf(k < len ? buf + k : NULL, k < len ? len - k : 0, "%s=%s\n", opts[i].name, v);
        k += (size_t)w;
    }
    return k;
}

size_t config_canonical(const Config *c, char *buf, size_t len) { return canon_text(c, opt_shared, buf, len); }

int config_changes_no_result(const char *name) {
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strcmp(opts[i].name, name)) return (opts[i].shared & OPT_NO_RESULT) != 0;
    return 0;
}

/* The options a resume may change: those that change no result, and how long to train, which
 * steps are timed (and --straggler's sleeps, which change no value). */
static int resume_may_differ(const char *name) {
    static const char *const names[] = {"steps", "epochs", "warmup", "straggler", "time-budget"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) return 1;
    return config_changes_no_result(name);
}

/* Whether option i belongs to config_resume_text. */
static int resume_keeps(size_t i) {
    return (opt_shared(i) || !strcmp(opts[i].name, "device")) && !resume_may_differ(opts[i].name);
}

size_t config_resume_text(const Config *c, char *buf, size_t len) { return canon_text(c, resume_keeps, buf, len); }

/* Finds "key=" line in text; copies its value to out. */
static void canon_get(const char *text, const char *key, char *out, size_t len) {
    size_t kl = strlen(key);
    out[0] = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        if (ll > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            size_t vl = ll - kl - 1;
            if (vl >= len) vl = len - 1;
            memcpy(out, p + kl + 1, vl);
            out[vl] = 0;
            return;
        }
        p = nl ? nl + 1 : NULL;
    }
}

/* The first option keep(i) selects whose canonical values differ between mine and theirs, named
 * with where theirs came from; else whether the texts differ at all (whole names why). */
static int canon_first_diff(const char *mine, const char *theirs, int (*keep)(size_t), const char *where, const char *whole,
                            char *out, size_t len) {
    char a[600], b[600];
    for (size_t i = 0; i < NOPTS; i++) {
        if (!keep(i)) continue;
        canon_get(mine, opts[i].name, a, sizeof a);
        canon_get(theirs, opts[i].name, b, sizeof b);
        if (strcmp(a, b)) {
            snprintf(out, len, "--%s (%s here, %s %s)", opts[i].name, a, b, where);
            return 1;
        }
    }
    if (strcmp(mine, theirs)) {
        snprintf(out, len, "the option set (%s)", whole);
        return 1;
    }
    return 0;
}

int config_diff(const char *mine, const char *theirs, char *out, size_t len) {
    return canon_first_diff(mine, theirs, opt_shared, "on rank 0", "different ringside versions?", out, len);
}

int config_resume_diff(const char *mine, const char *theirs, char *out, size_t len) {
    return canon_first_diff(mine, theirs, resume_keeps, "in the checkpoint", "a checkpoint of another ringside version", out,
                            len);
}

unsigned long long config_hash(const char *text) {
    return hash_text(HASH_FNV_INIT, text);
}

cJSON *config_json(const Config *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (size_t i = 0; i < NOPTS; i++) {
        const Opt *op = &opts[i];
        const char *base = (const char *)c + op->off;
        switch (op->type) {
        case OPT_INT: case OPT_COUNT: cJSON_AddNumberToObject(o, op->name, *(const int *)base); break;
        case OPT_I64: cJSON_AddNumberToObject(o, op->name, (double)*(const long long *)base); break;
        case OPT_DBL: cJSON_AddNumberToObject(o, op->name, *(const double *)base); break;
        case OPT_STR: case OPT_STRAGGLER: case OPT_CONSISTENCY: cJSON_AddStringToObject(o, op->name, base); break;
        case OPT_FLAG: cJSON_AddBoolToObject(o, op->name, *(const int *)base); break;
        case OPT_NOFLAG: cJSON_AddBoolToObject(o, op->name + 3, *(const int *)base); break;
        case OPT_LAYERS: cJSON_AddItemToObject(o, op->name, cJSON_CreateIntArray(c->layers, c->nlayers)); break;
        }
    }
    return o;
}
