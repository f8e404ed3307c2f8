/* ctrl.h - the control plane: ranks find each other, agree on the job, barrier and hand rank 0 their metrics */
#ifndef RS_CTRL_H
#define RS_CTRL_H

#include <stddef.h>

/* ---- Types ---- */

/* Where this process stands in the job, from the launcher's environment. */
typedef struct RankEnv {
    int member;          /* 0..world-1: worker rank; world..world+servers-1: dedicated server */
    int world;           /* worker ranks */
    int servers;         /* dedicated parameter-server processes (members after the workers) */
    int local_rank, local_world;
    char addr[256];      /* MASTER_ADDR */
    char bind[256];      /* this host's address on the route to MASTER_ADDR: where data-plane
                          * sockets bind (loopback when MASTER_ADDR is loopback) */
    int port;            /* MASTER_PORT */
    char token[80];      /* job token (hex); every message carries it */
    char source[32];     /* "ringside", "torchrun", "slurm", "openmpi" or "none" */
    int launched;        /* 1 when started by a launcher (the env was found) */
    int agent_store;     /* 1 under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True): MASTER_ADDR:
                          * MASTER_PORT is the agent's TCPStore, so member 0 binds its control plane on a
                          * free port and publishes it there under store_key, where the others read it */
    char store_key[200]; /* "ringside/RUN_ID/attempt_RESTARTS/world_N/ctrl" (torchrun's run id and restart count) */
    size_t ctrl_max;     /* the largest control-plane frame a peer may send, bytes (zctx_open derives it
                          * from the run's options: zctx_ctrl_bound); 0: CTRL_DEFAULT_MAX */
} RankEnv;

/* The frame bound of a control plane whose RankEnv.ctrl_max is 0 (tests, tools). */
#define CTRL_DEFAULT_MAX ((size_t)16 << 20)

typedef struct Ctrl Ctrl;

/* Messages member 0's ROUTER queues per connection: a member has one message out at a time
 * (it waits for the answer), so a flood from one connection waits in its sender's buffers. */
#define CTRL_RCVHWM 4

/* ---- Prototypes ---- */

/* Fills e from the environment: RINGSIDE_* (our launcher), RANK/WORLD_SIZE/LOCAL_RANK/
 * LOCAL_WORLD_SIZE (torchrun), SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun) or
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK (mpirun), with MASTER_ADDR and MASTER_PORT.
 * Under torchrun's agent (TORCHELASTIC_USE_AGENT_STORE=True) e->agent_store is set and e->store_key
 * made from TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT and WORLD_SIZE.
 * RINGSIDE_ROLE=server with RINGSIDE_SERVER_ID=k makes a dedicated server (member world+k);
 * RINGSIDE_SERVERS gives their count. No launcher variables: e->launched = 0, one rank.
 * RS_ERR_INPUT when the variables are inconsistent (names the variable). */
int rankenv_detect(RankEnv *e);

/* Checks a RINGSIDE_JOB_TOKEN text: RANKENV_TOKEN_MIN to RANKENV_TOKEN_MAX hex digits (64 bits at
 * least; the launcher's own is 32 digits, 128 random bits). 0, or RS_ERR_INPUT naming the variable
 * and the rule (too long for RankEnv.token, too short to keep anyone out, not hex). */
#define RANKENV_TOKEN_MIN 16
#define RANKENV_TOKEN_MAX 79
int rankenv_token_check(const char *tok);

/* The numeric IPv4 address of this host's interface on the route to host (a name or an
 * address), written into out; "127.0.0.1" for loopback. RS_ERR_INPUT when host cannot be
 * resolved. Sends nothing (a UDP connect only picks the route). */
int rankenv_route_addr(const char *host, char *out, size_t len);

