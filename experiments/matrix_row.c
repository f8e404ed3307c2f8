/* matrix_row.c - a run's headline figures from its report, the alpha-beta prediction, the CSV file */
#include "matrix_row.h"
#include "backends.h"
#include "predict.h"
#include "../base/atomicfile.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../net/link.h"
#include "../engine/sync.h"
#include "../engine/config_check.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The numeric columns, in CSV order, after the identifying ones. */
static const char *const row_metrics[] = {
    "throughput_samples_per_s", "step_time_median_s", "step_time_p95_s", "comm_exposed_s",
    "comm_total_s", "idle_s", "predicted_comm_s", "comm_ratio", "mem_peak_max_bytes", "mem_peak_min_bytes",
    "mem_peak_mean_bytes", "rank0_peak_bytes", "rank0_traffic_bytes", "servers", "server_peak_max_bytes",
    "server_traffic_max_bytes", "imbalance_memory", "imbalance_traffic", "imbalance_busy_time",
    "imbalance_memory_with_servers", "imbalance_traffic_with_servers", "final_loss", "final_accuracy",
    "diverged_step", "params", "buckets", NULL};

/* A number at a dotted path under o ("time_s.step.p95"), NAN when absent. */
static double row_num(const cJSON *o, const char *path) {
    char key[64];
    const char *p = path;
    while (o && *p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        if (l >= sizeof key) return NAN;
        memcpy(key, p, l);
        key[l] = 0;
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        p = dot ? dot + 1 : p + l;
    }
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

static int row_is_worker(const cJSON *r) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(r, "role");
    return !cJSON_IsString(role) || strcmp(role->valuestring, "server");
}

static void row_put(cJSON *row, const char *key, double x) {
    if (isfinite(x)) cJSON_AddNumberToObject(row, key, x);
    else cJSON_AddNullToObject(row, key);
}

int matrix_row_diverged(const cJSON *report, int *step) {
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(report, "summary");
    double k = row_num(sum, "diverged_step");
    if (step) *step = k >= 0 && k < 2147483647.0 ? (int)k : -1;
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "diverged"));
}

int matrix_row_differ(const cJSON *report, char *why, size_t len) {
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(report, "summary");
    if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(sum, "params_agree"))) return 0;
    size_t k = (size_t)snprintf(why, len, "its report says ranks");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(sum, "params_differ_ranks"))
        if (cJSON_IsNumber(e) && k + 16 < len) k += (size_t)snprintf(why + k, len - k, " %d", e->valueint);
    if (k + 40 < len) snprintf(why + k, len - k, " ended with other parameters than rank 0");
    return 1;
}

const char *matrix_row_transport(const cJSON *report) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(report, "summary"), "transport");
    return cJSON_IsString(t) ? t->valuestring : "";
}

