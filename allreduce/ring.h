/* ring.h - the host ring all-reduce core over shared memory or ZeroMQ: pipelined reduce-scatter + all-gather, and a ring broadcast */
#ifndef RS_RING_H
#define RS_RING_H

#include <stddef.h>
#include <stdint.h>

#include "../base/codec.h"
#include "../base/split.h"
#include "../net/msg.h"

/* ---- Types ---- */

/* One rank's end of the ring: what its left neighbour sends arrives in its shared-memory lane
 * or its ZeroMQ PULL; what it sends goes into the right neighbour's lane or out of a PUSH
 * connected to the right neighbour's PULL. Used by one thread at a time (hand it over under a
 * mutex).
 *
 * Transports, per edge r -> r+1 (the fastest both ends allow):
 *   shm  the two processes share a kernel, network and PID namespace (equal host keys) and
 *        both offer a lane: the sender copies each message into the receiver's lane (a memfd
 *        sized to the job, ring_lane_bytes, opened through /proc/<pid>/fd), the receiver reduces
 *        straight out of it; waits spin briefly, then sleep on a futex;
 *   ipc  same host key, no lane: ZeroMQ over an abstract Unix socket;
 *   tcp  otherwise (ranks on different hosts): ZeroMQ over TCP.
 * RINGSIDE_RING_TRANSPORT (auto = shm, ipc, tcp) caps what a rank offers, e.g. tcp to measure
 * the multi-host path on one machine.
 *
 * The endpoint text a rank publishes (ring_create) is '|'-separated fields, the TCP endpoint
 * first and always present, the others only where offered:
 *   tcp://ADDR:PORT|ipc://@NAME|shm=PID.FD.NONCE|host=KEY
 * ipc: the abstract Unix socket its PULL is also bound on; shm: its lane, as the process id,
 * the memfd's descriptor number and a random 64-bit hex number the lane's head repeats; host:
 * 16 hex digits hashing the kernel's boot id and the process's network and PID namespaces.
 * Ranks on one host therefore publish the same KEY; a parser takes the TCP part up to the
 * first '|' and ignores fields it does not know. */
typedef struct Ring Ring;

/* Cumulative data-plane counters. A message is one ring segment: a header (sizeof(RingHeader)
 * bytes: ZeroMQ's first frame, or the start of a lane message) and the segment's floats; bytes
 * count both, not the ZMTP/TCP framing or the lane's alignment padding, so the counts are the
 * same on every transport. Stray messages refused (bad magic or token) count in dropped only. */
typedef MsgCount RingCounters; /* net/msg.h's counts (the ring leaves their node share 0) */

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
enum { RING_KIND_RS = 1, RING_KIND_AG = 2, RING_KIND_BC = 3, RING_KIND_EX = 4, RING_KIND_SKIP = 5, RING_KIND_PG = 6 };

/* Segments: by default a chunk is cut into RING_SEG_PER_CHUNK segments, clamped to
 * [RING_SHM_SEG_MIN, RING_SHM_SEG_BYTES] bytes when every edge of the ring is shared memory
 * (small messages cost little there and pipeline the copy with the reduction) and to
 * [RING_SEG_MIN, RING_SEG_BYTES] otherwise (every ZeroMQ message costs thread hand-offs;
 * [RING_SEG2_MIN, RING_SEG_BYTES] for 2 ranks, whose exchange has no step to pipeline: measured
 * best at 1 to 4 MiB over TCP).
 * RING_SEG_MAX bounds a segment (and what the PULL accepts per frame). Over ZeroMQ, segments
 * of at least MSG_ZEROCOPY_MIN bytes (net/msg.h) are sent without a copy. */
#define RING_SEG_PER_CHUNK 4
#define RING_SHM_SEG_MIN (64u * 1024u)
#define RING_SHM_SEG_BYTES (256u * 1024u)
#define RING_SEG_MIN (256u * 1024u)
#define RING_SEG2_MIN (512u * 1024u) /* the lower bound over ZeroMQ for 2 ranks (one exchange) */
#define RING_SEG_BYTES (1024u * 1024u)
#define RING_SEG_MAX (4u * 1024u * 1024u)

/* Two ranks over ZeroMQ with an fp32 wire exchange their buffers in one phase (ring_allreduce)
 * when it takes at most RING_EX_SEGS segments; otherwise the two-phase ring. */
#define RING_EX_SEGS 256

