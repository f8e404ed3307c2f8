/* ops_cpu.c - the model's math in plain C: the twin every CUDA kernel is tested against */
#include "ops.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "ops_math.h"

#ifdef __AVX2__
const char kernels_cpu_isa[] = "avx2";
#else
const char kernels_cpu_isa[] = "sse2";
#endif

/* Seconds this process has spent inside cblas_sgemm (the GEMM share of a step). */
static _Thread_local double cpu_gemm_seconds;

/* On the CPU a context only remembers its (unused) stream: every op is done when it returns. */
/* Rows of softmax_xent whose losses a context holds at once (a larger batch goes in chunks). */
#define XENT_ROWS 4096

struct KernelCtx {
    void *stream;
    double *row_loss; /* [XENT_ROWS]: softmax_xent's per-row losses, summed in row order after */
    int *row_hit;     /* [XENT_ROWS]: 1 where the row's argmax is its label */
};

static KernelCtx *cpu_ctx_create(void *stream) {
    KernelCtx *ctx = calloc(1, sizeof *ctx);
    if (ctx) {
        ctx->row_loss = malloc(XENT_ROWS * sizeof *ctx->row_loss);
        ctx->row_hit = malloc(XENT_ROWS * sizeof *ctx->row_hit);
    }
    if (!ctx || !ctx->row_loss || !ctx->row_hit) {
        if (ctx) free(ctx->row_loss), free(ctx->row_hit), free(ctx);
        rs_error(RS_ERR_RUNTIME, "kernels cpu: out of host memory for a context");
        return NULL;
    }
    ctx->stream = stream;
    return ctx;
}

static void cpu_ctx_destroy(KernelCtx *ctx) {
    if (!ctx) return;
    free(ctx->row_loss);
    free(ctx->row_hit);
    free(ctx);
}

/* Checks a row-major GEMM's shapes and strides the way BLAS would, but as a status instead of
 * BLAS's own error printout (the CUDA table uses it too). 0 when valid, else RS_ERR_RUNTIME. */
int kernels_gemm_check(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc) {
    int a_cols = ta ? M : K, b_cols = tb ? K : N;
    if (M < 0 || N < 0 || K < 0 || lda < (a_cols > 1 ? a_cols : 1) ||
        ldb < (b_cols > 1 ? b_cols : 1) || ldc < (N > 1 ? N : 1))
        return rs_error(RS_ERR_RUNTIME,
                        "gemm: bad shape M=%d N=%d K=%d (trans %d,%d) with lda=%d ldb=%d ldc=%d",
                        M, N, K, ta, tb, lda, ldb, ldc);
    return 0;
}

/* The same for gemm_strided_batched, with its batch and strides: none negative, and the C_b
 * apart. 0 when valid, else RS_ERR_RUNTIME. */
int kernels_gemm_batched_check(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc,
                               long long strideA, long long strideB, long long strideC,
                               int batch) {
    RS_TRY(kernels_gemm_check(ta, tb, M, N, K, lda, ldb, ldc));
    if (batch < 0 || strideA < 0 || strideB < 0 || strideC < 0 ||
        (batch > 1 && M > 0 && N > 0 && strideC < (long long)(M - 1) * ldc + N))
        return rs_error(RS_ERR_RUNTIME,
                        "gemm_strided_batched: bad batch %d or strides %lld, %lld, %lld "
                        "(M=%d N=%d ldc=%d)",
                        batch, strideA, strideB, strideC, M, N, ldc);
    return 0;
}

/* ---- Threads for GEMM and the elementwise ops ----
 * One pool per process: a parallel region splits [0, n) into contiguous parts, one per thread,
 * which the caller and the workers claim one at a time; the caller claims the first and then
 * any that no worker has taken yet, so a region whose workers are slow to wake (a busy
 * machine) finishes on the caller instead of waiting for them. Which thread runs a part never
 * changes what it computes: ops split only along an axis whose elements are computed
 * independently (never through a shared sum), so results do not depend on the thread count,
 * and a caller that finds the pool busy (another thread's context) runs the region alone. */

/* Items per part below which a region is not worth waking a thread for (floats touched). */
#define PAR_GRAIN ((size_t)1 << 15)
#define PAR_MAX_THREADS 64
/* How long a worker that has finished its part, and a caller waiting for the workers' parts,
 * watch for the next region (or the last part) before they sleep on the condition variable: a
 * step's regions follow one another within microseconds, where a futex wake-up costs tens of
 * them (and, on a busy machine, leaves the caller doing the worker's part itself). */
#define PAR_SPIN_S 50e-6

typedef void (*ParFn)(void *arg, size_t lo, size_t hi);

static struct {
    pthread_mutex_t use; /* held by the one caller running a region */
    pthread_mutex_t mu;  /* guards the fields below */
    pthread_cond_t go, done;
    int nworkers;        /* workers started (none in a forked child) */
    int parts, next;     /* the region's parts, and the first not yet claimed */
    atomic_uint pending; /* parts not yet finished (written under `mu`; watched without it) */
    atomic_uint gen;     /* regions published (written under `mu`; watched without it) */
    ParFn fn;
    void *arg;
    size_t n;
} pool = {.use = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
          .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

/* Threads a region may use (kernels_cpu_set_threads). */
static atomic_int par_threads = 1;

/* Start of part i of parts over [0, n). */
static size_t par_lo(size_t n, int parts, int i) { return n / parts * i + (n % parts) * i / parts; }

/* Runs unclaimed parts of the current region until none is left (called with `mu` held, and
 * returns with it held). */
static void par_claim(void) {
    while (pool.next < pool.parts) {
        int i = pool.next++, parts = pool.parts;
        ParFn fn = pool.fn;
        void *arg = pool.arg;
        size_t n = pool.n;
        pthread_mutex_unlock(&pool.mu);
        fn(arg, par_lo(n, parts, i), par_lo(n, parts, i + 1));
        pthread_mutex_lock(&pool.mu);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
    }
}

/* Spins (with the CPU's pause hint) for up to PAR_SPIN_S until *v, read without the lock,
 * differs from seen (want_change) or equals it (!want_change). 1 when it did. */
static int par_spin(atomic_uint *v, unsigned seen, int want_change) {
    double t0 = 0;
    for (unsigned k = 0;; k++) {
        unsigned now = atomic_load_explicit(v, memory_order_acquire);
        if ((now != seen) == want_change) return 1;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if ((k & 63) == 0) {
            double t = clock_now();
            if (k == 0) t0 = t;
            else if (t - t0 > PAR_SPIN_S) return 0;
            if (k % 256 == 0 && k) sched_yield(); /* more threads than cores: let the one awaited run */
        }
    }
}

static void *par_worker(void *p) {
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        if (pool.next >= pool.parts) { /* watch for the next region a while, then sleep */
            unsigned g = atomic_load_explicit(&pool.gen, memory_order_relaxed);
            pthread_mutex_unlock(&pool.mu);
            par_spin(&pool.gen, g, 1);
            pthread_mutex_lock(&pool.mu);
            while (pool.next >= pool.parts) pthread_cond_wait(&pool.go, &pool.mu);
        }
        par_claim();
    }
    return NULL;
}

/* fork() keeps the pool's state but not its workers: the handlers hold both locks across the
 * fork (so that no region is running and no worker holds `mu`), and the child starts afresh. */
static pthread_once_t par_fork_once = PTHREAD_ONCE_INIT;

static void par_fork_prepare(void) {
    pthread_mutex_lock(&pool.use);
    pthread_mutex_lock(&pool.mu);
}

