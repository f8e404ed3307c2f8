/* test_cuda_poll.cu - probe (CUDA builds, GPU machines): is a polled cudaErrorNotReady left in the last-error slot, and do our checks survive it */
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

extern "C" {
#include "../kernels/device.h"
#include "../base/err.h"
#include "../kernels/ops.h"
}
#include "../kernels/cuda_check.h"
#include "test.h"

/* Spins for about `cycles` clock ticks, so that an event recorded after it is not ready yet. */
__global__ void spin_kernel(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

static Device gpu;
static int have;

/* Polls an event behind a long kernel with a bare cudaEventQuery and reports what the runtime
 * keeps in its last-error slot afterwards (the figure the GPU suite wants: sticky or not). */
static void test_notready_is_reported(void) {
    if (!have) {
        SKIP("no CUDA device: %s", rs_errmsg());
        return;
    }
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess);
    spin_kernel<<<1, 1, 0, (cudaStream_t)gpu.stream>>>(2000000000LL); /* about a second */
    CHECK(cudaEventRecord(ev, (cudaStream_t)gpu.stream) == cudaSuccess);
    cudaError_t q = cudaEventQuery(ev);
    cudaError_t left = cudaPeekAtLastError();
    printf("  bare cudaEventQuery: %s; last-error slot afterwards: %s (%s)\n", cudaGetErrorName(q),
           cudaGetErrorName(left), left == cudaErrorNotReady ? "STICKY: a later launch check would fail" : "not sticky");
    CHECK(q == cudaErrorNotReady);
    (void)cudaGetLastError();
    CHECK(cudaEventSynchronize(ev) == cudaSuccess);
    CHECK(cudaEventDestroy(ev) == cudaSuccess);
}

/* cudaEventPoll clears what the poll leaves, and a kernel launch checked right after a NotReady
 * poll (as nccl_wait then the next step's kernels do) does not fail. */
static void test_poll_then_launch(void) {
    if (!have) {
        SKIP("no CUDA device");
        return;
    }
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess);
    spin_kernel<<<1, 1, 0, (cudaStream_t)gpu.stream>>>(2000000000LL);
    CHECK(cudaEventRecord(ev, (cudaStream_t)gpu.stream) == cudaSuccess);
    CHECK(cudaEventPoll(ev) == 0);
    CHECK(cudaPeekAtLastError() == cudaSuccess);
    /* a NotReady left by someone's bare query: the launch check must not count it */
    (void)cudaEventQuery(ev);
    float *d = (float *)device_alloc(&gpu, 1024 * sizeof(float), MEM_ACTIVATIONS);
    CHECK(d != NULL);
    gpu.k->fill(gpu.kctx, d, 3.0f, 1024);
    CHECK(gpu.k->sync(gpu.kctx) == 0);
    int done = 0;
    for (int i = 0; i < 100000 && !done; i++) done = cudaEventPoll(ev);
    CHECK(done == 1 || cudaEventSynchronize(ev) == cudaSuccess);
    float h[4];
    CHECK(device_d2h(&gpu, h, d, sizeof h) == 0 && h[0] == 3.0f && h[3] == 3.0f);
    device_free(&gpu, d, 1024 * sizeof(float), MEM_ACTIVATIONS);
    CHECK(cudaEventDestroy(ev) == cudaSuccess);
}

int main(void) {
    const DeviceOps *cu = device_cuda_ops();
    have = cu && cu->count() > 0 && device_open(&gpu, "cuda", 0, NULL) == 0;
    RUN(test_notready_is_reported);
    RUN(test_poll_then_launch);
    if (have) device_close(&gpu);
    return test_summary("test_cuda_poll");
}
