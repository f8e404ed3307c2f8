/* msgdirect.c - direct sockets (net/msgdirect.h): plain TCP and Unix streams the caller's thread writes and reads, one writer thread for what the kernel cannot take at once */
#define _GNU_SOURCE
#include "msgdirect.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "gate.h"
#include "secure.h"

/* ---- Types ---- */

#define MSGD_FRAMES 8              /* frames of a message kept; beyond them counted as extra */
#define MSGD_INBUF (32u * 1024u)   /* a connection's read buffer */
#define MSGD_DIRECT_READ 8192u     /* a frame's rest this large is read straight into the frame */
#define MSGD_HELLO_MAX 1024u
#define MSGD_LISTEN_MAX 4
#define MSGD_CONNECT_S 10.0        /* a connect retries a refused peer this long */
#define MSGD_IDMAX 255
#define MSGD_UNIX_SNDBUF (4 << 20) /* a Unix stream's send buffer asked for: its default (~200 KiB) made most of a large
                                    * message a copy for the writer thread */

/* A part of a message the kernel did not take yet: in memory of the queue's own (freed when
 * written), or a sender's lent payload (let go when written, or copied first by msgd_reclaim). */
typedef struct OutBuf {
    struct OutBuf *next;
    unsigned char *owned;
    size_t len, off;           /* owned[off..len) is still to go */
    MsgLend *lend;             /* owned is lent through it (not freed): NULL for the queue's own */
} OutBuf;

typedef struct {
    int fd;
    int hello;                 /* 1 once the peer's hello is in (a connecting socket's own: 1) */
    int dead;
    unsigned char id[MSGD_IDMAX];
    size_t idlen;
    /* reading (the owner's thread) */
    unsigned char *in;
    size_t rpos, wpos;
    int in_body, more, discard;
    uint32_t len, got;
    zmq_msg_t f[MSGD_FRAMES];
    int n, extra, complete, pop;
    /* writing (wmu; the writer thread too) */
    pthread_mutex_t wmu;
    OutBuf *qh, *qt;
    int queued;                /* in the writer's set (the writer's lock) */
    double orphan;             /* its socket closed with this queued: the writer finishes it by then */
} DConn;

typedef struct DSock {
    void *zctx;
    int type, binds, mandatory, linger_ms;
    size_t max_frame;
    char token[96], user[48];
    unsigned char id[MSGD_IDMAX];
    size_t idlen;
    int lfd[MSGD_LISTEN_MAX], nl;
    char lpath[MSGD_LISTEN_MAX][108]; /* a path-named Unix socket, unlinked on close */
    DConn **c;
    int nc, capc, rr;
    DConn *cur;                /* the connection whose message msgd_frame hands out */
    unsigned next_id;
} DSock;

/* The writer: one thread a process, while direct sockets exist, finishing the queued parts. */
static struct {
    pthread_mutex_t mu;
    pthread_t th;
    int running, stop, sockets;
    int wake[2];
    DConn **set;
    int n, cap;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}};

/* ---- Helpers ---- */

static DSock *dsock(void *h) { return (DSock *)((uintptr_t)h & ~(uintptr_t)1); }

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static long msgd_spin_us(void) {
    static long spin = -1;
    long s = __atomic_load_n(&spin, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *e = getenv("RINGSIDE_MSG_SPIN_US");
        s = e && *e ? strtol(e, NULL, 10) : MSGD_SPIN_US;
        if (s < 0) s = 0;
        __atomic_store_n(&spin, s, __ATOMIC_RELAXED);
    }
    return s;
}

static void msgd_outbuf_free(OutBuf *b) {
    if (b->lend) msg_lend_release(b->lend); /* written, or its connection died */
    else free(b->owned);
    free(b);
}

/* Writes what c has queued until the kernel takes no more (wmu held). 1 when the queue is empty,
 * 0 when some is left, -1 when the peer is gone (the queue dropped). */
static int dconn_flush(DConn *c) {
    while (c->qh && !c->dead) {
        OutBuf *b = c->qh;
        ssize_t k = send(c->fd, b->owned + b->off, b->len - b->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) continue;
            c->dead = 1;
            break;
        }
        b->off += (size_t)k;
        if (b->off == b->len) {
            c->qh = b->next;
            if (!c->qh) c->qt = NULL;
            msgd_outbuf_free(b);
        }
    }
    if (c->dead) {
        while (c->qh) {
            OutBuf *b = c->qh;
            c->qh = b->next;
            msgd_outbuf_free(b);
        }
        c->qt = NULL;
        return -1;
    }
    return 1;
}

static void dconn_destroy(DConn *c);

