/* dataparallel.c - DataParallel's channel: rank 0 replicates the parameters and scatters the batch, gathers the logits, computes the loss over the global batch, scatters its gradient back */
/*
 * Per step (docs/ps-protocol.md has the byte counts):
 *   scatter  rank 0 -> every other rank: PARAMS (all keys: DataParallel's replicate), BATCH
 *            (the rank's rows of inputs and labels, chunks of ceil(B/N), maybe none)
 *   forward  on every rank, on its own rows
 *   loss     every other rank -> rank 0: LOGITS (its rows); rank 0 runs softmax cross-entropy
 *            over the whole batch, then -> every other rank: DLOGITS (its rows' gradient)
 * Every rank sends and receives each message every step, even with no rows (header only), so
 * a rank without data still takes part. Under a 16-bit --wire the replicate travels in the
 * wire's type (the parameters' codec, scale 1: rank 0 holds the server's rounded parameters, so
 * every rank trains on the same bits), except the first, the run's start, which is fp32 (exact,
 * like the colocated start's INIT and PULL answers: rank 0 still holds its own initial values);
 * BATCH, LOGITS and DLOGITS stay fp32 (inputs, activations and the loss's gradient, not the
 * parameters' gradients). Zero-copy sends are safe without extra waits: a
 * buffer is rewritten only after its receiver has answered (rank 0's parameters once every
 * rank's logits are in, a worker's logits once its gradient is back); each side also drains
 * its zero-copy counter there.
 */
#include "ps.h"
#include "../engine/engine.h"
#include "../model/model.h"
#include "server.h"
#include "wire.h"
#include "../base/clock.h"
#include "../base/codec.h"
#include "../data/data.h"
#include "../base/err.h"
#include "../base/heap.h"
#include "../net/link.h"
#include "../base/log.h"
#include "../net/zendpoint.h"
#include "../base/mem.h"
#include "../net/zmq_check.h"

#include <stdlib.h>
#include <string.h>

/* What the channel is waiting for. */
typedef enum { DP_IDLE, DP_WAIT_HELLO, DP_WAIT_LOGITS, DP_WAIT_SCATTER, DP_WAIT_DLOGITS } DpPhase;

/* Bits of got[0] on the other ranks. */
enum { DP_GOT_PARAMS = 1, DP_GOT_BATCH = 2, DP_GOT_DLOGITS = 4 };

typedef struct DpChannel {
    SyncJob job;
    Model *model;
    Device *dev;
    uint64_t token;
    int rank, N, dim, classes, cap;  /* cap: --global-batch, the most rows of a step */
    int per;                         /* output rows (and labels) per sample: 1, or gpt's sequence length */
    int host_visible;
    void *sock;                      /* rank 0: ROUTER; others: DEALER "w<rank>" */
    char endpoint[512];
    HealthFn check;
    void *check_arg;
    /* rank 0: the gathered outputs (device, MEM_GATHER), host staging where the device is not
     * host memory */
    float *glogits, *gdlogits;
    int *glabels;
    float *hparams, *hdlogits;
    /* other ranks: host staging of the logits where the device is not host memory */
    float *hlogits;
    /* --wire: the replicate after the first in the wire's type (the parameters' codec) */
    Codec pc;
    int coded;
    uint16_t dtype;                  /* the wire's dtype */
    size_t el;                       /* bytes of one wire element */
    unsigned char *enc;              /* rank 0: the replicate encoded (nparams elements, MEM_COMM) */
    float *hdec;                     /* others: the replicate decoded where the device is not host
                                      * memory (nparams floats, MEM_COMM) */
    long long replicas;              /* replicates sent (rank 0) or received (others): the first is fp32 */
    /* the step */
    uint32_t step;
    int rows;                        /* the step's global rows */
    int lo, len;                     /* this rank's chunk */
    DpPhase phase;
    unsigned char *got;              /* rank 0: [N] who has sent; others: got[0] DP_GOT_* bits */
    int left;
    MsgLend zc;                      /* payloads lent without a copy, not yet let go */
    MsgCount count;                  /* the data messages' traffic (net/msg.h) */
    int warned;
} DpChannel;

/* ---- sizes ---------------------------------------------------------------------------------- */

static size_t dp_gather_bytes(const DpChannel *ch, int what) {
    size_t G = (size_t)ch->cap * (size_t)ch->per, C = (size_t)ch->classes;
    return what == 2 ? G * sizeof(int) : G * C * sizeof(float); /* 0 logits, 1 their gradient, 2 labels */
}

