/* blas_roof.c - the BLAS roof of one MLP step: the time cblas_sgemm alone takes for the step's GEMMs, on the same shapes and threads */
/*
 * usage: blas_roof LAYERS BATCH THREADS [REPS]      e.g. blas_roof 784,1024,1024,10 128 2 50
 *
 * One step of the MLP does, per layer l (in -> out): forward Y = X W (B x in by in x out),
 * backward dW = X^T dY and, for every layer but the first, dX = dY W^T: about 6 x parameters x
 * batch FLOPs (the first layer's dX is not computed). This program times exactly those calls
 * (row-major) REPS times after 5 warm-up steps, with OpenBLAS on THREADS threads and then on
 * one, and prints for each the median step's GEMM time, its FLOP rate and the samples per
 * second a step made of nothing else would reach; the better of the two is the roof.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LAYERS 16

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *filled(size_t n) {
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "blas_roof: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s LAYERS BATCH THREADS [REPS]\n", argv[0]);
        return 2;
    }
    int sizes[MAX_LAYERS], n = 0;
    for (char *s = strtok(argv[1], ","); s && n < MAX_LAYERS; s = strtok(NULL, ",")) sizes[n++] = atoi(s);
    int B = atoi(argv[2]), threads = atoi(argv[3]), reps = argc > 4 ? atoi(argv[4]) : 50;
    if (n < 2 || B < 1 || threads < 1 || reps < 1) {
        fprintf(stderr, "blas_roof: bad arguments\n");
        return 2;
    }
    int maxw = 0;
    double flops = 0;
    for (int i = 0; i < n; i++) maxw = sizes[i] > maxw ? sizes[i] : maxw;
    float *W[MAX_LAYERS], *dW[MAX_LAYERS], *act[MAX_LAYERS];
    for (int l = 0; l + 1 < n; l++) {
        W[l] = filled((size_t)sizes[l] * sizes[l + 1]);
        dW[l] = filled((size_t)sizes[l] * sizes[l + 1]);
        flops += 2.0 * B * sizes[l] * sizes[l + 1] * (l > 0 ? 3 : 2);
    }
    for (int l = 0; l < n; l++) act[l] = filled((size_t)B * sizes[l]);
    float *dY = filled((size_t)B * maxw), *dX = filled((size_t)B * maxw);
    double *t = malloc((size_t)reps * sizeof *t);
    /* OpenBLAS on THREADS threads, then on one: the better is the roof (on a busy machine
     * OpenBLAS's own threads can lose to one) */
    double best = 0;
    for (int pass = 0; pass < (threads > 1 ? 2 : 1); pass++) {
        openblas_set_num_threads(pass ? 1 : threads);
        for (int r = -5; r < reps; r++) {
            double t0 = now();
            for (int l = 0; l + 1 < n; l++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, sizes[l + 1], sizes[l],
                            1.0f, act[l], sizes[l], W[l], sizes[l + 1], 0.0f, act[l + 1],
                            sizes[l + 1]);
            for (int l = n - 2; l >= 0; l--) {
                int in = sizes[l], out = sizes[l + 1];
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, B, 1.0f, act[l], in,
                            dY, out, 0.0f, dW[l], out);
                if (l > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, in, out, 1.0f, dY,
                                out, W[l], out, 0.0f, dX, in);
            }
            if (r >= 0) t[r] = now() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        double med = t[reps / 2];
        printf("threads %d gemm_step_ms %.3f gemm_gflops %.2f samples_per_s %.0f\n",
               pass ? 1 : threads, med * 1e3, flops / med * 1e-9, B / med);
        if (B / med > best) best = B / med;
    }
    printf("roof_samples_per_s %.0f\n", best);
    return 0;
}
