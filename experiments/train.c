/* train.c - one rank's training run: data, model, the step loop, per-step timing and the report */
#include "train.h"
#include "../common/atomicfile.h"
#include "../common/clock.h"
#include "../common/config.h"
#include "../common/ctrl.h"
#include "../common/launch.h"
#include "../ps/ps.h"
#include "../common/data.h"
#include "../common/device.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/model.h"
#include "../common/report.h"
#include "../common/sync.h"
#include "../common/trace.h"
#include "../common/zctx.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

enum { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_COMM_EXPOSED, PH_OPTIMIZER, PH_IDLE, PH_COMM_TOTAL, PH_N };
static const char *phase_names[PH_N] = {"data", "forward", "backward", "comm_exposed",
                                        "optimizer", "idle", "comm_total"};

/* Everything one rank's run holds. */
typedef struct {
    Config cfg;
    RankEnv env;
    void *zctx;
    Ctrl *ctrl;
    int rank, world, local_rank, local_world;
    Device dev;
    DataPair data;
    Sampler sampler;
    Model model;
    Bucket *buckets;
    int nbuckets;
    const SyncOps *sync;
    void *sync_state;
    int steps, steps_per_epoch;
    /* per-step records */
    double *step_s, (*phase_s)[PH_N];
    double *loss_sum, *correct;
    int *samples, *global_samples;
    /* eval curve */
    cJSON *eval_curve;
    double final_acc, final_eval_loss;
    /* host staging */
    float *hx;
    int *hy;
    /* backward → buckets */
    int next_bucket;
    double t_start, t_end;
    Trace *trace;         /* --trace: spans of this rank */
    double gemm_s0, gemm_s1;  /* CPU GEMM seconds at the end of warm-up and of the run */
    double wall_offset;   /* clock_wall() - clock_now(), for trace timestamps */
    char cmdline[2048];
} Run;

/* ---- data ---------------------------------------------------------------------------------- */

static int run_load_data(Run *r) {
    Config *c = &r->cfg;
    int in = c->layers[0], classes = c->layers[c->nlayers - 1];
    if (!strcmp(c->data, "synthetic"))
        return data_make_synthetic(in, classes, c->train_samples, c->eval_samples, (uint64_t)c->seed, &r->data);
    return data_load_mnist(c->data, in, classes, &r->data);
}

/* The step's global batch size and this rank's [lo, lo+len) slice of the sampler's order
 * (DataParallel's step: rank 0's slice is the whole global batch, the others' empty). */
static void run_step_slice(const Run *r, int step, int *global, int *lo, int *len) {
    const Config *c = &r->cfg;
    int i = step % r->steps_per_epoch;
    if (c->global_batch > 0) {
        int n = r->sampler.per_rank;
        int a = i * c->global_batch, b = a + c->global_batch;
        if (b > n) b = n;
        int clo, clen;
        scatter_chunk(b - a, r->world, r->rank, &clo, &clen);
        if (r->sync->scatter_batch) clo = 0, clen = r->rank == 0 ? b - a : 0;
        *global = b - a;
        *lo = a + clo;
        *len = clen;
    } else {
        int n = r->sampler.per_rank;
        int a = i * c->batch, b = a + c->batch;
        if (b > n) b = n;
        *global = (b - a) * r->world;
        *lo = a;
        *len = b - a;
    }
}

static int run_stage_batch(Run *r, int step) {
    int global, lo, len;
    if (step % r->steps_per_epoch == 0) sampler_set_epoch(&r->sampler, step / r->steps_per_epoch);
    run_step_slice(r, step, &global, &lo, &len);
    int dim = r->data.train.dim;
    for (int i = 0; i < len; i++) {
        int idx = r->cfg.global_batch > 0 ? sampler_global_index(&r->sampler, lo + i)
                                          : sampler_index(&r->sampler, lo + i);
        memcpy(r->hx + (size_t)i * dim, r->data.train.x + (size_t)idx * dim, (size_t)dim * sizeof(float));
        r->hy[i] = r->data.train.y[idx];
    }
    r->samples[step] = len;
    r->global_samples[step] = global;
    if (len == 0 || r->sync->scatter_batch) return RS_OK; /* DataParallel: scatter_batch moves it */
    RS_TRY(device_h2d(&r->dev, r->model.act[0], r->hx, (size_t)len * dim * sizeof(float)));
    return device_h2d(&r->dev, r->model.labels, r->hy, (size_t)len * sizeof(int));
}

