/* fit.c - `ringside fit`: alpha and beta per transport (and emulated link) from bench reports, with the fit's quality */
#include "fit.h"
#include "backends.h"
#include "predict.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../engine/report.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIT_BENCH_SCHEMA "ringside.bench/1"

/* One link's points: a_i, b_i the model's coefficients of alpha and beta, t_i the time. */
struct FitGroup {
    FitLink fit;
    double *a, *b, *t, *size;
    int *source;             /* index into names */
    char (*names)[256];      /* the reports, in the order added */
    int n, cap, nnames;
};

const FitLink *fit_link(const FitSet *set, int i) { return &set->groups[i].fit; }

static const char *fit_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The transport a bench report moved over: config.transport, else its first traffic entry's. */
static const char *fit_transport(const cJSON *bench) {
    const char *t = fit_str(cJSON_GetObjectItemCaseSensitive(bench, "config"), "transport");
    if (t) return t;
    const cJSON *traffic = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(bench, "summary"), "traffic");
    t = fit_str(cJSON_GetArrayItem(traffic, 0), "transport");
    return t ? t : "";
}

static FitGroup *fit_group(FitSet *set, const char *transport, const char *link) {
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->groups[i].fit.transport, transport) && !strcmp(set->groups[i].fit.link, link)) return &set->groups[i];
    FitGroup *g = realloc(set->groups, (size_t)(set->n + 1) * sizeof *g);
    if (!g) return NULL;
    set->groups = g;
    g = &set->groups[set->n++];
    memset(g, 0, sizeof *g);
    snprintf(g->fit.transport, sizeof g->fit.transport, "%s", transport);
    snprintf(g->fit.link, sizeof g->fit.link, "%s", link);
    return g;
}

static int fit_grow(FitGroup *g, int more) {
    if (g->n + more <= g->cap) return RS_OK;
    int cap = g->cap ? g->cap : 16;
    while (cap < g->n + more) cap *= 2;
    double **arr[] = {&g->a, &g->b, &g->t, &g->size};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) {
        double *p = realloc(*arr[i], (size_t)cap * sizeof **arr[i]);
        if (!p) return rs_error(RS_ERR_RUNTIME, "out of memory");
        *arr[i] = p;
    }
    int *s = realloc(g->source, (size_t)cap * sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "out of memory");
    g->source = s;
    g->cap = cap;
    return RS_OK;
}

/* One link's reports share what sets its alpha: *kept (len bytes) takes got from the link's first
 * report, and a later one with another value is refused, naming what and why. 0 or RS_ERR_INPUT. */
static int fit_alike(const FitGroup *g, const char *name, char *kept, size_t len, const char *got, const char *what,
                     const char *why) {
    if (g->nnames && strcmp(kept, got))
        return rs_error(RS_ERR_INPUT, "%s: %s %s where the other %s reports have %s: %s", name, what, got,
                        g->fit.transport[0] ? g->fit.transport : "default", kept, why);
    snprintf(kept, len, "%s", got);
    return RS_OK;
}

Arch fit_bench_arch(const cJSON *bench) {
    const char *arch = fit_str(cJSON_GetObjectItemCaseSensitive(bench, "backend"), "architecture");
    Arch shape;
    if (arch && !arch_parse(arch, &shape)) return shape;
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(bench, "config");
    const char *sync = fit_str(cfg, "sync"), *placement = fit_str(cfg, "ps_placement");
    Config c;
    config_defaults(&c);
    if (!sync || strlen(sync) >= sizeof c.sync || (placement && strlen(placement) >= sizeof c.ps_placement) ||
        !backend_find(sync))
        return ARCH_COUNT;
    snprintf(c.sync, sizeof c.sync, "%s", sync);
    if (placement) snprintf(c.ps_placement, sizeof c.ps_placement, "%s", placement);
    return backend_arch(&c);
}

