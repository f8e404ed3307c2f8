/* launch.c - the local launcher: fork/exec of one process per rank with torchrun's variables, and supervision */
#include "launch.h"
#include "ctrl.h"
#include "../base/clock.h"
#include "../base/err.h"
#include "../base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t launch_signal = 0;
static int launch_reported; /* 1 once a process's failure has been printed */

static void launch_on_signal(int sig) { launch_signal = sig; }

const char *launch_signal_name(int sig) {
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGKILL: return "SIGKILL";
    default: return "a signal";
    }
}

int launch_catch_stops(void (*handler)(int), LaunchSignals *old) {
    struct sigaction sa = {.sa_handler = handler};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old->sigint);
    sigaction(SIGTERM, &sa, &old->sigterm);
    sigaction(SIGHUP, NULL, &old->sighup);
    old->hup_ignored = old->sighup.sa_handler == SIG_IGN; /* under nohup a hangup is not a stop */
    if (!old->hup_ignored) sigaction(SIGHUP, &sa, NULL);
    return old->hup_ignored;
}

void launch_restore_stops(const LaunchSignals *old) {
    sigaction(SIGINT, &old->sigint, NULL);
    sigaction(SIGTERM, &old->sigterm, NULL);
    sigaction(SIGHUP, &old->sighup, NULL);
}

int launch_die_with_parent(pid_t parent, int sig) {
    if (prctl(PR_SET_PDEATHSIG, sig) != 0) return -1;
    return getppid() == parent ? 0 : -1; /* it died before the line above: nobody would send sig */
}

/* 1 when a TCP port can be bound on addr right now. */
static int port_free(const char *addr, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* The first port of the kernel's ephemeral range (the source ports of outgoing connections and
 * of binds to port 0): /proc/sys/net/ipv4/ip_local_port_range, 32768 where it cannot be read. */
static int ephemeral_low(void) {
    int lo = 0, hi = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 0;
        fclose(f);
    }
    return lo > 1024 && lo <= 65535 ? lo : 32768;
}

/* Picks a port below the ephemeral range, at random, that binds now: a port the kernel never hands
 * out by itself, so that between this check and rank 0's bind no other process's connection can
 * take it as its source port (as a port from bind(addr:0) could, on a machine busy with TCP).
 * Falls back to the kernel's choice where that range is too narrow or every try is taken. */