static void *msgd_writer(void *arg) {
    (void)arg;
    struct pollfd *p = NULL;
    int pcap = 0;
    pthread_mutex_lock(&W.mu);
    while (!W.stop || W.n > 0) { /* at the end, the closed sockets' queues still go, for their linger */
        if (pcap < W.n + 1) {
            pcap = 2 * (W.n + 1);
            struct pollfd *q = realloc(p, (size_t)pcap * sizeof *p);
            if (!q) break;
            p = q;
        }
        p[0] = (struct pollfd){W.wake[0], POLLIN, 0};
        for (int i = 0; i < W.n; i++) p[i + 1] = (struct pollfd){W.set[i]->fd, POLLOUT, 0};
        int n = W.n + 1;
        pthread_mutex_unlock(&W.mu);
        poll(p, (nfds_t)n, 100);
        if (p[0].revents & POLLIN) {
            char junk[64];
            while (read(W.wake[0], junk, sizeof junk) > 0) {}
        }
        pthread_mutex_lock(&W.mu);
        double now = clock_now();
        for (int i = 0; i < W.n;) { /* every queued connection tries: a write that cannot go returns at once */
            DConn *c = W.set[i];
            pthread_mutex_lock(&c->wmu);
            int done = dconn_flush(c) != 0 || (c->orphan > 0 && now > c->orphan);
            if (done) c->queued = 0;
            pthread_mutex_unlock(&c->wmu);
            if (!done) {
                i++;
                continue;
            }
            W.set[i] = W.set[--W.n];
            if (c->orphan > 0) dconn_destroy(c);
        }
    }
    pthread_mutex_unlock(&W.mu);
    free(p);
    return NULL;
}

static void msgd_wake(void) {
    char one = 1;
    if (W.wake[1] >= 0 && write(W.wake[1], &one, 1) < 0) { /* a full pipe already wakes it */
    }
}

/* Puts c in the writer's set (c has a queue). */
static void msgd_enqueue(DConn *c) {
    pthread_mutex_lock(&W.mu);
    pthread_mutex_lock(&c->wmu);
    int add = c->qh && !c->queued;
    if (add) c->queued = 1;
    pthread_mutex_unlock(&c->wmu);
    if (add && W.n == W.cap) {
        int cap = W.cap ? 2 * W.cap : 16;
        DConn **s = realloc(W.set, (size_t)cap * sizeof *s);
        if (s) W.set = s, W.cap = cap;
    }
    if (add && W.n < W.cap) W.set[W.n++] = c;
    pthread_mutex_unlock(&W.mu);
    if (add) msgd_wake();
}

/* Takes c out of the writer's set: the writer does not touch it after this returns. */
static void msgd_dequeue(DConn *c) {
    pthread_mutex_lock(&W.mu);
    for (int i = 0; i < W.n; i++)
        if (W.set[i] == c) {
            W.set[i] = W.set[--W.n];
            break;
        }
    c->queued = 0;
    pthread_mutex_unlock(&W.mu);
}

/* One more direct socket: the writer runs while there are any. 0 or -1. */
static int msgd_writer_join(void) {
    pthread_mutex_lock(&W.mu);
    while (W.running && W.stop) { /* the last socket's close is stopping it: start a new one after */
        pthread_mutex_unlock(&W.mu);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&W.mu);
    }
    int rc = 0;
    if (W.sockets++ == 0 && !W.running) {
        W.stop = 0;
        if (pipe2(W.wake, O_NONBLOCK | O_CLOEXEC) != 0 || pthread_create(&W.th, NULL, msgd_writer, NULL) != 0) {
            rc = -1;
            W.sockets--;
        } else {
            W.running = 1;
        }
    }
    pthread_mutex_unlock(&W.mu);
    return rc;
}

static void msgd_writer_leave(void) {
    pthread_mutex_lock(&W.mu);
    int last = --W.sockets == 0 && W.running;
    if (last) W.stop = 1;
    pthread_mutex_unlock(&W.mu);
    if (!last) return;
    msgd_wake();
    pthread_join(W.th, NULL);
    pthread_mutex_lock(&W.mu);
    W.running = 0;
    close(W.wake[0]);
    close(W.wake[1]);
    W.wake[0] = W.wake[1] = -1;
    free(W.set);
    W.set = NULL;
    W.n = W.cap = 0;
    pthread_mutex_unlock(&W.mu);
}

static void dconn_reset_msg(DConn *c) {
    for (int i = 0; i < c->n; i++) zmq_msg_close(&c->f[i]);
    c->n = c->extra = c->complete = c->pop = 0;
}

/* Frees c, dropping what it still has queued (out of the writer's set, or the writer itself). */
static void dconn_destroy(DConn *c) {
    pthread_mutex_lock(&c->wmu);
    c->dead = 1;
    dconn_flush(c); /* drops the rest */
    pthread_mutex_unlock(&c->wmu);
    pthread_mutex_destroy(&c->wmu);
    if (c->in_body && !c->discard && c->n < MSGD_FRAMES) zmq_msg_close(&c->f[c->n]);
    dconn_reset_msg(c);
    if (c->fd >= 0) close(c->fd);
    free(c->in);
    free(c);
}

