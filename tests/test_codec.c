/* test_codec.c - the wire's number formats: bf16 and fp16 rounding against exact references, decoding, loss scaling */
#include "test.h"
#include "../base/codec.h"

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

static void test_parse(void) {
    CodecType t;
    CHECK(codec_parse("bf16", &t) == 0 && t == CODEC_BF16);
    CHECK(codec_parse("fp16", &t) == 0 && t == CODEC_F16);
    CHECK(codec_parse("fp32", &t) == 0 && t == CODEC_F32);
    CHECK(codec_parse("fp8", &t) != 0);
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
    RUN(test_parse);
    return test_summary("test_codec");
}
