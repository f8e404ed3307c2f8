/* ring.h - the host ring all-reduce core over ZeroMQ: pipelined reduce-scatter + all-gather, and a ring broadcast */
#ifndef RS_RING_H
#define RS_RING_H

#include <stddef.h>
#include <stdint.h>

/* ---- Types ---- */

/* One rank's end of the ring: a PULL bound for the left neighbour's data, a PUSH connected to
 * the right neighbour. Used by one thread at a time (hand it over under a mutex). */
typedef struct Ring Ring;

/* Cumulative data-plane counters. A message is one ring segment: a header frame
 * (sizeof(RingHeader) bytes) and a data frame; bytes count both frames' payloads, not the
 * ZMTP/TCP framing. Stray messages refused (bad magic or token) count in dropped only. */
typedef struct {
    unsigned long long bytes_sent, bytes_received, messages_sent, messages_received, dropped;
} RingCounters;

/* The header frame of every data message (host byte order: every rank runs the same binary on
 * hosts of one byte order). The receiver knows exactly which segment comes next, so any
 * difference is detected: a wrong magic or token is a stray (dropped, counted), a right token
 * with the wrong position is a protocol error. */
typedef struct {
    uint32_t magic;   /* RING_MAGIC */
    uint32_t kind;    /* RING_KIND_* */
    uint64_t token;   /* hash of the job token */
    uint64_t seq;     /* collective number on this ring (the same on every rank) */
    uint32_t step;    /* ring step within the phase */
    uint32_t from;    /* sender's rank */
    uint64_t offset;  /* first element of the segment in the buffer */
    uint64_t count;   /* elements in the data frame */
} RingHeader;

#define RING_MAGIC 0x31525352u /* "RSR1" */
enum { RING_KIND_RS = 1, RING_KIND_AG = 2, RING_KIND_BC = 3 };

/* Segments: by default RING_SEG_PER_CHUNK per chunk, within [RING_SEG_MIN, RING_SEG_BYTES]
 * bytes over ZeroMQ, within [RING_SHM_SEG_MIN, RING_SHM_SEG_BYTES] when every edge is shared
 * memory; over ZeroMQ, segments of at least RING_ZEROCOPY_MIN bytes are sent without a copy.
 * RING_SEG_MAX bounds a segment (and what the PULL accepts per frame). A shared-memory lane
 * holds RING_LANE_BYTES (at least two of the largest messages); a waiting rank polls it
 * RING_SPIN times before it sleeps. */
#define RING_SEG_MIN (256u * 1024u)
#define RING_SEG_BYTES (1024u * 1024u)
#define RING_SHM_SEG_MIN (64u * 1024u)
#define RING_SHM_SEG_BYTES (256u * 1024u)
#define RING_SEG_PER_CHUNK 4
#define RING_LANE_BYTES (8u * 1024u * 1024u + 4096u)
#define RING_SPIN 2000
#define RING_SEG_MAX (4u * 1024u * 1024u)
#define RING_ZEROCOPY_MIN (32u * 1024u)

/* ---- Helpers ---- */

/* Chunk c of n over count elements: [*lo, *hi). The first count % n chunks hold one element
 * more than the others; with count < n the last chunks are empty. The chunks partition
 * [0, count) in order. */
static inline void ring_chunk(size_t count, int n, int c, size_t *lo, size_t *hi) {
    size_t base = count / (size_t)n, rem = count % (size_t)n, uc = (size_t)c;
    *lo = uc * base + (uc < rem ? uc : rem);
    *hi = *lo + base + (uc < rem ? 1 : 0);
}

/* ---- Prototypes ---- */

/* Creates rank's end of a ring of world ranks: binds a PULL on tcp://addr:* (addr NULL or "":
 * 127.0.0.1) and writes the bound endpoint into endpoint (len bytes; "" when world == 1, when
 * nothing is bound). zctx: the ZeroMQ context to use, or NULL to own one (terminated by
 * ring_destroy). token: the job's token hash, carried by every message. timeout: seconds any
 * wait for a peer may last. On success *out owns everything; on failure *out is NULL and
 * RS_ERR_RUNTIME (or RS_ERR_INPUT: bad address, naming it) is returned with rs_errmsg() set. */
int ring_create(Ring **out, void *zctx, int rank, int world, const char *addr, uint64_t token,
                double timeout, char *endpoint, size_t len);

/* Connects the PUSH to the right neighbour, endpoints[(rank + 1) % world] (endpoints holds
 * every rank's text from ring_create, in rank order). 0 or RS_ERR_INPUT/RS_ERR_RUNTIME. */
int ring_connect(Ring *r, char *const *endpoints);

/* Sets the segment size in bytes (rounded to whole floats, clamped to [4, RING_SEG_MAX]);
 * every rank must use the same. For tests; 0 restores the default (by collective size). */
void ring_set_segment(Ring *r, size_t bytes);

/* The transport ring_connect chose to the right neighbour: "ipc" or "tcp" ("" before). */
const char *ring_transport(const Ring *r);

/* In-place sum of count floats at buf (host memory) over every rank: reduce-scatter then
 * all-gather, N-1 steps each. On return buf holds the same bits on every rank and the ring
 * holds no reference to buf. 0; RS_ERR_PEER when a neighbour sends nothing or takes nothing
 * for the timeout (the message names it); RS_ERR_RUNTIME on a protocol or library error.
 * After an error the ring is broken: every later call returns RS_ERR_PEER. */
int ring_allreduce(Ring *r, float *buf, size_t count);

/* Copies rank 0's count floats at buf into every rank's buf (a pipelined pass around the
 * ring). Status codes as ring_allreduce. */
int ring_broadcast(Ring *r, float *buf, size_t count);

/* Seconds the last collective blocked waiting for its first incoming message (0 when it
 * received nothing: one rank or count 0). */
double ring_last_wait(const Ring *r);

/* Messages received by this ring so far (a progress counter, safe from any thread). */
unsigned long long ring_progress(const Ring *r);

/* Copies the cumulative counters (safe from any thread). */
void ring_counters(const Ring *r, RingCounters *out);

/* Closes the sockets and frees r. The PUSH lingers: what the last collective queued is still
 * delivered, for at most the timeout, by zmq_ctx_term (of the owned context here, or of the
 * caller's shared one, which the caller must therefore terminate, not abandon). A ring broken
 * by an error has already dropped its queue. NULL is a no-op. */
void ring_destroy(Ring *r);

#endif
