/* student_net.c - lab 5's plumbing: each rank's mailbox, tagged sends and receives, the back end's glue; the all-reduce itself is allreduce/student.c's */
#include "student.h"
#include "../net/secure.h"
#include "../base/clock.h"
#include "../base/config.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../net/link.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "../net/zframe.h"
#include "../net/zmq_check.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== The plumbing ===========================================================================
 *
 * Every data message is two frames: a StudentHeader, then the floats. PUSH/PULL keeps one
 * sender's messages in order, but messages from different senders interleave in the mailbox:
 * student_recv keeps any message it did not ask for (in s->kept) until it is asked for. */

#define STUDENT_MAGIC 0x31535352u /* "RSS1" */
#define STUDENT_TAG_BCAST (-1)    /* the parameter broadcast's tag (not a student's) */

typedef struct {
    uint32_t magic;   /* STUDENT_MAGIC */
    int32_t tag;      /* the sender's tag */
    uint64_t token;   /* hash of the job token */
    uint64_t seq;     /* collective number (the same on every rank) */
    uint32_t from;    /* sender's rank */
    uint32_t pad;
    uint64_t count;   /* floats in the data frame */
} StudentHeader;

struct Pending {
    StudentHeader h;
    zmq_msg_t data;
};

/* dst[i] (+)= src[i], reading src (a received frame, at any byte offset) through memcpy. */
static void student_apply(float *restrict dst, const unsigned char *restrict src, size_t n, int op) {
    if (op == STUDENT_COPY) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float v[8];
        memcpy(v, src + i * sizeof(float), sizeof v);
        for (int k = 0; k < 8; k++) dst[i + k] += v[k];
    }
    for (; i < n; i++) {
        float v;
        memcpy(&v, src + i * sizeof(float), sizeof v);
        dst[i] += v;
    }
}

int student_send(Student *s, int peer, int tag, const float *data, size_t count) {
    if (peer < 0 || peer >= s->world || peer == s->rank || !s->push || !s->push[peer])
        return rs_error(RS_ERR_RUNTIME, "student: rank %d cannot send to rank %d (world %d)", s->rank, peer, s->world);
    StudentHeader h = {STUDENT_MAGIC, tag, s->token, s->seq, (uint32_t)s->rank, 0, count};
    size_t bytes = count * sizeof(float);
    zmq_msg_t m;
    double stamp = link_send(sizeof h + bytes); /* the emulated interface (--link) */
    unsigned char sb[LINK_STAMP_BYTES];
    link_stamp_encode(stamp, sb);
    if (zmq_send(s->push[peer], &h, sizeof h, ZMQ_SNDMORE) < 0) goto fail;
    if (zmq_msg_init_size(&m, bytes) != 0) return zmqCheck(-1);
    if (bytes) memcpy(zmq_msg_data(&m), data, bytes);
    if (zmq_msg_send(&m, s->push[peer], stamp > 0 ? ZMQ_SNDMORE : 0) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&m);
        errno = e;
        goto fail;
    }
    if (stamp > 0 && zmq_send(s->push[peer], sb, sizeof sb, 0) < 0) goto fail; /* not counted */
    s->tr.bytes_sent += sizeof h + bytes;
    s->tr.messages_sent++;
    return RS_OK;
fail:
    if (zmq_errno() == EAGAIN)
        return rs_error(RS_ERR_PEER, "student: rank %d took no data for %.0f s (is it alive?)", peer, s->job.timeout);
    return zmqCheck(-1);
}

/* Reads one whole message from the mailbox (header + data), waiting until deadline.
 * 0 with *h and *data set (caller closes data); 1 on timeout; RS_ERR_* on a library error.
 * Strays (wrong magic or token, wrong shape) are dropped and counted. */