/* ---- the step ------------------------------------------------------------------------------- */

/* Hands the back end every bucket whose slice backward has completed (layer l and above). */
static int run_layer_done(void *arg, int l) {
    Run *r = arg;
    if (!r->cfg.overlap) return RS_OK;
    size_t done_from = r->model.off[l];
    while (r->next_bucket < r->nbuckets && r->buckets[r->next_bucket].lo >= done_from)
        RS_TRY(r->sync->bucket_ready(r->sync_state, r->next_bucket++));
    return RS_OK;
}

/* One step. ev[0..3]: before forward, after forward (and the local loss), before backward,
 * after backward. */
static int run_step(Run *r, int step, DevEvent **ev) {
    Device *d = &r->dev;
    const SyncOps *so = r->sync;
    double *ph = r->phase_s[step];
    float stats[2], zero[2] = {0, 0};
    double t0 = clock_now();
    RS_TRY(run_stage_batch(r, step));
    RS_TRY(device_h2d(d, r->model.stats, zero, sizeof zero));
    double t1 = clock_now();
    if (so->begin_step) RS_TRY(so->begin_step(r->sync_state, step, r->global_samples[step]));
    /* ---- DataParallel (scatter_batch, loss): rank 0 scatters the batch and the parameters,
     * computes the loss over the gathered logits; dp has what those two measured ---- */
    SyncStep dp = {0};
    if (so->scatter_batch)
        RS_TRY(so->scatter_batch(r->sync_state, step, r->hx, r->hy, r->samples[step], &r->samples[step], &dp));
    double tf = clock_now();
    int B = r->samples[step];
    d->ops->event_record(d, ev[0], NULL);
    RS_TRY(model_forward(&r->model, B));
    if (!so->loss) model_loss(&r->model, B);
    d->ops->event_record(d, ev[1], NULL);
    if (so->loss) RS_TRY(so->loss(r->sync_state, B, &dp));
    double tl = clock_now(); /* DataParallel: forward and the loss are done (the loss op waits) */
    /* ---- end of DataParallel's part ---- */
    d->ops->event_record(d, ev[2], NULL);
    r->next_bucket = 0;
    RS_TRY(model_backward(&r->model, B, run_layer_done, r));
    d->ops->event_record(d, ev[3], NULL);
    while (r->next_bucket < r->nbuckets) RS_TRY(r->sync->bucket_ready(r->sync_state, r->next_bucket++));
    SyncStep ss = {0};
    RS_TRY(r->sync->finish(r->sync_state, step, r->global_samples[step], &ss));
    RS_TRY(device_d2h(d, stats, r->model.stats, sizeof stats));
    double t2 = clock_now();
    ph[PH_DATA] = t1 - t0;
    ph[PH_FORWARD] = d->ops->event_elapsed(d, ev[0], ev[1]) + dp.compute_s;
    ph[PH_BACKWARD] = d->ops->event_elapsed(d, ev[2], ev[3]);
    ph[PH_OPTIMIZER] = ss.optimizer_s;
    ph[PH_IDLE] = ss.idle_s + dp.idle_s;
    ph[PH_COMM_TOTAL] = ss.comm_s + dp.comm_s;
    double exposed = (t2 - t1) - ph[PH_FORWARD] - ph[PH_BACKWARD] - ss.optimizer_s - ph[PH_IDLE];
    ph[PH_COMM_EXPOSED] = exposed > 0 ? exposed : 0;
    r->step_s[step] = t2 - t0;
    if (r->trace) {
        double o = r->wall_offset, f = tf + ph[PH_FORWARD] - dp.compute_s, l = so->loss && tl > f ? tl : f;
        double b = l + ph[PH_BACKWARD];
        trace_span(r->trace, "data", 0, t0 + o, t1 + o);
        if (so->scatter_batch) trace_span(r->trace, "scatter", 0, t1 + o, tf + o);
        trace_span(r->trace, "forward", 0, tf + o, f + o);
        if (l > f) trace_span(r->trace, "loss", 0, f + o, l + o); /* gather, loss on rank 0, scatter */
        trace_span(r->trace, "backward", 0, l + o, b + o);
        if (ss.idle_s > 0) trace_span(r->trace, "idle", 0, b + o, b + ss.idle_s + o);
        if (t2 - ss.optimizer_s > b + ss.idle_s)
            trace_span(r->trace, "comm_wait", 0, b + ss.idle_s + o, t2 - ss.optimizer_s + o);
        trace_span(r->trace, "optimizer", 0, t2 - ss.optimizer_s + o, t2 + o);
    }
    r->loss_sum[step] = stats[0];
    r->correct[step] = stats[1];
    return RS_OK;
}

