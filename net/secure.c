/* secure.c - CURVE keys, socket options and the ZAP handler that admits only holders of the job's key */
#include "secure.h"
#include "../base/atomicfile.h"
#include "../base/err.h"
#include "../base/log.h"
#include "zap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static struct {
    int on;
    char pub[41], sec[41];
    void *zctx;
    void *zap;             /* REP on inproc://zeromq.zap.01, served by the thread */
    pthread_t thread;
    int thread_started;
    int stop;              /* __atomic: the thread ends at its next look (zap_loop) */
    unsigned long long accepted, refused;
    pthread_mutex_t lock;  /* guards refused_from (written by the thread) */
    char refused_from[64]; /* the address of the last peer refused */
} sec = {.lock = PTHREAD_MUTEX_INITIALIZER};

int secure_keygen(const char *path, int force) {
    char pub[41], key[41], text[100], why[1200];
    struct stat st;
    if (!force && lstat(path, &st) == 0)
        return rs_error(RS_ERR_INPUT, "keygen %s: the file exists (a job's hosts may hold its key): --force "
                        "replaces it", path);
    if (zmq_curve_keypair(pub, key) != 0)
        return rs_error(RS_ERR_RUNTIME, "keygen: this libzmq has no CURVE support (%s)", zmq_strerror(zmq_errno()));
    int n = snprintf(text, sizeof text, "%s\n%s\n", pub, key);
    if (atomicfile_write(path, text, (size_t)n, 0600) != RS_OK) {
        snprintf(why, sizeof why, "%s", rs_errmsg());
        return rs_error(RS_ERR_INPUT, "keygen %s", why);
    }
    return RS_OK;
}

/* Reads the two Z85 lines of a key file: readable by its owner alone (as ssh wants of a private
 * key), and the public key the one of the secret key. */
static int secure_read(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return rs_error(RS_ERR_INPUT, "--secure %s: %s (make one with `ringside keygen %s`)", path, strerror(errno), path);
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077)) {
        fclose(f);
        return rs_error(RS_ERR_INPUT, "--secure %s: mode %04o lets other users read the secret key (chmod 600 %s)",
                        path, (unsigned)(st.st_mode & 07777), path);
    }
    char a[128] = "", b[128] = "", derived[41];
    int ok = fscanf(f, "%127s %127s", a, b) == 2 && strlen(a) == 40 && strlen(b) == 40;
    fclose(f);
    uint8_t raw[32];
    if (!ok || !zmq_z85_decode(raw, a) || !zmq_z85_decode(raw, b))
        return rs_error(RS_ERR_INPUT, "--secure %s: not a key file (expected two 40-character Z85 keys)", path);
    if (zmq_curve_public(derived, b) != 0 || strcmp(derived, a))
        return rs_error(RS_ERR_INPUT, "--secure %s: the public key (line 1) is not the secret key's (line 2): the "
                        "lines come from different pairs (write a new pair with `ringside keygen --force %s`)", path,
                        path);
    memcpy(sec.pub, a, 41);
    memcpy(sec.sec, b, 41);
    return RS_OK;
}

/* One ZAP exchange (RFC 27): accept CURVE clients whose public key is the job's. */
static void secure_zap_one(void *arg) {
    (void)arg;
    zmq_msg_t f[7];
    int n = zap_take(sec.zap, f, 7);
    if (n < 2) { /* no request id: nothing can be answered */
        for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
        return;
    }
    /* version, request id, domain, address, identity, mechanism, credentials... */
    int curve = n >= 6 && zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5);
    uint8_t want[32];
    zmq_z85_decode(want, sec.pub);
    int ok = curve && n == 7 && zmq_msg_size(&f[6]) == 32 && !memcmp(zmq_msg_data(&f[6]), want, 32);
    zap_answer(sec.zap, f, ok, "not this job's key");
    if (ok) sec.accepted++;
    else {
        int an = n > 3 ? (int)zmq_msg_size(&f[3]) : 0;
        if (an > (int)sizeof sec.refused_from - 1) an = (int)sizeof sec.refused_from - 1;
        pthread_mutex_lock(&sec.lock);
        memcpy(sec.refused_from, an ? zmq_msg_data(&f[3]) : "", (size_t)an);
        sec.refused_from[an] = 0;
        sec.refused++;
        pthread_mutex_unlock(&sec.lock);
    }
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}

static void *secure_zap_loop(void *arg) {
    zap_loop(sec.zap, &sec.stop, secure_zap_one, arg);
    return NULL;
}

int secure_enable(void *zctx, const char *path) {
    if (!zmq_has("curve")) return rs_error(RS_ERR_RUNTIME, "--secure: this libzmq was built without CURVE");
    RS_TRY(secure_read(path));
    sec.zctx = zctx;
    sec.zap = zmq_socket(zctx, ZMQ_REP);
    int linger = 0;
    if (!sec.zap) return rs_error(RS_ERR_RUNTIME, "--secure: cannot create the authentication socket");
    zmq_setsockopt(sec.zap, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(sec.zap, ZAP_ENDPOINT) != 0) {
        zmq_close(sec.zap);
        sec.zap = NULL;
        return rs_error(RS_ERR_RUNTIME, "--secure: cannot bind the authentication handler: %s", zmq_strerror(zmq_errno()));
    }
    __atomic_store_n(&sec.stop, 0, __ATOMIC_RELEASE);
    if (pthread_create(&sec.thread, NULL, secure_zap_loop, NULL) != 0) {
        zmq_close(sec.zap);
        sec.zap = NULL;
        return rs_error(RS_ERR_RUNTIME, "--secure: cannot start the authentication thread");
    }
    sec.thread_started = 1;
    sec.on = 1;
    return RS_OK;
}

int secure_on(void) { return sec.on; }

int secure_socket(void *sock, SecureSide side) {
    if (!sec.on) return RS_OK;
    int one = 1, rc = 0;
    if (side == SECURE_BINDS) {
        rc |= zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one);
        rc |= zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec.sec, 40);
        rc |= zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "ringside", 8);
    } else {
        rc |= zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, sec.pub, 40);
        rc |= zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, sec.pub, 40);
        rc |= zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec.sec, 40);
    }
    return rc ? rs_error(RS_ERR_RUNTIME, "--secure: cannot set CURVE options: %s", zmq_strerror(zmq_errno())) : RS_OK;
}

void secure_disable(void) {
    if (sec.thread_started) {
        __atomic_store_n(&sec.stop, 1, __ATOMIC_RELEASE);
        pthread_join(sec.thread, NULL);
        sec.thread_started = 0;
    }
    if (sec.zap) zmq_close(sec.zap);
    sec.zap = NULL;
    sec.on = 0;
}

void secure_counters(unsigned long long *accepted, unsigned long long *refused) {
    pthread_mutex_lock(&sec.lock);
    *accepted = sec.accepted;
    *refused = sec.refused;
    pthread_mutex_unlock(&sec.lock);
}

unsigned long long secure_refused(char *from, size_t len) {
    pthread_mutex_lock(&sec.lock);
    unsigned long long n = sec.refused;
    if (n && len) snprintf(from, len, "%s", sec.refused_from);
    pthread_mutex_unlock(&sec.lock);
    return n;
}
