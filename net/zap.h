/* zap.h - one ZeroMQ authentication handler (ZAP, RFC 27): its requests taken, its answers sent, its loop; what the token gate (gate.c) and --secure's key check (secure.c) share */
#ifndef RS_ZAP_H
#define RS_ZAP_H

#include <zmq.h>

/* ---- Macros ---- */

#define ZAP_ENDPOINT "inproc://zeromq.zap.01" /* where libzmq asks a context's handler */

/* ---- Prototypes ---- */

/* Receives one request on rep (a REP bound at ZAP_ENDPOINT) into f: at most max frames, any
 * beyond read and dropped. Frames: version, request id, domain, address, identity, mechanism,
 * then the mechanism's credentials. Returns how many are in f (the caller closes them); below 2
 * there is no request id, and nothing to answer. */
int zap_take(void *rep, zmq_msg_t *f, int max);

/* Answers request f (at least 2 frames) on rep: 200 "OK" when ok, else 400 and why. */
void zap_answer(void *rep, zmq_msg_t *f, int ok, const char *why);

/* Serves rep until *stop (read with __atomic) is set or the context ends: one(arg) for each
 * request that waits, looking at *stop every 100 ms. For a handler's thread. */
void zap_loop(void *rep, const int *stop, void (*one)(void *arg), void *arg);

#endif
