/* ops_cuda.cu - the model's math on the GPU: CUDA kernels, then their launchers, and cuBLAS for GEMM */
#include <climits>
#include <cmath>
#include <cstdlib>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "ops.h"
}
#include "../common/cuda_check.h"

/* A context: the stream every op is ordered on, a cuBLAS handle bound to it, and whether a
 * launch has failed (ops other than gemm return nothing, so sync reports it). */
struct KernelCtx {
    cudaStream_t stream;
    cublasHandle_t blas;
    int failed;
};

/* ---- Kernels ---- */

/* Threads per block of the elementwise kernels, and the cap on their grid (they stride). */
#define OPS_THREADS 256
#define OPS_MAX_BLOCKS 65536

__global__ void bias_forward_kernel(float *Y, const float *b, size_t n, int cols) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        Y[i] += b[i % cols];
}

/* One thread per column summing down the rows in order: deterministic, and the CPU's order. */
__global__ void bias_backward_kernel(float *db, const float *dY, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int r = 0; r < rows; r++) s += dY[(size_t)r * cols + c];
    db[c] = s;
}

__global__ void relu_forward_kernel(float *Y, const float *X, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
}

__global__ void relu_backward_kernel(float *dX, const float *dY, const float *Y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dX[i] = Y[i] > 0.0f ? dY[i] : 0.0f;
}

__device__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Max with its index; ties go to the lower index, as in the CPU's first-argmax scan. */
__device__ void warp_argmax(float *v, int *idx) {
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *v, off);
        int oi = __shfl_xor_sync(0xffffffffu, *idx, off);
        if (ov > *v || (ov == *v && oi < *idx)) {
            *v = ov;
            *idx = oi;
        }
    }
}

/* Block-wide reductions (blockDim.x a multiple of 32, at most 1024): every thread gets the
 * result, since every warp reduces the per-warp partials itself. */
__device__ float block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* sh may still be read from a previous reduction */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    return warp_sum(lane < nwarps ? sh[lane] : 0.0f);
}

__device__ void block_argmax(float *v, int *idx, float *sh_v, int *sh_i) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    warp_argmax(v, idx);
    __syncthreads();
    if (lane == 0) {
        sh_v[warp] = *v;
        sh_i[warp] = *idx;
    }
    __syncthreads();
    *v = lane < nwarps ? sh_v[lane] : -INFINITY;
    *idx = lane < nwarps ? sh_i[lane] : INT_MAX;
    warp_argmax(v, idx);
}

/* One block per row: max and argmax, sum of exp(x - max), then thread 0 adds the row's loss
 * and hit to stats, then every thread writes its columns of dlogits (which may alias logits,
 * hence the barrier between the last read of x[label] and the first write). */
__global__ void softmax_xent_kernel(const float *logits, const int *labels, int cols,
                                    float *dlogits, float *stats) {
    __shared__ float sh_v[32];
    __shared__ int sh_i[32];
    const float *x = logits + (size_t)blockIdx.x * cols;
    float *dx = dlogits + (size_t)blockIdx.x * cols;
    int label = labels[blockIdx.x];

    float m = -INFINITY;
    int arg = INT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        if (x[c] > m || arg == INT_MAX) {
            m = x[c];
            arg = c;
        }
    block_argmax(&m, &arg, sh_v, sh_i);

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(x[c] - m);
    s = block_sum(s, sh_v);

    if (threadIdx.x == 0) {
        int valid = label >= 0 && label < cols;
        atomicAdd(&stats[0], valid ? logf(s) - (x[label] - m) : NAN);
        if (valid && arg == label) atomicAdd(&stats[1], 1.0f);
    }
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        dx[c] = expf(x[c] - m) / s - (c == label ? 1.0f : 0.0f);
}

__global__ void sgd_step_kernel(float *param, const float *grad, float *mom, size_t n, float lr,
                                float momentum, float weight_decay, float grad_scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i] * grad_scale + weight_decay * param[i];
        float m = momentum * mom[i] + g;
        mom[i] = m;
        param[i] -= lr * m;
    }
}

__global__ void scale_kernel(float *x, float a, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= a;
}

__global__ void axpy_kernel(float *y, float a, const float *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += a * x[i];
}

__global__ void fill_kernel(float *x, float v, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = v;
}

/* ---- Launchers ---- */

/* Blocks for n elements at OPS_THREADS each, capped (the kernels stride over the rest). */
static unsigned ops_blocks(size_t n) {
    size_t b = (n + OPS_THREADS - 1) / OPS_THREADS;
    return (unsigned)(b < OPS_MAX_BLOCKS ? b : OPS_MAX_BLOCKS);
}

/* Checks the launch just issued; a failure is logged and remembered for sync. A NotReady left
 * by an event poll is not a failure (cuda_launch_error). */
#define OPS_LAUNCH_CHECK(ctx)                                   \
    do {                                                        \
        if (cudaCheck(cuda_launch_error())) (ctx)->failed = 1;  \
    } while (0)

