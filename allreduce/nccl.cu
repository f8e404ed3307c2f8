/* nccl.cu - the "nccl" back end: one NCCL all-reduce per gradient bucket on a comm stream, waits that poll for errors and abort on timeout */
/*
 * How a step runs. Backward runs on the device's compute stream; when bucket b is complete the
 * trainer calls bucket_ready(b), which makes the comm stream wait (an event, no host block) for
 * everything issued so far on the compute stream and enqueues ncclAllReduce (sum, fp32, in place)
 * on the bucket's slice of model->grads. finish makes the compute stream wait for the comm
 * stream, runs the optimizer over every parameter with grad_scale = 1 / global_samples, and
 * polls until the optimizer is done: the host never sits in a blocking CUDA or NCCL call, so a
 * dead peer becomes an error (ncclCommGetAsyncError) or a timeout (job->timeout), after which the
 * communicator is aborted and RS_ERR_PEER returned.
 *
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): any NCCL call may answer
 * ncclInProgress, and the same poll loop then waits for it; this is what lets a rank whose peer
 * never arrives at ncclCommInitRankConfig give up after --timeout instead of hanging. The price:
 * a collective's launch may itself answer ncclInProgress, and bucket_ready then waits for the
 * launch to be enqueued before it returns (a host wait per launch, not per reduction).
 * Every event poll goes through cudaEventPoll (kernels/cuda_check.h), which clears the
 * cudaErrorNotReady a poll may leave in the runtime's last-error slot.
 *
 * --wire bf16 | fp16: the bucket is encoded (x loss scale, rounded to nearest even) into a
 * 16-bit device buffer, all-reduced as ncclBfloat16 / ncclHalf, and decoded back (/ scale) into
 * the fp32 gradient, all on the comm stream and inside the bucket's timed interval. NCCL adds in
 * fp32 and rounds every partial sum to 16 bits, as the host ring does, but its buffer holds every
 * rank's own contribution rounded too (the host ring adds its own in fp32): the two agree within
 * the wire's tolerance, not bit for bit. The counted traffic is 2 bytes per element.
 *
 * --wire fp8e4m3 | fp8e5m2: one scale a bucket, kept on the device from end to end (the amax
 * kernel, a max all-reduce of it, a one-thread kernel that makes the scale, pack and unpack
 * reading it by pointer), so FP8 costs no host round trip and the engine keeps handing buckets
 * over while backward runs. Every kernel launch on the back end's own context is checked at once
 * (nccl_kernels_ok): a failed pack would otherwise leave a bucket un-reduced after a log line.
 *
 * The algorithm. --nccl-algo pins NCCL_ALGO (Ring, DDP's, by default; Tree), unless the user set
 * it (allreduce/nccl_rules.h decides, and the report names it). Every call ringside makes is an
 * ncclAllReduce: the start's broadcast of rank 0's parameters is a sum to which the other ranks
 * contribute zeros, because NCCL has no tree broadcast and from 2.24 on fails an ncclBroadcast
 * under NCCL_ALGO=Tree rather than fall back to its ring. So the one algorithm named pins every
 * call, on every NCCL version, whatever the user's NCCL_ALGO.
 *
 * Several ranks on one GPU (a classroom, a workstation, a test). NCCL refuses it ("Duplicate
 * GPU detected") unless told otherwise; when this host's ranks outnumber its GPUs and the user
 * has set neither variable, init sets, before the communicator exists:
 *   NCCL >= 2.30:  NCCL_MULTI_RANK_GPU_ENABLE=1 (every rank);
 *   older NCCL:    NCCL_HOSTID=<distinct per rank> NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (NCCL
 *                  then sees one GPU per "host" and talks over sockets: right for correctness,
 *                  milliseconds per call, wrong for bandwidth figures).
 * and says so in one line (tests/gpu/README.md).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <ctime>
#include <sched.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

extern "C" {
#include "../base/clock.h"
#include "../base/codec.h"
#include "../kernels/ops.h"
#include "../engine/sync.h"
#include "allreduce.h"
#include "nccl_rules.h"
#include "tree.h"
}
#include "../kernels/cuda_check.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "ringside's nccl back end needs NCCL 2.14 or later (non-blocking communicators)"
#endif

/* ---- Types ---- */

