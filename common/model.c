/* model.c - the MLP's forward, loss, backward and optimizer step over the device's kernel table */
#include "model.h"
#include "err.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define K(m) ((m)->dev->k)
#define CTX(m) ((m)->dev->kctx)

int model_layer_of(const Model *m, size_t i) {
    int l = 0;
    while (l + 1 < m->nlayers && i >= m->off[l + 1]) l++;
    return l;
}

void model_free(Model *m) {
    if (!m->dev) return;
    Device *d = m->dev;
    size_t pb = m->nparams * sizeof(float);
    if (m->params) device_free(d, m->params, pb, MEM_PARAMS);
    if (m->grads) device_free(d, m->grads, pb, MEM_GRADS);
    if (m->mom) device_free(d, m->mom, pb, MEM_OPTIMIZER);
    for (int l = 0; l <= m->nlayers; l++) {
        size_t b = (size_t)m->max_batch * m->sizes[l] * sizeof(float);
        if (m->act[l]) device_free(d, m->act[l], b, MEM_ACTIVATIONS);
    }
    for (int i = 0; i < 2; i++)
        if (m->dbuf[i]) device_free(d, m->dbuf[i], m->dbuf_bytes, MEM_ACTIVATIONS);
    if (m->labels) device_free(d, m->labels, (size_t)m->max_batch * sizeof(int), MEM_ACTIVATIONS);
    if (m->stats) device_free(d, m->stats, 2 * sizeof(float), MEM_ACTIVATIONS);
    memset(m, 0, sizeof *m);
}

int model_init(Model *m, Device *dev, const int *sizes, int nsizes, int max_batch, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->dev = dev;
    m->nlayers = nsizes - 1;
    m->max_batch = max_batch < 1 ? 1 : max_batch;
    int maxw = 0;
    for (int i = 0; i < nsizes; i++) {
        m->sizes[i] = sizes[i];
        if (sizes[i] > maxw) maxw = sizes[i];
    }
    for (int l = 0; l < m->nlayers; l++) {
        m->off[l] = m->nparams;
        m->nparams += (size_t)sizes[l] * sizes[l + 1] + (size_t)sizes[l + 1];
    }
    size_t pb = m->nparams * sizeof(float);
    m->dbuf_bytes = (size_t)m->max_batch * maxw * sizeof(float);
    m->params = device_alloc(dev, pb, MEM_PARAMS);
    m->grads = device_alloc(dev, pb, MEM_GRADS);
    m->mom = device_alloc(dev, pb, MEM_OPTIMIZER);
    int ok = m->params && m->grads && m->mom;
    for (int l = 0; l <= m->nlayers && ok; l++) {
        m->act[l] = device_alloc(dev, (size_t)m->max_batch * sizes[l] * sizeof(float), MEM_ACTIVATIONS);
        ok = m->act[l] != NULL;
    }
    for (int i = 0; i < 2 && ok; i++) ok = (m->dbuf[i] = device_alloc(dev, m->dbuf_bytes, MEM_ACTIVATIONS)) != NULL;
    if (ok) ok = (m->labels = device_alloc(dev, (size_t)m->max_batch * sizeof(int), MEM_ACTIVATIONS)) != NULL;
    if (ok) ok = (m->stats = device_alloc(dev, 2 * sizeof(float), MEM_ACTIVATIONS)) != NULL;
    if (!ok) {
        char why[512];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        model_free(m);
        return rs_error(RS_ERR_RUNTIME, "model of %zu parameters, batch %d: %s", (size_t)0 + pb / 4,
                        max_batch, why);
    }

    float *h = malloc(pb);
    if (!h) {
        model_free(m);
        return rs_error(RS_ERR_RUNTIME, "out of host memory for %zu parameters", m->nparams);
    }
    Rng r;
    rng_seed(&r, seed);
    for (int l = 0; l < m->nlayers; l++) {
        float bound = 1.0f / sqrtf((float)sizes[l]);
        size_t n = (size_t)sizes[l] * sizes[l + 1] + (size_t)sizes[l + 1];
        for (size_t i = 0; i < n; i++) h[m->off[l] + i] = (2.0f * rng_uniform(&r) - 1.0f) * bound;
    }
    int rc = device_h2d(dev, m->params, h, pb);
    free(h);
    if (rc) {
        model_free(m);
        return rc;
    }
    K(m)->fill(CTX(m), m->mom, 0.0f, m->nparams);
    K(m)->fill(CTX(m), m->grads, 0.0f, m->nparams);
    K(m)->fill(CTX(m), m->stats, 0.0f, 2);
    return K(m)->sync(CTX(m));
}

int model_forward(Model *m, int B) {
    if (B <= 0) return RS_OK;
    for (int l = 0; l < m->nlayers; l++) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        const float *W = m->params + m->off[l], *b = W + (size_t)in * out;
        RS_TRY(K(m)->gemm(CTX(m), 0, 0, B, out, in, 1.0f, m->act[l], in, W, out, 0.0f, m->act[l + 1], out));
        K(m)->bias_forward(CTX(m), m->act[l + 1], b, B, out);
        if (l + 1 < m->nlayers) K(m)->relu_forward(CTX(m), m->act[l + 1], m->act[l + 1], (size_t)B * out);
    }
    return RS_OK;
}

void model_loss(Model *m, int B) {
    if (B <= 0) return;
    K(m)->softmax_xent(CTX(m), m->act[m->nlayers], m->labels, B, m->sizes[m->nlayers], m->dbuf[0], m->stats);
}

int model_backward(Model *m, int B, LayerDoneFn done, void *arg) {
    if (B <= 0) {
        K(m)->fill(CTX(m), m->grads, 0.0f, m->nparams);
        for (int l = m->nlayers - 1; l >= 0; l--)
            if (done) RS_TRY(done(arg, l));
        return RS_OK;
    }
    int cur = 0;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        const float *W = m->params + m->off[l];
        float *dW = m->grads + m->off[l], *db = dW + (size_t)in * out;
        float *dY = m->dbuf[cur];
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

void model_sgd(Model *m, size_t lo, size_t hi, const Config *c, float grad_scale) {
    if (hi <= lo) return;
    K(m)->sgd_step(CTX(m), m->params + lo, m->grads + lo, m->mom + lo, hi - lo, (float)c->lr,
                   (float)c->momentum, (float)c->weight_decay, grad_scale);
}

int model_evaluate(Model *m, const float *x, const int *y, int n, double *acc, double *loss) {
    int in = m->sizes[0];
    float st[2], zero[2] = {0, 0};
    double tl = 0, tc = 0;
    for (int s = 0; s < n; s += m->max_batch) {
        int B = n - s < m->max_batch ? n - s : m->max_batch;
        RS_TRY(device_h2d(m->dev, m->stats, zero, sizeof zero));
        RS_TRY(device_h2d(m->dev, m->act[0], x + (size_t)s * in, (size_t)B * in * sizeof(float)));
        RS_TRY(device_h2d(m->dev, m->labels, y + s, (size_t)B * sizeof(int)));
        RS_TRY(model_forward(m, B));
        model_loss(m, B);
        RS_TRY(device_d2h(m->dev, st, m->stats, sizeof st));
        tl += st[0];
        tc += st[1];
    }
    RS_TRY(device_h2d(m->dev, m->stats, zero, sizeof zero));
    *acc = n ? tc / n : 0;
    *loss = n ? tl / n : 0;
    return RS_OK;
}