static int run_eval(Run *r, int step) {
    double acc, loss;
    RS_TRY(model_evaluate(&r->model, r->data.eval.x, r->data.eval.y, r->data.eval.n, &acc, &loss));
    r->final_acc = acc;
    r->final_eval_loss = loss;
    cJSON *pt = cJSON_CreateArray();
    cJSON_AddItemToArray(pt, cJSON_CreateNumber(step));
    cJSON_AddItemToArray(pt, cJSON_CreateNumber(acc));
    cJSON_AddItemToArray(pt, cJSON_CreateNumber(loss));
    cJSON_AddItemToArray(r->eval_curve, pt);
    log_info("# eval  step %5d  accuracy %.4f  loss %.4f", step, acc, loss);
    return RS_OK;
}

/* ---- metrics and the report ---------------------------------------------------------------- */

/* This rank's entry of the report's "ranks" array. */
static cJSON *run_rank_json(Run *r) {
    cJSON *o = cJSON_CreateObject();
    char buf[64];
    cJSON_AddNumberToObject(o, "rank", r->rank);
    cJSON_AddStringToObject(o, "role", "worker");
    cJSON_AddStringToObject(o, "device", device_name(&r->dev, buf, sizeof buf));
    long long samples = 0;
    for (int s = 0; s < r->steps; s++) samples += r->samples[s];
    cJSON_AddNumberToObject(o, "samples", (double)samples);

    MemStats ms;
    mem_snapshot(&ms);
    cJSON *mem = cJSON_AddObjectToObject(o, "memory");
    cJSON_AddNumberToObject(mem, "peak_bytes", (double)ms.peak_total);
    cJSON *tags = cJSON_AddObjectToObject(mem, "by_tag");
    for (int t = 0; t < MEM_NTAGS; t++) cJSON_AddNumberToObject(tags, mem_tag_name(t), (double)ms.peak[t]);
    size_t fr = 0, tot = 0;
    r->dev.ops->mem_info(&r->dev, &fr, &tot);
    cJSON_AddNumberToObject(mem, "device_used_bytes", (double)(tot - fr));
    cJSON_AddNumberToObject(mem, "host_peak_rss_bytes", (double)mem_host_peak_rss());

    SyncTraffic tr;
    r->sync->traffic(r->sync_state, &tr);
    cJSON *t = cJSON_AddObjectToObject(o, "traffic");
    cJSON_AddNumberToObject(t, "bytes_sent", (double)tr.bytes_sent);
    cJSON_AddNumberToObject(t, "bytes_received", (double)tr.bytes_received);
    cJSON_AddNumberToObject(t, "messages", (double)(tr.messages_sent + tr.messages_received));
    cJSON_AddNumberToObject(t, "messages_sent", (double)tr.messages_sent);
    cJSON_AddNumberToObject(t, "messages_received", (double)tr.messages_received);
    cJSON_AddNumberToObject(t, "dropped", (double)tr.dropped);
    cJSON_AddStringToObject(t, "transport", tr.transport ? tr.transport : "");

    int w = r->cfg.warmup < r->steps ? r->cfg.warmup : 0;
    int n = r->steps - w;
    cJSON *ts = cJSON_AddObjectToObject(o, "time_s");
    cJSON_AddItemToObject(ts, "step", report_dist_json(r->step_s + w, n));
    cJSON *ph = cJSON_AddObjectToObject(ts, "phases");
    double *col = malloc((size_t)(n > 0 ? n : 1) * sizeof *col);
    double busy = 0;
    for (int p = 0; p < PH_N; p++) {
        double sum = 0;
        for (int s = 0; s < n; s++) sum += (col[s] = r->phase_s[w + s][p]);
        cJSON_AddNumberToObject(ph, phase_names[p], n ? sum / n : 0);
        if (p == PH_DATA || p == PH_FORWARD || p == PH_BACKWARD || p == PH_OPTIMIZER) busy += n ? sum / n : 0;
    }
    free(col);
    cJSON_AddNumberToObject(ts, "busy", busy);
    if (r->dev.kind == DEV_CPU) cJSON_AddNumberToObject(ts, "gemm", n ? (r->gemm_s1 - r->gemm_s0) / n : 0);
    cJSON_AddNumberToObject(ts, "timed_steps", n);

    /* per-step sums the report's loss curve is built from (removed before writing) */
    cJSON *cv = cJSON_AddObjectToObject(o, "_curve");
    cJSON_AddItemToObject(cv, "loss_sum", cJSON_CreateDoubleArray(r->loss_sum, r->steps));
    cJSON_AddItemToObject(cv, "correct", cJSON_CreateDoubleArray(r->correct, r->steps));
    cJSON_AddItemToObject(cv, "samples", cJSON_CreateIntArray(r->samples, r->steps));
    if (r->trace) cJSON_AddItemToObject(o, "_trace", trace_json(r->trace));
    return o;
}

