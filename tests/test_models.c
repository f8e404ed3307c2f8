/* test_models.c - the models (mlp, lenet, gpt): whole-model gradients against finite differences, layer hand-over order, data (text, synthetic tokens), AdamW's state, bad input, and training on real data */
#include "../base/err.h"
#include "../base/mem.h"
#include "../model/model.h"
#include "../engine/report.h"
#include "../experiments/train.h"
#include "../kernels/ops.h"
#include "test.h"
#include "../engine/config_check.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ringside-test-models-XXXXXX";

static const char *path(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* Writes n bytes of text (a repeating, learnable pattern of words from seed) to p. */
static void write_text(const char *p, size_t n, unsigned seed) {
    static const char *words[] = {"the ", "ring ", "sums ", "every ", "gradient ", "while ", "a ", "server ",
                                  "waits ", "for ", "all ", "ranks. ", "buckets ", "flow ", "in ", "order "};
    FILE *f = fopen(p, "wb");
    if (!f) return;
    size_t k = 0;
    unsigned s = seed;
    while (k < n) {
        s = s * 1103515245u + 12345u;
        const char *w = words[(s >> 16) % 16];
        for (const char *c = w; *c && k < n; c++, k++) fputc(*c, f);
    }
    fclose(f);
}

static Config small(const char *model) {
    Config c;
    config_defaults(&c);
    snprintf(c.model, sizeof c.model, "%s", model);
    c.seed = 5;
    return c;
}

/* ---- gradients -------------------------------------------------------------------------------- */

/* Random inputs and labels for B samples of m (tokens for gpt). */
static void fill_batch(Model *m, const Config *c, int B, unsigned seed) {
    size_t in = (size_t)B * model_in_width(m), rows = (size_t)model_out_rows(m, B);
    float *x = malloc(in * sizeof *x);
    int *y = malloc(rows * sizeof *y);
    unsigned s = seed;
    for (size_t i = 0; i < in; i++) {
        s = s * 1664525u + 1013904223u;
        if (!strcmp(c->model, "gpt")) ((int *)(void *)x)[i] = (int)((s >> 8) % (unsigned)model_out_width(m));
        else x[i] = (float)((s >> 8) & 0xffff) / 65536.0f;
    }
    for (size_t i = 0; i < rows; i++) {
        s = s * 1664525u + 1013904223u;
        y[i] = (int)((s >> 8) % (unsigned)model_out_width(m));
    }
    device_h2d(m->dev, m->act[0], x, in * sizeof *x);
    device_h2d(m->dev, m->labels, y, rows * sizeof *y);
    free(x);
    free(y);
}

/* The loss backward differentiates: the summed per-sample loss (gpt: positions averaged), from
 * the logits in double, so that the sum's rounding does not swamp the differences. */
static double model_f(Model *m, int B) {
    int rows = model_out_rows(m, B), V = model_out_width(m);
    model_forward(m, B);
    float *z = malloc((size_t)rows * V * sizeof *z);
    int *y = malloc((size_t)rows * sizeof *y);
    device_d2h(m->dev, z, model_logits(m), (size_t)rows * V * sizeof *z);
    device_d2h(m->dev, y, m->labels, (size_t)rows * sizeof *y);
    double f = 0;
    for (int r = 0; r < rows; r++) {
        const float *zr = z + (size_t)r * V;
        double mx = zr[0], s = 0;
        for (int j = 1; j < V; j++) mx = zr[j] > mx ? zr[j] : mx;
        for (int j = 0; j < V; j++) s += exp(zr[j] - mx);
        f += log(s) + mx - zr[y[r]];
    }
    free(z);
    free(y);
    return f / (double)model_out_rows(m, 1);
}

typedef struct {
    int next, bad;
} DoneOrder;

static int done_order(void *arg, int l) {
    DoneOrder *d = arg;
    if (l != d->next) d->bad++;
    d->next = l - 1;
    return 0;
}

/* Checks every layer's gradient at up to `per` elements against central differences (step
 * 1e-3): each element within tol relative (to at least 1e-2), each layer's vector of them at a
 * cosine of at least 0.995 with the gradient's. With
 * bias > 0, every layer's bias (W then b, as the mlp and lenet lay them out) is set to it, so
 * that every ReLU is active and the differences cross no kink. */
static void grad_check(Config *c, int B, int per, double tol, float bias) {
    Device dev;
    CHECK(device_open(&dev, "cpu", 0, NULL) == RS_OK);
    Model m;
    int rc = model_create(&m, &dev, c, B, 1);
    CHECK_MSG(rc == RS_OK, "%s", rs_errmsg());
    if (rc) return;
    CHECK(m.nparams == model_param_count(c) && m.off[0] == 0 && m.off[m.nlayers] == m.nparams);
    if (bias > 0) {
        float *h = malloc(m.nparams * sizeof *h);
        device_d2h(&dev, h, m.params, m.nparams * sizeof *h);
        static const size_t lenet_bias[5] = {6, 16, 120, 84, 10};
        for (int l = 0; l < m.nlayers; l++) {
            size_t nb = !strcmp(c->model, "mlp") ? (size_t)m.sizes[l + 1] : lenet_bias[l];
            for (size_t i = m.off[l + 1] - nb; i < m.off[l + 1]; i++) h[i] = bias;
        }
        device_h2d(&dev, m.params, h, m.nparams * sizeof *h);
        free(h);
    }
    fill_batch(&m, c, B, 17);
    model_forward(&m, B);
    model_loss(&m, B);
    DoneOrder d = {m.nlayers - 1, 0};
    CHECK(model_backward(&m, B, done_order, &d) == RS_OK);
    CHECK(d.bad == 0 && d.next == -1);
    size_t n = m.nparams;
    float *g = malloc(n * sizeof *g), *p = malloc(n * sizeof *p);
    device_d2h(&dev, g, m.grads, n * sizeof *g);
    device_d2h(&dev, p, m.params, n * sizeof *p);
    double worst = 0, worst_cos = 1;
    size_t worst_i = 0;
    int checked = 0, worst_l = 0;
    for (int l = 0; l < m.nlayers; l++) {
        size_t lo = m.off[l], hi = m.off[l + 1], step = (hi - lo) / (size_t)per + 1;
        double dot = 0, nf = 0, ng = 0; /* the layer's differences and gradients as vectors */
        for (size_t i = lo + (size_t)l % step; i < hi; i += step) {
            float keep = p[i], h = 1e-3f;
            p[i] = keep + h;
            device_h2d(&dev, m.params + i, p + i, sizeof *p);
            double fp = model_f(&m, B);
            p[i] = keep - h;
            device_h2d(&dev, m.params + i, p + i, sizeof *p);
            double fm = model_f(&m, B);
            p[i] = keep;
            device_h2d(&dev, m.params + i, p + i, sizeof *p);
            double fd = (fp - fm) / (2.0 * h), err = fabs(fd - g[i]) / (fabs(fd) > 1e-2 ? fabs(fd) : 1e-2);
            if (err > worst) worst = err, worst_i = i;
            dot += fd * g[i], nf += fd * fd, ng += (double)g[i] * g[i];
            checked++;
        }
        double cosine = nf > 0 && ng > 0 ? dot / sqrt(nf * ng) : 1;
        if (cosine < worst_cos) worst_cos = cosine, worst_l = l;
    }
    CHECK_MSG(worst_cos >= 0.995, "%s: layer %d's gradients and differences have cosine %.4f", c->model, worst_l,
              worst_cos);
    CHECK_MSG(worst <= tol, "%s: worst relative error %.3g at element %zu (layer %d) of %d checked", c->model, worst,
              worst_i, model_layer_of(&m, worst_i), checked);
    printf("  %s: %zu parameters, %d layers, %d checked, worst relative error %.2g, lowest cosine %.5f\n", c->model, n,
           m.nlayers, checked, worst, worst_cos);
    free(g);
    free(p);
    model_free(&m);
    device_close(&dev);
}

static void test_grad_mlp(void) {
    Config c = small("mlp");
    int L[] = {6, 5, 4};
    memcpy(c.layers, L, sizeof L);
    c.nlayers = 3;
    grad_check(&c, 3, 40, 2e-2, 0);
}

static void test_grad_lenet(void) {
    Config c = small("lenet");
    grad_check(&c, 2, 30, 0.15, 0.5f); /* float noise and max-pool switches: see the cosine */
}

static void test_grad_gpt(void) {
    Config c = small("gpt");
    c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.seq_len = 5, c.vocab = 11;
    grad_check(&c, 2, 40, 2e-2, 0);
}

/* The layer views the engine's buckets rely on: the tied embedding is in layer 0, which backward
 * completes last. */
static void test_counts(void) {
    Config c = small("gpt");
    c.n_layer = 3, c.n_head = 4, c.n_embd = 16, c.seq_len = 7, c.vocab = 50;
    size_t C = 16;
    CHECK(model_param_count(&c) == 50 * C + 7 * C + 3 * (12 * C * C + 13 * C) + 2 * C);
    snprintf(c.data, sizeof c.data, "text:x");
    c.vocab = 256;
    CHECK(model_param_count(&c) == 256 * C + 7 * C + 3 * (12 * C * C + 13 * C) + 2 * C);
    Config l = small("lenet");
    CHECK(model_param_count(&l) == 156 + 2416 + 48120 + 10164 + 850); /* 61,706 as LeNet-5's */
    Config mlp = small("mlp");
    CHECK(config_param_count(&mlp) == 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10);
}

/* ---- the dry run's estimate: what model_create allocates, byte for byte ------------------------ */

static void test_estimate(void) {
    Device dev;
    device_open(&dev, "cpu", 0, NULL);
    const char *names[3] = {"mlp", "lenet", "gpt"};
    for (int i = 0; i < 3; i++)
        for (int v = 0; v < 3; v++) {
            Config c = small(names[i]);
            snprintf(c.optimizer, sizeof c.optimizer, "%s", v == 1 ? "adamw" : "sgd");
            size_t est = 0, np = 0;
            int in_width = 0;
            CHECK(model_estimate(&c, 5, v < 2, &est, &np, &in_width) == RS_OK);
            mem_reset();
            Model m;
            CHECK(model_create(&m, &dev, &c, 5, v < 2) == RS_OK);
            MemStats st;
            mem_snapshot(&st);
            CHECK_MSG(est == st.peak_total + m.nparams * sizeof(float) && np == m.nparams && in_width == m.in_width,
                      "%s, %s: estimated %zu bytes, %zu parameters, width %d; allocated %zu (+ %zu host copy), %zu, %d",
                      names[i], c.optimizer, est, np, in_width, st.peak_total, m.nparams * sizeof(float), m.nparams,
                      m.in_width);
            model_free(&m);
        }
    device_close(&dev);
}

/* ---- AdamW's state ------------------------------------------------------------------------------ */

static void test_optimizer_state(void) {
    Device dev;
    device_open(&dev, "cpu", 0, NULL);
    Config c = small("lenet");
    for (int v = 0; v < 3; v++) {
        snprintf(c.optimizer, sizeof c.optimizer, "%s", v == 0 ? "sgd" : "adamw");
        mem_reset();
        Model m;
        CHECK(model_create(&m, &dev, &c, 4, v < 2) == RS_OK);
        MemStats st;
        mem_snapshot(&st);
        size_t P = m.nparams * sizeof(float), want = v == 0 ? P : v == 1 ? 2 * P : 0;
        CHECK_MSG(st.cur[MEM_OPTIMIZER] == want, "optimizer %s, state %s: %zu bytes (want %zu)", c.optimizer,
                  v < 2 ? "here" : "on a server", st.cur[MEM_OPTIMIZER], want);
        model_free(&m);
    }
    /* one AdamW step equals the rule written out (torch.optim.AdamW), t = 1 */
    snprintf(c.optimizer, sizeof c.optimizer, "adamw");
    c.lr = 0.01, c.weight_decay = 0.1;
    Model m;
    CHECK(model_create(&m, &dev, &c, 2, 1) == RS_OK);
    fill_batch(&m, &c, 2, 3);
    model_forward(&m, 2);
    model_loss(&m, 2);
    model_backward(&m, 2, NULL, NULL);
    size_t n = m.nparams;
    float *p0 = malloc(n * 4), *g = malloc(n * 4), *p1 = malloc(n * 4);
    device_d2h(&dev, p0, m.params, n * 4);
    device_d2h(&dev, g, m.grads, n * 4);
    model_optimize(&m, 0, n, &c, 0.5f, 1);
    device_d2h(&dev, p1, m.params, n * 4);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double gg = g[i] * 0.5, mm = 0.1 * gg, vv = 0.001 * gg * gg;
        double want = p0[i] * (1 - 0.01 * 0.1) - 0.01 / 0.1 * mm / (sqrt(vv) / sqrt(0.001) + 1e-8);
        double e = fabs(want - p1[i]) / (fabs(want) > 1e-3 ? fabs(want) : 1e-3);
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst < 1e-4, "AdamW step: worst relative error %.3g", worst);
    free(p0);
    free(g);
    free(p1);
    model_free(&m);
    device_close(&dev);
}