static int student_next(Student *s, StudentHeader *h, zmq_msg_t *data, double deadline) {
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0) return 1;
        zmq_pollitem_t it = {s->pull, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, (long)(left * 1000.0) + 1);
        if (rc < 0) {
            if (zmq_errno() == EINTR) continue;
            return zmqCheck(rc);
        }
        if (rc == 0) continue;
        zmq_msg_t hm;
        zmq_msg_init(&hm);
        if (zframe_recv(&hm, s->pull, ZMQ_DONTWAIT) < 0) {
            zframe_close(&hm);
            if (zmq_errno() == EAGAIN || zmq_errno() == EINTR) continue;
            return zmqCheck(-1);
        }
        int ok = zmq_msg_size(&hm) == sizeof *h, more = zmq_msg_more(&hm);
        if (ok) memcpy(h, zmq_msg_data(&hm), sizeof *h);
        zframe_close(&hm);
        zmq_msg_init(data);
        if (more && zframe_recv(data, s->pull, ZMQ_DONTWAIT) < 0) {
            zframe_close(data);
            return zmqCheck(-1);
        }
        ok = ok && more;
        double stamp = 0;
        for (int extra = 0; zmq_msg_more(data); extra++) { /* an emulated link's stamp, or a stray's frames */
            zmq_msg_t x;
            zmq_msg_init(&x);
            if (zframe_recv(&x, s->pull, ZMQ_DONTWAIT) < 0) {
                zframe_close(&x);
                break;
            }
            int again = zmq_msg_more(&x);
            if (extra || again || !link_stamp_decode(zmq_msg_data(&x), zmq_msg_size(&x), &stamp)) ok = 0;
            zframe_close(&x);
            if (!again) break;
        }
        ok = ok && h->magic == STUDENT_MAGIC && h->token == s->token && h->from < (uint32_t)s->world &&
             (int)h->from != s->rank && zmq_msg_size(data) == h->count * sizeof(float);
        if (!ok) {
            zframe_close(data);
            s->tr.dropped++;
            continue;
        }
        link_recv(sizeof *h + zmq_msg_size(data), stamp);
        s->tr.bytes_received += sizeof *h + zmq_msg_size(data);
        s->tr.messages_received++;
        return RS_OK;
    }
}

static int student_take(Student *s, const StudentHeader *h, zmq_msg_t *data, float *dst, size_t count, int op) {
    if (h->count != count) {
        int from = (int)h->from, tag = h->tag;
        size_t got = (size_t)h->count;
        zframe_close(data);
        return rs_error(RS_ERR_RUNTIME, "student: rank %d expected %zu floats from rank %d (tag %d), got %zu", s->rank,
                        count, from, tag, got);
    }
    student_apply(dst, zmq_msg_data(data), count, op);
    zframe_close(data);
    return RS_OK;
}

int student_recv(Student *s, int peer, int tag, float *dst, size_t count, int op) {
    if (peer < 0 || peer >= s->world || peer == s->rank)
        return rs_error(RS_ERR_RUNTIME, "student: rank %d cannot receive from rank %d (world %d)", s->rank, peer, s->world);
    for (int i = 0; i < s->nkept; i++) { /* asked for at last */
        struct Pending *p = &s->kept[i];
        if ((int)p->h.from == peer && p->h.tag == tag && p->h.seq == s->seq) {
            StudentHeader h = p->h;
            zmq_msg_t data;
            zmq_msg_init(&data);
            zmq_msg_move(&data, &p->data);
            zframe_close(&p->data);
            struct Pending *last = &s->kept[--s->nkept]; /* the last one fills the gap */
            if (last != p) {
                p->h = last->h;
                zmq_msg_init(&p->data);
                zmq_msg_move(&p->data, &last->data);
                zframe_close(&last->data);
            }
            return student_take(s, &h, &data, dst, count, op);
        }
    }
    double deadline = clock_now() + s->job.timeout;
    for (;;) {
        StudentHeader h;
        zmq_msg_t data;
        int rc = student_next(s, &h, &data, deadline);
        if (rc == 1)
            return rs_error(RS_ERR_PEER, "student: rank %d got nothing from rank %d (tag %d) for %.0f s (is it alive? did it send?)",
                            s->rank, peer, tag, s->job.timeout);
        if (rc != RS_OK) return rc;
        if ((int)h.from == peer && h.tag == tag && h.seq == s->seq) return student_take(s, &h, &data, dst, count, op);
        if (h.seq < s->seq) { /* from a finished collective: sent, but nobody asked for it */
            zframe_close(&data);
            return rs_error(RS_ERR_RUNTIME, "student: rank %d sent rank %d a message (tag %d) that rank %d never received in that collective",
                            (int)h.from, s->rank, h.tag, s->rank);
        }
        if (s->nkept == s->capkept) {
            int cap = s->capkept ? 2 * s->capkept : 16;
            struct Pending *k = realloc(s->kept, (size_t)cap * sizeof *k);
            if (!k) {
                zframe_close(&data);
                return rs_error(RS_ERR_RUNTIME, "student: out of memory");
            }
            s->kept = k;
            s->capkept = cap;
        }
        struct Pending *k = &s->kept[s->nkept++];
        k->h = h;
        zmq_msg_init(&k->data);
        zmq_msg_move(&k->data, &data);
        zframe_close(&data);
    }
}