int fit_add(FitSet *set, const cJSON *bench, const char *name) {
    const char *schema = fit_str(bench, "schema");
    if (!schema || strcmp(schema, FIT_BENCH_SCHEMA))
        return rs_error(RS_ERR_INPUT, "%s: schema %s, expected a bench report (%s: ringside bench ... --report FILE)", name,
                        schema ? schema : "(none)", FIT_BENCH_SCHEMA);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(bench, "config"), *row;
    const char *sync = fit_str(cfg, "sync"), *placement = fit_str(cfg, "ps_placement"), *link = fit_str(cfg, "link");
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(cfg, "ranks"), *servers = cJSON_GetObjectItemCaseSensitive(cfg, "ps_servers");
    if (!sync || !cJSON_IsNumber(ranks)) return rs_error(RS_ERR_INPUT, "%s: config.sync or config.ranks missing", name);
    /* without ps_servers (a back end with no server processes of its own): backend.servers, else
     * one server (ps's colocated one; the cost models of the others do not read it) */
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(bench, "backend"), "servers");
    int n = ranks->valueint, k = cJSON_IsNumber(servers) ? servers->valueint : cJSON_IsNumber(bs) ? bs->valueint : 1;
    if (n < 2) return rs_error(RS_ERR_INPUT, "%s: a bench on %d rank moves nothing: run it with -n 2 or more", name, n);
    double a, b;
    if (!placement) placement = "colocated";
    Arch shape = fit_bench_arch(bench);
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(cfg, "ps_partition_keys"); /* partitions: pipelined */
    int pipelined = cJSON_IsNumber(pk) && pk->valuedouble > 0;
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(cfg, "nodes"); /* machines sharing a NIC each */
    int m = cJSON_IsNumber(nodes) ? nodes->valueint : 0;
    if (predict_coeffs(shape, k, n, m, pipelined, 1024, &a, &b) != 0)
        return rs_error(RS_ERR_INPUT, "%s: --sync %s (%s): no alpha-beta model for it in experiments/predict.h", name, sync, placement);
    FitGroup *g = fit_group(set, fit_transport(bench), link ? link : "");
    if (!g) return rs_error(RS_ERR_RUNTIME, "out of memory");
    const char *layer = fit_str(cfg, "msg_layer"), *barrier = fit_str(cfg, "barrier"); /* older reports: zeromq, each */
    RS_TRY(fit_alike(g, name, g->fit.layer, sizeof g->fit.layer, layer ? layer : "zeromq", "message layer",
                     "one link's alpha is one layer's per-message cost, so fit each layer's reports apart"));
    RS_TRY(fit_alike(g, name, g->fit.barrier, sizeof g->fit.barrier, barrier ? barrier : "each", "--barrier",
                     "calls back to back overlap one call's tail with the next one's start, so fit each rule's reports apart"));
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(bench, "rows");
    RS_TRY(fit_grow(g, cJSON_GetArraySize(rows)));
    char (*names)[256] = realloc(g->names, (size_t)(g->nnames + 1) * sizeof *names);
    if (!names) return rs_error(RS_ERR_RUNTIME, "out of memory");
    g->names = names;
    snprintf(g->names[g->nnames], sizeof g->names[0], "%s", name);
    int added = 0;
    cJSON_ArrayForEach(row, rows) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(row, "size_bytes"), *t = cJSON_GetObjectItemCaseSensitive(row, "time_us");
        if (!cJSON_IsNumber(s) || !cJSON_IsNumber(t) || !(t->valuedouble > 0) || !(s->valuedouble > 0)) continue;
        predict_coeffs(shape, k, n, m, pipelined, s->valuedouble, &g->a[g->n], &g->b[g->n]);
        g->t[g->n] = t->valuedouble * 1e-6;
        g->size[g->n] = s->valuedouble;
        g->source[g->n] = g->nnames;
        g->n++;
        added++;
    }
    if (!added) return rs_error(RS_ERR_INPUT, "%s: no rows with size_bytes > 0 and time_us > 0", name);
    g->nnames++;
    if (!g->fit.reports++ || n < g->fit.min_ranks) g->fit.min_ranks = n;
    if (n > g->fit.max_ranks) g->fit.max_ranks = n;
    return RS_OK;
}

/* Fits one link: relative least squares (each row divided by its time, so that the small sizes,
 * which set alpha, weigh as much as the large ones, which set beta), then the quality figures. */
