/* ops_cuda.cu - the model's math on the GPU: CUDA kernels, then their launchers, and cuBLAS (loaded at the first context) for GEMM */
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>

extern "C" {
#include "ops.h"
#include "../base/codec.h"
#include "../base/err.h"
}

/* ---- cuBLAS, loaded when the first context is made ----
 * The program does not link cuBLAS: loading it (its Lt library's pages and .bss) costs a CUDA
 * build 138 MiB even where no GPU is ever used. These names stand for the calls of the library
 * opened by lazy_cublas_load; nothing below calls cuBLAS before it has succeeded. */
#define RS_CUBLAS_STR2(x) #x
#define RS_CUBLAS_STR(x) RS_CUBLAS_STR2(x)
#define RS_CUBLAS_FNS(X)                                                                          \
    X(cublasStatus_t, cublasCreate, (cublasHandle_t *))                                           \
    X(cublasStatus_t, cublasDestroy, (cublasHandle_t))                                            \
    X(cublasStatus_t, cublasSetStream, (cublasHandle_t, cudaStream_t))                            \
    X(cublasStatus_t, cublasSetMathMode, (cublasHandle_t, cublasMath_t))                          \
    X(const char *, cublasGetStatusString, (cublasStatus_t))                                      \
    X(cublasStatus_t, cublasSgemm,                                                                \
      (cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,        \
       const float *, int, const float *, int, const float *, float *, int))                      \
    X(cublasStatus_t, cublasSgemmStridedBatched,                                                  \
      (cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,        \
       const float *, int, long long, const float *, int, long long, const float *, float *, int, \
       long long, int))

static struct {
#define RS_CUBLAS_FIELD(ret, name, params) ret(*name) params;
    RS_CUBLAS_FNS(RS_CUBLAS_FIELD)
} lazy_cublas;
static pthread_once_t lazy_cublas_once = PTHREAD_ONCE_INIT;
static char lazy_cublas_err[512];

/* Opens libcublas (the major version the build saw, else any) and resolves every call (the
 * headers' names: cublasSgemm is cublasSgemm_v2). On failure lazy_cublas_err says why. */
static void lazy_cublas_open(void) {
    void *h = dlopen("libcublas.so." RS_CUBLAS_STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lazy_cublas_err, sizeof lazy_cublas_err, "cannot load cuBLAS: %s", dlerror());
        return;
    }
#define RS_CUBLAS_SYM(ret, name, params)                                                          \
    if (!(*(void **)&lazy_cublas.name = dlsym(h, RS_CUBLAS_STR(name)))) {                          \
        snprintf(lazy_cublas_err, sizeof lazy_cublas_err, "cuBLAS has no %s", RS_CUBLAS_STR(name)); \
        return;                                                                                   \
    }
    RS_CUBLAS_FNS(RS_CUBLAS_SYM)
}

/* 0 once cuBLAS is loaded, else RS_ERR_RUNTIME saying why. */
static int lazy_cublas_load(void) {
    pthread_once(&lazy_cublas_once, lazy_cublas_open);
    if (lazy_cublas_err[0]) return rs_error(RS_ERR_RUNTIME, "kernels cuda: %s", lazy_cublas_err);
    return 0;
}

#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasSgemm
#define cublasCreate lazy_cublas.cublasCreate_v2 /* the fields have the symbols' names */
#define cublasDestroy lazy_cublas.cublasDestroy_v2
#define cublasSetStream lazy_cublas.cublasSetStream_v2
#define cublasSetMathMode lazy_cublas.cublasSetMathMode
#define cublasGetStatusString lazy_cublas.cublasGetStatusString
#define cublasSgemm lazy_cublas.cublasSgemm_v2
#define cublasSgemmStridedBatched lazy_cublas.cublasSgemmStridedBatched

#include "cuda_check.h"

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

__global__ void bias_relu_forward_kernel(float *Y, const float *b, size_t n, int cols) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = Y[i] + b[i % cols];
        Y[i] = v > 0.0f ? v : 0.0f;
    }
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

/* The order of (value, column) candidates that the C twin's in-order scan (m = x[0], then
 * x[c] > m) defines: a NaN in column 0 beats everything (it stays), any other NaN loses to
 * everything (it is passed over), otherwise the greater value wins and ties go to the lower
 * column. It is a strict total order on distinct columns, so any reduction tree (a thread's
 * strided scan, the warp's butterfly, the block's) ends on the same candidate in every lane.
 * 1 when (v, i) beats (w, j). */
