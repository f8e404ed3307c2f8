/* device.c - the device layer's generic part: picking the device, accounted allocation, synchronous copies */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "../base/err.h"

/* Opens dev on ops' ordinal with its kernels and a kernel context on the compute stream.
 * On failure dev is left zeroed (closed) and rs_errmsg() says why. */
static int device_open_with(Device *dev, const DeviceOps *ops, DeviceKind kind, int ordinal) {
#if defined(__x86_64__) && defined(__GNUC__)
    /* a build whose CPU kernels use AVX2 (make SIMD=auto on a machine with it) on a CPU without:
     * say so here, before a kernel would die of an illegal instruction */
    if (!strcmp(kernels_cpu_isa, "avx2") && !__builtin_cpu_supports("avx2"))
        return rs_error(RS_ERR_RUNTIME, "this build's CPU kernels use AVX2, which this CPU lacks: rebuild with "
                                        "make clean && make SIMD=sse2");
#endif
    dev->kind = kind;
    dev->ordinal = ordinal;
    dev->ops = ops;
    dev->host_visible = ops == device_cpu_ops();
    int rc = ops->open(dev, ordinal);
    if (rc) {
        memset(dev, 0, sizeof *dev);
        return rc;
    }
    dev->k = kind == DEV_CUDA ? kernels_cuda() : ops == device_lazy_ops() ? device_lazy_kernels() : kernels_cpu();
    dev->kctx = dev->k ? dev->k->ctx_create(dev->stream) : NULL;
    if (!dev->kctx) {
        if (!dev->k) rs_error(RS_ERR_RUNTIME, "no kernels for device %s", ops->name);
        ops->close(dev);
        memset(dev, 0, sizeof *dev);
        return RS_ERR_RUNTIME;
    }
    return 0;
}

/* Opens "auto", "cpu" or "cuda" (see device.h). "auto" and "cuda" take cuda:(local_rank %
 * count); "auto" falls back to the CPU (setting *fell_back) where this build has no CUDA or
 * the machine no GPU, "cuda" returns RS_ERR_INPUT there. Unknown names: RS_ERR_INPUT. */
int device_open(Device *dev, const char *want, int local_rank, int *fell_back) {
    memset(dev, 0, sizeof *dev);
    if (fell_back) *fell_back = 0;
    if (!want) want = "auto";

    if (strcmp(want, "cpu") == 0) return device_open_with(dev, device_cpu_ops(), DEV_CPU, 0);
    if (strcmp(want, "cpu-async") == 0) return device_open_with(dev, device_lazy_ops(), DEV_CPU, 0);
    if (strcmp(want, "auto") != 0 && strcmp(want, "cuda") != 0)
        return rs_error(RS_ERR_INPUT, "--device %s: unknown device (expected auto, cpu, cuda or cpu-async)",
                        want);

    const DeviceOps *cuda = device_cuda_ops();
    char why[512];
    int n = 0;
    if (!cuda) {
        snprintf(why, sizeof why, "this build has no CUDA (rebuild with nvcc present or CUDA=1)");
    } else {
        n = cuda->count();
        if (n == 0) snprintf(why, sizeof why, "no CUDA device found (%s)", rs_errmsg());
    }
    if (n > 0) {
        if (local_rank < 0) local_rank = 0;
        return device_open_with(dev, cuda, DEV_CUDA, local_rank % n);
    }
    if (strcmp(want, "cuda") == 0) return rs_error(RS_ERR_INPUT, "--device cuda: %s", why);
    if (fell_back) *fell_back = 1;
    return device_open_with(dev, device_cpu_ops(), DEV_CPU, 0);
}

/* Same device as like, for another thread (see device.h). */
int device_open_like(Device *dev, const Device *like) {
    memset(dev, 0, sizeof *dev);
    if (!like || !like->ops) return rs_error(RS_ERR_RUNTIME, "device_open_like: a closed device");
    return device_open_with(dev, like->ops, like->kind, like->ordinal);
}

/* Destroys the kernel context and the back end's state; safe on a closed (zeroed) device. */
void device_close(Device *dev) {
    if (dev->k && dev->kctx) dev->k->ctx_destroy(dev->kctx);
    if (dev->ops) dev->ops->close(dev);
    memset(dev, 0, sizeof *dev);
}

/* Allocates through the back end and counts the bytes under tag. NULL on failure, with
 * rs_errmsg() naming the bytes, the tag and the back end's reason. */
void *device_alloc(Device *dev, size_t bytes, MemTag tag) {
    if (!dev->ops) {
        rs_error(RS_ERR_RUNTIME, "device_alloc on a closed device");
        return NULL;
    }
    void *p = dev->ops->alloc(dev, bytes);
    if (!p) {
        char why[512];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        char name[32];
        rs_error(RS_ERR_RUNTIME, "cannot allocate %zu bytes of %s on %s: %s", bytes,
                 mem_tag_name(tag) ? mem_tag_name(tag) : "?", device_name(dev, name, sizeof name),
                 why);
        return NULL;
    }
    mem_account(tag, (long long)bytes);
    return p;
}

/* Frees p (NULL is a no-op) and takes bytes off tag's current count. */
void device_free(Device *dev, void *p, size_t bytes, MemTag tag) {
    if (!p || !dev->ops) return;
    dev->ops->free(dev, p);
    mem_account(tag, -(long long)bytes);
}

void *device_host_alloc(Device *dev, size_t bytes, MemTag tag) {
    void *p = dev->ops ? dev->ops->host_alloc(dev, bytes) : NULL;
    if (!p) {
        rs_error(RS_ERR_RUNTIME, "no pinned host memory for %zu bytes of %s", bytes, mem_tag_name(tag) ? mem_tag_name(tag) : "?");
        return NULL;
    }
    mem_account(tag, (long long)bytes);
    return p;
}

void device_host_free(Device *dev, void *p, size_t bytes, MemTag tag) {
    if (!p || !dev->ops) return;
    dev->ops->host_free(dev, p);
    mem_account(tag, -(long long)bytes);
}

/* Copies on the compute stream and waits for it. */
static int device_copy_sync(Device *dev, void *dst, const void *src, size_t bytes, int kind) {
    if (!dev->ops) return rs_error(RS_ERR_RUNTIME, "device copy on a closed device");
    if (bytes == 0) return 0;
    RS_TRY(dev->ops->copy(dev, dst, src, bytes, kind, NULL));
    return dev->ops->stream_sync(dev, NULL);
}

/* Host to device, synchronous. 0 or RS_ERR_RUNTIME. */
int device_h2d(Device *dev, void *dst, const void *src, size_t bytes) {
    return device_copy_sync(dev, dst, src, bytes, 0);
}

/* Device to host, synchronous. 0 or RS_ERR_RUNTIME. */
int device_d2h(Device *dev, void *dst, const void *src, size_t bytes) {
    return device_copy_sync(dev, dst, src, bytes, 1);
}

/* Writes "cpu" or "cuda:N" into buf and returns buf. */
const char *device_name(const Device *dev, char *buf, size_t len) {
    if (dev->kind == DEV_CUDA) snprintf(buf, len, "cuda:%d", dev->ordinal);
    else snprintf(buf, len, "cpu");
    return buf;
}
