/* test_ps.c - the parameter server: wire header, range slicer, update rules, a server against fake workers, the "ps" back end in threads */
#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/config.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../base/mem.h"
#include "../model/model.h"
#include "../engine/config_check.h"
#include "../engine/sync.h"
#include "../engine/engine.h"
#include "../net/zendpoint.h"
#include "../net/ctrl.h"
#include "../experiments/backends.h"
#include "../ps/ps.h"
#include "../ps/sendq.h"
#include "../ps/server.h"
#include "../ps/shard.h"
#include "../ps/wire.h"
#include "test.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define TOKEN_TEXT "00c0ffee12345678"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd64(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- wire ------------------------------------------------------------------------------------ */

static WireHeader sample_header(void) {
    WireHeader h = wire_header(wire_token(TOKEN_TEXT), WIRE_PUSH);
    h.step = 0x01020304u;
    h.bucket = 7;
    h.offset = 0x1122334455667788ull;
    h.count = 5;
    h.total = 0x0000000100000002ull;
    h.sender = 3;
    h.samples = 96;
    return h;
}

static void test_wire_roundtrip(void) {
    WireHeader h = sample_header(), g;
    unsigned char b[WIRE_HEADER_BYTES];
    wire_encode(&h, b);
    CHECK(b[0] == 'R' && b[1] == 'S' && b[2] == 'P' && b[3] == 'S');
    CHECK(b[16] == 0x04 && b[19] == 0x01); /* little-endian step */
    CHECK(wire_decode(b, sizeof b, &g) == WIRE_OK);
    CHECK(!memcmp(&h, &g, sizeof h) || (h.magic == g.magic && h.version == g.version && h.op == g.op &&
                                        h.token == g.token && h.step == g.step && h.bucket == g.bucket &&
                                        h.offset == g.offset && h.count == g.count && h.total == g.total &&
                                        h.dtype == g.dtype && h.sender == g.sender && h.samples == g.samples));
    CHECK(g.offset == 0x1122334455667788ull && g.total == 0x0000000100000002ull && g.samples == 96);
    CHECK(wire_check(&g, wire_token(TOKEN_TEXT), 1, 5 * sizeof(float)) == WIRE_OK);
    CHECK(wire_token("") != wire_token(TOKEN_TEXT));
    CHECK(wire_token(NULL) == wire_token(""));
    CHECK(!strcmp(wire_op_name(WIRE_PUSH), "push") && !strcmp(wire_op_name(99), "?"));
    for (int op = 1; op < WIRE_NOPS; op++) CHECK(strcmp(wire_op_name(op), "?"));
}

static void test_wire_rejects(void) {
    uint64_t tok = wire_token(TOKEN_TEXT);
    WireHeader h = sample_header(), g;
    unsigned char b[WIRE_HEADER_BYTES + 8];
    wire_encode(&h, b);
    CHECK(wire_decode(b, WIRE_HEADER_BYTES - 1, &g) == WIRE_E_SIZE);
    CHECK(wire_decode(b, WIRE_HEADER_BYTES + 1, &g) == WIRE_E_SIZE);
    CHECK(wire_decode(b, 0, &g) == WIRE_E_SIZE);
    CHECK(wire_decode(NULL, WIRE_HEADER_BYTES, &g) == WIRE_E_SIZE);
    b[0] ^= 1;
    CHECK(wire_decode(b, WIRE_HEADER_BYTES, &g) == WIRE_E_MAGIC);
    b[0] ^= 1;
    WireHeader v = h;
    v.version = WIRE_VERSION + 1;
    wire_encode(&v, b);
    CHECK(wire_decode(b, WIRE_HEADER_BYTES, &g) == WIRE_E_VERSION);
    int bad_ops[] = {0, WIRE_NOPS, 0x7fff, 0xffff};
    for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; i++) {
        v = h;
        v.op = (uint16_t)bad_ops[i];
        wire_encode(&v, b);
        CHECK(wire_decode(b, WIRE_HEADER_BYTES, &g) == WIRE_E_OP);
    }
    v = h;
    v.dtype = 0;
    wire_encode(&v, b);
    CHECK(wire_decode(b, WIRE_HEADER_BYTES, &g) == WIRE_E_DTYPE);
    v.dtype = WIRE_TEXT; /* text is for ABORT only */
    wire_encode(&v, b);
    CHECK(wire_decode(b, WIRE_HEADER_BYTES, &g) == WIRE_E_DTYPE);
    v = wire_header(tok, WIRE_ABORT);
    wire_encode(&v, b);
    CHECK(wire_decode(b, WIRE_HEADER_BYTES, &g) == WIRE_E_DTYPE); /* abort must say text */

    /* token and payload */
    wire_encode(&h, b);
    CHECK(wire_decode(b, WIRE_HEADER_BYTES, &g) == WIRE_OK);
    CHECK(wire_check(&g, tok ^ 1, 1, 20) == WIRE_E_TOKEN);
    CHECK(wire_check(&g, tok, 0, 0) == WIRE_E_PAYLOAD);   /* push without payload */
    CHECK(wire_check(&g, tok, 1, 16) == WIRE_E_PAYLOAD);  /* short */
    CHECK(wire_check(&g, tok, 1, 24) == WIRE_E_PAYLOAD);  /* long */
    g.count = 0;
    CHECK(wire_check(&g, tok, 1, 0) == WIRE_E_PAYLOAD);   /* empty push */
    g.count = (uint64_t)1 << 62;                           /* overflowing count */
    CHECK(wire_check(&g, tok, 1, 0) == WIRE_E_PAYLOAD);
    WireHeader p = wire_header(tok, WIRE_PULL);
    CHECK(wire_check(&p, tok, 0, 0) == WIRE_OK);
    CHECK(wire_check(&p, tok, 1, 4) == WIRE_E_PAYLOAD);   /* pull with a payload */
    p.count = 1;
    CHECK(wire_check(&p, tok, 0, 0) == WIRE_E_PAYLOAD);   /* pull announcing one */
    /* DataParallel's chunks may be empty: count 0 and no frame, nothing else */
    int may[] = {WIRE_BATCH, WIRE_LOGITS, WIRE_DLOGITS};
    for (int i = 0; i < 3; i++) {
        WireHeader q = wire_header(tok, (WireOp)may[i]);
        CHECK(wire_op_has_payload(may[i]) && wire_op_may_be_empty(may[i]));
        CHECK(wire_check(&q, tok, 0, 0) == WIRE_OK);
        CHECK(wire_check(&q, tok, 1, 0) == WIRE_E_PAYLOAD);   /* an empty frame announced as none */
        q.count = 3;
        CHECK(wire_check(&q, tok, 1, 12) == WIRE_OK);
        CHECK(wire_check(&q, tok, 0, 0) == WIRE_E_PAYLOAD);
    }
    for (int op = 1; op < WIRE_NOPS; op++)
        CHECK(!wire_op_may_be_empty(op) || op == WIRE_BATCH || op == WIRE_LOGITS || op == WIRE_DLOGITS);
    for (int e = 0; e < WIRE_NERRS; e++) CHECK(strcmp(wire_strerror((WireErr)e), "?"));
}

/* The 16-bit dtypes: on the parameters' and gradients' ops only, 2 bytes an element; FP8 on
 * pushes only, 1 byte an element and the message's 4-byte scale. */
static void test_wire_dtypes(void) {
    uint64_t tok = wire_token(TOKEN_TEXT);
    CHECK(wire_dtype_bytes(WIRE_F32) == 4 && wire_dtype_bytes(WIRE_BF16) == 2 && wire_dtype_bytes(WIRE_F16) == 2 &&
          wire_dtype_bytes(WIRE_TEXT) == 1 && wire_dtype_bytes(0) == 0 && wire_dtype_bytes(7) == 0 &&
          wire_dtype_bytes(WIRE_E4M3) == 1 && wire_dtype_bytes(WIRE_E5M2) == 1);
    CHECK(wire_dtype_of(CODEC_F32) == WIRE_F32 && wire_dtype_of(CODEC_BF16) == WIRE_BF16 &&
          wire_dtype_of(CODEC_F16) == WIRE_F16 && wire_dtype_of(CODEC_E4M3) == WIRE_E4M3 &&
          wire_dtype_of(CODEC_E5M2) == WIRE_E5M2);
    for (int op = 1; op < WIRE_NOPS; op++) {
        WireHeader h = wire_header(tok, (WireOp)op), g;
        h.dtype = WIRE_E5M2;
        h.count = 5;
        unsigned char b[WIRE_HEADER_BYTES];
        wire_encode(&h, b);
        WireErr e = wire_decode(b, sizeof b, &g);
        CHECK_MSG(op == WIRE_PUSH ? e == WIRE_OK : e == WIRE_E_DTYPE, "%s in E5M2: %s", wire_op_name(op), wire_strerror(e));
        if (op != WIRE_PUSH) continue;
        CHECK(wire_payload_bytes(&g) == 5 + CODEC_HEAD_BYTES && wire_check(&g, tok, 1, 9) == WIRE_OK &&
              wire_check(&g, tok, 1, 5) == WIRE_E_PAYLOAD);
    }
    int coded[] = {WIRE_INIT, WIRE_PUSH, WIRE_PARAMS, WIRE_SUM, WIRE_SUMMED};
    for (int op = 1; op < WIRE_NOPS; op++) {
        int is = 0;
        for (int i = 0; i < 5; i++) is |= op == coded[i];
        int dts[2] = {WIRE_BF16, WIRE_F16};
        for (int i = 0; i < 2; i++) {
            WireHeader h = wire_header(tok, (WireOp)op), g;
            h.dtype = (uint16_t)dts[i];
            h.count = 5;
            unsigned char b[WIRE_HEADER_BYTES];
            wire_encode(&h, b);
            WireErr e = wire_decode(b, sizeof b, &g);
            CHECK_MSG(is ? e == WIRE_OK : e == WIRE_E_DTYPE, "%s in dtype %d: %s", wire_op_name(op), dts[i],
                      wire_strerror(e));
            if (!is) continue;
            CHECK(wire_payload_bytes(&g) == 10);
            CHECK(wire_check(&g, tok, 1, 10) == WIRE_OK);
            CHECK(wire_check(&g, tok, 1, 20) == WIRE_E_PAYLOAD); /* fp32's size */
        }
        CHECK(wire_dtype_allowed(op, WIRE_F32) == (op != WIRE_ABORT));
        CHECK(wire_dtype_allowed(op, WIRE_TEXT) == (op == WIRE_ABORT));
    }
}

/* Random bytes and single-bit flips of a good header: never a crash, never accepted unless
 * the decoded fields are all valid. */
static void test_wire_fuzz(void) {
    uint64_t tok = wire_token(TOKEN_TEXT);
    unsigned char b[WIRE_HEADER_BYTES];
    WireHeader g;
    int accepted = 0;
    for (int i = 0; i < 200000; i++) {
        for (size_t j = 0; j < sizeof b; j++) b[j] = (unsigned char)rnd64();
        size_t len = (size_t)(rnd64() % (WIRE_HEADER_BYTES + 2));
        if (wire_decode(b, len, &g) == WIRE_OK && wire_check(&g, tok, 1, 16) == WIRE_OK) accepted++;
    }
    CHECK(accepted == 0);
    WireHeader h = sample_header();
    int flips_ok = 0;
    for (int bit = 0; bit < WIRE_HEADER_BYTES * 8; bit++) {
        wire_encode(&h, b);
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        if (wire_decode(b, sizeof b, &g) == WIRE_OK && wire_check(&g, tok, 1, 20) == WIRE_OK) flips_ok++;
    }
    /* flips of step, bucket, offset, total, sender, samples decode fine, and three of op's (push
     * becomes init, summed or logits, which carry a payload too): the receiver's state refuses them */
    CHECK_MSG(flips_ok == (4 + 4 + 8 + 8 + 2 + 4) * 8 + 3, "%d", flips_ok);
}

/* ---- shard ------------------------------------------------------------------------------------ */

