/* nccl_none.c - the CPU-only build's stand-in for the NCCL back end: sync_nccl returns NULL, meaning "not in this build" */
#include "allreduce.h"

/* No NCCL back end in this build (sync_find reports "not in this build"). */
const SyncOps *sync_nccl(void) { return NULL; }

/* No NCCL in this build: both versions "". */
int sync_nccl_versions(char *loaded, size_t loaded_len, char *built, size_t built_len) {
    if (loaded_len) loaded[0] = 0;
    if (built_len) built[0] = 0;
    return -1;
}
