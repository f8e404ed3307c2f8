/* test_data.c - the data path: IDX files (raw, gzip, broken), MNIST folders, synthetic data, the sampler */
#define _GNU_SOURCE
#include "../data/data.h"
#include "../base/err.h"
#include "../base/rng.h"
#include "test.h"

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define REAL_MNIST "../shared/data/mnist"

static char tmp_root[256];   /* this run's scratch folder, removed at the end */

/* ---- helpers: writing files ---- */

/* Writes len bytes to path, through zlib when gz. 0 on success. */
static int write_bytes(const char *path, const void *buf, size_t len, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f) return -1;
        int ok = len == 0 || gzwrite(f, buf, (unsigned)len) == (int)len;
        return gzclose(f) == Z_OK && ok ? 0 : -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = len == 0 || fwrite(buf, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Builds an IDX file in memory: magic, the header words, then body (body_len bytes). Returns a
 * malloc'd buffer of *len bytes. */
static uint8_t *idx_build(uint32_t magic, const uint32_t *words, int nwords, const uint8_t *body,
                          size_t body_len, size_t *len) {
    *len = 4 + 4 * (size_t)nwords + body_len;
    uint8_t *b = malloc(*len);
    put_be32(b, magic);
    for (int i = 0; i < nwords; i++) put_be32(b + 4 + 4 * i, words[i]);
    if (body_len) memcpy(b + 4 + 4 * nwords, body, body_len);
    return b;
}

/* Writes an images file of n rows x cols images whose pixel k is pix[k]. */
static int write_images(const char *path, const uint8_t *pix, uint32_t n, uint32_t rows,
                        uint32_t cols, int gz) {
    uint32_t w[3] = {n, rows, cols};
    size_t len;
    uint8_t *b = idx_build(0x00000803, w, 3, pix, (size_t)n * rows * cols, &len);
    int rc = write_bytes(path, b, len, gz);
    free(b);
    return rc;
}

static int write_labels(const char *path, const uint8_t *lab, uint32_t n, int gz) {
    size_t len;
    uint8_t *b = idx_build(0x00000801, &n, 1, lab, n, &len);
    int rc = write_bytes(path, b, len, gz);
    free(b);
    return rc;
}

/* Gzips buf into memory (a whole gzip stream, header and trailer). Returns malloc'd bytes. */
static uint8_t *gzip_mem(const uint8_t *buf, size_t len, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&z, len) + 64;
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)buf;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}

/* A fresh subfolder of the scratch folder; the returned string is static per call slot. */
static const char *tmp_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmp_root, name);
    return buf;
}

static const char *make_dir(char *buf, size_t size, const char *name) {
    tmp_path(buf, size, name);
    mkdir(buf, 0700);
    return buf;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Pixel pattern for image i, pixel j (every byte value appears). */
static uint8_t pix_of(int i, int j) { return (uint8_t)(i * 7 + j * 13 + (i ^ j)); }

static uint8_t *pixels(int n, int dim) {
    uint8_t *p = malloc((size_t)n * dim);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++) p[(size_t)i * dim + j] = pix_of(i, j);
    return p;
}

/* Expects idx_read of path (images when images) to fail with RS_ERR_INPUT and a message holding
 * the file name and every one of the words. */
static void expect_idx_error(const char *path, int images, const char *w1, const char *w2) {
    float *x = NULL;
    int *y = NULL, n = -1, dim = -1;
    int rc = images ? idx_read(path, &x, NULL, &n, &dim) : idx_read(path, NULL, &y, &n, &dim);
    const char *msg = rs_errmsg();
    CHECK_MSG(rc == RS_ERR_INPUT, "%s: rc %d (%s)", path, rc, msg);
    if (getenv("TEST_DATA_SHOW")) printf("    %s\n", msg);
    CHECK_MSG(strstr(msg, path) != NULL, "message lacks the file name: %s", msg);
    CHECK_MSG(!w1 || strstr(msg, w1), "message lacks '%s': %s", w1, msg);
    CHECK_MSG(!w2 || strstr(msg, w2), "message lacks '%s': %s", w2, msg);
    CHECK(!strchr(msg, '\n'));
    free(x);
    free(y);
}

