/* zmq_tput.c - ZeroMQ alone moving the messages of one `ringside bench --sync ps -n 2` all-reduce, measured the way the bench measures */
/* Build: cc -O2 -I. -o build/zmq_tput experiments/benchmarks/zmq_tput.c base/heap.c -lzmq -pthread
 * Run:   build/zmq_tput ipc|tcp [minbytes maxbytes factor warmup iters chunkbytes [bare|ps|fused [keep|glibc [workers]]]]
 *
 * Two processes, each with its own context (default: one I/O thread), as ps's rank 0 (the
 * colocated server's ROUTER, bound) and rank 1 (a DEALER, connected). Per all-reduce of S bytes,
 * the worker sends S cut as ps cuts it (chunks of chunkbytes, default 25 MiB = ps's --bucket-mb
 * 25; the remainder last), each chunk one message [56-byte header][payload]; the server answers
 * each chunk, as soon as it is in, with [header][payload] of the same size; the worker waits for
 * every answer. Payloads of 64 KiB and more go without a copy (zmq_msg_init_data), smaller ones
 * are copied into the message, as ps does.
 *
 * workers W > 1 (bare only) is ps's dedicated placement at N = W: a server process of its own
 * and W worker processes, each sending S as above; the server answers chunk k to every worker once
 * every worker's chunk k is in (the wait an all-reduce cannot do without), so its link carries W
 * S each way per all-reduce, as a dedicated server's does.
 *
 * Modes (what each side does with the payloads besides moving them):
 *   bare   nothing: ZeroMQ's own speed for the pattern (the reference of ps_vs_zmq.sh).
 *   ps     what ps does at N = 2 on the host, with rank 0's own contribution already in memory (as
 *          its inproc zero-copy message brings it): the server copies rank 1's payload and rank
 *          0's into receive buffers, copies the first into the sum and adds the second (copy +
 *          axpy), answers from the sum, and rank 0 copies the sum into its buffer; the worker
 *          copies each answer into its buffer.
 *   fused  the same results with the server's copies gone: the sum = rank 0's + rank 1's in one
 *          pass, read from the received message itself; rank 0 and the worker still copy the
 *          answer into their buffers.
 *
 * Heap (the last argument): keep (the default) gives both processes the malloc policy ps's
 * processes have (base/heap.h: heap_init and heap_keep_frames(chunkbytes), ZeroMQ's received
 * frames of up to a chunk from warm heap pages), so that the two sides differ in what ps does and not in the
 * allocator; glibc leaves glibc's defaults (every large frame in fresh pages).
 *
 * time = the median of each worker's timed round trips (first send to last answer, back to back,
 * as `bench --barrier none` times its calls), the maximum over the workers; algbw = S / time;
 * busbw = algbw x 2(N-1)/N with N = 2, i.e. busbw = algbw: the S bytes each way between the two
 * processes per all-reduce, as `ringside bench --sync ps -n 2` moves them between rank 1 and rank
 * 0's server (rank 0's own contribution goes over inproc); with W workers N = W. Rows print in
 * the bench's format. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "../../base/heap.h"

#define HDR 56
#define ZC_MIN 65536

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what) {
    fprintf(stderr, "zmq_tput: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

static void no_free(void *data, void *hint) {
    (void)data;
    (void)hint;
}

/* [header][payload] (the ROUTER's identity frame first when id). */
static void send_chunk(void *s, const void *id, size_t idlen, const unsigned char *hdr, const void *p, size_t n) {
    if (id && zmq_send(s, id, idlen, ZMQ_SNDMORE) < 0) die("send identity");
    if (zmq_send(s, hdr, HDR, ZMQ_SNDMORE) < 0) die("send header");
    zmq_msg_t m;
    if (n >= ZC_MIN) {
        if (zmq_msg_init_data(&m, (void *)p, n, no_free, NULL) < 0) die("msg init");
    } else {
        if (zmq_msg_init_size(&m, n) < 0) die("msg init");
        memcpy(zmq_msg_data(&m), p, n);
    }
    if (zmq_msg_send(&m, s, 0) < 0) die("send payload");
}

