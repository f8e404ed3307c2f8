/* ctrl.c - the control plane over ZeroMQ: join with token and configuration check, endpoints, barrier, gather */
#include "ctrl.h"
#include "../base/clock.h"
#include "../base/config.h"
#include "../base/err.h"
#include "../base/log.h"
#include "elastic.h"
#include "gate.h"
#include "secure.h"
#include "zmq_check.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CTRL_MAX_FRAMES 1024
#define CTRL_DOMAIN "ringside-ctrl"
#define CTRL_MON_EVENTS \
    (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
#define CTRL_ENDED_HANDSHAKES 3 /* a member gives up after rank 0 ends this many handshakes unexplained */

/* A member's connection as member 0's ROUTER knows it: the routing id its JOIN came with. */
typedef struct Rid {
    size_t len;          /* 0: not joined */
    unsigned char id[256];
    char addr[64];       /* the peer's address, for messages */
} Rid;

struct Ctrl {
    void *zctx;
    void *sock;          /* ROUTER on member 0, DEALER elsewhere */
    int member, members, world;
    char token[80];
    char **endpoints;    /* members entries */
    double timeout;
    char where[300];     /* "tcp://addr:port" */
    unsigned long long messages, dropped;
    struct Msg *later;   /* member 0: messages of members outside a round (a server's during the
                          * workers' own), kept for the next round; nlater of them */
    struct Msg *spare;   /* the other of the two lists (members entries each, from the first round) */
    int nlater;
    size_t max_bytes;    /* the largest frame a peer may send (ZMQ_MAXMSGSIZE) and this process sends */
    Rid *rid;            /* member 0: every member's connection, bound by its JOIN (members entries) */
    int gated;           /* without --secure: this context's gate (net/gate.h) was opened by this member */
    void *mon;           /* during ctrl_join: the socket monitor's PAIR (refused handshakes) */
    unsigned long long refused_auth, refused_mech; /* handshakes refused: credentials, mechanism */
    unsigned long long ended;  /* handshakes the other side ended without a word */
    char refused_from[160]; /* member 0: the last refused peer ("127.0.0.1 as member 1") */
};

/* A received multipart message, every frame kept: frames[0] is the ROUTER identity on member 0. */
typedef struct Msg {
    int n, cap;
    zmq_msg_t *f;
} Msg;

static void msg_close(Msg *m) {
    for (int i = 0; i < m->n; i++) zmq_msg_close(&m->f[i]);
    free(m->f);
    m->f = NULL;
    m->n = m->cap = 0;
}

/* Frame i as a NUL-terminated copy in buf. */
static const char *msg_text(Msg *m, int i, char *buf, size_t len) {
    buf[0] = 0;
    if (i >= m->n) return buf;
    size_t n = zmq_msg_size(&m->f[i]);
    if (n >= len) n = len - 1;
    memcpy(buf, zmq_msg_data(&m->f[i]), n);
    buf[n] = 0;
    return buf;
}

/* Frame i as a malloc'd NUL-terminated string (caller frees); NULL on OOM. */
static char *msg_strdup(Msg *m, int i) {
    size_t n = i < m->n ? zmq_msg_size(&m->f[i]) : 0;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, zmq_msg_data(&m->f[i]), n);
    s[n] = 0;
    return s;
}

/* Frames of one message on sock, received and closed (what the gate and the monitor do not use). */
static int ctrl_take(void *sock, zmq_msg_t *f, int max) {
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&x);
            break;
        }
        more = zmq_msg_more(&x);
        if (n < max) f[n++] = x;
        else zmq_msg_close(&x);
    }
    return n;
}

/* Member 0 without --secure: takes in what the context's gate (net/gate.h) refused on the control
 * port since the last look, warning once with the first refused peer. */
static void ctrl_gate_look(Ctrl *c) {
    if (c->member != 0 || !c->gated) return;
    char from[160] = "";
    unsigned long long n = gate_refused(c->zctx, GATE_CTRL, from, sizeof from);
    if (n <= c->refused_auth) return;
    if (!c->refused_auth)
        log_warn("control plane %s: refused a connection from %s: not this job's token", c->where, from);
    c->refused_auth = n;
    snprintf(c->refused_from, sizeof c->refused_from, "%s", from);
}

/* One event of the socket monitor. Both sides count handshakes that failed on the security
 * mechanism and the ones the other side ended without a word (whichever side sees a mismatch
 * first closes; a CURVE server cannot read a HELLO made for another key and closes); a member
 * counts its credentials refused (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: the token, or the key by
 * rank 0's ZAP handler), member 0 under --secure the HELLOs it could not decrypt (its gate
 * counts wrong tokens). */
