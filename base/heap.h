/* heap.h - the process's malloc policy for ZeroMQ's received frames: warm heap pages instead of fresh ones */
#ifndef RS_HEAP_H
#define RS_HEAP_H

#include <stddef.h>

/* glibc's largest M_MMAP_THRESHOLD on 64-bit hosts (HEAP_MAX_SIZE / 2): frames above it are
 * always mapped afresh. */
#define HEAP_FRAME_MAX (32u * 1024u * 1024u)
/* Freed heap kept mapped (M_TRIM_THRESHOLD) once heap_keep_frames has been called. */
#define HEAP_KEEP (256u * 1024u * 1024u)

/* Once, first thing in main, before the process starts a thread: every thread allocates from
 * glibc's main arena (M_ARENA_MAX 1). ZeroMQ's I/O thread mallocs each received frame and the
 * rank's own thread frees it; in a thread arena of its own, frames would live in 64 MiB arena
 * heaps, which glibc unmaps as soon as one is empty, so a step that holds three 25 MiB slices
 * (ps's default bucket) took a third of its frames in fresh pages whatever the thresholds. The
 * rank's threads allocate nothing in the step loop (tests/integration/noalloc.sh), so one arena
 * costs them nothing. */
void heap_init(void);

/* ZeroMQ mallocs every received frame on its I/O thread and the receiver frees it once used.
 * With glibc's defaults a frame of 128 KiB or more is mmap'd, or, once the threshold adapts,
 * trimmed back to the kernel when freed, so every large message arrives in fresh pages: a page
 * fault and the page zeroed per 4 KiB, on the critical path of every transfer. A process whose
 * back end receives frames of up to `bytes` over ZeroMQ calls this before its first receive:
 * the mmap threshold is raised to min(bytes + 4 KiB, HEAP_FRAME_MAX) (never lowered: the
 * largest request of the process wins) and HEAP_KEEP bytes of freed heap stay mapped, so the
 * frames come from pages used before. Process-wide (mallopt), thread-safe, idempotent. What it
 * keeps mapped shows in the process's resident size, not in any MEM_* account (it is libzmq's
 * memory, as the frames were). */
void heap_keep_frames(size_t bytes);

/* The mmap threshold heap_keep_frames last set (0: never called). */
size_t heap_frames_kept(void);

#endif