__device__ __forceinline__ bool argmax_beats(float v, int i, float w, int j) {
    bool v0 = isnan(v) && i == 0, w0 = isnan(w) && j == 0;
    if (v0 || w0) return v0 && !w0;
    if (isnan(v)) return false;
    if (isnan(w)) return true;
    return v > w || (v == w && i < j);
}

/* Max with its index over the warp, by argmax_beats: every lane ends with the same pair. */
__device__ void warp_argmax(float *v, int *idx) {
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *v, off);
        int oi = __shfl_xor_sync(0xffffffffu, *idx, off);
        if (argmax_beats(ov, oi, *v, *idx)) {
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

    float m = -INFINITY; /* (-inf, INT_MAX) loses to every column but a later NaN, which column 0 beats */
    int arg = INT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        if (argmax_beats(x[c], c, m, arg)) {
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

/* ---- Neural-network kernels (each one's plain-C twin is in ops_cpu.c) ---- */

/* A grid-stride loop over [0, n). */
#define OPS_FOR(i, n)                                                                    \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);              \
         i += (size_t)gridDim.x * blockDim.x)

/* The kernels that give one warp to each row: rows per block of OPS_THREADS. */
#define ROWS_PER_BLOCK (OPS_THREADS / 32)

__device__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* One thread per col element; col's layout [plane][i][j][oh][ow] is the thread's index. */
__global__ void im2col_kernel(float *col, const float *x, size_t n, int H, int W, int k,
                              int stride, int pad, int OH, int OW) {
    OPS_FOR(e, n) {
        int ow = (int)(e % OW), oh = (int)(e / OW % OH), kj = (int)(e / ((size_t)OW * OH) % k);
        size_t t = e / ((size_t)OW * OH * k);
        int ki = (int)(t % k);
        size_t p = t / k;
        int ih = oh * stride - pad + ki, iw = ow * stride - pad + kj;
        col[e] = ih >= 0 && ih < H && iw >= 0 && iw < W ? x[(p * H + ih) * W + iw] : 0.0f;
    }
}

/* One thread per dx element, gathering its dcol entries in (i, j) order, as the C twin. */
__global__ void col2im_kernel(float *dx, const float *dcol, size_t n, int H, int W, int k,
                              int stride, int pad, int OH, int OW) {
    size_t ohw = (size_t)OH * OW, kk = (size_t)k * k;
    OPS_FOR(e, n) {
        int w = (int)(e % W), h = (int)(e / W % H);
        const float *cp = dcol + e / ((size_t)W * H) * kk * ohw;
        float s = 0.0f;
        for (int ki = 0; ki < k; ki++) {
            int oh = h + pad - ki;
            if (oh < 0 || oh % stride || (oh /= stride) >= OH) continue;
            for (int kj = 0; kj < k; kj++) {
                int ow = w + pad - kj;
                if (ow < 0 || ow % stride || (ow /= stride) >= OW) continue;
                s += cp[((size_t)ki * k + kj) * ohw + (size_t)oh * OW + ow];
            }
        }
        dx[e] = s;
    }
}

__global__ void channel_bias_forward_kernel(float *Y, const float *bias, size_t n, int C,
                                            int HW) {
    OPS_FOR(e, n) Y[e] += bias[e / HW % C];
}

/* One block per channel: a fixed share of the B*HW elements per thread, then block_sum's fixed
 * tree. Deterministic. */
__global__ void channel_bias_backward_kernel(float *dbias, const float *dY, int B, int C, int HW) {
    __shared__ float sh[32];
    int c = blockIdx.x;
    float s = 0.0f;
    for (size_t e = threadIdx.x; e < (size_t)B * HW; e += blockDim.x)
        s += dY[(e / HW * C + c) * HW + e % HW];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) dbias[c] = s;
}

