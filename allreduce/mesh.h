/* mesh.h - any rank to any rank: a mailbox per rank and tagged messages over ZeroMQ, the plumbing lab 5's all-reduce and the tree are written on */
#ifndef RS_MESH_H
#define RS_MESH_H

/*
 * Every rank binds one ZeroMQ PULL socket (its mailbox) at init, the control plane hands its
 * address to every other rank, and connect gives each rank one PUSH socket to every other rank's
 * mailbox: any rank can send to any rank.
 *
 *   - mesh_send(m, peer, tag, data, count): sends count floats to rank peer, marked with a tag of
 *     the algorithm's choice, encoded on the job's --wire (fp32, or 16 bits with --loss-scale).
 *     It copies the data (change data as soon as it returns) and never waits for the peer;
 *   - mesh_recv(m, peer, tag, dst, count, MESH_ADD or MESH_COPY): waits, up to the job's
 *     --timeout, for the message rank peer sent with that tag in this collective and adds it
 *     into dst (in fp32) or copies it. Messages that arrive before they are asked for (another
 *     peer's, a later tag's) are kept, and counted under MEM_COMM while they are, so the order in
 *     which an algorithm receives from different peers does not matter.
 *
 * A back end built on the mesh is its all-reduce function and a SyncOps whose init calls
 * mesh_init with it; the other ops are the mesh's (mesh_connect ... mesh_destroy): staging of GPU
 * buffers through host memory, the parameter broadcast (rank 0 to every rank, fp32), timeouts
 * that name the peer that did not answer, and counters for the report.
 *
 * Transports: with MESH_IPC a rank binds as zep_bind does (TCP, and an abstract Unix socket on
 * this host unless --transport tcp) and reaches a peer of its host over the Unix socket; without
 * it (lab 5) TCP only. There is no shared-memory path (the ring's lanes are the ring's).
 *
 * Message: two frames, a MeshHeader (40 bytes, counted in the traffic like the ring's 48) and
 * the encoded elements (and an emulated link's stamp, uncounted, under --link).
 */

#include "../base/codec.h"
#include "../engine/sync.h"

#include <stddef.h>
#include <stdint.h>

/* ---- Types ---- */

typedef struct Mesh Mesh;

/* An all-reduce written on the mesh: in-place sum of count floats at buf (host memory) over
 * every rank, the same bits on every rank. 0, or the status of the mesh call that failed. */
typedef int (*MeshAllreduceFn)(Mesh *m, float *buf, size_t count);

/* What mesh_recv does with a message: add it into dst, or copy it over dst. */
enum { MESH_COPY = 0, MESH_ADD = 1 };

/* mesh_init's flags. */
enum {
    MESH_IPC = 1,   /* a Unix socket to the peers of this host (else TCP to every peer) */
    MESH_CODED = 2, /* messages on the job's --wire (else fp32 always) */
};

struct Mesh {
    int rank, world;       /* this rank, and N */
    /* the rest is the plumbing's: */
    SyncJob job;
    const char *name;      /* the back end's, in messages */
    MeshAllreduceFn allreduce;
    int flags;
    Codec wire;            /* how mesh_send encodes (fp32 unless MESH_CODED) */
    uint64_t token;        /* hash of the job token, in every header */
    uint64_t seq;          /* collectives started (the same on every rank) */
    void *pull;            /* this rank's mailbox */
    void **push;           /* [world] one PUSH per other rank (NULL for this rank) */
    int tcp_peers;         /* peers reached over TCP (the others over a Unix socket) */
    unsigned char *peer_node; /* [world] 1: the peer runs on this host (reached over its Unix socket) */
    struct MeshPending *kept; /* messages that came before they were asked for */
    int nkept, capkept;
    long long kept_bytes;  /* their bytes, under MEM_COMM */
    float *stage;          /* host copy of device buffers (GPU runs), grown on demand */
    size_t stage_bytes;
    SyncTraffic tr;        /* the transport and split flags; the counts are count's */
    MsgCount count;        /* the data plane's traffic, counted by net/msg.h */
    int gated;             /* the context had a gate when the mailbox was bound: the PUSHes present the token */
};

/* ---- Prototypes: what an algorithm calls ---- */