/* Host staging where the device is not host memory: rank 0's parameters (0) and output
 * gradients (1), another rank's logits (2). */
static size_t dp_stage_bytes(const DpChannel *ch, int what) {
    const Model *m = ch->model;
    if (what == 0) return m->nparams * sizeof(float);
    if (what == 1) return dp_gather_bytes(ch, 1);
    return (size_t)m->max_batch * (size_t)ch->per * (size_t)ch->classes * sizeof(float);
}

/* Rank 0's encoded replicate under a 16-bit --wire. */
static size_t dp_enc_bytes(const DpChannel *ch) { return ch->model->nparams * ch->el; }

/* Pinned host memory for communication, counted under MEM_COMM. */
static float *dp_host_alloc(DpChannel *ch, size_t bytes) { return device_host_alloc(ch->dev, bytes, MEM_COMM); }

static void dp_host_free(DpChannel *ch, float *p, size_t bytes) { device_host_free(ch->dev, p, bytes, MEM_COMM); }

/* ---- sending -------------------------------------------------------------------------------- */

static WireHeader dp_header(const DpChannel *ch, WireOp op, uint32_t step) {
    WireHeader h = wire_header(ch->token, op);
    h.step = step;
    h.sender = (uint16_t)ch->rank;
    return h;
}

static int dp_send_failed(const DpChannel *ch, const WireHeader *h, int r) {
    int e = msg_errno();
    return rs_error(RS_ERR_PEER, "ps dataparallel: rank %d cannot send %s of step %u to rank %d: %s", ch->rank,
                    wire_op_name(h->op), h->step, r,
                    e == EHOSTUNREACH ? "it is gone" : e == EAGAIN ? "it takes no messages (timeout)" : msg_strerror(e));
}

/* Sends h with bytes of payload (none when 0) to rank r (rank 0), or to rank 0 (others). */
static int dp_send(DpChannel *ch, int r, const WireHeader *h, const void *payload, size_t bytes) {
    char id[16];
    size_t idlen = ch->rank == 0 ? ps_identity(r, id, sizeof id) : 0;
    if (ps_send(ch->sock, idlen ? id : NULL, idlen, h, bytes ? payload : NULL, bytes, &ch->zc, 0, 0, &ch->count, NULL) < 0)
        return dp_send_failed(ch, h, r);
    return RS_OK;
}

/* Rank 0: rank r's BATCH, rows of x then rows of y in one payload frame (a copy). */
static int dp_send_batch(DpChannel *ch, int r, const WireHeader *h, const float *x, const int *y, int rows) {
    if (rows == 0) return dp_send(ch, r, h, NULL, 0);
    size_t xb = (size_t)rows * (size_t)ch->dim * sizeof(float), yb = (size_t)rows * (size_t)ch->per * sizeof(int);
    char id[16];
    size_t idlen = ps_identity(r, id, sizeof id);
    unsigned char hb[WIRE_HEADER_BYTES];
    wire_encode(h, hb);
    MsgOut m = {.id = id, .idlen = idlen, .head = hb, .head_bytes = sizeof hb, .payload = x, .bytes = xb, .tail = y,
                .tail_bytes = yb};
    if (msg_send(ch->sock, &m, &ch->count, NULL) < 0) return dp_send_failed(ch, h, r);
    return RS_OK;
}

/* ---- receiving ------------------------------------------------------------------------------ */

static int dp_drop(DpChannel *ch, const char *why) {
    msg_count_dropped(&ch->count);
    if (ch->warned++ < 5) log_warn("ps dataparallel: rank %d dropped a message: %s", ch->rank, why);
    return 0;
}

/* Copies bytes of a message (host) to device memory at dst, complete when it returns (the
 * message is released right after). */
static int dp_h2d(DpChannel *ch, void *dst, const void *src, size_t bytes) {
    if (!bytes) return RS_OK;
    return device_h2d(ch->dev, dst, src, bytes);
}

