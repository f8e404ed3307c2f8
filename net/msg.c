/* msg.c - the data plane's message layer (net/msg.h): framing, zero-copy lending, the emulated link, traffic counts */
#include "msg.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../base/clock.h"
#include "../base/tsan.h"
#include "link.h"
#include "msgdirect.h"
#include "zframe.h"

/* ---- Helpers ---- */

static void msg_add(unsigned long long *ctr, unsigned long long n) { __atomic_add_fetch(ctr, n, __ATOMIC_RELAXED); }

/* ZeroMQ's free function for a lent payload: counts it down and wakes the owner at zero. */
void msg_lend_release(MsgLend *lend) {
    if (__atomic_sub_fetch(&lend->out, 1, __ATOMIC_ACQ_REL) == 0 && lend->wake) lend->wake(lend->arg);
}

static void msg_release(void *data, void *hint) {
    (void)data;
    msg_lend_release(hint);
}

/* The payload frame of m, initialised: lent, copied or encoded. 0 or -1 (zmq_errno()). */
static int msg_payload_frame(const MsgOut *m, zmq_msg_t *f) {
    if (m->codec) {
        size_t bytes = m->count ? codec_bytes(m->codec->type, m->count) : 0;
        if (zmq_msg_init_size(f, bytes) != 0) return -1;
        if (bytes) codec_encode(m->codec, m->src, zmq_msg_data(f), m->count);
        return 0;
    }
    if (m->lend && m->bytes >= MSG_ZEROCOPY_MIN && !m->tail_bytes) {
        __atomic_add_fetch(&m->lend->out, 1, __ATOMIC_RELAXED);
        if (zmq_msg_init_data(f, (void *)m->payload, m->bytes, msg_release, m->lend) != 0) {
            int e = zmq_errno();
            __atomic_sub_fetch(&m->lend->out, 1, __ATOMIC_RELAXED);
            errno = e;
            return -1;
        }
        return 0;
    }
    if (zmq_msg_init_size(f, m->bytes + m->tail_bytes) != 0) return -1;
    if (m->bytes) memcpy(zmq_msg_data(f), m->payload, m->bytes);
    if (m->tail_bytes) memcpy((char *)zmq_msg_data(f) + m->bytes, m->tail, m->tail_bytes);
    return 0;
}

/* ---- Sending ---- */

int msg_send(void *sock, const MsgOut *m, MsgCount *c, double *start) {
    int has_payload = m->codec || m->payload;
    size_t bytes = m->codec ? (m->count ? codec_bytes(m->codec->type, m->count) : 0) : m->payload ? m->bytes + m->tail_bytes : 0;
    double stamp = m->local ? 0 : link_send(m->head_bytes + bytes, m->node); /* the emulated interface (--link) */
    int last = stamp > 0 ? ZMQ_SNDMORE : 0;
    unsigned char sb[LINK_STAMP_BYTES];
    if (start) *start = stamp;
    if (stamp > 0) link_stamp_encode(stamp, sb);
    if (msgd_is(sock)) {
        if (msgd_send(sock, m, stamp > 0 ? sb : NULL, stamp > 0 ? sizeof sb : 0) != 0) return -1;
        if (!m->local && c) msg_count_sent(c, m->head_bytes + bytes, m->node);
        return 0;
    }
    if (m->id && zmq_send(sock, m->id, m->idlen, ZMQ_SNDMORE) < 0) return -1;
    if (zmq_send(sock, m->head, m->head_bytes, has_payload ? ZMQ_SNDMORE : last) < 0) return -1;
    if (has_payload) {
        zmq_msg_t f;
        if (msg_payload_frame(m, &f) != 0) return -1;
        tsan_release(zmq_msg_data(&f)); /* over inproc the receiver reads these very bytes */
        if (zmq_msg_send(&f, sock, last) < 0) {
            int e = zmq_errno();
            zmq_msg_close(&f); /* lets a lent payload go (msg_release) */
            errno = e;
            return -1;
        }
    }
    if (stamp > 0 && zmq_send(sock, sb, sizeof sb, 0) < 0) return -1; /* emulation metadata: a frame of its own, not counted */
    if (!m->local && c) {
        msg_count_sent(c, m->head_bytes + bytes, m->node);
    }
    return 0;
}