/* Closes c: what it has queued is left to the writer for linger_ms (ZeroMQ's linger: the close
 * does not wait), or dropped. */
static void dconn_free(DConn *c, int linger_ms, int drop) {
    pthread_mutex_lock(&W.mu);
    pthread_mutex_lock(&c->wmu);
    int keep = !drop && linger_ms > 0 && c->qh && !c->dead && c->queued;
    if (keep) c->orphan = clock_now() + linger_ms / 1000.0;
    pthread_mutex_unlock(&c->wmu);
    pthread_mutex_unlock(&W.mu);
    if (keep) {
        msgd_wake();
        return;
    }
    msgd_dequeue(c);
    dconn_destroy(c);
}

static DConn *dconn_new(int fd, int hello) {
    int dom = 0, buf = MSGD_UNIX_SNDBUF;
    socklen_t dl = sizeof dom;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_UNIX)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf); /* the kernel caps it at net.core.wmem_max */
    DConn *c = calloc(1, sizeof *c);
    if (!c || !(c->in = malloc(MSGD_INBUF))) {
        free(c);
        return NULL;
    }
    c->fd = fd;
    c->hello = hello;
    pthread_mutex_init(&c->wmu, NULL);
    return c;
}

static int dsock_add(DSock *d, DConn *c) {
    if (d->nc == d->capc) {
        int cap = d->capc ? 2 * d->capc : 4;
        DConn **s = realloc(d->c, (size_t)cap * sizeof *s);
        if (!s) return -1;
        d->c = s;
        d->capc = cap;
    }
    d->c[d->nc++] = c;
    return 0;
}

/* Drops connection i of d (dead, or refused). */
static void dsock_remove(DSock *d, int i) {
    DConn *c = d->c[i];
    d->c[i] = d->c[--d->nc];
    dconn_free(c, 0, 1);
}

/* Reads what the kernel has into c's buffer: >0 bytes, 0 nothing yet, -1 gone. */
static int dconn_fill(DConn *c) {
    if (c->rpos > 0) {
        memmove(c->in, c->in + c->rpos, c->wpos - c->rpos);
        c->wpos -= c->rpos;
        c->rpos = 0;
    }
    for (;;) {
        ssize_t k = recv(c->fd, c->in + c->wpos, MSGD_INBUF - c->wpos, MSG_DONTWAIT);
        if (k > 0) {
            c->wpos += (size_t)k;
            return 1;
        }
        if (k < 0 && errno == EINTR) continue;
        return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    }
}

/* Checks a hello (c's one frame) against d: 1 admitted, 0 refused (said why). */
static int dconn_hello(DSock *d, DConn *c) {
    size_t n = c->n == 1 && !c->extra ? zmq_msg_size(&c->f[0]) : 0;
    const unsigned char *p = n ? zmq_msg_data(&c->f[0]) : NULL;
    const char *why = "not this job's token";
    char user[64] = "";
    if (n < 7 || memcmp(p, "RSD1", 4)) {
        why = "not a ringside peer";
    } else {
        size_t tl = p[4], at = 5 + tl;
        size_t ul = at < n ? p[at] : 0, il_at = at + 1 + ul;
        size_t il = il_at < n ? p[il_at] : 0;
        if (il_at >= n || il_at + 1 + il != n) {
            why = "a malformed hello";
        } else {
            snprintf(user, sizeof user, "%.*s", (int)(ul < 48 ? ul : 48), (const char *)p + at + 1);
            for (char *q = user; *q; q++)
                if (*q < 32 || *q > 126) *q = '?';
            int ok = !d->token[0] || (tl == strlen(d->token) && !memcmp(p + 5, d->token, tl));
            if (ok) {
                if (il) memcpy(c->id, p + il_at + 1, il);
                c->idlen = il;
                if (!il) { /* ZeroMQ's rule: a peer without an identity gets 0 and four bytes */
                    c->id[0] = 0;
                    put32(c->id + 1, ++d->next_id);
                    c->idlen = 5;
                }
                for (int i = 0; i < d->nc; i++)
                    if (d->c[i] != c && d->c[i]->hello && d->c[i]->idlen == c->idlen && !memcmp(d->c[i]->id, c->id, c->idlen)) {
                        why = "an identity already connected";
                        ok = 0;
                    }
                if (ok) return 1;
            }
        }
    }
    char from[160];
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    char addr[64] = "a local process";
    if (getpeername(c->fd, (struct sockaddr *)&sa, &sl) == 0 && sa.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, addr, sizeof addr);
    snprintf(from, sizeof from, "%s%s%s", addr, user[0] ? " as " : "", user);
    gate_note_refused(d->zctx, GATE_DATA, from, why);
    return 0;
}