/* Rank 0: a message from rank r. 1 when it was awaited (and applied), 0 when dropped. */
static int dp_on_rank0(DpChannel *ch, int r, const WireHeader *h, const void *data, int *applied) {
    if (ch->got[r]) return dp_drop(ch, "a second message of its kind");
    if (ch->phase == DP_WAIT_HELLO) {
        if (h->op != WIRE_PULL || h->step != WIRE_STEP_INIT) return dp_drop(ch, "not a pull at the start");
    } else if (ch->phase == DP_WAIT_LOGITS) {
        int lo, len;
        size_t C = (size_t)ch->per * (size_t)ch->classes; /* output values per sample */
        scatter_chunk(ch->rows, ch->N, r, &lo, &len);
        if (h->op != WIRE_LOGITS || h->step != ch->step) return dp_drop(ch, "not this step's logits");
        if (h->total != (uint64_t)ch->rows * C || h->offset != (uint64_t)lo * C || h->count != (uint64_t)len * C ||
            h->samples != (uint32_t)len)
            return dp_drop(ch, "logits of rows this rank does not hold");
        RS_TRY(dp_h2d(ch, ch->glogits + (size_t)lo * C, data, (size_t)len * C * sizeof(float)));
    } else {
        return dp_drop(ch, "nothing awaited");
    }
    ch->got[r] = 1;
    ch->left--;
    *applied = 1;
    return RS_OK;
}

/* Other ranks: a message from rank 0. */
static int dp_on_worker(DpChannel *ch, const WireHeader *h, const void *data, int *applied) {
    Model *m = ch->model;
    size_t C = (size_t)ch->per * (size_t)ch->classes; /* output values per sample */
    int bit = h->op == WIRE_PARAMS ? DP_GOT_PARAMS : h->op == WIRE_BATCH ? DP_GOT_BATCH
              : h->op == WIRE_DLOGITS ? DP_GOT_DLOGITS : 0;
    int want = ch->phase == DP_WAIT_SCATTER ? DP_GOT_PARAMS | DP_GOT_BATCH
               : ch->phase == DP_WAIT_DLOGITS ? DP_GOT_DLOGITS : 0;
    if (!(bit & want) || h->step != ch->step) return dp_drop(ch, "nothing of its kind awaited for its step");
    if (ch->got[0] & bit) return dp_drop(ch, "a second message of its kind");
    if (bit == DP_GOT_PARAMS) {
        if (h->offset != 0 || h->count != m->nparams || h->total != m->nparams)
            return dp_drop(ch, "parameters of another shape");
        if (h->dtype != (ch->replicas ? ch->dtype : WIRE_F32))
            return dp_drop(ch, "parameters in another number format than this run's --wire");
        if (h->dtype == WIRE_F32) {
            RS_TRY(dp_h2d(ch, m->params, data, m->nparams * sizeof(float)));
        } else if (ch->host_visible) {
            codec_decode(&ch->pc, data, m->params, m->nparams);
        } else {
            codec_decode(&ch->pc, data, ch->hdec, m->nparams);
            RS_TRY(dp_h2d(ch, m->params, ch->hdec, m->nparams * sizeof(float)));
        }
        ch->replicas++;
    } else if (bit == DP_GOT_BATCH) {
        int lo, len;
        if (h->total < 1 || h->total > (uint64_t)ch->cap) return dp_drop(ch, "a batch of another size");
        scatter_chunk((int)h->total, ch->N, ch->rank, &lo, &len);
        if (h->offset != (uint64_t)lo || h->samples != (uint32_t)len || len > m->max_batch ||
            h->count != (uint64_t)len * (uint64_t)(ch->dim + ch->per))
            return dp_drop(ch, "a batch chunk of other rows");
        size_t xb = (size_t)len * (size_t)ch->dim * sizeof(float);
        RS_TRY(dp_h2d(ch, m->act[0], data, xb));
        RS_TRY(dp_h2d(ch, m->labels, (const char *)data + xb, (size_t)len * (size_t)ch->per * sizeof(int)));
        ch->rows = (int)h->total;
        ch->lo = lo;
        ch->len = len;
    } else {
        if (h->total != (uint64_t)ch->rows * C || h->offset != (uint64_t)ch->lo * C ||
            h->count != (uint64_t)ch->len * C || h->samples != (uint32_t)ch->len)
            return dp_drop(ch, "an output gradient of other rows");
        RS_TRY(dp_h2d(ch, m->dbuf[0], data, (size_t)ch->len * C * sizeof(float)));
    }
    ch->got[0] |= (unsigned char)bit;
    ch->left--;
    *applied = 1;
    return RS_OK;
}