static void par_fork_parent(void) {
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.use);
}

static void par_fork_child(void) {
    pool.nworkers = 0;
    pthread_cond_init(&pool.go, NULL); /* its waiters stayed in the parent */
    pthread_cond_init(&pool.done, NULL);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.use);
}

static void par_fork_register(void) {
    pthread_atfork(par_fork_prepare, par_fork_parent, par_fork_child);
}

/* Starts workers up to `workers` (the caller holds `use`); one that fails to start is left out. */
static void par_grow(int workers) {
    pthread_once(&par_fork_once, par_fork_register);
    while (pool.nworkers < workers && pool.nworkers < PAR_MAX_THREADS - 1) {
        pthread_t th;
        if (pthread_create(&th, NULL, par_worker, NULL) != 0) break;
        pthread_detach(th);
        pool.nworkers++;
    }
}

/* Runs fn over [0, n) in parts of at least grain items, up to PAR_SPLIT parts a thread, on up to
 * par_threads threads, each claiming the next part as it comes free: a thread that starts late
 * (a worker waking, a vCPU the hypervisor lent elsewhere) takes fewer parts instead of making the
 * caller wait for its half (one part a thread left gpt's caller waiting about 1 ms a step).
 * Who runs a part never changes its result. The workers are started by kernels_cpu_set_threads
 * (or at first need, in a forked child); should one fail to start, the caller runs its parts. */
#define PAR_SPLIT 4
static void par_run(size_t n, size_t grain, ParFn fn, void *arg) {
    int threads = atomic_load_explicit(&par_threads, memory_order_relaxed);
    size_t most = grain ? n / grain : n, cap = threads > 1 ? (size_t)threads * PAR_SPLIT : 1;
    int parts = most < cap ? (int)most : (int)cap;
    if (parts <= 1 || pthread_mutex_trylock(&pool.use) != 0) {
        if (n) fn(arg, 0, n);
        return;
    }
    par_grow((parts < threads ? parts : threads) - 1);
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.arg = arg;
    pool.n = n;
    pool.parts = parts;
    atomic_store_explicit(&pool.pending, (unsigned)parts, memory_order_relaxed);
    pool.next = 1; /* part 0 is the caller's */
    atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    fn(arg, 0, par_lo(n, parts, 1));
    pthread_mutex_lock(&pool.mu);
    pool.pending--;
    par_claim();
    if (pool.pending > 0) { /* the workers' parts: watch a while, then sleep */
        pthread_mutex_unlock(&pool.mu);
        par_spin(&pool.pending, 0, 0);
        pthread_mutex_lock(&pool.mu);
    }
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.use);
}

/* Rows per part so that a part touches at least PAR_GRAIN floats. */
static size_t par_rows(size_t cols) { return cols ? (PAR_GRAIN + cols - 1) / cols : PAR_GRAIN; }

/* ---- GEMM ----
 * BLAS runs single-threaded, always: a GEMM is cut into parts of C (row blocks or column
 * blocks), each one cblas_sgemm call over the whole K, and the pool's threads take the parts.
 * The cut is a function of the shape alone, never of the thread count: OpenBLAS does not promise
 * that a block of C computed by a call of its own has the bits it has inside a larger call (with
 * 0.3.21's Haswell kernels on an AMD Zen 4, 128 x 1024 x 784 split into two column halves gives
 * other bits in about 6% of C), so every thread count makes the same calls and gets the same bits
 * (OpenBLAS's own threading gives other bits on 1 and 2 threads too). And no BLAS thread spins
 * on a core that the pool's elementwise ops need (OpenBLAS's idle workers sched_yield in a loop
 * for a while after every call). */

/* The smallest part (multiply-adds), the most parts of one GEMM, and the unit parts are cut in
 * (rows or columns: whole register blocks of the sgemm kernels). A GEMM is cut into 1, 2, 4 or 8
 * parts of at least 2^21 multiply-adds, so that 2 and 4 threads get equal shares: gpt's
 * 1024 x 192 x 64 in 3 parts of 2^22 left one of 2 threads twice the other's work, and its
 * 1024 x 64 x 64 in 1 part left a thread idle (gpt's GEMM time fell from 5.9 to 5.4 ms a step;
 * the MLP's and lenet's cuts did not change). */
#define GEMM_GRAIN ((double)(1 << 20))
#define GEMM_PART_MIN (2.0 * GEMM_GRAIN)
#define GEMM_MAX_PARTS 8
#define GEMM_UNIT 16

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows;
    float alpha, beta;
    const float *A, *B;
    float *C;
    size_t per;     /* units per part */
} GemmJob;

/* Parts [lo, hi): part p is units [p * per, (p + 1) * per) of C's rows (by_rows) or columns,
 * one BLAS call each. */
static void gemm_range(void *arg, size_t lo, size_t hi) {
    const GemmJob *j = arg;
    int extent = j->by_rows ? j->M : j->N;
    for (size_t p = lo; p < hi; p++) {
        size_t r0 = p * j->per * GEMM_UNIT, r1 = (p + 1) * j->per * GEMM_UNIT;
        if (r1 > (size_t)extent) r1 = (size_t)extent;
        if (r0 >= r1) continue;
        int n = (int)(r1 - r0);
        const float *A = j->A, *B = j->B;
        float *C = j->C;
        if (j->by_rows) { /* rows r0.. of op(A) and of C */
            A += j->ta ? r0 : r0 * (size_t)j->lda;
            C += r0 * (size_t)j->ldc;
        } else { /* columns r0.. of op(B) and of C */
            B += j->tb ? r0 * (size_t)j->ldb : r0;
            C += r0;
        }
        cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                    j->by_rows ? n : j->M, j->by_rows ? j->N : n, j->K, j->alpha, A, j->lda, B, j->ldb,
                    j->beta, C, j->ldc);
    }
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single(void) { openblas_set_num_threads(1); }

/* One GEMM, cut along C's longer side into a power of two of parts of at least GEMM_PART_MIN
 * multiply-adds (at most GEMM_MAX_PARTS), whatever the thread count. */
static void gemm_split(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
    pthread_once(&blas_once, blas_single);
    GemmJob j = {ta, tb, M, N, K, lda, ldb, ldc, M >= N, alpha, beta, A, B, C, 0};
    int extent = j.by_rows ? M : N;
    size_t units = ((size_t)extent + GEMM_UNIT - 1) / GEMM_UNIT;
    double work = (double)M * N * K;
    size_t parts = (size_t)(work / GEMM_PART_MIN);
    if (parts > GEMM_MAX_PARTS) parts = GEMM_MAX_PARTS;
    if (parts > units) parts = units;
    if (parts < 1) parts = 1;
    while (parts & (parts - 1)) parts &= parts - 1; /* the power of two at or below */
    j.per = (units + parts - 1) / parts;
    parts = (units + j.per - 1) / j.per;
    par_run(parts, 1, gemm_range, &j);
}

/* A strided batch of GEMMs: its items in [lo, hi), each whole. */
typedef struct {
    GemmJob g;
    long long sa, sb, sc;
} BatchJob;

static void gemm_batch_range(void *arg, size_t lo, size_t hi) {
    const BatchJob *j = arg;
    const GemmJob *g = &j->g;
    for (size_t b = lo; b < hi; b++)
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->M, g->N, g->K, g->alpha,
                    g->A + b * j->sa, g->lda, g->B + b * j->sb, g->ldb, g->beta, g->C + b * j->sc,
                    g->ldc);
}

