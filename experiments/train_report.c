/* train_report.c - a rank's run into the report: its entry, the gather to rank 0, the loss curves, the phases, the replicas' check, the trace */
#include "backends.h"
#include "train.h"
#include "train_run.h"
#include "../base/atomicfile.h"
#include "../base/clock.h"
#include "../base/err.h"
#include "../base/hash.h"
#include "../base/log.h"
#include "../engine/report.h"
#include "../engine/sync.h"
#include "../net/link.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- metrics and the report ---------------------------------------------------------------- */

/* Under async and ssp: the server's step each local step computed on and had its push applied
 * in (pushes / N: the loss curve's x and the summary's pushes per step), this rank's timed
 * seconds, and the entry's "staleness" of the parameters it computed on. */
static void run_rank_async(Run *r, cJSON *o, cJSON *cv, const StepTimes *times, int n, int w) {
    double *at = malloc((size_t)(r->done ? r->done : 1) * sizeof *at), *in = malloc((size_t)(r->done ? r->done : 1) * sizeof *in);
    double timed = 0, mean = 0;
    int mx = 0;
    for (int s = 0; at && in && s < r->done; s++) {
        at[s] = (double)(r->pulled[s] / r->world);
        in[s] = (double)((r->applied[s] > 0 ? r->applied[s] - 1 : 0) / r->world);
        mean += r->stale[s];
        if (r->stale[s] > mx) mx = r->stale[s];
    }
    if (w < n) timed = times[n - 1].start + times[n - 1].step - times[w].start; /* wall time, gaps included */
    if (at && in) {
        cJSON_AddItemToObject(cv, "at", cJSON_CreateDoubleArray(at, r->done));
        cJSON_AddItemToObject(cv, "applied_in", cJSON_CreateDoubleArray(in, r->done));
    }
    free(at);
    free(in);
    long long timed_samples = 0;
    for (int s = w; s < r->done; s++) timed_samples += r->samples[s];
    cJSON_AddNumberToObject(cv, "timed_s", timed); /* from its first timed step to its last step's end */
    cJSON_AddNumberToObject(cv, "timed_samples", (double)timed_samples);
    cJSON *st = cJSON_AddObjectToObject(o, "staleness");
    cJSON_AddNumberToObject(st, "steps", r->done);
    cJSON_AddNumberToObject(st, "mean", r->done ? mean / r->done : 0);
    cJSON_AddNumberToObject(st, "max", mx);
}

/* This rank's entry of the report's "ranks" array (engine/report.h), with its timeline. */
static cJSON *run_rank_json(Run *r) {
    long long samples = 0;
    for (int s = 0; s < r->done; s++) samples += r->samples[s];
    SyncTraffic tr;
    engine_traffic(r->engine, &tr);
    cJSON *o = report_entry(r->rank, "worker", &r->dev, samples, &tr);
    cJSON_AddStringToObject(o, "params_hash", r->params_hash);
    int n;
    const StepTimes *times = engine_times(r->engine, &n);
    double busy;
    long long ssteps;
    engine_server_busy(r->engine, &busy, &ssteps);
    report_entry_timeline(o, times, n, r->wall_offset, busy, ssteps);
    int w = train_warm(r, r->done);
    cJSON *ts = cJSON_AddObjectToObject(o, "time_s");
    if (r->dev.kind == DEV_CPU) cJSON_AddNumberToObject(ts, "gemm", r->done - w ? (r->gemm_s1 - r->gemm_s0 - r->gemm_eval) / (r->done - w) : 0);

    /* per-step sums the report's loss curve is built from (removed before writing); a NaN or an
     * infinity travels as its string (report_number), since JSON has none and cJSON prints null */
    cJSON *cv = cJSON_AddObjectToObject(o, "_curve");
    cJSON_AddItemToObject(cv, "loss_sum", report_number_array(r->loss_sum, r->done));
    cJSON_AddItemToObject(cv, "correct", report_number_array(r->correct, r->done));
    cJSON_AddItemToObject(cv, "samples", cJSON_CreateIntArray(r->samples, r->done));
    if (!r->lockstep) {
        double *end = malloc((size_t)(n > 0 ? n : 1) * sizeof *end); /* each local step's end, own clock */
        for (int s = 0; end && s < n; s++) end[s] = times[s].start + times[s].step;
        if (end) cJSON_AddItemToObject(cv, "end", cJSON_CreateDoubleArray(end, n));
        free(end);
        run_rank_async(r, o, cv, times, n, w);
    }
    if (r->trace) cJSON_AddItemToObject(o, "_trace", trace_json(r->trace));
    return o;
}

