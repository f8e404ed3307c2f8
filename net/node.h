/* node.h - which machine (node) a process is on: --nodes M emulated on one host, or a launcher's real nodes; what the data plane and the NIC are keyed by */
#ifndef RS_NODE_H
#define RS_NODE_H

#include <stddef.h>

#include "link.h"
#include "../base/config.h"

struct RankEnv;

/* ---- Types ---- */

/* A process's place among the job's nodes. Workers fill nodes of per_node ranks in rank order
 * (node = rank / per_node, as torchrun, srun's block distribution and mpirun --map-by node place
 * them); each dedicated server is a node of its own after the workers' (BytePS's CPU machines). */
typedef struct {
    int nodes;     /* the workers' nodes (M); 0: no hierarchy, every process a machine of its own */
    int per_node;  /* workers a node (G = N / M) */
    int node;      /* this process's node: 0..M-1 for a worker, M + k for dedicated server k */
    int local;     /* this process's index in its node (0 for a server) */
} NodePlace;

/* ---- Prototypes ---- */

/* This process's place for --nodes nodes (0: none) in the job e describes: nodes must divide the
 * workers (-n) and, under a launcher that places ranks on several hosts (LOCAL_WORLD_SIZE below
 * WORLD_SIZE), agree with it (N / M == LOCAL_WORLD_SIZE). 0 with *out set, or RS_ERR_INPUT naming
 * both values. */
int node_place(const struct RankEnv *e, int nodes, NodePlace *out);

/* Sets and reads this process's place (NULL or nodes 0: none). Call before any data-plane socket
 * is bound (net/zendpoint.h's host key carries the node). */
void node_set(const NodePlace *p);
const NodePlace *node_get(void);

/* Places this process for c's --nodes in the job e describes (node_place, node_set) and sets its
 * interfaces for it (net/link.h) from c's --link and --intra-link (already validated): without
 * nodes, the NIC its own; with nodes, the NIC for what leaves the node (the node's one NIC, shared
 * through link_share with every worker of the node when it holds more than one) and the fabric
 * for what stays in it. What train and bench run on every process, ranks and servers, before any
 * data-plane socket; link_share_release once every process of the node has joined. 0,
 * RS_ERR_INPUT (node_place's refusal) or RS_ERR_RUNTIME naming the shared interface. */
int node_link_open(const struct RankEnv *e, const Config *c);

/* The POSIX shared-memory name of this process's node's NIC for the job whose token is token
 * ("/ringside-nic-HASH-nNODE"), written into out. */
void node_nic_name(const char *token, char *out, size_t len);

#endif