static void ctrl_monitor_one(Ctrl *c) {
    zmq_msg_t f[2];
    int n = ctrl_take(c->mon, f, 2);
    if (n >= 1 && zmq_msg_size(&f[0]) == 6) {
        uint16_t ev;
        uint32_t value;
        memcpy(&ev, zmq_msg_data(&f[0]), 2);
        memcpy(&value, (char *)zmq_msg_data(&f[0]) + 2, 4);
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && c->member != 0) c->refused_auth++;
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            c->refused_mech++;
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC && secure_on())
            c->refused_auth++;
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) c->ended++;
    }
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}

/* Receives one whole message within deadline (monotonic seconds), serving the gate and the
 * monitor meanwhile. 0, RS_ERR_PEER on timeout, or on a member RS_ERR_INPUT once member 0 has
 * refused its handshake (c->refused_*). */
static int ctrl_recv(Ctrl *c, Msg *m, double deadline) {
    *m = (Msg){0};
    for (;;) {
        if (c->member != 0 && (c->refused_auth || c->refused_mech || c->ended >= CTRL_ENDED_HANDSHAKES))
            return RS_ERR_INPUT;
        double left = deadline - clock_now();
        if (left <= 0) return RS_ERR_PEER;
        zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLIN, 0}};
        int n = 1, mi = -1;
        if (c->mon) it[mi = n++] = (zmq_pollitem_t){c->mon, 0, ZMQ_POLLIN, 0};
        long wait = (long)(left * 1000) + 1;
        if (c->gated && c->member == 0 && wait > 200) wait = 200; /* look at the gate's refusals now and then */
        int rc = zmq_poll(it, n, wait);
        ctrl_gate_look(c);
        if (rc < 0) {
            if (zmq_errno() == EINTR) continue;
            return zmqCheck(rc);
        }
        if (mi > 0 && (it[mi].revents & ZMQ_POLLIN)) ctrl_monitor_one(c);
        if (!(it[0].revents & ZMQ_POLLIN)) continue;
        int more = 1;
        while (more) {
            zmq_msg_t tmp;
            zmq_msg_init(&tmp);
            if (zmq_msg_recv(&tmp, c->sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&tmp);
                msg_close(m);
                return zmqCheck(-1);
            }
            more = zmq_msg_more(&tmp);
            if (m->n == m->cap) {
                int cap = m->cap ? 2 * m->cap : 8;
                zmq_msg_t *f = cap <= CTRL_MAX_FRAMES ? realloc(m->f, (size_t)cap * sizeof *f) : NULL;
                if (!f) { /* more frames than any message of ours has: drop the rest */
                    zmq_msg_close(&tmp);
                    continue;
                }
                m->f = f;
                m->cap = cap;
            }
            m->f[m->n++] = tmp;
        }
        c->messages++;
        return RS_OK;
    }
}

/* Sends a message's first frame within the run's timeout. ZeroMQ blocks a send that has no room:
 * a member's DEALER while it has no connection (one whose handshake rank 0 refused is torn down
 * and retried), a ROUTER's peer whose queue is full; this waits for room in slices, reading the
 * monitor meanwhile, so that a refused member says why instead of waiting for ever. The frames
 * after the first always go (ZeroMQ queues a message whole). 0; RS_ERR_INPUT on a member once rank
 * 0 refused its handshake (c->refused_*, as ctrl_recv); RS_ERR_PEER when no room came in time;
 * RS_ERR_RUNTIME for another ZeroMQ error (EHOSTUNREACH: the peer is gone). */
static int ctrl_send_first(Ctrl *c, const void *p, size_t n, int flags) {
    double deadline = clock_now() + c->timeout;
    for (;;) {
        if (zmq_send(c->sock, p, n, flags | ZMQ_DONTWAIT) >= 0) return RS_OK;
        if (zmq_errno() != EAGAIN && zmq_errno() != EINTR) return zmqCheck(-1);
        if (c->member != 0 && (c->refused_auth || c->refused_mech || c->ended >= CTRL_ENDED_HANDSHAKES))
            return RS_ERR_INPUT;
        double left = deadline - clock_now();
        if (left <= 0)
            return rs_error(RS_ERR_PEER, "control plane: no connection to %s took a message within %.0f s",
                            c->member ? c->where : "a member", c->timeout);
        zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLOUT, 0}};
        int k = 1, mi = -1;
        if (c->mon) it[mi = k++] = (zmq_pollitem_t){c->mon, 0, ZMQ_POLLIN, 0};
        long ms = (long)(left * 1000) + 1;
        if (zmq_poll(it, k, ms < 100 ? ms : 100) < 0 && zmq_errno() != EINTR) return zmqCheck(-1);
        if (mi > 0 && (it[mi].revents & ZMQ_POLLIN)) ctrl_monitor_one(c);
    }
}

/* Sends frames, on member 0 to the connection `to` first. A part longer than the run's frame
 * bound is refused before anything is sent (the receiver would drop the connection). 0 or
 * RS_ERR_RUNTIME. */
