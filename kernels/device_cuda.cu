/* device_cuda.cu - the device layer's CUDA back end: cudaMalloc, async copies, non-blocking streams, CUDA events */
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

extern "C" {
#include "device.h"
#include "nvml.h"
}
#include "cuda_check.h"

/* A timing event. */
struct DevEvent {
    cudaEvent_t ev;
};

/* The stream an op runs on: the given one, or the device's compute stream for NULL. */
static cudaStream_t dev_stream(Device *dev, void *stream) {
    return (cudaStream_t)(stream ? stream : dev->stream);
}

/* Never fails loudly: on a machine without a driver or a GPU it returns 0 and leaves the
 * reason in rs_errmsg() ("cudaGetDeviceCount: no CUDA-capable device is detected"). */
static int cuda_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear it: not finding a GPU is an answer, not a fault */
        const char *hint = e == cudaErrorInsufficientDriver
                               ? " (no NVIDIA driver, or one older than this CUDA runtime)"
                               : "";
        rs_error(RS_ERR_RUNTIME, "cudaGetDeviceCount: %s%s", cudaGetErrorString(e), hint);
        return 0;
    }
    if (n == 0) rs_error(RS_ERR_RUNTIME, "cudaGetDeviceCount returned 0");
    return n;
}

static int cuda_open(Device *dev, int ordinal) {
    cudaStream_t s;
    RS_TRY(cudaCheck(cudaSetDevice(ordinal)));
    RS_TRY(cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
    dev->stream = s;
    dev->impl = NULL;
    return 0;
}

static void cuda_close(Device *dev) {
    if (dev->stream) cudaCheck(cudaStreamDestroy((cudaStream_t)dev->stream));
    dev->stream = NULL;
}

static void *cuda_alloc(Device *dev, size_t bytes) {
    void *p = NULL;
    if (cudaCheck(cudaMalloc(&p, bytes ? bytes : 1))) return NULL;
    return p;
}

static void cuda_free(Device *dev, void *p) {
    if (p) cudaCheck(cudaFree(p));
}

static void *cuda_host_alloc(Device *dev, size_t bytes) {
    void *p = NULL;
    if (cudaCheck(cudaMallocHost(&p, bytes ? bytes : 1))) return NULL;
    return p;
}

static void cuda_host_free(Device *dev, void *p) {
    if (p) cudaCheck(cudaFreeHost(p));
}

static int cuda_copy(Device *dev, void *dst, const void *src, size_t bytes, int kind,
                     void *stream) {
    static const cudaMemcpyKind kinds[3] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                            cudaMemcpyDeviceToDevice};
    if (kind < 0 || kind > 2) return rs_error(RS_ERR_RUNTIME, "device copy: bad kind %d", kind);
    if (bytes == 0) return 0;
    return cudaCheck(cudaMemcpyAsync(dst, src, bytes, kinds[kind], dev_stream(dev, stream)));
}

static int cuda_stream_create(Device *dev, void **stream) {
    cudaStream_t s;
    RS_TRY(cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
    *stream = s;
    return 0;
}

static void cuda_stream_destroy(Device *dev, void *stream) {
    if (stream) cudaCheck(cudaStreamDestroy((cudaStream_t)stream));
}

static int cuda_stream_sync(Device *dev, void *stream) {
    return cudaCheck(cudaStreamSynchronize(dev_stream(dev, stream)));
}

/* Records a throwaway event on `on` and makes `waiter` wait for it; destroying it right away
 * is safe (CUDA releases it once it completes). */
static int cuda_stream_wait(Device *dev, void *waiter, void *on) {
    cudaEvent_t ev;
    RS_TRY(cudaCheck(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)));
    int rc = cudaCheck(cudaEventRecord(ev, dev_stream(dev, on)));
    if (!rc) rc = cudaCheck(cudaStreamWaitEvent(dev_stream(dev, waiter), ev, 0));
    cudaCheck(cudaEventDestroy(ev));
    return rc;
}

static DevEvent *cuda_event_create(Device *dev) {
    DevEvent *e = (DevEvent *)calloc(1, sizeof *e);
    if (!e) {
        rs_error(RS_ERR_RUNTIME, "out of host memory for an event");
        return NULL;
    }
    if (cudaCheck(cudaEventCreate(&e->ev))) {
        free(e);
        return NULL;
    }
    return e;
}

static void cuda_event_destroy(Device *dev, DevEvent *e) {
    if (!e) return;
    cudaCheck(cudaEventDestroy(e->ev));
    free(e);
}

static int cuda_event_record(Device *dev, DevEvent *e, void *stream) {
    return cudaCheck(cudaEventRecord(e->ev, dev_stream(dev, stream)));
}

static double cuda_event_elapsed(Device *dev, DevEvent *a, DevEvent *b) {
    float ms = 0.0f;
    if (cudaCheck(cudaEventSynchronize(b->ev)) ||
        cudaCheck(cudaEventElapsedTime(&ms, a->ev, b->ev)))
        return -1.0;
    return ms * 1e-3;
}

static int cuda_mem_info(Device *dev, size_t *free_b, size_t *total_b) {
    *free_b = 0;
    *total_b = 0;
    return cudaCheck(cudaMemGetInfo(free_b, total_b));
}

/* "NVIDIA H200, 139 GiB, cc 9.0"; says why when the properties cannot be read. */
static void cuda_describe(int ordinal, char *buf, size_t len) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, ordinal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(buf, len, "cuda:%d (unavailable: %s)", ordinal, cudaGetErrorString(e));
        return;
    }
    snprintf(buf, len, "%s, %.0f GiB, cc %d.%d", p.name,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.major, p.minor);
}

/* This process's memory on the GPU, from NVML (by the GPU's PCI bus id: NVML's indices need not
 * be CUDA's); -1 without NVML. */
static int cuda_process_bytes(Device *dev, unsigned long long *bytes) {
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev->ordinal) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return nvml_process_bytes(bus, bytes);
}

/* In the order of DeviceOps' fields. */
static const DeviceOps cuda_device_ops = {
    "cuda",
    cuda_count,
    cuda_open,
    cuda_close,
    cuda_alloc,
    cuda_free,
    cuda_host_alloc,
    cuda_host_free,
    cuda_copy,
    cuda_stream_create,
    cuda_stream_destroy,
    cuda_stream_sync,
    cuda_stream_wait,
    cuda_event_create,
    cuda_event_destroy,
    cuda_event_record,
    cuda_event_elapsed,
    cuda_mem_info,
    cuda_describe,
    cuda_process_bytes,
};

/* The CUDA back end. Never NULL in a CUDA build (count() says whether a GPU is there). */
extern "C" const DeviceOps *device_cuda_ops(void) { return &cuda_device_ops; }
