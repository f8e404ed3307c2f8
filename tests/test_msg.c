/* test_msg.c - the message layer's direct sockets (--msg-layer direct) keep the layer's rules: frames whole and in order, a send that never waits, the ROUTER's identities, the job token, the frame bound, linger */
#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../base/mem.h"
#include "../net/gate.h"
#include "../net/msg.h"
#include "../net/msgdirect.h"
#include "test.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BIG (6u * 1024u * 1024u) /* more than loopback's socket buffers take at once */

static int serial;

static long long comm_now(void) {
    MemStats st;
    mem_snapshot(&st);
    return (long long)st.cur[MEM_COMM];
}

static void endpoint(char *ep, size_t len, const char *kind) {
    if (!strcmp(kind, "tcp")) snprintf(ep, len, "tcp://127.0.0.1:*");
    else if (!strcmp(kind, "ipc")) snprintf(ep, len, "ipc://@ringside-test-msg-%ld-%d", (long)getpid(), ++serial);
    else snprintf(ep, len, "inproc://test-msg-%d", ++serial);
}

/* A bound PULL and a PUSH connected to it, direct, on kind's endpoint. */
static int pair(void *z, const char *kind, size_t max_frame, void **pull, void **push) {
    MsgSocketSpec ps = {.type = ZMQ_PULL, .binds = 1, .max_frame = max_frame, .rcv_queue = 64};
    MsgSocketSpec qs = {.type = ZMQ_PUSH, .user = "test", .linger_ms = 2000};
    char ep[128], got[128];
    endpoint(ep, sizeof ep, kind);
    if (msg_socket(z, &ps, pull) || msg_socket(z, &qs, push)) return -1;
    if (msg_bind(*pull, ep, got, sizeof got) != 0) return -1;
    return msg_connect(*push, got);
}

/* Waits up to 5 s for a message on sock: its frame count, or -1. */
static int recv_within(void *sock, MsgIn *in, int with_id) {
    double until = clock_now() + 5;
    for (;;) {
        if (msg_recv(sock, in, ZMQ_DONTWAIT, with_id) >= 0) return in->n + in->extra;
        if (msg_errno() != EAGAIN || msg_wait(sock, until) <= 0) return -1;
    }
}

/* Every message arrives whole and in order, header and payload, raw, with a tail and encoded,
 * over TCP, a Unix socket and inproc; the counts are the layer's rule (header + payload). */
static void test_frames_in_order(void) {
    const char *kinds[3] = {"tcp", "ipc", "inproc"};
    msg_layer_set(MSG_DIRECT);
    for (int k = 0; k < 3; k++) {
        void *z = msg_context(), *pull = NULL, *push = NULL;
        CHECK_MSG(pair(z, kinds[k], 0, &pull, &push) == 0, "%s", kinds[k]);
        MsgCount sent = {0}, got = {0};
        float src[300], dst[300];
        for (int i = 0; i < 300; i++) src[i] = (float)i * 0.5f;
        Codec bf = codec_from_options("bf16", 8);
        for (int i = 0; i < 200; i++) {
            uint32_t h = (uint32_t)i;
            MsgOut m = {.head = &h, .head_bytes = sizeof h};
            if (i % 3 == 1) m.payload = src, m.bytes = (size_t)(i % 250) * sizeof(float), m.tail = &h, m.tail_bytes = sizeof h;
            if (i % 3 == 2) m.codec = &bf, m.src = src, m.count = 300;
            CHECK(msg_send(push, &m, &sent, NULL) == 0);
        }
        int bad = 0;
        for (int i = 0; i < 200; i++) {
            MsgIn in;
            int n = recv_within(pull, &in, 0);
            size_t hb, pb;
            const uint32_t *h = msg_head(&in, &hb);
            const unsigned char *p = msg_payload(&in, &pb);
            if (n < 1 || hb != 4 || *h != (uint32_t)i) bad++;
            else if (i % 3 == 0 && n != 1) bad++;
            else if (i % 3 == 1 && (pb != (size_t)(i % 250) * 4 + 4 || memcmp(p, src, pb - 4) || memcmp(p + pb - 4, h, 4))) bad++;
            else if (i % 3 == 2) {
                codec_decode(&bf, p, dst, 300);
                if (pb != 600 || dst[7] != 3.5f) bad++;
            }
            if (n >= 1) msg_accept(&in, 0, 0, 0, &got);
            msg_close(&in);
        }
        CHECK_MSG(bad == 0, "%s: %d of 200 messages wrong", kinds[k], bad);
        CHECK(sent.messages_sent == 200 && got.messages_received == 200 && sent.bytes_sent == got.bytes_received);
        msg_close_socket(push, 0);
        msg_close_socket(pull, 0);
        msg_context_end(z);
    }
    msg_layer_set(MSG_ZEROMQ);
}

