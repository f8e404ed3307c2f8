/* codec.h - the number formats gradients travel in (--wire fp32|bf16|fp16|fp8e4m3|fp8e5m2): rounding to 16 or 8 bits, static loss scaling, FP8's scale per message, decoding back to fp32 */
#ifndef RS_CODEC_H
#define RS_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- Types ---- */

/* What one element on the wire is. */
typedef enum {
    CODEC_F32 = 0,  /* IEEE binary32: the message is the floats themselves */
    CODEC_BF16 = 1, /* bfloat16: binary32's top 16 bits, rounded to nearest even (8 exponent bits,
                     * 8 significant bits: fp32's range, about 2-3 decimal digits) */
    CODEC_F16 = 2,  /* IEEE binary16, rounded to nearest even (5 exponent bits, 11 significant
                     * bits: finite up to 65504, subnormal below 6.1e-5, zero below 3.0e-8) */
    CODEC_E4M3 = 3, /* OCP FP8 E4M3 (bias 7, 4 significant bits): finite up to 448, no infinities,
                     * S.1111.111 the NaN, subnormal below 2^-6; encoding saturates */
    CODEC_E5M2 = 4, /* OCP FP8 E5M2 (bias 15, 3 significant bits): finite up to 57344, subnormal
                     * below 2^-14; encoding saturates (finite overflow and +-Inf give +-57344) */
} CodecType;

/* An FP8 message's head: its scale, an fp32 power of two, ahead of the elements. */
#define CODEC_HEAD_BYTES 4

/* How a back end turns fp32 gradients into wire elements and back: encode writes
 * round(x * scale), decode reads y / scale (as y * (1 / scale): exact, since scale is a power of
 * two). A rank encodes what it sends and decodes (or decodes and adds, in fp32) what it
 * receives; sums are never kept in 16 or 8 bits. Parameters travel with scale 1.
 * FP8 messages carry their own scale: encode picks the power of two that maps the message's
 * largest finite magnitude at or just below the format's max (codec_fit) and writes it as a
 * CODEC_HEAD_BYTES head ahead of the elements; decode reads it back. The Codec's own scale is
 * then 1 (no --loss-scale) except in a fitted Codec (codec_fit), which the _elems calls use. */
typedef struct {
    CodecType type;
    float scale; /* static loss scale (--loss-scale), a power of two; 1: none */
} Codec;

/* ---- Inline helpers (one element) ---- */

/* fp32 -> bf16, round to nearest even; NaN stays NaN (quiet), +-Inf stays, overflow rounds to Inf. */
static inline uint16_t codec_f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* bf16 -> fp32 (exact). */
static inline float codec_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* fp32 -> IEEE binary16, round to nearest even, subnormals kept; NaN stays NaN (quiet), overflow
 * (|x| >= 65520) and Inf give Inf. */
static inline uint16_t codec_f32_to_f16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and Inf): Inf */
    if (a < 0x38800000u) {                                     /* below 2^-14: a subnormal (or 0) */
        if (a < 0x33000000u) return (uint16_t)sign;            /* below 2^-25: rounds to 0 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u, e = a >> 23; /* value m * 2^(e - 150) */
        uint32_t shift = 126u - e;                             /* to units of 2^-24: 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias the exponent (127 -> 15), round the 13 dropped bits to nearest even (a
     * carry into the exponent is the right result, up to 0x7c00 = Inf excluded above) */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

/* IEEE binary16 -> fp32 (exact). */
static inline float codec_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1fu) u = sign | 0x7f800000u | (m << 13); /* Inf, NaN */
    else if (e) u = sign | ((e + 112u) << 23) | (m << 13);
    else if (!m) u = sign;
    else { /* subnormal: m * 2^-24, normalised */
        uint32_t s = 0;
        while (!(m & 0x400u)) m <<= 1, s++;
        u = sign | ((113u - s) << 23) | ((m & 0x3ffu) << 13);
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Round-to-nearest-even of an fp32 already multiplied by the scale into an OCP FP8 code with M
 * mantissa bits and bias B, saturating at the largest finite code top (|x| beyond it, +-Inf
 * too, give +-top); nan is the format's NaN code (sign kept). Subnormals kept. */
static inline uint8_t codec_f32_to_fp8(float x, int M, int B, uint32_t top, uint32_t nan) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu, q;
    if (a > 0x7f800000u) return (uint8_t)(sign | nan);
    if (a >= (uint32_t)(127 - B + (int)(top >> M) + 1) << 23) return (uint8_t)(sign | top); /* past the top binade */
    if (a < (uint32_t)(128 - B) << 23) { /* below the smallest normal 2^(1-B): units of 2^(1-B-M) */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | (e ? 0x800000u : 0u); /* x = m 2^(max(e,1) - 150) */
        uint32_t shift = 151u - (e ? e : 1u) - (uint32_t)(B + M);
        if (shift >= 25u) return (uint8_t)sign; /* below half the smallest subnormal (m < 2^24) */
        q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
    } else { /* rebias, round the dropped bits to nearest even (a carry into the exponent is right) */
        uint32_t r = a - ((uint32_t)(127 - B) << 23), d = 23u - (uint32_t)M;
        r += (1u << (d - 1u)) - 1u + ((r >> d) & 1u);
        q = r >> d;
    }
    return (uint8_t)(sign | (q > top ? top : q));
}

