/* msgsock.c - the message layer's sockets (net/msg.h): set-up with the gate, CURVE and every option; bind, connect, close; errors; the queue bound */
#include "msg.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "../base/err.h"
#include "gate.h"
#include "msgdirect.h"
#include "secure.h"
#include "zmq_check.h"

/* ---- Helpers ---- */

/* Sets an int option. 0, or RS_ERR_RUNTIME naming it. */
static int msgsock_int(void *sock, int option, const char *name, int value) {
    return zmq_check_at(zmq_setsockopt(sock, option, &value, sizeof value), name, __FILE__, __LINE__);
}

/* Every option of s on sock, and its place behind CURVE and the gate. 0 or RS_ERR_*. */
static int msgsock_setup(void *zctx, void *sock, const MsgSocketSpec *s) {
    RS_TRY(secure_socket(sock, s->binds ? SECURE_BINDS : SECURE_CONNECTS));
    if (!s->ungated) RS_TRY(gate_socket(zctx, sock, s->binds, GATE_DATA, s->user));
    RS_TRY(msgsock_int(sock, ZMQ_LINGER, "ZMQ_LINGER", s->linger_ms));
    RS_TRY(msgsock_int(sock, ZMQ_SNDHWM, "ZMQ_SNDHWM", 0)); /* a send never waits for room */
    if (s->sndtimeo_ms > 0) RS_TRY(msgsock_int(sock, ZMQ_SNDTIMEO, "ZMQ_SNDTIMEO", s->sndtimeo_ms));
    if (s->type != ZMQ_PUSH) {
        if (s->rcv_queue < 1)
            return rs_error(RS_ERR_RUNTIME, "msg_socket: a receiving socket without a queue bound (rcv_queue %d)", s->rcv_queue);
        RS_TRY(msgsock_int(sock, ZMQ_RCVHWM, "ZMQ_RCVHWM", s->rcv_queue));
        if (s->max_frame) RS_TRY(zmqCheck(msg_bound(sock, s->max_frame)));
    }
    if (s->id) RS_TRY(zmqCheck(zmq_setsockopt(sock, ZMQ_ROUTING_ID, s->id, s->idlen)));
    if (s->mandatory) RS_TRY(msgsock_int(sock, ZMQ_ROUTER_MANDATORY, "ZMQ_ROUTER_MANDATORY", 1));
    return RS_OK;
}

/* ---- Public ---- */

static MsgLayer msgsock_layer = MSG_ZEROMQ;

int msg_layer_parse(const char *text, MsgLayer *out) {
    if (text && !strcmp(text, "zeromq")) *out = MSG_ZEROMQ;
    else if (text && !strcmp(text, "direct")) *out = MSG_DIRECT;
    else return rs_error(RS_ERR_INPUT, "--msg-layer '%s': expected zeromq or direct", text ? text : "");
    return RS_OK;
}

void msg_layer_set(MsgLayer layer) { __atomic_store_n(&msgsock_layer, layer, __ATOMIC_RELAXED); }

MsgLayer msg_layer_get(void) { return __atomic_load_n(&msgsock_layer, __ATOMIC_RELAXED); }

void *msg_context(void) { return zmq_ctx_new(); }

void msg_context_end(void *zctx) {
    if (zctx) zmq_ctx_term(zctx);
}

int msg_socket(void *zctx, const MsgSocketSpec *s, void **sock) {
    if (msg_layer_get() == MSG_DIRECT) return msgd_socket(zctx, s, sock);
    *sock = zmq_socket(zctx, s->type);
    if (!*sock) return zmqCheck(-1);
    int rc = msgsock_setup(zctx, *sock, s);
    if (rc != RS_OK) {
        msg_close_socket(*sock, 1);
        *sock = NULL;
    }
    return rc;
}

void msg_close_socket(void *sock, int drop) {
    if (!sock) return;
    if (msgd_is(sock)) {
        msgd_close(sock, drop);
        return;
    }
    if (drop) {
        int zero = 0;
        zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    }
    zmq_close(sock);
}

int msg_bind(void *sock, const char *endpoint, char *bound, size_t len) {
    if (msgd_is(sock)) return msgd_bind(sock, endpoint, bound, len);
    if (zmq_bind(sock, endpoint) != 0) return -1;
    if (bound && zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, bound, &len) != 0) return -1;
    return 0;
}

int msg_connect(void *sock, const char *endpoint) { return msgd_is(sock) ? msgd_connect(sock, endpoint) : zmq_connect(sock, endpoint); }

int msg_errno(void) { return zmq_errno(); }

const char *msg_strerror(int e) { return zmq_strerror(e); }

int msg_queue_bound(size_t in_flight) {
    if (in_flight > INT_MAX / 4) return INT_MAX;
    int q = 4 * (int)in_flight;
    return q < MSG_QUEUE_FLOOR ? MSG_QUEUE_FLOOR : q;
}