static void woke(void *arg) { __atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED); }

/* Two ranks that send each other more than the kernel holds before either reads (the ring's
 * every step) do not deadlock: a send never waits, the writer finishes it; and a lent payload is
 * let go before anyone reads (the ring waits for its lends before it receives, and so does its
 * peer: held until read, the two would wait for each other, as they did over Unix sockets). */
static void test_send_never_waits(void) {
    msg_layer_set(MSG_DIRECT);
    void *z = msg_context(), *pa, *qa, *pb, *qb;
    CHECK(pair(z, "ipc", 0, &pa, &qa) == 0 && pair(z, "ipc", 0, &pb, &qb) == 0);
    unsigned char *x = malloc(BIG), *y = malloc(BIG);
    for (size_t i = 0; i < BIG; i++) x[i] = (unsigned char)(i * 7), y[i] = (unsigned char)(i * 13);
    int wakes = 0;
    MsgLend lend = {.wake = woke, .arg = &wakes};
    uint32_t h = 1;
    MsgOut a = {.head = &h, .head_bytes = 4, .payload = x, .bytes = BIG, .lend = &lend};
    MsgLend lend_b = {0};
    MsgOut b = {.head = &h, .head_bytes = 4, .payload = y, .bytes = BIG, .lend = &lend_b};
    double t0 = clock_now();
    CHECK(msg_send(qa, &a, NULL, NULL) == 0);
    CHECK(msg_send(qb, &b, NULL, NULL) == 0);
    CHECK_MSG(clock_now() - t0 < 5, "the sends waited %.1f s", clock_now() - t0);
    CHECK(msg_lend_drain(&lend, 2) == 1 && msg_lend_drain(&lend_b, 2) == 1); /* before any read */
    memset(x, 0, 4096); /* the owner may change a payload once let go: what was sent is what arrives */
    MsgIn ia, ib;
    CHECK(recv_within(pa, &ia, 0) == 2 && recv_within(pb, &ib, 0) == 2);
    size_t na, nb;
    const void *da = msg_payload(&ia, &na), *db = msg_payload(&ib, &nb);
    CHECK(na == BIG && nb == BIG && !memcmp((const char *)da + 4096, x + 4096, BIG - 4096) && !memcmp(db, y, BIG));
    CHECK(((const unsigned char *)da)[1] == 7); /* x[1] as sent (1 * 7), not the 0 written after */
    CHECK(comm_now() >= 2 * (long long)BIG); /* held frames count as communication memory */
    msg_close(&ia);
    msg_close(&ib);
    CHECK(msg_lent(&lend) == 0 && msg_lent(&lend_b) == 0);
    free(x);
    free(y);
    msg_close_socket(qa, 0);
    msg_close_socket(qb, 0);
    msg_close_socket(pa, 0);
    msg_close_socket(pb, 0);
    msg_context_end(z);
    msg_layer_set(MSG_ZEROMQ);
}

/* A ROUTER hands its receiver each DEALER's identity (or ZeroMQ's 0 + 4 bytes for one without)
 * and routes a reply by it; with ROUTER_MANDATORY a send to an identity not connected fails
 * EHOSTUNREACH. */