/* An OCP FP8 code (M mantissa bits, bias B) -> fp32, exact; e4m3 says which NaN rule: E4M3's
 * S.1111.111 alone, or E5M2's IEEE-style all-ones exponent (mantissa 0: Inf). */
static inline float codec_fp8_to_f32(uint8_t h, int M, int B, int e4m3) {
    uint32_t sign = (uint32_t)(h & 0x80u) << 24, e = (h & 0x7fu) >> M, m = h & ((1u << M) - 1u), u;
    if (e4m3 ? (h & 0x7fu) == 0x7fu : e == 0x1fu) u = sign | 0x7f800000u | (m ? 0x400000u : 0u);
    else if (e) u = sign | ((e + 127u - (uint32_t)B) << 23) | (m << (23 - M));
    else if (!m) u = sign;
    else { /* subnormal: m * 2^(1-B-M), normalised */
        uint32_t s = 0;
        while (!(m & (1u << M))) m <<= 1, s++;
        u = sign | ((128u - (uint32_t)B - s) << 23) | ((m & ((1u << M) - 1u)) << (23 - M));
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* fp32 -> E4M3 (round to nearest even, saturating at +-448, NaN -> S.1111.111). */
static inline uint8_t codec_f32_to_e4m3(float x) { return codec_f32_to_fp8(x, 3, 7, 0x7eu, 0x7fu); }

/* E4M3 -> fp32 (exact). */
static inline float codec_e4m3_to_f32(uint8_t h) { return codec_fp8_to_f32(h, 3, 7, 1); }

/* fp32 -> E5M2 (round to nearest even, saturating at +-57344, +-Inf too; NaN -> S.11111.10). */
static inline uint8_t codec_f32_to_e5m2(float x) { return codec_f32_to_fp8(x, 2, 15, 0x7bu, 0x7eu); }

/* E5M2 -> fp32 (exact). */
static inline float codec_e5m2_to_f32(uint8_t h) { return codec_fp8_to_f32(h, 2, 15, 0); }

/* ---- Prototypes ---- */

/* Parses "fp32", "bf16", "fp16", "fp8e4m3" or "fp8e5m2" into *out: 0, or -1 for anything else. */
int codec_parse(const char *name, CodecType *out);

/* "fp32", "bf16", "fp16", "fp8e4m3" or "fp8e5m2" ("?" otherwise). */
const char *codec_name(CodecType t);

/* 1 for the FP8 types (a scale per message, 1 byte an element). */
static inline int codec_is_fp8(CodecType t) { return t == CODEC_E4M3 || t == CODEC_E5M2; }

/* Bytes of one wire element: 4, 2 or 1. */
static inline size_t codec_elem_bytes(CodecType t) { return t == CODEC_F32 ? 4 : codec_is_fp8(t) ? 1 : 2; }

/* Bytes of a message's head: CODEC_HEAD_BYTES for FP8 (its scale), else 0. */
static inline size_t codec_head_bytes(CodecType t) { return codec_is_fp8(t) ? CODEC_HEAD_BYTES : 0; }

/* Bytes one encoded message of n elements takes on the wire: its head and its elements (every
 * size on the wire is computed here). */
static inline size_t codec_bytes(CodecType t, size_t n) { return codec_head_bytes(t) + n * codec_elem_bytes(t); }

/* What one fp32 byte of gradient weighs on the wire for the cost models, a push and a reply
 * averaged: 1 (fp32), 0.5 (16 bits), 0.25 (FP8), except where a parameter server answers an FP8
 * push with bf16 parameters (ps 1): (1 + 2) / 8 = 0.375. FP8's 4-byte head a message is left out
 * (the models count bytes by the bucket, not by the message). wire: a --wire name; fp32 for any
 * other. */
double codec_wire_ratio(const char *wire, int ps);

/* The format's largest finite value (448, 57344, 65504; FLT_MAX for bf16 / fp32). */
float codec_max(CodecType t);

/* A codec of type t and scale (1 for parameters). */
static inline Codec codec_make(CodecType t, float scale) {
    Codec c = {t, scale > 0 ? scale : 1.0f};
    return c;
}

/* The codec parameters travel in beside gradients of type t (scale 1): t itself, but bf16 under
 * FP8, which is a gradient format (a server's replies, DataParallel's replicate). */
static inline Codec codec_param(CodecType t) { return codec_make(codec_is_fp8(t) ? CODEC_BF16 : t, 1.0f); }

/* The gradient codec a run's options give (--wire, --loss-scale; FP8 ignores the loss scale,
 * which config_validate refuses with it). wire must have passed
 * codec_parse (config_validate): anything else is fp32. */
Codec codec_from_options(const char *wire, double loss_scale);

/* The codec one message of src[0..n) travels in: for FP8, c's type with the power of two
 * 2^k that puts the largest finite |src[i]| at or just below codec_max (k within [E - 128, 120],
 * codec_fit_scale; 1 when no element is finite and nonzero); any other type, *c itself. */
Codec codec_fit(const Codec *c, const float *src, size_t n);

/* codec_fit's scale for an FP8 type t (CODEC_E4M3, or CODEC_E5M2 for any other) from the largest
 * finite magnitude alone: the power of two 2^k that puts amax at or just below codec_max(t) =
 * 0.875 2^E (E 9 or 16), k within [E - 128, 120], so that the top code decodes finite (0.875 2^128:
 * an amax above it saturates there rather than coming back as Inf); 1 when amax is 0 or not
 * finite. (kernels' fp8_scale is its device twin.) */
float codec_fit_scale(CodecType t, float amax);

/* Writes one message of n elements at dst (any alignment): codec_bytes(c->type, n) bytes, for
 * FP8 the head (codec_fit's scale) then the elements, else the elements of src * scale. Never
 * fails. */
void codec_encode(const Codec *c, const float *src, void *dst, size_t n);

/* dst[i] = element i of the message at src (any alignment) / its scale (FP8: the head's). */
void codec_decode(const Codec *c, const void *src, float *dst, size_t n);

/* dst[i] += element i of the message at src / its scale, in fp32. */
void codec_decode_add(const Codec *c, const void *src, float *dst, size_t n);

/* x[i] = what encoding x[0..n) as one message then decoding gives: the value a receiver of it
 * sees (so a rank that keeps its own copy holds the same bits as the ranks it sent it to).
 * No-op for fp32. */
void codec_round(const Codec *c, float *x, size_t n);

/* The pieces of a message, for a sender that writes one in parts (a wrapping lane) or a twin
 * of the kernels: the head of fitted codec f (nothing unless FP8), the scale a head at src gives
 * (read as a Codec of type t), and n bare elements by f's scale (no head), decoded with add 0 or
 * added into dst with add 1. */
void codec_head_put(const Codec *f, void *dst);
Codec codec_head_get(CodecType t, const void *src);
void codec_encode_elems(const Codec *f, const float *src, void *dst, size_t n);
void codec_decode_elems(const Codec *f, const void *src, float *dst, size_t n, int add);

#endif