static int ctrl_send_to(Ctrl *c, const Rid *to, const char *type, const char *const *parts, int nparts) {
    char head[160];
    snprintf(head, sizeof head, "%s %d %s", type, c->member, c->token);
    for (int i = 0; i < nparts; i++) {
        size_t n = strlen(parts[i]);
        if (n > c->max_bytes)
            return rs_error(RS_ERR_RUNTIME,
                            "control plane: a %s text of %zu bytes is over the %zu bytes this run's control messages "
                            "may carry (the bound follows --steps, --trace and the model: docs/architecture.md)",
                            type, n, c->max_bytes);
    }
    int more = nparts ? ZMQ_SNDMORE : 0;
    if (to) { /* the identity frame is the message's first: the head then goes as a later frame */
        RS_TRY(ctrl_send_first(c, to->id, to->len, ZMQ_SNDMORE));
        if (zmq_send(c->sock, head, strlen(head), more) < 0) return zmqCheck(-1);
    } else {
        RS_TRY(ctrl_send_first(c, head, strlen(head), more));
    }
    for (int i = 0; i < nparts; i++)
        if (zmq_send(c->sock, parts[i], strlen(parts[i]), i + 1 < nparts ? ZMQ_SNDMORE : 0) < 0)
            return zmqCheck(-1);
    c->messages++;
    return RS_OK;
}

/* ctrl_send_to member `to` (member 0: over the connection its JOIN came on). */
static int ctrl_send(Ctrl *c, int to, const char *type, const char *const *parts, int nparts) {
    if (c->member != 0) return ctrl_send_to(c, NULL, type, parts, nparts);
    if (to <= 0 || to >= c->members || !c->rid || !c->rid[to].len)
        return rs_error(RS_ERR_RUNTIME, "control plane: member %d has not joined (no connection to answer on)", to);
    return ctrl_send_to(c, &c->rid[to], type, parts, nparts);
}

/* The connection message m came on (member 0: frame 0), its address in r->addr. */
static void ctrl_rid_of(Msg *m, Rid *r) {
    size_t n = m->n ? zmq_msg_size(&m->f[0]) : 0;
    if (n > sizeof r->id) n = sizeof r->id;
    r->len = n;
    if (n) memcpy(r->id, zmq_msg_data(&m->f[0]), n);
    const char *a = m->n > 1 ? zmq_msg_gets(&m->f[1], "Peer-Address") : NULL;
    snprintf(r->addr, sizeof r->addr, "%s", a ? a : "an unknown address");
}

/* 1 when message m (on member 0) came on the connection member `from` joined on. */
static int ctrl_from_member(Ctrl *c, Msg *m, int from) {
    if (!c->rid || from <= 0 || from >= c->members || !c->rid[from].len || m->n < 1) return 0;
    const Rid *r = &c->rid[from];
    return zmq_msg_size(&m->f[0]) == r->len && !memcmp(zmq_msg_data(&m->f[0]), r->id, r->len);
}

/* Parses "TYPE member token" of header frame h; returns 1 when the token matches. */
static int ctrl_parse_head(Ctrl *c, Msg *m, int h, char *type, int *member) {
    char buf[200], tok[100] = "";
    msg_text(m, h, buf, sizeof buf);
    *member = -1;
    type[0] = 0;
    if (sscanf(buf, "%15s %d %99s", type, member, tok) != 3) return 0;
    return strcmp(tok, c->token) == 0;
}

static void ctrl_missing(Ctrl *c, int upto, const int *seen, char *out, size_t len) {
    size_t k = 0;
    int count = 0;
    out[0] = 0;
    for (int i = 1; i < upto && k < len; i++) {
        if (seen[i]) continue;
        if (count++ < 8)
            k += (size_t)snprintf(out + k, len - k, "%s%s %d", count > 1 ? ", " : "",
                                  i < c->world ? "rank" : "server", i < c->world ? i : i - c->world);
    }
    if (count > 8 && k < len) snprintf(out + k, len - k, " and %d more", count - 8);
}

static const char *ctrl_who(const Ctrl *c, int member, char *buf, size_t len) {
    if (member < c->world) snprintf(buf, len, "rank %d", member);
    else snprintf(buf, len, "server %d", member - c->world);
    return buf;
}

/* What member 0 refused in handshakes while it waited, for the "did not join" error ("" if
 * nothing): "; meanwhile rank 0 refused 2 connections without this job's token (the last from
 * 127.0.0.1 as member 1)". */
