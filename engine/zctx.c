/* zctx.c - creates and ends the process's ZeroMQ context with the job's bind address, security and control-plane frame bound */
#include "zctx.h"
#include "../base/err.h"
#include "../net/gate.h"
#include "../net/secure.h"
#include "config_check.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zmq.h>

/* The sample count of an MNIST images file (raw or gzip: zlib reads both) from its IDX header; 0
 * when it cannot be read. */
static double zctx_idx_count(const char *dir, const char *name) {
    char path[1200];
    unsigned char h[8];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f) return 0;
    int n = gzread(f, h, sizeof h);
    gzclose(f);
    return n == (int)sizeof h ? (double)((uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7]) : 0;
}

/* At least the training samples of a run of c (see zctx_ctrl_bound). */
static double zctx_train_samples(const Config *c) {
    if (!strcmp(c->data, "synthetic")) return c->train_samples > 0 ? c->train_samples : 0;
    struct stat st;
    if (!strncmp(c->data, "text:", 5))
        return stat(c->data + 5, &st) == 0 ? (double)st.st_size / (c->seq_len > 0 ? c->seq_len : 1) + 1 : 0;
    const char *names[] = {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte",
                           "t10k-images-idx3-ubyte.gz"};
    double n = 0;
    for (int i = 0; i < 4; i++) {
        double k = zctx_idx_count(c->data, names[i]);
        if (k > n) n = k;
    }
    return n > 0 ? n : 1e6; /* unreadable here: the data load says why; a million samples meanwhile */
}

size_t zctx_ctrl_bound(const Config *c, int members) {
    int per_step = c->global_batch > 0 ? c->global_batch : c->batch > 0 ? c->batch : 1;
    double steps = c->steps > 0 ? c->steps : c->epochs > 0 ? c->epochs * (zctx_train_samples(c) / per_step + 1) : 100;
    if (!config_lockstep(c)) steps *= members > 1 ? members : 1;
    double params = (double)config_param_count(c), bucket = c->bucket_mb > 0 ? c->bucket_mb * 1048576.0 : 1048576.0;
    double buckets = 2 + params * 4 / bucket, part = (double)config_partition_keys(c);
    double partitions = part > 0 ? buckets + params / part + 1 : buckets;
    double per = 1024 + (c->trace[0] ? 2048 + 256 * buckets + 512 * partitions : 0);
    double evals = c->eval_every > 0 ? steps / c->eval_every + 1 : 1;
    double bound = 1048576.0 + 4096.0 * (members > 0 ? members : 1) + steps * per + 512 * evals;
    return bound < (double)INT64_MAX / 2 ? (size_t)bound : (size_t)(INT64_MAX / 2);
}

int zctx_open(void **out, const Config *c, RankEnv *env) {
    *out = NULL;
    if (c->bind[0]) snprintf(env->bind, sizeof env->bind, "%s", c->bind);
    env->ctrl_max = zctx_ctrl_bound(c, env->world + env->servers);
    void *z = zmq_ctx_new();
    if (!z) return rs_error(RS_ERR_RUNTIME, "cannot create a ZeroMQ context: %s", zmq_strerror(zmq_errno()));
    int rc = c->secure[0]     ? secure_enable(z, c->secure) /* CURVE: the job's key */
             : env->token[0] ? gate_open(z, env->token)    /* the job token in every handshake (net/gate.h) */
                             : RS_OK;                      /* one process alone: nothing to admit */
    if (rc != RS_OK) {
        zmq_ctx_term(z);
        return rc;
    }
    *out = z;
    return RS_OK;
}

void zctx_close(void *zctx) {
    if (!zctx) return;
    gate_close(zctx);
    secure_disable();
    zmq_ctx_term(zctx);
}