static double ratio_max_mean(cJSON *ranks, const char *a, const char *b, const char *c) {
    double mx = 0, sum = 0;
    int n = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, ranks) {
        cJSON *role = cJSON_GetObjectItem(it, "role");
        if (role && (!cJSON_IsString(role) || strcmp(role->valuestring, "worker"))) continue;
        cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(it, a), b);
        double v = x ? x->valuedouble : 0;
        if (c) {
            cJSON *y = cJSON_GetObjectItem(cJSON_GetObjectItem(it, a), c);
            v += y ? y->valuedouble : 0;
        }
        if (v > mx) mx = v;
        sum += v;
        n++;
    }
    return sum > 0 ? mx / (sum / n) : 1.0;
}

/* Moves every member's "_trace" events out of ranks[] into one Chrome trace file (rank 0). */
static int run_write_trace(Run *r, cJSON *ranks) {
    cJSON *all = cJSON_CreateArray(), *it;
    cJSON_ArrayForEach(it, ranks) {
        cJSON *t = cJSON_DetachItemFromObject(it, "_trace");
        if (!t) continue;
        cJSON *e;
        while ((e = cJSON_DetachItemFromArray(t, 0))) cJSON_AddItemToArray(all, e);
        cJSON_Delete(t);
    }
    int rc = r->cfg.trace[0] ? report_write_atomic(r->cfg.trace, all) : RS_OK;
    if (rc == RS_OK && r->cfg.trace[0]) log_info("# trace: %s (open in Perfetto or chrome://tracing)", r->cfg.trace);
    cJSON_Delete(all);
    return rc;
}

