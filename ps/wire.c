/* wire.c - encode, decode and check the parameter server's header frame (the protocol, apart from the transport) */
#include "wire.h"
#include "../base/codec.h"
#include "../base/hash.h"

#include <string.h>

/* ---- little-endian field access (no alignment assumed) ---- */

static void put16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- the header ---- */

WireHeader wire_header(uint64_t token, WireOp op) {
    WireHeader h;
    memset(&h, 0, sizeof h);
    h.magic = WIRE_MAGIC;
    h.version = WIRE_VERSION;
    h.op = (uint16_t)op;
    h.token = token;
    h.dtype = WIRE_F32;
    return h;
}

void wire_encode(const WireHeader *h, unsigned char *out) {
    put32(out + 0, h->magic);
    put16(out + 4, h->version);
    put16(out + 6, h->op);
    put64(out + 8, h->token);
    put32(out + 16, h->step);
    put32(out + 20, h->bucket);
    put64(out + 24, h->offset);
    put64(out + 32, h->count);
    put64(out + 40, h->total);
    put16(out + 48, h->dtype);
    put16(out + 50, h->sender);
    put32(out + 52, h->samples);
}

int wire_op_has_payload(int op) {
    return op == WIRE_INIT || op == WIRE_PUSH || op == WIRE_PARAMS || op == WIRE_SUM || op == WIRE_SUMMED ||
           op == WIRE_ABORT || op == WIRE_BATCH || op == WIRE_LOGITS || op == WIRE_DLOGITS;
}

int wire_op_may_be_empty(int op) { return op == WIRE_BATCH || op == WIRE_LOGITS || op == WIRE_DLOGITS; }

WireErr wire_decode(const void *buf, size_t len, WireHeader *h) {
    const unsigned char *p = buf;
    if (!buf || len != WIRE_HEADER_BYTES) return WIRE_E_SIZE;
    h->magic = get32(p + 0);
    h->version = get16(p + 4);
    h->op = get16(p + 6);
    h->token = get64(p + 8);
    h->step = get32(p + 16);
    h->bucket = get32(p + 20);
    h->offset = get64(p + 24);
    h->count = get64(p + 32);
    h->total = get64(p + 40);
    h->dtype = get16(p + 48);
    h->sender = get16(p + 50);
    h->samples = get32(p + 52);
    if (h->magic != WIRE_MAGIC) return WIRE_E_MAGIC;
    if (h->version != WIRE_VERSION) return WIRE_E_VERSION;
    if (h->op < 1 || h->op >= WIRE_NOPS) return WIRE_E_OP;
    if (!wire_dtype_allowed(h->op, h->dtype)) return WIRE_E_DTYPE;
    return WIRE_OK;
}

size_t wire_dtype_bytes(int dtype) {
    return dtype == WIRE_F32                           ? 4
           : dtype == WIRE_BF16 || dtype == WIRE_F16   ? 2
           : dtype == WIRE_TEXT                        ? 1
           : dtype == WIRE_E4M3 || dtype == WIRE_E5M2 ? 1
                                                       : 0;
}

int wire_dtype_allowed(int op, int dtype) {
    if (op == WIRE_ABORT) return dtype == WIRE_TEXT;
    if (op == WIRE_PUSH && (dtype == WIRE_E4M3 || dtype == WIRE_E5M2)) return 1; /* FP8: gradients only */
    if (op == WIRE_INIT || op == WIRE_PUSH || op == WIRE_PARAMS || op == WIRE_SUM || op == WIRE_SUMMED)
        return dtype == WIRE_F32 || dtype == WIRE_BF16 || dtype == WIRE_F16;
    return dtype == WIRE_F32;
}

WireDtype wire_dtype_of(int codec_type) {
    return codec_type == CODEC_BF16   ? WIRE_BF16
           : codec_type == CODEC_F16  ? WIRE_F16
           : codec_type == CODEC_E4M3 ? WIRE_E4M3
           : codec_type == CODEC_E5M2 ? WIRE_E5M2
                                      : WIRE_F32;
}

size_t wire_payload_bytes(const WireHeader *h) {
    size_t el = wire_dtype_bytes(h->dtype), head = h->dtype == WIRE_E4M3 || h->dtype == WIRE_E5M2 ? CODEC_HEAD_BYTES : 0;
    if (el && h->count > (SIZE_MAX - head) / el) return 0;
    return head + (size_t)h->count * el;
}

WireErr wire_check(const WireHeader *h, uint64_t token, int has_payload, size_t payload_bytes) {
    if (h->token != token) return WIRE_E_TOKEN;
    if (wire_op_may_be_empty(h->op) && h->count == 0) {
        if (has_payload) return WIRE_E_PAYLOAD;
    } else if (wire_op_has_payload(h->op)) {
        size_t el = wire_dtype_bytes(h->dtype);
        if (!el || !has_payload || h->count == 0 || h->count > (SIZE_MAX - 8) / el || payload_bytes != wire_payload_bytes(h))
            return WIRE_E_PAYLOAD;
    } else if (has_payload || h->count != 0) {
        return WIRE_E_PAYLOAD;
    }
    return WIRE_OK;
}

uint64_t wire_token(const char *text) {
    return hash_text(HASH_FNV_INIT, text);
}

const char *wire_op_name(int op) {
    static const char *names[WIRE_NOPS] = {"?",      "init",   "pull",  "push",  "step",   "params", "sum",
                                            "summed", "bye",    "abort", "batch", "logits", "dlogits"};
    return op > 0 && op < WIRE_NOPS ? names[op] : "?";
}

const char *wire_strerror(WireErr e) {
    static const char *names[WIRE_NERRS] = {"ok", "bad header size", "bad magic", "bad version", "unknown op",
                                            "bad dtype", "wrong job token", "bad payload size"};
    return (int)e >= 0 && e < WIRE_NERRS ? names[e] : "?";
}