/* One rank's state. */
typedef struct {
    SyncJob job;
    Device *dev;
    int version;                 /* ncclGetVersion of the library actually loaded */
    ncclComm_t comm;             /* NULL until connect, and after an abort */
    ncclUniqueId id;             /* rank 0's, generated in init */
    void *comm_stream;           /* cudaStream_t from dev->ops->stream_create */
    cudaEvent_t *ev_b;           /* 2 per bucket: before and after its all-reduce (timing) */
    char *issued;                /* per bucket: handed to NCCL this step */
    double *t_issue;             /* per bucket: host time it was issued (its wait's clock) */
    cudaEvent_t ev_done;         /* what a wait loop polls (no timing) */
    double timeout;
    char algo[64];               /* "Ring/auto": the all-reduce's NCCL_ALGO / NCCL_PROTO in force */
    int tree;                    /* the all-reduce can only be the trees: its traffic counted as they move it */
    /* algorithmic traffic (see nccl_count_allreduce) */
    double bytes_sent, bytes_received;
    unsigned long long messages_sent, messages_received;
    /* --wire bf16 | fp16: each bucket is encoded into its slice of wbuf (device memory, 2 bytes
     * per element, MEM_COMM) on the comm stream, all-reduced as ncclBfloat16 / ncclHalf, and
     * decoded back into the fp32 gradient, by kernels on a context of the comm stream's own.
     * --wire fp8e4m3 | fp8e5m2 (1 byte per element): one scale per bucket for every rank, from
     * the ranks' largest magnitude (a max all-reduce of amax) with headroom for N contributions;
     * natively (fp8_native: NCCL 2.24+ in the headers and in the library loaded, compute
     * capability 9.0+, on every rank, agreed at connect: nccl_fp8_native) the bucket is
     * all-reduced as ncclFloat8e4m3 / ncclFloat8e5m2 (NCCL sums in FP8); else each rank rounds
     * its bucket through FP8 by its own scale and the fp32 values are all-reduced as ncclFloat
     * (4 bytes an element on the wire). The amax, the scale and their use stay on the device
     * (amax kernel, max all-reduce, fp8_scale kernel, pack and unpack reading the scale by
     * pointer): no host round trip, so a bucket's hand-over never waits for the GPU. */
    Codec wire;
    KernelCtx *kctx;             /* NULL with an fp32 wire */
    void *wbuf;
    size_t wbuf_bytes;
    int fp8_native;
    float *amax;                 /* FP8: two floats of device memory (MEM_COMM): amax[0] the amax,
                                  * amax[1] the scale fp8_scale makes of it (what pack and unpack read) */
    float *pinned;               /* FP8: two floats of pinned host memory (MEM_COMM), for the connect-time
                                  * agreement: a copy to pageable memory would block until the stream drains */
    char collective[16];         /* the element type the collective moves: traffic.wire_collective */
} NcclState;

/* ---- The check macro: file:line, the rank, NCCL's error string and its last-error text ---- */

/* Reports a failed NCCL call as "file:line: call: error string (rank r): last error" through
 * log_error and leaves it in rs_errmsg(). ncclRemoteError and ncclSystemError (a peer or a
 * socket went away) give RS_ERR_PEER, anything else RS_ERR_RUNTIME; 0 on success. */
static int nccl_check_at(ncclResult_t r, ncclComm_t comm, const char *call, const char *file,
                         int line) {
    if (r == ncclSuccess) return 0;
    int rank = log_rank() < 0 ? 0 : log_rank();
    const char *last = ncclGetLastError(comm);
    rs_error(r == ncclRemoteError || r == ncclSystemError ? RS_ERR_PEER : RS_ERR_RUNTIME,
             "%s:%d: %s: %s (rank %d)%s%s", file, line, call, ncclGetErrorString(r), rank,
             last && *last ? ": " : "", last && *last ? last : "");
    log_error("%s", rs_errmsg());
    return r == ncclRemoteError || r == ncclSystemError ? RS_ERR_PEER : RS_ERR_RUNTIME;
}

static int nccl_settle_at(NcclState *s, ncclResult_t r, const char *call, const char *file,
                          int line);

/* Evaluates to 0 or RS_ERR_*; with a state s whose communicator is non-blocking, an answer of
 * ncclInProgress is waited out (timeout: abort, RS_ERR_PEER). s may be NULL for calls that
 * take no communicator. */
#define ncclCheck(s, call) nccl_settle_at((s), (call), #call, __FILE__, __LINE__)

/* ---- Waiting: poll, never block ---- */

/* Sleeps briefly between polls: spins with sched_yield for the first 2 ms of a wait (so the
 * latency of small all-reduces is not inflated), then 50 us naps. */
