/* launch.h - the local launcher: starts one process per rank (and server), supervises, stops all on a failure */
#ifndef RS_LAUNCH_H
#define RS_LAUNCH_H

#include <signal.h>
#include <sys/types.h>

/* ---- Types ---- */

/* The dispositions launch_catch_stops replaced, for launch_restore_stops. */
typedef struct {
    struct sigaction sigint, sigterm, sighup;
    int hup_ignored; /* SIGHUP was ignored (nohup): it was left so */
} LaunchSignals;

/* ---- Prototypes ---- */

/* Re-executes this binary with argv (argv[0] ignored: the running executable is used) as
 * nworkers ranks plus nservers dedicated servers, each with the launcher's environment
 * (RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT RINGSIDE_JOB_TOKEN, and
 * RINGSIDE_ROLE/RINGSIDE_SERVER_ID for servers) on a free port (or MASTER_PORT when set: an
 * error naming it when in use), and waits. When a process exits non-zero or by a signal, the
 * others are stopped (SIGTERM, then SIGKILL after grace_s) and the launcher reports which and
 * how (under nodes > 0, --nodes, naming its node too: "rank 2 (node 1)"). SIGINT, SIGTERM or SIGHUP to the launcher stop every process (the message names the
 * signal; a SIGHUP ignored at the start, as under nohup, stays ignored). Every process dies with
 * the launcher: it gets SIGKILL when the launcher is gone (PR_SET_PDEATHSIG, set before exec and
 * checked against a launcher that died first), so a killed launcher leaves no rank running and
 * no report written. Returns 0 when all exit 0, else the first failing process's exit status
 * (RS_ERR_PEER when killed by a signal, RS_ERR_INTERRUPTED when interrupted). Creates no ZeroMQ
 * or CUDA state. */
int launch_run(int nworkers, int nservers, int nodes, int argc, char **argv, double grace_s);

/* launch_run for the subcommand cmd ("train", "bench"): each process runs `ringside cmd args...`
 * with the args that followed cmd. Same returns as launch_run (RS_ERR_RUNTIME on OOM). */
int launch_command(const char *cmd, int nworkers, int nservers, int nodes, int argc, char **args);

/* A TCP port on addr that binds now, chosen at random below the kernel's ephemeral range (so no
 * outgoing connection takes it before rank 0 binds it); the kernel's choice where that fails. 0 on
 * failure. */
int launch_free_port(const char *addr);

/* "SIGHUP", "SIGINT", "SIGTERM", "SIGKILL", or "a signal" for another number. Static text. */
const char *launch_signal_name(int sig);

/* Installs handler (no SA_RESTART) for SIGINT, SIGTERM and SIGHUP, the signals that stop a job,
 * saving the old dispositions into *old. SIGHUP is left alone when it is ignored (nohup). Returns
 * 1 when SIGHUP was ignored, else 0. */
int launch_catch_stops(void (*handler)(int), LaunchSignals *old);

/* Puts back the dispositions launch_catch_stops saved. */
void launch_restore_stops(const LaunchSignals *old);

/* In a child just forked by parent (its pid, read before fork): asks for sig when the parent
 * dies (PR_SET_PDEATHSIG; it survives exec) and checks that the parent is still there. 0, or
 * -1 when the parent is already gone or the request failed: the child should exit at once. */
int launch_die_with_parent(pid_t parent, int sig);

#endif