static void test_shard_ranges(void) {
    size_t totals[] = {1, 2, 3, 7, 10, 100, 101, 1000003};
    for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++)
        for (int K = 1; K <= 9; K++) {
            size_t total = totals[t], next = 0, mn = (size_t)-1, mx = 0;
            for (int s = 0; s < K; s++) {
                ShardRange r = shard_range(total, K, s);
                CHECK_MSG(r.lo == next, "total %zu K %d s %d", total, K, s);
                next = r.hi;
                size_t n = r.hi - r.lo;
                mn = n < mn ? n : mn;
                mx = n > mx ? n : mx;
                for (size_t k = r.lo; k < r.hi; k += (r.hi - r.lo) / 3 + 1) CHECK(shard_of(total, K, k) == s);
                if (r.hi > r.lo) CHECK(shard_of(total, K, r.hi - 1) == s);
            }
            CHECK(next == total);
            CHECK(mx - mn <= 1);
        }
    /* split covers exactly */
    for (int i = 0; i < 2000; i++) {
        size_t total = 1 + rnd64() % 500;
        int K = 1 + (int)(rnd64() % 7);
        size_t lo = rnd64() % total, hi = lo + rnd64() % (total - lo + 1);
        ShardSlice sl[8];
        int n = shard_split(total, K, lo, hi, sl);
        size_t at = lo;
        for (int j = 0; j < n; j++) {
            CHECK(sl[j].off == at && sl[j].count > 0);
            ShardRange r = shard_range(total, K, sl[j].server);
            CHECK(sl[j].off >= r.lo && sl[j].off + sl[j].count <= r.hi);
            if (j) CHECK(sl[j].server > sl[j - 1].server);
            at += sl[j].count;
        }
        CHECK_MSG(at == hi, "total %zu K %d [%zu,%zu) ends at %zu", total, K, lo, hi, at);
    }
    /* chunks as sync_plan_buckets cuts them */
    Bucket *b;
    size_t total = 1000;
    int nb = sync_plan_buckets(total, 300 * sizeof(float), 300 * sizeof(float), &b);
    CHECK(nb == shard_nchunks(total, 300));
    for (int i = 0; i < nb; i++) {
        size_t lo, hi;
        shard_chunk(total, 300, i, &lo, &hi);
        CHECK(lo == b[i].lo && hi == b[i].hi);
    }
    free(b);
}

static void test_shard_plan(void) {
    for (int K = 1; K <= 5; K++) {
        size_t total = 1000;
        Bucket *b;
        int nb = sync_plan_buckets(total, 128 * sizeof(float), 128 * sizeof(float), &b);
        ShardPlan p;
        CHECK(shard_plan(&p, total, K, b, nb) == RS_OK);
        unsigned char *cov = calloc(total, 1);
        int ps = 0;
        for (int i = 0; i < nb; i++)
            for (int j = p.first[i]; j < p.first[i + 1]; j++) {
                CHECK(p.slices[j].bucket == i);
                CHECK(p.slices[j].off >= b[i].lo && p.slices[j].off + p.slices[j].count <= b[i].hi);
                for (size_t k = p.slices[j].off; k < p.slices[j].off + p.slices[j].count; k++) cov[k]++;
            }
        for (size_t k = 0; k < total; k++) CHECK(cov[k] == 1);
        for (int s = 0; s < K; s++) ps += p.per_server[s];
        CHECK(ps == p.nslices);
        free(cov);
        shard_plan_free(&p);
        free(b);
    }
    ShardPlan p;
    Bucket one = {0, 8};
    CHECK(shard_plan(&p, 8, 8, &one, 1) == RS_OK && p.nslices == 8);
    shard_plan_free(&p);
    CHECK(shard_plan(&p, 8, 9, &one, 1) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "--ps-servers 9") != NULL);
    CHECK(shard_plan(&p, 8, 0, &one, 1) == RS_ERR_INPUT);
    Bucket out = {4, 12};
    CHECK(shard_plan(&p, 8, 2, &out, 1) == RS_ERR_INPUT);
}

/* The weighted split (BytePS's, ps/shard.h): even weights give shard_range's ranges; BytePS's
 * partition the keys, each within one key of total w_s / W; split, of and plan agree. */
static void test_shard_weighted(void) {
    size_t totals[] = {1, 2, 3, 7, 10, 100, 101, 9610, 1000003};
    for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++)
        for (int K = 1; K <= 9; K++) {
            ShardWeights w = shard_even(K);
            for (int s = 0; s < K; s++) {
                ShardRange a = shard_range(totals[t], K, s), b = shard_weighted_range(totals[t], &w, s);
                CHECK_MSG(a.lo == b.lo && a.hi == b.hi, "total %zu K %d s %d", totals[t], K, s);
            }
        }
    for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++)
        for (int n = 1; n <= 6; n++)
            for (int k = 0; k <= (n == 1 ? 0 : n); k++) {
                size_t total = totals[t], next = 0;
                ShardWeights w = shard_byteps(n, k);
                CHECK(w.K == (k == n ? k : n + k) && w.lead == (k == n ? 0 : n));
                double W = (double)n * n + (double)k * n - 2.0 * k;
                for (int s = 0; s < w.K; s++) {
                    ShardRange r = shard_weighted_range(total, &w, s);
                    CHECK_MSG(r.lo == next, "total %zu n %d k %d s %d", total, n, k, s);
                    next = r.hi;
                    /* the paper's share: a worker's (n-k)/W, a CPU server's 2(n-1)/W (k = n: 1/n each) */
                    double share = k == n ? 1.0 / n : s < n ? (n - k) / W : 2.0 * (n - 1) / W;
                    double want = (double)total * share, got = (double)(r.hi - r.lo);
                    CHECK_MSG(got > want - 1 && got < want + 1, "total %zu n %d k %d s %d: %g keys, want %g", total, n,
                              k, s, got, want);
                    if (r.hi > r.lo) CHECK(shard_weighted_of(total, &w, r.lo) == s && shard_weighted_of(total, &w, r.hi - 1) == s);
                }
                CHECK_MSG(next == total, "total %zu n %d k %d: ends at %zu", total, n, k, next);
                if (k == 0 || k == n) { /* the sharded and the dedicated ps's ranges */
                    for (int s = 0; s < w.K; s++) {
                        ShardRange a = shard_range(total, w.K, s), b = shard_weighted_range(total, &w, s);
                        CHECK(a.lo == b.lo && a.hi == b.hi);
                    }
                }
            }
    /* n = 3, k = 1: W = 10, each worker 2/10 of the keys, the CPU server 4/10 */
    ShardWeights w31 = shard_byteps(3, 1);
    size_t sizes[4];
    for (int s = 0; s < 4; s++) {
        ShardRange r = shard_weighted_range(9610, &w31, s);
        sizes[s] = r.hi - r.lo;
    }
    CHECK(sizes[0] == 1922 && sizes[1] == 1922 && sizes[2] == 1922 && sizes[3] == 3844);
    /* the remainder goes to the first servers: 13 keys over 2, 2, 2, 4 -> 3, 3, 2, 5 */
    for (int s = 0; s < 4; s++) {
        ShardRange r = shard_weighted_range(13, &w31, s);
        sizes[s] = r.hi - r.lo;
    }
    CHECK_MSG(sizes[0] == 3 && sizes[1] == 3 && sizes[2] == 2 && sizes[3] == 5, "%zu %zu %zu %zu", sizes[0], sizes[1],
              sizes[2], sizes[3]);
    /* split covers exactly, in server order, within the servers' ranges */
    for (int i = 0; i < 2000; i++) {
        size_t total = 1 + rnd64() % 500;
        int n = 2 + (int)(rnd64() % 4), k = (int)(rnd64() % (unsigned)(n + 1));
        ShardWeights w = shard_byteps(n, k);
        size_t lo = rnd64() % total, hi = lo + rnd64() % (total - lo + 1);
        ShardSlice sl[12];
        int m = shard_weighted_split(total, &w, lo, hi, sl);
        size_t at = lo;
        for (int j = 0; j < m; j++) {
            ShardRange r = shard_weighted_range(total, &w, sl[j].server);
            CHECK(sl[j].off == at && sl[j].count > 0 && sl[j].off >= r.lo && sl[j].off + sl[j].count <= r.hi);
            if (j) CHECK(sl[j].server > sl[j - 1].server);
            at += sl[j].count;
        }
        CHECK_MSG(at == hi, "total %zu n %d k %d [%zu,%zu) ends at %zu", total, n, k, lo, hi, at);
    }
    /* the plan: every key once; even weights plan as shard_plan does */
    Bucket *b;
    int nb = sync_plan_buckets(1000, 128 * sizeof(float), 128 * sizeof(float), &b);
    ShardPlan p, q;
    ShardWeights w42 = shard_byteps(4, 2), e3 = shard_even(3);
    CHECK(shard_weighted_plan(&p, 1000, &w42, b, nb) == RS_OK && p.K == 6);
    unsigned char cov[1000] = {0};
    for (int j = 0; j < p.nslices; j++)
        for (size_t x = p.slices[j].off; x < p.slices[j].off + p.slices[j].count; x++) cov[x]++;
    int once = 1;
    for (int x = 0; x < 1000; x++) once &= cov[x] == 1;
    CHECK(once);
    shard_plan_free(&p);
    CHECK(shard_weighted_plan(&p, 1000, &e3, b, nb) == RS_OK && shard_plan(&q, 1000, 3, b, nb) == RS_OK);
    CHECK(p.nslices == q.nslices && !memcmp(p.slices, q.slices, (size_t)p.nslices * sizeof *p.slices));
    shard_plan_free(&p);
    shard_plan_free(&q);
    free(b);
    /* BytePS's plan: every bucket split by the weights, each piece within one key of its share */
    nb = sync_plan_buckets(1000, 128 * sizeof(float), 128 * sizeof(float), &b);
    CHECK(shard_bucket_plan(&p, 1000, &w42, b, nb) == RS_OK && p.K == 6);
    memset(cov, 0, sizeof cov);
    for (int i = 0; i < nb; i++) {
        size_t m = b[i].hi - b[i].lo, at = b[i].lo;
        CHECK(p.first[i + 1] - p.first[i] == 6); /* 104 or 128 keys: a piece on every server */
        for (int j = p.first[i]; j < p.first[i + 1]; j++) {
            const ShardSlice *sl = &p.slices[j];
            double share = (double)m * (sl->server < 4 ? 2.0 : 6.0) / 20.0;
            CHECK(sl->bucket == i && sl->off == at && (double)sl->count > share - 1 && (double)sl->count < share + 1);
            for (size_t x = sl->off; x < sl->off + sl->count; x++) cov[x]++;
            at += sl->count;
        }
        CHECK(at == b[i].hi);
    }
    once = 1;
    for (int x = 0; x < 1000; x++) once &= cov[x] == 1;
    CHECK(once);
    shard_plan_free(&p);
    free(b);
    Bucket tiny = {0, 3}; /* 3 keys over 6 servers: three hold none */
    CHECK(shard_bucket_plan(&p, 3, &w42, &tiny, 1) == RS_ERR_INPUT && strstr(rs_errmsg(), "would hold no key"));
    /* too few keys: a server with none is refused, named */
    Bucket one = {0, 5};
    CHECK(shard_weighted_plan(&p, 5, &w42, &one, 1) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "--sync byteps: server") && strstr(rs_errmsg(), "would hold no key"), "%s", rs_errmsg());
    CHECK(shard_weighted_check(6, &w42) == RS_OK);
}

/* byteps's cost model: k = 0 is the sharded ps's, k = n the dedicated ps's with n servers (the
 * same runs), a push and a pull round each as long as the busiest link; k outside 0..n refused. */

/* Partitions cut every bucket in key order, at most keys keys each, halved until every server can
 * hold one; the striped plan gives each partition wholly to one server, round robin under equal
 * weights (consecutive partitions on different servers), every server's keys within one partition
 * of every other's, and under BytePS's weights within one partition of its share. */
