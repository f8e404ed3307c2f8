/* claims_load.c - a folder of reports into per-configuration records: parse, check schema, median of repeats */
#include "backends.h"
#include "claims_load.h"
#include "predict.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../engine/config_check.h"
#include "../engine/report.h"
#include "../engine/sync.h"
#include "../model/model.h"

#include <cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options a series over N varies (left out of the family key). */
static const char *const key_series[] = {"ranks", "sync", "ps-placement", "ps-servers", "ps-mode", NULL};
/* The option a series over N varies, and nothing else (the series key). */
static const char *const key_ranks[] = {"ranks", NULL};
/* Options that do not change the loss curve, or describe the split of one batch, or how the
 * gradient travels (claim 5 holds a 16-bit --wire run against the fp32 1-rank curve with the
 * wire's own tolerance). */
static const char *const key_split[] = {"ranks", "sync", "ps-placement", "ps-servers", "ps-mode", "zero-stage", "hierarchical", "nodes", "batch",
                                        "global-batch", "accum-steps", "bucket-mb", "overlap", "threads", "eval-every",
                                        "warmup", "device", "wire", "loss-scale", "msg-layer", NULL};

/* Options that name the back end and its own settings (left out of claim 7's pair key). */
static const char *const key_backend[] = {"sync", "ps-placement", "ps-servers", "ps-mode", "ps-consistency", "zero-stage", "hierarchical",
                                          "transport", "bucket-mb", "overlap", NULL};

static int load_in(const char *k, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(k, list[i])) return 1;
    return 0;
}

/* "key=value;" text of config's items, less the options that change no result (the option table's
 * column, base/config.h) and those in either list. */
static void load_key(const cJSON *config, const char *const *a, const char *const *b, char *out, size_t len) {
    size_t k = 0;
    const cJSON *e;
    out[0] = 0;
    cJSON_ArrayForEach(e, config) {
        if (config_changes_no_result(e->string) || (a && load_in(e->string, a)) || (b && load_in(e->string, b))) continue;
        char *v = cJSON_PrintUnformatted(e);
        if (!v) continue;
        int w = snprintf(out + k, len - k, "%s=%s;", e->string, v);
        cJSON_free(v);
        if (w < 0 || (size_t)w >= len - k) break;
        k += (size_t)w;
    }
}

static double load_num(const cJSON *o, const char *a, const char *b, const char *c) {
    if (a) o = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) o = cJSON_GetObjectItemCaseSensitive(o, b);
    if (c) o = cJSON_GetObjectItemCaseSensitive(o, c);
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

/* o[key] as an int: def when missing, not a number, or outside int's range (casting those is undefined). */
static int load_int(const cJSON *o, const char *key, int def) {
    double v = load_num(o, key, NULL, NULL);
    return v >= -2147483648.0 && v <= 2147483647.0 ? (int)v : def;
}

/* An array item as an int: def when it is no number or outside [1, 2^31) (a report is outside input). */
static int load_item_int(const cJSON *v, int def) {
    return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 2147483647.0 ? (int)v->valuedouble : def;
}