static void nccl_nap(double waited) {
    if (waited < 2e-3) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* Aborts the communicator (frees it, ends any collective still running on the device). */
static void nccl_abort(NcclState *s) {
    if (!s->comm) return;
    ncclCommAbort(s->comm);
    s->comm = NULL;
}

/* The communicator's asynchronous state: ncclSuccess, ncclInProgress, or an error, in which
 * case the communicator is aborted and RS_ERR_PEER returned with rs_errmsg() naming `what`. */
static int nccl_async_state(NcclState *s, const char *what, ncclResult_t *state) {
    ncclResult_t st = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(s->comm, &st);
    if (r != ncclSuccess) st = r;
    *state = st;
    if (st == ncclSuccess || st == ncclInProgress) return RS_OK;
    char last[512];
    snprintf(last, sizeof last, "%s", ncclGetLastError(s->comm) ? ncclGetLastError(s->comm) : "");
    nccl_abort(s);
    return rs_error(RS_ERR_PEER, "nccl (rank %d): %s failed: %s%s%s; communicator aborted",
                    s->job.rank, what, ncclGetErrorString(st), *last ? ": " : "", last);
}

/* The timeout error: aborts and returns RS_ERR_PEER naming what was waited for. */
static int nccl_timed_out(NcclState *s, const char *what) {
    nccl_abort(s);
    return rs_error(RS_ERR_PEER,
                    "nccl (rank %d): %s did not complete within %.0f s (--timeout): a peer is gone, "
                    "stuck or never started; communicator aborted",
                    s->job.rank, what, s->timeout);
}

static int nccl_settle_at(NcclState *s, ncclResult_t r, const char *call, const char *file,
                          int line) {
    if (r != ncclInProgress || !s || !s->comm) return nccl_check_at(r, s ? s->comm : NULL, call, file, line);
    double t0 = clock_now();
    for (;;) {
        ncclResult_t st;
        RS_TRY(nccl_async_state(s, call, &st));
        if (st == ncclSuccess) return RS_OK;
        double waited = clock_now() - t0;
        if (waited > s->timeout) return nccl_timed_out(s, call);
        nccl_nap(waited);
    }
}

/* Waits until everything issued so far on stream (NULL: the compute stream) is complete,
 * polling cudaEventQuery and the communicator's async error. RS_ERR_PEER on an NCCL error or
 * after the timeout (communicator aborted), RS_ERR_RUNTIME on a CUDA error. */
static int nccl_wait(NcclState *s, void *stream, const char *what) {
    RS_TRY(cudaCheck(cudaEventRecord(s->ev_done, (cudaStream_t)(stream ? stream : s->dev->stream))));
    double t0 = clock_now();
    for (;;) {
        int done = cudaEventPoll(s->ev_done); /* clears the NotReady a poll leaves behind */
        if (done > 0) return RS_OK;
        if (done < 0) return RS_ERR_RUNTIME;
        if (s->comm) {
            ncclResult_t st;
            RS_TRY(nccl_async_state(s, what, &st));
        }
        double waited = clock_now() - t0;
        if (waited > s->timeout) return nccl_timed_out(s, what);
        nccl_nap(waited);
    }
}

/* ---- Helpers ---- */

/* The setting NCCL still needs for several ranks on one GPU (allreduce/nccl_rules.h), or NULL. */
static const char *nccl_shared_gpu_needs(const NcclState *s) {
    return nccl_shared_gpu_missing(s->version, getenv("NCCL_MULTI_RANK_GPU_ENABLE"), getenv("NCCL_HOSTID"));
}

/* Whether this host's ranks outnumber its GPUs (several ranks share one). */
static int nccl_gpu_shared(const NcclState *s) {
    int n = s->dev->ops->count();
    return s->job.local_world > 1 && n > 0 && s->job.local_world > n;
}

/* Counts one all-reduce of bytes. NCCL moves the bytes itself and reports nothing, so these are
 * the ring algorithm's figures, not a measurement: reduce-scatter then all-gather, N-1 steps
 * each, every step sending and receiving bytes/N: 2(N-1)/N x bytes each way, 2(N-1) messages;
 * under NCCL_ALGO=Tree the trees' figures (NCCL's are the shapes allreduce/tree.h builds). */
static void nccl_count_allreduce(NcclState *s, size_t bytes) {
    int n = s->job.world;
    if (n <= 1) return;
    if (s->tree) { /* NCCL's double binary trees (allreduce/tree.h's shapes): half a bucket per tree, once per neighbour */
        for (int t = 0; t < 2; t++) {
            TreeLinks l;
            tree_links(n, s->job.rank, t, &l);
            int deg = (l.parent >= 0) + (l.child[0] >= 0) + (l.child[1] >= 0);
            double half = (double)bytes / 2;
            s->bytes_sent += deg * half;
            s->bytes_received += deg * half;
            s->messages_sent += (unsigned)deg;
            s->messages_received += (unsigned)deg;
        }
        return;
    }
    double b = 2.0 * (n - 1) / n * (double)bytes;
    s->bytes_sent += b;
    s->bytes_received += b;
    s->messages_sent += 2ull * (unsigned)(n - 1);
    s->messages_received += 2ull * (unsigned)(n - 1);
}

/* Creates the non-blocking communicator of world ranks from id and waits until it is ready. */
static int nccl_comm_open(NcclState *s, const ncclUniqueId *id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, s->job.world, *id, s->job.rank, &config);
    s->comm = comm;
    int rc = ncclCheck(s, r);
    if (rc == RS_OK) return RS_OK;
    nccl_abort(s);
    if (s->job.world > 1 && nccl_gpu_shared(s) && nccl_shared_gpu_needs(s)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        return rs_error(rc, "%s (%d ranks share this host's GPUs; NCCL needs %s: see tests/gpu/README.md)",
                        why, s->job.local_world, nccl_shared_gpu_needs(s));
    }
    return rc;
}

/* Hex digit value, or -1. */
static int nccl_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes rank 0's endpoint text into id. RS_ERR_PEER when it is not 2*NCCL_UNIQUE_ID_BYTES hex
 * digits. */
