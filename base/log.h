/* log.h - rank-aware logging: info from rank 0 only (unless verbose), warnings and errors from all */
#ifndef RS_LOG_H
#define RS_LOG_H

/* Sets this process's rank for message prefixes (-1: not under a launcher, no prefix). */
void log_set_rank(int rank);
int log_rank(void);

/* Quiet suppresses log_info; verbose makes every rank print log_info. */
void log_set_quiet(int quiet);
void log_set_verbose(int verbose);

/* Progress and results, to stdout, rank 0 only. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same as log_info but printed by every rank. */
void log_all(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* To stderr, every rank, "ringside: warning: ..." */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* To stderr, every rank, "ringside: error: ..." */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The text of this process's first log_error (without the "ringside: error: " prefix), the
 * cause a launcher's summary should name; "" when none yet. Static; safe from any thread. */
const char *log_first_error(void);

#endif
