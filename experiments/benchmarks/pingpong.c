/* pingpong.c - one hop's cost: a two-process ping-pong over a plain TCP socket or ZeroMQ PUSH/PULL, the receiver blocking or busy-polling, each process pinned to a CPU */
/*
 * usage: pingpong MODE BYTES ROUNDS [CPU_A CPU_B]
 *   MODE   tcp-block | tcp-poll | zmq-block | zmq-poll
 *   BYTES  message size; ROUNDS round trips (the first tenth are a warm-up, not timed)
 *   CPU_A, CPU_B  the two processes' CPUs (default 0 and 1; -1: not pinned)
 * Prints the median round trip in microseconds and the quartiles. Build:
 *   cc -O2 -o build/pingpong experiments/benchmarks/pingpong.c -lzmq
 * What it isolates (docs/benchmarks.md, "The per-message cost"): a message to a process whose thread
 * sleeps costs the wake-up of its CPU; ZeroMQ adds its I/O threads' hand-offs whatever the receiver
 * does, a plain socket polled by the receiver's own thread costs neither.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) perror("pingpong: sched_setaffinity");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- plain TCP: write all, read all (poll: MSG_DONTWAIT until it comes) ---- */

static void tcp_send(int fd, const char *buf, size_t n) {
    for (size_t off = 0; off < n;) {
        ssize_t k = send(fd, buf + off, n - off, 0);
        if (k < 0 && errno != EINTR) perror("pingpong: send"), exit(1);
        if (k > 0) off += (size_t)k;
    }
}

static void tcp_recv(int fd, char *buf, size_t n, int poll) {
    for (size_t off = 0; off < n;) {
        ssize_t k = recv(fd, buf + off, n - off, poll ? MSG_DONTWAIT : 0);
        if (k == 0) fprintf(stderr, "pingpong: peer closed\n"), exit(1);
        if (k < 0 && errno != EINTR && errno != EAGAIN) perror("pingpong: recv"), exit(1);
        if (k > 0) off += (size_t)k;
    }
}

/* ---- ZeroMQ: a PUSH each way ---- */

static void zmq_hop_recv(void *pull, char *buf, size_t n, int poll) {
    for (;;) {
        int k = zmq_recv(pull, buf, n, poll ? ZMQ_DONTWAIT : 0);
        if (k >= 0) return;
        if (zmq_errno() != EAGAIN && zmq_errno() != EINTR) fprintf(stderr, "pingpong: zmq_recv: %s\n", zmq_strerror(zmq_errno())), exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: pingpong tcp-block|tcp-poll|zmq-block|zmq-poll BYTES ROUNDS [CPU_A CPU_B]\n");
        return 2;
    }
    const char *mode = argv[1];
    size_t n = (size_t)strtoull(argv[2], NULL, 10);
    int rounds = atoi(argv[3]), cpu_a = argc > 4 ? atoi(argv[4]) : 0, cpu_b = argc > 5 ? atoi(argv[5]) : 1;
    int zmq = !strncmp(mode, "zmq", 3), poll = strstr(mode, "poll") != NULL;
    if (!n || rounds < 10 || (strcmp(mode, "tcp-block") && strcmp(mode, "tcp-poll") && strcmp(mode, "zmq-block") && strcmp(mode, "zmq-poll"))) {
        fprintf(stderr, "pingpong: bad arguments (MODE tcp-block|tcp-poll|zmq-block|zmq-poll, BYTES > 0, ROUNDS >= 10)\n");
        return 2;
    }
    char *buf = calloc(1, n);
    /* the listening ends first (ports the kernel picks), then the fork */
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&a, &al))
        return perror("pingpong: listen"), 1;
    int port_a = ntohs(a.sin_port), port_b = port_a + 1 + (int)(getpid() % 1000); /* zmq: B's PULL */
    pid_t child = fork();
    if (child < 0) return perror("pingpong: fork"), 1;
    int me_a = child != 0;
    pin(me_a ? cpu_a : cpu_b);
    double *rt = calloc((size_t)rounds, sizeof *rt);
    if (!zmq) {
        int fd;
        if (me_a) fd = accept(lfd, NULL, NULL);
        else {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&a, sizeof a)) return perror("pingpong: connect"), 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        for (int i = 0; i < rounds; i++) {
            double t0 = now_s();
            if (me_a) tcp_send(fd, buf, n), tcp_recv(fd, buf, n, poll);
            else tcp_recv(fd, buf, n, poll), tcp_send(fd, buf, n);
            rt[i] = now_s() - t0;
        }
        close(fd);
    } else {
        close(lfd);
        void *ctx = zmq_ctx_new(), *push = zmq_socket(ctx, ZMQ_PUSH), *pull = zmq_socket(ctx, ZMQ_PULL);
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", me_a ? port_a : port_b); /* each binds its PULL */
        if (zmq_bind(pull, ep)) return fprintf(stderr, "pingpong: bind %s: %s\n", ep, zmq_strerror(zmq_errno())), 1;
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", me_a ? port_b : port_a);
        zmq_connect(push, ep);
        if (me_a) zmq_hop_recv(pull, buf, n, 0), zmq_send(push, buf, n, 0); /* both ends up */
        else zmq_send(push, buf, n, 0), zmq_hop_recv(pull, buf, n, 0);
        for (int i = 0; i < rounds; i++) {
            double t0 = now_s();
            if (me_a) zmq_send(push, buf, n, 0), zmq_hop_recv(pull, buf, n, poll);
            else zmq_hop_recv(pull, buf, n, poll), zmq_send(push, buf, n, 0);
            rt[i] = now_s() - t0;
        }
        int linger = 1000;
        zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(push), zmq_close(pull), zmq_ctx_term(ctx);
    }
    if (!me_a) return 0;
    waitpid(child, NULL, 0);
    int skip = rounds / 10, m = rounds - skip;
    qsort(rt + skip, (size_t)m, sizeof *rt, cmp_double);
    printf("%s %zu bytes, %d round trips (CPUs %d, %d): median %.1f us (q1 %.1f, q3 %.1f)\n", mode, n, m, cpu_a, cpu_b,
           rt[skip + m / 2] * 1e6, rt[skip + m / 4] * 1e6, rt[skip + 3 * m / 4] * 1e6);
    return 0;
}
