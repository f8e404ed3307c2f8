/* test_nccl.c - the nccl back end on a CPU machine: registered in a CUDA build, refusing a CPU device, "not in this build" without CUDA; its version and environment rules with versions no machine here has */
#include <stdio.h>
#include <string.h>

#include "../base/config.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../engine/sync.h"
#include "../experiments/backends.h"
#include "../allreduce/nccl_rules.h"
#include "../kernels/ops.h"
#include "test.h"

/* ---- Helpers ---- */

/* Whether this binary is the CUDA build (the same test source serves both variants). */
static int cuda_build(void) { return kernels_cuda() != NULL; }

/* ---- Tests ---- */

/* CUDA build: "nccl" is found; without CUDA: NULL with "not in this build". */
static void test_registered(void) {
    const SyncOps *ops = sync_find("nccl");
    if (cuda_build()) {
        CHECK_MSG(ops != NULL, "sync_find(\"nccl\") in a CUDA build: %s", rs_errmsg());
        if (ops) CHECK(strcmp(ops->name, "nccl") == 0);
    } else {
        CHECK(ops == NULL);
        CHECK_MSG(strstr(rs_errmsg(), "not in this build") != NULL, "message: %s", rs_errmsg());
        CHECK_MSG(strstr(rs_errmsg(), "nccl") != NULL, "message: %s", rs_errmsg());
    }
}

/* init on a CPU device is refused as the user's error, naming --device, leaving no state;
 * destroy(NULL) is safe. For one rank and for rank 0 and 1 of two. */
static void test_cpu_device_refused(void) {
    if (!cuda_build()) {
        SKIP("CPU-only build: no nccl back end to refuse anything");
        return;
    }
    const SyncOps *ops = sync_find("nccl");
    if (!ops) {
        CHECK_MSG(0, "sync_find(\"nccl\"): %s", rs_errmsg());
        return;
    }
    Config cfg;
    config_defaults(&cfg);
    Device dev;
    int rc = device_open(&dev, "cpu", 0, NULL);
    CHECK_MSG(rc == RS_OK, "device_open(cpu): %s", rs_errmsg());
    if (rc) return;
    const int worlds[3][2] = {{1, 0}, {2, 0}, {2, 1}}; /* world, rank */
    for (int i = 0; i < 3; i++) {
        SyncJob job;
        memset(&job, 0, sizeof job);
        job.cfg = &cfg;
        job.dev = &dev;
        job.world = worlds[i][0];
        job.rank = worlds[i][1];
        job.local_rank = job.rank;
        job.local_world = job.world;
        job.timeout = 5;
        void *state = (void *)&job; /* must come back NULL */
        char endpoint[512] = "unchanged";
        rs_error(RS_OK, "%s", "");
        rc = ops->init(&job, &state, endpoint, sizeof endpoint);
        CHECK_MSG(rc == RS_ERR_INPUT, "world %d rank %d: rc %d", job.world, job.rank, rc);
        CHECK(state == NULL);
        CHECK_MSG(strstr(rs_errmsg(), "--device cuda") != NULL, "message: %s", rs_errmsg());
        CHECK_MSG(strstr(rs_errmsg(), "--sync ring") != NULL, "message: %s", rs_errmsg());
    }
    ops->destroy(NULL);
    device_close(&dev);
}

/* Unknown names still list what this build has, nccl among them only in a CUDA build. */
static void test_unknown_lists_nccl(void) {
    CHECK(sync_find("no-such-sync") == NULL);
    const char *msg = rs_errmsg();
    CHECK_MSG(strstr(msg, "unknown") != NULL, "message: %s", msg);
    if (cuda_build()) CHECK_MSG(strstr(msg, "nccl") != NULL, "message: %s", msg);
    else CHECK_MSG(strstr(msg, "nccl") == NULL, "message: %s", msg);
}

/* --nccl-algo alone pins one algorithm, which every call ringside makes runs under (the
 * broadcast is an all-reduce); a user's NCCL_ALGO stands and is read as NCCL reads it, the trees'
 * traffic formula only where the all-reduce can be nothing but the trees. */
