/* ps.h - the parameter server's entry points the trainer and the launcher call */
#ifndef RS_PS_H
#define RS_PS_H

#include "../base/config.h"
#include "../net/ctrl.h"
#include "../engine/sync.h"

/* The back ends of this floor, as the registry (experiments/backends.c) finds them. */
const SyncOps *sync_ps(void);     /* ps/client.c (rank 0 may host the colocated server) */
const SyncOps *sync_byteps(void); /* ps/client.c: BytePS's split over worker shards and k servers */
const SyncOps *sync_byteps_hierarchical(void); /* ps/hbyteps.c: the same, one worker a machine (--hierarchical) */

/* The "ps" back end is sync_ps() (ps/client.c): with --ps-placement colocated
 * rank 0 also runs the server in a thread of its own; with --ps-placement sharded every rank runs
 * one shard of it (1/N of the keys) in a thread. The "byteps" back end, sync_byteps(), is the same
 * protocol over BytePS's servers (OSDI'20 section 4.1): every one of the n workers runs a shard in
 * a thread and --ps-servers k dedicated processes one each, keys split in the paper's
 * proportions (ps/shard.h's shard_byteps; docs/ps-protocol.md). */

/* The refusals of --sync byteps for a job of world workers: --ps-servers k outside 0..world
 * ("the formulas cover 0 <= k <= n"), k > 0 with one worker (the split's n^2 + kn - 2k is 0),
 * a placement, consistency or mode of its own. 0, or RS_ERR_INPUT naming why (config_validate
 * refuses the same where -n gives the world; the launcher, every worker and server re-check with
 * the job's). */
int ps_byteps_check(const Config *cfg, int world);

/* BytePS's n for a job of world workers: the machines (--nodes M) under --hierarchical, where M
 * nodes of more than one rank each make the machine-level reduce (ps/hbyteps.c) the back end;
 * else world (every rank a worker). What the workers' split and every CPU server count by. */
int ps_byteps_machines(const Config *cfg, int world);

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
 * plane, serves until every worker has said goodbye, hands its report entry to rank 0. nparams:
 * the training keys (PS_MODEL_KEYS: the model's, config_param_count; 0: a server of all-reduces
 * only, as `bench` starts: no parameters, no initial parameters to wait for); job: the canonical
 * text every member of the job must agree on (NULL: config_canonical(cfg)). Returns the exit
 * status. ps_server_main is --ps-placement dedicated's (keys by range), ps_byteps_server_main one
 * of byteps's k CPU servers (keys by BytePS's weights, after the workers' shards). */
#define PS_MODEL_KEYS ((size_t)-1)
int ps_server_main(const Config *cfg, const RankEnv *env, size_t nparams, const char *job);
int ps_byteps_server_main(const Config *cfg, const RankEnv *env, size_t nparams, const char *job);

#endif