static void load_str(const cJSON *config, const char *key, char *out, size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    snprintf(out, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* The prediction for report file name in summary.json's runs, NAN when none. */
static double load_summary_pred(const cJSON *summary, const char *name) {
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(summary, "runs")) {
        const cJSON *rep = cJSON_GetObjectItemCaseSensitive(row, "report");
        if (cJSON_IsString(rep) && !strcmp(rep->valuestring, name))
            return load_num(row, "predicted_comm_s", NULL, NULL);
    }
    return NAN;
}

/* The largest figure a report's field may hold (bytes, seconds, samples): anything above is no
 * measurement (1e308 would make every verdict's arithmetic meaningless). */
#define LOAD_MAX_VALUE 1e18

/* o.a.b.c (b, c may be NULL) as a measurement into *out: NAN when absent or null (older reports);
 * RS_ERR_INPUT naming path and the field (where.a.b.c) when it is there but not a number in
 * [0, LOAD_MAX_VALUE]. */
static int load_measure(const char *path, const char *where, const cJSON *o, const char *a, const char *b, const char *c,
                        double *out) {
    const char *k[3] = {a, b, c};
    char name[160];
    size_t n = (size_t)snprintf(name, sizeof name, "%s", where);
    *out = NAN;
    for (int i = 0; i < 3 && k[i]; i++) {
        if (!cJSON_IsObject(o)) return RS_OK; /* a missing block: nothing measured */
        o = cJSON_GetObjectItemCaseSensitive(o, k[i]);
        if (n < sizeof name) n += (size_t)snprintf(name + n, sizeof name - n, "%s%s", name[0] ? "." : "", k[i]);
        if (!o || cJSON_IsNull(o)) return RS_OK;
    }
    if (!cJSON_IsNumber(o) || !(o->valuedouble >= 0 && o->valuedouble <= LOAD_MAX_VALUE)) {
        char *v = cJSON_PrintUnformatted(o);
        int rc = rs_error(RS_ERR_INPUT, "%s: %s: %.40s is not a measurement (a number from 0 to %g): a report ringside "
                                        "wrote holds none such; refusing it", path, name, v ? v : "?", LOAD_MAX_VALUE);
        cJSON_free(v);
        return rc;
    }
    *out = o->valuedouble;
    return RS_OK;
}

/* config.key, when present, must be an integer from lo to hi: RS_ERR_INPUT naming it otherwise
 * (a string "2" for ranks would leave every claim silently NOT RUN). */
static int load_check_int(const char *path, const cJSON *config, const char *key, double lo, double hi) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    if (!v || cJSON_IsNull(v)) return RS_OK;
    if (cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi && v->valuedouble == floor(v->valuedouble))
        return RS_OK;
    char *t = cJSON_PrintUnformatted(v);
    int rc = rs_error(RS_ERR_INPUT, "%s: config.%s: %.40s is not an integer from %.0f to %.0f; refusing the report", path,
                      key, t ? t : "?", lo, hi);
    cJSON_free(t);
    return rc;
}

/* config.key as a model dimension into *out when it is an integer from 1 to 2^24 (the models' own
 * bounds are smaller); 0 when it is absent, -1 when it is something else (a report is outside input). */
static int load_dim(const cJSON *config, const char *key, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1 && v->valuedouble <= 16777216.0)) return -1;
    *out = (int)v->valuedouble;
    return 0;
}

/* The model's parameter count from the report's options (the model's own count, as train sizes
 * it), and DDP's buckets of it under --bucket-mb, into r: what claim 12's formulas take, rather
 * than the params tag they check. psi stays 0 where an option is missing its sense. */
static void load_psi(const cJSON *config, ClaimsRun *r) {
    Config c;
    config_defaults(&c);
    load_str(config, "model", c.model, sizeof c.model);
    if (!c.model[0]) snprintf(c.model, sizeof c.model, "mlp");
    char data[sizeof c.data];
    load_str(config, "data", data, sizeof data);
    if (data[0]) snprintf(c.data, sizeof c.data, "%s", data);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(config, "layers"), *li;
    if (cJSON_IsArray(layers)) {
        c.nlayers = 0;
        cJSON_ArrayForEach(li, layers) {
            if (c.nlayers == CONFIG_MAX_LAYERS || !(cJSON_IsNumber(li) && li->valuedouble >= 1 && li->valuedouble <= 16777216.0)) return;
            c.layers[c.nlayers++] = (int)li->valuedouble;
        }
    }
    if (load_dim(config, "n-layer", &c.n_layer) || load_dim(config, "n-head", &c.n_head) || load_dim(config, "n-embd", &c.n_embd) ||
        load_dim(config, "seq-len", &c.seq_len) || load_dim(config, "vocab", &c.vocab) || c.nlayers < 2)
        return;
    if (r->bucket_mb > 0) c.bucket_mb = r->bucket_mb;
    /* the model's shape, sized as train sizes it (nothing allocated): its layers and those kept gathered */
    Model m;
    memset(&m, 0, sizeof m);
    if (model_check(&c) != RS_OK || !(m.ops = model_find(c.model))) return;
    m.sizing = m.max_batch = m.no_optimizer = m.out_per_sample = 1;
    int rc = m.ops->setup(&m, &c);
    Bucket *b = NULL;
    int nb = rc == RS_OK && m.nparams ? sync_plan_run(m.nparams, &c, &b) : -1;
    free(b);
    if (nb >= 1) {
        r->psi = (double)m.nparams;
        r->nbuckets = nb;
        r->nlayers = m.nlayers;
        for (int l = 0; l < m.nlayers && l < 64; l++)
            if (m.keep_gathered >> l & 1) r->kept += (double)(m.off[l + 1] - m.off[l]);
    }
    if (m.ops->release) m.ops->release(&m);
}

