/* elastic.h - torchrun's side of a rank: its agent's TCPStore (where rank 0 publishes the control plane) and its error file */
#ifndef RS_ELASTIC_H
#define RS_ELASTIC_H

#include <stddef.h>

/* ---- Prototypes ---- */

/* Writes torchrun's error file at path, as torch.distributed.elastic's `record` does, so that
 * the agent's failure summary names the error: {"message": {"message": MESSAGE, "extraInfo":
 * {"py_callstack": MESSAGE, "timestamp": "<when, unix seconds>"}}} (the summary shows
 * py_callstack, so it holds the message rather than a Python stack). The file appears whole or
 * not at all (a temporary linked into place). 0, or RS_ERR_RUNTIME naming path and the reason
 * (path untouched then). */
int elastic_error_write(const char *path, const char *message, long long when);

/* Stores value (text) under key in the TCPStore (PyTorch's c10d store protocol) at host:port,
 * then asks the store whether key is there, so that it returns only once the store holds it.
 * Retries a refused connection until timeout seconds have passed. 0, or RS_ERR_PEER naming
 * host:port and what failed (no store, a store that closed on us, the timeout). */
int elastic_store_set(const char *host, int port, const char *key, const char *value, double timeout);

/* Waits until key exists in the TCPStore at host:port and reads its value as text into out
 * (cap bytes with the NUL). At most timeout seconds in all (a refused connection is retried).
 * 0, or RS_ERR_PEER naming host:port and key (timeout, no store, a value longer than cap - 1
 * bytes or holding a NUL). */
int elastic_store_get(const char *host, int port, const char *key, char *out, size_t cap, double timeout);

#endif
