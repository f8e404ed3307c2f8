/* err.c - the per-thread error message every failing function leaves for its caller to print */
#include "err.h"

#include <stdio.h>
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