static void test_algo_decide(void) {
    static const struct {
        const char *opt, *user, *set, *allreduce;
        int tree;
    } cases[] = {
        {"ring", NULL, "Ring", "Ring", 0},
        {"tree", NULL, "Tree", "Tree", 1},
        {"tree", "", "Tree", "Tree", 1},                               /* set but empty: ours */
        {"ring", "Tree", "", "Tree", 1},                               /* the user's wins */
        {"tree", "ring", "", "ring", 0},
        {"ring", " tree ", "", "tree", 1},
        {"ring", "Tree,Ring", "", "Tree,Ring", 0},                     /* NCCL may choose: not pinned */
        {"ring", "^Ring", "", "^Ring", 0},
        {"ring", "allreduce:tree;broadcast:ring", "", "tree", 1},      /* NCCL 2.24+'s per-collective form */
        {"tree", "broadcast:ring; AllReduce : Ring ", "", "Ring", 0},
        {"tree", "allgather:ring", "", "auto", 0},                     /* nothing said of the all-reduce */
        {"ring", "allreduce:", "", "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        NcclAlgo a;
        memset(&a, 0x5a, sizeof a);
        nccl_algo_decide(cases[i].opt, cases[i].user, &a);
        CHECK_MSG(!strcmp(a.set, cases[i].set) && !strcmp(a.allreduce, cases[i].allreduce) && a.tree == cases[i].tree,
                  "--nccl-algo %s, NCCL_ALGO '%s': set '%s' all-reduce '%s' tree %d; expected '%s' '%s' %d",
                  cases[i].opt, cases[i].user ? cases[i].user : "(unset)", a.set, a.allreduce, a.tree, cases[i].set,
                  cases[i].allreduce, cases[i].tree);
    }
    NcclAlgo a;
    char longer[200];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    nccl_algo_decide("ring", longer, &a); /* cut to fit, never past the field */
    CHECK(strlen(a.allreduce) == sizeof a.allreduce - 1 && a.tree == 0);
}

/* FP8 is NCCL's own only where the headers and the library loaded are both 2.24+ (an older
 * libnccl found first at run time rejects ncclFloat8e4m3) and the GPU is sm_90 or later. */
static void test_fp8_native_rule(void) {
    const int v2_24 = NCCL_RULES_CODE(2, 24, 0), v2_23 = NCCL_RULES_CODE(2, 23, 4), v2_28 = NCCL_RULES_CODE(2, 28, 9);
    CHECK(nccl_fp8_native(v2_28, v2_28, 9) == 1);
    CHECK(nccl_fp8_native(v2_24, v2_24, 10) == 1);
    CHECK(nccl_fp8_native(v2_28, v2_23, 9) == 0); /* built new, an old library loaded */
    CHECK(nccl_fp8_native(v2_23, v2_28, 9) == 0); /* built old: the types are not in its headers */
    CHECK(nccl_fp8_native(v2_28, v2_28, 8) == 0); /* an A100 */
    CHECK(nccl_fp8_native(v2_28, 2804, 9) == 0);  /* a pre-2.9 code (X*1000+Y*100+Z) */
}

/* Several ranks on one GPU: 2.30+ reads NCCL_MULTI_RANK_GPU_ENABLE, older NCCL needs NCCL_HOSTID;
 * what the user set already is left alone. And the version text of both code forms. */
static void test_shared_gpu_rule(void) {
    CHECK(strcmp(nccl_shared_gpu_missing(NCCL_RULES_CODE(2, 30, 3), NULL, NULL), "NCCL_MULTI_RANK_GPU_ENABLE=1") == 0);
    CHECK(nccl_shared_gpu_missing(NCCL_RULES_CODE(2, 30, 3), "1", NULL) == NULL);
    CHECK(nccl_shared_gpu_missing(NCCL_RULES_CODE(2, 30, 3), NULL, "h1") != NULL); /* HOSTID is not 2.30's switch */
    CHECK(strstr(nccl_shared_gpu_missing(NCCL_RULES_CODE(2, 21, 5), "1", NULL), "NCCL_HOSTID") != NULL);
    CHECK(nccl_shared_gpu_missing(NCCL_RULES_CODE(2, 21, 5), NULL, "h1") == NULL);
    char t[32];
    nccl_version_text(NCCL_RULES_CODE(2, 28, 9), t, sizeof t);
    CHECK_MSG(!strcmp(t, "2.28.9"), "%s", t);
    nccl_version_text(2804, t, sizeof t);
    CHECK_MSG(!strcmp(t, "2.8.4"), "%s", t);
}

int main(void) {
    printf("# test_nccl: %s build\n", cuda_build() ? "CUDA" : "CPU-only");
    RUN(test_registered);
    RUN(test_cpu_device_refused);
    RUN(test_unknown_lists_nccl);
    RUN(test_algo_decide);
    RUN(test_fp8_native_rule);
    RUN(test_shared_gpu_rule);
    return test_summary("test_nccl");
}
