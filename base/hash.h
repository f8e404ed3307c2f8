/* hash.h - FNV-1a, 64-bit: the one hash of texts and bytes in the project (tokens, endpoint names, parameter and result bits; not cryptographic) */
#ifndef RS_HASH_H
#define RS_HASH_H

#include <stddef.h>
#include <stdint.h>

/* ---- Constants ---- */

#define HASH_FNV_INIT 1469598103934665603ULL /* the offset basis: the hash of nothing */
#define HASH_FNV_PRIME 1099511628211ULL

/* ---- Functions ---- */

/* h extended by the n bytes at p (start with HASH_FNV_INIT). */
static inline uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * HASH_FNV_PRIME;
    return h;
}

/* h extended by the text s up to its NUL (NULL: nothing). */
static inline uint64_t hash_text(uint64_t h, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) h = (h ^ *p) * HASH_FNV_PRIME;
    return h;
}

#endif
