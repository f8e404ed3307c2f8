/* test_ring.c - the host ring all-reduce: chunk arithmetic, forked rings over loopback, strays, dead peers, the "ring" back end */
#include "../allreduce/allreduce.h"
#include "../allreduce/ring.h"
#include "../base/clock.h"
#include "../base/config.h"
#include "../net/ctrl.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../net/launch.h"
#include "../model/model.h"
#include "../engine/sync.h"
#include "test.h"
#include "../base/hash.h"
#include "../base/mem.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define EP_LEN 256
#define MAX_WORLD 8
#define TOKEN 0x5eed5eed12345678ull

/* ---- a forked job: one process per rank, endpoints and results exchanged through pipes ---- */

typedef struct {
    int rank, world;
    int up, down;   /* child -> parent, parent -> child */
} Child;

typedef int (*RankFn)(Child *c, void *arg);

static int write_all(int fd, const void *p, size_t n) {
    const char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n) {
    char *b = p;
    while (n) {
        ssize_t k = read(fd, b, n);
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Child side: publishes mine, receives every rank's endpoint into eps (world x EP_LEN). */
static int child_exchange(Child *c, const char *mine, char eps[][EP_LEN]) {
    char rec[EP_LEN] = {0};
    snprintf(rec, sizeof rec, "%s", mine);
    if (write_all(c->up, rec, EP_LEN)) return -1;
    return read_all(c->down, eps, (size_t)c->world * EP_LEN);
}

/* Child side: reports one 64-bit result (a hash of its buffer) to the parent. */
static int child_report(Child *c, uint64_t v) { return write_all(c->up, &v, sizeof v); }

/* Forks world ranks running fn. The parent relays the endpoint exchange, then collects
 * nreports 64-bit results per rank (reports[rank * nreports + i]) and every exit status
 * (128 + signal when killed). Children die after 120 s (alarm), so a hang fails instead. */
static void run_job(int world, RankFn fn, void *arg, int nreports, uint64_t *reports, int *status) {
    int up[MAX_WORLD][2], down[MAX_WORLD][2];
    pid_t pid[MAX_WORLD];
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < world; i++) {
        if (pipe(up[i]) || pipe(down[i])) {
            perror("pipe");
            exit(1);
        }
    }
    for (int i = 0; i < world; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            alarm(120);
            for (int j = 0; j < world; j++) {
                close(up[j][0]);
                close(down[j][1]);
                if (j != i) {
                    close(up[j][1]);
                    close(down[j][0]);
                }
            }
            Child c = {i, world, up[i][1], down[i][0]};
            _exit(fn(&c, arg));
        }
    }
    for (int i = 0; i < world; i++) {
        close(up[i][1]);
        close(down[i][0]);
    }
    /* relay the endpoints: a rank that died before publishing leaves an empty one */
    static char eps[MAX_WORLD][EP_LEN];
    memset(eps, 0, sizeof eps);
    for (int i = 0; i < world; i++) read_all(up[i][0], eps[i], EP_LEN);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < world; i++) write_all(down[i][1], eps, (size_t)world * EP_LEN);
    for (int i = 0; i < world; i++)
        for (int k = 0; k < nreports; k++) {
            uint64_t v = 0;
            if (read_all(up[i][0], &v, sizeof v)) v = 0xdeadull;
            reports[i * nreports + k] = v;
        }
    for (int i = 0; i < world; i++) {
        int st;
        waitpid(pid[i], &st, 0);
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        close(up[i][0]);
        close(down[i][1]);
    }
}

/* FNV-1a over the bits of a buffer. */
static uint64_t hash_bits(const void *p, size_t n) {
    return hash_bytes(HASH_FNV_INIT, p, n);
}

/* The bench's exact input: small integers, so every sum is exact in fp32. */
static float exact_input(size_t i, int r) { return (float)((long)((i * 7 + (size_t)r * 13) % 17) - 8); }

static float exact_sum(size_t i, int world) {
    float s = 0;
    for (int r = 0; r < world; r++) s += exact_input(i, r);
    return s;
}

/* A ring for child c's collectives of at most `most` floats (0: any) with the endpoints exchanged.
 * NULL on failure (message printed). */
static Ring *child_ring_for(Child *c, double timeout, size_t most) {
    Ring *r;
    char ep[EP_LEN], eps[MAX_WORLD][EP_LEN];
    if (ring_create_for(&r, NULL, c->rank, c->world, "127.0.0.1", TOKEN, timeout, most, ep, sizeof ep)) {
        fprintf(stderr, "  rank %d: ring_create: %s\n", c->rank, rs_errmsg());
        return NULL;
    }
    char *list[MAX_WORLD];
    if (child_exchange(c, ep, eps)) return NULL;
    for (int i = 0; i < c->world; i++) list[i] = eps[i];
    if (ring_connect(r, list)) {
        fprintf(stderr, "  rank %d: ring_connect: %s\n", c->rank, rs_errmsg());
        ring_destroy(r);
        return NULL;
    }
    return r;
}

static Ring *child_ring(Child *c, double timeout) { return child_ring_for(c, timeout, 0); }

/* ---- unit: chunk arithmetic ---------------------------------------------------------------- */

static void test_chunks_partition(void) {
    for (int n = 1; n <= 7; n++)
        for (size_t count = 0; count <= 100; count++) {
            size_t expect_lo = 0, minlen = (size_t)-1, maxlen = 0;
            for (int c = 0; c < n; c++) {
                size_t lo, hi;
                ring_chunk(count, n, c, &lo, &hi);
                CHECK_MSG(lo == expect_lo && hi >= lo, "n %d count %zu chunk %d: [%zu, %zu)", n, count, c, lo, hi);
                expect_lo = hi;
                if (hi - lo < minlen) minlen = hi - lo;
                if (hi - lo > maxlen) maxlen = hi - lo;
            }
            CHECK_MSG(expect_lo == count, "n %d count %zu: chunks end at %zu", n, count, expect_lo);
            CHECK_MSG(maxlen - minlen <= 1, "n %d count %zu: chunk sizes %zu..%zu", n, count, minlen, maxlen);
        }
}

