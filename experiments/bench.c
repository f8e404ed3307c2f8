#define _GNU_SOURCE /* sched_setaffinity */
/* bench.c - `ringside bench`: an nccl-tests-style all-reduce sweep (size, time, algbw, busbw, #wrong) over any back end */
#include "bench.h"
#include "backends.h"
#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/config.h"
#include "../net/ctrl.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../net/launch.h"
#include "../net/link.h"
#include "../net/msg.h"
#include "../net/node.h"
#include "../net/zendpoint.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "../engine/report.h"
#include "../engine/sync.h"
#include "../engine/zctx.h"
#include "../ps/ps.h"
#include "../engine/config_check.h"
#include "../base/hash.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_SCHEMA "ringside.bench/1"
#define BENCH_PERIOD 17 /* the inputs repeat every 17 elements */

/* ---- Types ---- */

typedef struct {
    int nranks, nranks_given;
    char sync[16];
    size_t minbytes, maxbytes;
    int factor, warmup, iters, check;
    char device[16];
    double timeout;
    char report[512];
    char secure[512];
    char link[64];          /* --link BW[,LAT] ("": none) */
    int nodes;              /* --nodes M (0: every rank a machine of its own) */
    int hierarchical;       /* --hierarchical: the machine-aware form of the algorithm */
    char intra_link[64];    /* --intra-link BW[,LAT] ("": unpaced) */
    char transport[8];      /* --transport auto|shm|ipc|tcp */
    char msg_layer[8];      /* --msg-layer zeromq|direct */
    int random;             /* --inputs random: non-exact floats; #wrong counts ranks whose bits differ from rank 0's */
    char wire[8];           /* --wire fp32|bf16|fp16: what the back end's messages carry */
    int bind;               /* --bind core (1) | none (0) | auto (-1, default: core for the ring) */
    double bucket_mb;       /* --bucket-mb: the server back ends' message cut (train's bucket, 25) */
    char placement[16];     /* --ps-placement colocated|sharded|dedicated ("": colocated) */
    char partition[16];     /* --ps-partition-kb auto|off|KiB ("": auto) */
    int servers;            /* the server processes to start, from --ps-servers: ps dedicated K (default 1),
                             * byteps k CPU servers (default 0), 0 otherwise */
    int servers_set;        /* --ps-servers was given */
    int zero_stage;         /* --zero-stage (0: not given; zero takes 1) */
    int back_to_back;       /* --barrier none: a size's calls back to back after one line-up (0: each, the default) */
} BenchOpts;

/* One row of the table, as rank 0 assembles it from every rank's measurement. */
typedef struct {
    size_t bytes, count;
    double time_us, algbw, busbw;
    long long wrong;       /* summed over ranks; -1 when not checked */
    double *rank_us;       /* per rank: the median of its timed iterations */
} BenchRow;

/* Everything one rank of the bench holds. */
typedef struct {
    BenchOpts o;
    Config cfg;
    BackendShape shape;     /* cfg's back end: its row and architecture */
    RankEnv env;
    int rank, world;
    Device dev;
    void *zctx;
    Ctrl *ctrl;
    const SyncOps *sync;
    void *sync_state;
    float *dbuf;           /* device, max count (MEM_COMM) */
    float *hin, *hout;     /* pinned host: this rank's input, a result to check (MEM_COMM) */
    size_t max_count;
    float expect[BENCH_PERIOD];
    int input_max;         /* exact inputs lie in [-input_max, input_max]: every partial sum exact on the wire */
    double *times;         /* iters */
    BenchRow *rows;
    int nrows;
    long long wrong_here;  /* this rank's wrong elements over the sweep */
    unsigned long long hash; /* --inputs random: this size's result, hashed */
    int data_barrier;      /* the back end's own all-reduce lines the ranks up (its row's line_up) */
    float *barrier_buf;    /* its N floats (N <= 256), on the device: sync's allreduce takes device memory (MEM_COMM) */
    SyncTraffic barrier_traffic; /* what one of those barriers moves (bench_line_up): not counted in the report */
    unsigned long long barriers; /* how many ran, the measuring one included */
    char cmdline[2048];
} Bench;

/* ---- options ---------------------------------------------------------------------------------- */

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: ringside bench [options]\n"
            "\n"
            "An nccl-tests-style all-reduce sweep (sum of floats, in place) over a sync back end;\n"
            "with -n N on N local ranks. Inputs are small integers, so every sum is exact and\n"
            "checked bitwise (#wrong).\n"
            "\n"
            "  -n, --ranks N          ranks to launch (default 1)\n"
            "      --sync NAME        ring | tree | nccl | ps | byteps (a shard in every rank, and --ps-servers k\n"
            "                         CPU servers) | zero (a reduce-scatter and a parameter all-gather, ZeRO's)\n"
            "                         | student (lab 5) (default ring)\n"
            "  -b, --minbytes SIZE    smallest message in bytes, K/M/G suffixes (default 8)\n"
            "  -e, --maxbytes SIZE    largest message (default 64M)\n"
            "  -f, --stepfactor F     multiply the size by F per row (default 2)\n"
            "  -w, --warmup_iters W   untimed iterations per size (default 5)\n"
            "  -i, --iters I          timed iterations per size (default 20)\n"
            "  -c, --check 0|1        check every element of every timed iteration (default 1)\n"
            "      --device D         auto | cpu | cuda | cpu-async (the CPU with a GPU's asynchronous copies\n"
            "                         and no host-visible memory, for tests) (default auto)\n"
            "      --timeout S        seconds any wait may last before the job fails (default 60)\n"
            "      --report FILE      also write the results as JSON (schema " BENCH_SCHEMA ")\n"
            "      --secure KEYFILE   CURVE-encrypt and authenticate every socket (ringside keygen KEYFILE)\n"
            "      --transport T      auto | shm | ipc | tcp between ranks of one host (default auto)\n"
            "      --msg-layer L      zeromq | direct: the engine under the messages (default zeromq)\n"
            "      --inputs exact|random  exact: small integers, every element checked against the exact sum\n"
            "                         (default); random: non-exact floats, every rank's result hashed and\n"
            "                         compared with rank 0's (an all-reduce must leave the same bits everywhere)\n"
            "      --wire fp32|bf16|fp16  what the back end's messages carry (default fp32); sums stay fp32.\n"
            "                         size and busbw count the fp32 buffer, so a 16-bit wire can show up to\n"
            "                         2x busbw; exact inputs are then chosen so that every partial sum is exact\n"
            "                         in 16 bits, and #wrong still compares bitwise with the exact sum\n"
            "      --link BW[,LAT]    every rank's data plane through an emulated interface: BW each way\n"
            "                         (1gbit, 100mbit, 125MB/s), LAT per message (50us, 1ms)\n"
            "      --nodes M          the ranks are M machines of N/M ranks each: a node's ranks share one\n"
            "                         NIC (--link) for what leaves the node, TCP between nodes\n"
            "      --intra-link BW[,LAT]  with --nodes: each rank's port on its node's fabric (default unpaced)\n"
            "      --hierarchical     with --nodes: the algorithm's machine-aware form (ring: Horovod's\n"
            "                         hierarchical all-reduce)\n"
            "      --bucket-mb MB     ps, byteps: the all-reduce travels in slices of at most MB MiB, each\n"
            "                         summed and answered as soon as it is in (default 25, train's bucket);\n"
            "                         the ring and NCCL cut their own segments and ignore it\n"
            "      --ps-partition-kb K  ps, byteps: the all-reduce in partitions of at most K KiB on the wire,\n"
            "                         each wholly on one server, striped over all of them (round robin in\n"
            "                         bytes); auto (default): 2 ms of --link (64 KiB to 4 MiB), else off;\n"
            "                         off: --bucket-mb slices cut by the servers' key ranges\n"
            "      --ps-placement P   ps: colocated (default: one server, a thread of rank 0, as\n"
            "                         DataParallel's) | sharded (a server in every rank, 1/N of every\n"
            "                         slice's keys each, the others' contributions over the network) |\n"
            "                         dedicated (--ps-servers K processes of their own, keys by range)\n"
            "      --ps-servers K     ps dedicated: K server processes (default 1); byteps: k CPU\n"
            "                         servers beside the ranks' shards, 0 <= k <= N (default 0)\n"
            "      --zero-stage S     zero: 1 or 2 (default 1; one collective for both, the report names it)\n"
            "      --barrier each|none  each (default): before every call the input is refilled and the\n"
            "                         ranks lined up (a control-plane barrier, and the back end's own\n"
            "                         all-reduce where its row lines up), every timed call checked; none:\n"
            "                         a size's calls back to back after one line-up, with no refill or\n"
            "                         barrier between them (nccl-tests' loop, training's steps, a bare\n"
            "                         transport's round trips), only the first call checked (a warm-up\n"
            "                         one unless -w 0); sums grow from call to call, which costs nothing\n"
            "      --bind auto|core|none  core: each rank on one CPU of those it may use, local rank i on\n"
            "                         the i-th (round robin past the last), as mpirun's --bind-to core;\n"
            "                         none: where the scheduler puts it; auto (default): core for the\n"
            "                         ring, none for the others (ps's server and NCCL have threads of\n"
            "                         their own)\n"
            "\n"
            "Exit status: 0; 2 bad option; 3 a peer died or timed out; 4 a wrong element.\n");
}