/* Expects data_load_mnist(dir) to fail with RS_ERR_INPUT and a message holding both words. */
static void expect_mnist_error(const char *dir, int want_dim, int classes, const char *w1,
                               const char *w2) {
    DataPair p;
    int rc = data_load_mnist(dir, want_dim, classes, &p);
    const char *msg = rs_errmsg();
    CHECK_MSG(rc == RS_ERR_INPUT, "%s: rc %d (%s)", dir, rc, msg);
    if (getenv("TEST_DATA_SHOW")) printf("    %s\n", msg);
    CHECK_MSG(!w1 || strstr(msg, w1), "message lacks '%s': %s", w1, msg);
    CHECK_MSG(!w2 || strstr(msg, w2), "message lacks '%s': %s", w2, msg);
    CHECK(p.train.x == NULL && p.eval.x == NULL && p.train.y == NULL && p.eval.y == NULL);
    datapair_free(&p);
}

/* ---- IDX ---- */

static void test_idx_good(void) {
    const int n = 5, rows = 3, cols = 2, dim = rows * cols;
    uint8_t *pix = pixels(n, dim);
    uint8_t lab[5] = {0, 9, 3, 255, 7};
    char ip[512], lp[512];
    for (int gz = 0; gz <= 1; gz++) {
        tmp_path(ip, sizeof ip, gz ? "good-images.gz" : "good-images");
        tmp_path(lp, sizeof lp, gz ? "good-labels.gz" : "good-labels");
        CHECK(write_images(ip, pix, n, rows, cols, gz) == 0);
        CHECK(write_labels(lp, lab, n, gz) == 0);

        float *x = NULL;
        int *y = NULL, rn = 0, rdim = 0, rr = 0, rc_ = 0;
        CHECK_MSG(idx_read(ip, &x, NULL, &rn, &rdim) == 0, "%s", rs_errmsg());
        CHECK(rn == n && rdim == dim);
        int exact = x != NULL;
        for (int k = 0; x && k < n * dim; k++) exact &= x[k] == (float)pix[k] * (1.0f / 255.0f);
        CHECK(exact);
        free(x);
        x = NULL;

        CHECK_MSG(idx_read_images(ip, &x, &rn, &rr, &rc_) == 0, "%s", rs_errmsg());
        CHECK(rn == n && rr == rows && rc_ == cols);
        free(x);

        CHECK_MSG(idx_read(lp, NULL, &y, &rn, &rdim) == 0, "%s", rs_errmsg());
        CHECK(rn == n && rdim == 1);
        for (int k = 0; y && k < n; k++) CHECK(y[k] == lab[k]);
        free(y);
    }
    /* Pixel range: 0 reads as 0, 255 as 1. */
    uint8_t ends[2] = {0, 255};
    tmp_path(ip, sizeof ip, "ends");
    CHECK(write_images(ip, ends, 1, 1, 2, 0) == 0);
    float *x = NULL;
    int rn, rdim;
    CHECK(idx_read(ip, &x, NULL, &rn, &rdim) == 0);
    CHECK(x && x[0] == 0.0f && x[1] == 1.0f);
    free(x);
    free(pix);
}