static void ctrl_refusals(Ctrl *c, char *out, size_t len) {
    out[0] = 0;
    size_t k = 0;
    char from[160];
    snprintf(from, sizeof from, "%s", c->refused_from);
    ctrl_gate_look(c);
    snprintf(from, sizeof from, "%s", c->refused_from);
    unsigned long long auth = c->refused_auth + (c->gated ? 0 : secure_refused(from, sizeof from));
    if (auth) {
        k += (size_t)snprintf(out, len, "; meanwhile rank 0 refused %llu connection%s %s%s%s%s", auth,
                              auth == 1 ? "" : "s", c->gated ? "without this job's token" : "with another key than this job's --secure key",
                              from[0] ? " (the last from " : "", from, from[0] ? ")" : "");
    }
    if (c->refused_mech && k < len)
        k += (size_t)snprintf(out + k, len - k, "%s %llu connection%s with another security mechanism (--secure on "
                              "one side only?)", k ? ", and" : "; meanwhile rank 0 refused", c->refused_mech,
                              c->refused_mech == 1 ? "" : "s");
    if (c->ended && k < len)
        snprintf(out + k, len - k, "%s %llu handshake%s ended unfinished (--secure on one side only, or another key?)",
                 k ? "; and" : "; meanwhile", c->ended, c->ended == 1 ? "" : "s");
}

/* Member 0: waits for every JOIN, checks each, then welcomes all. A JOIN that passes the token
 * binds its member to the connection it came on; a second connection's JOIN as the same member
 * fails the job on both connections. */
static int ctrl_join_root(Ctrl *c, const char *canonical, double deadline) {
    int *seen = calloc((size_t)c->members, sizeof *seen);
    if (!c->rid) c->rid = calloc((size_t)c->members, sizeof *c->rid);
    if (!seen || !c->rid) {
        free(seen);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    int joined = 1, rc = RS_OK;
    char type[16], who[32];
    while (joined < c->members && rc == RS_OK) {
        Msg m;
        if (ctrl_recv(c, &m, deadline) != RS_OK) {
            char miss[256], note[400];
            ctrl_missing(c, c->members, seen, miss, sizeof miss);
            ctrl_refusals(c, note, sizeof note);
            rc = rs_error(RS_ERR_PEER, "control plane %s: %s did not join within %.0f s%s", c->where, miss, c->timeout,
                          note);
            break;
        }
        int from;
        if (m.n < 4 || !ctrl_parse_head(c, &m, 1, type, &from) || strcmp(type, "JOIN") || from <= 0 ||
            from >= c->members || (seen[from] && ctrl_from_member(c, &m, from))) {
            c->dropped++;
            msg_close(&m);
            continue;
        }
        Rid r;
        ctrl_rid_of(&m, &r);
        ctrl_who(c, from, who, sizeof who);
        char *theirs = msg_strdup(&m, 2), diff[700];
        if (!theirs) rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        else if (seen[from]) { /* the token, but another process: which one is the member cannot be told */
            char reason[400];
            snprintf(reason, sizeof reason, "%s joined twice (from %s, then from %s): start each rank once", who,
                     c->rid[from].addr, r.addr);
            const char *parts[1] = {reason};
            ctrl_send_to(c, &c->rid[from], "REFUSE", parts, 1);
            ctrl_send_to(c, &r, "REFUSE", parts, 1);
            rc = rs_error(RS_ERR_INPUT, "control plane %s: %s", c->where, reason);
        } else if (config_diff(theirs, canonical, diff, sizeof diff)) {
            char reason[900];
            snprintf(reason, sizeof reason, "%s was started with other options than rank 0: %s", who, diff);
            const char *parts[1] = {reason};
            ctrl_send_to(c, &r, "REFUSE", parts, 1);
            rc = rs_error(RS_ERR_INPUT, "refused %s", reason);
        } else {
            c->endpoints[from] = msg_strdup(&m, 3);
            c->rid[from] = r;
            seen[from] = 1;
            joined++;
        }
        free(theirs);
        msg_close(&m);
    }
    free(seen);
    if (rc != RS_OK) return rc;
    const char **parts = malloc((size_t)c->members * sizeof *parts);
    if (!parts) return rs_error(RS_ERR_RUNTIME, "out of memory");
    for (int i = 0; i < c->members; i++) parts[i] = c->endpoints[i] ? c->endpoints[i] : "";
    for (int i = 1; i < c->members && rc == RS_OK; i++) rc = ctrl_send(c, i, "WELCOME", parts, c->members);
    free(parts);
    return rc;
}

/* Other members: JOIN, then wait for WELCOME or REFUSE. */
static int ctrl_join_member(Ctrl *c, const char *canonical, const char *endpoint, double deadline) {
    const char *parts[2] = {canonical, endpoint};
    int sent = ctrl_send(c, 0, "JOIN", parts, 2); /* RS_ERR_INPUT: refused before it could go, said below */
    if (sent != RS_OK && sent != RS_ERR_INPUT) return sent;
    char type[16], buf[1024];
    for (;;) {
        Msg m = {0};
        int rc = sent == RS_ERR_INPUT ? sent : ctrl_recv(c, &m, deadline);
        if (rc == RS_ERR_INPUT && !c->refused_auth && !c->refused_mech)
            return rs_error(RS_ERR_INPUT, "control plane: rank 0 at %s ended %d handshakes with this process: give "
                            "every rank and server the same --secure KEYFILE, or none", c->where,
                            CTRL_ENDED_HANDSHAKES);
        if (rc == RS_ERR_INPUT && c->refused_mech)
            return rs_error(RS_ERR_INPUT, "control plane: rank 0 at %s uses another security mechanism: give --secure "
                            "KEYFILE to every rank and server of the job, or to none", c->where);
        if (rc == RS_ERR_INPUT && secure_on())
            return rs_error(RS_ERR_INPUT, "control plane: rank 0 at %s refused this process's key: the --secure key "
                            "file is not the job's (copy rank 0's to this host)", c->where);
        if (rc == RS_ERR_INPUT)
            return rs_error(RS_ERR_INPUT, "control plane: rank 0 at %s refused this process's job token (%s is "
                            "not rank 0's)", c->where, getenv("RINGSIDE_JOB_TOKEN") ? "RINGSIDE_JOB_TOKEN" :
                            "the token derived from the launcher's variables");
        if (rc != RS_OK)
            return rs_error(RS_ERR_PEER, "control plane: no answer from rank 0 at %s within %.0f s (is it running?)",
                            c->where, c->timeout);
        int from;
        if (m.n < 1 || !ctrl_parse_head(c, &m, 0, type, &from) || from != 0) {
            c->dropped++;
            msg_close(&m);
            continue;
        }
        if (!strcmp(type, "REFUSE")) {
            msg_text(&m, 1, buf, sizeof buf);
            msg_close(&m);
            return rs_error(RS_ERR_INPUT, "rank 0 refused this process: %s", buf);
        }
        if (!strcmp(type, "WELCOME") && m.n >= 1) {
            for (int i = 0; i + 1 < m.n && i < c->members; i++) c->endpoints[i] = msg_strdup(&m, 1 + i);
            msg_close(&m);
            for (int i = 0; i < c->members; i++)
                if (!c->endpoints[i]) return rs_error(RS_ERR_PEER, "control plane: incomplete endpoint list from rank 0");
            return RS_OK;
        }
        c->dropped++;
        msg_close(&m);
    }
}

/* 64 random bits (the kernel's; else the clock and the PID mixed). */
static unsigned long long ctrl_nonce(void) {
    unsigned long long x = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &x, sizeof x) != (ssize_t)sizeof x)
        x = (unsigned long long)(clock_now() * 1e9) ^ ((unsigned long long)getpid() << 32);
    if (fd >= 0) close(fd);
    return x * 0x9e3779b97f4a7c15ULL;
}

