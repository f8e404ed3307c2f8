/* nocuda.c - the CPU-only build's stand-ins for the CUDA back ends: each returns NULL, meaning "not in this build" */
#include "device.h"
#include "sync.h"

/* No CUDA kernels in this build. */
const KernelOps *kernels_cuda(void) { return NULL; }

/* No CUDA device back end in this build. */
const DeviceOps *device_cuda_ops(void) { return NULL; }

/* No NCCL back end in this build (sync_find reports "not in this build"). */
const SyncOps *sync_nccl(void) { return NULL; }

/* No NCCL in this build: both versions "". */
int sync_nccl_versions(char *loaded, size_t loaded_len, char *built, size_t built_len) {
    if (loaded_len) loaded[0] = 0;
    if (built_len) built[0] = 0;
    return -1;
}