/* One collective: numbers it, times it, runs fn on host memory. Leftover messages of this
 * collective afterwards are a bug in the algorithm (sent, never received): reported. */
static int student_collective(Student *s, float *host, size_t count, int bcast) {
    s->seq++;
    int rc;
    if (!bcast) {
        rc = student_allreduce(s, host, count);
    } else { /* rank 0's values to everyone: the plumbing's own, a flat tree */
        rc = RS_OK;
        if (s->rank == 0)
            for (int p = 1; p < s->world && rc == RS_OK; p++) rc = student_send(s, p, STUDENT_TAG_BCAST, host, count);
        else
            rc = student_recv(s, 0, STUDENT_TAG_BCAST, host, count, STUDENT_COPY);
    }
    if (rc != RS_OK) return rc;
    for (int i = 0; i < s->nkept; i++)
        if (s->kept[i].h.seq == s->seq)
            return rs_error(RS_ERR_RUNTIME, "student: rank %d: a message from rank %d (tag %d) was never received in this collective",
                            s->rank, (int)s->kept[i].h.from, s->kept[i].h.tag);
    return RS_OK;
}

/* Host memory for staging device buffers, counted under MEM_COMM. */
static float *student_host(Student *s, size_t bytes) {
    if (bytes <= s->stage_bytes) return s->stage;
    Device *dev = s->job.dev;
    device_host_free(dev, s->stage, s->stage_bytes, MEM_COMM);
    s->stage_bytes = 0;
    if (!(s->stage = device_host_alloc(dev, bytes, MEM_COMM))) return NULL;
    s->stage_bytes = bytes;
    return s->stage;
}

/* A collective on device memory: in place on the CPU, staged through host memory on a GPU. */
static int student_on_device(Student *s, float *buf, size_t count, int bcast) {
    if (s->job.dev->host_visible) return student_collective(s, buf, count, bcast);
    size_t bytes = count * sizeof(float);
    float *h = student_host(s, bytes ? bytes : sizeof(float));
    if (!h) return rs_error(RS_ERR_RUNTIME, "student: no host memory for %zu bytes: %s", bytes, rs_errmsg());
    if (bytes) RS_TRY(device_d2h(s->job.dev, h, buf, bytes));
    RS_TRY(student_collective(s, h, count, bcast));
    return bytes ? device_h2d(s->job.dev, buf, h, bytes) : RS_OK;
}

/* ---- The back end (engine/sync.h) --------------------------------------------------------------------------- */

static void student_destroy(void *state) {
    Student *s = state;
    if (!s) return;
    for (int i = 0; i < s->nkept; i++) zframe_close(&s->kept[i].data);
    free(s->kept);
    if (s->push)
        for (int p = 0; p < s->world; p++)
            if (s->push[p]) zmq_close(s->push[p]); /* lingers: what was queued is still delivered */
    free(s->push);
    if (s->pull) zmq_close(s->pull);
    device_host_free(s->job.dev, s->stage, s->stage_bytes, MEM_COMM);
    free(s);
}