/* Builds the whole report from every rank's entry (ranks[] owned by the report after this). */
static cJSON *run_report_json(Run *r, cJSON *ranks) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", REPORT_SCHEMA);
    cJSON *run = cJSON_AddObjectToObject(root, "run");
    char id[96], started[64], host[256] = "";
    time_t now = (time_t)r->t_start;
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(id, sizeof id, "%s-%d", started, (int)getpid());
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(run, "id", id);
    cJSON_AddStringToObject(run, "started", started);
    cJSON_AddStringToObject(run, "git", RS_GIT);
    cJSON_AddStringToObject(run, "host", host);
    cJSON_AddStringToObject(run, "cmdline", r->cmdline);
    cJSON_AddNumberToObject(run, "world", r->world);
    cJSON_AddNumberToObject(run, "wall_s", r->t_end - r->t_start);
    cJSON_AddItemToObject(root, "env", report_env_json());
    cJSON_AddItemToObject(root, "config", config_json(&r->cfg));
    cJSON_AddItemToObject(root, "ranks", ranks);

    /* global loss curve: sample-weighted over ranks */
    int S = r->steps;
    double *ls = calloc((size_t)S, sizeof *ls), *cs = calloc((size_t)S, sizeof *cs);
    long long *ns = calloc((size_t)S, sizeof *ns), total = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, ranks) {
        cJSON *cv = cJSON_GetObjectItem(it, "_curve");
        if (!cv) continue;
        cJSON *a = cJSON_GetObjectItem(cv, "loss_sum"), *b = cJSON_GetObjectItem(cv, "correct"),
              *c = cJSON_GetObjectItem(cv, "samples");
        for (int s = 0; s < S; s++) { /* a member's entry is outside input: missing values count 0 */
            const cJSON *x = cJSON_GetArrayItem(a, s), *y = cJSON_GetArrayItem(b, s), *z = cJSON_GetArrayItem(c, s);
            ls[s] += cJSON_IsNumber(x) ? x->valuedouble : 0;
            cs[s] += cJSON_IsNumber(y) ? y->valuedouble : 0;
            ns[s] += cJSON_IsNumber(z) ? z->valueint : 0;
        }
        cJSON_DeleteItemFromObject(it, "_curve");
    }
    cJSON *sum = cJSON_AddObjectToObject(root, "summary");
    cJSON *curve = cJSON_CreateArray();
    for (int s = 0; s < S; s++) {
        cJSON *pt = cJSON_CreateArray();
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(s));
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(ns[s] ? ls[s] / ns[s] : 0));
        cJSON_AddItemToArray(curve, pt);
    }
    int w = r->cfg.warmup < S ? r->cfg.warmup : 0;
    double timed = 0;
    for (int s = w; s < S; s++) {
        timed += r->step_s[s];
        total += ns[s];
    }
    cJSON_AddNumberToObject(sum, "samples", 0);
    long long all = 0;
    for (int s = 0; s < S; s++) all += ns[s];
    cJSON_ReplaceItemInObject(sum, "samples", cJSON_CreateNumber((double)all));
    cJSON_AddNumberToObject(sum, "steps", S);
    cJSON_AddNumberToObject(sum, "throughput_samples_per_s", timed > 0 ? total / timed : 0);
    cJSON_AddNumberToObject(sum, "step_time_s", report_percentile(r->step_s + w, S - w, 50));
    cJSON_AddNumberToObject(sum, "final_loss", S && ns[S - 1] ? ls[S - 1] / ns[S - 1] : 0);
    cJSON_AddNumberToObject(sum, "final_train_accuracy", S && ns[S - 1] ? cs[S - 1] / ns[S - 1] : 0);
    cJSON_AddNumberToObject(sum, "final_accuracy", r->final_acc);
    cJSON_AddNumberToObject(sum, "final_eval_loss", r->final_eval_loss);
    const char *slowest = ""; /* the pace the back end moved at: its slowest member's link */
    cJSON_ArrayForEach(it, ranks) {
        const cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(it, "traffic"), "transport");
        if (cJSON_IsString(t)) slowest = sync_transport_slower(slowest, t->valuestring);
    }
    cJSON_AddStringToObject(sum, "transport", slowest);
    cJSON_AddItemToObject(sum, "loss_curve", curve);
    cJSON_AddItemToObject(sum, "eval_curve", r->eval_curve);
    r->eval_curve = NULL;
    cJSON *imb = cJSON_AddObjectToObject(sum, "imbalance");
    cJSON_AddNumberToObject(imb, "memory", ratio_max_mean(ranks, "memory", "peak_bytes", NULL));
    cJSON_AddNumberToObject(imb, "traffic", ratio_max_mean(ranks, "traffic", "bytes_sent", "bytes_received"));
    cJSON_AddNumberToObject(imb, "busy_time", ratio_max_mean(ranks, "time_s", "busy", NULL));
    free(ls);
    free(cs);
    free(ns);
    return root;
}

/* ---- set-up and tear-down ------------------------------------------------------------------- */

static void run_free(Run *r) {
    if (r->sync && r->sync_state) r->sync->destroy(r->sync_state);
    ctrl_close(r->ctrl);
    zctx_close(r->zctx);
    model_free(&r->model);
    if (r->dev.ops) device_close(&r->dev);
    sampler_free(&r->sampler);
    datapair_free(&r->data);
    free(r->buckets);
    free(r->step_s);
    free(r->phase_s);
    free(r->loss_sum);
    free(r->correct);
    free(r->samples);
    free(r->global_samples);
    free(r->hx);
    free(r->hy);
    cJSON_Delete(r->eval_curve);
    trace_free(r->trace);
}

