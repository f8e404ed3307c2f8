/* claims.c - `ringside claims DIR`: decides the design's twelve claims on measured reports, prints the table */
#include "backends.h"
#include "claims.h"
#include "claims_load.h"
#include "predict.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../net/link.h"
#include "../base/log.h"
#include "../engine/config_check.h"
#include "../engine/report.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the thresholds, stated in the output ---------------------------------------------------- */
#define CL_RING_MEM_TOL      0.10   /* claim 1: ring rank 0 within 10% of the mean */
#define CL_PS_R2_MIN         0.95   /* claim 2: linear fit of rank 0's traffic over N (>= 3 points) */
#define CL_PS_RATIO_TOL      0.15   /* claim 2: with 2 points, T0(N2)/T0(N1) within 15% of (N2-1)/(N1-1) */
#define CL_RING_TRAFFIC_TOL  0.05   /* claim 2: ring per-rank traffic within 5% of 2(N-1)/N n per step */
#define CL_PS_GROWTH_MIN     1.2    /* claim 3: ps comm time at the largest N >= 1.2x the smallest */
#define CL_RING_FLAT_MAX     1.5    /* claim 3: ring "about flat": growth <= 1.5x, or below ps's growth */
#define CL_IDLE_FWD_MAX      0.5    /* claim 4: idle ranks' forward time <= 0.5x the working ranks' */
#define CL_LOSS_TOL          1e-4   /* claim 5: max relative difference of the loss curves */
#define CL_WIRE_LOSS_TOL     0.10   /* claim 5, a 16-bit --wire: mean |loss difference| / mean loss (docs/benchmarks.md) */
#define CL_FP8_LOSS_TOL      0.05   /* claim 5, an FP8 --wire: the same, measured worst 2.39% (lenet on MNIST; docs/benchmarks.md, "FP8") */
#define CL_PRED_FACTOR       3.0    /* claim 6: measured comm within 3x of the alpha-beta prediction */
#define CL_ASYNC_LOSS_TAIL   0.25   /* claim 7: the last quarter of the steps is compared */
#define CL_ASYNC_LOSS_TOL    0.25   /* claim 7: async's loss there at most 25% above the synchronous run's */
#define CL_TABLE1_TOL        0.20   /* claim 8: measured comm per step within 20% of its BytePS Table 1 line */
#define CL_TIMED_MIN         8      /* claims 3, 6, 8: a run's comm time per step needs >= 8 timed steps (after warm-up) */
#define CL_TABLE1_LAT_MAX    0.10   /* claim 8: the per-message term at most 10% of the line (bandwidth-bound) */
#define CL_TREE_MARGIN       0.20   /* claim 9: a regime is one where the model puts one all-reduce 20% ahead */
#define CL_TREE_TOL          0.05   /* claim 9: "at least as fast": the ring within 5% of the tree (noise) */
#define CL_NODES_LAT_MAX     0.10   /* claims 10, 11: a bench size is bandwidth-bound where the rounds' time is <= 10% of the bytes' */
#define CL_NIC_RING_TOL      0.15   /* claim 10: the flat ring's bus bandwidth within 15% of the NIC's */
#define CL_NIC_TREE_TOL      0.20   /* claim 10: the trees over nodes' and the hierarchical ring's within 20% of 2(N-1)/N x it */
#define CL_HIER_TOL          0.20   /* claim 11: flat / hierarchical time within 20% of the NIC bytes' ratio */
#define CL_PAGE_BYTES        4096.0 /* claim 12: a tag counted by resident pages (zero's paged buffers, mincore) is whole pages */
#define CL_ZERO_TRAFFIC_TOL  0.05   /* claim 12: bytes per rank per step within 5% of ZeRO's formula (claim 2's tolerance) */
#define CL_ZERO3_TIME_TOL    0.20   /* claim 12: stage 3's comm time within 20% of its bytes' ratio to the ring's x the ring's */

#define MiB (1048576.0)

typedef struct {
    int id;
    const char *text;
    const char *verdict;        /* "PASS" "FAIL" "NOT-RUN" */
    char why[600];
    cJSON *numbers;
    char lines[65536];          /* "#   ..." detail lines */
    int full;                   /* lines could not take the last one: it says so, and takes no more */
} Claim;

/* One "#     ..." line under the claim. A line that no longer fits (a folder of hundreds of runs)
 * ends the lines with one that says so, so that the next claim's data line starts a line. */
static void claim_line(Claim *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void claim_line(Claim *c, const char *fmt, ...) {
    static const char more[] = "#     ... and more lines than the table holds: claims.json has every figure\n";
    char line[4096];
    int n = snprintf(line, sizeof line, "#     ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t k = strlen(c->lines), l = strlen(line);
    if (c->full) return;
    if (k + l + 2 + sizeof more > sizeof c->lines) {
        memcpy(c->lines + k, more, sizeof more);
        c->full = 1;
        return;
    }
    memcpy(c->lines + k, line, l);
    memcpy(c->lines + k + l, "\n", 2);
}

static void claim_verdict(Claim *c, const char *v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void claim_verdict(Claim *c, const char *v, const char *fmt, ...) {
    c->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
}

/* The runs' architectures (backend.architecture; experiments/backends.h): the ring (ring, nccl). */
static int is_ring(const ClaimsRun *r) { return r->arch == ARCH_RING; }
/* DataParallel's server in rank 0 (dedicated servers and sharded ones, a shard in every worker,
 * are not the claims' imbalanced ps). */
static int is_ps_colocated(const ClaimsRun *r) { return r->arch == ARCH_PS_COLOCATED; }
/* A shard of the server in every worker: balanced, as the ring (claims 1 and 2 hold it to the ring's rule). */
static int is_ps_sharded(const ClaimsRun *r) { return r->arch == ARCH_PS_SHARDED; }
/* A parameter server of any placement, byteps among them. */
static int is_server(const ClaimsRun *r) { return arch_is_server(r->arch); }
static double run_traffic0(const ClaimsRun *r) { return r->sent[0] + r->received[0]; }
/* The steps a run took (summary.steps; its --steps where the report lacks them). */
static double run_steps(const ClaimsRun *r) { return r->steps_run > 0 ? r->steps_run : r->steps; }
/* A bucket's bytes on the wire (--bucket-mb of fp32 gradients; half on a 16-bit --wire, a quarter
 * on FP8: codec_wire_ratio); 0: one bucket. */
static double run_bucket_bytes(const ClaimsRun *r) {
    return r->bucket_mb * 1048576.0 * arch_wire_ratio(r->arch, r->wire);
}
/* The rounds of messages a step takes: the alpha coefficient of the back end's cost model summed
 * over its buckets (experiments/predict.h); negative for a back end without one. */
static double run_rounds(const ClaimsRun *r) {
    return predict_step_comm(r->arch, r->servers, r->ranks, r->nodes, 0, r->grad_bytes,
                             run_bucket_bytes(r), 1, 0);
}

static double run_mean(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return n ? s / n : NAN;
}

/* Where a run's times were decided: "link 1gbit over shm", "shm", "" (text into buf). */
static const char *run_where(const ClaimsRun *r, char *buf, size_t len) {
    if (r->emulated[0]) snprintf(buf, len, "link %s over %s", r->emulated, r->transport[0] ? r->transport : "?");
    else snprintf(buf, len, "%s", r->transport[0] ? r->transport : "?");
    return buf;
}

/* Verdicts of a time claim tallied by the conditions they were decided on (the emulated link and
 * the transport): the claims output says, per condition, whether the claim held there. */
typedef struct {
    char where[96][96];
    int ok[96], bad[96], n;
} WhereTally;

static void tally_add(WhereTally *t, const ClaimsRun *r, int ok) {
    char w[96];
    run_where(r, w, sizeof w);
    int i = 0;
    while (i < t->n && strcmp(t->where[i], w)) i++;
    if (i == t->n) {
        if (t->n == 96) return;
        snprintf(t->where[t->n++], sizeof t->where[0], "%s", w);
    }
    t->ok[i] += ok;
    t->bad[i] += !ok;
}

static void tally_print(Claim *c, const WhereTally *t) {
    if (t->n < 2) return; /* one condition: the verdict says it */
    for (int i = 0; i < t->n; i++)
        claim_line(c, "on %s: %s (%d check%s held, %d did not)", t->where[i], t->bad[i] ? "FAIL" : "PASS", t->ok[i],
                   t->ok[i] == 1 ? "" : "s", t->bad[i]);
}

static cJSON *num_item(cJSON *arr, const ClaimsRun *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run", r->label);
    cJSON_AddStringToObject(o, "sync", r->sync);
    cJSON_AddNumberToObject(o, "ranks", r->ranks);
    cJSON_AddNumberToObject(o, "repeats", r->repeats);
    cJSON_AddItemToArray(arr, o);
    return o;
}

/* ---- series over N --------------------------------------------------------------------------- */

/* The runs of one series (one back end, everything but N the same) that pred accepts, N >= 2,
 * sorted by N. Returns the count. */
static int series_of(const ClaimsSet *s, const char *series, int (*pred)(const ClaimsRun *), const ClaimsRun **out) {
    int n = 0;
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        if (r->ranks < 2 || !pred(r) || strcmp(r->series, series)) continue;
        int j = n++;
        while (j > 0 && out[j - 1]->ranks > r->ranks) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = r;
    }
    return n;
}

/* The distinct series of one family whose runs pred accepts (N >= 2); their keys into out. */
static int series_keys(const ClaimsSet *s, const char *family, int (*pred)(const ClaimsRun *), const char **out) {
    int n = 0;
    for (int i = 0; i < s->nruns && n < 512; i++) {
        const ClaimsRun *r = &s->runs[i];
        if (r->ranks < 2 || !pred(r) || strcmp(r->family, family)) continue;
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= !strcmp(out[j], r->series);
        if (!seen) out[n++] = r->series;
    }
    return n;
}

/* What a series is, for its lines: the back end and the options that change its law ("ps
 * dataparallel, global batch 512, mlp, --wire bf16, link 1gbit"), into buf. */
static const char *series_name(const ClaimsRun *r, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "%s", r->sync);
    if (is_server(r) && !arch_is_byteps(r->arch)) {
        k += (size_t)snprintf(buf + k, len - k, " %s %s", r->placement, r->mode[0] ? r->mode : "push");
        if (r->arch == ARCH_PS_DEDICATED) k += (size_t)snprintf(buf + k, len - k, " x%d", r->servers);
    }
    if (k < len && r->global_batch > 0) k += (size_t)snprintf(buf + k, len - k, ", global batch %d", r->global_batch);
    else if (k < len) k += (size_t)snprintf(buf + k, len - k, ", batch %d per rank", r->batch);
    if (k < len && r->accum > 1) k += (size_t)snprintf(buf + k, len - k, " x %d micro-batches", r->accum);
    if (k < len) k += (size_t)snprintf(buf + k, len - k, ", %s", r->model);
    if (k < len && strcmp(r->wire, "fp32")) k += (size_t)snprintf(buf + k, len - k, ", --wire %s", r->wire);
    if (k < len && r->emulated[0]) k += (size_t)snprintf(buf + k, len - k, ", link %s", r->emulated);
    return buf;
}

/* A lockstep run: every rank takes the same steps (not --ps-consistency async or ssp). */
static int run_lockstep(const ClaimsRun *r) { return !strcmp(r->consistency, "sync"); }
/* The colocated ps of claims 2 and 3, in lockstep. */
static int is_ps_series(const ClaimsRun *r) { return is_ps_colocated(r) && run_lockstep(r); }

/* DataParallel's data messages through rank 0 per step, bytes sent plus received (0 in push mode):
 * predict_dp_data's beta term. */
static double run_dp_bytes(const ClaimsRun *r) {
    if (strcmp(r->mode, "dataparallel") || r->global_batch <= 0) return 0;
    double d = predict_dp_data(r->ranks, r->global_batch, r->dp_in, r->dp_classes, 0, 1);
    return d > 0 ? d : 0;
}

/* Names the runs that pred_in takes and pred_ok leaves out, once, under "left out: why". */
static int left_out(const ClaimsSet *s, Claim *c, int (*pred_in)(const ClaimsRun *), int (*pred_ok)(const ClaimsRun *),
                    const char *why) {
    char names[1024] = "";
    int n = 0;
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        if (r->ranks < 2 || !pred_in(r) || pred_ok(r)) continue;
        size_t l = strlen(names);
        if (n < 6) snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", r->label);
        n++;
    }
    if (n) claim_line(c, "left out, %d run%s: %s (%s%s)", n, n > 1 ? "s" : "", why, names, n > 6 ? ", ..." : "");
    return n;
}

/* The distinct families that hold a ps-colocated or ring run with N >= 2. */
static int families(const ClaimsSet *s, const char **out) {
    int n = 0;
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        if (r->ranks < 2 || !(is_ring(r) || is_ps_colocated(r))) continue;
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= !strcmp(out[j], r->family);
        if (!seen) out[n++] = r->family;
    }
    return n;
}

/* ---- claim 1: memory ------------------------------------------------------------------------- */