/* Fills r from one report (repeats == 1). 0 or RS_ERR_INPUT naming path. */
static int load_run(const char *path, const char *name, const cJSON *rep, const cJSON *summary, ClaimsRun *r) {
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(rep, "config");
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(rep, "ranks");
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(rep, "summary");
    if (!cJSON_IsObject(config)) return rs_error(RS_ERR_INPUT, "%s: not a complete report: no \"config\" object", path);
    if (!cJSON_IsArray(ranks)) return rs_error(RS_ERR_INPUT, "%s: not a complete report: no \"ranks\" array", path);
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", name);
    char *dot = strrchr(r->label, '.');
    if (dot && !strcmp(dot, ".json")) *dot = 0;
    char *rk = strrchr(r->label, '-');
    if (rk && rk[1] == 'r' && rk[2] && strspn(rk + 2, "0123456789") == strlen(rk + 2)) *rk = 0;
    load_str(config, "sync", r->sync, sizeof r->sync);
    char arch[32] = "";
    load_str(cJSON_GetObjectItemCaseSensitive(rep, "backend"), "architecture", arch, sizeof arch);
    if (!arch[0])
        return rs_error(RS_ERR_INPUT, "%s: no backend.architecture: a report of an older build (run it again)", path);
    if (arch_parse(arch, &r->arch))
        return rs_error(RS_ERR_INPUT, "%s: backend.architecture '%s': not one this ringside knows", path, arch);
    static const char *const ints[] = {"ranks", "ps-servers", "batch", "global-batch", "accum-steps", "steps", NULL};
    for (int i = 0; ints[i]; i++)
        RS_TRY(load_check_int(path, config, ints[i], !strcmp(ints[i], "ranks") || !strcmp(ints[i], "accum-steps") ? 1 : 0,
                              2147483647.0));
    const cJSON *layers0 = cJSON_GetObjectItemCaseSensitive(config, "layers"), *li;
    if (layers0 && !cJSON_IsArray(layers0))
        return rs_error(RS_ERR_INPUT, "%s: config.layers: not an array of widths; refusing the report", path);
    cJSON_ArrayForEach(li, layers0)
        if (!cJSON_IsNumber(li) || !(li->valuedouble >= 1 && li->valuedouble <= 2147483647.0))
            return rs_error(RS_ERR_INPUT, "%s: config.layers: a width that is no integer from 1; refusing the report", path);
    load_str(config, "ps-placement", r->placement, sizeof r->placement);
    load_str(config, "ps-mode", r->mode, sizeof r->mode);
    r->ranks = load_int(config, "ranks", 0);
    r->servers = load_int(config, "ps-servers", 0);
    r->batch = load_int(config, "batch", 0);
    r->global_batch = load_int(config, "global-batch", 0);
    r->accum = load_int(config, "accum-steps", 1); /* reports before --accum-steps: 1 */
    if (r->accum < 1) r->accum = 1;
    r->steps = load_int(config, "steps", 0);
    double seed = load_num(config, "seed", NULL, NULL);
    r->seed = fabs(seed) < 9e18 ? (long long)seed : 0;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(config, "layers");
    int nl = cJSON_GetArraySize(layers);
    for (int i = 0; i + 1 < nl; i++) {
        double in = cJSON_GetArrayItem(layers, i)->valuedouble, out = cJSON_GetArrayItem(layers, i + 1)->valuedouble;
        r->grad_bytes += 4.0 * (in * out + out);
    }
    load_key(config, NULL, NULL, r->group, sizeof r->group);
    load_key(config, key_series, NULL, r->family, sizeof r->family);
    load_key(config, key_ranks, NULL, r->series, sizeof r->series);
    load_str(config, "model", r->model, sizeof r->model);
    if (!r->model[0]) snprintf(r->model, sizeof r->model, "mlp");
    char data[64];
    load_str(config, "data", data, sizeof data);
    int lin = nl > 0 ? load_item_int(cJSON_GetArrayItem(layers, 0), 1) : 1;
    int lout = nl > 0 ? load_item_int(cJSON_GetArrayItem(layers, nl - 1), 1) : 1;
    predict_dp_shape(r->model, lin, lout, load_int(config, "seq-len", 1), load_int(config, "vocab", 1),
                     !strncmp(data, "text:", 5), &r->dp_in, &r->dp_classes);
    load_key(config, key_split, NULL, r->math, sizeof r->math);
    load_key(config, key_backend, NULL, r->pair, sizeof r->pair);
    load_str(config, "ps-consistency", r->consistency, sizeof r->consistency);
    if (!r->consistency[0]) snprintf(r->consistency, sizeof r->consistency, "sync");
    load_str(config, "wire", r->wire, sizeof r->wire);
    if (!r->wire[0]) snprintf(r->wire, sizeof r->wire, "fp32");
    load_str(config, "straggler", r->straggler, sizeof r->straggler);
    double bmb = load_num(config, "bucket-mb", NULL, NULL);
    r->bucket_mb = isnan(bmb) || bmb < 0 ? 0 : bmb;
    load_str(config, "ps-partition-kb", r->partition, sizeof r->partition);
    load_str(config, "optimizer", r->optimizer, sizeof r->optimizer);
    if (!r->optimizer[0]) snprintf(r->optimizer, sizeof r->optimizer, "sgd");
    load_psi(config, r);
    double tb = load_num(config, "time-budget", NULL, NULL);
    r->time_budget = isnan(tb) ? 0 : tb;
    const cJSON *e;
    r->timed_steps = -1;
    cJSON_ArrayForEach(e, ranks) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "server")) continue;
        int k = load_int(e, "rank", -1);
        if (k < 0 || k >= CLAIMS_MAX_RANKS) return rs_error(RS_ERR_INPUT, "%s: ranks[]: rank %d out of range", path, k);
        if (k + 1 > r->nw) r->nw = k + 1;
        char at[32];
        snprintf(at, sizeof at, "ranks[%d]", k);
        double pb;
        RS_TRY(load_measure(path, at, e, "memory", "peak_bytes", NULL, &r->peak[k]));
        RS_TRY(load_measure(path, at, e, "traffic", "bytes_sent", NULL, &r->sent[k]));
        RS_TRY(load_measure(path, at, e, "traffic", "bytes_received", NULL, &r->received[k]));
        RS_TRY(load_measure(path, at, e, "samples", NULL, NULL, &r->samples[k]));
        RS_TRY(load_measure(path, at, e, "time_s", "busy", NULL, &r->busy[k]));
        RS_TRY(load_measure(path, at, e, "time_s", "phases", "forward", &r->forward[k]));
        RS_TRY(load_measure(path, at, e, "time_s", "phases", "comm_total", &r->comm_total[k]));
        RS_TRY(load_measure(path, at, e, "time_s", "phases", "comm_exposed", &r->comm_exposed[k]));
        RS_TRY(load_measure(path, at, e, "memory", "by_tag", "params", &pb));
        r->tag_params[k] = pb;
        RS_TRY(load_measure(path, at, e, "memory", "by_tag", "grads", &r->tag_grads[k]));
        RS_TRY(load_measure(path, at, e, "memory", "by_tag", "optimizer", &r->tag_optimizer[k]));
        RS_TRY(load_measure(path, at, e, "memory", "by_tag", "activations", &r->tag_activations[k]));
        RS_TRY(load_measure(path, at, e, "memory", "by_tag", "comm", &r->tag_comm[k]));
        double ts = load_num(e, "time_s", "timed_steps", NULL);
        if (ts >= 0 && ts < 2147483647.0 && (r->timed_steps < 0 || ts < r->timed_steps)) r->timed_steps = (int)ts;
        /* the gradient is as large as the parameters, whatever the model (--layers is the MLP's) */
        if (k == 0 && pb > 0) r->grad_bytes = pb;
        if (k == 0 && r->arch == ARCH_ZERO3 && r->psi > 0) r->grad_bytes = 4 * r->psi; /* its params tag is a shard */
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "params_hash");
        if (cJSON_IsString(ph) && k < CLAIMS_MAX_RANKS) snprintf(r->hash[k], sizeof r->hash[k], "%s", ph->valuestring);
    }
    /* a 16-bit wire moves 2 bytes per parameter, FP8 1 (a ps's bf16 replies: 1.5 averaged) */
    r->grad_bytes *= arch_wire_ratio(r->arch, r->wire);
    RS_TRY(load_measure(path, "summary", sum, "steps", NULL, NULL, &r->steps_run));
    double cores = load_num(cJSON_GetObjectItemCaseSensitive(rep, "env"), "cores", NULL, NULL);
    r->cores = cores >= 0 && cores <= 1e6 ? (int)cores : 0;
    const cJSON *curve = cJSON_GetObjectItemCaseSensitive(sum, "loss_curve");
    int n = cJSON_GetArraySize(curve);
    r->diverged_step = -1;
    if (n > 0) {
        r->loss = malloc((size_t)n * sizeof *r->loss);
        if (!r->loss) return rs_error(RS_ERR_RUNTIME, "out of memory");
        cJSON_ArrayForEach(e, curve) {
            double l;
            if (!report_value(cJSON_GetArrayItem(e, 1), &l) || !isfinite(l)) { /* "nan", "inf", or no number at all */
                l = NAN;
                if (r->diverged_step < 0) r->diverged_step = r->nloss;
            }
            r->loss[r->nloss++] = l;
        }
    }
    /* the report's own word first (its step is the loss curve's), else the curve's first hole */
    double ds = load_num(sum, "diverged_step", NULL, NULL);
    r->diverged = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "diverged")) || r->diverged_step >= 0;
    if (r->diverged && ds >= 0 && ds < 2147483647.0) r->diverged_step = (int)ds;
    if (r->diverged && r->diverged_step < 0) r->diverged_step = 0;
    RS_TRY(load_measure(path, "summary", sum, "throughput_samples_per_s", NULL, NULL, &r->throughput));
    const cJSON *pred = cJSON_GetObjectItemCaseSensitive(sum, "prediction");
    RS_TRY(load_measure(path, "summary.prediction", pred, "step_comm_s", NULL, NULL, &r->pred_comm_s));
    const cJSON *link = cJSON_GetObjectItemCaseSensitive(pred, "link");
    snprintf(r->link, sizeof r->link, "%s", cJSON_IsString(link) ? link->valuestring : "");
    r->pred_emulated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pred, "from_emulated_link"));
    r->pred_alpha = load_num(pred, "alpha_s", NULL, NULL);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(pred, "source");
    r->pred_given = cJSON_IsString(src) && !strncmp(src->valuestring, "matrix file", 11);
    if (isnan(r->pred_comm_s) && summary) r->pred_comm_s = load_summary_pred(summary, name);
    const cJSON *emu = cJSON_GetObjectItemCaseSensitive(config, "link"), *how = cJSON_GetObjectItemCaseSensitive(sum, "transport");
    snprintf(r->emulated, sizeof r->emulated, "%s", cJSON_IsString(emu) ? emu->valuestring : "");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(config, "nodes");
    r->nodes = cJSON_IsNumber(nodes) ? nodes->valueint : 0;
    snprintf(r->transport, sizeof r->transport, "%s", cJSON_IsString(how) ? how->valuestring : "");
    r->repeats = 1;
    return RS_OK;
}