static int nccl_id_decode(const char *text, ncclUniqueId *id) {
    size_t n = text ? strlen(text) : 0;
    if (n != 2 * sizeof id->internal)
        return rs_error(RS_ERR_PEER, "nccl: rank 0's endpoint is not an NCCL unique id (%zu characters, expected %zu hex digits); is rank 0 running --sync nccl?",
                        n, 2 * sizeof id->internal);
    for (size_t i = 0; i < sizeof id->internal; i++) {
        int hi = nccl_hexval(text[2 * i]), lo = nccl_hexval(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return rs_error(RS_ERR_PEER, "nccl: rank 0's endpoint has a non-hex character at %zu", 2 * i);
        id->internal[i] = (char)(hi << 4 | lo);
    }
    return RS_OK;
}

/* Grows the wire's staging to bytes (collective use: the training buckets' is made at init).
 * The old staging is freed only once the comm stream has drained it, waited for by polling. */
static int nccl_wire_reserve(NcclState *s, size_t bytes) {
    if (bytes <= s->wbuf_bytes) return RS_OK;
    if (s->wbuf) {
        RS_TRY(nccl_wait(s, s->comm_stream, "the comm stream, before the wire's staging grows")); /* nothing may still use it */
        device_free(s->dev, s->wbuf, s->wbuf_bytes, MEM_COMM);
    }
    s->wbuf_bytes = 0;
    if (!(s->wbuf = device_alloc(s->dev, bytes, MEM_COMM)))
        return rs_error(RS_ERR_RUNTIME, "nccl: no device memory for the %s wire's %zu bytes", codec_name(s->wire.type), bytes);
    s->wbuf_bytes = bytes;
    return RS_OK;
}

/* Whether every kernel launched so far on the back end's own context (pack, unpack, amax, the
 * FP8 scale) was launched: a failed launch would leave the bucket un-reduced, so it is an error
 * naming what, never a log line the step trains past. Does not wait. */
static int nccl_kernels_ok(NcclState *s, const char *what, size_t at, size_t count) {
    if (s->dev->k->check(s->kctx) == RS_OK) return RS_OK;
    char why[512];
    snprintf(why, sizeof why, "%s", rs_errmsg());
    return rs_error(RS_ERR_RUNTIME, "nccl (rank %d): %s of the %zu elements from %zu failed to launch: %s",
                    s->job.rank, what, count, at, why);
}

/* FP8: the bucket's scale on every rank (see NcclState) into s->amax[1], on the device: the amax
 * of p, its max over the ranks where NCCL sums in FP8, then the scale with headroom for the N
 * contributions (natively; 1 otherwise). Enqueued on the comm stream; nothing waits. */
static int nccl_fp8_scale(NcclState *s, float *p, size_t count, size_t at) {
    cudaStream_t cs = (cudaStream_t)s->comm_stream;
    const KernelOps *k = s->dev->k;
    k->amax(s->kctx, &s->amax[0], p, count);
    RS_TRY(nccl_kernels_ok(s, "the FP8 amax", at, count));
    if (s->fp8_native) RS_TRY(ncclCheck(s, ncclAllReduce(&s->amax[0], &s->amax[0], 1, ncclFloat, ncclMax, s->comm, cs)));
    k->fp8_scale(s->kctx, &s->amax[1], &s->amax[0], s->wire.type, s->fp8_native ? s->job.world : 1);
    return nccl_kernels_ok(s, "the FP8 scale", at, count);
}

/* Enqueues the in-place sum of count floats at p (device memory) on the comm stream: ncclFloat,
 * or with a 16-bit wire encode into wbuf + at elements, the 16-bit all-reduce, decode back; FP8
 * as NcclState says. Every kernel's launch is checked (nccl_kernels_ok). */
static int nccl_enqueue_sum(NcclState *s, float *p, size_t count, size_t at) {
    cudaStream_t cs = (cudaStream_t)s->comm_stream;
    const KernelOps *k = s->dev->k;
    if (s->wire.type == CODEC_F32) {
        RS_TRY(ncclCheck(s, ncclAllReduce(p, p, count, ncclFloat, ncclSum, s->comm, cs)));
        nccl_count_allreduce(s, count * sizeof(float));
        return RS_OK;
    }
    const float *scale_at = NULL;
    size_t elem = codec_elem_bytes(s->wire.type);
    void *w = (unsigned char *)s->wbuf + at * elem;
    if (codec_is_fp8(s->wire.type)) {
        RS_TRY(nccl_fp8_scale(s, p, count, at));
        scale_at = &s->amax[1];
    }
    k->pack(s->kctx, w, p, count, s->wire.type, s->wire.scale, scale_at);
    RS_TRY(nccl_kernels_ok(s, "the wire's pack", at, count));
    if (codec_is_fp8(s->wire.type) && !s->fp8_native) { /* rounded through FP8, summed in fp32 */
        k->unpack(s->kctx, p, w, count, s->wire.type, s->wire.scale, scale_at);
        RS_TRY(nccl_kernels_ok(s, "the wire's unpack", at, count));
        RS_TRY(ncclCheck(s, ncclAllReduce(p, p, count, ncclFloat, ncclSum, s->comm, cs)));
        nccl_count_allreduce(s, count * sizeof(float));
        return RS_OK;
    }
    ncclDataType_t t = s->wire.type == CODEC_BF16 ? ncclBfloat16 : ncclHalf;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    if (codec_is_fp8(s->wire.type)) t = s->wire.type == CODEC_E4M3 ? ncclFloat8e4m3 : ncclFloat8e5m2;
#endif
    RS_TRY(ncclCheck(s, ncclAllReduce(w, w, count, t, ncclSum, s->comm, cs)));
    k->unpack(s->kctx, p, w, count, s->wire.type, s->wire.scale, scale_at);
    RS_TRY(nccl_kernels_ok(s, "the wire's unpack", at, count));
    nccl_count_allreduce(s, count * elem);
    return RS_OK;
}

/* Enqueues the all-reduce of bucket b (count floats at p, device memory) on the comm stream,
 * ordered after the compute stream. */
static int nccl_issue_bucket(NcclState *s, int b, float *p) {
    const Bucket *bk = &s->job.buckets[b];
    RS_TRY(s->dev->ops->stream_wait(s->dev, s->comm_stream, NULL));
    cudaStream_t cs = (cudaStream_t)s->comm_stream;
    RS_TRY(cudaCheck(cudaEventRecord(s->ev_b[2 * b], cs)));
    size_t count = bk->hi - bk->lo;
    s->t_issue[b] = clock_now();
    RS_TRY(nccl_enqueue_sum(s, p, count, bk->lo));
    RS_TRY(cudaCheck(cudaEventRecord(s->ev_b[2 * b + 1], cs)));
    s->issued[b] = 1;
    return RS_OK;
}

/* ---- The back end ---- */

static void nccl_destroy(void *state);

/* Refuses a CPU device; creates the comm stream and events; rank 0 makes the unique id and
 * writes it as hex into endpoint. With one rank the 1-rank communicator is made right away. */
static int nccl_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    *state = NULL;
    if (!job->dev || job->dev->kind != DEV_CUDA)
        return rs_error(RS_ERR_INPUT, "--sync nccl needs --device cuda (this rank runs on the CPU); "
                                      "use --sync ring for host memory");
    if (job->world < 1 || job->rank < 0 || job->rank >= job->world)
        return rs_error(RS_ERR_INPUT, "nccl: rank %d of %d is not a valid member", job->rank, job->world);
    if (job->rank == 0 && (!endpoint || len < 2 * NCCL_UNIQUE_ID_BYTES + 1))
        return rs_error(RS_ERR_RUNTIME, "nccl: endpoint buffer of %zu bytes cannot hold the unique id (%d)",
                        len, 2 * NCCL_UNIQUE_ID_BYTES + 1);
    if (job->nbuckets > 0 && !job->buckets)
        return rs_error(RS_ERR_RUNTIME, "nccl: %d buckets but no bucket table", job->nbuckets);

    NcclState *s = (NcclState *)calloc(1, sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "out of host memory");
    s->job = *job;
    s->dev = job->dev;
    s->timeout = job->timeout > 0 ? job->timeout : 60.0;
    *state = s;
    int rc = RS_OK;

    if ((rc = ncclCheck(NULL, ncclGetVersion(&s->version)))) goto err;
    {
        char ver[32], built[32];
        nccl_version_text(s->version, ver, sizeof ver);
        nccl_version_text(NCCL_VERSION_CODE, built, sizeof built);
        log_info("# nccl: NCCL %s (built against %s), %d rank%s", ver, built, job->world,
                 job->world > 1 ? "s" : "");
        if (job->world > 1 && nccl_gpu_shared(s) && nccl_shared_gpu_needs(s)) {
            /* several ranks on one GPU (a classroom, a workstation): give NCCL what it needs,
             * before the communicator reads its environment; the user's own settings win */
            char host[64] = "";
            gethostname(host, sizeof host - 1);
            if (s->version >= NCCL_VERSION(2, 30, 0)) {
                setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
            } else {
                char id[128];
                snprintf(id, sizeof id, "ringside-%s-local%d", host, job->local_rank);
                setenv("NCCL_HOSTID", id, 1);
                setenv("NCCL_P2P_DISABLE", "1", 0);
                setenv("NCCL_SHM_DISABLE", "1", 0);
            }
            if (job->local_rank == 0)
                log_info("# nccl: %d ranks share this host's %d GPU(s): set %s for NCCL %s (sockets between "
                         "them with NCCL_HOSTID: right for correctness, not for bandwidth)",
                         job->local_world, s->dev->ops->count(),
                         s->version >= NCCL_VERSION(2, 30, 0) ? "NCCL_MULTI_RANK_GPU_ENABLE=1"
                                                              : "a distinct NCCL_HOSTID per rank, NCCL_P2P_DISABLE=1, "
                                                                "NCCL_SHM_DISABLE=1",
                         ver);
        }
    }

    { /* --nccl-algo's all-reduce (ring: DDP's), unless the user chose: NCCL reads NCCL_ALGO at init.
       * Every call ringside makes is an ncclAllReduce (the broadcast too: nccl_broadcast), so the
       * one algorithm named pins them all, on every NCCL version */
        const char *user = getenv("NCCL_ALGO"), *proto = getenv("NCCL_PROTO");
        NcclAlgo a;
        nccl_algo_decide(s->job.cfg->nccl_algo, user, &a);
        if (a.set[0]) setenv("NCCL_ALGO", a.set, 1);
        s->tree = a.tree;
        snprintf(s->algo, sizeof s->algo, "%s/%s", a.allreduce, proto && *proto ? proto : "auto");
        log_info("# nccl: NCCL_ALGO=%s%s, NCCL_PROTO=%s: the all-reduce asked for %s (the parameters' broadcast is an "
                 "all-reduce too)", getenv("NCCL_ALGO"), a.set[0] ? " (set by ringside from --nccl-algo)" : " (from the environment)",
                 proto && *proto ? proto : "auto", s->algo);
    }
    if ((rc = s->dev->ops->stream_create(s->dev, &s->comm_stream))) goto err;
    s->wire = codec_from_options(job->cfg->wire, job->cfg->loss_scale);
    snprintf(s->collective, sizeof s->collective, "%s", codec_name(s->wire.type));
    if (codec_is_fp8(s->wire.type)) {
        int ordinal = 0, major = 0;
        if (cudaGetDevice(&ordinal) == cudaSuccess &&
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal) == cudaSuccess)
            s->fp8_native = nccl_fp8_native(NCCL_VERSION_CODE, s->version, major); /* the headers' and the loaded library's */
        if (!s->fp8_native) snprintf(s->collective, sizeof s->collective, "fp32"); /* settled at connect */
        if (!(s->amax = (float *)device_alloc(s->dev, 2 * sizeof(float), MEM_COMM)) ||
            !(s->pinned = (float *)device_host_alloc(s->dev, 2 * sizeof(float), MEM_COMM))) {
            rc = RS_ERR_RUNTIME;
            goto err;
        }
    }
    if (s->wire.type != CODEC_F32) {
        if (!(s->kctx = s->dev->k->ctx_create(s->comm_stream))) {
            rc = RS_ERR_RUNTIME;
            goto err;
        }
        if (job->nparams && (rc = nccl_wire_reserve(s, job->nparams * codec_elem_bytes(s->wire.type)))) goto err;
    }
    if ((rc = cudaCheck(cudaEventCreateWithFlags(&s->ev_done, cudaEventDisableTiming)))) goto err;
    if (job->nbuckets > 0) {
        s->ev_b = (cudaEvent_t *)calloc(2 * (size_t)job->nbuckets, sizeof *s->ev_b);
        s->issued = (char *)calloc((size_t)job->nbuckets, 1);
        s->t_issue = (double *)calloc((size_t)job->nbuckets, sizeof *s->t_issue);
        if (!s->ev_b || !s->issued || !s->t_issue) {
            rc = rs_error(RS_ERR_RUNTIME, "out of host memory for %d buckets", job->nbuckets);
            goto err;
        }
        for (int i = 0; i < 2 * job->nbuckets; i++)
            if ((rc = cudaCheck(cudaEventCreate(&s->ev_b[i])))) goto err;
    }

    if (endpoint && len) endpoint[0] = '\0';
    if (job->rank == 0) {
        if ((rc = ncclCheck(NULL, ncclGetUniqueId(&s->id)))) goto err;
        for (size_t i = 0; i < sizeof s->id.internal; i++)
            snprintf(endpoint + 2 * i, 3, "%02x", (unsigned char)s->id.internal[i]);
    }
    if (job->world == 1 && (rc = nccl_comm_open(s, &s->id))) goto err;
    return RS_OK;