/* Who may connect: under --secure the job's key (CURVE, secure.c's handler); otherwise the job
 * token as a PLAIN password, which this context's gate (net/gate.h, a thread every member opens)
 * checks before the connection may send anything. 0 or RS_ERR_RUNTIME. */
static int ctrl_secure(Ctrl *c, SecureSide side) {
    if (secure_on()) return secure_socket(c->sock, side);
    RS_TRY(gate_open(c->zctx, c->token)); /* every member's context: its data sockets are gated too */
    c->gated = 1;
    char user[32];
    snprintf(user, sizeof user, "member %d", c->member);
    return gate_socket(c->zctx, c->sock, side == SECURE_BINDS, GATE_CTRL, user);
}

/* Watches c->sock's handshakes (before its bind or connect) until ctrl_monitor_stop. 0 or RS_ERR_RUNTIME. */
static int ctrl_monitor_start(Ctrl *c) {
    char ep[64];
    int linger = 0;
    snprintf(ep, sizeof ep, "inproc://ringside-ctrl-monitor-%p", (void *)c);
    if (zmq_socket_monitor(c->sock, ep, CTRL_MON_EVENTS) != 0 || !(c->mon = zmq_socket(c->zctx, ZMQ_PAIR)))
        return rs_error(RS_ERR_RUNTIME, "control plane: cannot watch the handshakes: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(c->mon, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(c->mon, ep) != 0)
        return rs_error(RS_ERR_RUNTIME, "control plane: cannot watch the handshakes: %s", zmq_strerror(zmq_errno()));
    return RS_OK;
}

static void ctrl_monitor_stop(Ctrl *c) {
    if (!c->mon) return;
    zmq_socket_monitor(c->sock, NULL, 0);
    zmq_close(c->mon);
    c->mon = NULL;
}

int ctrl_join(Ctrl **out, const RankEnv *e, void *zctx, const char *canonical, const char *endpoint,
              double timeout) {
    *out = NULL;
    Ctrl *c = calloc(1, sizeof *c);
    if (!c) return rs_error(RS_ERR_RUNTIME, "out of memory");
    c->member = e->member;
    c->world = e->world;
    c->members = e->world + e->servers;
    c->timeout = timeout;
    c->max_bytes = e->ctrl_max ? e->ctrl_max : CTRL_DEFAULT_MAX;
    snprintf(c->token, sizeof c->token, "%s", e->token[0] ? e->token : "-");
    snprintf(c->where, sizeof c->where, "tcp://%s:%d", e->addr, e->port);
    c->endpoints = calloc((size_t)c->members, sizeof *c->endpoints);
    c->zctx = zctx;
    int rc = RS_OK;
    if (!c->endpoints) {
        rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        goto err;
    }
    int linger = 2000, one = 1, hwm = CTRL_RCVHWM;
    int64_t maxmsg = (int64_t)c->max_bytes;
    double deadline = clock_now() + timeout;
    if (!(c->sock = zmq_socket(c->zctx, c->member == 0 ? ZMQ_ROUTER : ZMQ_DEALER))) {
        rc = rs_error(RS_ERR_RUNTIME, "control plane: cannot create a socket: %s", zmq_strerror(zmq_errno()));
        goto err;
    }
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg); /* a larger frame drops its connection */
    if (c->member == 0) {
        char here[300];
        snprintf(here, sizeof here, "tcp://%s:%d", e->bind[0] ? e->bind : e->addr, e->port);
        zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
        zmq_setsockopt(c->sock, ZMQ_ROUTER_HANDOVER, &one, sizeof one); /* a reconnection replaces its stale pipe */
        zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
        if ((rc = ctrl_secure(c, SECURE_BINDS)) != RS_OK) goto err;
        if ((rc = ctrl_monitor_start(c)) != RS_OK) goto err;
        if (e->agent_store) /* MASTER_PORT is torchrun's store: any free port, published there */
            snprintf(here, sizeof here, "tcp://%s:*", e->bind[0] ? e->bind : e->addr);
        if (zmq_bind(c->sock, here) != 0) {
            int en = zmq_errno();
            rc = rs_error(en == EADDRINUSE ? RS_ERR_INPUT : RS_ERR_RUNTIME, "control plane: cannot bind %s: %s%s",
                          here, zmq_strerror(en), en == EADDRINUSE ? " (MASTER_PORT in use: choose another)" : "");
            goto err;
        }
        size_t wl = sizeof c->where;
        if (e->agent_store && (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, c->where, &wl) != 0 ||
                               (rc = elastic_store_set(e->addr, e->port, e->store_key, c->where,
                                                       deadline - clock_now())) != RS_OK)) {
            char why[1024];
            snprintf(why, sizeof why, "%s", rc == RS_OK ? zmq_strerror(zmq_errno()) : rs_errmsg());
            if (rc == RS_OK) rc = rs_error(RS_ERR_RUNTIME, "control plane: cannot read the port bound: %s", why);
            else rs_error(rc, "control plane: cannot publish %s for the other ranks: %s", c->where, why);
            goto err;
        }
        c->endpoints[0] = strdup(endpoint ? endpoint : "");
        rc = ctrl_join_root(c, canonical, deadline);
    } else {
        /* an identity nobody can guess: a process that connects first under a member's name
         * takes nothing from it (rank 0 knows a member by the connection its JOIN came on) */
        char id[48];
        snprintf(id, sizeof id, "m%d.%016llx", c->member, ctrl_nonce());
        zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, id, strlen(id));
        if (e->agent_store) { /* rank 0 publishes where it bound in torchrun's store */
            char got[sizeof c->where];
            if ((rc = elastic_store_get(e->addr, e->port, e->store_key, got, sizeof got, deadline - clock_now())) != RS_OK) {
                char why[1024];
                snprintf(why, sizeof why, "%s", rs_errmsg());
                rs_error(rc, "control plane: no address from rank 0 (it publishes it under '%s'): %s", e->store_key, why);
                goto err;
            }
            if (strncmp(got, "tcp://", 6) != 0) {
                rc = rs_error(RS_ERR_PEER, "control plane: torchrun's store %s:%d holds '%s' under '%s', not an address",
                              e->addr, e->port, got, e->store_key);
                goto err;
            }
            snprintf(c->where, sizeof c->where, "%s", got);
        }
        if ((rc = ctrl_secure(c, SECURE_CONNECTS)) != RS_OK) goto err;
        if ((rc = ctrl_monitor_start(c)) != RS_OK) goto err;
        if ((rc = zmqCheck(zmq_connect(c->sock, c->where))) != RS_OK) goto err;
        rc = ctrl_join_member(c, canonical, endpoint ? endpoint : "", deadline);
    }
    ctrl_monitor_stop(c); /* its events are read only here: unread, they would stall ZeroMQ's I/O thread */
    if (rc != RS_OK && c->member != 0) { /* its JOIN is of no use now: do not keep reconnecting to deliver it */
        int zero = 0;
        zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    }
    if (rc != RS_OK) goto err;
    *out = c;
    return RS_OK;