static void claim1(const ClaimsSet *s, Claim *c) {
    int nps = 0, nring = 0, nsharded = 0, bad = 0;
    cJSON *ps = cJSON_AddArrayToObject(c->numbers, "ps"), *ring = cJSON_AddArrayToObject(c->numbers, "ring");
    cJSON *sharded = cJSON_AddArrayToObject(c->numbers, "ps_sharded");
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        if (r->ranks < 2 || r->nw < 2) continue;
        if (is_ps_colocated(r)) {
            double mo = 0;
            for (int k = 1; k < r->nw; k++) mo = r->peak[k] > mo ? r->peak[k] : mo;
            int ok = r->peak[0] > mo;
            bad += !ok;
            nps++;
            cJSON *o = num_item(ps, r);
            cJSON_AddNumberToObject(o, "rank0_peak_bytes", r->peak[0]);
            cJSON_AddNumberToObject(o, "max_other_peak_bytes", mo);
            claim_line(c, "ps   N=%-3d rank 0 %.2f MiB vs max other %.2f MiB (%.2fx)%s  [%s]", r->ranks, r->peak[0] / MiB,
                       mo / MiB, mo > 0 ? r->peak[0] / mo : INFINITY, ok ? "" : "  <- not above", r->label);
        } else if ((is_ring(r) || is_ps_sharded(r)) && r->nodes > 0) {
            /* on nodes a rank's edges take different transports (the ring's shared-memory lanes,
             * a fixed 16 MiB of comm, inside a node; TCP's buffers across): rank 0's memory then
             * says which edges it sends on, not what the algorithm puts on it */
            claim_line(c, "%s N=%-3d on %d nodes: left out (its ranks' edges mix transports, whose buffers differ)  [%s]",
                       is_ps_sharded(r) ? "ps sharded" : "ring", r->ranks, r->nodes, r->label);
        } else if (is_ring(r) || is_ps_sharded(r)) {
            double mean = run_mean(r->peak, r->nw), dev = mean > 0 ? fabs(r->peak[0] - mean) / mean : 0;
            int ok = dev <= CL_RING_MEM_TOL, sh = is_ps_sharded(r);
            bad += !ok;
            nring += !sh;
            nsharded += sh;
            cJSON *o = num_item(sh ? sharded : ring, r);
            cJSON_AddNumberToObject(o, "rank0_peak_bytes", r->peak[0]);
            cJSON_AddNumberToObject(o, "mean_peak_bytes", mean);
            cJSON_AddNumberToObject(o, "deviation", dev);
            claim_line(c, "%s N=%-3d rank 0 %.2f MiB vs mean %.2f MiB (%+.1f%%, limit %.0f%%)%s  [%s]",
                       sh ? "ps sharded" : "ring", r->ranks,
                       r->peak[0] / MiB, mean / MiB, 100 * (r->peak[0] - mean) / (mean > 0 ? mean : 1), 100 * CL_RING_MEM_TOL,
                       ok ? "" : "  <- off", r->label);
        }
    }
    if (bad) claim_verdict(c, "FAIL", "%d run%s off the claim", bad, bad > 1 ? "s" : "");
    else if (!nps || !nring)
        claim_verdict(c, "NOT-RUN", "needs ps (colocated) and ring runs with >= 2 ranks (have %d ps, %d ring)", nps, nring);
    else claim_verdict(c, "PASS", "ps: rank 0 above every other rank in %d run%s; ring: rank 0 within %.0f%% of the mean in %d%s", nps,
                       nps > 1 ? "s" : "", 100 * CL_RING_MEM_TOL, nring, nsharded ? " (and sharded ps, balanced as the ring)" : "");
}

/* ---- claim 2: traffic ------------------------------------------------------------------------ */

/* Each worker's bytes sent against want a step (claims 2 and 12): a rank may also have forwarded
 * the parameters once at the start (bcast bytes, the start-up broadcast), which is taken out of
 * that rank's bytes, and every rank sent once bytes outside the steps (ZeRO-3's gather of the
 * whole parameters at the end), so that the figure and the formula count the steps only. Returns the worst
 * rank's relative deviation (NAN where one is not a number); *per the mean bytes a rank a step. */
static double sent_off(const ClaimsRun *r, double want, double bcast, double once, double *per) {
    double steps = run_steps(r), total = want * steps, worst = 0, sum = 0;
    for (int k = 0; k < r->nw; k++) {
        double mine = r->sent[k] - once;
        if (fabs(mine - bcast - total) < fabs(mine - total)) mine -= bcast;
        double d = fabs(mine - total) / total;
        worst = d > worst || isnan(d) ? d : worst;
        sum += mine;
    }
    *per = r->nw ? sum / r->nw / steps : NAN;
    return worst;
}

/* Least squares y = a + b x; returns b, sets *r2. */
static double fit_line(const double *x, const double *y, int n, double *r2) {
    double mx = run_mean(x, n), my = run_mean(y, n), sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    double b = sxx > 0 ? sxy / sxx : 0;
    *r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : 0;
    return b;
}

static void claim2(const ClaimsSet *s, Claim *c) {
    const char *fam[512], *keys[512];
    const ClaimsRun *ser[512];
    char name[256];
    int nf = families(s, fam), ps_series = 0, ring_series = 0, ring_runs = 0, bad = 0;
    cJSON *ps = cJSON_AddArrayToObject(c->numbers, "ps"), *ring = cJSON_AddArrayToObject(c->numbers, "ring");
    claim_line(c, "rule: ps rank 0 traffic per step linear in N within each series, one back end and one law (>= 3 N: fit R^2 >= %.2f, "
                  "slope > 0; 2 N: ratio within %.0f%% of (N2-1)/(N1-1)); under --ps-mode dataparallel rank 0's data messages, "
                  "(B - ceil(B/N)) (4D + 4 + 8C) bytes a step, are taken out first (they grow as 1 - 1/N, not as N);",
               CL_PS_R2_MIN, 100 * CL_PS_RATIO_TOL);
    claim_line(c, "      ring bytes sent per rank within %.0f%% of steps x 2(N-1)/N x gradient bytes at each N (+ at most one start-up broadcast)",
               100 * CL_RING_TRAFFIC_TOL);
    left_out(s, c, is_ps_colocated, run_lockstep, "ps --ps-consistency async or ssp: rank 0's traffic follows the workers' pace, not N");
    for (int f = 0; f < nf; f++) {
        int nk = series_keys(s, fam[f], is_ps_series, keys);
        for (int q = 0; q < nk; q++) {
            int n = series_of(s, keys[q], is_ps_series, ser);
            if (n < 2) continue;
            double x[512], y[512], dp[512], dps = 0;
            for (int i = 0; i < n; i++) {
                double steps = run_steps(ser[i]);
                x[i] = ser[i]->ranks;
                dp[i] = run_dp_bytes(ser[i]);
                dps += dp[i];
                y[i] = run_traffic0(ser[i]) / steps - dp[i];
            }
            series_name(ser[0], name, sizeof name);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToArray(ps, o);
            cJSON_AddStringToObject(o, "series", name);
            cJSON_AddItemToObject(o, "ranks", cJSON_CreateDoubleArray(x, n));
            cJSON_AddItemToObject(o, "rank0_traffic_per_step_bytes", cJSON_CreateDoubleArray(y, n));
            if (dps > 0) cJSON_AddItemToObject(o, "dp_data_per_step_bytes", cJSON_CreateDoubleArray(dp, n));
            int ok;
            if (n >= 3) {
                double r2, b = fit_line(x, y, n, &r2);
                ok = b > 0 && r2 >= CL_PS_R2_MIN;
                cJSON_AddNumberToObject(o, "slope_bytes_per_rank", b);
                cJSON_AddNumberToObject(o, "r2", r2);
                claim_line(c, "ps   [%s] rank 0 traffic per step over N: fit slope %.3g MiB/rank, R^2 %.4f%s  [%s ...]", name, b / MiB, r2,
                           ok ? "" : "  <- not linear", ser[0]->label);
            } else {
                double want = (x[1] - 1) / (x[0] - 1), got = y[0] > 0 ? y[1] / y[0] : 0;
                ok = fabs(got / want - 1) <= CL_PS_RATIO_TOL;
                cJSON_AddNumberToObject(o, "ratio", got);
                cJSON_AddNumberToObject(o, "expected_ratio", want);
                claim_line(c, "ps   [%s] rank 0 traffic per step N=%.0f -> N=%.0f: x%.3f (expected x%.3f)%s  [%s ...]", name, x[0], x[1],
                           got, want, ok ? "" : "  <- off", ser[0]->label);
            }
            for (int i = 0; i < n; i++) {
                if (dp[i] > 0)
                    claim_line(c, "       N=%-3.0f rank 0 sent+received %.3f MiB a step, less its data messages %.3f MiB", x[i],
                               (y[i] + dp[i]) / MiB, dp[i] / MiB);
                else claim_line(c, "       N=%-3.0f rank 0 sent+received %.3f MiB a step", x[i], y[i] / MiB);
            }
            bad += !ok;
            ps_series++;
        }
        nk = series_keys(s, fam[f], is_ring, keys);
        for (int q = 0; q < nk; q++) {
            int n = series_of(s, keys[q], is_ring, ser);
            double lo = INFINITY, hi = 0;
            for (int i = 0; i < n; i++) {
                const ClaimsRun *r = ser[i];
                /* the start-up broadcast carries the fp32 parameters whatever the wire */
                double want = 2.0 * (r->ranks - 1) / r->ranks * r->grad_bytes, per;
                double worst = sent_off(r, want, r->grad_bytes / arch_wire_ratio(r->arch, r->wire), 0, &per);
                int ok = worst <= CL_RING_TRAFFIC_TOL;
                bad += !ok;
                ring_runs++;
                lo = per < lo ? per : lo;
                hi = per > hi ? per : hi;
                cJSON *o = num_item(ring, r);
                cJSON_AddNumberToObject(o, "sent_per_rank_per_step_bytes", per);
                cJSON_AddNumberToObject(o, "expected_bytes", want);
                cJSON_AddNumberToObject(o, "worst_rank_deviation", worst);
                claim_line(c, "ring N=%-3d sent per rank per step %.3f MiB (start-up broadcast excluded), 2(N-1)/N n = %.3f MiB (worst rank %+.2f%%)%s  [%s]", r->ranks,
                           per / MiB, want / MiB, 100 * worst, ok ? "" : "  <- off", r->label);
            }
            if (n >= 2) {
                ring_series++;
                claim_line(c, "ring [%s] per-rank traffic from N=%d to N=%d: x%.3f (the formula allows < 2)", series_name(ser[0], name, sizeof name),
                           ser[0]->ranks, ser[n - 1]->ranks, hi / lo);
                if (!(hi / lo < 2.0)) bad++;
            }
        }
    }
    /* sharded ps (a shard in every worker) is balanced as the ring: every rank's bytes sent per step
     * within the same tolerance of 2(N-1)/N n; the start-up (rank 0 hands out the parameters and
     * every server answers the pulls, at most one step's worth) may come on top */
    cJSON *sharded = cJSON_AddArrayToObject(c->numbers, "ps_sharded");
    int sharded_runs = 0;
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        if (!is_ps_sharded(r) || r->ranks < 2 || r->nw < 2) continue;
        double steps = run_steps(r);
        double want = 2.0 * (r->ranks - 1) / r->ranks * r->grad_bytes, total = want * steps, worst = 0, sum = 0;
        for (int k = 0; k < r->nw; k++) {
            double mine = r->sent[k], d = mine < total ? total - mine : mine > total + want ? mine - total - want : 0;
            worst = d / total > worst ? d / total : worst;
            sum += mine;
        }
        int ok = worst <= CL_RING_TRAFFIC_TOL;
        bad += !ok;
        sharded_runs++;
        cJSON *o = num_item(sharded, r);
        cJSON_AddNumberToObject(o, "sent_per_rank_per_step_bytes", sum / r->nw / steps);
        cJSON_AddNumberToObject(o, "expected_bytes", want);
        cJSON_AddNumberToObject(o, "worst_rank_deviation", worst);
        claim_line(c, "ps sharded N=%-3d sent per rank per step %.3f MiB (start-up included), 2(N-1)/N n = %.3f MiB (worst rank %.2f%% outside)%s  [%s]",
                   r->ranks, sum / r->nw / steps / MiB, want / MiB, 100 * worst, ok ? "" : "  <- off", r->label);
    }
    if (bad) claim_verdict(c, "FAIL", "%d check%s off the claim", bad, bad > 1 ? "s" : "");
    else if (!ps_series || !ring_series)
        claim_verdict(c, "NOT-RUN", "needs ps (colocated) and ring runs at >= 2 values of N >= 2 with the same model (have %d ps series, each on its law, and %d ring series)",
                      ps_series, ring_series);
    else claim_verdict(c, "PASS", "ps rank 0 traffic linear in N in %d series; ring traffic matches 2(N-1)/N n in %d runs%s", ps_series,
                       ring_runs, sharded_runs ? " (and sharded ps, as the ring)" : "");
}

/* ---- claim 3: comm time per step ------------------------------------------------------------- */

/* Whether a --straggler text ("3:30,2:30") slows any rank (a "0:0" cell has none). */
static int has_straggler(const char *text) {
    for (const char *p = strchr(text, ':'); p; p = strchr(p + 1, ':'))
        if (strtod(p + 1, NULL) > 0) return 1;
    return 0;
}
static int run_unslowed(const ClaimsRun *r) { return !has_straggler(r->straggler); }
/* Enough timed steps for a time per step (an unknown count, from an older report, is taken). */
static int run_timed(const ClaimsRun *r) { return r->timed_steps < 0 || r->timed_steps >= CL_TIMED_MIN; }
/* Claim 3's runs: lockstep and no straggler, ps colocated or ring, timed long enough. */
static int is_time_series(const ClaimsRun *r) { return (is_ps_colocated(r) && run_lockstep(r)) || is_ring(r); }
static int is_time_unslowed(const ClaimsRun *r) { return is_time_series(r) && run_unslowed(r); }
static int is_ps_time(const ClaimsRun *r) { return is_ps_series(r) && run_unslowed(r) && run_timed(r); }
static int is_ring_time(const ClaimsRun *r) { return is_ring(r) && run_unslowed(r) && run_timed(r); }

/* One ps series against one ring series of a family, at the smallest and largest N both ran:
 * the verdict's lines, numbers and tally. Returns the checks that failed, or -1 when the two
 * series share fewer than two N. */