/* What a side does with a payload it receives, by mode: "bare" nothing; "ps" what ps's
 * colocated server and clients do (see main); "fused" the same with the server's copies fused. */
enum { MODE_BARE, MODE_PS, MODE_FUSED };
static int mode;
static float *recv0, *recv1, *own, *sum, *out0, *out1; /* [cap / 4] each, where the mode uses them */

/* The worker (rank 1): the reply lands in its buffer, as ps's client copies it. */
static void worker_use(const void *p, size_t n) {
    if (mode != MODE_BARE) memcpy(out1, p, n);
}

/* The server: n bytes of rank 1's contribution at p, rank 0's own in `own`; the reply's source. */
static const void *server_use(const void *p, size_t n) {
    size_t k = n / sizeof(float);
    const float *in = p;
    if (mode == MODE_PS) { /* ps: each contribution copied in, the sum = recv0, then + recv1 */
        memcpy(recv1, p, n);
        memcpy(recv0, own, n);
        memcpy(sum, recv0, n);
        for (size_t i = 0; i < k; i++) sum[i] += recv1[i];
        return sum;
    }
    if (mode == MODE_FUSED) { /* one pass from both contributions where they lie */
        for (size_t i = 0; i < k; i++) sum[i] = own[i] + in[i];
        return sum;
    }
    return p; /* bare: any bytes of the right size */
}

/* Receives one multipart message; returns its frame count and, when id, copies the first frame
 * (the identity) into id. A payload (third frame on the ROUTER, second on the DEALER) is handed to
 * use before its message is closed; *last is its size. */
static int recv_chunk(void *s, char *id, size_t *idlen, size_t *last, zmq_msg_t *keep) {
    zmq_msg_t m;
    int more = 1, k = 0;
    while (more) {
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0) die("recv");
        if (k == 0 && id) {
            *idlen = zmq_msg_size(&m) < 16 ? zmq_msg_size(&m) : 16;
            memcpy(id, zmq_msg_data(&m), *idlen);
        }
        *last = zmq_msg_size(&m);
        more = zmq_msg_more(&m);
        k++;
        if (!more && k == (id ? 3 : 2)) {
            if (keep) { /* the caller closes it */
                zmq_msg_move(keep, &m);
                zmq_msg_close(&m);
                break;
            }
            worker_use(zmq_msg_data(&m), zmq_msg_size(&m));
        }
        zmq_msg_close(&m);
    }
    return k;
}

static size_t nchunks(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

static size_t chunk_size(size_t bytes, size_t chunk, size_t c) {
    size_t lo = c * chunk;
    return bytes - lo < chunk ? bytes - lo : chunk;
}

/* One worker (a DEALER with its own context, identity "wK"): the sweep's timed round trips; writes
 * each size's median (a double) to out, then says goodbye. 0, or 1 on a failure. */
static int worker_run(int k, int epfd, int out, size_t minb, size_t maxb, int factor, int warm, int iters, size_t chunk,
                      const unsigned char *buf, const unsigned char *hdr) {
    char ep[256] = "", id[8];
    ssize_t got = read(epfd, ep, sizeof ep - 1);
    if (got <= 0) return 1;
    ep[got] = 0;
    int linger = 0;
    void *c = zmq_ctx_new();
    void *d = zmq_socket(c, ZMQ_DEALER);
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    snprintf(id, sizeof id, "w%d", k);
    zmq_setsockopt(d, ZMQ_ROUTING_ID, id, strlen(id));
    if (zmq_connect(d, ep) < 0) die("connect");
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!t) return 1;
    for (size_t bytes = minb;; bytes *= (size_t)factor) {
        size_t nc = nchunks(bytes, chunk), n;
        for (int it = 0; it < warm + iters; it++) {
            double t0 = now();
            for (size_t j = 0; j < nc; j++) send_chunk(d, NULL, 0, hdr, buf, chunk_size(bytes, chunk, j));
            for (size_t j = 0; j < nc; j++) recv_chunk(d, NULL, NULL, &n, NULL);
            double dt = now() - t0;
            if (it >= warm) t[it - warm] = dt;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp);
        double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
        if (write(out, &med, sizeof med) != (ssize_t)sizeof med) return 1;
        if (bytes > maxb / (size_t)factor) break;
    }
    unsigned char bye[HDR] = {0};
    zmq_send(d, bye, HDR, 0); /* a header alone: done */
    zmq_close(d);
    zmq_ctx_term(c);
    free(t);
    return 0;
}

