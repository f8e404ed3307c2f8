/* ring.c - the "ring" back end: ring all-reduce in host memory over shared memory or ZeroMQ, on a communication thread */
#define _GNU_SOURCE /* memfd_create */
#include "ring.h"
#include "allreduce.h"
#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/config.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../base/heap.h"
#include "../net/link.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "../engine/sync.h"
#include "../engine/trace.h"
#include "../net/zendpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ==== The ring core =========================================================================
 *
 * Every rank receives from its left neighbour r-1 and sends to its right neighbour r+1, one
 * message per segment (a RingHeader and the segment's floats), in an order both ends know:
 * the receiver checks every header against the segment that must come next.
 *
 * Transports (ring.h has the endpoint text): each rank creates a shared-memory lane (a memfd
 * its left neighbour writes into), binds a ZeroMQ PULL on TCP and on an abstract Unix socket,
 * and publishes all three with its host key. The edge r -> r+1 uses
 *   shm  when both ends are in one kernel, network and PID namespace (equal host keys) and
 *        both published a lane: the sender copies each message into the receiver's lane, the
 *        receiver reduces (or copies) straight out of it; no system call on the data path
 *        except futex waits;
 *   ipc  otherwise on one host: a PUSH connected to the Unix socket;
 *   tcp  otherwise: a PUSH connected over TCP (ranks on different hosts).
 * Both ends evaluate the same rule on the same two texts, so they agree on shm. A rank whose
 * left neighbour writes into its lane closes its PULL; one that writes to its right
 * neighbour's lane never connects its PUSH.
 *
 * All-reduce of count floats over N ranks: N chunks (ring_chunk), each cut into segments
 * (ring_segment: a few per chunk, so that transfer and reduction overlap). Reduce-scatter
 * step s: rank r sends chunk r-s and receives chunk r-s-1, adding it into its own. A
 * received-and-reduced segment is forwarded at once as the next step's send. After N-1 steps
 * rank r owns chunk r+1 fully reduced; all-gather passes the owned chunks around the ring the
 * same way, copying. Every element of chunk c is summed in one fixed order (starting at rank
 * c, around the ring) and then copied, so every rank ends with the same bits.
 *
 * Two ranks joined by ZeroMQ (between hosts: every message costs a few thread hand-offs and a
 * trip through the kernel) with an fp32 wire take one phase instead of two (ring_exchange2):
 * each rank sends its whole buffer, cut exactly as the ring cuts it (chunk 0's segments, then
 * chunk 1's: the same messages and bytes as reduce-scatter plus all-gather), and adds the
 * peer's segments as they come. Element i of chunk c is then x_c + x_{c+1} computed on both
 * ranks, with the operands in the order the ring's adder uses (its own value first, where the
 * ring computes it); IEEE addition of two numbers is commutative and exact to the bit, so the
 * result is the ring's bits on both ranks. Nothing is rounded on a 16-bit wire in between, so
 * there the ring runs as above. A segment of buf is only added into once its own zero-copy send
 * is out (xpend[], one counter per segment); all are out before the call returns.
 *
 * Sends that are not yet on their way reference the caller's buffer, counted by step in
 * pending[]: over ZeroMQ (net/msg.h), segments of MSG_ZEROCOPY_MIN bytes or more are lent
 * without a copy until ZeroMQ lets go, and the last release wakes a waiter (ring_wake) when the
 * count reaches zero (smaller ones are copied: that costs less than waiting for a release);
 * over shared memory, a send waits in a queue until the lane has room and is then copied in.
 * A buffer is only modified after its count is zero: reduce-scatter step s sends chunk r-s,
 * and all-gather step s overwrites that same chunk, so all-gather step s first waits for
 * pending[s] (normally long since zero); every send of the collective is out before it
 * returns, so the caller may reuse buf at once. Reduce-scatter never modifies a chunk it has
 * already sent.
 *
 * A lane is a ring buffer, but a sender that finds it empty (everything read) far from its start
 * writes a RING_KIND_SKIP header (offset: the bytes to the lane's end, not counted anywhere) and
 * goes on at the start: while the receiver keeps up, messages cycle through the lane's first
 * RING_LANE_REWIND bytes (half of a lane smaller than twice that: its messages then stay whole
 * instead of wrapping), which stay in cache, instead of through all of it (measured on 2 cores,
 * 2 ranks, interleaved: 64 KiB 8.6 -> 6.5 us, 256 KiB 26 -> 19 us, 1 MiB 67 -> 58 us; 16 MiB
 * 1.18 -> 1.27 ms, 64 MiB unchanged, medians of 4).
 *
 * Shared-memory lanes are bounded and sized to the job (ring.h, ring_lane_bytes: two of its
 * largest messages and its largest collective, from 64 KiB to 8 MiB + 4 KiB; the writer takes the
 * size from the lane's head, and ring_connect refuses a lane that cannot hold this ring's largest
 * message), and no segment is cut larger than that (ring_segment), so every message fits an empty
 * lane and a rank never blocks on a full lane alone: every wait (for a message, for a send to go
 * out) keeps moving queued sends into the right lane and sleeps on the rank's own doorbell (a
 * futex in its lane's head), which the left neighbour rings after writing and the right neighbour
 * after making room. A rank waits for its step-s sends only once it has received everything of
 * step s, so the right neighbour, still receiving, makes room: the ring cannot deadlock. A rank
 * that receives over ZeroMQ but sends into a lane (a ring across hosts) cannot move its queue
 * while it blocks in zmq_poll, so it waits for each of its lane sends to go in at once; a ZeroMQ
 * edge never blocks its sender, so a ring with one cannot block all round either. */

/* Sends of one step that still reference the caller's buffer: lend.out counts them (lane sends
 * queued, frames lent to ZeroMQ; __atomic), and ZeroMQ's last release wakes r->cv (ring_wake). */
typedef struct {
    Ring *r;
    MsgLend lend;
} RingPending;

/* The head of a shared-memory lane (one page), followed by `bytes` of messages (ring_lane_bytes,
 * whole pages). Each message starts on a 64-byte boundary: its RingHeader, padding to 64 bytes,
 * the floats, padding to 64 bytes; only the floats may wrap around the end. */
typedef struct {
    uint32_t magic;      /* RING_LANE_MAGIC once the owner has set it up */
    uint32_t owner;      /* the owner's rank */
    uint64_t nonce;      /* the owner's random number, also in its endpoint text */
    uint64_t bytes;      /* of messages, after the head: the owner's ring_lane_bytes; its writer uses this */
    char pad0[40];
    uint64_t head;       /* bytes written, by the left neighbour (release: after the message) */
    char pad1[56];
    uint64_t tail;       /* bytes consumed, by the owner */
    char pad2[56];
    uint32_t bell;       /* the owner's futex: +1 on new data (left) and on room (right) */
    uint32_t sleeping;   /* the owner is (about to be) in FUTEX_WAIT */
    char pad3[56];
} RingLane;

#define RING_LANE_MAGIC 0x4e4c5352u /* "RSLN" */
#define RING_LANE_HEAD 4096u
#define RING_MSG_ALIGN 64u
_Static_assert(sizeof(RingLane) <= RING_LANE_HEAD && RING_LANE_MIN % RING_LANE_HEAD == 0 &&
                   RING_LANE_MAX % RING_LANE_HEAD == 0 && RING_LANE_HEAD % RING_MSG_ALIGN == 0 &&
                   RING_LANE_MAX >= RING_LANE_MSGS * (RING_MSG_ALIGN + RING_SEG_MAX) &&
                   RING_LANE_MIN >= RING_LANE_MSGS * RING_MSG_ALIGN && sizeof(RingHeader) <= RING_MSG_ALIGN,
               "lane layout");

_Static_assert(sizeof(RingHeader) + LINK_STAMP_BYTES <= RING_MSG_ALIGN, "the link stamp fits the header's padding");

/* A send waiting for room in the right neighbour's lane. */
typedef struct {
    const float *src;
    uint64_t off, n;
    uint32_t kind, step;
    RingPending *pending;
    double stamp;      /* the emulated link's start of this message (0: none) */
} RingQueued;

struct Ring {
    void *zctx;
    int own_ctx;
    void *pull, *push;
    int rank, world, left, right;
    uint64_t token;
    double timeout;
    size_t seg;          /* elements per segment set by ring_set_segment; 0: ring_segment's choice */
    size_t seg_cap;      /* elements: the largest segment this ring cuts (ring_largest_segment of its `most`) */
    int all_shm;         /* every edge of the ring is shared memory (the segment rule) */
    uint64_t seq;        /* collectives started */
    int broken;
    char why[512];       /* the error that broke the ring */
    RingPending *pending; /* [world]: sends holding the caller's buffer, by reduce-scatter step; [world-1]: all-gather/broadcast */
    pthread_mutex_t mu;  /* with cv: waits for ZeroMQ's releases */
    pthread_cond_t cv;
    double last_wait;
    int first_pending;   /* the collective has not received its first message yet */
    char transport[8];   /* to the right neighbour: "shm", "ipc" or "tcp" once connected */
    int nodes_known, left_node, right_node; /* the neighbours' host keys were published; each on this host */
    /* shared memory: own lane (its bell wakes us; the left neighbour writes into it when
     * shm_in), the right neighbour's (we write), the left neighbour's (we ring its bell when we
     * make room); NULL where not shm */
    int lane_fd, shm_in;
    uint64_t lane_nonce;
    size_t own_bytes, to_bytes; /* messages the own lane and the right neighbour's hold (each lane's head `bytes`) */
    size_t to_rewind;    /* lane_push goes back to the right lane's start from here (RING_LANE_REWIND, or half the lane) */
    RingLane *own, *to, *from_bell;
    RingLane *map_left, *map_right; /* the mappings to unmap (map_right == map_left when N = 2) */
    RingQueued *q;       /* sends waiting for room in the right lane: q[qhead..qlen) */
    size_t qhead, qlen, qcap;
    RingCounters c;      /* updated with __atomic builtins, read from any thread */
    RingPending xpend[RING_EX_SEGS]; /* ring_exchange2: sends of each segment that hold buf */
    Codec wire;          /* what all-reduce segments travel in (ring_set_wire); broadcast: fp32 */
};

/* The last release of a step's lent frames (net/msg.h calls it on ZeroMQ's I/O thread, or in
 * ours when a send fails) wakes whoever waits for it. */
static void ring_wake(void *arg) {
    RingPending *p = arg;
    pthread_mutex_lock(&p->r->mu);
    pthread_cond_broadcast(&p->r->cv);
    pthread_mutex_unlock(&p->r->mu);
}

/* Waits until ZeroMQ released every frame counted in *p, for at most limit seconds (blocked
 * on the condition variable, woken by the last release). 0, or -1 on timeout. */
static int ring_drain(Ring *r, RingPending *p, double limit) {
    if (__atomic_load_n(&p->lend.out, __ATOMIC_ACQUIRE) <= 0) return 0;
    msg_lend_reclaim(&p->lend); /* what the direct layer still holds for a peer comes back, copied */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = (double)(long long)limit;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((limit - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    while (__atomic_load_n(&p->lend.out, __ATOMIC_ACQUIRE) > 0) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT) {
            rc = __atomic_load_n(&p->lend.out, __ATOMIC_ACQUIRE) > 0 ? -1 : 0;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* Waits (up to limit seconds) until no zero-copy frame references the caller's buffers. */
static int ring_drain_all(Ring *r, double limit) {
    double deadline = clock_now() + limit;
    for (int i = 0; i < r->world + RING_EX_SEGS; i++) {
        double left = deadline - clock_now();
        RingPending *p = i < r->world ? &r->pending[i] : &r->xpend[i - r->world];
        if (ring_drain(r, p, left > 0 ? left : 0) != 0) return -1;
    }
    return 0;
}

/* Breaks the ring with an error: formats it into rs_errmsg() and r->why, drops the sends
 * queued for the right lane, closes the PUSH so that ZeroMQ drops (and releases) every queued
 * frame, and waits briefly for the releases so that no reference to the caller's buffer
 * outlives the call. Returns code. */
__attribute__((format(printf, 3, 4))) static int ring_fail(Ring *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    r->broken = code ? code : RS_ERR_RUNTIME;
    for (size_t i = r->qhead; i < r->qlen; i++) __atomic_sub_fetch(&r->q[i].pending->lend.out, 1, __ATOMIC_RELAXED);
    r->qhead = r->qlen = 0;
    msg_close_socket(r->push, 1);
    r->push = NULL;
    if (ring_drain_all(r, 2.0) != 0)
        log_warn("ring: ZeroMQ still holds data frames 2 s after an error (rank %d)", r->rank);
    return rs_error(r->broken, "%s", r->why);
}

/* Breaks the ring after a failed call of the message layer (msg_errno() holds its error):
 * "ring: call: error (rank r)". */
#define ring_fail_zmq(r, what) \
    ring_fail((r), RS_ERR_RUNTIME, "ring: %s: %s (rank %d)", (what), msg_strerror(msg_errno()), (r)->rank)

static const char *ring_kind_name(uint32_t kind) {
    return kind == RING_KIND_RS   ? "reduce-scatter"
           : kind == RING_KIND_AG ? "all-gather"
           : kind == RING_KIND_BC ? "broadcast"
           : kind == RING_KIND_EX ? "exchange"
           : kind == RING_KIND_SKIP ? "lane skip"
           : kind == RING_KIND_PG ? "parameter all-gather"
                                  : "?";
}

/* The codec a message of this kind travels in: the all-reduce's wire type, fp32 for broadcast
 * and the parameter all-gather (parameters leave their owner exact). */
static const Codec *ring_codec(const Ring *r, uint32_t kind) {
    static const Codec f32 = {CODEC_F32, 1.0f};
    return kind == RING_KIND_BC || kind == RING_KIND_PG ? &f32 : &r->wire;
}

/* Bytes n elements of a message of this kind take on the wire (FP8: and the message's scale). */
static size_t ring_wire_bytes(const Ring *r, uint32_t kind, size_t n) {
    return codec_bytes(ring_codec(r, kind)->type, n);
}

/* dst[i] = src[i] + dst[i] (src at any byte offset, read through memcpy in blocks of 8 so that the
 * compiler vectorises): codec_decode_add with the received value as the first operand. */
static void ring_add_first(float *restrict dst, const unsigned char *restrict src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float v[8];
        memcpy(v, src + i * sizeof(float), sizeof v);
        for (int k = 0; k < 8; k++) dst[i + k] = v[k] + dst[i + k];
    }
    for (; i < n; i++) {
        float v;
        memcpy(&v, src + i * sizeof(float), sizeof v);
        dst[i] = v + dst[i];
    }
}

/* Takes n received elements at src (wire bytes, any alignment) into dst: added (reduce 1: dst +
 * src; 2: src + dst, fp32 only) or copied (0), decoded from the kind's codec; fp32 straight
 * through. */
static void ring_take(const Ring *r, uint32_t kind, float *dst, const unsigned char *src, size_t n, int reduce) {
    const Codec *c = ring_codec(r, kind);
    if (reduce == 2 && c->type == CODEC_F32 && c->scale == 1.0f) ring_add_first(dst, src, n);
    else if (reduce) codec_decode_add(c, src, dst, n); /* fp32: dst += the floats, vector code (base/codec.c) */
    else codec_decode(c, src, dst, n);                 /* fp32: one memmove */
}

/* The header check shared by both transports: 0 when h is exactly the expected segment,
 * else RS_ERR_RUNTIME (the ring is broken, the message names both). */
static int ring_check_header(Ring *r, const RingHeader *h, size_t got, uint32_t kind, uint32_t step, size_t off,
                             size_t n) {
    if (h->seq == r->seq && h->kind == kind && h->step == step && h->offset == off && h->count == n &&
        h->from == (uint32_t)r->left && got == ring_wire_bytes(r, kind, n))
        return RS_OK;
    return ring_fail(r, RS_ERR_RUNTIME,
                     "ring: out-of-order data from rank %u: %s step %u, elements [%llu, +%llu), %zu bytes, "
                     "collective %llu; expected %s step %u, [%zu, +%zu) from rank %d, collective %llu",
                     h->from, ring_kind_name(h->kind), h->step, (unsigned long long)h->offset,
                     (unsigned long long)h->count, got, (unsigned long long)h->seq, ring_kind_name(kind), step, off, n,
                     r->left, (unsigned long long)r->seq);
}

/* ---- shared-memory lanes ---- */

/* A lane message's footprint for bytes of data: the header block and the data, 64-aligned. */
static size_t lane_msg_bytes(size_t bytes) {
    return RING_MSG_ALIGN + (bytes + RING_MSG_ALIGN - 1) / RING_MSG_ALIGN * RING_MSG_ALIGN;
}

static unsigned char *lane_data(RingLane *l) { return (unsigned char *)l + RING_LANE_HEAD; }

/* Rings the owner's bell: wakes it if it sleeps (seq_cst: either it sees our update before
 * sleeping or we see it sleeping). */
static void lane_ring(RingLane *l) {
    __atomic_add_fetch(&l->bell, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&l->sleeping, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &l->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Writes n floats at src, encoded by c, into the lane's ring of size bytes at position pos (wrapping
 * at the end: pos and the lane's size are multiples of 64, so an FP8 message's scale, first, never
 * wraps, and the wrap falls between elements). */
static void lane_put(RingLane *l, size_t size, uint64_t pos, const Codec *c, const float *src, size_t n) {
    Codec f = codec_fit(c, src, n);
    size_t eb = codec_elem_bytes(c->type), head = codec_head_bytes(c->type), len = n * eb;
    size_t p = (size_t)(pos % size);
    codec_head_put(&f, lane_data(l) + p);
    p += head;
    size_t k = len < size - p ? len : size - p;
    codec_encode_elems(&f, src, lane_data(l) + p, k / eb);
    if (k < len) codec_encode_elems(&f, src + k / eb, lane_data(l), (len - k) / eb);
}

/* Moves queued sends into the right neighbour's lane while they fit; never blocks. */
static void lane_push(Ring *r) {
    RingLane *l = r->to;
    const size_t size = r->to_bytes; /* the receiver's lane, as its head says */
    int wrote = 0;
    while (r->qhead < r->qlen) {
        RingQueued *m = &r->q[r->qhead];
        size_t bytes = ring_wire_bytes(r, m->kind, m->n), need = lane_msg_bytes(bytes);
        uint64_t head = l->head, tail = __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
        size_t at = (size_t)(head % size);
        if (head == tail && at >= r->to_rewind && at >= need) { /* empty: back to the start (it fits) */
            RingHeader k = {RING_MAGIC, RING_KIND_SKIP, r->token, r->seq, 0, (uint32_t)r->rank, size - at, 0};
            memcpy(lane_data(l) + at, &k, sizeof k);
            head += size - at; /* published with the message below */
        }
        if (size - (head - tail) < need) break;
        RingHeader h = {RING_MAGIC, m->kind, r->token, r->seq, m->step, (uint32_t)r->rank, m->off, m->n};
        memcpy(lane_data(l) + head % size, &h, sizeof h); /* 64-aligned: never wraps */
        if (m->stamp > 0) /* the emulated link's stamp rides in the header's padding (not counted) */
            link_stamp_encode(m->stamp, lane_data(l) + head % size + sizeof h);
        lane_put(l, size, head + RING_MSG_ALIGN, ring_codec(r, m->kind), m->src + m->off, m->n);
        __atomic_store_n(&l->head, head + need, __ATOMIC_RELEASE);
        __atomic_sub_fetch(&m->pending->lend.out, 1, __ATOMIC_RELAXED);
        msg_count_sent(&r->c, sizeof h + bytes, 0);
        r->qhead++;
        wrote = 1;
    }
    if (r->qhead == r->qlen) r->qhead = r->qlen = 0;
    if (wrote) lane_ring(l);
}

enum { LANE_MSG, LANE_SENT, LANE_EMPTY }; /* what lane_wait waits for */

/* A spin-wait hint to the CPU. */
static inline void ring_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int lane_ready(Ring *r, int what, RingPending *p) {
    if (what == LANE_MSG) return __atomic_load_n(&r->own->head, __ATOMIC_ACQUIRE) != r->own->tail;
    if (what == LANE_SENT) return __atomic_load_n(&p->lend.out, __ATOMIC_RELAXED) == 0;
    return r->qhead == r->qlen;
}

/* Waits, moving queued sends, until a message is in the own lane (LANE_MSG), *p is zero
 * (LANE_SENT) or the send queue is empty (LANE_EMPTY), spinning first, then asleep on the own
 * bell. deadline on the monotonic clock; 0, or -1 on timeout. */
static int lane_wait(Ring *r, int what, RingPending *p, double deadline) {
    RingLane *own = r->own;
    for (long i = 0;; i++) {
        if (r->qhead < r->qlen) lane_push(r);
        if (lane_ready(r, what, p)) return 0;
        if (i < RING_SPIN) {
            if (i % 64 == 63) sched_yield(); /* an oversubscribed host: let the peer run */
            else ring_cpu_relax();
            continue;
        }
        double left = deadline - clock_now();
        if (left <= 0) return -1;
        if (left > 0.2) left = 0.2; /* re-check now and then: a bell rung between our checks */
        __atomic_store_n(&own->sleeping, 1, __ATOMIC_SEQ_CST);
        uint32_t bell = __atomic_load_n(&own->bell, __ATOMIC_SEQ_CST);
        int ready = lane_ready(r, what, p);
        if (!ready && r->qhead < r->qlen) { /* room may have come: try before sleeping */
            size_t before = r->qhead;
            lane_push(r);
            ready = r->qhead != before;
        }
        if (!ready) {
            struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
            syscall(SYS_futex, &own->bell, FUTEX_WAIT, bell, &ts, NULL, 0);
        }
        __atomic_store_n(&own->sleeping, 0, __ATOMIC_RELAXED);
        i = 0;
    }
}

/* Receives segment (kind, step, off, n) from the own lane into buf + off, added or copied. */
static int lane_recv(Ring *r, uint32_t kind, uint32_t step, float *buf, size_t off, size_t n, int reduce) {
    double t0 = clock_now();
    if (lane_wait(r, LANE_MSG, NULL, t0 + r->timeout) != 0)
        return ring_fail(r, RS_ERR_PEER, "ring: no data from rank %d for %.0f s (is it alive?)", r->left, r->timeout);
    RingLane *l = r->own;
    const size_t size = r->own_bytes;
    uint64_t tail = l->tail, head = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
    RingHeader h;
    memcpy(&h, lane_data(l) + tail % size, sizeof h);
    if (h.magic == RING_MAGIC && h.token == r->token && h.kind == RING_KIND_SKIP) { /* the sender went back to the start */
        if (h.offset != size - tail % size || head - tail <= h.offset)
            return ring_fail(r, RS_ERR_RUNTIME, "ring: corrupt skip in the shared-memory lane from rank %d", r->left);
        tail += h.offset; /* the message follows at once (one head update published both) */
        __atomic_store_n(&l->tail, tail, __ATOMIC_RELEASE);
        memcpy(&h, lane_data(l), sizeof h);
    }
    if (h.magic != RING_MAGIC || h.token != r->token || h.count > RING_SEG_MAX / sizeof(float) ||
        head - tail < lane_msg_bytes(ring_wire_bytes(r, h.kind, h.count)))
        return ring_fail(r, RS_ERR_RUNTIME, "ring: corrupt message in the shared-memory lane from rank %d", r->left);
    RS_TRY(ring_check_header(r, &h, ring_wire_bytes(r, h.kind, h.count), kind, step, off, n));
    double stamp = 0;
    if (link_on())
        link_stamp_decode(lane_data(l) + tail % size + sizeof h, LINK_STAMP_BYTES, &stamp);
    size_t bytes = ring_wire_bytes(r, kind, n), p = (size_t)((tail + RING_MSG_ALIGN) % size);
    link_recv(sizeof h + bytes, stamp, 1); /* the emulated interface: a lane never leaves the node */
    if (r->first_pending) {
        r->last_wait = clock_now() - t0;
        r->first_pending = 0;
    }
    const Codec *c = ring_codec(r, kind);
    size_t hb = codec_head_bytes(c->type), eb = codec_elem_bytes(c->type), len = bytes - hb;
    if (hb) { /* FP8: the message's scale (never wraps: p is 64-aligned), then its elements */
        Codec f = codec_head_get(c->type, lane_data(l) + p);
        p += hb;
        size_t k = len < size - p ? len : size - p;
        codec_decode_elems(&f, lane_data(l) + p, buf + off, k / eb, reduce != 0);
        if (k < len) codec_decode_elems(&f, lane_data(l), buf + off + k / eb, (len - k) / eb, reduce != 0);
    } else {
        size_t k = bytes < size - p ? bytes : size - p;
        ring_take(r, kind, buf + off, lane_data(l) + p, k / eb, reduce);
        if (k < bytes) ring_take(r, kind, buf + off + k / eb, lane_data(l), (bytes - k) / eb, reduce);
    }
    __atomic_store_n(&l->tail, tail + lane_msg_bytes(bytes), __ATOMIC_RELEASE);
    lane_ring(r->from_bell);
    msg_count_received(&r->c, sizeof h + bytes, 0);
    return RS_OK;
}

/* Queues segment [off, off+n) of base for the right lane and moves what fits. */
static int lane_send(Ring *r, uint32_t kind, uint32_t step, const float *base, size_t off, size_t n,
                     RingPending *pending) {
    size_t need = lane_msg_bytes(ring_wire_bytes(r, kind, n));
    if (need > r->to_bytes) /* never, by construction: no segment is larger than ring_connect found the lane holds */
        return ring_fail(r, RS_ERR_RUNTIME,
                         "ring: a message of %zu bytes (%zu floats) does not fit rank %d's shared-memory lane of %zu bytes",
                         need, n, r->right, r->to_bytes);
    if (r->qlen == r->qcap) {
        size_t cap = r->qcap ? 2 * r->qcap : 64;
        RingQueued *q = realloc(r->q, cap * sizeof *q);
        if (!q) return ring_fail(r, RS_ERR_RUNTIME, "ring: out of memory for the send queue");
        r->q = q;
        r->qcap = cap;
    }
    double stamp = link_send(sizeof(RingHeader) + ring_wire_bytes(r, kind, n), 1); /* a lane never leaves the node */
    r->q[r->qlen++] = (RingQueued){base, off, n, kind, step, pending, stamp};
    __atomic_add_fetch(&pending->lend.out, 1, __ATOMIC_RELAXED);
    lane_push(r);
    /* receiving over ZeroMQ, this rank would not move the queue while it waits in zmq_poll:
     * send now (a ZeroMQ edge never blocks, so the ring cannot deadlock on full lanes) */
    if (!r->shm_in && r->qhead < r->qlen && lane_wait(r, LANE_EMPTY, NULL, clock_now() + r->timeout) != 0)
        return ring_fail(r, RS_ERR_PEER, "ring: rank %d took no data for %.0f s (is it alive?)", r->right, r->timeout);
    return RS_OK;
}

/* ---- ZeroMQ ---- */

/* Sends segment [off, off+n) of base to the right neighbour as (kind, step), counted in
 * *pending while it references base (net/msg.h lends the floats themselves, fp32 at scale 1,
 * from MSG_ZEROCOPY_MIN bytes; anything else is encoded into the frame). 0 or RS_ERR_*. */
static int ring_send(Ring *r, uint32_t kind, uint32_t step, const float *base, size_t off, size_t n, RingPending *pending) {
    if (r->to) return lane_send(r, kind, step, base, off, n, pending);
    RingHeader h = {RING_MAGIC, kind, r->token, r->seq, step, (uint32_t)r->rank, off, n};
    const Codec *c = ring_codec(r, kind);
    MsgOut m = {.head = &h, .head_bytes = sizeof h};
    if (c->type == CODEC_F32 && c->scale == 1.0f) { /* the floats themselves: may be lent */
        m.payload = base + off;
        m.bytes = n * sizeof(float);
        m.lend = &pending->lend;
    } else {
        m.codec = c;
        m.src = base + off;
        m.count = n;
    }
    if (msg_send(r->push, &m, &r->c, NULL) == 0) return RS_OK;
    if (msg_errno() == EAGAIN)
        return ring_fail(r, RS_ERR_PEER, "ring: rank %d took no data for %.0f s (is it alive?)", r->right, r->timeout);
    return ring_fail_zmq(r, "msg_send");
}

/* Receives segment (kind, step, off, n) from the left neighbour into buf + off, added to it
 * (reduce) or copied, straight from the lane or ZeroMQ's frame. Over ZeroMQ a queued message
 * is taken at once; only when none is queued does it block in zmq_poll (for the rest of the
 * timeout). Strays (bad magic or token, malformed) are dropped and counted; a message of this
 * job at the wrong position is a protocol error. 0 or RS_ERR_*. */
static int ring_recv(Ring *r, uint32_t kind, uint32_t step, float *buf, size_t off, size_t n, int reduce) {
    if (r->shm_in) return lane_recv(r, kind, step, buf, off, n, reduce);
    double t0 = clock_now(), deadline = t0 + r->timeout;
    for (;;) {
        MsgIn in;
        if (msg_recv(r->pull, &in, ZMQ_DONTWAIT, 0) < 0) {
            if (msg_errno() != EAGAIN && msg_errno() != EINTR) return ring_fail_zmq(r, "msg_recv");
            int w = msg_wait(r->pull, deadline);
            if (w < 0) return ring_fail_zmq(r, "msg_wait");
            if (w == 0)
                return ring_fail(r, RS_ERR_PEER, "ring: no data from rank %d for %.0f s (is it alive?)", r->left, r->timeout);
            continue;
        }
        RingHeader h;
        size_t hb, got;
        const void *head = msg_head(&in, &hb);
        const void *data = msg_payload(&in, &got);
        memset(&h, 0, sizeof h);
        int malformed = in.n != 2 || in.extra || hb != sizeof h;
        if (!malformed) memcpy(&h, head, sizeof h);
        if (malformed || h.magic != RING_MAGIC || h.token != r->token) {
            msg_drop(&in, &r->c);
            continue;
        }
        int rc = ring_check_header(r, &h, got, kind, step, off, n);
        if (rc) {
            msg_close(&in);
            return rc;
        }
        msg_accept(&in, 0, 0, 0, &r->c); /* the emulated interface (--link), the counts */
        if (r->first_pending) {
            r->last_wait = clock_now() - t0;
            r->first_pending = 0;
        }
        ring_take(r, kind, buf + off, data, n, reduce);
        msg_close(&in);
        return RS_OK;
    }
}

/* Starts a collective: the broken check and the sequence number every rank advances alike. */
static int ring_begin(Ring *r) {
    r->seq++;
    r->last_wait = 0;
    r->first_pending = 1;
    if (r->broken) return rs_error(RS_ERR_PEER, "ring unusable after an earlier error: %s", r->why);
    return RS_OK;
}

/* Waits until every send counted in *p has left the caller's buffer. */
static int ring_wait_sent(Ring *r, RingPending *p) {
    int rc = r->to ? lane_wait(r, LANE_SENT, p, clock_now() + r->timeout) : ring_drain(r, p, r->timeout);
    if (rc == 0) return RS_OK;
    return ring_fail(r, RS_ERR_PEER, "ring: rank %d took no data for %.0f s (is it alive?)", r->right, r->timeout);
}

/* The default cut's elements per segment for chunks of `chunk` elements: a fraction of a chunk,
 * within bounds that depend on the transports (shared memory: small segments cost little and
 * pipeline well; ZeroMQ: every message costs thread hand-offs). */
static size_t ring_cut(size_t chunk, int world, int all_shm) {
    size_t lo = all_shm ? RING_SHM_SEG_MIN : world == 2 ? RING_SEG2_MIN : RING_SEG_MIN, hi = all_shm ? RING_SHM_SEG_BYTES : RING_SEG_BYTES;
    size_t seg = (chunk + RING_SEG_PER_CHUNK - 1) / RING_SEG_PER_CHUNK, mn = lo / sizeof(float), mx = hi / sizeof(float);
    return seg < mn ? mn : seg > mx ? mx : seg;
}

size_t ring_largest_segment(int world, size_t most) {
    if (most == 0) return RING_SEG_MAX / sizeof(float);
    size_t seg = ring_cut(most, world, 0); /* a broadcast's chunk is its whole buffer; ZeroMQ's bounds are the larger */
    return seg < most ? seg : most;
}

size_t ring_lane_bytes(int world, size_t most) {
    size_t seg = ring_largest_segment(world, most), msg = lane_msg_bytes(codec_bytes(CODEC_F32, seg));
    size_t b = RING_LANE_MSGS * msg;
    if (most) { /* and the whole largest collective, in its largest segments (ring.h: what keeps the bandwidth) */
        size_t whole = most / seg * msg + (most % seg ? lane_msg_bytes(codec_bytes(CODEC_F32, most % seg)) : 0);
        if (whole > b) b = whole;
    }
    b = (b + RING_LANE_HEAD - 1) / RING_LANE_HEAD * RING_LANE_HEAD; /* whole pages */
    return b < RING_LANE_MIN ? RING_LANE_MIN : b > RING_LANE_MAX ? RING_LANE_MAX : b;
}

/* Elements per segment for a collective of count elements: the size ring_set_segment fixed, or
 * ring_cut's for its chunks, never more than the ring's largest segment (the lanes hold it; for a
 * collective of at most the ring's `most` that bound never binds: the cut is the same). A function
 * of (count, world, all_shm, most), so every rank cuts alike. */
static size_t ring_segment(const Ring *r, size_t count) {
    if (r->seg) return r->seg;
    size_t seg = ring_cut((count + (size_t)r->world - 1) / (size_t)r->world, r->world, r->all_shm);
    return seg < r->seg_cap ? seg : r->seg_cap;
}

/* The PULL's queue bound (net/msg.h: four times what a peer has in flight in one step): the left
 * neighbour is this PULL's one peer. The two-rank exchange sends every segment before it reads
 * one, at most RING_EX_SEGS; a ring step sends one chunk, RING_SEG_PER_CHUNK segments under the
 * default cut and no more than RING_EX_SEGS while a chunk is at most RING_EX_SEGS segments of
 * RING_SEG_BYTES (256 MiB): RING_EX_SEGS it is, 1024 messages. A sender further ahead (tiny
 * segments from ring_set_segment, a larger chunk) keeps the rest in its own queue until this rank
 * reads them. That cannot deadlock the ring: a rank waits for ZeroMQ to let its lent frames go
 * only after receiving everything of their step, and its right neighbour reads them before it
 * waits for anything of its own (over two ranks, the rank behind reads on while the one ahead
 * waits), so a queue in between only delays what it holds. */
static int ring_queue(void) { return msg_queue_bound(RING_EX_SEGS); }

/* --transport (net/zendpoint.h) as what this rank offers: 2 shm and a Unix socket (auto,
 * shm), 1 a Unix socket (ipc), 0 TCP only (tcp). */
static int ring_policy(void) {
    ZepWant w = zep_get();
    return w == ZEP_TCP ? 0 : w == ZEP_IPC ? 1 : 2;
}

/* One endpoint text taken apart (pointers into buffers of its own). */
typedef struct {
    char tcp[512], ipc[300], host[40];
    long pid;
    int fd;
    unsigned long long nonce;
    int has_shm;
} RingEp;

/* "tcp://A:P" ["|ipc://@NAME"] ["|shm=PID.FD.NONCE"] ["|host=KEY"]: 0, or -1 without a TCP part. */
static int ring_parse_ep(const char *ep, RingEp *e) {
    memset(e, 0, sizeof *e);
    if (!ep || strncmp(ep, "tcp://", 6)) return -1;
    size_t k = strcspn(ep, "|");
    if (k >= sizeof e->tcp) return -1;
    memcpy(e->tcp, ep, k);
    e->tcp[k] = 0;
    for (const char *p = ep + k; *p == '|';) {
        const char *f = p + 1;
        size_t n = strcspn(f, "|");
        if (!strncmp(f, "ipc://", 6) && n < sizeof e->ipc) snprintf(e->ipc, sizeof e->ipc, "%.*s", (int)n, f);
        else if (!strncmp(f, "host=", 5) && n - 5 < sizeof e->host) snprintf(e->host, sizeof e->host, "%.*s", (int)(n - 5), f + 5);
        else if (!strncmp(f, "shm=", 4))
            e->has_shm = sscanf(f + 4, "%ld.%d.%llx", &e->pid, &e->fd, &e->nonce) == 3 && e->pid > 0 && e->fd >= 0;
        p = f + n;
    }
    return 0;
}

/* Whether the edge from a to b is shared memory: both offer a lane, same host key. */
static int ring_edge_shm(const RingEp *a, const RingEp *b) {
    return a->has_shm && b->has_shm && a->host[0] && !strcmp(a->host, b->host);
}

/* Maps rank `who`'s lane described by ep into *out: the whole lane (whole != 0: this rank
 * writes into it), or only its head page with the doorbell; counted under MEM_COMM. *bytes: the
 * bytes of messages it holds, as its size and its head agree. 0, or RS_ERR_PEER (that process no
 * longer exists) or RS_ERR_RUNTIME with rs_errmsg() set. */
static int ring_map_lane(int who, const RingEp *ep, int whole, RingLane **out, size_t *bytes) {
    *out = NULL;
    *bytes = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", ep->pid, ep->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT || err == ESRCH) /* the process keeps the lane open while its ring exists */
            return rs_error(RS_ERR_PEER,
                            "ring: rank %d (process %ld) is gone: its shared-memory lane %s is closed (if it is "
                            "alive, this host's /proc does not show other processes' descriptors, as in some "
                            "sandboxes: --transport ipc avoids shared memory)",
                            who, ep->pid, path);
        return rs_error(RS_ERR_RUNTIME,
                        "ring: cannot open rank %d's shared-memory lane (%s: %s; --transport ipc avoids it)", who,
                        path, strerror(err));
    }
    struct stat st;
    void *p = MAP_FAILED;
    size_t lane = fstat(fd, &st) == 0 && st.st_size > RING_LANE_HEAD ? (size_t)st.st_size - RING_LANE_HEAD : 0;
    size_t size = whole ? RING_LANE_HEAD + lane : RING_LANE_HEAD;
    if (lane >= RING_LANE_MIN && lane <= RING_LANE_MAX && lane % RING_LANE_HEAD == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    RingLane *l = p == MAP_FAILED ? NULL : p;
    if (!l || __atomic_load_n(&l->magic, __ATOMIC_ACQUIRE) != RING_LANE_MAGIC || l->nonce != ep->nonce ||
        l->owner != (uint32_t)who || l->bytes != lane) {
        if (l) munmap(l, size);
        return rs_error(RS_ERR_RUNTIME, "ring: %s is not rank %d's shared-memory lane (--transport ipc avoids it)",
                        path, who);
    }
    mem_account(MEM_COMM, (long long)size);
    *out = l;
    *bytes = lane;
    return RS_OK;
}

/* Creates this rank's lane of `bytes` of messages (a memfd the left neighbour maps). 0, or -1 (no
 * lane offered). */
static int ring_make_lane(Ring *r, size_t bytes) {
    int fd = memfd_create("ringside-ring-lane", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t size = RING_LANE_HEAD + bytes;
    void *p = ftruncate(fd, (off_t)size) == 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    uint64_t nonce = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&nonce, sizeof nonce, 1, f) != 1) nonce = (uint64_t)clock_wall() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    if (f) fclose(f);
    mem_account(MEM_COMM, (long long)size);
    RingLane *l = p;
    l->owner = (uint32_t)r->rank;
    l->nonce = nonce;
    l->bytes = bytes;
    __atomic_store_n(&l->magic, RING_LANE_MAGIC, __ATOMIC_RELEASE);
    r->own = l;
    r->own_bytes = bytes;
    r->lane_fd = fd;
    r->lane_nonce = nonce;
    return 0;
}

int ring_create(Ring **out, void *zctx, int rank, int world, const char *addr, uint64_t token, double timeout,
                char *endpoint, size_t len) {
    return ring_create_for(out, zctx, rank, world, addr, token, timeout, 0, endpoint, len);
}

int ring_create_for(Ring **out, void *zctx, int rank, int world, const char *addr, uint64_t token, double timeout,
                    size_t most, char *endpoint, size_t len) {
    *out = NULL;
    if (len) endpoint[0] = 0;
    if (world < 1 || rank < 0 || rank >= world) return rs_error(RS_ERR_INPUT, "ring: rank %d outside a world of %d", rank, world);
    if (!addr || !*addr) addr = "127.0.0.1";
    Ring *r = calloc(1, sizeof *r);
    if (r) r->wire = codec_make(CODEC_F32, 1.0f);
    if (r) r->pending = calloc((size_t)world, sizeof *r->pending);
    if (!r || !r->pending) {
        free(r);
        return rs_error(RS_ERR_RUNTIME, "ring: out of memory");
    }
    for (int i = 0; i < world + RING_EX_SEGS; i++) { /* ZeroMQ's last release of a step wakes its waiter */
        RingPending *p = i < world ? &r->pending[i] : &r->xpend[i - world];
        *p = (RingPending){.r = r, .lend = {.wake = ring_wake, .arg = p}};
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    r->rank = rank;
    r->world = world;
    r->left = (rank + world - 1) % world;
    r->right = (rank + 1) % world;
    r->token = token;
    r->timeout = timeout > 0 ? timeout : 60;
    r->seg_cap = ring_largest_segment(world, most);
    r->lane_fd = -1;
    if (world == 1) {
        *out = r;
        return RS_OK;
    }
    int rc = RS_OK;
    r->zctx = zctx;
    if (!r->zctx) {
        r->zctx = msg_context();
        r->own_ctx = 1;
        if (!r->zctx) {
            rc = rs_error(RS_ERR_RUNTIME, "ring: cannot create a ZeroMQ context: %s", msg_strerror(msg_errno()));
            goto err;
        }
    }
    /* the PUSH lingers up to the timeout: a rank that returns from its last collective and
     * closes at once must still deliver its last segments (ring_fail drops them instead); the
     * PULL takes frames of at most a segment, and holds at most ring_queue() messages from a
     * peer (the rest wait in the sender's queue) */
    int tmo = (int)(r->timeout * 1000.0);
    MsgSocketSpec pull = {.type = ZMQ_PULL, .binds = 1, .max_frame = RING_SEG_MAX, .rcv_queue = ring_queue()};
    MsgSocketSpec push = {.type = ZMQ_PUSH, .user = "ring", .linger_ms = tmo, .sndtimeo_ms = tmo};
    /* --secure: CURVE on both sockets (shared-memory lanes never leave the host); without it,
     * the job token in both sockets' handshakes where the context has a gate */
    if ((rc = msg_socket(r->zctx, &pull, &r->pull)) || (rc = msg_socket(r->zctx, &push, &r->push))) goto err;
    char where[300], ep[512];
    snprintf(where, sizeof where, "tcp://%s:*", addr);
    if (msg_bind(r->pull, where, ep, sizeof ep) != 0) {
        int e = msg_errno();
        rc = rs_error(e == EADDRINUSE || e == EADDRNOTAVAIL || e == ENODEV || e == EINVAL ? RS_ERR_INPUT : RS_ERR_RUNTIME,
                      "ring: cannot bind the data plane on %s: %s (the address must be one of this host's)", where,
                      msg_strerror(e));
        goto err;
    }
    char ipc[400] = "", shm[80] = "", host[40] = "";
    int policy = ring_policy();
    if (policy > 0) zep_host_key(host, sizeof host);
    if (host[0]) {
        /* an abstract Unix socket: no file to clean up, gone with the process */
        static unsigned serial;
        snprintf(where, sizeof where, "ipc://@ringside-ring-%s-%ld-%d-%u", host, (long)getpid(), rank,
                 __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
        if (msg_bind(r->pull, where, NULL, 0) == 0) snprintf(ipc, sizeof ipc, "|%s", where);
        else log_warn("ring: no Unix-socket endpoint (%s: %s); TCP only", where, msg_strerror(msg_errno()));
        if (policy > 1 && ring_make_lane(r, ring_lane_bytes(world, most)) == 0)
            snprintf(shm, sizeof shm, "|shm=%ld.%d.%llx", (long)getpid(), r->lane_fd, (unsigned long long)r->lane_nonce);
    }
    int k = snprintf(endpoint, len, "%s%s%s%s%s", ep, ipc, shm, host[0] ? "|host=" : "", host);
    if (k < 0 || (size_t)k >= len) {
        rc = rs_error(RS_ERR_RUNTIME, "ring: endpoint %s%s%s does not fit %zu bytes", ep, ipc, shm, len);
        if (len) endpoint[0] = 0;
        goto err;
    }
    *out = r;
    return RS_OK;
err:
    ring_destroy(r);
    return rc;
}

int ring_connect(Ring *r, char *const *endpoints) {
    if (r->world == 1) return RS_OK;
    RingEp *e = calloc(3, sizeof *e); /* left, me, right */
    if (!e) return rs_error(RS_ERR_RUNTIME, "ring: out of memory");
    int rc = RS_OK, who[3] = {r->left, r->rank, r->right};
    for (int i = 0; i < 3 && rc == RS_OK; i++)
        if (!endpoints || ring_parse_ep(endpoints[who[i]], &e[i]) != 0)
            rc = rs_error(RS_ERR_INPUT, "ring: rank %d published no data-plane endpoint ('%s')", who[i],
                          endpoints && endpoints[who[i]] ? endpoints[who[i]] : "");
    if (rc == RS_OK && !r->push) rc = rs_error(RS_ERR_PEER, "ring unusable after an earlier error: %s", r->why);
    if (rc == RS_OK && (r->to || r->map_left)) rc = rs_error(RS_ERR_INPUT, "ring: connected twice");
    if (rc != RS_OK) {
        free(e);
        return rc;
    }
    /* the segment rule needs every edge's transport */
    r->all_shm = 1;
    for (int i = 0; i < r->world && r->all_shm; i++) {
        RingEp a, b;
        if (ring_parse_ep(endpoints[i], &a) || ring_parse_ep(endpoints[(i + 1) % r->world], &b) || !ring_edge_shm(&a, &b))
            r->all_shm = 0;
    }
    int shm_in = ring_edge_shm(&e[0], &e[1]), shm_out = ring_edge_shm(&e[1], &e[2]);
    r->nodes_known = e[0].host[0] && e[1].host[0] && e[2].host[0];
    r->left_node = r->nodes_known && !strcmp(e[0].host, e[1].host);
    r->right_node = r->nodes_known && !strcmp(e[2].host, e[1].host);
    if (shm_out) { /* write into the right neighbour's lane, ring its bell */
        rc = ring_map_lane(r->right, &e[2], 1, &r->map_right, &r->to_bytes);
        r->to = r->map_right;
        r->to_rewind = RING_LANE_REWIND < r->to_bytes / 2 ? RING_LANE_REWIND : r->to_bytes / 2;
        size_t largest = lane_msg_bytes(codec_bytes(CODEC_F32, r->seg_cap));
        if (rc == RS_OK && r->to_bytes < largest)
            rc = rs_error(RS_ERR_INPUT,
                          "ring: rank %d's shared-memory lane holds %zu bytes, less than one of this ring's largest "
                          "messages (%zu bytes: segments of up to %zu floats); every rank must create its ring for the "
                          "same job (ring_create_for's most)", r->right, r->to_bytes, largest, r->seg_cap);
    }
    if (rc == RS_OK && shm_in) { /* the left neighbour writes into ours: ring its bell when we make room */
        size_t unused;
        if (r->left == r->right && r->map_right) r->map_left = r->map_right;
        else rc = ring_map_lane(r->left, &e[0], 0, &r->map_left, &unused); /* its doorbell only */
        r->from_bell = r->map_left;
    }
    if (rc == RS_OK) {
        r->shm_in = shm_in;
        if (shm_in && r->pull) { /* nobody pushes to our sockets: refuse strangers too */
            msg_close_socket(r->pull, 0);
            r->pull = NULL;
        }
        if (!shm_in) heap_keep_frames(RING_HEAP_FRAME); /* frames from warm heap pages (base/heap.h) */
        int use_ipc = !shm_out && e[2].ipc[0] && e[1].host[0] && !strcmp(e[1].host, e[2].host);
        snprintf(r->transport, sizeof r->transport, "%s", shm_out ? "shm" : use_ipc ? "ipc" : "tcp");
        ZepWant want = zep_get(); /* --transport shm or ipc: every edge, or an error naming it */
        if (want == ZEP_SHM && !(shm_out && shm_in))
            rc = rs_error(RS_ERR_INPUT, "--transport shm: rank %d's edge to rank %d cannot be shared memory (another host, "
                                        "namespace or no lane)", shm_out ? r->left : r->rank, shm_out ? r->rank : r->right);
        else if (want == ZEP_IPC && !use_ipc)
            rc = rs_error(RS_ERR_INPUT, "--transport ipc: rank %d is on another host than rank %d (or offers no Unix socket)",
                          r->right, r->rank);
        if (shm_out) {
            msg_close_socket(r->push, 0);
            r->push = NULL;
        } else if (rc == RS_OK && msg_connect(r->push, use_ipc ? e[2].ipc : e[2].tcp) != 0) {
            rc = rs_error(RS_ERR_RUNTIME, "ring: cannot connect to rank %d at %s: %s", r->right, use_ipc ? e[2].ipc : e[2].tcp,
                          msg_strerror(msg_errno()));
        }
    }
    free(e);
    return rc;
}

const char *ring_transport(const Ring *r) { return r->transport; }

int ring_node_links(const Ring *r, int *left, int *right) {
    *left = r->left_node;
    *right = r->right_node;
    return r->nodes_known;
}

void ring_set_wire(Ring *r, Codec wire) { r->wire = wire; }

void ring_set_segment(Ring *r, size_t bytes) {
    if (bytes == 0) {
        r->seg = 0;
        return;
    }
    if (bytes < sizeof(float)) bytes = sizeof(float);
    if (bytes > RING_SEG_MAX) bytes = RING_SEG_MAX;
    r->seg = bytes / sizeof(float) < r->seg_cap ? bytes / sizeof(float) : r->seg_cap;
}

/* The segments ring_allreduce cuts count elements into over 2 ranks (both chunks). */
static size_t ring_segments2(size_t count, size_t seg) {
    size_t lo, hi, k = 0;
    for (int c = 0; c < 2; c++) {
        ring_chunk(count, 2, c, &lo, &hi);
        k += (hi - lo + seg - 1) / seg;
    }
    return k;
}

/* All-reduce of two ranks over ZeroMQ in one exchange (the head comment): sends every segment of
 * buf, then adds the peer's, each once this rank's own send of it is out. */
static int ring_exchange2(Ring *r, float *buf, size_t count, size_t seg) {
    size_t lo, hi, k = 0;
    for (int c = 0; c < 2; c++) {
        ring_chunk(count, 2, c, &lo, &hi);
        for (size_t off = lo; off < hi; off += seg)
            RS_TRY(ring_send(r, RING_KIND_EX, 0, buf, off, hi - off < seg ? hi - off : seg, &r->xpend[k++]));
    }
    k = 0;
    for (int c = 0; c < 2; c++) {
        ring_chunk(count, 2, c, &lo, &hi);
        /* the ring sums chunk c on rank c+1 as (its value) + (rank c's): keep that operand order */
        int order = c == r->rank ? 2 : 1;
        for (size_t off = lo; off < hi; off += seg) {
            size_t n = hi - off < seg ? hi - off : seg;
            RS_TRY(ring_wait_sent(r, &r->xpend[k++]));
            RS_TRY(ring_recv(r, RING_KIND_EX, 0, buf, off, n, order));
        }
    }
    return RS_OK;
}

/* Reduce-scatter's N-1 steps over count elements in segments of seg: step 0 sends this rank's own
 * chunk; step s receives chunk me-s-1, reduces it and forwards it as step s+1, and after the last
 * step the fully reduced chunk me+1 is rounded as the wire rounds it and, with then_send, sent
 * on at once as all-gather step 0 (counted in pending[N-1]). Step s's sends count in pending[s]. */
static int ring_phase_rs(Ring *r, float *buf, size_t count, size_t seg, int then_send) {
    const int N = r->world, me = r->rank;
    size_t lo, hi;
    ring_chunk(count, N, me, &lo, &hi);
    for (size_t off = lo; off < hi; off += seg)
        RS_TRY(ring_send(r, RING_KIND_RS, 0, buf, off, hi - off < seg ? hi - off : seg, &r->pending[0]));
    for (int s = 0; s < N - 1; s++) {
        ring_chunk(count, N, ((me - s - 1) % N + N) % N, &lo, &hi);
        for (size_t off = lo; off < hi; off += seg) {
            size_t n = hi - off < seg ? hi - off : seg;
            RS_TRY(ring_recv(r, RING_KIND_RS, (uint32_t)s, buf, off, n, 1));
            if (s < N - 2) RS_TRY(ring_send(r, RING_KIND_RS, (uint32_t)s + 1, buf, off, n, &r->pending[s + 1]));
            else {
                codec_round(&r->wire, buf + off, n); /* hold what the others will receive */
                if (then_send) RS_TRY(ring_send(r, RING_KIND_AG, 0, buf, off, n, &r->pending[N - 1]));
            }
        }
    }
    return RS_OK;
}

/* All-gather's N-1 steps of messages of kind, after step 0's send of chunk me+1: step s receives
 * chunk me-s, copies it and forwards it as step s+1 (counted in pending[N-1]). wait_rs: first wait
 * until reduce-scatter's step-s sends (the same chunk) have left the buffer. */
static int ring_phase_ag(Ring *r, float *buf, size_t count, size_t seg, uint32_t kind, int wait_rs) {
    const int N = r->world, me = r->rank;
    RingPending *tail = &r->pending[N - 1];
    size_t lo, hi;
    for (int s = 0; s < N - 1; s++) {
        if (wait_rs) RS_TRY(ring_wait_sent(r, &r->pending[s]));
        ring_chunk(count, N, ((me - s) % N + N) % N, &lo, &hi);
        for (size_t off = lo; off < hi; off += seg) {
            size_t n = hi - off < seg ? hi - off : seg;
            RS_TRY(ring_recv(r, kind, (uint32_t)s, buf, off, n, 0));
            if (s < N - 2) RS_TRY(ring_send(r, kind, (uint32_t)s + 1, buf, off, n, tail));
        }
    }
    return ring_wait_sent(r, tail);
}

int ring_allreduce(Ring *r, float *buf, size_t count) {
    RS_TRY(ring_begin(r));
    if (r->world == 1 || count == 0) return RS_OK;
    const size_t seg = ring_segment(r, count);
    if (r->world == 2 && !r->to && !r->shm_in && r->wire.type == CODEC_F32 && r->wire.scale == 1.0f &&
        ring_segments2(count, seg) <= RING_EX_SEGS)
        return ring_exchange2(r, buf, count, seg);
    RS_TRY(ring_phase_rs(r, buf, count, seg, 1));
    return ring_phase_ag(r, buf, count, seg, RING_KIND_AG, 1);
}

int ring_reduce_scatter(Ring *r, float *buf, size_t count, size_t *own_lo, size_t *own_hi) {
    ring_chunk(count, r->world, (r->rank + 1) % r->world, own_lo, own_hi);
    RS_TRY(ring_begin(r));
    if (r->world == 1 || count == 0) return RS_OK;
    RS_TRY(ring_phase_rs(r, buf, count, ring_segment(r, count), 0));
    for (int s = 0; s < r->world - 1; s++) RS_TRY(ring_wait_sent(r, &r->pending[s]));
    return RS_OK;
}

int ring_all_gather(Ring *r, float *buf, size_t count) {
    RS_TRY(ring_begin(r));
    if (r->world == 1 || count == 0) return RS_OK;
    const size_t seg = ring_segment(r, count);
    size_t lo, hi;
    ring_chunk(count, r->world, (r->rank + 1) % r->world, &lo, &hi);
    for (size_t off = lo; off < hi; off += seg)
        RS_TRY(ring_send(r, RING_KIND_PG, 0, buf, off, hi - off < seg ? hi - off : seg, &r->pending[r->world - 1]));
    return ring_phase_ag(r, buf, count, seg, RING_KIND_PG, 0);
}

int ring_broadcast(Ring *r, float *buf, size_t count) {
    RS_TRY(ring_begin(r));
    if (r->world == 1 || count == 0) return RS_OK;
    const size_t seg = ring_segment(r, count * (size_t)r->world);
    RingPending *tail = &r->pending[r->world - 1];
    int forward = r->rank < r->world - 1;
    for (size_t off = 0; off < count; off += seg) {
        size_t n = count - off < seg ? count - off : seg;
        if (r->rank != 0) RS_TRY(ring_recv(r, RING_KIND_BC, 0, buf, off, n, 0));
        if (forward) RS_TRY(ring_send(r, RING_KIND_BC, 0, buf, off, n, tail));
    }
    return ring_wait_sent(r, tail);
}

double ring_last_wait(const Ring *r) { return r->last_wait; }

unsigned long long ring_progress(const Ring *r) {
    return __atomic_load_n(&r->c.messages_received, __ATOMIC_RELAXED);
}

void ring_counters(const Ring *r, RingCounters *out) { msg_count_read(&r->c, out); }

void ring_destroy(Ring *r) {
    if (!r) return;
    msg_close_socket(r->pull, 0);
    msg_close_socket(r->push, 0);
    r->pull = r->push = NULL;
    size_t to = RING_LANE_HEAD + r->to_bytes, own = RING_LANE_HEAD + r->own_bytes;
    if (r->map_right) munmap(r->map_right, to), mem_account(MEM_COMM, -(long long)to);
    if (r->map_left && r->map_left != r->map_right) munmap(r->map_left, RING_LANE_HEAD), mem_account(MEM_COMM, -(long long)RING_LANE_HEAD);
    if (r->own) munmap(r->own, own), mem_account(MEM_COMM, -(long long)own);
    if (r->lane_fd >= 0) close(r->lane_fd);
    free(r->q);
    if (r->own_ctx && r->zctx) msg_context_end(r->zctx); /* delivers what is queued (linger: the timeout) */
    else if (ring_drain_all(r, 2.0) != 0) {
        /* ZeroMQ may still call ring_release on r->pending: leak r rather than free it under it */
        log_warn("ring: ZeroMQ still holds data frames at shutdown (rank %d)", r->rank);
        return;
    }
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r->pending);
    free(r);
}

/* ==== The "ring" back end ====================================================================
 *
 * A host back end (engine/sync.h): the engine stages device buffers through pinned host memory
 * and calls start on its communication thread, which runs the ring on host memory only (so it
 * never touches CUDA). start all-reduces one bucket in place and returns when it is done. */

typedef struct {
    SyncJob job;
    Ring *ring;
    int on_host;             /* device memory is host memory: allreduce() works in place */
    float *coll;             /* pinned staging for allreduce() on a GPU, grown on demand */
    size_t coll_bytes;
} RingState;

/* Pinned host memory counted under MEM_COMM; NULL with rs_errmsg() set. */
static float *ring_host_alloc(Device *dev, size_t bytes) { return device_host_alloc(dev, bytes, MEM_COMM); }

static void ring_host_free(Device *dev, float *p, size_t bytes) { device_host_free(dev, p, bytes, MEM_COMM); }

static void ring_sync_destroy(void *state) {
    RingState *s = state;
    if (!s) return;
    ring_destroy(s->ring); /* before the buffers: it waits for ZeroMQ to let go of them */
    if (s->job.dev) ring_host_free(s->job.dev, s->coll, s->coll_bytes);
    free(s);
}

int ring_job_create(const SyncJob *job, Ring **out, char *endpoint, size_t len) {
    char canon[8192];
    config_canonical(job->cfg, canon, sizeof canon);
    uint64_t token = config_hash(job->token && *job->token ? job->token : canon);
    /* the most one collective takes: the parameters' broadcast (every bucket is a slice of them)
     * or a collective call of at most max_count */
    size_t most = job->nparams > job->max_count ? job->nparams : job->max_count;
    RS_TRY(ring_create_for(out, job->zctx, job->rank, job->world, job->addr, token, job->timeout, most, endpoint, len));
    ring_set_wire(*out, codec_from_options(job->cfg->wire, job->cfg->loss_scale));
    return RS_OK;
}

/* Binds the data plane (world > 1). */
static int ring_sync_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    *state = NULL;
    if (len) endpoint[0] = 0;
    if (!job->dev) return rs_error(RS_ERR_INPUT, "ring: no device");
    RingState *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "ring: out of memory");
    s->job = *job;
    s->on_host = job->dev->host_visible;
    int rc = RS_OK;
    if (job->world > 1 && (rc = ring_job_create(job, &s->ring, endpoint, len))) {
        ring_sync_destroy(s);
        return rc;
    }
    *state = s;
    return RS_OK;
}

/* Connects to the right neighbour. */
static int ring_sync_connect(void *state, char *const *endpoints, int nmembers) {
    RingState *s = state;
    if (s->job.world == 1) return RS_OK;
    if (nmembers < s->job.world)
        return rs_error(RS_ERR_INPUT, "ring: %d endpoints for %d ranks", nmembers, s->job.world);
    return ring_connect(s->ring, endpoints);
}

/* Rank 0's count floats (host memory) to every rank. */
static int ring_sync_broadcast(void *state, float *buf, size_t count) {
    RingState *s = state;
    return s->job.world == 1 ? RS_OK : ring_broadcast(s->ring, buf, count);
}

/* One bucket, summed in place over the ring. */
static int ring_sync_start(void *state, int step, int b, float *grad, float *out) {
    RingState *s = state;
    if (s->job.world == 1) return RS_OK;
    const Bucket *bk = &s->job.buckets[b];
    return ring_allreduce(s->ring, grad, bk->hi - bk->lo);
}

/* Synchronous in-place sum of a device buffer, staged through pinned host memory on a GPU. */
static int ring_sync_allreduce(void *state, float *buf, size_t count) {
    RingState *s = state;
    if (s->job.world == 1) return RS_OK;
    if (s->on_host) return ring_allreduce(s->ring, buf, count);
    Device *dev = s->job.dev;
    size_t bytes = count * sizeof(float);
    if (bytes > s->coll_bytes) {
        ring_host_free(dev, s->coll, s->coll_bytes);
        s->coll_bytes = 0;
        if (!(s->coll = ring_host_alloc(dev, bytes)))
            return rs_error(RS_ERR_RUNTIME, "ring: no pinned host memory for %zu bytes: %s", bytes, rs_errmsg());
        s->coll_bytes = bytes;
    }
    RS_TRY(device_d2h(dev, s->coll, buf, bytes));
    RS_TRY(ring_allreduce(s->ring, s->coll, count));
    return device_h2d(dev, buf, s->coll, bytes);
}

void ring_traffic_fill(const Ring *r, SyncTraffic *out) {
    RingCounters c = {0};
    if (r) ring_counters(r, &c);
    sync_traffic_counts(&c, out);
    out->transport = r ? ring_transport(r) : "";
    int left, right; /* every byte goes to the right neighbour and comes from the left one */
    if (r && r->world > 1 && ring_node_links(r, &left, &right)) {
        out->split = 1;
        out->node_sent = right ? c.bytes_sent : 0;
        out->node_received = left ? c.bytes_received : 0;
    }
}

static void ring_sync_traffic(void *state, SyncTraffic *out) {
    RingState *s = state;
    ring_traffic_fill(s ? s->ring : NULL, out);
}

static const SyncOps ring_ops = {
    .name = "ring",
    .place = SYNC_ON_HOST,
    .result = SYNC_SUMS,
    .init = ring_sync_init,
    .connect = ring_sync_connect,
    .broadcast = ring_sync_broadcast,
    .start = ring_sync_start,
    .allreduce = ring_sync_allreduce,
    .traffic = ring_sync_traffic,
    .destroy = ring_sync_destroy,
};

/* The "ring" back end (never NULL: it needs only ZeroMQ and the host). */
const SyncOps *sync_ring(void) { return &ring_ops; }
