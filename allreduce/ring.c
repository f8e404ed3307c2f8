/* ring.c - the "ring" back end: ring all-reduce over ZeroMQ in host memory, on a communication thread */
#include "ring.h"
#include "../common/clock.h"
#include "../common/config.h"
#include "../common/device.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/sync.h"
#include "../common/trace.h"
#include "../common/zmq_check.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ==== The ring core =========================================================================
 *
 * Data plane: rank r binds a PULL (its left neighbour r-1 pushes into it) and connects a PUSH
 * to rank r+1's PULL. PUSH/PULL over one TCP connection keeps order, so the receiver knows the
 * exact segment that must come next and checks the header against it.
 *
 * All-reduce of count floats over N ranks: N chunks (ring_chunk), each cut into segments.
 * Reduce-scatter step s: rank r sends chunk r-s and receives chunk r-s-1, adding it into its
 * own. A received-and-reduced segment is forwarded at once as the next step's send, so the
 * ZeroMQ I/O thread writes segment k while this thread reduces segment k+1. After N-1 steps
 * rank r owns chunk r+1 fully reduced; all-gather passes the owned chunks around the ring the
 * same way, copying. Every element of chunk c is summed in one fixed order (starting at rank
 * c, around the ring) and then copied, so every rank ends with the same bits.
 *
 * Zero copy: segments of RING_ZEROCOPY_MIN bytes or more are handed to ZeroMQ without a copy
 * (zmq_msg_init_data). ZeroMQ owns such a buffer until it calls ring_release, which counts the
 * message off pending[step]. A buffer is only modified after its count is zero: reduce-scatter
 * step s sends chunk r-s, and all-gather step s overwrites that same chunk, so all-gather step
 * s first waits for pending[s] (normally long since zero); every send of the collective is
 * released before it returns, so the caller may reuse buf at once. Reduce-scatter never
 * modifies a chunk it has already sent. */

struct Ring {
    void *zctx;
    int own_ctx;
    void *pull, *push;
    int rank, world, left, right;
    uint64_t token;
    double timeout;
    size_t seg;          /* elements per segment */
    uint64_t seq;        /* collectives started */
    int broken;
    char why[512];       /* the error that broke the ring */
    int *pending;        /* [world]: zero-copy frames ZeroMQ holds, by reduce-scatter step; [world-1]: all-gather/broadcast */
    double last_wait;
    int first_pending;   /* the collective has not received its first message yet */
    RingCounters c;      /* updated with __atomic builtins, read from any thread */
};

/* ZeroMQ's free function for zero-copy frames (runs on its I/O thread). */
static void ring_release(void *data, void *hint) {
    (void)data;
    __atomic_sub_fetch((int *)hint, 1, __ATOMIC_RELEASE);
}

static void ring_count(unsigned long long *ctr, unsigned long long n) {
    __atomic_add_fetch(ctr, n, __ATOMIC_RELAXED);
}

/* Waits until ZeroMQ released every frame counted in *ctr, for at most limit seconds.
 * 0, or -1 on timeout. */
