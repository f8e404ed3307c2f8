/* zctx.h - the process's ZeroMQ context for a job, with --bind and --secure applied */
#ifndef RS_ZCTX_H
#define RS_ZCTX_H

#include "config.h"
#include "ctrl.h"

/* Creates the ZeroMQ context every socket of this process shares. --bind (when set) replaces
 * env->bind, the address data-plane sockets bind to; --secure KEYFILE turns on CURVE for every
 * socket made afterwards (common/secure.h). On failure *out is NULL and rs_errmsg() says why:
 * RS_ERR_INPUT (bad key file) or RS_ERR_RUNTIME. The caller closes it with zctx_close. */
int zctx_open(void **out, const Config *c, RankEnv *env);

/* Stops the authentication handler and terminates the context (after every socket is closed). */
void zctx_close(void *zctx);

#endif
