/* model.c - what every model shares: its flat buffers and scratch, initial values, optimizer state, and the step's loss, optimizer and evaluation run the same way for every model */
#include "model.h"
#include "../base/err.h"
#include "../base/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define K(m) ((m)->dev->k)
#define CTX(m) ((m)->dev->kctx)

/* ---- buffers -------------------------------------------------------------------------------- */

void *model_scratch(Model *m, size_t bytes) {
    if (m->sizing) { /* counted only; setups never write through what they take */
        m->sized_bytes += bytes ? bytes : 4;
        return &m->sized_bytes;
    }
    if (m->nscratch == m->cap_scratch) {
        int cap = m->cap_scratch ? 2 * m->cap_scratch : 32;
        void **p = realloc(m->scratch, (size_t)cap * sizeof *p);
        if (p) m->scratch = p;
        size_t *b = p ? realloc(m->scratch_bytes, (size_t)cap * sizeof *b) : NULL;
        if (b) m->scratch_bytes = b;
        if (!p || !b) {
            rs_error(RS_ERR_RUNTIME, "out of host memory");
            return NULL;
        }
        m->cap_scratch = cap;
    }
    void *d = device_alloc(m->dev, bytes ? bytes : 4, MEM_ACTIVATIONS);
    if (d) {
        m->scratch[m->nscratch] = d;
        m->scratch_bytes[m->nscratch++] = bytes ? bytes : 4;
    }
    return d;
}

/* device_alloc, or in a dry run a count and a placeholder that is never dereferenced. */
static void *model_take(Model *m, size_t bytes, MemTag tag) {
    if (!m->sizing) return device_alloc(m->dev, bytes, tag);
    m->sized_bytes += bytes;
    return &m->sized_bytes;
}

int model_alloc_common(Model *m) {
    size_t pb = m->nparams * sizeof(float), rows = (size_t)model_out_rows(m, m->max_batch);
    if (m->params_paged && !m->sizing) {
        if (!(m->params = mem_pages_alloc(pb))) rs_error(RS_ERR_RUNTIME, "no address space for %zu bytes of paged parameters", pb);
    } else m->params = model_take(m, pb, MEM_PARAMS);
    if (m->grads_paged && !m->sizing) m->grads = m->params ? mem_pages_alloc(pb) : NULL;
    else m->grads = m->params ? model_take(m, pb, MEM_GRADS) : NULL;
    if (m->params && !m->grads && m->grads_paged) rs_error(RS_ERR_RUNTIME, "no address space for %zu bytes of paged gradients", pb);
    int ok = m->grads != NULL;
    if (ok && !m->no_optimizer) {
        ok = (m->mom = model_take(m, pb, MEM_OPTIMIZER)) != NULL;
        if (ok && m->adamw) ok = (m->mom2 = model_take(m, pb, MEM_OPTIMIZER)) != NULL;
    }
    if (ok) ok = (m->labels = model_scratch(m, rows * sizeof(int))) != NULL;
    if (ok) ok = (m->stats = model_scratch(m, 2 * sizeof(float))) != NULL;
    return ok ? RS_OK : RS_ERR_RUNTIME;
}

void model_fill_uniform(float *h, size_t n, float bound, Rng *r) {
    for (size_t i = 0; i < n; i++) h[i] = (2.0f * rng_uniform(r) - 1.0f) * bound;
}

void model_fill_normal(float *h, size_t n, float sd, Rng *r) {
    for (size_t i = 0; i < n; i += 2) {
        double a, b;
        rng_normal_pair(r, &a, &b);
        h[i] = (float)a * sd;
        if (i + 1 < n) h[i + 1] = (float)b * sd;
    }
}

/* ---- life cycle ----------------------------------------------------------------------------- */

int model_layer_of(const Model *m, size_t i) {
    int l = 0;
    while (l + 1 < m->nlayers && i >= m->off[l + 1]) l++;
    return l;
}