/* Joins the job's control plane over zctx (a ZeroMQ context the caller owns and terminates
 * after ctrl_close and the data plane's sockets are closed): member 0 binds a ROUTER on addr:port
 * (with e->agent_store: on a free port of e->bind, published as "tcp://ADDR:PORT" under
 * e->store_key in the TCPStore at addr:port, where every other member waits for it), every other member
 * connects a DEALER and presents the token and its canonical configuration; member 0 checks
 * them (a mismatch is refused with the differing option named, on both sides), collects every
 * member's data-plane endpoint text, and answers when all world+servers members have joined.
 * A connection must prove the token in its handshake (ZeroMQ PLAIN, checked by member 0's
 * authentication handler) or, under --secure, the job's key (CURVE): any other is refused before
 * it can send a message. A member is known by the connection its JOIN came on; a second process
 * joining as the same member is refused ("rank 1 joined twice") on every side. Frames are at most
 * e->ctrl_max bytes, and member 0 queues at most CTRL_RCVHWM messages per connection.
 * Waits at most timeout seconds. RS_ERR_INPUT (refused: options, a member twice, a handshake
 * refused by member 0), RS_ERR_PEER (timeout, peer gone), or RS_ERR_RUNTIME, with rs_errmsg() set. */
int ctrl_join(Ctrl **out, const RankEnv *e, void *zctx, const char *canonical, const char *endpoint,
              double timeout);

/* Member i's endpoint text (as given to ctrl_join); "" for an unknown member. */
const char *ctrl_endpoint(const Ctrl *c, int member);
/* Every member's endpoint text, members in order (owned by c). */
char *const *ctrl_endpoints(const Ctrl *c);
int ctrl_members(const Ctrl *c);

/* The ZeroMQ context given to ctrl_join (owned by the caller). */
void *ctrl_zmq(const Ctrl *c);

/* All members wait until every member has called it. 0 or RS_ERR_PEER naming who is missing. */
int ctrl_barrier(Ctrl *c);

/* Gathers one text per member to member 0. On member 0, *all receives a malloc'd array of
 * ctrl_members() malloc'd strings (caller frees with ctrl_free_texts); elsewhere *all = NULL.
 * 0 or RS_ERR_PEER. */
int ctrl_gather(Ctrl *c, const char *mine, char ***all);

/* ctrl_barrier and ctrl_gather among the workers alone (members 0 to world - 1), for what
 * dedicated servers take no part in (bench's rows); *all has ctrl_members() entries, the
 * servers' NULL. Called on a server: RS_ERR_RUNTIME. */
int ctrl_barrier_workers(Ctrl *c);
int ctrl_gather_workers(Ctrl *c, const char *mine, char ***all);
void ctrl_free_texts(char **all, int n);

/* Estimates the clock offset of members 1..upto-1 to member 0, NTP-style: member 0 sends each
 * one `rounds` PINGs, the member answers each with its clock_now(), and the round trip with
 * the shortest time gives offset[i] = member clock - member 0's clock at the midpoint, within
 * +-uncertainty[i] (half that round trip). Every member 1..upto-1 must call it at the same
 * point of the job; the others (i >= upto, e.g. dedicated servers) need not. On member 0,
 * offset and uncertainty have upto entries ([0] = 0); elsewhere they may be NULL. 0, or
 * RS_ERR_PEER naming a member that did not answer within the timeout. */
int ctrl_clock_offsets(Ctrl *c, int upto, int rounds, double *offset, double *uncertainty);

/* Member 0's END has come: the job is over (member 0 closed its control plane, whether the run
 * finished or failed). Does not wait; a member that is between rounds polls it (a sleep that
 * should not outlive the job). 1 or 0; always 0 on member 0. A round that gets END instead of
 * its answer fails at once (RS_ERR_PEER) rather than after the timeout. */
int ctrl_ended(Ctrl *c);

/* Leaves the job and frees everything (closes its socket; not the context). Member 0 first sends
 * END to every member it can reach at once. */
void ctrl_close(Ctrl *c);

/* Message counters of the control plane (not data-plane traffic): sent and received, and dropped
 * (a bad header, a wrong token, a member's message on another member's connection). */
void ctrl_counters(const Ctrl *c, unsigned long long *messages, unsigned long long *dropped);

#endif
