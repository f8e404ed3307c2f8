/* text.c - token sequences for the gpt model: a text file's bytes as tokens, and a deterministic learnable synthetic source */
#include "data.h"
#include "../base/err.h"
#include "../base/rng.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Makes d hold n sequences of T tokens and T labels (the inputs shifted by one). */
static int seq_alloc(Dataset *d, int n, int T, int vocab) {
    memset(d, 0, sizeof *d);
    d->x = malloc((size_t)n * T * sizeof *d->x);
    d->y = malloc((size_t)n * T * sizeof *d->y);
    if (!d->x || !d->y) {
        dataset_free(d);
        return rs_error(RS_ERR_RUNTIME, "out of memory for %d sequences of %d tokens", n, T);
    }
    d->n = n;
    d->dim = T;
    d->ylen = T;
    d->classes = vocab;
    return RS_OK;
}

/* Sequence i of d from the window w[0..T]: inputs w[0..T-1], labels w[1..T]. */
static void seq_put(Dataset *d, int i, const int *w) {
    int T = d->dim;
    int *x = (int *)(void *)(d->x + (size_t)i * T);
    memcpy(x, w, (size_t)T * sizeof *x);
    memcpy(d->y + (size_t)i * T, w + 1, (size_t)T * sizeof *d->y);
}

/* The windows of bytes [a, a + len) of text, T apart, into d. */
static int text_windows(Dataset *d, const unsigned char *text, size_t a, size_t len, int T) {
    size_t n = (len - 1) / (size_t)T;
    if (n > INT_MAX / (size_t)T) n = INT_MAX / (size_t)T;
    RS_TRY(seq_alloc(d, (int)n, T, 256));
    int *w = malloc(((size_t)T + 1) * sizeof *w);
    if (!w) {
        dataset_free(d);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        for (int t = 0; t <= T; t++) w[t] = text[a + i * (size_t)T + (size_t)t];
        seq_put(d, (int)i, w);
    }
    free(w);
    return RS_OK;
}

/* See data.h. */
int data_load_text(const char *path, int seq_len, DataPair *out) {
    memset(out, 0, sizeof *out);
    if (seq_len < 1) return rs_error(RS_ERR_INPUT, "--seq-len %d: must be at least 1", seq_len);
    struct stat st; /* a FIFO or a terminal would block the read forever: regular files only */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return rs_error(RS_ERR_INPUT, "--data text:%s: not a regular file (a %s); give a file of text", path,
                        S_ISDIR(st.st_mode) ? "directory" : S_ISFIFO(st.st_mode) ? "FIFO" : S_ISCHR(st.st_mode) ?
                        "character device" : S_ISSOCK(st.st_mode) ? "socket" : "special file");
    FILE *f = fopen(path, "rb");
    if (!f) return rs_error(RS_ERR_INPUT, "--data text:%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    int rc = buf ? RS_OK : rs_error(RS_ERR_RUNTIME, "out of memory");
    while (rc == RS_OK) {
        if (len == cap) {
            unsigned char *p = cap < ((size_t)1 << 31) ? realloc(buf, cap * 2) : NULL;
            if (!p) {
                rc = rs_error(RS_ERR_INPUT, "--data text:%s: too large (2 GiB at most)", path);
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) rc = rs_error(RS_ERR_INPUT, "--data text:%s: %s", path, strerror(errno ? errno : EIO));
            break;
        }
    }
    fclose(f);
    size_t T = (size_t)seq_len;
    if (rc == RS_OK && len == 0) rc = rs_error(RS_ERR_INPUT, "--data text:%s: the file is empty", path);
    else if (rc == RS_OK && len < T + 1)
        rc = rs_error(RS_ERR_INPUT, "--seq-len %d is longer than the text %s (%zu bytes: a sequence needs %zu)", seq_len,
                      path, len, T + 1);
    else if (rc == RS_OK && len < 2 * (T + 1))
        rc = rs_error(RS_ERR_INPUT, "--data text:%s: %zu bytes is shorter than two sequences of --seq-len %d (%zu bytes: "
                      "one to train, one to evaluate)", path, len, seq_len, 2 * (T + 1));
    if (rc == RS_OK) {
        size_t ev = (len + 9) / 10; /* the last 10%, at least one sequence */
        if (ev < T + 1) ev = T + 1;
        rc = text_windows(&out->train, buf, 0, len - ev, seq_len);
        if (rc == RS_OK) rc = text_windows(&out->eval, buf, len - ev, ev, seq_len);
        if (rc == RS_OK)
            snprintf(out->source, sizeof out->source, "text %.160s (%zu bytes as tokens, the last %zu evaluate)", path,
                     len, ev);
        else
            datapair_free(out);
    }
    free(buf);
    return rc;
}

/* n sequences from the successor table into d, from r. */
static int tokens_fill(Dataset *d, int n, int T, int vocab, const int *succ, Rng *r) {
    RS_TRY(seq_alloc(d, n, T, vocab));
    int *w = malloc(((size_t)T + 1) * sizeof *w);
    if (!w) {
        dataset_free(d);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        w[0] = (int)rng_below(r, (uint64_t)vocab);
        for (int t = 1; t <= T; t++) {
            uint64_t u = rng_below(r, 8); /* successor 0: 4/8, 1: 2/8, 2: 1/8, 3: 1/8 */
            int j = u < 4 ? 0 : u < 6 ? 1 : u < 7 ? 2 : 3;
            w[t] = succ[(size_t)w[t - 1] * 4 + (size_t)j];
        }
        seq_put(d, i, w);
    }
    free(w);
    return RS_OK;
}

/* See data.h. */
int data_make_tokens(int vocab, int seq_len, int n_train, int n_eval, uint64_t seed, DataPair *out) {
    memset(out, 0, sizeof *out);
    if (vocab < 1 || seq_len < 1 || n_train < 1 || n_eval < 1)
        return rs_error(RS_ERR_INPUT, "synthetic tokens need positive sizes: --vocab %d, --seq-len %d, %d train and %d "
                        "evaluation sequences", vocab, seq_len, n_train, n_eval);
    int *succ = malloc((size_t)vocab * 4 * sizeof *succ);
    if (!succ) return rs_error(RS_ERR_RUNTIME, "out of memory for a vocabulary of %d", vocab);
    Rng r;
    rng_seed(&r, seed ^ 0x746f6b656e73ULL); /* the table */
    for (size_t k = 0; k < (size_t)vocab * 4; k++) succ[k] = (int)rng_below(&r, (uint64_t)vocab);
    rng_seed(&r, seed ^ 0x747261696eULL); /* the training sequences, then the evaluation ones */
    int rc = tokens_fill(&out->train, n_train, seq_len, vocab, succ, &r);
    rng_seed(&r, seed ^ 0x6576616cULL);
    if (rc == RS_OK) rc = tokens_fill(&out->eval, n_eval, seq_len, vocab, succ, &r);
    free(succ);
    if (rc != RS_OK) {
        datapair_free(out);
        return rc;
    }
    snprintf(out->source, sizeof out->source, "synthetic tokens (vocabulary %d, four successors each, seed %llu)", vocab,
             (unsigned long long)seed);
    return RS_OK;
}