void model_free(Model *m) {
    if (!m->dev) return;
    Device *d = m->dev;
    size_t pb = m->nparams * sizeof(float);
    if (m->ops && m->ops->release) m->ops->release(m);
    if (m->params && m->params_paged) mem_pages_free(m->params, pb);
    else if (m->params) device_free(d, m->params, pb, MEM_PARAMS);
    if (m->grads && m->grads_paged) mem_pages_free(m->grads, pb);
    else if (m->grads) device_free(d, m->grads, pb, MEM_GRADS);
    if (m->mom) device_free(d, m->mom, pb, MEM_OPTIMIZER);
    if (m->mom2) device_free(d, m->mom2, pb, MEM_OPTIMIZER);
    for (int i = 0; i < m->nscratch; i++) device_free(d, m->scratch[i], m->scratch_bytes[i], MEM_ACTIVATIONS);
    free(m->scratch);
    free(m->scratch_bytes);
    memset(m, 0, sizeof *m);
}

/* ---- the step ------------------------------------------------------------------------------- */

int model_forward(Model *m, int B) {
    if (B <= 0) return RS_OK;
    RS_TRY(m->ops->forward(m, B));
    return model_need(m, -1);
}

void model_loss(Model *m, int B) {
    if (B <= 0) return;
    K(m)->softmax_xent(CTX(m), m->out, m->labels, model_out_rows(m, B), m->out_width, m->dbuf[0], m->stats);
}

int model_backward(Model *m, int B, LayerDoneFn done, void *arg) {
    if (B > 0) {
        RS_TRY(m->ops->backward(m, B, done, arg));
        return model_need(m, -1);
    }
    K(m)->fill(CTX(m), m->grads, 0.0f, m->nparams);
    for (int l = m->nlayers - 1; l >= 0; l--)
        if (done) RS_TRY(done(arg, l));
    return RS_OK;
}

void model_optimize(Model *m, size_t lo, size_t hi, const Config *c, float grad_scale, int t) {
    if (hi <= lo || !m->mom) return;
    if (m->adamw)
        K(m)->adamw_step(CTX(m), m->params + lo, m->grads + lo, m->mom + lo, m->mom2 + lo, hi - lo, (float)c->lr,
                         (float)c->beta1, (float)c->beta2, (float)c->eps, (float)c->weight_decay, grad_scale,
                         t < 1 ? 1 : t);
    else
        K(m)->sgd_step(CTX(m), m->params + lo, m->grads + lo, m->mom + lo, hi - lo, (float)c->lr, (float)c->momentum,
                       (float)c->weight_decay, grad_scale);
}

void model_optimizer_reset(Model *m) {
    if (m->mom) K(m)->fill(CTX(m), m->mom, 0.0f, m->nparams);
    if (m->mom2) K(m)->fill(CTX(m), m->mom2, 0.0f, m->nparams);
}

int model_evaluate(Model *m, const float *x, const int *y, int n, double *acc, double *loss) {
    size_t in = (size_t)m->in_width, per = (size_t)m->out_per_sample;
    float st[2], zero[2] = {0, 0};
    double tl = 0, tc = 0;
    for (int s = 0; s < n; s += m->max_batch) {
        int B = n - s < m->max_batch ? n - s : m->max_batch;
        RS_TRY(device_h2d(m->dev, m->stats, zero, sizeof zero));
        RS_TRY(device_h2d(m->dev, m->act[0], x + (size_t)s * in, (size_t)B * in * sizeof(float)));
        RS_TRY(device_h2d(m->dev, m->labels, y + (size_t)s * per, (size_t)B * per * sizeof(int)));
        RS_TRY(model_forward(m, B));
        model_loss(m, B);
        RS_TRY(device_d2h(m->dev, st, m->stats, sizeof st));
        tl += st[0];
        tc += st[1];
    }
    RS_TRY(device_h2d(m->dev, m->stats, zero, sizeof zero));
    double rows = (double)n * (double)per;
    *acc = n ? tc / rows : 0;
    *loss = n ? tl / rows : 0;
    return RS_OK;
}
