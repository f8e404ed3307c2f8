/* device_cpu.c - the device layer's CPU back end: host memory, memcpy, no streams, monotonic-clock events */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../base/err.h"

/* An event is the moment it was recorded (the CPU has no queue to wait for). */
struct DevEvent {
    double t;
};

static int cpu_count(void) { return 1; }

static int cpu_open(Device *dev, int ordinal) {
    dev->stream = NULL;
    dev->impl = NULL;
    return 0;
}

static void cpu_close(Device *dev) {}

/* 64-byte aligned (a cache line, and any SIMD width); a zero-byte request still gets a pointer. */
static void *cpu_alloc(Device *dev, size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) {
        rs_error(RS_ERR_RUNTIME, "posix_memalign(%zu bytes) failed", bytes);
        return NULL;
    }
    return p;
}

static void cpu_free(Device *dev, void *p) { free(p); }

static void *cpu_host_alloc(Device *dev, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) rs_error(RS_ERR_RUNTIME, "malloc(%zu bytes) failed", bytes);
    return p;
}

static void cpu_host_free(Device *dev, void *p) { free(p); }

static int cpu_copy(Device *dev, void *dst, const void *src, size_t bytes, int kind,
                    void *stream) {
    if (bytes) memmove(dst, src, bytes);
    return 0;
}

static int cpu_stream_create(Device *dev, void **stream) {
    *stream = NULL;
    return 0;
}

static void cpu_stream_destroy(Device *dev, void *stream) {}

static int cpu_stream_sync(Device *dev, void *stream) { return 0; }

static int cpu_stream_wait(Device *dev, void *waiter, void *on) { return 0; }

static DevEvent *cpu_event_create(Device *dev) {
    DevEvent *ev = calloc(1, sizeof *ev);
    if (!ev) rs_error(RS_ERR_RUNTIME, "out of host memory for an event");
    return ev;
}

static void cpu_event_destroy(Device *dev, DevEvent *ev) { free(ev); }

static int cpu_event_record(Device *dev, DevEvent *ev, void *stream) {
    ev->t = clock_now();
    return 0;
}

static double cpu_event_elapsed(Device *dev, DevEvent *a, DevEvent *b) { return b->t - a->t; }

static int cpu_mem_info(Device *dev, size_t *free_b, size_t *total_b) {
    *free_b = 0;
    *total_b = 0;
    return 0;
}

/* "AMD EPYC 7B13, 16 cores": the first "model name" of /proc/cpuinfo and the online cores. */
static void cpu_describe(int ordinal, char *buf, size_t len) {
    char model[256] = "unknown CPU", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) != 0 || !colon) continue;
            colon++;
            while (*colon == ' ' || *colon == '\t') colon++;
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(model, sizeof model, "%s", colon);
            break;
        }
        fclose(f);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(buf, len, "%s, %ld cores", model, cores > 0 ? cores : 1);
}

static int cpu_process_bytes(Device *dev, unsigned long long *bytes) { return -1; }

static const DeviceOps cpu_device_ops = {
    .name = "cpu",
    .count = cpu_count,
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .copy = cpu_copy,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .stream_wait = cpu_stream_wait,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_elapsed = cpu_event_elapsed,
    .mem_info = cpu_mem_info,
    .describe = cpu_describe,
    .process_bytes = cpu_process_bytes,
};

/* The CPU back end. Never NULL. */
const DeviceOps *device_cpu_ops(void) { return &cpu_device_ops; }
