/* config_check.h - the run's options checked together once parsed, and what they imply (the parameter count, the partitions) */
#ifndef RS_CONFIG_CHECK_H
#define RS_CONFIG_CHECK_H

#include "../base/config.h"

#include <stddef.h>

/* ---- Prototypes ---- */

/* Checks cross-option rules after parsing (batch > 0, layers >= 2 sizes, ...).
 * RS_ERR_INPUT with the option named on failure. */
int config_validate(const Config *c);

/* --ps-partition-kb's refusals (config_validate's, and bench's): not auto, off or a positive
 * number of KiB; less than one parameter on the wire; larger than a bucket (--bucket-mb);
 * more partitions of nparams keys than the wire header addresses (nparams 0: not checked).
 * 0 or RS_ERR_INPUT naming the value. */
int config_partition_check(const Config *c, size_t nparams);

/* Keys per parameter-server partition (--ps-partition-kb): K KiB of the wire as keys (4 bytes a
 * key, 2 on a 16-bit --wire; at least 1), and under auto the bytes an emulated link (--link)
 * carries in 2 ms, within 64 KiB .. 4 MiB (a
 * partition's fill and drain stay a few ms, its message's own cost a few percent of its
 * time), or, without a link, 0: whole buckets. 0 also for off. Validated values only. */
size_t config_partition_keys(const Config *c);

/* The parameter count of c->model with its options (0 for an unknown model). */
size_t config_param_count(const Config *c);

/* --nodes and --intra-link (part of config_validate, for bench's options too): a node count that
 * divides -n (a launcher's world is checked where it is known: net/node.h), not DataParallel's one
 * process, TCP between nodes and the fastest inside (--transport auto), a fabric (--intra-link, parsed) only with
 * nodes. 0, or RS_ERR_INPUT naming the option. */
int config_nodes_check(const Config *c);

/* --msg-layer: zeromq or direct, and direct not with --secure (no CURVE there). 0 or
 * RS_ERR_INPUT naming the option. */
int config_layer_check(const Config *c);

/* Whether nranks ranks on nodes nodes are machines of several ranks: at least two nodes, each of
 * more than one rank (on one node, or one rank a node, every form is the flat one). What the
 * machine-aware forms, the cost models and the claims on nodes all decide by. */
static inline int config_on_machines(int nranks, int nodes) {
    return nodes > 1 && nranks % nodes == 0 && nranks / nodes > 1;
}

/* Whether --hierarchical changes anything: config_on_machines. The registry's shapes and a server
 * that must know its workers' count (byteps's: one a machine) read the same rule. */
static inline int config_hierarchy_applies(const Config *c) {
    return c->hierarchical && config_on_machines(c->nranks, c->nodes);
}

#endif
