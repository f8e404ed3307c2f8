/* fuzz_ctrl.c - libFuzzer harness: the control plane's message handling (JOIN, GATHER/BARRIER rounds, WELCOME) over in-process sockets */
#include "fuzz.h"

/* The receive loops and header parsing are static: include the control plane itself, so that
 * the code under test is what ringside runs (net/ctrl.o is then not linked). */
#include "../../net/ctrl.c"

#define FZ_TOKEN "0123456789abcdef"
#define FZ_MEMBERS 3 /* two workers and one dedicated server */
#define FZ_MAX_MSGS 32

static void *fz_zctx;
static char fz_canon[8192];
/* Sockets live across executions (creating and closing them per input would cost milliseconds);
 * every execution starts with their queues drained, so inputs do not see each other. */
static void *fz_root, *fz_peer[2];      /* rank 0's ROUTER under test; members 1 and 2 (harness) */
static void *fz_hroot, *fz_member;      /* rank 0 (harness); member 1's DEALER under test */

static void *fz_socket(int type, const char *id) {
    int zero = 0, one = 1;
    void *s = zmq_socket(fz_zctx, type);
    if (!s) abort();
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    if (type == ZMQ_ROUTER) zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    if (id) zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id));
    return s;
}

/* Receives and drops everything queued on sock. */
static void fz_drain(void *sock) {
    char buf[64];
    while (zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT) >= 0) {}
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (!(fz_zctx = zmq_ctx_new())) abort();
    Config c;
    config_defaults(&c);
    config_canonical(&c, fz_canon, sizeof fz_canon);
    fz_root = fz_socket(ZMQ_ROUTER, NULL);
    fz_hroot = fz_socket(ZMQ_ROUTER, NULL);
    if (zmq_bind(fz_root, "inproc://fuzz-ctrl-root") || zmq_bind(fz_hroot, "inproc://fuzz-ctrl-member")) abort();
    fz_peer[0] = fz_socket(ZMQ_DEALER, "m1");
    fz_peer[1] = fz_socket(ZMQ_DEALER, "m2");
    fz_member = fz_socket(ZMQ_DEALER, "m1");
    if (zmq_connect(fz_peer[0], "inproc://fuzz-ctrl-root") || zmq_connect(fz_peer[1], "inproc://fuzz-ctrl-root") ||
        zmq_connect(fz_member, "inproc://fuzz-ctrl-member"))
        abort();
    int events;
    size_t elen = sizeof events;
    zmq_getsockopt(fz_root, ZMQ_EVENTS, &events, &elen); /* the routers attach their peers now */
    zmq_getsockopt(fz_hroot, ZMQ_EVENTS, &events, &elen);
    return 0;
}

/* Sends the frames of a text message ("HEAD", parts...) on sock, to identity `to` first when given. */
static void fz_send_text(void *sock, const char *to, const char *const *parts, int n) {
    if (to) zmq_send(sock, to, strlen(to), ZMQ_SNDMORE);
    for (int i = 0; i < n; i++) zmq_send(sock, parts[i], strlen(parts[i]), i + 1 < n ? ZMQ_SNDMORE : 0);
}

/* Sends the input's messages: each a flags byte (bit 0: from/to peer 1 or 2; bits 1-3: frames
 * 1-8), then length-prefixed frames. */
static void fz_send_input(void *const *peer, const char *const *ids, const uint8_t *p, size_t left) {
    for (int k = 0; k < FZ_MAX_MSGS && left > 0; k++) {
        uint8_t flags = *p++;
        left--;
        int who = flags & 1, frames = 1 + ((flags >> 1) & 7);
        if (ids) zmq_send(peer[0], ids[who], strlen(ids[who]), ZMQ_SNDMORE);
        for (int i = 0; i < frames; i++) {
            size_t flen;
            const uint8_t *f = fz_take(&p, &left, &flen);
            zmq_send(ids ? peer[0] : peer[who], f, flen, i + 1 < frames ? ZMQ_SNDMORE : 0);
        }
    }
}

