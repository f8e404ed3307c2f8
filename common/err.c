/* err.c - the per-thread error message and the fatal-error helpers */
#include "err.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread char err_buf[1024];

int rs_error(int code, const char *fmt, ...) {
    char tmp[sizeof err_buf]; /* the arguments may be rs_errmsg() itself: format apart, then copy */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(err_buf, tmp, sizeof err_buf);
    return code;
}

const char *rs_errmsg(void) { return err_buf; }

void rs_die(int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_error("%s", msg);
    fflush(stdout);
    exit(code);
}

void rs_die_last(int code) { rs_die(code, "%s", err_buf[0] ? err_buf : "unknown error"); }