static int claim3_pair(Claim *c, WhereTally *tally, cJSON *arr, const ClaimsRun **ps, int np, const ClaimsRun **ring, int nr,
                       int *unexplained) {
    const ClaimsRun *a = NULL, *b = NULL, *ra = NULL, *rb = NULL;
    for (int i = 0; i < np; i++)
        for (int j = 0; j < nr; j++)
            if (ps[i]->ranks == ring[j]->ranks) {
                if (!a) a = ps[i], ra = ring[j];
                b = ps[i];
                rb = ring[j];
            }
    if (!a || a == b) return -1;
    char wa[96], wb[96], pn[256], rn[256];
    double pa = run_mean(a->comm_total, a->nw), pb = run_mean(b->comm_total, b->nw);
    double qa = run_mean(ra->comm_total, ra->nw), qb = run_mean(rb->comm_total, rb->nw);
    double gp = pa > 0 ? pb / pa : INFINITY, gr = qa > 0 ? qb / qa : INFINITY;
    int ps_ok = gp >= CL_PS_GROWTH_MIN, ring_ok = gr <= CL_RING_FLAT_MAX || gr < gp;
    tally_add(tally, b, ps_ok);
    tally_add(tally, rb, ring_ok);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "ps_series", series_name(a, pn, sizeof pn));
    cJSON_AddStringToObject(o, "ring_series", series_name(ra, rn, sizeof rn));
    cJSON_AddStringToObject(o, "ps_on", run_where(b, wa, sizeof wa));
    cJSON_AddStringToObject(o, "ring_on", run_where(rb, wb, sizeof wb));
    cJSON_AddNumberToObject(o, "n_small", a->ranks);
    cJSON_AddNumberToObject(o, "n_large", b->ranks);
    cJSON_AddNumberToObject(o, "ps_comm_s", pa);
    cJSON_AddNumberToObject(o, "ps_comm_large_s", pb);
    cJSON_AddNumberToObject(o, "ring_comm_s", qa);
    cJSON_AddNumberToObject(o, "ring_comm_large_s", qb);
    cJSON_AddNumberToObject(o, "ps_growth", gp);
    cJSON_AddNumberToObject(o, "ring_growth", gr);
    claim_line(c, "ps   [%s] N=%d -> N=%d: %.3f -> %.3f ms/step (x%.2f) on %s%s  [%s]", pn, a->ranks, b->ranks, pa * 1e3, pb * 1e3,
               gp, wa, ps_ok ? "" : "  <- does not grow", a->label);
    claim_line(c, "ring [%s] N=%d -> N=%d: %.3f -> %.3f ms/step (x%.2f) on %s%s  [%s]", rn, ra->ranks, rb->ranks, qa * 1e3, qb * 1e3,
               gr, wb, ring_ok ? "" : "  <- grows like ps", ra->label);
    if (strcmp(wa, wb))
        claim_line(c, "note: ps moved on %s, the ring on %s: this pair compares the systems as shipped, not the "
                      "algorithms alone (--transport puts both on one transport)", wa, wb);
    int crowded = rb->cores > 0 && rb->ranks > rb->cores && !rb->emulated[0];
    if (!ring_ok && crowded)
        claim_line(c, "why: %d ranks shared %d cores here, so every ring step also waits for a core (oversubscription), "
                      "which the claim's model leaves out; it holds where each rank has a core or a GPU of its own",
                   rb->ranks, rb->cores);
    *unexplained += !ps_ok + (!ring_ok && !crowded);
    return !ps_ok + !ring_ok;
}

static void claim3(const ClaimsSet *s, Claim *c) {
    const char *fam[512], *pkeys[512], *rkeys[512];
    const ClaimsRun *ps[512], *ring[512];
    int nf = families(s, fam), pairs = 0, bad = 0, unexplained = 0;
    static WhereTally tally;
    memset(&tally, 0, sizeof tally);
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "series");
    claim_line(c, "rule: comm_total per step (mean over ranks, median over repeats), each ps series (one back end and one law) "
                  "against each ring series of the same model and options; ps grows: largest N >= %.1fx smallest; ring about "
                  "flat: growth <= %.1fx or below ps's", CL_PS_GROWTH_MIN, CL_RING_FLAT_MAX);
    left_out(s, c, is_ps_colocated, run_lockstep, "ps --ps-consistency async or ssp: no step all ranks share to time");
    left_out(s, c, is_time_series, run_unslowed, "a --straggler: its step waits for the slow rank, which the claim's model leaves out");
    left_out(s, c, is_time_unslowed, run_timed, "fewer than 8 timed steps (--steps less --warmup): too few for a time per step");
    for (int f = 0; f < nf; f++) {
        int npk = series_keys(s, fam[f], is_ps_time, pkeys), nrk = series_keys(s, fam[f], is_ring_time, rkeys);
        for (int pq = 0; pq < npk; pq++)
            for (int rq = 0; rq < nrk; rq++) {
                int np = series_of(s, pkeys[pq], is_ps_time, ps), nr = series_of(s, rkeys[rq], is_ring_time, ring);
                int k = claim3_pair(c, &tally, arr, ps, np, ring, nr, &unexplained);
                if (k < 0) continue;
                bad += k;
                pairs++;
            }
    }
    tally_print(c, &tally);
    cJSON_AddNumberToObject(c->numbers, "unexplained", unexplained);
    if (bad) claim_verdict(c, "FAIL", "%d check%s off the claim", bad, bad > 1 ? "s" : "");
    else if (!pairs) claim_verdict(c, "NOT-RUN", "needs ps (colocated) and ring runs at the same >= 2 values of N >= 2 with the same model");
    else claim_verdict(c, "PASS", "ps comm time grows with N, ring's stays about flat, in %d series", pairs);
}

/* ---- claim 4: a global batch smaller than N -------------------------------------------------- */

static void claim4(const ClaimsSet *s, Claim *c) {
    int runs = 0, bad = 0;
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "runs");
    claim_line(c, "rule: the ranks DataParallel's scatter leaves empty (N - ceil(B / ceil(B/N))) report samples == 0, and their forward time");
    claim_line(c, "      is <= %.1fx the working ranks' (busy time shown beside: it keeps the per-step costs every rank pays)", CL_IDLE_FWD_MAX);
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        int B = r->global_batch / r->accum; /* what one scatter splits: a micro-batch under --accum-steps */
        if (r->global_batch <= 0 || B >= r->ranks) continue;
        double bi = 0, bw = 0, fi = 0, fw = 0;
        int ni = 0, nw = 0;
        char idle[512] = "";
        for (int k = 0; k < r->nw; k++) {
            if (r->samples[k] == 0) {
                bi += r->busy[k];
                fi += r->forward[k];
                ni++;
                size_t l = strlen(idle);
                snprintf(idle + l, sizeof idle - l, "%s%d", l ? "," : "", k);
            } else {
                bw += r->busy[k];
                fw += r->forward[k];
                nw++;
            }
        }
        int chunk = (B + r->ranks - 1) / r->ranks;
        int want = r->ranks - (B + chunk - 1) / chunk;
        bi = ni ? bi / ni : 0;
        bw = nw ? bw / nw : 0;
        fi = ni ? fi / ni : 0;
        fw = nw ? fw / nw : 0;
        double fr = fw > 0 ? fi / fw : INFINITY, br = bw > 0 ? bi / bw : INFINITY;
        int ok = ni == want && nw > 0 && fr <= CL_IDLE_FWD_MAX;
        bad += !ok;
        runs++;
        cJSON *o = num_item(arr, r);
        cJSON_AddNumberToObject(o, "global_batch", r->global_batch);
        cJSON_AddNumberToObject(o, "idle_ranks", ni);
        cJSON_AddNumberToObject(o, "expected_idle_ranks", want);
        cJSON_AddNumberToObject(o, "idle_forward_s", fi);
        cJSON_AddNumberToObject(o, "working_forward_s", fw);
        cJSON_AddNumberToObject(o, "idle_busy_s", bi);
        cJSON_AddNumberToObject(o, "working_busy_s", bw);
        claim_line(c, "%-4s N=%-3d global batch %d: %d idle rank%s (%s; scatter leaves %d); forward %.4f ms idle vs %.4f ms working (x%.3f); busy %.3f vs %.3f ms (x%.2f)%s  [%s]",
                   r->sync, r->ranks, r->global_batch, ni, ni == 1 ? "" : "s", ni ? idle : "none", want, fi * 1e3, fw * 1e3,
                   isfinite(fr) ? fr : 0, bi * 1e3, bw * 1e3, isfinite(br) ? br : 0, ok ? "" : "  <- not idle", r->label);
    }
    if (bad) claim_verdict(c, "FAIL", "%d run%s without the idle ranks the scatter implies", bad, bad > 1 ? "s" : "");
    else if (!runs) claim_verdict(c, "NOT-RUN", "needs a run with --global-batch B smaller than its ranks N (e.g. B=4 on 8 ranks)");
    else claim_verdict(c, "PASS", "the scatter's idle ranks shown in %d run%s", runs, runs > 1 ? "s" : "");
}

/* ---- claim 5: the same loss curve as one rank ------------------------------------------------ */

/* Workers whose final parameters' hash differs from rank 0's: -1 when the reports carry no
 * hashes, or under DataParallel's step (the other ranks get the last update with a next step
 * that never comes). */
static int run_hash_differs(const ClaimsRun *r) {
    if (!strcmp(r->mode, "dataparallel") || !r->hash[0][0]) return -1;
    int n = 0;
    for (int k = 1; k < r->nw && k < CLAIMS_MAX_RANKS; k++) n += r->hash[k][0] && strcmp(r->hash[k], r->hash[0]) != 0;
    return n;
}

/* Claims 5 and 7 compare loss curves: a run whose loss stopped being finite reached no loss
 * (its curve's NaN, and the 0 a report of an older build wrote in its place, would compare as a
 * match or as the best loss there is). As the run under test it fails; as the run it is held to
 * (claim 5's 1-rank baseline, claim 7's ring) it decides nothing and the pair is left out. */
static const char *run_diverged_note(const ClaimsRun *r, char *out, size_t len) {
    snprintf(out, len, "diverged: its loss stopped being finite at step %d", r->diverged_step);
    return out;
}

static void claim5(const ClaimsSet *s, Claim *c) {
    int nps = 0, nring = 0, unmatched = 0, bad = 0, left_out = 0;
    char note[96];
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "runs");
    claim_line(c, "rule: max over steps of |loss - loss_1rank| / |loss_1rank| <= %g against --sync none on 1 rank with the global batch, "
                  "and every rank ends with rank 0's parameters, bit for bit (params_hash); a 16-bit --wire rounds every gradient, "
                  "so its runs are held to mean |loss - loss_1rank| / mean loss_1rank <= %g instead, an FP8 --wire's to <= %g",
               CL_LOSS_TOL, CL_WIRE_LOSS_TOL, CL_FP8_LOSS_TOL);
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        /* lab 5's all-reduce (student) is held to the same rule as the ring's */
        if (r->ranks < 2 || r->arch == ARCH_NONE || strcmp(r->consistency, "sync"))
            continue;
        int G = r->global_batch > 0 ? r->global_batch : r->batch * r->ranks * r->accum;
        const ClaimsRun *base = NULL, *gone = NULL; /* gone: a baseline that diverged */
        for (int j = 0; j < s->nruns && !base; j++) {
            const ClaimsRun *b = &s->runs[j];
            int bG = b->global_batch > 0 ? b->global_batch : b->batch * b->accum;
            if (b->arch == ARCH_NONE && b->ranks == 1 && bG == G &&
                !strcmp(b->math, r->math) && b->nloss == r->nloss && b->nloss > 0) {
                if (b->diverged) gone = gone ? gone : b;
                else base = b;
            }
        }
        if (!base && gone) {
            left_out++;
            cJSON *o = num_item(arr, r);
            cJSON_AddStringToObject(o, "baseline", gone->label);
            cJSON_AddStringToObject(o, "left_out", "the 1-rank baseline diverged");
            cJSON_AddNumberToObject(o, "baseline_diverged_step", gone->diverged_step);
            claim_line(c, "%-4s N=%-3d global batch %d: left out, its 1-rank baseline %s (it decides nothing)  [%s vs %s]", r->sync,
                       r->ranks, G, run_diverged_note(gone, note, sizeof note), r->label, gone->label);
            continue;
        }
        if (!base) {
            unmatched++;
            claim_line(c, "%-4s N=%-3d global batch %d: no 1-rank --sync none run with batch %d to compare with  [%s]", r->sync, r->ranks, G, G, r->label);
            continue;
        }
        if (r->diverged) { /* its curve is off the baseline's from that step on, by no number */
            bad++;
            if (is_server(r)) nps++;
            else nring++;
            cJSON *o = num_item(arr, r);
            cJSON_AddStringToObject(o, "baseline", base->label);
            cJSON_AddNumberToObject(o, "global_batch", G);
            cJSON_AddNumberToObject(o, "diverged_step", r->diverged_step);
            claim_line(c, "%-4s N=%-3d vs 1 rank batch %d: %s, the 1-rank run's did not  <- diverged  [%s vs %s]", r->sync, r->ranks,
                       G, run_diverged_note(r, note, sizeof note), r->label, base->label);
            continue;
        }
        double worst = 0, dsum = 0, bsum = 0;
        int at = 0, wire16 = strcmp(r->wire, "fp32") != 0; /* a lossy wire: 16-bit or FP8 */
        double wtol = !strncmp(r->wire, "fp8", 3) ? CL_FP8_LOSS_TOL : CL_WIRE_LOSS_TOL;
        for (int k = 0; k < r->nloss; k++) {
            double d = fabs(r->loss[k] - base->loss[k]) / fmax(fabs(base->loss[k]), 1e-12);
            dsum += fabs(r->loss[k] - base->loss[k]);
            bsum += fabs(base->loss[k]);
            if (!(d <= worst)) {
                worst = d;
                at = k;
            }
        }
        double area = dsum / fmax(bsum, 1e-12);
        int ok = wire16 ? area <= wtol : worst <= CL_LOSS_TOL, differ = run_hash_differs(r);
        bad += !ok || differ > 0;
        if (is_server(r)) nps++;
        else nring++;
        cJSON *o = num_item(arr, r);
        if (differ >= 0) cJSON_AddNumberToObject(o, "ranks_with_other_parameters", differ);
        if (differ > 0)
            claim_line(c, "%-4s N=%-3d %d rank%s end with other parameters than rank 0 (params_hash): the ranks' sums "
                          "differ in their order, so their models drift apart  <- differs  [%s]",
                       r->sync, r->ranks, differ, differ > 1 ? "s" : "", r->label);
        cJSON_AddStringToObject(o, "baseline", base->label);
        cJSON_AddNumberToObject(o, "global_batch", G);
        cJSON_AddNumberToObject(o, "max_rel_diff", worst);
        cJSON_AddNumberToObject(o, "at_step", at);
        cJSON_AddStringToObject(o, "wire", r->wire);
        if (wire16) {
            cJSON_AddNumberToObject(o, "mean_abs_diff_rel", area);
            claim_line(c, "%-4s N=%-3d --wire %s vs 1 rank batch %d: mean |loss difference| %.2f%% of the mean loss (limit %.0f%%; "
                          "max rel diff %.2e at step %d) over %d steps%s  [%s vs %s]", r->sync, r->ranks, r->wire, G, 100 * area,
                       100 * wtol, worst, at, r->nloss, ok ? "" : "  <- differs", r->label, base->label);
        } else
            claim_line(c, "%-4s N=%-3d vs 1 rank batch %d: max rel diff %.2e at step %d over %d steps%s  [%s vs %s]", r->sync, r->ranks, G,
                       worst, at, r->nloss, ok ? "" : "  <- differs", r->label, base->label);
    }
    if (left_out) cJSON_AddNumberToObject(c->numbers, "left_out", left_out);
    if (bad) claim_verdict(c, "FAIL", "%d run%s off the 1-rank loss curve (a diverged run counts off it)", bad, bad > 1 ? "s" : "");
    else if (!nps || !nring)
        claim_verdict(c, "NOT-RUN", "needs a --sync none 1-rank run with --batch B beside ps and ring runs with global batch B, same seed and steps (compared %d ps, %d ring; %d unmatched; %d left out: their baseline diverged)",
                      nps, nring, unmatched, left_out);
    else claim_verdict(c, "PASS", "%d ps and %d ring run%s match the 1-rank loss curve within %g", nps, nring, nps + nring > 1 ? "s" : "", CL_LOSS_TOL);
}