/* ---- data --------------------------------------------------------------------------------------- */

static void test_text(void) {
    const char *p = path("t.txt");
    write_text(p, 1000, 1);
    DataPair d;
    CHECK(data_load_text(p, 16, &d) == RS_OK);
    /* eval: the last 100 bytes, windows of 17 bytes 16 apart: 99 / 16 = 6; train: 899 / 16 = 56 */
    CHECK(d.train.n == 56 && d.eval.n == 6 && d.train.dim == 16 && d.train.ylen == 16 && d.train.classes == 256);
    FILE *f = fopen(p, "rb");
    unsigned char buf[1000];
    CHECK(f && fread(buf, 1, 1000, f) == 1000);
    if (f) fclose(f);
    int ok = 1;
    for (int i = 0; i < d.train.n && ok; i++)
        for (int t = 0; t < 16; t++)
            ok &= dataset_tokens(&d.train, i)[t] == buf[i * 16 + t] && d.train.y[i * 16 + t] == buf[i * 16 + t + 1];
    for (int t = 0; t < 16; t++) ok &= dataset_tokens(&d.eval, 0)[t] == buf[900 + t];
    CHECK(ok);
    datapair_free(&d);
    /* bad files: named, exit status 2 */
    const char *e = path("empty.txt");
    fclose(fopen(e, "wb"));
    CHECK(data_load_text(e, 16, &d) == RS_ERR_INPUT && strstr(rs_errmsg(), "empty") && strstr(rs_errmsg(), e));
    CHECK(data_load_text(path("missing.txt"), 16, &d) == RS_ERR_INPUT && strstr(rs_errmsg(), "missing.txt"));
    CHECK(data_load_text(p, 1000, &d) == RS_ERR_INPUT && strstr(rs_errmsg(), "--seq-len 1000"));
    CHECK(data_load_text(p, 600, &d) == RS_ERR_INPUT && strstr(rs_errmsg(), "two sequences"));
    CHECK(data_load_text(p, 499, &d) == RS_OK && d.train.n == 1 && d.eval.n == 1);
    datapair_free(&d);
}

