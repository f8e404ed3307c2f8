/* secure.h - --secure: ZeroMQ CURVE encryption and authentication on every socket of a job */
#ifndef RS_SECURE_H
#define RS_SECURE_H

#include <stddef.h>

/* ---- Types ---- */
typedef enum { SECURE_BINDS = 0, SECURE_CONNECTS = 1 } SecureSide;

/* ---- Prototypes ---- */

/* Writes a new CURVE key pair (Z85 public key, then secret key, one per line) to path with mode
 * 0600, through a temporary file and a rename. An existing path is replaced only when force is 1.
 * 0, RS_ERR_INPUT (path exists, cannot write) or RS_ERR_RUNTIME. */
int secure_keygen(const char *path, int force);

/* Turns security on for this process with the job's key pair read from path, and starts the
 * authentication handler on zctx: a connecting peer is accepted only when it proves it holds the
 * job's secret key. Call before any socket is created on zctx. 0, RS_ERR_INPUT (missing or
 * malformed key file, one that other users may read (mode & 077), or whose public key is not its
 * secret key's; the file named) or RS_ERR_RUNTIME (no CURVE in this libzmq). */
int secure_enable(void *zctx, const char *path);

/* 1 when secure_enable succeeded in this process. */
int secure_on(void);

/* Applies CURVE options to a new socket (before bind/connect): the binding side acts as the CURVE
 * server, the connecting side as a client holding the job's key pair. No-op when security is off.
 * 0 or RS_ERR_RUNTIME. */
int secure_socket(void *sock, SecureSide side);

/* Stops the authentication handler (before zmq_ctx_term). Safe when never enabled. */
void secure_disable(void);

/* Counters of the authentication handler: accepted and refused handshakes. */
void secure_counters(unsigned long long *accepted, unsigned long long *refused);

/* Handshakes refused so far, and when any, the address of the last refused peer into from. */
unsigned long long secure_refused(char *from, size_t len);

#endif