err:
    nccl_destroy(s);
    *state = NULL;
    return rc;
}

/* Decodes rank 0's unique id from endpoints[0] and joins the communicator (waits at most
 * the timeout for every rank to arrive). A no-op when the communicator exists (one rank). */
static int nccl_connect(void *state, char *const *endpoints, int nmembers) {
    NcclState *s = (NcclState *)state;
    if (s->comm) return RS_OK;
    if (!endpoints || nmembers < s->job.world)
        return rs_error(RS_ERR_PEER, "nccl: %d endpoints for %d ranks", nmembers, s->job.world);
    if (s->job.rank != 0) RS_TRY(nccl_id_decode(endpoints[0], &s->id));
    RS_TRY(nccl_comm_open(s, &s->id));
    if (codec_is_fp8(s->wire.type)) { /* FP8 natively only where every rank can (a min all-reduce of the flag) */
        float *f = s->amax; /* through pinned memory: neither copy blocks, nccl_wait polls */
        cudaStream_t cs = (cudaStream_t)s->comm_stream;
        s->pinned[0] = (float)s->fp8_native;
        RS_TRY(cudaCheck(cudaMemcpyAsync(f, &s->pinned[0], sizeof(float), cudaMemcpyHostToDevice, cs)));
        RS_TRY(ncclCheck(s, ncclAllReduce(f, f, 1, ncclFloat, ncclMin, s->comm, cs)));
        RS_TRY(cudaCheck(cudaMemcpyAsync(&s->pinned[1], f, sizeof(float), cudaMemcpyDeviceToHost, cs)));
        RS_TRY(nccl_wait(s, s->comm_stream, "the ranks' agreement on NCCL's FP8"));
        s->fp8_native = s->pinned[1] > 0.5f;
        snprintf(s->collective, sizeof s->collective, "%s", s->fp8_native ? codec_name(s->wire.type) : "fp32");
        log_info("# nccl: --wire %s all-reduced as %s", codec_name(s->wire.type),
                 s->fp8_native ? "NCCL's FP8 (summed in FP8, a scale per bucket shared by the ranks)"
                               : "fp32 after each rank's rounding through FP8 (on some rank NCCL before 2.24, in the headers "
                                 "or in the library loaded, or a GPU before sm_90)");
    }
    return RS_OK;
}

