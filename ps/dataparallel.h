/* dataparallel.h - DataParallel's channel: rank 0 scatters the batch and the parameters, gathers the logits, computes the loss, scatters its gradient */
#ifndef RS_PS_DATAPARALLEL_H
#define RS_PS_DATAPARALLEL_H

#include <stddef.h>
#include "../common/sync.h"

/* ---- Types ---- */

/* Rank 0's channel to every other rank (--ps-mode dataparallel): a ROUTER on rank 0, a DEALER
 * (identity "w<rank>") on each other rank. The gradients still go to the parameter server;
 * this channel carries what DataParallel adds around it (ps/wire.h lists the messages). */
typedef struct DpChannel DpChannel;

/* Called about every 100 ms while a wait blocks: 0 to go on waiting, or RS_ERR_* to give up
 * (the client checks its server: rank 0 the serving thread's status, the others an ABORT). */
typedef int (*DpCheckFn)(void *arg);

/* ---- Prototypes ---- */

/* Creates the channel for job (job->model and job->cfg->global_batch > 0 required). Rank 0
 * binds its ROUTER on tcp://job->addr:* and allocates the gathered logits, their gradient and
 * the global batch's labels on its device under MEM_GATHER: 4 x global_batch x (2 x classes +
 * 1) bytes. check(arg) is polled during waits. 0, or RS_ERR_INPUT / RS_ERR_RUNTIME with
 * rs_errmsg() set; *out NULL on failure. */
int dp_create(DpChannel **out, const SyncJob *job, DpCheckFn check, void *arg);

/* Rank 0's endpoint ("tcp://127.0.0.1:40123"); "" on the other ranks. Owned by the channel. */
const char *dp_endpoint(const DpChannel *ch);

/* Other ranks: connects the DEALER to rank 0's endpoint. Rank 0: nothing. 0 or RS_ERR_PEER. */
int dp_connect(DpChannel *ch, const char *endpoint);

/* Once before the first step: every other rank sends rank 0 a PULL, rank 0 waits (up to the
 * job's timeout) until it has heard from all of them, so that it can address them. 0 or
 * RS_ERR_PEER naming the ranks missing. */
int dp_hello(DpChannel *ch);

/* SyncOps.scatter_batch: rank 0 sends every other rank its current parameters (the replicate)
 * and its chunk of the batch; each rank ends with its chunk in model->act[0] / labels and
 * (others) rank 0's parameters in model->params. Adds comm_s and idle_s to *acc. */
int dp_scatter(DpChannel *ch, int step, const float *x, const int *y, int global_rows, int *local_rows,
               SyncStep *acc);

/* SyncOps.loss: gathers the logits to rank 0, which runs softmax cross-entropy over the global
 * batch into its model->stats and scatters the gradient back; every rank ends with its rows'
 * gradient in model->dbuf[0]. Adds comm_s, idle_s and (rank 0) compute_s to *acc. */
int dp_loss(DpChannel *ch, int local_rows, SyncStep *acc);

/* Adds the channel's cumulative counters to *out (bytes, messages, dropped). */
void dp_traffic(const DpChannel *ch, SyncTraffic *out);

/* Closes the socket, waits (bounded) for zero-copy sends to let go, frees the buffers. NULL
 * is a no-op. */
void dp_destroy(DpChannel *ch);

#endif