/* One thread per output; the scan order and the NaN rule of the C twin. */
__global__ void maxpool2_forward_kernel(float *Y, int *argmax, const float *X, size_t n, int H,
                                        int W) {
    int OH = H / 2, OW = W / 2;
    OPS_FOR(e, n) {
        int ow = (int)(e % OW), oh = (int)(e / OW % OH);
        const float *x = X + e / ((size_t)OW * OH) * H * W;
        int best = 2 * oh * W + 2 * ow;
        for (int q = 1; q < 4; q++) {
            int at = (2 * oh + (q >> 1)) * W + 2 * ow + (q & 1);
            if (x[at] > x[best] || (x[at] != x[at] && x[best] == x[best])) best = at;
        }
        Y[e] = x[best];
        argmax[e] = best;
    }
}

/* One thread per input element: its window's gradient if it was the window's argmax, else 0. */
__global__ void maxpool2_backward_kernel(float *dX, const float *dY, const int *argmax,
                                         const float *relu_x, size_t n, int H, int W) {
    int OH = H / 2, OW = W / 2;
    OPS_FOR(e, n) {
        int w = (int)(e % W), h = (int)(e / W % H);
        size_t p = e / ((size_t)W * H);
        float v = 0.0f;
        if (h / 2 < OH && w / 2 < OW) {
            size_t o = (p * OH + h / 2) * OW + w / 2;
            if (argmax[o] == h * W + w && (!relu_x || relu_x[e] > 0.0f)) v = dY[o];
        }
        dX[e] = v;
    }
}

__global__ void embedding_forward_kernel(float *out, const int *tokens, const float *wte,
                                         const float *wpe, size_t n, int T, int C, int V) {
    OPS_FOR(e, n) {
        size_t pos = e / C;
        int c = (int)(e % C), tok = tokens[pos];
        out[e] = tok >= 0 && tok < V ? wte[(size_t)tok * C + c] + wpe[(pos % T) * C + c]
                                     : __int_as_float(0x7fc00000); /* the C twin's NAN */
    }
}

/* dwpe[t][c]: one thread per element summing over b in order, in float: the C twin's bits. */
__global__ void embedding_dwpe_kernel(float *dwpe, const float *dout, int B, size_t tc) {
    OPS_FOR(e, tc) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += dout[(size_t)b * tc + e];
        dwpe[e] = s;
    }
}

/* dwte without atomics: thread (c, chunk) owns column c of every token t with t % chunks ==
 * chunk, and adds its positions' gradients in position order (the C twin's order, so the same
 * bits). The block's warps are chunks, its lanes 32 columns; tokens pass through shared memory. */
#define EMB_TILE 1024
#define EMB_CHUNK_BLOCKS 4
__global__ void embedding_dwte_kernel(float *dwte, const float *dout, const int *tokens,
                                      int npos, int C, int V) {
    __shared__ int sh[EMB_TILE];
    int c = blockIdx.x * 32 + threadIdx.x;
    int chunk = blockIdx.y * blockDim.y + threadIdx.y, chunks = gridDim.y * blockDim.y;
    int tid = threadIdx.y * 32 + threadIdx.x, nthreads = 32 * blockDim.y;
    for (int base = 0; base < npos; base += EMB_TILE) {
        int len = npos - base < EMB_TILE ? npos - base : EMB_TILE;
        __syncthreads(); /* the previous tile is no longer read */
        for (int i = tid; i < len; i += nthreads) sh[i] = tokens[base + i];
        __syncthreads();
        if (c >= C) continue;
        for (int i = 0; i < len; i++) {
            int tok = sh[i];
            if (tok >= 0 && tok < V && tok % chunks == chunk)
                dwte[(size_t)tok * C + c] += dout[(size_t)(base + i) * C + c];
        }
    }
}

/* One warp per row: mean, then the variance about it, then the output. */
__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *x,
                                         const float *gamma, const float *beta, int N, int C) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return; /* the whole warp together */
    const float *xr = x + (size_t)row * C;
    float *o = out + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += xr[c];
    float m = warp_sum(s) / C, v = 0.0f;
    for (int c = lane; c < C; c += 32) v += (xr[c] - m) * (xr[c] - m);
    float rs = 1.0f / sqrtf(warp_sum(v) / C + RS_LAYERNORM_EPS);
    for (int c = lane; c < C; c += 32) o[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

/* One warp per row: dx += rstd (g dout - mean(g dout) - xhat mean(g dout xhat)). */
__global__ void layernorm_backward_dx_kernel(float *dx, const float *dout, const float *x,
                                             const float *gamma, const float *mean,
                                             const float *rstd, int N, int C) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *dy = dout + (size_t)row * C, *xr = x + (size_t)row * C;
    float *d = dx + (size_t)row * C, m = mean[row], rs = rstd[row], a = 0.0f, b = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float dn = gamma[c] * dy[c];
        a += dn;
        b += dn * ((xr[c] - m) * rs);
    }
    a = warp_sum(a) / C;
    b = warp_sum(b) / C;
    for (int c = lane; c < C; c += 32) d[c] += rs * (gamma[c] * dy[c] - a - (xr[c] - m) * rs * b);
}