static void test_tokens(void) {
    DataPair a, b;
    CHECK(data_make_tokens(1000, 12, 50, 10, 9, &a) == RS_OK && data_make_tokens(1000, 12, 50, 10, 9, &b) == RS_OK);
    CHECK(a.train.n == 50 && a.eval.n == 10 && a.train.ylen == 12 && a.train.classes == 1000);
    CHECK(!memcmp(a.train.x, b.train.x, 50 * 12 * 4) && !memcmp(a.eval.y, b.eval.y, 10 * 12 * 4));
    int ok = 1;
    for (int i = 0; i < 50; i++)
        for (int t = 0; t < 12; t++) {
            int x = dataset_tokens(&a.train, i)[t], y = a.train.y[i * 12 + t];
            ok &= x >= 0 && x < 1000 && y >= 0 && y < 1000 && (t == 11 || dataset_tokens(&a.train, i)[t + 1] == y);
        }
    CHECK(ok);
    datapair_free(&a);
    datapair_free(&b);
    CHECK(data_make_tokens(0, 12, 50, 10, 9, &a) == RS_ERR_INPUT);
}

/* ---- bad input: exit 2 naming the option, no report ---------------------------------------------- */

static int train(const char *report, ...) {
    char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, report);
    for (const char *a; (a = va_arg(ap, const char *)) && argc < 58;) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc++] = "--report";
    argv[argc++] = (char *)report;
    argv[argc++] = "--quiet";
    argv[argc] = NULL;
    mem_reset();
    return train_main(argc, argv);
}

