/* tsan.h - tells ThreadSanitizer about the hand-offs libzmq's uninstrumented pipes make between threads (no-ops elsewhere) */
#ifndef RS_TSAN_H
#define RS_TSAN_H

/* libzmq is not built with -fsanitize=thread: a message sent in one thread and received in
 * another is ordered by libzmq's lock-free pipes, which ThreadSanitizer cannot see. A payload
 * that crosses inproc keeps its address (zero-copy ones are the sender's own buffer), so the
 * sender releases on that address before it sends and the receiver acquires on the address it
 * received: the receiver's reads are ordered after the sender's writes, as they are at run time.
 * Without this every byte read is a race report to suppress, and reporting them made a 1 MiB
 * sum take seconds (docs/reliability.md). Outside a ThreadSanitizer build these compile to
 * nothing. */

#if defined(__SANITIZE_THREAD__)
#define RS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RS_TSAN 1
#endif
#endif

#ifdef RS_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif

/* Before handing the bytes at p to another thread through libzmq. */
static inline void tsan_release(const void *p) {
#ifdef RS_TSAN
    if (p) __tsan_release((void *)p);
#else
    (void)p;
#endif
}

/* After receiving bytes at p from another thread through libzmq. */
static inline void tsan_acquire(const void *p) {
#ifdef RS_TSAN
    if (p) __tsan_acquire((void *)p);
#else
    (void)p;
#endif
}

#endif
