/* model_gpt.c - a GPT-2-style decoder: token and position embeddings, pre-LayerNorm blocks of causal multi-head attention and a GELU MLP, a final LayerNorm, the LM head tied to the token embedding */
/*
 * Shapes: B sequences of T tokens, N = B T rows, width C, H heads of D = C / H, vocabulary V.
 * Layers (parameter groups, in flat-buffer order; weights [in x out] as the MLP's):
 *   0        wte [V, C], wpe [T, C]                 (wte is also the LM head: its gradient is
 *                                                     complete only at the end of backward, so
 *                                                     it sits first, in the last bucket)
 *   1 + l    block l: ln1 gamma, beta [C]; qkv W [C, 3C], b [3C]; attention projection
 *            W [C, C], b [C]; ln2 gamma, beta [C]; fc W [C, 4C], b [4C]; fc projection
 *            W [4C, C], b [C]                     (12 C^2 + 13 C)
 *   1 + L    final LayerNorm gamma, beta [C]
 * A sample's loss is the mean cross-entropy over its T positions: model_loss sums over the
 * N rows and the backward scales the head's two products by 1/T (dbuf[0] is left as it is).
 */
#include "model.h"
#include "../base/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define K(m) ((m)->dev->k)
#define CTX(m) ((m)->dev->kctx)

/* One block's parameters (or gradients) inside the flat buffer. */
typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcpw, *fcpb;
} Block;

/* One block's activations, kept for the backward. */
typedef struct {
    float *res;              /* the block's input (the residual stream) [N, C] */
    float *ln1, *ln1m, *ln1r; /* [N, C], [N], [N] */
    float *qkvh;             /* q, k, v as heads [3, B, H, T, D] */
    float *att;              /* the causal softmax P [B H, T, T] */
    float *atty;             /* attention's output, heads merged [N, C] */
    float *resm;             /* the residual after attention [N, C] */
    float *ln2, *ln2m, *ln2r;
    float *fch, *fchg;       /* the MLP's hidden layer before GELU (then GELU's derivative there,
                              * written over it by the forward) and after GELU [N, 4C] */
} Acts;

typedef struct {
    int L, H, C, T, V, D;
    Acts *a;                 /* [L] */
    float *resf, *lnf, *lnfm, *lnfr;   /* the last block's output and the final LayerNorm */
    float *qkv, *yh;                   /* forward scratch [N, 3C], [N, C] */
    float *dR, *dtmp, *d4, *dyh, *dP, *dqkvh, *dqkv; /* backward scratch */
} Gpt;

static int gpt_text(const Config *c) { return !strncmp(c->data, "text:", 5); }
static int gpt_vocab(const Config *c) { return gpt_text(c) ? 256 : c->vocab; }

static int gpt_check(const Config *c) {
    if (c->n_layer < 1 || c->n_layer + 2 > MODEL_MAX_LAYERS)
        return rs_error(RS_ERR_INPUT, "--n-layer %d: must be in 1..%d", c->n_layer, MODEL_MAX_LAYERS - 2);
    if (c->n_head < 1) return rs_error(RS_ERR_INPUT, "--n-head %d: must be at least 1", c->n_head);
    if (c->n_embd < 1 || c->n_embd > 65536)
        return rs_error(RS_ERR_INPUT, "--n-embd %d: must be in 1..65536", c->n_embd);
    if (c->n_embd % c->n_head)
        return rs_error(RS_ERR_INPUT, "--n-embd %d is not divisible by --n-head %d (each head takes n-embd / n-head)",
                        c->n_embd, c->n_head);
    if (c->seq_len < 1 || c->seq_len > 65536) return rs_error(RS_ERR_INPUT, "--seq-len %d: must be in 1..65536", c->seq_len);
    if (c->vocab < 2 || c->vocab > (1 << 24)) return rs_error(RS_ERR_INPUT, "--vocab %d: must be in 2..16777216", c->vocab);
    if (gpt_text(c) && c->vocab != 256)
        return rs_error(RS_ERR_INPUT, "--vocab %d: --data %s is bytes, a vocabulary of 256 (leave --vocab out)", c->vocab,
                        c->data);
    if (!gpt_text(c) && strcmp(c->data, "synthetic"))
        return rs_error(RS_ERR_INPUT, "--data %s: --model gpt takes text:FILE or synthetic (tokens)", c->data);
    return RS_OK;
}

