/* msg.h - the data plane's one message layer: every host back end's ZeroMQ messages framed, lent zero-copy, paced on the emulated link, counted and bounded here */
#ifndef RS_MSG_H
#define RS_MSG_H

/*
 * A message is [identity?][header][payload?][stamp?]:
 *   identity  a ROUTER's routing frame (the ps servers'); not counted;
 *   header    the back end's own header struct, encoded by its own code (RingHeader, MeshHeader,
 *             the ps WireHeader): the layer never reads it;
 *   payload   raw bytes (copied, or lent to ZeroMQ without a copy when MSG_ZEROCOPY_MIN bytes or
 *             more and the sender offers a MsgLend), or floats encoded by a codec straight into
 *             the frame (base/codec.h: bf16, fp16, FP8 with its scale);
 *   stamp     under --link only: when the message started on the sender's emulated interface
 *             (net/link.h), a frame of its own, emulation metadata that no count includes.
 * Traffic is counted here and only here, by one rule for every back end: a message's bytes are
 * its header plus its payload; messages inside one process (inproc) are neither paced nor
 * counted; a message to or from a process of this host adds to the node share as well.
 * Receiving, the back end reads the frames, checks its header, then either takes the message
 * (msg_accept: paces the receiving interface, counts) or drops it (msg_drop: counts a stray).
 * What the ring's shared-memory lanes move (the ring's own transport on one host) is counted by
 * the ring with the same rule, through msg_count_sent / msg_count_received.
 *
 * Sockets are set up here too (msg_socket: CURVE under --secure, the job token's gate, every
 * option), bound and connected here (msg_bind, msg_connect) and closed here; a back end reads
 * a message's frames through msg_id / msg_head / msg_payload and keeps a payload past its
 * message as a MsgFrame. No back end calls ZeroMQ itself (tests/transport_rules.py).
 *
 * Queues. A sender never waits for room: every socket sends with no high-water mark
 * (ZMQ_SNDHWM 0). Every receiving socket bounds what one peer may make this process hold
 * (ZMQ_RCVHWM: msg_queue_bound's messages a peer, one pipe each): beyond it ZeroMQ stops
 * reading that peer's connection, the kernel's buffers fill and the rest waits in the sender's
 * own queue, which has no bound, so a full receiver never blocks a sender or fails its send
 * (over TCP and ipc each process's pipe has its own side's mark; inproc pipes, within one
 * process, have none when either side's is 0, as every sender's is). The bound is four times
 * what a legitimate peer can have in flight to this socket in one step of its protocol (each
 * back end derives that figure where it creates the socket), and never below MSG_QUEUE_FLOOR:
 * a peer of the job does not reach it in the steps the figure counts, and where one can (a
 * large ps allreduce, the ring's tiny segments) the rest only waits in its own queue until
 * read, which no back end's progress depends on (each says why where it derives its bound);
 * a peer that floods small messages (with the job token: the gate admits it) grows this
 * process by at most the bound's messages, the frame bound (msg_bound) capping each.
 */

#include <stddef.h>
#include <zmq.h>

#include "../base/codec.h"

/* ---- Macros ---- */

/* Payloads of this many bytes or more go to ZeroMQ without a copy where the sender offers a
 * MsgLend (docs/benchmarks.md, "Zero-copy threshold"): below it a copy costs less than the
 * release the sender must then wait for. */
#define MSG_ZEROCOPY_MIN (32u * 1024u)

/* A wait with under a millisecond left, where it cannot sleep to the microsecond (zmq_poll counts
 * whole milliseconds), looks again after this long (msg_wait, and the direct layer's mixed polls). */
#define MSG_WAIT_NAP_S 50e-6

/* The smallest receiving queue (msg_queue_bound): a few dozen small messages, nothing to a
 * process, enough that ZeroMQ reads on (it resumes a stopped connection at half the bound)
 * while the back end takes a burst. */
#define MSG_QUEUE_FLOOR 64

/* ---- Types ---- */

/* Cumulative data-plane counts; updated by the layer with relaxed atomics, read with
 * msg_count_read from any thread. */