/* Checks and applies one received message; a refused one is counted in dropped. */
static int dp_handle(DpChannel *ch, MsgIn *m, int *applied) {
    int base = ch->rank == 0, r = 0;
    *applied = 0;
    if (m->extra || m->n < base + 1 || m->n > base + 2) return dp_drop(ch, "not [identity][header][payload?]");
    if (base) {
        size_t len;
        const char *id = msg_id(m, &len);
        r = -1;
        if (len >= 2 && len < 8 && id[0] == 'w') {
            r = 0;
            for (size_t i = 1; i < len && r >= 0; i++) r = id[i] >= '0' && id[i] <= '9' ? r * 10 + (id[i] - '0') : -1;
        }
        if (r < 1 || r >= ch->N) return dp_drop(ch, "a peer that is not another rank of this job");
    }
    WireHeader h;
    size_t hb, pb;
    const void *head = msg_head(m, &hb), *data = msg_payload(m, &pb);
    int has = m->n == base + 2;
    WireErr e = wire_decode(head, hb, &h);
    if (e == WIRE_OK) e = wire_check(&h, ch->token, has, pb);
    if (e != WIRE_OK) return dp_drop(ch, wire_strerror(e));
    if (h.sender != r) return dp_drop(ch, "sender field differs from the peer");
    RS_TRY(base ? dp_on_rank0(ch, r, &h, data, applied) : dp_on_worker(ch, &h, data, applied));
    if (*applied) msg_accept(m, 0, 0, 0, &ch->count); /* the emulated interface (--link), the counts */
    return RS_OK;
}

/* Names what is missing when a wait times out. */
static int dp_missing(const DpChannel *ch, const char *what) {
    char when[48];
    if (ch->phase == DP_WAIT_HELLO) snprintf(when, sizeof when, "at the start");
    else snprintf(when, sizeof when, "for step %u", ch->step);
    if (ch->rank != 0)
        return rs_error(RS_ERR_PEER, "ps dataparallel: rank %d: no %s from rank 0 %s within %g s", ch->rank, what, when,
                        ch->job.timeout);
    char who[256];
    size_t k = 0;
    int n = 0;
    who[0] = 0;
    for (int r = 1; r < ch->N && k < sizeof who; r++)
        if (!ch->got[r]) k += (size_t)snprintf(who + k, sizeof who - k, "%s%d", n++ ? ", " : "", r);
    return rs_error(RS_ERR_PEER, "ps dataparallel: rank 0: no %s from rank%s %s %s within %g s", what, n > 1 ? "s" : "",
                    who, when, ch->job.timeout);
}

/* Receives until ch->left awaited messages are in; adds the time blocked in poll to *blocked.
 * Fails when nothing awaited comes for the timeout, or when the check says so. */
