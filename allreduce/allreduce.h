/* allreduce.h - the all-reduce floor's back ends as the registry finds them: none, ring, tree, nccl, zero and lab 5's student */
#ifndef RS_ALLREDUCE_H
#define RS_ALLREDUCE_H

#include <stddef.h>

#include "../engine/sync.h"

/* Each returns its back end's table (engine/sync.h's contract); experiments/backends.c lists
 * them by name. */
const SyncOps *sync_none(void);
const SyncOps *sync_ring(void);
const SyncOps *sync_ring_hierarchical(void); /* allreduce/hring.c: --sync ring --hierarchical under --nodes */
const SyncOps *sync_tree(void);    /* allreduce/tree.c: double binary trees on the mesh */
const SyncOps *sync_tree_hierarchical(void); /* allreduce/tree.c: NCCL's trees over nodes, chains inside (--hierarchical) */
const SyncOps *sync_nccl(void);    /* NULL in a build without CUDA (allreduce/nccl_none.c) */
const SyncOps *sync_student(void); /* lab 5: allreduce/student.c, a skeleton to complete */
const SyncOps *sync_zero(void);    /* allreduce/zero.c: ZeRO's sharded data parallelism (--zero-stage) */

/* A host ring's traffic (allreduce/ring.h's Ring, NULL for one rank) as a back end reports it: its
 * counts, its transport, and where every byte goes (to the right neighbour, from the left one:
 * on this node or across it). For every back end written on the ring (ring, zero). */
struct Ring;
void ring_traffic_fill(const struct Ring *r, SyncTraffic *out);

/* A back end's host ring for its job (world > 1): ring_create_for with the hash of the job token
 * (else of the options' canonical text), the job's data-plane address, timeout and ZeroMQ context,
 * lanes sized to the most one collective takes (the parameters' broadcast, or bench's max_count),
 * and the wire --wire and --loss-scale set. Status codes as ring_create. For every back end
 * written on the ring (ring, zero). */
int ring_job_create(const SyncJob *job, struct Ring **out, char *endpoint, size_t len);

/* The NCCL library this process loaded and the headers it was built against, as "2.28.9":
 * 0, or -1 (both set to "") in a build without NCCL or where ncclGetVersion fails. */
int sync_nccl_versions(char *loaded, size_t loaded_len, char *built, size_t built_len);

#endif