typedef struct {
    unsigned long long bytes_sent, bytes_received, messages_sent, messages_received;
    unsigned long long dropped;                 /* strays: refused, never counted above */
    unsigned long long node_sent, node_received; /* of the bytes, those to and from this host */
} MsgCount;

/* Payloads lent to ZeroMQ and not yet let go. out counts them (read and changed with __atomic
 * builtins: msg_lent); when it falls to zero the layer calls wake(arg) where wake is set (from
 * ZeroMQ's I/O thread, or from the sender's on a failed send). The owner keeps a lent payload
 * unchanged until out is zero. */
typedef struct {
    long out;
    void (*wake)(void *arg);
    void *arg;
} MsgLend;

/* One message to send. Set head; then a raw payload (payload, bytes) or encoded floats (codec,
 * src, count: codec_bytes(codec->type, count) bytes, count 0 an empty frame); neither: no
 * payload frame. */
typedef struct {
    const void *id;          /* routing identity (ROUTER), or NULL */
    size_t idlen;
    const void *head;        /* the back end's encoded header */
    size_t head_bytes;
    const void *payload;     /* raw payload, or NULL */
    size_t bytes;
    const void *tail;        /* a second raw part, copied into the payload frame after it (never lent) */
    size_t tail_bytes;
    const Codec *codec;      /* or: src[0..count) encoded by it into the payload frame */
    const float *src;
    size_t count;
    MsgLend *lend;           /* a raw payload of MSG_ZEROCOPY_MIN bytes or more is lent (NULL: copied) */
    int local;               /* to this process (inproc): not paced, not counted */
    int node;                /* to a process of this host: counted in the node share too */
} MsgOut;

/* One received frame, held (its bytes count under MEM_COMM while it is): what a back end keeps of
 * a message past the message itself (msg_frame_take). Its insides are the layer's; an empty one
 * (msg_frame_init, or after msg_frame_close) has size 0. */
typedef struct {
    zmq_msg_t z;
} MsgFrame;

/* One message received: up to three frames ([identity] header [payload]), frames beyond
 * discarded and counted in extra; the stamp taken off. Read its frames with msg_id, msg_head and
 * msg_payload. */
typedef struct {
    MsgFrame part[3];
    int n, extra;
    int with_id;             /* part[0] is a routing identity (not counted) */
    double stamp;            /* the sender's emulated-link stamp, 0 without one */
} MsgIn;

/* One data-plane socket as msg_socket sets it up. */
typedef struct {
    int type;            /* ZMQ_PUSH, ZMQ_PULL, ZMQ_DEALER or ZMQ_ROUTER */
    int binds;           /* 1: it binds (--secure's server side; the gate checks the token); 0: it connects */
    const char *user;    /* connecting: the name it presents at the job's gate (NULL: "member") */
    int ungated;         /* 1: not put behind the job's gate even where the context has one */
    int linger_ms;       /* how long closing it still delivers what is queued (0: drops it) */
    int sndtimeo_ms;     /* a send's longest wait (0: ZeroMQ's, none; a send never waits for room) */
    size_t max_frame;    /* the frame bound (msg_bound; 0: none) */
    int rcv_queue;       /* the queue bound (msg_queue_bound): messages one peer may make this
                          * process hold; required (>= 1) of every type but ZMQ_PUSH */
    const void *id;      /* its routing identity (what a ROUTER knows it by), or NULL */
    size_t idlen;
    int mandatory;       /* a ROUTER: a send to an identity not connected fails (EHOSTUNREACH) */
} MsgSocketSpec;

/* The engine under the layer's sockets (--msg-layer): ZeroMQ's sockets and I/O threads, or the
 * direct sockets (net/msgdirect.h: plain TCP and Unix streams the rank's own thread writes and
 * reads, as MPI's TCP transport does). Every back end takes the same one; the frames, the
 * counts, the pacing and the bounds above are the layer's, whichever it is. */
typedef enum { MSG_ZEROMQ = 0, MSG_DIRECT = 1 } MsgLayer;

/* ---- Prototypes ---- */

/* --msg-layer's value ("zeromq", "direct") as a MsgLayer: 0 with *out set, or RS_ERR_INPUT
 * naming it. */
int msg_layer_parse(const char *text, MsgLayer *out);

