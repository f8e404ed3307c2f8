/* forecast.c - `ringside predict`: the alpha-beta models of every architecture (experiments/predict.h) at N ranks past this machine, who wins where, and where that was measured */
#include "forecast.h"
#include "backends.h"
#include "claims_load.h"
#include "predict.h"
#include "../base/atomicfile.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../engine/report.h"
#include "../net/link.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FC_MAX_N 64       /* --ranks values */
#define FC_SIZES 9        /* the map's gradient sizes: the model's x 4^-4 .. 4^4 */
#define MiB 1048576.0

/* ---- Types ---- */

/* An architecture the forecast prices. */
typedef struct {
    Arch arch;
    int serves; /* runs --servers k server processes beside the workers */
    int machines; /* a machine-aware form: priced only with --per-node G > 1 */
} FcArch;

static const FcArch fc_archs[] = {
    {ARCH_RING, 0, 0},
    {ARCH_TREE, 0, 0},
    {ARCH_PS_COLOCATED, 0, 0},
    {ARCH_PS_SHARDED, 0, 0},
    {ARCH_PS_DEDICATED, 1, 0},
    {ARCH_BYTEPS, 1, 0},
    {ARCH_ZERO3, 0, 0}, /* ZeRO-1 and -2 move the ring's messages: their rows would be the ring's */
    {ARCH_RING_HIER, 0, 1},
    {ARCH_TREE_HIER, 0, 1},
    {ARCH_BYTEPS_HIER, 1, 1},
};
#define FC_NARCH (int)(sizeof fc_archs / sizeof fc_archs[0])

typedef struct {
    double alpha, beta;           /* the link: s per message, s per byte */
    char link_source[400];        /* where they came from */
    int measured_lo, measured_hi; /* the fit's bench reports' N (0: not measured here) */
    double bytes_lo, bytes_hi;    /* and their message sizes */
    double grad_bytes;            /* the fp32 gradient */
    double compute_s;             /* a step's compute (data, forward, backward, optimizer) */
    char model_source[400];
    int ranks[FC_MAX_N], nranks;
    int servers;                  /* k for dedicated and byteps; 0: k = N */
    double bucket_mb;             /* DDP's buckets (0: one) */
    CodecType wire;
    int pipelined;                /* the servers' partitions pipeline push and pull */
    int serial;                   /* a process pays alpha for every message it handles, one after another */
    int per_node;                 /* --per-node G: machines of G ranks behind one NIC each (1: every rank a machine) */
    double fabric_alpha, fabric_beta; /* --intra-link: the fabric inside a machine (0, 0: unpaced) */
    char fabric_source[96];
    const char *check;            /* --check DIR: bench reports to hold the models against */
    const char *report, *csv;
    int quiet;
} FcOpts;

/* ---- options ------------------------------------------------------------------------------------ */

static void fc_usage(FILE *f) {
    fprintf(f,
            "usage: ringside predict LINK MODEL [options]\n\n"
            "Every architecture's communication and step time per step at N ranks, from the alpha-beta\n"
            "models (experiments/predict.h) and a link measured here, with who wins at each N and\n"
            "gradient size and where the forecast was measured.\n\n"
            "LINK, one of:\n"
            "  --links FILE       a `ringside fit --report` file; --transport T picks its link\n"
            "  --transport T      the fit's link to use: tcp, ipc, shm, ... (needed when it has several)\n"
            "  --link BW[,LAT]    a link of BW each way and LAT per message (plus %.0f us of software)\n"
            "  --software S|FIT.json  with --link: the software's cost a message in place of that default, a\n"
            "                     time (74us) or the alpha `ringside fit` measured on this machine (--transport\n"
            "                     picks the fit's link)\n"
            "  --alpha S --beta S_PER_BYTE   the link's coefficients themselves\n"
            "MODEL, one of:\n"
            "  --model REPORT     a `ringside train` report: its gradient (memory.by_tag.params) and\n"
            "                     rank 0's compute per step (time_s.busy)\n"
            "  --grad-bytes SIZE  the fp32 gradient (K, M, G suffixes), with --compute-ms MS (default 0)\n"
            "options:\n"
            "  --ranks LIST       N values: 2,4,8 or ranges A..B (A, the powers of two between, B);\n"
            "                     2..%d (default 2..1024)\n"
            "  --servers K|n      server processes of dedicated and byteps (default n: k = N)\n"
            "  --bucket-mb MB     DDP's gradient buckets (default 25; 0: one bucket)\n"
            "  --wire W           fp32 | bf16 | fp16 | fp8e4m3 | fp8e5m2: the gradient on the wire (default fp32;\n"
            "                     FP8: the ps family's parameter replies in bf16)\n"
            "  --pipelined        the servers answer partitions as they land (BytePS's; default off)\n"
            "  --per-node G       machines of G ranks (GPUs) behind one NIC each (the link is the NIC):\n"
            "                     every N a multiple of G with 2 or more machines; adds the machine-aware\n"
            "                     forms (ring-, tree-, byteps-hierarchical; byteps's k = machines by default)\n"
            "  --intra-link BW[,LAT]  with --per-node: the fabric inside a machine (default unpaced: a\n"
            "                     message there costs the software's %.0f us, its bytes nothing)\n"
            "  --check DIR        bench reports (ringside bench --report, under --link, --nodes where they\n"
            "                     had them) to hold the models against: the geometric mean of each size's\n"
            "                     |model - measured| / measured, per N and architecture, printed after the\n"
            "                     forecast and written to --report\n"
            "  --serial           every message a process handles costs alpha, one after another (the\n"
            "                     models count a round of messages sent at once as one alpha: at large N\n"
            "                     a server's or a shard's N messages are where that stops holding)\n"
            "  --report FILE      also write the forecast as JSON (%s)\n"
            "  --csv FILE         and as CSV, one row per N and architecture\n"
            "  -q, --quiet        print nothing but errors\n",
            PREDICT_EMULATED_ALPHA_S * 1e6, FORECAST_MAX_RANKS, PREDICT_NODE_ALPHA_S * 1e6, FORECAST_SCHEMA);
}