static int ring_drain(int *ctr, double limit) {
    double deadline = clock_now() + limit;
    while (__atomic_load_n(ctr, __ATOMIC_ACQUIRE) > 0) {
        if (clock_now() > deadline) return -1;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Waits (up to limit seconds) until no zero-copy frame references the caller's buffers. */
static int ring_drain_all(Ring *r, double limit) {
    double deadline = clock_now() + limit;
    for (int i = 0; i < r->world; i++) {
        double left = deadline - clock_now();
        if (ring_drain(&r->pending[i], left > 0 ? left : 0) != 0) return -1;
    }
    return 0;
}

/* Breaks the ring with an error: formats it into rs_errmsg() and r->why, closes the PUSH so
 * that ZeroMQ drops (and releases) every queued frame, and waits briefly for the releases so
 * that no reference to the caller's buffer outlives the call. Returns code. */
__attribute__((format(printf, 3, 4))) static int ring_fail(Ring *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    r->broken = code ? code : RS_ERR_RUNTIME;
    if (r->push) {
        int zero = 0;
        zmq_setsockopt(r->push, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(r->push);
        r->push = NULL;
    }
    if (ring_drain_all(r, 2.0) != 0)
        log_warn("ring: ZeroMQ still holds data frames 2 s after an error (rank %d)", r->rank);
    return rs_error(r->broken, "%s", r->why);
}

/* Breaks the ring after a failed ZeroMQ call (errno holds its error), with zmq_check's
 * "file:line: call: error (rank r)" text. */
#define ring_fail_zmq(r, what) \
    ring_fail((r), RS_ERR_RUNTIME, "%s", (zmq_check_at(-1, (what), __FILE__, __LINE__), rs_errmsg()))

static const char *ring_kind_name(uint32_t kind) {
    return kind == RING_KIND_RS ? "reduce-scatter" : kind == RING_KIND_AG ? "all-gather" : kind == RING_KIND_BC ? "broadcast" : "?";
}

/* Sends segment [off, off+n) of base to the right neighbour as (kind, step), counted in
 * *pending while ZeroMQ holds it without a copy. 0 or RS_ERR_*. */
static int ring_send(Ring *r, uint32_t kind, uint32_t step, const float *base, size_t off, size_t n, int *pending) {
    RingHeader h = {RING_MAGIC, kind, r->token, r->seq, step, (uint32_t)r->rank, off, n};
    size_t bytes = n * sizeof(float);
    zmq_msg_t m;
    if (zmq_send(r->push, &h, sizeof h, ZMQ_SNDMORE) < 0) {
        if (zmq_errno() == EAGAIN)
            return ring_fail(r, RS_ERR_PEER, "ring: rank %d took no data for %.0f s (is it alive?)", r->right, r->timeout);
        return ring_fail_zmq(r, "zmq_send(header)");
    }
    if (bytes >= RING_ZEROCOPY_MIN) {
        __atomic_add_fetch(pending, 1, __ATOMIC_RELAXED);
        if (zmq_msg_init_data(&m, (void *)(base + off), bytes, ring_release, pending) != 0) {
            __atomic_sub_fetch(pending, 1, __ATOMIC_RELAXED);
            return ring_fail_zmq(r, "zmq_msg_init_data");
        }
    } else {
        if (zmq_msg_init_size(&m, bytes) != 0) return ring_fail_zmq(r, "zmq_msg_init_size");
        memcpy(zmq_msg_data(&m), base + off, bytes);
    }
    if (zmq_msg_send(&m, r->push, 0) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&m); /* releases a zero-copy frame through ring_release */
        if (e == EAGAIN)
            return ring_fail(r, RS_ERR_PEER, "ring: rank %d took no data for %.0f s (is it alive?)", r->right, r->timeout);
        errno = e;
        return ring_fail_zmq(r, "zmq_msg_send");
    }
    ring_count(&r->c.bytes_sent, sizeof h + bytes);
    ring_count(&r->c.messages_sent, 1);
    return RS_OK;
}

/* dst[i] += src[i]. src is a received frame, which ZeroMQ may place at any byte offset: it is
 * read through memcpy (an unaligned load), in blocks of 8 so that the compiler vectorises. */
static void ring_add(float *restrict dst, const unsigned char *restrict src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float v[8];
        memcpy(v, src + i * sizeof(float), sizeof v);
        for (int k = 0; k < 8; k++) dst[i + k] += v[k];
    }
    for (; i < n; i++) {
        float v;
        memcpy(&v, src + i * sizeof(float), sizeof v);
        dst[i] += v;
    }
}

/* Receives the next message from the PULL as a header and a data frame (extra frames are
 * read and flag the message malformed). 0 with the frames initialised (caller closes), 1
 * when the poll woke without a message, or RS_ERR_*. */
static int ring_recv_frames(Ring *r, zmq_msg_t *hm, zmq_msg_t *dm, int *malformed) {
    zmq_msg_init(hm);
    zmq_msg_init(dm);
    *malformed = 0;
    if (zmq_msg_recv(hm, r->pull, ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        zmq_msg_close(hm);
        zmq_msg_close(dm);
        if (e == EAGAIN || e == EINTR) return 1;
        errno = e;
        return ring_fail_zmq(r, "zmq_msg_recv");
    }
    int more = zmq_msg_more(hm);
    if (!more) *malformed = 1;
    if (more) {
        if (zmq_msg_recv(dm, r->pull, ZMQ_DONTWAIT) < 0) goto fail;
        more = zmq_msg_more(dm);
    }
    while (more) { /* a stray with more frames than ours: read them all, refuse the message */
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, r->pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&x);
            goto fail;
        }
        more = zmq_msg_more(&x);
        zmq_msg_close(&x);
        *malformed = 1;
    }
    return RS_OK;
fail:;
    int e = zmq_errno();
    zmq_msg_close(hm);
    zmq_msg_close(dm);
    errno = e;
    return ring_fail_zmq(r, "zmq_msg_recv");
}

