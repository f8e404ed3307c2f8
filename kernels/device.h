/* device.h - the device layer: where memory lives, how it moves, streams and timing events */
#ifndef RS_DEVICE_H
#define RS_DEVICE_H

#include <stddef.h>
#include "../base/mem.h"
#include "ops.h"

/* ---- Types ---- */

typedef enum { DEV_CPU = 0, DEV_CUDA = 1 } DeviceKind;

typedef struct Device Device;
typedef struct DevEvent DevEvent;

/* One back end per kind of device (device_cpu.c, device_cuda.cu), selected by device_open. */
typedef struct DeviceOps {
    const char *name;
    /* Number of usable devices of this kind (0 when none or no driver). */
    int (*count)(void);
    /* Binds the calling thread to ordinal and creates the compute stream. 0 or RS_ERR_*. */
    int (*open)(Device *dev, int ordinal);
    void (*close)(Device *dev);
    /* Raw allocation in device memory; NULL on failure. */
    void *(*alloc)(Device *dev, size_t bytes);
    void (*free)(Device *dev, void *p);
    /* Page-locked host memory for staging (plain malloc on the CPU); NULL on failure. */
    void *(*host_alloc)(Device *dev, size_t bytes);
    void (*host_free)(Device *dev, void *p);
    /* Copies on stream (NULL: the compute stream); kind 0 h2d, 1 d2h, 2 d2d. 0 or RS_ERR_RUNTIME. */
    int (*copy)(Device *dev, void *dst, const void *src, size_t bytes, int kind, void *stream);
    /* Creates/destroys an extra stream (NULL handle on the CPU). */
    int (*stream_create)(Device *dev, void **stream);
    void (*stream_destroy)(Device *dev, void *stream);
    /* Blocks until stream (NULL: compute stream) is idle. 0 or RS_ERR_RUNTIME. */
    int (*stream_sync)(Device *dev, void *stream);
    /* Makes `waiter` wait for everything issued so far on `on` (no host block). */
    int (*stream_wait)(Device *dev, void *waiter, void *on);
    /* Timing events. */
    DevEvent *(*event_create)(Device *dev);
    void (*event_destroy)(Device *dev, DevEvent *ev);
    int (*event_record)(Device *dev, DevEvent *ev, void *stream);
    /* Seconds between two recorded events; blocks until b is complete. -1 on failure. */
    double (*event_elapsed)(Device *dev, DevEvent *a, DevEvent *b);
    /* What the device says: free and total bytes (0, 0 on the CPU). */
    int (*mem_info)(Device *dev, size_t *free_b, size_t *total_b);
    /* One-line description of ordinal ("NVIDIA H200, 139 GiB, cc 9.0"); writes into buf. */
    void (*describe)(int ordinal, char *buf, size_t len);
    /* Device memory this process holds on dev, as the driver counts it (NVML, loaded at run
     * time): 0 with *bytes set, or -1 where it cannot be known (the CPU, no NVML). */
    int (*process_bytes)(Device *dev, unsigned long long *bytes);
} DeviceOps;

struct Device {
    DeviceKind kind;
    int ordinal;              /* GPU index, or 0 for the CPU */
    const DeviceOps *ops;
    const KernelOps *k;       /* the kernels for this device */
    KernelCtx *kctx;          /* kernel context on the compute stream */
    void *stream;             /* compute stream (NULL on the CPU) */
    int host_visible;         /* its memory is host memory the host may read and write directly
                               * (the plain CPU): back ends skip host staging. 0 on a GPU and on
                               * "cpu-async", which therefore take the staging paths */
    void *impl;               /* back end's private state */
};

/* ---- Prototypes ---- */

/* The CPU back end; never NULL. */
const DeviceOps *device_cpu_ops(void);
/* The CUDA back end; NULL in a build without CUDA. */
const DeviceOps *device_cuda_ops(void);
/* "cpu-async" (device_lazy.c): the CPU with copies deferred to the next synchronisation, as a
 * GPU's asynchronous copies may be, and no host-visible memory; for tests. Never NULL. */
const DeviceOps *device_lazy_ops(void);
const KernelOps *device_lazy_kernels(void);

/* Opens the device named by want ("auto", "cpu", "cuda", or "cpu-async" for tests) for a
 * process with local_rank: auto/cuda pick cuda:(local_rank % count). "auto" without a GPU falls back to the CPU and
 * sets *fell_back (may be NULL). "cuda" without a GPU or CUDA build returns RS_ERR_INPUT.
 * On failure dev is left closed and rs_errmsg() says why. */
int device_open(Device *dev, const char *want, int local_rank, int *fell_back);
void device_close(Device *dev);
/* Opens, for the calling thread, the same device as like (its kind, back end and ordinal) with
 * its own compute stream and kernel context. 0, or RS_ERR_* with dev left closed. */
int device_open_like(Device *dev, const Device *like);

/* Accounted allocation: bytes under tag in the process's memory counters. NULL on failure
 * (with rs_errmsg() set). The caller owns the memory and frees it with device_free with the
 * same bytes and tag. */
void *device_alloc(Device *dev, size_t bytes, MemTag tag);
void device_free(Device *dev, void *p, size_t bytes, MemTag tag);

/* Accounted pinned host memory (the device's host_alloc: page-locked where the device has DMA),
 * counted under tag as device_alloc counts: staging that exists to communicate (MEM_COMM). NULL
 * on failure (with rs_errmsg() naming the bytes and the tag). The caller frees it with
 * device_host_free with the same bytes and tag. */
void *device_host_alloc(Device *dev, size_t bytes, MemTag tag);
void device_host_free(Device *dev, void *p, size_t bytes, MemTag tag);

/* Synchronous copies on the compute stream: they return once the copy is complete, so the
 * source may be freed or reused and the destination read (use device_h2d, not ops->copy, from
 * a buffer someone else releases, such as a received message). 0 or RS_ERR_RUNTIME. */
int device_h2d(Device *dev, void *dst, const void *src, size_t bytes);
int device_d2h(Device *dev, void *dst, const void *src, size_t bytes);

/* "cpu" or "cuda:N" */
const char *device_name(const Device *dev, char *buf, size_t len);

#endif