/* dgamma, dbeta: a block of 32 columns x LN_GROUPS row groups (row r in group r % LN_GROUPS),
 * each thread summing its rows in order, then the groups added in order: deterministic. */
#define LN_GROUPS 32
__global__ void layernorm_backward_dgamma_kernel(float *dgamma, float *dbeta, const float *dout,
                                                 const float *x, const float *mean,
                                                 const float *rstd, int N, int C) {
    __shared__ float shg[LN_GROUPS][33], shb[LN_GROUPS][33];
    int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * 32 + tx;
    float sg = 0.0f, sb = 0.0f;
    if (c < C)
        for (int r = ty; r < N; r += LN_GROUPS) {
            size_t at = (size_t)r * C + c;
            sg += dout[at] * ((x[at] - mean[r]) * rstd[r]);
            sb += dout[at];
        }
    shg[ty][tx] = sg;
    shb[ty][tx] = sb;
    __syncthreads();
    if (ty == 0 && c < C) {
        float g = 0.0f, b = 0.0f;
        for (int k = 0; k < LN_GROUPS; k++) {
            g += shg[k][tx];
            b += shb[k][tx];
        }
        dgamma[c] = g;
        dbeta[c] = b;
    }
}

/* GELU as x sigmoid(2u), the C twin's expression (see ops_cpu.c). */
#define GELU_2K 1.5957691216057308f /* 2 sqrt(2/pi) */
#define GELU_C 0.044715f

/* y and dydx (unless NULL) from x; each thread reads its x before it writes, so either may alias x. */
__global__ void gelu_forward_kernel(float *y, float *dydx, const float *x, size_t n) {
    OPS_FOR(i, n) {
        float v = x[i], z = 1.0f + expf(-GELU_2K * (v + GELU_C * v * v * v));
        y[i] = v / z;
        if (dydx) {
            float s = 1.0f / z;
            dydx[i] = s + v * s * (1.0f - s) * GELU_2K * (1.0f + 3.0f * GELU_C * v * v);
        }
    }
}

/* One warp per row r = bh*T + i, over its i + 1 unmasked scores. Each lane reads and writes
 * only its own columns, so P may alias S. */
__global__ void softmax_causal_forward_kernel(float *P, const float *S, int rows, int T,
                                              float scale) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    int len = row % T + 1;
    const float *s = S + (size_t)row * T;
    float *p = P + (size_t)row * T, m = -INFINITY, z = 0.0f;
    for (int j = lane; j < len; j += 32) m = fmaxf(m, scale * s[j]);
    m = warp_max(m);
    for (int j = lane; j < len; j += 32) z += expf(scale * s[j] - m);
    z = warp_sum(z);
    for (int j = lane; j < T; j += 32) p[j] = j < len ? expf(scale * s[j] - m) / z : 0.0f;
}

__global__ void softmax_causal_backward_kernel(float *dS, const float *dP, const float *P,
                                               int rows, int T, float scale) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    int len = row % T + 1;
    const float *dp = dP + (size_t)row * T, *p = P + (size_t)row * T;
    float *ds = dS + (size_t)row * T, d = 0.0f;
    for (int j = lane; j < len; j += 32) d += p[j] * dp[j];
    d = warp_sum(d);
    for (int j = lane; j < T; j += 32) ds[j] = j < len ? scale * p[j] * (dp[j] - d) : 0.0f;
}