/* ---- claim 6: alpha-beta --------------------------------------------------------------------- */

static int run_predicted(const ClaimsRun *r) { return r->pred_comm_s > 0; }
static int run_predicted_unslowed(const ClaimsRun *r) { return run_predicted(r) && run_lockstep(r) && run_unslowed(r); }

static void claim6(const ClaimsSet *s, Claim *c) {
    int runs = 0, bad = 0;
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "runs");
    claim_line(c, "rule: measured comm_total per step (mean over ranks) within %.0fx of the alpha-beta prediction, both ways", CL_PRED_FACTOR);
    int crowded = 0, crowded_lo = 0, crowded_hi = 0, crowded_cores = 0, under = 0, given = 0, unexplained = 0;
    double under_alpha = 0;
    static WhereTally tally;
    memset(&tally, 0, sizeof tally);
    left_out(s, c, run_predicted, run_lockstep, "ps --ps-consistency async or ssp: the model prices a synchronous reduction");
    left_out(s, c, run_predicted, run_unslowed, "a --straggler: the others' comm time waits for it, which the model leaves out");
    left_out(s, c, run_predicted_unslowed, run_timed, "fewer than 8 timed steps (--steps less --warmup): too few for a time per step");
    int emulated = 0;
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        if (!run_predicted(r) || !run_lockstep(r) || !run_unslowed(r) || !run_timed(r)) continue;
        emulated += r->pred_emulated;
        double meas = run_mean(r->comm_total, r->nw), ratio = meas / r->pred_comm_s;
        int ok = ratio <= CL_PRED_FACTOR && ratio >= 1 / CL_PRED_FACTOR;
        bad += !ok;
        runs++;
        tally_add(&tally, r, ok);
        cJSON *o = num_item(arr, r);
        if (r->emulated[0]) cJSON_AddStringToObject(o, "emulated_link", r->emulated);
        cJSON_AddNumberToObject(o, "measured_comm_s", meas);
        cJSON_AddNumberToObject(o, "predicted_comm_s", r->pred_comm_s);
        cJSON_AddNumberToObject(o, "ratio", ratio);
        if (r->link[0]) cJSON_AddStringToObject(o, "link", r->link);
        char over[128] = "";
        if (r->link[0]) snprintf(over, sizeof over, " over %s", r->link);
        if (r->emulated[0])
            snprintf(over + strlen(over), sizeof over - strlen(over), r->pred_emulated ? " (predicted from the emulated link %s itself)"
                     : " (emulated %s)", r->emulated);
        cJSON_AddBoolToObject(o, "from_emulated_link", r->pred_emulated);
        /* why a run is outside, the first that applies: its ranks waited for cores; it took less
         * than the model's latency term alone (alpha x the rounds a step takes); its constants are
         * the matrix file's, measured on another machine; else nothing explains it */
        double rounds = run_rounds(r);
        const char *why = "";
        if (!ok && ratio > 1 && r->cores > 0 && r->ranks > r->cores && !r->emulated[0]) {
            why = " (oversubscribed)";
            crowded++;
            if (!crowded_lo || r->ranks < crowded_lo) crowded_lo = r->ranks;
            if (r->ranks > crowded_hi) crowded_hi = r->ranks;
            crowded_cores = r->cores;
        } else if (!ok && ratio < 1 && rounds > 0 && isfinite(r->pred_alpha) && meas < r->pred_alpha * rounds) {
            why = " (below the latency term alone)";
            under++;
            under_alpha = r->pred_alpha;
        } else if (!ok && r->pred_given) {
            why = " (the matrix file's constants)";
            given++;
        } else if (!ok) unexplained++;
        cJSON_AddStringToObject(o, "why", ok ? "" : why[0] ? why : " (unexplained)");
        claim_line(c, "%-4s N=%-3d measured %.3f ms vs predicted %.3f ms%s per step (x%.2f)%s%s  [%s]", r->sync, r->ranks, meas * 1e3,
                   r->pred_comm_s * 1e3, over, ratio, ok ? "" : "  <- outside the factor", ok ? "" : why, r->label);
    }
    if (under)
        claim_line(c, "why: %d of the runs outside took less than the model's latency term alone (alpha %.0f us x the rounds of "
                      "messages a step takes): that alpha, the matrix's, is above what a message costs here; \"links\": \"auto\" fits alpha and beta on this machine", under, under_alpha * 1e6);
    if (given)
        claim_line(c, "why: %d of the runs outside were predicted with the constants written in the matrix file (the reference "
                      "machine's, docs/matrix.md), not fitted on this machine; \"links\": \"auto\" fits them here before the cells", given);
    cJSON_AddNumberToObject(c->numbers, "unexplained", unexplained);
    if (crowded) {
        char span[32];
        if (crowded_lo == crowded_hi) snprintf(span, sizeof span, "%d", crowded_hi);
        else snprintf(span, sizeof span, "%d to %d", crowded_lo, crowded_hi);
        claim_line(c, "why: %d of the runs outside ran %s ranks on %d cores: each rank also waits for a core (oversubscription), "
                      "which the model leaves out; it holds where each rank has a core or a GPU of its own",
                   crowded, span, crowded_cores);
    }
    if (emulated)
        claim_line(c, "note: %d prediction%s came from the run's emulated link (the matrix gives no link for its transport): "
                      "beta 1 / the link's rate, alpha its latency + %.0f us a message for the software", emulated,
                   emulated > 1 ? "s" : "", PREDICT_EMULATED_ALPHA_S * 1e6);
    tally_print(c, &tally);
    if (bad) claim_verdict(c, "FAIL", "%d of %d runs outside %.0fx of the prediction", bad, runs, CL_PRED_FACTOR);
    else if (!runs) claim_verdict(c, "NOT-RUN", "needs lockstep runs without a straggler, N >= 2, with an alpha-beta prediction (a matrix with alpha_s/beta_s_per_byte, links, a bench report, or an emulated --link)");
    else claim_verdict(c, "PASS", "%d run%s within %.0fx of the prediction", runs, runs > 1 ? "s" : "", CL_PRED_FACTOR);
}

/* ---- claim 7: a straggler, the asynchronous server against the synchronous ring --------------- */

/* Mean of the last CL_ASYNC_LOSS_TAIL of the first n points of a loss curve. */
static double loss_tail(const ClaimsRun *r, int n) {
    int k = (int)ceil(n * CL_ASYNC_LOSS_TAIL);
    if (k < 1) k = 1;
    double s = 0;
    for (int i = n - k; i < n; i++) s += r->loss[i];
    return s / k;
}

static void claim7(const ClaimsSet *s, Claim *c) {
    int pairs = 0, bad = 0, left_out = 0;
    char note[96];
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "pairs");
    claim_line(c, "rule: with --straggler, ps --ps-consistency async's throughput > the synchronous ring's, and its mean loss over the "
                  "last %.0f%% of the steps (loss against steps, on step budgets) <= %.0f%% above the ring's, same model, data, steps and link",
               CL_ASYNC_LOSS_TAIL * 100, CL_ASYNC_LOSS_TOL * 100);
    static WhereTally tally;
    memset(&tally, 0, sizeof tally);
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *a = &s->runs[i];
        if (!is_server(a) || strcmp(a->consistency, "async") || !has_straggler(a->straggler) || a->nloss < 1) continue;
        for (int j = 0; j < s->nruns; j++) {
            const ClaimsRun *r = &s->runs[j];
            if (!is_ring(r) || r->ranks != a->ranks || strcmp(r->pair, a->pair) || r->nloss < 1) continue;
            if (r->diverged && !a->diverged) { /* nothing to hold async's loss to */
                left_out++;
                cJSON *o = num_item(arr, a);
                cJSON_AddStringToObject(o, "ring", r->label);
                cJSON_AddStringToObject(o, "left_out", "the ring run diverged");
                cJSON_AddNumberToObject(o, "ring_diverged_step", r->diverged_step);
                claim_line(c, "N=%-3d straggler %s: left out, the ring run %s (it decides nothing)  [%s vs %s]", a->ranks, a->straggler,
                           run_diverged_note(r, note, sizeof note), a->label, r->label);
                continue;
            }
            int n = a->nloss < r->nloss ? a->nloss : r->nloss; /* a time budget: the steps both took */
            double la = loss_tail(a, n), lr = loss_tail(r, n), over = lr > 0 ? la / lr - 1 : NAN;
            /* loss against steps is decided on a step budget; under --time-budget the runs end at the same
             * moment after different steps, and the line shows their losses at the steps both took */
            int timed = a->time_budget > 0 || r->time_budget > 0;
            /* async's own divergence fails the pair, even on a time budget: a loss it never reached */
            int fast = a->throughput > r->throughput, close = !a->diverged && (timed || over <= CL_ASYNC_LOSS_TOL), ok = fast && close;
            pairs++;
            bad += !ok;
            tally_add(&tally, a, ok);
            char wa[96], wr[96];
            run_where(a, wa, sizeof wa);
            run_where(r, wr, sizeof wr);
            cJSON *o = num_item(arr, a);
            cJSON_AddStringToObject(o, "ring", r->label);
            cJSON_AddStringToObject(o, "straggler", a->straggler);
            cJSON_AddStringToObject(o, "where", wa);
            cJSON_AddNumberToObject(o, "async_throughput", a->throughput);
            cJSON_AddNumberToObject(o, "ring_throughput", r->throughput);
            cJSON_AddNumberToObject(o, "async_loss", la);
            cJSON_AddNumberToObject(o, "ring_loss", lr);
            cJSON_AddNumberToObject(o, "loss_over", over);
            cJSON_AddNumberToObject(o, "steps", n);
            if (a->diverged) {
                cJSON_AddNumberToObject(o, "async_diverged_step", a->diverged_step);
                claim_line(c, "N=%-3d straggler %s: async %s%s  <- diverged  [%s vs %s]", a->ranks, a->straggler,
                           run_diverged_note(a, note, sizeof note), r->diverged ? " (the ring's too)" : "", a->label, r->label);
                continue;
            }
            claim_line(c, "N=%-3d straggler %s%s: async %.0f vs ring %.0f samples/s (x%.2f)%s; loss over the last %.0f%% of %d steps %.4f vs %.4f (%+.1f%%)%s%s  on %s (ring on %s)  [%s vs %s]",
                       a->ranks, a->straggler, a->time_budget > 0 ? " (time budget)" : "", a->throughput, r->throughput,
                       r->throughput > 0 ? a->throughput / r->throughput : NAN, fast ? "" : "  <- not faster", CL_ASYNC_LOSS_TAIL * 100,
                       n, la, lr, over * 100, close ? "" : "  <- trails by more", timed ? " (time budget: loss not decided)" : "", wa, wr,
                       a->label, r->label);
        }
    }
    tally_print(c, &tally);
    if (left_out) cJSON_AddNumberToObject(c->numbers, "left_out", left_out);
    if (bad) claim_verdict(c, "FAIL", "%d of %d async/ring pairs with a straggler do not hold", bad, pairs);
    else if (!pairs)
        claim_verdict(c, "NOT-RUN", "needs ps --ps-consistency async and ring runs with the same --straggler, N, model, data and steps "
                                    "(experiments/matrices/stragglers.json)%s", left_out ? "; the pairs there were left out: the ring diverged" : "");
    else claim_verdict(c, "PASS", "%d async/ring pair%s with a straggler: async faster, loss within %.0f%%", pairs, pairs > 1 ? "s" : "",
                       CL_ASYNC_LOSS_TOL * 100);
}

/* ---- claim 8: BytePS's Table 1 ---------------------------------------------------------------- */

/* Runs on machines of several ranks each (--nodes M, M < N): Table 1 counts machines there. */
static int run_on_machines(const ClaimsRun *r) { return config_on_machines(r->ranks, r->nodes); }

/* The run's line of BytePS's Table 1 (Jiang et al., OSDI 2020, §4.1) in units of M / B, M the
 * gradient on the wire and B the emulated link's rate, n workers, k CPU servers: ring and
 * colocated sharded ps 2(n-1)/n, k non-colocated servers max(1, n/k), BytePS 2n(n-1)/(n^2+kn-2k).
 * DataParallel's server in rank 0 is not in the table: (n-1), shown beside. *arch names it; -1
 * for a run the table does not cover. */
