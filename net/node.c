/* node.c - a process's node: placement from --nodes and the launcher, checked; the name of the node's shared NIC */
#include "node.h"
#include "ctrl.h"
#include "../base/err.h"
#include "../base/hash.h"

#include <stdio.h>
#include <string.h>

static NodePlace node_here;

int node_place(const RankEnv *e, int nodes, NodePlace *out) {
    memset(out, 0, sizeof *out);
    if (nodes <= 0) return RS_OK;
    int N = e->world;
    if (nodes > N || N % nodes)
        return rs_error(RS_ERR_INPUT, "--nodes %d: does not divide the %d worker rank%s (-n %d): every node holds as many ranks",
                        nodes, N, N == 1 ? "" : "s", N);
    int G = N / nodes;
    /* a launcher that spread the ranks over hosts says how many each holds: the same nodes */
    if (e->launched && strcmp(e->source, "ringside") && e->member < N && e->local_world < N && e->local_world != G)
        return rs_error(RS_ERR_INPUT, "--nodes %d puts %d ranks on a node, but %s placed %d on this one (its LOCAL_WORLD_SIZE): "
                        "give --nodes %d or leave it out", nodes, G, e->source, e->local_world,
                        e->local_world > 0 && N % e->local_world == 0 ? N / e->local_world : 0);
    out->nodes = nodes;
    out->per_node = G;
    if (e->member < N) {
        out->node = e->member / G;
        out->local = e->member % G;
    } else {
        out->node = nodes + (e->member - N);
        out->local = 0;
    }
    return RS_OK;
}

void node_set(const NodePlace *p) { node_here = p ? *p : (NodePlace){0}; }

const NodePlace *node_get(void) { return &node_here; }

int node_link_open(const RankEnv *e, const Config *c) {
    NodePlace p;
    LinkSpec nic, intra;
    RS_TRY(node_place(e, c->nodes, &p));
    link_parse(c->link, &nic); /* validated with the options */
    link_parse(c->intra_link, &intra);
    node_set(&p);
    link_set_nodes(&nic, &intra, p.nodes);
    if (p.nodes > 0 && p.per_node > 1 && p.node < p.nodes) {
        char name[96];
        node_nic_name(e->token, name, sizeof name);
        RS_TRY(link_share(name));
    }
    return RS_OK;
}

void node_nic_name(const char *token, char *out, size_t len) {
    snprintf(out, len, "/ringside-nic-%016llx-n%d", (unsigned long long)hash_text(HASH_FNV_INIT, token ? token : ""),
             node_here.node);
}