/* Shared-memory lanes are sized to the job, as NCCL sizes its buffers from its settings: a ring
 * created for collectives of at most `most` floats (ring_create_for; a back end's job: the
 * parameters' broadcast, or bench's largest size) gives its lane room for RING_LANE_MSGS of the
 * largest message ring_segment can cut from one (ring_largest_segment: header block, floats,
 * padding), and for the whole of that collective in such messages, rounded up to whole pages, at
 * least RING_LANE_MIN and never more than RING_LANE_MAX, the lane of a ring that may carry any
 * collective (ring_create: two segments of RING_SEG_MAX). The whole collective is the bound that
 * keeps the bandwidth: a rank whose sends do not fit waits for its neighbour's room, which costs
 * collectives of 4 to 8 MiB (2 ranks on 2 cores, medians of 4: 4 MiB at 6.7 GB/s in a 2 MiB lane,
 * 8.4 in 3 MiB or more; 8 MiB at 6.5 in 4 MiB, 8.2 in 6 MiB or more; 2 MiB and 16 MiB the same in
 * every lane of 2 to 8 MiB); so a 784-64-10 MLP's lanes are 400 KiB, a 784-1024-1024-10 MLP's
 * 7.1 MiB, bench's to 64 MiB the full 8 MiB + 4 KiB. The lane is mapped and touched at creation,
 * so a rank offering one has that much more resident (its `comm`), and so does its left
 * neighbour, which maps it whole to write into it. A collective larger than `most` is cut into
 * segments no larger than the lanes hold (ring_segment; for one of at most `most` that bound never
 * binds: the cut is the same), so no message outgrows a lane.
 * A rank waiting on lanes polls RING_SPIN times (yielding the CPU every 64) before it sleeps. */
#define RING_LANE_MSGS 2
#define RING_LANE_MIN (64u * 1024u)
#define RING_LANE_MAX (8u * 1024u * 1024u + 4096u)
/* A sender that finds the lane empty at RING_LANE_REWIND bytes or more from its start (half the
 * lane, where that is less) goes back to the start (a RING_KIND_SKIP header tells the receiver):
 * what the lanes touch stays in cache, and a small lane's messages stay whole. */
#define RING_LANE_REWIND (256u * 1024u)
#define RING_SPIN 2000

/* A process whose ring receives over ZeroMQ keeps frames of up to RING_HEAP_FRAME bytes in warm
 * heap pages (base/heap.h: heap_keep_frames, once, process-wide). */
#define RING_HEAP_FRAME (2u * RING_SEG_MAX)

/* ---- Helpers ---- */

/* Chunk c of n over count elements: [*lo, *hi). The first count % n chunks hold one element
 * more than the others; with count < n the last chunks are empty. The chunks partition
 * [0, count) in order. */
static inline void ring_chunk(size_t count, int n, int c, size_t *lo, size_t *hi) { split_even(count, n, c, lo, hi); }

/* The largest segment, in floats, ring_segment cuts from a collective of at most `most` floats over
 * world ranks, whatever the transports (a broadcast's, whose chunk is the whole buffer, under the
 * ZeroMQ bounds, which are at least the shared-memory ones: which edges are shared memory is known
 * only at ring_connect); RING_SEG_MAX's floats for most 0 (any collective). */
size_t ring_largest_segment(int world, size_t most);

/* Bytes of messages in the lane of a ring for collectives of at most `most` floats over world ranks
 * (0: any): RING_LANE_MSGS of the largest segment's messages (a 64-byte header block and the floats,
 * padded to 64 bytes), or a collective of `most` floats in such messages where that is more,
 * rounded up to pages, in [RING_LANE_MIN, RING_LANE_MAX]. */
size_t ring_lane_bytes(int world, size_t most);

/* ---- Prototypes ---- */

/* Creates rank's end of a ring of world ranks: binds a PULL on tcp://addr:* (addr NULL or "":
 * 127.0.0.1) and, as RINGSIDE_RING_TRANSPORT allows, on an abstract Unix socket, creates its
 * shared-memory lane (for any collective: RING_LANE_MAX; ring_create_for sizes it to a job's
 * collectives), and writes the endpoint text (see Ring) into endpoint (len bytes; ""
 * when world == 1, when nothing is bound). zctx: the ZeroMQ context to use, or NULL to own
 * one (terminated by ring_destroy). token: the job's token hash, carried by every message.
 * timeout: seconds any wait for a peer may last. On success *out owns everything; on failure
 * *out is NULL and RS_ERR_RUNTIME (or RS_ERR_INPUT: bad address, naming it) is returned with
 * rs_errmsg() set. */
