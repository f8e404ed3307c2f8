/* gate.h - the job token checked in the handshake of every ZeroMQ connection a process accepts, control and data planes alike (a ZAP handler per context; without --secure) */
#ifndef RS_GATE_H
#define RS_GATE_H

#include <stddef.h>

/*
 * ZeroMQ asks a context's authentication handler (ZAP, RFC 27, at inproc://zeromq.zap.01) about
 * every connection a socket with a security mechanism accepts, before any of the peer's frames
 * is read. Without --secure (CURVE, net/secure.h) the gate is that handler: a thread per context
 * that admits a PLAIN peer whose password is the job token and refuses everyone else. Sockets opt
 * in through gate_socket: the control plane's (domain "ringside-ctrl", net/ctrl.c) and every data
 * plane's (domain "ringside-data": the ring's and the mesh's mailboxes, the parameter servers',
 * DataParallel's), so a process that does not hold the token cannot queue a single frame at a
 * rank, on any port. A context without a gate (a unit test's own) leaves its sockets as they are
 * (no mechanism on either side).
 */

/* ---- Types ---- */

typedef enum { GATE_CTRL = 0, GATE_DATA = 1 } GateDomain;

/* ---- Prototypes ---- */

/* Opens the gate of zctx for token (hex text), or joins it when one is open (each open needs a
 * gate_close; token must then be the same). A no-op returning 0 under --secure, whose handler
 * already owns the context's ZAP endpoint. 0, or RS_ERR_RUNTIME (the endpoint is taken, no
 * thread, or another token on this context). */
int gate_open(void *zctx, const char *token);

/* Leaves the gate of zctx; the last to leave stops its thread and closes its socket (call before
 * zmq_ctx_term, which waits for every socket). A no-op where none is open. */
void gate_close(void *zctx);

/* 1 when zctx has an open gate. */
int gate_on(void *zctx);

/* Puts sock (a new socket of zctx, before its bind or connect) behind the gate, in domain d: a
 * binding socket requires the token (PLAIN server), a connecting one presents it (PLAIN client,
 * user the name its refusals are logged under). A no-op where zctx has no gate. 0, or
 * RS_ERR_RUNTIME. */
int gate_socket(void *zctx, void *sock, int binds, GateDomain d, const char *user);

/* Connections the gate of zctx refused in domain d so far; with any, the last one's "ADDRESS as
 * USER" into from (len bytes). 0 where no gate is open. */
unsigned long long gate_refused(void *zctx, GateDomain d, char *from, size_t len);

/* The job token zctx's gate checks, into out (len bytes): 1, or 0 and "" where zctx has no gate.
 * For the message layer's direct sockets, which check it themselves (net/msgdirect.h). */
int gate_token(void *zctx, char *out, size_t len);

/* Counts a connection that a direct socket of zctx refused (from: "ADDRESS as USER", why: the
 * reason), as the gate counts its own (gate_refused); the data plane's first is logged. */
void gate_note_refused(void *zctx, GateDomain d, const char *from, const char *why);

#endif
