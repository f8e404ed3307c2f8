/* device_lazy.c - the device layer's "cpu-async" back end: the CPU with a GPU's asynchronous copies, for tests
 *
 * A GPU's cudaMemcpyAsync from pinned memory runs whenever the stream gets to it: the source must
 * stay untouched, and the destination unread, until the stream is synchronised. On the plain CPU
 * device a copy is done when it returns, so code that frees or reuses a source too early, or reads
 * a destination without a sync, still works there and fails only on a GPU. This device makes the
 * CPU behave like the worst legal GPU: every copy is queued and runs as late as the contract
 * allows (at the next stream_sync, stream_wait, event_elapsed, kernel sync, or before the next
 * kernel, which is ordered after it on a stream), and its memory is not host-visible, so the back
 * ends take their staging paths as they do on a GPU, and a copy's device side must lie in memory
 * this device allocated: a host pointer handed where device memory is due fails at once, naming
 * the copy, where a GPU's runtime gives undefined behaviour. A source freed before the copy ran is a
 * use-after-free that AddressSanitizer reports; a source reused too early gives wrong numbers
 * that the equivalence tests catch. Kernels are the CPU's, run after the queue is drained.
 */
#include "device.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"

/* ---- Types ---- */

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} LazyCopy;

/* The device's queue of copies not yet done (one per Device: a Device belongs to one thread). */
typedef struct {
    LazyCopy *q;
    size_t n, cap;
    int streams; /* extra streams handed out, for distinct non-NULL handles */
} LazyQueue;

/* A kernel context: the CPU's, behind the queue it drains first. */
struct KernelCtx {
    KernelCtx *inner;
    LazyQueue *lq;
};

/* The process's live device allocations (every cpu-async Device of it: memory of one is usable
 * from another, as a GPU's is from any stream of its context), guarded by lazy_mu. */
typedef struct {
    const char *p;
    size_t bytes;
} LazyBlock;
static LazyBlock *lazy_blocks;
static size_t lazy_nblocks, lazy_capblocks;
static pthread_mutex_t lazy_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- Device memory ---- */

static void *lazy_alloc(Device *dev, size_t bytes) {
    void *p = device_cpu_ops()->alloc(dev, bytes);
    if (!p) return NULL;
    pthread_mutex_lock(&lazy_mu);
    if (lazy_nblocks == lazy_capblocks) {
        size_t cap = lazy_capblocks ? 2 * lazy_capblocks : 64;
        LazyBlock *nb = realloc(lazy_blocks, cap * sizeof *nb);
        if (!nb) {
            pthread_mutex_unlock(&lazy_mu);
            device_cpu_ops()->free(dev, p);
            rs_error(RS_ERR_RUNTIME, "cpu-async: out of host memory for its allocation table");
            return NULL;
        }
        lazy_blocks = nb;
        lazy_capblocks = cap;
    }
    lazy_blocks[lazy_nblocks++] = (LazyBlock){p, bytes ? bytes : 1};
    pthread_mutex_unlock(&lazy_mu);
    return p;
}

static void lazy_free(Device *dev, void *p) {
    if (!p) return;
    pthread_mutex_lock(&lazy_mu);
    for (size_t i = 0; i < lazy_nblocks; i++)
        if (lazy_blocks[i].p == p) {
            lazy_blocks[i] = lazy_blocks[--lazy_nblocks];
            break;
        }
    pthread_mutex_unlock(&lazy_mu);
    device_cpu_ops()->free(dev, p);
}

/* 1 when [p, p + bytes) lies inside one live allocation of this device. */
static int lazy_is_device(const void *p, size_t bytes) {
    const char *c = p;
    int in = 0;
    pthread_mutex_lock(&lazy_mu);
    for (size_t i = 0; i < lazy_nblocks && !in; i++)
        in = c >= lazy_blocks[i].p && bytes <= lazy_blocks[i].bytes && (size_t)(c - lazy_blocks[i].p) <= lazy_blocks[i].bytes - bytes;
    pthread_mutex_unlock(&lazy_mu);
    return in;
}