static KernelCtx *cuda_ctx_create(void *stream) {
    KernelCtx *ctx = (KernelCtx *)calloc(1, sizeof *ctx);
    if (!ctx) {
        rs_error(RS_ERR_RUNTIME, "kernels cuda: out of host memory for a context");
        return NULL;
    }
    ctx->stream = (cudaStream_t)stream;
    if (cublasCheck(cublasCreate(&ctx->blas))) {
        free(ctx);
        return NULL;
    }
    /* Plain fp32 GEMM (no TF32), so that results stay within fp32 rounding of the CPU's. */
    if (cublasCheck(cublasSetStream(ctx->blas, ctx->stream)) ||
        cublasCheck(cublasSetMathMode(ctx->blas, CUBLAS_DEFAULT_MATH))) {
        cublasDestroy(ctx->blas);
        free(ctx);
        return NULL;
    }
    return ctx;
}

static void cuda_ctx_destroy(KernelCtx *ctx) {
    if (!ctx) return;
    cublasCheck(cublasDestroy(ctx->blas));
    free(ctx);
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same memory read as
 * column-major, so cuBLAS gets the operands swapped and M, N exchanged. */
static int cuda_gemm(KernelCtx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc) {
    int a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
    if (M < 0 || N < 0 || K < 0 || lda < (a_cols > 1 ? a_cols : 1) ||
        ldb < (b_cols > 1 ? b_cols : 1) || ldc < (N > 1 ? N : 1))
        return rs_error(RS_ERR_RUNTIME,
                        "gemm: bad shape M=%d N=%d K=%d (trans %d,%d) with lda=%d ldb=%d ldc=%d",
                        M, N, K, trans_a, trans_b, lda, ldb, ldc);
    if (M == 0 || N == 0) return 0;
    return cublasCheck(cublasSgemm(ctx->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb,
                                   A, lda, &beta, C, ldc));
}

static void cuda_bias_forward(KernelCtx *ctx, float *Y, const float *b, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    size_t n = (size_t)rows * cols;
    bias_forward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(Y, b, n, cols);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_bias_backward(KernelCtx *ctx, float *db, const float *dY, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    unsigned blocks = (unsigned)((cols + OPS_THREADS - 1) / OPS_THREADS);
    bias_backward_kernel<<<blocks, OPS_THREADS, 0, ctx->stream>>>(db, dY, rows, cols);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_relu_forward(KernelCtx *ctx, float *Y, const float *X, size_t n) {
    if (n == 0) return;
    relu_forward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(Y, X, n);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_relu_backward(KernelCtx *ctx, float *dX, const float *dY, const float *Y,
                               size_t n) {
    if (n == 0) return;
    relu_backward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dX, dY, Y, n);
    OPS_LAUNCH_CHECK(ctx);
}

/* One block per row, as many threads as cover the row in whole warps, 32 to 256. */
static void cuda_softmax_xent(KernelCtx *ctx, const float *logits, const int *labels, int rows,
                              int cols, float *dlogits, float *stats) {
    if (rows <= 0 || cols <= 0) return;
    int threads = (cols + 31) / 32 * 32;
    if (threads > 256) threads = 256;
    softmax_xent_kernel<<<rows, threads, 0, ctx->stream>>>(logits, labels, cols, dlogits, stats);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_sgd_step(KernelCtx *ctx, float *param, const float *grad, float *mom, size_t n,
                          float lr, float momentum, float weight_decay, float grad_scale) {
    if (n == 0) return;
    sgd_step_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(
        param, grad, mom, n, lr, momentum, weight_decay, grad_scale);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_scale(KernelCtx *ctx, float *x, float a, size_t n) {
    if (n == 0) return;
    scale_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(x, a, n);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_axpy(KernelCtx *ctx, float *y, float a, const float *x, size_t n) {
    if (n == 0) return;
    axpy_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(y, a, x, n);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_fill(KernelCtx *ctx, float *x, float v, size_t n) {
    if (n == 0) return;
    fill_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(x, v, n);
    OPS_LAUNCH_CHECK(ctx);
}

/* Waits for the stream; a launch that failed earlier on this context (sticky) is an error too. */
static int cuda_sync(KernelCtx *ctx) {
    RS_TRY(cudaCheck(cudaStreamSynchronize(ctx->stream)));
    if (ctx->failed)
        return rs_error(RS_ERR_RUNTIME, "kernels cuda: a kernel launch failed on this stream "
                                        "(its error is logged above)");
    return 0;
}

/* In the order of KernelOps' fields. */
static const KernelOps cuda_ops = {
    "cuda",
    cuda_ctx_create,
    cuda_ctx_destroy,
    cuda_gemm,
    cuda_bias_forward,
    cuda_bias_backward,
    cuda_relu_forward,
    cuda_relu_backward,
    cuda_softmax_xent,
    cuda_sgd_step,
    cuda_scale,
    cuda_axpy,
    cuda_fill,
    cuda_sync,
};

/* The CUDA table. Never NULL in a CUDA build (whether a GPU exists is the device layer's
 * question: device_cuda_ops()->count()). */
extern "C" const KernelOps *kernels_cuda(void) { return &cuda_ops; }
