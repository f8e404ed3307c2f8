/* mnist.c - finds and loads MNIST in a folder (train + t10k, or t10k alone split in two) */
#include "data.h"
#include "../base/err.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MNIST_T10K_TRAIN 8000   /* t10k alone: the first 8000 train, the rest evaluate */

/* One IDX file of a folder, found raw or gzip. */
typedef struct {
    char path[PATH_MAX];
    int found;
} MnistFile;

static int file_is_regular(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Looks for dir/base, then dir/base.gz (raw preferred). 0, or RS_ERR_INPUT if the path is too long. */
static int mnist_find(const char *dir, const char *base, MnistFile *f) {
    f->found = 0;
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
    for (int gz = 0; gz <= 1; gz++) {
        int len = snprintf(f->path, sizeof f->path, "%s%s%s%s", dir, sep, base, gz ? ".gz" : "");
        if (len < 0 || (size_t)len >= sizeof f->path)
            return rs_error(RS_ERR_INPUT, "MNIST directory %s: path too long", dir);
        if (file_is_regular(f->path)) {
            f->found = 1;
            return RS_OK;
        }
    }
    return RS_OK;
}

/* Loads one images/labels pair into d, checking counts, labels < classes and dim == want_dim. */
static int mnist_load_pair(const char *ipath, const char *lpath, int want_dim, int classes,
                           Dataset *d) {
    int rows = 0, cols = 0, n = 0, nl = 0, ldim = 0, rc;
    memset(d, 0, sizeof *d);

    if ((rc = idx_read_images(ipath, &d->x, &n, &rows, &cols)) != RS_OK) goto err;
    if (rows * cols != want_dim) {
        rc = rs_error(RS_ERR_INPUT, "%s: images are %dx%d = %d values but --layers starts with %d",
                      ipath, rows, cols, rows * cols, want_dim);
        goto err;
    }
    if ((rc = idx_read(lpath, NULL, &d->y, &nl, &ldim)) != RS_OK) goto err;
    if (nl != n) {
        rc = rs_error(RS_ERR_INPUT, "count mismatch: %s has %d images but %s has %d labels", ipath,
                      n, lpath, nl);
        goto err;
    }
    for (int i = 0; i < n; i++) {
        if (d->y[i] >= classes) {
            rc = rs_error(RS_ERR_INPUT, "%s: label %d at index %d is out of range for %d classes "
                          "(the last size in --layers)", lpath, d->y[i], i, classes);
            goto err;
        }
    }
    d->n = n;
    d->dim = want_dim;
    d->classes = classes;
    return RS_OK;

err:
    dataset_free(d);
    return rc;
}

/* Moves samples [lo, lo + cnt) of src into a fresh dst. 0 or RS_ERR_RUNTIME. */
static int dataset_slice(const Dataset *src, int lo, int cnt, Dataset *dst) {
    size_t dim = (size_t)src->dim;
    memset(dst, 0, sizeof *dst);
    dst->x = malloc((size_t)cnt * dim * sizeof *dst->x);
    dst->y = malloc((size_t)cnt * sizeof *dst->y);
    if (!dst->x || !dst->y) {
        dataset_free(dst);
        return rs_error(RS_ERR_RUNTIME, "out of memory splitting %d samples", cnt);
    }
    memcpy(dst->x, src->x + (size_t)lo * dim, (size_t)cnt * dim * sizeof *dst->x);
    memcpy(dst->y, src->y + lo, (size_t)cnt * sizeof *dst->y);
    dst->n = cnt;
    dst->dim = src->dim;
    dst->classes = src->classes;
    return RS_OK;
}

/* See data.h. */
int data_load_mnist(const char *dir, int want_dim, int classes, DataPair *out) {
    MnistFile ti, tl, ei, el;
    Dataset all;
    struct stat st;
    int rc;

    memset(out, 0, sizeof *out);
    memset(&all, 0, sizeof all);
    if (want_dim < 1 || classes < 1)
        return rs_error(RS_ERR_INPUT, "MNIST in %s: need a positive input size and class count "
                        "(got %d and %d)", dir, want_dim, classes);
    if (stat(dir, &st) != 0)
        return rs_error(RS_ERR_INPUT, "MNIST directory %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return rs_error(RS_ERR_INPUT, "MNIST directory %s: not a directory", dir);

    RS_TRY(mnist_find(dir, "train-images-idx3-ubyte", &ti));
    RS_TRY(mnist_find(dir, "train-labels-idx1-ubyte", &tl));
    RS_TRY(mnist_find(dir, "t10k-images-idx3-ubyte", &ei));
    RS_TRY(mnist_find(dir, "t10k-labels-idx1-ubyte", &el));

    if (!ei.found || !el.found) {
        if (ei.found || el.found)
            return rs_error(RS_ERR_INPUT, "MNIST in %s: found %s but not its %s "
                            "(t10k-%s-idx%d-ubyte[.gz])", dir, ei.found ? ei.path : el.path,
                            ei.found ? "labels" : "images", ei.found ? "labels" : "images",
                            ei.found ? 1 : 3);
        return rs_error(RS_ERR_INPUT, "no MNIST files in %s: expected t10k-images-idx3-ubyte[.gz] "
                        "and t10k-labels-idx1-ubyte[.gz]%s", dir,
                        ti.found && tl.found ? " to evaluate on (the train pair alone is not enough)"
                                             : "");
    }

    if (ti.found && tl.found) {
        if ((rc = mnist_load_pair(ti.path, tl.path, want_dim, classes, &out->train)) != RS_OK)
            goto err;
        if ((rc = mnist_load_pair(ei.path, el.path, want_dim, classes, &out->eval)) != RS_OK)
            goto err;
        snprintf(out->source, sizeof out->source, "MNIST in %s: %d train images, %d t10k images "
                 "evaluate", dir, out->train.n, out->eval.n);
        return RS_OK;
    }

    /* Only t10k: the first 8000 train and the rest evaluate; a smaller set splits 80/20. */
    if ((rc = mnist_load_pair(ei.path, el.path, want_dim, classes, &all)) != RS_OK) goto err;
    if (all.n < 2) {
        rc = rs_error(RS_ERR_INPUT, "MNIST t10k only in %s: %d image%s, too few to split into "
                      "train and evaluation", dir, all.n, all.n == 1 ? "" : "s");
        goto err;
    }
    int n_train = all.n > MNIST_T10K_TRAIN ? MNIST_T10K_TRAIN : (int)((long long)all.n * 4 / 5);
    if (n_train < 1) n_train = 1;
    if ((rc = dataset_slice(&all, 0, n_train, &out->train)) != RS_OK) goto err;
    if ((rc = dataset_slice(&all, n_train, all.n - n_train, &out->eval)) != RS_OK) goto err;
    if (all.n > MNIST_T10K_TRAIN)
        snprintf(out->source, sizeof out->source, "MNIST t10k only in %s: first %d images train, "
                 "last %d evaluate", dir, out->train.n, out->eval.n);
    else
        snprintf(out->source, sizeof out->source, "MNIST t10k only in %s: %d images (not over "
                 "%d), first %d train, last %d evaluate (80/20)", dir, all.n, MNIST_T10K_TRAIN,
                 out->train.n, out->eval.n);
    dataset_free(&all);
    return RS_OK;

err:
    dataset_free(&all);
    datapair_free(out);
    return rc;
}

/* See data.h. */
void dataset_free(Dataset *d) {
    if (!d) return;
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

/* See data.h. */
void datapair_free(DataPair *p) {
    if (!p) return;
    dataset_free(&p->train);
    dataset_free(&p->eval);
    p->source[0] = '\0';
}