/* Moves c's bytes on (non-blocking): 1 a whole message is in, 0 not yet, -1 the connection is
 * gone or broke a rule (too large a frame, a bad hello). */
static int dconn_progress(DSock *d, DConn *c) {
    for (;;) {
        if (c->complete) {
            if (c->hello) return 1;
            if (!dconn_hello(d, c)) return -1;
            c->hello = 1;
            dconn_reset_msg(c);
            continue;
        }
        if (!c->in_body) {
            if (c->wpos - c->rpos < 8) {
                int r = dconn_fill(c);
                if (r <= 0) return r;
                continue;
            }
            const unsigned char *h = c->in + c->rpos;
            c->len = get32(h);
            c->more = (h[4] & 1) != 0;
            c->rpos += 8;
            if ((!c->hello && (c->len > MSGD_HELLO_MAX || c->more)) || (d->max_frame && c->len > d->max_frame)) {
                if (!c->hello) gate_note_refused(d->zctx, GATE_DATA, "a local process", "not a ringside peer");
                return -1;
            }
            c->discard = c->n >= MSGD_FRAMES;
            if (!c->discard && zmq_msg_init_size(&c->f[c->n], c->len) != 0) return -1;
            c->in_body = 1;
            c->got = 0;
        }
        unsigned char *dst = c->discard ? NULL : zmq_msg_data(&c->f[c->n]);
        size_t want = c->len - c->got, have = c->wpos - c->rpos, k = want < have ? want : have;
        if (k) {
            if (dst) memcpy(dst + c->got, c->in + c->rpos, k);
            c->rpos += k;
            c->got += (uint32_t)k;
            want -= k;
        }
        if (want) {
            if (dst && want >= MSGD_DIRECT_READ) { /* the rest of a large frame: into it at once */
                ssize_t r = recv(c->fd, dst + c->got, want, MSG_DONTWAIT);
                if (r > 0) c->got += (uint32_t)r;
                else if (r < 0 && errno == EINTR) continue;
                else return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
            } else {
                int r = dconn_fill(c);
                if (r <= 0) return r;
            }
            continue;
        }
        c->in_body = 0;
        if (c->discard) c->extra++;
        else c->n++;
        if (!c->more) c->complete = 1;
    }
}

static void dsock_accept(DSock *d) {
    for (int i = 0; i < d->nl; i++)
        for (;;) {
            int fd = accept4(d->lfd[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* a Unix socket ignores it */
            DConn *c = dconn_new(fd, 0);
            if (!c || dsock_add(d, c) != 0) {
                if (c) dconn_free(c, 0, 1);
                else close(fd);
            }
        }
}

/* Connection i of d after moving it on (rr past it when it has a whole message): 1 a whole
 * message, 0 not yet, -1 it was dropped (gone, or broke a rule). */
static int dsock_step(DSock *d, int i) {
    int r = dconn_progress(d, d->c[i]);
    if (r < 0) dsock_remove(d, i);
    else if (r > 0) d->rr = (i + 1) % d->nc;
    return r;
}

/* A connection of d with a whole message, or NULL: first those with bytes read and not yet
 * parsed, then, after one poll(2) that does not wait, those the kernel has bytes (or a hang-up)
 * for, and the listeners' new peers (accept only then: a failed accept4 costs a file). */
static DConn *dsock_ready(DSock *d) {
    if (d->cur) return d->cur;
    for (int k = 0; k < d->nc; k++) {
        int i = (d->rr + k) % d->nc;
        DConn *c = d->c[i];
        if (c->complete || c->wpos > c->rpos) {
            int r = dsock_step(d, i);
            if (r > 0) return c;
            if (r < 0) k = -1, d->rr = 0; /* the list changed: look again from the start */
        }
    }
    enum { MAXFD = 256 };
    struct pollfd pf[MAXFD];
    DConn *who[MAXFD];
    int n = 0;
    for (int j = 0; j < d->nl && n < MAXFD; j++, n++) pf[n] = (struct pollfd){d->lfd[j], POLLIN, 0}, who[n] = NULL;
    for (int j = 0; j < d->nc && n < MAXFD; j++, n++) pf[n] = (struct pollfd){d->c[j]->fd, POLLIN, 0}, who[n] = d->c[j];
    if (n == 0 || poll(pf, (nfds_t)n, 0) <= 0) return NULL;
    int accept = 0;
    DConn *got = NULL;
    for (int j = 0; j < n; j++) {
        if (!pf[j].revents) continue;
        if (!who[j]) {
            accept = 1;
            continue;
        }
        for (int i = 0; i < d->nc; i++) /* found by pointer: a removal reorders the list */
            if (d->c[i] == who[j]) {
                if (dsock_step(d, i) > 0 && !got) got = who[j];
                break;
            }
    }
    if (accept) dsock_accept(d);
    return got;
}

/* Parses endpoint into a socket address. 0, or -1 (errno EINVAL). */
static int msgd_addr(const char *ep, int binding, struct sockaddr_storage *sa, socklen_t *sl, char *path, size_t plen) {
    memset(sa, 0, sizeof *sa);
    if (path) path[0] = 0;
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9)) {
        struct sockaddr_un *u = (struct sockaddr_un *)sa;
        char name[sizeof u->sun_path];
        int k = ep[0] == 'i' && ep[2] == 'c' ? snprintf(name, sizeof name, "%s", ep + 6)
                                            : snprintf(name, sizeof name, "@ringside-inproc-%ld-%s", (long)getpid(), ep + 9);
        if (k <= 0 || (size_t)k >= sizeof name) return errno = EINVAL, -1;
        u->sun_family = AF_UNIX;
        memcpy(u->sun_path, name, (size_t)k);
        if (name[0] == '@') u->sun_path[0] = 0;
        else if (path) snprintf(path, plen, "%s", name);
        *sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)k + (name[0] == '@' ? 0 : 1));
        return 0;
    }
    if (strncmp(ep, "tcp://", 6)) return errno = EINVAL, -1;
    const char *hp = ep + 6, *colon = strrchr(hp, ':');
    if (!colon || colon == hp) return errno = EINVAL, -1;
    char host[256], port[16];
    snprintf(host, sizeof host, "%.*s", (int)(colon - hp), hp);
    snprintf(port, sizeof port, "%s", colon + 1);
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    in->sin_family = AF_INET;
    long pn = strcmp(port, "*") ? strtol(port, NULL, 10) : 0;
    if (pn < 0 || pn > 65535 || (!binding && pn == 0)) return errno = EINVAL, -1;
    in->sin_port = htons((uint16_t)pn);
    *sl = sizeof *in;
    if (!strcmp(host, "*")) {
        if (!binding) return errno = EINVAL, -1;
        in->sin_addr.s_addr = htonl(INADDR_ANY);
        return 0;
    }
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) return 0;
    struct addrinfo hint = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hint, &res) != 0 || !res) return errno = EINVAL, -1;
    in->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