double matrix_row_predict(const MatrixSpec *m, const MatrixCell *c, const char *transport, MatrixLink *used) {
    const Config *g = &c->cfg;
    const MatrixLink *l = matrix_spec_link(m, transport);
    MatrixLink own;
    LinkSpec emu; /* an emulated link (--link): its latency adds to every message, its rate bounds every byte */
    int emulated = link_parse(g->link, &emu) == RS_OK && emu.bytes_per_s > 0;
    if (!l && emulated) { /* the link is the one the run was given: an alpha-beta link by construction */
        memset(&own, 0, sizeof own);
        own.emulated = 1;
        own.alpha_s = PREDICT_EMULATED_ALPHA_S;
        own.beta_s_per_byte = 1.0 / emu.bytes_per_s;
        snprintf(own.source, sizeof own.source, "the emulated link --link %s (beta 1/its rate; alpha its latency + %.0f us "
                 "a message, the software's)", g->link, PREDICT_EMULATED_ALPHA_S * 1e6);
        l = &own;
    }
    if (!l) return -1;
    if (used) *used = *l;
    /* the gradient and each bucket as they travel: 4 bytes a parameter, 2 on a 16-bit --wire, 1 on
     * FP8 (1.5 on the ps's: bf16 replies), codec_wire_ratio */
    Arch arch = backend_arch(g);
    double eb = 4.0 * arch_wire_ratio(arch, g->wire);
    double n = eb * (double)config_param_count(g), alpha = l->alpha_s, beta = l->beta_s_per_byte;
    if (emulated) {
        alpha += emu.latency_s;
        if (1.0 / emu.bytes_per_s > beta) beta = 1.0 / emu.bytes_per_s;
    }
    double t = predict_step_comm(arch, g->ps_servers, g->nranks, g->nodes, config_partition_keys(g) > 0, n,
                                 g->bucket_mb * 1048576.0 * eb / 4,
                                 alpha, beta);
    if (t >= 0 && backend_driver(g) && g->global_batch > 0) { /* DataParallel's step */
        /* per sample: its inputs and labels out, its outputs in and their gradient out */
        int D, C;
        predict_dp_shape(g->model, g->layers[0], g->layers[g->nlayers - 1], g->seq_len, g->vocab,
                         !strncmp(g->data, "text:", 5), &D, &C);
        double d = predict_dp_data(g->nranks, g->global_batch, D, C, alpha, beta);
        t = d < 0 ? d : t + d;
    }
    return t;
}

static double row_traffic(const cJSON *r) { return row_num(r, "traffic.bytes_sent") + row_num(r, "traffic.bytes_received"); }

/* max / mean over every entry of ranks, workers and servers (what the report's imbalance, over
 * workers only, leaves out); NAN without server entries. */
static double row_ratio_all(const cJSON *ranks, double (*get)(const cJSON *)) {
    double mx = 0, sum = 0;
    int n = 0, servers = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, ranks) {
        double v = get(r);
        if (!isfinite(v)) continue;
        mx = v > mx ? v : mx;
        sum += v;
        n++;
        servers += !row_is_worker(r);
    }
    return servers && sum > 0 ? mx / (sum / n) : NAN;
}

static double row_peak(const cJSON *r) { return row_num(r, "memory.peak_bytes"); }

/* The figures that come from the report (NAN for what it lacks). */
static void row_figures(const cJSON *rep, cJSON *row) {
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(rep, "summary"), *r;
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(rep, "ranks");
    double n = 0, exp_sum = 0, tot_sum = 0, idle_sum = 0, mmax = NAN, mmin = NAN, msum = 0;
    double nserv = 0, speak = NAN, straffic = NAN;
    const cJSON *r0 = NULL;
    cJSON_ArrayForEach(r, ranks) {
        if (!row_is_worker(r)) {
            double pk = row_peak(r), t = row_traffic(r);
            nserv++;
            if (isnan(speak) || pk > speak) speak = pk;
            if (isnan(straffic) || t > straffic) straffic = t;
            continue;
        }
        if (row_num(r, "rank") == 0) r0 = r;
        double pk = row_num(r, "memory.peak_bytes");
        exp_sum += row_num(r, "time_s.phases.comm_exposed");
        tot_sum += row_num(r, "time_s.phases.comm_total");
        idle_sum += row_num(r, "time_s.phases.idle");
        msum += pk;
        if (isnan(mmax) || pk > mmax) mmax = pk;
        if (isnan(mmin) || pk < mmin) mmin = pk;
        n++;
    }
    row_put(row, "throughput_samples_per_s", row_num(sum, "throughput_samples_per_s"));
    row_put(row, "step_time_median_s", row_num(sum, "step_time_s"));
    row_put(row, "step_time_p95_s", row_num(r0, "time_s.step.p95"));
    row_put(row, "comm_exposed_s", n ? exp_sum / n : NAN);
    row_put(row, "comm_total_s", n ? tot_sum / n : NAN);
    row_put(row, "idle_s", n ? idle_sum / n : NAN);
    row_put(row, "servers", nserv);
    row_put(row, "server_peak_max_bytes", speak);
    row_put(row, "server_traffic_max_bytes", straffic);
    row_put(row, "imbalance_memory_with_servers", row_ratio_all(ranks, row_peak));
    row_put(row, "imbalance_traffic_with_servers", row_ratio_all(ranks, row_traffic));
    row_put(row, "mem_peak_max_bytes", mmax);
    row_put(row, "mem_peak_min_bytes", mmin);
    row_put(row, "mem_peak_mean_bytes", n ? msum / n : NAN);
    row_put(row, "rank0_peak_bytes", row_num(r0, "memory.peak_bytes"));
    row_put(row, "rank0_traffic_bytes", row_traffic(r0));
    row_put(row, "imbalance_memory", row_num(sum, "imbalance.memory"));
    row_put(row, "imbalance_traffic", row_num(sum, "imbalance.traffic"));
    row_put(row, "imbalance_busy_time", row_num(sum, "imbalance.busy_time"));
    /* a diverged run reached no loss: null, whatever number its last step shows */
    int step, diverged = matrix_row_diverged(rep, &step);
    row_put(row, "final_loss", diverged ? NAN : row_num(sum, "final_loss"));
    row_put(row, "final_accuracy", diverged ? NAN : row_num(sum, "final_accuracy"));
    row_put(row, "diverged_step", diverged && step >= 0 ? step : NAN);
}