static void test_router_identities(void) {
    msg_layer_set(MSG_DIRECT);
    void *z = msg_context(), *r, *d1, *d2;
    MsgSocketSpec rs = {.type = ZMQ_ROUTER, .binds = 1, .rcv_queue = 64, .mandatory = 1};
    MsgSocketSpec ds1 = {.type = ZMQ_DEALER, .rcv_queue = 64, .id = "w1", .idlen = 2};
    MsgSocketSpec ds2 = {.type = ZMQ_DEALER, .rcv_queue = 64};
    char got[128];
    CHECK(msg_socket(z, &rs, &r) == 0 && msg_socket(z, &ds1, &d1) == 0 && msg_socket(z, &ds2, &d2) == 0);
    CHECK(msg_bind(r, "tcp://127.0.0.1:*", got, sizeof got) == 0);
    CHECK(msg_connect(d1, got) == 0 && msg_connect(d2, got) == 0);
    uint32_t h1 = 11, h2 = 22;
    MsgOut m1 = {.head = &h1, .head_bytes = 4}, m2 = {.head = &h2, .head_bytes = 4};
    CHECK(msg_send(d1, &m1, NULL, NULL) == 0 && msg_send(d2, &m2, NULL, NULL) == 0);
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        MsgIn in;
        CHECK(recv_within(r, &in, 1) == 2);
        size_t il, hl;
        const unsigned char *id = msg_id(&in, &il);
        const uint32_t *h = msg_head(&in, &hl);
        if (hl == 4 && *h == 11 && il == 2 && !memcmp(id, "w1", 2)) seen |= 1;
        if (hl == 4 && *h == 22 && il == 5 && id[0] == 0) seen |= 2;
        uint32_t back = *h + 1;
        MsgOut rep = {.id = id, .idlen = il, .head = &back, .head_bytes = 4};
        CHECK(msg_send(r, &rep, NULL, NULL) == 0);
        msg_close(&in);
    }
    CHECK_MSG(seen == 3, "identities seen: %d", seen);
    MsgIn a, b;
    size_t hl;
    CHECK(recv_within(d1, &a, 0) == 1 && *(const uint32_t *)msg_head(&a, &hl) == 12);
    CHECK(recv_within(d2, &b, 0) == 1 && *(const uint32_t *)msg_head(&b, &hl) == 23);
    msg_close(&a);
    msg_close(&b);
    MsgOut nobody = {.id = "zz", .idlen = 2, .head = &h1, .head_bytes = 4};
    CHECK(msg_send(r, &nobody, NULL, NULL) == -1 && msg_errno() == EHOSTUNREACH);
    msg_close_socket(d1, 0);
    msg_close_socket(d2, 0);
    msg_close_socket(r, 0);
    msg_context_end(z);
    msg_layer_set(MSG_ZEROMQ);
}

/* Behind a gate, a peer without the job's token is refused (counted, its message never read);
 * a frame over the bound ends its sender's connection; a good peer's messages still come. */