/* ---- The queue ---- */

/* Runs every queued copy, in the order issued. */
static void lazy_drain(LazyQueue *lq) {
    if (!lq) return;
    for (size_t i = 0; i < lq->n; i++) memmove(lq->q[i].dst, lq->q[i].src, lq->q[i].bytes);
    lq->n = 0;
}

static LazyQueue *lazy_of(Device *dev) { return (LazyQueue *)dev->impl; }

/* ---- Device ops ---- */

static int lazy_open(Device *dev, int ordinal) {
    LazyQueue *lq = calloc(1, sizeof *lq);
    if (!lq) return rs_error(RS_ERR_RUNTIME, "cpu-async: out of host memory for its queue");
    dev->impl = lq;
    dev->stream = lq; /* a non-NULL compute stream; the kernel context finds the queue through it */
    return 0;
}

static void lazy_close(Device *dev) {
    LazyQueue *lq = lazy_of(dev);
    if (!lq) return;
    lazy_drain(lq);
    free(lq->q);
    free(lq);
    dev->impl = NULL;
    dev->stream = NULL;
}

/* Queues the copy; it runs at the next synchronisation. 0, or RS_ERR_RUNTIME (out of memory, or
 * a device side that is not this device's memory). */
static int lazy_copy(Device *dev, void *dst, const void *src, size_t bytes, int kind, void *stream) {
    static const char *kinds[] = {"host-to-device", "device-to-host", "device-to-device"};
    LazyQueue *lq = lazy_of(dev);
    if (kind < 0 || kind > 2) return rs_error(RS_ERR_RUNTIME, "device copy: bad kind %d", kind);
    if (!bytes) return 0;
    if (kind != 1 && !lazy_is_device(dst, bytes))
        return rs_error(RS_ERR_RUNTIME, "cpu-async: %s copy of %zu bytes to %p, which is not device memory", kinds[kind], bytes, dst);
    if (kind != 0 && !lazy_is_device(src, bytes))
        return rs_error(RS_ERR_RUNTIME, "cpu-async: %s copy of %zu bytes from %p, which is not device memory", kinds[kind], bytes, src);
    if (lq->n == lq->cap) {
        size_t cap = lq->cap ? 2 * lq->cap : 64;
        LazyCopy *q = realloc(lq->q, cap * sizeof *q);
        if (!q) return rs_error(RS_ERR_RUNTIME, "cpu-async: out of host memory for its queue");
        lq->q = q;
        lq->cap = cap;
    }
    lq->q[lq->n++] = (LazyCopy){dst, src, bytes};
    return 0;
}

/* Extra streams are distinct non-NULL handles into the same queue (one queue: a conservative
 * order that still defers every copy to a synchronisation). */
static int lazy_stream_create(Device *dev, void **stream) {
    LazyQueue *lq = lazy_of(dev);
    *stream = (char *)lq + (size_t)(++lq->streams % 8) + 1;
    return 0;
}

static void lazy_stream_destroy(Device *dev, void *stream) { lazy_drain(lazy_of(dev)); }

static int lazy_stream_sync(Device *dev, void *stream) {
    lazy_drain(lazy_of(dev));
    return 0;
}

static int lazy_stream_wait(Device *dev, void *waiter, void *on) {
    lazy_drain(lazy_of(dev));
    return 0;
}

static double lazy_event_elapsed(Device *dev, DevEvent *a, DevEvent *b) {
    lazy_drain(lazy_of(dev));
    return device_cpu_ops()->event_elapsed(dev, a, b);
}

static DeviceOps lazy_device_ops;
static pthread_once_t lazy_once = PTHREAD_ONCE_INIT;

