/* model_lenet.c - LeNet-5 for 28x28 images: two convolutions (im2col + GEMM) with ReLU and 2x2 max-pools, then 400-120-84-10 */
/*
 * Layers (parameter groups, in flat-buffer order, each W then b):
 *   0 conv1  W [6, 1*5*5],  b [6]     28x28x1, pad 2 -> 28x28x6, ReLU, pool -> 14x14x6
 *   1 conv2  W [16, 6*5*5], b [16]    14x14x6 -> 10x10x16, ReLU, pool -> 5x5x16 = 400
 *   2 fc1    W [400 x 120], b [120]   ReLU
 *   3 fc2    W [120 x 84],  b [84]    ReLU
 *   4 fc3    W [84 x 10],   b [10]    logits
 * Convolution weights are PyTorch's [out, in*k*k]; fully connected ones [in x out] as the MLP's.
 */
#include "model.h"
#include "../base/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define K(m) ((m)->dev->k)
#define CTX(m) ((m)->dev->kctx)

enum { LN_SIDE = 28, LN_IN = 784, LN_CLASSES = 10, LN_K = 5 };
enum { C1 = 6, C2 = 16, P1 = 14, O2 = 10, P2 = 5, F0 = 400, F1 = 120, F2 = 84 };
/* A convolution's weight gradient sums the batch's samples in this many groups at once (below). */
enum { LN_GROUPS = 16 };

typedef struct {
    float *col1, *a1, *p1, *col2, *a2, *p2, *h1, *h2;     /* forward, kept for backward */
    int *arg1, *arg2;                                     /* the pools' argmax */
    float *dh2, *dh1, *dp2, *da2, *dcol2, *dp1, *da1;     /* backward */
    float *dwg;                                           /* the groups' weight gradients [LN_GROUPS, C2 * 150] */
} Lenet;

static const int ln_in[5] = {1 * LN_K * LN_K, C1 * LN_K * LN_K, F0, F1, F2}; /* fan-in per layer */
static const int ln_out[5] = {C1, C2, F1, F2, LN_CLASSES};

static int lenet_check(const Config *c) {
    if (c->layers[0] != LN_IN || c->layers[c->nlayers - 1] != LN_CLASSES)
        return rs_error(RS_ERR_INPUT, "--model lenet takes 28x28 images in 10 classes: --layers gives %d inputs and %d "
                        "classes (784 and 10, or leave --layers out)", c->layers[0], c->layers[c->nlayers - 1]);
    if (!strncmp(c->data, "text:", 5))
        return rs_error(RS_ERR_INPUT, "--data %s: --model lenet takes 28x28 images (synthetic or an MNIST directory), "
                        "not text", c->data);
    return RS_OK;
}

static size_t lenet_count(const Config *c) {
    (void)c;
    size_t n = 0;
    for (int l = 0; l < 5; l++) n += (size_t)ln_in[l] * ln_out[l] + (size_t)ln_out[l];
    return n;
}

static int lenet_load_data(const Config *c, DataPair *out) {
    if (!strcmp(c->data, "synthetic"))
        return data_make_synthetic(LN_IN, LN_CLASSES, c->train_samples, c->eval_samples, (uint64_t)c->seed, out);
    int rc = data_load_mnist(c->data, LN_IN, LN_CLASSES, out);
    const char *msg = rs_errmsg(), *shape = strstr(msg, ": images are ");
    if (rc == RS_ERR_INPUT && shape && strstr(msg, " but --layers")) { /* the images' shape, said for lenet */
        char file[512];
        int w = (int)(shape - msg), rows = 0, cols = 0;
        snprintf(file, sizeof file, "%.*s", w < 511 ? w : 511, msg);
        sscanf(shape, ": images are %dx%d", &rows, &cols);
        return rs_error(RS_ERR_INPUT, "--data %s: --model lenet takes 28x28 images, %s holds %dx%d", c->data, file, rows,
                        cols);
    }
    return rc;
}