static int cpu_gemm(KernelCtx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc) {
    RS_TRY(kernels_gemm_check(trans_a, trans_b, M, N, K, lda, ldb, ldc));
    if (M == 0 || N == 0) return 0;
    double t0 = clock_now();
    gemm_split(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    cpu_gemm_seconds += clock_now() - t0;
    return 0;
}

static int cpu_sync(KernelCtx *ctx) { return 0; }

/* ---- Neural-network ops ---- */

static int cpu_gemm_strided_batched(KernelCtx *ctx, int trans_a, int trans_b, int M, int N, int K,
                                    float alpha, const float *A, int lda, long long strideA,
                                    const float *B, int ldb, long long strideB, float beta,
                                    float *C, int ldc, long long strideC, int batch) {
    RS_TRY(kernels_gemm_batched_check(trans_a, trans_b, M, N, K, lda, ldb, ldc, strideA, strideB,
                                      strideC, batch));
    if (M == 0 || N == 0 || batch == 0) return 0;
    double t0 = clock_now();
    double work = (double)M * N * K;
    if (batch > 1 && work < GEMM_GRAIN * 4) { /* small matrices: whole ones per thread */
        BatchJob j = {{trans_a, trans_b, M, N, K, lda, ldb, ldc, 1, alpha, beta, A, B, C, 0},
                      strideA, strideB, strideC};
        pthread_once(&blas_once, blas_single);
        par_run((size_t)batch, (size_t)(GEMM_GRAIN / 4 / (work + 1.0)) + 1, gemm_batch_range, &j);
    } else {
        for (int b = 0; b < batch; b++)
            gemm_split(trans_a, trans_b, M, N, K, alpha, A + b * strideA, lda, B + b * strideB,
                       ldb, beta, C + b * strideC, ldc);
    }
    cpu_gemm_seconds += clock_now() - t0;
    return 0;
}

/* A convolution's geometry, shared by im2col and col2im. */
typedef struct {
    float *out;
    const float *in;
    int C, H, W, k, stride, pad, OH, OW;
} ConvJob;

/* The output columns [*ow0, *ow1) whose input column iw = ow * stride + off (off = kj - pad) lies
 * in [0, W): where a window's row kj reads the image, not the padding. */
static void conv_ow_range(const ConvJob *j, int off, int *ow0, int *ow1) {
    int a = 0, z = j->OW;
    while (a < z && a * j->stride + off < 0) a++;
    while (z > a && (z - 1) * j->stride + off >= j->W) z--;
    *ow0 = a;
    *ow1 = z;
}

/* Planes p = b*C + c of x in [lo, hi): their k*k rows of col. Each row of col is a row of x
 * shifted by kj (a copy, with stride 1) between zeros where the window hangs over the edge. */
static void im2col_range(void *arg, size_t lo, size_t hi) {
    const ConvJob *j = arg;
    size_t ohw = (size_t)j->OH * j->OW, kk = (size_t)j->k * j->k;
    for (size_t p = lo; p < hi; p++) {
        const float *xp = j->in + p * j->H * j->W;
        for (int ki = 0; ki < j->k; ki++)
            for (int kj = 0; kj < j->k; kj++) {
                float *row = j->out + (p * kk + (size_t)ki * j->k + kj) * ohw;
                int ow0, ow1, off = kj - j->pad;
                conv_ow_range(j, off, &ow0, &ow1);
                for (int oh = 0; oh < j->OH; oh++) {
                    int ih = oh * j->stride - j->pad + ki;
                    float *r = row + (size_t)oh * j->OW;
                    if (ih < 0 || ih >= j->H) {
                        memset(r, 0, (size_t)j->OW * sizeof *r);
                        continue;
                    }
                    const float *xr = xp + (size_t)ih * j->W + off;
                    for (int ow = 0; ow < ow0; ow++) r[ow] = 0.0f;
                    if (j->stride == 1) memcpy(r + ow0, xr + ow0, (size_t)(ow1 - ow0) * sizeof *r);
                    else
                        for (int ow = ow0; ow < ow1; ow++) r[ow] = xr[(size_t)ow * j->stride];
                    for (int ow = ow1; ow < j->OW; ow++) r[ow] = 0.0f;
                }
            }
    }
}

static void cpu_im2col(KernelCtx *ctx, float *col, const float *x, int B, int C, int H, int W,
                       int k, int stride, int pad) {
    ConvJob j = {col, x, C, H, W, k, stride, pad, kernels_conv_out(H, k, stride, pad),
                 kernels_conv_out(W, k, stride, pad)};
    if (B <= 0 || C <= 0 || j.OH <= 0 || j.OW <= 0) return;
    par_run((size_t)B * C, par_rows((size_t)k * k * j.OH * j.OW), im2col_range, &j);
}

/* Planes of dx in [lo, hi): zeroed, then every dcol row added where im2col took it from, rows in
 * (i, j) order, so that each element sums its entries in (i, j) order from 0 (the gather's bits,
 * with contiguous adds instead of a division and two branches per entry). */
static void col2im_range(void *arg, size_t lo, size_t hi) {
    const ConvJob *j = arg;
    size_t ohw = (size_t)j->OH * j->OW, kk = (size_t)j->k * j->k;
    for (size_t p = lo; p < hi; p++) {
        const float *cp = j->in + p * kk * ohw;
        float *dp = j->out + p * j->H * j->W;
        memset(dp, 0, (size_t)j->H * j->W * sizeof *dp);
        for (int ki = 0; ki < j->k; ki++)
            for (int kj = 0; kj < j->k; kj++) {
                const float *row = cp + ((size_t)ki * j->k + kj) * ohw;
                int ow0, ow1, off = kj - j->pad;
                conv_ow_range(j, off, &ow0, &ow1);
                for (int oh = 0; oh < j->OH; oh++) {
                    int ih = oh * j->stride - j->pad + ki;
                    if (ih < 0 || ih >= j->H) continue;
                    float *d = dp + (size_t)ih * j->W + off;
                    const float *c = row + (size_t)oh * j->OW;
                    if (j->stride == 1)
                        for (int ow = ow0; ow < ow1; ow++) d[ow] += c[ow];
                    else
                        for (int ow = ow0; ow < ow1; ow++) d[(size_t)ow * j->stride] += c[ow];
                }
            }
    }
}

static void cpu_col2im(KernelCtx *ctx, float *dx, const float *dcol, int B, int C, int H, int W,
                       int k, int stride, int pad) {
    ConvJob j = {dx, dcol, C, H, W, k, stride, pad, kernels_conv_out(H, k, stride, pad),
                 kernels_conv_out(W, k, stride, pad)};
    if (B <= 0 || C <= 0 || H <= 0 || W <= 0) return;
    if (j.OH <= 0 || j.OW <= 0) { /* no window fits: nothing was read */
        memset(dx, 0, (size_t)B * C * H * W * sizeof *dx);
        return;
    }
    par_run((size_t)B * C, par_rows((size_t)k * k * H * W), col2im_range, &j);
}

/* Arguments of the ops over rows (planes, positions, channels) that take a few pointers. */
typedef struct {
    float *o0, *o1, *o2;
    const float *i0, *i1, *i2, *i3, *i4;
    const int *idx;
    int a, b, c, d, e, f;
    float s;
} RowJob;

/* ---- The MLP's elementwise ops ----
 * Each splits along an axis whose elements are independent (rows, columns or flat indices), so
 * every element is computed by the same expression in the same order on any thread count. */

/* Rows in [lo, hi): Y[r][:] += b, then ReLU where f. (a = cols) */
static void bias_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    size_t cols = (size_t)j->a;
    const float *b = j->i0;
    for (size_t r = lo; r < hi; r++) {
        float *y = j->o0 + r * cols;
        if (j->f)
            for (size_t c = 0; c < cols; c++) {
                float v = y[c] + b[c];
                y[c] = v > 0.0f ? v : 0.0f;
            }
        else
            for (size_t c = 0; c < cols; c++) y[c] += b[c];
    }
}