/* Folds the repeats of one configuration, runs[0..n) (the same group and workers), into runs[0]:
 * every per-rank figure and the prediction become their median over the repeats (robust to one
 * disturbed repeat on a shared machine); runs[0] keeps its loss curve, the others' are freed. */
static void load_fold(ClaimsRun **runs, int n) {
    ClaimsRun *r = runs[0];
    double x[n];
    size_t off[] = {offsetof(ClaimsRun, peak), offsetof(ClaimsRun, sent), offsetof(ClaimsRun, received),
                    offsetof(ClaimsRun, samples), offsetof(ClaimsRun, busy), offsetof(ClaimsRun, forward),
                    offsetof(ClaimsRun, comm_total), offsetof(ClaimsRun, comm_exposed), offsetof(ClaimsRun, tag_params),
                    offsetof(ClaimsRun, tag_grads), offsetof(ClaimsRun, tag_optimizer), offsetof(ClaimsRun, tag_activations),
                    offsetof(ClaimsRun, tag_comm)};
    for (size_t a = 0; a < sizeof off / sizeof off[0]; a++)
        for (int k = 0; k < r->nw; k++) {
            for (int i = 0; i < n; i++) x[i] = ((double *)((char *)runs[i] + off[a]))[k];
            ((double *)((char *)r + off[a]))[k] = report_percentile(x, n, 50);
        }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(runs[i]->pred_comm_s)) x[m++] = runs[i]->pred_comm_s;
    r->pred_comm_s = m ? report_percentile(x, m, 50) : NAN;
    m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(runs[i]->throughput)) x[m++] = runs[i]->throughput;
    r->throughput = m ? report_percentile(x, m, 50) : NAN;
    r->repeats = n;
    for (int i = 1; i < n; i++) /* one repeat that diverged marks the configuration: a loss it cannot be sure of */
        if (runs[i]->diverged) {
            if (!r->diverged || runs[i]->diverged_step < r->diverged_step) r->diverged_step = runs[i]->diverged_step;
            r->diverged = 1;
        }
    for (int i = 1; i < n; i++) {
        free(runs[i]->loss);
        runs[i]->loss = NULL;
    }
}