/* Receives segment (kind, step, off, n) from the left neighbour into buf + off, added to it
 * (reduce) or copied. Strays (bad magic or token, malformed) are dropped and counted; a
 * message of this job at the wrong position is a protocol error. 0 or RS_ERR_*. */
static int ring_recv(Ring *r, uint32_t kind, uint32_t step, float *buf, size_t off, size_t n, int reduce) {
    double t0 = clock_now(), deadline = t0 + r->timeout;
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0)
            return ring_fail(r, RS_ERR_PEER, "ring: no data from rank %d for %.0f s (is it alive?)", r->left, r->timeout);
        zmq_pollitem_t it = {r->pull, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, (long)(left * 1000.0) + 1);
        if (rc < 0) {
            if (zmq_errno() == EINTR) continue;
            return ring_fail_zmq(r, "zmq_poll");
        }
        if (rc == 0) continue;
        zmq_msg_t hm, dm;
        int malformed;
        rc = ring_recv_frames(r, &hm, &dm, &malformed);
        if (rc == 1) continue;
        if (rc) return rc;
        RingHeader h;
        memset(&h, 0, sizeof h);
        if (!malformed && zmq_msg_size(&hm) == sizeof h) memcpy(&h, zmq_msg_data(&hm), sizeof h);
        if (malformed || h.magic != RING_MAGIC || h.token != r->token) {
            ring_count(&r->c.dropped, 1);
            zmq_msg_close(&hm);
            zmq_msg_close(&dm);
            continue;
        }
        size_t got = zmq_msg_size(&dm);
        if (h.seq != r->seq || h.kind != kind || h.step != step || h.offset != off || h.count != n ||
            h.from != (uint32_t)r->left || got != n * sizeof(float)) {
            zmq_msg_close(&hm);
            zmq_msg_close(&dm);
            return ring_fail(r, RS_ERR_RUNTIME,
                             "ring: out-of-order data from rank %u: %s step %u, elements [%llu, +%llu), %zu bytes, "
                             "collective %llu; expected %s step %u, [%zu, +%zu) from rank %d, collective %llu",
                             h.from, ring_kind_name(h.kind), h.step, (unsigned long long)h.offset,
                             (unsigned long long)h.count, got, (unsigned long long)h.seq, ring_kind_name(kind), step,
                             off, n, r->left, (unsigned long long)r->seq);
        }
        if (r->first_pending) {
            r->last_wait = clock_now() - t0;
            r->first_pending = 0;
        }
        const unsigned char *src = zmq_msg_data(&dm);
        if (reduce) ring_add(buf + off, src, n);
        else memcpy(buf + off, src, got);
        ring_count(&r->c.bytes_received, sizeof h + got);
        ring_count(&r->c.messages_received, 1);
        zmq_msg_close(&hm);
        zmq_msg_close(&dm);
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

/* Waits until the right neighbour has taken every zero-copy frame counted in *ctr. */
static int ring_wait_sent(Ring *r, int *ctr) {
    if (ring_drain(ctr, r->timeout) == 0) return RS_OK;
    return ring_fail(r, RS_ERR_PEER, "ring: rank %d took no data for %.0f s (is it alive?)", r->right, r->timeout);
}