/* Element e of the [B, T, S, H, D] side and its place in [S, B, H, T, D]; merge copies back. */
__global__ void heads_kernel(float *out, const float *in, size_t n, int B, int T, int S, int H,
                             int D, int merge) {
    OPS_FOR(e, n) {
        size_t r = e / D, h = r % H, s = r / H % S, t = r / ((size_t)H * S) % T;
        size_t b = r / ((size_t)H * S * T);
        size_t o = (((s * B + b) * H + h) * T + t) * D + e % D;
        if (merge) out[e] = in[o];
        else out[o] = in[e];
    }
}

__global__ void add_kernel(float *out, const float *a, const float *b, size_t n) {
    OPS_FOR(i, n) out[i] = a[i] + b[i];
}

__global__ void mul_kernel(float *out, const float *a, const float *b, size_t n) {
    OPS_FOR(i, n) out[i] = a[i] * b[i];
}

/* AdamW with the step's constants from the host (the C twin's). */
__global__ void adamw_kernel(float *p, const float *grad, float *m, float *v, size_t n,
                             float beta1, float beta2, float eps, float decay, float grad_scale,
                             float step_size, float bc2_sqrt) {
    OPS_FOR(i, n) {
        float g = grad[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

/* The wire's formats (twins: codec_encode / codec_decode, base/codec.c): round to nearest even.
 * Each takes its scale by value, or from device memory where scale_at is not NULL (fp8_scale's
 * result, read as the kernel runs). */
__device__ __forceinline__ float wire_scale(float scale, const float *scale_at) { return scale_at ? *scale_at : scale; }

__global__ void pack_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n, float scale, const float *scale_at) {
    float s = wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = __float2bfloat16_rn(src[i] * s);
}

__global__ void pack_f16_kernel(__half *dst, const float *src, size_t n, float scale, const float *scale_at) {
    float s = wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = __float2half_rn(src[i] * s);
}

__global__ void pack_f32_kernel(float *dst, const float *src, size_t n, float scale, const float *scale_at) {
    float s = wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = src[i] * s;
}

__global__ void unpack_bf16_kernel(float *dst, const __nv_bfloat16 *src, size_t n, float scale, const float *scale_at) {
    float inv = 1.0f / wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = __bfloat162float(src[i]) * inv;
}

__global__ void unpack_f16_kernel(float *dst, const __half *src, size_t n, float scale, const float *scale_at) {
    float inv = 1.0f / wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = __half2float(src[i]) * inv;
}

__global__ void unpack_f32_kernel(float *dst, const float *src, size_t n, float scale, const float *scale_at) {
    float inv = 1.0f / wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = src[i] * inv;
}

/* OCP FP8 (twins: codec_f32_to_e4m3 / _e5m2 and back): round to nearest even, saturating to the
 * largest finite value (+-Inf too), NaN to NaN; decoding through binary16 is exact. */
__global__ void pack_fp8_kernel(unsigned char *dst, const float *src, size_t n, float scale, const float *scale_at,
                                __nv_fp8_interpretation_t f) {
    float s = wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = (unsigned char)__nv_cvt_float_to_fp8(src[i] * s, __NV_SATFINITE, f);
}

__global__ void unpack_fp8_kernel(float *dst, const unsigned char *src, size_t n, float scale, const float *scale_at,
                                  __nv_fp8_interpretation_t f) {
    float inv = 1.0f / wire_scale(scale, scale_at);
    OPS_FOR(i, n) dst[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)src[i], f))) * inv;
}

/* One thread (twin: cpu_fp8_scale, i.e. codec_fit_scale then the headroom): *scale = 2^k with
 * k = E - e - (f > 0.875) for *amax = f 2^e (E 9 for e4m3, 16 for e5m2), k within [E - 128, 120]
 * (k = 0 for an amax of 0 or not finite), divided by the smallest power of two >= contributions. */
__global__ void fp8_scale_kernel(float *scale, const float *amax, int e4m3, int contributions) {
    float a = *amax, room = 1.0f;
    int e = 0, k = 0;
    if (a > 0.0f && a <= 3.402823466e38f) {
        float f = frexpf(a, &e);
        int E = e4m3 ? 9 : 16;
        k = E - e - (f > 0.875f);
        k = k < E - 128 ? E - 128 : k > 120 ? 120 : k; /* the top code decodes finite */
    }
    while (room < (float)contributions) room *= 2.0f;
    *scale = ldexpf(1.0f, k) / room;
}

