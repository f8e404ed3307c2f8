/* gate.c - the job token checked in every handshake a context accepts: one ZAP handler thread per context (net/gate.h) */
#include "gate.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "../base/err.h"
#include "../base/log.h"
#include "secure.h"
#include "zap.h"

/* ---- Types ---- */

#define GATE_MAX 64                            /* contexts with a gate at once (a process has one; tests a few) */

static const char *const gate_domains[2] = {"ringside-ctrl", "ringside-data"};

typedef struct {
    void *zctx;          /* NULL: a free slot */
    int refs;
    void *rep;           /* the handler's REP socket */
    pthread_t thread;
    int stop;            /* __atomic: the loop ends at its next look */
    char token[96];
    unsigned long long refused[2];
    char from[2][160];   /* the last refused peer per domain: "ADDRESS as USER" */
} Gate;

static Gate gates[GATE_MAX];
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- Helpers ---- */

/* zctx's slot, or NULL (gate_mu held). */
static Gate *gate_find(void *zctx) {
    for (int i = 0; i < GATE_MAX; i++)
        if (gates[i].zctx == zctx && zctx) return &gates[i];
    return NULL;
}

static int gate_frame_is(zmq_msg_t *f, const char *text) {
    size_t n = strlen(text);
    return zmq_msg_size(f) == n && !memcmp(zmq_msg_data(f), text, n);
}

/* The text of frame f, printable, at most max bytes, into out. */
static void gate_text(zmq_msg_t *f, int max, char *out, size_t len) {
    int n = (int)zmq_msg_size(f) < max ? (int)zmq_msg_size(f) : max;
    snprintf(out, len, "%.*s", n, n ? (const char *)zmq_msg_data(f) : "");
    for (char *p = out; *p; p++)
        if (*p < 32 || *p > 126) *p = '?';
}

/* Counts a refusal of from in g's domain d; the data plane's first is logged (the control plane
 * says its own, naming its endpoint: net/ctrl.c). */
static void gate_refusal(Gate *g, int d, const char *from, const char *why) {
    pthread_mutex_lock(&gate_mu);
    unsigned long long first = g->refused[d]++ == 0;
    snprintf(g->from[d], sizeof g->from[d], "%s", from);
    pthread_mutex_unlock(&gate_mu);
    if (first && d == GATE_DATA) log_warn("data plane: refused a connection from %s: %s", from, why);
}

/* Answers one ZAP request: version, request id, domain, address, identity, mechanism, then the
 * mechanism's credentials (PLAIN: username, password). Admits PLAIN with the token. */
static void gate_one(void *arg) {
    Gate *g = arg;
    zmq_msg_t f[8];
    int n = zap_take(g->rep, f, 8);
    if (n < 2) { /* no request id to answer */
        for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
        return;
    }
    int d = n > 2 && gate_frame_is(&f[2], gate_domains[GATE_DATA]) ? GATE_DATA : GATE_CTRL;
    int ok = n == 8 && gate_frame_is(&f[5], "PLAIN") && gate_frame_is(&f[7], g->token);
    zap_answer(g->rep, f, ok, "not this job's token");
    if (!ok) {
        char addr[64] = "", user[48] = "", from[160];
        if (n > 3) gate_text(&f[3], 63, addr, sizeof addr);
        if (n > 6) gate_text(&f[6], 40, user, sizeof user);
        snprintf(from, sizeof from, "%s%s%s", addr, user[0] ? " as " : "", user);
        gate_refusal(g, d, from, "not this job's token");
    }
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}

static void *gate_loop(void *arg) {
    Gate *g = arg;
    zap_loop(g->rep, &g->stop, gate_one, g);
    return NULL;
}

/* ---- Public ---- */