static void cpu_bias_forward(KernelCtx *ctx, float *Y, const float *b, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    RowJob j = {.o0 = Y, .i0 = b, .a = cols, .f = 0};
    par_run((size_t)rows, par_rows((size_t)cols), bias_forward_range, &j);
}

/* Y = max(Y + b, 0) in one pass: bias_forward then relu_forward, the same bits. */
static void cpu_bias_relu_forward(KernelCtx *ctx, float *Y, const float *b, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    RowJob j = {.o0 = Y, .i0 = b, .a = cols, .f = 1};
    par_run((size_t)rows, par_rows((size_t)cols), bias_forward_range, &j);
}

/* Columns in [lo, hi) of db, each summed over every row in row order, BIAS_COLS at a time so
 * that a pass over the rows reads whole cache lines. (i0 dY, a = cols, b = rows) */
#define BIAS_COLS 256
static void bias_backward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    size_t cols = (size_t)j->a;
    for (size_t c0 = lo; c0 < hi; c0 += BIAS_COLS) {
        size_t c1 = c0 + BIAS_COLS < hi ? c0 + BIAS_COLS : hi;
        float *db = j->o0;
        for (size_t c = c0; c < c1; c++) db[c] = 0.0f;
        for (int r = 0; r < j->b; r++) {
            const float *dy = j->i0 + (size_t)r * cols;
            for (size_t c = c0; c < c1; c++) db[c] += dy[c];
        }
    }
}

/* Sums down each column in row order: the order the CUDA kernel uses too. */
static void cpu_bias_backward(KernelCtx *ctx, float *db, const float *dY, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    RowJob j = {.o0 = db, .i0 = dY, .a = cols, .b = rows};
    size_t grain = (PAR_GRAIN + (size_t)rows - 1) / (size_t)rows;
    par_run((size_t)cols, grain < 16 ? 16 : grain, bias_backward_range, &j);
}

static void relu_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    for (size_t i = lo; i < hi; i++) j->o0[i] = j->i0[i] > 0.0f ? j->i0[i] : 0.0f;
}

static void cpu_relu_forward(KernelCtx *ctx, float *Y, const float *X, size_t n) {
    RowJob j = {.o0 = Y, .i0 = X};
    par_run(n, PAR_GRAIN, relu_forward_range, &j);
}

/* (i0 dY, i1 Y) dX = dY where Y > 0, else +0: dY's bits under a mask, in blocks copied through
 * locals (dX may alias dY, which keeps the compiler from vectorising the plain loop; the sign of
 * a trained layer's output is a coin flip, so a branch per element mispredicts half the time:
 * 128 Ki elements 1.04 ms branchy, 0.06 ms masked, the same bits). */
#define RELU_BLOCK 16
static void relu_backward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    size_t i = lo;
    for (; i + RELU_BLOCK <= hi; i += RELU_BLOCK) {
        uint32_t d[RELU_BLOCK];
        float y[RELU_BLOCK];
        memcpy(d, j->i0 + i, sizeof d);
        memcpy(y, j->i1 + i, sizeof y);
        for (int k = 0; k < RELU_BLOCK; k++) d[k] &= -(uint32_t)(y[k] > 0.0f);
        memcpy(j->o0 + i, d, sizeof d);
    }
    for (; i < hi; i++) j->o0[i] = j->i1[i] > 0.0f ? j->i0[i] : 0.0f;
}

static void cpu_relu_backward(KernelCtx *ctx, float *dX, const float *dY, const float *Y,
                              size_t n) {
    RowJob j = {.o0 = dX, .i0 = dY, .i1 = Y};
    par_run(n, PAR_GRAIN, relu_backward_range, &j);
}

/* ---- Sums in double, over lanes ----
 * The rows' sums (the softmaxes' normalisers and the causal softmax's backward dot product,
 * LayerNorm's moments, the channels' bias gradient) are taken in double over SUM_LANES lanes:
 * lane k adds elements k, k + SUM_LANES, ... in order, and the lanes are added in one fixed tree
 * at the end. An in-order double sum waits for each addition (4 cycles) before the next, which
 * left these rows latency-bound (a LayerNorm row of 64 floats: 512 cycles of additions in
 * chain); lanes are independent chains, added two vectors at a time. The order depends on the
 * length alone, never on the thread count; against the in-order sum only the last bits of the
 * double differ, which move the float rounded from it only when they decide its rounding. */
#define SUM_LANES 8

