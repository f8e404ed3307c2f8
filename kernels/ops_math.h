/* ops_math.h - the CPU kernels' elementary functions, written so that the loops around them vectorize */
#ifndef RS_OPS_MATH_H
#define RS_OPS_MATH_H

#include <stdint.h>
#include <string.h>

/* e^a in single precision, without a branch or a call, so that the loops around it vectorize
 * (glibc's expf is a call per element: 10% of a gpt step with GELU's and the softmaxes'). a is
 * clamped to [-104, 89] (e^a is 0 below -103.97 and Inf above 88.73 in float; a NaN stays NaN),
 * written a = n ln2 + r with n = round(a / ln2) (the 1.5 * 2^23 shift rounds it) and ln2 in two
 * parts (r exact, |r| <= ln2 / 2), e^r = 1 + r + r^2 P(r) with Cephes's degree-5 minimax P, and
 * the result scaled by 2^n in two halves, each a normal power of two, so a subnormal result is
 * rounded once and n = 128 overflows to Inf. test_ops_nn holds it within 2 ulp of glibc's expf
 * over the whole range. */
static inline float ops_expf(float a) {
    float x = a < -104.0f ? -104.0f : a;
    x = x > 89.0f ? 89.0f : x;
    float kf = x * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    uint32_t kb;
    memcpy(&kb, &kf, sizeof kb);
    int32_t n = (int32_t)(kb - 0x4B400000u); /* the integer, from the bits below 1.5 * 2^23's */
    kf -= 12582912.0f;
    float r = x - kf * 0.693359375f; /* ln2's leading bits: kf * them is exact */
    r = r - kf * -2.12194440e-4f;    /* the rest of ln2 */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t n1 = n >> 1, n2 = n - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return p * s1 * s2;
}

#endif