/* Rank 0's count floats at buf (device memory) on every rank, on the comm stream after the
 * compute stream's work; returns when it is done. An all-reduce sum in which every other rank
 * contributes zeros (x + 0 is x, bit for bit but a -0 that comes back +0): NCCL has no tree
 * broadcast, and from 2.24 on ncclBroadcast under NCCL_ALGO=Tree (ringside's --nccl-algo tree,
 * or a user's own) fails with "no algorithm/protocol available"; an all-reduce runs under any
 * NCCL_ALGO that the training's own all-reduces run under. Counted as the all-reduce it is. */
static int nccl_broadcast(void *state, float *buf, size_t count) {
    NcclState *s = (NcclState *)state;
    if (!s->comm) return rs_error(RS_ERR_RUNTIME, "nccl: broadcast before connect");
    cudaStream_t cs = (cudaStream_t)s->comm_stream;
    RS_TRY(s->dev->ops->stream_wait(s->dev, s->comm_stream, NULL));
    if (s->job.rank != 0) RS_TRY(cudaCheck(cudaMemsetAsync(buf, 0, count * sizeof(float), cs)));
    RS_TRY(ncclCheck(s, ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, s->comm, cs)));
    nccl_count_allreduce(s, count * sizeof(float));
    return nccl_wait(s, s->comm_stream, "the broadcast of rank 0's parameters (an all-reduce)");
}