static size_t gpt_block_count(size_t C) { return 12 * C * C + 13 * C; }

static size_t gpt_count(const Config *c) {
    size_t C = (size_t)c->n_embd;
    return (size_t)gpt_vocab(c) * C + (size_t)c->seq_len * C + (size_t)c->n_layer * gpt_block_count(C) + 2 * C;
}

static int gpt_load_data(const Config *c, DataPair *out) {
    if (gpt_text(c)) return data_load_text(c->data + 5, c->seq_len, out);
    return data_make_tokens(c->vocab, c->seq_len, c->train_samples, c->eval_samples, (uint64_t)c->seed, out);
}

/* Block l's slices of base (params or grads). */
static Block gpt_block(const Model *m, float *base, int l) {
    const Gpt *g = m->impl;
    size_t C = (size_t)g->C;
    float *p = base + m->off[1 + l];
    Block b;
    b.ln1w = p, p += C;
    b.ln1b = p, p += C;
    b.qkvw = p, p += 3 * C * C;
    b.qkvb = p, p += 3 * C;
    b.projw = p, p += C * C;
    b.projb = p, p += C;
    b.ln2w = p, p += C;
    b.ln2b = p, p += C;
    b.fcw = p, p += 4 * C * C;
    b.fcb = p, p += 4 * C;
    b.fcpw = p, p += 4 * C * C;
    b.fcpb = p;
    return b;
}

static int gpt_setup(Model *m, const Config *c) {
    Gpt *g = calloc(1, sizeof *g);
    if (!(m->impl = g)) return rs_error(RS_ERR_RUNTIME, "out of memory");
    g->L = c->n_layer, g->H = c->n_head, g->C = c->n_embd, g->T = c->seq_len, g->V = gpt_vocab(c);
    g->D = g->C / g->H;
    if (!(g->a = calloc((size_t)g->L, sizeof *g->a))) return rs_error(RS_ERR_RUNTIME, "out of memory");
    size_t C = (size_t)g->C, V = (size_t)g->V, T = (size_t)g->T;
    m->nlayers = g->L + 2;
    m->keep_gathered = 1; /* layer 0: wte, read by the embedding and by the tied head */
    m->off[0] = 0;
    m->off[1] = V * C + T * C;
    for (int l = 0; l < g->L; l++) m->off[2 + l] = m->off[1 + l] + gpt_block_count(C);
    m->nparams = m->off[1 + g->L] + 2 * C;
    m->off[m->nlayers] = m->nparams;
    m->in_width = g->T;
    m->out_per_sample = g->T;
    m->out_width = g->V;
    RS_TRY(model_alloc_common(m));
    size_t N = (size_t)m->max_batch * T, BH = (size_t)m->max_batch * (size_t)g->H, f = sizeof(float);
#define TAKE(p, n) \
    if (!((p) = model_scratch(m, (size_t)(n) * f))) return RS_ERR_RUNTIME
    TAKE(m->act[0], N);
    for (int l = 0; l < g->L; l++) {
        Acts *a = &g->a[l];
        TAKE(a->res, N * C);
        TAKE(a->ln1, N * C);
        TAKE(a->ln1m, N);
        TAKE(a->ln1r, N);
        TAKE(a->qkvh, 3 * N * C);
        TAKE(a->att, BH * T * T);
        TAKE(a->atty, N * C);
        TAKE(a->resm, N * C);
        TAKE(a->ln2, N * C);
        TAKE(a->ln2m, N);
        TAKE(a->ln2r, N);
        TAKE(a->fch, 4 * N * C);
        TAKE(a->fchg, 4 * N * C);
    }
    TAKE(g->resf, N * C);
    TAKE(g->lnf, N * C);
    TAKE(g->lnfm, N);
    TAKE(g->lnfr, N);
    TAKE(m->out, N * V);
    TAKE(m->dbuf[0], N * V);
    TAKE(g->qkv, 3 * N * C);
    TAKE(g->yh, N * C);
    TAKE(g->dR, N * C);
    TAKE(g->dtmp, N * C);
    TAKE(g->d4, 4 * N * C);
    TAKE(g->dyh, N * C);
    TAKE(g->dP, BH * T * T);
    TAKE(g->dqkvh, 3 * N * C);
    TAKE(g->dqkv, 3 * N * C);
#undef TAKE
    return RS_OK;
}