static void test_token_and_bound(void) {
    msg_layer_set(MSG_DIRECT);
    void *z = msg_context(), *other = msg_context(), *pull, *good, *bad, *big;
    CHECK(gate_open(z, "feedbeef") == RS_OK && gate_open(other, "0badc0de") == RS_OK);
    MsgSocketSpec ps = {.type = ZMQ_PULL, .binds = 1, .max_frame = 1024, .rcv_queue = 64};
    MsgSocketSpec qs = {.type = ZMQ_PUSH, .user = "test", .linger_ms = 1000};
    char got[128];
    CHECK(msg_socket(z, &ps, &pull) == 0 && msg_bind(pull, "tcp://127.0.0.1:*", got, sizeof got) == 0);
    CHECK(msg_socket(z, &qs, &good) == 0 && msg_socket(other, &qs, &bad) == 0 && msg_socket(z, &qs, &big) == 0);
    CHECK(msg_connect(bad, got) == 0 && msg_connect(big, got) == 0 && msg_connect(good, got) == 0);
    static unsigned char blob[2048];
    uint32_t h = 7;
    MsgOut m = {.head = &h, .head_bytes = 4};
    MsgOut large = {.head = &h, .head_bytes = 4, .payload = blob, .bytes = sizeof blob};
    CHECK(msg_send(bad, &m, NULL, NULL) == 0 && msg_send(big, &large, NULL, NULL) == 0);
    h = 8;
    CHECK(msg_send(good, &m, NULL, NULL) == 0);
    MsgIn in;
    size_t hl;
    CHECK(recv_within(pull, &in, 0) == 1 && *(const uint32_t *)msg_head(&in, &hl) == 8);
    msg_close(&in);
    double until = clock_now() + 0.3;
    CHECK(msg_wait(pull, until) == 0); /* nothing else ever comes */
    char from[160];
    CHECK(gate_refused(z, GATE_DATA, from, sizeof from) == 1);
    msg_close_socket(good, 0);
    msg_close_socket(bad, 1);
    msg_close_socket(big, 1);
    msg_close_socket(pull, 0);
    gate_close(z);
    gate_close(other);
    msg_context_end(z);
    msg_context_end(other);
    msg_layer_set(MSG_ZEROMQ);
}

/* Closing a socket with a queue still delivers it within its linger; msg_poll watches direct and
 * ZeroMQ sockets together; frames held count under MEM_COMM until closed. */
static void test_linger_and_poll(void) {
    long long comm0 = comm_now();
    void *z = msg_context(), *zpull, *zpush;
    msg_layer_set(MSG_ZEROMQ);
    CHECK(pair(z, "ipc", 0, &zpull, &zpush) == 0);
    msg_layer_set(MSG_DIRECT);
    void *pull, *push;
    CHECK(pair(z, "ipc", 0, &pull, &push) == 0);
    CHECK(!msgd_is(zpull) && msgd_is(pull));
    unsigned char *x = malloc(BIG);
    memset(x, 3, BIG);
    uint32_t h = 5;
    MsgOut m = {.head = &h, .head_bytes = 4, .payload = x, .bytes = BIG};
    CHECK(msg_send(push, &m, NULL, NULL) == 0);
    msg_close_socket(push, 0); /* lingers: the rest still goes */
    free(x);
    void *both[2] = {zpull, pull};
    unsigned char ready[2] = {9, 9};
    CHECK(msg_poll(both, 2, 5000, ready) >= 1 || msg_poll(both, 2, 5000, ready) >= 1);
    CHECK(ready[0] == 0);
    MsgIn in;
    CHECK(recv_within(pull, &in, 0) == 2);
    size_t pb;
    const unsigned char *p = msg_payload(&in, &pb);
    CHECK(pb == BIG && p[BIG - 1] == 3);
    msg_close(&in);
    MsgOut small = {.head = &h, .head_bytes = 4};
    CHECK(msg_send(zpush, &small, NULL, NULL) == 0);
    CHECK(msg_poll(both, 2, 5000, ready) == 1 && ready[0] == 1 && ready[1] == 0);
    CHECK(recv_within(zpull, &in, 0) == 1);
    msg_close(&in);
    CHECK(comm_now() == comm0);
    msg_close_socket(pull, 0);
    msg_close_socket(zpull, 0);
    msg_close_socket(zpush, 0);
    msg_context_end(z);
    msg_layer_set(MSG_ZEROMQ);
}

/* A lent payload the kernel cannot take at once is held, not copied, until the writer has written
 * it (the peer reading lets it go, with one wake, no drain asked); msg_lend_reclaim lets it go at
 * once, the rest copied, so the owner may change its buffer and the peer still gets what was sent. */