/* MODEL_GRADS_PAGED (zero's stage 2): the gradients are counted nowhere and none is resident
 * before backward; backward makes the pages it writes resident, with the same gradients as an
 * ordinary buffer; released pages are gone and read as zeros; a device the host cannot see is
 * refused. */
static void test_paged_grads(void) {
    Device dev;
    CHECK(device_open(&dev, "cpu", 0, NULL) == RS_OK);
    Config c = small("mlp");
    Model a, p;
    MemStats before, after;
    CHECK(model_create(&a, &dev, &c, 4, MODEL_OPTIMIZER) == RS_OK);
    mem_snapshot(&before);
    CHECK(model_create(&p, &dev, &c, 4, MODEL_GRADS_PAGED) == RS_OK);
    mem_snapshot(&after);
    CHECK(p.grads_paged && !p.mom && after.cur[MEM_GRADS] == before.cur[MEM_GRADS]);
    size_t bytes = p.nparams * sizeof(float), pg = mem_page_bytes(), np = (bytes + pg - 1) / pg, res = 0;
    unsigned char *v = calloc(np, 1);
    CHECK(mem_pages_resident(p.grads, bytes, v) == 0);
    for (size_t i = 0; i < np; i++) res += v[i];
    CHECK_MSG(res == 0, "%zu of %zu pages resident before backward", res, np);
    Model *both[2] = {&a, &p};
    for (int k = 0; k < 2; k++) {
        fill_batch(both[k], &c, 4, 5);
        CHECK(model_forward(both[k], 4) == RS_OK);
        model_loss(both[k], 4);
        CHECK(model_backward(both[k], 4, NULL, NULL) == RS_OK);
    }
    CHECK(memcmp(a.grads, p.grads, bytes) == 0);
    CHECK(mem_pages_resident(p.grads, bytes, v) == 0);
    res = 0;
    for (size_t i = 0; i < np; i++) res += v[i];
    CHECK_MSG(res == np, "%zu of %zu pages resident after backward", res, np);
    /* a release gives back only the pages wholly inside the range */
    size_t gone = mem_pages_release((char *)p.grads + 1, 3 * pg);
    CHECK_MSG(gone == 2 * pg, "released %zu bytes of [1, 1 + 3 pages)", gone);
    CHECK(mem_pages_resident(p.grads, bytes, v) == 0 && v[0] && !v[1] && !v[2] && v[3]);
    CHECK(p.grads[pg / sizeof(float)] == 0.0f && p.grads[0] == a.grads[0]);
    free(v);
    model_free(&p);
    model_free(&a);
    device_close(&dev);
}