int ring_create(Ring **out, void *zctx, int rank, int world, const char *addr, uint64_t token,
                double timeout, char *endpoint, size_t len);

/* ring_create for a job whose collectives take at most `most` floats (0: any, ring_create): its lane
 * holds ring_lane_bytes(world, most), and no segment it cuts or is set to (ring_set_segment) is
 * larger than ring_largest_segment(world, most). Every rank of a ring must pass the same `most`
 * (ring_connect refuses a neighbour's lane too small for this ring's largest message). */
int ring_create_for(Ring **out, void *zctx, int rank, int world, const char *addr, uint64_t token,
                    double timeout, size_t most, char *endpoint, size_t len);

/* Connects to the right neighbour, endpoints[(rank + 1) % world] (endpoints holds every
 * rank's text from ring_create, in rank order): maps its lane (and the left neighbour's, whose
 * futex this rank rings) for shm edges, connects the PUSH otherwise; closes the PULL when the
 * left neighbour will write into the lane. Once per ring. 0, RS_ERR_INPUT (a missing or
 * unreadable endpoint), RS_ERR_PEER (a neighbour's lane is gone: the process exited) or
 * RS_ERR_RUNTIME. */
int ring_connect(Ring *r, char *const *endpoints);

/* Sets the segment size in bytes (rounded to whole floats, clamped to [4, RING_SEG_MAX] and to the
 * ring's largest segment, ring_create_for); every rank must use the same. For tests; 0 restores the
 * default (by collective size). */
void ring_set_segment(Ring *r, size_t bytes);

/* Sets what all-reduce segments travel in (default fp32, scale 1); every rank must use the same.
 * With a 16-bit codec a rank encodes what it sends (its chunk, then each partial sum it
 * forwards) and decodes what it receives, adding in fp32; the owner of a fully reduced chunk
 * rounds it as the others will receive it, so every rank still ends with the same bits.
 * Segments then carry 2 bytes per element and are always copied (never zero-copy). Broadcast
 * always moves fp32. */
void ring_set_wire(Ring *r, Codec wire);

/* The transport ring_connect chose to the right neighbour: "shm", "ipc" or "tcp" ("" before). */
const char *ring_transport(const Ring *r);

/* Whether this rank's neighbours run on its host (a cluster's node), as their endpoints' host keys
 * say: 1 with *left and *right set (1: the same host), or 0 where a key is missing (--transport
 * tcp publishes none) and the ring cannot tell. */
int ring_node_links(const Ring *r, int *left, int *right);

/* In-place sum of count floats at buf (host memory) over every rank: reduce-scatter then
 * all-gather, N-1 steps each (N = 2 over ZeroMQ with an fp32 wire: one exchange with the same
 * messages, bytes and bits; ring.c's head comment). On return buf holds the same bits on every
 * rank and the ring holds no reference to buf. 0; RS_ERR_PEER when a neighbour sends nothing or takes nothing
 * for the timeout (the message names it); RS_ERR_RUNTIME on a protocol or library error.
 * After an error the ring is broken: every later call returns RS_ERR_PEER. */
int ring_allreduce(Ring *r, float *buf, size_t count);

/* ring_allreduce's two phases apart (ZeRO's): reduce-scatter leaves chunk (rank + 1) % N of
 * buf's count floats summed over every rank, in the all-reduce's order and rounded as the wire
 * rounds it (its other chunks hold partial sums), and its bounds in *own_lo, *own_hi;
 * all-gather then passes each rank's chunk (rank + 1) % N around the ring, in fp32 whatever the
 * wire (the parameters an owner updated: every rank then holds the owner's bits). Each returns
 * with no send referencing buf. Sums equal to ring_allreduce's bit for bit (the same chunks,
 * segments and order); the bytes are its two-phase ring's on an fp32 wire. Status codes as
 * ring_allreduce. */
int ring_reduce_scatter(Ring *r, float *buf, size_t count, size_t *own_lo, size_t *own_hi);
int ring_all_gather(Ring *r, float *buf, size_t count);

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

/* Closes the sockets, unmaps the lanes and frees r. The PUSH lingers: what the last collective
 * queued is still delivered, for at most the timeout, by zmq_ctx_term (of the owned context
 * here, or of the caller's shared one, which the caller must therefore terminate, not
 * abandon); lane messages are already in the neighbour's memory. A ring broken by an error has
 * already dropped its queue. NULL is a no-op. */
void ring_destroy(Ring *r);

#endif