static int fc_size(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0)) return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024; end++; break;
    case 'M': mul = MiB; end++; break;
    case 'G': mul = 1024 * MiB; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end) return -1;
    *out = v * mul;
    return 0;
}

static int fc_int(const char *s, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

/* One N of --ranks, checked. */
static int fc_add_rank(FcOpts *o, long n, const char *text) {
    if (n < 2 || n > FORECAST_MAX_RANKS)
        return rs_error(RS_ERR_INPUT, "predict: --ranks %s: %ld ranks is outside 2..%d", text, n, FORECAST_MAX_RANKS);
    for (int i = 0; i < o->nranks; i++)
        if (o->ranks[i] == n) return RS_OK;
    if (o->nranks == FC_MAX_N) return rs_error(RS_ERR_INPUT, "predict: --ranks %s: more than %d values", text, FC_MAX_N);
    int i = o->nranks++;
    while (i > 0 && o->ranks[i - 1] > n) o->ranks[i] = o->ranks[i - 1], i--;
    o->ranks[i] = (int)n;
    return RS_OK;
}

/* --ranks: "2,4,8", "2..1024" (2, 4, ..., 512, 1024), or both. */
static int fc_parse_ranks(FcOpts *o, const char *text) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    o->nranks = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *dots = strstr(tok, "..");
        long a, b;
        if (!dots) {
            if (fc_int(tok, &a)) return rs_error(RS_ERR_INPUT, "predict: --ranks %s: '%s' is not a number", text, tok);
            RS_TRY(fc_add_rank(o, a, text));
            continue;
        }
        *dots = 0;
        if (fc_int(tok, &a) || fc_int(dots + 2, &b) || b < a)
            return rs_error(RS_ERR_INPUT, "predict: --ranks %s: a range is A..B with A <= B", text);
        RS_TRY(fc_add_rank(o, a, text));
        for (long p = 1; p < b && p <= FORECAST_MAX_RANKS; p *= 2)
            if (p > a) RS_TRY(fc_add_rank(o, p, text));
        RS_TRY(fc_add_rank(o, b, text));
    }
    if (!o->nranks) return rs_error(RS_ERR_INPUT, "predict: --ranks '%s': no ranks", text);
    return RS_OK;
}