/* Groups set->runs (one per report) by configuration, in place: set->nruns becomes the count of
 * configurations. */
static int load_group(ClaimsSet *set) {
    int n = set->nruns, out = 0;
    char *done = calloc((size_t)(n ? n : 1), 1);
    ClaimsRun **members = calloc((size_t)(n ? n : 1), sizeof *members);
    if (!done || !members) {
        free(done);
        free(members);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && set->runs[j].nw == set->runs[i].nw && !strcmp(set->runs[j].group, set->runs[i].group)) {
                done[j] = 1;
                members[m++] = &set->runs[j];
            }
        load_fold(members, m);
        if (out != i) {
            set->runs[out] = set->runs[i];
            set->runs[i].loss = NULL;
        }
        out++;
    }
    set->nruns = out;
    free(done);
    free(members);
    return RS_OK;
}

/* ---- bench reports (claims 10 and 11) ---- */

#define BENCH_SCHEMA_PREFIX "ringside.bench/"
#define BENCH_SCHEMA_READ "ringside.bench/1"

/* Whether a and b are repeats of one configuration (the same all-reduce, ranks, nodes, servers,
 * link, wire, message layer and timing rule, the same sizes). */
static int bench_same(const ClaimsBench *a, const ClaimsBench *b) {
    if (a->arch != b->arch || a->ranks != b->ranks || a->nodes != b->nodes || a->servers != b->servers || a->pipelined != b->pipelined ||
        strcmp(a->link, b->link) || strcmp(a->wire, b->wire) || !claims_bench_timed_alike(a, b) || a->nrows != b->nrows)
        return 0;
    for (int i = 0; i < a->nrows; i++)
        if (a->size[i] != b->size[i]) return 0;
    return 1;
}

