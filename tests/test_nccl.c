/* test_nccl.c - the nccl back end on a CPU machine: registered in a CUDA build, refusing a CPU device; "not in this build" without CUDA */
#include <stdio.h>
#include <string.h>

#include "../base/config.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../engine/sync.h"
#include "../experiments/backends.h"
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

int main(void) {
    printf("# test_nccl: %s build\n", cuda_build() ? "CUDA" : "CPU-only");
    RUN(test_registered);
    RUN(test_cpu_device_refused);
    RUN(test_unknown_lists_nccl);
    return test_summary("test_nccl");
}
