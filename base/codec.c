/* codec.c - bulk rounding of fp32 gradients to bf16 / fp16 / FP8 for the wire (FP8 with a scale per message), and decoding back (base/codec.h) */
#include "codec.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

int codec_parse(const char *name, CodecType *out) {
    if (!name) return -1;
    if (!strcmp(name, "fp32")) *out = CODEC_F32;
    else if (!strcmp(name, "bf16")) *out = CODEC_BF16;
    else if (!strcmp(name, "fp16")) *out = CODEC_F16;
    else if (!strcmp(name, "fp8e4m3")) *out = CODEC_E4M3;
    else if (!strcmp(name, "fp8e5m2")) *out = CODEC_E5M2;
    else return -1;
    return 0;
}

const char *codec_name(CodecType t) {
    return t == CODEC_F32    ? "fp32"
           : t == CODEC_BF16 ? "bf16"
           : t == CODEC_F16  ? "fp16"
           : t == CODEC_E4M3 ? "fp8e4m3"
           : t == CODEC_E5M2 ? "fp8e5m2"
                             : "?";
}

double codec_wire_ratio(const char *wire, int ps) {
    CodecType t = CODEC_F32;
    if (codec_parse(wire, &t) != 0) return 1.0;
    double up = (double)codec_elem_bytes(t), down = ps ? (double)codec_elem_bytes(codec_param(t).type) : up;
    return (up + down) / 8.0; /* the gradient up, and back down the sum or (ps) the parameters */
}

float codec_max(CodecType t) {
    return t == CODEC_E4M3 ? 448.0f : t == CODEC_E5M2 ? 57344.0f : t == CODEC_F16 ? 65504.0f : FLT_MAX;
}

Codec codec_fit(const Codec *c, const float *src, size_t n) {
    if (!codec_is_fp8(c->type)) return *c;
    float m[8] = {0}, amax = 0; /* the largest finite magnitude, 8 lanes at a time (maxps) */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t u[8];
        float a[8];
        memcpy(u, src + i, sizeof u);
        for (int j = 0; j < 8; j++) u[j] = (u[j] & 0x7fffffffu) < 0x7f800000u ? u[j] & 0x7fffffffu : 0; /* NaN, Inf: 0 */
        memcpy(a, u, sizeof a);
        for (int j = 0; j < 8; j++) m[j] = a[j] > m[j] ? a[j] : m[j];
    }
    for (; i < n; i++) {
        float a = fabsf(src[i]);
        m[0] = a <= FLT_MAX && a > m[0] ? a : m[0];
    }
    for (int j = 0; j < 8; j++) amax = m[j] > amax ? m[j] : amax;
    return codec_make(c->type, codec_fit_scale(c->type, amax));
}

float codec_fit_scale(CodecType t, float amax) {
    int e = 0, k = 0;
    if (amax > 0 && amax <= FLT_MAX) { /* amax = f 2^e, f in [0.5, 1); max = 0.875 2^E: amax 2^k <= max for the largest k */
        float f = frexpf(amax, &e);
        int E = t == CODEC_E4M3 ? 9 : 16;
        k = E - e - (f > 0.875f);
        /* at least E - 128: the top code then decodes to 0.875 2^128, finite; below it a magnitude
         * past 0.9375 2^128 rounded up to 2^(E-k) and came back as Inf (above it amax saturates) */
        k = k < E - 128 ? E - 128 : k > 120 ? 120 : k;
    }
    return ldexpf(1.0f, k);
}

void codec_head_put(const Codec *f, void *dst) {
    if (codec_is_fp8(f->type)) memcpy(dst, &f->scale, CODEC_HEAD_BYTES);
}

Codec codec_head_get(CodecType t, const void *src) {
    float s = 1.0f;
    if (codec_is_fp8(t)) memcpy(&s, src, CODEC_HEAD_BYTES);
    if (!(s > 0 && s <= FLT_MAX)) s = 1.0f; /* never a scale that makes decoding meaningless */
    return codec_make(t, s);
}

Codec codec_from_options(const char *wire, double loss_scale) {
    CodecType t = CODEC_F32;
    if (codec_parse(wire, &t) != 0) t = CODEC_F32;
    return codec_make(t, t == CODEC_F32 || codec_is_fp8(t) ? 1.0f : (float)loss_scale); /* FP8: a scale per message */
}

/* Elements go through small aligned blocks (memcpy to and from the unaligned wire), so that the
 * compiler vectorises the conversions. */
#define CODEC_BLOCK 64

