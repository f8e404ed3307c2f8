/* test_link.c - the emulated interfaces: a node's NIC shared by its processes (each of two senders gets half its rate), node traffic on the fabric, placement by --nodes, precise timed waits */
#include "../base/clock.h"
#include "../base/err.h"
#include "../net/ctrl.h"
#include "../net/link.h"
#include "../net/node.h"
#include "test.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSGS 40
#define BYTES 100000
#define RATE 1e8 /* 100 MB/s: a message takes 1 ms on the wire */

/* One sender: sets a NIC (shared under name when name is set), waits for go, books MSGS messages
 * at once, one direction (tx 1: sends, 0: receives), and writes their starts into out. */
static void sender(const char *name, int tx, int go_fd, double *out) {
    LinkSpec l = {.bytes_per_s = RATE};
    link_set(&l);
    if (name && link_share(name) != RS_OK) _exit(3);
    char c;
    if (read(go_fd, &c, 1) != 1) _exit(4);
    for (int i = 0; i < MSGS; i++)
        out[i] = tx ? link_send(BYTES, 0) : link_recv_book(BYTES, 0, 0) - (double)BYTES / RATE;
    link_unshare();
    _exit(0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Two processes book at once; returns how many of their 2 MSGS bookings overlap another on the
 * wire (0 when they queue behind each other on one interface), or -1 when a child failed. */
static int two_senders(const char *name, int tx) {
    double *starts = mmap(NULL, 2 * MSGS * sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (starts == MAP_FAILED) return -1;
    int go[2];
    if (pipe(go) != 0) return -1;
    pid_t p[2];
    for (int k = 0; k < 2; k++)
        if ((p[k] = fork()) == 0) sender(name, tx, go[0], starts + k * MSGS);
    usleep(100000); /* both have mapped the interface (a late one would only find it busier) */
    if (write(go[1], "gg", 2) != 2) return -1;
    int bad = 0, st;
    for (int k = 0; k < 2; k++) bad |= waitpid(p[k], &st, 0) != p[k] || !WIFEXITED(st) || WEXITSTATUS(st);
    close(go[0]);
    close(go[1]);
    int overlaps = 0;
    qsort(starts, 2 * MSGS, sizeof *starts, cmp_double);
    for (int i = 1; i < 2 * MSGS; i++) overlaps += starts[i] < starts[i - 1] + (double)BYTES / RATE - 1e-9;
    munmap(starts, 2 * MSGS * sizeof(double));
    return bad ? -1 : overlaps;
}

/* A node's NIC is one interface: two processes sending at once queue behind each other (each gets
 * half its rate), each way; two processes with NICs of their own do not. */
static void test_shared_nic(void) {
    char name[64];
    snprintf(name, sizeof name, "/ringside-nic-test-%ld", (long)getpid());
    int tx = two_senders(name, 1), rx = two_senders(name, 0), apart = two_senders(NULL, 1);
    shm_unlink(name);
    CHECK_MSG(tx == 0, "%d of %d sends overlap on the shared NIC", tx, 2 * MSGS);
    CHECK_MSG(rx == 0, "%d of %d receives overlap on the shared NIC", rx, 2 * MSGS);
    CHECK_MSG(apart > MSGS / 2, "NICs of their own: only %d of %d sends overlap (they should run side by side)", apart,
              2 * MSGS);
    /* the receive side takes a message in at its sender's start where the NIC is free then, even
     * after a later one was taken in first (several processes take theirs in any order) */
    LinkSpec one = {.bytes_per_s = RATE};
    link_set(&one);
    CHECK(link_share(name) == RS_OK);
    double t = clock_now() + 1, d = (double)BYTES / RATE;
    double late = link_recv_book(BYTES, t + 10 * d, 0) - d, early = link_recv_book(BYTES, t, 0) - d,
           clash = link_recv_book(BYTES, t + 9.5 * d, 0) - d, wide = link_recv_book(3 * BYTES, t + 0.5 * d, 0) - 3 * d;
    CHECK_MSG(fabs(late - (t + 10 * d)) < 1e-9 && fabs(early - t) < 1e-9, "late %g early %g (from %g)", late - t, early - t, t);
    CHECK_MSG(fabs(clash - (t + 11 * d)) < 1e-9, "a message whose span is taken goes after it: %g", (clash - t) / d);
    CHECK_MSG(fabs(wide - (t + d)) < 1e-9, "the first gap it fits: %g", (wide - t) / d);
    link_share_release();
    link_unshare();
    link_set(NULL);
    /* a name that is not a shared-memory name is refused */
    LinkSpec l = {.bytes_per_s = RATE};
    link_set(&l);
    CHECK(link_share("no-slash") == RS_ERR_INPUT);
    link_set(NULL);
}

/* With nodes, node traffic takes the fabric (unpaced without one), the rest the NIC; without
 * nodes, every message takes the NIC. */
static void test_fabric(void) {
    LinkSpec nic = {.bytes_per_s = RATE}, fab = {.bytes_per_s = 10 * RATE};
    link_set_nodes(&nic, NULL, 1);
    CHECK(link_send(BYTES, 1) == 0 && link_recv_book(BYTES, 0, 1) == 0); /* unpaced inside the node */
    CHECK(link_send(BYTES, 0) > 0 && link_on());
    link_set_nodes(&nic, &fab, 1);
    double a = link_send(BYTES, 1), b = link_send(BYTES, 1);
    CHECK_MSG(b - a > 0.9 * BYTES / (10 * RATE) && b - a < 1.1 * BYTES / (10 * RATE), "fabric: %g s apart", b - a);
    double tx, rx;
    link_busy(&tx, &rx);
    CHECK(tx == 0 && rx == 0); /* the fabric is not the NIC */
    link_set_nodes(&nic, &fab, 0); /* no nodes: node traffic takes the NIC too */
    a = link_send(BYTES, 1);
    b = link_send(BYTES, 1);
    CHECK(b - a > 0.9 * BYTES / RATE);
    link_set_nodes(NULL, &fab, 1);
    CHECK(link_on() && link_send(BYTES, 0) == 0 && link_send(BYTES, 1) > 0);
    link_set(NULL);
    CHECK(!link_on());
}

/* --nodes: rank r on node r / G; servers on nodes of their own; a count that does not divide, or
 * a launcher's hosts that disagree, refused naming both. */
static void test_place(void) {
    RankEnv e;
    memset(&e, 0, sizeof e);
    e.world = 6;
    e.member = 4;
    e.local_world = 6;
    e.launched = 1;
    snprintf(e.source, sizeof e.source, "ringside");
    NodePlace p;
    CHECK(node_place(&e, 3, &p) == RS_OK && p.nodes == 3 && p.per_node == 2 && p.node == 2 && p.local == 0);
    CHECK(node_place(&e, 0, &p) == RS_OK && p.nodes == 0);
    CHECK(node_place(&e, 4, &p) == RS_ERR_INPUT && strstr(rs_errmsg(), "--nodes 4"));
    e.member = 7; /* dedicated server 1 */
    CHECK(node_place(&e, 2, &p) == RS_OK && p.node == 3 && p.local == 0);
    e.member = 1;
    snprintf(e.source, sizeof e.source, "torchrun");
    e.local_world = 2; /* torchrun put 2 ranks on this host: 3 nodes */
    CHECK(node_place(&e, 3, &p) == RS_OK && p.node == 0 && p.local == 1);
    CHECK_MSG(node_place(&e, 2, &p) == RS_ERR_INPUT && strstr(rs_errmsg(), "--nodes 2") && strstr(rs_errmsg(), "torchrun") &&
                  strstr(rs_errmsg(), "--nodes 3"), "%s", rs_errmsg());
    char a[96], b[96];
    node_set(&(NodePlace){.nodes = 2, .per_node = 2, .node = 1});
    node_nic_name("abc", a, sizeof a);
    node_set(&(NodePlace){.nodes = 2, .per_node = 2, .node = 0});
    node_nic_name("abc", b, sizeof b);
    CHECK(a[0] == '/' && strcmp(a, b) && !strchr(a + 1, '/'));
    node_set(NULL);
}

#ifdef __linux__
static void *slack_of(void *out) {
    *(long *)out = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    return NULL;
}
#endif

/* clock_precise_waits: this thread's timer slack is 1 us, and a thread started after inherits it
 * (the emulated link's booked waits run on the ranks' and the servers' threads). */
static void test_precise_waits(void) {
#ifdef __linux__
    long before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), in_thread = -1;
    CHECK(before > 0);
    CHECK(clock_precise_waits() == 0);
    CHECK(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) == (long)CLOCK_WAIT_SLACK_NS);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, slack_of, &in_thread) == 0);
    pthread_join(th, NULL);
    CHECK(in_thread == (long)CLOCK_WAIT_SLACK_NS);
#else
    SKIP("timer slack is a Linux setting");
#endif
}

int main(void) {
    RUN(test_precise_waits);
    RUN(test_shared_nic);
    RUN(test_fabric);
    RUN(test_place);
    return test_summary("test_link");
}