static void bench_free(ClaimsBench *b) {
    free(b->size);
    free(b->time_s);
    free(b->times);
}

/* One bench report into set->benches: a new configuration, or a repeat of one read before. */
static int load_bench(const char *path, const char *file, const cJSON *rep, ClaimsSet *set) {
    ClaimsBench b = {0};
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(rep, "config"), *rows = cJSON_GetObjectItemCaseSensitive(rep, "rows");
    char arch[32] = "";
    load_str(cJSON_GetObjectItemCaseSensitive(rep, "backend"), "architecture", arch, sizeof arch);
    if (!cJSON_IsObject(cfg) || !cJSON_IsArray(rows))
        return rs_error(RS_ERR_INPUT, "%s: a bench report without config or rows", path);
    if (!arch[0] || arch_parse(arch, &b.arch))
        return rs_error(RS_ERR_INPUT, "%s: backend.architecture '%s': not one this ringside knows", path, arch);
    size_t stem = strlen(file) > 5 ? strlen(file) - 5 : strlen(file); /* less ".json", and a repeat's "-rK" */
    const char *dash = strrchr(file, '-');
    if (dash && dash[1] == 'r' && (size_t)(dash - file) < stem && strspn(dash + 2, "0123456789") == (size_t)(file + stem - dash - 2))
        stem = (size_t)(dash - file);
    snprintf(b.label, sizeof b.label, "%.*s", (int)stem, file);
    double v = load_num(cfg, "ranks", NULL, NULL);
    b.ranks = isfinite(v) ? (int)v : 0;
    v = load_num(cfg, "nodes", NULL, NULL);
    b.nodes = isfinite(v) ? (int)v : 0;
    v = load_num(rep, "backend", "servers", NULL);
    b.servers = isfinite(v) ? (int)v : 0;
    v = load_num(rep, "env", "cores", NULL);
    b.cores = isfinite(v) ? (int)v : 0;
    load_str(cJSON_GetObjectItemCaseSensitive(cfg, "link"), "text", b.link, sizeof b.link);
    v = load_num(cfg, "link", "bandwidth_bytes_per_s", NULL);
    b.bytes_per_s = isfinite(v) ? v : 0;
    v = load_num(cfg, "link", "latency_s", NULL);
    b.latency_s = isfinite(v) ? v : 0;
    v = load_num(cfg, "ps_partition_keys", NULL, NULL);
    b.pipelined = v > 0;
    load_str(cfg, "wire", b.wire, sizeof b.wire);
    if (!b.wire[0]) snprintf(b.wire, sizeof b.wire, "fp32");
    load_str(cfg, "msg_layer", b.layer, sizeof b.layer);
    if (!b.layer[0]) snprintf(b.layer, sizeof b.layer, "zeromq");
    load_str(cfg, "barrier", b.barrier, sizeof b.barrier);
    if (!b.barrier[0]) snprintf(b.barrier, sizeof b.barrier, "each");
    int n = cJSON_GetArraySize(rows);
    b.size = calloc((size_t)(n ? n : 1), sizeof *b.size);
    b.time_s = calloc((size_t)(n ? n : 1), sizeof *b.time_s);
    b.times = calloc((size_t)(n ? n : 1) * CLAIMS_BENCH_REPEATS, sizeof *b.times);
    if (!b.size || !b.time_s || !b.times) return bench_free(&b), rs_error(RS_ERR_RUNTIME, "out of memory");
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        double sz = load_num(row, "size_bytes", NULL, NULL), t = load_num(row, "time_us", NULL, NULL);
        if (!(sz > 0) || !(t > 0)) continue;
        b.size[b.nrows] = sz;
        b.times[(size_t)b.nrows * CLAIMS_BENCH_REPEATS] = t * 1e-6;
        b.nrows++;
    }
    b.repeats = 1;
    for (int i = 0; i < set->nbenches; i++) {
        ClaimsBench *o = &set->benches[i];
        if (!bench_same(o, &b)) continue;
        if (o->repeats < CLAIMS_BENCH_REPEATS) {
            for (int r = 0; r < o->nrows; r++)
                o->times[(size_t)r * CLAIMS_BENCH_REPEATS + (size_t)o->repeats] = b.times[(size_t)r * CLAIMS_BENCH_REPEATS];
            o->repeats++;
        }
        bench_free(&b);
        return RS_OK;
    }
    ClaimsBench *grown = realloc(set->benches, (size_t)(set->nbenches + 1) * sizeof *grown);
    if (!grown) return bench_free(&b), rs_error(RS_ERR_RUNTIME, "out of memory");
    set->benches = grown;
    set->benches[set->nbenches++] = b;
    return RS_OK;
}

