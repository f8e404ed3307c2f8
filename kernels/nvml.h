/* nvml.h - per-process GPU memory from NVML, loaded at run time (no build-time dependency) */
#ifndef RS_NVML_H
#define RS_NVML_H

/* ---- Prototypes ---- */

/* Bytes of GPU memory this process uses on the GPU at PCI bus id bus ("0000:3B:00.0", as
 * cudaDeviceGetPCIBusId writes it), from NVML's list of compute processes. libnvidia-ml.so.1
 * is opened with dlopen on first use. Returns 0 with *bytes set, or -1 when NVML is absent,
 * fails, or does not list this process (the caller reports null, not 0). Thread-safe. */
int nvml_process_bytes(const char *bus, unsigned long long *bytes);

#endif