/* "64M" -> 67108864 (K, M, G: powers of 1024; an optional trailing B). 0 or -1. */
static int bench_parse_size(const char *s, size_t *out) {
    errno = 0;
    char *end;
    if (!isdigit((unsigned char)*s)) return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned long long mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1ull << 10; end++; break;
    case 'M': mul = 1ull << 20; end++; break;
    case 'G': mul = 1ull << 30; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end || (mul > 1 && v > (~0ull) / mul)) return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int bench_parse_int(const char *s, int lo, int hi, int *out) {
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* Parses argv into o (defaults first). *help set on --help. RS_ERR_INPUT naming the option. */
/* --link's refusal: the sweep's largest call must cross the emulated wire within --timeout (its
 * waits sleep as long as the bandwidth implies). 0 or RS_ERR_INPUT naming the link. */
static int bench_check_link(const BenchOpts *o) {
    LinkSpec l;
    RS_TRY(link_parse(o->link, &l));
    double secs = l.bytes_per_s > 0 ? (double)o->maxbytes / l.bytes_per_s : 0;
    if (secs >= o->timeout)
        return rs_error(RS_ERR_INPUT, "bench: --link %s: the sweep's largest call (%zu bytes) takes %.3g s on it, not less "
                                      "than --timeout %g s (a faster link, a smaller -e, or a longer --timeout)",
                        o->link, o->maxbytes, secs, o->timeout);
    return RS_OK;
}

/* The Config of a job of world workers from the options, with no side effect: every option
 * checked by the rules train's are (config_partition_check, the back end's row), and bench's own:
 * --ps-placement only where the back end is a ps of some placement, --ps-servers only where it
 * starts server processes (unset: one for dedicated, none for byteps's k). 0 or RS_ERR_INPUT
 * naming the options. */
static int bench_fill(const BenchOpts *o, int world, Config *c) {
    config_defaults(c);
    snprintf(c->sync, sizeof c->sync, "%s", o->sync);
    snprintf(c->device, sizeof c->device, "%s", o->device);
    c->timeout = o->timeout;
    c->bucket_mb = o->bucket_mb;
    c->nranks = world;
    snprintf(c->wire, sizeof c->wire, "%s", o->wire[0] ? o->wire : "fp32");
    snprintf(c->secure, sizeof c->secure, "%s", o->secure);
    snprintf(c->link, sizeof c->link, "%s", o->link);
    c->nodes = o->nodes;
    c->hierarchical = o->hierarchical;
    snprintf(c->intra_link, sizeof c->intra_link, "%s", o->intra_link);
    snprintf(c->transport, sizeof c->transport, "%s", o->transport[0] ? o->transport : "auto");
    snprintf(c->msg_layer, sizeof c->msg_layer, "%s", o->msg_layer[0] ? o->msg_layer : "zeromq");
    /* ps: the one server inside rank 0 (colocated, DataParallel's shape), a shard of every message
     * in every rank (sharded: N servers, 1/N of each slice's keys each), or K server processes
     * of their own (dedicated, keys by range); byteps: a shard in every rank and k CPU servers */
    snprintf(c->ps_placement, sizeof c->ps_placement, "%s", o->placement[0] ? o->placement : "colocated");
    snprintf(c->ps_partition, sizeof c->ps_partition, "%s", o->partition[0] ? o->partition : "auto");
    ZepWant want;
    LinkSpec link;
    RS_TRY(zep_parse(c->transport, &want));
    RS_TRY(link_parse(o->link, &link));
    RS_TRY(bench_check_link(o));
    RS_TRY(config_nodes_check(c));
    RS_TRY(config_layer_check(c));
    c->zero_stage = o->zero_stage ? o->zero_stage : !strcmp(o->sync, "zero"); /* one collective for stages 1 and 2 */
    BackendShape sh;
    RS_TRY(backend_shape(c, &sh));
    int placed = sh.arch == ARCH_PS_COLOCATED || sh.arch == ARCH_PS_SHARDED || sh.arch == ARCH_PS_DEDICATED;
    if (o->placement[0] && !placed)
        return rs_error(RS_ERR_INPUT, "bench: --ps-placement %s with --sync %s: the placement is --sync ps's (byteps "
                                      "has a shard in every rank already)", o->placement, o->sync);
    int byteps = arch_is_byteps(sh.arch), serving = sh.arch == ARCH_PS_DEDICATED || byteps;
    int machines = ps_byteps_machines(c, world); /* byteps's n: a machine a worker under --hierarchical */
    if (o->servers_set && !serving)
        return rs_error(RS_ERR_INPUT, "bench: --ps-servers %d: server processes are --ps-placement dedicated's and "
                                      "--sync byteps's", o->servers);
    if (sh.arch == ARCH_PS_DEDICATED && o->servers_set && o->servers == 0)
        return rs_error(RS_ERR_INPUT, "bench: --ps-placement dedicated --ps-servers 0: at least one server process");
    c->ps_servers = o->servers_set ? o->servers : byteps ? 0 : 1;
    if (byteps && c->ps_servers > machines)
        return rs_error(RS_ERR_INPUT, "bench: --sync byteps --ps-servers %d with %d %s: 0 <= k <= n CPU servers",
                        c->ps_servers, machines, machines == world ? "workers" : "machines (--hierarchical)");
    if (byteps && c->ps_servers > 0 && world == 1)
        return rs_error(RS_ERR_INPUT, "bench: --sync byteps --ps-servers %d with one worker: one worker needs no "
                                      "summation service (--ps-servers 0)", c->ps_servers);
    RS_TRY(backend_check(c)); /* the back end's own rules, as train's (experiments/backends.c) */
    return config_partition_check(c, 0);
}

static int bench_parse(BenchOpts *o, int argc, char **argv, int *help) {
    memset(o, 0, sizeof *o);
    o->nranks = 1;
    snprintf(o->sync, sizeof o->sync, "ring");
    o->minbytes = 8;
    o->maxbytes = 64u << 20;
    o->factor = 2;
    o->warmup = 5;
    o->iters = 20;
    o->check = 1;
    snprintf(o->device, sizeof o->device, "auto");
    o->timeout = 60;
    o->bind = -1;
    o->bucket_mb = 25;
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        char name[64];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            *help = 1;
            return RS_OK;
        }
        if (!strcmp(a, "--hierarchical")) { /* a flag: no value */
            o->hierarchical = 1;
            continue;
        }
        const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            v = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
            if (i + 1 < argc) v = argv[i + 1];
        }
        static const char *known[] = {"-n", "--ranks", "--sync", "-b", "--minbytes", "-e", "--maxbytes", "-f",
                                      "--stepfactor", "-w", "--warmup_iters", "-i", "--iters", "-c", "--check",
                                      "--device", "--timeout", "--report", "--secure", "--link", "--transport", "--msg-layer", "--inputs", "--nodes", "--intra-link",
                                      "--wire", "--bind", "--bucket-mb", "--ps-placement", "--ps-servers",
                                      "--ps-partition-kb", "--zero-stage", "--barrier"};
        int k = -1;
        for (size_t j = 0; j < sizeof known / sizeof known[0]; j++)
            if (!strcmp(name, known[j])) k = (int)j;
        if (k < 0) return rs_error(RS_ERR_INPUT, "bench: unknown option '%s'", a);
        if (!v) return rs_error(RS_ERR_INPUT, "bench: %s needs a value", name);
        if (!eq) i++;