static const char *fc_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double fc_num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The link of a fit file: the one of transport (NULL: the file's only one), without an emulated link. */
static int fc_load_fit(FcOpts *o, const char *path, const char *transport) {
    cJSON *j = report_read(path);
    if (!j) return RS_ERR_INPUT;
    const char *schema = fc_str(j, "schema");
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(j, "links"), *l, *pick = NULL;
    int rc = RS_OK, n = 0;
    char have[256] = "";
    if (!schema || strcmp(schema, "ringside.fit/1") || !cJSON_IsObject(links)) {
        rc = rs_error(RS_ERR_INPUT, "predict: %s: not a fit file (ringside fit BENCH.json --report FILE writes one)", path);
        goto out;
    }
    cJSON_ArrayForEach(l, links) {
        const char *t = fc_str(l, "transport"), *e = fc_str(l, "link");
        size_t k = strlen(have);
        snprintf(have + k, sizeof have - k, "%s%s", k ? ", " : "", l->string);
        if (e && *e) continue; /* an emulated link's fit prices that link, not this machine's */
        n++;
        if (!transport ? n == 1 : t && !strcmp(t, transport)) pick = pick ? pick : l;
    }
    if (!transport && n > 1) {
        rc = rs_error(RS_ERR_INPUT, "predict: %s has links for several transports (%s): say which with --transport", path, have);
        goto out;
    }
    if (!pick) {
        rc = rs_error(RS_ERR_INPUT, "predict: %s has no link%s%s (it has: %s)", path, transport ? " for transport " : "",
                      transport ? transport : "", have[0] ? have : "none");
        goto out;
    }
    o->alpha = fc_num(pick, "alpha_s");
    o->beta = fc_num(pick, "beta_s_per_byte");
    if (!(o->alpha >= 0) || !(o->beta > 0)) {
        rc = rs_error(RS_ERR_INPUT, "predict: %s: link %s has no alpha_s >= 0 and beta_s_per_byte > 0", path, pick->string);
        goto out;
    }
    double lo = fc_num(pick, "min_ranks"), hi = fc_num(pick, "max_ranks");
    /* fits before they recorded N say nothing of it; a count past the forecast's ranks is no count
     * (range-checked before the cast: (int)1e300 is undefined) */
    o->measured_lo = lo >= 2 && lo <= FORECAST_MAX_RANKS ? (int)lo : 0;
    o->measured_hi = o->measured_lo && hi >= lo && hi <= FORECAST_MAX_RANKS ? (int)hi : 0;
    o->bytes_lo = fc_num(pick, "min_bytes");
    o->bytes_hi = fc_num(pick, "max_bytes");
    snprintf(o->link_source, sizeof o->link_source, "%s: link %s (fitted on bench reports%s)", path, pick->string,
             o->measured_lo ? "" : " whose ranks the file does not record");
out:
    cJSON_Delete(j);
    return rc;
}

/* --software V: the software's cost a message, a time ("74us", "0.1ms") or, when V is a file, the
 * alpha of a `ringside fit` report's link (transport picks one, as for --links) into *soft, and
 * where it came from into from. 0 or RS_ERR_INPUT. */
static int fc_software(const char *v, const char *transport, double *soft, char *from, size_t len) {
    if (access(v, F_OK) == 0) {
        FcOpts fit;
        memset(&fit, 0, sizeof fit);
        RS_TRY(fc_load_fit(&fit, v, transport));
        *soft = fit.alpha;
        snprintf(from, len, "alpha fitted in %s", v);
        return RS_OK;
    }
    char spec[96];
    LinkSpec l;
    snprintf(spec, sizeof spec, "1gbit,%.80s", v); /* the link's latency syntax */
    if (!isdigit((unsigned char)v[0]) || link_parse(spec, &l) != RS_OK)
        return rs_error(RS_ERR_INPUT, "predict: --software '%s': expected a time (74us, 0.1ms) or a `ringside fit` report", v);
    *soft = l.latency_s;
    snprintf(from, len, "--software %s", v);
    return RS_OK;
}

/* The gradient and the compute per step of a train report. */
static int fc_load_model(FcOpts *o, const char *path) {
    cJSON *j = report_read(path);
    if (!j) return RS_ERR_INPUT;
    const char *schema = fc_str(j, "schema");
    int rc = RS_OK;
    const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "ranks"), 0);
    double params = fc_num(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r0, "memory"), "by_tag"), "params");
    double busy = fc_num(cJSON_GetObjectItemCaseSensitive(r0, "time_s"), "busy");
    double world = fc_num(cJSON_GetObjectItemCaseSensitive(j, "run"), "world");
    if (!schema || strncmp(schema, "ringside.report/", 16))
        rc = rs_error(RS_ERR_INPUT, "predict: --model %s: not a train report (schema %s)", path, schema ? schema : "none");
    else if (strcmp(schema, REPORT_SCHEMA))
        rc = rs_error(RS_ERR_INPUT, "predict: --model %s: report schema %s, but this ringside reads %s", path, schema, REPORT_SCHEMA);
    else if (!(params > 0) || !(busy >= 0))
        rc = rs_error(RS_ERR_INPUT, "predict: --model %s: no ranks[0].memory.by_tag.params or time_s.busy", path);
    else {
        o->grad_bytes = params;
        o->compute_s = busy;
        const char *model = fc_str(cJSON_GetObjectItemCaseSensitive(j, "config"), "model");
        snprintf(o->model_source, sizeof o->model_source, "%s: %s, %.0f parameters, compute %.3f ms per step (rank 0's busy "
                 "time%s)", path, model ? model : "mlp", params / 4, busy * 1e3,
                 world > 1 ? " in a run of several ranks: its own batch's" : " on one rank");
    }
    cJSON_Delete(j);
    return rc;
}