static void test_shard_partitions(void) {
    Bucket b[3] = {{700, 1000}, {100, 700}, {0, 100}}; /* the engine's order: last layer first */
    Bucket *parts;
    int *first;
    size_t used;
    int np = shard_partition(b, 3, 128, 4, &parts, &first, &used);
    CHECK(np == 3 + 5 + 1 && used == 128);
    CHECK(first[0] == 0 && first[1] == 3 && first[2] == 8 && first[3] == 9);
    size_t covered = 0;
    for (int i = 0; i < 3; i++)
        for (int p = first[i]; p < first[i + 1]; p++) {
            CHECK(parts[p].lo >= b[i].lo && parts[p].hi <= b[i].hi && parts[p].hi - parts[p].lo <= 128);
            CHECK(p == first[i] ? parts[p].lo == b[i].lo : parts[p].lo == parts[p - 1].hi); /* in key order */
            covered += parts[p].hi - parts[p].lo;
        }
    CHECK(covered == 1000);
    ShardWeights even = shard_even(4);
    ShardPlan pl;
    CHECK(shard_stripe_plan(&pl, 1000, &even, parts, np) == 0);
    CHECK(pl.nslices == np && pl.nbuckets == np);
    size_t keys[4] = {0};
    for (int j = 0; j < np; j++) {
        CHECK(pl.slices[j].bucket == j && pl.first[j] == j && pl.slices[j].off == parts[j].lo);
        keys[pl.slices[j].server] += pl.slices[j].count;
    }
    CHECK(pl.slices[0].server == 0 && pl.slices[1].server == 1 && pl.slices[2].server == 2); /* round robin */
    size_t lo = keys[0], hi = keys[0];
    for (int s = 1; s < 4; s++) lo = keys[s] < lo ? keys[s] : lo, hi = keys[s] > hi ? keys[s] : hi;
    CHECK_MSG(hi - lo <= 128, "servers' keys %zu..%zu differ by more than one partition", lo, hi);
    /* the same arguments, the same plan: what workers and servers compute alike */
    ShardPlan again;
    CHECK(shard_stripe_plan(&again, 1000, &even, parts, np) == 0);
    CHECK(memcmp(again.slices, pl.slices, (size_t)np * sizeof *pl.slices) == 0);
    shard_plan_free(&again);
    shard_plan_free(&pl);
    /* BytePS's weights at n = 4, k = 2: shards 2 each, CPU servers 6 each, out of 20 */
    ShardWeights bw = shard_byteps(4, 2);
    Bucket whole = {0, 100000};
    Bucket *p2;
    int *f2;
    int n2 = shard_partition(&whole, 1, 1000, bw.K, &p2, &f2, &used);
    CHECK(n2 == 100 && shard_stripe_plan(&pl, 100000, &bw, p2, n2) == 0);
    size_t k6[6] = {0};
    for (int j = 0; j < n2; j++) k6[pl.slices[j].server] += pl.slices[j].count;
    for (int s = 0; s < 6; s++) {
        double share = 100000.0 * (s < 4 ? 2 : 6) / 20;
        CHECK_MSG(fabs((double)k6[s] - share) <= 1000, "server %d holds %zu keys, its share %g", s, k6[s], share);
    }
    shard_plan_free(&pl);
    free(p2), free(f2);
    /* too few partitions for the servers: halved until each server has one */
    Bucket small = {0, 10};
    CHECK(shard_partition(&small, 1, 1000, 4, &p2, &f2, &used) == 4 && used == 3);
    free(p2), free(f2);
    /* more servers than keys: a server with no partition is refused, naming it */
    CHECK(shard_partition(&small, 1, 1000, 12, &p2, &f2, &used) == 10 && used == 1);
    ShardWeights e12 = shard_even(12);
    CHECK(shard_stripe_plan(&pl, 10, &e12, p2, 10) == RS_ERR_INPUT && strstr(rs_errmsg(), "server 10 of 12"));
    free(p2), free(f2);
    free(parts), free(first);
}

/* A worker's pushes held behind its link's credit: a reply its process books meanwhile goes on
 * the interface before the queued pushes (its stamp, the start on the wire, comes first), and
 * without a link nothing is held. An order, not a timing: every stamp is a booking. */
typedef struct {
    double stamp[8];
    int slice[8], n;
} SendLog;

static int test_sendq_send(void *arg, int slice, const void *data, size_t bytes) {
    SendLog *l = arg;
    (void)data;
    l->slice[l->n] = slice;
    l->stamp[l->n++] = link_send(bytes, 0);
    return RS_OK;
}

static void test_sendq_order(void) {
    LinkSpec ln;
    CHECK(link_parse("1MB/s", &ln) == 0); /* 100 kB take 0.1 s: no wake-up can let the queue drain */
    link_set(&ln);
    PsSendQ q;
    CHECK(sendq_init(&q, 8) == 0);
    SendLog log = {.n = 0};
    static char buf[100000];
    for (int j = 0; j < 4; j++) CHECK(sendq_put(&q, j, buf, sizeof buf) == 0);
    double credit = 0.01;
    CHECK(sendq_flush(&q, credit, test_sendq_send, &log) == 0);
    CHECK_MSG(log.n == 1 && sendq_waiting(&q) == 3, "%d sent, %d waiting: one push goes, three wait", log.n,
              sendq_waiting(&q));
    CHECK(sendq_due_in(&q, credit) > 0.05);  /* the head waits for most of the first push's 0.1 s */
    double reply = link_send(sizeof buf, 0);    /* the process's server answers meanwhile */
    CHECK(reply < log.stamp[0] + 0.1 + 1e-6); /* right behind the push on the wire, not behind the queue */
    link_set(NULL); /* no link: the rest go at once, in order */
    CHECK(sendq_flush(&q, 0, test_sendq_send, &log) == 0 && log.n == 4 && sendq_waiting(&q) == 0);
    for (int j = 0; j < 4; j++) CHECK(log.slice[j] == j);
    CHECK(sendq_put(&q, 9, buf, 1) == 0 && sendq_waiting(&q) == 1); /* emptied: starts over at the front */
    for (int j = 0; j < 7; j++) CHECK(sendq_put(&q, j, buf, 1) == 0);
    CHECK(sendq_put(&q, 8, buf, 1) == RS_ERR_RUNTIME); /* more than a step's slices */
    sendq_free(&q);
    /* the order on a link: with the reply booked between, pushes 2..4 start after it */
    link_set(&ln);
    CHECK(sendq_init(&q, 8) == 0);
    log.n = 0;
    for (int j = 0; j < 4; j++) CHECK(sendq_put(&q, j, buf, sizeof buf) == 0);
    CHECK(sendq_flush(&q, credit, test_sendq_send, &log) == 0 && log.n == 1);
    reply = link_send(sizeof buf, 0);
    CHECK(sendq_flush(&q, 1e9, test_sendq_send, &log) == 0 && log.n == 4); /* credit given: all go, after it */
    for (int j = 1; j < 4; j++) CHECK_MSG(log.stamp[j] > reply, "push %d starts at %.3f, before the reply's %.3f", j,
                                          log.stamp[j], reply);
    sendq_free(&q);
    link_set(NULL);
}

static void test_byteps_cost(void) {
    const Backend *bp = backend_find("byteps");
    CHECK(bp && !strcmp(bp->family, "ps") && bp->arch == ARCH_BYTEPS && arch_is_server(ARCH_BYTEPS));
    double a, b, a2, b2, n = 1e6;
    for (int N = 2; N <= 6; N++) {
        CHECK(arch_cost(ARCH_BYTEPS, 0, N, 0, 0, n, &a, &b) == 0 && arch_cost(ARCH_PS_SHARDED, 1, N, 0, 0, n, &a2, &b2) == 0);
        CHECK_MSG(a == 2 && fabs(b - b2) < 1e-6 * b2, "N %d k 0: %g, sharded %g", N, b, b2);
        CHECK(arch_cost(ARCH_BYTEPS, N, N, 0, 0, n, &a, &b) == 0 && arch_cost(ARCH_PS_DEDICATED, N, N, 0, 0, n, &a2, &b2) == 0);
        CHECK_MSG(a == a2 && fabs(b - b2) < 1e-6 * b2, "N %d k N: %g, dedicated %g", N, b, b2);
        CHECK(arch_cost(ARCH_BYTEPS, N + 1, N, 0, 0, n, &a, &b) == -1 && arch_cost(ARCH_BYTEPS, -1, N, 0, 0, n, &a, &b) == -1);
    }
    /* n = 3, k = 1: y = 2/10, x = 4/10; the CPU server's 3 x 0.4 n each round */
    CHECK(arch_cost(ARCH_BYTEPS, 1, 3, 0, 0, n, &a, &b) == 0 && fabs(b - 2 * 1.2 * n) < 1e-6 * n);
    CHECK(arch_cost(ARCH_BYTEPS, 0, 1, 0, 0, n, &a, &b) == 0 && a == 0 && b == 0); /* one worker: nothing moves */
    CHECK(arch_cost(ARCH_BYTEPS, 1, 1, 0, 0, n, &a, &b) == -1);
    /* pipelined (partitions): the rounds overlap and the bytes term is BytePS's Table 1 line,
     * 2N(N-1)/W n for byteps, max(n, N n / K) dedicated, (N-1) n colocated, the ring's sharded */
    for (int N = 2; N <= 6; N++)
        for (int k = 0; k <= N; k++) {
            double W = N * N + k * N - 2 * k;
            CHECK(arch_cost(ARCH_BYTEPS, k, N, 0, 1, n, &a, &b) == 0);
            CHECK_MSG(a == 2 && fabs(b - 2.0 * N * (N - 1) / W * n) < 1e-6 * n, "byteps N %d k %d: %g, line %g", N, k, b,
                      2.0 * N * (N - 1) / W * n);
            if (k == 0) continue;
            CHECK(arch_cost(ARCH_PS_DEDICATED, k, N, 0, 1, n, &a, &b) == 0);
            CHECK_MSG(fabs(b - fmax(1.0, (double)N / k) * n) < 1e-6 * n, "dedicated N %d K %d: %g", N, k, b);
        }
    CHECK(arch_cost(ARCH_PS_COLOCATED, 1, 4, 0, 1, n, &a, &b) == 0 && fabs(b - 3 * n) < 1e-6 * n && a == 6);
    CHECK(arch_cost(ARCH_PS_SHARDED, 1, 4, 0, 1, n, &a, &b) == 0 && arch_cost(ARCH_PS_SHARDED, 1, 4, 0, 0, n, &a2, &b2) == 0 && b == b2);
}

/* ---- rules ------------------------------------------------------------------------------------- */

static void test_rules(void) {
    Device dev;
    CHECK(device_open(&dev, "cpu", 0, NULL) == RS_OK);
    Config cfg;
    config_defaults(&cfg);
    cfg.weight_decay = 0.01;
    float p[4] = {1, -2, 3, 0.5f}, m[4] = {0.1f, 0, -0.2f, 0}, s[4] = {4, 8, -12, 0};
    float rp[4], rm[4];
    memcpy(rp, p, sizeof p);
    memcpy(rm, m, sizeof m);
    kernels_cpu()->sgd_step(dev.kctx, rp, s, rm, 4, (float)cfg.lr, (float)cfg.momentum, (float)cfg.weight_decay,
                            1.0f / 4.0f);
    PsUpdate u = {.dev = &dev, .cfg = &cfg, .params = p, .mom = m, .sum = s, .n = 4, .global_samples = 4};
    CHECK(ps_rule_sgd(&u) == p);
    CHECK(!memcmp(p, rp, sizeof p) && !memcmp(m, rm, sizeof m));
    CHECK(ps_rule_sum(&u) == s);
    device_close(&dev);
}

/* ---- a server against fake workers -------------------------------------------------------------- */

typedef struct {
    void *sock;
    int rank;
} Fake;