int ring_create(Ring **out, void *zctx, int rank, int world, const char *addr, uint64_t token, double timeout,
                char *endpoint, size_t len) {
    *out = NULL;
    if (len) endpoint[0] = 0;
    if (world < 1 || rank < 0 || rank >= world) return rs_error(RS_ERR_INPUT, "ring: rank %d outside a world of %d", rank, world);
    if (!addr || !*addr) addr = "127.0.0.1";
    Ring *r = calloc(1, sizeof *r);
    if (r) r->pending = calloc((size_t)world, sizeof *r->pending);
    if (!r || !r->pending) {
        free(r);
        return rs_error(RS_ERR_RUNTIME, "ring: out of memory");
    }
    r->rank = rank;
    r->world = world;
    r->left = (rank + world - 1) % world;
    r->right = (rank + 1) % world;
    r->token = token;
    r->timeout = timeout > 0 ? timeout : 60;
    r->seg = RING_SEG_BYTES / sizeof(float);
    if (world == 1) {
        *out = r;
        return RS_OK;
    }
    int rc = RS_OK;
    r->zctx = zctx;
    if (!r->zctx) {
        r->zctx = zmq_ctx_new();
        r->own_ctx = 1;
        if (!r->zctx) {
            rc = rs_error(RS_ERR_RUNTIME, "ring: cannot create a ZeroMQ context: %s", zmq_strerror(zmq_errno()));
            goto err;
        }
    }
    /* the PUSH lingers up to the timeout: a rank that returns from its last collective and
     * closes at once must still deliver its last segments (ring_fail drops them instead) */
    int zero = 0, tmo = (int)(r->timeout * 1000.0);
    int64_t maxmsg = RING_SEG_MAX;
    r->pull = zmq_socket(r->zctx, ZMQ_PULL);
    r->push = zmq_socket(r->zctx, ZMQ_PUSH);
    if (!r->pull || !r->push) {
        rc = zmq_check_at(-1, "zmq_socket", __FILE__, __LINE__);
        goto err;
    }
    if ((rc = zmqCheck(zmq_setsockopt(r->pull, ZMQ_LINGER, &zero, sizeof zero))) ||
        (rc = zmqCheck(zmq_setsockopt(r->pull, ZMQ_RCVHWM, &zero, sizeof zero))) ||
        (rc = zmqCheck(zmq_setsockopt(r->pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg))) ||
        (rc = zmqCheck(zmq_setsockopt(r->push, ZMQ_LINGER, &tmo, sizeof tmo))) ||
        (rc = zmqCheck(zmq_setsockopt(r->push, ZMQ_SNDHWM, &zero, sizeof zero))) ||
        (rc = zmqCheck(zmq_setsockopt(r->push, ZMQ_SNDTIMEO, &tmo, sizeof tmo))))
        goto err;
    char where[300];
    snprintf(where, sizeof where, "tcp://%s:*", addr);
    if (zmq_bind(r->pull, where) != 0) {
        int e = zmq_errno();
        rc = rs_error(e == EADDRINUSE || e == EADDRNOTAVAIL || e == ENODEV || e == EINVAL ? RS_ERR_INPUT : RS_ERR_RUNTIME,
                      "ring: cannot bind the data plane on %s: %s (the address must be one of this host's)", where,
                      zmq_strerror(e));
        goto err;
    }
    char ep[512];
    size_t eplen = sizeof ep;
    if ((rc = zmqCheck(zmq_getsockopt(r->pull, ZMQ_LAST_ENDPOINT, ep, &eplen)))) goto err;
    if (strlen(ep) + 1 > len) {
        rc = rs_error(RS_ERR_RUNTIME, "ring: endpoint %s does not fit %zu bytes", ep, len);
        goto err;
    }
    memcpy(endpoint, ep, strlen(ep) + 1);
    *out = r;
    return RS_OK;
err:
    ring_destroy(r);
    return rc;
}

int ring_connect(Ring *r, char *const *endpoints) {
    if (r->world == 1) return RS_OK;
    const char *ep = endpoints ? endpoints[r->right] : NULL;
    if (!ep || strncmp(ep, "tcp://", 6))
        return rs_error(RS_ERR_INPUT, "ring: rank %d published no data-plane endpoint ('%s')", r->right, ep ? ep : "");
    if (!r->push) return rs_error(RS_ERR_PEER, "ring unusable after an earlier error: %s", r->why);
    return zmqCheck(zmq_connect(r->push, ep));
}