/* ---- forked rings ---------------------------------------------------------------------------- */

typedef struct {
    size_t seg_bytes;   /* 0: default */
    const char *policy; /* RINGSIDE_RING_TRANSPORT, NULL: default (shared memory on one host) */
    size_t extra;       /* a seventh count after exact_counts (0: none) */
    size_t most;        /* ring_create_for's most (0: ring_create, a ring for any collective) */
} ExactArg;

static const size_t exact_counts[] = {1, 0 /* N-1 */, 0 /* N */, 0 /* N+1 */, 1000, 1048576 + 3};

/* Every count (and arg->extra): all-reduce of exact inputs, checked bitwise against the exact
 * sum; then a broadcast of rank 0's values. Reports the hash of each result. */
static int rank_exact(Child *c, void *argp) {
    ExactArg *arg = argp;
    if (arg->policy) setenv("RINGSIDE_RING_TRANSPORT", arg->policy, 1);
    MemStats m0, m1;
    mem_snapshot(&m0);
    Ring *r = child_ring_for(c, 20, arg->most);
    if (!r) return 10;
    if (arg->seg_bytes) ring_set_segment(r, arg->seg_bytes);
    /* shared memory: its own lane and the right neighbour's, each a head page and
     * ring_lane_bytes of messages, and the left neighbour's head page where it is another rank */
    mem_snapshot(&m1);
    size_t lane = 4096 + ring_lane_bytes(c->world, arg->most), comm = m1.cur[MEM_COMM] - m0.cur[MEM_COMM];
    if (c->world > 1 && !strcmp(ring_transport(r), "shm") && comm != 2 * lane + (c->world > 2 ? 4096 : 0)) {
        fprintf(stderr, "  rank %d of %d: comm %zu bytes, not two lanes of %zu (and a head page)\n", c->rank, c->world,
                comm, lane);
        return 13;
    }
    size_t counts[7];
    memcpy(counts, exact_counts, sizeof exact_counts);
    counts[1] = (size_t)c->world - 1;
    counts[2] = (size_t)c->world;
    counts[3] = (size_t)c->world + 1;
    counts[6] = arg->extra;
    float *buf = malloc((arg->extra > 1048576 + 3 ? arg->extra : 1048576 + 3) * sizeof(float));
    int fails = 0;
    for (int k = 0; k < (arg->extra ? 7 : 6); k++) {
        size_t n = counts[k];
        for (size_t i = 0; i < n; i++) buf[i] = exact_input(i, c->rank);
        int rc = ring_allreduce(r, buf, n);
        if (rc) {
            fprintf(stderr, "  rank %d count %zu: %s\n", c->rank, n, rs_errmsg());
            return 11;
        }
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) {
            float want = exact_sum(i, c->world);
            if (memcmp(&buf[i], &want, sizeof want)) wrong++;
        }
        if (wrong) {
            fprintf(stderr, "  rank %d of %d, count %zu: %zu wrong elements\n", c->rank, c->world, n, wrong);
            fails++;
        }
        child_report(c, hash_bits(buf, n * sizeof(float)));
    }
    /* broadcast: rank 0's values everywhere */
    size_t n = 1048576 + 3;
    for (size_t i = 0; i < n; i++) buf[i] = (float)c->rank * 1000.0f + (float)(i % 977);
    if (ring_broadcast(r, buf, n)) {
        fprintf(stderr, "  rank %d broadcast: %s\n", c->rank, rs_errmsg());
        return 12;
    }
    for (size_t i = 0; i < n; i++)
        if (buf[i] != (float)(i % 977)) {
            fprintf(stderr, "  rank %d broadcast: element %zu is %g\n", c->rank, i, buf[i]);
            fails++;
            break;
        }
    RingCounters rc;
    ring_counters(r, &rc);
    if (c->world > 1 && (rc.messages_sent == 0 || rc.dropped != 0)) fails++;
    /* no message larger than the ring's largest segment (what its lanes hold): at least the payload
     * over that many messages */
    size_t seg = ring_largest_segment(c->world, arg->most) * sizeof(float);
    if (rc.bytes_sent - rc.messages_sent * sizeof(RingHeader) > rc.messages_sent * seg) {
        fprintf(stderr, "  rank %d: %llu messages carried %llu bytes: some larger than %zu\n", c->rank,
                (unsigned long long)rc.messages_sent, (unsigned long long)rc.bytes_sent, seg);
        fails++;
    }
    ring_destroy(r);
    free(buf);
    return fails ? 1 : 0;
}

static void check_job(int world, RankFn fn, void *arg, int nreports, int want_equal) {
    uint64_t rep[MAX_WORLD * 8];
    int st[MAX_WORLD];
    run_job(world, fn, arg, nreports, rep, st);
    for (int i = 0; i < world; i++) CHECK_MSG(st[i] == 0, "world %d: rank %d exited with %d", world, i, st[i]);
    if (want_equal)
        for (int i = 1; i < world; i++)
            for (int k = 0; k < nreports; k++)
                CHECK_MSG(rep[i * nreports + k] == rep[k], "world %d: rank %d's result %d differs from rank 0's", world,
                          i, k);
}

static void test_ring_exact_1_to_5(void) {
    ExactArg a = {0, NULL, 0, 0};
    for (int n = 1; n <= 5; n++) check_job(n, rank_exact, &a, 6, 1);
    ExactArg t = {0, "tcp", 0, 0}, i = {0, "ipc", 0, 0};
    for (int n = 2; n <= 4; n++) check_job(n, rank_exact, &t, 6, 1);
    check_job(3, rank_exact, &i, 6, 1);
}