static void test_lend_held(void) {
    enum { HUGE = 32u << 20 }; /* past any socket buffer (4 MiB asked, doubled by the kernel) */
    msg_layer_set(MSG_DIRECT);
    void *z = msg_context(), *pull, *push;
    CHECK(pair(z, "ipc", 0, &pull, &push) == 0);
    unsigned char *x = malloc(HUGE);
    for (size_t i = 0; i < HUGE; i++) x[i] = (unsigned char)(i * 11);
    int wakes = 0;
    MsgLend lend = {.wake = woke, .arg = &wakes};
    uint32_t h = 2;
    MsgOut m = {.head = &h, .head_bytes = 4, .payload = x, .bytes = HUGE, .lend = &lend};
    CHECK(msg_send(push, &m, NULL, NULL) == 0);
    CHECK_MSG(msg_lent(&lend) == 1, "a 32 MiB lent payload not held after its send (lent %ld)", msg_lent(&lend));
    MsgIn in;
    CHECK(recv_within(pull, &in, 0) == 2);
    size_t n;
    const unsigned char *p = msg_payload(&in, &n);
    CHECK(n == HUGE && !memcmp(p, x, HUGE));
    msg_close(&in);
    for (double t = clock_now() + 5; msg_lent(&lend) > 0 && clock_now() < t;) sched_yield();
    CHECK(msg_lent(&lend) == 0 && __atomic_load_n(&wakes, __ATOMIC_RELAXED) == 1); /* the writer let it go */
    CHECK(msg_send(push, &m, NULL, NULL) == 0);
    msg_lend_reclaim(&lend);
    CHECK(msg_lent(&lend) == 0 && __atomic_load_n(&wakes, __ATOMIC_RELAXED) == 2);
    unsigned char first = x[HUGE - 1];
    memset(x, 0, HUGE); /* let go: the owner may change it */
    CHECK(recv_within(pull, &in, 0) == 2);
    p = msg_payload(&in, &n);
    CHECK(n == HUGE && p[HUGE - 1] == first && p[1] == 11);
    msg_close(&in);
    free(x);
    msg_close_socket(pull, 0);
    msg_close_socket(push, 0);
    msg_context_end(z);
    msg_layer_set(MSG_ZEROMQ);
}

/* The direct layer's spin is bounded: a receive that waits half a second for nothing spins its
 * MSGD_SPIN_US, then sleeps in ppoll, so the waiting thread uses a few milliseconds of CPU at most
 * (an unbounded spin would use most of the half second, even on a loaded machine). */
static void test_spin_bounded(void) {
    void *z = msg_context(), *pull, *push;
    msg_layer_set(MSG_DIRECT);
    CHECK(pair(z, "ipc", 0, &pull, &push) == 0);
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    double t0 = clock_now();
    void *one[1] = {pull};
    CHECK(msg_poll(one, 1, 500, NULL) == 0);
    double waited = clock_now() - t0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    CHECK_MSG(waited >= 0.45, "the poll returned after %.3f s of a 0.5 s wait", waited);
    CHECK_MSG(cpu < 0.05, "waiting %.3f s for nothing took %.3f s of CPU: the spin is not bounded", waited, cpu);
    msg_close_socket(pull, 0);
    msg_close_socket(push, 0);
    msg_context_end(z);
    msg_layer_set(MSG_ZEROMQ);
}

/* --msg-layer's words. */
static void test_layer_names(void) {
    MsgLayer l;
    CHECK(msg_layer_parse("direct", &l) == 0 && l == MSG_DIRECT);
    CHECK(msg_layer_parse("zeromq", &l) == 0 && l == MSG_ZEROMQ);
    CHECK(msg_layer_parse("pigeon", &l) == RS_ERR_INPUT && strstr(rs_errmsg(), "pigeon"));
    msg_layer_set(MSG_DIRECT);
    CHECK(msg_layer_get() == MSG_DIRECT);
    msg_layer_set(MSG_ZEROMQ);
}

int main(void) {
    RUN(test_layer_names);
    RUN(test_frames_in_order);
    RUN(test_send_never_waits);
    RUN(test_router_identities);
    RUN(test_token_and_bound);
    RUN(test_linger_and_poll);
    RUN(test_spin_bounded);
    RUN(test_lend_held);
    return test_summary("test_msg");
}
