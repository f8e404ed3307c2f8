/* ctrl.c - the control plane over ZeroMQ: join with token and configuration check, endpoints, barrier, gather */
#include "ctrl.h"
#include "clock.h"
#include "config.h"
#include "err.h"
#include "log.h"
#include "secure.h"
#include "zmq_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTRL_MAX_FRAMES 1024

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

/* Receives one whole message within deadline (monotonic seconds). 0, or RS_ERR_PEER on timeout. */
static int ctrl_recv(Ctrl *c, Msg *m, double deadline) {
    *m = (Msg){0};
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0) return RS_ERR_PEER;
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, (long)(left * 1000) + 1);
        if (rc < 0) {
            if (zmq_errno() == EINTR) continue;
            return zmqCheck(rc);
        }
        if (rc == 0) continue;
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

/* Sends frames (to identity `to` first when member 0). 0 or RS_ERR_RUNTIME. */
static int ctrl_send(Ctrl *c, int to, const char *type, const char *const *parts, int nparts) {
    char head[160], id[16];
    snprintf(head, sizeof head, "%s %d %s", type, c->member, c->token);
    if (c->member == 0) {
        snprintf(id, sizeof id, "m%d", to);
        if (zmq_send(c->sock, id, strlen(id), ZMQ_SNDMORE) < 0) return zmqCheck(-1);
    }
    if (zmq_send(c->sock, head, strlen(head), nparts ? ZMQ_SNDMORE : 0) < 0) return zmqCheck(-1);
    for (int i = 0; i < nparts; i++)
        if (zmq_send(c->sock, parts[i], strlen(parts[i]), i + 1 < nparts ? ZMQ_SNDMORE : 0) < 0)
            return zmqCheck(-1);
    c->messages++;
    return RS_OK;
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

/* Member 0: waits for every JOIN, checks each, then welcomes all. */
static int ctrl_join_root(Ctrl *c, const char *canonical, double deadline) {
    int *seen = calloc((size_t)c->members, sizeof *seen);
    if (!seen) return rs_error(RS_ERR_RUNTIME, "out of memory");
    int joined = 1, rc = RS_OK;
    char type[16], who[32];
    while (joined < c->members && rc == RS_OK) {
        Msg m;
        if (ctrl_recv(c, &m, deadline) != RS_OK) {
            char miss[256];
            ctrl_missing(c, c->members, seen, miss, sizeof miss);
            rc = rs_error(RS_ERR_PEER, "control plane %s: %s did not join within %.0f s", c->where, miss, c->timeout);
            break;
        }
        int from;
        if (m.n < 4 || !ctrl_parse_head(c, &m, 1, type, &from) || strcmp(type, "JOIN") || from <= 0 ||
            from >= c->members || seen[from]) {
            c->dropped++;
            msg_close(&m);
            continue;
        }
        char *theirs = msg_strdup(&m, 2), diff[700];
        if (!theirs) rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        else if (config_diff(theirs, canonical, diff, sizeof diff)) {
            char reason[900];
            snprintf(reason, sizeof reason, "%s was started with other options than rank 0: %s",
                     ctrl_who(c, from, who, sizeof who), diff);
            const char *parts[1] = {reason};
            ctrl_send(c, from, "REFUSE", parts, 1);
            rc = rs_error(RS_ERR_INPUT, "refused %s", reason);
        } else {
            c->endpoints[from] = msg_strdup(&m, 3);
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
    RS_TRY(ctrl_send(c, 0, "JOIN", parts, 2));
    char type[16], buf[1024];
    for (;;) {
        Msg m;
        if (ctrl_recv(c, &m, deadline) != RS_OK)
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

int ctrl_join(Ctrl **out, const RankEnv *e, void *zctx, const char *canonical, const char *endpoint,
              double timeout) {
    *out = NULL;
    Ctrl *c = calloc(1, sizeof *c);
    if (!c) return rs_error(RS_ERR_RUNTIME, "out of memory");
    c->member = e->member;
    c->world = e->world;
    c->members = e->world + e->servers;
    c->timeout = timeout;
    snprintf(c->token, sizeof c->token, "%s", e->token[0] ? e->token : "-");
    snprintf(c->where, sizeof c->where, "tcp://%s:%d", e->addr, e->port);
    c->endpoints = calloc((size_t)c->members, sizeof *c->endpoints);
    c->zctx = zctx;
    int rc = RS_OK;
    if (!c->endpoints) {
        rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        goto err;
    }
    int linger = 2000, one = 1;
    double deadline = clock_now() + timeout;
    if (c->member == 0) {
        char here[300];
        snprintf(here, sizeof here, "tcp://%s:%d", e->bind[0] ? e->bind : e->addr, e->port);
        c->sock = zmq_socket(c->zctx, ZMQ_ROUTER);
        zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
        if ((rc = secure_socket(c->sock, SECURE_BINDS)) != RS_OK) goto err;
        if (zmq_bind(c->sock, here) != 0) {
            int en = zmq_errno();
            rc = rs_error(en == EADDRINUSE ? RS_ERR_INPUT : RS_ERR_RUNTIME, "control plane: cannot bind %s: %s%s",
                          here, zmq_strerror(en), en == EADDRINUSE ? " (MASTER_PORT in use: choose another)" : "");
            goto err;
        }
        c->endpoints[0] = strdup(endpoint ? endpoint : "");
        rc = ctrl_join_root(c, canonical, deadline);
    } else {
        char id[16];
        snprintf(id, sizeof id, "m%d", c->member);
        c->sock = zmq_socket(c->zctx, ZMQ_DEALER);
        zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, id, strlen(id));
        if ((rc = secure_socket(c->sock, SECURE_CONNECTS)) != RS_OK) goto err;
        if ((rc = zmqCheck(zmq_connect(c->sock, c->where))) != RS_OK) goto err;
        rc = ctrl_join_member(c, canonical, endpoint ? endpoint : "", deadline);
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
            int ok = m.n >= 1 && ctrl_parse_head(c, &m, 0, t, &from) && from == 0 && !strcmp(t, reply);
            msg_close(&m);
            if (ok) return RS_OK;
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
        if (head && from >= upto && from < c->members && nkeep < c->members) { /* not this round's member */
            keep[nkeep++] = m;
            continue;
        }
        if (!head || strcmp(t, type) || from <= 0 || from >= upto || seen[from]) {
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
                int from, ok = m.n >= 3 && ctrl_parse_head(c, &m, 1, t, &from) && from == i && !strcmp(t, "PONG");
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

void ctrl_close(Ctrl *c) {
    if (!c) return;
    for (int i = 0; i < c->nlater; i++) msg_close(&c->later[i]);
    free(c->later);
    free(c->spare);
    if (c->sock) zmq_close(c->sock);
    if (c->endpoints)
        for (int i = 0; i < c->members; i++) free(c->endpoints[i]);
    free(c->endpoints);
    free(c);
}

void ctrl_counters(const Ctrl *c, unsigned long long *messages, unsigned long long *dropped) {
    *messages = c->messages;
    *dropped = c->dropped;
}