#define IS(s1, s2) (!strcmp(name, s1) || !strcmp(name, s2))
        if (IS("-n", "--ranks")) {
            if (bench_parse_int(v, 1, 256, &o->nranks)) return rs_error(RS_ERR_INPUT, "bench: %s '%s': expected 1..256 ranks", name, v);
            o->nranks_given = 1;
        } else if (!strcmp(name, "--sync")) {
            if (strlen(v) >= sizeof o->sync) return rs_error(RS_ERR_INPUT, "bench: --sync '%s': unknown back end", v);
            snprintf(o->sync, sizeof o->sync, "%s", v);
        } else if (IS("-b", "--minbytes") || IS("-e", "--maxbytes")) {
            size_t *dst = IS("-b", "--minbytes") ? &o->minbytes : &o->maxbytes;
            if (bench_parse_size(v, dst)) return rs_error(RS_ERR_INPUT, "bench: %s '%s': not a size (bytes, or with K/M/G)", name, v);
        } else if (IS("-f", "--stepfactor")) {
            if (bench_parse_int(v, 2, 1 << 20, &o->factor)) return rs_error(RS_ERR_INPUT, "bench: %s '%s': expected an integer >= 2", name, v);
        } else if (IS("-w", "--warmup_iters")) {
            if (bench_parse_int(v, 0, 1000000, &o->warmup)) return rs_error(RS_ERR_INPUT, "bench: %s '%s': expected an integer >= 0", name, v);
        } else if (IS("-i", "--iters")) {
            if (bench_parse_int(v, 1, 1000000, &o->iters)) return rs_error(RS_ERR_INPUT, "bench: %s '%s': expected an integer >= 1", name, v);
        } else if (IS("-c", "--check")) {
            if (bench_parse_int(v, 0, 1, &o->check)) return rs_error(RS_ERR_INPUT, "bench: %s '%s': expected 0 or 1", name, v);
        } else if (!strcmp(name, "--device")) {
            if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "cpu-async"))
                return rs_error(RS_ERR_INPUT, "bench: --device '%s': expected auto, cpu, cuda or cpu-async", v);
            snprintf(o->device, sizeof o->device, "%s", v);
        } else if (!strcmp(name, "--timeout")) {
            char *end;
            o->timeout = strtod(v, &end);
            if (*end || end == v || !(o->timeout > 0) || o->timeout > 1e6)
                return rs_error(RS_ERR_INPUT, "bench: --timeout '%s': expected seconds > 0", v);
        } else if (!strcmp(name, "--report")) {
            if (!*v || strlen(v) >= sizeof o->report) return rs_error(RS_ERR_INPUT, "bench: --report '%s': not a usable path", v);
            snprintf(o->report, sizeof o->report, "%s", v);
        } else if (!strcmp(name, "--secure")) {
            if (!*v || strlen(v) >= sizeof o->secure) return rs_error(RS_ERR_INPUT, "bench: --secure '%s': not a usable path", v);
            snprintf(o->secure, sizeof o->secure, "%s", v);
        } else if (!strcmp(name, "--inputs")) {
            if (strcmp(v, "exact") && strcmp(v, "random"))
                return rs_error(RS_ERR_INPUT, "bench: --inputs '%s': expected exact or random", v);
            o->random = !strcmp(v, "random");
        } else if (!strcmp(name, "--wire")) {
            CodecType t;
            if (codec_parse(v, &t) != 0) return rs_error(RS_ERR_INPUT, "bench: --wire '%s': expected fp32, bf16 or fp16 (FP8 is train's: bench holds sums exact)", v);
            if (codec_is_fp8(t))
                return rs_error(RS_ERR_INPUT, "bench --wire %s: bench holds every element of the sum exact, and FP8's 3 "
                                              "or 4 significant bits keep a sum's integers exact only up to 8 or 16 "
                                              "(time FP8 with train --wire %s)", v, v);
            snprintf(o->wire, sizeof o->wire, "%s", v);
        } else if (!strcmp(name, "--barrier")) {
            if (strcmp(v, "each") && strcmp(v, "none"))
                return rs_error(RS_ERR_INPUT, "bench: --barrier '%s': expected each or none", v);
            o->back_to_back = !strcmp(v, "none");
        } else if (!strcmp(name, "--bind")) {
            if (strcmp(v, "auto") && strcmp(v, "core") && strcmp(v, "none"))
                return rs_error(RS_ERR_INPUT, "bench: --bind '%s': expected auto, core or none", v);
            o->bind = !strcmp(v, "auto") ? -1 : !strcmp(v, "core");
        } else if (!strcmp(name, "--bucket-mb")) {
            char *end;
            o->bucket_mb = strtod(v, &end);
            if (*end || end == v || !(o->bucket_mb >= 1.0 / 1048576) || o->bucket_mb > 8192)
                return rs_error(RS_ERR_INPUT, "bench: --bucket-mb '%s': expected MiB > 0 (at most 8192)", v);
        } else if (!strcmp(name, "--ps-placement")) {
            if (strcmp(v, "colocated") && strcmp(v, "sharded") && strcmp(v, "dedicated"))
                return rs_error(RS_ERR_INPUT, "bench: --ps-placement '%s': expected colocated, sharded or dedicated", v);
            snprintf(o->placement, sizeof o->placement, "%s", v);
        } else if (!strcmp(name, "--ps-partition-kb")) {
            if (strlen(v) >= sizeof o->partition)
                return rs_error(RS_ERR_INPUT, "--ps-partition-kb '%.20s...': expected a positive number of KiB, auto or off", v);
            snprintf(o->partition, sizeof o->partition, "%s", v);
        } else if (!strcmp(name, "--zero-stage")) {
            if (bench_parse_int(v, 1, 3, &o->zero_stage))
                return rs_error(RS_ERR_INPUT, "bench: --zero-stage '%s': must be 1, 2 or 3", v);
        } else if (!strcmp(name, "--ps-servers")) {
            if (bench_parse_int(v, 0, 64, &o->servers))
                return rs_error(RS_ERR_INPUT, "bench: --ps-servers '%s': expected 0..64 server processes", v);
            o->servers_set = 1;
        } else if (!strcmp(name, "--msg-layer")) {
            MsgLayer l;
            RS_TRY(msg_layer_parse(v, &l));
            snprintf(o->msg_layer, sizeof o->msg_layer, "%s", v);
        } else if (!strcmp(name, "--transport")) {
            ZepWant w;
            RS_TRY(zep_parse(v, &w));
            snprintf(o->transport, sizeof o->transport, "%s", v);
        } else if (!strcmp(name, "--link")) {
            LinkSpec l;
            RS_TRY(link_parse(v, &l));
            snprintf(o->link, sizeof o->link, "%s", v);
        } else if (!strcmp(name, "--nodes")) {
            if (bench_parse_int(v, 1, 256, &o->nodes)) return rs_error(RS_ERR_INPUT, "bench: --nodes '%s': expected 1..256 nodes", v);
        } else if (!strcmp(name, "--intra-link")) {
            if (strlen(v) >= sizeof o->intra_link) return rs_error(RS_ERR_INPUT, "bench: --intra-link '%s': too long", v);
            snprintf(o->intra_link, sizeof o->intra_link, "%s", v);
        }