static void test_bad_input(void) {
    const char *rp = path("bad.json"), *t = path("short.txt"), *e = path("e.txt");
    write_text(t, 100, 2);
    fclose(fopen(e, "wb"));
    struct {
        const char *a[6];
        const char *says;
    } cases[] = {
        {{"--model", "gpt", "--n-embd", "30", "--n-head", "4"}, "--n-embd 30"},
        {{"--model", "gpt", "--data", "text:SHORT", "--seq-len", "200"}, "--seq-len 200"},
        {{"--model", "gpt", "--data", "text:SHORT", "--seq-len", "60"}, "two sequences"},
        {{"--model", "gpt", "--data", "text:EMPTY", NULL}, "empty"},
        {{"--model", "gpt", "--data", "text:/nonexistent/x.txt", NULL}, "x.txt"},
        {{"--model", "lenet", "--layers", "100,10", NULL}, "--layers"},
        {{"--model", "lenet", "--data", "text:SHORT", NULL}, "lenet"},
        {{"--model", "gpt", "--data", "/tmp", NULL}, "--model gpt"},
        {{"--model", "rnn", NULL}, "--model 'rnn'"},
        {{"--optimizer", "adam", NULL}, "--optimizer 'adam'"},
    };
    char tx[600], ex[600];
    snprintf(tx, sizeof tx, "text:%s", t);
    snprintf(ex, sizeof ex, "text:%s", e);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *a[6];
        for (int j = 0; j < 6; j++)
            a[j] = cases[i].a[j] && !strcmp(cases[i].a[j], "text:SHORT") ? tx
                   : cases[i].a[j] && !strcmp(cases[i].a[j], "text:EMPTY") ? ex : cases[i].a[j];
        unlink(rp);
        int rc = train(rp, "--device", "cpu", "--sync", "none", "--steps", "1", a[0], a[1], a[2], a[3], a[4], a[5], NULL);
        CHECK_MSG(rc == RS_ERR_INPUT && strstr(rs_errmsg(), cases[i].says), "case %zu: status %d, '%s' (want 2 and '%s')",
                  i, rc, rs_errmsg(), cases[i].says);
        CHECK(access(rp, F_OK) != 0);
    }
    /* lenet on images that are not 28x28: an MNIST folder of 4x4 images */
    const char *dir = path("mnist4");
    mkdir(dir, 0755);
    char p[600];
    unsigned char img[16 + 3 * 16] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4};
    unsigned char lab[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3};
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte", dir);
    FILE *f = fopen(p, "wb");
    fwrite(img, 1, sizeof img, f);
    fclose(f);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", dir);
    f = fopen(p, "wb");
    fwrite(lab, 1, sizeof lab, f);
    fclose(f);
    int rc = train(rp, "--device", "cpu", "--sync", "none", "--steps", "1", "--model", "lenet", "--data", dir, NULL);
    CHECK_MSG(rc == RS_ERR_INPUT && strstr(rs_errmsg(), "28x28") && strstr(rs_errmsg(), "4x4") &&
                  strstr(rs_errmsg(), "--data"), "status %d: %s", rc, rs_errmsg());
    CHECK(access(rp, F_OK) != 0);
}

