/* model_mlp.c - the MLP (--layers, ReLU, softmax cross-entropy): forward and backward over the device's kernel table */
#include "model.h"
#include "../base/err.h"

#include <math.h>
#include <string.h>

#define K(m) ((m)->dev->k)
#define CTX(m) ((m)->dev->kctx)

static int mlp_check(const Config *c) {
    if (c->nlayers < 2 || c->nlayers > CONFIG_MAX_LAYERS)
        return rs_error(RS_ERR_INPUT, "--layers: %d sizes (2 to %d)", c->nlayers, CONFIG_MAX_LAYERS);
    if (!strncmp(c->data, "text:", 5))
        return rs_error(RS_ERR_INPUT, "--data %s: text is for --model gpt (the mlp takes images: synthetic or an MNIST "
                                      "directory)", c->data);
    return RS_OK;
}

static size_t mlp_count(const Config *c) {
    size_t n = 0;
    for (int i = 0; i + 1 < c->nlayers; i++) n += (size_t)c->layers[i] * c->layers[i + 1] + (size_t)c->layers[i + 1];
    return n;
}

static int mlp_load_data(const Config *c, DataPair *out) {
    int in = c->layers[0], classes = c->layers[c->nlayers - 1];
    if (!strcmp(c->data, "synthetic"))
        return data_make_synthetic(in, classes, c->train_samples, c->eval_samples, (uint64_t)c->seed, out);
    return data_load_mnist(c->data, in, classes, out);
}

/* Layer l's W [in x out] starts at off[l]; its b follows. act[l+1] is layer l's output, dbuf[0..1]
 * the backward's scratch of the widest layer. */
static int mlp_setup(Model *m, const Config *c) {
    const int *sizes = c->layers;
    m->nlayers = c->nlayers - 1;
    int maxw = 0;
    for (int i = 0; i < c->nlayers; i++) {
        m->sizes[i] = sizes[i];
        if (sizes[i] > maxw) maxw = sizes[i];
    }
    for (int l = 0; l < m->nlayers; l++) {
        m->off[l] = m->nparams;
        m->nparams += (size_t)sizes[l] * sizes[l + 1] + (size_t)sizes[l + 1];
    }
    m->off[m->nlayers] = m->nparams;
    m->in_width = sizes[0];
    m->out_width = sizes[m->nlayers];
    RS_TRY(model_alloc_common(m));
    for (int l = 0; l <= m->nlayers; l++)
        if (!(m->act[l] = model_scratch(m, (size_t)m->max_batch * sizes[l] * sizeof(float)))) return RS_ERR_RUNTIME;
    m->dbuf_bytes = (size_t)m->max_batch * maxw * sizeof(float);
    for (int i = 0; i < 2; i++)
        if (!(m->dbuf[i] = model_scratch(m, m->dbuf_bytes))) return RS_ERR_RUNTIME;
    m->out = m->act[m->nlayers];
    return RS_OK;
}

/* PyTorch's nn.Linear: W and b uniform in +-1/sqrt(fan_in), layer by layer. */
static void mlp_init(const Model *m, float *h, Rng *r) {
    for (int l = 0; l < m->nlayers; l++) {
        size_t n = (size_t)m->sizes[l] * m->sizes[l + 1] + (size_t)m->sizes[l + 1];
        model_fill_uniform(h + m->off[l], n, 1.0f / sqrtf((float)m->sizes[l]), r);
    }
}

static int mlp_forward(Model *m, int B) {
    for (int l = 0; l < m->nlayers; l++) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        const float *W = m->params + m->off[l], *b = W + (size_t)in * out;
        RS_TRY(model_need(m, l));
        RS_TRY(K(m)->gemm(CTX(m), 0, 0, B, out, in, 1.0f, m->act[l], in, W, out, 0.0f, m->act[l + 1], out));
        if (l + 1 < m->nlayers) K(m)->bias_relu_forward(CTX(m), m->act[l + 1], b, B, out);
        else K(m)->bias_forward(CTX(m), m->act[l + 1], b, B, out);
    }
    return RS_OK;
}

static int mlp_backward(Model *m, int B, LayerDoneFn done, void *arg) {
    int cur = 0;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        const float *W = m->params + m->off[l];
        float *dW = m->grads + m->off[l], *db = dW + (size_t)in * out;
        float *dY = m->dbuf[cur];
        RS_TRY(model_need(m, l));
        /* dW = X^T dY ; db = sum_rows dY */
        RS_TRY(K(m)->gemm(CTX(m), 1, 0, in, out, B, 1.0f, m->act[l], in, dY, out, 0.0f, dW, out));
        K(m)->bias_backward(CTX(m), db, dY, B, out);
        if (l > 0) {
            float *dX = m->dbuf[1 - cur];
            RS_TRY(K(m)->gemm(CTX(m), 0, 1, B, in, out, 1.0f, dY, out, W, out, 0.0f, dX, in));
            K(m)->relu_backward(CTX(m), dX, dX, m->act[l], (size_t)B * in);
            cur = 1 - cur;
        }
        if (done) RS_TRY(done(arg, l));
    }
    return RS_OK;
}

static const ModelOps mlp_ops = {
    .name = "mlp",
    .check = mlp_check,
    .count = mlp_count,
    .load_data = mlp_load_data,
    .setup = mlp_setup,
    .init = mlp_init,
    .forward = mlp_forward,
    .backward = mlp_backward,
};

const ModelOps *model_mlp(void) { return &mlp_ops; }
