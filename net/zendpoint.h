/* zendpoint.h - data-plane endpoints of one host or many: the --transport rule, this host's key, bind on TCP and a Unix socket, connect by the transport wanted */
#ifndef RS_ZENDPOINT_H
#define RS_ZENDPOINT_H

#include <stddef.h>

/* ---- Types ---- */

/* What --transport asks for between ranks of one host (across hosts it is always TCP). */
typedef enum {
    ZEP_AUTO = 0, /* the fastest each back end has: the ring's shared memory, else a Unix socket */
    ZEP_SHM = 1,  /* shared memory, every edge (the ring only) */
    ZEP_IPC = 2,  /* a Unix socket (ZeroMQ ipc), every edge */
    ZEP_TCP = 3,  /* TCP, also on one host */
} ZepWant;

/* ---- Prototypes ---- */

/* --transport's value as a ZepWant: 0 with *out set, or RS_ERR_INPUT naming it ("auto", "shm",
 * "ipc", "tcp"). */
int zep_parse(const char *text, ZepWant *out);

/* This process's --transport (ZEP_AUTO until set); zep_set is called once per process, by the
 * trainer and the bench, before any data-plane socket exists. The deprecated environment
 * variable RINGSIDE_RING_TRANSPORT still sets it when --transport is auto (with a notice). */
void zep_set(ZepWant want);
ZepWant zep_get(void);

/* This host's key: a hash of the kernel's boot id and this process's network and PID namespaces
 * (the scope of abstract Unix sockets and of /proc/<pid>), 16 hex digits, and under --nodes the
 * node's number ("-n2": processes of two emulated nodes are two machines to the data plane: TCP
 * between them, and the network in the traffic counts); "" when unknown. */
void zep_host_key(char *out, size_t len);

/* Binds sock (a ZeroMQ socket) on tcp://addr:* (every interface when addr cannot be bound,
 * advertising addr) and, unless zep_get() is ZEP_TCP and when this host's key is known, on an
 * abstract Unix socket named after tag; writes "tcp://A:P[|ipc://@NAME|host=KEY]" into text.
 * 0, or RS_ERR_* naming the address. */
int zep_bind(void *sock, const char *addr, const char *tag, char *text, size_t len);

/* Connects sock to a zep_bind text: over the Unix socket when it is on this host and the
 * transport allows it (auto, ipc), else over TCP; *via gets "ipc" or "tcp" (static strings).
 * 0, RS_ERR_INPUT when --transport ipc (or shm) cannot be had (another host, no Unix socket),
 * or RS_ERR_PEER when the connect fails. who names the peer in messages ("server 1"). */
int zep_connect(void *sock, const char *text, const char *who, const char **via);

/* How a peer whose endpoint text says "host=KEY" (anywhere in it) reaches a zep_bind socket of
 * this process: "ipc" when it is on this host and --transport is not tcp, else "tcp". */
const char *zep_peer_via(const char *text);

#endif