/* Queues the parts of iov[0..n) from byte skip on (c->wmu held), copied: own is the part whose
 * buffer is handed over instead (freed when written), -1 none; lent the part lent through lend
 * (-1 none), held as it is until written, as ZeroMQ holds a lent payload. Its owner may wait for it
 * to be let go before it reads (the ring does), and its peer the same way, so a waiter first asks
 * for it back (msg_lend_reclaim: the rest is copied then), where ZeroMQ's receiving I/O thread
 * would have read it in. 0, or -1 out of memory: the owned part is freed then and the connection
 * marked dead (its stream may hold part of a message; the queue is dropped, lends let go). */
static int dconn_queue(DConn *c, const struct iovec *iov, int n, size_t skip, int own, int lent, MsgLend *lend) {
    int handed = 0; /* the owned part queued or freed */
    for (int i = 0; i < n; i++) {
        size_t len = iov[i].iov_len;
        if (skip >= len) {
            skip -= len;
            if (i == own) {
                free(iov[i].iov_base);
                handed = 1;
            }
            continue;
        }
        OutBuf *b = calloc(1, sizeof *b);
        if (!b) goto oom;
        if (i == own || i == lent) {
            b->owned = iov[i].iov_base;
            handed |= i == own;
            b->off = skip;
            b->len = len;
            if (i == lent) {
                b->lend = lend;
                __atomic_add_fetch(&lend->out, 1, __ATOMIC_RELAXED);
            }
        } else {
            if (!(b->owned = malloc(len - skip))) {
                free(b);
                goto oom;
            }
            memcpy(b->owned, (const char *)iov[i].iov_base + skip, len - skip);
            b->len = len - skip;
        }
        skip = 0;
        if (c->qt) c->qt->next = b;
        else c->qh = b;
        c->qt = b;
    }
    return 0;
oom: /* the owned part, when not queued yet, is freed; the stream holds half a message: the connection is dead */
    if (own >= 0 && !handed) free(iov[own].iov_base);
    c->dead = 1;
    return -1;
}

/* ---- Public ---- */