/* Bulk FP8 encoding, branch-free so that it vectorises: the same codes as codec_f32_to_fp8
 * (held against it by test_codec). A magnitude below the smallest normal is rounded by one float
 * add: |x| + 2^(23 + 1-B-M) puts the subnormal quantum 2^(1-B-M) at the sum's last bit, so the
 * add's own round-to-nearest-even gives the code (the sum's bits minus the constant's); a normal
 * one is rebiased and rounded in integers; past the top, the top; NaN, the NaN code. One loop
 * with no branch (the conditions combined with | rather than ||) and the bits moved by 4-byte
 * memcpy, which the compiler folds into a register move: GCC vectorises it (the Makefile builds
 * this file with -fno-trapping-math, which changes no value); on x86-64 it is built twice, for
 * AVX2 and the baseline, and the loader picks the one the CPU runs (target_clones), so the
 * binary still runs where AVX2 is missing (not under ThreadSanitizer or AddressSanitizer, whose
 * runtimes are not up yet when the loader runs a clone's resolver). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define CODEC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CODEC_CLONES
#endif
#define CODEC_FP8_BULK(NAME, M, B, TOP, NANC)                                                              \
    CODEC_CLONES static void NAME(const float *src, float s, unsigned char *out, size_t k) {             \
        const float magic = (float)(1u << (23 + 1 - (B) - (M)));                                          \
        int32_t mbits;                                                                                    \
        memcpy(&mbits, &magic, sizeof mbits);                                                             \
        for (size_t j = 0; j < k; j++) {                                                                  \
            float x = src[j] * s, ax, sum;                                                                \
            uint32_t u, au;                                                                               \
            int32_t sb;                                                                                   \
            memcpy(&u, &x, sizeof u);                                                                     \
            au = u & 0x7fffffffu;                                                                         \
            memcpy(&ax, &au, sizeof ax);                                                                  \
            sum = ax + magic;                                                                             \
            memcpy(&sb, &sum, sizeof sb);                                                                 \
            int32_t a = (int32_t)au; /* in int32: every magnitude is below 2^31 (SSE2 compares) */       \
            int32_t r = a - ((127 - (B)) << 23);                                                          \
            r += (1 << (22 - (M))) - 1 + ((r >> (23 - (M))) & 1);                                         \
            int32_t q = a < ((128 - (B)) << 23) ? sb - mbits : r >> (23 - (M));                           \
            q = (a >= ((127 - (B) + ((TOP) >> (M)) + 1) << 23)) | (q > (TOP)) ? (TOP) : q;                \
            q = a > 0x7f800000 ? (NANC) : q;                                                              \
            out[j] = (unsigned char)(((u >> 24) & 0x80u) | (uint32_t)q);                                  \
        }                                                                                                 \
    }
CODEC_FP8_BULK(codec_e4m3_bulk, 3, 7, 0x7e, 0x7f)
CODEC_FP8_BULK(codec_e5m2_bulk, 2, 15, 0x7b, 0x7e)

/* Decoding tables: every code's fp32 value, [0] E4M3 and [1] E5M2, filled once. */
static float codec_fp8_tab[2][256];
static pthread_once_t codec_fp8_once = PTHREAD_ONCE_INIT;

static void codec_fp8_fill(void) {
    for (int h = 0; h < 256; h++) {
        codec_fp8_tab[0][h] = codec_e4m3_to_f32((uint8_t)h);
        codec_fp8_tab[1][h] = codec_e5m2_to_f32((uint8_t)h);
    }
}

void codec_encode_elems(const Codec *c, const float *src, void *dst, size_t n) {
    unsigned char *out = dst;
    if (c->type == CODEC_F32 && c->scale == 1.0f) {
        memcpy(out, src, n * sizeof(float));
        return;
    }
    const float s = c->scale;
    for (size_t i = 0; i < n; i += CODEC_BLOCK) {
        size_t k = n - i < CODEC_BLOCK ? n - i : CODEC_BLOCK;
        if (c->type == CODEC_F32) {
            float v[CODEC_BLOCK];
            for (size_t j = 0; j < k; j++) v[j] = src[i + j] * s;
            memcpy(out + i * 4, v, k * 4);
            continue;
        }
        if (codec_is_fp8(c->type)) {
            if (c->type == CODEC_E4M3) codec_e4m3_bulk(src + i, s, out + i, k);
            else codec_e5m2_bulk(src + i, s, out + i, k);
            continue;
        }
        uint16_t h[CODEC_BLOCK];
        if (c->type == CODEC_BF16)
            for (size_t j = 0; j < k; j++) h[j] = codec_f32_to_bf16(src[i + j] * s);
        else
            for (size_t j = 0; j < k; j++) h[j] = codec_f32_to_f16(src[i + j] * s);
        memcpy(out + i * 2, h, k * 2);
    }
}