#undef IS
    }
    o->minbytes -= o->minbytes % sizeof(float);
    o->maxbytes -= o->maxbytes % sizeof(float);
    if (o->minbytes < sizeof(float)) return rs_error(RS_ERR_INPUT, "bench: -b: smallest size below one float (4 bytes)");
    if (o->maxbytes < o->minbytes)
        return rs_error(RS_ERR_INPUT, "bench: -e %zu is below -b %zu", o->maxbytes, o->minbytes);
    if (o->maxbytes > (8ull << 30)) return rs_error(RS_ERR_INPUT, "bench: -e %zu: at most 8G", o->maxbytes);
    Config c; /* the options together, by the rules of train's (bench_fill); the server processes */
    RS_TRY(bench_fill(o, o->nranks, &c));
    o->servers = backend_servers(&c);
    return RS_OK;
}

/* ---- the sweep (one rank) ---------------------------------------------------------------------- */

/* Rank r's input element i: an integer in [-max, max] (max <= 8), so that the sum over ranks, and
 * every partial sum on the way, is exact (or, with --inputs random, a float in [-1, 1) with a full
 * mantissa, whose sum depends on its order). Either way periodic in i with BENCH_PERIOD. */
static float bench_input(size_t i, int r, int random, int max) {
    if (!random) {
        long v = (long)((i * 7 + (size_t)r * 13) % 17) - 8;
        return (float)(v < -max ? -max : v > max ? max : v);
    }
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ ((uint64_t)r + 1) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    return (float)((double)(x >> 11) / 4503599627370496.0 - 1.0); /* 2^52: [0, 2) - 1 */
}

/* FNV-1a of count result floats (their bits). */
static unsigned long long bench_hash(const float *x, size_t count) {
    return hash_bytes(HASH_FNV_INIT, x, count * sizeof(float));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of x[0..n) (sorts x). */
static double bench_median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static double bench_bus_factor(int world) { return world > 1 ? 2.0 * (world - 1) / world : 0.0; }

/* --bind core: pins this process to one of the CPUs it may use, the (local_rank mod their count)-th,
 * as mpirun --bind-to core does (without it, ranks that sleep and wake each other are often stacked
 * on one CPU by the scheduler's wake-up placement while the other runs something else: measured on
 * 2 cores, 2 ranks, 64 KiB to 1 MiB over shared memory, 4-6x slower in such runs). No-op where
 * the affinity cannot be read or set. */
static void bench_bind(int local_rank) {
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    int n = CPU_COUNT(&allowed), want = n > 0 ? local_rank % n : 0;
    for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && n > 0; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (k++ != want) continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) log_warn("bench: cannot bind rank to CPU %d: %s", cpu, strerror(errno));
        return;
    }
}

/* The run's Config from the options, for the workers and the server processes alike; sets the
 * transport rule and the emulated link. 0 or RS_ERR_INPUT. */
static int bench_config(Bench *b) {
    RS_TRY(bench_fill(&b->o, b->world, &b->cfg));
    ZepWant want;
    zep_parse(b->cfg.transport, &want); /* checked by bench_fill */
    zep_set(want);
    MsgLayer layer; /* checked by bench_fill */
    msg_layer_parse(b->cfg.msg_layer, &layer);
    msg_layer_set(layer);
    return node_link_open(&b->env, &b->cfg); /* --link and --intra-link checked by bench_fill */
}

/* The text every member of the job must agree on: the Config's and the sweep's. */
static void bench_canonical(const Bench *b, char *out, size_t len) {
    const BenchOpts *o = &b->o;
    size_t k = config_canonical(&b->cfg, out, len);
    if (k < len)
        snprintf(out + k, len - k, "bench=%zu,%zu,%d,%d,%d,%d,%d,%d\n", o->minbytes, o->maxbytes, o->factor, o->warmup,
                 o->iters, o->check, o->random, o->back_to_back);
}

/* Measures what one line-up all-reduce moves on this rank, once, between two control-plane
 * barriers, so that no message of a neighbouring call falls in the window (a tree rank counts a
 * message when it reads it, and a faster peer's next call may arrive before this one's last):
 * the all-reduce of N floats is the same every time, so the report takes out that figure times
 * the number run. 0 or RS_ERR_*. */
static int bench_line_up(Bench *b) {
    SyncTraffic t0 = {0}, t1 = {0};
    if (b->ctrl) RS_TRY(ctrl_barrier_workers(b->ctrl));
    b->sync->traffic(b->sync_state, &t0);
    RS_TRY(b->sync->allreduce(b->sync_state, b->barrier_buf, (size_t)b->world));
    if (b->ctrl) RS_TRY(ctrl_barrier_workers(b->ctrl));
    b->sync->traffic(b->sync_state, &t1);
    sync_traffic_sub(&t1, &t0, 1);
    b->barrier_traffic = t1;
    b->barriers = 1;
    return RS_OK;
}