static double table1_line(const ClaimsRun *r, const char **arch, int *in_table) {
    double n = r->ranks, k = r->servers, m = r->nodes;
    *in_table = 1;
    if (run_on_machines(r)) { /* the paper's topology: n machines of G ranks, one NIC each */
        if (r->arch == ARCH_RING_HIER) return *arch = "all-reduce (hierarchical ring, n machines)", 2 * (m - 1) / m;
        if (r->arch == ARCH_BYTEPS_HIER && k >= 0 && k <= m)
            return *arch = "BytePS (n machines)", 2 * m * (m - 1) / (m * m + k * m - 2 * k);
        if (is_ring(r)) return *arch = "all-reduce (flat ring over the ranks)", 2 * (n - 1) / n;
        *in_table = 0;
        return *arch = "", -1;
    }
    if (is_ring(r)) return *arch = "all-reduce (ring)", 2 * (n - 1) / n;
    if (is_ps_sharded(r)) return *arch = "colocated PS (sharded)", 2 * (n - 1) / n;
    if (r->arch == ARCH_PS_DEDICATED && k >= 1)
        return *arch = "non-colocated PS", fmax(1.0, n / k);
    if (r->arch == ARCH_BYTEPS && k >= 0 && k <= n) return *arch = "BytePS", 2 * n * (n - 1) / (n * n + k * n - 2 * k);
    *in_table = 0;
    if (is_ps_colocated(r)) return *arch = "DataParallel's server (rank 0; not in Table 1)", n - 1;
    return *arch = "", -1;
}

/* A server's pipeline on link l: the seconds of its first piece's fill and its last one's drain,
 * 2 x the piece (a partition, --ps-partition-kb: auto is the bytes l carries in 2 ms, 64 KiB to
 * 4 MiB; off, or a partition larger than it, the bucket) / the rate. Table 1's lines are the
 * limit of infinitely fine pieces; the ring has no such term (0). */
static double table1_fill_s(const ClaimsRun *r, const LinkSpec *l) {
    if (is_ring(r)) return 0;
    double piece = r->grad_bytes, bucket = run_bucket_bytes(r);
    if (bucket > 0 && bucket < piece) piece = bucket;
    double part = piece;
    if (!strcmp(r->partition, "auto") || !r->partition[0]) part = fmin(fmax(l->bytes_per_s * 0.002, 65536), 4194304);
    else if (strcmp(r->partition, "off")) part = strtod(r->partition, NULL) * 1024;
    if (part > 0 && part < piece) piece = part;
    return 2 * piece / l->bytes_per_s;
}

/* Whether run r is outside claim 8's conditions, with why: Table 1 prices bytes on links, so it
 * holds for a lockstep push step, nobody slowed, where the bandwidth term dominates what it leaves
 * out: the per-message cost (alpha, the link l's latency and the software's, times the rounds of
 * messages a step takes: the alpha coefficient of the back end's cost model summed over its
 * buckets, experiments/predict.h) and a server's pipeline fill and drain (table1_fill_s), against
 * the run's line of line_s seconds. */
static int table1_outside(const ClaimsRun *r, const LinkSpec *l, double line_s, char *why, size_t len) {
    double msgs = run_rounds(r);
    double alpha = l->latency_s + PREDICT_EMULATED_ALPHA_S, fill = table1_fill_s(r, l), lat = alpha * msgs + fill;
    why[0] = 0;
    if (!run_lockstep(r)) snprintf(why, len, "--ps-consistency %s: no synchronous step", r->consistency);
    else if (!strcmp(r->mode, "dataparallel")) snprintf(why, len, "--ps-mode dataparallel: rank 0's data messages are not in the table");
    else if (has_straggler(r->straggler)) snprintf(why, len, "--straggler %.200s: the step waits for the slow rank", r->straggler);
    else if (!run_timed(r)) snprintf(why, len, "%d timed steps (--steps less --warmup): too few for a time per step (at least %d)",
                                     r->timed_steps, CL_TIMED_MIN);
    else if (isfinite(lat) && lat > CL_TABLE1_LAT_MAX * line_s)
        snprintf(why, len, "not bandwidth-bound: %.0f rounds of messages a step x %.0f us%s%.2f ms = %.2f ms, %.0f%% of the line's "
                 "%.2f ms (at most %.0f%%)", msgs, alpha * 1e6, fill > 0 ? " + the pipeline's fill and drain " : "",
                 fill * 1e3, lat * 1e3, 100 * lat / line_s, line_s * 1e3, 100 * CL_TABLE1_LAT_MAX);
    return why[0] != 0;
}

/* The processes run r started (its workers and any server processes of their own) where they
 * outnumber its host's cores: then a step also waits for a core, which Table 1 leaves out. 0 where
 * every process had a core, or the cores are unknown. */
static int run_crowded(const ClaimsRun *r) {
    int procs = r->ranks + (r->arch == ARCH_PS_DEDICATED || arch_is_byteps(r->arch) ? r->servers : 0);
    return r->cores > 0 && procs > r->cores ? procs : 0;
}

static void claim8(const ClaimsSet *s, Claim *c) {
    int runs = 0, bad = 0, pairs = 0, beats = 0, crowded = 0, unexplained = 0, crowded_cores = 0;
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "runs"), *beat = cJSON_AddArrayToObject(c->numbers, "k_equals_n");
    cJSON *left = cJSON_AddArrayToObject(c->numbers, "left_out");
    claim_line(c, "rule: under an emulated link of B bytes/s, comm_total per step (mean over workers) within %.0f%% of its line of "
                  "BytePS's Table 1 (M the gradient on the wire): ring and colocated sharded ps 2(n-1)M/(nB); k non-colocated "
                  "servers max(M/B, nM/(kB)); BytePS 2n(n-1)M/((n^2+kn-2k)B); and with k = n dedicated servers the server's "
                  "comm below the ring's (same n, link, model) where its line M/B is below the ring's, n > 2 (at n = 2 the "
                  "two lines are one: the pair within %.0f%% of each other)", CL_TABLE1_TOL * 100, CL_TABLE1_TOL * 100);
    claim_line(c, "      decided on lockstep push runs without a straggler where the bandwidth term dominates: alpha (the link's "
                  "latency + %.0f us a message) x the rounds of messages a step takes, plus a server's pipeline fill and "
                  "drain (2 partitions on the link), at most %.0f%% of the line; the others are named as left out",
               PREDICT_EMULATED_ALPHA_S * 1e6, 100 * CL_TABLE1_LAT_MAX);
    claim_line(c, "      at the paper's topology (--nodes M, machines of G >= 2 ranks, one NIC each) n counts machines: the "
                  "hierarchical ring 2(n-1)M/(nB), byteps --hierarchical BytePS's line with n = M, the flat ring over the N "
                  "ranks 2(N-1)M/(NB) (each NIC a rank's), and k = n CPU servers (byteps --hierarchical) against the flat "
                  "ring; a flat server on nodes is left out (its NIC carries G workers' pushes)");
    int out = 0;
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *r = &s->runs[i];
        LinkSpec l;
        if (r->ranks < 2 || !r->emulated[0] || link_parse(r->emulated, &l) != RS_OK || !(l.bytes_per_s > 0)) continue;
        const char *arch;
        int in_table;
        if (run_on_machines(r) && is_server(r) && r->arch != ARCH_BYTEPS_HIER) {
            out++;
            cJSON *o = num_item(left, r);
            const char *why = "a flat server on machines of several ranks: each NIC carries its node's G workers' pushes, "
                              "where Table 1 counts machines (byteps --hierarchical pushes one sum a machine)";
            cJSON_AddStringToObject(o, "why", why);
            claim_line(c, "left out %s n=%d on %d nodes: %s  [%s]", arch_name(r->arch), r->ranks, r->nodes, why, r->label);
            continue;
        }
        double units = table1_line(r, &arch, &in_table);
        if (units < 0) continue;
        double line = units * r->grad_bytes / l.bytes_per_s, meas = run_mean(r->comm_total, r->nw), ratio = meas / line;
        char why[400];
        if (table1_outside(r, &l, line, why, sizeof why)) {
            out++;
            cJSON *o = num_item(left, r);
            cJSON_AddStringToObject(o, "why", why);
            claim_line(c, "left out %s n=%d: %s  [%s]", arch, r->ranks, why, r->label);
            continue;
        }
        int ok = fabs(ratio - 1) <= CL_TABLE1_TOL, procs = run_crowded(r);
        if (in_table) {
            runs++;
            bad += !ok;
            /* above its line with more processes than cores: waiting for a core explains it */
            if (!ok && ratio > 1 && procs) crowded++, crowded_cores = r->cores;
            else unexplained += !ok;
        }
        cJSON *o = num_item(arr, r);
        cJSON_AddStringToObject(o, "architecture", arch);
        cJSON_AddNumberToObject(o, "servers", r->servers);
        cJSON_AddStringToObject(o, "link", r->emulated);
        cJSON_AddNumberToObject(o, "line_s", line);
        cJSON_AddNumberToObject(o, "measured_s", meas);
        cJSON_AddNumberToObject(o, "ratio", ratio);
        cJSON_AddBoolToObject(o, "judged", in_table);
        char nn[24]; /* n: the workers, or at the paper's topology the machines x their ranks */
        if (run_on_machines(r)) snprintf(nn, sizeof nn, "%dx%d", r->nodes, r->ranks / r->nodes);
        else snprintf(nn, sizeof nn, "%d", r->ranks);
        claim_line(c, "%-46s n=%-4s k=%-2d %-8s line %.2f x M/B = %.2f ms, measured %.2f ms (x%.2f)%s  [%s]", arch, nn,
                   r->servers, r->emulated, units, line * 1e3, meas * 1e3, ratio,
                   !in_table ? "  (beside)" : ok ? "" : ratio > 1 && procs ? "  <- off the line (oversubscribed)" : "  <- off the line",
                   r->label);
        cJSON_AddStringToObject(o, "why", !in_table || ok ? "" : ratio > 1 && procs ? "oversubscribed" : "unexplained");
    }
    /* the crossing: k = n non-colocated servers against the ring, same n, link and model */
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *p = &s->runs[i];
        LinkSpec l;
        char why[400];
        const char *arch;
        int in_table;
        /* k = n: n dedicated servers for n workers, or (at the paper's topology) n CPU servers for n machines */
        int kn = run_on_machines(p) ? p->arch == ARCH_BYTEPS_HIER && p->servers == p->nodes
                                    : p->arch == ARCH_PS_DEDICATED && p->servers == p->ranks;
        if (!kn || p->ranks < 2 ||
            !p->emulated[0] || link_parse(p->emulated, &l) != RS_OK || !(l.bytes_per_s > 0) ||
            table1_outside(p, &l, table1_line(p, &arch, &in_table) * p->grad_bytes / l.bytes_per_s, why, sizeof why))
            continue;
        for (int j = 0; j < s->nruns; j++) {
            const ClaimsRun *r = &s->runs[j];
            if (!is_ring(r) || r->ranks != p->ranks || r->nodes != p->nodes || strcmp(r->emulated, p->emulated) ||
                strcmp(r->math, p->math) ||
                table1_outside(r, &l, table1_line(r, &arch, &in_table) * r->grad_bytes / l.bytes_per_s, why, sizeof why))
                continue;
            double mp = run_mean(p->comm_total, p->nw), mr = run_mean(r->comm_total, r->nw);
            int tie = p->ranks == 2; /* Table 1: M/B for both at n = 2, so neither should win */
            int ok = tie ? mr > 0 && fabs(mp / mr - 1) <= CL_TABLE1_TOL : mp < mr;
            pairs++;
            beats += !tie;
            bad += !ok;
            int procs = run_crowded(p) > run_crowded(r) ? run_crowded(p) : run_crowded(r);
            if (!ok && procs) crowded++, crowded_cores = p->cores;
            else unexplained += !ok;
            cJSON *o = num_item(beat, p);
            cJSON_AddStringToObject(o, "ring", r->label);
            cJSON_AddNumberToObject(o, "ps_comm_s", mp);
            cJSON_AddNumberToObject(o, "ring_comm_s", mr);
            cJSON_AddBoolToObject(o, "tie", tie);
            claim_line(c, "k = n = %d %s %.2f ms vs ring %.2f ms per step (x%.2f) on link %s%s  [%s vs %s]",
                       run_on_machines(p) ? p->nodes : p->ranks,
                       run_on_machines(p) ? "CPU servers for as many machines (byteps --hierarchical)" : "dedicated servers",
                       mp * 1e3, mr * 1e3, mr > 0 ? mp / mr : NAN, p->emulated,
                       tie ? (ok ? "  (lines tie at n = 2)" : "  <- the lines tie at n = 2, the runs do not")
                           : (ok ? "" : "  <- not faster"),
                       p->label, r->label);
        }
    }
    cJSON_AddNumberToObject(c->numbers, "unexplained", unexplained);
    if (crowded)
        claim_line(c, "why: %d check%s off the claim ran more processes than the %d cores: each process also waits for a core "
                      "(oversubscription), which Table 1 leaves out (it gives every worker and server a machine of its own); "
                      "lab 6's taskset check says whether the link or the cores set the pace", crowded, crowded > 1 ? "s" : "",
                   crowded_cores);
    if (bad) claim_verdict(c, "FAIL", "%d check%s off the claim (%d runs on a Table 1 line, %d k = n pairs)", bad, bad > 1 ? "s" : "",
                           runs, pairs);
    else if (!runs || !beats)
        claim_verdict(c, "NOT-RUN", "needs lockstep push runs without a straggler under an emulated --link, bandwidth-bound "
                                    "(alpha x the rounds, and a server's fill and drain, at most %.0f%% of the line), on Table 1's lines and a ring beside "
                                    "--ps-placement dedicated --ps-servers N at some N > 2 (experiments/matrices/byteps.json; have "
                                    "%d runs, %d k = n pairs, %d at N > 2; %d left out)", 100 * CL_TABLE1_LAT_MAX, runs, pairs, beats, out);
    else claim_verdict(c, "PASS", "%d run%s within %.0f%% of their Table 1 line; k = n servers beat the ring in %d pair%s%s", runs,
                       runs > 1 ? "s" : "", CL_TABLE1_TOL * 100, beats, beats > 1 ? "s" : "",
                       pairs > beats ? " (and tie with it at n = 2)" : "");
}

