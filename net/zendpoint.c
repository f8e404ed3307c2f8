/* zendpoint.c - data-plane endpoints: the --transport rule, this host's key, TCP and Unix-socket binds, connects by the transport wanted */
#include "zendpoint.h"
#include "../base/err.h"
#include "../base/log.h"
#include "msg.h"
#include "../base/hash.h"
#include "node.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static ZepWant zep_want;
static int zep_set_once;

int zep_parse(const char *text, ZepWant *out) {
    static const char *names[] = {"auto", "shm", "ipc", "tcp"};
    for (int i = 0; i < 4; i++)
        if (text && !strcmp(text, names[i])) {
            *out = (ZepWant)i;
            return RS_OK;
        }
    return rs_error(RS_ERR_INPUT, "--transport '%s': expected auto, shm, ipc or tcp", text ? text : "");
}

/* The deprecated RINGSIDE_RING_TRANSPORT's value (ZEP_AUTO when unset or unknown); loud says so. */
static ZepWant zep_from_env(int loud) {
    const char *e = getenv("RINGSIDE_RING_TRANSPORT");
    ZepWant w = ZEP_AUTO;
    if (!e || !*e || !strcmp(e, "auto")) return ZEP_AUTO;
    if (zep_parse(e, &w) != RS_OK) {
        if (loud) log_warn("RINGSIDE_RING_TRANSPORT=%s: expected auto, shm, ipc or tcp; using auto", e);
        return ZEP_AUTO;
    }
    if (loud) log_warn("RINGSIDE_RING_TRANSPORT=%s is deprecated (it goes in the next release): use --transport %s", e, e);
    return w;
}

void zep_set(ZepWant want) {
    zep_set_once = 1;
    zep_want = want == ZEP_AUTO ? zep_from_env(1) : want;
}

ZepWant zep_get(void) {
    /* a process that never set it (a unit test): the variable alone, read every time */
    return zep_set_once ? zep_want : zep_from_env(0);
}

void zep_host_key(char *out, size_t len) {
    out[0] = 0;
    char boot[128] = "", ns[128];
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
        fclose(f);
    }
    if (!boot[0]) return;
    uint64_t h = hash_bytes(HASH_FNV_INIT, boot, strcspn(boot, "\n"));
    static const char *links[2] = {"/proc/self/ns/net", "/proc/self/ns/pid"};
    for (int i = 0; i < 2; i++) {
        ssize_t k = readlink(links[i], ns, sizeof ns - 1);
        if (k <= 0) return;
        ns[k] = 0;
        h = hash_text(hash_text(h, "/"), ns);
    }
    /* emulated nodes (--nodes) are machines apart: their processes reach each other over TCP and
     * count each other as the network, as processes of real machines do */
    if (node_get()->nodes > 0) snprintf(out, len, "%016llx-n%d", (unsigned long long)h, node_get()->node);
    else snprintf(out, len, "%016llx", (unsigned long long)h);
}

int zep_bind(void *sock, const char *addr, const char *tag, char *text, size_t len) {
    if (!addr || !*addr) addr = "127.0.0.1";
    char ep[320], tcp[320];
    size_t n = sizeof tcp;
    snprintf(ep, sizeof ep, "tcp://%s:*", addr);
    if (msg_bind(sock, ep, tcp, n) != 0) {
        char any[320];
        if (msg_bind(sock, "tcp://*:*", any, sizeof any) != 0)
            return rs_error(RS_ERR_INPUT, "cannot bind the data plane on %s: %s (the address must be one of this host's)",
                            ep, msg_strerror(msg_errno()));
        const char *port = strrchr(any, ':');
        snprintf(tcp, sizeof tcp, "tcp://%s%s", addr, port ? port : ":0");
    }
    char host[40] = "", ipc[300] = "";
    if (zep_get() != ZEP_TCP) zep_host_key(host, sizeof host);
    if (host[0]) { /* an abstract Unix socket: no file to clean up, gone with the process */
        static unsigned serial;
        snprintf(ipc, sizeof ipc, "ipc://@ringside-%s-%s-%ld-%u", tag, host, (long)getpid(),
                 __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
        if (msg_bind(sock, ipc, NULL, 0) != 0) {
            log_warn("no Unix-socket endpoint (%s: %s); TCP only", ipc, msg_strerror(msg_errno()));
            ipc[0] = 0;
        }
    }
    int k = ipc[0] ? snprintf(text, len, "%s|%s|host=%s", tcp, ipc, host) : snprintf(text, len, "%s", tcp);
    if (k < 0 || (size_t)k >= len) return rs_error(RS_ERR_RUNTIME, "endpoint %s does not fit %zu bytes", tcp, len);
    return RS_OK;
}

int zep_connect(void *sock, const char *text, const char *who, const char **via) {
    char tcp[320] = "", ipc[300] = "", host[40] = "", mine[40];
    size_t k = strcspn(text, "|");
    if (strncmp(text, "tcp://", 6) || k >= sizeof tcp)
        return rs_error(RS_ERR_PEER, "%s published no data-plane endpoint ('%s')", who, text);
    memcpy(tcp, text, k);
    for (const char *p = text + k; *p == '|';) {
        const char *f = p + 1;
        size_t n = strcspn(f, "|");
        if (!strncmp(f, "ipc://", 6) && n < sizeof ipc) snprintf(ipc, sizeof ipc, "%.*s", (int)n, f);
        else if (!strncmp(f, "host=", 5) && n - 5 < sizeof host) snprintf(host, sizeof host, "%.*s", (int)(n - 5), f + 5);
        p = f + n;
    }
    ZepWant want = zep_get();
    zep_host_key(mine, sizeof mine);
    int here = ipc[0] && host[0] && !strcmp(host, mine);
    if ((want == ZEP_IPC || want == ZEP_SHM) && !here)
        return rs_error(RS_ERR_INPUT, "--transport %s: %s is %s", want == ZEP_IPC ? "ipc" : "shm", who,
                        ipc[0] ? "on another host (or in another network or PID namespace)" : "reachable over TCP only");
    const char *ep = here && want != ZEP_TCP ? ipc : tcp;
    if (msg_connect(sock, ep) != 0)
        return rs_error(RS_ERR_PEER, "cannot connect to %s at %s: %s", who, ep, msg_strerror(msg_errno()));
    *via = ep == ipc ? "ipc" : "tcp";
    return RS_OK;
}

const char *zep_peer_via(const char *text) {
    char mine[40];
    zep_host_key(mine, sizeof mine);
    const char *h = text ? strstr(text, "host=") : NULL;
    int here = h && mine[0] && !strncmp(h + 5, mine, strlen(mine));
    return here && zep_get() != ZEP_TCP ? "ipc" : "tcp";
}