int msgd_socket(void *zctx, const MsgSocketSpec *s, void **sock) {
    *sock = NULL;
    if (secure_on()) return rs_error(RS_ERR_INPUT, "--msg-layer direct has no CURVE: --secure needs --msg-layer zeromq");
    if (s->type != ZMQ_PUSH && s->type != ZMQ_PULL && s->type != ZMQ_DEALER && s->type != ZMQ_ROUTER)
        return rs_error(RS_ERR_RUNTIME, "msg_socket: direct sockets are PUSH, PULL, DEALER or ROUTER (type %d)", s->type);
    if (s->type != ZMQ_PUSH && s->rcv_queue < 1)
        return rs_error(RS_ERR_RUNTIME, "msg_socket: a receiving socket without a queue bound (rcv_queue %d)", s->rcv_queue);
    if (s->idlen > MSGD_IDMAX) return rs_error(RS_ERR_RUNTIME, "msg_socket: a routing identity over %d bytes", MSGD_IDMAX);
    DSock *d = calloc(1, sizeof *d);
    if (!d) return rs_error(RS_ERR_RUNTIME, "msg_socket: out of memory");
    d->zctx = zctx;
    d->type = s->type;
    d->binds = s->binds;
    d->mandatory = s->mandatory;
    d->linger_ms = s->linger_ms;
    d->max_frame = s->type == ZMQ_PUSH ? 0 : s->max_frame;
    if (!s->ungated) gate_token(zctx, d->token, sizeof d->token);
    snprintf(d->user, sizeof d->user, "%s", s->user ? s->user : "member");
    if (s->id && s->idlen) memcpy(d->id, s->id, s->idlen);
    d->idlen = s->id ? s->idlen : 0;
    if (msgd_writer_join() != 0) {
        free(d);
        return rs_error(RS_ERR_RUNTIME, "msg_socket: cannot start the direct sockets' writer thread");
    }
    *sock = (void *)((uintptr_t)d | 1u);
    return RS_OK;
}

void msgd_close(void *sock, int drop) {
    if (!sock) return;
    DSock *d = dsock(sock);
    for (int i = 0; i < d->nc; i++) dconn_free(d->c[i], d->linger_ms, drop);
    for (int i = 0; i < d->nl; i++) {
        close(d->lfd[i]);
        if (d->lpath[i][0]) unlink(d->lpath[i]);
    }
    free(d->c);
    free(d);
    msgd_writer_leave();
}

int msgd_bind(void *sock, const char *endpoint, char *bound, size_t len) {
    DSock *d = dsock(sock);
    struct sockaddr_storage sa;
    socklen_t sl;
    char path[108];
    if (d->nl == MSGD_LISTEN_MAX) return errno = EMFILE, -1;
    if (msgd_addr(endpoint, 1, &sa, &sl, path, sizeof path) != 0) return -1;
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) return -1;
    if (sa.ss_family == AF_INET) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return errno = e, -1;
    }
    if (bound && len) {
        if (sa.ss_family == AF_INET) {
            struct sockaddr_in got;
            socklen_t gl = sizeof got;
            char ip[INET_ADDRSTRLEN];
            getsockname(fd, (struct sockaddr *)&got, &gl);
            inet_ntop(AF_INET, &got.sin_addr, ip, sizeof ip);
            snprintf(bound, len, "tcp://%s:%u", ip, (unsigned)ntohs(got.sin_port));
        } else {
            snprintf(bound, len, "%s", endpoint);
        }
    }
    snprintf(d->lpath[d->nl], sizeof d->lpath[0], "%s", path);
    d->lfd[d->nl++] = fd;
    return 0;
}

int msgd_connect(void *sock, const char *endpoint) {
    DSock *d = dsock(sock);
    struct sockaddr_storage sa;
    socklen_t sl;
    if (d->binds || d->nc) return errno = EINVAL, -1; /* one peer a connecting socket */
    if (msgd_addr(endpoint, 0, &sa, &sl, NULL, 0) != 0) return -1;
    int fd = -1;
    for (double until = clock_now() + MSGD_CONNECT_S;;) {
        fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr *)&sa, sl) == 0) break;
        int e = errno;
        close(fd);
        if ((e != ECONNREFUSED && e != ENOENT && e != EAGAIN && e != EINTR) || clock_now() > until) return errno = e, -1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    unsigned char hello[8 + 4 + 3 + 95 + 48 + MSGD_IDMAX];
    size_t tl = strlen(d->token), ul = strlen(d->user), n = 8;
    memcpy(hello + n, "RSD1", 4);
    n += 4;
    hello[n++] = (unsigned char)tl;
    memcpy(hello + n, d->token, tl);
    n += tl;
    hello[n++] = (unsigned char)ul;
    memcpy(hello + n, d->user, ul);
    n += ul;
    hello[n++] = (unsigned char)d->idlen;
    memcpy(hello + n, d->id, d->idlen);
    n += d->idlen;
    memset(hello, 0, 8);
    put32(hello, (uint32_t)(n - 8));
    for (size_t off = 0; off < n;) { /* blocking: a new connection takes a hello at once */
        ssize_t k = send(fd, hello + off, n - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            return errno = e, -1;
        }
        off += (size_t)k;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    DConn *c = dconn_new(fd, 1);
    if (!c || dsock_add(d, c) != 0) {
        if (c) dconn_free(c, 0, 1);
        else close(fd);
        return errno = ENOMEM, -1;
    }
    return 0;
}

int msgd_bound(void *sock, size_t max_frame) {
    dsock(sock)->max_frame = max_frame;
    return 0;
}

