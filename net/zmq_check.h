/* zmq_check.h - the ZeroMQ check macro: file:line, the rank and zmq_strerror, as a status code */
#ifndef RS_ZMQ_CHECK_H
#define RS_ZMQ_CHECK_H

#include <errno.h>
#include <zmq.h>

#include "../base/err.h"
#include "../base/log.h"

/* Reports a failed ZeroMQ call (rc == -1): leaves "file:line: call: zmq error (rank r)" in
 * rs_errmsg() and returns RS_ERR_RUNTIME; returns 0 when rc != -1. Does not log, so a caller
 * that can recover (EAGAIN) stays quiet. */
static inline int zmq_check_at(int rc, const char *call, const char *file, int line) {
    if (rc != -1) return 0;
    int e = zmq_errno();
    rs_error(RS_ERR_RUNTIME, "%s:%d: %s: %s (rank %d)", file, line, call, zmq_strerror(e),
             log_rank() < 0 ? 0 : log_rank());
    errno = e;
    return RS_ERR_RUNTIME;
}

/* Evaluates to 0 or RS_ERR_RUNTIME, so `RS_TRY(zmqCheck(zmq_bind(s, ep)))` propagates. */
#define zmqCheck(call) zmq_check_at((call), #call, __FILE__, __LINE__)

#endif
