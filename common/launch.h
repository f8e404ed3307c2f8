/* launch.h - the local launcher: starts one process per rank (and server), supervises, stops all on a failure */
#ifndef RS_LAUNCH_H
#define RS_LAUNCH_H

/* Re-executes this binary with argv (argv[0] ignored: the running executable is used) as
 * nworkers ranks plus nservers dedicated servers, each with the launcher's environment
 * (RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT RINGSIDE_JOB_TOKEN, and
 * RINGSIDE_ROLE/RINGSIDE_SERVER_ID for servers) on a free port (or MASTER_PORT when set: an
 * error naming it when in use), and waits. When a process exits non-zero or by a signal, the
 * others are stopped (SIGTERM, then SIGKILL after grace_s) and the launcher reports which and
 * how. SIGINT/SIGTERM to the launcher stop every process. Returns 0 when all exit 0, else the
 * first failing process's exit status (RS_ERR_PEER when killed by a signal,
 * RS_ERR_INTERRUPTED when interrupted). Creates no ZeroMQ or CUDA state. */
int launch_run(int nworkers, int nservers, int argc, char **argv, double grace_s);

/* launch_run for the subcommand cmd ("train", "bench"): each process runs `ringside cmd args...`
 * with the args that followed cmd. Same returns as launch_run (RS_ERR_RUNTIME on OOM). */
int launch_command(const char *cmd, int nworkers, int nservers, int argc, char **args);

/* A TCP port on addr that binds now, chosen at random below the kernel's ephemeral range (so no
 * outgoing connection takes it before rank 0 binds it); the kernel's choice where that fails. 0 on
 * failure. */
int launch_free_port(const char *addr);

#endif