int gate_open(void *zctx, const char *token) {
    if (secure_on()) return RS_OK; /* CURVE's handler owns the endpoint */
    if (!zctx || !token || !*token || strlen(token) >= sizeof gates[0].token)
        return rs_error(RS_ERR_RUNTIME, "gate: no context or no usable job token");
    pthread_mutex_lock(&gate_mu);
    Gate *g = gate_find(zctx);
    if (g) {
        int same = !strcmp(g->token, token);
        if (same) g->refs++;
        pthread_mutex_unlock(&gate_mu);
        return same ? RS_OK : rs_error(RS_ERR_RUNTIME, "gate: this ZeroMQ context already checks another job's token");
    }
    for (int i = 0; i < GATE_MAX && !g; i++)
        if (!gates[i].zctx) g = &gates[i];
    if (!g) {
        pthread_mutex_unlock(&gate_mu);
        return rs_error(RS_ERR_RUNTIME, "gate: more than %d ZeroMQ contexts with a gate in this process", GATE_MAX);
    }
    memset(g, 0, sizeof *g);
    int linger = 0;
    g->rep = zmq_socket(zctx, ZMQ_REP);
    if (!g->rep || zmq_setsockopt(g->rep, ZMQ_LINGER, &linger, sizeof linger) != 0 || zmq_bind(g->rep, ZAP_ENDPOINT) != 0) {
        int e = zmq_errno();
        if (g->rep) zmq_close(g->rep);
        g->rep = NULL;
        pthread_mutex_unlock(&gate_mu);
        return rs_error(RS_ERR_RUNTIME, "gate: cannot start the token check (%s): %s", ZAP_ENDPOINT, zmq_strerror(e));
    }
    snprintf(g->token, sizeof g->token, "%s", token);
    if (pthread_create(&g->thread, NULL, gate_loop, g) != 0) {
        zmq_close(g->rep);
        g->rep = NULL;
        pthread_mutex_unlock(&gate_mu);
        return rs_error(RS_ERR_RUNTIME, "gate: cannot start the token check's thread");
    }
    g->zctx = zctx;
    g->refs = 1;
    pthread_mutex_unlock(&gate_mu);
    return RS_OK;
}

void gate_close(void *zctx) {
    pthread_mutex_lock(&gate_mu);
    Gate *g = gate_find(zctx);
    if (!g || --g->refs > 0) {
        pthread_mutex_unlock(&gate_mu);
        return;
    }
    __atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&gate_mu);
    pthread_join(g->thread, NULL); /* the loop wakes within 100 ms */
    zmq_close(g->rep);
    pthread_mutex_lock(&gate_mu);
    g->rep = NULL;
    g->zctx = NULL;
    pthread_mutex_unlock(&gate_mu);
}

int gate_on(void *zctx) {
    pthread_mutex_lock(&gate_mu);
    int on = gate_find(zctx) != NULL;
    pthread_mutex_unlock(&gate_mu);
    return on;
}

int gate_socket(void *zctx, void *sock, int binds, GateDomain d, const char *user) {
    char token[96];
    pthread_mutex_lock(&gate_mu);
    Gate *g = gate_find(zctx);
    if (g) snprintf(token, sizeof token, "%s", g->token);
    pthread_mutex_unlock(&gate_mu);
    if (!g) return RS_OK;
    int one = 1, rc = 0;
    if (binds) {
        rc |= zmq_setsockopt(sock, ZMQ_PLAIN_SERVER, &one, sizeof one);
        rc |= zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, gate_domains[d], strlen(gate_domains[d]));
    } else {
        const char *u = user && *user ? user : "member";
        rc |= zmq_setsockopt(sock, ZMQ_PLAIN_USERNAME, u, strlen(u));
        rc |= zmq_setsockopt(sock, ZMQ_PLAIN_PASSWORD, token, strlen(token));
    }
    return rc ? rs_error(RS_ERR_RUNTIME, "gate: cannot put a socket behind the job token: %s", zmq_strerror(zmq_errno()))
              : RS_OK;
}

unsigned long long gate_refused(void *zctx, GateDomain d, char *from, size_t len) {
    pthread_mutex_lock(&gate_mu);
    Gate *g = gate_find(zctx);
    unsigned long long n = g ? g->refused[d] : 0;
    if (n && from && len) snprintf(from, len, "%s", g->from[d]);
    pthread_mutex_unlock(&gate_mu);
    return n;
}

int gate_token(void *zctx, char *out, size_t len) {
    pthread_mutex_lock(&gate_mu);
    Gate *g = gate_find(zctx);
    if (g) snprintf(out, len, "%s", g->token);
    else if (len) out[0] = 0;
    pthread_mutex_unlock(&gate_mu);
    return g != NULL;
}

void gate_note_refused(void *zctx, GateDomain d, const char *from, const char *why) {
    pthread_mutex_lock(&gate_mu);
    Gate *g = gate_find(zctx);
    pthread_mutex_unlock(&gate_mu);
    if (g) gate_refusal(g, d, from, why);
    else log_warn("data plane: refused a connection from %s: %s", from, why);
}