/* Starts bucket b's all-reduce (in place: out == grad). With a non-blocking communicator,
 * ncclAllReduce may answer ncclInProgress and finish enqueuing on an NCCL thread;
 * nccl_issue_bucket then polls until the launch is enqueued, so the host may wait here for
 * each launch (not for the reduction itself). How long is to be measured on a GPU
 * (tests/gpu/README.md). */
static int nccl_start(void *state, int step, int b, float *grad, float *out) {
    NcclState *s = (NcclState *)state;
    if (b < 0 || b >= s->job.nbuckets) return rs_error(RS_ERR_RUNTIME, "nccl: bucket %d of %d", b, s->job.nbuckets);
    if (!s->comm) return rs_error(RS_ERR_RUNTIME, "nccl: bucket before connect (or after an abort)");
    if (s->issued[b]) return rs_error(RS_ERR_RUNTIME, "nccl: bucket %d handed over twice in a step", b);
    return nccl_issue_bucket(s, b, grad);
}

/* Waits up to wait_ms for bucket b's all-reduce: 1 done, 0 not yet, -RS_ERR_* on an NCCL or
 * CUDA error or after the timeout counted from its launch (the communicator is then aborted). */
static int nccl_poll(void *state, int b, int wait_ms) {
    NcclState *s = (NcclState *)state;
    if (!s->comm) return -rs_error(RS_ERR_PEER, "nccl: the communicator was aborted");
    double until = clock_now() + wait_ms * 1e-3;
    for (;;) {
        int done = cudaEventPoll(s->ev_b[2 * b + 1]); /* clears the NotReady a poll leaves behind */
        if (done > 0) return 1;
        if (done < 0) return -RS_ERR_RUNTIME;
        ncclResult_t st;
        int rc = nccl_async_state(s, "an all-reduce", &st);
        if (rc) return -rc;
        double now = clock_now();
        if (now - s->t_issue[b] > s->timeout) {
            char what[96];
            snprintf(what, sizeof what, "the all-reduce of bucket %d", b);
            return -nccl_timed_out(s, what);
        }
        if (now >= until) return 0;
        nccl_nap(now - s->t_issue[b]);
    }
}

/* Bucket b's device interval, seconds from bucket 0's start. */
static int nccl_bucket_time(void *state, int b, double *t0, double *t1) {
    NcclState *s = (NcclState *)state;
    float a = 0, z = 0;
    if (b > 0) RS_TRY(cudaCheck(cudaEventElapsedTime(&a, s->ev_b[0], s->ev_b[2 * b])));
    RS_TRY(cudaCheck(cudaEventElapsedTime(&z, s->ev_b[0], s->ev_b[2 * b + 1])));
    *t0 = a * 1e-3;
    *t1 = z * 1e-3;
    return RS_OK;
}