/* Byte 0 picks the side: 0 rank 0's JOIN loop, 1 its GATHER round, 2 its BARRIER round, 3 a
 * member waiting for WELCOME. The fuzzed messages go first; then the messages a healthy job
 * sends, so that every run ends without waiting for the deadline (or, in the JOIN loop, with
 * RS_ERR_INPUT: a fuzzed JOIN of a member on the other peer's connection makes it join twice). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] & 3;
    char head[64];
    void *socks[5] = {fz_root, fz_peer[0], fz_peer[1], fz_hroot, fz_member};
    for (int i = 0; i < 5; i++) fz_drain(socks[i]);
    Ctrl *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->zctx = fz_zctx;
    c->members = FZ_MEMBERS;
    c->world = 2;
    c->timeout = 5;
    c->max_bytes = CTRL_DEFAULT_MAX;
    snprintf(c->token, sizeof c->token, "%s", FZ_TOKEN);
    snprintf(c->where, sizeof c->where, "inproc://fuzz-ctrl");
    c->endpoints = calloc(FZ_MEMBERS, sizeof *c->endpoints);
    if (!c->endpoints) abort();
    double t0 = clock_now(), deadline = t0 + c->timeout;
    int rc;
    if (mode < 3) { /* this process is rank 0; the harness plays members 1 and 2 */
        c->member = 0;
        c->sock = fz_root;
        fz_send_input(fz_peer, NULL, data + 1, size - 1);
        if (mode > 0) { /* the rounds: members 1 and 2 joined on the harness's two connections */
            if (!(c->rid = calloc(FZ_MEMBERS, sizeof *c->rid))) abort();
            for (int i = 1; i < FZ_MEMBERS; i++) {
                c->rid[i].len = 2;
                memcpy(c->rid[i].id, i == 1 ? "m1" : "m2", 2);
            }
        }
        for (int i = 0; i < 2; i++) {
            snprintf(head, sizeof head, "%s %d %s", mode == 0 ? "JOIN" : mode == 1 ? "GATHER" : "BARRIER", i + 1,
                     FZ_TOKEN);
            const char *parts[3] = {head, mode == 0 ? fz_canon : "{\"rank\": 1}", "tcp://127.0.0.1:1"};
            fz_send_text(fz_peer[i], NULL, parts, mode == 0 ? 3 : mode == 1 ? 2 : 1);
        }
        if (mode == 0) {
            c->endpoints[0] = strdup("tcp://127.0.0.1:0");
            rc = ctrl_join_root(c, fz_canon, deadline);
        } else if (mode == 1) {
            char **all = NULL;
            rc = ctrl_gather(c, "{\"rank\": 0}", &all);
            if (rc == RS_OK)
                for (int i = 0; i < FZ_MEMBERS; i++)
                    if (!all[i]) abort(); /* every member's text is there */
            ctrl_free_texts(all, FZ_MEMBERS);
        } else {
            rc = ctrl_barrier(c);
        }
        if (rc != RS_OK && rc != RS_ERR_INPUT) abort(); /* no timeout: the healthy messages came */
    } else { /* this process is member 1; the harness plays rank 0 */
        c->member = 1;
        c->sock = fz_member;
        const char *ids[2] = {"m1", "m1"};
        fz_send_input(&fz_hroot, ids, data + 1, size - 1);
        snprintf(head, sizeof head, "WELCOME 0 %s", FZ_TOKEN);
        const char *parts[4] = {head, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://127.0.0.1:3"};
        fz_send_text(fz_hroot, "m1", parts, 4);
        rc = ctrl_join_member(c, fz_canon, "tcp://127.0.0.1:2", deadline);
        if (rc == RS_OK)
            for (int i = 0; i < FZ_MEMBERS; i++)
                if (!ctrl_endpoint(c, i)) abort();
        if (rc != RS_OK && rc != RS_ERR_INPUT && rc != RS_ERR_PEER) abort();
    }
    c->sock = NULL; /* the harness's, kept for the next input */
    ctrl_close(c);
    if (clock_now() - t0 > 2.0) abort(); /* a receive waited for its deadline: the healthy messages were lost */
    return 0;
}