/* One per-step sum of a member's "_curve": 0 when absent, its value when a number or an encoded
 * non-finite one (report_value), NaN when something else stands there. */
static double run_sum_value(const cJSON *x) {
    double v;
    if (!x) return 0;
    return report_value(x, &v) ? v : NAN;
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

/* Moves every member's "_trace" events out of ranks[] into one array of Chrome trace events
 * (rank 0, before the report is built from ranks[]). Caller owns it; NULL on OOM. */
static cJSON *run_take_trace(cJSON *ranks) {
    cJSON *all = cJSON_CreateArray(), *it;
    cJSON_ArrayForEach(it, ranks) {
        cJSON *t = cJSON_DetachItemFromObject(it, "_trace");
        if (!t) continue;
        cJSON *e;
        while (all && (e = cJSON_DetachItemFromArray(t, 0))) cJSON_AddItemToArray(all, e);
        cJSON_Delete(t);
    }
    return all;
}

/* Writes run_take_trace's events as the --trace file, after the report (which stays whatever
 * happens here). 0 (also without --trace), or the write's status with rs_errmsg() naming the file. */
static int run_write_trace(Run *r, cJSON *events) {
    if (!r->cfg.trace[0]) return RS_OK;
    int rc = events ? report_write_atomic(r->cfg.trace, events) : rs_error(RS_ERR_RUNTIME, "out of memory");
    if (rc != RS_OK) {
        char why[1200], head[1100];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        snprintf(head, sizeof head, "report %s: ", r->cfg.trace); /* the writer's words name the file as a report */
        const char *w = strncmp(why, head, strlen(head)) ? why : why + strlen(head);
        return rs_error(rc, "--trace %s: the trace was not written: %s (the report %s is written)", r->cfg.trace, w, r->cfg.report);
    }
    log_info("# trace: %s (open in Perfetto or chrome://tracing)", r->cfg.trace);
    return RS_OK;
}

/* Builds the whole report from every rank's entry (ranks[] owned by the report after this). */
/* Whether the back end promises every worker rank 0's parameters, bit for bit, at the end: a
 * lockstep step that hands every rank the same sum or the same parameters. Not under async and
 * ssp (each worker holds the version it last pulled), DataParallel's step (the other ranks get
 * the last update with a next step that never comes) or --sync none (every rank trains alone). */
static int run_replicas_promised(const Run *r) {
    return r->lockstep && r->backend && strcmp(r->backend->family, "none") && !(r->driver && r->driver->scatter);
}

/* summary.params_agree and params_differ_ranks (rank 0): every worker's params_hash against rank 0's where
 * the back end promises equality (null where it does not); r->ndiffer and r->differ name the others. */
static void run_replicas(Run *r, const cJSON *ranks, cJSON *sum) {
    const char *h0 = r->params_hash; /* this is rank 0: its own hash is the one its entry carries */
    const cJSON *e;
    cJSON *diff = cJSON_CreateArray();
    r->ndiffer = 0;
    r->differ[0] = 0;
    int promised = run_replicas_promised(r) && r->world > 1;
    cJSON_ArrayForEach(e, ranks) {
        const cJSON *k = cJSON_GetObjectItem(e, "rank"), *h = cJSON_GetObjectItem(e, "params_hash");
        const cJSON *role = cJSON_GetObjectItem(e, "role");
        if (!promised || (cJSON_IsString(role) && strcmp(role->valuestring, "worker")) || !cJSON_IsNumber(k) ||
            k->valueint == 0 || (cJSON_IsString(h) && !strcmp(h->valuestring, h0)))
            continue;
        cJSON_AddItemToArray(diff, cJSON_CreateNumber(k->valueint));
        size_t l = strlen(r->differ);
        if (l + 16 < sizeof r->differ) snprintf(r->differ + l, sizeof r->differ - l, "%s%d", l ? ", " : "", k->valueint);
        r->ndiffer++;
    }
    if (promised) cJSON_AddBoolToObject(sum, "params_agree", r->ndiffer == 0);
    else cJSON_AddNullToObject(sum, "params_agree");
    cJSON_AddItemToObject(sum, "params_differ_ranks", diff);
}

static cJSON *run_report_json(Run *r, cJSON *ranks) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", REPORT_SCHEMA);
    cJSON *run = report_run_json(r->t_start, r->cmdline, 1);
    cJSON_AddItemToObject(root, "run", run);
    cJSON_AddNumberToObject(run, "world", r->world);
    cJSON_AddNumberToObject(run, "wall_s", r->t_end - r->t_start);
    cJSON *env = backend_env_json();
    double worst = 0, unc = 0; /* every worker's clock against rank 0's (the idle times use it) */
    for (int i = 0; r->engine && i < r->world; i++) {
        double o, u;
        engine_clock_offset(r->engine, i, &o, &u);
        if (fabs(o) > fabs(worst)) worst = o;
        if (u > unc) unc = u;
    }
    cJSON_AddItemToObject(env, "link", report_link_json());
    cJSON *co = cJSON_AddObjectToObject(env, "clock_offset");
    cJSON_AddNumberToObject(co, "max_abs_s", fabs(worst));
    cJSON_AddNumberToObject(co, "uncertainty_s", unc);
    cJSON_AddItemToObject(root, "env", env);
    cJSON_AddItemToObject(root, "config", config_json(&r->cfg));
    cJSON_AddItemToObject(root, "backend", backend_json(&r->cfg));
    report_transport_received(ranks); /* each member's received side, from its node's */
    cJSON_AddItemToObject(root, "ranks", ranks);

    /* global loss curve: sample-weighted over ranks; under async a local step counts at the
     * server's step its parameters came from (pushes applied / N) */
    int S = r->done;
    cJSON *it;
    if (!r->lockstep) {
        S = 0;
        cJSON_ArrayForEach(it, ranks) {
            cJSON *x, *at = cJSON_GetObjectItem(cJSON_GetObjectItem(it, "_curve"), "at");
            cJSON_ArrayForEach(x, at) if (cJSON_IsNumber(x) && x->valuedouble + 1 > S && x->valuedouble < 1e9) S = (int)x->valuedouble + 1;
        }
    }
    double *ls = calloc((size_t)(S ? S : 1), sizeof *ls), *cs = calloc((size_t)(S ? S : 1), sizeof *cs);
    double *tc = calloc((size_t)(S ? S : 1), sizeof *tc); /* the time curve: when each step's loss was complete */
    int nt;
    const StepTimes *T = r->engine ? engine_times(r->engine, &nt) : NULL; /* rank 0's steps: every rank's pace */
    if (!T) nt = 0;
    double origin = nt > r->first ? T[r->first].start : 0; /* rank 0's first step's start (--resume: this run's) */
    long long *ns = calloc((size_t)(S ? S : 1), sizeof *ns), total = 0, all = 0;
    double async_timed = 0;
    int *pushes = r->lockstep ? NULL : calloc((size_t)(S ? S : 1) * (size_t)r->world, sizeof *pushes), past = 0;
    cJSON_ArrayForEach(it, ranks) {
        cJSON *cv = cJSON_GetObjectItem(it, "_curve");
        if (!cv) continue;
        cJSON *a = cJSON_GetObjectItem(cv, "loss_sum"), *b = cJSON_GetObjectItem(cv, "correct"),
              *c = cJSON_GetObjectItem(cv, "samples"), *at = cJSON_GetObjectItem(cv, "at"),
              *in = cJSON_GetObjectItem(cv, "applied_in"), *en = cJSON_GetObjectItem(cv, "end");
        int n = cJSON_GetArraySize(c), rk = cJSON_GetObjectItem(it, "rank") ? cJSON_GetObjectItem(it, "rank")->valueint : 0;
        double off = 0, off_unc; /* this member's clock minus rank 0's */
        if (r->engine && rk > 0 && rk < r->world) engine_clock_offset(r->engine, rk, &off, &off_unc);
        /* the arrays walked side by side (cJSON's indexed access walks from the head each time);
         * a member's entry is outside input: missing values count 0, a value there that is no
         * number (nor an encoded NaN or infinity) counts NaN, never a perfect 0 */
#define FIRST(arr) (cJSON_IsArray(arr) ? (arr)->child : NULL)
#define NEXT(v) ((v) ? (v)->next : NULL)
        const cJSON *x = FIRST(a), *y = FIRST(b), *z = FIRST(c), *g = FIRST(at), *p = FIRST(in), *e = FIRST(en);
        for (int s = 0; s < n; s++, x = NEXT(x), y = NEXT(y), z = NEXT(z), g = NEXT(g), p = NEXT(p), e = NEXT(e)) {
#undef FIRST
#undef NEXT
            int k = r->lockstep ? s : cJSON_IsNumber(g) ? (int)g->valuedouble : -1;
            all += cJSON_IsNumber(z) ? z->valueint : 0;
            if (k < 0 || k >= S) continue;
            ls[k] += run_sum_value(x);
            cs[k] += run_sum_value(y);
            ns[k] += cJSON_IsNumber(z) ? z->valueint : 0;
            if (tc && cJSON_IsNumber(e) && isfinite(e->valuedouble)) { /* async: the first local step counted here */
                double t = e->valuedouble - off - origin;
                if (tc[k] <= 0 || t < tc[k]) tc[k] = t > 0 ? t : 1e-9;
            }
            int q = cJSON_IsNumber(p) ? (int)p->valuedouble : -1;
            if (pushes && rk >= 0 && rk < r->world && q >= 0 && q < S) pushes[(size_t)q * (size_t)r->world + (size_t)rk]++;
            else if (pushes) past++;
        }
        const cJSON *ta = cJSON_GetObjectItem(cv, "timed_s"), *tn = cJSON_GetObjectItem(cv, "timed_samples");
        if (cJSON_IsNumber(ta) && ta->valuedouble > async_timed) async_timed = ta->valuedouble;
        if (cJSON_IsNumber(tn)) total += (long long)tn->valuedouble;
        cJSON_DeleteItemFromObject(it, "_curve");
    }
    cJSON *sum = cJSON_AddObjectToObject(root, "summary");
    cJSON *curve = cJSON_CreateArray(), *tcurve = cJSON_CreateArray();
    r->diverged_step = -1;
    for (int s = 0; s < S; s++) {
        if (!r->lockstep && !ns[s] && s > 0) ls[s] = ls[s - 1], cs[s] = cs[s - 1], ns[s] = ns[s - 1] ? ns[s - 1] : 0;
        double loss = ns[s] ? ls[s] / ns[s] : 0;
        if (!isfinite(loss) && r->diverged_step < 0) r->diverged_step = s, r->diverged_loss = loss;
        cJSON *pt = cJSON_CreateArray();
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(s));
        cJSON_AddItemToArray(pt, report_number(loss));
        cJSON_AddItemToArray(curve, pt);
        /* lockstep: rank 0's step s ends (every rank's pace); async: the end of the first local
         * step that computed on the server's step-s parameters (a straggler's stale step counts
         * its loss there too, but later); never earlier than the step before */
        double t = tc ? tc[s] : 0;
        if (r->lockstep) t = s < nt && s >= r->first ? T[s].start + T[s].step - origin : 0;
        if (tc) {
            if (s > 0 && t < tc[s - 1]) t = tc[s - 1];
            tc[s] = t;
        }
        cJSON *tp = cJSON_CreateArray();
        cJSON_AddItemToArray(tp, cJSON_CreateNumber(s));
        cJSON_AddItemToArray(tp, cJSON_CreateNumber(t > 0 ? t : 0));
        cJSON_AddItemToArray(tcurve, tp);
    }
    int w = train_warm(r, nt);
    double timed = 0, *step_s = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *step_s);
    for (int s = 0; s < nt; s++) step_s[s] = T[s].step;
    for (int s = w; s < nt; s++) {
        timed += step_s[s];
        if (r->lockstep) total += ns[s];
    }
    if (!r->lockstep) timed = async_timed; /* samples applied per second of the slowest worker's time */
    cJSON_AddNumberToObject(sum, "samples", (double)all);
    cJSON_AddNumberToObject(sum, "steps", S);
    cJSON_AddNumberToObject(sum, "micro_steps", (double)S * r->cfg.accum_steps); /* --accum-steps: forward/backward passes */
    if (r->cfg.resume[0]) { /* the curves are the whole run's; the timings this process's steps' */
        cJSON *rf = cJSON_AddObjectToObject(sum, "resumed_from");
        cJSON_AddStringToObject(rf, "dir", r->cfg.resume);
        cJSON_AddNumberToObject(rf, "step", r->first);
    }
    cJSON_AddNumberToObject(sum, "throughput_samples_per_s", timed > 0 ? total / timed : 0);
    cJSON_AddNumberToObject(sum, "step_time_s", report_percentile(step_s + w, nt - w, 50));
    free(step_s);
    if (!r->lockstep) { /* every worker's staleness, and per step the pushes the server applied from each */
        cJSON *st = cJSON_AddObjectToObject(sum, "staleness");
        cJSON_AddStringToObject(st, "consistency", r->cfg.ps_consistency);
        cJSON_AddNumberToObject(st, "bound", r->cfg.ps_staleness);
        double mx = 0, mean = 0, nsteps = 0;
        cJSON_ArrayForEach(it, ranks) {
            cJSON *e = cJSON_GetObjectItem(it, "staleness");
            if (!e) continue;
            double m = cJSON_GetObjectItem(e, "max")->valuedouble, k = cJSON_GetObjectItem(e, "steps")->valuedouble;
            if (m > mx) mx = m;
            mean += cJSON_GetObjectItem(e, "mean")->valuedouble * k;
            nsteps += k;
        }
        cJSON_AddNumberToObject(st, "max", mx);
        cJSON_AddNumberToObject(st, "mean", nsteps ? mean / nsteps : 0);
        cJSON *pp = cJSON_AddArrayToObject(st, "pushes_per_step");
        for (int s = 0; pushes && s < S; s++)
            cJSON_AddItemToArray(pp, cJSON_CreateIntArray(pushes + (size_t)s * (size_t)r->world, r->world));
        cJSON_AddNumberToObject(st, "pushes_past_last_step", past);
    }
    free(pushes);
    cJSON *last = cJSON_GetArrayItem(r->eval_curve, cJSON_GetArraySize(r->eval_curve) - 1);
    if (last && S != r->steps) cJSON_ReplaceItemInArray(last, 0, cJSON_CreateNumber(S)); /* the run ended early */
    r->final_loss = S && ns[S - 1] ? ls[S - 1] / ns[S - 1] : 0;
    cJSON_AddItemToObject(sum, "final_loss", report_number(r->final_loss));
    cJSON_AddItemToObject(sum, "final_train_accuracy", report_number(S && ns[S - 1] ? cs[S - 1] / ns[S - 1] : 0));
    cJSON_AddItemToObject(sum, "final_accuracy", report_number(r->final_acc));
    cJSON_AddItemToObject(sum, "final_eval_loss", report_number(r->final_eval_loss));
    /* a loss that stopped being finite once: the run diverged, whatever it reads later */
    cJSON_AddBoolToObject(sum, "diverged", r->diverged_step >= 0);
    if (r->diverged_step >= 0) cJSON_AddNumberToObject(sum, "diverged_step", r->diverged_step);
    else cJSON_AddNullToObject(sum, "diverged_step");
    run_replicas(r, ranks, sum);
    const char *slowest = ""; /* the pace the back end moved at: its slowest member's link */
    cJSON_ArrayForEach(it, ranks) {
        const cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(it, "traffic"), "transport");
        if (cJSON_IsString(t)) slowest = sync_transport_slower(slowest, t->valuestring);
    }
    cJSON_AddStringToObject(sum, "transport", slowest);
    cJSON_AddItemToObject(sum, "loss_curve", curve);
    cJSON_AddItemToObject(sum, "time_curve", tcurve);
    cJSON_AddItemToObject(sum, "eval_curve", r->eval_curve);
    r->eval_curve = NULL;
    cJSON *imb = cJSON_AddObjectToObject(sum, "imbalance");
    cJSON_AddNumberToObject(imb, "memory", ratio_max_mean(ranks, "memory", "peak_bytes", NULL));
    cJSON_AddNumberToObject(imb, "traffic", ratio_max_mean(ranks, "traffic", "bytes_sent", "bytes_received"));
    cJSON_AddNumberToObject(imb, "busy_time", ratio_max_mean(ranks, "time_s", "busy", NULL));
    free(ls);
    free(cs);
    free(ns);
    free(tc);
    return root;
}