/* GPT-2's: weights N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 L)), biases 0,
 * LayerNorm gamma 1 and beta 0. */
static void gpt_init(const Model *m, float *h, Rng *r) {
    const Gpt *g = m->impl;
    size_t C = (size_t)g->C;
    float sd = 0.02f, sdr = 0.02f / sqrtf(2.0f * (float)g->L);
    memset(h, 0, m->nparams * sizeof *h);
    model_fill_normal(h, m->off[1], sd, r); /* wte, wpe */
    for (int l = 0; l < g->L; l++) {
        Block b = gpt_block(m, h, l);
        for (size_t i = 0; i < C; i++) b.ln1w[i] = b.ln2w[i] = 1.0f;
        model_fill_normal(b.qkvw, 3 * C * C, sd, r);
        model_fill_normal(b.projw, C * C, sdr, r);
        model_fill_normal(b.fcw, 4 * C * C, sd, r);
        model_fill_normal(b.fcpw, 4 * C * C, sdr, r);
    }
    float *lnf = h + m->off[1 + g->L];
    for (size_t i = 0; i < C; i++) lnf[i] = 1.0f;
}

static const int *gpt_tokens(const Model *m) { return (const int *)(const void *)m->act[0]; }

/* Y [N, out] = X [N, in] W [in, out] + b */
static int gpt_linear(Model *m, float *Y, const float *X, const float *W, const float *b, int N, int in, int out) {
    RS_TRY(K(m)->gemm(CTX(m), 0, 0, N, out, in, 1.0f, X, in, W, out, 0.0f, Y, out));
    K(m)->bias_forward(CTX(m), Y, b, N, out);
    return RS_OK;
}

/* dW = X^T dY, db = column sums of dY, and dX = dY W^T. */
static int gpt_linear_back(Model *m, float *dX, float *dW, float *db, const float *dY, const float *X, const float *W,
                           int N, int in, int out) {
    RS_TRY(K(m)->gemm(CTX(m), 1, 0, in, out, N, 1.0f, X, in, dY, out, 0.0f, dW, out));
    K(m)->bias_backward(CTX(m), db, dY, N, out);
    return K(m)->gemm(CTX(m), 0, 1, N, in, out, 1.0f, dY, out, W, out, 0.0f, dX, in);
}