/* Checks --report and --trace can be written, before any work. */
static int run_check_outputs(const Config *c) {
    if (report_check_writable(c->report)) return rs_error(RS_ERR_INPUT, "--report %s", rs_errmsg());
    if (c->trace[0] && report_check_writable(c->trace)) return rs_error(RS_ERR_INPUT, "--trace %s", rs_errmsg());
    if (c->save_params[0] && report_check_writable(c->save_params))
        return rs_error(RS_ERR_INPUT, "--save-params %s", rs_errmsg());
    return RS_OK;
}

static int run_setup(Run *r) {
    Config *c = &r->cfg;
    if (r->rank == 0) RS_TRY(run_check_outputs(c));
    if (c->trace[0]) {
        char label[32];
        snprintf(label, sizeof label, "rank %d", r->rank);
        r->trace = trace_new(r->rank, label);
        r->wall_offset = clock_wall() - clock_now();
    }
    RS_TRY(run_load_data(r));
    log_info("# data: %s (%d train, %d eval, %d values, %d classes)", r->data.source, r->data.train.n,
             r->data.eval.n, r->data.train.dim, c->layers[c->nlayers - 1]);
    int sampler_world = c->global_batch > 0 ? 1 : r->world;
    int sampler_rank = c->global_batch > 0 ? 0 : r->rank;
    RS_TRY(sampler_init(&r->sampler, r->data.train.n, sampler_world, sampler_rank, c->shuffle, c->drop_last,
                        (uint64_t)c->seed));
    int per_step = c->global_batch > 0 ? c->global_batch : c->batch;
    r->steps_per_epoch = (r->sampler.per_rank + per_step - 1) / per_step;
    r->steps = c->steps > 0 ? c->steps : c->epochs > 0 ? c->epochs * r->steps_per_epoch : 100;

    int fell_back = 0;
    RS_TRY(device_open(&r->dev, c->device, r->local_rank, &fell_back));
    if (fell_back) log_info("# --device auto: no usable GPU, running on the CPU");
    if (r->dev.kind == DEV_CPU) {
        int th = c->threads;
        if (th == 0) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            th = (int)(cores / (r->local_world > 0 ? r->local_world : 1));
            if (th < 1) th = 1;
        }
        kernels_cpu_set_threads(th);
    }
    /* the back end: --sync, and for ps --ps-mode (DataParallel's step has its own table) */
    r->sync = sync_find(c->sync);
    if (!r->sync) return RS_ERR_INPUT;
    if (!strcmp(c->sync, "ps") && !strcmp(c->ps_mode, "dataparallel")) r->sync = sync_ps_dataparallel();
    int max_batch = c->global_batch > 0 ? (c->global_batch + r->world - 1) / r->world : c->batch;
    /* DataParallel: rank 0 stages the whole global batch on the host */
    int staged = r->sync->scatter_batch && r->rank == 0 && c->global_batch > 0 ? c->global_batch : max_batch;
    RS_TRY(model_init(&r->model, &r->dev, c->layers, c->nlayers, max_batch, (uint64_t)c->seed));
    r->nbuckets = sync_plan_buckets(r->model.nparams, c->bucket_mb * 1048576.0, &r->buckets);
    if (r->nbuckets < 0) return rs_error(RS_ERR_RUNTIME, "out of memory planning buckets");

    int S = r->steps;
    r->step_s = calloc((size_t)S, sizeof *r->step_s);
    r->phase_s = calloc((size_t)S, sizeof *r->phase_s);
    r->loss_sum = calloc((size_t)S, sizeof *r->loss_sum);
    r->correct = calloc((size_t)S, sizeof *r->correct);
    r->samples = calloc((size_t)S, sizeof *r->samples);
    r->global_samples = calloc((size_t)S, sizeof *r->global_samples);
    r->hx = malloc((size_t)staged * r->data.train.dim * sizeof(float));
    r->hy = malloc((size_t)staged * sizeof(int));
    r->eval_curve = cJSON_CreateArray();
    if (!r->step_s || !r->phase_s || !r->loss_sum || !r->correct || !r->samples || !r->global_samples ||
        !r->hx || !r->hy || !r->eval_curve)
        return rs_error(RS_ERR_RUNTIME, "out of host memory for %d steps", S);

    RS_TRY(zctx_open(&r->zctx, c, &r->env));
    SyncJob job = {.cfg = c, .model = &r->model, .dev = &r->dev, .rank = r->rank, .world = r->world,
                   .local_rank = r->local_rank, .local_world = r->local_world, .ctrl = NULL,
                   .zctx = r->zctx, .addr = r->env.bind, .token = r->env.token,
                   .buckets = r->buckets, .nbuckets = r->nbuckets, .timeout = c->timeout,
                   .trace = r->trace};
    char canon[8192];
    config_canonical(c, canon, sizeof canon);
    RS_TRY(sync_start(r->sync, &job, &r->env, canon, &r->sync_state, &r->ctrl));
    return r->sync->broadcast_params(r->sync_state);
}