void ring_set_segment(Ring *r, size_t bytes) {
    if (bytes < sizeof(float)) bytes = sizeof(float);
    if (bytes > RING_SEG_MAX) bytes = RING_SEG_MAX;
    r->seg = bytes / sizeof(float);
}

int ring_allreduce(Ring *r, float *buf, size_t count) {
    RS_TRY(ring_begin(r));
    if (r->world == 1 || count == 0) return RS_OK;
    const int N = r->world, me = r->rank;
    int *tail = &r->pending[N - 1];
    size_t lo, hi;
    /* reduce-scatter step 0 sends this rank's own chunk */
    ring_chunk(count, N, me, &lo, &hi);
    for (size_t off = lo; off < hi; off += r->seg)
        RS_TRY(ring_send(r, RING_KIND_RS, 0, buf, off, hi - off < r->seg ? hi - off : r->seg, &r->pending[0]));
    /* reduce-scatter: receive chunk me-s-1, reduce, forward it as step s+1 (or, fully reduced
     * after the last step, as all-gather step 0) */
    for (int s = 0; s < N - 1; s++) {
        ring_chunk(count, N, ((me - s - 1) % N + N) % N, &lo, &hi);
        for (size_t off = lo; off < hi; off += r->seg) {
            size_t n = hi - off < r->seg ? hi - off : r->seg;
            RS_TRY(ring_recv(r, RING_KIND_RS, (uint32_t)s, buf, off, n, 1));
            if (s < N - 2) RS_TRY(ring_send(r, RING_KIND_RS, (uint32_t)s + 1, buf, off, n, &r->pending[s + 1]));
            else RS_TRY(ring_send(r, RING_KIND_AG, 0, buf, off, n, tail));
        }
    }
    /* all-gather: receive chunk me-s (which reduce-scatter step s sent: wait until ZeroMQ let
     * go of it), copy, forward as step s+1 */
    for (int s = 0; s < N - 1; s++) {
        RS_TRY(ring_wait_sent(r, &r->pending[s]));
        ring_chunk(count, N, ((me - s) % N + N) % N, &lo, &hi);
        for (size_t off = lo; off < hi; off += r->seg) {
            size_t n = hi - off < r->seg ? hi - off : r->seg;
            RS_TRY(ring_recv(r, RING_KIND_AG, (uint32_t)s, buf, off, n, 0));
            if (s < N - 2) RS_TRY(ring_send(r, RING_KIND_AG, (uint32_t)s + 1, buf, off, n, tail));
        }
    }
    return ring_wait_sent(r, tail);
}

int ring_broadcast(Ring *r, float *buf, size_t count) {
    RS_TRY(ring_begin(r));
    if (r->world == 1 || count == 0) return RS_OK;
    int *tail = &r->pending[r->world - 1];
    int forward = r->rank < r->world - 1;
    for (size_t off = 0; off < count; off += r->seg) {
        size_t n = count - off < r->seg ? count - off : r->seg;
        if (r->rank != 0) RS_TRY(ring_recv(r, RING_KIND_BC, 0, buf, off, n, 0));
        if (forward) RS_TRY(ring_send(r, RING_KIND_BC, 0, buf, off, n, tail));
    }
    return ring_wait_sent(r, tail);
}

double ring_last_wait(const Ring *r) { return r->last_wait; }

unsigned long long ring_progress(const Ring *r) {
    return __atomic_load_n(&r->c.messages_received, __ATOMIC_RELAXED);
}

void ring_counters(const Ring *r, RingCounters *out) {
    out->bytes_sent = __atomic_load_n(&r->c.bytes_sent, __ATOMIC_RELAXED);
    out->bytes_received = __atomic_load_n(&r->c.bytes_received, __ATOMIC_RELAXED);
    out->messages_sent = __atomic_load_n(&r->c.messages_sent, __ATOMIC_RELAXED);
    out->messages_received = __atomic_load_n(&r->c.messages_received, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&r->c.dropped, __ATOMIC_RELAXED);
}