static inline double lanes_total(const double *a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* acc[k] += x[i] for i = k mod SUM_LANES, in order (the tail from lane 0). */
static inline void lanes_add(double *acc, const float *x, int n) {
    int c = 0;
    for (; c + SUM_LANES <= n; c += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) acc[k] += x[c + k];
    for (int k = 0; c < n; c++, k++) acc[k] += x[c];
}

static inline double sum_f(const float *x, int n) {
    double acc[SUM_LANES] = {0};
    lanes_add(acc, x, n);
    return lanes_total(acc);
}

/* Sum of (double)a[i] * b[i]. */
static inline double dot_f(const float *a, const float *b, int n) {
    double acc[SUM_LANES] = {0};
    int c = 0;
    for (; c + SUM_LANES <= n; c += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) acc[k] += (double)a[c + k] * b[c + k];
    for (int k = 0; c < n; c++, k++) acc[k] += (double)a[c] * b[c];
    return lanes_total(acc);
}

/* Sum of (double)(x[i] - m)^2, the difference rounded to float first. */
static inline double sqdev_f(const float *x, float m, int n) {
    double acc[SUM_LANES] = {0};
    int c = 0;
    for (; c + SUM_LANES <= n; c += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) acc[k] += (double)(x[c + k] - m) * (x[c + k] - m);
    for (int k = 0; c < n; c++, k++) acc[k] += (double)(x[c] - m) * (x[c] - m);
    return lanes_total(acc);
}

/* The largest of a * x[i] over n floats (-INFINITY for none; NaNs passed over, as v > m ? v : m
 * does in order), in SUM_LANES lanes: a maximum is exact in any order. */
static inline float max_scaled(const float *x, float a, int n) {
    float lm[SUM_LANES];
    for (int k = 0; k < SUM_LANES; k++) lm[k] = -INFINITY;
    int c = 0;
    for (; c + SUM_LANES <= n; c += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) {
            float v = a * x[c + k];
            lm[k] = v > lm[k] ? v : lm[k];
        }
    for (int k = 0; c < n; c++, k++) {
        float v = a * x[c];
        lm[k] = v > lm[k] ? v : lm[k];
    }
    float m = lm[0];
    for (int k = 1; k < SUM_LANES; k++) m = lm[k] > m ? lm[k] : m;
    return m;
}

/* x's largest value and its first index, as m = x[0], then x[c] > m ? (m = x[c], arg = c) in
 * order would find them (a NaN x[0] stays; other NaNs are passed over), in SUM_LANES lanes of
 * (maximum, first index), whose ties go to the smaller index. n >= 1. */
static inline float max_arg(const float *x, int n, int *arg) {
    float lm[SUM_LANES];
    int li[SUM_LANES];
    for (int k = 0; k < SUM_LANES; k++) lm[k] = -INFINITY, li[k] = 0;
    int c = 0;
    for (; c + SUM_LANES <= n; c += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) {
            int up = x[c + k] > lm[k];
            lm[k] = up ? x[c + k] : lm[k];
            li[k] = up ? c + k : li[k];
        }
    for (int k = 0; c < n; c++, k++)
        if (x[c] > lm[k]) lm[k] = x[c], li[k] = c;
    float m = x[0];
    int a = 0;
    for (int k = 0; k < SUM_LANES; k++) /* a NaN m compares false: it stays */
        if (lm[k] > m || (lm[k] == m && li[k] < a)) m = lm[k], a = li[k];
    *arg = a;
    return m;
}

/* Per row: max and first argmax, then the sum of exp(x - max) (in double, then rounded to
 * float), then the loss and the gradient. A label outside [0, cols) makes the loss NaN, so that
 * bad data cannot pass unnoticed. Rows are independent and go to the pool's threads (at V = 32k
 * the softmax over a gpt batch is most of its forward); each row's loss is kept, and the losses
 * are summed in double in row order after, so the bits do not depend on the thread count. */
typedef struct {
    const float *logits;
    const int *labels;
    float *dlogits;
    int cols;
    size_t base;      /* the chunk's first row */
    double *loss;     /* [rows of the chunk] */
    int *hit;
} XentJob;

static void xent_range(void *job, size_t lo, size_t hi) {
    const XentJob *j = job;
    const int cols = j->cols;
    for (size_t i = lo; i < hi; i++) {
        size_t r = j->base + i;
        const float *x = j->logits + r * (size_t)cols;
        float *dx = j->dlogits + r * (size_t)cols;
        int label = j->labels[r];
        int arg;
        float m = max_arg(x, cols, &arg);
        int valid = label >= 0 && label < cols;
        float xl = valid ? x[label] - m : 0.0f; /* read before dx (which may be x) is written */
        for (int c = 0; c < cols; c++) dx[c] = ops_expf(x[c] - m); /* kept for the gradient */
        float s = (float)sum_f(dx, cols); /* in double: the reference for CUDA's tree sum */
        j->loss[i] = valid ? (double)(logf(s) - xl) : (double)NAN;
        j->hit[i] = valid && arg == label;
        for (int c = 0; c < cols; c++) dx[c] = dx[c] / s - (c == label ? 1.0f : 0.0f);
    }
}

static void cpu_softmax_xent(KernelCtx *ctx, const float *logits, const int *labels, int rows,
                             int cols, float *dlogits, float *stats) {
    if (rows <= 0 || cols <= 0) return;
    double loss_sum = 0.0;
    int correct = 0;
    XentJob j = {logits, labels, dlogits, cols, 0, ctx->row_loss, ctx->row_hit};
    for (size_t base = 0; base < (size_t)rows; base += XENT_ROWS) {
        size_t n = (size_t)rows - base < XENT_ROWS ? (size_t)rows - base : XENT_ROWS;
        j.base = base;
        par_run(n, par_rows((size_t)cols), xent_range, &j);
        for (size_t i = 0; i < n; i++) {
            loss_sum += j.loss[i];
            correct += j.hit[i];
        }
    }
    stats[0] += (float)loss_sum;
    stats[1] += (float)correct;
}

/* Arguments of the flat vector ops: SGD's (p, m, g and its constants), scale's, axpy's and
 * fill's (y, x, a). */
typedef struct {
    float *p, *m, *y;
    const float *g, *x;
    float lr, momentum, decay, grad_scale, a;
} VecJob;

/* PyTorch's SGD with momentum and weight decay, element by element. */
static void sgd_range(void *arg, size_t lo, size_t hi) {
    const VecJob *j = arg;
    float *p = j->p, *mom = j->m;
    const float *grad = j->g;
    for (size_t i = lo; i < hi; i++) {
        float g = grad[i] * j->grad_scale + j->decay * p[i];
        float m = j->momentum * mom[i] + g;
        mom[i] = m;
        p[i] -= j->lr * m;
    }
}

static void cpu_sgd_step(KernelCtx *ctx, float *param, const float *grad, float *mom, size_t n,
                         float lr, float momentum, float weight_decay, float grad_scale) {
    VecJob j = {.p = param, .m = mom, .g = grad, .lr = lr, .momentum = momentum,
                .decay = weight_decay, .grad_scale = grad_scale};
    par_run(n, PAR_GRAIN, sgd_range, &j);
}

static void scale_range(void *arg, size_t lo, size_t hi) {
    const VecJob *j = arg;
    for (size_t i = lo; i < hi; i++) j->y[i] *= j->a;
}

static void cpu_scale(KernelCtx *ctx, float *x, float a, size_t n) {
    VecJob j = {.y = x, .a = a};
    par_run(n, PAR_GRAIN, scale_range, &j);
}

static void axpy_range(void *arg, size_t lo, size_t hi) {
    const VecJob *j = arg;
    for (size_t i = lo; i < hi; i++) j->y[i] += j->a * j->x[i];
}

static void cpu_axpy(KernelCtx *ctx, float *y, float a, const float *x, size_t n) {
    VecJob j = {.y = y, .x = x, .a = a};
    par_run(n, PAR_GRAIN, axpy_range, &j);
}

static void fill_range(void *arg, size_t lo, size_t hi) {
    const VecJob *j = arg;
    for (size_t i = lo; i < hi; i++) j->y[i] = j->a;
}

static void cpu_fill(KernelCtx *ctx, float *x, float v, size_t n) {
    VecJob j = {.y = x, .a = v};
    par_run(n, PAR_GRAIN, fill_range, &j);
}

/* Planes p = b*C + c in [lo, hi): Y[p][:] += bias[c]. (a = C, b = HW) */
static void channel_bias_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    for (size_t p = lo; p < hi; p++) {
        float v = j->i0[p % j->a], *y = j->o0 + p * j->b;
        for (int i = 0; i < j->b; i++) y[i] += v;
    }
}

static void cpu_channel_bias_forward(KernelCtx *ctx, float *Y, const float *bias, int B, int C,
                                     int HW) {
    if (B <= 0 || C <= 0 || HW <= 0) return;
    RowJob j = {.o0 = Y, .i0 = bias, .a = C, .b = HW};
    par_run((size_t)B * C, par_rows(HW), channel_bias_forward_range, &j);
}

/* Channels in [lo, hi): the sum over b, then p, in double lanes (lane k: the positions p = k mod
 * SUM_LANES of every b in turn). (a = B, b = C, c = HW) */
static void channel_bias_backward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    for (size_t c = lo; c < hi; c++) {
        double acc[SUM_LANES] = {0};
        for (int b = 0; b < j->a; b++) lanes_add(acc, j->i0 + ((size_t)b * j->b + c) * j->c, j->c);
        j->o0[c] = (float)lanes_total(acc);
    }
}

static void cpu_channel_bias_backward(KernelCtx *ctx, float *dbias, const float *dY, int B,
                                      int C, int HW) {
    if (B <= 0 || C <= 0 || HW <= 0) return;
    RowJob j = {.o0 = dbias, .i0 = dY, .a = B, .b = C, .c = HW};
    par_run((size_t)C, par_rows((size_t)B * HW), channel_bias_backward_range, &j);
}

