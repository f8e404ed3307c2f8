/* student.c - the "student" back end, lab 5's reference solution: recursive doubling (copy it over allreduce/student.c) */
/*
 * Lab 5 (docs/labs/05-write-an-allreduce.md): write student_allreduce below, rebuild (`make
 * CUDA=0`, or `make`), and check it:
 *
 *     build/ringside bench -n 4 --sync student -b 8 -e 1M -f 4     # #wrong must be 0
 *     build/ringside bench -n 4 --sync ring    -b 8 -e 1M -f 4     # what to measure it against
 *     build/ringside train -n 4 --sync student                     # and train with it
 *
 * What you may call, and what s holds, is in allreduce/student.h.
 */
#include "student.h"
#include "../base/err.h"

/* ==== BEGIN LAB 5 =============================================================================
 *
 * Reference solution: recursive doubling, for any N.
 *
 * Let P be the largest power of two <= N and E = N - P the ranks beyond it.
 *   1. fold:   rank P + i (i < E) sends its buffer to rank i, which adds it: now ranks 0..P-1
 *              hold between them the whole sum, and ranks P.. wait;
 *   2. double: for k = 0 .. log2(P)-1, rank r < P swaps its whole buffer with rank r XOR 2^k and
 *              adds what it receives. After round k, r holds the sum over the 2^(k+1) ranks that
 *              share its bits above k; after the last round, the sum over all P (and so all N);
 *   3. unfold: rank i (i < E) sends the result to rank P + i, which copies it.
 * Same bits everywhere: in each round both partners compute x + y from the same two buffers
 * (one as x + y, the other as y + x, equal because IEEE addition is commutative), so the two
 * hold identical bits and keep doing so round after round; the folded ranks get a copy.
 * Cost per rank: log2(P) messages of the whole n bytes (+2 when N is not a power of two), so
 * t = log2(P) (alpha + n beta): fewer latencies than the ring's 2(N-1), more bytes than its
 * 2(N-1)/N n once N > 2. It wins on small messages, the ring on large ones.
 */
int student_allreduce(Student *s, float *buf, size_t count) {
    const int N = s->world, r = s->rank;
    int P = 1;
    while (2 * P <= N) P *= 2;
    const int E = N - P;
    if (N == 1) return RS_OK;
    /* 1. fold the ranks beyond P into the first E */
    if (r >= P) {
        RS_TRY(student_send(s, r - P, 0, buf, count));
    } else if (r < E) {
        RS_TRY(student_recv(s, r + P, 0, buf, count, STUDENT_ADD));
    }
    /* 2. recursive doubling among ranks 0 .. P-1 (tag: round + 1) */
    if (r < P) {
        for (int mask = 1, round = 1; mask < P; mask <<= 1, round++) {
            int partner = r ^ mask;
            RS_TRY(student_send(s, partner, round, buf, count)); /* copied: buf may change now */
            RS_TRY(student_recv(s, partner, round, buf, count, STUDENT_ADD));
        }
    }
    /* 3. unfold: the result to the ranks beyond P */
    if (r < E) {
        RS_TRY(student_send(s, r + P, 1000, buf, count));
    } else if (r >= P) {
        RS_TRY(student_recv(s, r - P, 1000, buf, count, STUDENT_COPY));
    }
    return RS_OK;
}

/* ==== END LAB 5 ============================================================================== */