static int fit_one(FitGroup *g) {
    FitLink *f = &g->fit;
    int n = g->n, distinct = 0;
    for (int i = 1; i < n; i++) distinct |= g->size[i] != g->size[0];
    if (n < 2 || !distinct)
        return rs_error(RS_ERR_INPUT, "transport %s%s%s: %d row%s of %d size%s: a fit needs 2 sizes or more", f->transport[0] ? f->transport : "(unnamed)",
                        f->link[0] ? ", link " : "", f->link, n, n == 1 ? "" : "s", distinct + 1, distinct ? "s" : "");
    double *ra = malloc((size_t)n * sizeof *ra), *rb = malloc((size_t)n * sizeof *rb), *one = malloc((size_t)n * sizeof *one);
    int rc = RS_OK;
    if (!ra || !rb || !one) rc = rs_error(RS_ERR_RUNTIME, "out of memory");
    for (int i = 0; rc == RS_OK && i < n; i++) {
        ra[i] = g->a[i] / g->t[i];
        rb[i] = g->b[i] / g->t[i];
        one[i] = 1;
    }
    if (rc == RS_OK && predict_fit_linear(ra, rb, one, n, &f->alpha_s, &f->beta_s_per_byte, &f->rms_rel) != 0)
        rc = rs_error(RS_ERR_INPUT, "transport %s: the rows cannot determine alpha and beta", f->transport);
    free(ra);
    free(rb);
    free(one);
    if (rc != RS_OK) return rc;
    double mean = 0, ss_tot = 0, ss_res = 0;
    for (int i = 0; i < n; i++) mean += g->t[i] / n;
    f->worst_rel = 0;
    f->min_bytes = f->max_bytes = g->size[0];
    for (int i = 0; i < n; i++) {
        double model = f->alpha_s * g->a[i] + f->beta_s_per_byte * g->b[i], rel = (model - g->t[i]) / g->t[i];
        ss_tot += (g->t[i] - mean) * (g->t[i] - mean);
        ss_res += (g->t[i] - model) * (g->t[i] - model);
        if (fabs(rel) >= fabs(f->worst_rel)) {
            f->worst_rel = rel;
            f->worst_bytes = g->size[i];
            snprintf(f->worst_source, sizeof f->worst_source, "%s", g->names[g->source[i]]);
        }
        f->min_bytes = fmin(f->min_bytes, g->size[i]);
        f->max_bytes = fmax(f->max_bytes, g->size[i]);
    }
    f->r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
    f->points = n;
    return RS_OK;
}

int fit_solve(FitSet *set) {
    for (int i = 0; i < set->n; i++) RS_TRY(fit_one(&set->groups[i]));
    return RS_OK;
}

cJSON *fit_json(const FitSet *set) {
    cJSON *root = cJSON_CreateObject(), *links = cJSON_AddObjectToObject(root, "links");
    cJSON_AddStringToObject(root, "schema", FIT_SCHEMA);
    cJSON_AddStringToObject(root, "model", "alpha-beta: t = alpha A + beta B (experiments/predict.h), relative least squares");
    for (int i = 0; i < set->n; i++) {
        const FitGroup *g = &set->groups[i];
        const FitLink *f = &g->fit;
        char key[96];
        snprintf(key, sizeof key, "%s%s%s", f->transport[0] ? f->transport : "default", f->link[0] ? "@" : "", f->link);
        cJSON *o = cJSON_AddObjectToObject(links, key);
        cJSON_AddStringToObject(o, "transport", f->transport);
        cJSON_AddStringToObject(o, "link", f->link);
        cJSON_AddStringToObject(o, "msg_layer", f->layer);
        cJSON_AddStringToObject(o, "barrier", f->barrier);
        cJSON_AddNumberToObject(o, "alpha_s", f->alpha_s);
        cJSON_AddNumberToObject(o, "beta_s_per_byte", f->beta_s_per_byte);
        cJSON_AddNumberToObject(o, "r2", f->r2);
        cJSON_AddNumberToObject(o, "rms_relative_residual", f->rms_rel);
        cJSON_AddNumberToObject(o, "worst_relative_residual", f->worst_rel);
        cJSON_AddNumberToObject(o, "worst_size_bytes", f->worst_bytes);
        cJSON_AddStringToObject(o, "worst_source", f->worst_source);
        cJSON_AddNumberToObject(o, "points", f->points);
        cJSON_AddNumberToObject(o, "min_bytes", f->min_bytes);
        cJSON_AddNumberToObject(o, "max_bytes", f->max_bytes);
        cJSON_AddNumberToObject(o, "min_ranks", f->min_ranks);
        cJSON_AddNumberToObject(o, "max_ranks", f->max_ranks);
        cJSON *src = cJSON_AddArrayToObject(o, "sources");
        for (int k = 0; k < g->nnames; k++) cJSON_AddItemToArray(src, cJSON_CreateString(g->names[k]));
    }
    return root;
}

void fit_free(FitSet *set) {
    for (int i = 0; i < set->n; i++) {
        FitGroup *g = &set->groups[i];
        free(g->a);
        free(g->b);
        free(g->t);
        free(g->size);
        free(g->source);
        free(g->names);
    }
    free(set->groups);
    memset(set, 0, sizeof *set);
}

/* ---- the command ----------------------------------------------------------------------------- */

