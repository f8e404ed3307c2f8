/* log.c - rank-aware logging to stdout (progress) and stderr (warnings, errors) */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static int log_rank_ = -1;
static int log_quiet_ = 0;
static int log_verbose_ = 0;
static char log_first_[2048];      /* the process's first error line, without the prefix */
static int log_first_claimed_ = 0; /* one writer: the first log_error to claim it */
static int log_first_ready_ = 0;   /* set (release) once log_first_ holds the whole line */

void log_set_rank(int rank) { log_rank_ = rank; }
int log_rank(void) { return log_rank_; }
void log_set_quiet(int quiet) { log_quiet_ = quiet; }
void log_set_verbose(int verbose) { log_verbose_ = verbose; }

static void log_emit(FILE *f, const char *kind, const char *fmt, va_list ap) {
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    if (kind) {
        if (log_rank_ >= 0) fprintf(f, "ringside: [rank %d] %s: %s\n", log_rank_, kind, line);
        else fprintf(f, "ringside: %s: %s\n", kind, line);
    } else {
        if (log_rank_ >= 0 && log_verbose_) fprintf(f, "[rank %d] %s\n", log_rank_, line);
        else fprintf(f, "%s\n", line);
    }
    fflush(f);
}

void log_info(const char *fmt, ...) {
    if (log_quiet_ || (log_rank_ > 0 && !log_verbose_)) return;
    va_list ap;
    va_start(ap, fmt);
    log_emit(stdout, NULL, fmt, ap);
    va_end(ap);
}

void log_all(const char *fmt, ...) {
    if (log_quiet_) return;
    va_list ap;
    va_start(ap, fmt);
    log_emit(stdout, NULL, fmt, ap);
    va_end(ap);
}

void log_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_emit(stderr, "warning", fmt, ap);
    va_end(ap);
}

void log_error(const char *fmt, ...) {
    va_list ap;
    if (!__atomic_exchange_n(&log_first_claimed_, 1, __ATOMIC_ACQ_REL)) {
        va_start(ap, fmt);
        vsnprintf(log_first_, sizeof log_first_, fmt, ap);
        va_end(ap);
        __atomic_store_n(&log_first_ready_, 1, __ATOMIC_RELEASE);
    }
    va_start(ap, fmt);
    log_emit(stderr, "error", fmt, ap);
    va_end(ap);
}

const char *log_first_error(void) { return __atomic_load_n(&log_first_ready_, __ATOMIC_ACQUIRE) ? log_first_ : ""; }