static void test_ring_exact_small_segments(void) {
    const char *policies[2] = {NULL, "tcp"};
    for (int k = 0; k < 2; k++) {
        ExactArg a = {64, policies[k], 0, 0}; /* 16 floats: many segments per chunk, every frame copied */
        check_job(3, rank_exact, &a, 6, 1);
        ExactArg b = {40000, policies[k], 0, 0}; /* just over the zero-copy threshold, odd segment ends */
        check_job(4, rank_exact, &b, 6, 1);
        check_job(2, rank_exact, &a, 6, 1); /* over tcp: more segments than one exchange takes */
        check_job(2, rank_exact, &b, 6, 1); /* over tcp: one exchange of many zero-copy segments */
    }
    /* over tcp: a step of 1100 zero-copy segments, more than the receiving PULL holds (ring.c's
     * ring_queue, 1024): the rest wait in the sender's queue, and the ring still completes */
    ExactArg q = {40000, "tcp", 2 * 1100 * 10000, 0};
    check_job(2, rank_exact, &q, 7, 1);
}

/* ---- the lanes' size ------------------------------------------------------------------------- */

/* The default cut as ring.h documents it (a chunk's 1/RING_SEG_PER_CHUNK within the transports'
 * bounds), written again here so that the sizing rule is checked against that rule, not itself. */
static size_t doc_cut(size_t chunk, int world, int all_shm) {
    size_t lo = (all_shm ? RING_SHM_SEG_MIN : world == 2 ? RING_SEG2_MIN : RING_SEG_MIN) / sizeof(float);
    size_t hi = (all_shm ? RING_SHM_SEG_BYTES : RING_SEG_BYTES) / sizeof(float);
    size_t seg = (chunk + RING_SEG_PER_CHUNK - 1) / RING_SEG_PER_CHUNK;
    return seg < lo ? lo : seg > hi ? hi : seg;
}

/* The largest message, in floats, the default cut makes of a collective of count floats: of an
 * all-reduce's (reduce-scatter's, all-gather's) chunks of ceil(count / N), or of a broadcast's
 * whole buffer. */
static size_t doc_largest(size_t count, int world, int all_shm, int broadcast) {
    size_t chunk = broadcast ? count : (count + (size_t)world - 1) / (size_t)world;
    size_t seg = doc_cut(chunk, world, all_shm);
    return seg < chunk ? seg : chunk;
}

/* A lane message of n floats: its 64-byte header block and the floats padded to 64 bytes. */
static size_t lane_footprint(size_t n) { return 64 + (n * sizeof(float) + 63) / 64 * 64; }

/* A lane size that is enough for the job's largest segment: for every world and job size, the
 * lane holds RING_LANE_MSGS of the largest message the default cut makes of any collective of at
 * most that size on any transports (and that bound is exact, not loose), and the whole of the
 * largest collective, in whole pages, within [RING_LANE_MIN, RING_LANE_MAX]; a ring for any
 * collective keeps the lane of two RING_SEG_MAX segments. */
static void test_lane_sizing(void) {
    CHECK(ring_largest_segment(4, 0) == RING_SEG_MAX / sizeof(float) && ring_lane_bytes(4, 0) == RING_LANE_MAX);
    CHECK(RING_LANE_MAX == RING_LANE_MSGS * lane_footprint(RING_SEG_MAX / sizeof(float)) / 4096 * 4096 + 4096);
    static const size_t mosts[] = {1,      7,      1000,   16383,   16384,   16385,   50890,   61706,
                                   65536,  65537,  120576, 131072,  262144,  300001,  1048576, 1863690,
                                   4194304, 16777216, (size_t)1 << 28};
    for (int world = 2; world <= 8; world++) {
        size_t prev = 0;
        for (size_t k = 0; k < sizeof mosts / sizeof *mosts; k++) {
            size_t most = mosts[k], seg = ring_largest_segment(world, most), lane = ring_lane_bytes(world, most);
            CHECK_MSG(lane % 4096 == 0 && lane >= RING_LANE_MIN && lane <= RING_LANE_MAX && lane >= prev,
                      "N %d, most %zu: a lane of %zu bytes (the one before %zu)", world, most, lane, prev);
            prev = lane;
            CHECK_MSG(seg >= 1 && seg <= most && RING_LANE_MSGS * lane_footprint(seg) <= lane,
                      "N %d, most %zu: segments of %zu floats, a lane of %zu bytes", world, most, seg, lane);
            size_t counts[5] = {most, most - most / 3, most / 2, most / (size_t)world + 1, 1}, worst = 0;
            for (int c = 0; c < 5; c++)
                for (int shm = 0; shm < 2; shm++)
                    for (int bc = 0; bc < 2; bc++) {
                        size_t m = doc_largest(counts[c], world, shm, bc);
                        CHECK_MSG(m <= seg, "N %d, most %zu: %s of %zu (shm %d) cuts %zu floats, the lane's bound %zu",
                                  world, most, bc ? "a broadcast" : "an all-reduce", counts[c], shm, m, seg);
                        if (m > worst) worst = m;
                    }
            CHECK_MSG(worst == seg, "N %d, most %zu: the largest segment is %zu floats, the bound %zu", world, most,
                      worst, seg);
            size_t whole = most * sizeof(float) < RING_LANE_MAX ? most * sizeof(float) : RING_LANE_MAX;
            CHECK_MSG(lane >= whole, "N %d, most %zu: a lane of %zu bytes for a collective of %zu", world, most, lane,
                      most * sizeof(float));
        }
    }
}

/* Lanes sized for collectives of 1000 floats (RING_LANE_MIN) carry collectives of a million
 * floats and their broadcast, exactly, cut into segments they hold: over shared memory for 2 to
 * 4 ranks, with a segment set larger than they hold (clamped to theirs), and over ZeroMQ (the
 * same cut); and a job's lanes (a 784-64-10 MLP's parameters). rank_exact checks each rank's
 * `comm` (two lanes of ring_lane_bytes and a head page) and that no message outgrew the bound. */
static void test_ring_small_lane(void) {
    ExactArg a = {0, NULL, 0, 1000};
    for (int n = 2; n <= 4; n++) check_job(n, rank_exact, &a, 6, 1);
    ExactArg b = {RING_SEG_MAX, NULL, 0, 1000};
    check_job(3, rank_exact, &b, 6, 1);
    ExactArg t = {0, "tcp", 0, 1000};
    check_job(3, rank_exact, &t, 6, 1);
    ExactArg j = {0, NULL, 0, 784 * 64 + 64 + 64 * 10 + 10};
    check_job(4, rank_exact, &j, 6, 1);
}

