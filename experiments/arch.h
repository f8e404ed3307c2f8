/* arch.h - the shapes of gradient synchronisation a report names (backend.architecture), and the cost model of each */
#ifndef RS_ARCH_H
#define RS_ARCH_H

/* ---- Types ---- */

/* The shapes of synchronisation a report names (its backend.architecture): what the claims, the
 * plots and the validator read instead of --sync's names. ring and nccl are one shape; student is
 * lab 5's all-reduce, held apart (it may be wrong); ps's three placements are three shapes. */
typedef enum {
    ARCH_NONE,          /* "none": no communication */
    ARCH_RING,          /* "ring": ring all-reduce (ring, nccl) */
    ARCH_TREE,          /* "tree": double binary tree all-reduce */
    ARCH_STUDENT,       /* "student": lab 5's all-reduce */
    ARCH_PS_COLOCATED,  /* "ps-colocated": the server in rank 0 (DataParallel's) */
    ARCH_PS_SHARDED,    /* "ps-sharded": a shard of the server in every worker */
    ARCH_PS_DEDICATED,  /* "ps-dedicated": K server processes of their own */
    ARCH_BYTEPS,        /* "byteps": a shard in every worker and k CPU servers */
    ARCH_RING_HIER,     /* "ring-hierarchical": reduce-scatter in the node, a ring over nodes, all-gather (Horovod's) */
    ARCH_TREE_HIER,     /* "tree-hierarchical": double binary trees over the nodes, a chain inside each (NCCL's) */
    ARCH_BYTEPS_HIER,   /* "byteps-hierarchical": a machine reduces, then pushes as one worker (BytePS's) */
    ARCH_ZERO1,         /* "zero-1": ZeRO stage 1, the optimizer state sharded (reduce-scatter, shard update, all-gather) */
    ARCH_ZERO2,         /* "zero-2": ZeRO stage 2, the gradients sharded too (FSDP's SHARD_GRAD_OP) */
    ARCH_ZERO3,         /* "zero-3": ZeRO stage 3, the parameters sharded too, gathered layer by layer (FSDP's FULL_SHARD) */
    ARCH_COUNT
} Arch;

/* ---- Prototypes ---- */

/* An architecture's report name ("ring", "ps-dedicated", ...; "?" out of range). */
const char *arch_name(Arch a);

/* The architecture a report names: 0 and *out set, or -1 for a name that is none. */
int arch_parse(const char *name, Arch *out);

/* Whether a is a parameter server of some kind (ps's placements, byteps): family "ps". */
static inline int arch_is_server(Arch a) { return a == ARCH_PS_COLOCATED || a == ARCH_PS_SHARDED || a == ARCH_PS_DEDICATED || a == ARCH_BYTEPS ||
                                             a == ARCH_BYTEPS_HIER; }

/* Whether a is sharded data parallelism (ZeRO's stages): family "zero". */
static inline int arch_is_zero(Arch a) { return a == ARCH_ZERO1 || a == ARCH_ZERO2 || a == ARCH_ZERO3; }

/* Whether a is BytePS's (flat, or a machine a worker). */
static inline int arch_is_byteps(Arch a) { return a == ARCH_BYTEPS || a == ARCH_BYTEPS_HIER; }

/* The coefficients of the alpha-beta model (experiments/predict.h has the derivations) for one
 * reduction of n_bytes over nranks ranks by architecture arch: t = alpha * *a + beta * *b, priced
 * on the busiest network interface. nodes: the ranks are that many machines of nranks / nodes
 * ranks behind one NIC each (--nodes; 0 or 1, or a count that does not divide: every rank a
 * machine of its own); the fabric inside a node is taken as unpaced (arch_node_cost counts its
 * rounds). servers: the dedicated ps's K, byteps's k (the others ignore it); pipelined: a server
 * answers partitions as they come in. 0, or -1 for an architecture or server count the model does
 * not cover (*a = *b = 0). */
int arch_cost(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double *a, double *b);

/* What one reduction of n_bytes by arch puts on the fabric inside a node, beside arch_cost's NIC:
 * *rounds of messages, and *bytes through the busiest rank's fabric port one way (the machine-
 * aware forms' node phases: ring-hierarchical 2(G-1) rounds and 2(G-1)/G n, tree-hierarchical
 * 2(G-1) and 2n, byteps-hierarchical G+1 and (G-1)/G n + (G-1) n, the root's broadcast; 0 for the
 * flat forms, and without nodes). 0. */
int arch_node_cost(Arch arch, int nranks, int nodes, double n_bytes, double *rounds, double *bytes);

/* Bytes on the wire per fp32 byte of gradient for architecture arch under --wire wire (base/
 * codec.h's codec_wire_ratio): a parameter server's replies carry the parameters in their own
 * codec (bf16 under FP8). */
double arch_wire_ratio(Arch arch, const char *wire);

#endif