static int run_train(Run *r) {
    Device *d = &r->dev;
    DevEvent *ev[4] = {d->ops->event_create(d), d->ops->event_create(d), d->ops->event_create(d),
                       d->ops->event_create(d)};
    int rc = RS_OK;
    char name[64];
    log_info("# train: %d steps of %s on %s, %d rank%s, sync %s, %zu parameters, %d bucket%s", r->steps,
             r->cfg.global_batch > 0 ? "a global batch" : "a per-rank batch", device_name(d, name, sizeof name),
             r->world, r->world > 1 ? "s" : "", r->cfg.sync, r->model.nparams, r->nbuckets,
             r->nbuckets > 1 ? "s" : "");
    int every = r->steps >= 10 ? r->steps / 10 : 1;
    for (int s = 0; s < r->steps && rc == RS_OK; s++) {
        if (s == (r->cfg.warmup < r->steps ? r->cfg.warmup : 0)) r->gemm_s0 = kernels_cpu_gemm_seconds();
        rc = run_step(r, s, ev);
        if (rc) break;
        if (r->rank == 0 && r->cfg.eval_every > 0 && (s + 1) % r->cfg.eval_every == 0 && s + 1 < r->steps)
            rc = run_eval(r, s + 1);
        /* rank 0's loss sum covers the global batch under DataParallel's step */
        int n = r->sync->loss ? r->global_samples[s] : r->samples[s];
        if ((s + 1) % every == 0 || s + 1 == r->steps)
            log_info("step %5d/%d  loss %.4f  (rank-local)  %.1f ms/step", s + 1, r->steps,
                     n ? r->loss_sum[s] / n : 0.0, r->step_s[s] * 1e3);
    }
    r->gemm_s1 = kernels_cpu_gemm_seconds();
    if (rc == RS_OK && r->rank == 0) rc = run_eval(r, r->steps); /* parameters are equal on every rank */
    for (int i = 0; i < 4; i++) d->ops->event_destroy(d, ev[i]);
    return rc;
}

/* Writes the final parameters (rank 0, --save-params) as an atomic file (common/atomicfile.h). */
static int run_save_params(Run *r) {
    const char *path = r->cfg.save_params;
    size_t bytes = r->model.nparams * sizeof(float);
    float *h = malloc(bytes);
    if (!h) return rs_error(RS_ERR_RUNTIME, "out of memory saving parameters");
    int rc = device_d2h(&r->dev, h, r->model.params, bytes);
    if (rc == RS_OK) rc = atomicfile_write(path, h, bytes, 0644);
    free(h);
    if (rc != RS_OK) {
        char why[1200];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        return rs_error(rc, "--save-params %s", why);
    }
    return RS_OK;
}

/* Every member's report entry to rank 0 (*ranks set on rank 0 only). */
static int run_gather(Run *r, cJSON **ranks) {
    cJSON *mine = run_rank_json(r);
    if (!r->ctrl) {
        *ranks = cJSON_CreateArray();
        cJSON_AddItemToArray(*ranks, mine);
        return RS_OK;
    }
    char *text = cJSON_PrintUnformatted(mine);
    cJSON_Delete(mine);
    char **all = NULL;
    int rc = text ? ctrl_gather(r->ctrl, text, &all) : rs_error(RS_ERR_RUNTIME, "out of memory");
    free(text);
    if (rc != RS_OK || r->rank != 0) return rc;
    int n = ctrl_members(r->ctrl);
    *ranks = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_Parse(all[i] ? all[i] : "");
        if (!e) {
            rc = rs_error(RS_ERR_PEER, "member %d sent an unreadable report entry", i);
            break;
        }
        cJSON_AddItemToArray(*ranks, e);
    }
    ctrl_free_texts(all, n);
    if (rc != RS_OK) {
        cJSON_Delete(*ranks);
        *ranks = NULL;
    }
    return rc;
}

