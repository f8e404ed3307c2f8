/* proc.c - one child command in its own process group: spawn, bounded wait, group kill */
#include "proc.h"
#include "../base/clock.h"
#include "../base/err.h"
#include "../net/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The child's side: SIGTERM when parent (the caller, its pid read before fork) dies, own group,
 * default signals, output to the log, env added, exec. Never returns. */
static void proc_child(pid_t parent, char *const argv[], const char *log_path, char *const env[]) {
    /* a ringside launcher stops its ranks on SIGTERM, and srun ends its step's tasks */
    if (launch_die_with_parent(parent, SIGTERM) != 0) _exit(RS_ERR_INTERRUPTED);
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in >= 0) dup2(in, 0);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    for (int i = 0; env && env[i]; i++) putenv(env[i]);
    execv(argv[0], argv);
    dprintf(2, "ringside: error: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static void proc_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);  /* a signal cuts it short; the caller's loop re-checks */
}

static int proc_status_code(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
}

int proc_run(char *const argv[], const char *log_path, char *const env[], double timeout_s, double grace_s,
             volatile sig_atomic_t *stop, ProcTick tick, void *tick_arg, double tick_s, ProcResult *res) {
    memset(res, 0, sizeof *res);
    double t0 = clock_now();
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        res->outcome = PROC_SPAWN_FAILED;
        return rs_error(RS_ERR_RUNTIME, "fork: %s", strerror(errno));
    }
    if (pid == 0) proc_child(self, argv, log_path, env);
    setpgid(pid, pid);  /* also in the child: whichever runs first wins, the other gets EACCES */

    ProcOutcome why = PROC_EXITED;
    double term_at = 0, kill_at = 0, next_tick = t0 + tick_s;
    int st = 0, reaped = 0;
    for (;;) {
        /* look without reaping, so the group id stays ours while stragglers are killed */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && si.si_pid == pid) {
            kill(-pid, SIGKILL);  /* stragglers the child left in its group (ESRCH when none) */
            pid_t w;
            while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}  /* it has exited: no wait */
            reaped = w == pid;
            break;
        }
        if (r < 0 && errno != EINTR) break;
        double now = clock_now();
        if (!term_at && ((stop && *stop) || now - t0 > timeout_s)) {
            why = (stop && *stop) ? PROC_STOPPED : PROC_TIMED_OUT;
            kill(-pid, SIGTERM);
            term_at = now;
        }
        if (term_at && !kill_at && now - term_at > grace_s) {
            kill(-pid, SIGKILL);
            kill_at = now;
        }
        if (kill_at && now - kill_at > grace_s) break;  /* unkillable: abandon it */
        if (tick && now >= next_tick) {
            tick(tick_arg, now - t0);
            next_tick = now + tick_s;
        }
        proc_sleep(0.02);
    }
    if (!reaped) kill(-pid, SIGKILL);
    res->outcome = why;
    res->exit_code = reaped ? proc_status_code(st) : 137;
    res->wall_s = clock_now() - t0;
    return RS_OK;
}

void proc_last_line(const char *path, char *out, size_t len) {
    out[0] = 0;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = 0;
        if (n) snprintf(out, len, "%s", line);
    }
    fclose(f);
}
