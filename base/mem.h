/* mem.h - memory accounting: current and peak bytes per tag, for every device allocation */
#ifndef RS_MEM_H
#define RS_MEM_H

#include <stddef.h>

/* ---- Types ---- */
typedef enum {
    MEM_PARAMS = 0,
    MEM_GRADS,
    MEM_ACTIVATIONS,
    MEM_OPTIMIZER,
    MEM_COMM,
    MEM_SERVER,
    MEM_GATHER,  /* DataParallel's gathered outputs on rank 0 */
    MEM_NTAGS
} MemTag;

typedef struct {
    size_t cur[MEM_NTAGS];
    size_t peak[MEM_NTAGS];
    size_t cur_total;
    size_t peak_total;
} MemStats;

/* ---- Prototypes ---- */

/* Records an allocation (bytes > 0) or a release (bytes < 0) under tag. Thread-safe. */
void mem_account(MemTag tag, long long bytes);

/* Copies the process's counters into out. Thread-safe. */
void mem_snapshot(MemStats *out);

/* Resets every counter to zero (tests only). */
void mem_reset(void);

/* "params", "grads", ... ; NULL for an out-of-range tag. */
const char *mem_tag_name(MemTag tag);

/* Memory this process could still take, in bytes: MemAvailable of /proc/meminfo, lowered to what
 * is left under the process's cgroup limit (v2 memory.max - memory.current, or v1's
 * limit_in_bytes - usage_in_bytes) where one is set. Writes a short description of where the
 * number came from ("MemAvailable", "cgroup limit") into src (may be NULL). 0 where unknown. */
size_t mem_host_available(char *src, size_t len);

/* Peak resident set size of this process in bytes (0 where unknown). */
size_t mem_host_peak_rss(void);

/* ---- Paged buffers: host memory whose pages come and go (ZeRO's sharded state) ---- */

/* The host's page size in bytes. */
size_t mem_page_bytes(void);

/* bytes of zeroed host memory, page-aligned, of which no page is resident until it is written
 * (an anonymous mapping): NOT counted under any tag (its owner counts what is resident, with
 * mem_pages_resident). NULL on failure (rs_errmsg() not set: the caller names the buffer). */
void *mem_pages_alloc(size_t bytes);
void mem_pages_free(void *p, size_t bytes);

/* Gives back to the kernel every page lying wholly inside [p, p + bytes) of a buffer from
 * mem_pages_alloc (MADV_DONTNEED: its contents read as zeros afterwards, and it is resident again
 * once written). Returns the bytes given back (whole pages). */
size_t mem_pages_release(void *p, size_t bytes);

/* Which of the pages of a mem_pages_alloc buffer base[0..bytes) are resident: one byte per page
 * into res[0..npages) (1: resident), npages = ceil(bytes / page). 0, or -1 (mincore failed). */
int mem_pages_resident(const void *base, size_t bytes, unsigned char *res);

#endif