static void fit_usage(FILE *f) {
    fprintf(f,
            "usage: ringside fit BENCH.json... [--report FILE]\n"
            "\n"
            "Fits the alpha-beta model (one message of m bytes costs alpha + m beta) to the sweeps of\n"
            "`ringside bench` reports, one fit per transport (and emulated link) the reports moved over:\n"
            "every row is t = alpha A + beta B with A and B from its report's back end and ranks\n"
            "(experiments/predict.h), solved by least squares on relative residuals, alpha, beta >= 0.\n"
            "Prints alpha, beta, R^2 of the times and the worst relative residual (where the model is\n"
            "least trustworthy) with its size: a matrix whose largest bucket lies beyond the sizes fitted\n"
            "is predicted by extrapolation. Bench up to the largest bucket (-e) at a factor of 2 or 4.\n"
            "\n"
            "  --report FILE   also write the fits as JSON (schema " FIT_SCHEMA "); a matrix's \"links\"\n"
            "                  and \"bench\" accept the file\n"
            "\n"
            "exit status: 0 fitted, 2 bad argument or report\n");
}

static void fit_size(double b, char *out, size_t len) {
    if (b >= 1048576 && fmod(b, 1048576) == 0) snprintf(out, len, "%.0fM", b / 1048576);
    else if (b >= 1024 && fmod(b, 1024) == 0) snprintf(out, len, "%.0fK", b / 1024);
    else snprintf(out, len, "%.0f", b);
}

int fit_main(int argc, char **argv) {
    const char *out = NULL;
    int nfiles = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fit_usage(stdout);
            return RS_OK;
        }
        if (!strcmp(argv[i], "--report")) {
            if (i + 1 >= argc) {
                log_error("fit: --report needs a file");
                return RS_ERR_INPUT;
            }
            out = argv[++i];
        } else if (argv[i][0] == '-') {
            log_error("fit: unknown option '%s'", argv[i]);
            fit_usage(stderr);
            return RS_ERR_INPUT;
        } else nfiles++;
    }
    if (!nfiles) {
        log_error("fit: no bench reports given");
        fit_usage(stderr);
        return RS_ERR_INPUT;
    }
    FitSet set = {0};
    int rc = RS_OK;
    for (int i = 0; i < argc && rc == RS_OK; i++) {
        if (!strcmp(argv[i], "--report")) {
            i++;
            continue;
        }
        cJSON *b = report_read(argv[i]);
        if (!b) rc = RS_ERR_INPUT;
        else rc = fit_add(&set, b, argv[i]);
        cJSON_Delete(b);
    }
    if (rc == RS_OK) rc = fit_solve(&set);
    if (rc == RS_OK && out) {
        cJSON *j = fit_json(&set);
        rc = j ? report_write_atomic(out, j) : rs_error(RS_ERR_RUNTIME, "out of memory");
        cJSON_Delete(j);
    }
    if (rc != RS_OK) {
        log_error("fit: %s", rs_errmsg());
        fit_free(&set);
        return rc == RS_ERR_RUNTIME ? rc : RS_ERR_INPUT;
    }
    printf("# ringside fit: alpha-beta per transport, t = alpha A + beta B (experiments/predict.h), relative least squares\n");
    printf("# %-9s %-10s %6s %13s %10s %11s %12s %8s  %s\n", "transport", "link", "points", "sizes", "alpha(us)", "beta(ns/B)",
           "1/beta(GB/s)", "R^2", "worst residual");
    for (int i = 0; i < set.n; i++) {
        const FitLink *f = fit_link(&set, i);
        char lo[32], hi[32], sizes[80], bw[32], worst[32];
        fit_size(f->min_bytes, lo, sizeof lo);
        fit_size(f->max_bytes, hi, sizeof hi);
        fit_size(f->worst_bytes, worst, sizeof worst);
        snprintf(sizes, sizeof sizes, "%s..%s", lo, hi);
        if (f->beta_s_per_byte > 0) snprintf(bw, sizeof bw, "%.3f", 1e-9 / f->beta_s_per_byte);
        else snprintf(bw, sizeof bw, "inf");
        char how[32]; /* the transport, and the direct layer's reports said so */
        snprintf(how, sizeof how, "%s%s", f->transport[0] ? f->transport : "-", strcmp(f->layer, "direct") ? "" : "/direct");
        printf("  %-9s %-10s %6d %13s %10.2f %11.4f %12s %8.4f  %+.1f%% at %s (%s)\n", how,
               f->link[0] ? f->link : "-", f->points, sizes, f->alpha_s * 1e6, f->beta_s_per_byte * 1e9, bw, f->r2,
               100 * f->worst_rel, worst, f->worst_source);
    }
    printf("# RMS relative residual:");
    for (int i = 0; i < set.n; i++) printf(" %s %.1f%%", fit_link(&set, i)->transport[0] ? fit_link(&set, i)->transport : "-", 100 * fit_link(&set, i)->rms_rel);
    printf("\n");
    if (out) printf("# fits written to %s\n", out);
    fit_free(&set);
    return RS_OK;
}