static int dp_wait(DpChannel *ch, const char *what, double *blocked) {
    double last = clock_now();
    while (ch->left > 0) {
        double t0 = clock_now();
        int n = msg_poll(&ch->sock, 1, 100, NULL);
        *blocked += clock_now() - t0;
        if (n < 0) return zmqCheck(n);
        int got = 0;
        for (int k = 0; n > 0 && k < 4096; k++) {
            MsgIn m;
            if (msg_recv(ch->sock, &m, ZMQ_DONTWAIT, ch->rank == 0) < 0) {
                if (msg_errno() == EAGAIN || msg_errno() == EINTR) break;
                return zmqCheck(-1);
            }
            int applied = 0, rc = dp_handle(ch, &m, &applied);
            msg_close(&m);
            RS_TRY(rc);
            got += applied;
        }
        double now = clock_now();
        if (got > 0) {
            last = now;
            continue;
        }
        if (ch->check) RS_TRY(ch->check(ch->check_arg));
        if (now - last > ch->job.timeout) return dp_missing(ch, what);
    }
    ch->phase = DP_IDLE;
    return RS_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

/* Once before the first step: every other rank sends rank 0 a PULL, rank 0 waits (up to the
 * job's timeout) until it has heard from all of them, so that it can address them. */
static int dp_hello(void *state) {
    DpChannel *ch = state;
    if (ch->rank != 0) {
        WireHeader h = dp_header(ch, WIRE_PULL, WIRE_STEP_INIT);
        return dp_send(ch, 0, &h, NULL, 0);
    }
    double blocked = 0;
    ch->phase = DP_WAIT_HELLO;
    memset(ch->got, 0, (size_t)ch->N);
    ch->left = ch->N - 1;
    return dp_wait(ch, "pull", &blocked);
}

/* Rank 0 sends every other rank its current parameters (the replicate) and its chunk of the
 * batch; each rank ends with its chunk in model->act[0] / labels and (others) rank 0's
 * parameters in model->params. */
static int dp_scatter(void *state, int step, const float *x, const int *y, int global_rows, int *local_rows,
                      DriverSpan *sp) {
    DpChannel *ch = state;
    double t0 = clock_now(), blocked = 0;
    Device *d = ch->dev;
    Model *m = ch->model;
    ch->step = (uint32_t)step;
    if (ch->rank == 0) {
        if (global_rows < 1 || global_rows > ch->cap || !x || !y)
            return rs_error(RS_ERR_RUNTIME, "ps dataparallel: rank 0 was given a batch of %d rows (1 to %d)",
                            global_rows, ch->cap);
        ch->rows = global_rows;
        scatter_chunk(global_rows, ch->N, 0, &ch->lo, &ch->len);
        const float *params = m->params;
        if (ch->N > 1 && !ch->host_visible) {
            RS_TRY(d->ops->copy(d, ch->hparams, m->params, m->nparams * sizeof(float), 1, NULL));
            RS_TRY(d->ops->stream_sync(d, NULL));
            params = ch->hparams;
        }
        const void *payload = params;
        size_t bytes = m->nparams * sizeof(float);
        int coded = ch->coded && ch->replicas > 0 && ch->N > 1; /* the first replicate is the exact start */
        if (coded) { /* once for every rank; lossless (rank 0 holds the server's rounded values) */
            codec_encode(&ch->pc, params, ch->enc, m->nparams);
            payload = ch->enc;
            bytes = m->nparams * ch->el;
        }
        ch->replicas++;
        for (int r = 1; r < ch->N; r++) {
            int lo, len;
            WireHeader h = dp_header(ch, WIRE_PARAMS, ch->step);
            h.count = h.total = m->nparams;
            if (coded) h.dtype = ch->dtype;
            RS_TRY(dp_send(ch, r, &h, payload, bytes));
            scatter_chunk(global_rows, ch->N, r, &lo, &len);
            h = dp_header(ch, WIRE_BATCH, ch->step);
            h.offset = (uint64_t)lo;
            h.total = (uint64_t)global_rows;
            h.samples = (uint32_t)len;
            h.count = (uint64_t)len * (uint64_t)(ch->dim + ch->per);
            RS_TRY(dp_send_batch(ch, r, &h, x + (size_t)lo * ch->dim, y + (size_t)lo * ch->per, len));
        }
        RS_TRY(dp_h2d(ch, m->act[0], x, (size_t)ch->len * ch->dim * sizeof(float)));
        RS_TRY(dp_h2d(ch, m->labels, y, (size_t)ch->len * (size_t)ch->per * sizeof(int)));
        RS_TRY(dp_h2d(ch, ch->glabels, y, (size_t)global_rows * (size_t)ch->per * sizeof(int)));
    } else {
        ch->phase = DP_WAIT_SCATTER;
        ch->got[0] = 0;
        ch->left = 2;
        RS_TRY(dp_wait(ch, "parameters and batch", &blocked));
    }
    RS_TRY(d->ops->stream_sync(d, NULL));
    *local_rows = ch->len;
    *sp = (DriverSpan){.comm_t0 = t0, .comm_t1 = clock_now(), .blocked = blocked};
    return RS_OK;
}

/* Gathers the logits to rank 0, which runs softmax cross-entropy over the global batch into its
 * model->stats and scatters the gradient back; every rank ends with its rows' gradient in
 * model->dbuf[0]. Every rank arrives here at the step's synchronisation. */
static int dp_loss(void *state, int local_rows, DriverSpan *sp) {
    DpChannel *ch = state;
    double t0 = clock_now(), blocked = 0, compute = 0;
    Device *d = ch->dev;
    Model *m = ch->model;
    size_t C = (size_t)ch->per * (size_t)ch->classes; /* output values per sample */
    const float *logits = model_logits(m);
    if (local_rows != ch->len)
        return rs_error(RS_ERR_RUNTIME, "ps dataparallel: rank %d: loss over %d rows, scattered %d", ch->rank,
                        local_rows, ch->len);
    if (ch->rank == 0) {
        if (ch->len) RS_TRY(d->ops->copy(d, ch->glogits, logits, (size_t)ch->len * C * sizeof(float), 2, NULL));
        ch->phase = DP_WAIT_LOGITS;
        memset(ch->got, 0, (size_t)ch->N);
        ch->left = ch->N - 1;
        RS_TRY(dp_wait(ch, "logits", &blocked));
        /* every rank has answered: the replicate and last step's gradients have been delivered */
        if (!msg_lend_drain(&ch->zc, ch->job.timeout))
            return rs_error(RS_ERR_PEER, "ps dataparallel: rank 0: sends still in flight after %g s", ch->job.timeout);
        double tc = clock_now();
        d->k->softmax_xent(d->kctx, ch->glogits, ch->glabels, ch->rows * ch->per, ch->classes, ch->gdlogits, m->stats);
        RS_TRY(d->ops->stream_sync(d, NULL));
        compute = clock_now() - tc;
        if (ch->len) RS_TRY(d->ops->copy(d, m->dbuf[0], ch->gdlogits, (size_t)ch->len * C * sizeof(float), 2, NULL));
        const float *src = ch->gdlogits;
        if (ch->N > 1 && !ch->host_visible) {
            RS_TRY(d->ops->copy(d, ch->hdlogits, ch->gdlogits, (size_t)ch->rows * C * sizeof(float), 1, NULL));
            RS_TRY(d->ops->stream_sync(d, NULL));
            src = ch->hdlogits;
        }
        for (int r = 1; r < ch->N; r++) {
            int lo, len;
            scatter_chunk(ch->rows, ch->N, r, &lo, &len);
            WireHeader h = dp_header(ch, WIRE_DLOGITS, ch->step);
            h.offset = (uint64_t)lo * C;
            h.count = (uint64_t)len * C;
            h.total = (uint64_t)ch->rows * C;
            h.samples = (uint32_t)len;
            RS_TRY(dp_send(ch, r, &h, src + (size_t)lo * C, (size_t)len * C * sizeof(float)));
        }
    } else {
        const float *src = logits;
        if (ch->len && !ch->host_visible) {
            RS_TRY(d->ops->copy(d, ch->hlogits, logits, (size_t)ch->len * C * sizeof(float), 1, NULL));
            RS_TRY(d->ops->stream_sync(d, NULL));
            src = ch->hlogits;
        }
        WireHeader h = dp_header(ch, WIRE_LOGITS, ch->step);
        h.offset = (uint64_t)ch->lo * C;
        h.count = (uint64_t)ch->len * C;
        h.total = (uint64_t)ch->rows * C;
        h.samples = (uint32_t)ch->len;
        RS_TRY(dp_send(ch, 0, &h, src, (size_t)ch->len * C * sizeof(float)));
        ch->phase = DP_WAIT_DLOGITS;
        ch->got[0] = 0;
        ch->left = 1;
        RS_TRY(dp_wait(ch, "output gradient", &blocked));
        /* rank 0 answered: the logits have been delivered */
        if (!msg_lend_drain(&ch->zc, ch->job.timeout))
            return rs_error(RS_ERR_PEER, "ps dataparallel: rank %d: logits still in flight after %g s", ch->rank,
                            ch->job.timeout);
    }
    RS_TRY(d->ops->stream_sync(d, NULL));
    *sp = (DriverSpan){.comm_t0 = t0, .comm_t1 = clock_now(), .blocked = blocked, .compute = compute, .arrival = t0};
    return RS_OK;
}

/* ---- life cycle ----------------------------------------------------------------------------- */

/* Rank 0: binds the ROUTER on tcp://addr:* (or every interface, advertising addr). */
static int dp_bind(DpChannel *ch) {
    /* TCP, and a Unix socket for the ranks of this host (--transport auto or ipc), as ps's server */
    return zep_bind(ch->sock, ch->job.addr, "dp", ch->endpoint, sizeof ch->endpoint);
}

/* The queue bound (net/msg.h: four times what a peer has in flight in one step): a step is rank
 * 0's replicate, batch and output gradient to each rank, and a rank's logits (or its hello) to
 * rank 0: at most 3 messages from a peer, and the floor. */
#define DP_STEP_MESSAGES 3

/* Opens the socket with its options; rank 0 binds. Rank 0's ROUTER, as the server's, sends to a
 * rank that is not connected as a failure instead of dropping it (mandatory); no socket has a send
 * high-water mark (msg_socket: what is queued is bounded by one step's messages). */
static int dp_open_socket(DpChannel *ch) {
    const Model *m = ch->model;
    size_t chunk = (size_t)m->max_batch, most = chunk * (size_t)ch->per * (size_t)ch->classes * sizeof(float);
    if (ch->rank != 0) { /* parameters, a batch chunk or an output gradient */
        size_t batch = chunk * (size_t)(ch->dim + ch->per) * sizeof(float), params = m->nparams * sizeof(float);
        if (batch > most) most = batch;
        if (params > most) most = params;
    }
    heap_keep_frames(most); /* gathers and scatters in warm heap pages (base/heap.h) */
    char id[16];
    size_t idlen = ch->rank != 0 ? ps_identity(ch->rank, id, sizeof id) : 0;
    MsgSocketSpec spec = {.type = ch->rank == 0 ? ZMQ_ROUTER : ZMQ_DEALER, .binds = ch->rank == 0, .user = "dataparallel",
                          .linger_ms = 1000, .sndtimeo_ms = (int)(ch->job.timeout * 1000), .max_frame = most + 4096,
                          .rcv_queue = msg_queue_bound(DP_STEP_MESSAGES), .id = idlen ? id : NULL, .idlen = idlen,
                          .mandatory = ch->rank == 0};
    RS_TRY(msg_socket(ch->job.zctx, &spec, &ch->sock));
    return ch->rank == 0 ? dp_bind(ch) : RS_OK;
}

/* Rank 0's gathered outputs (MEM_GATHER) and every rank's host staging. */
static int dp_alloc(DpChannel *ch) {
    Device *d = ch->dev;
    if (ch->rank == 0) {
        ch->glogits = device_alloc(d, dp_gather_bytes(ch, 0), MEM_GATHER);
        ch->gdlogits = ch->glogits ? device_alloc(d, dp_gather_bytes(ch, 1), MEM_GATHER) : NULL;
        ch->glabels = ch->gdlogits ? device_alloc(d, dp_gather_bytes(ch, 2), MEM_GATHER) : NULL;
        if (!ch->glabels)
            return rs_error(RS_ERR_RUNTIME, "ps dataparallel: the gathered outputs of %d rows x %d classes: %s", ch->cap,
                            ch->classes, rs_errmsg());
        if (ch->coded && ch->N > 1) {
            if (!(ch->enc = malloc(dp_enc_bytes(ch)))) return rs_error(RS_ERR_RUNTIME, "out of memory");
            mem_account(MEM_COMM, (long long)dp_enc_bytes(ch));
        }
        if (ch->host_visible || ch->N == 1) return RS_OK;
        ch->hparams = dp_host_alloc(ch, dp_stage_bytes(ch, 0));
        ch->hdlogits = ch->hparams ? dp_host_alloc(ch, dp_stage_bytes(ch, 1)) : NULL;
        return ch->hdlogits ? RS_OK : RS_ERR_RUNTIME;
    }
    if (ch->host_visible) return RS_OK;
    if (ch->coded && !(ch->hdec = dp_host_alloc(ch, ch->model->nparams * sizeof(float)))) return RS_ERR_RUNTIME;
    ch->hlogits = dp_host_alloc(ch, dp_stage_bytes(ch, 2));
    return ch->hlogits ? RS_OK : RS_ERR_RUNTIME;
}

static void dp_destroy(void *state);

/* Checks DataParallel's options, creates the channel: rank 0 binds its ROUTER on
 * tcp://job->addr:* (its endpoint text) and allocates the gathered logits, their gradient and
 * the global batch's labels on its device under MEM_GATHER: 4 B R (2 C + 1) bytes for
 * B = --global-batch, R output rows per sample (1; gpt: --seq-len) and C classes (gpt: the
 * vocabulary); host staging (MEM_COMM) where the device is not host memory. check(arg) is polled
 * during waits. */
static int dp_init(const SyncJob *job, Model *model, HealthFn check, void *arg, void **out, char *endpoint,
                   size_t len) {
    *out = NULL;
    if (endpoint && len) endpoint[0] = 0;
    const Config *cfg = job->cfg;
    if (!strcmp(cfg->ps_placement, "dedicated")) return rs_error(RS_ERR_INPUT, PS_DP_NO_DEDICATED);
    if (!strcmp(cfg->ps_placement, "sharded"))
        return rs_error(RS_ERR_INPUT, "--ps-placement sharded with --ps-mode dataparallel: DataParallel has one "
                                      "server, rank 0 (use --ps-placement colocated)");
    if (cfg->global_batch < 1)
        return rs_error(RS_ERR_INPUT, "--ps-mode dataparallel needs --global-batch B: rank 0 scatters one batch of B "
                                      "rows (DataParallel has no per-rank batch)");
    DpChannel *ch = calloc(1, sizeof *ch);
    if (!ch) return rs_error(RS_ERR_RUNTIME, "out of memory");
    ch->job = *job;
    ch->model = model;
    ch->dev = job->dev;
    ch->token = wire_token(job->token);
    ch->rank = job->rank;
    ch->N = job->world;
    ch->dim = model_in_width(model);
    ch->classes = model_out_width(model);
    ch->per = model_out_rows(model, 1);
    ch->cap = job->cfg->global_batch;
    ch->host_visible = job->dev->host_visible;
    CodecType wt = codec_from_options(cfg->wire, cfg->loss_scale).type;
    ch->pc = codec_param(wt); /* the replicate: parameters */
    ch->coded = ch->pc.type != CODEC_F32;
    ch->dtype = (uint16_t)wire_dtype_of(ch->pc.type);
    ch->el = codec_elem_bytes(ch->pc.type);
    ch->check = check;
    ch->check_arg = arg;
    int rc = (ch->got = calloc((size_t)ch->N, 1)) ? RS_OK : rs_error(RS_ERR_RUNTIME, "out of memory");
    if (rc == RS_OK) rc = dp_alloc(ch);
    if (rc == RS_OK) rc = dp_open_socket(ch);
    if (rc != RS_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        dp_destroy(ch);
        return rs_error(rc, "%s", why);
    }
    if (ch->rank == 0) {
        if (endpoint && len) snprintf(endpoint, len, "%s", ch->endpoint);
        log_info("# ps dataparallel: rank 0 scatters and gathers on %s", ch->endpoint);
    }
    *out = ch;
    return RS_OK;
}

/* Other ranks: connect the DEALER to rank 0's endpoint (endpoints[0]). */
static int dp_connect(void *state, char *const *endpoints, int n) {
    DpChannel *ch = state;
    const char *endpoint = n > 0 ? endpoints[0] : NULL;
    if (ch->rank == 0) return RS_OK;
    if (!endpoint || !*endpoint) return rs_error(RS_ERR_PEER, "ps dataparallel: rank 0 published no endpoint");
    char who[64];
    const char *via;
    snprintf(who, sizeof who, "ps dataparallel: rank %d's rank 0", ch->rank);
    return zep_connect(ch->sock, endpoint, who, &via);
}

/* Adds the channel's cumulative counters to *out. */
static void dp_traffic(void *state, SyncTraffic *out) {
    const DpChannel *ch = state;
    SyncTraffic mine = {.transport = ""};
    sync_traffic_counts(&ch->count, &mine);
    sync_traffic_add(out, &mine);
    out->split = 0; /* the data messages' links are not told apart */
}

/* Closes the socket, waits (bounded) for zero-copy sends to let go, frees the buffers. */
static void dp_destroy(void *state) {
    DpChannel *ch = state;
    if (!ch) return;
    msg_close_socket(ch->sock, 0);
    if (!msg_lend_drain(&ch->zc, 2.0 + ch->job.timeout)) {
        log_warn("ps dataparallel: rank %d: sends still in flight at exit; leaving its buffers allocated", ch->rank);
        return;
    }
    Device *d = ch->dev;
    device_free(d, ch->glogits, dp_gather_bytes(ch, 0), MEM_GATHER);
    device_free(d, ch->gdlogits, dp_gather_bytes(ch, 1), MEM_GATHER);
    device_free(d, ch->glabels, dp_gather_bytes(ch, 2), MEM_GATHER);
    dp_host_free(ch, ch->hparams, dp_stage_bytes(ch, 0));
    dp_host_free(ch, ch->hdlogits, dp_stage_bytes(ch, 1));
    dp_host_free(ch, ch->hlogits, dp_stage_bytes(ch, 2));
    dp_host_free(ch, ch->hdec, ch->model->nparams * sizeof(float));
    if (ch->enc) mem_account(MEM_COMM, -(long long)dp_enc_bytes(ch));
    free(ch->enc);
    free(ch->got);
    free(ch);
}

static const StepDriver dp_driver = {
    .name = "dataparallel",
    .init = dp_init,
    .connect = dp_connect,
    .hello = dp_hello,
    .scatter = dp_scatter,
    .loss = dp_loss,
    .traffic = dp_traffic,
    .destroy = dp_destroy,
};

const StepDriver *ps_dataparallel_driver(void) { return &dp_driver; }