/* Rank 1's ring is created for smaller collectives than rank 0's (both ends in this process: no
 * collective runs, and neither lane closes before the other end has mapped it): rank 0, which
 * writes into rank 1's lane, refuses it at ring_connect, naming both sizes; rank 1 writes into
 * rank 0's larger one. */
static void test_ring_lane_mismatch(void) {
    if (access("/proc/sys/kernel/random/boot_id", R_OK) != 0) {
        SKIP("no boot id: TCP only on this system");
        return;
    }
    Ring *r[2] = {NULL, NULL};
    char eps[2][EP_LEN], *list[2] = {eps[0], eps[1]};
    for (int k = 0; k < 2; k++)
        CHECK(ring_create_for(&r[k], NULL, k, 2, "127.0.0.1", TOKEN, 5, k == 1 ? 1000 : 1048576, eps[k], EP_LEN) == RS_OK);
    if (r[0] && r[1]) {
        char want[200];
        snprintf(want, sizeof want,
                 "rank 1's shared-memory lane holds %u bytes, less than one of this ring's largest messages (%zu bytes",
                 RING_LANE_MIN, lane_footprint(ring_largest_segment(2, 1048576)));
        int rc = ring_connect(r[0], list);
        CHECK_MSG(rc == RS_ERR_INPUT && strstr(rs_errmsg(), want), "rank 0: ring_connect %d: %s", rc, rc ? rs_errmsg() : "");
        rc = ring_connect(r[1], list);
        CHECK_MSG(rc == RS_OK, "rank 1: ring_connect %d: %s", rc, rc ? rs_errmsg() : "");
    }
    ring_destroy(r[0]);
    ring_destroy(r[1]);
}

/* Inexact sums (random floats): every rank must still end with the same bits. Repeated
 * collectives on one ring, different sizes. */
static int rank_random(Child *c, void *argp) {
    Ring *r = child_ring(c, 20);
    if (!r) return 10;
    size_t sizes[4] = {7, 4099, 300001, 65536 * 5 + 1};
    float *buf = malloc(sizes[3] * sizeof(float));
    uint64_t x = 88172645463325252ull ^ (uint64_t)(c->rank + 1) * 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < sizes[k]; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * 3.7f;
        }
        if (ring_allreduce(r, buf, sizes[k])) {
            fprintf(stderr, "  rank %d: %s\n", c->rank, rs_errmsg());
            return 11;
        }
        child_report(c, hash_bits(buf, sizes[k] * sizeof(float)));
    }
    ring_destroy(r);
    free(buf);
    return 0;
}

static void test_ring_bitwise_equal_inexact(void) {
    check_job(3, rank_random, NULL, 4, 1);
    check_job(5, rank_random, NULL, 4, 1);
}

/* ---- a 16-bit wire ----------------------------------------------------------------------------- */

typedef struct {
    Codec wire;
    const char *policy; /* RINGSIDE_RING_TRANSPORT or NULL */
} WireArg;