/* ---- claim 9: the tree against the ring ------------------------------------------------------- */

/* Seconds per step the model gives run r's gradient as back end sync (its buckets, its wire) on
 * emulated link l: the link's latency plus the software's per message, 1/bandwidth per byte. */
static double tree_pred(const ClaimsRun *r, Arch arch, const LinkSpec *l) {
    return predict_step_comm(arch, 0, r->ranks, r->nodes, 0, r->grad_bytes, run_bucket_bytes(r), /* on the wire already */
                             l->latency_s + PREDICT_EMULATED_ALPHA_S, 1.0 / l->bytes_per_s);
}

static void claim9(const ClaimsSet *s, Claim *c) {
    int small = 0, large = 0, bad = 0, out = 0;
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "pairs"), *left = cJSON_AddArrayToObject(c->numbers, "left_out");
    claim_line(c, "rule: a tree run and a ring run of one configuration (N >= 3, lockstep, no straggler, one transport) under an "
                  "emulated --link; where the alpha-beta model puts the tree >= %.0f%% ahead (small messages, many ranks: "
                  "2 log2 N latencies against 2(N-1)) the tree's comm per step is below the ring's; where it puts the ring "
                  ">= %.0f%% ahead (large messages: 2(N-1)/N n against about 2n) the ring's is at most %.0f%% above the tree's",
               100 * CL_TREE_MARGIN, 100 * CL_TREE_MARGIN, 100 * CL_TREE_TOL);
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *t = &s->runs[i];
        LinkSpec l;
        if (t->arch != ARCH_TREE || t->ranks < 3 || !run_lockstep(t)) continue;
        for (int j = 0; j < s->nruns; j++) {
            const ClaimsRun *r = &s->runs[j];
            if (!is_ring(r) || r->ranks != t->ranks || strcmp(r->pair, t->pair) || !run_lockstep(r)) continue;
            char why[300] = "";
            if (!t->emulated[0] || link_parse(t->emulated, &l) != RS_OK || !(l.bytes_per_s > 0))
                snprintf(why, sizeof why, "no emulated --link: the regime would be this machine's, not a network's");
            else if (!run_unslowed(t) || !run_unslowed(r)) snprintf(why, sizeof why, "a straggler sets the pace");
            else if (!run_timed(t) || !run_timed(r)) snprintf(why, sizeof why, "too few timed steps (at least %d)", CL_TIMED_MIN);
            else if (strcmp(t->transport, r->transport))
                snprintf(why, sizeof why, "the tree moved over %s, the ring over %s: --transport ipc for both",
                         t->transport[0] ? t->transport : "?", r->transport[0] ? r->transport : "?");
            double pt = why[0] ? 0 : tree_pred(t, ARCH_TREE, &l), pr = why[0] ? 0 : tree_pred(r, ARCH_RING, &l);
            int regime = why[0] ? 0 : pt < (1 - CL_TREE_MARGIN) * pr ? 1 : pr < (1 - CL_TREE_MARGIN) * pt ? 2 : 0;
            if (!why[0] && !regime)
                snprintf(why, sizeof why, "between the regimes: the model gives the tree %.2f ms, the ring %.2f ms", pt * 1e3, pr * 1e3);
            if (why[0]) {
                out++;
                cJSON *o = num_item(left, t);
                cJSON_AddStringToObject(o, "ring", r->label);
                cJSON_AddStringToObject(o, "why", why);
                claim_line(c, "left out N=%d: %s  [%s vs %s]", t->ranks, why, t->label, r->label);
                continue;
            }
            double mt = run_mean(t->comm_total, t->nw), mr = run_mean(r->comm_total, r->nw);
            int ok = regime == 1 ? mt < mr : mr <= (1 + CL_TREE_TOL) * mt;
            small += regime == 1;
            large += regime == 2;
            bad += !ok;
            cJSON *o = num_item(arr, t);
            cJSON_AddStringToObject(o, "ring", r->label);
            cJSON_AddStringToObject(o, "regime", regime == 1 ? "latency" : "bandwidth");
            cJSON_AddStringToObject(o, "link", t->emulated);
            cJSON_AddNumberToObject(o, "tree_comm_s", mt);
            cJSON_AddNumberToObject(o, "ring_comm_s", mr);
            cJSON_AddNumberToObject(o, "tree_predicted_s", pt);
            cJSON_AddNumberToObject(o, "ring_predicted_s", pr);
            claim_line(c, "N=%-3d %-9s tree %.2f ms vs ring %.2f ms per step (model %.2f vs %.2f) on link %s%s  [%s vs %s]", t->ranks,
                       regime == 1 ? "small:" : "large:", mt * 1e3, mr * 1e3, pt * 1e3, pr * 1e3, t->emulated,
                       ok ? "" : regime == 1 ? "  <- the tree is not faster" : "  <- the ring is slower", t->label, r->label);
        }
    }
    if (bad) claim_verdict(c, "FAIL", "%d of %d pairs off the claim", bad, small + large);
    else if (!small || !large)
        claim_verdict(c, "NOT-RUN", "needs tree and ring runs of one configuration under an emulated --link, N >= 3, one where "
                                    "the model puts the tree ahead (small buckets, latency) and one the ring "
                                    "(experiments/matrices/tree.json; have %d latency-bound and %d bandwidth-bound pairs, %d left out)",
                      small, large, out);
    else claim_verdict(c, "PASS", "the tree ahead in %d latency-bound pair%s, the ring at least as fast in %d bandwidth-bound one%s",
                       small, small > 1 ? "s" : "", large, large > 1 ? "s" : "");
}

/* ---- claims 10 and 11: machines of several ranks (bench reports) ----------------------------- */

/* Whether bench b's row i is bandwidth-bound: the per-message part at most CL_NODES_LAT_MAX of
 * the bytes' part. */
static int bench_bw_bound(const ClaimsBench *b, int i) {
    double lat, bw;
    return claims_bench_model(b, i, &lat, &bw) == 0 && bw > 0 && lat <= CL_NODES_LAT_MAX * bw;
}

/* Machines of several ranks behind an emulated NIC: the bench claims' common ground. */
static int bench_on_nodes(const ClaimsBench *b) { return config_on_machines(b->ranks, b->nodes) && b->bytes_per_s > 0; }

static cJSON *bench_item(cJSON *arr, const ClaimsBench *b) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "bench", b->label);
    cJSON_AddStringToObject(o, "architecture", arch_name(b->arch));
    cJSON_AddNumberToObject(o, "ranks", b->ranks);
    cJSON_AddNumberToObject(o, "nodes", b->nodes);
    cJSON_AddStringToObject(o, "link", b->link);
    cJSON_AddNumberToObject(o, "repeats", b->repeats);
    cJSON_AddItemToArray(arr, o);
    return o;
}

/* Claim 10 (NVIDIA/nccl#946, nccl-tests#22): on 2 nodes of G ranks behind one NIC each, the
 * flat ring's bus bandwidth is about the NIC's (each NIC carries a rank's 2(N-1)/N n), the trees
 * over nodes' and the hierarchical ring's near 2(N-1)/N x the NIC's (each NIC carries n: the bus
 * bandwidth's 2(N-1)/N n over n / B). */
/* The processes bench b ran where they outnumber its host's cores (0 otherwise, or unknown): then
 * the cores, not the NIC, may set the pace, which the claims on nodes leave out. */
static int bench_crowded(const ClaimsBench *b) {
    int procs = b->ranks + b->servers;
    return b->cores > 0 && procs > b->cores ? procs : 0;
}

/* The closing lines of a claim on bench reports: why its misses are, where the cores explain them. */
static void bench_why(Claim *c, int crowded, int unexplained, int cores) {
    cJSON_AddNumberToObject(c->numbers, "unexplained", unexplained);
    if (crowded)
        claim_line(c, "why: %d check%s off the claim ran more processes than the %d cores: the all-reduce's own work (the "
                      "mesh's node phases, the copies, ZeroMQ's threads) then waits for a core, and the NIC no longer sets the "
                      "pace; a slower --link puts it back in charge (docs/benchmarks.md, \"Machines\")", crowded,
                   crowded > 1 ? "s" : "", cores);
}

static void claim10(const ClaimsSet *s, Claim *c) {
    int have[ARCH_COUNT] = {0}, bad = 0, out = 0, crowded = 0, unexplained = 0, cores = 0;
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "benches"), *left = cJSON_AddArrayToObject(c->numbers, "left_out");
    claim_line(c, "rule: bench reports on 2 nodes of G >= 2 ranks behind an emulated --link of B bytes/s, at the sizes where "
                  "the model's per-message time (the rounds x the link's latency + %.0f us, and the rounds inside the node) "
                  "is at most %.0f%% of the bytes' time: the median bus bandwidth (size / time x 2(N-1)/N) of the flat ring "
                  "within %.0f%% of B, of the trees over nodes (tree --hierarchical) and the hierarchical ring within %.0f%% "
                  "of 2(N-1)/N B", PREDICT_EMULATED_ALPHA_S * 1e6, 100 * CL_NODES_LAT_MAX, 100 * CL_NIC_RING_TOL,
               100 * CL_NIC_TREE_TOL);
    for (int i = 0; i < s->nbenches; i++) {
        const ClaimsBench *b = &s->benches[i];
        if (b->nodes != 2 || (b->arch != ARCH_RING && b->arch != ARCH_TREE_HIER && b->arch != ARCH_RING_HIER)) continue;
        double N = b->ranks, target = b->arch == ARCH_RING ? b->bytes_per_s : 2 * (N - 1) / N * b->bytes_per_s;
        double tol = b->arch == ARCH_RING ? CL_NIC_RING_TOL : CL_NIC_TREE_TOL, bus[256];
        int k = 0;
        for (int r = 0; bench_on_nodes(b) && r < b->nrows && k < 256; r++)
            if (bench_bw_bound(b, r))
                bus[k++] = b->size[r] * arch_wire_ratio(b->arch, b->wire) / b->time_s[r] * 2 * (N - 1) / N;
        if (!k) {
            out++;
            cJSON *o = bench_item(left, b);
            const char *why = !bench_on_nodes(b) ? "no emulated --link, or one rank a node" : "no bandwidth-bound size";
            cJSON_AddStringToObject(o, "why", why);
            claim_line(c, "left out %s N=%d on 2 nodes: %s  [%s]", arch_name(b->arch), b->ranks, why, b->label);
            continue;
        }
        double med = report_percentile(bus, k, 50), ratio = med / target;
        int ok = fabs(ratio - 1) <= tol;
        have[b->arch]++;
        bad += !ok;
        if (!ok && bench_crowded(b)) crowded++, cores = b->cores;
        else unexplained += !ok;
        cJSON *o = bench_item(arr, b);
        cJSON_AddNumberToObject(o, "busbw_bytes_per_s", med);
        cJSON_AddNumberToObject(o, "target_bytes_per_s", target);
        cJSON_AddNumberToObject(o, "ratio", ratio);
        cJSON_AddNumberToObject(o, "sizes", k);
        claim_line(c, "%-18s N=%-2d G=%-2d %-10s busbw %.1f MB/s = %.2f x %s (%.1f MB/s) over %d size%s%s  [%s]", arch_name(b->arch),
                   b->ranks, b->ranks / 2, b->link, med / 1e6, ratio, b->arch == ARCH_RING ? "the NIC's" : "2(N-1)/N x the NIC's",
                   target / 1e6, k, k > 1 ? "s" : "", ok ? "" : bench_crowded(b) ? "  <- off the claim (oversubscribed)" : "  <- off the claim",
                   b->label);
    }
    bench_why(c, crowded, unexplained, cores);
    if (bad) claim_verdict(c, "FAIL", "%d of %d bench configurations off their bus bandwidth", bad,
                           have[ARCH_RING] + have[ARCH_TREE_HIER] + have[ARCH_RING_HIER]);
    else if (!have[ARCH_RING] || !have[ARCH_TREE_HIER] || !have[ARCH_RING_HIER])
        claim_verdict(c, "NOT-RUN", "needs bench reports of the flat ring, tree --hierarchical and ring --hierarchical on "
                                    "--nodes 2 under an emulated --link, bandwidth-bound (experiments/benchmarks/nodes_claims.sh; "
                                    "have %d, %d, %d; %d left out)", have[ARCH_RING], have[ARCH_TREE_HIER], have[ARCH_RING_HIER], out);
    else claim_verdict(c, "PASS", "on 2 nodes the flat ring at the NIC's bus bandwidth, the trees over nodes and the hierarchical "
                                  "ring at 2(N-1)/N of it (%d configurations)", have[ARCH_RING] + have[ARCH_TREE_HIER] + have[ARCH_RING_HIER]);
}

/* Claim 11: the hierarchical ring buys the NIC bytes' ratio, (N-1)M / (N(M-1)) (each NIC 2(M-1)/M
 * n against the flat ring's 2(N-1)/N n), fading as M grows at a fixed G; where messages are small
 * the rounds decide instead (2(N-1) on the NIC for the flat ring, 2(M-1) and 2(G-1) inside the
 * node for the hierarchical one), held against the model's order as claim 9 holds the tree's. */