/* Sets up the device, the back end and (under a launcher) the control plane. */
static int bench_setup(Bench *b) {
    BenchOpts *o = &b->o;
    RS_TRY(bench_config(b));
    RS_TRY(backend_shape(&b->cfg, &b->shape));
    if (!(b->sync = b->shape.ops)) return rs_error(RS_ERR_INPUT, "--sync %s: not in this build", o->sync);
    if (o->bind < 0) o->bind = b->shape.row->host_ring;
    if (o->bind) bench_bind(b->env.local_rank); /* before any thread starts: they inherit it */
    int fell_back = 0;
    RS_TRY(device_open(&b->dev, o->device, b->env.local_rank, &fell_back));
    if (fell_back) log_info("# --device auto: no usable GPU, running on the CPU");
    b->max_count = o->maxbytes / sizeof(float);
    size_t bytes = b->max_count * sizeof(float);
    if (!(b->dbuf = device_alloc(&b->dev, bytes, MEM_COMM))) return RS_ERR_RUNTIME;
    b->hin = b->dev.ops->host_alloc(&b->dev, bytes);
    b->hout = b->dev.ops->host_alloc(&b->dev, bytes);
    b->times = calloc((size_t)o->iters, sizeof *b->times);
    if (!b->hin || !b->hout || !b->times) return rs_error(RS_ERR_RUNTIME, "bench: out of host memory for %zu bytes", bytes);
    mem_account(MEM_COMM, 2 * (long long)bytes);
    /* integers are exact up to 2^24 in fp32, 2048 in fp16, 256 in bf16: keep N x max within it */
    CodecType wire = CODEC_F32;
    codec_parse(b->cfg.wire, &wire);
    int limit = wire == CODEC_BF16 ? 256 : 2048;
    b->input_max = limit / b->world < 8 ? limit / b->world : 8;
    if (b->input_max < 1) b->input_max = 1;
    for (size_t i = 0; i < b->max_count; i++) b->hin[i] = bench_input(i, b->rank, o->random, b->input_max);
    for (int k = 0; k < BENCH_PERIOD; k++) {
        float s = 0;
        for (int r = 0; r < b->world; r++) s += bench_input((size_t)k, r, 0, b->input_max);
        b->expect[k] = s;
    }

    RS_TRY(zctx_open(&b->zctx, &b->cfg, &b->env));
    SyncJob job = {.cfg = &b->cfg, .dev = &b->dev, .rank = b->rank, .world = b->world,
                   .local_rank = b->env.local_rank, .local_world = b->env.local_world,
                   .zctx = b->zctx, .addr = b->env.bind, .token = b->env.token, .buckets = NULL, .nbuckets = 0,
                   .max_count = b->max_count,
                   .timeout = o->timeout, .trace = NULL};
    char canon[8192];
    bench_canonical(b, canon, sizeof canon);
    int rc = sync_start(b->sync, &job, &b->env, canon, NULL, &b->sync_state, &b->ctrl, NULL);
    link_share_release(); /* every member has joined: the node's NIC is mapped by all */
    RS_TRY(rc);
    static const float zeros[256]; /* the barrier sums zeros, so its floats stay zero after the first fill */
    b->data_barrier = b->shape.row->line_up && b->world > 1 && b->world <= (int)(sizeof zeros / sizeof(float));
    if (b->data_barrier) {
        if (!(b->barrier_buf = device_alloc(&b->dev, (size_t)b->world * sizeof(float), MEM_COMM))) return RS_ERR_RUNTIME;
        RS_TRY(device_h2d(&b->dev, b->barrier_buf, zeros, (size_t)b->world * sizeof(float)));
        RS_TRY(bench_line_up(b));
    }
    return RS_OK;
}

static void bench_free(Bench *b) {
    if (b->sync && b->sync_state) b->sync->destroy(b->sync_state);
    ctrl_close(b->ctrl);
    zctx_close(b->zctx);
    size_t bytes = b->max_count * sizeof(float);
    if (b->dbuf) device_free(&b->dev, b->dbuf, bytes, MEM_COMM);
    if (b->barrier_buf) device_free(&b->dev, b->barrier_buf, (size_t)b->world * sizeof(float), MEM_COMM);
    if (b->hin) b->dev.ops->host_free(&b->dev, b->hin);
    if (b->hout) b->dev.ops->host_free(&b->dev, b->hout);
    if (b->dev.ops) device_close(&b->dev);
    for (int i = 0; i < b->nrows; i++) free(b->rows[i].rank_us);
    free(b->rows);
    free(b->times);
}

/* Elements of hout[0..count) whose bits differ from the exact sum. */
static long long bench_count_wrong(const Bench *b, size_t count) {
    long long wrong = 0;
    for (size_t i = 0; i < count; i += BENCH_PERIOD) { /* a period at a time; element by element where it differs */
        size_t n = count - i < BENCH_PERIOD ? count - i : BENCH_PERIOD;
        if (!memcmp(&b->hout[i], b->expect, n * sizeof(float))) continue;
        for (size_t k = 0; k < n; k++)
            if (memcmp(&b->hout[i + k], &b->expect[k], sizeof(float))) wrong++;
    }
    return wrong;
}

/* Lines the ranks up before a timed call: a control-plane barrier (ZeroMQ through rank 0: rank 0
 * leaves it a message hop, tens of microseconds, before the others), then, for every back end
 * whose row lines up (the ring, the tree and ZeRO's collective; not the ps rows, whose server
 * threads count some of a call's messages after it), an all-reduce of N floats of its own, which
 * nobody leaves before everyone has entered and which lets everyone go within the back end's own
 * last hops (the ring's shared memory: about a microsecond), so that their times do not carry the
 * control plane's skew (the servers' do: tens of microseconds under ZeroMQ; the header line says
 * which rule a run used). That second barrier's traffic is kept out of the report's counters. */
static int bench_barrier(Bench *b) {
    if (b->ctrl) RS_TRY(ctrl_barrier_workers(b->ctrl)); /* dedicated servers take no part */
    if (!b->data_barrier) return RS_OK;
    b->barriers++;
    return b->sync->allreduce(b->sync_state, b->barrier_buf, (size_t)b->world);
}

/* One size: warm-up and timed iterations (under --barrier each the input refilled before each,
 * then every rank lines up at bench_barrier; under none only before the first, the others back
 * to back on the growing sums; only the all-reduce is timed). Every timed call is checked, or under
 * none the first call. Fills *median_us and *wrong. */
static int bench_size(Bench *b, size_t count, double *median_us, long long *wrong) {
    const BenchOpts *o = &b->o;
    size_t bytes = count * sizeof(float);
    *wrong = 0;
    for (int it = 0; it < o->warmup + o->iters; it++) {
        if (!o->back_to_back || it == 0) {
            RS_TRY(device_h2d(&b->dev, b->dbuf, b->hin, bytes));
            RS_TRY(bench_barrier(b));
        }
        double t0 = clock_now();
        RS_TRY(b->sync->allreduce(b->sync_state, b->dbuf, count));
        double t1 = clock_now();
        if (it >= o->warmup) b->times[it - o->warmup] = t1 - t0;
        if (o->back_to_back ? it != 0 : it < o->warmup) continue; /* not a checked call */
        if (o->check || o->random) RS_TRY(device_d2h(&b->dev, b->hout, b->dbuf, bytes));
        if (o->random) b->hash = bench_hash(b->hout, count); /* compared across ranks in bench_collect */
        else if (o->check) *wrong += bench_count_wrong(b, count);
    }
    *median_us = bench_median(b->times, o->iters) * 1e6;
    return RS_OK;
}