static float wire_input(size_t i, int r) {
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ ((uint64_t)r + 1) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    return (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * 0.03f;
}

/* What the ring must give for element i of count over world ranks with codec w, by its
 * definition: chunk c's sum starts at rank c and goes round the ring; every hop receives the
 * partial sum as sent (rounded) and adds its own value in fp32; the owner rounds the total. */
static float wire_expect(const Codec *w, size_t i, size_t count, int world) {
    int c = 0;
    for (int k = 0; k < world; k++) {
        size_t lo, hi;
        ring_chunk(count, world, k, &lo, &hi);
        if (i >= lo && i < hi) c = k;
    }
    float acc = wire_input(i, c);
    for (int k = 1; k < world; k++) {
        codec_round(w, &acc, 1);
        acc += wire_input(i, (c + k) % world);
    }
    codec_round(w, &acc, 1);
    return acc;
}

/* All-reduce over a 16-bit wire: exact integer inputs stay exact; arbitrary inputs give, on
 * every rank, exactly the bits of the rounding the definition prescribes; the bytes sent are
 * the headers plus 2 per element; broadcast still moves fp32. */
static int rank_wire(Child *c, void *argp) {
    WireArg *a = argp;
    if (a->policy) setenv("RINGSIDE_RING_TRANSPORT", a->policy, 1);
    Ring *r = child_ring(c, 20);
    if (!r) return 10;
    ring_set_wire(r, a->wire);
    size_t n = 300001;
    float *buf = malloc(n * sizeof(float));
    int fails = 0;
    for (size_t i = 0; i < n; i++) buf[i] = exact_input(i, c->rank);
    RingCounters before, after;
    ring_counters(r, &before);
    if (ring_allreduce(r, buf, n)) return fprintf(stderr, "  rank %d: %s\n", c->rank, rs_errmsg()), 11;
    ring_counters(r, &after);
    for (size_t i = 0; i < n && !(fails & 1); i++)
        if (buf[i] != exact_sum(i, c->world)) fails |= 1;
    unsigned long long msgs = after.messages_sent - before.messages_sent, sent = after.bytes_sent - before.bytes_sent;
    size_t lo, hi, elems = 0;
    for (int s = 0; s < c->world - 1; s++) { /* reduce-scatter sends chunk r-s, all-gather chunk r+1-s */
        ring_chunk(n, c->world, ((c->rank - s) % c->world + c->world) % c->world, &lo, &hi);
        elems += hi - lo;
        ring_chunk(n, c->world, ((c->rank + 1 - s) % c->world + c->world) % c->world, &lo, &hi);
        elems += hi - lo;
    }
    if (sent != msgs * sizeof(RingHeader) + 2 * elems) fails |= 2;
    for (size_t i = 0; i < n; i++) buf[i] = wire_input(i, c->rank);
    if (ring_allreduce(r, buf, n)) return 11;
    for (size_t i = 0; i < n && !(fails & 4); i++) {
        float want = wire_expect(&a->wire, i, n, c->world);
        if (memcmp(&buf[i], &want, sizeof want)) {
            fprintf(stderr, "  rank %d: element %zu is %a, expected %a\n", c->rank, i, buf[i], want);
            fails |= 4;
        }
    }
    child_report(c, hash_bits(buf, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) buf[i] = c->rank ? 0 : wire_input(i, 0);
    if (ring_broadcast(r, buf, n)) return 12;
    for (size_t i = 0; i < n && !(fails & 8); i++)
        if (buf[i] != wire_input(i, 0)) fails |= 8; /* not rounded */
    if (fails) fprintf(stderr, "  rank %d of %d (%s, scale %g): fails 0x%x (sent %llu in %llu messages, %zu elements)\n",
                       c->rank, c->world, codec_name(a->wire.type), a->wire.scale, fails, sent, msgs, elems);
    ring_destroy(r);
    free(buf);
    return fails ? 1 : 0;
}

static void test_ring_wire_16bit(void) {
    WireArg bf = {codec_make(CODEC_BF16, 1), NULL}, h = {codec_make(CODEC_F16, 1024), NULL};
    WireArg bft = {codec_make(CODEC_BF16, 1), "tcp"}, ht = {codec_make(CODEC_F16, 1), "tcp"};
    for (int n = 2; n <= 4; n++) check_job(n, rank_wire, &bf, 1, 1);
    check_job(3, rank_wire, &h, 1, 1);
    check_job(3, rank_wire, &bft, 1, 1);
    check_job(2, rank_wire, &ht, 1, 1);
}

/* ---- the two phases apart (zero's) -------------------------------------------------------------- */

/* For each size and wire: reduce-scatter leaves chunk (rank + 1) % N summed to the all-reduce's
 * bits (the same inputs all-reduced on the same ring), with its bounds; the owner then halves its
 * chunk, and all-gather hands every rank every owner's bits (fp32, whatever the wire). arg: a
 * Codec (the wire) or NULL (fp32). */
static int rank_phases(Child *c, void *argp) {
    const char *policy = getenv("RS_TEST_POLICY");
    if (policy) setenv("RINGSIDE_RING_TRANSPORT", policy, 1);
    Ring *r = child_ring(c, 20);
    if (!r) return 10;
    if (argp) ring_set_wire(r, *(const Codec *)argp);
    size_t sizes[5] = {1, (size_t)c->world + 1, 4099, 300001, 0};
    float *a = malloc(300001 * sizeof(float)), *b = malloc(300001 * sizeof(float));
    int fails = 0;
    for (int k = 0; k < 5; k++) {
        size_t n = sizes[k], lo, hi, want_lo, want_hi;
        for (size_t i = 0; i < n; i++) a[i] = b[i] = wire_input(i, c->rank);
        if (ring_allreduce(r, a, n) || ring_reduce_scatter(r, b, n, &lo, &hi)) {
            fprintf(stderr, "  rank %d: %s\n", c->rank, rs_errmsg());
            return 11;
        }
        ring_chunk(n, c->world, (c->rank + 1) % c->world, &want_lo, &want_hi);
        if (lo != want_lo || hi != want_hi || (hi > lo && memcmp(a + lo, b + lo, (hi - lo) * sizeof(float)))) {
            fprintf(stderr, "  rank %d count %zu: owns [%zu, %zu) (want [%zu, %zu)), sums differ from the all-reduce's\n",
                    c->rank, n, lo, hi, want_lo, want_hi);
            fails++;
        }
        for (size_t i = lo; i < hi; i++) b[i] *= 0.5f; /* the owner's update */
        if (ring_all_gather(r, b, n)) {
            fprintf(stderr, "  rank %d: %s\n", c->rank, rs_errmsg());
            return 12;
        }
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) wrong += b[i] != a[i] * 0.5f;
        if (wrong) {
            fprintf(stderr, "  rank %d count %zu: %zu elements are not their owner's\n", c->rank, n, wrong);
            fails++;
        }
        child_report(c, hash_bits(b, n * sizeof(float)));
    }
    ring_destroy(r);
    free(a), free(b);
    return fails ? 1 : 0;
}

static void test_ring_phases(void) {
    Codec bf16 = codec_make(CODEC_BF16, 1.0f);
    for (int n = 1; n <= 4; n++) check_job(n, rank_phases, NULL, 5, 1);
    check_job(3, rank_phases, &bf16, 5, 1);
    setenv("RS_TEST_POLICY", "tcp", 1);
    check_job(2, rank_phases, NULL, 5, 1);
    check_job(3, rank_phases, &bf16, 5, 1);
    unsetenv("RS_TEST_POLICY");
}


/* ---- two ranks over sockets: one exchange ------------------------------------------------------ */

/* N = 2 over ZeroMQ with an fp32 wire runs as one exchange (ring.c): inexact inputs must give, on
 * both ranks, exactly the ring's bits (element i of chunk c: rank c+1's value plus rank c's, in
 * that order), and the bytes the ring sends (headers plus every element once). Sizes from one
 * element to many zero-copy segments; argp: the transport policy. */
static int rank_pair(Child *c, void *argp) {
    setenv("RINGSIDE_RING_TRANSPORT", (const char *)argp, 1);
    Ring *r = child_ring(c, 20);
    if (!r) return 10;
    static const size_t sizes[] = {1, 2, 3, 4099, 300001, (6u << 20) + 5};
    float *buf = malloc(sizes[5] * sizeof(float));
    int fails = 0;
    for (int k = 0; k < 6; k++) {
        size_t n = sizes[k], lo, hi;
        for (size_t i = 0; i < n; i++) buf[i] = wire_input(i, c->rank);
        RingCounters before, after;
        ring_counters(r, &before);
        if (ring_allreduce(r, buf, n)) return fprintf(stderr, "  rank %d: %s\n", c->rank, rs_errmsg()), 11;
        ring_counters(r, &after);
        for (int ch = 0; ch < 2 && !(fails & 1); ch++) {
            ring_chunk(n, 2, ch, &lo, &hi);
            for (size_t i = lo; i < hi; i++) {
                float want = wire_input(i, (ch + 1) % 2) + wire_input(i, ch);
                if (memcmp(&buf[i], &want, sizeof want)) {
                    fprintf(stderr, "  rank %d count %zu: element %zu is %a, expected %a\n", c->rank, n, i, buf[i], want);
                    fails |= 1;
                    break;
                }
            }
        }
        unsigned long long msgs = after.messages_sent - before.messages_sent, sent = after.bytes_sent - before.bytes_sent;
        if (sent != msgs * sizeof(RingHeader) + 4 * n || after.dropped) fails |= 2;
        child_report(c, hash_bits(buf, n * sizeof(float)));
    }
    if (fails) fprintf(stderr, "  rank %d (%s): fails 0x%x\n", c->rank, (const char *)argp, fails);
    ring_destroy(r);
    free(buf);
    return fails ? 1 : 0;
}

static void test_ring_pair_exchange(void) {
    check_job(2, rank_pair, "tcp", 6, 1);
    check_job(2, rank_pair, "ipc", 6, 1);
}

/* A stray sender with the wrong token connects to rank 0's PULL: its messages are dropped and
 * counted, the collective is still right. Over the socket transports (argp: the policy); with
 * shared memory the PULL is closed. */
static int rank_stray(Child *c, void *argp) {
    setenv("RINGSIDE_RING_TRANSPORT", (const char *)argp, 1);
    Ring *r;
    char ep[EP_LEN], eps[MAX_WORLD][EP_LEN];
    char *list[MAX_WORLD];
    if (ring_create(&r, NULL, c->rank, c->world, "127.0.0.1", TOKEN, 10, ep, sizeof ep)) return 10;
    if (child_exchange(c, ep, eps)) return 10;
    for (int i = 0; i < c->world; i++) list[i] = eps[i];
    if (ring_connect(r, list)) return 10;
    ring_set_segment(r, 4096); /* many messages, so the fair-queued strays are all read */
    if (c->rank == 1) {
        void *z = zmq_ctx_new(), *s = zmq_socket(z, ZMQ_PUSH);
        int linger = 5000;
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
        eps[0][strcspn(eps[0], "|")] = 0; /* the TCP endpoint, as a stranger on another host would use */
        zmq_connect(s, eps[0]);
        RingHeader h = {RING_MAGIC, RING_KIND_RS, TOKEN ^ 1, 1, 0, 1, 0, 1};
        float v = 1e6f;
        zmq_send(s, &h, sizeof h, ZMQ_SNDMORE); /* wrong token */
        zmq_send(s, &v, sizeof v, 0);
        zmq_send(s, "garbage", 7, 0);           /* malformed: one frame */
        usleep(200000);
        zmq_close(s);
        zmq_ctx_term(z);
    }
    size_t n = 100000;
    float *buf = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) buf[i] = exact_input(i, c->rank);
    int rc = ring_allreduce(r, buf, n);
    int fails = rc ? 11 : 0;
    for (size_t i = 0; i < n && !fails; i++)
        if (buf[i] != exact_sum(i, c->world)) fails = 12;
    RingCounters cnt;
    ring_counters(r, &cnt);
    if (c->rank == 0 && cnt.dropped != 2) {
        fprintf(stderr, "  rank 0 dropped %llu strays (want 2)\n", cnt.dropped);
        fails = 13;
    }
    ring_destroy(r);
    free(buf);
    return fails;
}