static int lenet_setup(Model *m, const Config *c) {
    (void)c;
    m->nlayers = 5;
    for (int l = 0; l < 5; l++) {
        m->off[l] = m->nparams;
        m->nparams += (size_t)ln_in[l] * ln_out[l] + (size_t)ln_out[l];
    }
    m->off[5] = m->nparams;
    m->in_width = LN_IN;
    m->out_width = LN_CLASSES;
    RS_TRY(model_alloc_common(m));
    Lenet *n = calloc(1, sizeof *n);
    if (!(m->impl = n)) return rs_error(RS_ERR_RUNTIME, "out of memory");
    size_t B = (size_t)m->max_batch, f = sizeof(float);
    float **fl[] = {&m->act[0], &n->col1, &n->a1, &n->p1, &n->col2, &n->a2, &n->p2, &n->h1, &n->h2, &m->out, &m->dbuf[0],
                    &n->dh2, &n->dh1, &n->dp2, &n->da2, &n->dcol2, &n->dp1, &n->da1};
    size_t sz[] = {LN_IN, 25 * LN_IN, C1 * LN_IN, C1 * P1 * P1, 150 * O2 * O2, C2 * O2 * O2, F0, F1, F2, LN_CLASSES,
                   LN_CLASSES, F2, F1, F0, C2 * O2 * O2, 150 * O2 * O2, C1 * P1 * P1, C1 * LN_IN};
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
        if (!(*fl[i] = model_scratch(m, B * sz[i] * f))) return RS_ERR_RUNTIME;
    if (!(n->arg1 = model_scratch(m, B * C1 * P1 * P1 * sizeof(int))) ||
        !(n->arg2 = model_scratch(m, B * C2 * P2 * P2 * sizeof(int))) ||
        !(n->dwg = model_scratch(m, (size_t)LN_GROUPS * C2 * 150 * f)))
        return RS_ERR_RUNTIME;
    return RS_OK;
}

/* PyTorch's Conv2d and Linear defaults: W and b uniform in +-1/sqrt(fan_in). */
static void lenet_init(const Model *m, float *h, Rng *r) {
    for (int l = 0; l < 5; l++)
        model_fill_uniform(h + m->off[l], (size_t)ln_in[l] * ln_out[l] + (size_t)ln_out[l], 1.0f / sqrtf((float)ln_in[l]),
                           r);
}

/* y [B, OC, HW] = W [OC, CKK] col_b [CKK, HW] + b, then ReLU. */
static int conv_forward(Model *m, int l, float *y, const float *col, int B, int CKK, int HW) {
    int OC = ln_out[l];
    RS_TRY(model_need(m, l));
    const float *W = m->params + m->off[l], *b = W + (size_t)OC * CKK;
    RS_TRY(K(m)->gemm_strided_batched(CTX(m), 0, 0, OC, HW, CKK, 1.0f, W, CKK, 0, col, HW, (long long)CKK * HW, 0.0f, y,
                                      HW, (long long)OC * HW, B));
    K(m)->channel_bias_forward(CTX(m), y, b, B, OC, HW);
    K(m)->relu_forward(CTX(m), y, y, (size_t)B * OC * HW);
    return RS_OK;
}

/* Y [B, out] = X W + b (ReLU unless last). */
static int fc_forward(Model *m, int l, float *Y, const float *X, int B, int relu) {
    int in = ln_in[l], out = ln_out[l];
    RS_TRY(model_need(m, l));
    const float *W = m->params + m->off[l];
    RS_TRY(K(m)->gemm(CTX(m), 0, 0, B, out, in, 1.0f, X, in, W, out, 0.0f, Y, out));
    K(m)->bias_forward(CTX(m), Y, W + (size_t)in * out, B, out);
    if (relu) K(m)->relu_forward(CTX(m), Y, Y, (size_t)B * out);
    return RS_OK;
}

static int lenet_forward(Model *m, int B) {
    Lenet *n = m->impl;
    K(m)->im2col(CTX(m), n->col1, m->act[0], B, 1, LN_SIDE, LN_SIDE, LN_K, 1, 2);
    RS_TRY(conv_forward(m, 0, n->a1, n->col1, B, 25, LN_IN));
    K(m)->maxpool2_forward(CTX(m), n->p1, n->arg1, n->a1, B * C1, LN_SIDE, LN_SIDE);
    K(m)->im2col(CTX(m), n->col2, n->p1, B, C1, P1, P1, LN_K, 1, 0);
    RS_TRY(conv_forward(m, 1, n->a2, n->col2, B, 150, O2 * O2));
    K(m)->maxpool2_forward(CTX(m), n->p2, n->arg2, n->a2, B * C2, O2, O2);
    RS_TRY(fc_forward(m, 2, n->h1, n->p2, B, 1));
    RS_TRY(fc_forward(m, 3, n->h2, n->h1, B, 1));
    return fc_forward(m, 4, m->out, n->h2, B, 0);
}

/* A fully connected layer's backward: dW = X^T dY, db; dX = dY W^T (masked by X > 0 when
 * relu_x: X is the previous layer's ReLU output), unless dX is NULL. */
static int fc_backward(Model *m, int l, const float *X, const float *dY, float *dX, int B, int relu_x) {
    int in = ln_in[l], out = ln_out[l];
    RS_TRY(model_need(m, l));
    const float *W = m->params + m->off[l];
    float *dW = m->grads + m->off[l];
    RS_TRY(K(m)->gemm(CTX(m), 1, 0, in, out, B, 1.0f, X, in, dY, out, 0.0f, dW, out));
    K(m)->bias_backward(CTX(m), dW + (size_t)in * out, dY, B, out);
    RS_TRY(K(m)->gemm(CTX(m), 0, 1, B, in, out, 1.0f, dY, out, W, out, 0.0f, dX, in));
    if (relu_x) K(m)->relu_backward(CTX(m), dX, dX, X, (size_t)B * in);
    return RS_OK;
}

