/* student.c - the "student" back end: an all-reduce for you to write (lab 5), on plumbing that is done (student.h, student_net.c) */
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
 * student_allreduce: in-place sum of count floats at buf over every rank.
 *
 * Contract (what `ringside bench --sync student` checks, and what training relies on):
 *   - called on every rank with the same count (0 included), in the same order;
 *   - on return, buf[i] on every rank holds the sum over ranks of their buf[i] at the call,
 *     and every rank holds the SAME BITS (floating-point addition is commutative, a + b == b + a
 *     bit for bit, but not associative: (a + b) + c may differ from a + (b + c), so make sure
 *     every rank's result comes from one and the same order of additions, or is a copy of it);
 *   - world may be any N >= 1 (not only powers of two); with N = 1 there is nothing to do;
 *   - returns 0 (RS_OK), or the status of the student_send / student_recv that failed
 *     (RS_TRY(call) returns it for you).
 * The tags only have to tell one collective's messages apart (a round number is enough): the
 * plumbing already keeps collectives apart.
 *
 * Ideas, simplest first (the lab explains each):
 *   1. reduce then broadcast: every rank sends buf to rank 0; rank 0 adds them in rank order
 *      and sends the sum back to everyone;
 *   2. recursive doubling: in round k, rank r swaps its whole buffer with rank r XOR 2^k and
 *      adds; log2(N) rounds for a power of two (fold the extra ranks in first otherwise);
 *   3. a ring (reduce-scatter then all-gather, as allreduce/ring.c does).
 */
int student_allreduce(Student *s, float *buf, size_t count) {
    (void)s;
    (void)buf;
    (void)count;
    return rs_error(RS_ERR_RUNTIME, "allreduce/student.c: student_allreduce is not implemented yet (lab 5)");
}

/* ==== END LAB 5 ============================================================================== */