#define MAXW 8
#define SIZES 4096 /* chunk sizes remembered, by running chunk number: workers are at most a call apart */

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "ipc") && strcmp(argv[1], "tcp"))) {
        fprintf(stderr, "usage: zmq_tput ipc|tcp [minbytes maxbytes factor warmup iters chunkbytes [bare|ps|fused [keep|glibc [workers]]]]\n");
        return 2;
    }
    int ipc = !strcmp(argv[1], "ipc");
    size_t minb = argc > 2 ? strtoull(argv[2], NULL, 10) : 65536;
    size_t maxb = argc > 3 ? strtoull(argv[3], NULL, 10) : 64u << 20;
    int factor = argc > 4 ? atoi(argv[4]) : 4, warm = argc > 5 ? atoi(argv[5]) : 3, iters = argc > 6 ? atoi(argv[6]) : 10;
    size_t chunk = argc > 7 ? strtoull(argv[7], NULL, 10) : 25u << 20;
    const char *mname = argc > 8 ? argv[8] : "bare";
    mode = !strcmp(mname, "ps") ? MODE_PS : !strcmp(mname, "fused") ? MODE_FUSED : MODE_BARE;
    if (mode == MODE_BARE && strcmp(mname, "bare")) {
        fprintf(stderr, "zmq_tput: mode '%s': expected bare, ps or fused\n", mname);
        return 2;
    }
    const char *heap = argc > 9 ? argv[9] : "keep";
    if (strcmp(heap, "keep") && strcmp(heap, "glibc")) {
        fprintf(stderr, "zmq_tput: heap '%s': expected keep or glibc\n", heap);
        return 2;
    }
    int nw = argc > 10 ? atoi(argv[10]) : 1;
    if (nw < 1 || nw > MAXW || (nw > 1 && mode != MODE_BARE)) {
        fprintf(stderr, "zmq_tput: workers '%s': expected 1 to %d (more than one: bare only)\n", argv[10], MAXW);
        return 2;
    }
    if (minb < 4 || maxb < minb || factor < 2 || warm < 0 || iters < 1 || chunk < 4) {
        fprintf(stderr, "zmq_tput: bad arguments\n");
        return 2;
    }
    size_t cap = maxb < chunk ? maxb : chunk;
    if (!strcmp(heap, "keep")) { /* before the fork and any thread: every process */
        heap_init();
        heap_keep_frames(cap + HDR);
    }
    unsigned char *buf = malloc(cap);
    if (!buf) return 1;
    memset(buf, 1, cap);
    if (mode != MODE_BARE) {
        float **all[] = {&recv0, &recv1, &own, &sum, &out0, &out1};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
            if (!(*all[i] = malloc(cap))) return 1;
            memset(*all[i], 0, cap);
        }
    }
    unsigned char hdr[HDR] = {'R', 'S', 'P', 'S'};

    /* the server binds after the fork (each process its own context); each worker learns the
     * endpoint through a pipe and hands its medians back through another */
    int epfd[MAXW][2], res[MAXW][2], linger = 0, one = 1;
    pid_t pid[MAXW];
    for (int k = 0; k < nw; k++) {
        if (pipe(epfd[k]) || pipe(res[k])) return 1;
        if ((pid[k] = fork()) < 0) return 1;
        if (pid[k] == 0) {
            close(epfd[k][1]);
            close(res[k][0]);
            return worker_run(k + 1, epfd[k][0], res[k][1], minb, maxb, factor, warm, iters, chunk, buf, hdr);
        }
        close(epfd[k][0]);
        close(res[k][1]);
    }
    /* the server (rank 0): a ROUTER with its own context */
    char ep[256];
    if (ipc) snprintf(ep, sizeof ep, "ipc://@zmq_tput-%ld", (long)getpid());
    else snprintf(ep, sizeof ep, "tcp://127.0.0.1:*");
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    if (zmq_bind(router, ep) < 0) die("bind");
    size_t len = sizeof ep;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &len);
    for (int k = 0; k < nw; k++)
        if (write(epfd[k][1], ep, strlen(ep)) != (ssize_t)strlen(ep)) return 1;
    char id[16];
    size_t idlen = 0, size[SIZES];
    unsigned long long got[MAXW] = {0}, answered = 0; /* chunks in from each worker; answered to all */
    for (int left = nw; left > 0;) {
        size_t n = 0;
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (recv_chunk(router, id, &idlen, &n, &m) < 3) { /* a worker's goodbye: no payload frame */
            left--;
            continue;
        }
        if (nw == 1) { /* answered as soon as it is in */
            const void *reply = server_use(mode == MODE_BARE ? buf : zmq_msg_data(&m), n);
            zmq_msg_close(&m);
            send_chunk(router, id, idlen, hdr, reply, n);
            if (mode != MODE_BARE) memcpy(out0, sum, n); /* rank 0's client takes its copy of the sum */
            continue;
        }
        zmq_msg_close(&m);
        int w = idlen >= 2 ? atoi(id + 1) - 1 : -1;
        if (w < 0 || w >= nw) {
            fprintf(stderr, "zmq_tput: a message from an unknown worker\n");
            return 1;
        }
        size[got[w]++ % SIZES] = n;
        unsigned long long all = got[0];
        for (int k = 1; k < nw; k++) all = got[k] < all ? got[k] : all;
        for (; answered < all; answered++) /* chunk `answered` is in from every worker: to each its answer */
            for (int k = 0; k < nw; k++) {
                char wid[8];
                snprintf(wid, sizeof wid, "w%d", k + 1);
                send_chunk(router, wid, strlen(wid), hdr, buf, size[answered % SIZES]);
            }
    }
    char who[64];
    if (nw > 1) snprintf(who, sizeof who, "%d DEALERs (processes 2 to %d)", nw, nw + 1);
    else snprintf(who, sizeof who, "a DEALER (process 2)");
    printf("# ZeroMQ %s: %s -> ROUTER (process 1), answered chunk by chunk%s; chunks of %zu B; %d warm-up and %d "
           "timed round trips per size, back to back; mode %s; heap %s\n", argv[1], who,
           nw > 1 ? " once every worker's is in" : "", chunk, warm, iters, mname, heap);
    printf("# time: each worker's median round trip, the maximum over workers; algbw = size / time; busbw = algbw * "
           "2(N-1)/N, N = %d\n#\n", nw > 1 ? nw : 2);
    printf("# %12s %12s %6s %11s %12s %12s %8s\n", "size(B)", "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
           "#wrong");
    int status = 0;
    double sum_bus = 0, N = nw > 1 ? nw : 2;
    int rows = 0;
    for (size_t bytes = minb;; bytes *= (size_t)factor) {
        double med = 0;
        for (int k = 0; k < nw; k++) {
            double x = 0;
            if (read(res[k][0], &x, sizeof x) != (ssize_t)sizeof x) status = 1;
            med = x > med ? x : med;
        }
        double alg = med > 0 ? (double)bytes / med / 1e9 : 0, bus = alg * 2.0 * (N - 1) / N;
        printf("  %12zu %12zu %6s %11.2f %12.4f %12.4f %8s\n", bytes, bytes / 4, "float", med * 1e6, alg, bus, "N/A");
        sum_bus += bus;
        rows++;
        if (bytes > maxb / (size_t)factor) break;
    }
    printf("# Avg bus bandwidth : %.4f\n", rows ? sum_bus / rows : 0);
    for (int k = 0; k < nw; k++) {
        int st = 0;
        waitpid(pid[k], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) status = 1;
    }
    zmq_close(router);
    zmq_ctx_term(ctx);
    free(buf);
    return status;
}