/* This process's engine for the sockets msg_socket creates from now on (MSG_ZEROMQ until set;
 * the trainer and the bench set it once, before any data-plane socket exists; a test may change
 * it between sockets). */
void msg_layer_set(MsgLayer layer);
MsgLayer msg_layer_get(void);

/* A ZeroMQ context of its own (for a back end created without the process's: a unit test's), or
 * NULL (msg_errno()). End it with msg_context_end once its sockets are closed: that delivers what
 * they queued, for at most their linger. */
void *msg_context(void);
void msg_context_end(void *zctx);

/* Creates a socket of zctx as s says, of this process's engine (msg_layer_get): CURVE under --secure (net/secure.h), behind the job token's
 * gate where zctx has one and s->ungated is 0 (net/gate.h), no send high-water mark, s's queue
 * bound, frame bound, linger, send timeout, identity and ROUTER_MANDATORY; bind or connect it
 * next. 0 with *sock set, or RS_ERR_* (rs_errmsg(); *sock NULL, nothing left open). */
int msg_socket(void *zctx, const MsgSocketSpec *s, void **sock);

/* Closes sock (NULL: nothing): what it queued is still delivered for its linger, or with drop 1
 * dropped at once (a lent payload let go: msg_lend_drain then returns soon). */
void msg_close_socket(void *sock, int drop);

/* Binds sock to endpoint ("tcp://A:*", "ipc://@NAME", "inproc://NAME"); where bound is not NULL,
 * writes the endpoint it got (the port ':*' chose) into bound[0..len). 0, or -1 (msg_errno()). */
int msg_bind(void *sock, const char *endpoint, char *bound, size_t len);

/* Connects sock to endpoint. 0, or -1 (msg_errno()). */
int msg_connect(void *sock, const char *endpoint);

/* The error of the layer's last failed call in this thread (an errno value: EAGAIN, a timeout or
 * nothing there; EHOSTUNREACH, a ROUTER's peer gone), and its text. */
int msg_errno(void);
const char *msg_strerror(int e);

/* The queue bound of a receiving socket whose every peer has at most in_flight messages in
 * flight to it in one step of the back end's protocol: 4 * in_flight, at least MSG_QUEUE_FLOOR
 * (the head comment). */
int msg_queue_bound(size_t in_flight);

/* Sends m on sock (its frames; the link's booking and stamp unless local; the counts into c
 * unless local, c may be NULL). *start (may be NULL) gets when the message starts on this
 * process's interface (clock_now seconds; 0 without a link or when local). Blocks at most the
 * socket's ZMQ_SNDTIMEO. 0, or -1 with msg_errno() set (EAGAIN: the peer took nothing for that
 * long); nothing is counted then. */
int msg_send(void *sock, const MsgOut *m, MsgCount *c, double *start);

/* Receives one whole message (flags 0 or ZMQ_DONTWAIT) with_id or not; its frames count under
 * MEM_COMM while held (net/zframe.h). Returns the frame count (0 never), or -1 with
 * msg_errno() set (EAGAIN: nothing there). Close with msg_close. */
int msg_recv(void *sock, MsgIn *m, int flags, int with_id);

/* Waits until sock has a message or the clock reaches deadline (clock_now seconds), retrying
 * after signals: 1 ready, 0 timed out, -1 on a library error (msg_errno()). */
int msg_wait(void *sock, double deadline);

/* Waits up to wait_ms (0: not at all) for any of n sockets to have a message: ready[i] (may be
 * NULL, for one socket) set to 1 for each that has. Returns how many have (0: none, also after
 * a signal), or -1 on a library error (msg_errno()). At most 64 sockets are watched: with more,
 * the rest are reported ready (their receives simply find nothing). */
int msg_poll(void *const *socks, int n, long wait_ms, unsigned char *ready);

/* Bounds what a peer may make this process hold on receiving socket sock: a frame larger than
 * max_frame bytes (0: no bound) ends the sender's connection before its bytes are read
 * (ZMQ_MAXMSGSIZE), so a stray or hostile peer cannot grow the rank by sending one. Set before
 * bind or connect. 0, or -1 (msg_errno()). */
int msg_bound(void *sock, size_t max_frame);

