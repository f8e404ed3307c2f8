/* zctx.h - the process's ZeroMQ context for a job, with --bind, --secure and the control plane's frame bound applied */
#ifndef RS_ZCTX_H
#define RS_ZCTX_H

#include "../base/config.h"
#include "../net/ctrl.h"

/* Creates the ZeroMQ context every socket of this process shares. --bind (when set) replaces
 * env->bind, the address data-plane sockets bind to; env->ctrl_max gets zctx_ctrl_bound;
 * --secure KEYFILE turns on CURVE for every socket made afterwards (net/secure.h). On
 * failure *out is NULL and rs_errmsg() says why:
 * RS_ERR_INPUT (bad key file) or RS_ERR_RUNTIME. The caller closes it with zctx_close. */
int zctx_open(void **out, const Config *c, RankEnv *env);

/* The largest frame a control-plane peer may send in a run of c among `members` processes
 * (RankEnv.ctrl_max, which zctx_open sets): the gather's report entry grows with the steps and,
 * under --trace, with the buckets and partitions every step, so the bound is 1 MiB plus 4 KiB a
 * member, plus per step 1 KiB, and under --trace 2 KiB + 256 bytes a bucket + 512 a partition,
 * plus 512 bytes an evaluation: two to four times what was measured (docs/architecture.md).
 * Steps are --steps, or --epochs over the training set (synthetic: --train-samples; text: the
 * file's bytes over --seq-len; MNIST: the IDX headers' counts), or 100; N times that when workers
 * run at their own pace (async, ssp). */
size_t zctx_ctrl_bound(const Config *c, int members);

/* Stops the authentication handler and terminates the context (after every socket is closed). */
void zctx_close(void *zctx);

#endif
