/* split.h - the even split of a range over n parts, the first total % n parts one longer: the ring's chunks and the servers' key ranges */
#ifndef RS_SPLIT_H
#define RS_SPLIT_H

#include <stddef.h>

/* Part i (0 <= i < n) of [0, total) as [*lo, *hi): total / n items, one more for the first
 * total % n parts; empty for i >= total when n > total. */
static inline void split_even(size_t total, int n, int i, size_t *lo, size_t *hi) {
    size_t base = total / (size_t)n, rem = total % (size_t)n, ui = (size_t)i;
    *lo = ui * base + (ui < rem ? ui : rem);
    *hi = *lo + base + (ui < rem ? 1 : 0);
}

#endif