static int nccl_end_step(void *state, int step) {
    NcclState *s = (NcclState *)state;
    memset(s->issued, 0, (size_t)s->job.nbuckets);
    return RS_OK;
}

/* Synchronous in-place sum of count floats at buf (device memory) over every rank. */
static int nccl_allreduce(void *state, float *buf, size_t count) {
    NcclState *s = (NcclState *)state;
    if (!s->comm) return rs_error(RS_ERR_RUNTIME, "nccl: allreduce before connect (or after an abort)");
    if (count == 0) return RS_OK;
    if (s->wire.type != CODEC_F32) RS_TRY(nccl_wire_reserve(s, count * codec_elem_bytes(s->wire.type)));
    RS_TRY(s->dev->ops->stream_wait(s->dev, s->comm_stream, NULL));
    RS_TRY(nccl_enqueue_sum(s, buf, count, 0));
    char what[96];
    snprintf(what, sizeof what, "an all-reduce of %zu floats", count);
    return nccl_wait(s, s->comm_stream, what);
}

/* The algorithmic ring traffic counted so far (see nccl_count_allreduce). */
static void nccl_traffic(void *state, SyncTraffic *out) {
    NcclState *s = (NcclState *)state;
    memset(out, 0, sizeof *out);
    out->transport = "";
    if (!s) return;
    out->transport = "nccl";
    out->derived = 1;
    snprintf(out->algorithm, sizeof out->algorithm, "%s", s->algo);
    snprintf(out->broadcast, sizeof out->broadcast, "allreduce");
    snprintf(out->wire_collective, sizeof out->wire_collective, "%s", s->collective);
    out->bytes_sent = (unsigned long long)(s->bytes_sent + 0.5);
    out->bytes_received = (unsigned long long)(s->bytes_received + 0.5);
    out->messages_sent = s->messages_sent;
    out->messages_received = s->messages_received;
}

/* Finalizes the communicator (waiting at most the timeout, else aborting it), then frees the
 * stream, events and state. Safe on NULL and on a half-made state. */
static void nccl_destroy(void *state) {
    NcclState *s = (NcclState *)state;
    if (!s) return;
    if (s->comm) {
        if (ncclCheck(s, ncclCommFinalize(s->comm)) == RS_OK && s->comm) {
            ncclCommDestroy(s->comm);
            s->comm = NULL;
        }
        nccl_abort(s); /* only when finalize failed (it then may have aborted already) */
    }
    if (s->ev_b) {
        for (int i = 0; i < 2 * s->job.nbuckets; i++)
            if (s->ev_b[i]) cudaEventDestroy(s->ev_b[i]);
        free(s->ev_b);
    }
    free(s->issued);
    free(s->t_issue);
    if (s->ev_done) cudaEventDestroy(s->ev_done);
    if (s->wbuf) device_free(s->dev, s->wbuf, s->wbuf_bytes, MEM_COMM); /* after the communicator: nothing runs on it */
    if (s->amax) device_free(s->dev, s->amax, 2 * sizeof(float), MEM_COMM);
    if (s->pinned) device_host_free(s->dev, s->pinned, 2 * sizeof(float), MEM_COMM);
    if (s->kctx) s->dev->k->ctx_destroy(s->kctx);
    if (s->comm_stream) s->dev->ops->stream_destroy(s->dev, s->comm_stream);
    free(s);
}

static const SyncOps nccl_ops = {
    /* .name */ "nccl",
    /* .place */ SYNC_ON_DEVICE,
    /* .result */ SYNC_SUMS,
    /* .init */ nccl_init,
    /* .connect */ nccl_connect,
    /* .broadcast */ nccl_broadcast,
    /* .start */ nccl_start,
    /* .poll */ nccl_poll,
    /* .begin_step */ NULL,
    /* .end_step */ nccl_end_step,
    /* .bucket_time */ nccl_bucket_time,
    /* .server_busy */ NULL,
    /* .health */ NULL,
    /* .progress */ NULL, /* every rank in lockstep */
    /* .close */ NULL, /* nothing to say goodbye to */
    /* .allreduce */ nccl_allreduce,
    /* .traffic */ nccl_traffic,
    /* .destroy */ nccl_destroy,
    /* .checkpoint_servers */ NULL, /* no server: the ranks' parts hold everything */
    /* .param_need */ NULL,         /* the parameters are whole on every rank */
    /* .params_full */ NULL,
    /* .comm_spans */ NULL,
};

/* The NCCL back end (never NULL in a CUDA build; its init refuses a CPU device). */
extern "C" const SyncOps *sync_nccl(void) { return &nccl_ops; }

extern "C" int sync_nccl_versions(char *loaded, size_t loaded_len, char *built, size_t built_len) {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v <= 0) { /* the library loaded, which may be older than the headers */
        if (loaded_len) loaded[0] = 0;
        if (built_len) built[0] = 0;
        return -1;
    }
    nccl_version_text(v, loaded, loaded_len);
    nccl_version_text(NCCL_VERSION_CODE, built, built_len);
    return 0;
}