static int fc_parse(FcOpts *o, int argc, char **argv, int *help) {
    memset(o, 0, sizeof *o);
    o->bucket_mb = 25;
    o->per_node = 1;
    const char *intra = NULL;
    o->alpha = o->beta = NAN;
    const char *links = NULL, *transport = NULL, *model = NULL, *link = NULL, *ranks = "2..1024", *software = NULL;
    double grad = 0, compute_ms = 0;
    int have_alpha = 0, have_beta = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return *help = 1, RS_OK;
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (!strcmp(a, "--pipelined") || !strcmp(a, "--serial")) {
            *(a[2] == 'p' ? &o->pipelined : &o->serial) = 1;
            continue;
        }
        static const char *const valued[] = {"--links", "--transport", "--link", "--alpha", "--beta", "--model",
                                             "--grad-bytes", "--compute-ms", "--ranks", "--servers", "--bucket-mb",
                                             "--wire", "--report", "--csv", "--per-node", "--intra-link", "--check", "--software", NULL};
        int known = 0;
        for (int k = 0; valued[k]; k++) known |= !strcmp(a, valued[k]);
        if (!known) return rs_error(RS_ERR_INPUT, "predict: unknown option '%s'", a);
        if (i + 1 >= argc) return rs_error(RS_ERR_INPUT, "predict: %s needs a value", a);
        const char *v = argv[++i];
        double d;
        long n;
        if (!strcmp(a, "--links")) links = v;
        else if (!strcmp(a, "--transport")) transport = v;
        else if (!strcmp(a, "--link")) link = v;
        else if (!strcmp(a, "--software")) software = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--ranks")) ranks = v;
        else if (!strcmp(a, "--report")) o->report = v;
        else if (!strcmp(a, "--csv")) o->csv = v;
        else if (!strcmp(a, "--intra-link")) intra = v;
        else if (!strcmp(a, "--check")) o->check = v;
        else if (!strcmp(a, "--per-node")) {
            if (fc_int(v, &n) || n < 1 || n > FORECAST_MAX_RANKS / 2)
                return rs_error(RS_ERR_INPUT, "predict: --per-node '%s': expected ranks a machine, 1..%d", v, FORECAST_MAX_RANKS / 2);
            o->per_node = (int)n;
        }
        else if (!strcmp(a, "--alpha") || !strcmp(a, "--beta")) {
            char *end;
            d = strtod(v, &end);
            if (end == v || *end || !(d >= 0) || (!strcmp(a, "--beta") && !(d > 0)))
                return rs_error(RS_ERR_INPUT, "predict: %s '%s': expected seconds%s", a, v, !strcmp(a, "--beta") ? " per byte, > 0" : ", >= 0");
            if (!strcmp(a, "--alpha")) o->alpha = d, have_alpha = 1;
            else o->beta = d, have_beta = 1;
        } else if (!strcmp(a, "--grad-bytes")) {
            if (fc_size(v, &grad)) return rs_error(RS_ERR_INPUT, "predict: --grad-bytes '%s': not a size (bytes, K/M/G)", v);
        } else if (!strcmp(a, "--compute-ms")) {
            char *end;
            compute_ms = strtod(v, &end);
            if (end == v || *end || !(compute_ms >= 0)) return rs_error(RS_ERR_INPUT, "predict: --compute-ms '%s': expected ms >= 0", v);
        } else if (!strcmp(a, "--servers")) {
            if (!strcmp(v, "n")) o->servers = 0;
            else if (fc_int(v, &n) || n < 1 || n > FORECAST_MAX_RANKS)
                return rs_error(RS_ERR_INPUT, "predict: --servers '%s': expected n or 1..%d", v, FORECAST_MAX_RANKS);
            else o->servers = (int)n;
        } else if (!strcmp(a, "--bucket-mb")) {
            char *end;
            o->bucket_mb = strtod(v, &end);
            if (end == v || *end || !(o->bucket_mb >= 0)) return rs_error(RS_ERR_INPUT, "predict: --bucket-mb '%s': expected MiB >= 0", v);
        } else if (!strcmp(a, "--wire")) {
            if (codec_parse(v, &o->wire))
                return rs_error(RS_ERR_INPUT, "predict: --wire '%s': expected fp32, bf16, fp16, fp8e4m3 or fp8e5m2", v);
        }
    }
    int nlinks = !!links + !!link + (have_alpha || have_beta);
    if (!nlinks)
        return rs_error(RS_ERR_INPUT, "predict: no link: give --links FIT.json (ringside fit), --link BW[,LAT], or --alpha and --beta");
    if (nlinks > 1) return rs_error(RS_ERR_INPUT, "predict: one link: --links, --link or --alpha/--beta, not several");
    if (software && !link) return rs_error(RS_ERR_INPUT, "predict: --software is the cost a message adds to --link's latency: give --link");
    if (transport && !links && !software) return rs_error(RS_ERR_INPUT, "predict: --transport picks a link of --links FILE (or of --software FILE)");
    if (!!model + (grad > 0) != 1)
        return rs_error(RS_ERR_INPUT, "predict: one model: --model REPORT.json (a train report) or --grad-bytes SIZE");
    if (model && compute_ms > 0) return rs_error(RS_ERR_INPUT, "predict: --compute-ms is --grad-bytes's (a --model report has its own)");
    RS_TRY(fc_parse_ranks(o, ranks));
    if (intra && o->per_node < 2)
        return rs_error(RS_ERR_INPUT, "predict: --intra-link %s without --per-node G > 1: a fabric joins the ranks of one machine", intra);
    if (intra) {
        LinkSpec l;
        if (link_parse(intra, &l) != RS_OK || !(l.bytes_per_s > 0))
            return rs_error(RS_ERR_INPUT, "predict: --intra-link %s: %s", intra, rs_errmsg());
        o->fabric_alpha = l.latency_s, o->fabric_beta = 1.0 / l.bytes_per_s;
        snprintf(o->fabric_source, sizeof o->fabric_source, "--intra-link %s", intra);
    } else snprintf(o->fabric_source, sizeof o->fabric_source, "unpaced");
    if (o->per_node > 1) { /* N: whole machines, two or more */
        int kept = 0;
        for (int k = 0; k < o->nranks; k++)
            if (o->ranks[k] % o->per_node == 0 && o->ranks[k] / o->per_node >= 2) o->ranks[kept++] = o->ranks[k];
            else if (!o->quiet) printf("# --per-node %d: N = %d left out (not 2 or more machines of %d)\n", o->per_node, o->ranks[k], o->per_node);
        if (!kept)
            return rs_error(RS_ERR_INPUT, "predict: --per-node %d: no N of --ranks %s is 2 or more machines of %d ranks", o->per_node,
                            ranks, o->per_node);
        o->nranks = kept;
    }
    if (links) RS_TRY(fc_load_fit(o, links, transport));
    else if (link) {
        LinkSpec l;
        if (link_parse(link, &l) != RS_OK || !(l.bytes_per_s > 0))
            return rs_error(RS_ERR_INPUT, "predict: --link %s: %s", link, rs_errmsg());
        double soft = PREDICT_EMULATED_ALPHA_S;
        char from[160] = "predict.h's";
        if (software) RS_TRY(fc_software(software, transport, &soft, from, sizeof from));
        o->alpha = l.latency_s + soft;
        o->beta = 1.0 / l.bytes_per_s;
        snprintf(o->link_source, sizeof o->link_source, "--link %s: %.4g GB/s each way, %.3g us a message (its latency + "
                 "the software's %.1f us, %s)", link, l.bytes_per_s / 1e9, o->alpha * 1e6, soft * 1e6, from);
    } else {
        if (!have_alpha || !have_beta) return rs_error(RS_ERR_INPUT, "predict: --alpha and --beta go together");
        snprintf(o->link_source, sizeof o->link_source, "--alpha %g --beta %g", o->alpha, o->beta);
    }
    if (model) RS_TRY(fc_load_model(o, model));
    else {
        o->grad_bytes = grad;
        o->compute_s = compute_ms * 1e-3;
        snprintf(o->model_source, sizeof o->model_source, "--grad-bytes %.0f, compute %.3f ms per step", grad, compute_ms);
    }
    if (o->report) RS_TRY(report_check_writable(o->report));
    if (o->csv) RS_TRY(report_check_writable(o->csv));
    if (o->report && o->csv && atomicfile_same_path(o->report, o->csv))
        return rs_error(RS_ERR_INPUT, "predict: --report and --csv name one file (%s)", o->csv);
    return RS_OK;
}