/* The hosts (nodes) a report's processes ran on, each once, in rank order, comma-separated into
 * buf: "node0,node1"; "" without a report or a report that names none. */
static const char *row_hosts(const cJSON *report, char *buf, size_t len) {
    const cJSON *e;
    size_t k = 0;
    buf[0] = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(report, "ranks")) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(e, "host");
        if (!cJSON_IsString(h) || !h->valuestring[0] || strchr(h->valuestring, ',')) continue;
        size_t n = strlen(h->valuestring);
        int seen = 0;
        for (const char *p = buf; *p && !seen; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
            seen = !strncmp(p, h->valuestring, n) && (p[n] == ',' || p[n] == 0);
        if (seen || k + n + 2 > len) continue;
        k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? "," : "", h->valuestring);
    }
    return buf;
}

cJSON *matrix_row_make(const MatrixSpec *m, const MatrixCell *c, int rep, const MatrixOutcome *o,
                       const cJSON *report) {
    cJSON *row = cJSON_CreateObject();
    if (!row) return NULL;
    cJSON_AddStringToObject(row, "cell", c->id);
    cJSON_AddNumberToObject(row, "repeat", rep);
    cJSON *axes = cJSON_AddObjectToObject(row, "axes");
    for (int a = 0; a < m->naxes; a++) cJSON_AddItemToObject(axes, m->axis_name[a], cJSON_Duplicate(c->axis_val[a], 1));
    cJSON_AddStringToObject(row, "status", o->status);
    cJSON_AddNumberToObject(row, "exit_code", o->exit_code);
    cJSON_AddStringToObject(row, "error", o->error ? o->error : "");
    cJSON_AddNumberToObject(row, "wall_s", o->wall_s);
    cJSON_AddBoolToObject(row, "resumed", o->resumed);
    cJSON_AddStringToObject(row, "report", report ? o->report : "");
    const char *how = report ? matrix_row_transport(report) : "";
    cJSON_AddStringToObject(row, "transport", how);
    char hosts[1024];
    cJSON_AddStringToObject(row, "hosts", row_hosts(report, hosts, sizeof hosts));
    const cJSON *emulated = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(report, "config"), "link");
    cJSON_AddStringToObject(row, "link", cJSON_IsString(emulated) ? emulated->valuestring : "");
    MatrixLink l;
    double pred = report ? matrix_row_predict(m, c, how, &l) : -1;
    cJSON_AddStringToObject(row, "prediction_link", pred < 0 ? "" : l.emulated ? "emulated" : l.transport[0] ? l.transport : "default");
    cJSON *fig = cJSON_CreateObject();
    if (report) row_figures(report, fig);
    double meas = row_num(fig, "comm_total_s");
    size_t np = config_param_count(&c->cfg);
    Bucket *b = NULL;
    int nb = sync_plan_run(np, &c->cfg, &b);
    free(b);
    row_put(fig, "params", (double)np);
    row_put(fig, "buckets", nb >= 0 ? nb : NAN);
    for (int i = 0; row_metrics[i]; i++) {
        const char *k = row_metrics[i];
        double x = row_num(fig, k);
        if (!strcmp(k, "predicted_comm_s")) x = pred >= 0 ? pred : NAN;
        if (!strcmp(k, "comm_ratio")) x = pred > 0 ? meas / pred : NAN;
        row_put(row, k, x);
    }
    cJSON_Delete(fig);
    return row;
}