static void fake_open(Fake *f, void *ctx, const char *ep, int rank, const char *identity) {
    char id[16];
    f->rank = rank;
    f->sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0, rcv = 3000, snd = 3000; /* a fake that cannot reach the server fails, never hangs */
    zmq_setsockopt(f->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(f->sock, ZMQ_RCVTIMEO, &rcv, sizeof rcv);
    zmq_setsockopt(f->sock, ZMQ_SNDTIMEO, &snd, sizeof snd);
    if (identity) zmq_setsockopt(f->sock, ZMQ_ROUTING_ID, identity, strlen(identity));
    else if (rank >= 0) zmq_setsockopt(f->sock, ZMQ_ROUTING_ID, id, ps_identity(rank, id, sizeof id));
    const char *via;
    CHECK_MSG(zep_connect(f->sock, ep, "the server", &via) == RS_OK, "%s", rs_errmsg()); /* as a worker would */
}

static void fake_send(Fake *f, uint64_t token, int op, uint32_t step, int bucket, size_t off, size_t count,
                      size_t total, const float *data) {
    WireHeader h = wire_header(token, (WireOp)op);
    h.step = step;
    h.bucket = (uint32_t)bucket;
    h.offset = off;
    h.count = data ? count : 0;
    h.total = total;
    h.sender = (uint16_t)(f->rank < 0 ? 0 : f->rank);
    CHECK(ps_send(f->sock, NULL, 0, &h, data, data ? count * sizeof(float) : 0, NULL, 0, 0, NULL, NULL) == 0);
}

/* Receives one reply: its header, and its payload into out (room for cap floats). 0 on timeout. */
static int fake_recv(Fake *f, WireHeader *h, float *out, size_t cap) {
    MsgIn m;
    if (msg_recv(f->sock, &m, 0, 0) < 0) return 0;
    int ok = m.n >= 1 && wire_decode(msg_frame_data(&m.part[0]), msg_frame_size(&m.part[0]), h) == WIRE_OK;
    if (ok && m.n == 2 && out) {
        size_t n = msg_frame_size(&m.part[1]);
        memcpy(out, msg_frame_data(&m.part[1]), n < cap * sizeof(float) ? n : cap * sizeof(float));
    }
    msg_close(&m);
    return ok;
}

/* Waits up to seconds for the server's thread to fail; 1 when it has. */
static int server_wait_end(PsServer *s, double seconds) {
    double t0 = clock_now();
    while (clock_now() - t0 < seconds) {
        if (ps_server_status(s, NULL, 0)) return 1;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void test_server_fake_workers(void) {
    void *ctx = zmq_ctx_new();
    Device dev;
    CHECK(device_open(&dev, "cpu", 0, NULL) == RS_OK);
    Config cfg;
    config_defaults(&cfg);
    cfg.bucket_mb = 4.0 * sizeof(float) / 1048576.0; /* allreduce chunks of 4 */
    const int N = 3;
    const size_t P = 10;
    Bucket bk[2] = {{5, 10}, {0, 5}};
    uint64_t tok = wire_token(TOKEN_TEXT);
    PsServerArgs a = {.cfg = &cfg, .dev = &dev, .zctx = ctx, .addr = "127.0.0.1", .token = TOKEN_TEXT, .id = 0,
                      .nservers = 1, .nworkers = N, .nparams = P, .buckets = bk, .nbuckets = 2, .colocated = 0,
                      .timeout = 10};
    PsServer *s;
    CHECK(ps_server_create(&s, &a) == RS_OK);
    CHECK(!strncmp(ps_server_endpoint(s), "tcp://127.0.0.1:", 16));
    CHECK(ps_server_start(s) == RS_OK);
    const char *ep = ps_server_endpoint(s);
    Fake w[3], stranger, anon;
    for (int r = 0; r < N; r++) fake_open(&w[r], ctx, ep, r, NULL);
    fake_open(&stranger, ctx, ep, 7, "w7");
    fake_open(&anon, ctx, ep, -1, NULL);

    float p0[10], got[10];
    for (size_t i = 0; i < P; i++) p0[i] = (float)i - 4.5f;
    /* rank 1 pulls before rank 0's parameters are in: answered once they are */
    fake_send(&w[1], tok, WIRE_PULL, WIRE_STEP_INIT, 0, 0, 0, P, NULL);
    fake_send(&w[0], tok, WIRE_INIT, WIRE_STEP_INIT, 0, 5, 5, P, p0 + 5);
    fake_send(&w[0], tok, WIRE_INIT, WIRE_STEP_INIT, 1, 0, 5, P, p0);
    memset(got, 0, sizeof got);
    for (int i = 0; i < 2; i++) {
        WireHeader h;
        float buf[5];
        CHECK(fake_recv(&w[1], &h, buf, 5));
        CHECK(h.op == WIRE_PARAMS && h.step == WIRE_STEP_INIT && h.count == 5);
        if (h.count == 5 && h.offset <= 5) memcpy(got + h.offset, buf, sizeof buf);
    }
    CHECK(!memcmp(got, p0, sizeof p0));

    /* refused: garbage, a stranger, wrong token, wrong step, a duplicate, a wrong slice */
    SyncTraffic t0, t1;
    ps_server_traffic(s, &t0);
    zmq_send(anon.sock, "garbage", 7, 0);
    zmq_send(anon.sock, "x", 1, ZMQ_SNDMORE);
    zmq_send(anon.sock, "y", 1, ZMQ_SNDMORE);
    zmq_send(anon.sock, "z", 1, ZMQ_SNDMORE);
    zmq_send(anon.sock, "w", 1, 0);
    float g[3][10];
    for (int r = 0; r < N; r++)
        for (size_t i = 0; i < P; i++) g[r][i] = (float)((r + 1) * (int)(i + 1));
    fake_send(&stranger, tok, WIRE_PUSH, 0, 0, 5, 5, P, g[0] + 5);
    fake_send(&w[2], tok ^ 0x10, WIRE_PUSH, 0, 0, 5, 5, P, g[2] + 5);
    fake_send(&w[2], tok, WIRE_PUSH, 3, 0, 5, 5, P, g[2] + 5);  /* step 3, expected 0 */
    fake_send(&w[2], tok, WIRE_PUSH, 0, 0, 4, 6, P, g[2] + 4);  /* not this bucket's slice */
    fake_send(&w[2], tok, WIRE_PUSH, 0, 0, 5, 5, 11, g[2] + 5); /* another parameter count */
    fake_send(&w[2], tok, WIRE_STEP, 0, 0, 0, 0, P, NULL);      /* step size not from rank 0 */
    {
        WireHeader h = wire_header(tok, WIRE_PUSH); /* sender field lies about the rank */
        h.bucket = 0;
        h.offset = 5;
        h.count = 5;
        h.total = P;
        h.sender = 0;
        CHECK(ps_send(w[2].sock, NULL, 0, &h, g[2] + 5, 5 * sizeof(float), NULL, 0, 0, NULL, NULL) == 0);
    }
    int want_drops = 9;
    /* the step: everyone pushes both buckets, rank 2 twice; then rank 0 says 3 samples */
    for (int r = 0; r < N; r++) {
        fake_send(&w[r], tok, WIRE_PUSH, 0, 0, 5, 5, P, g[r] + 5);
        fake_send(&w[r], tok, WIRE_PUSH, 0, 1, 0, 5, P, g[r]);
    }
    fake_send(&w[2], tok, WIRE_PUSH, 0, 1, 0, 5, P, g[2]);
    want_drops++;
    fake_send(&w[0], tok, WIRE_STEP, 0, 0, 0, 0, P, NULL);
    {
        WireHeader h = wire_header(tok, WIRE_STEP);
        h.samples = 3;
        h.total = P;
        CHECK(ps_send(w[0].sock, NULL, 0, &h, NULL, 0, NULL, 0, 0, NULL, NULL) == 0); /* a second step size: refused */
    }
    /* step 0's size came as 0 samples (fake_send leaves the field 0): the update used scale 0 */
    float sum[10], r0[10], m0[10] = {0};
    for (size_t i = 0; i < P; i++) sum[i] = (g[0][i] + g[1][i]) + g[2][i];
    memcpy(r0, p0, sizeof r0);
    kernels_cpu()->sgd_step(dev.kctx, r0, sum, m0, P, (float)cfg.lr, (float)cfg.momentum, (float)cfg.weight_decay,
                            0.0f);
    for (int r = 0; r < N; r++) {
        memset(got, 0, sizeof got);
        for (int i = 0; i < 2; i++) {
            WireHeader h;
            float buf[5];
            CHECK(fake_recv(&w[r], &h, buf, 5));
            CHECK(h.op == WIRE_PARAMS && h.step == 0 && h.count == 5);
            if (h.count == 5 && h.offset <= 5) memcpy(got + h.offset, buf, sizeof buf);
        }
        CHECK_MSG(!memcmp(got, r0, sizeof r0), "rank %d: got[0] %g want %g", r, got[0], r0[0]);
    }

    /* step 1 with samples 3 from rank 0: check against the reference chain */
    for (int r = 0; r < N; r++) {
        fake_send(&w[r], tok, WIRE_PUSH, 1, 1, 0, 5, P, g[r]);
        fake_send(&w[r], tok, WIRE_PUSH, 1, 0, 5, 5, P, g[r] + 5);
    }
    {
        WireHeader h = wire_header(tok, WIRE_STEP);
        h.step = 1;
        h.samples = 3;
        h.total = P;
        CHECK(ps_send(w[0].sock, NULL, 0, &h, NULL, 0, NULL, 0, 0, NULL, NULL) == 0);
    }
    kernels_cpu()->sgd_step(dev.kctx, r0, sum, m0, P, (float)cfg.lr, (float)cfg.momentum, (float)cfg.weight_decay,
                            1.0f / 3.0f);
    for (int r = 0; r < N; r++) {
        memset(got, 0, sizeof got);
        for (int i = 0; i < 2; i++) {
            WireHeader h;
            float buf[5];
            CHECK(fake_recv(&w[r], &h, buf, 5));
            CHECK(h.op == WIRE_PARAMS && h.step == 1);
            if (h.count == 5 && h.offset <= 5) memcpy(got + h.offset, buf, sizeof buf);
        }
        CHECK_MSG(!memcmp(got, r0, sizeof r0), "rank %d: got[0] %g want %g", r, got[0], r0[0]);
    }

    /* an allreduce of 7 (chunks [3,7) and [0,3)): exact sum of every rank's contribution */
    float x[3][7], y[7];
    for (int r = 0; r < N; r++)
        for (int i = 0; i < 7; i++) x[r][i] = (float)(100 * r + i);
    for (int r = 0; r < N; r++) {
        fake_send(&w[r], tok, WIRE_SUM, 0, 0, 3, 4, 7, x[r] + 3);
        fake_send(&w[r], tok, WIRE_SUM, 0, 1, 0, 3, 7, x[r]);
    }
    for (int r = 0; r < N; r++) {
        memset(y, 0, sizeof y);
        for (int i = 0; i < 2; i++) {
            WireHeader h;
            float buf[4];
            CHECK(fake_recv(&w[r], &h, buf, 4));
            CHECK(h.op == WIRE_SUMMED && h.step == 0 && h.total == 7);
            if (h.offset + h.count <= 7) memcpy(y + h.offset, buf, h.count * sizeof(float));
        }
        for (int i = 0; i < 7; i++) CHECK(y[i] == (float)(300 + 3 * i));
    }
    ps_server_traffic(s, &t1);
    CHECK_MSG(t1.dropped - t0.dropped == (unsigned long long)want_drops + 1, "dropped %llu, want %d",
              t1.dropped - t0.dropped, want_drops + 1);
    CHECK(ps_server_status(s, NULL, 0) == 0);

    /* goodbyes end the loop */
    for (int r = 0; r < N; r++) fake_send(&w[r], tok, WIRE_BYE, 0, 0, 0, 0, P, NULL);
    double busy;
    long long steps;
    SyncTraffic t;
    for (int i = 0; i < 1000; i++) {
        ps_server_traffic(s, &t);
        if (t.messages_received == t1.messages_received + 3) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    ps_server_busy(s, &busy, &steps);
    CHECK(steps == 2);
    /* traffic: headers of 56 bytes; every accepted message counted (no colocated rank here) */
    ps_server_traffic(s, &t);
    unsigned long long H = WIRE_HEADER_BYTES;
    unsigned long long recv_msgs = 1 + 2 /* pull, init */ + 6 + 1 + 6 + 1 /* steps 0, 1 */ + 6 /* sum */ + 3 /* bye */;
    unsigned long long recv_bytes = recv_msgs * H + 10 * 4 /* init */ + 2 * 3 * 10 * 4 + 3 * 7 * 4;
    unsigned long long sent_msgs = 2 + 2 * 2 * 3 + 2 * 3;
    unsigned long long sent_bytes = sent_msgs * H + 10 * 4 + 2 * 3 * 10 * 4 + 3 * 7 * 4;
    CHECK_MSG(t.messages_received == recv_msgs && t.bytes_received == recv_bytes, "received %llu msgs %llu bytes",
              t.messages_received, t.bytes_received);
    CHECK_MSG(t.messages_sent == sent_msgs && t.bytes_sent == sent_bytes, "sent %llu msgs %llu bytes",
              t.messages_sent, t.bytes_sent);
    MemStats ms;
    mem_snapshot(&ms);
    CHECK(ms.cur[MEM_SERVER] >= (N + 3) * P * sizeof(float));
    for (int r = 0; r < N; r++) zmq_close(w[r].sock);
    zmq_close(stranger.sock);
    zmq_close(anon.sock);
    ps_server_destroy(s);
    mem_snapshot(&ms);
    CHECK(ms.cur[MEM_SERVER] == 0);
    zmq_ctx_term(ctx);
    device_close(&dev);
}

/* A push that overtakes rank 0's initial parameters (DataParallel's others train on rank 0's
 * replicate, which travels on another pipe than its INIT) is kept and applied once they are in;
 * beyond one step's pushes from every worker, an early push is refused. */
static void test_server_early_push(void) {
    void *ctx = zmq_ctx_new();
    Device dev;
    CHECK(device_open(&dev, "cpu", 0, NULL) == RS_OK);
    Config cfg;
    config_defaults(&cfg);
    const int N = 2;
    const size_t P = 6;
    Bucket bk[1] = {{0, 6}};
    uint64_t tok = wire_token(TOKEN_TEXT);
    PsServerArgs a = {.cfg = &cfg, .dev = &dev, .zctx = ctx, .addr = "127.0.0.1", .token = TOKEN_TEXT, .id = 0,
                      .nservers = 1, .nworkers = N, .nparams = P, .buckets = bk, .nbuckets = 1, .timeout = 10};
    PsServer *s;
    CHECK(ps_server_create(&s, &a) == RS_OK);
    CHECK(ps_server_start(s) == RS_OK);
    Fake w[2];
    for (int r = 0; r < N; r++) fake_open(&w[r], ctx, ps_server_endpoint(s), r, NULL);
    float p0[6], g[2][6], got[6];
    for (size_t i = 0; i < P; i++) {
        p0[i] = (float)i * 0.5f - 1.0f;
        g[0][i] = (float)(i + 1);
        g[1][i] = (float)(2 * i + 3);
    }
    /* rank 1's push, then (once the server has surely taken it) rank 0's start and step */
    fake_send(&w[1], tok, WIRE_PUSH, 0, 0, 0, P, P, g[1]);
    {
        struct timespec ts = {0, 50000000}; /* kept pushes are not counted: 50 ms for the server to take it */
        nanosleep(&ts, NULL);
    }
    SyncTraffic t0;
    ps_server_traffic(s, &t0);
    CHECK_MSG(t0.dropped == 0, "an early push was dropped (%llu)", t0.dropped);
    fake_send(&w[0], tok, WIRE_INIT, WIRE_STEP_INIT, 0, 0, P, P, p0);
    fake_send(&w[0], tok, WIRE_PUSH, 0, 0, 0, P, P, g[0]);
    {
        WireHeader h = wire_header(tok, WIRE_STEP);
        h.samples = 2;
        h.total = P;
        CHECK(ps_send(w[0].sock, NULL, 0, &h, NULL, 0, NULL, 0, 0, NULL, NULL) == 0);
    }
    float sum[6], want[6], m0[6] = {0};
    for (size_t i = 0; i < P; i++) sum[i] = g[0][i] + g[1][i];
    memcpy(want, p0, sizeof want);
    kernels_cpu()->sgd_step(dev.kctx, want, sum, m0, P, (float)cfg.lr, (float)cfg.momentum, (float)cfg.weight_decay,
                            0.5f);
    for (int r = 0; r < N; r++) {
        WireHeader h;
        memset(got, 0, sizeof got);
        CHECK_MSG(fake_recv(&w[r], &h, got, P), "rank %d: no reply to step 0", r);
        CHECK(h.op == WIRE_PARAMS && h.step == 0 && h.count == P);
        CHECK_MSG(!memcmp(got, want, sizeof want), "rank %d: got[0] %g want %g", r, got[0], want[0]);
    }
    CHECK(ps_server_status(s, NULL, 0) == 0);
    for (int r = 0; r < N; r++) zmq_close(w[r].sock);
    ps_server_destroy(s);

    /* a fresh server: three early pushes where one step holds two; the third is refused */
    CHECK(ps_server_create(&s, &a) == RS_OK);
    CHECK(ps_server_start(s) == RS_OK);
    for (int r = 0; r < N; r++) fake_open(&w[r], ctx, ps_server_endpoint(s), r, NULL);
    for (int k = 0; k < 3; k++) fake_send(&w[1], tok, WIRE_PUSH, 0, 0, 0, P, P, g[1]);
    SyncTraffic t;
    for (int i = 0; i < 1500; i++) {
        ps_server_traffic(s, &t);
        if (t.dropped >= 1) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(t.dropped == 1, "dropped %llu early pushes, want 1", t.dropped);
    for (int r = 0; r < N; r++) zmq_close(w[r].sock);
    ps_server_destroy(s); /* frees what it kept */
    MemStats ms;
    mem_snapshot(&ms);
    CHECK(ms.cur[MEM_SERVER] == 0);
    zmq_ctx_term(ctx);
    device_close(&dev);
}

/* Sends op's count elements of data encoded with codec c (the header says the wire's dtype). */
static void fake_send_coded(Fake *f, uint64_t token, int op, uint32_t step, int bucket, size_t off, size_t count,
                            size_t total, const float *data, const Codec *c, uint32_t samples) {
    unsigned char enc[64];
    WireHeader h = wire_header(token, (WireOp)op);
    h.step = step;
    h.bucket = (uint32_t)bucket;
    h.offset = off;
    h.count = count;
    h.total = total;
    h.samples = samples;
    h.sender = (uint16_t)f->rank;
    h.dtype = (uint16_t)wire_dtype_of(c->type);
    codec_encode(c, data, enc, count);
    CHECK(ps_send(f->sock, NULL, 0, &h, enc, count * codec_elem_bytes(c->type), NULL, 0, 0, NULL, NULL) == 0);
}

/* Receives one reply and decodes its payload with c into out + its offset (room for cap):
 * 1, or 0 on timeout, a payload of another dtype or size, or keys past cap. */
static int fake_recv_coded(Fake *f, WireHeader *h, float *out, size_t cap, const Codec *c) {
    MsgIn m;
    if (msg_recv(f->sock, &m, 0, 0) < 0) return 0;
    int ok = m.n == 2 && wire_decode(msg_frame_data(&m.part[0]), msg_frame_size(&m.part[0]), h) == WIRE_OK &&
             h->dtype == wire_dtype_of(c->type) && h->offset + h->count <= cap &&
             msg_frame_size(&m.part[1]) == h->count * codec_elem_bytes(c->type);
    if (ok) codec_decode(c, msg_frame_data(&m.part[1]), out + h->offset, (size_t)h->count);
    msg_close(&m);
    return ok;
}

/* A server on a 16-bit wire against fake workers: the start in fp32, pushes and sums decoded
 * and summed in fp32, replies rounded once; 56 + 2 bytes an element on the wire; a push in
 * another dtype dropped. wire "fp16" at scale 1 and 1024: a gradient of 1e-8 lost and kept. */
static void server_wire_round(const char *wire, double loss_scale, float tiny, float *tiny_update) {
    void *ctx = zmq_ctx_new();
    Device dev;
    CHECK(device_open(&dev, "cpu", 0, NULL) == RS_OK);
    Config cfg;
    config_defaults(&cfg);
    snprintf(cfg.wire, sizeof cfg.wire, "%s", wire);
    cfg.loss_scale = loss_scale;
    cfg.momentum = 0;
    cfg.weight_decay = 0;
    if (tiny != 0) cfg.lr = 1000; /* the update of a tiny gradient, large enough for fp16 to show */
    const int N = 2;
    const size_t P = 6;
    Bucket bk = {0, P};
    uint64_t tok = wire_token(TOKEN_TEXT);
    Codec gc = codec_from_options(cfg.wire, cfg.loss_scale), pc = codec_make(gc.type, 1);
    Codec f32 = codec_make(CODEC_F32, 1);
    PsServerArgs a = {.cfg = &cfg, .dev = &dev, .zctx = ctx, .addr = "127.0.0.1", .token = TOKEN_TEXT, .id = 0,
                      .nservers = 1, .nworkers = N, .nparams = P, .buckets = &bk, .nbuckets = 1, .timeout = 10};
    PsServer *s;
    CHECK(ps_server_create(&s, &a) == RS_OK);
    CHECK(ps_server_start(s) == RS_OK);
    Fake w[2];
    for (int r = 0; r < N; r++) fake_open(&w[r], ctx, ps_server_endpoint(s), r, NULL);
    float p0[6] = {0.1f, -0.3f, 1.0f / 3.0f, 2, 0, 0}, got[6] = {0};
    if (tiny != 0) memset(p0, 0, sizeof p0);
    /* the start: exact (fp32 both ways; an INIT in the wire's type is refused) */
    SyncTraffic t1;
    fake_send_coded(&w[0], tok, WIRE_INIT, WIRE_STEP_INIT, 0, 0, P, P, p0, &pc, 0);
    fake_send(&w[0], tok, WIRE_INIT, WIRE_STEP_INIT, 0, 0, P, P, p0);
    fake_send(&w[1], tok, WIRE_PULL, WIRE_STEP_INIT, 0, 0, 0, P, NULL);
    WireHeader h;
    CHECK(fake_recv_coded(&w[1], &h, got, P, &f32) && h.op == WIRE_PARAMS && h.step == WIRE_STEP_INIT);
    CHECK(!memcmp(got, p0, sizeof p0));
    /* step 0: small integers (exact in 16 bits), or a tiny gradient; a push in fp32 refused */
    float g[2][6] = {{1, -2, 3, 4, 0, 5}, {2, 2, -7, 8, 0, 0}};
    if (tiny != 0)
        for (int r = 0; r < N; r++)
            for (size_t i = 0; i < P; i++) g[r][i] = tiny;
    fake_send(&w[1], tok, WIRE_PUSH, 0, 0, 0, P, P, g[1]); /* fp32 on a 16-bit wire: dropped */
    for (int r = 0; r < N; r++) fake_send_coded(&w[r], tok, WIRE_PUSH, 0, 0, 0, P, P, g[r], &gc, 0);
    {
        WireHeader st = wire_header(tok, WIRE_STEP);
        st.samples = 1;
        st.total = P;
        CHECK(ps_send(w[0].sock, NULL, 0, &st, NULL, 0, NULL, 0, 0, NULL, NULL) == 0);
    }
    /* the reference: decode (what the server sees), sum in fp32, SGD, then round (what it sends) */
    float dec[2][6], sum[6], ref[6], mom[6] = {0};
    for (int r = 0; r < N; r++) {
        unsigned char e[12];
        codec_encode(&gc, g[r], e, P);
        codec_decode(&gc, e, dec[r], P);
    }
    for (size_t i = 0; i < P; i++) sum[i] = dec[0][i] + dec[1][i];
    memcpy(ref, p0, sizeof ref);
    kernels_cpu()->sgd_step(dev.kctx, ref, sum, mom, P, (float)cfg.lr, (float)cfg.momentum, (float)cfg.weight_decay,
                            1.0f);
    codec_round(&pc, ref, P);
    for (int r = 0; r < N; r++) {
        memset(got, 0xff, sizeof got);
        CHECK(fake_recv_coded(&w[r], &h, got, P, &pc) && h.op == WIRE_PARAMS && h.step == 0);
        CHECK_MSG(!memcmp(got, ref, sizeof ref), "%s rank %d: got %g %g %g want %g %g %g", wire, r, got[0], got[1],
                  got[2], ref[0], ref[1], ref[2]);
    }
    if (tiny_update) *tiny_update = got[0] - p0[0];
    if (tiny == 0) { /* the integers came through exact: the sum is the fp32 one */
        float fsum[6];
        for (size_t i = 0; i < P; i++) fsum[i] = g[0][i] + g[1][i];
        CHECK(!memcmp(sum, fsum, sizeof sum));
    }
    /* an allreduce: exact sums come back exact, 256 + 1 = 257 as codec_round(257) */
    float x[2][3] = {{256, 3, 1.0f / 3.0f}, {1, -5, 1}}, y[3], want[3];
    for (int r = 0; r < N; r++) fake_send_coded(&w[r], tok, WIRE_SUM, 0, 0, 0, 3, 3, x[r], &gc, 0);
    for (int i = 0; i < 3; i++) {
        unsigned char e0[2], e1[2];
        float d0, d1;
        codec_encode(&gc, &x[0][i], e0, 1);
        codec_encode(&gc, &x[1][i], e1, 1);
        codec_decode(&gc, e0, &d0, 1);
        codec_decode(&gc, e1, &d1, 1);
        want[i] = d0 + d1;
    }
    codec_round(&gc, want, 3);
    for (int r = 0; r < N; r++) {
        CHECK(fake_recv_coded(&w[r], &h, y, 3, &gc) && h.op == WIRE_SUMMED);
        CHECK_MSG(!memcmp(y, want, sizeof y), "%s sum: %g %g %g want %g %g %g", wire, y[0], y[1], y[2], want[0],
                  want[1], want[2]);
        CHECK(y[1] == -2.0f);
        if (gc.type == CODEC_BF16) CHECK(y[0] == 256.0f); /* 257 has 9 significant bits: rounds to even */
    }
    /* traffic: the start in fp32 (INIT, PULL and its answer), then every message 56 + 2 bytes an
     * element (pushes, STEP, sums); the coded INIT and the fp32 push dropped */
    unsigned long long H = WIRE_HEADER_BYTES, el = codec_elem_bytes(gc.type);
    for (int i = 0; i < 1000; i++) { /* the server counts a reply just after sending it */
        ps_server_traffic(s, &t1);
        if (t1.bytes_sent >= (H + 4 * P) + 2 * (H + el * P) + 2 * (H + el * 3)) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(t1.bytes_received == (H + 4 * P) + H + 2 * (H + el * P) + H + 2 * (H + el * 3), "%s: received %llu",
              wire, t1.bytes_received);
    CHECK_MSG(t1.bytes_sent == (H + 4 * P) + 2 * (H + el * P) + 2 * (H + el * 3), "%s: sent %llu", wire, t1.bytes_sent);
    CHECK_MSG(t1.dropped == 2, "%s: dropped %llu", wire, t1.dropped);
    for (int r = 0; r < N; r++) zmq_close(w[r].sock);
    ps_server_destroy(s);
    MemStats ms;
    mem_snapshot(&ms);
    CHECK(ms.cur[MEM_SERVER] == 0);
    zmq_ctx_term(ctx);
    device_close(&dev);
}

static void test_server_wire(void) {
    server_wire_round("bf16", 1, 0, NULL);
    server_wire_round("fp16", 1, 0, NULL);
    server_wire_round("fp16", 1024, 0, NULL);
    float lost = 1, kept = 0;
    server_wire_round("fp16", 1, 1e-8f, &lost);    /* 1e-8 < 2^-25: rounds to 0 in fp16 */
    server_wire_round("fp16", 1024, 1e-8f, &kept); /* x 1024: a subnormal, kept */
    CHECK_MSG(lost == 0 && kept != 0 && kept < 0, "fp16 1e-8: update %g at scale 1, %g at 1024", lost, kept);
}

/* A worker that never pushes: the server names it, tells the others, and fails. */
static void test_server_timeout(void) {
    void *ctx = zmq_ctx_new();
    Device dev;
    device_open(&dev, "cpu", 0, NULL);
    Config cfg;
    config_defaults(&cfg);
    Bucket bk = {0, 4};
    uint64_t tok = wire_token(TOKEN_TEXT);
    PsServerArgs a = {.cfg = &cfg, .dev = &dev, .zctx = ctx, .token = TOKEN_TEXT, .id = 0, .nservers = 1,
                      .nworkers = 3, .nparams = 4, .buckets = &bk, .nbuckets = 1, .timeout = 0.3};
    PsServer *s;
    CHECK(ps_server_create(&s, &a) == RS_OK);
    CHECK(ps_server_start(s) == RS_OK);
    Fake w0, w1;
    fake_open(&w0, ctx, ps_server_endpoint(s), 0, NULL);
    fake_open(&w1, ctx, ps_server_endpoint(s), 1, NULL);
    float p[4] = {1, 2, 3, 4};
    fake_send(&w0, tok, WIRE_INIT, WIRE_STEP_INIT, 0, 0, 4, 4, p);
    fake_send(&w1, tok, WIRE_PULL, WIRE_STEP_INIT, 0, 0, 0, 4, NULL);
    WireHeader h;
    char text[600] = "";
    CHECK(fake_recv(&w1, &h, (float *)text, 4) && h.op == WIRE_PARAMS); /* the initial parameters are in */
    fake_send(&w0, tok, WIRE_PUSH, 0, 0, 0, 4, 4, p);
    fake_send(&w1, tok, WIRE_PUSH, 0, 0, 0, 4, 4, p);
    double t0 = clock_now();
    CHECK(server_wait_end(s, 5.0));
    double took = clock_now() - t0;
    char why[512] = "";
    CHECK(ps_server_status(s, why, sizeof why) == RS_ERR_PEER);
    CHECK_MSG(strstr(why, "ps server: no push from rank 2 for step 0 within 0.3 s") != NULL, "%s", why);
    CHECK(took < 2.0);
    CHECK(fake_recv(&w1, &h, (float *)text, sizeof text / 4 - 1));
    CHECK(h.op == WIRE_ABORT && strstr(text, "rank 2"));
    zmq_close(w0.sock);
    zmq_close(w1.sock);
    ps_server_destroy(s);
    zmq_ctx_term(ctx);
    device_close(&dev);
}

/* ---- the back end ------------------------------------------------------------------------------ */

typedef struct {
    int rank, world, K;
    const char *placement;
    void *ctx;
    Config *cfg;
    char (*eps)[256];       /* [world + K] endpoints */
    pthread_barrier_t *bar;
    int rc;
    size_t *counts;
    int ncounts;
    unsigned long long wrong;
    SyncTraffic tr;
    double bucket_mb;
    double timeout;         /* the job's (0: 10 s) */
    double took;            /* seconds its allreduces took */
    char why[512];          /* the first failure's message */
} RankArg;

/* One worker thread: init, exchange endpoints, connect, exact-sum allreduces. */
static void *rank_thread(void *p) {
    RankArg *a = p;
    Device dev;
    device_open(&dev, "cpu", 0, NULL);
    const SyncOps *ops = sync_find("ps");
    SyncJob job = {.cfg = a->cfg, .dev = &dev, .rank = a->rank, .world = a->world,
                   .local_rank = a->rank, .local_world = a->world, .zctx = a->ctx, .addr = "127.0.0.1",
                   .token = TOKEN_TEXT, .timeout = a->timeout > 0 ? a->timeout : 10};
    void *st = NULL;
    char ep[256] = "";
    a->rc = ops->init(&job, &st, ep, sizeof ep);
    if (a->rc == RS_OK) snprintf(a->eps[a->rank], 256, "%s", ep);
    pthread_barrier_wait(a->bar);
    char *list[16];
    for (int i = 0; i < a->world + a->K; i++) list[i] = a->eps[i];
    int n = a->world + (!strcmp(a->placement, "dedicated") ? a->K : 0);
    if (a->rc == RS_OK) a->rc = ops->connect(st, list, n);
    for (int c = 0; c < a->ncounts && a->rc == RS_OK; c++) {
        size_t cnt = a->counts[c];
        float *x = malloc(cnt * sizeof *x);
        for (size_t i = 0; i < cnt; i++) x[i] = (float)((a->rank + 1) * (int)(i % 1000));
        double t0 = clock_now();
        a->rc = ops->allreduce(st, x, cnt);
        a->took += clock_now() - t0;
        if (a->rc) snprintf(a->why, sizeof a->why, "%s", rs_errmsg());
        float f = (float)(a->world * (a->world + 1) / 2);
        Codec gc = codec_from_options(a->cfg->wire, a->cfg->loss_scale);
        for (size_t i = 0; i < cnt && a->rc == RS_OK; i++) {
            float want = f * (float)(int)(i % 1000);
            if (gc.type != CODEC_F32) { /* each contribution rounded, summed in fp32 in rank order, rounded */
                want = 0;
                for (int r = 0; r < a->world; r++) {
                    float v = (float)((r + 1) * (int)(i % 1000));
                    codec_round(&gc, &v, 1);
                    want += v;
                }
                codec_round(&gc, &want, 1);
            }
            a->wrong += x[i] != want;
        }
        free(x);
    }
    if (st && ops->close) CHECK(ops->close(st) == RS_OK);
    if (st) ops->traffic(st, &a->tr);
    pthread_barrier_wait(a->bar);
    ops->destroy(st);
    device_close(&dev);
    return NULL;
}

/* The allreduces a job makes: their element counts, and chunks of `chunk` elements. */
typedef struct {
    const size_t *counts;
    int ncounts;
    size_t chunk;
} JobShape;

static const size_t job_counts[] = {1, 2, 5, 999, 1000, 1001, 70000};
static const JobShape job_small = {job_counts, (int)(sizeof job_counts / sizeof job_counts[0]), 1000};

static void run_allreduce_shaped(int world, const char *placement, int K, int *rc, unsigned long long *wrong,
                                 SyncTraffic *tr, const char *wire, const JobShape *shape) {
    void *ctx = zmq_ctx_new();
    Config cfg;
    config_defaults(&cfg);
    snprintf(cfg.wire, sizeof cfg.wire, "%s", wire);
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "%s", placement);
    cfg.ps_servers = K;
    cfg.bucket_mb = (double)shape->chunk * sizeof(float) / 1048576.0;
    const size_t *counts = shape->counts;
    char eps[16][256];
    memset(eps, 0, sizeof eps);
    Device sdev;
    device_open(&sdev, "cpu", 0, NULL);
    PsServer *srv[4] = {0};
    int ded = !strcmp(placement, "dedicated");
    for (int k = 0; ded && k < K; k++) {
        PsServerArgs a = {.cfg = &cfg, .dev = &sdev, .zctx = ctx, .token = TOKEN_TEXT, .id = k, .nservers = K,
                          .nworkers = world, .nparams = 0, .timeout = 10};
        CHECK(ps_server_create(&srv[k], &a) == RS_OK);
        CHECK(ps_server_start(srv[k]) == RS_OK);
        snprintf(eps[world + k], 256, "%s", ps_server_endpoint(srv[k]));
    }
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)world);
    RankArg ra[8];
    pthread_t th[8];
    for (int r = 0; r < world; r++) {
        ra[r] = (RankArg){.rank = r, .world = world, .K = ded ? K : 0, .placement = placement, .ctx = ctx,
                          .cfg = &cfg, .eps = eps, .bar = &bar, .counts = (size_t *)counts, .ncounts = shape->ncounts};
        pthread_create(&th[r], NULL, rank_thread, &ra[r]);
    }
    *rc = 0;
    *wrong = 0;
    for (int r = 0; r < world; r++) {
        pthread_join(th[r], NULL);
        if (ra[r].rc && !*rc) *rc = ra[r].rc;
        *wrong += ra[r].wrong;
        tr[r] = ra[r].tr;
    }
    for (int k = 0; ded && k < K; k++) {
        CHECK(ps_server_status(srv[k], NULL, 0) == 0);
        ps_server_destroy(srv[k]);
    }
    pthread_barrier_destroy(&bar);
    device_close(&sdev);
    zmq_ctx_term(ctx);
}

static void run_allreduce_job(int world, const char *placement, int K, int *rc, unsigned long long *wrong,
                              SyncTraffic *tr, const char *wire) {
    run_allreduce_shaped(world, placement, K, rc, wrong, tr, wire, &job_small);
}

static void test_backend_allreduce(void) {
    for (int world = 1; world <= 5; world++) {
        int rc;
        unsigned long long wrong;
        SyncTraffic tr[8];
        run_allreduce_job(world, "colocated", 1, &rc, &wrong, tr, "fp32");
        CHECK_MSG(rc == 0 && wrong == 0, "colocated world %d: rc %d (%s), #wrong %llu", world, rc, rs_errmsg(),
                  wrong);
        /* traffic: rank 0 serves everyone else; each other rank moves its bytes twice */
        unsigned long long elems = 1 + 2 + 5 + 999 + 1000 + 1001 + 70000;
        unsigned long long msgs = 1 + 1 + 1 + 1 + 1 + 2 + 70; /* chunks of 1000 */
        unsigned long long each = elems * 4 + msgs * WIRE_HEADER_BYTES;
        for (int r = 1; r < world; r++)
            CHECK_MSG(tr[r].bytes_sent == each && tr[r].bytes_received == each, "rank %d: %llu / %llu, want %llu", r,
                      tr[r].bytes_sent, tr[r].bytes_received, each);
        CHECK_MSG(tr[0].bytes_sent == (unsigned long long)(world - 1) * each &&
                      tr[0].bytes_received == (unsigned long long)(world - 1) * each,
                  "rank 0: %llu / %llu", tr[0].bytes_sent, tr[0].bytes_received);
    }
    for (int K = 1; K <= 3; K++) {
        int rc;
        unsigned long long wrong;
        SyncTraffic tr[8];
        run_allreduce_job(3, "dedicated", K, &rc, &wrong, tr, "fp32");
        CHECK_MSG(rc == 0 && wrong == 0, "dedicated K %d: rc %d (%s), #wrong %llu", K, rc, rs_errmsg(), wrong);
    }
    /* sharded: a shard in every rank; what one rank sends the others receive, and every rank
     * moves the sum's bytes about 2(N-1)/N times (its own shard stays in-process) */
    for (int world = 1; world <= 5; world++) {
        int rc;
        unsigned long long wrong, sent = 0, recv = 0;
        SyncTraffic tr[8];
        run_allreduce_job(world, "sharded", 1, &rc, &wrong, tr, "fp32");
        CHECK_MSG(rc == 0 && wrong == 0, "sharded world %d: rc %d (%s), #wrong %llu", world, rc, rs_errmsg(), wrong);
        for (int r = 0; r < world; r++) {
            sent += tr[r].bytes_sent;
            recv += tr[r].bytes_received;
        }
        CHECK_MSG(sent == recv, "sharded world %d: %llu sent, %llu received", world, sent, recv);
        unsigned long long elems = 1 + 2 + 5 + 999 + 1000 + 1001 + 70000;
        for (int r = 0; r < world; r++)
            CHECK_MSG(tr[r].bytes_sent >= 2 * (world - 1) * (70000ull / world) * 4 &&
                          tr[r].bytes_sent <= 2 * elems * 4 * (world - 1) / (world > 1 ? world : 1) + 400 * WIRE_HEADER_BYTES,
                      "sharded world %d rank %d: %llu bytes sent", world, r, tr[r].bytes_sent);
    }
}

/* Slices of 64 KiB and more go zero-copy from each worker's buffer, to the server in its own
 * process over inproc and to the others over a socket: the sums stay exact on every rank
 * (colocated, and sharded with a shard in every rank), one allreduce's buffer is freed and the
 * next one's allocated right after it returns (nothing may still reference it), and the traffic
 * is bytes and headers exactly (the host worker's inproc messages not counted). */
static void test_backend_allreduce_large(void) {
    static const size_t big[] = {70000, 16384, 300001, 1000000, 70000};
    JobShape shape = {big, (int)(sizeof big / sizeof big[0]), 262144}; /* 1 MiB chunks */
    unsigned long long elems = 0, msgs = 0;
    for (int i = 0; i < shape.ncounts; i++) {
        elems += big[i];
        msgs += (big[i] + shape.chunk - 1) / shape.chunk;
    }
    for (int world = 1; world <= 4; world++) {
        int rc;
        unsigned long long wrong;
        SyncTraffic tr[8];
        run_allreduce_shaped(world, "colocated", 1, &rc, &wrong, tr, "fp32", &shape);
        CHECK_MSG(rc == 0 && wrong == 0, "colocated world %d: rc %d (%s), #wrong %llu", world, rc, rs_errmsg(),
                  wrong);
        unsigned long long each = elems * 4 + msgs * WIRE_HEADER_BYTES;
        for (int r = 1; r < world; r++)
            CHECK_MSG(tr[r].bytes_sent == each && tr[r].bytes_received == each, "rank %d: %llu / %llu, want %llu", r,
                      tr[r].bytes_sent, tr[r].bytes_received, each);
        CHECK(tr[0].bytes_sent == (unsigned long long)(world - 1) * each);
    }
    for (int world = 2; world <= 4; world++) {
        int rc;
        unsigned long long wrong, sent = 0, recv = 0;
        SyncTraffic tr[8];
        run_allreduce_shaped(world, "sharded", 1, &rc, &wrong, tr, "fp32", &shape);
        CHECK_MSG(rc == 0 && wrong == 0, "sharded world %d: rc %d (%s), #wrong %llu", world, rc, rs_errmsg(), wrong);
        for (int r = 0; r < world; r++) {
            sent += tr[r].bytes_sent;
            recv += tr[r].bytes_received;
        }
        CHECK_MSG(sent == recv, "sharded world %d: %llu sent, %llu received", world, sent, recv);
    }
}

/* A failed allreduce hands its buffer back: rank 1 never contributes, so rank 0's call fails
 * naming it, within the timeout and a margin, and when it returns no message holds rank 0's
 * buffer (zero-copy to its colocated server: the server lets go of what it kept as it fails),
 * so the caller may free it at once (the ASan build checks that nothing reads it after). */
static void test_backend_allreduce_failed(void) {
    void *ctx = zmq_ctx_new();
    Config cfg;
    config_defaults(&cfg);
    cfg.bucket_mb = 1.0;
    char eps[16][256];
    memset(eps, 0, sizeof eps);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    static const size_t big[] = {300001};
    RankArg ra[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        ra[r] = (RankArg){.rank = r, .world = 2, .placement = "colocated", .ctx = ctx, .cfg = &cfg, .eps = eps,
                          .bar = &bar, .counts = (size_t *)big, .ncounts = r == 0, .timeout = 1.0};
        pthread_create(&th[r], NULL, rank_thread, &ra[r]);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    CHECK_MSG(ra[0].rc == RS_ERR_PEER && strstr(ra[0].why, "rank 1"), "rank 0: rc %d (%s)", ra[0].rc, ra[0].why);
    CHECK_MSG(!strstr(ra[0].why, "still hold"), "rank 0's buffer still lent: %s", ra[0].why);
    CHECK_MSG(ra[0].took < 4.0, "the failed allreduce took %.1f s (timeout 1 s)", ra[0].took);
    pthread_barrier_destroy(&bar);
    zmq_ctx_term(ctx);
}

/* The collective on a 16-bit wire: every contribution rounded, summed in fp32, the sum rounded
 * once, the same for every placement; 56 + 2 bytes an element on the wire. */
static void test_backend_allreduce_wire(void) {
    unsigned long long elems = 1 + 2 + 5 + 999 + 1000 + 1001 + 70000, msgs = 1 + 1 + 1 + 1 + 1 + 2 + 70;
    const char *wires[2] = {"bf16", "fp16"};
    for (int w = 0; w < 2; w++) {
        int rc;
        unsigned long long wrong;
        SyncTraffic tr[8];
        run_allreduce_job(3, "colocated", 1, &rc, &wrong, tr, wires[w]);
        CHECK_MSG(rc == 0 && wrong == 0, "%s colocated: rc %d (%s), #wrong %llu", wires[w], rc, rs_errmsg(), wrong);
        unsigned long long each = elems * 2 + msgs * WIRE_HEADER_BYTES;
        for (int r = 1; r < 3; r++)
            CHECK_MSG(tr[r].bytes_sent == each && tr[r].bytes_received == each && tr[r].dropped == 0,
                      "%s rank %d: %llu / %llu, want %llu", wires[w], r, tr[r].bytes_sent, tr[r].bytes_received, each);
        CHECK(tr[0].bytes_sent == 2 * each && tr[0].bytes_received == 2 * each);
        run_allreduce_job(3, "sharded", 1, &rc, &wrong, tr, wires[w]);
        CHECK_MSG(rc == 0 && wrong == 0, "%s sharded: rc %d (%s), #wrong %llu", wires[w], rc, rs_errmsg(), wrong);
        run_allreduce_job(3, "dedicated", 2, &rc, &wrong, tr, wires[w]);
        CHECK_MSG(rc == 0 && wrong == 0, "%s dedicated: rc %d (%s), #wrong %llu", wires[w], rc, rs_errmsg(), wrong);
    }
    MemStats ms;
    mem_snapshot(&ms);
    CHECK(ms.cur[MEM_SERVER] == 0 && ms.cur[MEM_COMM] == 0);
}

/* A scripted dedicated server for test_client_wire: answers rank 1's pull first in the wire's
 * type (refused: the start is fp32), then in fp32; takes its push (checked: the wire's dtype,
 * 2 bytes an element, round(g x scale)); answers the step in fp32 (refused), then in the wire's
 * type. */
typedef struct {
    void *router;
    Codec gc, pc;
    const float *p0, *g, *p1;
    size_t P;
    int ok;
} ScriptServer;

static int script_reply(ScriptServer *ss, uint32_t step, const float *v, const Codec *c) {
    unsigned char enc[64];
    WireHeader h = wire_header(wire_token(TOKEN_TEXT), WIRE_PARAMS);
    h.step = step;
    h.count = h.total = ss->P;
    h.dtype = (uint16_t)wire_dtype_of(c->type);
    codec_encode(c, v, enc, ss->P);
    return ps_send(ss->router, "w1", 2, &h, enc, ss->P * codec_elem_bytes(c->type), NULL, 0, 0, NULL, NULL) == 0;
}

static void *script_server(void *p) {
    ScriptServer *ss = p;
    Codec f32 = codec_make(CODEC_F32, 1);
    MsgIn m;
    WireHeader h;
    ss->ok = 0;
    if (msg_recv(ss->router, &m, 0, 1) != 2) return NULL; /* [w1][pull] */
    int pull = wire_decode(msg_frame_data(&m.part[1]), msg_frame_size(&m.part[1]), &h) == WIRE_OK && h.op == WIRE_PULL;
    msg_close(&m);
    if (!pull || !script_reply(ss, WIRE_STEP_INIT, ss->p0, &ss->pc) || !script_reply(ss, WIRE_STEP_INIT, ss->p0, &f32))
        return NULL;
    if (msg_recv(ss->router, &m, 0, 1) != 3) return NULL; /* [w1][push][payload] */
    float got[16];
    int push = wire_decode(msg_frame_data(&m.part[1]), msg_frame_size(&m.part[1]), &h) == WIRE_OK &&
               h.op == WIRE_PUSH && h.dtype == wire_dtype_of(ss->gc.type) && h.count == ss->P &&
               msg_frame_size(&m.part[2]) == 2 * ss->P;
    if (push) {
        unsigned char want[32];
        codec_encode(&ss->gc, ss->g, want, ss->P);
        push = !memcmp(msg_frame_data(&m.part[2]), want, 2 * ss->P);
        codec_decode(&ss->gc, msg_frame_data(&m.part[2]), got, ss->P);
        push = push && !memcmp(got, ss->g, ss->P * sizeof(float)); /* g is exact in 16 bits */
    }
    msg_close(&m);
    if (!push || !script_reply(ss, 0, ss->p1, &f32) || !script_reply(ss, 0, ss->p1, &ss->pc)) return NULL;
    ss->ok = 1;
    return NULL;
}

/* The worker side on fp16 with --loss-scale 8, against a scripted server: the start taken in
 * fp32 only, the push round(g x 8) in 2 bytes an element, the step's parameters taken in fp16
 * only and decoded; the refused replies counted in dropped and not in bytes. */
static void test_client_wire(void) {
    void *ctx = zmq_ctx_new();
    Device dev;
    device_open(&dev, "cpu", 0, NULL);
    Config cfg;
    config_defaults(&cfg);
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "dedicated");
    snprintf(cfg.wire, sizeof cfg.wire, "fp16");
    cfg.loss_scale = 8;
    enum { P = 6 };
    Bucket bk = {0, P};
    float p0[P] = {0.1f, -0.2f, 1.0f / 3.0f, 4, 5, 6}, g[P] = {1, -2, 0.5f, 0, 3, 1024}, p1[P] = {0.5f, 1, -1, 2, 0, 7};
    ScriptServer ss = {.router = zmq_socket(ctx, ZMQ_ROUTER), .gc = codec_from_options("fp16", 8),
                       .pc = codec_make(CODEC_F16, 1), .p0 = p0, .g = g, .p1 = p1, .P = P};
    int linger = 0, tmo = 5000;
    zmq_setsockopt(ss.router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(ss.router, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    CHECK(zmq_bind(ss.router, "tcp://127.0.0.1:*") == 0);
    char ep[256] = "";
    size_t eplen = sizeof ep;
    zmq_getsockopt(ss.router, ZMQ_LAST_ENDPOINT, ep, &eplen);
    pthread_t th;
    pthread_create(&th, NULL, script_server, &ss);
    const SyncOps *ops = sync_find("ps");
    SyncJob job = {.cfg = &cfg, .dev = &dev, .rank = 1, .world = 2, .local_rank = 1, .local_world = 2, .zctx = ctx,
                   .addr = "127.0.0.1", .token = TOKEN_TEXT, .timeout = 5, .buckets = &bk, .nbuckets = 1,
                   .nparams = P};
    void *st = NULL;
    char mine[256] = "";
    CHECK_MSG(ops->init(&job, &st, mine, sizeof mine) == RS_OK, "%s", rs_errmsg());
    char *list[3] = {"", mine, ep};
    CHECK_MSG(ops->connect(st, list, 3) == RS_OK, "%s", rs_errmsg());
    float params[P] = {0}, out[P] = {0}, grad[P];
    memcpy(grad, g, sizeof grad);
    CHECK_MSG(ops->broadcast(st, params, P) == RS_OK, "%s", rs_errmsg());
    CHECK(!memcmp(params, p0, sizeof p0)); /* exact: fp32 */
    CHECK(ops->begin_step(st, 0, 4) == RS_OK);
    CHECK(ops->start(st, 0, 0, grad, out) == RS_OK);
    int done = 0;
    for (int i = 0; i < 100 && done == 0; i++) done = ops->poll(st, 0, 50);
    CHECK_MSG(done == 1, "poll %d", done);
    float want[P];
    memcpy(want, p1, sizeof want);
    codec_round(&ss.pc, want, P);
    CHECK(!memcmp(out, want, sizeof want) && out[0] == 0.5f && out[2] == -1.0f);
    CHECK(ops->end_step(st, 0) == RS_OK);
    pthread_join(th, NULL);
    CHECK(ss.ok);
    SyncTraffic t;
    ops->traffic(st, &t);
    unsigned long long H = WIRE_HEADER_BYTES;
    CHECK_MSG(t.dropped == 2, "dropped %llu", t.dropped);
    CHECK_MSG(t.bytes_sent == H + (H + 2 * P) && t.bytes_received == (H + 4 * P) + (H + 2 * P),
              "sent %llu received %llu", t.bytes_sent, t.bytes_received);
    ops->destroy(st);
    MemStats ms;
    mem_snapshot(&ms);
    CHECK(ms.cur[MEM_COMM] == 0);
    zmq_close(ss.router);
    zmq_ctx_term(ctx);
    device_close(&dev);
}

/* One rank through "ps" (colocated) computes bit for bit what "none" does, both driven by the
 * engine (buckets handed over during backward, the communication thread, the server's update). */
static void test_backend_matches_none(void) {
    Config cfg;
    config_defaults(&cfg);
    cfg.weight_decay = 0.001;
    cfg.bucket_mb = 300.0 * sizeof(float) / 1048576.0;
    int sizes[3] = {20, 16, 4};
    const int B = 8, S = 5;
    Device dev;
    device_open(&dev, "cpu", 0, NULL);
    Model m[2];
    float *fin[2];
    void *ctx = zmq_ctx_new();
    RankEnv env = {.world = 1, .local_world = 1};
    snprintf(env.bind, sizeof env.bind, "127.0.0.1");
    for (int v = 0; v < 2; v++) {
        CHECK(model_init(&m[v], &dev, sizes, 3, B, 7) == RS_OK);
        EngineArgs ea = {.cfg = &cfg, .model = &m[v], .dev = &dev, .env = &env, .world = 1, .local_world = 1,
                         .zctx = ctx, .ops = sync_find(v ? "ps" : "none"), .steps = S};
        Engine *e = NULL;
        CHECK_MSG(engine_create(&e, &ea) == RS_OK, "%s", rs_errmsg());
        if (!e) return;
        int nb;
        engine_buckets(e, &nb);
        CHECK(nb > 1);
        uint64_t seed = 99;
        for (int s = 0; s < S; s++) {
            float x[8 * 20];
            int y[8];
            for (int i = 0; i < B * 20; i++) x[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / 16777216.0f;
            for (int i = 0; i < B; i++) y[i] = i % 4;
            engine_step_begin(e, s);
            device_h2d(&dev, m[v].act[0], x, sizeof x);
            device_h2d(&dev, m[v].labels, y, sizeof y);
            int local;
            CHECK(engine_step(e, s, NULL, NULL, B, B, &local) == RS_OK && local == B);
        }
        int n;
        const StepTimes *T = engine_times(e, &n);
        CHECK(n == S && T[S - 1].step > 0 && T[S - 1].blocked >= 0 && T[S - 1].comm_total >= 0);
        SyncTraffic t;
        engine_traffic(e, &t);
        CHECK(t.bytes_sent == 0 && t.bytes_received == 0 && t.dropped == 0); /* all in-process */
        double busy;
        long long steps;
        engine_server_busy(e, &busy, &steps);
        CHECK(v == 0 ? steps == 0 : steps == S && busy > 0);
        engine_free(e);
        fin[v] = malloc(m[v].nparams * sizeof(float));
        device_d2h(&dev, fin[v], m[v].params, m[v].nparams * sizeof(float));
    }
    CHECK(m[0].nparams == m[1].nparams && !memcmp(fin[0], fin[1], m[0].nparams * sizeof(float)));
    for (int v = 0; v < 2; v++) {
        free(fin[v]);
        model_free(&m[v]);
    }
    zmq_ctx_term(ctx);
    device_close(&dev);
}

/* --accum-steps 2: two micro-batches of 4 accumulated, then one exchange and one update, equal
 * one step on the 8 samples (within float rounding: the sums' order differs), through "none" on
 * the CPU and "ps" on cpu-async (staged: the sum is added into each bucket before it is copied
 * out), which agree bit for bit; calls out of order are refused. */
static void test_engine_accumulates(void) {
    int sizes[3] = {20, 16, 4};
    const int B = 8, S = 3;
    float *fin[3];
    size_t np = 0;
    void *ctx = zmq_ctx_new();
    RankEnv env = {.world = 1, .local_world = 1};
    snprintf(env.bind, sizeof env.bind, "127.0.0.1");
    for (int v = 0; v < 3; v++) { /* 0: one batch of 8 (none); 1: 2 x 4 (none); 2: 2 x 4 (ps, cpu-async) */
        Config cfg;
        config_defaults(&cfg);
        cfg.bucket_mb = 100.0 * sizeof(float) / 1048576.0;
        cfg.accum_steps = v ? 2 : 1;
        Device dev;
        CHECK(device_open(&dev, v == 2 ? "cpu-async" : "cpu", 0, NULL) == RS_OK);
        Model m;
        CHECK(model_init(&m, &dev, sizes, 3, B, 7) == RS_OK);
        EngineArgs ea = {.cfg = &cfg, .model = &m, .dev = &dev, .env = &env, .world = 1, .local_world = 1,
                         .zctx = ctx, .ops = sync_find(v == 2 ? "ps" : "none"), .steps = S};
        Engine *e = NULL;
        CHECK_MSG(engine_create(&e, &ea) == RS_OK, "%s", rs_errmsg());
        if (!e) return;
        uint64_t seed = 5;
        int local;
        for (int s = 0; s < S; s++) {
            float x[8 * 20];
            int y[8];
            for (int i = 0; i < B * 20; i++) x[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / 16777216.0f;
            for (int i = 0; i < B; i++) y[i] = (i * 3 + s) % 4;
            engine_step_begin(e, s);
            if (v == 0) {
                device_h2d(&dev, m.act[0], x, sizeof x);
                device_h2d(&dev, m.labels, y, sizeof y);
                CHECK(engine_step(e, s, NULL, NULL, B, B, &local) == RS_OK);
                continue;
            }
            if (s == 0) CHECK(engine_step(e, s, NULL, NULL, B / 2, B, &local) == RS_ERR_RUNTIME); /* no micro-batch yet */
            device_h2d(&dev, m.act[0], x, sizeof x / 2);
            device_h2d(&dev, m.labels, y, sizeof y / 2);
            CHECK(engine_accumulate(e, s, B / 2) == RS_OK);
            if (s == 0) CHECK(engine_accumulate(e, s, B / 2) == RS_ERR_RUNTIME); /* the last is engine_step's */
            device_h2d(&dev, m.act[0], x + B / 2 * 20, sizeof x / 2);
            device_h2d(&dev, m.labels, y + B / 2, sizeof y / 2);
            CHECK(engine_step(e, s, NULL, NULL, B / 2, B, &local) == RS_OK && local == B / 2);
        }
        int n;
        const StepTimes *T = engine_times(e, &n);
        CHECK(n == S && T[S - 1].forward > 0 && T[S - 1].backward > 0 && T[S - 1].data >= 0);
        engine_free(e);
        np = m.nparams;
        fin[v] = malloc(np * sizeof(float));
        device_d2h(&dev, fin[v], m.params, np * sizeof(float));
        model_free(&m);
        device_close(&dev);
    }
    double worst = 0;
    for (size_t i = 0; i < np; i++) {
        double d = fabs((double)fin[0][i] - fin[1][i]) / fmax(1.0, fabs(fin[0][i]));
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst <= 1e-6, "2 x 4 accumulated against one batch of 8: %g", worst);
    CHECK(!memcmp(fin[1], fin[2], np * sizeof(float))); /* ps staged == none in place, bit for bit */
    for (int v = 0; v < 3; v++) free(fin[v]);
    zmq_ctx_term(ctx);
}

static void test_backend_refuses(void) {
    Device dev;
    device_open(&dev, "cpu", 0, NULL);
    void *ctx = zmq_ctx_new();
    const SyncOps *ops = sync_find("ps");
    CHECK(ops != NULL);
    Config cfg;
    config_defaults(&cfg);
    int sizes[2] = {2, 2};
    Model m;
    CHECK(model_init(&m, &dev, sizes, 2, 1, 1) == RS_OK); /* 6 parameters */
    Bucket bk = {0, m.nparams};
    SyncJob job = {.cfg = &cfg, .dev = &dev, .world = 2, .zctx = ctx, .addr = "127.0.0.1", .token = "",
                   .buckets = &bk, .nbuckets = 1, .nparams = m.nparams, .timeout = 1};
    void *st;
    char ep[256];
    /* DataParallel's step driver refuses what it cannot do */
    snprintf(cfg.ps_mode, sizeof cfg.ps_mode, "dataparallel");
    CHECK(backend_driver(&cfg) == NULL); /* --sync ring: no DataParallel step */
    snprintf(cfg.sync, sizeof cfg.sync, "ps");
    const StepDriver *dp = backend_driver(&cfg);
    CHECK(dp && dp == ps_dataparallel_driver() && dp->scatter && dp->loss && dp->hello);
    if (!dp) return;
    CHECK(dp->init(&job, &m, NULL, NULL, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "--global-batch"));
    cfg.global_batch = 4;
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "dedicated");
    CHECK(dp->init(&job, &m, NULL, NULL, &st, ep, sizeof ep) == RS_ERR_INPUT &&
          strstr(rs_errmsg(), "no dedicated server"));
    job.dataparallel = 1; /* and the back end under it */
    CHECK(ops->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "no dedicated server"));
    ops->destroy(st);
    job.dataparallel = 0;
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "colocated");
    cfg.global_batch = 0;
    snprintf(cfg.ps_mode, sizeof cfg.ps_mode, "push");
    CHECK(backend_driver(&cfg) == NULL);
    cfg.ps_servers = 2;
    CHECK(ops->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "dedicated"));
    ops->destroy(st);
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "dedicated");
    cfg.ps_servers = 7;
    CHECK(ops->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "--ps-servers 7"));
    ops->destroy(st);
    cfg.ps_servers = 6;
    job.rank = 1;
    CHECK(ops->init(&job, &st, ep, sizeof ep) == RS_OK);
    char *eps[3] = {"", "", ""};
    CHECK(ops->connect(st, eps, 3) == RS_ERR_INPUT); /* 1 server process for --ps-servers 6 */
    ops->destroy(st);
    /* byteps: k against the world (0 <= k <= n; n = 1 needs k = 0), the implied placement, lockstep */
    const SyncOps *bp = sync_find("byteps");
    CHECK(bp != NULL && bp != ops && !strcmp(bp->name, "byteps"));
    snprintf(cfg.sync, sizeof cfg.sync, "byteps");
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "colocated");
    cfg.ps_servers = 3;
    CHECK(bp->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "0 <= k <= n"));
    bp->destroy(st);
    cfg.ps_servers = -1;
    CHECK(bp->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "0 <= k <= n"));
    bp->destroy(st);
    cfg.ps_servers = 1;
    job.world = 1;
    job.rank = 0;
    CHECK(bp->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "one worker"));
    bp->destroy(st);
    job.world = 2;
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "sharded");
    CHECK(bp->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "placement is implied"));
    bp->destroy(st);
    snprintf(cfg.ps_placement, sizeof cfg.ps_placement, "colocated");
    cfg.ps_staleness = CONFIG_ASYNC;
    CHECK(bp->init(&job, &st, ep, sizeof ep) == RS_ERR_INPUT && strstr(rs_errmsg(), "synchronous"));
    bp->destroy(st);
    cfg.ps_staleness = 0;
    job.rank = 1; /* n = 2, k = 1: a shard here, one server process after the two workers */
    CHECK(bp->init(&job, &st, ep, sizeof ep) == RS_OK && !strncmp(ep, "tcp://", 6));
    CHECK(bp->connect(st, eps, 2) == RS_ERR_INPUT && strstr(rs_errmsg(), "the job has 0 server processes"));
    bp->destroy(st);
    model_free(&m);
    zmq_ctx_term(ctx);
    device_close(&dev);
}

