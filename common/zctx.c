/* zctx.c - creates and ends the process's ZeroMQ context with the job's bind address and security */
#include "zctx.h"
#include "err.h"
#include "secure.h"

#include <stdio.h>
#include <zmq.h>

int zctx_open(void **out, const Config *c, RankEnv *env) {
    *out = NULL;
    if (c->bind[0]) snprintf(env->bind, sizeof env->bind, "%s", c->bind);
    void *z = zmq_ctx_new();
    if (!z) return rs_error(RS_ERR_RUNTIME, "cannot create a ZeroMQ context: %s", zmq_strerror(zmq_errno()));
    if (c->secure[0]) {
        int rc = secure_enable(z, c->secure);
        if (rc != RS_OK) {
            zmq_ctx_term(z);
            return rc;
        }
    }
    *out = z;
    return RS_OK;
}

void zctx_close(void *zctx) {
    if (!zctx) return;
    secure_disable();
    zmq_ctx_term(zctx);
}