void ring_destroy(Ring *r) {
    if (!r) return;
    if (r->pull) zmq_close(r->pull);
    if (r->push) zmq_close(r->push);
    r->pull = r->push = NULL;
    if (r->own_ctx && r->zctx) zmq_ctx_term(r->zctx); /* delivers what is queued (linger: the timeout) */
    else if (ring_drain_all(r, 2.0) != 0)
        log_warn("ring: ZeroMQ still holds data frames at shutdown (rank %d)", r->rank);
    free(r->pending);
    free(r);
}

/* ==== The "ring" back end ====================================================================
 *
 * Threads: the caller's (compute) thread owns every device call; the communication thread
 * only runs the ring on host memory, so it never touches CUDA (no context of its own, no
 * device binding to get wrong). On the CPU the gradient buffer is host memory and the ring
 * reduces it in place. On a GPU, bucket_ready copies the bucket device -> pinned staging
 * (a synchronous copy on the compute stream: it waits for backward up to this bucket), the
 * thread reduces the staging copy, and finish copies the whole buffer back before the
 * optimizer step. */

typedef struct {
    SyncJob job;
    Ring *ring;
    int on_host;             /* device memory is host memory: the ring works in place */
    float *stage;            /* pinned host mirror of the gradients (GPU runs), nparams floats */
    size_t stage_bytes;
    float *coll;             /* pinned staging for allreduce() on a GPU, grown on demand */
    size_t coll_bytes;
    /* the communication thread and its queue, guarded by mu */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* signalled on new work, on a finished bucket and on stop */
    int *queue;              /* bucket ids handed over this step, in order (nbuckets) */
    int handed, taken, done, stop;
    int err;                 /* first error of the step; later buckets are skipped */
    char errmsg[1024];
    double comm_s, idle_s;   /* this step's sums */
} RingState;

static void *ring_thread_main(void *arg) {
    RingState *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && s->taken == s->handed) pthread_cond_wait(&s->cv, &s->mu); /* idle: no peer involved */
        if (s->stop) break;
        int b = s->queue[s->taken++], skip = s->err != 0;
        pthread_mutex_unlock(&s->mu);
        const Bucket *bk = &s->job.buckets[b];
        float *base = s->on_host ? s->job.model->grads : s->stage;
        int rc = RS_OK;
        double t0 = clock_now(), w0 = clock_wall();
        if (!skip) rc = ring_allreduce(s->ring, base + bk->lo, bk->hi - bk->lo);
        double t1 = clock_now();
        if (!skip) trace_span(s->job.trace, "comm", 1, w0, w0 + (t1 - t0));
        pthread_mutex_lock(&s->mu);
        if (!skip) {
            s->comm_s += t1 - t0;
            if (s->taken == 1) s->idle_s = ring_last_wait(s->ring);
        }
        if (rc && !s->err) {
            s->err = rc;
            snprintf(s->errmsg, sizeof s->errmsg, "bucket %d: %s", b, rs_errmsg());
        }
        s->done++;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Pinned host memory counted under MEM_COMM; NULL with rs_errmsg() set. */
static float *ring_host_alloc(Device *dev, size_t bytes) {
    float *p = dev->ops->host_alloc(dev, bytes);
    if (p) mem_account(MEM_COMM, (long long)bytes);
    return p;
}

static void ring_host_free(Device *dev, float *p, size_t bytes) {
    if (!p) return;
    dev->ops->host_free(dev, p);
    mem_account(MEM_COMM, -(long long)bytes);
}

static void ring_sync_destroy(void *state) {
    RingState *s = state;
    if (!s) return;
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL); /* at most one ring wait (the timeout) when a peer died */
    }
    ring_destroy(s->ring); /* before the buffers: it waits for ZeroMQ to let go of them */
    if (s->job.dev) {
        ring_host_free(s->job.dev, s->stage, s->stage_bytes);
        ring_host_free(s->job.dev, s->coll, s->coll_bytes);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->queue);
    free(s);
}

