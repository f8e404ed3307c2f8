/* msgdirect.h - the message layer's direct sockets (--msg-layer direct): plain TCP and Unix streams that the rank's own thread writes and reads, for net/msg.c only */
#ifndef RS_MSGDIRECT_H
#define RS_MSGDIRECT_H

/*
 * A direct socket stands where a ZeroMQ socket would (the same MsgSocketSpec, the same four
 * types, the same endpoints) and keeps the layer's rules (net/msg.h): a send never waits for
 * room, a receiving socket bounds what a peer makes this process hold, a frame over the bound
 * ends the peer's connection, a binding socket admits only a peer that presents the job token.
 * What differs is who moves the bytes: the caller's thread writes a message straight into the
 * kernel's socket (no hand-off to an I/O thread), and reads it there itself, after a short
 * yielding spin (MSGD_SPIN_US) before it sleeps in poll(2). Only what the kernel cannot take
 * at once goes to one process-wide writer thread, which finishes it in order while the caller
 * goes on: the large messages, whose cost is their bytes, not the hand-off. What it queues is
 * copied, a lent payload too (MsgLend is never held: a sender may wait for its lends before it
 * reads, and so may its peer), so a lend is let go when msg_send returns.
 *
 * On the stream, a message is its frames, each an 8-byte header (length, and a "more" flag,
 * little-endian) and its bytes. A connecting socket's first message is its hello: "RSD1", the
 * job token (empty where the context has no gate), the name its refusals are logged under and
 * its routing identity. A ROUTER hands its receiver the identity as the first frame, as
 * ZeroMQ's does, and routes a send by it. inproc://NAME is an abstract Unix socket of this
 * process. There is no CURVE (--secure is refused with --msg-layer direct).
 *
 * Handles are tagged (the low bit set) so that net/msg.c tells them from ZeroMQ's sockets.
 */

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "msg.h"

/* How long a waiting receiver polls its sockets (yielding its CPU between looks) before it
 * sleeps in poll(2), in µs; RINGSIDE_MSG_SPIN_US overrides it (0: sleep at once). */
#define MSGD_SPIN_US 50

/* 1 when sock is a direct socket's handle. */
static inline int msgd_is(const void *sock) { return ((uintptr_t)sock & 1u) != 0; }

/* A direct socket as s says (s->type one of the four; the gate's token taken from zctx where it
 * has one): 0 with *sock set, or RS_ERR_* (rs_errmsg()). */
int msgd_socket(void *zctx, const MsgSocketSpec *s, void **sock);

/* Closes it: what it queued is still written for its linger (drop 1: not at all). */
void msgd_close(void *sock, int drop);

/* Binds (tcp://ADDR:PORT or :*, ipc://@NAME or a path, inproc://NAME); bound gets what it got. 0 or -1 (errno). */
int msgd_bind(void *sock, const char *endpoint, char *bound, size_t len);

/* Connects (one peer per connecting socket) and sends the hello. 0 or -1 (errno). */
int msgd_connect(void *sock, const char *endpoint);

/* Sends m's frames (head, payload, stamp_bytes of stamp when not 0) as net/msg.c's msg_send
 * describes them. 0 or -1 (errno: EHOSTUNREACH no such peer, EPIPE the peer is gone). */
int msgd_send(void *sock, const MsgOut *m, const unsigned char *stamp, size_t stamp_bytes);

/* Lets go of every payload lent through lend that a queue still holds, copying its rest into the
 * queue's own memory (msg_lend_reclaim's direct half). Any thread. */
void msgd_reclaim(MsgLend *lend);

/* The next frame of a whole message into p (uninitialised before; counted under MEM_COMM);
 * *more 1 while frames follow. With the first frame, flags ZMQ_DONTWAIT: -1 EAGAIN when no
 * whole message is in. 0 or -1 (errno). */
int msgd_frame(void *sock, zmq_msg_t *p, int flags, int *more);

/* msg_poll over sockets of both kinds (at most 64 watched, as msg_poll says); wait_ms < 0: no
 * end. msgd_poll_until waits to a deadline (clock_now seconds) instead, to the microsecond where
 * every socket is direct (msg_wait's). */
int msgd_poll(void *const *socks, int n, long wait_ms, unsigned char *ready);
int msgd_poll_until(void *const *socks, int n, double deadline, unsigned char *ready);

/* The frame bound (0: none). 0. */
int msgd_bound(void *sock, size_t max_frame);

#endif