/* Binds this rank's mailbox on tcp://addr:* and says its address. */
static int student_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    *state = NULL;
    if (len) endpoint[0] = 0;
    if (!job->dev) return rs_error(RS_ERR_INPUT, "student: no device");
    Student *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "student: out of memory");
    s->job = *job;
    s->rank = job->rank;
    s->world = job->world;
    if (s->job.timeout <= 0) s->job.timeout = 60;
    char canon[8192];
    config_canonical(job->cfg, canon, sizeof canon);
    s->token = config_hash(job->token && *job->token ? job->token : canon);
    int rc = RS_OK;
    if (job->world > 1) {
        const char *addr = job->addr && *job->addr ? job->addr : "127.0.0.1";
        int zero = 0;
        char where[300], ep[512];
        size_t eplen = sizeof ep;
        if (!(s->pull = zmq_socket(job->zctx, ZMQ_PULL))) {
            rc = zmqCheck(-1);
            goto err;
        }
        if ((rc = secure_socket(s->pull, SECURE_BINDS))) goto err;
        if ((rc = zmqCheck(zmq_setsockopt(s->pull, ZMQ_LINGER, &zero, sizeof zero))) ||
            (rc = zmqCheck(zmq_setsockopt(s->pull, ZMQ_RCVHWM, &zero, sizeof zero))))
            goto err;
        snprintf(where, sizeof where, "tcp://%s:*", addr);
        if (zmq_bind(s->pull, where) != 0) {
            rc = rs_error(RS_ERR_INPUT, "student: cannot bind the data plane on %s: %s", where, zmq_strerror(zmq_errno()));
            goto err;
        }
        if ((rc = zmqCheck(zmq_getsockopt(s->pull, ZMQ_LAST_ENDPOINT, ep, &eplen)))) goto err;
        if (strlen(ep) + 1 > len) {
            rc = rs_error(RS_ERR_RUNTIME, "student: endpoint %s does not fit %zu bytes", ep, len);
            goto err;
        }
        memcpy(endpoint, ep, strlen(ep) + 1);
    }
    *state = s;
    return RS_OK;
err:
    student_destroy(s);
    return rc;
}

/* Connects a PUSH to every other rank's mailbox. */
static int student_connect(void *state, char *const *endpoints, int nmembers) {
    Student *s = state;
    if (s->world == 1) return RS_OK;
    if (nmembers < s->world) return rs_error(RS_ERR_INPUT, "student: %d endpoints for %d ranks", nmembers, s->world);
    if (!(s->push = calloc((size_t)s->world, sizeof *s->push))) return rs_error(RS_ERR_RUNTIME, "student: out of memory");
    int zero = 0, tmo = (int)(s->job.timeout * 1000.0);
    for (int p = 0; p < s->world; p++) {
        if (p == s->rank) continue;
        if (!endpoints[p] || strncmp(endpoints[p], "tcp://", 6))
            return rs_error(RS_ERR_INPUT, "student: rank %d published no data-plane endpoint", p);
        if (!(s->push[p] = zmq_socket(s->job.zctx, ZMQ_PUSH))) return zmqCheck(-1);
        RS_TRY(secure_socket(s->push[p], SECURE_CONNECTS));
        RS_TRY(zmqCheck(zmq_setsockopt(s->push[p], ZMQ_LINGER, &tmo, sizeof tmo)));
        RS_TRY(zmqCheck(zmq_setsockopt(s->push[p], ZMQ_SNDHWM, &zero, sizeof zero)));
        RS_TRY(zmqCheck(zmq_setsockopt(s->push[p], ZMQ_SNDTIMEO, &tmo, sizeof tmo)));
        RS_TRY(zmqCheck(zmq_connect(s->push[p], endpoints[p])));
    }
    return RS_OK;
}

/* Rank 0's count floats (host memory: the engine stages a GPU's) to every rank. */
static int student_broadcast(void *state, float *buf, size_t count) {
    Student *s = state;
    return s->world == 1 ? RS_OK : student_collective(s, buf, count, 1);
}

/* One bucket of gradients (host memory), summed in place by your student_allreduce. */
static int student_start(void *state, int step, int b, float *grad, float *out) {
    Student *s = state;
    if (b < 0 || b >= s->job.nbuckets) return rs_error(RS_ERR_RUNTIME, "student: bucket %d of %d", b, s->job.nbuckets);
    const Bucket *bk = &s->job.buckets[b];
    return s->world == 1 ? RS_OK : student_collective(s, grad, bk->hi - bk->lo, 0);
}

static int student_sync_allreduce(void *state, float *buf, size_t count) {
    return student_on_device(state, buf, count, 0);
}

static void student_traffic(void *state, SyncTraffic *out) {
    Student *s = state;
    *out = s ? s->tr : (SyncTraffic){0};
    out->transport = s ? "tcp" : "";
}

static const SyncOps student_ops = {
    .name = "student",
    .place = SYNC_ON_HOST, /* the engine stages a GPU's buffers and calls start on its communication thread */
    .result = SYNC_SUMS,
    .init = student_init,
    .connect = student_connect,
    .broadcast = student_broadcast,
    .start = student_start,
    .allreduce = student_sync_allreduce,
    .traffic = student_traffic,
    .destroy = student_destroy,
};

/* The "student" back end (lab 5): never NULL; its all-reduce fails until written. */
const SyncOps *sync_student(void) { return &student_ops; }