/* ---- the forecast -------------------------------------------------------------------------------- */

/* The server processes architecture a runs at n workers (0 for those without), or -1 where its
 * model does not cover it (byteps's k > n). */
static int fc_servers(const FcOpts *o, const FcArch *a, int n) {
    if (!a->serves) return 0;
    int m = a->machines ? n / o->per_node : n; /* byteps --hierarchical: one worker a machine */
    int k = o->servers ? o->servers : m;
    return arch_is_byteps(a->arch) && k > m ? -1 : k;
}

/* The machines N ranks are (0: every rank a machine of its own). */
static int fc_nodes(const FcOpts *o, int n) { return o->per_node > 1 ? n / o->per_node : 0; }

/* Whether the forecast prices architecture a: the machine-aware forms only on machines. */
static int fc_shown(const FcOpts *o, const FcArch *a) { return !a->machines || o->per_node > 1; }

/* The rounds of messages a bucket costs when the busiest process pays alpha for each message it
 * handles one after another (--serial), where the models count messages sent at once as one
 * round: a sharded worker's N-1 pushes and answers, a dedicated server's N pushes and a worker's k,
 * byteps's N-1 shards and k servers (byteps --hierarchical's: its machines' n, passed as n). The ring's and the tree's rounds are already one message each
 * way per rank (at most three at once in the tree). a_model: the model's own rounds. */
static double fc_serial_rounds(const FcArch *a, int n, int k, double a_model) {
    switch (a->arch) {
    case ARCH_PS_SHARDED: return 2.0 * (n - 1);
    case ARCH_PS_DEDICATED: return 2.0 * (n > k ? n : k);
    case ARCH_BYTEPS:
    case ARCH_BYTEPS_HIER: return 2.0 * (n - 1 + k > n ? n - 1 + k : n);
    default: return a_model;
    }
}

/* Seconds of communication per step of architecture a at n ranks for a gradient of grad fp32 bytes. */
static double fc_comm(const FcOpts *o, const FcArch *a, int n, double grad) {
    int k = fc_servers(o, a, n), pipe = o->pipelined && a->serves;
    if (k < 0) return NAN;
    double wire = arch_wire_ratio(a->arch, codec_name(o->wire));
    double g = grad * wire, bucket = o->bucket_mb * MiB * wire;
    if (!fc_shown(o, a)) return NAN;
    int m = fc_nodes(o, n);
    double t = predict_step_comm(a->arch, k, n, m, pipe, g, bucket, o->alpha, o->beta);
    if (t < 0) return NAN;
    t += predict_step_fabric(a->arch, n, m, g, bucket, o->fabric_alpha, o->fabric_beta);
    double am, bm;
    if (o->serial && predict_coeffs(a->arch, k, n, m, pipe, g, &am, &bm) == 0 && am > 0) {
        double buckets = (predict_step_comm(a->arch, k, n, m, pipe, g, bucket, 1, 0) -
                          predict_step_fabric(a->arch, n, m, g, bucket, PREDICT_NODE_ALPHA_S, 0)) / am;
        t += (fc_serial_rounds(a, a->machines ? m : n, k, am) - am) * buckets * o->alpha;
    }
    return t;
}

/* Whether the link was measured at n ranks (and so the forecast checked there by claim 6's kind). */
static int fc_measured(const FcOpts *o, int n) { return o->measured_lo && n >= o->measured_lo && n <= o->measured_hi; }

/* The cheapest architecture at n for grad (its index), the ones with servers among them. */
static int fc_winner(const FcOpts *o, int n, double grad, double *best) {
    int w = -1;
    *best = INFINITY;
    for (int i = 0; i < FC_NARCH; i++) {
        double t = fc_comm(o, &fc_archs[i], n, grad);
        if (t < *best * (1 - 1e-9)) *best = t, w = i; /* a tie stays with the first: the ring */
    }
    return w;
}

/* The smallest N of --ranks where architecture i's comm is below the ring's at grad, or 0. */
static int fc_crossing(const FcOpts *o, int i, double grad) {
    for (int k = 0; k < o->nranks; k++)
        if (fc_comm(o, &fc_archs[i], o->ranks[k], grad) < fc_comm(o, &fc_archs[0], o->ranks[k], grad) * (1 - 1e-9))
            return o->ranks[k];
    return 0;
}

