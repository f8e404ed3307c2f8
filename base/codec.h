/* codec.h - the number formats gradients travel in (--wire fp32|bf16|fp16): rounding to 16 bits, static loss scaling, decoding back to fp32 */
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
} CodecType;

/* How a back end turns fp32 gradients into wire elements and back: encode writes
 * round(x * scale), decode reads y / scale (as y * (1 / scale): exact, since scale is a power of
 * two). A rank encodes what it sends and decodes (or decodes and adds, in fp32) what it
 * receives; sums are never kept in 16 bits. Parameters travel with scale 1. */
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

/* ---- Prototypes ---- */

/* Parses "fp32", "bf16" or "fp16" into *out: 0, or -1 for anything else. */
int codec_parse(const char *name, CodecType *out);

/* "fp32", "bf16" or "fp16" ("?" otherwise). */
const char *codec_name(CodecType t);

/* Bytes of one wire element: 4 or 2. */
static inline size_t codec_elem_bytes(CodecType t) { return t == CODEC_F32 ? 4 : 2; }

/* A codec of type t and scale (1 for parameters). */
static inline Codec codec_make(CodecType t, float scale) {
    Codec c = {t, scale > 0 ? scale : 1.0f};
    return c;
}

/* The gradient codec a run's options give (--wire, --loss-scale). wire must have passed
 * codec_parse (config_validate): anything else is fp32. */
Codec codec_from_options(const char *wire, double loss_scale);

/* Writes n elements of c->type at dst (any alignment) from src * scale; never fails. */
void codec_encode(const Codec *c, const float *src, void *dst, size_t n);

/* dst[i] = element i at src (any alignment) / scale. */
void codec_decode(const Codec *c, const void *src, float *dst, size_t n);

/* dst[i] += element i at src / scale, in fp32. */
void codec_decode_add(const Codec *c, const void *src, float *dst, size_t n);

/* x[i] = what encoding then decoding x[i] gives: the value a receiver of x sees (so a rank that
 * keeps its own copy holds the same bits as the ranks it sent it to). No-op for fp32. */
void codec_round(const Codec *c, float *x, size_t n);

#endif