static void test_idx_errors(void) {
    char p[512];
    uint8_t *pix = pixels(5, 6);
    uint8_t lab[5] = {1, 2, 3, 4, 5};
    size_t len;

    /* Missing, a directory, and both or neither output. */
    expect_idx_error(tmp_path(p, sizeof p, "no-such-file"), 1, "No such file", NULL);
    expect_idx_error(tmp_path(p, sizeof p, "no-such-file.gz"), 0, "No such file", NULL);
    expect_idx_error(make_dir(p, sizeof p, "a-dir"), 1, "directory", NULL);
    {
        float *x = NULL;
        int *y = NULL, n, dim;
        tmp_path(p, sizeof p, "good-labels");
        write_labels(p, lab, 5, 0);
        CHECK(idx_read(p, NULL, NULL, &n, &dim) == RS_ERR_INPUT);
        CHECK(idx_read(p, &x, &y, &n, &dim) == RS_ERR_INPUT);
        CHECK(x == NULL && y == NULL);
    }

    for (int gz = 0; gz <= 1; gz++) {
        const char *sfx = gz ? ".gz" : "";
        char name[64];
        uint8_t *b;

        /* Wrong magic, and each kind read as the other. */
        uint32_t w3[3] = {5, 3, 2};
        b = idx_build(0x00000804, w3, 3, pix, 30, &len);
        snprintf(name, sizeof name, "bad-magic%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, len, gz);
        free(b);
        expect_idx_error(p, 1, "magic 0x00000804", "expected 0x00000803");
        expect_idx_error(p, 0, "magic 0x00000804", "expected 0x00000801");

        snprintf(name, sizeof name, "images%s", sfx);
        write_images(tmp_path(p, sizeof p, name), pix, 5, 3, 2, gz);
        expect_idx_error(p, 0, "holds images", "labels");
        snprintf(name, sizeof name, "labels%s", sfx);
        write_labels(tmp_path(p, sizeof p, name), lab, 5, gz);
        expect_idx_error(p, 1, "holds labels", "images");

        /* Header truncated: empty, inside the magic, inside the sizes. */
        snprintf(name, sizeof name, "empty%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), "", 0, gz);
        expect_idx_error(p, 1, "header truncated", "empty");
        b = idx_build(0x00000803, w3, 3, NULL, 0, &len);
        snprintf(name, sizeof name, "short-magic%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, 2, gz);
        expect_idx_error(p, 1, "header truncated", "2 of 16");
        snprintf(name, sizeof name, "short-header%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, 10, gz);
        expect_idx_error(p, 1, "header truncated", "10 of 16");
        free(b);
        b = idx_build(0x00000801, w3, 1, NULL, 0, &len);
        snprintf(name, sizeof name, "short-lheader%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, 6, gz);
        expect_idx_error(p, 0, "header truncated", "6 of 8");
        free(b);

        /* Data truncated: 5 images of 3x2 announced, 20 of 30 bytes there. */
        b = idx_build(0x00000803, w3, 3, pix, 20, &len);
        snprintf(name, sizeof name, "short-data%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, len, gz);
        free(b);
        expect_idx_error(p, 1, "truncated", "expected 30 bytes of image data, found 20");
        uint32_t nl = 9;
        b = idx_build(0x00000801, &nl, 1, lab, 5, &len);
        snprintf(name, sizeof name, "short-labels%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, len, gz);
        free(b);
        expect_idx_error(p, 0, "truncated", "expected 9 bytes of label data, found 5");

        /* More data than the header announces. */
        uint32_t w4[3] = {4, 3, 2};
        b = idx_build(0x00000803, w4, 3, pix, 30, &len);
        snprintf(name, sizeof name, "long-data%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, len, gz);
        free(b);
        expect_idx_error(p, 1, "6 extra bytes", "header");

        /* Absurd sizes: zero count, zero dim, overflowing. */
        uint32_t bad[4][3] = {{0, 3, 2}, {5, 0, 2}, {5, 3, 0}, {0xffffffffu, 28, 28}};
        for (int k = 0; k < 4; k++) {
            b = idx_build(0x00000803, bad[k], 3, pix, 30, &len);
            snprintf(name, sizeof name, "absurd%d%s", k, sfx);
            write_bytes(tmp_path(p, sizeof p, name), b, len, gz);
            free(b);
            expect_idx_error(p, 1, "absurd size", NULL);
        }
        uint32_t big[3] = {100000, 65536, 65536};
        b = idx_build(0x00000803, big, 3, pix, 30, &len);
        snprintf(name, sizeof name, "overflow%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, len, gz);
        free(b);
        expect_idx_error(p, 1, "absurd size", "2^31");
        uint32_t zl = 0;
        b = idx_build(0x00000801, &zl, 1, NULL, 0, &len);
        snprintf(name, sizeof name, "zero-labels%s", sfx);
        write_bytes(tmp_path(p, sizeof p, name), b, len, gz);
        free(b);
        expect_idx_error(p, 0, "absurd size", "0 labels");
    }

    /* A gzip file without the .gz name: the magic check says what it looks like. */
    write_images(tmp_path(p, sizeof p, "compressed-but-raw-name"), pix, 5, 3, 2, 1);
    expect_idx_error(p, 1, "magic 0x1f8b", "gzip");
    /* A .gz name on a raw file. */
    write_images(tmp_path(p, sizeof p, "raw-but-gz-name.gz"), pix, 5, 3, 2, 0);
    expect_idx_error(p, 1, "not gzip", NULL);
    free(pix);
}

static void test_idx_corrupt_gzip(void) {
    char p[512];
    const int n = 200, dim = 64;
    uint8_t *pix = pixels(n, dim);
    uint32_t w[3] = {n, 8, 8};
    size_t len, zlen;
    uint8_t *raw = idx_build(0x00000803, w, 3, pix, (size_t)n * dim, &len);
    uint8_t *z = gzip_mem(raw, len, &zlen);

    /* The whole stream reads back (sanity for the in-memory gzip). */
    write_bytes(tmp_path(p, sizeof p, "mem.gz"), z, zlen, 0);
    float *x = NULL;
    int rn, rdim;
    CHECK_MSG(idx_read(p, &x, NULL, &rn, &rdim) == 0, "%s", rs_errmsg());
    free(x);

    /* A valid gzip header, then garbage. */
    uint8_t *g = malloc(zlen);
    memcpy(g, z, 10);
    for (size_t k = 10; k < zlen; k++) g[k] = (uint8_t)(0xa5 ^ (k * 31));
    write_bytes(tmp_path(p, sizeof p, "garbage.gz"), g, zlen, 0);
    expect_idx_error(p, 1, "corrupt gzip", NULL);
    free(g);

    /* The stream cut in the middle of the data. */
    write_bytes(tmp_path(p, sizeof p, "cut.gz"), z, zlen / 2, 0);
    expect_idx_error(p, 1, "gzip stream truncated", "of image data");

    /* The stream cut inside the trailer: all data there, the CRC and length missing. */
    write_bytes(tmp_path(p, sizeof p, "cut-trailer.gz"), z, zlen - 4, 0);
    expect_idx_error(p, 1, "gzip stream truncated", NULL);

    /* A wrong CRC in the trailer. */
    z[zlen - 8] ^= 0xff;
    write_bytes(tmp_path(p, sizeof p, "bad-crc.gz"), z, zlen, 0);
    expect_idx_error(p, 1, "corrupt gzip", "check");

    free(z);
    free(raw);
    free(pix);
}

/* ---- MNIST folders ---- */

/* Writes a t10k or train pair of n images of rows x cols into dir; labels i % 10. */
static void write_pair(const char *dir, const char *prefix, int n, int rows, int cols, int gz,
                       int nlabels) {
    char ip[600], lp[600];
    uint8_t *pix = pixels(n, rows * cols);
    uint8_t *lab = malloc((size_t)nlabels);
    for (int i = 0; i < nlabels; i++) lab[i] = (uint8_t)(i % 10);
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    CHECK(write_images(ip, pix, (uint32_t)n, (uint32_t)rows, (uint32_t)cols, gz) == 0);
    CHECK(write_labels(lp, lab, (uint32_t)nlabels, gz) == 0);
    free(pix);
    free(lab);
}

/* The image of sample k of d equals the pattern image i. */
static int image_is(const Dataset *d, int k, int i) {
    for (int j = 0; j < d->dim; j++)
        if (d->x[(size_t)k * d->dim + j] != (float)pix_of(i, j) * (1.0f / 255.0f)) return 0;
    return d->y[k] == i % 10;
}

static void test_mnist_t10k_only(void) {
    char d[512];
    DataPair p;

    /* 100 images of 4x4, gzip, with train labels alone beside them (they do not count). */
    make_dir(d, sizeof d, "t10k-small");
    write_pair(d, "t10k", 100, 4, 4, 1, 100);
    {
        char lp[600];
        uint8_t lab[3] = {1, 2, 3};
        snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte.gz", d);
        write_labels(lp, lab, 3, 1);
    }
    CHECK_MSG(data_load_mnist(d, 16, 10, &p) == 0, "%s", rs_errmsg());
    CHECK(p.train.n == 80 && p.eval.n == 20);
    CHECK(p.train.dim == 16 && p.eval.dim == 16 && p.train.classes == 10);
    CHECK(image_is(&p.train, 0, 0) && image_is(&p.train, 79, 79));
    CHECK(image_is(&p.eval, 0, 80) && image_is(&p.eval, 19, 99));
    CHECK_MSG(strstr(p.source, "t10k only") && strstr(p.source, d) && strstr(p.source, "80/20"),
              "%s", p.source);
    datapair_free(&p);
    CHECK(p.train.x == NULL && p.eval.y == NULL);

    /* More than 8000: the first 8000 train, the rest evaluate. Raw files. */
    make_dir(d, sizeof d, "t10k-big");
    write_pair(d, "t10k", 8100, 2, 2, 0, 8100);
    CHECK_MSG(data_load_mnist(d, 4, 10, &p) == 0, "%s", rs_errmsg());
    CHECK(p.train.n == 8000 && p.eval.n == 100);
    CHECK(image_is(&p.train, 7999, 7999) && image_is(&p.eval, 0, 8000));
    CHECK_MSG(strstr(p.source, "first 8000 images train, last 100 evaluate"), "%s", p.source);
    datapair_free(&p);

    /* One image cannot be split. */
    make_dir(d, sizeof d, "t10k-one");
    write_pair(d, "t10k", 1, 2, 2, 0, 1);
    expect_mnist_error(d, 4, 10, "too few", "t10k");
}

static void test_mnist_train_and_t10k(void) {
    char d[512];
    DataPair p;

    make_dir(d, sizeof d, "full");
    write_pair(d, "train", 50, 3, 3, 1, 50);
    write_pair(d, "t10k", 20, 3, 3, 1, 20);
    CHECK_MSG(data_load_mnist(d, 9, 10, &p) == 0, "%s", rs_errmsg());
    CHECK(p.train.n == 50 && p.eval.n == 20);
    CHECK(image_is(&p.train, 49, 49) && image_is(&p.eval, 19, 19));
    CHECK(strstr(p.source, "t10k only") == NULL);
    datapair_free(&p);

    /* Raw beside .gz: the raw file wins (30 images raw, 20 gzip). */
    write_pair(d, "t10k", 30, 3, 3, 0, 30);
    CHECK_MSG(data_load_mnist(d, 9, 10, &p) == 0, "%s", rs_errmsg());
    CHECK(p.eval.n == 30);
    datapair_free(&p);
}

static void test_mnist_errors(void) {
    char d[512], f[600];

    /* Missing folder, a file instead, an empty folder, half a pair. */
    tmp_path(d, sizeof d, "no-such-dir");
    expect_mnist_error(d, 16, 10, d, "No such file");
    tmp_path(d, sizeof d, "good-labels");
    expect_mnist_error(d, 16, 10, d, "not a directory");
    make_dir(d, sizeof d, "empty-dir");
    expect_mnist_error(d, 16, 10, "no MNIST files in", "t10k-images-idx3-ubyte[.gz]");
    make_dir(d, sizeof d, "half");
    write_pair(d, "t10k", 10, 4, 4, 0, 10);
    snprintf(f, sizeof f, "%s/t10k-labels-idx1-ubyte", d);
    remove(f);
    expect_mnist_error(d, 16, 10, "t10k-images-idx3-ubyte", "labels");

    /* Image and label counts differ. */
    make_dir(d, sizeof d, "mismatch");
    write_pair(d, "t10k", 100, 4, 4, 1, 99);
    expect_mnist_error(d, 16, 10, "100 images", "99 labels");

    /* A label at or over the class count. */
    make_dir(d, sizeof d, "labels-over");
    write_pair(d, "t10k", 100, 4, 4, 1, 100);
    snprintf(f, sizeof f, "%s/t10k-labels-idx1-ubyte.gz", d);
    expect_mnist_error(d, 16, 5, f, "label 5 at index 5");
    expect_mnist_error(d, 16, 5, "5 classes", NULL);

    /* Images of another size than --layers wants. */
    expect_mnist_error(d, 100, 10, "images are 4x4 = 16 values but --layers starts with 100", NULL);

    /* A broken file inside a folder is reported with its name. */
    make_dir(d, sizeof d, "broken-file");
    write_pair(d, "t10k", 10, 4, 4, 0, 10);
    snprintf(f, sizeof f, "%s/t10k-images-idx3-ubyte", d);
    CHECK(truncate(f, 100) == 0);
    expect_mnist_error(d, 16, 10, f, "truncated");
}

static void test_mnist_real(void) {
    struct stat st;
    if (stat(REAL_MNIST, &st) != 0 || !S_ISDIR(st.st_mode)) {
        SKIP("real MNIST not found at " REAL_MNIST);
        return;
    }
    DataPair p;
    int rc = data_load_mnist(REAL_MNIST, 784, 10, &p);
    CHECK_MSG(rc == 0, "%s", rs_errmsg());
    if (rc != 0) return;
    CHECK(p.train.n == 8000 && p.eval.n == 2000);
    CHECK(p.train.dim == 784 && p.eval.dim == 784);
    CHECK_MSG(strstr(p.source, "t10k only"), "%s", p.source);
    int count[10] = {0}, labels_ok = 1, range_ok = 1;
    float lo = 1, hi = 0;
    const Dataset *ds[2] = {&p.train, &p.eval};
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < ds[s]->n; i++) {
            int y = ds[s]->y[i];
            if (y < 0 || y > 9) labels_ok = 0;
            else count[y]++;
        }
        for (size_t k = 0; k < (size_t)ds[s]->n * 784; k++) {
            float v = ds[s]->x[k];
            if (!(v >= 0.0f && v <= 1.0f)) range_ok = 0;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    }
    CHECK(labels_ok && range_ok);
    CHECK(lo == 0.0f && hi == 1.0f);
    for (int c = 0; c < 10; c++) CHECK(count[c] > 800);   /* every digit is there, about 1000 each */
    datapair_free(&p);
}

/* ---- synthetic ---- */

static void test_synthetic(void) {
    DataPair a, b, c;
    const int dim = 50, classes = 7, ntr = 700, nev = 140;
    CHECK(data_make_synthetic(dim, classes, ntr, nev, 11, &a) == 0);
    CHECK(data_make_synthetic(dim, classes, ntr, nev, 11, &b) == 0);
    CHECK(data_make_synthetic(dim, classes, ntr, nev, 12, &c) == 0);

    /* Same seed: bitwise equal. Another seed: different. */
    CHECK(memcmp(a.train.x, b.train.x, sizeof(float) * ntr * dim) == 0);
    CHECK(memcmp(a.eval.x, b.eval.x, sizeof(float) * nev * dim) == 0);
    CHECK(memcmp(a.train.y, b.train.y, sizeof(int) * ntr) == 0);
    CHECK(memcmp(a.train.x, c.train.x, sizeof(float) * ntr * dim) != 0);
    CHECK(memcmp(a.train.x, a.eval.x, sizeof(float) * nev * dim) != 0);
    CHECK(a.train.n == ntr && a.eval.n == nev && a.train.dim == dim && a.train.classes == classes);

    /* Balanced labels in a shuffled order; values in [0, 1]. */
    int count[7] = {0}, in_order = 1, range_ok = 1;
    for (int i = 0; i < ntr; i++) {
        CHECK(a.train.y[i] >= 0 && a.train.y[i] < classes);
        count[a.train.y[i]]++;
        if (a.train.y[i] != i % classes) in_order = 0;
    }
    for (int k = 0; k < classes; k++) CHECK(count[k] == ntr / classes);
    CHECK(!in_order);
    for (size_t k = 0; k < (size_t)ntr * dim; k++)
        if (!(a.train.x[k] >= 0.0f && a.train.x[k] <= 1.0f)) range_ok = 0;
    CHECK(range_ok);

    /* Learnable: the nearest class mean of the training set classifies the evaluation set. */
    double *mean = calloc((size_t)classes * dim, sizeof *mean);
    for (int i = 0; i < ntr; i++)
        for (int j = 0; j < dim; j++)
            mean[(size_t)a.train.y[i] * dim + j] += a.train.x[(size_t)i * dim + j] / count[a.train.y[i]];
    int right = 0;
    for (int i = 0; i < nev; i++) {
        int best = -1;
        double bestd = 1e300;
        for (int k = 0; k < classes; k++) {
            double s = 0;
            for (int j = 0; j < dim; j++) {
                double t = a.eval.x[(size_t)i * dim + j] - mean[(size_t)k * dim + j];
                s += t * t;
            }
            if (s < bestd) bestd = s, best = k;
        }
        right += best == a.eval.y[i];
    }
    CHECK_MSG(right >= nev * 95 / 100, "nearest mean: %d of %d right", right, nev);
    free(mean);
    datapair_free(&a);
    datapair_free(&b);
    datapair_free(&c);

    /* Uneven counts: classes differ by at most one. Odd dims, one class, tiny sizes. */
    CHECK(data_make_synthetic(3, 4, 10, 3, 5, &a) == 0);
    int cnt[4] = {0};
    for (int i = 0; i < 10; i++) cnt[a.train.y[i]]++;
    CHECK(cnt[0] == 3 && cnt[1] == 3 && cnt[2] == 2 && cnt[3] == 2);
    datapair_free(&a);
    CHECK(data_make_synthetic(1, 1, 1, 1, 0, &a) == 0);
    CHECK(a.train.y[0] == 0);
    datapair_free(&a);

    /* Bad sizes. */
    CHECK(data_make_synthetic(0, 10, 10, 10, 1, &a) == RS_ERR_INPUT);
    CHECK(data_make_synthetic(10, 0, 10, 10, 1, &a) == RS_ERR_INPUT);
    CHECK(data_make_synthetic(10, 10, 0, 10, 1, &a) == RS_ERR_INPUT);
    CHECK(data_make_synthetic(10, 10, 10, -1, 1, &a) == RS_ERR_INPUT);
    CHECK(a.train.x == NULL && a.eval.x == NULL);
}

/* ---- sampler ---- */

static void test_rng(void) {
    Rng r, s;
    rng_seed(&r, 3);
    rng_seed(&s, 3);
    int ok = 1;
    double sum = 0, sq = 0;
    for (int i = 0; i < 20000; i++) {
        float u = rng_uniform(&r);
        if (!(u >= 0.0f && u < 1.0f)) ok = 0;
        if (rng_below(&r, 7) >= 7) ok = 0;
        double g = rng_normal(&r);
        sum += g;
        sq += g * g;
        (void)rng_uniform(&s), (void)rng_below(&s, 7), (void)rng_normal(&s);
    }
    CHECK(ok);
    CHECK(rng_next_u64(&r) == rng_next_u64(&s));
    CHECK(fabs(sum / 20000) < 0.05 && fabs(sq / 20000 - 1) < 0.05);
}

/* The sampler's order for every rank together: is each index there exactly `times` times? */
static int counts_are(const int *idx, int len, int n, int times) {
    int *c = calloc((size_t)n, sizeof *c), ok = 1;
    for (int i = 0; i < len; i++) {
        if (idx[i] < 0 || idx[i] >= n) ok = 0;
        else c[idx[i]]++;
    }
    for (int i = 0; ok && i < n; i++) ok = c[i] == times;
    free(c);
    return ok;
}

static void test_sampler_permutation(void) {
    Sampler s;
    const int n = 1000;
    CHECK(sampler_init(&s, n, 1, 0, 1, 0, 42) == 0);
    CHECK(s.per_rank == n);
    sampler_set_epoch(&s, 0);
    CHECK(counts_are(s.perm, n, n, 1));
    int *e0 = malloc(sizeof(int) * n);
    memcpy(e0, s.perm, sizeof(int) * n);
    int identity = 1;
    for (int i = 0; i < n; i++) identity &= e0[i] == i;
    CHECK(!identity);

    sampler_set_epoch(&s, 0);                       /* idempotent */
    CHECK(memcmp(e0, s.perm, sizeof(int) * n) == 0);
    sampler_set_epoch(&s, 1);                       /* another epoch, another order */
    CHECK(counts_are(s.perm, n, n, 1));
    CHECK(memcmp(e0, s.perm, sizeof(int) * n) != 0);
    sampler_set_epoch(&s, 0);                       /* and back */
    CHECK(memcmp(e0, s.perm, sizeof(int) * n) == 0);
    sampler_free(&s);

    /* The same seed and epoch on another sampler (another rank) gives the same order. */
    CHECK(sampler_init(&s, n, 4, 3, 1, 0, 42) == 0);
    sampler_set_epoch(&s, 0);
    CHECK(memcmp(e0, s.perm, sizeof(int) * n) == 0);
    sampler_free(&s);
    /* Another seed does not. */
    CHECK(sampler_init(&s, n, 1, 0, 1, 0, 43) == 0);
    sampler_set_epoch(&s, 0);
    CHECK(memcmp(e0, s.perm, sizeof(int) * n) != 0);
    sampler_free(&s);

    /* No shuffle: the identity. */
    CHECK(sampler_init(&s, 10, 1, 0, 0, 0, 42) == 0);
    sampler_set_epoch(&s, 5);
    for (int i = 0; i < 10; i++) CHECK(sampler_index(&s, i) == i && sampler_global_index(&s, i) == i);
    sampler_free(&s);
    free(e0);
}

static void test_sampler_padding_and_ranks(void) {
    /* n = 10 over 4 ranks: 3 each, the 2 pad entries repeat the start of the order. */
    const int n = 10, world = 4;
    int seen[12], k = 0;
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        k = 0;
        for (int r = 0; r < world; r++) {
            Sampler s;
            CHECK(sampler_init(&s, n, world, r, shuffle, 0, 7) == 0);
            CHECK(s.per_rank == 3);
            sampler_set_epoch(&s, 2);
            CHECK(s.perm[10] == s.perm[0] && s.perm[11] == s.perm[1]);
            CHECK(counts_are(s.perm, n, n, 1));
            for (int i = 0; i < s.per_rank; i++) {
                CHECK(sampler_index(&s, i) == s.perm[r + i * world]);
                seen[k++] = sampler_index(&s, i);
            }
            sampler_free(&s);
        }
        /* Together the ranks cover the padded order: everything once, the first two twice. */
        CHECK(k == 12);
        int *c = calloc(n, sizeof *c);
        for (int i = 0; i < k; i++) c[seen[i]]++;
        int twice = 0, once = 0;
        for (int i = 0; i < n; i++) twice += c[i] == 2, once += c[i] == 1;
        CHECK(twice == 2 && once == 8);
        free(c);
    }
    if (k == 12) {
        /* No shuffle: rank 0 gets 0, 4, 8; rank 2 gets 2, 6, 0 (the pad). */
        Sampler s;
        sampler_init(&s, n, world, 2, 0, 0, 7);
        sampler_set_epoch(&s, 0);
        CHECK(sampler_index(&s, 0) == 2 && sampler_index(&s, 1) == 6 && sampler_index(&s, 2) == 0);
        sampler_free(&s);
    }

    /* Fewer samples than ranks: the order wraps more than once (3 samples, 8 ranks). */
    Sampler s;
    CHECK(sampler_init(&s, 3, 8, 7, 1, 0, 1) == 0);
    CHECK(s.per_rank == 1);
    sampler_set_epoch(&s, 0);
    for (int i = 3; i < 8; i++) CHECK(s.perm[i] == s.perm[i % 3]);
    sampler_free(&s);

    /* Ranks' index sets are disjoint over the padded positions, whatever n and world. */
    int ns[4] = {1, 7, 64, 101}, ws[4] = {1, 2, 3, 8};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            int total = 0, ok = 1, per = 0;
            int *pos = calloc((size_t)(ns[a] + ws[b]), sizeof *pos);
            for (int r = 0; r < ws[b]; r++) {
                Sampler t;
                CHECK(sampler_init(&t, ns[a], ws[b], r, 1, 0, 9) == 0);
                sampler_set_epoch(&t, 1);
                per = t.per_rank;
                for (int i = 0; i < t.per_rank; i++) {
                    int p = r + i * ws[b];
                    if (pos[p]++) ok = 0;
                    total++;
                }
                sampler_free(&t);
            }
            CHECK(ok && total == per * ws[b] && per == (ns[a] + ws[b] - 1) / ws[b]);
            free(pos);
        }
}

static void test_sampler_drop_last(void) {
    Sampler s;
    /* 10 over 4 ranks, drop_last: 2 each, 8 of the shuffled order used, no index twice. */
    int got[8], k = 0;
    for (int r = 0; r < 4; r++) {
        CHECK(sampler_init(&s, 10, 4, r, 1, 1, 3) == 0);
        CHECK(s.per_rank == 2);
        sampler_set_epoch(&s, 0);
        CHECK(counts_are(s.perm, 10, 10, 1));
        for (int i = 0; i < 2; i++) got[k++] = sampler_index(&s, i);
        sampler_free(&s);
    }
    int dup = 0;
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++) dup |= got[i] == got[j];
    CHECK(!dup);
    /* Exact multiple: nothing dropped. */
    CHECK(sampler_init(&s, 12, 4, 0, 0, 1, 3) == 0);
    CHECK(s.per_rank == 3);
    sampler_free(&s);

    /* Bad arguments. */
    CHECK(sampler_init(&s, 3, 4, 0, 1, 1, 3) == RS_ERR_INPUT);   /* drop_last leaves nothing */
    CHECK(strstr(rs_errmsg(), "drop") != NULL);
    CHECK(s.perm == NULL);
    CHECK(sampler_init(&s, 0, 1, 0, 1, 0, 3) == RS_ERR_INPUT);
    CHECK(sampler_init(&s, 10, 0, 0, 1, 0, 3) == RS_ERR_INPUT);
    CHECK(sampler_init(&s, 10, 4, 4, 1, 0, 3) == RS_ERR_INPUT);
    CHECK(sampler_init(&s, 10, 4, -1, 1, 0, 3) == RS_ERR_INPUT);
    sampler_free(&s);                                            /* safe after a failed init */
}

static void test_scatter_chunk(void) {
    int lo, len;
    for (int r = 0; r < 8; r++) {                /* B=4 on 8 ranks: four ranks get nothing */
        scatter_chunk(4, 8, r, &lo, &len);
        CHECK(len == (r < 4 ? 1 : 0));
        if (r < 4) CHECK(lo == r);
    }
    int want[4] = {3, 3, 3, 1};
    for (int r = 0; r < 4; r++) {
        scatter_chunk(10, 4, r, &lo, &len);
        CHECK(len == want[r] && lo == 3 * r);
    }
    for (int r = 0; r < 3; r++) {
        scatter_chunk(96, 3, r, &lo, &len);
        CHECK(len == 32 && lo == 32 * r);
    }
    /* Every split covers [0, B) exactly. */
    for (int B = 1; B <= 40; B++)
        for (int w = 1; w <= 9; w++) {
            int next = 0;
            for (int r = 0; r < w; r++) {
                scatter_chunk(B, w, r, &lo, &len);
                CHECK(len >= 0 && (len == 0 || lo == next));
                next += len;
            }
            CHECK(next == B);
        }
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/ringside-test-data-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_idx_good);
    RUN(test_idx_errors);
    RUN(test_idx_corrupt_gzip);
    RUN(test_mnist_t10k_only);
    RUN(test_mnist_train_and_t10k);
    RUN(test_mnist_errors);
    RUN(test_mnist_real);
    RUN(test_synthetic);
    RUN(test_rng);
    RUN(test_sampler_permutation);
    RUN(test_sampler_padding_and_ranks);
    RUN(test_sampler_drop_last);
    RUN(test_scatter_chunk);
    nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_summary("test_data");
}