/* Rank 0 collects every rank's "median wrong" for the row (control plane; one rank: local). */
static int bench_collect(Bench *b, BenchRow *row, double median_us, long long wrong) {
    row->rank_us = calloc((size_t)b->world, sizeof *row->rank_us);
    if (!row->rank_us) return rs_error(RS_ERR_RUNTIME, "bench: out of memory");
    row->rank_us[0] = median_us;
    row->wrong = wrong;
    if (!b->ctrl) return RS_OK;
    char mine[128], **all = NULL;
    snprintf(mine, sizeof mine, "%.17g %lld %llx", median_us, wrong, b->hash);
    RS_TRY(ctrl_gather_workers(b->ctrl, mine, &all));
    if (!all) return RS_OK;
    int rc = RS_OK;
    row->wrong = 0;
    unsigned long long h0 = 0;
    for (int r = 0; r < b->world; r++) {
        double us;
        long long w;
        unsigned long long h;
        if (!all[r] || sscanf(all[r], "%lf %lld %llx", &us, &w, &h) != 3) {
            rc = rs_error(RS_ERR_PEER, "bench: rank %d sent an unreadable result", r);
            break;
        }
        row->rank_us[r] = us;
        if (r == 0) h0 = h;
        row->wrong += b->o.random ? h != h0 : w; /* random: ranks whose bits differ from rank 0's */
    }
    ctrl_free_texts(all, ctrl_members(b->ctrl));
    return rc;
}

static void bench_print_header(Bench *b) {
    const BenchOpts *o = &b->o;
    char dev[32];
    printf("# ringside bench: all-reduce (sum of float, in place)\n");
    SyncTraffic tr = {0};
    b->sync->traffic(b->sync_state, &tr);
    printf("# sync %s, %d rank%s, device %s (rank 0), transport %s (rank 0's link) on the %s message layer, timeout %g s\n",
           o->sync, b->world, b->world > 1 ? "s" : "", device_name(&b->dev, dev, sizeof dev),
           tr.transport && tr.transport[0] ? tr.transport : "none", b->cfg.msg_layer, o->timeout);
    if (link_get()->bytes_per_s > 0)
        printf("# emulated link --link %s: %.4g GB/s each way, %.3g us per message (every process)\n", link_get()->text,
               link_get()->bytes_per_s / 1e9, link_get()->latency_s * 1e6);
    printf("# sizes %zu B to %zu B, factor %d; %d warm-up and %d timed iterations per size; check %s\n", o->minbytes,
           o->maxbytes, o->factor, o->warmup, o->iters,
           !o->check ? "off" : o->back_to_back ? "on (each size's first call)" : "on (every timed iteration)");
    Arch arch = b->shape.arch;
    if (arch == ARCH_PS_DEDICATED)
        printf("# ps placement dedicated: %d server process%s of %s own, keys by range\n", b->cfg.ps_servers,
               b->cfg.ps_servers == 1 ? "" : "es", b->cfg.ps_servers == 1 ? "its" : "their");
    else if (arch == ARCH_PS_COLOCATED || arch == ARCH_PS_SHARDED)
        printf("# ps placement %s: %s\n", b->cfg.ps_placement,
               arch == ARCH_PS_SHARDED ? "a server in every rank, 1/N of every slice's keys each"
                                                       : "one server, a thread of rank 0");
    if (arch == ARCH_BYTEPS)
        printf("# byteps: a summation shard in every rank and %d CPU server process%s (--ps-servers)\n",
               b->cfg.ps_servers, b->cfg.ps_servers == 1 ? "" : "es");
    if (arch == ARCH_BYTEPS_HIER)
        printf("# byteps --hierarchical: each node's ranks reduce to its first, which pushes as one of %d workers to a "
               "summation shard in every node's first rank and %d CPU server process%s, then sends the result to its "
               "node\n", b->cfg.nodes, b->cfg.ps_servers, b->cfg.ps_servers == 1 ? "" : "es");
    size_t pk = config_partition_keys(&b->cfg);
    if (arch_is_server(arch) && pk)
        printf("# the all-reduce travels in partitions of %zu keys (--ps-partition-kb %s), each wholly on one server, "
               "striped over all of them, each summed and answered as it lands\n", pk, b->cfg.ps_partition);
    else if (arch_is_server(arch))
        printf("# the all-reduce travels in slices of at most %g MiB (--bucket-mb), each summed and answered as it lands\n",
               o->bucket_mb);
    printf("# time: the median of each rank's timed iterations, then the maximum over ranks (nccl-tests: the mean)\n");
    printf("# before each %s: the input refilled and a control-plane barrier%s%s; ranks %s\n",
           o->back_to_back ? "size's first call" : "call",
           b->data_barrier ? ", then an all-reduce of N floats of the back end's own (its traffic not counted)" : "",
           o->back_to_back ? "; then the calls back to back (--barrier none), the first one checked" : "",
           o->bind ? "bound to one CPU each (--bind core)" : "not bound (--bind none)");
    if (o->random)
        printf("# algbw = size / time; busbw = algbw * 2(N-1)/N; #wrong: ranks whose result's bits differ from rank 0's "
               "(random inputs)\n");
    else
        printf("# algbw = size / time; busbw = algbw * 2(N-1)/N; #wrong: elements not bitwise equal to the exact sum\n");
    if (strcmp(b->cfg.wire, "fp32"))
        printf("# wire: %s, 2 bytes per element on the wire, summed in fp32; size and busbw count the fp32 buffer; exact "
               "inputs in [-%d, %d]\n", b->cfg.wire, b->input_max, b->input_max);
    printf("#\n");
    printf("# %12s %12s %6s %11s %12s %12s %8s\n", "size(B)", "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
           "#wrong");
    fflush(stdout);
}

static void bench_print_row(const BenchRow *r, int checked) {
    char wrong[32];
    if (checked) snprintf(wrong, sizeof wrong, "%lld", r->wrong);
    else snprintf(wrong, sizeof wrong, "N/A");
    printf("  %12zu %12zu %6s %11.2f %12.4f %12.4f %8s\n", r->bytes, r->count, "float", r->time_us, r->algbw, r->busbw,
           wrong);
    fflush(stdout);
}

/* The sweep's sizes: min, min*f, ... while <= max. Returns the count; *out malloc'd. */
static int bench_sizes(const BenchOpts *o, size_t **out) {
    int n = 0;
    size_t *v = NULL;
    for (size_t s = o->minbytes;;) {
        size_t *nv = realloc(v, (size_t)(n + 1) * sizeof *v);
        if (!nv) {
            free(v);
            return -1;
        }
        v = nv;
        v[n++] = s;
        if (s > o->maxbytes / (size_t)o->factor) break;
        s *= (size_t)o->factor;
    }
    *out = v;
    return n;
}

