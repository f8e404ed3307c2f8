/* fits.c - refuses, before anything starts, a job whose memory would not fit on this machine */
#include "fits.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "../model/model.h"
#include "../kernels/device.h"

#include <dirent.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROCESS_BYTES (64.0 * 1048576) /* libraries, sockets' queues, the report: about 40-60 MB seen */

/* 1 when the NVIDIA driver lists a GPU (without initialising CUDA, which a process that forks
 * ranks must not do). */
static int driver_has_gpu(void) {
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n > 0;
}

/* 1 when c's model lives in host memory: the CPU devices, and auto where there is no GPU. A
 * GPU's memory is its own: a model too large for it fails its allocation with a message. */
static int model_on_host(const Config *c) {
    if (!strcmp(c->device, "cpu") || !strcmp(c->device, "cpu-async")) return 1;
    return !strcmp(c->device, "auto") && (!device_cuda_ops() || !driver_has_gpu());
}

int fits_check(const Config *c, int workers, int servers) {
    const char *off = getenv("RINGSIDE_MEMORY_CHECK");
    if (off && !strcmp(off, "off")) return RS_OK;
    int world = c->nranks > 0 ? c->nranks : 1;
    int micro = c->global_batch > 0 && c->accum_steps > 1 ? c->global_batch / c->accum_steps : c->global_batch;
    int batch = c->global_batch > 0 ? (micro + world - 1) / world : c->batch;
    size_t model = 0, nparams = 0;
    int in_width = 0;
    RS_TRY(model_estimate(c, batch, 1, &model, &nparams, &in_width));
    double pb = (double)nparams * sizeof(float), opt = (!strcmp(c->optimizer, "adamw") ? 2 : 1) * pb;
    double data = ((double)c->train_samples + c->eval_samples) * ((double)in_width + 1) * 4;
    double acc = c->accum_steps > 1 ? pb : 0; /* --accum-steps: the engine's sum of the micro-batches' gradients */
    double comm = 2 * pb, on_host = model_on_host(c) ? (double)model + acc : 2 * pb; /* a GPU's host side: staging */
    double worker = on_host + data + comm + PROCESS_BYTES, server = 2 * pb + opt + PROCESS_BYTES;
    double need = workers * worker + servers * server;
    char src[64];
    size_t avail = mem_host_available(src, sizeof src);
    if (avail > 0 && need > 0.5 * (double)avail && need <= (double)avail)
        log_warn("--model %s: the job needs about %.3g GB of memory, %.3g GB available (%s)", c->model, need / 1e9,
                 (double)avail / 1e9, src);
    if (avail == 0 || need <= (double)avail) return RS_OK;
    char srv[96] = "";
    if (servers > 0) snprintf(srv, sizeof srv, " and %d server%s x %.3g GB", servers, servers > 1 ? "s" : "", server / 1e9);
    return rs_error(RS_ERR_INPUT, "--model %s: the job needs about %.3g GB of memory (%d rank%s x %.3g GB%s: "
                                  "%zu parameters, %.3g GB for the model, its gradients, optimizer state and "
                                  "activations%s, %.3g GB of data), %.3g GB available (%s): a smaller model, "
                                  "batch or data set, or fewer ranks (RINGSIDE_MEMORY_CHECK=off skips this check)",
                    c->model, need / 1e9, workers, workers > 1 ? "s" : "", worker / 1e9, srv, nparams,
                    on_host / 1e9, model_on_host(c) ? "" : " staged on the host", data / 1e9, (double)avail / 1e9, src);
}
