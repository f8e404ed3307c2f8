/* rest_alone.c - one rank's CPU step with its GEMMs and without them: how long everything but GEMM takes by itself, and so the most of the BLAS roof a step can reach */
/*
 * usage: rest_alone [REPS] [TRAIN OPTIONS...]     e.g. rest_alone 200 --model gpt --batch 16 --optimizer adamw --threads 2
 *
 * Builds the model of the options on the CPU (one rank, the first batch of its synthetic data)
 * and times REPS steps (forward, loss, backward, optimizer; 10 warm-up steps first) two ways,
 * alternating in blocks of 10: whole, and with the kernel table's gemm and gemm_strided_batched
 * replaced by calls that return at once, so that every other op runs on the values the last
 * whole step left (finite, as in training) in the same order. It prints the median step of each,
 * the whole step's time inside GEMM (kernels_cpu_gemm_seconds), and
 *   rest alone = the step without its GEMMs: what LayerNorm, GELU, the softmaxes, AdamW, im2col
 *                and the rest take by themselves, with no GEMM between them to evict their data;
 *   best share = GEMM / (GEMM + rest alone): the most of the roof the step reaches however the
 *                rest is scheduled, unless its work is fused away.
 * Exit status 2 on bad options, 1 on a failed step.
 */
#include "../../base/clock.h"
#include "../../base/config.h"
#include "../../kernels/device.h"
#include "../../base/err.h"
#include "../../model/model.h"
#include "../../engine/report.h"
#include "../../kernels/ops.h"
#include "../../engine/config_check.h"
#include "../backends.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 10

static int gemm_skip(KernelCtx *ctx, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
    return 0;
}

static int gemm_batched_skip(KernelCtx *ctx, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                             long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                             long long sc, int batch) {
    return 0;
}

/* One training step on the first B samples already in the model; 0 or RS_ERR_*. */
static int step(Model *m, const Config *c, int B, int t) {
    RS_TRY(model_forward(m, B));
    model_loss(m, B);
    RS_TRY(model_backward(m, B, NULL, NULL));
    model_optimize(m, 0, m->nparams, c, 1.0f / (float)B, t);
    return RS_OK;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 0;
    if (reps < BLOCK) {
        fprintf(stderr, "usage: rest_alone REPS [TRAIN OPTIONS...] (REPS >= %d)\n", BLOCK);
        return 2;
    }
    Config c;
    config_defaults(&c);
    int help = 0;
    if (config_parse(&c, argc - 2, argv + 2, &help) || backend_validate(&c) || model_check(&c)) {
        fprintf(stderr, "rest_alone: %s\n", rs_errmsg());
        return 2;
    }
    Device dev;
    DataPair data;
    Model m;
    memset(&m, 0, sizeof m);
    if (device_open(&dev, "cpu", 0, NULL) || model_load_data(&c, &data) || model_create(&m, &dev, &c, c.batch, 1)) {
        fprintf(stderr, "rest_alone: %s\n", rs_errmsg());
        return 2;
    }
    kernels_cpu_set_threads(c.threads > 0 ? c.threads : 1);
    int B = c.batch < data.train.n ? c.batch : data.train.n, ylen = dataset_ylen(&data.train);
    if (device_h2d(&dev, m.act[0], data.train.x, (size_t)B * data.train.dim * sizeof(float)) ||
        device_h2d(&dev, m.labels, data.train.y, (size_t)B * ylen * sizeof(int))) {
        fprintf(stderr, "rest_alone: %s\n", rs_errmsg());
        return 1;
    }
    const KernelOps *whole = dev.k;
    KernelOps rest = *whole;
    rest.gemm = gemm_skip;
    rest.gemm_strided_batched = gemm_batched_skip;
    double *tw = malloc(reps * sizeof *tw), *tr = malloc(reps * sizeof *tr), gemm = 0;
    int t = 1;
    if (!tw || !tr) {
        fprintf(stderr, "rest_alone: out of memory for %d steps' times\n", reps);
        return 1;
    }
    for (int i = 0; i < BLOCK; i++)
        if (step(&m, &c, B, t++)) goto fail;
    for (int done = 0; done < reps; done += BLOCK) {
        for (int i = 0; i < BLOCK && done + i < reps; i++) {
            double g0 = kernels_cpu_gemm_seconds(), t0 = clock_now();
            if (step(&m, &c, B, t++)) goto fail;
            tw[done + i] = clock_now() - t0;
            gemm += kernels_cpu_gemm_seconds() - g0;
        }
        dev.k = &rest;
        for (int i = 0; i < BLOCK && done + i < reps; i++) {
            double t0 = clock_now();
            if (step(&m, &c, B, t++)) goto fail;
            tr[done + i] = clock_now() - t0;
        }
        dev.k = whole;
    }
    double w = report_percentile(tw, reps, 50), r = report_percentile(tr, reps, 50), g = gemm / reps;
    printf("# %s, batch %d, %d threads, %d steps each way (blocks of %d, alternating), medians\n", c.model, B,
           c.threads > 0 ? c.threads : 1, reps, BLOCK);
    printf("whole step %.3f ms, of it in GEMM %.3f ms (%.0f%%); rest alone %.3f ms; best share %.0f%%\n", 1e3 * w,
           1e3 * g, 100 * g / w, 1e3 * r, 100 * g / (g + r));
    model_free(&m);
    datapair_free(&data);
    device_close(&dev);
    free(tw);
    free(tr);
    return 0;
fail:
    fprintf(stderr, "rest_alone: step %d: %s\n", t, rs_errmsg());
    return 1;
}