/* ---- training ----------------------------------------------------------------------------------- */

static double summary(const char *rp, const char *key) {
    cJSON *r = report_read(rp);
    if (!r) return -1;
    cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "summary"), key);
    double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
    cJSON_Delete(r);
    return v;
}

/* LeNet-5 on the real MNIST test images (8000 train, 2000 evaluate), 3 epochs of batches of 16:
 * about 5 s on 2 cores. The bits, and so the trajectory, depend on the machine's BLAS kernels:
 * 0.9825 on one 2-core machine, 0.9630 on another (AVX-512); chance is 0.1, and the bar 0.95. */
static void test_lenet_mnist(void) {
    struct stat st;
    if (stat("../shared/data/mnist", &st) != 0) {
        SKIP("real MNIST not found at ../shared/data/mnist");
        return;
    }
    const char *rp = path("lenet.json");
    int rc = train(rp, "--device", "cpu", "--sync", "none", "--model", "lenet", "--data", "../shared/data/mnist",
                   "--epochs", "3", "--batch", "16", "--lr", "0.02", NULL);
    CHECK_MSG(rc == 0, "%s", rs_errmsg());
    double acc = summary(rp, "final_accuracy");
    CHECK_MSG(acc >= 0.95, "lenet on MNIST: eval accuracy %.4f after 3 epochs (want >= 0.95)", acc);
    printf("  lenet, MNIST 8k/2k, 3 epochs: eval accuracy %.4f\n", acc);
}

/* A tiny GPT (2 layers, 4 heads, 64 wide, sequence 64) on a text made here: the eval loss falls
 * below 60% of its value at the start (a few seconds on 2 cores). */
static void test_gpt_text(void) {
    const char *t = path("book.txt"), *rp = path("gpt.json"), *r0 = path("gpt0.json");
    write_text(t, 60000, 3);
    char data[600];
    snprintf(data, sizeof data, "text:%s", t);
#define GPT_ARGS "--device", "cpu", "--sync", "none", "--model", "gpt", "--data", data, "--n-layer", "2", "--n-head", \
                 "4", "--n-embd", "64", "--seq-len", "64", "--batch", "16", "--optimizer", "adamw"
    int rc = train(r0, GPT_ARGS, "--steps", "1", "--lr", "0", NULL); /* the eval loss at the start */
    CHECK_MSG(rc == 0, "%s", rs_errmsg());
    rc = train(rp, GPT_ARGS, "--steps", "150", "--lr", "0.003", NULL);
#undef GPT_ARGS
    CHECK_MSG(rc == 0, "%s", rs_errmsg());
    double first = summary(r0, "final_eval_loss"), last = summary(rp, "final_eval_loss");
    CHECK_MSG(first > 0 && last > 0 && last < 0.6 * first, "gpt eval loss %.4f -> %.4f (want below 60%%)", first, last);
    printf("  gpt on text: eval loss %.4f at the start -> %.4f after 150 steps\n", first, last);
}

int main(void) {
    if (!mkdtemp(tmpdir)) return 1;
    kernels_cpu_set_threads(2);
    RUN(test_counts);
    RUN(test_grad_mlp);
    RUN(test_grad_lenet);
    RUN(test_grad_gpt);
    RUN(test_estimate);
    RUN(test_optimizer_state);
    RUN(test_text);
    RUN(test_tokens);
    RUN(test_bad_input);
    RUN(test_paged_grads);
    RUN(test_gpt_text);
    RUN(test_lenet_mnist);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_models");
}
