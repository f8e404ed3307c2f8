/* err.h - exit statuses, the per-thread error message and the error helpers every module shares */
#ifndef RS_ERR_H
#define RS_ERR_H

#include <stdarg.h>

/* ---- Types: exit statuses (also the status codes functions return) ---- */
enum {
    RS_OK = 0,
    RS_ERR_RUNTIME = 1,  /* a library or system call failed */
    RS_ERR_INPUT = 2,    /* bad option, bad file, bad value: the user can fix it */
    RS_ERR_PEER = 3,     /* a peer died, timed out or refused us */
    RS_ERR_WRONG = 4,    /* a result was checked and found wrong (bench #wrong, claims FAIL) */
    RS_ERR_INTERRUPTED = 130
};

/* ---- Prototypes ---- */

/* Formats a message into this thread's error buffer and returns code, so that a failing
 * function can `return rs_error(RS_ERR_INPUT, "...")`. The message stays until the next call. */
int rs_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* This thread's last error message ("" when none). Owned by the thread; do not free. */
const char *rs_errmsg(void);

/* ---- Macros ---- */

/* Propagates a non-zero status from a call, as redis' `if (... != C_OK) goto err`. */
#define RS_TRY(call)                  \
    do {                              \
        int rs_try_rc_ = (call);      \
        if (rs_try_rc_ != RS_OK)      \
            return rs_try_rc_;        \
    } while (0)

#endif
