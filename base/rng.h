/* rng.h - a small deterministic PRNG (splitmix64) with uniform, bounded and normal draws */
#ifndef RS_RNG_H
#define RS_RNG_H

#include <math.h>
#include <stdint.h>

/* ---- Types ---- */

/* The generator's whole state: one 64-bit counter. Copying it forks the stream. */
typedef struct {
    uint64_t s;
} Rng;

/* ---- Prototypes (static inline) ---- */

/* Starts a stream from seed. Equal seeds give equal streams on every machine. */
static inline void rng_seed(Rng *r, uint64_t seed) {
    r->s = seed ^ 0x6a09e667f3bcc909ULL;
}

/* The next 64 random bits (splitmix64: Steele, Lea and Flood, 2014). */
static inline uint64_t rng_next_u64(Rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A float uniform in [0, 1): the top 24 bits, so every value is exact. */
static inline float rng_uniform(Rng *r) {
    return (float)(rng_next_u64(r) >> 40) * (1.0f / 16777216.0f);
}

/* A double uniform in [0, 1) from the top 53 bits. */
static inline double rng_uniform_double(Rng *r) {
    return (double)(rng_next_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* An integer uniform in [0, n) without modulo bias (n >= 1). */
static inline uint64_t rng_below(Rng *r, uint64_t n) {
    uint64_t floor = (0 - n) % n;   /* 2^64 mod n: draws below it would favour small results */
    uint64_t x;
    do {
        x = rng_next_u64(r);
    } while (x < floor);
    return x % n;
}

/* Two independent standard normal draws (Marsaglia's polar method: no trigonometry, so the
 * only libm call is log). Bitwise reproducible for a given libm. */
static inline void rng_normal_pair(Rng *r, double *a, double *b) {
    double u, v, s;
    do {
        u = 2.0 * rng_uniform_double(r) - 1.0;
        v = 2.0 * rng_uniform_double(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double m = sqrt(-2.0 * log(s) / s);
    *a = u * m;
    *b = v * m;
}

/* One standard normal draw (the second of the pair is discarded, keeping the state one word). */
static inline float rng_normal(Rng *r) {
    double a, b;
    rng_normal_pair(r, &a, &b);
    (void)b;
    return (float)a;
}

#endif
