/* nocuda.c - the CPU-only build's stand-ins for the CUDA device layer: each returns NULL, meaning "not in this build" */
#include "device.h"

/* No CUDA kernels in this build. */
const KernelOps *kernels_cuda(void) { return NULL; }

/* No CUDA device back end in this build. */
const DeviceOps *device_cuda_ops(void) { return NULL; }