static const char *const fc_assumptions[] = {
    "t = alpha A + beta B per bucket (experiments/predict.h): full-duplex links, every process's whole link bandwidth its own",
    "no contention beyond the model's: no switch oversubscription, no congestion, every message alpha",
    "messages sent at once cost one alpha between them (sharded's N-1, a server's N): --serial prices them one by one",
    "step = compute + comm: communication not overlapped with backward (the upper bound; DDP hides up to the backward)",
    "ps-colocated is the push step (DataParallel's data messages through rank 0 come on top)",
    "dedicated and byteps run their k server processes on machines of their own, each with its own link",
    "zero-1 and zero-2 move the ring's messages (their rows are the ring's); zero-3 1.5x them, cut in DDP's buckets "
    "where it gathers and reduce-scatters layer by layer",
    "the tree's alpha is charged once a round of its 2D hops a bucket, not once a pipelined chunk: right for a link's "
    "latency, which the chunks share, low for a per-message software cost, which every chunk pays (a large gradient "
    "over a fast link: the tree's row is then its lower bound)",
};
#define FC_NASSUME (int)(sizeof fc_assumptions / sizeof fc_assumptions[0])

static double fc_size_at(const FcOpts *o, int j) { return o->grad_bytes * pow(4.0, j - FC_SIZES / 2); }

static cJSON *fc_json(const FcOpts *o) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", FORECAST_SCHEMA);
    cJSON *as = cJSON_AddArrayToObject(root, "assumptions");
    for (int i = 0; i < FC_NASSUME; i++) cJSON_AddItemToArray(as, cJSON_CreateString(fc_assumptions[i]));
    cJSON *l = cJSON_AddObjectToObject(root, "link");
    cJSON_AddNumberToObject(l, "alpha_s", o->alpha);
    cJSON_AddNumberToObject(l, "beta_s_per_byte", o->beta);
    cJSON_AddStringToObject(l, "source", o->link_source);
    if (o->measured_lo) {
        cJSON *m = cJSON_AddArrayToObject(l, "measured_ranks");
        cJSON_AddItemToArray(m, cJSON_CreateNumber(o->measured_lo));
        cJSON_AddItemToArray(m, cJSON_CreateNumber(o->measured_hi));
    } else cJSON_AddNullToObject(l, "measured_ranks");
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddNumberToObject(m, "grad_bytes", o->grad_bytes);
    cJSON_AddNumberToObject(m, "compute_s", o->compute_s);
    cJSON_AddStringToObject(m, "source", o->model_source);
    cJSON *op = cJSON_AddObjectToObject(root, "options");
    if (o->servers) cJSON_AddNumberToObject(op, "servers", o->servers);
    else cJSON_AddStringToObject(op, "servers", "n");
    cJSON_AddNumberToObject(op, "bucket_mb", o->bucket_mb);
    cJSON_AddStringToObject(op, "wire", codec_name(o->wire));
    cJSON_AddBoolToObject(op, "pipelined", o->pipelined);
    cJSON_AddBoolToObject(op, "serial", o->serial);
    cJSON_AddNumberToObject(op, "per_node", o->per_node);
    cJSON_AddStringToObject(op, "intra_link", o->fabric_source);
    cJSON *rows = cJSON_AddArrayToObject(root, "rows");
    for (int k = 0; k < o->nranks; k++)
        for (int i = 0; i < FC_NARCH; i++) {
            const FcArch *a = &fc_archs[i];
            double t = fc_comm(o, a, o->ranks[k], o->grad_bytes);
            if (isnan(t)) continue;
            cJSON *r = cJSON_CreateObject();
            cJSON_AddNumberToObject(r, "ranks", o->ranks[k]);
            cJSON_AddStringToObject(r, "architecture", arch_name(a->arch));
            cJSON_AddNumberToObject(r, "servers", fc_servers(o, a, o->ranks[k]));
            cJSON_AddNumberToObject(r, "comm_s", t);
            cJSON_AddNumberToObject(r, "step_s", o->compute_s + t);
            cJSON_AddBoolToObject(r, "measured", fc_measured(o, o->ranks[k]));
            cJSON_AddItemToArray(rows, r);
        }
    cJSON *win = cJSON_AddArrayToObject(root, "winners");
    for (int j = 0; j < FC_SIZES; j++)
        for (int k = 0; k < o->nranks; k++) {
            double best, g = fc_size_at(o, j);
            int w = fc_winner(o, o->ranks[k], g, &best);
            if (w < 0) continue;
            cJSON *r = cJSON_CreateObject();
            cJSON_AddNumberToObject(r, "grad_bytes", g);
            cJSON_AddNumberToObject(r, "ranks", o->ranks[k]);
            cJSON_AddStringToObject(r, "architecture", arch_name(fc_archs[w].arch));
            cJSON_AddNumberToObject(r, "comm_s", best);
            cJSON_AddItemToArray(win, r);
        }
    cJSON *cross = cJSON_AddObjectToObject(root, "crossovers"); /* at the model's gradient: the first N each beats the ring */
    for (int i = 1; i < FC_NARCH; i++) {
        if (!fc_shown(o, &fc_archs[i])) continue;
        int n = fc_crossing(o, i, o->grad_bytes);
        if (n) cJSON_AddNumberToObject(cross, arch_name(fc_archs[i].arch), n);
        else cJSON_AddNullToObject(cross, arch_name(fc_archs[i].arch));
    }
    return root;
}

