/* fuzz_ps_server.c - libFuzzer harness: the parameter server's message handler (server.c's server_handle) driven in-process */
#include "fuzz.h"

/* The handler and its state machine are static: include the server itself, so that the code
 * under test is exactly what ringside runs (ps/server.o is then not linked from the library). */
#include "../../ps/server.c"

#define FZ_TOKEN "fuzz-token"
#define FZ_WORKERS 2
#define FZ_MAX_MSGS 64

static Device fz_dev;
static Config fz_cfg;
/* One ZeroMQ context for 256 inputs: a context per input costs two threads per input. ZeroMQ's
 * reaper thread destroys closed sockets later, and may fall behind on a busy machine; ending the
 * context every 256 inputs (zmq_ctx_term waits for them) keeps the sockets alive at once under the
 * context's 1023. Sockets are freed asynchronously, so the per-input leak check is off
 * (fuzz_ps_server.options: -detect_leaks=0) and LeakSanitizer checks the whole run at exit. */
static void *fz_zctx;
static unsigned fz_inputs;

/* An allreduce's size is the peer's to choose (any count is legal): the server sizes its buffers
 * from it and fails cleanly when memory runs out. Here a single allocation above 2 GiB fails (as
 * on a small machine: posix_memalign returns ENOMEM, the server reports it), so that the fuzzer
 * explores the protocol instead of paging in gigabytes. */
const char *__asan_default_options(void) { return "allocator_may_return_null=1:max_allocation_size_mb=2048"; }
/* A 4,3,2 MLP (23 parameters) in two buckets, last layer first, as sync_plan_buckets cuts them. */
static const Bucket fz_buckets[2] = {{15, 23}, {0, 15}};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (device_open(&fz_dev, "cpu", 0, NULL) != RS_OK || !(fz_zctx = zmq_ctx_new())) abort();
    config_defaults(&fz_cfg);
    fz_cfg.bucket_mb = 64.0 * sizeof(float) / 1048576.0; /* allreduce chunks of 64 elements */
    return 0;
}

/* Byte 0: servers K (1 or 2) and this server's id. Then messages, each: a flags byte (bits 0-1:
 * identity w0, w1, w7 or the next length-prefixed bytes; bits 2-3: frames after the identity,
 * 0-2, or 3: two and a discarded extra one; bit 4: an extra one too), then length-prefixed
 * frames. Every message goes through server_handle as the serving loop hands it over; a fatal
 * status ends the run through server_fail, as in ps_server_run. Workers w0 and w1 are
 * connected, so replies go out. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (++fz_inputs % 256 == 0) {
        zmq_ctx_term(fz_zctx);
        if (!(fz_zctx = zmq_ctx_new())) abort();
    }
    int K = 1 + (data[0] & 1), id = K > 1 ? (data[0] >> 1) & 1 : 0;
    PsServerArgs a = {.cfg = &fz_cfg, .dev = &fz_dev, .zctx = fz_zctx, .token = FZ_TOKEN, .id = id,
                      .nservers = K, .nworkers = FZ_WORKERS, .nparams = 23, .buckets = fz_buckets,
                      .nbuckets = 2, .colocated = 1, .timeout = 1.0};
    PsServer *s;
    if (ps_server_create(&s, &a) != RS_OK) {
        fprintf(stderr, "fuzz: ps_server_create: %s\n", rs_errmsg());
        abort();
    }
    void *w[FZ_WORKERS];
    int zero = 0;
    for (int i = 0; i < FZ_WORKERS; i++) {
        char wid[8];
        size_t n = ps_identity(i, wid, sizeof wid);
        if (!(w[i] = zmq_socket(fz_zctx, ZMQ_DEALER))) {
            fprintf(stderr, "fuzz: zmq_socket: %s\n", zmq_strerror(zmq_errno()));
            abort();
        }
        zmq_setsockopt(w[i], ZMQ_ROUTING_ID, wid, n);
        zmq_setsockopt(w[i], ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(w[i], ZMQ_RCVHWM, &zero, sizeof zero);
        if (zmq_connect(w[i], ps_server_inproc(s)) != 0) abort();
    }
    int events;
    size_t elen = sizeof events;
    zmq_getsockopt(s->router, ZMQ_EVENTS, &events, &elen); /* the router attaches both peers now */

    const uint8_t *p = data + 1;
    size_t left = size - 1;
    for (int k = 0; k < FZ_MAX_MSGS && left > 0; k++) {
        uint8_t flags = *p++;
        left--;
        int frames = (flags >> 2) & 3; /* 3: two frames, and one more than a MsgIn keeps */
        MsgIn m = {.n = 0, .extra = frames == 3 || ((flags >> 4) & 1), .with_id = 1};
        const char *ids[3] = {"w0", "w1", "w7"};
        const uint8_t *f;
        size_t flen;
        if ((flags & 3) == 3) f = fz_take(&p, &left, &flen);
        else f = (const uint8_t *)ids[flags & 3], flen = 2;
        zmq_msg_init_size(&m.part[m.n].z, flen);
        if (flen) memcpy(zmq_msg_data(&m.part[m.n].z), f, flen);
        m.n++;
        for (int i = 0; i < (frames < 3 ? frames : 2); i++) {
            f = fz_take(&p, &left, &flen);
            zmq_msg_init_size(&m.part[m.n].z, flen);
            if (flen) memcpy(zmq_msg_data(&m.part[m.n].z), f, flen);
            m.n++;
        }
        int rc = server_handle(s, &m);
        msg_close(&m);
        if (rc <= 0 && s->nearly && !s->init_left) rc = server_replay(s); /* as the serving loop does */
        if (rc != RS_OK && rc != PS_DROP && rc <= 0) abort(); /* the handler's contract */
        if (rc > 0) {
            server_fail(s, rc);
            if (ps_server_status(s, NULL, 0) != rc) abort();
            break;
        }
    }
    for (int i = 0; i < FZ_WORKERS; i++) zmq_close(w[i]);
    /* the router lingers 1 s over replies to the closed workers: thousands of inputs a second
     * would fill the context's 1023 sockets */
    zmq_setsockopt(s->router, ZMQ_LINGER, &zero, sizeof zero);
    ps_server_destroy(s);
    return 0;
}