/* Binds the data plane (world > 1) and allocates the staging mirror on a GPU. */
static int ring_sync_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    *state = NULL;
    if (len) endpoint[0] = 0;
    if (!job->dev) return rs_error(RS_ERR_INPUT, "ring: no device");
    RingState *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "ring: out of memory");
    s->job = *job;
    s->on_host = job->dev->kind == DEV_CPU;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = RS_OK;
    if (job->world > 1) {
        char canon[8192];
        config_canonical(job->cfg, canon, sizeof canon);
        uint64_t token = config_hash(job->token && *job->token ? job->token : canon);
        if ((rc = ring_create(&s->ring, job->zctx, job->rank, job->world, job->addr, token, job->timeout, endpoint, len)))
            goto err;
        if (job->model && job->nbuckets > 0) {
            s->queue = calloc((size_t)job->nbuckets, sizeof *s->queue);
            if (!s->queue) {
                rc = rs_error(RS_ERR_RUNTIME, "ring: out of memory");
                goto err;
            }
            if (!s->on_host) {
                s->stage_bytes = job->model->nparams * sizeof(float);
                if (!(s->stage = ring_host_alloc(job->dev, s->stage_bytes))) {
                    rc = rs_error(RS_ERR_RUNTIME, "ring: no pinned host memory for %zu bytes of gradients: %s",
                                  s->stage_bytes, rs_errmsg());
                    goto err;
                }
            }
        }
    }
    *state = s;
    return RS_OK;
err:
    ring_sync_destroy(s);
    return rc;
}

/* Connects to the right neighbour and starts the communication thread. */
static int ring_sync_connect(void *state, char *const *endpoints, int nmembers) {
    RingState *s = state;
    if (s->job.world == 1) return RS_OK;
    if (nmembers < s->job.world)
        return rs_error(RS_ERR_INPUT, "ring: %d endpoints for %d ranks", nmembers, s->job.world);
    RS_TRY(ring_connect(s->ring, endpoints));
    if (s->queue && !s->started) {
        if (pthread_create(&s->thread, NULL, ring_thread_main, s) != 0)
            return rs_error(RS_ERR_RUNTIME, "ring: cannot start the communication thread");
        s->started = 1;
    }
    return RS_OK;
}

/* The caller may use the ring itself only while the thread holds no bucket. */
static int ring_sync_idle(RingState *s, const char *what) {
    pthread_mutex_lock(&s->mu);
    int busy = s->handed != 0;
    pthread_mutex_unlock(&s->mu);
    if (busy) return rs_error(RS_ERR_RUNTIME, "ring: %s during a step (buckets handed over, finish not called)", what);
    return RS_OK;
}

/* Rank 0's parameters to every rank; the others' momentum zeroed. */
static int ring_sync_broadcast(void *state) {
    RingState *s = state;
    Model *m = s->job.model;
    if (s->job.world == 1 || !m) return RS_OK;
    RS_TRY(ring_sync_idle(s, "broadcast_params"));
    size_t bytes = m->nparams * sizeof(float);
    if (s->on_host) {
        RS_TRY(ring_broadcast(s->ring, m->params, m->nparams));
    } else {
        if (s->job.rank == 0) RS_TRY(device_d2h(m->dev, s->stage, m->params, bytes));
        RS_TRY(ring_broadcast(s->ring, s->stage, m->nparams));
        if (s->job.rank != 0) RS_TRY(device_h2d(m->dev, m->params, s->stage, bytes));
    }
    if (s->job.rank != 0) m->dev->k->fill(m->dev->kctx, m->mom, 0.0f, m->nparams);
    return m->dev->k->sync(m->dev->kctx);
}