/* A convolution's weight and bias gradients from dy [B, OC, HW] (already through the ReLU):
 * dW = sum over b of dy_b col_b^T, db = sum over b and positions. The samples are summed in
 * LN_GROUPS interleaved groups (b = g, g + G, ...), all groups at once: each round is one batched
 * GEMM, item g adding sample s G + g into group g's sum, and the groups' sums are then added in
 * order, ((w_0 + w_1) + w_2) + .... One GEMM a sample, in order, left the other threads idle
 * (each is a few hundred thousand multiply-adds, too small to cut). The grouping depends on the
 * batch alone, so the bits do not depend on the thread count. */
static int conv_weight_backward(Model *m, int l, const float *dy, const float *col, int B, int CKK, int HW) {
    const Lenet *n = m->impl;
    int OC = ln_out[l], G = B < LN_GROUPS ? B : LN_GROUPS;
    long long sy = (long long)OC * HW, sc = (long long)CKK * HW, sw = (long long)OC * CKK;
    float *dW = m->grads + m->off[l], *w = G > 1 ? n->dwg : dW;
    for (int s = 0; s * G < B; s++)
        RS_TRY(K(m)->gemm_strided_batched(CTX(m), 0, 1, OC, CKK, HW, 1.0f, dy + s * G * sy, HW, sy, col + s * G * sc, HW,
                                          sc, s ? 1.0f : 0.0f, w, CKK, sw, B - s * G < G ? B - s * G : G));
    if (G > 1) K(m)->add(CTX(m), dW, w, w + sw, (size_t)sw);
    for (int g = 2; g < G; g++) K(m)->add(CTX(m), dW, dW, w + g * sw, (size_t)sw);
    K(m)->channel_bias_backward(CTX(m), dW + (size_t)OC * CKK, dy, B, OC, HW);
    return RS_OK;
}

static int lenet_backward(Model *m, int B, LayerDoneFn done, void *arg) {
    Lenet *n = m->impl;
    RS_TRY(fc_backward(m, 4, n->h2, m->dbuf[0], n->dh2, B, 1));
    if (done) RS_TRY(done(arg, 4));
    RS_TRY(fc_backward(m, 3, n->h1, n->dh2, n->dh1, B, 1));
    if (done) RS_TRY(done(arg, 3));
    RS_TRY(fc_backward(m, 2, n->p2, n->dh1, n->dp2, B, 0));
    if (done) RS_TRY(done(arg, 2));
    /* conv2: through the pool and the ReLU, then its weights, then back to pool1's output */
    RS_TRY(model_need(m, 1));
    K(m)->maxpool2_backward(CTX(m), n->da2, n->dp2, n->arg2, n->a2, B * C2, O2, O2); /* and the ReLU */
    RS_TRY(conv_weight_backward(m, 1, n->da2, n->col2, B, 150, O2 * O2));
    const float *W2 = m->params + m->off[1];
    RS_TRY(K(m)->gemm_strided_batched(CTX(m), 1, 0, 150, O2 * O2, C2, 1.0f, W2, 150, 0, n->da2, O2 * O2,
                                      (long long)C2 * O2 * O2, 0.0f, n->dcol2, O2 * O2, 150LL * O2 * O2, B));
    K(m)->col2im(CTX(m), n->dp1, n->dcol2, B, C1, P1, P1, LN_K, 1, 0);
    if (done) RS_TRY(done(arg, 1));
    /* conv1: the input needs no gradient (nor its weights: gathered all the same, as every layer) */
    RS_TRY(model_need(m, 0));
    K(m)->maxpool2_backward(CTX(m), n->da1, n->dp1, n->arg1, n->a1, B * C1, LN_SIDE, LN_SIDE);
    RS_TRY(conv_weight_backward(m, 0, n->da1, n->col1, B, 25, LN_IN));
    if (done) RS_TRY(done(arg, 0));
    return RS_OK;
}

static void lenet_release(Model *m) {
    free(m->impl);
    m->impl = NULL;
}

static const ModelOps lenet_ops = {
    .name = "lenet",
    .check = lenet_check,
    .count = lenet_count,
    .load_data = lenet_load_data,
    .setup = lenet_setup,
    .init = lenet_init,
    .forward = lenet_forward,
    .backward = lenet_backward,
    .release = lenet_release,
};

const ModelOps *model_lenet(void) { return &lenet_ops; }