/* *out (as the bits of a non-negative float, which order as unsigned ints) = max over n of the
 * finite |x[i]|: a warp's largest, then one atomicMax a warp. *out starts at 0 (the launcher). */
__global__ void amax_kernel(unsigned int *out, const float *x, size_t n) {
    float m = 0.0f;
    OPS_FOR(i, n) {
        float a = fabsf(x[i]);
        m = a <= 3.402823466e38f && a > m ? a : m;
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31u) == 0) atomicMax(out, __float_as_uint(m));
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
    if (lazy_cublas_load() || cublasCheck(cublasCreate(&ctx->blas))) {
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
    RS_TRY(kernels_gemm_check(trans_a, trans_b, M, N, K, lda, ldb, ldc));
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

static void cuda_bias_relu_forward(KernelCtx *ctx, float *Y, const float *b, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    size_t n = (size_t)rows * cols;
    bias_relu_forward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(Y, b, n, cols);
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

/* ---- Neural-network launchers ---- */

static int cuda_gemm_strided_batched(KernelCtx *ctx, int trans_a, int trans_b, int M, int N,
                                     int K, float alpha, const float *A, int lda,
                                     long long strideA, const float *B, int ldb,
                                     long long strideB, float beta, float *C, int ldc,
                                     long long strideC, int batch) {
    RS_TRY(kernels_gemm_batched_check(trans_a, trans_b, M, N, K, lda, ldb, ldc, strideA, strideB,
                                      strideC, batch));
    if (M == 0 || N == 0 || batch == 0) return 0;
    return cublasCheck(cublasSgemmStridedBatched(
        ctx->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M,
        K, &alpha, B, ldb, strideB, A, lda, strideA, &beta, C, ldc, strideC, batch));
}

static void cuda_im2col(KernelCtx *ctx, float *col, const float *x, int B, int C, int H, int W,
                        int k, int stride, int pad) {
    int OH = kernels_conv_out(H, k, stride, pad), OW = kernels_conv_out(W, k, stride, pad);
    if (B <= 0 || C <= 0 || OH <= 0 || OW <= 0) return;
    size_t n = (size_t)B * C * k * k * OH * OW;
    im2col_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(col, x, n, H, W, k, stride,
                                                                   pad, OH, OW);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_col2im(KernelCtx *ctx, float *dx, const float *dcol, int B, int C, int H, int W,
                        int k, int stride, int pad) {
    int OH = kernels_conv_out(H, k, stride, pad), OW = kernels_conv_out(W, k, stride, pad);
    if (B <= 0 || C <= 0 || H <= 0 || W <= 0) return;
    size_t n = (size_t)B * C * H * W;
    if (OH <= 0 || OW <= 0) { /* no window fits: nothing was read */
        fill_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dx, 0.0f, n);
    } else {
        col2im_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dx, dcol, n, H, W, k,
                                                                       stride, pad, OH, OW);
    }
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_channel_bias_forward(KernelCtx *ctx, float *Y, const float *bias, int B, int C,
                                      int HW) {
    if (B <= 0 || C <= 0 || HW <= 0) return;
    size_t n = (size_t)B * C * HW;
    channel_bias_forward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(Y, bias, n, C, HW);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_channel_bias_backward(KernelCtx *ctx, float *dbias, const float *dY, int B,
                                       int C, int HW) {
    if (B <= 0 || C <= 0 || HW <= 0) return;
    channel_bias_backward_kernel<<<C, OPS_THREADS, 0, ctx->stream>>>(dbias, dY, B, C, HW);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_maxpool2_forward(KernelCtx *ctx, float *Y, int *argmax, const float *X, int N,
                                  int H, int W) {
    if (N <= 0 || H < 2 || W < 2) return;
    size_t n = (size_t)N * (H / 2) * (W / 2);
    maxpool2_forward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(Y, argmax, X, n, H, W);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_maxpool2_backward(KernelCtx *ctx, float *dX, const float *dY, const int *argmax,
                                   const float *relu_x, int N, int H, int W) {
    if (N <= 0 || H <= 0 || W <= 0) return;
    size_t n = (size_t)N * H * W;
    maxpool2_backward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dX, dY, argmax, relu_x,
                                                                              n, H, W);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_embedding_forward(KernelCtx *ctx, float *out, const int *tokens,
                                   const float *wte, const float *wpe, int B, int T, int C,
                                   int V) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    size_t n = (size_t)B * T * C;
    embedding_forward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(out, tokens, wte, wpe,
                                                                              n, T, C, V);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_embedding_backward(KernelCtx *ctx, float *dwte, float *dwpe, const float *dout,
                                    const int *tokens, int B, int T, int C, int V) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    dim3 grid((unsigned)((C + 31) / 32), EMB_CHUNK_BLOCKS), block(32, OPS_THREADS / 32);
    embedding_dwte_kernel<<<grid, block, 0, ctx->stream>>>(dwte, dout, tokens, B * T, C, V);
    OPS_LAUNCH_CHECK(ctx);
    size_t tc = (size_t)T * C;
    embedding_dwpe_kernel<<<ops_blocks(tc), OPS_THREADS, 0, ctx->stream>>>(dwpe, dout, B, tc);
    OPS_LAUNCH_CHECK(ctx);
}

/* Blocks for the kernels that give a warp to each of rows. */
static unsigned row_blocks(size_t rows) {
    return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

static void cuda_layernorm_forward(KernelCtx *ctx, float *out, float *mean, float *rstd,
                                   const float *x, const float *gamma, const float *beta, int N,
                                   int C) {
    if (N <= 0 || C <= 0) return;
    layernorm_forward_kernel<<<row_blocks(N), OPS_THREADS, 0, ctx->stream>>>(out, mean, rstd, x,
                                                                              gamma, beta, N, C);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_layernorm_backward(KernelCtx *ctx, float *dx, float *dgamma, float *dbeta,
                                    const float *dout, const float *x, const float *gamma,
                                    const float *mean, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    layernorm_backward_dx_kernel<<<row_blocks(N), OPS_THREADS, 0, ctx->stream>>>(
        dx, dout, x, gamma, mean, rstd, N, C);
    OPS_LAUNCH_CHECK(ctx);
    layernorm_backward_dgamma_kernel<<<(unsigned)((C + 31) / 32), dim3(32, LN_GROUPS), 0,
                                       ctx->stream>>>(dgamma, dbeta, dout, x, mean, rstd, N, C);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_gelu_forward(KernelCtx *ctx, float *y, float *dydx, const float *x, size_t n) {
    if (n == 0) return;
    gelu_forward_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(y, dydx, x, n);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_softmax_causal_forward(KernelCtx *ctx, float *P, const float *S, int BH, int T,
                                        float scale) {
    if (BH <= 0 || T <= 0) return;
    int rows = BH * T;
    softmax_causal_forward_kernel<<<row_blocks(rows), OPS_THREADS, 0, ctx->stream>>>(P, S, rows, T,
                                                                                      scale);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_softmax_causal_backward(KernelCtx *ctx, float *dS, const float *dP,
                                         const float *P, int BH, int T, float scale) {
    if (BH <= 0 || T <= 0) return;
    int rows = BH * T;
    softmax_causal_backward_kernel<<<row_blocks(rows), OPS_THREADS, 0, ctx->stream>>>(
        dS, dP, P, rows, T, scale);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_heads(KernelCtx *ctx, float *out, const float *in, int B, int T, int S, int H,
                       int D, int merge) {
    if (B <= 0 || T <= 0 || S <= 0 || H <= 0 || D <= 0) return;
    size_t n = (size_t)B * T * S * H * D;
    heads_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(out, in, n, B, T, S, H, D, merge);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_heads_split(KernelCtx *ctx, float *out, const float *in, int B, int T, int S,
                             int H, int D) {
    cuda_heads(ctx, out, in, B, T, S, H, D, 0);
}

static void cuda_heads_merge(KernelCtx *ctx, float *out, const float *in, int B, int T, int S,
                             int H, int D) {
    cuda_heads(ctx, out, in, B, T, S, H, D, 1);
}

static void cuda_add(KernelCtx *ctx, float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    add_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(out, a, b, n);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_mul(KernelCtx *ctx, float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    mul_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(out, a, b, n);
    OPS_LAUNCH_CHECK(ctx);
}

/* The step's constants as the C twin computes them (in double, then rounded). */
static void cuda_adamw_step(KernelCtx *ctx, float *param, const float *grad, float *m, float *v,
                            size_t n, float lr, float beta1, float beta2, float eps,
                            float weight_decay, float grad_scale, int t) {
    if (n == 0) return;
    float step_size = (float)(lr / (1.0 - pow(beta1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow(beta2, t));
    adamw_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(
        param, grad, m, v, n, beta1, beta2, eps, 1.0f - lr * weight_decay, grad_scale, step_size,
        bc2_sqrt);
    OPS_LAUNCH_CHECK(ctx);
}

/* fp32 on the wire is the floats times the scale (1 given by value: a copy). */
static void cuda_pack(KernelCtx *ctx, void *dst, const float *src, size_t n, int type, float scale,
                      const float *scale_at) {
    if (n == 0) return;
    if (type == CODEC_E4M3 || type == CODEC_E5M2)
        pack_fp8_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>((unsigned char *)dst, src, n, scale, scale_at,
                                                                        type == CODEC_E4M3 ? __NV_E4M3 : __NV_E5M2);
    else if (type == CODEC_BF16)
        pack_bf16_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>((__nv_bfloat16 *)dst, src, n, scale, scale_at);
    else if (type == CODEC_F16)
        pack_f16_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>((__half *)dst, src, n, scale, scale_at);
    else if (scale_at || scale != 1.0f)
        pack_f32_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>((float *)dst, src, n, scale, scale_at);
    else if (cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx->stream)))
        ctx->failed = 1;
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_unpack(KernelCtx *ctx, float *dst, const void *src, size_t n, int type, float scale,
                        const float *scale_at) {
    if (n == 0) return;
    if (type == CODEC_E4M3 || type == CODEC_E5M2)
        unpack_fp8_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dst, (const unsigned char *)src, n, scale, scale_at,
                                                                          type == CODEC_E4M3 ? __NV_E4M3 : __NV_E5M2);
    else if (type == CODEC_BF16)
        unpack_bf16_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dst, (const __nv_bfloat16 *)src, n, scale, scale_at);
    else if (type == CODEC_F16)
        unpack_f16_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dst, (const __half *)src, n, scale, scale_at);
    else if (scale_at || scale != 1.0f)
        unpack_f32_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>(dst, (const float *)src, n, scale, scale_at);
    else if (cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx->stream)))
        ctx->failed = 1;
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_amax(KernelCtx *ctx, float *out, const float *x, size_t n) {
    if (cudaCheck(cudaMemsetAsync(out, 0, sizeof(float), ctx->stream))) ctx->failed = 1;
    if (n == 0) return;
    amax_kernel<<<ops_blocks(n), OPS_THREADS, 0, ctx->stream>>>((unsigned int *)out, x, n);
    OPS_LAUNCH_CHECK(ctx);
}

static void cuda_fp8_scale(KernelCtx *ctx, float *scale, const float *amax, int type, int contributions) {
    fp8_scale_kernel<<<1, 1, 0, ctx->stream>>>(scale, amax, type == CODEC_E4M3, contributions);
    OPS_LAUNCH_CHECK(ctx);
}

/* The sticky launch failure, without waiting. */
static int cuda_check(KernelCtx *ctx) {
    if (ctx->failed)
        return rs_error(RS_ERR_RUNTIME, "kernels cuda: a kernel launch failed on this stream "
                                        "(its error is logged above)");
    return 0;
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
    cuda_gemm_strided_batched,
    cuda_im2col,
    cuda_col2im,
    cuda_channel_bias_forward,
    cuda_channel_bias_backward,
    cuda_maxpool2_forward,
    cuda_maxpool2_backward,
    cuda_embedding_forward,
    cuda_embedding_backward,
    cuda_layernorm_forward,
    cuda_layernorm_backward,
    cuda_gelu_forward,
    cuda_softmax_causal_forward,
    cuda_softmax_causal_backward,
    cuda_heads_split,
    cuda_heads_merge,
    cuda_add,
    cuda_mul,
    cuda_adamw_step,
    cuda_bias_relu_forward,
    cuda_pack,
    cuda_unpack,
    cuda_amax,
    cuda_fp8_scale,
    cuda_check,
};

/* The CUDA table. Never NULL in a CUDA build (whether a GPU exists is the device layer's
 * question: device_cuda_ops()->count()). */
extern "C" const KernelOps *kernels_cuda(void) { return &cuda_ops; }