/* Hands bucket b (in order 0, 1, ...) to the communication thread, staged to host first on a GPU. */
static int ring_sync_bucket_ready(void *state, int b) {
    RingState *s = state;
    if (s->job.world == 1) return RS_OK;
    if (!s->queue) return rs_error(RS_ERR_INPUT, "ring: bucket_ready without a model and buckets");
    if (b != s->handed || b >= s->job.nbuckets)
        return rs_error(RS_ERR_RUNTIME, "ring: bucket %d handed over out of order (expected %d of %d)", b, s->handed,
                        s->job.nbuckets);
    const Bucket *bk = &s->job.buckets[b];
    if (!s->on_host) {
        Model *m = s->job.model;
        RS_TRY(device_d2h(m->dev, s->stage + bk->lo, m->grads + bk->lo, (bk->hi - bk->lo) * sizeof(float)));
    }
    pthread_mutex_lock(&s->mu);
    s->queue[s->handed++] = b;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return RS_OK;
}

/* Waits for every bucket of the step (bounded: the ring's own waits time out first; this
 * guard ends the wait after 2 timeouts without a received message or finished bucket). */
static int ring_sync_wait_step(RingState *s) {
    int rc = RS_OK, last_done = -1;
    unsigned long long last_msgs = 0;
    double last = clock_now(), limit = 2 * s->job.timeout + 5;
    pthread_mutex_lock(&s->mu);
    while (s->done < s->handed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        unsigned long long msgs = ring_progress(s->ring);
        if (msgs != last_msgs || s->done != last_done) {
            last_msgs = msgs;
            last_done = s->done;
            last = clock_now();
        } else if (clock_now() - last > limit) {
            rc = rs_error(RS_ERR_PEER, "ring: step stalled: no data for %.0f s with %d of %d buckets reduced", limit,
                          s->done, s->handed);
            break;
        }
    }
    if (rc == RS_OK && s->err) rc = rs_error(s->err, "%s", s->errmsg);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int ring_sync_finish(void *state, int step, int global_samples, SyncStep *out) {
    RingState *s = state;
    Model *m = s->job.model;
    *out = (SyncStep){0};
    if (s->job.world > 1) {
        if (!s->queue) return rs_error(RS_ERR_INPUT, "ring: finish without a model and buckets");
        if (s->handed != s->job.nbuckets)
            return rs_error(RS_ERR_RUNTIME, "ring: step %d finished with %d of %d buckets handed over", step, s->handed,
                            s->job.nbuckets);
        RS_TRY(ring_sync_wait_step(s));
        pthread_mutex_lock(&s->mu);
        out->comm_s = s->comm_s;
        out->idle_s = s->idle_s;
        s->handed = s->taken = s->done = 0;
        s->comm_s = s->idle_s = 0;
        pthread_mutex_unlock(&s->mu);
        if (!s->on_host) RS_TRY(device_h2d(m->dev, m->grads, s->stage, s->stage_bytes));
    }
    if (!m) return RS_OK;
    double t0 = clock_now();
    model_sgd(m, 0, m->nparams, s->job.cfg, global_samples > 0 ? 1.0f / (float)global_samples : 0.0f);
    int rc = m->dev->k->sync(m->dev->kctx);
    out->optimizer_s = clock_now() - t0;
    return rc;
}

/* Synchronous in-place sum of a device buffer, staged through pinned host memory on a GPU. */
static int ring_sync_allreduce(void *state, float *buf, size_t count) {
    RingState *s = state;
    if (s->job.world == 1) return RS_OK;
    RS_TRY(ring_sync_idle(s, "allreduce"));
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

static void ring_sync_traffic(void *state, SyncTraffic *out) {
    RingState *s = state;
    RingCounters c = {0};
    if (s && s->ring) ring_counters(s->ring, &c);
    out->bytes_sent = c.bytes_sent;
    out->bytes_received = c.bytes_received;
    out->messages_sent = c.messages_sent;
    out->messages_received = c.messages_received;
    out->dropped = c.dropped;
}

static const SyncOps ring_ops = {
    .name = "ring",
    .init = ring_sync_init,
    .connect = ring_sync_connect,
    .broadcast_params = ring_sync_broadcast,
    .bucket_ready = ring_sync_bucket_ready,
    .finish = ring_sync_finish,
    .allreduce = ring_sync_allreduce,
    .traffic = ring_sync_traffic,
    .destroy = ring_sync_destroy,
};

/* The "ring" back end (never NULL: it needs only ZeroMQ and the host). */
const SyncOps *sync_ring(void) { return &ring_ops; }
