/* test_codec.c - the wire's number formats: bf16, fp16 and FP8 (E4M3, E5M2) rounding against exact references, decoding, loss scaling, FP8's scale per message */
#include "test.h"
#include "../base/codec.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>

static float f_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t u_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The nearest of a set of exactly representable neighbours, ties to the even code, computed in
 * double: the reference the bit tricks are held against. lo/hi are the codes below and above. */
static uint16_t nearest_even(double x, uint16_t lo, double vlo, uint16_t hi, double vhi) {
    double dl = x - vlo, dh = vhi - x;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

/* Every bf16 code decodes to the float with those top bits, and re-encodes to itself (NaNs stay
 * NaN). */
static void test_bf16_round_trip(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float x = codec_bf16_to_f32((uint16_t)h);
        if (u_of(x) != h << 16) bad++;
        uint16_t back = codec_f32_to_bf16(x);
        if (isnan(x) ? !isnan(codec_bf16_to_f32(back)) : back != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d codes", bad);
}

/* bf16 rounding of a spread of floats (every 4099th bit pattern, all signs and exponents) is the
 * nearest bf16, ties to even, compared in double. */
static void test_bf16_rounding(void) {
    int bad = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) {
        float x = f_of((uint32_t)u);
        if (isnan(x)) {
            bad += !isnan(codec_bf16_to_f32(codec_f32_to_bf16(x)));
            continue;
        }
        uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* truncation and the next code up */
        double vlo = codec_bf16_to_f32(lo), vhi = isinf(vlo) ? INFINITY : codec_bf16_to_f32(hi);
        if ((lo & 0x7fff) == 0x7f7f) vhi = ldexp(1, 128); /* past the last finite: rounds as 2^128, then overflows to Inf */
        uint16_t want = isinf(x) ? lo : nearest_even(fabs((double)x), lo, fabs(vlo), hi, fabs(vhi));
        if (codec_f32_to_bf16(x) != want) {
            if (bad++ < 5) fprintf(stderr, "  bf16(%a) = %04x, want %04x\n", x, codec_f32_to_bf16(x), want);
        }
    }
    CHECK_MSG(bad == 0, "%d values", bad);
    CHECK(codec_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(codec_f32_to_bf16(f_of(0x3f808000u)) == 0x3f80); /* a tie, to the even code */
    CHECK(codec_f32_to_bf16(f_of(0x3f818000u)) == 0x3f82); /* a tie, to the even code (up) */
    CHECK(isinf(codec_bf16_to_f32(codec_f32_to_bf16(f_of(0x7f7fffffu))))); /* FLT_MAX rounds up to Inf */
}

/* The value of f16 code h, by its definition (not by the code under test). */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Every f16 code decodes to its defined value and re-encodes to itself. */
static void test_f16_round_trip(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float x = codec_f16_to_f32((uint16_t)h);
        double want = f16_value((uint16_t)h);
        if (isnan(want) ? !isnan(x) : (double)x != want || !!signbit(x) != !!(h & 0x8000)) bad++;
        if (!isnan(want) && codec_f32_to_f16(x) != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d codes", bad);
}

/* fp16 rounding of a spread of floats is the nearest fp16 (ties to even, overflow to Inf,
 * underflow through the subnormals to zero), found by bisection over the codes. */
static void test_f16_rounding(void) {
    int bad = 0;
    for (uint64_t u = 0; u <= 0x7fffffffull; u += 2053) {
        float x = f_of((uint32_t)u);
        if (isnan(x)) {
            bad += !isnan(codec_f16_to_f32(codec_f32_to_f16(x)));
            continue;
        }
        double ax = x;
        uint16_t lo = 0, hi = 0x7c00; /* the largest code with value <= ax, by bisection */
        while (lo < hi) {
            uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
            if (f16_value(mid) <= ax) lo = mid;
            else hi = (uint16_t)(mid - 1);
        }
        uint16_t want = f16_value(lo) == ax || lo == 0x7c00 ? lo : nearest_even(ax, lo, f16_value(lo), (uint16_t)(lo + 1), lo + 1 == 0x7c00 ? 65536.0 : f16_value((uint16_t)(lo + 1)));
        uint16_t got = codec_f32_to_f16(x), gotn = codec_f32_to_f16(-x);
        if (got != want || gotn != (uint16_t)(want | 0x8000)) {
            if (bad++ < 5) fprintf(stderr, "  f16(%a) = %04x, want %04x\n", x, got, want);
        }
    }
    CHECK_MSG(bad == 0, "%d values", bad);
    CHECK(codec_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(codec_f32_to_f16(65519.99f) == 0x7bff);
    CHECK(codec_f32_to_f16(65520.0f) == 0x7c00);      /* a tie with 65536: to the even code, Inf */
    CHECK(codec_f32_to_f16(ldexpf(1, -24)) == 0x0001); /* the smallest subnormal */
    CHECK(codec_f32_to_f16(ldexpf(1, -25)) == 0x0000); /* half of it: a tie, to zero */
    CHECK(codec_f32_to_f16(ldexpf(3, -26)) == 0x0001);
}

/* Bulk encode / decode / decode_add / round agree with the one-element helpers, at odd lengths
 * and unaligned wire buffers, with and without a loss scale; the loss scale is undone exactly. */
static void test_bulk(void) {
    enum { N = 1001 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = malloc(N * sizeof *z);
    unsigned char *wire = malloc(N * 4 + 1);
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 2003 - 1001) * 1.37e-3f;
    CodecType types[] = {CODEC_F32, CODEC_BF16, CODEC_F16};
    float scales[] = {1.0f, 1024.0f};
    for (int t = 0; t < 3; t++)
        for (int si = 0; si < 2; si++) {
            Codec c = codec_make(types[t], scales[si]);
            codec_encode(&c, x, wire + 1, N);
            codec_decode(&c, wire + 1, y, N);
            int bad = 0;
            for (int i = 0; i < N; i++) {
                float want = types[t] == CODEC_F32 ? x[i]
                             : types[t] == CODEC_BF16 ? codec_bf16_to_f32(codec_f32_to_bf16(x[i] * scales[si])) / scales[si]
                                                      : codec_f16_to_f32(codec_f32_to_f16(x[i] * scales[si])) / scales[si];
                if (u_of(y[i]) != u_of(want)) bad++;
                z[i] = 0.5f;
            }
            CHECK_MSG(bad == 0, "%s scale %g: %d decoded values differ", codec_name(types[t]), scales[si], bad);
            codec_decode_add(&c, wire + 1, z, N);
            bad = 0;
            for (int i = 0; i < N; i++) bad += z[i] != 0.5f + y[i];
            CHECK_MSG(bad == 0, "%s: decode_add", codec_name(types[t]));
            memcpy(z, x, N * sizeof *z);
            codec_round(&c, z, N);
            CHECK_MSG(!memcmp(z, y, N * sizeof *z), "%s: round = decode(encode)", codec_name(types[t]));
        }
    /* a gradient too small for fp16 survives with a loss scale */
    Codec plain = codec_make(CODEC_F16, 1), scaled = codec_make(CODEC_F16, 65536);
    float g = 3e-9f, back;
    uint16_t w;
    codec_encode(&plain, &g, &w, 1);
    codec_decode(&plain, &w, &back, 1);
    CHECK(back == 0.0f);
    codec_encode(&scaled, &g, &w, 1);
    codec_decode(&scaled, &w, &back, 1);
    CHECK_MSG(fabsf(back - g) < 1e-3f * g, "scaled: %g", back);
    free(x), free(y), free(z), free(wire);
}


/* ---- FP8 ---- */

/* One FP8 format under test: its helpers and what OCP's spec says it is. */
typedef struct {
    const char *name;
    CodecType type;
    uint8_t (*enc)(float);
    float (*dec)(uint8_t);
    int M, B, e4m3;
    uint8_t top, nan;
    double max;
} Fp8;

static const Fp8 fp8s[2] = {
    {"e4m3", CODEC_E4M3, codec_f32_to_e4m3, codec_e4m3_to_f32, 3, 7, 1, 0x7e, 0x7f, 448.0},
    {"e5m2", CODEC_E5M2, codec_f32_to_e5m2, codec_e5m2_to_f32, 2, 15, 0, 0x7b, 0x7e, 57344.0},
};

/* The value of code h from the spec's formula, in double (NaN for the NaN codes, Inf for E5M2's). */
static double fp8_ref(const Fp8 *f, unsigned h) {
    unsigned e = (h & 0x7f) >> f->M, m = h & ((1u << f->M) - 1);
    double sgn = h & 0x80 ? -1 : 1;
    if (f->e4m3 && (h & 0x7f) == 0x7f) return NAN;
    if (!f->e4m3 && e == 31) return m ? NAN : sgn * INFINITY;
    if (!e) return sgn * ldexp(m, 1 - f->B - f->M);
    return sgn * ldexp((1 << f->M) + m, (int)e - f->B - f->M);
}

/* The code nearest |x| (ties to the even code, saturating at top), from the table of codes
 * 0..top in double: the reference the bit tricks are held against. */
static unsigned fp8_nearest(const Fp8 *f, double x) {
    double a = fabs(x);
    unsigned s = x < 0 || (x == 0 && signbit(x)) ? 0x80 : 0;
    if (a >= f->max) return s | f->top;
    unsigned lo = 0;
    while (lo + 1 <= f->top && fp8_ref(f, lo + 1) <= a) lo++;
    double dl = a - fp8_ref(f, lo), dh = fp8_ref(f, lo + 1) - a;
    return s | (dl < dh ? lo : dh < dl ? lo + 1 : (lo & 1) ? lo + 1 : lo);
}

/* All 256 codes: each decodes to the spec's value and re-encodes to itself (-0 too); the NaN
 * codes decode to NaN and encode back to the format's NaN. */
static void test_fp8_codes(void) {
    for (int k = 0; k < 2; k++) {
        const Fp8 *f = &fp8s[k];
        int bad = 0, nans = 0;
        for (unsigned h = 0; h < 256; h++) {
            double want = fp8_ref(f, h);
            float x = f->dec((uint8_t)h);
            if (isnan(want)) {
                nans++;
                bad += !isnan(x) || f->enc(x) != (uint8_t)((h & 0x80) | f->nan);
                continue;
            }
            if (isinf(want)) { /* E5M2's Inf: saturates */
                bad += !isinf(x) || f->enc(x) != (uint8_t)((h & 0x80) | f->top);
                continue;
            }
            if ((double)x != want || !signbit(x) != !signbit(want) || f->enc(x) != h) {
                if (bad++ < 5) fprintf(stderr, "  %s %02x: %a, want %a, back %02x\n", f->name, h, x, want, f->enc(x));
            }
        }
        CHECK_MSG(bad == 0, "%s: %d codes wrong", f->name, bad);
        CHECK_MSG(nans == (f->e4m3 ? 2 : 6), "%s: %d NaN codes", f->name, nans);
        CHECK(f->dec(f->top) == (float)f->max && codec_max(f->type) == (float)f->max);
    }
}

/* Rounding: every midpoint between neighbouring codes goes to the even one, a float either side
 * of it to the nearer; random floats over the range agree with the reference; saturation. */
static void test_fp8_rounding(void) {
    for (int k = 0; k < 2; k++) {
        const Fp8 *f = &fp8s[k];
        int bad = 0;
        for (unsigned h = 0; h < f->top; h++) {
            float lo = (float)fp8_ref(f, h), hi = (float)fp8_ref(f, h + 1), mid = (lo + hi) / 2; /* exact */
            float below = nextafterf(mid, 0), above = nextafterf(mid, INFINITY);
            unsigned even = (h & 1) ? h + 1 : h;
            bad += f->enc(mid) != even || f->enc(-mid) != (0x80 | even);
            bad += f->enc(below) != h || f->enc(above) != h + 1;
        }
        CHECK_MSG(bad == 0, "%s: %d ties or neighbours wrong", f->name, bad);
        uint32_t seed = 12345;
        bad = 0;
        for (int i = 0; i < 200000; i++) {
            seed = seed * 1664525u + 1013904223u;
            float x = ldexpf((float)(seed >> 8) / 16777216.0f, (int)(seed % 40) - (f->e4m3 ? 14 : 22));
            if (seed & 1) x = -x;
            unsigned want = fp8_nearest(f, x);
            if (f->enc(x) != want && bad++ < 5) fprintf(stderr, "  %s(%a) = %02x, want %02x\n", f->name, x, f->enc(x), want);
        }
        CHECK_MSG(bad == 0, "%s: %d random values misrounded", f->name, bad);
        /* saturation: past the max, the midpoint to the next binade, huge, Inf: all +-top */
        float sat[] = {(float)f->max * 1.01f, (float)f->max * 1.0715f, 1e30f, FLT_MAX, INFINITY};
        for (int i = 0; i < 5; i++) {
            CHECK_MSG(f->enc(sat[i]) == f->top, "%s(%g) = %02x", f->name, sat[i], f->enc(sat[i]));
            CHECK_MSG(f->enc(-sat[i]) == (0x80 | f->top), "%s(%g)", f->name, -sat[i]);
        }
        CHECK(f->enc(NAN) == f->nan && isnan(f->dec(f->enc(-NAN))));
        /* subnormals: the smallest, half of it (a tie: to zero), three halves of it (a tie: to 2) */
        float tiny = ldexpf(1, 1 - f->B - f->M);
        CHECK(f->enc(tiny) == 0x01 && f->enc(tiny / 2) == 0x00 && f->enc(tiny * 1.5f) == 0x02);
        CHECK(f->enc(nextafterf(tiny / 2, 1)) == 0x01 && f->enc(-tiny) == 0x81 && f->enc(ldexpf(1, -140)) == 0);
    }
    /* the bulk encoder (branch-free, vectorised) gives the reference's codes on all of the above */
    for (int k = 0; k < 2; k++) {
        const Fp8 *f = &fp8s[k];
        enum { NB = 4096 + 200000 + 12 };
        float *x = malloc(NB * sizeof *x);
        unsigned char *w = malloc(NB);
        int m = 0, bad = 0;
        for (unsigned h = 0; h < f->top; h++) {
            float lo = (float)fp8_ref(f, h), hi = (float)fp8_ref(f, h + 1), mid = (lo + hi) / 2;
            x[m++] = mid, x[m++] = -mid, x[m++] = nextafterf(mid, 0), x[m++] = nextafterf(mid, INFINITY);
        }
        uint32_t seed = 777;
        for (int i = 0; i < 200000; i++) {
            seed = seed * 1664525u + 1013904223u;
            x[m++] = (seed & 1 ? -1 : 1) * ldexpf((float)(seed >> 8) / 16777216.0f, (int)(seed % 60) - 40);
        }
        float odd[12] = {0, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, 1e-45f, -1e-40f, 448, 57344, 65536};
        for (int i = 0; i < 12; i++) x[m++] = odd[i];
        Codec c = codec_make(f->type, 1);
        codec_encode_elems(&c, x, w, (size_t)m);
        for (int i = 0; i < m; i++)
            if (w[i] != f->enc(x[i]) && !(isnan(x[i]) && isnan(f->dec(w[i]))) && bad++ < 5)
                fprintf(stderr, "  bulk %s(%a) = %02x, one by one %02x\n", f->name, x[i], w[i], f->enc(x[i]));
        CHECK_MSG(bad == 0, "%s: the bulk encoder differs on %d of %d values", f->name, bad, m);
        free(x), free(w);
    }
    CHECK(codec_f32_to_e4m3(448.0f) == 0x7e && codec_f32_to_e4m3(464.0f) == 0x7e && codec_f32_to_e4m3(-1e9f) == 0xfe);
    CHECK(codec_f32_to_e4m3(1.0f) == 0x38 && codec_f32_to_e5m2(1.0f) == 0x3c);
    CHECK(codec_f32_to_e5m2(57344.0f) == 0x7b && codec_f32_to_e5m2(61440.0f) == 0x7b && codec_f32_to_e5m2(-INFINITY) == 0xfb);
    CHECK(codec_f32_to_e4m3(NAN) == 0x7f && codec_f32_to_e5m2(NAN) == 0x7e);
}

/* The scale per message: the largest finite magnitude lands at or just below the max (a power
 * of two away), NaN and Inf do not count, an all-zero message has scale 1, the clamp. */
static void test_fp8_scale(void) {
    for (int k = 0; k < 2; k++) {
        const Fp8 *f = &fp8s[k];
        Codec c = codec_make(f->type, 1);
        float amax[] = {1.0f, 1.75f, 1.76f, 3e-5f, 7.0e4f, 0.5f};
        for (int i = 0; i < 6; i++) {
            float x[3] = {amax[i] / 3, -amax[i], NAN};
            Codec s = codec_fit(&c, x, 3);
            double m = amax[i] * (double)s.scale;
            CHECK_MSG(m <= f->max && m > f->max / 2 && s.scale == ldexpf(1, ilogbf(s.scale)),
                      "%s amax %g: scale %g puts it at %g", f->name, amax[i], s.scale, m);
        }
        float z[2] = {0, -0.0f}, inf[2] = {INFINITY, 2.0f}, tiny[1] = {1e-38f};
        CHECK(codec_fit(&c, z, 2).scale == 1.0f && codec_fit(&c, z, 0).scale == 1.0f);
        CHECK(codec_fit(&c, inf, 2).scale == codec_fit(&c, inf + 1, 1).scale);
        CHECK(codec_fit(&c, tiny, 1).scale == ldexpf(1, 120));
    }
    Codec e = codec_make(CODEC_E4M3, 1), h = codec_make(CODEC_E5M2, 1);
    float one = 1.0f;
    CHECK(codec_fit(&e, &one, 1).scale == 256.0f && codec_fit(&h, &one, 1).scale == 32768.0f);
    CHECK(codec_bytes(CODEC_E4M3, 1000) == 1004 && codec_bytes(CODEC_E5M2, 0) == 4 && codec_bytes(CODEC_BF16, 10) == 20 &&
          codec_bytes(CODEC_F32, 3) == 12 && codec_head_bytes(CODEC_F16) == 0);
}

/* The scale's floor: a finite message comes back finite. The largest magnitudes (E5M2's from
 * about 3.2e38, E4M3's from about 3.3e38, FLT_MAX itself) used to round up into the binade of
 * 2^128 and decode as +-Inf; the floor 2^(E-128) keeps the top code's value, 0.875 2^128, finite. */
static void test_fp8_scale_floor(void) {
    const float big[] = {2.9e38f, 3.0e38f, 3.2e38f, 3.25e38f, 3.3e38f, 3.35e38f, FLT_MAX};
    for (int k = 0; k < 2; k++) {
        const Fp8 *f = &fp8s[k];
        Codec c = codec_make(f->type, 1);
        CHECK_MSG(f->max / (double)codec_fit_scale(f->type, FLT_MAX) <= FLT_MAX,
                  "%s: the top code at the smallest scale decodes past FLT_MAX", f->name);
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
            float x[3] = {big[i], -big[i], 1.0f}, y[3];
            unsigned char msg[CODEC_HEAD_BYTES + 3];
            codec_encode(&c, x, msg, 3);
            codec_decode(&c, msg, y, 3);
            CHECK_MSG(isfinite(y[0]) && isfinite(y[1]) && y[0] >= 0.99f * 0x1.cp127f && y[1] == -y[0],
                      "%s: %g comes back as %g, %g", f->name, big[i], y[0], y[1]);
        }
    }
}

/* Bulk FP8: a message is the head (its scale) then the elements; decoding, decode_add and round
 * agree with the one-element helpers by that scale, at odd lengths and any alignment; the
 * message's pieces (head_put, encode_elems) write the same bytes as encode. */
static void test_fp8_bulk(void) {
    enum { N = 1001 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = malloc(N * sizeof *z);
    unsigned char *wire = malloc(N + 8), *w2 = malloc(N + 8);
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 2003 - 1001) * 1.37e-5f;
    x[17] = NAN;
    for (int k = 0; k < 2; k++) {
        const Fp8 *f = &fp8s[k];
        Codec c = codec_from_options(k ? "fp8e5m2" : "fp8e4m3", 1024); /* the loss scale ignored */
        CHECK(c.type == f->type && c.scale == 1.0f);
        codec_encode(&c, x, wire + 1, N);
        Codec s = codec_head_get(f->type, wire + 1);
        CHECK_MSG(s.scale == codec_fit(&c, x, N).scale && s.scale > 1, "%s: head %g", f->name, s.scale);
        codec_decode(&c, wire + 1, y, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float want = f->dec(f->enc(x[i] * s.scale)) * (1 / s.scale);
            bad += isnan(want) ? !isnan(y[i]) : u_of(y[i]) != u_of(want);
            bad += f->enc(x[i] * s.scale) != wire[1 + CODEC_HEAD_BYTES + i];
            z[i] = 0.5f;
        }
        CHECK_MSG(bad == 0, "%s: %d decoded values differ", f->name, bad);
        codec_decode_add(&c, wire + 1, z, N);
        bad = 0;
        for (int i = 0; i < N; i++) bad += i == 17 ? !isnan(z[i]) : z[i] != 0.5f + y[i];
        CHECK_MSG(bad == 0, "%s: decode_add", f->name);
        memcpy(z, x, N * sizeof *z);
        codec_round(&c, z, N);
        bad = 0;
        for (int i = 0; i < N; i++) bad += i == 17 ? !isnan(z[i]) : z[i] != y[i];
        CHECK_MSG(bad == 0, "%s: round = decode(encode)", f->name);
        codec_head_put(&s, w2);
        codec_encode_elems(&s, x, w2 + CODEC_HEAD_BYTES, 500);
        codec_encode_elems(&s, x + 500, w2 + CODEC_HEAD_BYTES + 500, N - 500);
        CHECK_MSG(!memcmp(w2, wire + 1, codec_bytes(f->type, N)), "%s: pieces differ from the message", f->name);
        /* a magnitude past the format's max travels unsaturated: the scale brings it in */
        float big[2] = {1.0e6f, -3.0f}, back[2];
        codec_encode(&c, big, w2, 2);
        codec_decode(&c, w2, back, 2);
        CHECK_MSG(back[0] == f->dec(f->enc(1.0e6f * codec_fit(&c, big, 2).scale)) / codec_fit(&c, big, 2).scale &&
                      fabsf(back[0] - 1.0e6f) <= 0.0625f * 1.0e6f,
                  "%s: %g", f->name, back[0]);
    }
    free(x), free(y), free(z), free(wire), free(w2);
}

static void test_parse(void) {
    CodecType t;
    CHECK(codec_parse("bf16", &t) == 0 && t == CODEC_BF16);
    CHECK(codec_parse("fp16", &t) == 0 && t == CODEC_F16);
    CHECK(codec_parse("fp32", &t) == 0 && t == CODEC_F32);
    CHECK(codec_parse("fp8", &t) != 0);
    CHECK(codec_parse("fp8e4m3", &t) == 0 && t == CODEC_E4M3 && !strcmp(codec_name(t), "fp8e4m3"));
    CHECK(codec_parse("fp8e5m2", &t) == 0 && t == CODEC_E5M2 && !strcmp(codec_name(t), "fp8e5m2"));
    CHECK(codec_elem_bytes(CODEC_E4M3) == 1 && codec_elem_bytes(CODEC_E5M2) == 1);
    CHECK(codec_parse(NULL, &t) != 0);
    CHECK(codec_elem_bytes(CODEC_BF16) == 2 && codec_elem_bytes(CODEC_F32) == 4);
    Codec c = codec_from_options("fp32", 1024);
    CHECK(c.type == CODEC_F32 && c.scale == 1.0f); /* fp32 never scales */
}

int main(void) {
    RUN(test_bf16_round_trip);
    RUN(test_bf16_rounding);
    RUN(test_f16_round_trip);
    RUN(test_f16_rounding);
    RUN(test_bulk);
    RUN(test_fp8_codes);
    RUN(test_fp8_rounding);
    RUN(test_fp8_scale);
    RUN(test_fp8_scale_floor);
    RUN(test_fp8_bulk);
    RUN(test_parse);
    return test_summary("test_codec");
}