static int fc_write_csv(const FcOpts *o) {
    size_t cap = 256 + (size_t)o->nranks * FC_NARCH * 96, k = 0;
    char *buf = malloc(cap);
    if (!buf) return rs_error(RS_ERR_RUNTIME, "predict: out of memory");
    k += (size_t)snprintf(buf + k, cap - k, "ranks,architecture,servers,comm_s,step_s,measured\n");
    for (int r = 0; r < o->nranks; r++)
        for (int i = 0; i < FC_NARCH && k < cap; i++) {
            double t = fc_comm(o, &fc_archs[i], o->ranks[r], o->grad_bytes);
            if (isnan(t)) continue;
            k += (size_t)snprintf(buf + k, cap - k, "%d,%s,%d,%.9g,%.9g,%d\n", o->ranks[r], arch_name(fc_archs[i].arch),
                                  fc_servers(o, &fc_archs[i], o->ranks[r]), t, o->compute_s + t, fc_measured(o, o->ranks[r]));
        }
    int rc = atomicfile_write(o->csv, buf, k < cap ? k : cap, 0644);
    free(buf);
    return rc;
}

static void fc_print(const FcOpts *o) {
    printf("# ringside predict: communication per step (ms) of every architecture, the alpha-beta models of experiments/predict.h\n");
    printf("# link: alpha %.2f us, beta %.4f ns/B (%.3f GB/s): %s\n", o->alpha * 1e6, o->beta * 1e9, 1e-9 / o->beta, o->link_source);
    printf("# model: %.0f bytes of fp32 gradient (%s on the wire), %s buckets; %s\n", o->grad_bytes, codec_name(o->wire),
           o->bucket_mb > 0 ? "DDP's" : "one", o->model_source);
    printf("# servers: k = %s for ps-dedicated and byteps%s; messages %s\n", o->servers ? "--servers" : "N",
           o->pipelined ? ", pipelined" : "", o->serial ? "one alpha each (--serial)" : "sent at once one alpha");
    for (int i = 0; i < FC_NASSUME; i++) printf("# assumes: %s\n", fc_assumptions[i]);
    if (o->measured_lo) printf("# measured: the link at N = %d..%d (rows marked *); elsewhere the forecast extrapolates\n", o->measured_lo, o->measured_hi);
    else printf("# measured: nowhere here (a link given, or a fit without its ranks): every row extrapolates\n");
    if (o->per_node > 1)
        printf("# machines: %d ranks each behind one NIC (the link above); inside a machine: %s\n", o->per_node, o->fabric_source);
    printf("%8s", "N");
    for (int i = 0; i < FC_NARCH; i++)
        if (fc_shown(o, &fc_archs[i])) printf(" %*s", fc_archs[i].machines ? 19 : 13, arch_name(fc_archs[i].arch));
    printf("  %-13s %s\n", "fastest", "its step (ms)");
    for (int k = 0; k < o->nranks; k++) {
        int n = o->ranks[k];
        printf("%7d%s", n, fc_measured(o, n) ? "*" : " ");
        for (int i = 0; i < FC_NARCH; i++) {
            if (!fc_shown(o, &fc_archs[i])) continue;
            int w = fc_archs[i].machines ? 19 : 13;
            double t = fc_comm(o, &fc_archs[i], n, o->grad_bytes);
            if (isnan(t)) printf(" %*s", w, "-");
            else printf(" %*.4g", w, t * 1e3);
        }
        double best;
        int w = fc_winner(o, n, o->grad_bytes, &best);
        printf("  %-13s %.4g\n", w >= 0 ? arch_name(fc_archs[w].arch) : "-", (o->compute_s + best) * 1e3);
    }
    printf("# who wins (least communication) by gradient size and N:\n%12s", "bytes \\ N");
    for (int k = 0; k < o->nranks; k++) printf(" %12d", o->ranks[k]);
    printf("\n");
    for (int j = 0; j < FC_SIZES; j++) {
        double g = fc_size_at(o, j), best;
        printf("%12.4g", g);
        for (int k = 0; k < o->nranks; k++) {
            int w = fc_winner(o, o->ranks[k], g, &best);
            printf(" %12s", w >= 0 ? arch_name(fc_archs[w].arch) : "-");
        }
        printf("\n");
    }
    printf("# crossovers at the model's gradient (the first N of --ranks where each beats the ring):");
    for (int i = 1; i < FC_NARCH; i++) {
        if (!fc_shown(o, &fc_archs[i])) continue;
        int n = fc_crossing(o, i, o->grad_bytes);
        if (n) printf(" %s N=%d;", arch_name(fc_archs[i].arch), n);
        else printf(" %s never;", arch_name(fc_archs[i].arch));
    }
    printf("\n");
}

/* ---- --check: the models against bench reports --------------------------------------------- */

/* One (architecture, N, machines) of --check's table. */
typedef struct {
    Arch arch;
    int ranks, nodes, sizes;
    double log_err, worst; /* the sum of ln(error) over sizes, and the largest error */
} FcCheck;

#define FC_CHECK_MAX 256
#define FC_CHECK_FLOOR 1e-3 /* an error below 0.1% counts as 0.1%: the geometric mean of exact zeros is no mean */

/* The table's order: by architecture, then machines (flat first), then N. */
static int fc_check_cmp(const void *x, const void *y) {
    const FcCheck *a = x, *b = y;
    if (a->arch != b->arch) return (int)a->arch - (int)b->arch;
    if ((a->nodes > 0) != (b->nodes > 0)) return (a->nodes > 0) - (b->nodes > 0);
    return a->ranks - b->ranks;
}