static int gpt_forward(Model *m, int B) {
    Gpt *g = m->impl;
    const KernelOps *k = K(m);
    KernelCtx *x = CTX(m);
    int T = g->T, C = g->C, H = g->H, D = g->D, N = B * T, BH = B * H;
    long long TD = (long long)T * D, TT = (long long)T * T, NC = (long long)N * C;
    const float *wte = m->params, *wpe = m->params + (size_t)g->V * C;
    float *res = g->L ? g->a[0].res : g->resf;
    RS_TRY(model_need(m, 0));
    k->embedding_forward(x, res, gpt_tokens(m), wte, wpe, B, T, C, g->V);
    for (int l = 0; l < g->L; l++) {
        Acts *a = &g->a[l];
        Block p = gpt_block(m, m->params, l);
        RS_TRY(model_need(m, 1 + l));
        float *next = l + 1 < g->L ? g->a[l + 1].res : g->resf;
        k->layernorm_forward(x, a->ln1, a->ln1m, a->ln1r, a->res, p.ln1w, p.ln1b, N, C);
        RS_TRY(gpt_linear(m, g->qkv, a->ln1, p.qkvw, p.qkvb, N, C, 3 * C));
        k->heads_split(x, a->qkvh, g->qkv, B, T, 3, H, D);
        const float *q = a->qkvh, *kk = a->qkvh + NC, *v = a->qkvh + 2 * NC;
        RS_TRY(k->gemm_strided_batched(x, 0, 1, T, T, D, 1.0f, q, D, TD, kk, D, TD, 0.0f, a->att, T, TT, BH));
        k->softmax_causal_forward(x, a->att, a->att, BH, T, 1.0f / sqrtf((float)D));
        RS_TRY(k->gemm_strided_batched(x, 0, 0, T, D, T, 1.0f, a->att, T, TT, v, D, TD, 0.0f, g->yh, D, TD, BH));
        k->heads_merge(x, a->atty, g->yh, B, T, 1, H, D);
        RS_TRY(gpt_linear(m, a->resm, a->atty, p.projw, p.projb, N, C, C));
        k->add(x, a->resm, a->resm, a->res, (size_t)NC);
        k->layernorm_forward(x, a->ln2, a->ln2m, a->ln2r, a->resm, p.ln2w, p.ln2b, N, C);
        RS_TRY(gpt_linear(m, a->fch, a->ln2, p.fcw, p.fcb, N, C, 4 * C));
        k->gelu_forward(x, a->fchg, a->fch, a->fch, (size_t)NC * 4);
        RS_TRY(gpt_linear(m, next, a->fchg, p.fcpw, p.fcpb, N, 4 * C, C));
        k->add(x, next, next, a->resm, (size_t)NC);
    }
    const float *lnf = m->params + m->off[1 + g->L];
    RS_TRY(model_need(m, 1 + g->L));
    k->layernorm_forward(x, g->lnf, g->lnfm, g->lnfr, g->resf, lnf, lnf + C, N, C);
    RS_TRY(model_need(m, 0)); /* the tied head: kept gathered (keep_gathered) */
    return k->gemm(x, 0, 1, N, g->V, C, 1.0f, g->lnf, C, wte, C, 0.0f, m->out, g->V);
}