static void test_ring_stray_dropped(void) {
    check_job(2, rank_stray, "tcp", 0, 0);
    check_job(2, rank_stray, "ipc", 0, 0);
}

/* The transports: ranks on one host publish "tcp://...|ipc://@...|shm=PID.FD.NONCE|host=KEY"
 * and every edge is shared memory; endpoints whose host keys differ (ranks on different hosts)
 * are reached over TCP; RINGSIDE_RING_TRANSPORT=ipc or tcp offers less. Mixed rings (some
 * edges shared memory, some sockets) must agree on both ends and not deadlock when the lanes
 * fill (24 MiB all-reduce: chunks larger than a lane). Each case runs an exact all-reduce. */
typedef struct {
    int mode;            /* see want[] */
} TransportArg;

static int rank_transport(Child *c, void *argp) {
    TransportArg *a = argp;
    /* per mode: the policy of every rank / of rank 1 only, rewritten host keys, the expected
     * transport to the right neighbour of ranks 0, 1, 2 */
    static const struct {
        const char *policy, *policy1;
        int rekey; /* 1: every rank's key made distinct; 2: rank 1's key only */
        const char *want[3];
    } m[] = {
        {NULL, NULL, 0, {"shm", "shm", "shm"}},
        {NULL, NULL, 1, {"tcp", "tcp", "tcp"}},
        {"tcp", NULL, 0, {"tcp", "tcp", "tcp"}},
        {"ipc", NULL, 0, {"ipc", "ipc", "ipc"}},
        {NULL, NULL, 2, {"tcp", "tcp", "shm"}},
        {NULL, "ipc", 0, {"ipc", "ipc", "shm"}},
    };
    const char *policy = c->rank == 1 && m[a->mode].policy1 ? m[a->mode].policy1 : m[a->mode].policy;
    if (policy) setenv("RINGSIDE_RING_TRANSPORT", policy, 1);
    Ring *r;
    char ep[EP_LEN], eps[MAX_WORLD][EP_LEN];
    char *list[MAX_WORLD];
    if (ring_create(&r, NULL, c->rank, c->world, "127.0.0.1", TOKEN, 20, ep, sizeof ep)) return 10;
    if (child_exchange(c, ep, eps)) return 10;
    int fails = 0;
    const char *ipc = strstr(ep, "|ipc://@"), *shm = strstr(ep, "|shm="), *host = strstr(ep, "|host=");
    if (strncmp(ep, "tcp://127.0.0.1:", 16)) fails |= 1;
    if (policy && !strcmp(policy, "tcp") && strchr(ep, '|')) fails |= 2;
    if ((!policy || strcmp(policy, "tcp")) && (!ipc || !host || host < ipc || strlen(host + 6) != 16)) fails |= 4;
    if (!policy != !!shm || (shm && (shm < ipc || shm > host))) fails |= 4;
    for (int i = 0; i < c->world; i++) {
        char *k = strstr(eps[i], "|host=");
        if (k && (m[a->mode].rekey == 1 || (m[a->mode].rekey == 2 && i == 1))) memset(k + 6, 'a' + i, strlen(k + 6));
        list[i] = eps[i];
    }
    if (ring_connect(r, list)) {
        fprintf(stderr, "  rank %d mode %d: ring_connect: %s\n", c->rank, a->mode, rs_errmsg());
        return 11;
    }
    if (strcmp(ring_transport(r), m[a->mode].want[c->rank])) fails |= 8;
    size_t n = 6u << 20;
    float *buf = malloc(n * sizeof(float));
    for (int rep = 0; rep < 2 && !fails; rep++) {
        size_t cnt = rep ? 300001 : n;
        for (size_t i = 0; i < cnt; i++) buf[i] = exact_input(i, c->rank);
        if (ring_allreduce(r, buf, cnt)) {
            fprintf(stderr, "  rank %d mode %d: %s\n", c->rank, a->mode, rs_errmsg());
            fails |= 16;
        }
        for (size_t i = 0; i < cnt && !(fails & 32); i++)
            if (buf[i] != exact_sum(i, c->world)) fails |= 32;
    }
    if (fails) fprintf(stderr, "  rank %d mode %d: endpoint '%s', transport %s: fails 0x%x\n", c->rank, a->mode, ep,
                       ring_transport(r), fails);
    ring_destroy(r);
    free(buf);
    return fails ? 1 : 0;
}

