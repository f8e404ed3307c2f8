/* nccl_rules.h - what the nccl back end decides from versions and environment text alone (the algorithm it pins, FP8's native path, the shared-GPU setting): plain C, unit-tested without a GPU */
#ifndef RS_NCCL_RULES_H
#define RS_NCCL_RULES_H

#include <stddef.h>

/*
 * Every rule here takes its inputs as arguments (library versions, the user's environment text)
 * and returns what the back end then does, so that tests can feed them versions and settings no
 * machine of the suite has. allreduce/nccl.cu calls them with ncclGetVersion's answer (the
 * library actually loaded), NCCL_VERSION_CODE (the headers it was built against) and getenv.
 */

/* ---- Macros ---- */

/* NCCL's version code for X.Y.Z (ncclGetVersion's and NCCL_VERSION_CODE's form from 2.9 on). */
#define NCCL_RULES_CODE(x, y, z) ((x) * 10000 + (y) * 100 + (z))

/* ---- Types ---- */

/* The all-reduce algorithm NCCL is asked for. ringside issues nothing but ncclAllReduce (the
 * parameters' broadcast is an all-reduce sum with every rank but 0 contributing zeros: NCCL has
 * no tree broadcast, and from 2.24 on a broadcast under NCCL_ALGO=Tree fails with "no
 * algorithm/protocol available"), so an NCCL_ALGO naming one algorithm pins every call it makes. */
typedef struct {
    char set[16];        /* the NCCL_ALGO value ringside sets ("Ring", "Tree"); "" when the user's stands */
    char allreduce[48];  /* the all-reduce's algorithm(s) as NCCL_ALGO names them ("Ring", "Tree",
                          * the user's list, or "auto" where the user's text leaves NCCL to choose) */
    int tree;            /* 1: the all-reduce can only be the trees, and its traffic is counted as
                          * the trees move it (allreduce/tree.h's shapes); else as the ring's */
} NcclAlgo;

/* ---- Prototypes ---- */

/* Decides the algorithm for --nccl-algo opt ("ring" or "tree") when the environment's NCCL_ALGO
 * is user (NULL or "" when unset). A user's NCCL_ALGO wins and is read as NCCL reads it: a list
 * ("Tree", "ring,tree", "^nvls"), or NCCL's per-collective form ("allreduce:tree;broadcast:ring"),
 * whose allreduce entry applies ("auto" when it has none). Never fails. */
void nccl_algo_decide(const char *opt, const char *user, NcclAlgo *out);

/* 1 when --wire fp8e4m3/fp8e5m2 can be all-reduced in NCCL's own FP8 types on this rank: the
 * headers it was built against (built) and the library loaded at run time (loaded, ncclGetVersion)
 * are both NCCL 2.24 or later, and the GPU's compute capability major is 9 or more; else 0 (each
 * rank rounds through FP8 and the fp32 values are all-reduced). The ranks then agree on the
 * minimum at connect. */
int nccl_fp8_native(int built, int loaded, int cc_major);

/* The setting NCCL needs to run several ranks on one GPU with library version loaded, as text
 * for the user, or NULL when the environment already has it: NCCL 2.30 and later read
 * NCCL_MULTI_RANK_GPU_ENABLE (multi_rank: its value, NULL when unset); older NCCL needs a
 * distinct NCCL_HOSTID per rank (hostid: its value) with peer-to-peer and shared memory off. */
const char *nccl_shared_gpu_missing(int loaded, const char *multi_rank, const char *hostid);

/* "2.28.9" from an ncclGetVersion code (X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before). */
void nccl_version_text(int v, char *buf, size_t len);

#endif
