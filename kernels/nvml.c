/* nvml.c - per-process GPU memory from NVML through dlopen: a machine or build without NVML reports none */
#include "nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

/* The few NVML types used (nvml.h's ABI: nvmlReturn_t is an int, NVML_SUCCESS 0, and the v2
 * process record, which the _v2 and _v3 process queries fill). */
typedef struct NvmlDevice *NvmlDevice;
typedef struct {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id, compute_instance_id;
} NvmlProcess;

typedef int (*NvmlInitFn)(void);
typedef int (*NvmlByBusFn)(const char *bus, NvmlDevice *dev);
typedef int (*NvmlProcsFn)(NvmlDevice dev, unsigned int *count, NvmlProcess *infos);

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static NvmlByBusFn nvml_by_bus;
static NvmlProcsFn nvml_procs;

/* Opens the library and initialises it once; leaves the function pointers NULL on failure. */
static void nvml_load(void) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    NvmlInitFn init = (NvmlInitFn)dlsym(h, "nvmlInit_v2");
    NvmlByBusFn by_bus = (NvmlByBusFn)dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    NvmlProcsFn procs = (NvmlProcsFn)dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!procs) procs = (NvmlProcsFn)dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    if (!init || !by_bus || !procs || init() != 0) return; /* the library stays loaded: harmless */
    nvml_by_bus = by_bus;
    nvml_procs = procs;
}

int nvml_process_bytes(const char *bus, unsigned long long *bytes) {
    pthread_once(&nvml_once, nvml_load);
    if (!nvml_by_bus || !bus || !*bus) return -1;
    NvmlDevice dev;
    if (nvml_by_bus(bus, &dev) != 0) return -1;
    NvmlProcess p[256];
    unsigned int n = 256;
    if (nvml_procs(dev, &n, p) != 0) return -1;
    unsigned int me = (unsigned int)getpid();
    for (unsigned int i = 0; i < n && i < 256; i++)
        if (p[i].pid == me) {
            *bytes = p[i].used_gpu_memory;
            return 0;
        }
    return -1;
}
