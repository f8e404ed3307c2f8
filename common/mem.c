/* mem.c - memory accounting: current and peak bytes per tag, thread-safe */
#include "mem.h"

#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

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