/* config_partition_keys: K KiB of the wire as keys (4 bytes a key, 2 on bf16), never below one
 * parameter however small K; auto: 2 ms of --link within 64 KiB .. 4 MiB, whole buckets (0)
 * without a link; off: 0. */
static void test_partition_keys(void) {
    Config c;
    config_defaults(&c);
    snprintf(c.ps_partition, sizeof c.ps_partition, "off");
    CHECK(config_partition_keys(&c) == 0);
    snprintf(c.ps_partition, sizeof c.ps_partition, "16");
    CHECK(config_partition_keys(&c) == 4096);
    snprintf(c.wire, sizeof c.wire, "bf16");
    CHECK(config_partition_keys(&c) == 8192);
    snprintf(c.ps_partition, sizeof c.ps_partition, "0.001"); /* one byte: less than a key */
    CHECK(config_partition_keys(&c) == 1);
    snprintf(c.wire, sizeof c.wire, "fp32");
    CHECK(config_partition_keys(&c) == 1);
    snprintf(c.ps_partition, sizeof c.ps_partition, "auto");
    c.link[0] = 0;
    CHECK(config_partition_keys(&c) == 0);
    snprintf(c.link, sizeof c.link, "300mbit"); /* 37.5 MB/s x 2 ms = 75,000 bytes */
    CHECK(config_partition_keys(&c) == 75000 / 4);
    snprintf(c.link, sizeof c.link, "1mbit"); /* 250 bytes: raised to 64 KiB */
    CHECK(config_partition_keys(&c) == 65536 / 4);
    snprintf(c.link, sizeof c.link, "100gbit"); /* 25 MB: lowered to 4 MiB */
    CHECK(config_partition_keys(&c) == 4194304 / 4);
}

int main(void) {
    RUN(test_wire_roundtrip);
    RUN(test_wire_rejects);
    RUN(test_wire_fuzz);
    RUN(test_wire_dtypes);
    RUN(test_shard_ranges);
    RUN(test_shard_plan);
    RUN(test_shard_weighted);
    RUN(test_shard_partitions);
    RUN(test_partition_keys);
    RUN(test_sendq_order);
    RUN(test_byteps_cost);
    RUN(test_rules);
    RUN(test_server_fake_workers);
    RUN(test_server_early_push);
    RUN(test_server_timeout);
    RUN(test_server_wire);
    RUN(test_backend_matches_none);
    RUN(test_engine_accumulates);
    RUN(test_backend_allreduce);
    RUN(test_backend_allreduce_large);
    RUN(test_backend_allreduce_failed);
    RUN(test_backend_allreduce_wire);
    RUN(test_client_wire);
    RUN(test_backend_refuses);
    return test_summary("test_ps");
}