/* The sweep over sizes; rank 0 prints each row as it completes. */
static int bench_sweep(Bench *b) {
    const BenchOpts *o = &b->o;
    size_t *sizes;
    int n = bench_sizes(o, &sizes);
    if (n < 0 || !(b->rows = calloc((size_t)n, sizeof *b->rows))) {
        if (n >= 0) free(sizes);
        return rs_error(RS_ERR_RUNTIME, "bench: out of memory");
    }
    if (b->rank == 0) bench_print_header(b);
    int rc = RS_OK;
    for (int k = 0; k < n && rc == RS_OK; k++) {
        BenchRow *row = &b->rows[b->nrows++];
        row->bytes = sizes[k];
        row->count = sizes[k] / sizeof(float);
        double med;
        long long wrong;
        if ((rc = bench_size(b, row->count, &med, &wrong)) != RS_OK) break;
        b->wrong_here += wrong;
        if ((rc = bench_collect(b, row, med, wrong)) != RS_OK) break;
        if (b->rank == 0) {
            double t = 0;
            for (int r = 0; r < b->world; r++)
                if (row->rank_us[r] > t) t = row->rank_us[r];
            row->time_us = t;
            row->algbw = t > 0 ? (double)row->bytes / (t * 1e-6) / 1e9 : 0;
            row->busbw = row->algbw * bench_bus_factor(b->world);
            if (!o->check && !o->random) row->wrong = -1;
            bench_print_row(row, o->check || o->random);
        }
    }
    free(sizes);
    return rc;
}

/* ---- the report ----------------------------------------------------------------------------- */

/* Every rank's traffic entry from its gathered text ("SENT RECV MSENT MRECV DROPPED TRANSPORT",
 * "-" for no transport), and the slowest transport among them (*slowest, a static string). */
static cJSON *bench_traffic_json(const Bench *b, char **all, const char *mine, const char **slowest) {
    cJSON *traffic = cJSON_CreateArray();
    *slowest = "";
    for (int r = 0; r < b->world; r++) {
        unsigned long long v[5] = {0};
        char how[16] = "-";
        const char *t = all ? all[r] : mine;
        if (t) sscanf(t, "%llu %llu %llu %llu %llu %15s", &v[0], &v[1], &v[2], &v[3], &v[4], how);
        if (!strcmp(how, "-")) how[0] = 0;
        *slowest = sync_transport_slower(*slowest, how);
        /* the entry every report's traffic has (engine/report.h), with its rank first */
        SyncTraffic tr = {.bytes_sent = v[0], .bytes_received = v[1], .messages_sent = v[2],
                          .messages_received = v[3], .dropped = v[4],
                          .transport = sync_transport_slower(how, ""), /* a static string: this rank's link */
                          .derived = !strcmp(how, "nccl")};
        cJSON *e = cJSON_CreateObject(), *entry = report_traffic_json(&tr), *f;
        cJSON_AddNumberToObject(e, "rank", r);
        while ((f = entry->child)) cJSON_AddItemToObject(e, f->string, cJSON_DetachItemViaPointer(entry, f));
        cJSON_Delete(entry);
        cJSON_AddItemToArray(traffic, e);
    }
    /* dedicated servers and byteps's CPU servers: their report entries' traffic, with "server" */
    for (int i = b->world; all && b->ctrl && i < ctrl_members(b->ctrl); i++) {
        cJSON *entry = all[i] ? cJSON_Parse(all[i]) : NULL, *t = cJSON_GetObjectItemCaseSensitive(entry, "traffic");
        if (cJSON_IsObject(t)) {
            cJSON *e = cJSON_CreateObject(), *f;
            cJSON_AddNumberToObject(e, "server", i - b->world);
            while ((f = t->child)) cJSON_AddItemToObject(e, f->string, cJSON_DetachItemViaPointer(t, f));
            cJSON_AddItemToArray(traffic, e);
        }
        cJSON_Delete(entry);
    }
    return traffic;
}

/* Rank 0: gathers every rank's traffic; writes the JSON report when asked. Others: sends. */
static int bench_finish(Bench *b) {
    const BenchOpts *o = &b->o;
    SyncTraffic tr = {0};
    b->sync->traffic(b->sync_state, &tr);
    sync_traffic_sub(&tr, &b->barrier_traffic, b->barriers); /* the collectives measured, not the barriers */
    char mine[256], **all = NULL;
    snprintf(mine, sizeof mine, "%llu %llu %llu %llu %llu %s", tr.bytes_sent, tr.bytes_received, tr.messages_sent,
             tr.messages_received, tr.dropped, tr.transport && tr.transport[0] ? tr.transport : "-");
    if (b->ctrl) RS_TRY(ctrl_gather(b->ctrl, mine, &all));
    if (b->rank != 0) return RS_OK;

    double avg = 0;
    long long wrong = 0;
    for (int i = 0; i < b->nrows; i++) {
        avg += b->rows[i].busbw;
        wrong += b->rows[i].wrong > 0 ? b->rows[i].wrong : 0;
    }
    avg = b->nrows ? avg / b->nrows : 0;
    if (o->random) printf("# ranks with other bits than rank 0's : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    else if (o->check) printf("# wrong elements : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth : %.4f\n", avg);
    fflush(stdout);
    int rc = RS_OK;
    if (o->report[0]) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "schema", BENCH_SCHEMA);
        cJSON_AddItemToObject(root, "run", report_run_json((double)time(NULL), b->cmdline, 0));
        cJSON_AddItemToObject(root, "env", backend_env_json());
        cJSON *cfg = cJSON_AddObjectToObject(root, "config");
        char dev[32];
        cJSON_AddStringToObject(cfg, "collective", "allreduce");
        cJSON_AddStringToObject(cfg, "op", "sum");
        cJSON_AddStringToObject(cfg, "type", "float");
        cJSON_AddStringToObject(cfg, "wire", b->cfg.wire);
        cJSON_AddStringToObject(cfg, "sync", o->sync);
        cJSON_AddNumberToObject(cfg, "ranks", b->world);
        const char *slowest;
        cJSON *traffic = bench_traffic_json(b, all, mine, &slowest);
        cJSON_AddStringToObject(cfg, "transport", slowest);
        cJSON_AddStringToObject(cfg, "msg_layer", b->cfg.msg_layer);
        cJSON_AddStringToObject(cfg, "device", device_name(&b->dev, dev, sizeof dev));
        cJSON_AddNumberToObject(cfg, "min_bytes", (double)o->minbytes);
        cJSON_AddNumberToObject(cfg, "max_bytes", (double)o->maxbytes);
        cJSON_AddNumberToObject(cfg, "step_factor", o->factor);
        cJSON_AddNumberToObject(cfg, "bucket_mb", o->bucket_mb);
        Arch arch = b->shape.arch;
        if (arch_is_server(arch)) { /* the partition keys, 0: --bucket-mb slices */
            cJSON_AddStringToObject(cfg, "ps_partition_kb", b->cfg.ps_partition);
            cJSON_AddNumberToObject(cfg, "ps_partition_keys", (double)config_partition_keys(&b->cfg));
        }
        if (arch_is_server(arch) && !arch_is_byteps(arch)) cJSON_AddStringToObject(cfg, "ps_placement", b->cfg.ps_placement);
        if (arch_is_byteps(arch) || arch == ARCH_PS_DEDICATED)
            cJSON_AddNumberToObject(cfg, "ps_servers", b->cfg.ps_servers);
        if (arch_is_zero(arch)) cJSON_AddNumberToObject(cfg, "zero_stage", b->cfg.zero_stage);
        cJSON_AddNumberToObject(cfg, "warmup_iters", o->warmup);
        cJSON_AddNumberToObject(cfg, "iters", o->iters);
        cJSON_AddStringToObject(cfg, "barrier", o->back_to_back ? "none" : "each");
        cJSON_AddBoolToObject(cfg, "check", o->check);
        cJSON_AddStringToObject(cfg, "inputs", o->random ? "random" : "exact");
        cJSON_AddNumberToObject(cfg, "timeout_s", o->timeout);
        cJSON_AddItemToObject(cfg, "link", report_link_json());
        cJSON_AddNumberToObject(cfg, "nodes", b->cfg.nodes); /* 0: every rank a machine of its own */
        cJSON_AddBoolToObject(cfg, "hierarchical", b->cfg.hierarchical);
        cJSON_AddStringToObject(cfg, "time", "median of each rank's timed iterations, maximum over ranks");
        cJSON_AddStringToObject(cfg, "busbw", "algbw * 2(N-1)/N");
        cJSON_AddItemToObject(root, "backend", backend_json(&b->cfg));
        cJSON *rows = cJSON_AddArrayToObject(root, "rows");
        for (int i = 0; i < b->nrows; i++) {
            BenchRow *r = &b->rows[i];
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "size_bytes", (double)r->bytes);
            cJSON_AddNumberToObject(j, "count", (double)r->count);
            cJSON_AddNumberToObject(j, "time_us", r->time_us);
            cJSON_AddNumberToObject(j, "algbw_gbps", r->algbw);
            cJSON_AddNumberToObject(j, "busbw_gbps", r->busbw);
            if (o->check) cJSON_AddNumberToObject(j, "wrong", (double)r->wrong);
            else cJSON_AddNullToObject(j, "wrong");
            cJSON_AddItemToObject(j, "rank_time_us", cJSON_CreateDoubleArray(r->rank_us, b->world));
            cJSON_AddItemToArray(rows, j);
        }
        cJSON *summary = cJSON_AddObjectToObject(root, "summary");
        cJSON_AddNumberToObject(summary, "avg_busbw_gbps", avg);
        cJSON_AddNumberToObject(summary, "wrong", o->check || o->random ? (double)wrong : -1);
        cJSON_AddItemToObject(summary, "traffic", traffic);
        rc = report_write_atomic(o->report, root);
        cJSON_Delete(root);
        if (rc == RS_OK) printf("# report: %s\n", o->report);
    }
    if (b->ctrl) ctrl_free_texts(all, ctrl_members(b->ctrl));
    if (rc == RS_OK && wrong && o->random)
        rc = rs_error(RS_ERR_WRONG, "bench: ranks hold different bits after the all-reduce (%lld rank-size%s differ from "
                                    "rank 0's): the sum's order depends on the rank", wrong, wrong == 1 ? "" : "s");
    else if (rc == RS_OK && wrong)
        rc = rs_error(RS_ERR_WRONG, "bench: %lld element%s not equal to the exact sum (all ranks)", wrong, wrong == 1 ? "" : "s");
    return rc;
}

