/* proc.h - runs one child command in its own process group, with a deadline and a stop flag */
#ifndef RS_PROC_H
#define RS_PROC_H

#include <signal.h>
#include <stddef.h>

/* ---- Types ---- */

typedef enum {
    PROC_EXITED = 0,     /* it ended by itself: exit_code holds its status (128+signal if killed) */
    PROC_TIMED_OUT,      /* the deadline passed: the group got SIGTERM, then SIGKILL */
    PROC_STOPPED,        /* *stop became non-zero: the group got SIGTERM, then SIGKILL */
    PROC_SPAWN_FAILED    /* fork failed (rs_errmsg() says why) */
} ProcOutcome;

typedef struct {
    ProcOutcome outcome;
    int exit_code;       /* exit status, or 128 + signal number */
    double wall_s;       /* seconds from start to reaping */
} ProcResult;

/* Called about every tick_s seconds while the child runs (elapsed seconds so far). */
typedef void (*ProcTick)(void *arg, double elapsed_s);

/* ---- Prototypes ---- */

/* Runs argv[0] (a path, argv NULL-terminated) in a new process group with stdout and stderr
 * appended to log_path (created; "/dev/null" when NULL) and env's "NAME=VALUE" strings (NULL-
 * terminated; NULL for none) added to its environment, and waits for it: at most timeout_s
 * seconds, and only while *stop is 0. On timeout or stop the whole group gets SIGTERM, then
 * SIGKILL after grace_s; stragglers left in the group after the child exits get SIGKILL too.
 * Every wait is bounded: a child that survives SIGKILL for grace_s more is abandoned (outcome
 * kept, exit_code 137). The child gets SIGTERM when the caller dies (PR_SET_PDEATHSIG; a
 * ringside launcher then stops its ranks, srun its step), and exits at once where the caller
 * died before that was set. It inherits the caller's descriptors that are not close-on-exec (the
 * matrix's lock on its folder). Returns 0 with *res filled, or RS_ERR_RUNTIME when fork fails. */
int proc_run(char *const argv[], const char *log_path, char *const env[], double timeout_s, double grace_s,
             volatile sig_atomic_t *stop, ProcTick tick, void *tick_arg, double tick_s, ProcResult *res);

/* The last non-empty line of a text file (at most len-1 characters, without the newline), or ""
 * when there is none. */
void proc_last_line(const char *path, char *out, size_t len);

#endif
