/* models.c - the model table: finds a model by name, checks its options, sizes it, and creates it (buffers, initial values, optimizer state) */
#include "model.h"
#include "../base/err.h"

#include <stdlib.h>
#include <string.h>

#define K(m) ((m)->dev->k)
#define CTX(m) ((m)->dev->kctx)

/* The models, one file each. */
const ModelOps *model_mlp(void);
const ModelOps *model_lenet(void);
const ModelOps *model_gpt(void);

static const ModelOps *model_table(int i) {
    switch (i) {
    case 0: return model_mlp();
    case 1: return model_lenet();
    case 2: return model_gpt();
    default: return NULL;
    }
}

const char *model_names(void) { return "mlp | lenet | gpt"; }

const ModelOps *model_find(const char *name) {
    for (int i = 0; model_table(i); i++)
        if (!strcmp(model_table(i)->name, name)) return model_table(i);
    rs_error(RS_ERR_INPUT, "--model '%s': expected %s", name, model_names());
    return NULL;
}

int model_check(const Config *c) {
    const ModelOps *o = model_find(c->model);
    if (!o) return RS_ERR_INPUT;
    if (strcmp(c->optimizer, "sgd") && strcmp(c->optimizer, "adamw"))
        return rs_error(RS_ERR_INPUT, "--optimizer '%s': expected sgd or adamw", c->optimizer);
    return o->check(c);
}

size_t model_param_count(const Config *c) {
    const ModelOps *o = model_find(c->model);
    return o ? o->count(c) : 0;
}

int model_load_data(const Config *c, DataPair *out) {
    memset(out, 0, sizeof *out);
    RS_TRY(model_check(c));
    return model_find(c->model)->load_data(c, out);
}

int model_estimate(const Config *c, int max_batch, int with_optimizer, size_t *bytes, size_t *nparams,
                   int *in_width) {
    *bytes = *nparams = 0;
    *in_width = 0;
    RS_TRY(model_check(c));
    Model m;
    memset(&m, 0, sizeof m);
    m.ops = model_find(c->model);
    m.sizing = 1;
    m.max_batch = max_batch < 1 ? 1 : max_batch;
    m.adamw = !strcmp(c->optimizer, "adamw");
    m.no_optimizer = !with_optimizer;
    m.out_per_sample = 1;
    int rc = m.ops->setup(&m, c);
    *bytes = m.sized_bytes + m.nparams * sizeof(float); /* model_create's host copy for the init */
    *nparams = m.nparams;
    *in_width = m.in_width;
    if (m.ops->release) m.ops->release(&m);
    return rc == RS_OK ? RS_OK : rs_error(RS_ERR_RUNTIME, "--model %s: sizing failed: %s", c->model, rs_errmsg());
}

int model_create(Model *m, Device *dev, const Config *c, int max_batch, int flags) {
    memset(m, 0, sizeof *m);
    RS_TRY(model_check(c));
    m->ops = model_find(c->model);
    m->dev = dev;
    m->max_batch = max_batch < 1 ? 1 : max_batch;
    m->adamw = !strcmp(c->optimizer, "adamw");
    m->no_optimizer = !(flags & MODEL_OPTIMIZER);
    m->grads_paged = (flags & (MODEL_GRADS_PAGED | MODEL_PARAMS_PAGED)) != 0;
    m->params_paged = (flags & MODEL_PARAMS_PAGED) != 0;
    if (m->grads_paged && !dev->host_visible)
        return rs_error(RS_ERR_INPUT, "--model %s: paged gradients need a device whose memory the host sees (cpu)", c->model);
    m->out_per_sample = 1;
    int rc = m->ops->setup(m, c);
    float *h = NULL;
    if (rc == RS_OK && !(h = malloc(m->nparams * sizeof(float) + 4)))
        rc = rs_error(RS_ERR_RUNTIME, "out of host memory for %zu parameters", m->nparams);
    if (rc == RS_OK) {
        Rng r;
        rng_seed(&r, (uint64_t)c->seed);
        m->ops->init(m, h, &r);
        rc = device_h2d(dev, m->params, h, m->nparams * sizeof(float));
    }
    free(h);
    if (rc != RS_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        size_t np = m->nparams;
        model_free(m);
        return rs_error(rc, "--model %s of %zu parameters, batch %d: %s", c->model, np, max_batch, why);
    }
    model_optimizer_reset(m);
    if (!m->grads_paged) K(m)->fill(CTX(m), m->grads, 0.0f, m->nparams); /* paged: zeros, and none resident */
    K(m)->fill(CTX(m), m->stats, 0.0f, 2);
    return K(m)->sync(CTX(m));
}

int model_init(Model *m, Device *dev, const int *sizes, int nsizes, int max_batch, uint64_t seed) {
    Config c;
    config_defaults(&c);
    if (nsizes < 2 || nsizes > CONFIG_MAX_LAYERS) return rs_error(RS_ERR_INPUT, "model: %d sizes (2 to %d)", nsizes, CONFIG_MAX_LAYERS);
    memcpy(c.layers, sizes, (size_t)nsizes * sizeof *sizes);
    c.nlayers = nsizes;
    c.seed = (long long)seed;
    return model_create(m, dev, &c, max_batch, 1);
}