static void run_cmdline(Run *r, int argc, char **argv) {
    size_t k = snprintf(r->cmdline, sizeof r->cmdline, "ringside train");
    for (int i = 0; i < argc && k < sizeof r->cmdline; i++)
        k += (size_t)snprintf(r->cmdline + k, sizeof r->cmdline - k, " %s", argv[i]);
}

/* The launcher's side of `train -n N`: checks what can be checked once, then starts the ranks. */
static int train_launch(const Config *c, int servers, int argc, char **argv) {
    int rc = run_check_outputs(c);
    if (rc == RS_OK && !sync_find(c->sync)) rc = RS_ERR_INPUT;
    if (rc != RS_OK) {
        log_error("%s", rs_errmsg());
        return rc;
    }
    return launch_command("train", c->nranks, servers, argc, argv);
}

int train_main(int argc, char **argv) {
    Run *r = calloc(1, sizeof *r);
    if (!r) return rs_error(RS_ERR_RUNTIME, "out of memory");
    config_defaults(&r->cfg);
    int help = 0, rc = config_parse(&r->cfg, argc, argv, &help);
    if (help) {
        printf("usage: ringside train [options]\n\nTrains the MLP; with -n N, on N local ranks.\n\n");
        config_usage(stdout);
        free(r);
        return RS_OK;
    }
    if (rc == RS_OK) rc = config_validate(&r->cfg);
    if (rc != RS_OK) {
        log_error("%s", rs_errmsg());
        fprintf(stderr, "usage: ringside train [options]   (ringside train --help lists them)\n");
        free(r);
        return rc;
    }
    log_set_quiet(r->cfg.quiet);
    log_set_verbose(r->cfg.verbose);
    if ((rc = rankenv_detect(&r->env)) != RS_OK) {
        log_error("%s", rs_errmsg());
        free(r);
        return rc;
    }
    int servers = !strcmp(r->cfg.sync, "ps") && !strcmp(r->cfg.ps_placement, "dedicated") ? r->cfg.ps_servers : 0;
    if (!r->env.launched && (r->cfg.nranks > 1 || servers > 0)) {
        rc = train_launch(&r->cfg, servers, argc, argv);
        free(r);
        return rc;
    }
    if (r->env.launched) {
        r->env.servers = servers;
        r->cfg.nranks = r->env.world;
        log_set_rank(r->env.member);
    }
    if (r->env.member >= r->env.world) {
        rc = ps_server_main(&r->cfg, &r->env);
        free(r);
        return rc;
    }
    run_cmdline(r, argc, argv);
    r->rank = r->env.member;
    r->world = r->env.world;
    r->local_rank = r->env.local_rank;
    r->local_world = r->env.local_world;
    r->t_start = clock_wall();
    rc = run_setup(r);
    if (rc == RS_OK) rc = run_train(r);
    r->t_end = clock_wall();
    if (rc == RS_OK && r->sync->close) rc = r->sync->close(r->sync_state); /* goodbye, before the gather */
    cJSON *ranks = NULL;
    if (rc == RS_OK) rc = run_gather(r, &ranks);
    if (rc == RS_OK && r->rank == 0) rc = run_write_trace(r, ranks);
    if (rc == RS_OK && r->rank == 0 && r->cfg.save_params[0]) rc = run_save_params(r);
    if (rc != RS_OK) cJSON_Delete(ranks);
    if (rc == RS_OK && r->rank == 0) {
        cJSON *root = run_report_json(r, ranks);
        rc = report_write_atomic(r->cfg.report, root);
        if (rc == RS_OK) {
            cJSON *sum = cJSON_GetObjectItem(root, "summary");
            log_info("# final: loss %.4f  eval accuracy %.4f  throughput %.0f samples/s  step %.2f ms",
                     cJSON_GetObjectItem(sum, "final_loss")->valuedouble,
                     cJSON_GetObjectItem(sum, "final_accuracy")->valuedouble,
                     cJSON_GetObjectItem(sum, "throughput_samples_per_s")->valuedouble,
                     cJSON_GetObjectItem(sum, "step_time_s")->valuedouble * 1e3);
            log_info("# report: %s", r->cfg.report);
        }
        cJSON_Delete(root);
    }
    if (rc != RS_OK) log_error("%s", rs_errmsg());
    run_free(r);
    free(r);
    return rc;
}
