/* fuzz_wire.c - libFuzzer harness: the parameter server's header frame (wire_decode, wire_check, every dtype) and its encode/decode round trip */
#include "fuzz.h"
#include "../../base/codec.h"
#include "../../ps/wire.h"

/* Byte 0: has a payload frame; bytes 1-8: its claimed size; the rest is the header frame. An
 * accepted header must encode back to the same bytes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 9) return 0;
    int has_payload = data[0] & 1;
    size_t pbytes = 0;
    for (int i = 0; i < 8; i++) pbytes = pbytes << 8 | data[1 + i];
    const uint8_t *frame = data + 9;
    size_t len = size - 9;
    uint8_t copy[WIRE_HEADER_BYTES + 1];
    WireHeader h;
    /* the frame in a buffer of exactly its size, so that a read past len is caught */
    uint8_t *buf = len ? malloc(len) : NULL;
    if (len && !buf) abort();
    if (len) memcpy(buf, frame, len);
    WireErr e = wire_decode(buf, len, &h);
    if (e >= WIRE_NERRS) abort();
    (void)wire_strerror(e);
    if (e == WIRE_OK) {
        wire_encode(&h, copy);
        if (memcmp(copy, buf, WIRE_HEADER_BYTES) != 0) abort();
        (void)wire_op_name(h.op);
        if (!wire_dtype_allowed(h.op, h.dtype)) abort(); /* text for abort; 16 bits only on float ops, FP8 on pushes */
        size_t want = wire_payload_bytes(&h), el = wire_dtype_bytes(h.dtype);
        size_t head = h.dtype == WIRE_E4M3 || h.dtype == WIRE_E5M2 ? CODEC_HEAD_BYTES : 0; /* FP8's scale */
        if (el != 4 && el != 2 && el != 1) abort();
        if (h.count <= (SIZE_MAX - head) / el && want != head + (size_t)h.count * el) abort();
        WireErr c = wire_check(&h, h.token, has_payload, pbytes);
        int empty = wire_op_may_be_empty(h.op) && h.count == 0; /* a DataParallel chunk of no rows */
        if (c == WIRE_OK && empty && has_payload) abort();
        if (c == WIRE_OK && !empty && wire_op_has_payload(h.op) && (!has_payload || pbytes != want || want == 0))
            abort();
        if (c == WIRE_OK && !wire_op_has_payload(h.op) && (has_payload || h.count)) abort();
        if (wire_check(&h, h.token ^ 1, has_payload, pbytes) != WIRE_E_TOKEN) abort();
    }
    free(buf);
    return 0;
}