/* Every rank's final parameters hashed (FNV-1a over their bytes): ranks that should hold the
 * same bits can be checked to. */
int train_hash_params(Run *r) {
    size_t bytes = r->model.nparams * sizeof(float);
    unsigned char *h = malloc(bytes ? bytes : 1);
    if (!h) return rs_error(RS_ERR_RUNTIME, "out of memory hashing the parameters");
    int rc = device_d2h(&r->dev, h, r->model.params, bytes);
    unsigned long long x = rc == RS_OK ? hash_bytes(HASH_FNV_INIT, h, bytes) : HASH_FNV_INIT;
    free(h);
    snprintf(r->params_hash, sizeof r->params_hash, "%016llx", x);
    return rc;
}

/* Writes the final parameters (rank 0, --save-params) as an atomic file (base/atomicfile.h). */
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
    Ctrl *ctrl = engine_ctrl(r->engine);
    cJSON *mine = run_rank_json(r);
    if (!ctrl) {
        *ranks = cJSON_CreateArray();
        cJSON_AddItemToArray(*ranks, mine);
        return RS_OK;
    }
    report_encode_nonfinite(mine); /* no NaN reaches rank 0 as a null */
    char *text = cJSON_PrintUnformatted(mine);
    cJSON_Delete(mine);
    char **all = NULL;
    int rc = text ? ctrl_gather(ctrl, text, &all) : rs_error(RS_ERR_RUNTIME, "out of memory");
    free(text);
    if (rc != RS_OK || r->rank != 0) return rc;
    int n = ctrl_members(ctrl);
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