int launch_free_port(const char *addr) {
    int lo = 10000, hi = ephemeral_low(); /* [lo, hi) */
    unsigned seed = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &seed, sizeof seed) != (ssize_t)sizeof seed) seed = (unsigned)getpid() ^ (unsigned)(clock_wall() * 1e6);
    if (fd >= 0) close(fd);
    for (int i = 0; hi - lo >= 256 && i < 64; i++) {
        seed = seed * 1103515245u + 12345u;
        int port = lo + (int)((seed >> 8) % (unsigned)(hi - lo));
        if (port_free(addr, port)) return port;
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    socklen_t len = sizeof sa;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* 128 random bits as 32 hex digits. */
static int launch_token(char *out, size_t len) {
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b) {
        if (fd >= 0) close(fd);
        return rs_error(RS_ERR_RUNTIME, "cannot read /dev/urandom for the job token: %s", strerror(errno));
    }
    close(fd);
    for (int i = 0; i < 16 && (size_t)(2 * i + 2) < len; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
    return RS_OK;
}

static void setenv_int(const char *name, int v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%d", v);
    setenv(name, buf, 1);
}

/* The run's --nodes (0: none), for who(). */
static int launch_nodes;

/* "rank 2", "server 0"; under --nodes M the node too ("rank 2 (node 1)", "server 0 (node 2)": rank
 * r on node r / (nworkers / M), each server a node of its own after the workers'). */
static const char *who(int i, int nworkers, char *buf, size_t len) {
    int M = launch_nodes, G = M > 0 && nworkers % M == 0 ? nworkers / M : 0;
    if (i < nworkers && G) snprintf(buf, len, "rank %d (node %d)", i, i / G);
    else if (i < nworkers) snprintf(buf, len, "rank %d", i);
    else if (G) snprintf(buf, len, "server %d (node %d)", i - nworkers, M + i - nworkers);
    else snprintf(buf, len, "server %d", i - nworkers);
    return buf;
}

/* Sends sig to every live child. */
static void launch_kill_all(const pid_t *pid, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (pid[i] > 0) kill(pid[i], sig);
}

/* Reaps every child within grace_s after SIGTERM, then SIGKILL. */
static void launch_stop_all(pid_t *pid, int n, double grace_s) {
    launch_kill_all(pid, n, SIGTERM);
    double end = clock_now() + grace_s;
    int left = 0;
    do {
        left = 0;
        for (int i = 0; i < n; i++) {
            if (pid[i] <= 0) continue;
            int st;
            if (waitpid(pid[i], &st, WNOHANG) == pid[i]) pid[i] = 0;
            else left++;
        }
        if (left) usleep(20000);
    } while (left && clock_now() < end);
    if (left) {
        launch_kill_all(pid, n, SIGKILL);
        for (int i = 0; i < n; i++)
            if (pid[i] > 0) waitpid(pid[i], NULL, 0), pid[i] = 0;
    }
}

static int launch_run_(int nworkers, int nservers, int argc, char **argv, double grace_s);

/* Says which signal stopped the job and how many processes are being stopped; RS_ERR_INTERRUPTED. */
static int launch_interrupted(int alive) {
    int sig = launch_signal;
    log_error("interrupted by %s (signal %d): stopping %d process%s", launch_signal_name(sig), sig,
              alive, alive == 1 ? "" : "es");
    return RS_ERR_INTERRUPTED;
}

int launch_run(int nworkers, int nservers, int nodes, int argc, char **argv, double grace_s) {
    launch_nodes = nodes;
    int rc = launch_run_(nworkers, nservers, argc, argv, grace_s);
    if (rc != RS_OK && rc != RS_ERR_INTERRUPTED && !launch_reported) log_error("%s", rs_errmsg());
    return rc;
}

static int launch_run_(int nworkers, int nservers, int argc, char **argv, double grace_s) {
    launch_reported = 0;
    const char *addr = getenv("MASTER_ADDR");
    if (!addr || !*addr) addr = "127.0.0.1";
    int port = 0;
    const char *ps = getenv("MASTER_PORT");
    if (ps && *ps) {
        port = atoi(ps);
        if (port < 1 || port > 65535) return rs_error(RS_ERR_INPUT, "MASTER_PORT='%s': not a port (1-65535)", ps);
        if (!port_free(addr, port))
            return rs_error(RS_ERR_INPUT, "MASTER_PORT=%d: port in use on %s (unset MASTER_PORT to pick a free one)", port, addr);
    } else if (!(port = launch_free_port(addr))) {
        return rs_error(RS_ERR_RUNTIME, "cannot find a free TCP port on %s", addr);
    }
    char token[80] = "";
    const char *given = getenv("RINGSIDE_JOB_TOKEN");
    if (given && *given) {
        RS_TRY(rankenv_token_check(given));
        snprintf(token, sizeof token, "%s", given);
    }
    else RS_TRY(launch_token(token, sizeof token));

    int n = nworkers + nservers;
    pid_t *pid = calloc((size_t)n, sizeof *pid);
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!pid || !args) {
        free(pid);
        free(args);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    for (int i = 0; i < argc; i++) args[i] = argv[i];
    args[0] = "ringside";

    launch_signal = 0;
    LaunchSignals old;
    int hup_ignored = launch_catch_stops(launch_on_signal, &old);
    pid_t self = getpid(); /* the ranks' parent, checked in each child after its death signal is set */
    fflush(stdout);
    fflush(stderr);

    int rc = RS_OK;
    for (int i = 0; i < n && rc == RS_OK; i++) {
        pid_t p = fork();
        if (p < 0) {
            rc = rs_error(RS_ERR_RUNTIME, "fork for %s: %s", who(i, nworkers, (char[48]){0}, 48), strerror(errno));
            break;
        }
        if (p == 0) {
            /* a rank dies with its launcher, killed outright: it writes no report for a job that is gone */
            if (launch_die_with_parent(self, SIGKILL) != 0) _exit(RS_ERR_INTERRUPTED);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, hup_ignored ? SIG_IGN : SIG_DFL);
            setenv("MASTER_ADDR", addr, 1);
            setenv_int("MASTER_PORT", port);
            setenv("RINGSIDE_JOB_TOKEN", token, 1);
            setenv("RINGSIDE_LAUNCHER", "1", 1);
            setenv_int("WORLD_SIZE", nworkers);
            setenv_int("RINGSIDE_SERVERS", nservers);
            if (i < nworkers) {
                setenv_int("RANK", i);
                setenv_int("LOCAL_RANK", i);
                setenv_int("LOCAL_WORLD_SIZE", nworkers);
                setenv("RINGSIDE_ROLE", "worker", 1);
            } else {
                unsetenv("RANK");
                setenv("RINGSIDE_ROLE", "server", 1);
                setenv_int("RINGSIDE_SERVER_ID", i - nworkers);
            }
            execv("/proc/self/exe", args);
            fprintf(stderr, "ringside: error: cannot start %s: exec: %s\n", i < nworkers ? "a rank" : "a server",
                    strerror(errno));
            _exit(RS_ERR_RUNTIME);
        }
        pid[i] = p;
    }

    int alive = 0;
    for (int i = 0; i < n; i++) alive += pid[i] > 0;
    char name[48], first[320] = "";
    while (rc == RS_OK && alive > 0) {
        if (launch_signal) {
            rc = launch_interrupted(alive);
            break;
        }
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG); /* polled: a signal landing just before a blocking wait would be missed */
        if (p == 0) {
            usleep(20000);
            continue;
        }
        if (p < 0) {
            if (errno == EINTR) continue;
            rc = rs_error(RS_ERR_RUNTIME, "waitpid: %s", strerror(errno));
            break;
        }
        int i = 0;
        while (i < n && pid[i] != p) i++;
        if (i == n) continue;
        pid[i] = 0;
        alive--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        if (launch_signal) { /* it went with the signal (a terminal's hangup reaches the ranks too) */
            rc = launch_interrupted(alive);
            break;
        }
        if (WIFEXITED(st)) { /* a peer's death is often noticed by the others first: one killed by a
                               * signal within 100 ms is the cause, and is named instead */
            for (double until = clock_now() + 0.1; clock_now() < until;) {
                int st2;
                pid_t q = waitpid(-1, &st2, WNOHANG);
                if (q < 0 && errno != EINTR) break;
                if (q <= 0) {
                    usleep(5000);
                    continue;
                }
                int j = 0;
                while (j < n && pid[j] != q) j++;
                if (j == n) continue;
                pid[j] = 0;
                alive--;
                if (WIFSIGNALED(st2)) {
                    i = j, st = st2;
                    break;
                }
            }
        }
        if (WIFEXITED(st)) {
            rc = WEXITSTATUS(st);
            rs_error(rc, "%s exited with status %d; stopping the others", who(i, nworkers, name, sizeof name), rc);
        } else {
            int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
            rc = RS_ERR_PEER;
            rs_error(rc, "%s was killed by signal %d (%s); stopping the others", who(i, nworkers, name, sizeof name),
                     sig, strsignal(sig));
        }
        log_error("%s", rs_errmsg());
        launch_reported = 1;
        /* the others, stopped now, may print errors of their own after this: the last line names the first */
        if (WIFEXITED(st))
            snprintf(first, sizeof first, "%s failed first (exit status %d); its own error is the first line marked [rank %d] above",
                     who(i, nworkers, name, sizeof name), WEXITSTATUS(st), i);
        else /* a process killed by a signal wrote no error of its own */
            snprintf(first, sizeof first, "%s failed first (killed by signal %d)", who(i, nworkers, name, sizeof name),
                     WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    if (alive > 0) launch_stop_all(pid, n, grace_s);
    if (first[0]) log_error("%s", first);
    launch_restore_stops(&old);
    free(pid);
    free(args);
    return rc;
}

int launch_command(const char *cmd, int nworkers, int nservers, int nodes, int argc, char **args) {
    char **argv = calloc((size_t)argc + 3, sizeof *argv);
    if (!argv) return rs_error(RS_ERR_RUNTIME, "out of memory");
    argv[0] = "ringside";
    argv[1] = (char *)cmd;
    for (int i = 0; i < argc; i++) argv[i + 2] = args[i];
    int rc = launch_run(nworkers, nservers, nodes, argc + 2, argv, 3.0);
    free(argv);
    return rc;
}
