/* heap.c - the process's malloc policy for ZeroMQ's received frames (heap.h) */
#include "heap.h"

#include <malloc.h>
#include <pthread.h>

static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t heap_threshold; /* what M_MMAP_THRESHOLD was last set to; under heap_lock */

void heap_init(void) { mallopt(M_ARENA_MAX, 1); }

void heap_keep_frames(size_t bytes) {
    size_t want = bytes > HEAP_FRAME_MAX - 4096u ? HEAP_FRAME_MAX : bytes + 4096u; /* + ZeroMQ's frame header */
    pthread_mutex_lock(&heap_lock);
    if (want > heap_threshold) {
        /* setting either turns glibc's adaptive threshold off: both are set together */
        if (mallopt(M_MMAP_THRESHOLD, (int)want) && mallopt(M_TRIM_THRESHOLD, (int)HEAP_KEEP)) heap_threshold = want;
    }
    pthread_mutex_unlock(&heap_lock);
}

size_t heap_frames_kept(void) {
    pthread_mutex_lock(&heap_lock);
    size_t t = heap_threshold;
    pthread_mutex_unlock(&heap_lock);
    return t;
}
