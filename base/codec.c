/* codec.c - bulk rounding of fp32 gradients to bf16 / fp16 for the wire, and decoding back (base/codec.h) */
#include "codec.h"

#include <math.h>

int codec_parse(const char *name, CodecType *out) {
    if (!name) return -1;
    if (!strcmp(name, "fp32")) *out = CODEC_F32;
    else if (!strcmp(name, "bf16")) *out = CODEC_BF16;
    else if (!strcmp(name, "fp16")) *out = CODEC_F16;
    else return -1;
    return 0;
}

const char *codec_name(CodecType t) {
    return t == CODEC_F32 ? "fp32" : t == CODEC_BF16 ? "bf16" : t == CODEC_F16 ? "fp16" : "?";
}

Codec codec_from_options(const char *wire, double loss_scale) {
    CodecType t = CODEC_F32;
    if (codec_parse(wire, &t) != 0) t = CODEC_F32;
    return codec_make(t, t == CODEC_F32 ? 1.0f : (float)loss_scale);
}

/* Elements go through small aligned blocks (memcpy to and from the unaligned wire), so that the
 * compiler vectorises the conversions. */
#define CODEC_BLOCK 64

void codec_encode(const Codec *c, const float *src, void *dst, size_t n) {
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
        uint16_t h[CODEC_BLOCK];
        if (c->type == CODEC_BF16)
            for (size_t j = 0; j < k; j++) h[j] = codec_f32_to_bf16(src[i + j] * s);
        else
            for (size_t j = 0; j < k; j++) h[j] = codec_f32_to_f16(src[i + j] * s);
        memcpy(out + i * 2, h, k * 2);
    }
}

/* Decodes one block of k <= CODEC_BLOCK elements at in into v (unscaled). */
static void codec_block(CodecType t, const unsigned char *in, float *v, size_t k) {
    if (t == CODEC_F32) {
        memcpy(v, in, k * 4);
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

void codec_decode(const Codec *c, const void *src, float *dst, size_t n) { codec_decode_into(c, src, dst, n, 0); }

void codec_decode_add(const Codec *c, const void *src, float *dst, size_t n) { codec_decode_into(c, src, dst, n, 1); }

void codec_round(const Codec *c, float *x, size_t n) {
    if (c->type == CODEC_F32 && c->scale == 1.0f) return;
    for (size_t i = 0; i < n; i += CODEC_BLOCK) {
        size_t k = n - i < CODEC_BLOCK ? n - i : CODEC_BLOCK;
        unsigned char w[CODEC_BLOCK * 4];
        codec_encode(c, x + i, w, k);
        codec_decode(c, w, x + i, k);
    }
}