/* ---- entry ------------------------------------------------------------------------------------ */

/* The launcher's side of `bench -n N`: validates what it can once, then starts the ranks. */
static int bench_launch(const BenchOpts *o, int argc, char **argv) {
    int rc = o->report[0] ? report_check_writable(o->report) : RS_OK;
    Config c; /* every option against the others, before any rank starts */
    if (rc == RS_OK) rc = bench_fill(o, o->nranks, &c);
    if (rc != RS_OK) {
        log_error("%s", rs_errmsg());
        return rc;
    }
    return launch_command("bench", o->nranks, o->servers, o->nodes, argc, argv);
}

int bench_main(int argc, char **argv) {
    Bench *b = calloc(1, sizeof *b);
    if (!b) return rs_error(RS_ERR_RUNTIME, "out of memory");
    int help = 0, rc = bench_parse(&b->o, argc, argv, &help);
    if (help) {
        bench_usage(stdout);
        free(b);
        return RS_OK;
    }
    if (rc != RS_OK) {
        log_error("%s (ringside bench --help lists the options)", rs_errmsg());
        free(b);
        return rc;
    }
    if ((rc = rankenv_detect(&b->env)) != RS_OK) {
        log_error("%s", rs_errmsg());
        free(b);
        return rc;
    }
    if (!b->env.launched && (b->o.nranks > 1 || b->o.servers > 0)) { /* one worker and its servers launch too */
        rc = bench_launch(&b->o, argc, argv);
        free(b);
        return rc;
    }
    b->rank = b->env.member;
    b->world = b->env.world;
    if (b->env.launched) log_set_rank(b->rank);
    size_t k = (size_t)snprintf(b->cmdline, sizeof b->cmdline, "ringside bench");
    for (int i = 0; i < argc && k < sizeof b->cmdline; i++)
        k += (size_t)snprintf(b->cmdline + k, sizeof b->cmdline - k, " %s", argv[i]);
    if (b->env.servers > 0 && b->env.servers != b->o.servers) /* workers and server processes alike */
        rc = rs_error(RS_ERR_INPUT, "bench: the launcher started %d server processes, the options ask for %d",
                      b->env.servers, b->o.servers);
    if (b->rank >= b->world) { /* a server process of --ps-placement dedicated or byteps's k */
        if (rc == RS_OK) rc = bench_config(b);
        char canon[8192];
        if (rc == RS_OK) bench_canonical(b, canon, sizeof canon);
        BackendShape sh;
        if (rc == RS_OK && (rc = backend_shape(&b->cfg, &sh)) == RS_OK && !sh.server_main)
            rc = rs_error(RS_ERR_INPUT, "bench: member %d of %d workers, but --sync %s starts no server processes",
                          b->rank, b->world, b->o.sync);
        if (rc == RS_OK) rc = sh.server_main(&b->cfg, &b->env, 0, canon); /* logs its own failure */
        else log_error("%s", rs_errmsg());
        free(b);
        return rc;
    }
    if (rc == RS_OK && b->env.launched && b->o.nranks_given && b->o.nranks != b->world)
        rc = rs_error(RS_ERR_INPUT, "bench: -n %d, but the launcher started %d ranks", b->o.nranks, b->world);
    if (rc == RS_OK && b->rank == 0 && b->o.report[0]) rc = report_check_writable(b->o.report);
    if (rc == RS_OK) rc = bench_setup(b);
    if (rc == RS_OK) rc = bench_sweep(b);
    if (rc == RS_OK && b->sync->close) rc = b->sync->close(b->sync_state);
    if (rc == RS_OK) rc = bench_finish(b);
    if (rc == RS_OK && b->wrong_here)
        rc = rs_error(RS_ERR_WRONG, "bench: %lld element%s not equal to the exact sum on this rank", b->wrong_here,
                      b->wrong_here == 1 ? "" : "s");
    if (rc != RS_OK) log_error("%s", rs_errmsg());
    bench_free(b);
    free(b);
    return rc;
}