/* Sends count floats at data to rank peer (peer != m->rank), with tag (any value 0..2^31-1),
 * encoded by m->wire. Copies data; returns without waiting for the peer. 0, or RS_ERR_* with
 * rs_errmsg() set (RS_ERR_PEER naming a peer that takes nothing within the timeout). */
int mesh_send(Mesh *m, int peer, int tag, const float *data, size_t count);

/* Waits for the message rank peer sent with tag in this collective and adds it into dst (op
 * MESH_ADD: dst[i] += msg[i], in fp32) or copies it (MESH_COPY). count must equal the message's
 * length. 0; RS_ERR_PEER when nothing came within the timeout (naming the peer); RS_ERR_RUNTIME
 * on a length mismatch or a library error. */
int mesh_recv(Mesh *m, int peer, int tag, float *dst, size_t count, int op);

/* mesh_recv waiting at most wait_ms (0: only what is already here): 1 with the message taken, 0
 * when it has not come yet, or not been taken in by the receiving interface (--link) by then (ask
 * again), or a negative RS_ERR_* (rs_errmsg() set). For an
 * algorithm that must not block on one peer while others wait on it (a poll op). */
int mesh_recv_within(Mesh *m, int peer, int tag, float *dst, size_t count, int op, int wait_ms);

/* Waits at most wait_ms (0: only what is already here) for the next message of the mailbox,
 * whoever sent it, and keeps it for mesh_recv or mesh_recv_within, or for a kept message to be in
 * (under --link, a message is in once the receiving interface has taken it in): 1 when one came or
 * is in, 0 when none, or a negative RS_ERR_* (rs_errmsg() set). For an algorithm waiting on
 * several peers at once (the tree): it asks for each with mesh_recv_within(..., 0), and waits here
 * when none is in. */
int mesh_wait_any(Mesh *m, int wait_ms);

/* A ring over P members in which this rank is member i, its neighbours the ranks right and left,
 * on the P segments of buf[0, len) (split_even): a reduce-scatter, tags rs_tag + step (none where
 * rs_tag < 0), after which member i holds the sum of segment (i + 1) mod P; then an all-gather of
 * those segments, tags ag_tag + step (none where ag_tag < 0). With round, member i's segment is
 * rounded to m->wire between the two, so that every member copies the bits its owner keeps.
 * Tags must leave room for P - 1 steps. 0, or the failed mesh call's status. */
int mesh_ring(Mesh *m, float *buf, size_t len, int P, int i, int right, int left, int rs_tag, int ag_tag, int round);

/* Host memory of at least bytes for staging a device's buffer (m->stage, grown on demand, kept
 * until mesh_destroy; counted under MEM_COMM). NULL with rs_errmsg() set. */
float *mesh_stage(Mesh *m, size_t bytes);

/* ---- Prototypes: the back end's ops (engine/sync.h) ---- */

/* init for a back end called name whose all-reduce is fn: binds this rank's mailbox (flags:
 * MESH_IPC, MESH_CODED) and writes its endpoint text. *state gets the Mesh (the caller's
 * destroy frees it). 0, or RS_ERR_INPUT (no device, bind), RS_ERR_RUNTIME. */
int mesh_init(const SyncJob *job, void **state, char *endpoint, size_t len, const char *name, MeshAllreduceFn fn,
              int flags);
int mesh_connect(void *state, char *const *endpoints, int nmembers);
int mesh_broadcast(void *state, float *buf, size_t count);
int mesh_start(void *state, int step, int b, float *grad, float *out);
int mesh_allreduce(void *state, float *buf, size_t count);
void mesh_traffic(void *state, SyncTraffic *out);
void mesh_destroy(void *state);

/* The SyncOps of a back end called name written on the mesh, whose init (calling mesh_init) is
 * init: host memory (the engine stages a GPU's buffers and calls start on its communication
 * thread), sums returned, every other op the mesh's. */
#define MESH_OPS(name_, init_)                                                                        \
    {                                                                                               \
        .name = (name_), .place = SYNC_ON_HOST, .result = SYNC_SUMS, .init = (init_), .connect = mesh_connect, \
        .broadcast = mesh_broadcast, .start = mesh_start, .allreduce = mesh_allreduce, .traffic = mesh_traffic, \
        .destroy = mesh_destroy,                                                                    \
    }

#endif