/* Each bench configuration of dir under an emulated link, every size priced by the model on that
 * link (alpha its latency + the software's, beta 1/its rate, its nodes, the fabric unpaced): the
 * geometric mean over sizes of |model - measured| / measured. *out (malloc'd), *n rows. */
static int fc_check_load(const char *dir, FcCheck **out, int *n) {
    ClaimsSet set;
    *out = NULL, *n = 0;
    RS_TRY(claims_load(dir, &set));
    FcCheck *c = calloc(FC_CHECK_MAX, sizeof *c);
    if (!c) return claims_free(&set), rs_error(RS_ERR_RUNTIME, "predict: out of memory");
    int skipped = 0;
    for (int i = 0; i < set.nbenches; i++) {
        const ClaimsBench *b = &set.benches[i];
        if (!(b->bytes_per_s > 0)) {
            skipped++;
            continue;
        }
        int j = 0;
        while (j < *n && !(c[j].arch == b->arch && c[j].ranks == b->ranks && c[j].nodes == b->nodes)) j++;
        if (j == *n) {
            if (*n == FC_CHECK_MAX) continue;
            c[j] = (FcCheck){.arch = b->arch, .ranks = b->ranks, .nodes = b->nodes};
            (*n)++;
        }
        for (int r = 0; r < b->nrows; r++) {
            double lat, bw;
            if (claims_bench_model(b, r, &lat, &bw) != 0 || !(b->time_s[r] > 0)) continue;
            double e = fabs(lat + bw - b->time_s[r]) / b->time_s[r];
            c[j].log_err += log(e > FC_CHECK_FLOOR ? e : FC_CHECK_FLOOR);
            c[j].worst = fmax(c[j].worst, e);
            c[j].sizes++;
        }
    }
    if (skipped) printf("# --check %s: %d bench configuration%s without an emulated --link left out (the model needs its link)\n", dir,
                        skipped, skipped > 1 ? "s" : "");
    claims_free(&set);
    qsort(c, (size_t)*n, sizeof *c, fc_check_cmp);
    *out = c;
    return RS_OK;
}

static double fc_geo(const FcCheck *c) { return c->sizes ? exp(c->log_err / c->sizes) : NAN; }


static void fc_check_print(const char *dir, const FcCheck *c, int n) {
    printf("# the model against %s (bench reports, each priced on its own emulated link): the geometric mean over sizes of "
           "|model - measured| / measured (ASTRA-sim publishes 2.8-20.6%% for NCCL on real GPUs)\n", dir);
    printf("%8s %6s  %-20s %6s %10s %10s\n", "N", "nodes", "architecture", "sizes", "geomean", "worst");
    for (int i = 0; i < n; i++)
        if (c[i].sizes)
            printf("%8d %6d  %-20s %6d %9.1f%% %9.1f%%\n", c[i].ranks, c[i].nodes, arch_name(c[i].arch), c[i].sizes,
                   100 * fc_geo(&c[i]), 100 * c[i].worst);
    if (!n) printf("# (no bench report under an emulated --link in %s)\n", dir);
}

static void fc_check_json(cJSON *root, const char *dir, const FcCheck *c, int n) {
    cJSON *o = cJSON_AddObjectToObject(root, "check");
    cJSON_AddStringToObject(o, "dir", dir);
    cJSON *rows = cJSON_AddArrayToObject(o, "rows");
    for (int i = 0; i < n; i++) {
        if (!c[i].sizes) continue;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "ranks", c[i].ranks);
        cJSON_AddNumberToObject(r, "nodes", c[i].nodes);
        cJSON_AddStringToObject(r, "architecture", arch_name(c[i].arch));
        cJSON_AddNumberToObject(r, "sizes", c[i].sizes);
        cJSON_AddNumberToObject(r, "geomean_error", fc_geo(&c[i]));
        cJSON_AddNumberToObject(r, "max_error", c[i].worst);
        cJSON_AddItemToArray(rows, r);
    }
}

int forecast_main(int argc, char **argv) {
    FcOpts o;
    int help = 0, rc = fc_parse(&o, argc, argv, &help);
    if (help) {
        fc_usage(stdout);
        return RS_OK;
    }
    if (rc != RS_OK) {
        log_error("%s (ringside predict --help lists the options)", rs_errmsg());
        return RS_ERR_INPUT;
    }
    FcCheck *chk = NULL;
    int nchk = 0;
    if (o.check && (rc = fc_check_load(o.check, &chk, &nchk)) != RS_OK) {
        log_error("predict: --check: %s", rs_errmsg());
        return rc;
    }
    if (!o.quiet) fc_print(&o);
    if (!o.quiet && o.check) fc_check_print(o.check, chk, nchk);
    if (o.report) {
        cJSON *j = fc_json(&o);
        if (j && o.check) fc_check_json(j, o.check, chk, nchk);
        rc = j ? report_write_atomic(o.report, j) : rs_error(RS_ERR_RUNTIME, "predict: out of memory");
        cJSON_Delete(j);
    }
    free(chk);
    if (rc == RS_OK && o.csv) rc = fc_write_csv(&o);
    if (rc != RS_OK) {
        log_error("%s", rs_errmsg());
        if (o.report) unlink(o.report); /* nothing half written: the JSON without its CSV is no forecast */
        return rc;
    }
    return RS_OK;
}