int msgd_send(void *sock, const MsgOut *m, const unsigned char *stamp, size_t stamp_bytes) {
    DSock *d = dsock(sock);
    DConn *c = NULL;
    if (d->type == ZMQ_PULL) return errno = ENOTSUP, -1;
    if (d->type == ZMQ_ROUTER) {
        for (int pass = 0; pass < 2 && !c; pass++) {
            for (int i = 0; i < d->nc && !c; i++)
                if (d->c[i]->hello && d->c[i]->idlen == m->idlen && !memcmp(d->c[i]->id, m->id, m->idlen)) c = d->c[i];
            if (c || pass) break;
            dsock_accept(d); /* a peer not seen yet: its connection, and its hello */
            for (int i = 0; i < d->nc; i++)
                if (!d->c[i]->hello && dconn_progress(d, d->c[i]) < 0) dsock_remove(d, i--);
        }
        if (!c) {
            if (d->mandatory) return errno = EHOSTUNREACH, -1;
            return 0; /* ZeroMQ drops it */
        }
    } else {
        if (!d->nc) return errno = EPIPE, -1;
        c = d->c[0];
    }
    int has_payload = m->codec || m->payload, stamped = stamp && stamp_bytes;
    size_t bytes = m->codec ? (m->count ? codec_bytes(m->codec->type, m->count) : 0) : m->payload ? m->bytes + m->tail_bytes : 0;
    if (bytes > UINT32_MAX || m->head_bytes > UINT32_MAX) return errno = EMSGSIZE, -1;
    unsigned char h[3][8] = {{0}};
    struct iovec iov[7];
    int n = 0, own = -1, lent = -1;
    void *enc = NULL;
    put32(h[0], (uint32_t)m->head_bytes);
    h[0][4] = (unsigned char)(has_payload || stamped);
    iov[n++] = (struct iovec){h[0], 8};
    if (m->head_bytes) iov[n++] = (struct iovec){(void *)m->head, m->head_bytes};
    if (has_payload) {
        put32(h[1], (uint32_t)bytes);
        h[1][4] = (unsigned char)stamped;
        iov[n++] = (struct iovec){h[1], 8};
        if (m->codec && bytes) {
            if (!(enc = malloc(bytes))) return errno = ENOMEM, -1;
            codec_encode(m->codec, m->src, enc, m->count);
            own = n;
            iov[n++] = (struct iovec){enc, bytes};
        } else if (!m->codec) {
            if (m->bytes && m->lend && m->bytes >= MSG_ZEROCOPY_MIN && !m->tail_bytes) lent = n;
            if (m->bytes) iov[n++] = (struct iovec){(void *)m->payload, m->bytes};
            if (m->tail_bytes) iov[n++] = (struct iovec){(void *)m->tail, m->tail_bytes};
        }
    }
    if (stamped) {
        put32(h[2], (uint32_t)stamp_bytes);
        iov[n++] = (struct iovec){h[2], 8};
        iov[n++] = (struct iovec){(void *)stamp, stamp_bytes};
    }
    pthread_mutex_lock(&c->wmu);
    size_t done = 0;
    int rc = 0, queue = 0;
    if (c->dead) {
        rc = -1;
    } else if (!c->qh) { /* the fast path: straight into the kernel, from this thread */
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        for (;;) {
            ssize_t k = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                c->dead = 1;
                rc = -1;
            }
            done = k > 0 ? (size_t)k : 0;
            break;
        }
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    if (rc == 0 && done < total) {
        queue = 1;
        if (dconn_queue(c, iov, n, done, own, lent, m->lend) != 0) rc = -1, errno = ENOMEM;
        enc = NULL; /* handed over (or freed) */
    }
    pthread_mutex_unlock(&c->wmu);
    free(enc);
    if (rc != 0) {
        if (errno != ENOMEM) errno = EPIPE;
        return -1;
    }
    if (queue) msgd_enqueue(c);
    return 0;
}

void msgd_reclaim(MsgLend *lend) {
    if (__atomic_load_n(&lend->out, __ATOMIC_ACQUIRE) <= 0) return;
    pthread_mutex_lock(&W.mu); /* every connection with a queue is in the writer's set */
    for (int i = 0; i < W.n; i++) {
        DConn *c = W.set[i];
        pthread_mutex_lock(&c->wmu);
        for (OutBuf *b = c->qh; b; b = b->next) {
            if (b->lend != lend) continue;
            unsigned char *copy = malloc(b->len - b->off);
            if (!copy) continue; /* left lent: the writer lets it go once written */
            memcpy(copy, b->owned + b->off, b->len - b->off);
            b->owned = copy;
            b->len -= b->off;
            b->off = 0;
            b->lend = NULL;
            msg_lend_release(lend);
        }
        pthread_mutex_unlock(&c->wmu);
    }
    pthread_mutex_unlock(&W.mu);
}

