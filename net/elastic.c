/* elastic.c - torchrun's side of a rank: a minimal client of its agent's TCPStore, and its error file */
#include "elastic.h"
#include "../base/atomicfile.h"
#include "../base/clock.h"
#include "../base/err.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* PyTorch's c10d TCPStore protocol (torch/csrc/distributed/c10d/TCPStoreBackend.hpp): a one-byte
 * query type, then its arguments; strings and byte vectors are a native size_t length and the
 * bytes. A connection opens with VALIDATE and the magic number or the server drops it. */
enum { STORE_VALIDATE = 0, STORE_SET = 1, STORE_GET = 3, STORE_CHECK = 5, STORE_WAIT = 6 };
#define STORE_MAGIC 0x3C85F7CEu
#define STORE_READY 0        /* CHECK's answer when every key is there */
#define STORE_STOP_WAITING 0 /* WAIT's answer when every key is there */

int elastic_error_write(const char *path, const char *message, long long when) {
    char stamp[32];
    snprintf(stamp, sizeof stamp, "%lld", when);
    cJSON *root = cJSON_CreateObject(), *msg = cJSON_AddObjectToObject(root, "message");
    cJSON *extra = msg ? cJSON_AddObjectToObject(msg, "extraInfo") : NULL;
    char *text = NULL;
    if (extra && cJSON_AddStringToObject(msg, "message", message) && cJSON_AddStringToObject(extra, "py_callstack", message) &&
        cJSON_AddStringToObject(extra, "timestamp", stamp))
        text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return rs_error(RS_ERR_RUNTIME, "torchrun's error file %s: out of memory", path);
    int rc = atomicfile_write(path, text, strlen(text), 0644);
    free(text);
    return rc;
}

/* A store at host:port, for messages. */
typedef struct {
    const char *host;
    int port;
    int fd;
    double deadline;
} Store;

static int store_fail(const Store *s, const char *what) {
    return rs_error(RS_ERR_PEER, "torchrun's store %s:%d (MASTER_ADDR:MASTER_PORT): %s", s->host, s->port, what);
}

/* Connects s->fd, retrying a refused connection every 100 ms until the deadline. */
static int store_connect(Store *s) {
    char port[16], why[300] = "no address";
    snprintf(port, sizeof port, "%d", s->port);
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        int g = getaddrinfo(s->host, port, &hints, &res);
        if (g != 0) {
            snprintf(why, sizeof why, "cannot resolve %s: %s", s->host, gai_strerror(g));
            return store_fail(s, why);
        }
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol), err = 0;
            if (fd < 0) err = errno;
            else if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) err = errno;
            if (err == EINPROGRESS) { /* wait for the handshake, then take its outcome */
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                double left = s->deadline - clock_now();
                socklen_t el = sizeof err;
                err = ETIMEDOUT;
                if (left > 0 && poll(&p, 1, (int)(left * 1000) + 1) == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
            }
            if (fd >= 0 && err == 0) {
                s->fd = fd;
                freeaddrinfo(res);
                return RS_OK;
            }
            snprintf(why, sizeof why, "cannot connect: %s", strerror(err));
            if (fd >= 0) close(fd);
        }
        freeaddrinfo(res);
        if (clock_now() + 0.1 > s->deadline) return store_fail(s, why);
        nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
    }
}

static int store_send(Store *s, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        struct pollfd pf = {.fd = s->fd, .events = POLLOUT};
        double left = s->deadline - clock_now();
        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) != 1) return store_fail(s, "timed out sending");
        ssize_t w = send(s->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR) return store_fail(s, strerror(errno));
        if (w > 0) p += w, n -= (size_t)w;
    }
    return RS_OK;
}

