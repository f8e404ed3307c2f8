/* mem.c - memory accounting: current and peak bytes per tag, thread-safe */
#include "mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static MemStats mem_stats;

static const char *mem_names[MEM_NTAGS] = {"params", "grads",  "activations", "optimizer",
                                           "comm",   "server", "gather"};

void mem_account(MemTag tag, long long bytes) {
    if ((int)tag < 0 || tag >= MEM_NTAGS) return;
    pthread_mutex_lock(&mem_lock);
    mem_stats.cur[tag] = (size_t)((long long)mem_stats.cur[tag] + bytes);
    mem_stats.cur_total = (size_t)((long long)mem_stats.cur_total + bytes);
    if (mem_stats.cur[tag] > mem_stats.peak[tag]) mem_stats.peak[tag] = mem_stats.cur[tag];
    if (mem_stats.cur_total > mem_stats.peak_total) mem_stats.peak_total = mem_stats.cur_total;
    pthread_mutex_unlock(&mem_lock);
}

void mem_snapshot(MemStats *out) {
    pthread_mutex_lock(&mem_lock);
    *out = mem_stats;
    pthread_mutex_unlock(&mem_lock);
}

void mem_reset(void) {
    pthread_mutex_lock(&mem_lock);
    memset(&mem_stats, 0, sizeof mem_stats);
    pthread_mutex_unlock(&mem_lock);
}

const char *mem_tag_name(MemTag tag) {
    if ((int)tag < 0 || tag >= MEM_NTAGS) return NULL;
    return mem_names[tag];
}

size_t mem_host_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024u; /* Linux reports KiB */
}

/* The first number in file, or -1 when it cannot be read or is not a number ("max"). */
static long long read_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

/* Walks rel and its ancestors under the cgroup mount, lowering *best to the least that is left
 * under any of their limits (files maxname and curname; a limit above 2^60 is none). */
static void cgroup_walk(const char *mount, const char *rel, const char *maxname, const char *curname, long long *best) {
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s", rel);
    for (;;) {
        snprintf(path, sizeof path, "%s%s/%s", mount, dir, maxname);
        long long max = read_number(path);
        snprintf(path, sizeof path, "%s%s/%s", mount, dir, curname);
        long long cur = read_number(path);
        if (max > 0 && max < (1LL << 60) && cur >= 0 && (*best < 0 || max - cur < *best)) *best = max > cur ? max - cur : 0;
        char *slash = strrchr(dir, '/');
        if (!slash) break;
        *slash = 0; /* "/a/b" -> "/a" -> "" (the mount's root) */
    }
}

/* What is left under the tightest cgroup memory limit of this process, or -1 where there is none. */
static long long cgroup_left(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return -1;
    char line[1024], v2[1024] = "", v1[1024] = "";
    int have_v2 = 0, have_v1 = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "0::", 3)) have_v2 = snprintf(v2, sizeof v2, "%s", line + 3) >= 0;
        char *c = strstr(line, ":memory:");
        if (c) have_v1 = snprintf(v1, sizeof v1, "%s", c + 8) >= 0;
    }
    fclose(f);
    long long best = -1;
    if (have_v2) {
        cgroup_walk("/sys/fs/cgroup", v2, "memory.max", "memory.current", &best);
        cgroup_walk("/sys/fs/cgroup/unified", v2, "memory.max", "memory.current", &best);
    }
    if (have_v1) cgroup_walk("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes", &best);
    return best;
}

size_t mem_host_available(char *src, size_t len) {
    long long avail = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &avail) == 1) {
                avail *= 1024;
                break;
            }
        fclose(f);
    }
    if (src && len) snprintf(src, len, "MemAvailable");
    long long cg = cgroup_left();
    if (cg >= 0 && (avail < 0 || cg < avail)) {
        avail = cg;
        if (src && len) snprintf(src, len, "left under the cgroup's memory limit");
    }
    return avail > 0 ? (size_t)avail : 0;
}

/* ---- paged buffers -------------------------------------------------------------------------- */

size_t mem_page_bytes(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

void *mem_pages_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mem_pages_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes ? bytes : 1);
}

size_t mem_pages_release(void *p, size_t bytes) {
    size_t pg = mem_page_bytes(), a = ((size_t)p + pg - 1) / pg * pg, b = ((size_t)p + bytes) / pg * pg;
    if (b <= a) return 0;
    return madvise((void *)a, b - a, MADV_DONTNEED) == 0 ? b - a : 0;
}

int mem_pages_resident(const void *base, size_t bytes, unsigned char *res) {
    size_t pg = mem_page_bytes(), n = (bytes + pg - 1) / pg;
    if (!n) return 0;
    if (mincore((void *)base, bytes, res) != 0) return -1;
    for (size_t i = 0; i < n; i++) res[i] &= 1;
    return 0;
}