static void claim11(const ClaimsSet *s, Claim *c) {
    int pairs = 0, bad = 0, lat_pairs = 0, out = 0, crowded = 0, unexplained = 0, cores = 0;
    cJSON *arr = cJSON_AddArrayToObject(c->numbers, "pairs"), *left = cJSON_AddArrayToObject(c->numbers, "left_out");
    claim_line(c, "rule: a flat ring and a hierarchical ring bench of one configuration (N ranks on M nodes, the same "
                  "--link, wire, message layer and --barrier): at the sizes bandwidth-bound for both (as claim 10), the median of the flat ring's time "
                  "over the hierarchical one's within %.0f%% of (N-1)M/(N(M-1)); at sizes where the model puts one %.0f%% "
                  "ahead on its rounds (latency-bound), that one measured no slower", 100 * CL_HIER_TOL, 100 * CL_TREE_MARGIN);
    for (int i = 0; i < s->nbenches; i++) {
        const ClaimsBench *h = &s->benches[i];
        if (h->arch != ARCH_RING_HIER || !bench_on_nodes(h)) continue;
        for (int j = 0; j < s->nbenches; j++) {
            const ClaimsBench *f = &s->benches[j];
            if (f->arch != ARCH_RING || f->ranks != h->ranks || f->nodes != h->nodes || strcmp(f->link, h->link) ||
                strcmp(f->wire, h->wire) || !claims_bench_timed_alike(f, h))
                continue;
            double N = h->ranks, M = h->nodes, want = (N - 1) * M / (N * (M - 1)), ratio[256];
            int k = 0, lat_bad = 0, lat_n = 0;
            for (int r = 0; r < h->nrows; r++)
                for (int q = 0; q < f->nrows; q++) {
                    if (f->size[q] != h->size[r]) continue;
                    if (bench_bw_bound(h, r) && bench_bw_bound(f, q) && k < 256) ratio[k++] = f->time_s[q] / h->time_s[r];
                    double lh, bh, lf, bf;
                    if (claims_bench_model(h, r, &lh, &bh) || claims_bench_model(f, q, &lf, &bf)) continue;
                    double ph = lh + bh, pf = lf + bf;
                    int regime = ph < (1 - CL_TREE_MARGIN) * pf ? 1 : pf < (1 - CL_TREE_MARGIN) * ph ? 2 : 0;
                    if (!regime || bench_bw_bound(h, r)) continue; /* the bandwidth-bound end is decided above */
                    lat_n++;
                    lat_bad += regime == 1 ? h->time_s[r] > (1 + CL_TREE_TOL) * f->time_s[q]
                                           : f->time_s[q] > (1 + CL_TREE_TOL) * h->time_s[r];
                }
            if (!k) {
                out++;
                cJSON *o = bench_item(left, h);
                cJSON_AddStringToObject(o, "flat", f->label);
                cJSON_AddStringToObject(o, "why", "no size bandwidth-bound for both");
                claim_line(c, "left out N=%d M=%d: no size bandwidth-bound for both  [%s vs %s]", h->ranks, h->nodes, f->label, h->label);
                continue;
            }
            double med = report_percentile(ratio, k, 50);
            int ok = fabs(med / want - 1) <= CL_HIER_TOL && !lat_bad;
            pairs++;
            lat_pairs += lat_n > 0;
            bad += !ok;
            int busy = bench_crowded(h) || bench_crowded(f);
            if (!ok && busy) crowded++, cores = h->cores ? h->cores : f->cores;
            else unexplained += !ok;
            cJSON *o = bench_item(arr, h);
            cJSON_AddStringToObject(o, "flat", f->label);
            cJSON_AddNumberToObject(o, "flat_over_hierarchical", med);
            cJSON_AddNumberToObject(o, "nic_bytes_ratio", want);
            cJSON_AddNumberToObject(o, "latency_sizes", lat_n);
            cJSON_AddNumberToObject(o, "latency_sizes_off", lat_bad);
            claim_line(c, "N=%-2d M=%-2d G=%-2d %-10s flat / hierarchical %.2fx, the NIC bytes' ratio %.2fx (%d size%s); %d latency-bound "
                          "size%s, %d off the model's order%s  [%s vs %s]", h->ranks, h->nodes, h->ranks / h->nodes, h->link, med,
                       want, k, k > 1 ? "s" : "", lat_n, lat_n == 1 ? "" : "s", lat_bad,
                       ok ? "" : busy ? "  <- off the claim (oversubscribed)" : "  <- off the claim", f->label, h->label);
        }
    }
    bench_why(c, crowded, unexplained, cores);
    if (bad) claim_verdict(c, "FAIL", "%d of %d flat/hierarchical pairs off the claim", bad, pairs);
    else if (!pairs)
        claim_verdict(c, "NOT-RUN", "needs bench reports of the flat and the hierarchical ring on one --nodes M and --link, "
                                    "bandwidth-bound sizes (experiments/benchmarks/nodes_claims.sh; %d left out)", out);
    else claim_verdict(c, "PASS", "the hierarchical ring buys the NIC bytes' ratio in %d pair%s%s", pairs, pairs > 1 ? "s" : "",
                       lat_pairs ? ", and the rounds decide the small sizes as the model says" : "");
}

/* ---- claim 12: ZeRO's Figure 1 ------------------------------------------------------------------ */

/* The runs claim 12 holds to ZeRO's formulas: DDP's ring and the ZeRO stages. */
static int is_states(const ClaimsRun *r) { return is_ring(r) || arch_is_zero(r->arch); }
static int run_stage(const ClaimsRun *r) {
    return r->arch == ARCH_ZERO1 ? 1 : r->arch == ARCH_ZERO2 ? 2 : r->arch == ARCH_ZERO3 ? 3 : 0;
}
/* Bytes of optimizer state an element (K): SGD's momentum 4, AdamW's two moments 8. */
static double run_state_k(const ClaimsRun *r) { return !strcmp(r->optimizer, "adamw") ? 8 : 4; }
/* A run whose memory the formulas decide: by_tag measured, the parameter count known, one gradient
 * (--accum-steps keeps a second, the accumulation buffer, under grads: FSDP's no_sync). */
static int run_states_known(const ClaimsRun *r) { return r->nw > 0 && !isnan(r->tag_params[0]) && r->psi > 0; }
static int run_one_gradient(const ClaimsRun *r) { return r->accum <= 1; }
static int is_states_known(const ClaimsRun *r) { return is_states(r) && run_states_known(r); }
static int is_zero(const ClaimsRun *r) { return arch_is_zero(r->arch); }
/* Any run with communication (claim 12 names the other architectures' as left out). */
static int run_any(const ClaimsRun *r) { return r->arch != ARCH_NONE; }

/* The formula of a run's model states per rank in Psi (DDP: 4 + 4 + K; each stage divides what it
 * shards by N), into buf. */
static const char *states_formula(int stage, double k, char *buf, size_t len) {
    if (stage == 0) snprintf(buf, len, "%.0f Psi", 8 + k);
    else if (stage == 1) snprintf(buf, len, "8 Psi + %.0f Psi/N", k);
    else if (stage == 2) snprintf(buf, len, "4 Psi + %.0f Psi/N", 4 + k);
    else snprintf(buf, len, "%.0f Psi/N", 8 + k);
    return buf;
}

/* Bytes a rank sends per step by the formulas: the ring 2(N-1)/N w Psi; ZeRO's reduce-scatter in
 * the wire's type and its all-gathers of the fp32 parameters, (N-1)/N (w + 4) Psi for stages 1 and
 * 2 and (N-1)/N (w Psi + 8 Psi - 4 kept) for stage 3 (one all-gather before the forward, one before
 * the backward, but one a step for the layers kept gathered: gpt's tied embedding), w the wire's
 * bytes an element: 2(N-1)/N 4 Psi and, kept aside, 1.5x it in fp32. */
static double states_bytes(const ClaimsRun *r) {
    double N = r->ranks, w = 4 * codec_wire_ratio(r->wire, 0);
    double g = run_stage(r) == 3 ? 8 * r->psi - 4 * r->kept : run_stage(r) ? 4 * r->psi : w * r->psi;
    return (N - 1) / N * (w * r->psi + g);
}

/* keys[i]: vals[i] for i < n into o. */
static void add_numbers(cJSON *o, const char *const *keys, const double *vals, int n) {
    for (int i = 0; i < n; i++) cJSON_AddNumberToObject(o, keys[i], vals[i]);
}

/* One run's model states against the formula, tag by tag, every rank (claim 12's memory part):
 * 1 when on it, 0 when off; its line and numbers. */
static int claim12_memory(Claim *c, cJSON *arr, const ClaimsRun *r) {
    static const char *const tags[3] = {"params", "grads", "optimizer"};
    int stage = run_stage(r);
    double N = r->ranks, k = run_state_k(r), per[3] = {4, 4, k}, want[3], bound[3], worst[3] = {0}, most[3] = {0};
    double units = stage == 3 ? r->nlayers : r->nbuckets, act = 0, comm = 0; /* stage 3 shards layer by layer */
    for (int t = 0; t < 3; t++) {
        int sharded = stage >= 3 - t; /* stage 1 the optimizer's state, 2 the gradients too, 3 the parameters */
        int paged = sharded && t < 2; /* a sharded gradient (and stage 3's parameters): counted page by page */
        want[t] = per[t] * r->psi / (sharded ? N : 1);
        bound[t] = sharded ? units * (per[t] + (paged ? 2 * CL_PAGE_BYTES : 0)) : 0;
    }
    for (int q = 0; q < r->nw; q++) {
        const double got[3] = {r->tag_params[q], r->tag_grads[q], r->tag_optimizer[q]};
        for (int t = 0; t < 3; t++) {
            double d = got[t] - want[t];
            if (!(fabs(d) <= fabs(worst[t]))) worst[t] = d; /* a NAN tag is as far off as it gets */
            most[t] = got[t] > most[t] ? got[t] : most[t];
        }
        act = r->tag_activations[q] > act ? r->tag_activations[q] : act;
        comm = r->tag_comm[q] > comm ? r->tag_comm[q] : comm;
    }
    int ok = 1;
    for (int t = 0; t < 3; t++) ok &= fabs(worst[t]) <= bound[t];
    double states = most[0] + most[1] + most[2], formula = want[0] + want[1] + want[2];
    char f[64], name[256];
    cJSON *o = num_item(arr, r);
    cJSON_AddStringToObject(o, "architecture", arch_name(r->arch));
    cJSON_AddStringToObject(o, "optimizer", r->optimizer);
    static const char *const size[] = {"psi", "buckets"};
    add_numbers(o, size, (const double[]){r->psi, units}, 2);
    cJSON_AddStringToObject(o, "formula", states_formula(stage, k, f, sizeof f));
    cJSON *e = cJSON_AddObjectToObject(o, "expected_bytes"), *m = cJSON_AddObjectToObject(o, "measured_bytes");
    cJSON *dv = cJSON_AddObjectToObject(o, "worst_deviation_bytes"), *bd = cJSON_AddObjectToObject(o, "bound_bytes");
    for (int t = 0; t < 3; t++) {
        cJSON_AddNumberToObject(e, tags[t], want[t]);
        cJSON_AddNumberToObject(m, tags[t], most[t]);
        cJSON_AddNumberToObject(dv, tags[t], isnan(worst[t]) ? -1 : worst[t]);
        cJSON_AddNumberToObject(bd, tags[t], bound[t]);
    }
    cJSON_AddNumberToObject(e, "model_states", formula);
    cJSON_AddNumberToObject(m, "model_states", states);
    static const char *const beside[] = {"activations_bytes", "comm_bytes", "model_states_share"};
    add_numbers(o, beside, (const double[]){act, comm, states + act + comm > 0 ? states / (states + act + comm) : 0}, 3);
    cJSON_AddBoolToObject(o, "ok", ok);
    series_name(r, name, sizeof name);
    claim_line(c, "%-6s N=%-2d [%s, %s] model states %s = %.3f MiB (Psi %.0f), measured %.3f MiB; worst rank's params %+.0f, "
                  "grads %+.0f, optimizer %+.0f B (bounds %.0f, %.0f, %.0f); beside: activations %.3f MiB, comm %.3f MiB "
                  "(model states %.0f%% of the three)%s  [%s]", arch_name(r->arch), r->ranks, name, r->optimizer, f, formula / MiB,
               r->psi, states / MiB, worst[0], worst[1], worst[2], bound[0], bound[1], bound[2], act / MiB, comm / MiB,
               states + act + comm > 0 ? 100 * states / (states + act + comm) : 0, ok ? "" : "  <- off the formula", r->label);
    return ok;
}

/* One ZeRO run's bytes sent per rank per step against the formula (claim 12's bytes part). */
static int claim12_bytes(Claim *c, cJSON *arr, const ClaimsRun *r) {
    /* ranks 0..N-2 forwarded the fp32 parameters once at the start, whatever the wire; under stage 3
     * every rank gathers them whole once more at the end (the final evaluation and the hash) */
    double N = r->ranks, once = run_stage(r) == 3 ? (N - 1) / N * 4 * r->psi : 0;
    double want = states_bytes(r), per, worst = sent_off(r, want, 4 * r->psi, once, &per);
    int ok = worst <= CL_ZERO_TRAFFIC_TOL;
    cJSON *o = num_item(arr, r);
    cJSON_AddStringToObject(o, "architecture", arch_name(r->arch));
    static const char *const keys[] = {"sent_per_rank_per_step_bytes", "expected_bytes", "ring_ratio", "worst_rank_deviation"};
    add_numbers(o, keys, (const double[]){per, want, want / (2 * (r->ranks - 1.0) / r->ranks * 4 * r->psi), worst}, 4);
    claim_line(c, "%-6s N=%-2d sent per rank per step %.3f MiB (start-up broadcast excluded), formula %.3f MiB = %.2fx the ring's "
                  "2(N-1)/N 4 Psi (--wire %s; worst rank %+.2f%%)%s  [%s]", arch_name(r->arch), r->ranks, per / MiB, want / MiB,
               want / (2 * (r->ranks - 1.0) / r->ranks * 4 * r->psi), r->wire, 100 * worst, ok ? "" : "  <- off", r->label);
    return ok;
}

/* A run whose comm time the link sets (claim 12's comm-time part): lockstep, nobody slowed, timed
 * long enough, under an emulated link where the rounds of messages (the cost model's alpha
 * coefficient over its buckets, x the link's latency + the software's) are at most 10% of the
 * formula's bytes on it. why: the reason where it is not. */