static void test_ring_transport(void) {
    if (access("/proc/sys/kernel/random/boot_id", R_OK) != 0) {
        SKIP("no boot id: TCP only on this system");
        return;
    }
    for (int mode = 0; mode < 6; mode++) {
        TransportArg a = {mode};
        check_job(3, rank_transport, &a, 0, 0);
    }
}

/* Rank `dead` exits after connecting (or after one collective): the others must return
 * RS_ERR_PEER within the 2 s timeout (plus slack), naming a rank. */
typedef struct {
    int dead, after_one;
    const char *policy; /* RINGSIDE_RING_TRANSPORT or NULL */
} DeathArg;

static int rank_death(Child *c, void *argp) {
    DeathArg *a = argp;
    if (a->policy) setenv("RINGSIDE_RING_TRANSPORT", a->policy, 1);
    Ring *r;
    char ep[EP_LEN], eps[MAX_WORLD][EP_LEN];
    char *list[MAX_WORLD];
    if (ring_create(&r, NULL, c->rank, c->world, "127.0.0.1", TOKEN, 2, ep, sizeof ep)) return 10;
    if (child_exchange(c, ep, eps)) return 10;
    for (int i = 0; i < c->world; i++) list[i] = eps[i];
    int crc = ring_connect(r, list);
    if (crc) { /* a shared-memory lane is mapped at connect: a peer already gone is found there */
        int ok = crc == RS_ERR_PEER && strstr(rs_errmsg(), "rank ") != NULL;
        if (!ok) fprintf(stderr, "  rank %d: ring_connect: rc %d: %s\n", c->rank, crc, rs_errmsg());
        ring_destroy(r);
        return ok ? 0 : 10;
    }
    size_t n = 200000;
    float *buf = calloc(n, sizeof(float));
    if (a->after_one && ring_allreduce(r, buf, n)) return 11;
    if (c->rank == a->dead) _exit(0);
    double t0 = clock_now();
    int rc = ring_allreduce(r, buf, n);
    double dt = clock_now() - t0;
    int ok = rc == RS_ERR_PEER && dt < 5.0 && strstr(rs_errmsg(), "rank ") != NULL;
    if (!ok) fprintf(stderr, "  rank %d: rc %d after %.2f s: %s\n", c->rank, rc, dt, rs_errmsg());
    /* the ring stays broken, and says so */
    int again = ring_allreduce(r, buf, 10);
    if (again != RS_ERR_PEER) ok = 0;
    ring_destroy(r);
    free(buf);
    return ok ? 0 : 1;
}

static void test_ring_dead_peer(void) {
    const char *policies[2] = {NULL, "tcp"};
    for (int k = 0; k < 2; k++) {
        DeathArg a = {2, 0, policies[k]};
        check_job(3, rank_death, &a, 0, 0);
        DeathArg b = {1, 1, policies[k]};
        check_job(4, rank_death, &b, 0, 0);
    }
}

/* ---- the "ring" back end through the control plane ---------------------------------------- */

typedef struct {
    int port;
    int layers[3];
} SyncArg;

/* One rank of a real job: ctrl_join on a free port, the back end's broadcast, two steps of
 * exact gradients bucket by bucket through start, compared bitwise with the exact sum. */
