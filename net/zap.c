/* zap.c - one ZeroMQ authentication handler's requests, answers and loop (net/zap.h) */
#include "zap.h"

#include <errno.h>
#include <string.h>

int zap_take(void *rep, zmq_msg_t *f, int max) {
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, rep, 0) < 0) {
            zmq_msg_close(&x);
            break;
        }
        more = zmq_msg_more(&x);
        if (n < max) f[n++] = x;
        else zmq_msg_close(&x); /* drain anything unexpected */
    }
    return n;
}

void zap_answer(void *rep, zmq_msg_t *f, int ok, const char *why) {
    const char *status = ok ? "200" : "400", *text = ok ? "OK" : why;
    zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(rep, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    zmq_send(rep, status, 3, ZMQ_SNDMORE);
    zmq_send(rep, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(rep, "", 0, ZMQ_SNDMORE);
    zmq_send(rep, "", 0, 0);
}

void zap_loop(void *rep, const int *stop, void (*one)(void *arg), void *arg) {
    while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
        zmq_pollitem_t it = {rep, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, 100);
        if (rc < 0 && zmq_errno() == ETERM) break;
        if (rc > 0) one(arg);
    }
}