/* ---- Receiving ---- */

int msg_recv(void *sock, MsgIn *m, int flags, int with_id) {
    m->n = 0;
    m->extra = 0;
    m->stamp = 0;
    m->with_id = with_id;
    int more = 1, direct = msgd_is(sock);
    while (more) {
        zmq_msg_t spare, *p = m->n < 3 ? &m->part[m->n].z : &spare;
        zmq_msg_init(p);
        int f = m->n == 0 && !m->extra ? flags : 0;
        if (direct ? msgd_frame(sock, p, f, &more) < 0 : zframe_recv(p, sock, f) < 0) {
            int e = zmq_errno();
            zframe_close(p);
            for (int i = 0; i < m->n; i++) zframe_close(&m->part[i].z);
            m->n = 0;
            errno = e;
            return -1;
        }
        if (!direct) more = zmq_msg_more(p);
        tsan_acquire(zmq_msg_data(p));
        if (p == &spare) { /* a fourth frame: the stamp when it is the last, else a stray's */
            if (more || m->extra || !link_stamp_decode(zmq_msg_data(p), zmq_msg_size(p), &m->stamp)) m->extra++;
            zframe_close(p);
        } else {
            m->n++;
        }
    }
    /* under --link every message ends in its stamp: take it off where the frames were fewer */
    if (!m->extra && m->n > 1 + with_id && link_on() && m->stamp == 0 &&
        link_stamp_decode(msg_frame_data(&m->part[m->n - 1]), msg_frame_size(&m->part[m->n - 1]), &m->stamp))
        msg_frame_close(&m->part[--m->n]);
    return m->n + m->extra;
}