static int rank_sync(Child *c, void *argp) {
    SyncArg *a = argp;
    RankEnv e;
    memset(&e, 0, sizeof e);
    e.member = c->rank;
    e.world = c->world;
    e.local_rank = c->rank;
    e.local_world = c->world;
    e.launched = 1;
    e.port = a->port;
    snprintf(e.addr, sizeof e.addr, "127.0.0.1");
    snprintf(e.token, sizeof e.token, "0123abcd");
    Config cfg;
    config_defaults(&cfg);
    cfg.timeout = 20;
    Device dev;
    Model m;
    if (device_open(&dev, "cpu", 0, NULL)) return 10;
    /* different seeds: broadcast_params must make them equal */
    if (model_init(&m, &dev, a->layers, 3, 4, 1000 + (uint64_t)c->rank)) return 11;
    Bucket *bk;
    int nb = sync_plan_buckets(m.nparams, 4000.0, 4000.0, &bk);
    const SyncOps *ops = sync_ring();
    void *z = zmq_ctx_new(), *st = NULL;
    SyncJob job = {.cfg = &cfg, .dev = &dev, .rank = c->rank, .world = c->world, .local_rank = c->rank,
                   .local_world = c->world, .zctx = z, .addr = "127.0.0.1", .token = e.token, .buckets = bk,
                   .nbuckets = nb, .nparams = m.nparams, .timeout = cfg.timeout};
    char ep[1024], canon[8192];
    static char unused[MAX_WORLD][EP_LEN];
    if (child_exchange(c, "", unused)) return 12; /* the parent's protocol; endpoints go through ctrl here */
    config_canonical(&cfg, canon, sizeof canon);
    Ctrl *ctrl = NULL;
    int rc = ops->init(&job, &st, ep, sizeof ep);
    if (!rc) rc = ctrl_join(&ctrl, &e, z, canon, ep, cfg.timeout);
    if (!rc) rc = ops->connect(st, ctrl_endpoints(ctrl), ctrl_members(ctrl));
    if (!rc) rc = ops->broadcast(st, m.params, m.nparams);
    if (rc) {
        fprintf(stderr, "  rank %d: %s\n", c->rank, rs_errmsg());
        return 13;
    }
    child_report(c, hash_bits(m.params, m.nparams * sizeof(float)));
    /* the reference: the exact sum */
    float *g = malloc(m.nparams * sizeof(float));
    int fails = 0;
    for (int step = 0; step < 2; step++) {
        for (size_t i = 0; i < m.nparams; i++) {
            m.grads[i] = exact_input(i + (size_t)step, c->rank);
            g[i] = exact_sum(i + (size_t)step, c->world);
        }
        for (int b = 0; b < nb && !rc; b++) rc = ops->start(st, step, b, m.grads + bk[b].lo, m.grads + bk[b].lo);
        if (rc) {
            fprintf(stderr, "  rank %d step %d: %s\n", c->rank, step, rs_errmsg());
            return 14;
        }
        if (memcmp(g, m.grads, m.nparams * sizeof(float))) {
            fprintf(stderr, "  rank %d step %d: reduced gradients are not the exact sum\n", c->rank, step);
            fails++;
        }
    }
    child_report(c, hash_bits(m.params, m.nparams * sizeof(float)));
    SyncTraffic tr;
    ops->traffic(st, &tr);
    /* payload: per bucket and step every chunk but r+1 in reduce-scatter and every chunk but r+2
     * in all-gather (2(N-1)/N of the gradient bytes), plus the broadcast (all but the last rank) */
    unsigned long long want = c->rank < c->world - 1 ? m.nparams * 4 : 0;
    for (int b = 0; b < nb; b++) {
        size_t n = bk[b].hi - bk[b].lo, lo1, hi1, lo2, hi2;
        ring_chunk(n, c->world, (c->rank + 1) % c->world, &lo1, &hi1);
        ring_chunk(n, c->world, (c->rank + 2) % c->world, &lo2, &hi2);
        want += 2 * 4 * (2 * n - (hi1 - lo1) - (hi2 - lo2));
    }
    unsigned long long payload = tr.bytes_sent - tr.messages_sent * sizeof(RingHeader);
    if (payload != want || tr.messages_received == 0) {
        fprintf(stderr, "  rank %d: %llu payload bytes sent, want %llu\n", c->rank, payload, want);
        fails++;
    }
    ops->destroy(st);
    ctrl_close(ctrl);
    zmq_ctx_term(z);
    model_free(&m);
    device_close(&dev);
    free(bk);
    free(g);
    return fails ? 1 : 0;
}

static void test_sync_ring_backend(void) {
    SyncArg a = {0, {50, 37, 11}};
    for (int n = 2; n <= 3; n++) {
        a.port = launch_free_port("127.0.0.1");
        check_job(n, rank_sync, &a, 2, 1);
    }
}

/* One rank: every call is a no-op. */
static void test_sync_ring_one_rank(void) {
    Config cfg;
    config_defaults(&cfg);
    Device dev;
    Model m;
    int layers[3] = {6, 5, 3};
    CHECK(device_open(&dev, "cpu", 0, NULL) == 0);
    CHECK(model_init(&m, &dev, layers, 3, 2, 7) == 0);
    Bucket *bk;
    int nb = sync_plan_buckets(m.nparams, 40.0, 40.0, &bk);
    const SyncOps *ops = sync_ring();
    SyncJob job = {.cfg = &cfg, .dev = &dev, .rank = 0, .world = 1, .local_world = 1, .buckets = bk,
                   .nbuckets = nb, .nparams = m.nparams, .timeout = 5};
    void *st;
    char ep[64] = "x";
    CHECK(ops->init(&job, &st, ep, sizeof ep) == 0);
    CHECK(ep[0] == 0);
    char *one[1] = {ep};
    CHECK(ops->connect(st, one, 1) == 0);
    CHECK(ops->broadcast(st, m.params, m.nparams) == 0);
    for (size_t i = 0; i < m.nparams; i++) m.grads[i] = 1.0f;
    for (int b = 0; b < nb; b++) CHECK(ops->start(st, 0, b, m.grads + bk[b].lo, m.grads + bk[b].lo) == 0);
    CHECK(m.grads[0] == 1.0f && m.grads[m.nparams - 1] == 1.0f); /* the sum of one */
    float x[3] = {1, 2, 3};
    CHECK(ops->allreduce(st, x, 3) == 0 && x[2] == 3);
    ops->destroy(st);
    model_free(&m);
    device_close(&dev);
    free(bk);
}

int main(void) {
    RUN(test_chunks_partition);
    RUN(test_ring_exact_1_to_5);
    RUN(test_ring_exact_small_segments);
    RUN(test_lane_sizing);
    RUN(test_ring_small_lane);
    RUN(test_ring_lane_mismatch);
    RUN(test_ring_bitwise_equal_inexact);
    RUN(test_ring_wire_16bit);
    RUN(test_ring_phases);
    RUN(test_ring_pair_exchange);
    RUN(test_ring_stray_dropped);
    RUN(test_ring_transport);
    RUN(test_ring_dead_peer);
    RUN(test_sync_ring_backend);
    RUN(test_sync_ring_one_rank);
    return test_summary("test_ring");
}