/* Reads exactly n bytes; what names the answer awaited, for the timeout's message. */
static int store_recv(Store *s, void *data, size_t n, const char *what) {
    char *p = data, why[300];
    while (n > 0) {
        struct pollfd pf = {.fd = s->fd, .events = POLLIN};
        double left = s->deadline - clock_now();
        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) != 1) {
            snprintf(why, sizeof why, "%s: timed out", what);
            return store_fail(s, why);
        }
        ssize_t r = recv(s->fd, p, n, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            snprintf(why, sizeof why, "%s: %s", what, r == 0 ? "the store closed the connection" : strerror(errno));
            return store_fail(s, why);
        }
        if (r > 0) p += r, n -= (size_t)r;
    }
    return RS_OK;
}

/* A query: type, then (when nkeys > 0) a count, then each text as a length and its bytes. */
static int store_query(Store *s, int type, int counted, const char *const *texts, int n) {
    size_t len = 1 + (counted ? sizeof(uint64_t) : 0);
    for (int i = 0; i < n; i++) len += sizeof(uint64_t) + strlen(texts[i]);
    unsigned char *buf = malloc(len), *p = buf;
    if (!buf) return rs_error(RS_ERR_RUNTIME, "out of memory");
    *p++ = (unsigned char)type;
    if (counted) {
        uint64_t c = (uint64_t)n;
        memcpy(p, &c, sizeof c), p += sizeof c;
    }
    for (int i = 0; i < n; i++) {
        uint64_t l = strlen(texts[i]);
        memcpy(p, &l, sizeof l), p += sizeof l;
        memcpy(p, texts[i], l), p += l;
    }
    int rc = store_send(s, buf, len);
    free(buf);
    return rc;
}

static int store_open(Store *s, const char *host, int port, double timeout) {
    *s = (Store){.host = host, .port = port, .fd = -1, .deadline = clock_now() + timeout};
    RS_TRY(store_connect(s));
    unsigned char hello[5] = {STORE_VALIDATE};
    uint32_t magic = STORE_MAGIC;
    memcpy(hello + 1, &magic, sizeof magic);
    return store_send(s, hello, sizeof hello);
}

int elastic_store_set(const char *host, int port, const char *key, const char *value, double timeout) {
    Store s;
    int rc = store_open(&s, host, port, timeout);
    const char *kv[2] = {key, value};
    unsigned char answer = 0xff;
    if (rc == RS_OK) rc = store_query(&s, STORE_SET, 0, kv, 2);
    if (rc == RS_OK) rc = store_query(&s, STORE_CHECK, 1, kv, 1);
    if (rc == RS_OK) rc = store_recv(&s, &answer, 1, "the answer to CHECK");
    if (rc == RS_OK && answer != STORE_READY) rc = store_fail(&s, "the key just set is not there");
    if (s.fd >= 0) close(s.fd);
    return rc;
}

int elastic_store_get(const char *host, int port, const char *key, char *out, size_t cap, double timeout) {
    Store s;
    char what[300];
    snprintf(what, sizeof what, "waiting for '%s'", key);
    int rc = store_open(&s, host, port, timeout);
    unsigned char answer = 0xff;
    uint64_t len = 0;
    if (rc == RS_OK) rc = store_query(&s, STORE_WAIT, 1, &key, 1);
    if (rc == RS_OK) rc = store_recv(&s, &answer, 1, what);
    if (rc == RS_OK && answer != STORE_STOP_WAITING) rc = store_fail(&s, "the wait was cancelled");
    if (rc == RS_OK) rc = store_query(&s, STORE_GET, 0, &key, 1);
    if (rc == RS_OK) rc = store_recv(&s, &len, sizeof len, "the value's length");
    if (rc == RS_OK && len >= cap) {
        snprintf(what, sizeof what, "'%s' holds %llu bytes, more than the %zu expected", key, (unsigned long long)len, cap - 1);
        rc = store_fail(&s, what);
    }
    if (rc == RS_OK) rc = store_recv(&s, out, (size_t)len, "the value");
    if (rc == RS_OK) {
        out[len] = 0;
        if (strlen(out) != len) {
            snprintf(what, sizeof what, "'%s' holds a NUL byte: not text", key);
            rc = store_fail(&s, what);
        }
    }
    if (rc != RS_OK && cap) out[0] = 0;
    if (s.fd >= 0) close(s.fd);
    return rc;
}