int train_report(Run *r) {
    int rc = RS_OK;
    cJSON *ranks = NULL;
    if (rc == RS_OK) rc = run_gather(r, &ranks);
    if (rc == RS_OK && r->rank == 0) { /* every back end's phases by one rule, on rank 0's clock */
        double *off = calloc((size_t)r->world, sizeof *off);
        for (int i = 0; off && i < r->world; i++) {
            double u;
            engine_clock_offset(r->engine, i, &off[i], &u);
        }
        if (r->lockstep) {
            report_phases(ranks, train_warm(r, r->done), off, off ? r->world : 0);
        } else { /* each at its own pace: no step is shared, nobody idles for a peer's arrival */
            cJSON *all = cJSON_CreateArray(), *e;
            while ((e = cJSON_DetachItemFromArray(ranks, 0))) {
                cJSON *one = cJSON_CreateArray();
                cJSON_AddItemToArray(one, e);
                report_phases(one, r->cfg.warmup, NULL, 0);
                cJSON_AddItemToArray(all, cJSON_DetachItemFromArray(one, 0));
                cJSON_Delete(one);
            }
            while ((e = cJSON_DetachItemFromArray(all, 0))) cJSON_AddItemToArray(ranks, e);
            cJSON_Delete(all);
        }
        free(off);
    }
    cJSON *trace = rc == RS_OK && r->rank == 0 ? run_take_trace(ranks) : NULL;
    if (rc != RS_OK) cJSON_Delete(ranks);
    int after = RS_OK; /* the first failure of what is written after the report (each logged as it fails) */
    if (rc == RS_OK && r->rank == 0) {
        cJSON *root = run_report_json(r, ranks);
        rc = report_write_atomic(r->cfg.report, root);
        if (rc == RS_OK) {
            cJSON *sum = cJSON_GetObjectItem(root, "summary");
            log_info("# final: loss %.4f  eval accuracy %.4f  throughput %.0f samples/s  step %.2f ms", r->final_loss,
                     r->final_acc, cJSON_GetObjectItem(sum, "throughput_samples_per_s")->valuedouble,
                     cJSON_GetObjectItem(sum, "step_time_s")->valuedouble * 1e3);
            log_info("# report: %s", r->cfg.report);
        }
        cJSON_Delete(root);
        /* the report first: a trace or parameters that cannot be written leave it in place */
        int w = rc == RS_OK ? run_write_trace(r, trace) : RS_OK;
        if (w != RS_OK) log_error("%s", rs_errmsg()), after = w;
        w = rc == RS_OK && r->cfg.save_params[0] ? run_save_params(r) : RS_OK;
        if (w != RS_OK) log_error("%s", rs_errmsg()), after = after ? after : w;
        if (rc == RS_OK && r->diverged_step >= 0) {
            log_error("the run diverged: the global training loss is %g at step %d (counted from 0, as summary.loss_curve "
                      "counts), the first that is not finite (a smaller --lr?); the report %s says \"diverged\": true",
                      r->diverged_loss, r->diverged_step, r->cfg.report);
            after = after ? after : TRAIN_ERR_DIVERGED;
        }
        if (rc == RS_OK && r->ndiffer > 0) {
            log_error("the replicas drifted apart: rank%s %s end%s with other parameters than rank 0 (params_hash), where "
                      "--sync %s promises every rank the same bits (a sum whose order depends on the rank?); the report %s "
                      "says \"params_agree\": false", r->ndiffer > 1 ? "s" : "", r->differ, r->ndiffer > 1 ? "" : "s",
                      r->cfg.sync, r->cfg.report);
            after = after ? after : TRAIN_ERR_REPLICAS;
        }
    }
    cJSON_Delete(trace);

    if (rc != RS_OK) log_error("%s", rs_errmsg());
    return rc != RS_OK ? rc : after;
}