/* Planes in [lo, hi). (a = H, b = W) */
/* One window's maximum in row-major order, the first on ties, a NaN winning over a number (the
 * rule of the CUDA twin and PyTorch). Picked in two rounds, each row's pair and then the two rows'
 * winners (the same choice as one pass over the four: the earlier wins unless the later is
 * greater, or a NaN beside a number), MAXPOOL_BLOCK windows at a time through locals, so that the
 * compiler turns the comparisons into vector selects: 8x the branchy loop on a 2-core machine. */
#define MAXPOOL_BLOCK 8

/* 1 when b replaces a: greater, or a NaN where a is a number. */
static inline int maxpool_take(float b, float a) { return !(b <= a) & (a == a); }

static void maxpool2_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    int H = j->a, W = j->b, OH = H / 2, OW = W / 2;
    for (size_t p = lo; p < hi; p++) {
        const float *x = j->i0 + p * H * W;
        float *y = j->o0 + p * OH * OW;
        int *am = (int *)j->idx + p * OH * OW;
        for (int oh = 0; oh < OH; oh++) {
            const float *r0 = x + (size_t)(2 * oh) * W, *r1 = r0 + W;
            int base = 2 * oh * W;
            for (int o0 = 0; o0 < OW; o0 += MAXPOOL_BLOCK) {
                int n = OW - o0 < MAXPOOL_BLOCK ? OW - o0 : MAXPOOL_BLOCK;
                float a[MAXPOOL_BLOCK] = {0}, b[MAXPOOL_BLOCK] = {0}, c[MAXPOOL_BLOCK] = {0}, d[MAXPOOL_BLOCK] = {0};
                float top[MAXPOOL_BLOCK], bot[MAXPOOL_BLOCK];
                int ttop[MAXPOOL_BLOCK], tbot[MAXPOOL_BLOCK];
                for (int k = 0; k < n; k++) {
                    a[k] = r0[2 * (o0 + k)], b[k] = r0[2 * (o0 + k) + 1];
                    c[k] = r1[2 * (o0 + k)], d[k] = r1[2 * (o0 + k) + 1];
                }
                for (int k = 0; k < MAXPOOL_BLOCK; k++) {
                    ttop[k] = maxpool_take(b[k], a[k]);
                    top[k] = ttop[k] ? b[k] : a[k];
                    tbot[k] = maxpool_take(d[k], c[k]);
                    bot[k] = tbot[k] ? d[k] : c[k];
                }
                for (int k = 0; k < n; k++) {
                    int low = maxpool_take(bot[k], top[k]), col = base + 2 * (o0 + k);
                    y[oh * OW + o0 + k] = low ? bot[k] : top[k];
                    am[oh * OW + o0 + k] = low ? col + W + tbot[k] : col + ttop[k];
                }
            }
        }
    }
}

static void cpu_maxpool2_forward(KernelCtx *ctx, float *Y, int *argmax, const float *X, int N,
                                 int H, int W) {
    if (N <= 0 || H < 2 || W < 2) return;
    RowJob j = {.o0 = Y, .i0 = X, .idx = argmax, .a = H, .b = W};
    par_run((size_t)N, par_rows((size_t)H * W), maxpool2_forward_range, &j);
}

static void maxpool2_backward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    size_t plane = (size_t)j->a * j->b, out = (size_t)(j->a / 2) * (j->b / 2);
    for (size_t p = lo; p < hi; p++) {
        float *dx = j->o0 + p * plane;
        const float *dy = j->i0 + p * out;
        const int *am = j->idx + p * out;
        memset(dx, 0, plane * sizeof *dx);
        if (j->i1) { /* and the ReLU's mask, as relu_backward applies it (no branch) */
            const float *x = j->i1 + p * plane;
            for (size_t i = 0; i < out; i++) {
                uint32_t d;
                memcpy(&d, dy + i, sizeof d);
                d &= -(uint32_t)(x[am[i]] > 0.0f);
                memcpy(dx + am[i], &d, sizeof d);
            }
        } else {
            for (size_t i = 0; i < out; i++) dx[am[i]] = dy[i];
        }
    }
}

static void cpu_maxpool2_backward(KernelCtx *ctx, float *dX, const float *dY, const int *argmax,
                                  const float *relu_x, int N, int H, int W) {
    if (N <= 0 || H <= 0 || W <= 0) return;
    RowJob j = {.o0 = dX, .i0 = dY, .i1 = relu_x, .idx = argmax, .a = H, .b = W};
    par_run((size_t)N, par_rows((size_t)H * W), maxpool2_backward_range, &j);
}

/* Positions in [lo, hi). (a = T, b = C, c = V) */
static void embedding_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    int C = j->b;
    for (size_t i = lo; i < hi; i++) {
        int tok = j->idx[i];
        float *o = j->o0 + i * C;
        const float *pe = j->i1 + (i % j->a) * C;
        if (tok < 0 || tok >= j->c) {
            for (int c = 0; c < C; c++) o[c] = NAN;
            continue;
        }
        const float *te = j->i0 + (size_t)tok * C;
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
}

static void cpu_embedding_forward(KernelCtx *ctx, float *out, const int *tokens, const float *wte,
                                  const float *wpe, int B, int T, int C, int V) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    RowJob j = {.o0 = out, .i0 = wte, .i1 = wpe, .idx = tokens, .a = T, .b = C, .c = V};
    par_run((size_t)B * T, par_rows(C), embedding_forward_range, &j);
}

/* Columns in [lo, hi) of dwte, every position in order: the CUDA kernel's order too. (a = B*T,
 * b = C, c = V) */
static void embedding_dwte_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    for (int i = 0; i < j->a; i++) {
        int tok = j->idx[i];
        if (tok < 0 || tok >= j->c) continue;
        float *d = j->o0 + (size_t)tok * j->b;
        const float *g = j->i0 + (size_t)i * j->b;
        for (size_t c = lo; c < hi; c++) d[c] += g[c];
    }
}

/* Elements t*C + c in [lo, hi) of dwpe: the sum over b in order, in float, as on CUDA.
 * (a = B, b = T*C) */
static void embedding_dwpe_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    for (size_t e = lo; e < hi; e++) {
        float s = 0.0f;
        for (int b = 0; b < j->a; b++) s += j->i0[(size_t)b * j->b + e];
        j->o0[e] = s;
    }
}

static void cpu_embedding_backward(KernelCtx *ctx, float *dwte, float *dwpe, const float *dout,
                                   const int *tokens, int B, int T, int C, int V) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    RowJob jt = {.o0 = dwte, .i0 = dout, .idx = tokens, .a = B * T, .b = C, .c = V};
    par_run((size_t)C, par_rows((size_t)B * T), embedding_dwte_range, &jt);
    RowJob jp = {.o0 = dwpe, .i0 = dout, .a = B, .b = T * C};
    par_run((size_t)T * C, PAR_GRAIN / (size_t)B + 1, embedding_dwpe_range, &jp);
}

/* Rows in [lo, hi); mean and variance in double. (a = C) */
static void layernorm_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    int C = j->a;
    for (size_t r = lo; r < hi; r++) {
        const float *x = j->i0 + r * C;
        float *o = j->o0 + r * C;
        float m = (float)(sum_f(x, C) / C);
        double v = sqdev_f(x, m, C);
        float rs = (float)(1.0 / sqrt(v / C + (double)RS_LAYERNORM_EPS));
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * rs * j->i1[c] + j->i2[c];
        j->o1[r] = m;
        j->o2[r] = rs;
    }
}

