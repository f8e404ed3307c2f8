/* main.c - the ringside command line: dispatches train, bench, matrix, claims, fit, predict and info */
#include "backends.h"
#include "../kernels/device.h"
#include "../base/clock.h"
#include "../base/err.h"
#include "../base/heap.h"
#include "../base/log.h"
#include "../engine/report.h"
#include "../net/elastic.h"
#include "../net/secure.h"
#include "bench.h"
#include "claims.h"
#include "fit.h"
#include "forecast.h"
#include "matrix.h"
#include "train.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void main_usage(FILE *f) {
    fprintf(f,
            "usage: ringside <command> [options]\n"
            "\n"
            "ringside trains a model (an MLP, LeNet-5 or a GPT-style transformer) with interchangeable\n"
            "gradient synchronisation (ZeroMQ parameter servers: DataParallel's rank 0, dedicated, sharded,\n"
            "BytePS; ring all-reduce in host memory or over NCCL) and measures the cost.\n"
            "\n"
            "commands:\n"
            "  train    train the model (one rank, or -n N local ranks); writes a JSON report\n"
            "  bench    an nccl-tests-style all-reduce sweep over a back end (ring, nccl, ps, byteps)\n"
            "  matrix   run an experiment matrix (experiments/matrices/*.json) into a folder of reports\n"
            "  claims   decide the DataParallel claims on a folder of reports (PASS / FAIL / NOT-RUN)\n"
            "  fit      fit alpha and beta per transport to bench reports, with the fit's quality\n"
            "  predict  every architecture's communication per step at N ranks past this machine, from a fitted link\n"
            "  info     what this build supports, the devices found, library versions\n"
            "  keygen   write a CURVE key pair for --secure jobs\n"
            "\n"
            "  ringside <command> --help   lists a command's options with their defaults\n");
}

/* `ringside info`: the build's capabilities, the devices and library versions. */
static int info_main(int argc, char **argv) {
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: ringside info\n\nPrints what this build supports, the devices found and library versions.\n");
        return RS_OK;
    }
    if (argc > 0) {
        log_error("info: unexpected argument '%s'", argv[0]);
        return RS_ERR_INPUT;
    }
    cJSON *env = backend_env_json();
    const DeviceOps *cu = device_cuda_ops();
    printf("ringside %s\n", RS_GIT);
    printf("build:\n");
    printf("  cuda       %s\n", cu ? "yes (kernels, cuBLAS)" : "no (CPU-only build)");
    cJSON *nl = cJSON_GetObjectItem(env, "nccl"), *nb = cJSON_GetObjectItem(env, "nccl_built");
    if (nl && nb) printf("  nccl       yes: library %s, headers %s\n", nl->valuestring, nb->valuestring);
    else printf("  nccl       %s\n", cu ? "yes (ncclGetVersion failed)" : "no");
    printf("  blas       %s\n", cJSON_GetObjectItem(env, "blas")->valuestring);
    printf("libraries:\n");
    printf("  zeromq     %s\n", cJSON_GetObjectItem(env, "zeromq")->valuestring);
    printf("  cjson      %s\n", cJSON_GetObjectItem(env, "cjson")->valuestring);
    printf("  zlib       %s\n", cJSON_GetObjectItem(env, "zlib")->valuestring);
    printf("devices:\n");
    cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(env, "devices")) {
        printf("  %-10s %s\n", cJSON_GetObjectItem(d, "name")->valuestring,
               cJSON_GetObjectItem(d, "description")->valuestring);
    }
    if (cu && cu->count() == 0) printf("  (no CUDA device found: --device auto runs on the CPU)\n");
    cJSON_Delete(env);
    return RS_OK;
}

/* `ringside keygen [--force] FILE`: a CURVE key pair for --secure, readable by its owner only. */
static int keygen_main(int argc, char **argv) {
    int force = argc == 2 && (!strcmp(argv[0], "--force") || !strcmp(argv[1], "--force"));
    if (force && !strcmp(argv[0], "--force")) argv++;
    if (force) argc--;
    if (argc != 1 || argv[0][0] == '-') {
        printf("usage: ringside keygen [--force] FILE\n\nWrites a new CURVE key pair (mode 0600) for jobs run with "
               "--secure FILE.\n"
               "Every rank and server of a job needs the same file. An existing FILE is kept unless --force.\n");
        return argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) ? RS_OK : RS_ERR_INPUT;
    }
    int rc = secure_keygen(argv[0], force);
    if (rc) log_error("%s", rs_errmsg());
    else printf("# key pair written to %s (keep it private; copy it to every host of the job)\n", argv[0]);
    return rc;
}

/* Under torchrun (TORCHELASTIC_ERROR_FILE set), a failed command leaves the agent its error file,
 * so that the job's failure summary names this process's first error. Returns rc. */
static int main_finish(int rc) {
    const char *path = getenv("TORCHELASTIC_ERROR_FILE");
    if (rc == RS_OK || !path || !*path) return rc;
    char msg[2200];
    if (*log_first_error()) snprintf(msg, sizeof msg, "ringside: %s", log_first_error());
    else snprintf(msg, sizeof msg, "ringside: exited with status %d", rc);
    if (elastic_error_write(path, msg, (long long)time(NULL)) != RS_OK)
        log_warn("TORCHELASTIC_ERROR_FILE: %s", rs_errmsg());
    return rc;
}

static int main_dispatch(int argc, char **argv) {
    if (argc < 2) {
        main_usage(stderr);
        return RS_ERR_INPUT;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        main_usage(stdout);
        return RS_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("ringside %s\n", RS_GIT);
        return RS_OK;
    }
    if (!strcmp(cmd, "train")) return train_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench")) return bench_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "matrix")) return matrix_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "claims")) return claims_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "fit")) return fit_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "predict")) return forecast_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return info_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "keygen")) return keygen_main(argc - 2, argv + 2);
    log_error("unknown command '%s'", cmd);
    main_usage(stderr);
    return RS_ERR_INPUT;
}

int main(int argc, char **argv) {
    heap_init();           /* before any thread: one malloc arena (base/heap.h) */
    clock_precise_waits(); /* and a timed wait's slack of 1 us, which every thread inherits (base/clock.h) */
    return main_finish(main_dispatch(argc, argv));
}