/* Writes one CSV field: quoted when it holds a comma, quote or newline. */
static void row_csv_text(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void row_csv_value(FILE *f, const cJSON *v) {
    char buf[64];
    if (cJSON_IsNumber(v)) {
        snprintf(buf, sizeof buf, "%.9g", v->valuedouble);
        fputs(buf, f);
    } else if (cJSON_IsString(v)) row_csv_text(f, v->valuestring);
    else if (cJSON_IsBool(v)) fputs(cJSON_IsTrue(v) ? "true" : "false", f);
    else if (cJSON_IsArray(v)) { /* layers */
        char *t = cJSON_PrintUnformatted(v);
        if (t) {
            t[strlen(t) - 1] = 0;
            row_csv_text(f, t + 1);
            cJSON_free(t);
        }
    }
    /* null: empty field */
}

int matrix_row_write_csv(const MatrixSpec *m, const cJSON *rows, const char *path) {
    static const char *const ident[] = {"status", "exit_code", "error", "wall_s", "resumed", "report", "transport", "link",
                                        "prediction_link", "hosts", NULL};
    AtomicFile af;
    RS_TRY(atomicfile_open(&af, path, 0644));
    FILE *f = af.f;
    fputs("cell,repeat", f);
    for (int a = 0; a < m->naxes; a++) {
        fputc(',', f);
        row_csv_text(f, m->axis_name[a]);
    }
    for (int i = 0; ident[i]; i++) { /* a column the run reports, named like an axis (--transport, --link): "report_" */
        int axis = 0;
        for (int a = 0; a < m->naxes; a++) axis |= !strcmp(m->axis_name[a], ident[i]);
        fprintf(f, ",%s%s", axis ? "report_" : "", ident[i]);
    }
    for (int i = 0; row_metrics[i]; i++) fprintf(f, ",%s", row_metrics[i]);
    fputc('\n', f);
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        row_csv_value(f, cJSON_GetObjectItemCaseSensitive(row, "cell"));
        fputc(',', f);
        row_csv_value(f, cJSON_GetObjectItemCaseSensitive(row, "repeat"));
        const cJSON *axes = cJSON_GetObjectItemCaseSensitive(row, "axes");
        for (int a = 0; a < m->naxes; a++) {
            fputc(',', f);
            row_csv_value(f, cJSON_GetObjectItemCaseSensitive(axes, m->axis_name[a]));
        }
        for (int i = 0; ident[i]; i++) {
            fputc(',', f);
            row_csv_value(f, cJSON_GetObjectItemCaseSensitive(row, ident[i]));
        }
        for (int i = 0; row_metrics[i]; i++) {
            fputc(',', f);
            row_csv_value(f, cJSON_GetObjectItemCaseSensitive(row, row_metrics[i]));
        }
        fputc('\n', f);
    }
    if (ferror(f)) {
        atomicfile_abort(&af);
        return rs_error(RS_ERR_RUNTIME, "%s: write failed", path);
    }
    return atomicfile_commit(&af);
}