static int gpt_backward(Model *m, int B, LayerDoneFn done, void *arg) {
    Gpt *g = m->impl;
    const KernelOps *k = K(m);
    KernelCtx *x = CTX(m);
    int T = g->T, C = g->C, H = g->H, D = g->D, V = g->V, N = B * T, BH = B * H;
    long long TD = (long long)T * D, TT = (long long)T * T, NC = (long long)N * C;
    const float *wte = m->params;
    float *dwte = m->grads, *dwpe = m->grads + (size_t)V * C, *dlogits = m->dbuf[0];
    /* the head, scaled by 1/T: a sample's loss is the mean over its positions */
    float inv_t = 1.0f / (float)T;
    RS_TRY(model_need(m, 0));
    RS_TRY(k->gemm(x, 1, 0, V, C, N, inv_t, dlogits, V, g->lnf, C, 0.0f, dwte, C));
    RS_TRY(k->gemm(x, 0, 0, N, C, V, inv_t, dlogits, V, wte, C, 0.0f, g->dtmp, C));
    const float *lnf = m->params + m->off[1 + g->L];
    float *dlnf = m->grads + m->off[1 + g->L];
    RS_TRY(model_need(m, 1 + g->L));
    k->fill(x, g->dR, 0.0f, (size_t)NC);
    k->layernorm_backward(x, g->dR, dlnf, dlnf + C, g->dtmp, g->resf, lnf, g->lnfm, g->lnfr, N, C);
    if (done) RS_TRY(done(arg, 1 + g->L));
    for (int l = g->L - 1; l >= 0; l--) {
        Acts *a = &g->a[l];
        Block p = gpt_block(m, m->params, l), d = gpt_block(m, m->grads, l);
        RS_TRY(model_need(m, 1 + l));
        /* the MLP: dR is the gradient of the block's output */
        RS_TRY(gpt_linear_back(m, g->d4, d.fcpw, d.fcpb, g->dR, a->fchg, p.fcpw, N, 4 * C, C));
        k->mul(x, g->d4, g->d4, a->fch, (size_t)NC * 4); /* through GELU: its derivative, kept */
        RS_TRY(gpt_linear_back(m, g->dtmp, d.fcw, d.fcb, g->d4, a->ln2, p.fcw, N, C, 4 * C));
        k->layernorm_backward(x, g->dR, d.ln2w, d.ln2b, g->dtmp, a->resm, p.ln2w, a->ln2m, a->ln2r, N, C);
        /* attention: dR is now the gradient of resm */
        RS_TRY(gpt_linear_back(m, g->dtmp, d.projw, d.projb, g->dR, a->atty, p.projw, N, C, C));
        k->heads_split(x, g->dyh, g->dtmp, B, T, 1, H, D);
        const float *q = a->qkvh, *kk = a->qkvh + NC, *v = a->qkvh + 2 * NC;
        float *dq = g->dqkvh, *dk = g->dqkvh + NC, *dv = g->dqkvh + 2 * NC;
        RS_TRY(k->gemm_strided_batched(x, 0, 1, T, T, D, 1.0f, g->dyh, D, TD, v, D, TD, 0.0f, g->dP, T, TT, BH));
        RS_TRY(k->gemm_strided_batched(x, 1, 0, T, D, T, 1.0f, a->att, T, TT, g->dyh, D, TD, 0.0f, dv, D, TD, BH));
        k->softmax_causal_backward(x, g->dP, g->dP, a->att, BH, T, 1.0f / sqrtf((float)D));
        RS_TRY(k->gemm_strided_batched(x, 0, 0, T, D, T, 1.0f, g->dP, T, TT, kk, D, TD, 0.0f, dq, D, TD, BH));
        RS_TRY(k->gemm_strided_batched(x, 1, 0, T, D, T, 1.0f, g->dP, T, TT, q, D, TD, 0.0f, dk, D, TD, BH));
        k->heads_merge(x, g->dqkv, g->dqkvh, B, T, 3, H, D);
        RS_TRY(gpt_linear_back(m, g->dtmp, d.qkvw, d.qkvb, g->dqkv, a->ln1, p.qkvw, N, C, 3 * C));
        k->layernorm_backward(x, g->dR, d.ln1w, d.ln1b, g->dtmp, a->res, p.ln1w, a->ln1m, a->ln1r, N, C);
        if (done) RS_TRY(done(arg, 1 + l));
    }
    /* the embeddings: wte's head gradient is already in dwte */
    RS_TRY(model_need(m, 0));
    k->embedding_backward(x, dwte, dwpe, g->dR, gpt_tokens(m), B, T, C, V);
    if (done) RS_TRY(done(arg, 0));
    return RS_OK;
}

static void gpt_release(Model *m) {
    Gpt *g = m->impl;
    if (g) free(g->a);
    free(g);
    m->impl = NULL;
}

static const ModelOps gpt_ops = {
    .name = "gpt",
    .check = gpt_check,
    .count = gpt_count,
    .load_data = gpt_load_data,
    .setup = gpt_setup,
    .init = gpt_init,
    .forward = gpt_forward,
    .backward = gpt_backward,
    .release = gpt_release,
};

const ModelOps *model_gpt(void) { return &gpt_ops; }