err:
    ctrl_close(c);
    return rc;
}

const char *ctrl_endpoint(const Ctrl *c, int member) {
    if (member < 0 || member >= c->members || !c->endpoints[member]) return "";
    return c->endpoints[member];
}

char *const *ctrl_endpoints(const Ctrl *c) { return c->endpoints; }
int ctrl_members(const Ctrl *c) { return c->members; }
void *ctrl_zmq(const Ctrl *c) { return c->zctx; }

/* One collective round: every member sends `type` with an optional text to member 0, which
 * collects them (texts into all[] when non-NULL) and answers each with `reply`. */
static int ctrl_round(Ctrl *c, int upto, const char *type, const char *reply, const char *mine, char **all) {
    double deadline = clock_now() + c->timeout;
    char t[16], who[32];
    if (c->member != 0) {
        const char *parts[1] = {mine};
        RS_TRY(ctrl_send(c, 0, type, parts, mine ? 1 : 0));
        for (;;) {
            Msg m;
            if (ctrl_recv(c, &m, deadline) != RS_OK)
                return rs_error(RS_ERR_PEER, "control plane %s: rank 0 did not answer %s within %.0f s", c->where,
                                type, c->timeout);
            int from;
            int head = m.n >= 1 && ctrl_parse_head(c, &m, 0, t, &from) && from == 0;
            msg_close(&m);
            if (head && !strcmp(t, reply)) return RS_OK;
            if (head && !strcmp(t, "END"))
                return rs_error(RS_ERR_PEER, "control plane %s: rank 0 ended the job before answering %s", c->where, type);
            c->dropped++;
        }
    }
    if (!c->later) c->later = calloc((size_t)c->members, sizeof *c->later);
    if (!c->spare) c->spare = calloc((size_t)c->members, sizeof *c->spare);
    int *seen = calloc((size_t)c->members, sizeof *seen);
    if (!seen || !c->later || !c->spare) {
        free(seen);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    if (all) all[0] = strdup(mine ? mine : "");
    /* what came during the last round for this one goes first; what comes now for the next one
     * (one message a member at most: a member waits for the answer to its last) goes aside */
    Msg *early = c->later, *keep = c->spare;
    int nearly = c->nlater, nkeep = 0, next = 0;
    c->later = keep;
    c->spare = early;
    c->nlater = 0;
    int got = 1, rc = RS_OK;
    while (got < upto) {
        Msg m;
        if (next < nearly) {
            m = early[next++];
        } else if (ctrl_recv(c, &m, deadline) != RS_OK) {
            char miss[256];
            ctrl_missing(c, upto, seen, miss, sizeof miss);
            rc = rs_error(RS_ERR_PEER, "control plane: %s did not reach %s within %.0f s (dead or hung?)", miss,
                          type, c->timeout);
            break;
        }
        int from;
        int head = m.n >= 2 && ctrl_parse_head(c, &m, 1, t, &from);
        head = head && ctrl_from_member(c, &m, from); /* on the connection `from` joined on */
        if (head && from >= upto && nkeep < c->members) { /* not this round's member */
            keep[nkeep++] = m;
            continue;
        }
        if (!head || strcmp(t, type) || from >= upto || seen[from]) {
            c->dropped++;
            msg_close(&m);
            continue;
        }
        if (all) all[from] = msg_strdup(&m, 2);
        seen[from] = 1;
        got++;
        msg_close(&m);
    }
    free(seen);
    c->nlater = nkeep;
    while (next < nearly) msg_close(&early[next++]); /* a failed round: the rest is stale */
    for (int i = 1; i < upto && rc == RS_OK; i++) {
        rc = ctrl_send(c, i, reply, NULL, 0);
        if (rc) rc = rs_error(RS_ERR_PEER, "control plane: cannot answer %s: %s", ctrl_who(c, i, who, sizeof who), rs_errmsg());
    }
    return rc;
}

int ctrl_barrier(Ctrl *c) { return ctrl_round(c, c->members, "BARRIER", "RELEASE", NULL, NULL); }

int ctrl_barrier_workers(Ctrl *c) {
    if (c->member >= c->world) return rs_error(RS_ERR_RUNTIME, "control plane: a worker barrier on a server");
    return ctrl_round(c, c->world, "BARRIER", "RELEASE", NULL, NULL);
}

/* A member's side of ctrl_clock_offsets: answers PINGs with its clock until CLOCKEND. */
static int ctrl_clock_answer(Ctrl *c) {
    double deadline = clock_now() + c->timeout;
    char t[16], text[64];
    for (;;) {
        Msg m;
        if (ctrl_recv(c, &m, deadline) != RS_OK)
            return rs_error(RS_ERR_PEER, "control plane %s: rank 0 did not finish the clock exchange within %.0f s",
                            c->where, c->timeout);
        int from;
        int ok = m.n >= 1 && ctrl_parse_head(c, &m, 0, t, &from) && from == 0;
        msg_close(&m);
        if (!ok || (strcmp(t, "PING") && strcmp(t, "CLOCKEND"))) {
            c->dropped++;
            continue;
        }
        if (!strcmp(t, "CLOCKEND")) return RS_OK;
        snprintf(text, sizeof text, "%.9f", clock_now());
        const char *parts[1] = {text};
        RS_TRY(ctrl_send(c, 0, "PONG", parts, 1));
    }
}

int ctrl_clock_offsets(Ctrl *c, int upto, int rounds, double *offset, double *uncertainty) {
    if (upto > c->members) upto = c->members;
    if (c->member >= upto) return RS_OK;
    if (c->member != 0) return ctrl_clock_answer(c);
    char t[16], who[32], text[64];
    offset[0] = uncertainty[0] = 0;
    for (int i = 1; i < upto; i++) {
        double best = -1;
        for (int k = 0; k < rounds; k++) {
            double s1 = clock_now(), deadline = s1 + c->timeout;
            RS_TRY(ctrl_send(c, i, "PING", NULL, 0));
            for (;;) {
                Msg m;
                if (ctrl_recv(c, &m, deadline) != RS_OK)
                    return rs_error(RS_ERR_PEER, "control plane: %s did not answer the clock exchange within %.0f s",
                                    ctrl_who(c, i, who, sizeof who), c->timeout);
                double s2 = clock_now();
                int from, ok = m.n >= 3 && ctrl_parse_head(c, &m, 1, t, &from) && from == i && !strcmp(t, "PONG") &&
                               ctrl_from_member(c, &m, i);
                if (ok) msg_text(&m, 2, text, sizeof text);
                msg_close(&m);
                if (!ok) {
                    c->dropped++;
                    continue;
                }
                double theirs = strtod(text, NULL), rtt = s2 - s1;
                if (best < 0 || rtt < best) {
                    best = rtt;
                    offset[i] = theirs - 0.5 * (s1 + s2);
                    uncertainty[i] = 0.5 * rtt;
                }
                break;
            }
        }
    }
    for (int i = 1; i < upto; i++) RS_TRY(ctrl_send(c, i, "CLOCKEND", NULL, 0));
    return RS_OK;
}

/* ctrl_gather among members [0, upto). */
static int ctrl_gather_upto(Ctrl *c, int upto, const char *mine, char ***all) {
    *all = NULL;
    char **texts = NULL;
    if (c->member == 0) {
        texts = calloc((size_t)c->members, sizeof *texts);
        if (!texts) return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    int rc = ctrl_round(c, upto, "GATHER", "GOT", mine, texts);
    if (rc != RS_OK) {
        ctrl_free_texts(texts, c->members);
        return rc;
    }
    *all = texts;
    return RS_OK;
}

int ctrl_gather(Ctrl *c, const char *mine, char ***all) { return ctrl_gather_upto(c, c->members, mine, all); }

int ctrl_gather_workers(Ctrl *c, const char *mine, char ***all) {
    *all = NULL;
    if (c->member >= c->world) return rs_error(RS_ERR_RUNTIME, "control plane: a worker gather on a server");
    return ctrl_gather_upto(c, c->world, mine, all);
}

void ctrl_free_texts(char **all, int n) {
    if (!all) return;
    for (int i = 0; i < n; i++) free(all[i]);
    free(all);
}

/* Member 0: END to every joined member, without waiting for room (a member that is gone, or
 * whose queue is full, goes without): a member still in the job learns it has ended. */
static void ctrl_end_all(Ctrl *c) {
    char head[160];
    snprintf(head, sizeof head, "END 0 %s", c->token);
    for (int i = 1; c->rid && i < c->members; i++) {
        if (!c->rid[i].len || zmq_send(c->sock, c->rid[i].id, c->rid[i].len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) continue;
        if (zmq_send(c->sock, head, strlen(head), 0) >= 0) c->messages++; /* the frames after the first always go */
    }
}

int ctrl_ended(Ctrl *c) {
    char t[16];
    while (c && c->member != 0) {
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 0) <= 0 || !(it.revents & ZMQ_POLLIN)) return 0;
        Msg m;
        if (ctrl_recv(c, &m, clock_now() + 1) != RS_OK) return 0; /* a message is whole once it polls in */
        int from, end = m.n >= 1 && ctrl_parse_head(c, &m, 0, t, &from) && from == 0 && !strcmp(t, "END");
        msg_close(&m);
        if (end) return 1;
        c->dropped++; /* nothing else comes between rounds: a round would drop it too */
    }
    return 0;
}

void ctrl_close(Ctrl *c) {
    if (!c) return;
    if (c->member == 0 && c->sock) ctrl_end_all(c);
    for (int i = 0; i < c->nlater; i++) msg_close(&c->later[i]);
    free(c->later);
    free(c->spare);
    free(c->rid);
    ctrl_monitor_stop(c);
    if (c->sock) zmq_close(c->sock);
    if (c->gated) gate_close(c->zctx);
    if (c->endpoints)
        for (int i = 0; i < c->members; i++) free(c->endpoints[i]);
    free(c->endpoints);
    free(c);
}

void ctrl_counters(const Ctrl *c, unsigned long long *messages, unsigned long long *dropped) {
    *messages = c->messages;
    *dropped = c->dropped;
}

