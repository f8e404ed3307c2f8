/* synthetic.c - deterministic, learnable class clusters of any input size and class count */
#include "data.h"
#include "../base/err.h"
#include "../base/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Noise per input value, and how many noise sigmas apart the two closest class centres are.
 * With these a 784-128-10 MLP (plain SGD, batch 64, lr 0.05) goes from chance to 0.95 evaluation
 * accuracy in 100-200 steps and to 1.0 by step 300, over several seeds: separable, yet the
 * first hundred steps show a real learning curve. */
#define SYN_SIGMA 0.3
#define SYN_SEPARATION 10.0

/* Derives independent streams for the centres, the training set and the evaluation set: the
 * evaluation samples are drawn after the training ones, from a stream of their own, so they stay
 * the same whatever n_train is. */
enum { SYN_STREAM_CENTRES = 1, SYN_STREAM_TRAIN = 2, SYN_STREAM_EVAL = 3 };

static void syn_stream(Rng *r, uint64_t seed, uint64_t stream) {
    Rng mix;
    rng_seed(&mix, seed);
    uint64_t base = rng_next_u64(&mix);
    rng_seed(r, base ^ (stream * 0xd1b54a32d192ed03ULL));
}

/* Smallest distance between two of the classes centres (dim each). */
static double syn_min_distance(const float *c, int classes, int dim) {
    double best = INFINITY;
    for (int a = 0; a < classes; a++)
        for (int b = a + 1; b < classes; b++) {
            double s = 0;
            const float *p = c + (size_t)a * dim, *q = c + (size_t)b * dim;
            for (int j = 0; j < dim; j++) s += ((double)p[j] - q[j]) * ((double)p[j] - q[j]);
            if (s < best) best = s;
        }
    return sqrt(best);
}

/* Fills d with n samples: balanced labels in shuffled order, each a centre plus noise. */
static int syn_fill(Dataset *d, int n, int dim, int classes, const float *centres, float sigma,
                    Rng *r) {
    memset(d, 0, sizeof *d);
    d->x = malloc((size_t)n * dim * sizeof *d->x);
    d->y = malloc((size_t)n * sizeof *d->y);
    if (!d->x || !d->y) {
        dataset_free(d);
        return rs_error(RS_ERR_RUNTIME, "synthetic data: out of memory for %d samples of %d", n, dim);
    }
    for (int i = 0; i < n; i++) d->y[i] = i % classes;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1);
        int t = d->y[i];
        d->y[i] = d->y[j];
        d->y[j] = t;
    }
    /* Normals come in pairs; the second of each waits in `spare` for the next value. */
    double spare = 0;
    int have_spare = 0;
    for (int i = 0; i < n; i++) {
        const float *c = centres + (size_t)d->y[i] * dim;
        float *x = d->x + (size_t)i * dim;
        for (int j = 0; j < dim; j++) {
            double g;
            if (have_spare) {
                g = spare;
                have_spare = 0;
            } else {
                rng_normal_pair(r, &g, &spare);
                have_spare = 1;
            }
            float v = c[j] + sigma * (float)g;
            x[j] = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        }
    }
    d->n = n;
    d->dim = dim;
    d->classes = classes;
    return RS_OK;
}

/* See data.h. */
int data_make_synthetic(int dim, int classes, int n_train, int n_eval, uint64_t seed,
                        DataPair *out) {
    float *centres = NULL;
    Rng r;
    int rc;

    memset(out, 0, sizeof *out);
    if (dim < 1 || classes < 1 || n_train < 1 || n_eval < 1)
        return rs_error(RS_ERR_INPUT, "synthetic data needs positive sizes: dim %d, classes %d, "
                        "%d train and %d evaluation samples", dim, classes, n_train, n_eval);
    centres = malloc((size_t)classes * dim * sizeof *centres);
    if (!centres)
        return rs_error(RS_ERR_RUNTIME, "synthetic data: out of memory for %d centres of %d",
                        classes, dim);

    /* Centres uniform in [0,1]^dim, then drawn towards 0.5 until the closest two are
     * SYN_SEPARATION sigmas apart; where they are closer (few dims, many classes), the noise
     * shrinks instead, so every shape is equally hard. */
    syn_stream(&r, seed, SYN_STREAM_CENTRES);
    for (size_t k = 0; k < (size_t)classes * dim; k++) centres[k] = rng_uniform(&r);
    double dmin = classes > 1 ? syn_min_distance(centres, classes, dim) : INFINITY;
    if (dmin < 1e-6) dmin = 1e-6;
    double shrink = SYN_SEPARATION * SYN_SIGMA / dmin;
    if (shrink > 1.0) shrink = 1.0;
    float sigma = (float)(classes > 1 ? shrink * dmin / SYN_SEPARATION : SYN_SIGMA);
    for (size_t k = 0; k < (size_t)classes * dim; k++)
        centres[k] = (float)(0.5 + shrink * ((double)centres[k] - 0.5));

    syn_stream(&r, seed, SYN_STREAM_TRAIN);
    if ((rc = syn_fill(&out->train, n_train, dim, classes, centres, sigma, &r)) != RS_OK) goto err;
    syn_stream(&r, seed, SYN_STREAM_EVAL);
    if ((rc = syn_fill(&out->eval, n_eval, dim, classes, centres, sigma, &r)) != RS_OK) goto err;
    snprintf(out->source, sizeof out->source, "synthetic class clusters (seed %llu, noise sigma "
             "%.3g)", (unsigned long long)seed, sigma);
    free(centres);
    return RS_OK;

err:
    free(centres);
    datapair_free(out);
    return rc;
}