int msgd_frame(void *sock, zmq_msg_t *p, int flags, int *more) {
    DSock *d = dsock(sock);
    if (!d->cur) {
        DConn *c;
        while (!(c = dsock_ready(d))) {
            if (flags & ZMQ_DONTWAIT) return errno = EAGAIN, -1;
            void *one = sock;
            if (msgd_poll(&one, 1, -1, NULL) < 0) return -1;
        }
        d->cur = c;
        c->pop = d->type == ZMQ_ROUTER ? -1 : 0;
    }
    DConn *c = d->cur;
    zmq_msg_close(p);
    if (c->pop < 0) { /* a ROUTER's identity frame, as ZeroMQ's hands it out */
        zmq_msg_init_size(p, c->idlen);
        memcpy(zmq_msg_data(p), c->id, c->idlen);
    } else if (c->pop < c->n) {
        zmq_msg_init(p);
        zmq_msg_move(p, &c->f[c->pop]);
    } else {
        zmq_msg_init(p); /* a frame past MSGD_FRAMES: empty, and the message a stray's */
    }
    c->pop++;
    *more = c->pop < c->n + c->extra;
    mem_account(MEM_COMM, (long long)zmq_msg_size(p));
    if (!*more) {
        dconn_reset_msg(c);
        d->cur = NULL;
    }
    return 0;
}

int msgd_poll(void *const *socks, int n, long wait_ms, unsigned char *ready) {
    return msgd_poll_until(socks, n, wait_ms < 0 ? 1e300 : clock_now() + wait_ms / 1000.0, ready);
}

int msgd_poll_until(void *const *socks, int n, double deadline, unsigned char *ready) {
    int k = n < 64 ? n : 64;
    double now = clock_now();
    double spin_until = now + msgd_spin_us() * 1e-6;
    zmq_pollitem_t items[64];
    for (;;) {
        int got = 0, nz = 0, zi[64];
        for (int i = 0; i < k; i++) {
            if (msgd_is(socks[i])) {
                int r = dsock_ready(dsock(socks[i])) != NULL;
                if (ready) ready[i] = (unsigned char)r;
                got += r;
            } else {
                zi[nz] = i;
                items[nz++] = (zmq_pollitem_t){socks[i], 0, ZMQ_POLLIN, 0};
            }
        }
        if (nz) {
            int rc = zmq_poll(items, nz, 0);
            if (rc < 0 && zmq_errno() != EINTR) return -1;
            for (int j = 0; j < nz; j++) {
                int r = rc > 0 && (items[j].revents & ZMQ_POLLIN);
                if (ready) ready[zi[j]] = (unsigned char)r;
                got += r;
            }
        }
        if (ready)
            for (int i = 64; i < n; i++) ready[i] = 1;
        if (got) return got + (n > 64 ? n - 64 : 0);
        now = clock_now();
        if (now >= deadline) return 0;
        if (now < spin_until) { /* a short spin: the reply of a small message is often microseconds away */
            sched_yield();
            continue;
        }
        /* sleep until a byte, a connection or a message comes, or the deadline */
        zmq_pollitem_t all[256];
        int m = 0;
        for (int i = 0; i < k && m < 256; i++) {
            if (!msgd_is(socks[i])) {
                all[m++] = (zmq_pollitem_t){socks[i], 0, ZMQ_POLLIN, 0};
                continue;
            }
            DSock *d = dsock(socks[i]);
            for (int j = 0; j < d->nl && m < 256; j++) all[m++] = (zmq_pollitem_t){NULL, d->lfd[j], ZMQ_POLLIN, 0};
            for (int j = 0; j < d->nc && m < 256; j++) all[m++] = (zmq_pollitem_t){NULL, d->c[j]->fd, ZMQ_POLLIN, 0};
        }
        double left = deadline - now;
        if (!nz) { /* to the microsecond: a wait for a booked arrival (--link) is often under 1 ms */
            struct pollfd pf[256];
            for (int j = 0; j < m; j++) pf[j] = (struct pollfd){all[j].fd, POLLIN, 0};
            if (left > 0.1 && m == 0) left = 0.1; /* nothing to watch: look again soon */
            if (left > 3600.0) left = 3600.0;
            struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
            if (ppoll(pf, (nfds_t)m, &ts, NULL) < 0 && errno != EINTR) return -1;
        } else if (left < 0.001) { /* ZeroMQ sockets too, under a millisecond left: zmq_poll would round it up */
            struct timespec ts = {0, (long)((left < MSG_WAIT_NAP_S ? left : MSG_WAIT_NAP_S) * 1e9)};
            nanosleep(&ts, NULL); /* look again in 50 us, as msg_wait does */
        } else if (zmq_poll(all, m, left > 3600.0 ? 3600000L : (long)(left * 1000.0)) < 0 && zmq_errno() != EINTR) {
            return -1; /* (the whole milliseconds: the rest is looked for above) */
        }
    }
}
