/* student.h - lab 5's back end: the plumbing an all-reduce is written on (allreduce/student_net.c), and the one function the lab writes */
#ifndef RS_STUDENT_H
#define RS_STUDENT_H

/*
 * Lab 5 (docs/labs/05-write-an-allreduce.md). The plumbing (allreduce/mesh.c, the same that
 * `--sync tree` is written on) works; student_allreduce, in allreduce/student.c, is the one
 * function the lab writes.
 *
 * The plumbing gives every rank:
 *   - its place: s->rank (0 .. s->world-1) and s->world (N);
 *   - a mailbox: one ZeroMQ PULL socket bound at init, whose address the control plane hands
 *     to every other rank, and one PUSH socket connected to each other rank's mailbox, so any
 *     rank can send to any rank;
 *   - student_send(s, peer, tag, data, count): sends count floats to rank peer, marked with a
 *     tag of your choice (a round number, say). It copies the data, so you may change data as
 *     soon as it returns, and it never waits for the peer (the message is queued);
 *   - student_recv(s, peer, tag, dst, count, STUDENT_ADD or STUDENT_COPY): waits (up to the
 *     job's --timeout) for the message rank peer sent with that tag in this collective, and
 *     adds it into dst (dst[i] += msg[i]) or copies it. Messages that arrive before you ask for
 *     them (another peer's, a later round's) are kept until you do, so the order in which you
 *     receive from different peers does not matter. A message of the wrong length is an error;
 *   - counters for the report (bytes and messages, headers included), timeouts that name the
 *     peer that did not answer, and the staging of GPU buffers through host memory: buf is
 *     always host memory here.
 *
 * Message header: 40 bytes (allreduce/mesh.c's MeshHeader), counted in the traffic like the
 * ring's 48.
 */

#include "mesh.h"

#include <stddef.h>

/* ---- Types ---- */

/* A rank's end of the plumbing: s->rank and s->world are yours to read, the rest is the mesh's. */
typedef Mesh Student;

/* What student_recv does with a message: add it into dst, or copy it over dst. */
enum { STUDENT_COPY = MESH_COPY, STUDENT_ADD = MESH_ADD };

/* ---- The plumbing you may call ---- */

/* Sends count floats at data to rank peer (peer != s->rank), with tag (any value 0..2^31-1).
 * Copies data; returns without waiting for the peer. 0, or RS_ERR_* with rs_errmsg() set. */
static inline int student_send(Student *s, int peer, int tag, const float *data, size_t count) {
    return mesh_send(s, peer, tag, data, count);
}

/* Waits for the message rank peer sent with tag in this collective and adds it into dst
 * (op STUDENT_ADD: dst[i] += msg[i]) or copies it (STUDENT_COPY). count must equal the
 * message's length. 0; RS_ERR_PEER when nothing came within the timeout (naming the peer);
 * RS_ERR_RUNTIME on a length mismatch or a library error. */
static inline int student_recv(Student *s, int peer, int tag, float *dst, size_t count, int op) {
    return mesh_recv(s, peer, tag, dst, count, op);
}

/* ---- Yours (allreduce/student.c, the LAB 5 section) ---- */

/* In-place sum of count floats at buf over every rank, the same bits on every rank (the contract
 * is in allreduce/student.c). 0, or the status of the student_send / student_recv that failed. */
int student_allreduce(Student *s, float *buf, size_t count);

#endif