/* The routing identity (with_id), header and payload frames of m: NULL and 0 when absent. */
const void *msg_id(const MsgIn *m, size_t *bytes);
const void *msg_head(const MsgIn *m, size_t *bytes);
const void *msg_payload(const MsgIn *m, size_t *bytes);

/* Moves m's payload frame into f (empty before; m's payload is then empty, and closing m leaves
 * f as it is): the payload outlives its message. f stays empty where m has none. */
void msg_frame_take(MsgIn *m, MsgFrame *f);

/* Moves src into dst (empty before); src is left empty. */
void msg_frame_move(MsgFrame *dst, MsgFrame *src);

/* An empty frame (size 0), to take into or close. */
void msg_frame_init(MsgFrame *f);

/* The bytes of f and their count (NULL-safe to read only when the size is not 0). */
const void *msg_frame_data(const MsgFrame *f);
size_t msg_frame_size(const MsgFrame *f);

/* Lets f's bytes go (off MEM_COMM); f is left empty, to be used again. */
void msg_frame_close(MsgFrame *f);

/* Moves the whole message src into dst (its frames and fields; a message kept for later); src
 * is left with no frames. */
void msg_move(MsgIn *dst, MsgIn *src);

/* The counted bytes of m: its header and payload. */
size_t msg_bytes(const MsgIn *m);

/* Takes in m, which the back end accepted: unless local, counts it into c (node: in the node
 * share too) and paces this process's receiving interface: with book_only 0 it waits there
 * until the bytes are in (link_recv), with 1 it books them and returns when they will be in
 * (link_recv_book; the caller waits where it needs the data). Returns that time (clock_now
 * seconds; 0 without a link or when local). Does not close m. */
double msg_accept(const MsgIn *m, int local, int node, int book_only, MsgCount *c);

/* msg_accept for a message already taken apart: bytes its header and payload, stamp its
 * sender's (a server that keeps a message's payload past its frames, ps/server.c). */
double msg_take(size_t bytes, double stamp, int local, int node, int book_only, MsgCount *c);

/* Drops a stray (a bad header, a wrong token, extra frames): counts it in c->dropped and
 * closes it. */
void msg_drop(MsgIn *m, MsgCount *c);

/* Counts one stray in c->dropped (for a back end that closes the message itself). */
void msg_count_dropped(MsgCount *c);

void msg_close(MsgIn *m);

/* The emulated interface (net/link.h) as the back ends see it, for what they schedule around
 * it: seconds of sends booked and not yet on the wire (link_backlog), and a wait until a booked
 * arrival (link_wait_until). */
double msg_backlog(void);
void msg_wait_until(double t);

/* Counts a message moved another way (the ring's shared-memory lanes): bytes in c's sent or
 * received figures, and in the node share where node. */
void msg_count_sent(MsgCount *c, size_t bytes, int node);
void msg_count_received(MsgCount *c, size_t bytes, int node);

/* A consistent-enough snapshot of c (each field read atomically) into out. */
void msg_count_read(const MsgCount *c, MsgCount *out);

/* How many payloads lent through lend ZeroMQ still holds (an acquire load: once 0, the owner may
 * change them). */
long msg_lent(const MsgLend *lend);

/* One payload lent through lend let go (ZeroMQ's release of a frame, the direct layer's writer
 * or reclaim): the last one wakes whoever waits (lend->wake), from whatever thread let it go. */
void msg_lend_release(MsgLend *lend);

/* Asks the layer to let go at once of what it still holds of the payloads lent through lend,
 * copying what remains: the direct layer's queued parts, which only its writer thread would let go,
 * once the peer reads (ZeroMQ's I/O thread lets go by itself: nothing to do there). A waiter for
 * lend calls it first, so that a payload held for a peer that is not reading never holds up a
 * rank that would read once it has its lends back (two ring ranks over Unix sockets did hang so).
 * msg_lend_drain calls it. */
void msg_lend_reclaim(MsgLend *lend);

/* Waits up to seconds for every payload lent through lend to be let go: 1 when they all have,
 * 0 on timeout. Sleeps in 1 ms steps (for a teardown; a back end that waits per step has wake). */
int msg_lend_drain(MsgLend *lend, double seconds);

#endif
