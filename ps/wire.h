/* wire.h - the parameter server's message format: a fixed, versioned header frame before an optional payload frame (no sockets here) */
#ifndef RS_PS_WIRE_H
#define RS_PS_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* ---- Types ---- */

/* Every message is [header frame][payload frame?] (a ROUTER adds the peer's identity frame in
 * front). The header is WIRE_HEADER_BYTES long, little-endian, laid out as
 *
 *    0 u32 magic   "RSPS"           24 u64 offset  first key (parameter index) of the slice
 *    4 u16 version                  32 u64 count   elements in the payload
 *    6 u16 op                       40 u64 total   keys of the whole space (nparams, or the
 *    8 u64 token   hash of the job token              allreduce's element count)
 *   16 u32 step    step (or allreduce call)     48 u16 dtype   WIRE_F32, WIRE_BF16, WIRE_F16,
 *                                                              WIRE_E4M3, WIRE_E5M2 or WIRE_TEXT
 *   20 u32 bucket  bucket (or allreduce chunk)  50 u16 sender  worker rank (server id in replies)
 *                                               52 u32 samples the step's global samples (WIRE_STEP)
 *
 * The payload frame holds exactly count elements of dtype (an FP8 payload: its 4-byte scale,
 * base/codec.h's head, then the count bytes), or is absent (count 0). Ops with a
 * payload need count > 0, except BATCH, LOGITS and DLOGITS: a rank's chunk of a DataParallel
 * batch may be empty (count 0, no payload frame). ABORT's payload is text; the parameters' and
 * gradients' ops (INIT, PUSH, PARAMS, SUM, SUMMED) carry f32, bf16 or f16 elements, PUSH also
 * E4M3 or E5M2 (--wire:
 * which one a run uses for which op is the receiver's check, ps/client.c); every other op is
 * f32 (BATCH's labels are int32 words of f32's size).
 *
 * --ps-mode dataparallel adds a channel between rank 0 (a ROUTER of its own) and every other
 * rank: PULL (once, so rank 0 can address the rank), then per step PARAMS (the replicate: all
 * nparams keys, offset 0), BATCH and DLOGITS from rank 0, LOGITS to it. Rows are counted in
 * the global batch of `total` rows (BATCH) or `total` = rows x classes elements (LOGITS,
 * DLOGITS); `samples` is the chunk's rows. */
#define WIRE_MAGIC 0x53505352u /* the bytes 'R' 'S' 'P' 'S' */
#define WIRE_VERSION 1
#define WIRE_HEADER_BYTES 56
#define WIRE_STEP_INIT 0xffffffffu /* the step of the start-of-run parameter broadcast */

typedef enum {
    WIRE_INIT = 1,   /* rank 0 -> server: the initial parameters of one slice (payload) */
    WIRE_PULL = 2,   /* worker -> server: send me every slice of the parameters (no payload) */
    WIRE_PUSH = 3,   /* worker -> server: one slice of bucket b's gradient sum for step s */
    WIRE_STEP = 4,   /* rank 0 -> server: step s's global sample count (no payload) */
    WIRE_PARAMS = 5, /* server -> worker: one slice of parameters (after PULL, or step s's update) */
    WIRE_SUM = 6,    /* worker -> server: one slice of an allreduce contribution */
    WIRE_SUMMED = 7, /* server -> worker: one slice of the allreduce's sum */
    WIRE_BYE = 8,    /* worker -> server: this worker is done (no payload) */
    WIRE_ABORT = 9,  /* server -> worker: the server failed; the payload is the reason (text) */
    WIRE_BATCH = 10, /* rank 0 -> rank r: r's chunk of the step's batch, offset = its first row:
                      * rows x dim inputs (f32), then rows labels (int32), count = rows x (dim + 1) */
    WIRE_LOGITS = 11,  /* rank r -> rank 0: r's rows of the logits (offset = first row x classes) */
    WIRE_DLOGITS = 12, /* rank 0 -> rank r: the loss's gradient for r's rows (offset as LOGITS) */
    WIRE_NOPS
} WireOp;

/* An element's type: 4 bytes (f32), 2 (bf16, f16: base/codec.h's formats) or 1 (text). */
typedef enum { WIRE_F32 = 1, WIRE_TEXT = 2, WIRE_BF16 = 3, WIRE_F16 = 4, WIRE_E4M3 = 5, WIRE_E5M2 = 6 } WireDtype;

/* Why a header was refused (0: accepted). */
typedef enum {
    WIRE_OK = 0,
    WIRE_E_SIZE,     /* header frame not WIRE_HEADER_BYTES long */
    WIRE_E_MAGIC,
    WIRE_E_VERSION,
    WIRE_E_OP,       /* unknown op */
    WIRE_E_DTYPE,    /* unknown dtype, or the wrong one for the op */
    WIRE_E_TOKEN,    /* another job's message */
    WIRE_E_PAYLOAD,  /* payload frame missing, extra, or not count * dtype bytes */
    WIRE_NERRS
} WireErr;

typedef struct {
    uint32_t magic;
    uint16_t version, op;
    uint64_t token;
    uint32_t step, bucket;
    uint64_t offset, count, total;
    uint16_t dtype, sender;
    uint32_t samples;
} WireHeader;

/* ---- Prototypes ---- */

/* A header with magic, version, token and op filled in, everything else zero (dtype WIRE_F32). */
WireHeader wire_header(uint64_t token, WireOp op);

/* Writes h into out (exactly WIRE_HEADER_BYTES bytes, little-endian); never fails. */
void wire_encode(const WireHeader *h, unsigned char *out);

/* Reads a header frame of len bytes into *h and checks its shape: size, magic, version, op,
 * dtype. Returns WIRE_OK or the first WireErr found (*h is then unspecified). Never reads past
 * len; any bytes are safe to pass. */
WireErr wire_decode(const void *buf, size_t len, WireHeader *h);

/* Checks a decoded header against this job: the token, and the payload frame (has_payload, of
 * payload_bytes) against the op and count. Returns WIRE_OK or WIRE_E_TOKEN / WIRE_E_PAYLOAD.
 * Step, bucket and key-range checks depend on the receiver's state and are its business. */
WireErr wire_check(const WireHeader *h, uint64_t token, int has_payload, size_t payload_bytes);

/* 1 when op carries a payload frame. */
int wire_op_has_payload(int op);

/* 1 when op's payload may be empty (count 0, no frame): a DataParallel chunk of no rows. */
int wire_op_may_be_empty(int op);

/* Payload bytes the header announces (count * element size, and an FP8 payload's 4-byte scale);
 * 0 for an unknown dtype. */
size_t wire_payload_bytes(const WireHeader *h);

/* Bytes of one element of dtype: 4 (f32), 2 (bf16, f16), 1 (text, E4M3, E5M2); 0 for an unknown dtype. */
size_t wire_dtype_bytes(int dtype);

/* 1 when op may carry dtype: text for ABORT; f32, bf16 or f16 for INIT, PUSH, PARAMS, SUM and
 * SUMMED, and E4M3 or E5M2 for PUSH (FP8 is a gradient format); f32 for every other op. */
int wire_dtype_allowed(int op, int dtype);

/* The dtype of a codec type (base/codec.h's CodecType: 0 f32, 1 bf16, 2 f16; f32 otherwise). */
WireDtype wire_dtype_of(int codec_type);

/* The 64-bit token every header carries: FNV-1a of the job token text ("" allowed). */
uint64_t wire_token(const char *text);

/* "push", "params", ... ("?" for an unknown op); "bad magic", ... for a WireErr. */
const char *wire_op_name(int op);
const char *wire_strerror(WireErr e);

#endif
