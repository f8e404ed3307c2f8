/* ps.h - the parameter server's entry points the trainer and the launcher call */
#ifndef RS_PS_H
#define RS_PS_H

#include "../common/config.h"
#include "../common/ctrl.h"
#include "../common/sync.h"

/* The "ps" back end is sync_ps() (common/sync.h; ps/client.c): with --ps-placement colocated
 * rank 0 also runs the server in a thread of its own; with --ps-placement sharded every rank runs
 * one shard of it (1/N of the keys) in a thread. */

/* DataParallel's step (--ps-mode dataparallel, ps/dataparallel.c): rank 0 scatters the global
 * batch and its parameters, gathers the logits, computes the loss and scatters its gradient,
 * around ps's pushes. Its init refuses --ps-placement dedicated and a run without
 * --global-batch (RS_ERR_INPUT). Never NULL. */
struct StepDriver;
const struct StepDriver *ps_dataparallel_driver(void);

/* The refusal of --ps-mode dataparallel with dedicated servers (the workers' and the servers'). */
#define PS_DP_NO_DEDICATED                                                                                  \
    "--ps-mode dataparallel needs --ps-placement colocated: DataParallel has no dedicated server (rank 0, " \
    "its GPU 0, gathers, reduces and updates)"

/* A dedicated server process's whole life (RINGSIDE_ROLE=server): binds, joins the control
 * plane, serves until every worker has said goodbye, hands its report entry to rank 0.
 * Returns the exit status. */
int ps_server_main(const Config *cfg, const RankEnv *env);

#endif