int msg_wait(void *sock, double deadline) {
    if (msgd_is(sock)) {
        int rc = msgd_poll_until(&sock, 1, deadline, NULL);
        return rc < 0 ? -1 : rc > 0;
    }
    for (;;) { /* zmq_poll counts whole milliseconds: the whole ones there, the rest in short sleeps */
        double left = deadline - clock_now();
        if (left <= 0) return 0;
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        long ms = (long)(left * 1000.0);
        int rc = zmq_poll(&it, 1, ms);
        if (rc > 0) return 1;
        if (rc < 0 && zmq_errno() != EINTR) return -1;
        if (ms == 0) { /* under a millisecond left (a booked arrival under --link): look every 50 us */
            double nap = left < MSG_WAIT_NAP_S ? left : MSG_WAIT_NAP_S;
            struct timespec ts = {0, (long)(nap * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}

int msg_poll(void *const *socks, int n, long wait_ms, unsigned char *ready) {
    for (int i = 0; i < n && i < 64; i++)
        if (msgd_is(socks[i])) return msgd_poll(socks, n, wait_ms, ready);
    zmq_pollitem_t items[64];
    int k = n < 64 ? n : 64;
    for (int i = 0; i < k; i++) items[i] = (zmq_pollitem_t){socks[i], 0, ZMQ_POLLIN, 0};
    int rc = zmq_poll(items, k, wait_ms);
    if (rc < 0) return zmq_errno() == EINTR ? 0 : -1;
    if (ready)
        for (int i = 0; i < n; i++) ready[i] = i >= 64 || (items[i].revents & ZMQ_POLLIN) != 0;
    return rc + (n > 64 ? n - 64 : 0);
}

int msg_bound(void *sock, size_t max_frame) {
    if (msgd_is(sock)) return msgd_bound(sock, max_frame);
    int64_t most = max_frame ? (int64_t)max_frame : -1;
    return zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &most, sizeof most);
}

double msg_backlog(void) { return link_backlog(); }

void msg_wait_until(double t) { link_wait_until(t); }

/* Frame i of m (the identity counted), or NULL and 0 when m has fewer. */
static const void *msg_part(const MsgIn *m, int i, size_t *bytes) {
    if (m->n <= i) {
        *bytes = 0;
        return NULL;
    }
    *bytes = msg_frame_size(&m->part[i]);
    return msg_frame_data(&m->part[i]);
}

const void *msg_id(const MsgIn *m, size_t *bytes) {
    if (m->with_id) return msg_part(m, 0, bytes);
    *bytes = 0;
    return NULL;
}

const void *msg_head(const MsgIn *m, size_t *bytes) { return msg_part(m, m->with_id ? 1 : 0, bytes); }

const void *msg_payload(const MsgIn *m, size_t *bytes) { return msg_part(m, m->with_id ? 2 : 1, bytes); }

size_t msg_bytes(const MsgIn *m) {
    size_t h, p;
    msg_head(m, &h);
    msg_payload(m, &p);
    return h + p;
}

double msg_accept(const MsgIn *m, int local, int node, int book_only, MsgCount *c) {
    return msg_take(msg_bytes(m), m->stamp, local, node, book_only, c);
}

double msg_take(size_t bytes, double stamp, int local, int node, int book_only, MsgCount *c) {
    if (local) return 0;
    if (c) msg_count_received(c, bytes, node);
    if (book_only) return link_recv_book(bytes, stamp, node);
    link_recv(bytes, stamp, node);
    return 0;
}

void msg_drop(MsgIn *m, MsgCount *c) {
    if (c) msg_count_dropped(c);
    msg_close(m);
}

void msg_count_dropped(MsgCount *c) { msg_add(&c->dropped, 1); }

void msg_close(MsgIn *m) {
    for (int i = 0; i < m->n; i++) zframe_close(&m->part[i].z);
    m->n = 0;
}

void msg_move(MsgIn *dst, MsgIn *src) {
    *dst = (MsgIn){.n = src->n, .extra = src->extra, .with_id = src->with_id, .stamp = src->stamp};
    for (int i = 0; i < src->n; i++) {
        msg_frame_init(&dst->part[i]);
        msg_frame_move(&dst->part[i], &src->part[i]);
    }
    src->n = 0;
}

/* ---- Frames ---- */

void msg_frame_init(MsgFrame *f) { zmq_msg_init(&f->z); }

void msg_frame_take(MsgIn *m, MsgFrame *f) {
    int i = m->with_id ? 2 : 1;
    if (m->n > i) msg_frame_move(f, &m->part[i]);
}

void msg_frame_move(MsgFrame *dst, MsgFrame *src) { zmq_msg_move(&dst->z, &src->z); }

const void *msg_frame_data(const MsgFrame *f) { return zmq_msg_data((zmq_msg_t *)&f->z); }

size_t msg_frame_size(const MsgFrame *f) { return zmq_msg_size(&f->z); }

void msg_frame_close(MsgFrame *f) {
    zframe_close(&f->z);
    zmq_msg_init(&f->z);
}

/* ---- Counting ---- */

void msg_count_sent(MsgCount *c, size_t bytes, int node) {
    msg_add(&c->bytes_sent, bytes);
    msg_add(&c->messages_sent, 1);
    if (node) msg_add(&c->node_sent, bytes);
}

void msg_count_received(MsgCount *c, size_t bytes, int node) {
    msg_add(&c->bytes_received, bytes);
    msg_add(&c->messages_received, 1);
    if (node) msg_add(&c->node_received, bytes);
}

void msg_count_read(const MsgCount *c, MsgCount *out) {
    out->bytes_sent = __atomic_load_n(&c->bytes_sent, __ATOMIC_RELAXED);
    out->bytes_received = __atomic_load_n(&c->bytes_received, __ATOMIC_RELAXED);
    out->messages_sent = __atomic_load_n(&c->messages_sent, __ATOMIC_RELAXED);
    out->messages_received = __atomic_load_n(&c->messages_received, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&c->dropped, __ATOMIC_RELAXED);
    out->node_sent = __atomic_load_n(&c->node_sent, __ATOMIC_RELAXED);
    out->node_received = __atomic_load_n(&c->node_received, __ATOMIC_RELAXED);
}

long msg_lent(const MsgLend *lend) { return __atomic_load_n(&lend->out, __ATOMIC_ACQUIRE); }

void msg_lend_reclaim(MsgLend *lend) { msgd_reclaim(lend); }

int msg_lend_drain(MsgLend *lend, double seconds) {
    msg_lend_reclaim(lend);
    for (double t = 0; msg_lent(lend) > 0; t += 0.001) {
        if (t > seconds) return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 1;
}