int claims_bench_timed_alike(const ClaimsBench *a, const ClaimsBench *b) {
    return !strcmp(a->layer, b->layer) && !strcmp(a->barrier, b->barrier);
}

int claims_bench_model(const ClaimsBench *b, int i, double *lat, double *bw) {
    double a, c, na, nb, n = b->size[i] * arch_wire_ratio(b->arch, b->wire);
    if (!(b->bytes_per_s > 0) || arch_cost(b->arch, b->servers, b->ranks, b->nodes, b->pipelined, n, &a, &c) != 0) return -1;
    arch_node_cost(b->arch, b->ranks, b->nodes, n, &na, &nb);
    *lat = a * (b->latency_s + PREDICT_EMULATED_ALPHA_S) + PREDICT_NODE_ALPHA_S * na;
    *bw = c / b->bytes_per_s;
    return 0;
}

/* Each bench configuration's median time at each size over its repeats. */
static void load_bench_medians(ClaimsSet *set) {
    for (int i = 0; i < set->nbenches; i++) {
        ClaimsBench *b = &set->benches[i];
        for (int r = 0; r < b->nrows; r++)
            b->time_s[r] = report_percentile(b->times + (size_t)r * CLAIMS_BENCH_REPEATS, b->repeats, 50);
    }
}