static void cpu_layernorm_forward(KernelCtx *ctx, float *out, float *mean, float *rstd,
                                  const float *x, const float *gamma, const float *beta, int N,
                                  int C) {
    if (N <= 0 || C <= 0) return;
    RowJob j = {.o0 = out, .o1 = mean, .o2 = rstd, .i0 = x, .i1 = gamma, .i2 = beta, .a = C};
    par_run((size_t)N, par_rows(C), layernorm_forward_range, &j);
}

/* dx rows in [lo, hi): dx += rstd (g dout - mean(g dout) - xhat mean(g dout xhat)).
 * (i0 dout, i1 x, i2 gamma, i3 mean, i4 rstd, a = C) */
static void layernorm_dx_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    int C = j->a;
    for (size_t r = lo; r < hi; r++) {
        const float *dy = j->i0 + r * C, *x = j->i1 + r * C, *g = j->i2;
        float m = j->i3[r], rs = j->i4[r], *dx = j->o0 + r * C;
        double a[SUM_LANES] = {0}, b[SUM_LANES] = {0};
        int c = 0;
        for (; c + SUM_LANES <= C; c += SUM_LANES)
            for (int k = 0; k < SUM_LANES; k++) {
                float dn = g[c + k] * dy[c + k];
                a[k] += dn;
                b[k] += (double)dn * ((x[c + k] - m) * rs);
            }
        for (int k = 0; c < C; c++, k++) {
            float dn = g[c] * dy[c];
            a[k] += dn;
            b[k] += (double)dn * ((x[c] - m) * rs);
        }
        float ma = (float)(lanes_total(a) / C), mb = (float)(lanes_total(b) / C);
        for (c = 0; c < C; c++) dx[c] += rs * (g[c] * dy[c] - ma - (x[c] - m) * rs * mb);
    }
}

/* Columns blocked by LN_COLS (sums on the stack), each over every row in order, in double. */
#define LN_COLS 128
static void layernorm_dgamma_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    int C = j->a, N = j->b;
    for (size_t c0 = lo; c0 < hi; c0 += LN_COLS) {
        size_t c1 = c0 + LN_COLS < hi ? c0 + LN_COLS : hi;
        double sg[LN_COLS] = {0}, sb[LN_COLS] = {0};
        for (int r = 0; r < N; r++) {
            const float *dy = j->i0 + (size_t)r * C, *x = j->i1 + (size_t)r * C;
            float m = j->i3[r], rs = j->i4[r];
            for (size_t c = c0; c < c1; c++) {
                sg[c - c0] += (double)dy[c] * ((x[c] - m) * rs);
                sb[c - c0] += dy[c];
            }
        }
        for (size_t c = c0; c < c1; c++) {
            j->o1[c] = (float)sg[c - c0];
            j->o2[c] = (float)sb[c - c0];
        }
    }
}

static void cpu_layernorm_backward(KernelCtx *ctx, float *dx, float *dgamma, float *dbeta,
                                   const float *dout, const float *x, const float *gamma,
                                   const float *mean, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    RowJob j = {.o0 = dx, .o1 = dgamma, .o2 = dbeta, .i0 = dout, .i1 = x, .i2 = gamma,
                .i3 = mean, .i4 = rstd, .a = C, .b = N};
    par_run((size_t)N, par_rows(C), layernorm_dx_range, &j);
    par_run((size_t)C, par_rows(N), layernorm_dgamma_range, &j);
}

/* GELU as x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): the same as x/2 (1 + tanh u), with
 * one expf instead of a tanhf (several times slower in glibc). Large |u| saturates cleanly:
 * exp overflowing to inf gives -0, exp underflowing to 0 gives x. The CUDA kernel computes the
 * same expression. */
#define GELU_2K 1.5957691216057308f /* 2 sqrt(2/pi) */
#define GELU_C 0.044715f

/* Blocks of GELU_BLOCK elements: x is copied into a local block first, so that the loops see
 * outputs apart from their input (y or dydx may be x's memory; with them overlapping x, GCC's
 * aliasing check would take the scalar loop). */
#define GELU_BLOCK 256

static void gelu_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    float *y = j->o0, *dydx = j->o1;
    float x[GELU_BLOCK], z[GELU_BLOCK];
    for (size_t b = lo; b < hi; b += GELU_BLOCK) {
        size_t n = hi - b < GELU_BLOCK ? hi - b : GELU_BLOCK;
        memcpy(x, j->i0 + b, n * sizeof *x);
        for (size_t i = 0; i < n; i++) z[i] = 1.0f + ops_expf(-GELU_2K * (x[i] + GELU_C * x[i] * x[i] * x[i]));
        for (size_t i = 0; i < n; i++) y[b + i] = x[i] / z[i];
        if (!dydx) continue;
        for (size_t i = 0; i < n; i++) { /* d/dx x s(u) = s + x s (1 - s) du/dx, s = 1 / z */
            float v = x[i], s = 1.0f / z[i];
            dydx[b + i] = s + v * s * (1.0f - s) * GELU_2K * (1.0f + 3.0f * GELU_C * v * v);
        }
    }
}

static void cpu_gelu_forward(KernelCtx *ctx, float *y, float *dydx, const float *x, size_t n) {
    RowJob j = {.o0 = y, .o1 = dydx, .i0 = x};
    par_run(n, PAR_GRAIN, gelu_forward_range, &j);
}

/* Rows r = bh*T + i in [lo, hi): max and sum of exp (in double) over j <= i. (a = T, s = scale) */
static void softmax_causal_forward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    int T = j->a;
    const float scale = j->s; /* a local: p's stores cannot alias it */
    for (size_t r = lo; r < hi; r++) {
        int len = (int)(r % T) + 1;
        const float *s = j->i0 + r * T;
        float *p = j->o0 + r * T;
        float m = max_scaled(s, scale, len);
        for (int c = 0; c < len; c++) p[c] = ops_expf(scale * s[c] - m);
        float z = (float)sum_f(p, len);
        for (int c = 0; c < len; c++) p[c] /= z;
        for (int c = len; c < T; c++) p[c] = 0.0f;
    }
}

static void cpu_softmax_causal_forward(KernelCtx *ctx, float *P, const float *S, int BH, int T,
                                       float scale) {
    if (BH <= 0 || T <= 0) return;
    RowJob j = {.o0 = P, .i0 = S, .a = T, .s = scale};
    par_run((size_t)BH * T, par_rows(T), softmax_causal_forward_range, &j);
}

/* (i0 dP, i1 P, a = T, s = scale) */
static void softmax_causal_backward_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    int T = j->a;
    for (size_t r = lo; r < hi; r++) {
        int len = (int)(r % T) + 1;
        const float *dp = j->i0 + r * T, *p = j->i1 + r * T;
        float *ds = j->o0 + r * T;
        float d = (float)dot_f(p, dp, len);
        for (int c = 0; c < len; c++) ds[c] = j->s * p[c] * (dp[c] - d);
        for (int c = len; c < T; c++) ds[c] = 0.0f;
    }
}

static void cpu_softmax_causal_backward(KernelCtx *ctx, float *dS, const float *dP,
                                        const float *P, int BH, int T, float scale) {
    if (BH <= 0 || T <= 0) return;
    RowJob j = {.o0 = dS, .i0 = dP, .i1 = P, .a = T, .s = scale};
    par_run((size_t)BH * T, par_rows(T), softmax_causal_backward_range, &j);
}

/* Rows of D floats, r = ((b*T + t)*S + s)*H + h of the [B, T, S, H, D] side, in [lo, hi).
 * (a = B, b = T, c = S, d = H, e = D; f = 1 when merging) */