/* The CPU's ops with the lazy ones in place. */
static void lazy_device_ops_init(void) {
    DeviceOps *o = &lazy_device_ops;
    *o = *device_cpu_ops();
    o->name = "cpu-async";
    o->open = lazy_open;
    o->close = lazy_close;
    o->alloc = lazy_alloc;
    o->free = lazy_free;
    o->copy = lazy_copy;
    o->stream_create = lazy_stream_create;
    o->stream_destroy = lazy_stream_destroy;
    o->stream_sync = lazy_stream_sync;
    o->stream_wait = lazy_stream_wait;
    o->event_elapsed = lazy_event_elapsed;
}

/* ---- Kernels: the CPU's, after the queue ---- */

#define INNER (kernels_cpu())

static KernelCtx *lazy_ctx_create(void *stream) {
    KernelCtx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        rs_error(RS_ERR_RUNTIME, "cpu-async: out of host memory for a kernel context");
        return NULL;
    }
    ctx->lq = stream;
    if (!(ctx->inner = INNER->ctx_create(NULL))) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

static void lazy_ctx_destroy(KernelCtx *ctx) {
    if (!ctx) return;
    INNER->ctx_destroy(ctx->inner);
    free(ctx);
}

static int lazy_gemm(KernelCtx *c, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
    lazy_drain(c->lq);
    return INNER->gemm(c->inner, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void lazy_bias_forward(KernelCtx *c, float *Y, const float *b, int rows, int cols) {
    lazy_drain(c->lq);
    INNER->bias_forward(c->inner, Y, b, rows, cols);
}

static void lazy_bias_relu_forward(KernelCtx *c, float *Y, const float *b, int rows, int cols) {
    lazy_drain(c->lq);
    INNER->bias_relu_forward(c->inner, Y, b, rows, cols);
}

static void lazy_bias_backward(KernelCtx *c, float *db, const float *dY, int rows, int cols) {
    lazy_drain(c->lq);
    INNER->bias_backward(c->inner, db, dY, rows, cols);
}

static void lazy_relu_forward(KernelCtx *c, float *Y, const float *X, size_t n) {
    lazy_drain(c->lq);
    INNER->relu_forward(c->inner, Y, X, n);
}

static void lazy_relu_backward(KernelCtx *c, float *dX, const float *dY, const float *Y, size_t n) {
    lazy_drain(c->lq);
    INNER->relu_backward(c->inner, dX, dY, Y, n);
}

static void lazy_softmax_xent(KernelCtx *c, const float *logits, const int *labels, int rows, int cols,
                              float *dlogits, float *stats) {
    lazy_drain(c->lq);
    INNER->softmax_xent(c->inner, logits, labels, rows, cols, dlogits, stats);
}

static void lazy_sgd_step(KernelCtx *c, float *p, const float *g, float *mom, size_t n, float lr, float momentum,
                          float wd, float scale) {
    lazy_drain(c->lq);
    INNER->sgd_step(c->inner, p, g, mom, n, lr, momentum, wd, scale);
}

static void lazy_scale(KernelCtx *c, float *x, float a, size_t n) {
    lazy_drain(c->lq);
    INNER->scale(c->inner, x, a, n);
}

static void lazy_axpy(KernelCtx *c, float *y, float a, const float *x, size_t n) {
    lazy_drain(c->lq);
    INNER->axpy(c->inner, y, a, x, n);
}

static void lazy_fill(KernelCtx *c, float *x, float v, size_t n) {
    lazy_drain(c->lq);
    INNER->fill(c->inner, x, v, n);
}

static int lazy_gemm_strided_batched(KernelCtx *c, int ta, int tb, int M, int N, int K, float alpha,
                                     const float *A, int lda, long long sA, const float *B, int ldb,
                                     long long sB, float beta, float *C, int ldc, long long sC,
                                     int batch) {
    lazy_drain(c->lq);
    return INNER->gemm_strided_batched(c->inner, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C,
                                       ldc, sC, batch);
}

static void lazy_im2col(KernelCtx *c, float *col, const float *x, int B, int C, int H, int W, int k,
                        int stride, int pad) {
    lazy_drain(c->lq);
    INNER->im2col(c->inner, col, x, B, C, H, W, k, stride, pad);
}

static void lazy_col2im(KernelCtx *c, float *dx, const float *dcol, int B, int C, int H, int W, int k,
                        int stride, int pad) {
    lazy_drain(c->lq);
    INNER->col2im(c->inner, dx, dcol, B, C, H, W, k, stride, pad);
}

static void lazy_channel_bias_forward(KernelCtx *c, float *Y, const float *bias, int B, int C, int HW) {
    lazy_drain(c->lq);
    INNER->channel_bias_forward(c->inner, Y, bias, B, C, HW);
}

static void lazy_channel_bias_backward(KernelCtx *c, float *db, const float *dY, int B, int C, int HW) {
    lazy_drain(c->lq);
    INNER->channel_bias_backward(c->inner, db, dY, B, C, HW);
}

static void lazy_maxpool2_forward(KernelCtx *c, float *Y, int *argmax, const float *X, int N, int H, int W) {
    lazy_drain(c->lq);
    INNER->maxpool2_forward(c->inner, Y, argmax, X, N, H, W);
}

static void lazy_maxpool2_backward(KernelCtx *c, float *dX, const float *dY, const int *argmax,
                                   const float *relu_x, int N, int H, int W) {
    lazy_drain(c->lq);
    INNER->maxpool2_backward(c->inner, dX, dY, argmax, relu_x, N, H, W);
}

static void lazy_embedding_forward(KernelCtx *c, float *out, const int *tokens, const float *wte,
                                   const float *wpe, int B, int T, int C, int V) {
    lazy_drain(c->lq);
    INNER->embedding_forward(c->inner, out, tokens, wte, wpe, B, T, C, V);
}

static void lazy_embedding_backward(KernelCtx *c, float *dwte, float *dwpe, const float *dout,
                                    const int *tokens, int B, int T, int C, int V) {
    lazy_drain(c->lq);
    INNER->embedding_backward(c->inner, dwte, dwpe, dout, tokens, B, T, C, V);
}

static void lazy_layernorm_forward(KernelCtx *c, float *out, float *mean, float *rstd, const float *x,
                                   const float *gamma, const float *beta, int N, int C) {
    lazy_drain(c->lq);
    INNER->layernorm_forward(c->inner, out, mean, rstd, x, gamma, beta, N, C);
}

static void lazy_layernorm_backward(KernelCtx *c, float *dx, float *dgamma, float *dbeta, const float *dout,
                                    const float *x, const float *gamma, const float *mean,
                                    const float *rstd, int N, int C) {
    lazy_drain(c->lq);
    INNER->layernorm_backward(c->inner, dx, dgamma, dbeta, dout, x, gamma, mean, rstd, N, C);
}

static void lazy_gelu_forward(KernelCtx *c, float *y, float *dydx, const float *x, size_t n) {
    lazy_drain(c->lq);
    INNER->gelu_forward(c->inner, y, dydx, x, n);
}

static void lazy_softmax_causal_forward(KernelCtx *c, float *P, const float *S, int BH, int T, float scale) {
    lazy_drain(c->lq);
    INNER->softmax_causal_forward(c->inner, P, S, BH, T, scale);
}

static void lazy_softmax_causal_backward(KernelCtx *c, float *dS, const float *dP, const float *P, int BH,
                                         int T, float scale) {
    lazy_drain(c->lq);
    INNER->softmax_causal_backward(c->inner, dS, dP, P, BH, T, scale);
}

static void lazy_heads_split(KernelCtx *c, float *out, const float *in, int B, int T, int S, int H, int D) {
    lazy_drain(c->lq);
    INNER->heads_split(c->inner, out, in, B, T, S, H, D);
}

static void lazy_heads_merge(KernelCtx *c, float *out, const float *in, int B, int T, int S, int H, int D) {
    lazy_drain(c->lq);
    INNER->heads_merge(c->inner, out, in, B, T, S, H, D);
}

static void lazy_add(KernelCtx *c, float *out, const float *a, const float *b, size_t n) {
    lazy_drain(c->lq);
    INNER->add(c->inner, out, a, b, n);
}

static void lazy_mul(KernelCtx *c, float *out, const float *a, const float *b, size_t n) {
    lazy_drain(c->lq);
    INNER->mul(c->inner, out, a, b, n);
}

static void lazy_adamw_step(KernelCtx *c, float *p, const float *g, float *m, float *v, size_t n, float lr,
                            float beta1, float beta2, float eps, float wd, float scale, int t) {
    lazy_drain(c->lq);
    INNER->adamw_step(c->inner, p, g, m, v, n, lr, beta1, beta2, eps, wd, scale, t);
}

static void lazy_pack(KernelCtx *c, void *dst, const float *src, size_t n, int type, float scale,
                      const float *scale_at) {
    lazy_drain(c->lq);
    INNER->pack(c->inner, dst, src, n, type, scale, scale_at);
}

static void lazy_unpack(KernelCtx *c, float *dst, const void *src, size_t n, int type, float scale,
                        const float *scale_at) {
    lazy_drain(c->lq);
    INNER->unpack(c->inner, dst, src, n, type, scale, scale_at);
}

static void lazy_fp8_scale(KernelCtx *c, float *scale, const float *amax, int type, int contributions) {
    lazy_drain(c->lq);
    INNER->fp8_scale(c->inner, scale, amax, type, contributions);
}

static int lazy_check(KernelCtx *c) { return INNER->check(c->inner); }

static void lazy_amax(KernelCtx *c, float *out, const float *x, size_t n) {
    lazy_drain(c->lq);
    INNER->amax(c->inner, out, x, n);
}

static int lazy_sync(KernelCtx *c) {
    lazy_drain(c->lq);
    return INNER->sync(c->inner);
}

static const KernelOps lazy_kernel_ops = {
    .name = "cpu",
    .ctx_create = lazy_ctx_create,
    .ctx_destroy = lazy_ctx_destroy,
    .gemm = lazy_gemm,
    .bias_forward = lazy_bias_forward,
    .bias_backward = lazy_bias_backward,
    .relu_forward = lazy_relu_forward,
    .relu_backward = lazy_relu_backward,
    .softmax_xent = lazy_softmax_xent,
    .sgd_step = lazy_sgd_step,
    .scale = lazy_scale,
    .axpy = lazy_axpy,
    .fill = lazy_fill,
    .sync = lazy_sync,
    .gemm_strided_batched = lazy_gemm_strided_batched,
    .im2col = lazy_im2col,
    .col2im = lazy_col2im,
    .channel_bias_forward = lazy_channel_bias_forward,
    .channel_bias_backward = lazy_channel_bias_backward,
    .maxpool2_forward = lazy_maxpool2_forward,
    .maxpool2_backward = lazy_maxpool2_backward,
    .embedding_forward = lazy_embedding_forward,
    .embedding_backward = lazy_embedding_backward,
    .layernorm_forward = lazy_layernorm_forward,
    .layernorm_backward = lazy_layernorm_backward,
    .gelu_forward = lazy_gelu_forward,
    .softmax_causal_forward = lazy_softmax_causal_forward,
    .softmax_causal_backward = lazy_softmax_causal_backward,
    .heads_split = lazy_heads_split,
    .heads_merge = lazy_heads_merge,
    .add = lazy_add,
    .mul = lazy_mul,
    .adamw_step = lazy_adamw_step,
    .bias_relu_forward = lazy_bias_relu_forward,
    .pack = lazy_pack,
    .unpack = lazy_unpack,
    .amax = lazy_amax,
    .fp8_scale = lazy_fp8_scale,
    .check = lazy_check,
};

/* ---- Public ---- */

/* The "cpu-async" device back end. Never NULL. */
const DeviceOps *device_lazy_ops(void) {
    pthread_once(&lazy_once, lazy_device_ops_init);
    return &lazy_device_ops;
}

/* Its kernels: the CPU's, each draining the queue first. */
const KernelOps *device_lazy_kernels(void) { return &lazy_kernel_ops; }
