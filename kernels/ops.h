/* ops.h - the model's math as one table of operations, implemented for the CPU and for CUDA */
#ifndef RS_OPS_H
#define RS_OPS_H

#include <stddef.h>

/* ---- Types ---- */

/* Per-device execution context: the stream the ops run on and library handles (cuBLAS).
 * Created by the table's ctx_create; opaque to callers. */
typedef struct KernelCtx KernelCtx;

/* All matrices are row-major, fp32, and live in the memory of the table's device.
 * Every op is asynchronous with respect to the host on CUDA (ordered on the ctx's stream);
 * on the CPU it is done when it returns. Ops with n == 0 or rows == 0 do nothing. */
typedef struct KernelOps {
    const char *name; /* "cpu" or "cuda" */

    /* Creates a context bound to stream (a cudaStream_t, or NULL for the default/CPU).
     * Returns NULL on failure with rs_errmsg() set. */
    KernelCtx *(*ctx_create)(void *stream);
    void (*ctx_destroy)(KernelCtx *ctx);

    /* C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C; op(X) = X^T when trans_X != 0.
     * lda/ldb/ldc are row strides of A, B, C as stored. Returns 0, or RS_ERR_RUNTIME. */
    int (*gemm)(KernelCtx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* Y[r,c] += b[c] */
    void (*bias_forward)(KernelCtx *ctx, float *Y, const float *b, int rows, int cols);
    /* db[c] = sum_r dY[r,c]  (overwrites db) */
    void (*bias_backward)(KernelCtx *ctx, float *db, const float *dY, int rows, int cols);
    /* Y = max(X, 0); Y may alias X */
    void (*relu_forward)(KernelCtx *ctx, float *Y, const float *X, size_t n);
    /* dX = dY where Y > 0, else 0; dX may alias dY */
    void (*relu_backward)(KernelCtx *ctx, float *dX, const float *dY, const float *Y, size_t n);

    /* Softmax cross-entropy over rows of logits[rows,cols] with integer labels[rows].
     * Writes dlogits = softmax(logits) - onehot(label) (gradient of the summed loss),
     * and adds to stats[0] the summed loss and to stats[1] the number of rows whose
     * argmax equals the label. dlogits may alias logits. labels and stats are device memory. */
    void (*softmax_xent)(KernelCtx *ctx, const float *logits, const int *labels, int rows,
                         int cols, float *dlogits, float *stats);

    /* SGD with momentum and weight decay, PyTorch's rule:
     *   g = grad * grad_scale + weight_decay * param;  mom = momentum * mom + g;  param -= lr * mom */
    void (*sgd_step)(KernelCtx *ctx, float *param, const float *grad, float *mom, size_t n,
                     float lr, float momentum, float weight_decay, float grad_scale);

    /* x *= a */
    void (*scale)(KernelCtx *ctx, float *x, float a, size_t n);
    /* y += a * x */
    void (*axpy)(KernelCtx *ctx, float *y, float a, const float *x, size_t n);
    /* x[i] = v */
    void (*fill)(KernelCtx *ctx, float *x, float v, size_t n);

    /* Blocks until every op issued on ctx is complete. Returns 0 or RS_ERR_RUNTIME. */
    int (*sync)(KernelCtx *ctx);

    /* ---- Neural-network ops (LeNet-5 and the GPT-2-style decoder) ----
     * Unless said otherwise an op overwrites its outputs, inputs and outputs must not overlap,
     * and an op with an empty shape does nothing (NULL pointers welcome). Integer arrays
     * (tokens, argmax indices) are device memory like the floats. Every result is
     * deterministic: the same inputs give the same bits from run to run, and on the CPU
     * whatever kernels_cpu_set_threads says (work is split only where results are independent:
     * a GEMM into blocks of C, each one single-threaded BLAS call over the whole K). None
     * allocates. */

    /* For b in [0, batch): C_b = alpha * op(A_b) * op(B_b) + beta * C_b, as gemm, with
     * X_b = X + b * strideX (in floats). strideA or strideB may be 0 (one matrix for every b);
     * the C_b must not overlap. Returns 0, or RS_ERR_RUNTIME (a bad shape, or the library's
     * error). */
    int (*gemm_strided_batched)(KernelCtx *ctx, int trans_a, int trans_b, int M, int N, int K,
                                float alpha, const float *A, int lda, long long strideA,
                                const float *B, int ldb, long long strideB, float beta, float *C,
                                int ldc, long long strideC, int batch);

    /* Convolution as im2col + GEMM, NCHW, a square k x k kernel, stride, zero padding:
     * OH = (H + 2 pad - k) / stride + 1, OW likewise (kernels_conv_out; when either is 0,
     * im2col does nothing and col2im zeroes dx).
     * im2col: col[b][(c*k + i)*k + j][oh*OW + ow] = x[b][c][oh*s - pad + i][ow*s - pad + j]
     * (s the stride; 0 outside the image); x is [B,C,H,W], col is [B, C*k*k, OH*OW]. A convolution with
     * weights W[OC, C*k*k] is then y_b[OC, OH*OW] = W col_b (gemm_strided_batched, strideA 0),
     * and its backward dcol_b = W^T dy_b (the same, trans_a), dx = col2im(dcol), and
     * dW = sum over b of dy_b col_b^T (gemm per image, beta 1 after the first). */
    void (*im2col)(KernelCtx *ctx, float *col, const float *x, int B, int C, int H, int W, int k,
                   int stride, int pad);
    /* The adjoint of im2col: dx[b][c][h][w] = the sum of every dcol entry that im2col read from
     * x[b][c][h][w] (in the order of (i, j)); padding entries are dropped. Overwrites all of dx. */
    void (*col2im)(KernelCtx *ctx, float *dx, const float *dcol, int B, int C, int H, int W,
                   int k, int stride, int pad);
    /* A convolution's bias over channels: Y[b][c][p] += bias[c] for Y [B, C, HW]. */
    void (*channel_bias_forward)(KernelCtx *ctx, float *Y, const float *bias, int B, int C,
                                 int HW);
    /* dbias[c] = sum over b, p of dY[b][c][p] (overwrites dbias). */
    void (*channel_bias_backward)(KernelCtx *ctx, float *dbias, const float *dY, int B, int C,
                                  int HW);

    /* Max-pool 2 x 2, stride 2, over N planes of H x W (N = batch * channels): Y [N, H/2, W/2]
     * (an odd last row or column is dropped), and argmax[N, H/2, W/2] the index h*W + w in its
     * plane of the maximum (the first in row-major order on ties; a NaN wins, as in PyTorch). */
    void (*maxpool2_forward)(KernelCtx *ctx, float *Y, int *argmax, const float *X, int N, int H,
                             int W);
    /* dX[argmax] = dY, every other element of dX 0 (overwrites all of dX [N, H, W]). With relu_x
     * (the pooled input X, a ReLU's output; may be NULL) it is the ReLU's backward too: dX[argmax]
     * = dY only where X there > 0, as relu_backward after it would leave it, in the same pass. */
    void (*maxpool2_backward)(KernelCtx *ctx, float *dX, const float *dY, const int *argmax,
                              const float *relu_x, int N, int H, int W);

    /* Token plus position embedding: out[b][t][:] = wte[tokens[b*T + t]][:] + wpe[t][:], with
     * out [B, T, C], wte [V, C], wpe [at least T, C]. A token outside [0, V) gives a row of NaN,
     * so that bad data cannot pass unnoticed. */
    void (*embedding_forward)(KernelCtx *ctx, float *out, const int *tokens, const float *wte,
                              const float *wpe, int B, int T, int C, int V);
    /* Its gradients: dwte[tokens[i]][:] += dout[i][:] in position order i = b*T + t (ACCUMULATES:
     * with the LM head tied to wte, the head's gradient is already in dwte), and
     * dwpe[t][:] = sum over b of dout[b][t][:] (OVERWRITES rows 0..T-1). Tokens outside [0, V)
     * are skipped. */
    void (*embedding_backward)(KernelCtx *ctx, float *dwte, float *dwpe, const float *dout,
                               const int *tokens, int B, int T, int C, int V);

    /* LayerNorm over the last axis of x [N, C], eps RS_LAYERNORM_EPS:
     * out = (x - mean) * rstd * gamma + beta, and per row mean[N] and rstd[N] = 1/sqrt(var + eps)
     * (biased variance), saved for the backward. */
    void (*layernorm_forward)(KernelCtx *ctx, float *out, float *mean, float *rstd,
                              const float *x, const float *gamma, const float *beta, int N, int C);
    /* dx += the gradient wrt x (ACCUMULATES: the residual stream's gradient is summed in place);
     * dgamma, dbeta [C] are OVERWRITTEN (each LayerNorm's parameters are used once a step).
     * dx must not overlap dout. */
    void (*layernorm_backward)(KernelCtx *ctx, float *dx, float *dgamma, float *dbeta,
                               const float *dout, const float *x, const float *gamma,
                               const float *mean, const float *rstd, int N, int C);

    /* GELU, GPT-2's tanh approximation: y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and,
     * unless dydx is NULL, its derivative gelu'(x) for the backward (dx = dy * dydx, with mul):
     * here the exponential both need is at hand, and the backward does not compute it again.
     * y and dydx may each alias x, not each other. */
    void (*gelu_forward)(KernelCtx *ctx, float *y, float *dydx, const float *x, size_t n);

    /* Causal softmax over scores S [BH, T, T] (BH = batch * heads): for row i of each T x T
     * matrix, P[i][j] = exp(scale S[i][j]) / sum over j' <= i of exp(scale S[i][j']) for j <= i,
     * and P[i][j] = 0 above the diagonal (S there is never read). P may alias S. */
    void (*softmax_causal_forward)(KernelCtx *ctx, float *P, const float *S, int BH, int T,
                                   float scale);
    /* The gradient wrt S: dS[i][j] = scale P[i][j] (dP[i][j] - sum over j' <= i of
     * P[i][j'] dP[i][j']) for j <= i, 0 above the diagonal. dS may alias dP.
     * Attention from these (tests/test_ops_nn.c's attn_forward/attn_backward): heads_split the
     * fused qkv; S = q k^T, P = softmax_causal(S, 1/sqrt(D)), y = P v (gemm_strided_batched over
     * B*H); heads_merge y. Backward: dP = dy v^T, dv = P^T dy, dS = softmax_causal_backward,
     * dq = dS k, dk = dS^T q; heads_merge dq, dk, dv into dqkv. */
    void (*softmax_causal_backward)(KernelCtx *ctx, float *dS, const float *dP, const float *P,
                                    int BH, int T, float scale);

    /* Attention's layout change: in [B, T, S, H, D] -> out [S, B, H, T, D], so that each (s, b, h)
     * is one contiguous T x D matrix for gemm_strided_batched (S = 3 splits the fused q, k, v
     * projection [B, T, 3C] into q, k, v [B, H, T, D] at out, out + B*H*T*D, out + 2*B*H*T*D;
     * S = 1 turns a gradient [B, T, C] into heads). */
    void (*heads_split)(KernelCtx *ctx, float *out, const float *in, int B, int T, int S, int H,
                        int D);
    /* The inverse: in [S, B, H, T, D] -> out [B, T, S, H, D] (heads back into rows, and
     * dq, dk, dv back into the fused gradient [B, T, 3C]). */
    void (*heads_merge)(KernelCtx *ctx, float *out, const float *in, int B, int T, int S, int H,
                        int D);

    /* out = a + b (a residual connection); out may alias a or b. */
    void (*add)(KernelCtx *ctx, float *out, const float *a, const float *b, size_t n);
    /* out = a * b, elementwise (a gradient through a kept derivative); out may alias a or b. */
    void (*mul)(KernelCtx *ctx, float *out, const float *a, const float *b, size_t n);

    /* AdamW, torch.optim.AdamW's rule (decoupled weight decay), step t >= 1 counting from 1:
     *   g = grad * grad_scale;  param *= 1 - lr * weight_decay;
     *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
     *   param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) */
    void (*adamw_step)(KernelCtx *ctx, float *param, const float *grad, float *m, float *v,
                       size_t n, float lr, float beta1, float beta2, float eps,
                       float weight_decay, float grad_scale, int t);

    /* Y[r,c] = max(Y[r,c] + b[c], 0): bias_forward then relu_forward in one pass over Y, the
     * same bits. */
    void (*bias_relu_forward)(KernelCtx *ctx, float *Y, const float *b, int rows, int cols);

    /* The wire's number formats (base/codec.h: type a CodecType, scale a power of two):
     * pack writes n elements of type at dst (1 byte each for FP8, 2 for bf16 / fp16, 4 for
     * fp32) = round(src * scale), to nearest even (FP8 saturating); unpack writes dst =
     * element / scale. Bare elements, no FP8 head: bit for bit codec_encode_elems /
     * codec_decode_elems (a NaN stays a NaN; its payload may differ). dst and src must not
     * overlap. With scale_at non-NULL (one float in the context's memory: the device's for CUDA)
     * the scale is *scale_at as the op runs, and scale is ignored: a scale computed on the device
     * (fp8_scale) is used without a round trip to the host. */
    void (*pack)(KernelCtx *ctx, void *dst, const float *src, size_t n, int type, float scale,
                 const float *scale_at);
    void (*unpack)(KernelCtx *ctx, float *dst, const void *src, size_t n, int type, float scale,
                   const float *scale_at);

    /* *out (one float in the context's memory: the device's for CUDA) = the largest finite
     * |x[i]| over n elements, 0 for none (NaN and Inf do not count): what codec_fit scales an
     * FP8 message by. */
    void (*amax)(KernelCtx *ctx, float *out, const float *x, size_t n);

    /* *scale (one float in the context's memory) = codec_fit_scale(type, *amax) (base/codec.h)
     * divided by the smallest power of two >= contributions (contributions <= 1: by 1), so that
     * a sum of that many values of magnitude at most *amax, each encoded by it, stays within the
     * FP8 format: the scale an FP8 all-reduce's ranks share. One thread on CUDA; scale and amax
     * may be the same float. */
    void (*fp8_scale)(KernelCtx *ctx, float *scale, const float *amax, int type, int contributions);

    /* Without waiting: RS_ERR_RUNTIME (rs_errmsg() set) when a launch on ctx has failed since it
     * was created (the failure is sticky), else 0. What sync reports too, for a caller that must
     * not block (a back end that polls its streams). */
    int (*check)(KernelCtx *ctx);
} KernelOps;

/* ---- Macros ---- */

/* LayerNorm's epsilon (PyTorch's default, GPT-2's). */
#define RS_LAYERNORM_EPS 1e-5f

/* ---- Inline helpers ---- */

/* A convolution's (or im2col's) output size along one axis: (size + 2 pad - k) / stride + 1,
 * or 0 when no window fits (or stride < 1). */
static inline int kernels_conv_out(int size, int k, int stride, int pad) {
    return stride > 0 && k > 0 && size + 2 * pad >= k ? (size + 2 * pad - k) / stride + 1 : 0;
}

/* ---- Prototypes ---- */

/* The plain-C table (cblas_sgemm for GEMM). Never NULL. */
const KernelOps *kernels_cpu(void);

/* The CUDA table (cuBLAS for GEMM); NULL in a build without CUDA. */
const KernelOps *kernels_cuda(void);

/* The vector instruction set the CPU table was built for (the Makefile's SIMD): "avx2", or
 * "sse2" (x86-64's baseline, or whatever the compiler's default is elsewhere). Data, not code,
 * so that a file built for the baseline can read it before any kernel runs. The two give the
 * same bits (no fused multiply-add either way); avx2 is faster. */
extern const char kernels_cpu_isa[];

/* Sets the number of threads the CPU table uses, for GEMM (split into blocks of C, BLAS itself
 * kept single-threaded, so that no BLAS thread spins beside them) and for its elementwise ops
 * (n <= 0: leave it as it is; before any call every op runs on the calling thread alone).
 * Results do not depend on it, bit for bit. */
void kernels_cpu_set_threads(int n);

/* Checks a row-major GEMM's shapes and strides (op(A) M x K with row stride lda, and so on)
 * for both tables. Returns 0 when valid, else RS_ERR_RUNTIME with rs_errmsg() saying which. */
int kernels_gemm_check(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc);

/* The same for gemm_strided_batched: also no negative batch or stride, and the C_b apart
 * (strideC >= (M - 1) ldc + N when batch > 1). 0, else RS_ERR_RUNTIME. */
int kernels_gemm_batched_check(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb,
                               int ldc, long long strideA, long long strideB, long long strideC,
                               int batch);

/* Seconds the calling thread has spent inside the CPU table's GEMM (cblas_sgemm) so far. */
double kernels_cpu_gemm_seconds(void);

#endif