static void heads_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    size_t B = j->a, T = j->b, S = j->c, H = j->d, D = j->e;
    for (size_t r = lo; r < hi; r++) {
        size_t h = r % H, s = r / H % S, t = r / (H * S) % T, b = r / (H * S * T);
        size_t o = (((s * B + b) * H + h) * T + t) * D;
        if (j->f) memcpy(j->o0 + r * D, j->i0 + o, D * sizeof(float));
        else memcpy(j->o0 + o, j->i0 + r * D, D * sizeof(float));
    }
}

static void cpu_heads_split(KernelCtx *ctx, float *out, const float *in, int B, int T, int S,
                            int H, int D) {
    if (B <= 0 || T <= 0 || S <= 0 || H <= 0 || D <= 0) return;
    RowJob j = {.o0 = out, .i0 = in, .a = B, .b = T, .c = S, .d = H, .e = D, .f = 0};
    par_run((size_t)B * T * S * H, par_rows(D), heads_range, &j);
}

static void cpu_heads_merge(KernelCtx *ctx, float *out, const float *in, int B, int T, int S,
                            int H, int D) {
    if (B <= 0 || T <= 0 || S <= 0 || H <= 0 || D <= 0) return;
    RowJob j = {.o0 = out, .i0 = in, .a = B, .b = T, .c = S, .d = H, .e = D, .f = 1};
    par_run((size_t)B * T * S * H, par_rows(D), heads_range, &j);
}

static void add_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    for (size_t i = lo; i < hi; i++) j->o0[i] = j->i0[i] + j->i1[i];
}

static void cpu_add(KernelCtx *ctx, float *out, const float *a, const float *b, size_t n) {
    RowJob j = {.o0 = out, .i0 = a, .i1 = b};
    par_run(n, PAR_GRAIN, add_range, &j);
}

static void mul_range(void *arg, size_t lo, size_t hi) {
    const RowJob *j = arg;
    for (size_t i = lo; i < hi; i++) j->o0[i] = j->i0[i] * j->i1[i];
}

static void cpu_mul(KernelCtx *ctx, float *out, const float *a, const float *b, size_t n) {
    RowJob j = {.o0 = out, .i0 = a, .i1 = b};
    par_run(n, PAR_GRAIN, mul_range, &j);
}

/* AdamW's per-step constants, computed once on the host (the CUDA launcher uses the same). */
typedef struct {
    float *p, *m, *v;
    const float *g;
    float beta1, beta2, eps, decay, grad_scale, step_size, bc2_sqrt;
} AdamJob;

/* The job's pointers and constants in locals: the stores through p, m and v cannot then change
 * them, and the loop vectorizes (sqrtf inline: this file is built with -fno-math-errno; v >= 0). */
static void adamw_range(void *arg, size_t lo, size_t hi) {
    const AdamJob *j = arg;
    float *p = j->p, *mo = j->m, *vo = j->v;
    const float *gr = j->g;
    const float beta1 = j->beta1, beta2 = j->beta2, gs = j->grad_scale, decay = j->decay;
    const float step = j->step_size, bc2 = j->bc2_sqrt, eps = j->eps;
    for (size_t i = lo; i < hi; i++) {
        float g = gr[i] * gs;
        float m = beta1 * mo[i] + (1.0f - beta1) * g;
        float v = beta2 * vo[i] + (1.0f - beta2) * g * g;
        mo[i] = m;
        vo[i] = v;
        p[i] = p[i] * decay - step * m / (sqrtf(v) / bc2 + eps);
    }
}

static void cpu_adamw_step(KernelCtx *ctx, float *param, const float *grad, float *m, float *v,
                           size_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, float grad_scale, int t) {
    AdamJob j = {param, m, v, grad, beta1, beta2, eps, 1.0f - lr * weight_decay, grad_scale,
                 (float)(lr / (1.0 - pow(beta1, t))), (float)sqrt(1.0 - pow(beta2, t))};
    par_run(n, PAR_GRAIN, adamw_range, &j);
}

/* The wire's formats: base/codec.c's loops (the CUDA kernels' twins). */
static void cpu_pack(KernelCtx *ctx, void *dst, const float *src, size_t n, int type, float scale,
                     const float *scale_at) {
    Codec c = codec_make((CodecType)type, scale_at ? *scale_at : scale);
    codec_encode_elems(&c, src, dst, n);
}

static void cpu_unpack(KernelCtx *ctx, float *dst, const void *src, size_t n, int type, float scale,
                       const float *scale_at) {
    Codec c = codec_make((CodecType)type, scale_at ? *scale_at : scale);
    codec_decode_elems(&c, src, dst, n, 0);
}

/* The largest finite magnitude (twin of amax_kernel; codec_fit's loop). */
static void cpu_amax(KernelCtx *ctx, float *out, const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        m = a <= FLT_MAX && a > m ? a : m;
    }
    *out = m;
}

/* Twin of fp8_scale_kernel: codec_fit_scale, then the headroom for the contributions. */
static void cpu_fp8_scale(KernelCtx *ctx, float *scale, const float *amax, int type, int contributions) {
    float s = codec_fit_scale((CodecType)type, *amax), room = 1;
    while (room < (float)contributions) room *= 2;
    *scale = s / room;
}

/* Nothing is launched on the CPU: nothing can have failed unseen. */
static int cpu_check(KernelCtx *ctx) { return 0; }

static const KernelOps cpu_ops = {
    .name = "cpu",
    .ctx_create = cpu_ctx_create,
    .ctx_destroy = cpu_ctx_destroy,
    .gemm = cpu_gemm,
    .bias_forward = cpu_bias_forward,
    .bias_backward = cpu_bias_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_step = cpu_sgd_step,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .fill = cpu_fill,
    .sync = cpu_sync,
    .gemm_strided_batched = cpu_gemm_strided_batched,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .channel_bias_forward = cpu_channel_bias_forward,
    .channel_bias_backward = cpu_channel_bias_backward,
    .maxpool2_forward = cpu_maxpool2_forward,
    .maxpool2_backward = cpu_maxpool2_backward,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .gelu_forward = cpu_gelu_forward,
    .softmax_causal_forward = cpu_softmax_causal_forward,
    .softmax_causal_backward = cpu_softmax_causal_backward,
    .heads_split = cpu_heads_split,
    .heads_merge = cpu_heads_merge,
    .add = cpu_add,
    .mul = cpu_mul,
    .adamw_step = cpu_adamw_step,
    .bias_relu_forward = cpu_bias_relu_forward,
    .pack = cpu_pack,
    .unpack = cpu_unpack,
    .amax = cpu_amax,
    .fp8_scale = cpu_fp8_scale,
    .check = cpu_check,
};

/* The plain-C table. Never NULL. */
const KernelOps *kernels_cpu(void) { return &cpu_ops; }

/* Sets the pool's thread count, for GEMM and the elementwise ops, when n > 0 (starting its
 * workers, which then sleep until a region needs them; BLAS itself stays single-threaded);
 * n <= 0 leaves it. */
void kernels_cpu_set_threads(int n) {
    if (n <= 0) return;
    pthread_once(&blas_once, blas_single);
    if (n > PAR_MAX_THREADS) n = PAR_MAX_THREADS;
    pthread_mutex_lock(&pool.use); /* the workers start now, not inside the first step */
    par_grow(n - 1);
    pthread_mutex_unlock(&pool.use);
    atomic_store(&par_threads, n);
}

/* Seconds the calling thread has spent in GEMM since it started. */
double kernels_cpu_gemm_seconds(void) { return cpu_gemm_seconds; }