void codec_encode(const Codec *c, const float *src, void *dst, size_t n) {
    if (!codec_is_fp8(c->type)) {
        codec_encode_elems(c, src, dst, n);
        return;
    }
    Codec f = codec_fit(c, src, n);
    codec_head_put(&f, dst);
    codec_encode_elems(&f, src, (unsigned char *)dst + CODEC_HEAD_BYTES, n);
}

/* Decodes one block of k <= CODEC_BLOCK elements at in into v (unscaled). */
static void codec_block(CodecType t, const unsigned char *in, float *v, size_t k) {
    if (t == CODEC_F32) {
        memcpy(v, in, k * 4);
        return;
    }
    if (codec_is_fp8(t)) {
        pthread_once(&codec_fp8_once, codec_fp8_fill);
        const float *tab = codec_fp8_tab[t == CODEC_E5M2];
        for (size_t j = 0; j < k; j++) v[j] = tab[in[j]];
        return;
    }
    uint16_t h[CODEC_BLOCK];
    memcpy(h, in, k * 2);
    if (t == CODEC_BF16)
        for (size_t j = 0; j < k; j++) v[j] = codec_bf16_to_f32(h[j]);
    else
        for (size_t j = 0; j < k; j++) v[j] = codec_f16_to_f32(h[j]);
}

/* dst[i] = (add ? dst[i] : 0) + element i / scale, the division as a multiply by 1 / scale
 * rounded before the add (this file is built without floating-point contraction, so no fused
 * multiply-add changes the bits between decode-then-add and decode_add). */
static void codec_decode_into(const Codec *c, const void *src, float *dst, size_t n, int add) {
    const unsigned char *in = src;
    const size_t eb = codec_elem_bytes(c->type);
    const float inv = 1.0f / c->scale;
    if (c->type == CODEC_F32 && inv == 1.0f) { /* the floats themselves, at any alignment */
        if (!add) {
            memmove(dst, src, n * sizeof(float)); /* one copy, not two a block */
            return;
        }
        size_t i = 0;
        for (; i + 8 <= n; i += 8) { /* 8 at a time through memcpy: vector loads and adds */
            float v[8];
            memcpy(v, in + i * sizeof(float), sizeof v);
            for (int j = 0; j < 8; j++) dst[i + j] += v[j];
        }
        for (; i < n; i++) {
            float v;
            memcpy(&v, in + i * sizeof(float), sizeof v);
            dst[i] += v;
        }
        return;
    }
    for (size_t i = 0; i < n; i += CODEC_BLOCK) {
        size_t k = n - i < CODEC_BLOCK ? n - i : CODEC_BLOCK;
        float v[CODEC_BLOCK];
        codec_block(c->type, in + i * eb, v, k);
        if (inv != 1.0f)
            for (size_t j = 0; j < k; j++) v[j] *= inv;
        if (add)
            for (size_t j = 0; j < k; j++) dst[i + j] += v[j];
        else
            memcpy(dst + i, v, k * sizeof(float));
    }
}

void codec_decode_elems(const Codec *f, const void *src, float *dst, size_t n, int add) {
    codec_decode_into(f, src, dst, n, add);
}

/* A whole message: FP8's elements by the head's scale. */
static void codec_decode_msg(const Codec *c, const void *src, float *dst, size_t n, int add) {
    if (!codec_is_fp8(c->type) || n == 0) {
        codec_decode_into(c, src, dst, n, add);
        return;
    }
    Codec f = codec_head_get(c->type, src);
    codec_decode_into(&f, (const unsigned char *)src + CODEC_HEAD_BYTES, dst, n, add);
}

void codec_decode(const Codec *c, const void *src, float *dst, size_t n) { codec_decode_msg(c, src, dst, n, 0); }

void codec_decode_add(const Codec *c, const void *src, float *dst, size_t n) { codec_decode_msg(c, src, dst, n, 1); }

void codec_round(const Codec *c, float *x, size_t n) {
    if (c->type == CODEC_F32 && c->scale == 1.0f) return;
    Codec f = codec_fit(c, x, n); /* the scale the message of all n would carry */
    for (size_t i = 0; i < n; i += CODEC_BLOCK) {
        size_t k = n - i < CODEC_BLOCK ? n - i : CODEC_BLOCK;
        unsigned char w[CODEC_BLOCK * 4];
        codec_encode_elems(&f, x + i, w, k);
        codec_decode_into(&f, w, x + i, k, 0);
    }
}
