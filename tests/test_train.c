/* test_train.c - one-rank training end to end: convergence, determinism, the report's fields, bad input */
#include "../base/err.h"
#include "../base/mem.h"
#include "../engine/report.h"
#include "../experiments/train.h"
#include "test.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ringside-test-train-XXXXXX";

/* Runs `ringside train ARGS... --report PATH --quiet` in this process; returns the status. */
static int train(const char *report, ...) {
    char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, report);
    for (const char *a; (a = va_arg(ap, const char *)) && argc < 58;) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc++] = "--report";
    argv[argc++] = (char *)report;
    argv[argc++] = "--quiet";
    argv[argc] = NULL;
    mem_reset();
    return train_main(argc, argv);
}

static const char *path(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static double num(cJSON *o, const char *a, const char *b) {
    cJSON *x = cJSON_GetObjectItem(o, a);
    if (b) x = cJSON_GetObjectItem(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : -1e300;
}

static void test_synthetic_converges(void) {
    const char *rp = path("syn.json");
    CHECK(train(rp, "--device", "cpu", "--sync", "none", "--layers", "784,128,10", "--steps", "300", NULL) == 0);
    cJSON *r = report_read(rp);
    CHECK(r != NULL);
    if (!r) return;
    double acc = num(cJSON_GetObjectItem(r, "summary"), "final_accuracy", NULL);
    CHECK_MSG(acc >= 0.95, "synthetic 784-128-10 eval accuracy %.4f after 300 steps (want >= 0.95)", acc);
    cJSON_Delete(r);
}

static void test_mnist_converges(void) {
    struct stat st;
    if (stat("../shared/data/mnist", &st) != 0) {
        SKIP("real MNIST not found at ../shared/data/mnist");
        return;
    }
    const char *rp = path("mnist.json");
    CHECK(train(rp, "--device", "cpu", "--sync", "none", "--data", "../shared/data/mnist", "--layers", "784,256,10",
                "--epochs", "3", NULL) == 0);
    cJSON *r = report_read(rp);
    CHECK(r != NULL);
    if (!r) return;
    double acc = num(cJSON_GetObjectItem(r, "summary"), "final_accuracy", NULL);
    CHECK_MSG(acc >= 0.90, "MNIST 784-256-10 eval accuracy %.4f after 3 epochs (want >= 0.90)", acc);
    CHECK(num(cJSON_GetObjectItem(r, "summary"), "steps", NULL) == 3 * 125);
    cJSON_Delete(r);
}

static void test_same_seed_same_curve(void) {
    const char *a = path("a.json"), *b = path("b.json");
    CHECK(train(a, "--device", "cpu", "--sync", "none", "--layers", "784,64,10", "--steps", "40", "--seed", "7", NULL) == 0);
    CHECK(train(b, "--device", "cpu", "--sync", "none", "--layers", "784,64,10", "--steps", "40", "--seed", "7", NULL) == 0);
    cJSON *ra = report_read(a), *rb = report_read(b);
    CHECK(ra && rb);
    if (!ra || !rb) return;
    cJSON *ca = cJSON_GetObjectItem(cJSON_GetObjectItem(ra, "summary"), "loss_curve");
    cJSON *cb = cJSON_GetObjectItem(cJSON_GetObjectItem(rb, "summary"), "loss_curve");
    CHECK(cJSON_GetArraySize(ca) == 40 && cJSON_GetArraySize(cb) == 40);
    int same = 1;
    for (int i = 0; i < cJSON_GetArraySize(ca); i++)
        same &= cJSON_GetArrayItem(cJSON_GetArrayItem(ca, i), 1)->valuedouble ==
                cJSON_GetArrayItem(cJSON_GetArrayItem(cb, i), 1)->valuedouble;
    CHECK_MSG(same, "two runs with seed 7 gave different loss curves");
    cJSON_Delete(ra);
    cJSON_Delete(rb);
}

static void test_report_fields(void) {
    const char *rp = path("fields.json");
    CHECK(train(rp, "--device", "cpu", "--sync", "none", "--layers", "784,32,10", "--steps", "12", "--batch", "16", NULL) == 0);
    cJSON *r = report_read(rp);
    CHECK(r != NULL);
    if (!r) return;
    CHECK(!strcmp(cJSON_GetObjectItem(r, "schema")->valuestring, "ringside.report/1"));
    cJSON *run = cJSON_GetObjectItem(r, "run");
    const char *run_keys[] = {"id", "started", "git", "host", "cmdline"};
    for (int i = 0; i < 5; i++) CHECK_MSG(cJSON_IsString(cJSON_GetObjectItem(run, run_keys[i])), "run.%s", run_keys[i]);
    cJSON *env = cJSON_GetObjectItem(r, "env");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(env, "devices")) >= 1);
    CHECK(cJSON_IsString(cJSON_GetObjectItem(env, "zeromq")) && cJSON_IsString(cJSON_GetObjectItem(env, "cjson")));
    cJSON *cfg = cJSON_GetObjectItem(r, "config");
    CHECK(num(cfg, "batch", NULL) == 16 && num(cfg, "steps", NULL) == 12);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cfg, "layers")) == 3);
    cJSON *ranks = cJSON_GetObjectItem(r, "ranks");
    CHECK(cJSON_GetArraySize(ranks) == 1);
    cJSON *r0 = cJSON_GetArrayItem(ranks, 0);
    CHECK(num(r0, "rank", NULL) == 0 && num(r0, "samples", NULL) == 12 * 16);
    cJSON *mem = cJSON_GetObjectItem(r0, "memory");
    size_t params = (784 * 32 + 32 + 32 * 10 + 10) * 4;
    CHECK(num(mem, "by_tag", NULL) == -1e300); /* an object, not a number */
    cJSON *tags = cJSON_GetObjectItem(mem, "by_tag");
    CHECK(num(tags, "params", NULL) == params && num(tags, "grads", NULL) == params &&
          num(tags, "optimizer", NULL) == params && num(tags, "activations", NULL) > 0);
    CHECK(num(mem, "peak_bytes", NULL) >= 3.0 * params);
    CHECK(num(mem, "host_peak_rss_bytes", NULL) > 0);
    cJSON *ts = cJSON_GetObjectItem(r0, "time_s");
    double med = num(ts, "step", "median");
    CHECK(med > 0 && num(ts, "step", "p95") >= med && num(ts, "step", "min") <= med && num(ts, "step", "max") >= med);
    const char *ph[] = {"data", "forward", "backward", "comm_exposed", "optimizer", "idle", "comm_total"};
    for (int i = 0; i < 7; i++) CHECK_MSG(num(ts, "phases", ph[i]) >= 0, "phase %s", ph[i]);
    CHECK(num(ts, "phases", "forward") > 0 && num(ts, "phases", "backward") > 0);
    CHECK(cJSON_GetObjectItem(r0, "_curve") == NULL);
    cJSON *sum = cJSON_GetObjectItem(r, "summary");
    CHECK(num(sum, "throughput_samples_per_s", NULL) > 0 && num(sum, "step_time_s", NULL) > 0);
    CHECK(num(sum, "final_loss", NULL) > 0 && num(sum, "final_accuracy", NULL) >= 0);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(sum, "loss_curve")) == 12);
    CHECK(num(sum, "samples", NULL) == 12 * 16);
    cJSON_Delete(r);
}