static int zero3_paced(const ClaimsRun *r, char *why, size_t len) {
    LinkSpec l;
    why[0] = 0;
    if (!r->emulated[0] || link_parse(r->emulated, &l) != RS_OK || !(l.bytes_per_s > 0)) snprintf(why, len, "no emulated --link");
    else if (has_straggler(r->straggler)) snprintf(why, len, "--straggler %.200s: the step waits for the slow rank", r->straggler);
    else if (!run_timed(r)) snprintf(why, len, "%d timed steps: too few for a time per step (at least %d)", r->timed_steps, CL_TIMED_MIN);
    else {
        /* stage 3's rounds go layer by layer: a reduce-scatter and two gathers of N-1 messages each */
        double rounds = run_stage(r) == 3 ? 3.0 * (r->ranks - 1) * r->nlayers : run_rounds(r);
        double lat = rounds * (l.latency_s + PREDICT_EMULATED_ALPHA_S), bw = states_bytes(r) / l.bytes_per_s;
        if (!(lat <= CL_TABLE1_LAT_MAX * bw))
            snprintf(why, len, "not bandwidth-bound: the rounds of messages %.2f ms against the bytes' %.2f ms (at most %.0f%%)",
                     lat * 1e3, bw * 1e3, 100 * CL_TABLE1_LAT_MAX);
    }
    return why[0] == 0;
}

/* Stage 3's comm time against the ring's (claim 12's comm-time part): every zero-3 run the link
 * paces beside a ring run of its configuration and N. Sets *pairs; returns the pairs off. */
static int claim12_time(const ClaimsSet *s, Claim *c, cJSON *arr, int *pairs, int *out) {
    int bad = 0;
    char why[300], w2[300];
    for (int i = 0; i < s->nruns; i++) {
        const ClaimsRun *z = &s->runs[i], *ring = NULL;
        if (z->arch != ARCH_ZERO3 || z->ranks < 2 || z->psi <= 0) continue;
        for (int j = 0; j < s->nruns && !ring; j++)
            if (is_ring(&s->runs[j]) && s->runs[j].ranks == z->ranks && !strcmp(s->runs[j].pair, z->pair)) ring = &s->runs[j];
        if (!ring || !zero3_paced(z, why, sizeof why) || !zero3_paced(ring, w2, sizeof w2)) {
            (*out)++;
            claim_line(c, "zero-3 N=%-2d comm time: left out, %s  [%s]", z->ranks,
                       !ring ? "no ring run of its configuration and N" : why[0] ? why : w2, z->label);
            continue;
        }
        double tz = run_mean(z->comm_total, z->nw), tr = run_mean(ring->comm_total, ring->nw), want = states_bytes(z) / states_bytes(ring);
        double ratio = tr > 0 ? tz / tr : INFINITY;
        int ok = fabs(ratio / want - 1) <= CL_ZERO3_TIME_TOL;
        bad += !ok;
        (*pairs)++;
        cJSON *o = num_item(arr, z);
        cJSON_AddStringToObject(o, "ring", ring->label);
        cJSON_AddStringToObject(o, "link", z->emulated);
        static const char *const keys[] = {"zero3_comm_s", "ring_comm_s", "ratio", "expected_ratio"};
        add_numbers(o, keys, (const double[]){tz, tr, ratio, want}, 4);
        claim_line(c, "zero-3 N=%-2d on link %s: comm %.2f ms a step against the ring's %.2f ms: x%.2f (its bytes' ratio x%.2f, "
                      "within %.0f%%)%s  [%s vs %s]", z->ranks, z->emulated, tz * 1e3, tr * 1e3, ratio, want,
                   100 * CL_ZERO3_TIME_TOL, ok ? "" : "  <- off", z->label, ring->label);
    }
    return bad;
}

static void claim12_rules(Claim *c) {
    claim_line(c, "rule: model states per rank = the params + grads + optimizer tags (peak bytes) on ZeRO's formulas, Psi the "
                  "parameters (from the model's options), fp32 parameters and gradients, K bytes of optimizer state an element "
                  "(SGD's momentum 4, AdamW's moments 8): DDP (ring) 4 Psi + 4 Psi + K Psi, ZeRO-1 8 Psi + K Psi/N, ZeRO-2 "
                  "4 Psi + (4+K) Psi/N, ZeRO-3 (8+K) Psi/N; 16 Psi, 8 Psi + 8 Psi/N, 4 Psi + 12 Psi/N, 16 Psi/N under AdamW");
    claim_line(c, "      each tag on its term at every rank: a whole buffer exactly; a shard (chunk (r+1) mod N of every bucket, "
                  "floor or ceil of n/N of a bucket's n; stage 3's buckets are the model's layers) within one element a bucket; "
                  "a shard counted by resident pages (stage 2's and 3's gradients, stage 3's parameters) within one element "
                  "and %.0f pages (%.0f KiB) a bucket: a chunk starts and ends inside a page; activations and comm are printed beside, not in the formula (ZeRO counts "
                  "temporary buffers apart)", 2.0, 2 * CL_PAGE_BYTES / 1024);
    claim_line(c, "      ZeRO's bytes sent per rank per step (less the one start-up broadcast of the fp32 parameters, 4 Psi, "
                  "where a rank forwarded it, and stage 3's one gather of them whole at the end) within %.0f%% of (N-1)/N "
                  "(w+4) Psi for stages 1 and 2, (N-1)/N ((w+8) Psi - 4 kept) for stage 3, w the wire's bytes an element, kept "
                  "the parameters of the layers stage 3 gathers once a step (gpt's tied embedding) (fp32: the ring's "
                  "2(N-1)/N 4 Psi, and 1.5x it less the kept layers' second gather); under an emulated --link "
                  "where the link sets the pace, stage 3's comm_total per step within %.0f%% of its bytes' ratio to the "
                  "ring's x the ring's", 100 * CL_ZERO_TRAFFIC_TOL, 100 * CL_ZERO3_TIME_TOL);
}

static int states_cmp(const void *a, const void *b) {
    const ClaimsRun *x = *(const ClaimsRun *const *)a, *y = *(const ClaimsRun *const *)b;
    int d = strcmp(x->series, y->series);
    return d ? d : x->ranks - y->ranks;
}

static void claim12(const ClaimsSet *s, Claim *c) {
    int mem_runs = 0, zero_runs = 0, mem_bad = 0, byte_runs = 0, byte_bad = 0, pairs = 0, time_out = 0;
    cJSON *mem = cJSON_AddArrayToObject(c->numbers, "model_states"), *bytes = cJSON_AddArrayToObject(c->numbers, "bytes");
    cJSON *t3 = cJSON_AddObjectToObject(c->numbers, "stage3_comm_time");
    claim12_rules(c);
    int others = left_out(s, c, run_any, is_states, "not DDP's ring or a ZeRO stage, whose formulas these are");
    left_out(s, c, is_states, run_states_known, "no memory.by_tag, or the model's parameter count unknown");
    left_out(s, c, is_states_known, run_one_gradient, "--accum-steps: grads also holds the accumulation buffer (FSDP's no_sync), "
                                                      "which ZeRO's formulas leave out (the bytes are still decided)");
    const ClaimsRun *runs[512];
    int n = 0;
    for (int i = 0; i < s->nruns && n < 512; i++)
        if (s->runs[i].ranks >= 2 && is_states(&s->runs[i])) runs[n++] = &s->runs[i];
    qsort(runs, (size_t)n, sizeof runs[0], states_cmp);
    for (int i = 0; i < n; i++) {
        const ClaimsRun *r = runs[i];
        if (run_states_known(r) && run_one_gradient(r)) {
            int ok = claim12_memory(c, mem, r);
            mem_runs++;
            zero_runs += is_zero(r);
            mem_bad += !ok;
        }
        if (is_zero(r) && r->psi > 0) {
            byte_bad += !claim12_bytes(c, bytes, r);
            byte_runs++;
        }
    }
    cJSON *tp = cJSON_AddArrayToObject(t3, "pairs");
    int time_bad = claim12_time(s, c, tp, &pairs, &time_out);
    const char *needs = "needs a zero-3 run and a ring run of one configuration and N under an emulated --link that sets "
                        "the pace (--sync zero --zero-stage 3 and --sync ring, the same options and --link)";
    cJSON_AddStringToObject(t3, "verdict", time_bad ? "FAIL" : pairs ? "PASS" : "NOT-RUN");
    if (!pairs) {
        cJSON_AddStringToObject(t3, "why", needs);
        claim_line(c, "stage 3's comm time: NOT-RUN, %s", needs);
    }
    cJSON_AddNumberToObject(c->numbers, "left_out", others + time_out);
    int bad = mem_bad + byte_bad + time_bad;
    if (bad)
        claim_verdict(c, "FAIL", "%d of %d runs off the model-state formulas, %d of %d off the bytes, %d of %d stage-3 pairs off "
                                 "the comm time", mem_bad, mem_runs, byte_bad, byte_runs, time_bad, pairs);
    else if (!zero_runs)
        claim_verdict(c, "NOT-RUN", "needs --sync zero runs with N >= 2 and memory.by_tag (experiments/matrices/memory.json; "
                                    "have %d DDP run%s on the formula)", mem_runs, mem_runs == 1 ? "" : "s");
    else
        claim_verdict(c, "PASS", "model states on ZeRO's formulas in %d run%s (%d ZeRO, %d DDP), bytes per step in %d; stage 3's "
                                 "comm time %s", mem_runs, mem_runs == 1 ? "" : "s", zero_runs, mem_runs - zero_runs, byte_runs,
                      pairs ? "within its bytes' ratio of the ring's" : "not run (no zero-3 and ring pair under a link)");
}

/* ---- the command ----------------------------------------------------------------------------- */

#define NCLAIMS 12
static const char *const claim_text[NCLAIMS] = {
    "ps: rank 0's peak memory exceeds every other rank's; ring: rank 0 within 10% of the mean",
    "ps: rank 0's traffic grows linearly with N; ring: per-rank traffic 2(N-1)/N x gradient bytes, flat in N",
    "ps: comm time per step grows with N; ring: stays about flat",
    "a global batch smaller than N leaves ranks idle (DataParallel's scatter)",
    "ps and ring reach the same loss curve as one rank with the global batch (within 1e-4)",
    "measured comm time within 3x of the alpha-beta prediction",
    "with a straggler, async ps's throughput exceeds the synchronous ring's, its loss against steps within 25% of the ring's",
    "each architecture's comm time per step follows its line of BytePS's Table 1 within 20%, and k = n servers beat the ring",
    "with many ranks and small messages the tree beats the ring; with large messages the ring is at least as fast",
    "on 2 nodes behind one NIC each, the flat ring's bus bandwidth is the NIC's, the trees over nodes' and the hierarchical "
    "ring's 2(N-1)/N of it",
    "the hierarchical ring's gain over the flat ring follows the NIC bytes' ratio (N-1)M/(N(M-1)) as M grows",
    "ZeRO's Figure 1: model states per rank 16 Psi for DDP, 8 Psi + 8 Psi/N at stage 1, 4 Psi + 12 Psi/N at stage 2, 16 Psi/N "
    "at stage 3 (AdamW; K Psi of state for 8 Psi under SGD), the ring's bytes for stages 1 and 2, 1.5x them for stage 3",
};

int claims_main(int argc, char **argv) {
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: ringside claims DIR\n\n"
               "Reads every report in DIR (a `ringside matrix` output folder, and bench reports for claims\n"
               "10 and 11), decides the twelve claims of\n"
               "the design on the measured numbers and prints PASS / FAIL / NOT-RUN with the numbers\n"
               "behind each; writes DIR/claims.json. Exit status: 0 no FAIL, 4 a claim FAILs, 2 bad input.\n");
        return RS_OK;
    }
    if (argc != 1 || argv[0][0] == '-') {
        log_error("claims: expected one folder (usage: ringside claims DIR)");
        return RS_ERR_INPUT;
    }
    const char *dir = argv[0];
    ClaimsSet set;
    int rc = claims_load(dir, &set);
    if (rc != RS_OK) {
        log_error("%s", rs_errmsg());
        return rc;
    }
    void (*decide[NCLAIMS])(const ClaimsSet *, Claim *) = {claim1, claim2, claim3, claim4, claim5, claim6, claim7, claim8,
                                                         claim9, claim10, claim11, claim12};
    static Claim claims[NCLAIMS];
    int fails = 0, passes = 0;
    printf("# ringside claims: %s: %d report%s, %d configuration%s\n", dir, set.nreports, set.nreports == 1 ? "" : "s", set.nruns,
           set.nruns == 1 ? "" : "s");
    printf("# claim  verdict  text (numbers below each)\n");
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; i < NCLAIMS; i++) {
        Claim *c = &claims[i];
        memset(c, 0, sizeof *c);
        c->id = i + 1;
        c->text = claim_text[i];
        c->numbers = cJSON_CreateObject();
        decide[i](&set, c);
        fails += !strcmp(c->verdict, "FAIL");
        passes += !strcmp(c->verdict, "PASS");
        printf("%-6d %-8s %s\n", c->id, c->verdict, c->text);
        printf("#      %s: %s\n", c->verdict, c->why);
        fputs(c->lines, stdout);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "claim", c->id);
        cJSON_AddStringToObject(o, "text", c->text);
        cJSON_AddStringToObject(o, "verdict", c->verdict);
        cJSON_AddItemToObject(o, "numbers", c->numbers);
        cJSON_AddStringToObject(o, "why", c->why);
        cJSON_AddItemToArray(out, o);
    }
    printf("# %d PASS, %d FAIL, %d NOT-RUN\n", passes, fails, NCLAIMS - passes - fails);
    char path[4200];
    snprintf(path, sizeof path, "%s/claims.json", dir);
    int wrc = report_write_atomic(path, out);
    if (wrc != RS_OK) log_error("%s", rs_errmsg());
    else printf("# written: %s\n", path);
    cJSON_Delete(out);
    claims_free(&set);
    if (fails) return RS_ERR_WRONG;
    return wrc;
}
