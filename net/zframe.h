/* zframe.h - received ZeroMQ frames, counted as communication memory while they are held */
#ifndef RS_ZFRAME_H
#define RS_ZFRAME_H

#include "../base/mem.h"

#include <zmq.h>

/* zmq_msg_recv into an initialised m; a frame received is counted under MEM_COMM (its bytes
 * exist to communicate) until zframe_close. Returns zmq_msg_recv's result (-1: zmq_errno()). */
static inline int zframe_recv(zmq_msg_t *m, void *sock, int flags) {
    int rc = zmq_msg_recv(m, sock, flags);
    if (rc >= 0) mem_account(MEM_COMM, (long long)zmq_msg_size(m));
    return rc;
}

/* Closes a frame of zframe_recv's, taking its bytes off MEM_COMM (a frame moved out with
 * zmq_msg_move is empty and counts 0: its bytes go where it went). */
static inline void zframe_close(zmq_msg_t *m) {
    mem_account(MEM_COMM, -(long long)zmq_msg_size(m));
    zmq_msg_close(m);
}

#endif