static int load_filter(const struct dirent *d) {
    size_t n = strlen(d->d_name);
    return n > 5 && !strcmp(d->d_name + n - 5, ".json") && strcmp(d->d_name, "summary.json") &&
           strcmp(d->d_name, "claims.json");
}

int claims_load(const char *dir, ClaimsSet *set) {
    memset(set, 0, sizeof *set);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, load_filter, alphasort);
    if (n < 0) return rs_error(RS_ERR_INPUT, "%s: cannot read the folder", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *probe = fopen(path, "r");
    cJSON *summary = NULL;
    if (probe) {
        fclose(probe);
        summary = report_read(path);  /* optional: an unreadable one only loses its predictions */
        if (!summary) printf("# note: %s\n", rs_errmsg());
    }
    int rc = RS_OK;
    set->runs = calloc((size_t)(n ? n : 1), sizeof *set->runs);
    if (!set->runs) rc = rs_error(RS_ERR_RUNTIME, "out of memory");
    for (int i = 0; i < n && rc == RS_OK; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        cJSON *rep = report_read(path);
        if (!rep) {
            rc = RS_ERR_INPUT;
            break;
        }
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(rep, "schema");
        const char *sv = cJSON_IsString(s) ? s->valuestring : "";
        if (!strncmp(sv, BENCH_SCHEMA_PREFIX, strlen(BENCH_SCHEMA_PREFIX))) {
            if (strcmp(sv, BENCH_SCHEMA_READ))
                rc = rs_error(RS_ERR_INPUT, "%s: bench schema %s, but this ringside reads %s", path, sv, BENCH_SCHEMA_READ);
            else if ((rc = load_bench(path, names[i]->d_name, rep, set)) == RS_OK)
                set->nreports++;
        } else if (strncmp(sv, "ringside.report/", 16)) {
            printf("# skipped %s: not a training or bench report (schema %s)\n", path, sv[0] ? sv : "none");
        } else if (strcmp(sv, REPORT_SCHEMA)) {
            rc = rs_error(RS_ERR_INPUT, "%s: report schema %s, but this ringside reads %s", path, sv, REPORT_SCHEMA);
        } else {
            ClaimsRun *r = &set->runs[set->nruns];
            rc = load_run(path, names[i]->d_name, rep, summary, r);
            if (rc == RS_OK) {
                set->nreports++;
                set->nruns++;
            } else {
                free(r->loss);
                r->loss = NULL;
            }
        }
        cJSON_Delete(rep);
    }
    if (rc == RS_OK) rc = load_group(set);
    if (rc == RS_OK) load_bench_medians(set);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    cJSON_Delete(summary);
    if (rc != RS_OK) claims_free(set);
    return rc;
}

void claims_free(ClaimsSet *set) {
    for (int i = 0; i < set->nruns; i++) free(set->runs[i].loss);
    free(set->runs);
    for (int i = 0; i < set->nbenches; i++) bench_free(&set->benches[i]);
    free(set->benches);
    memset(set, 0, sizeof *set);
}