/* Each bad input: exit 2 and no report file. */
static void test_bad_input(void) {
    const char *rp = path("bad.json");
    struct {
        const char *what;
        const char *args[8];
    } cases[] = {
        {"missing data dir", {"--data", "/nonexistent/mnist", NULL}},
        {"image size != first layer", {"--data", "../shared/data/mnist", "--layers", "100,10", NULL}},
        {"one layer size", {"--layers", "784", NULL}},
        {"zero layer size", {"--layers", "784,0,10", NULL}},
        {"batch 0", {"--batch", "0", NULL}},
        {"batch negative", {"--batch", "-3", NULL}},
        {"lr negative", {"--lr", "-0.1", NULL}},
        {"lr nan", {"--lr", "nan", NULL}},
        {"lr inf", {"--lr", "inf", NULL}},
        {"steps 0", {"--steps", "0", NULL}},
        {"unknown option", {"--frobnicate", NULL}},
        {"bad device", {"--device", "tpu", NULL}},
        {"unknown sync", {"--sync", "carrier-pigeon", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unlink(rp);
        const char **a = cases[i].args;
        int rc = train(rp, "--sync", "none", "--layers", "784,16,10", "--steps", "3", a[0], a[1] ? a[1] : NULL,
                       a[1] && a[2] ? a[2] : NULL, a[1] && a[2] && a[3] ? a[3] : NULL, NULL);
        if (!strcmp(cases[i].what, "image size != first layer") && access("../shared/data/mnist", F_OK) != 0) continue;
        CHECK_MSG(rc == RS_ERR_INPUT, "%s: exit %d, want 2 (%s)", cases[i].what, rc, rs_errmsg());
        CHECK_MSG(access(rp, F_OK) != 0, "%s: a report was written", cases[i].what);
    }
    /* an unwritable report path is caught before training */
    int rc = train("/nonexistent-dir/report.json", "--sync", "none", "--layers", "784,16,10", "--steps", "3", NULL);
    CHECK_MSG(rc == RS_ERR_INPUT && strstr(rs_errmsg(), "/nonexistent-dir"), "unwritable report: exit %d (%s)", rc,
              rs_errmsg());
    rc = train(tmpdir, "--sync", "none", "--layers", "784,16,10", "--steps", "3", NULL);
    CHECK_MSG(rc == RS_ERR_INPUT, "report path is a directory: exit %d", rc);
}

static void test_device_cuda_without_gpu(void) {
    const char *rp = path("cuda.json");
    unlink(rp);
    int rc = train(rp, "--device", "cuda", "--sync", "none", "--layers", "784,16,10", "--steps", "2", NULL);
    if (rc == 0) {
        SKIP("a CUDA device is present: --device cuda ran");
        return;
    }
    CHECK_MSG(rc == RS_ERR_INPUT, "--device cuda without a GPU: exit %d, want 2", rc);
    CHECK(access(rp, F_OK) != 0);
    /* auto falls back to the CPU */
    CHECK(train(rp, "--device", "auto", "--sync", "none", "--layers", "784,16,10", "--steps", "2", NULL) == 0);
}

int main(void) {
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_synthetic_converges);
    RUN(test_mnist_converges);
    RUN(test_same_seed_same_curve);
    RUN(test_report_fields);
    RUN(test_bad_input);
    RUN(test_device_cuda_without_gpu);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_train");
}
