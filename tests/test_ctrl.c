/* test_ctrl.c - the control plane and the launcher environment: join, refusal, barrier, gather, timeouts, peers without the token */
#include "../base/clock.h"
#include "../base/config.h"
#include "../net/ctrl.h"
#include "../base/err.h"
#include "../net/elastic.h"
#include "../net/launch.h"
#include "../engine/zctx.h"
#include "../base/tsan.h"
#include "test.h"
#include "../engine/config_check.h"
#include "../experiments/backends.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

/* What one forked member does; returns its exit status. */
typedef int (*MemberFn)(int member, int world, int port, void *arg);

static void env_for(RankEnv *e, int member, int world, int port, const char *token) {
    memset(e, 0, sizeof *e);
    e->member = member;
    e->world = world;
    e->local_rank = member;
    e->local_world = world;
    e->launched = 1;
    e->port = port;
    snprintf(e->addr, sizeof e->addr, "127.0.0.1");
    snprintf(e->token, sizeof e->token, "%s", token);
}

/* Forks world members running fn; fills status[] with exit statuses (128+sig when killed). */
static void run_members(int world, MemberFn fn, void *arg, int *status) {
    int port = launch_free_port("127.0.0.1");
    pid_t pid[16];
    for (int i = 0; i < world; i++) {
        pid[i] = fork();
        if (pid[i] == 0) _exit(fn(i, world, port, arg));
    }
    for (int i = 0; i < world; i++) {
        int st;
        waitpid(pid[i], &st, 0);
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
}

static const char *canon_default(char *buf, size_t len, int batch) {
    Config c;
    config_defaults(&c);
    c.batch = batch;
    config_canonical(&c, buf, len);
    return buf;
}

/* Joins, checks everyone's endpoint, barriers twice and gathers. */
static int member_full(int member, int world, int port, void *arg) {
    RankEnv e;
    env_for(&e, member, world, port, "abc123");
    char canon[8192], ep[64];
    canon_default(canon, sizeof canon, 64);
    snprintf(ep, sizeof ep, "endpoint-of-%d", member);
    void *z = zmq_ctx_new();
    Ctrl *c;
    int rc = ctrl_join(&c, &e, z, canon, ep, 10);
    if (rc) return 10 + rc;
    if (ctrl_members(c) != world) return 20;
    for (int i = 0; i < world; i++) {
        char want[64];
        snprintf(want, sizeof want, "endpoint-of-%d", i);
        if (strcmp(ctrl_endpoint(c, i), want)) return 21;
    }
    if (ctrl_barrier(c) || ctrl_barrier(c)) return 22;
    char mine[64], **all;
    snprintf(mine, sizeof mine, "{\"member\": %d}", member);
    if (ctrl_gather(c, mine, &all)) return 23;
    if (member == 0) {
        for (int i = 0; i < world; i++) {
            char want[64];
            snprintf(want, sizeof want, "{\"member\": %d}", i);
            if (!all || strcmp(all[i], want)) return 24;
        }
        ctrl_free_texts(all, world);
    } else if (all) return 25;
    ctrl_close(c);
    zmq_ctx_term(z);
    return 0;
}

static void test_join_barrier_gather(void) {
    for (int world = 1; world <= 10; world += world < 5 ? 1 : 4) { /* 1-5 and 9: more endpoints than a message once kept */
        int st[16];
        run_members(world, member_full, NULL, st);
        for (int i = 0; i < world; i++) CHECK_MSG(st[i] == 0, "world %d member %d exit %d", world, i, st[i]);
    }
}

/* Members 0-2 are workers, 3 a server: the workers barrier and gather among themselves while
 * the server only joins and then waits (its round would take the workers' messages), then all
 * four gather; the server's own worker round is refused. */
static int member_workers(int member, int members, int port, void *arg) {
    RankEnv e;
    env_for(&e, member, 3, port, "abc123");
    e.servers = members - 3;
    char canon[8192];
    canon_default(canon, sizeof canon, 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    if (ctrl_join(&c, &e, z, canon, "", 10)) return 40;
    int rc = 0;
    char mine[32], **all = NULL;
    snprintf(mine, sizeof mine, "m%d", member);
    if (member < 3) {
        for (int k = 0; k < 3 && !rc; k++) {
            if (ctrl_barrier_workers(c)) rc = 41;
            else if (ctrl_gather_workers(c, mine, &all)) rc = 42;
            else if (member == 0 && (!all || strcmp(all[0], "m0") || strcmp(all[2], "m2") || all[3])) rc = 43;
            ctrl_free_texts(all, ctrl_members(c));
            all = NULL;
        }
    } else if (ctrl_barrier_workers(c) != RS_ERR_RUNTIME || ctrl_gather_workers(c, mine, &all) != RS_ERR_RUNTIME) {
        rc = 44;
    }
    if (!rc && ctrl_gather(c, mine, &all)) rc = 45;
    if (!rc && member == 0 && (!all || strcmp(all[3], "m3"))) rc = 46;
    ctrl_free_texts(all, ctrl_members(c));
    ctrl_close(c);
    zmq_ctx_term(z);
    return rc;
}

static void test_workers_only(void) {
    int st[16];
    run_members(4, member_workers, NULL, st);
    for (int i = 0; i < 4; i++) CHECK_MSG(st[i] == 0, "member %d exit %d", i, st[i]);
}

/* Member 2 runs with another --batch: rank 0 must refuse it, naming --batch, on both sides. */
static int member_mismatch(int member, int world, int port, void *arg) {
    RankEnv e;
    env_for(&e, member, world, port, "abc123");
    char canon[8192];
    canon_default(canon, sizeof canon, member == 2 ? 32 : 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    int rc = ctrl_join(&c, &e, z, canon, "", 3);
    int named = strstr(rs_errmsg(), "--batch") != NULL;
    if (rc == RS_OK) ctrl_close(c);
    zmq_ctx_term(z);
    if (member == 0 || member == 2) return rc == RS_ERR_INPUT && named ? 0 : 30 + rc;
    return 0; /* the innocent member times out or is welcomed: either way, not our assertion */
}

static void test_mismatch_refused(void) {
    int st[16];
    run_members(3, member_mismatch, NULL, st);
    CHECK_MSG(st[0] == 0, "rank 0 should refuse naming --batch (exit %d)", st[0]);
    CHECK_MSG(st[2] == 0, "rank 2 should be refused naming --batch (exit %d)", st[2]);
}

/* Member 1 has the wrong token: rank 0 refuses its handshake; member 1 says so at once (well
 * within its 10 s), rank 0 times out naming rank 1 and the refused connection. */
static int member_token(int member, int world, int port, void *arg) {
    RankEnv e;
    env_for(&e, member, world, port, member == 1 ? "ffff" : "abc123");
    char canon[8192];
    canon_default(canon, sizeof canon, 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    double t0 = clock_now();
    int rc = ctrl_join(&c, &e, z, canon, "", member == 1 ? 10 : 1.5);
    int ok = member == 0 ? rc == RS_ERR_PEER && strstr(rs_errmsg(), "rank 1 did not join") &&
                               strstr(rs_errmsg(), "without this job's token (the last from 127.0.0.1 as member 1)")
                         : rc == RS_ERR_INPUT && strstr(rs_errmsg(), "refused this process's job token") &&
                               clock_now() - t0 < 5;
    if (!ok) fprintf(stderr, "member %d: rc %d: %s\n", member, rc, rs_errmsg());
    if (rc == RS_OK) ctrl_close(c);
    zmq_ctx_term(z);
    return ok ? 0 : 40 + rc;
}

static void test_wrong_token_refused(void) {
    int st[16];
    run_members(2, member_token, NULL, st);
    CHECK_MSG(st[0] == 0, "rank 0: a wrong token must not join, and be named (exit %d)", st[0]);
    CHECK_MSG(st[1] == 0, "rank 1: must be told its token was refused, soon (exit %d)", st[1]);
}

/* A squatter: a process that connects to rank 0 first with member 1's old identity "m1" and
 * never joins. kind 0: without security (no token); 1: with the job token (PLAIN), as a member
 * would; 2: with the token, sending a frame over rank 0's bound (64 KiB): rank 0 must drop the
 * connection after its handshake (exit 1 when it does not). */
static int squatter(int port, int kind) {
    void *z = zmq_ctx_new(), *s = zmq_socket(z, ZMQ_DEALER), *mon = zmq_socket(z, ZMQ_PAIR);
    int zero = 0, in = 0, dropped = 0;
    char ep[64];
    zmq_socket_monitor(s, "inproc://squatter", ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED);
    zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(mon, "inproc://squatter");
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, "m1", 2);
    if (kind) {
        zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "member 1", 8);
        zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, "abc123", 6);
    }
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zmq_connect(s, ep);
    if (kind == 2) {
        static char big[256 << 10];
        memset(big, 'x', sizeof big);
        zmq_send(s, "JOIN 1 abc123", 13, ZMQ_SNDMORE);
        zmq_send(s, big, sizeof big, 0);
    }
    double end = clock_now() + 1.5; /* holds the connection while the job forms (at 0.5 s) */
    for (double left; (left = end - clock_now()) > 0;) {
        zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, (long)(left * 1000) + 1) <= 0) continue;
        unsigned char ev[6];
        uint16_t id;
        if (zmq_recv(mon, ev, sizeof ev, 0) == 6) {
            memcpy(&id, ev, 2);
            in |= id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
            dropped |= in && id == ZMQ_EVENT_DISCONNECTED;
        }
        zmq_recv(mon, ep, sizeof ep, 0); /* the event's endpoint */
    }
    zmq_socket_monitor(s, NULL, 0);
    zmq_close(mon);
    zmq_close(s);
    zmq_ctx_term(z);
    return kind == 2 && !dropped;
}

/* Fork 0: rank 0; fork 2: the squatter, at once; fork 1: rank 1, 0.5 s later. */
static int member_squatted(int i, int forks, int port, void *arg) {
    int kind = *(int *)arg;
    if (i == 2) return squatter(port, kind);
    if (i == 1) usleep(500 * 1000);
    RankEnv e;
    env_for(&e, i, 2, port, "abc123");
    e.ctrl_max = 64 << 10;
    char canon[8192];
    canon_default(canon, sizeof canon, 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    int rc = ctrl_join(&c, &e, z, canon, "", 8);
    if (rc == RS_OK) rc = ctrl_barrier(c);
    if (rc != RS_OK) fprintf(stderr, "member %d (squatter %d): %s\n", i, kind, rs_errmsg());
    if (i == 0 && kind == 2) usleep(1200 * 1000); /* the socket stays open past the squatter's watch */
    if (c && rc == RS_OK) ctrl_close(c);
    zmq_ctx_term(z);
    return rc;
}

static void test_squatter_does_not_block(void) {
    for (int kind = 0; kind < 3; kind++) {
        int st[16];
        run_members(3, member_squatted, &kind, st);
        CHECK_MSG(st[0] == 0 && st[1] == 0, "squatter %d on identity m1: the job must form (exit %d/%d)", kind, st[0],
                  st[1]);
        CHECK_MSG(st[2] == 0, "squatter %d: a frame over the bound must cost it its connection", kind);
    }
}

/* Forks 1 and 2 both run as member 1 with the token (world 3; member 2, fork 3, comes late):
 * rank 0 refuses the job naming rank 1 twice, and both claimants are told. */
static int member_twice(int i, int forks, int port, void *arg) {
    int member = i == 2 ? 1 : i == 3 ? 2 : i;
    if (i == 3) usleep(1000 * 1000); /* after both JOINs of rank 1 */
    RankEnv e;
    env_for(&e, member, 3, port, "abc123");
    char canon[8192];
    canon_default(canon, sizeof canon, 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    int rc = ctrl_join(&c, &e, z, canon, "", member == 2 ? 1 : 2.5);
    int ok = member == 2 ||
             (rc == RS_ERR_INPUT && strstr(rs_errmsg(), "rank 1 joined twice (from 127.0.0.1, then from 127.0.0.1)"));
    if (!ok) fprintf(stderr, "fork %d (member %d): rc %d: %s\n", i, member, rc, rs_errmsg());
    if (rc == RS_OK) ctrl_close(c);
    zmq_ctx_term(z);
    return ok ? 0 : 60 + rc;
}

static void test_joined_twice(void) {
    int st[16];
    run_members(4, member_twice, NULL, st);
    CHECK_MSG(st[0] == 0, "rank 0 must refuse rank 1 joining twice (exit %d)", st[0]);
    CHECK_MSG(st[1] == 0 && st[2] == 0, "both processes of rank 1 must be told (exit %d/%d)", st[1], st[2]);
}

/* A text over the run's frame bound is refused by its sender, naming the bound, not sent (rank 0
 * would drop the connection and wait for the text in vain). */
static int member_big(int member, int world, int port, void *arg) {
    RankEnv e;
    env_for(&e, member, world, port, "abc123");
    e.ctrl_max = 64 << 10;
    char canon[8192];
    canon_default(canon, sizeof canon, 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    if (ctrl_join(&c, &e, z, canon, "", 1.5)) return 70;
    char *text = malloc((64 << 10) + 2), **all = NULL;
    memset(text, 'x', (64 << 10) + 1);
    text[(64 << 10) + 1] = 0;
    int rc = ctrl_gather(c, member == 1 ? text : "small", &all);
    int ok = member == 1 ? rc == RS_ERR_RUNTIME && strstr(rs_errmsg(), "of 65537 bytes is over the 65536 bytes")
                         : rc == RS_ERR_PEER && strstr(rs_errmsg(), "rank 1 did not reach GATHER");
    ctrl_free_texts(all, world);
    free(text);
    ctrl_close(c);
    zmq_ctx_term(z);
    return ok ? 0 : 71;
}

static void test_frame_bound(void) {
    int st[16];
    run_members(2, member_big, NULL, st);
    CHECK_MSG(st[0] == 0 && st[1] == 0, "an oversized text: refused by its sender, rank 0 names it (exit %d/%d)", st[0],
              st[1]);
}

/* zctx_ctrl_bound covers, twice over, the largest gather texts measured (bytes of rank 1's
 * report entry): it grows with the steps, the trace, and the trace's buckets and partitions. */
static size_t bound_of(const char *args, int members) {
    Config c;
    config_defaults(&c);
    char buf[512], *argv[32];
    int argc = 0, help = 0;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok(buf, " "); t && argc < 32; t = strtok(NULL, " ")) argv[argc++] = t;
    if (config_parse(&c, argc, argv, &help) || backend_validate(&c)) return 0;
    return zctx_ctrl_bound(&c, members);
}

static void test_ctrl_bound(void) {
    struct { const char *args; int members; double measured; } runs[] = {
        {"--layers 784,32,10 --steps 500", 2, 108232},
        {"--layers 784,32,10 --steps 500 --trace t.json", 2, 428452},
        {"--layers 784,256,256,10 --bucket-mb 0.05 --steps 50 --trace t.json", 2, 145862},
        {"--sync ps --layers 784,256,256,10 --ps-partition-kb 4 --steps 50 --trace t.json", 2, 2723626},
        {"--sync ps --ps-consistency async --layers 784,32,10 --steps 50 --trace t.json", 2, 49653},
        {"--layers 784,32,10 --epochs 2 --train-samples 512 --batch 8 --trace t.json", 2, 128 * 850},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        size_t b = bound_of(runs[i].args, runs[i].members);
        CHECK_MSG(b >= 2 * runs[i].measured, "%s: bound %zu, measured %.0f", runs[i].args, b, runs[i].measured);
    }
    CHECK(bound_of("--steps 1000", 2) > bound_of("--steps 100", 2));
    CHECK(bound_of("--steps 100 --trace t.json", 2) > bound_of("--steps 100", 2));
    CHECK(bound_of("--sync ps --ps-partition-kb 4 --steps 10 --trace t.json", 2) >
          bound_of("--sync ps --steps 10 --trace t.json", 2));
    CHECK(bound_of("--steps 100", 2) < (size_t)4 << 20); /* a plain run's stays a few MiB */
}

/* Member 2 dies after joining: the barrier fails on rank 0 naming rank 2, within the timeout. */
static int member_dies(int member, int world, int port, void *arg) {
    RankEnv e;
    env_for(&e, member, world, port, "abc123");
    char canon[8192];
    canon_default(canon, sizeof canon, 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    if (ctrl_join(&c, &e, z, canon, "", 2)) return 50;
    if (member == 2) _exit(0);
    int rc = ctrl_barrier(c);
    int ok = rc == RS_ERR_PEER && (member != 0 || strstr(rs_errmsg(), "rank 2"));
    ctrl_close(c);
    zmq_ctx_term(z);
    return ok ? 0 : 51;
}

static void test_dead_member_named(void) {
    int st[16];
    run_members(3, member_dies, NULL, st);
    CHECK_MSG(st[0] == 0, "rank 0 must name rank 2 (exit %d)", st[0]);
    CHECK_MSG(st[1] == 0, "rank 1 must time out (exit %d)", st[1]);
}

/* Member 0 joins and leaves at once: member 1, between rounds, sees the job ended (ctrl_ended);
 * member 2's barrier fails at once naming it, not after its 10 s timeout. */
static int member_end(int member, int world, int port, void *arg) {
    RankEnv e;
    env_for(&e, member, world, port, "abc123");
    char canon[8192];
    canon_default(canon, sizeof canon, 64);
    void *z = zmq_ctx_new();
    Ctrl *c;
    if (ctrl_join(&c, &e, z, canon, "", 10)) return 60;
    int rc = 0;
    double t0 = clock_now();
    if (member == 1) {
        while (!ctrl_ended(c) && clock_now() - t0 < 5) usleep(10000);
        rc = clock_now() - t0 < 5 ? 0 : 61;
    } else if (member == 2) {
        int b = ctrl_barrier(c);
        rc = b == RS_ERR_PEER && strstr(rs_errmsg(), "rank 0 ended the job") && clock_now() - t0 < 5 ? 0 : 62;
    }
    if (member == 0 && ctrl_ended(c)) rc = 63;
    ctrl_close(c);
    zmq_ctx_term(z);
    return rc;
}

static void test_end_reaches_members(void) {
    int st[16];
    run_members(3, member_end, NULL, st);
    for (int i = 0; i < 3; i++) CHECK_MSG(st[i] == 0, "member %d exit %d", i, st[i]);
}

static void clear_env(void) {
    const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE", "RINGSIDE_ROLE", "RINGSIDE_SERVER_ID", "RINGSIDE_SERVERS",
                          "RINGSIDE_JOB_TOKEN", "RINGSIDE_LAUNCHER", "TORCHELASTIC_USE_AGENT_STORE",
                          "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_rankenv(void) {
    RankEnv e;
    clear_env();
    CHECK(rankenv_detect(&e) == RS_OK && !e.launched && e.world == 1 && e.member == 0);

    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "10.1.2.3", 1);
    setenv("MASTER_PORT", "29500", 1);
    CHECK(rankenv_detect(&e) == RS_OK && e.launched && e.member == 2 && e.world == 4 && e.local_rank == 0 &&
          e.local_world == 2 && !strcmp(e.addr, "10.1.2.3") && e.port == 29500 && !strcmp(e.source, "torchrun"));
    CHECK(e.token[0]); /* derived when no RINGSIDE_JOB_TOKEN */
    setenv("RANK", "4", 1);
    CHECK(rankenv_detect(&e) == RS_ERR_INPUT && strstr(rs_errmsg(), "RANK"));
    unsetenv("MASTER_PORT");
    setenv("RANK", "1", 1);
    CHECK(rankenv_detect(&e) == RS_ERR_INPUT && strstr(rs_errmsg(), "MASTER_PORT"));

    clear_env();
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_NTASKS_PER_NODE", "4(x2)", 1);
    setenv("MASTER_ADDR", "localhost", 1);
    setenv("MASTER_PORT", "29501", 1);
    CHECK(rankenv_detect(&e) == RS_OK && e.member == 3 && e.world == 8 && e.local_rank == 1 &&
          e.local_world == 4 && !strcmp(e.source, "slurm"));

    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29502", 1);
    setenv("RINGSIDE_JOB_TOKEN", "00ff00ff12345678", 1);
    CHECK(rankenv_detect(&e) == RS_OK && e.member == 1 && e.world == 2 && !strcmp(e.source, "openmpi") &&
          !strcmp(e.token, "00ff00ff12345678"));
    setenv("RINGSIDE_JOB_TOKEN", "not-hex!", 1);
    CHECK(rankenv_detect(&e) == RS_ERR_INPUT && strstr(rs_errmsg(), "RINGSIDE_JOB_TOKEN"));
    /* a token the job would cut short, or one that keeps nobody out: refused, the rule named */
    char longest[RANKENV_TOKEN_MAX + 2];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = 0;
    CHECK(rankenv_token_check(longest) == RS_ERR_INPUT && strstr(rs_errmsg(), "80 hex digits, more than the 79"));
    longest[RANKENV_TOKEN_MAX] = 0;
    CHECK(rankenv_token_check(longest) == RS_ERR_INPUT && strstr(rs_errmsg(), "one digit 79 times"));
    longest[0] = '0';
    CHECK(rankenv_token_check(longest) == RS_OK);
    const char *weak[] = {"0", "00ff", "0123456789abcde", "0000000000000000", "aAaAaAaAaAaAaAaA"};
    for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++)
        CHECK_MSG(rankenv_token_check(weak[i]) == RS_ERR_INPUT && strstr(rs_errmsg(), "too weak"), "%s: %s", weak[i],
                  rs_errmsg());
    CHECK(rankenv_token_check("0123456789abcdef") == RS_OK);

    clear_env();
    setenv("RINGSIDE_ROLE", "server", 1);
    setenv("RINGSIDE_SERVER_ID", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("RINGSIDE_SERVERS", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29503", 1);
    CHECK(rankenv_detect(&e) == RS_OK && e.member == 5 && e.world == 4 && e.servers == 2);
    clear_env();
}

/* torchrun's agent store: detected by its variables, a key per run, restart and size; by hand
 * (no TORCHELASTIC_USE_AGENT_STORE=True), MASTER_PORT stays rank 0's to bind. */
static void test_rankenv_torchrun(void) {
    RankEnv e;
    clear_env();
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    CHECK(rankenv_detect(&e) == RS_OK && !e.agent_store);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
    setenv("TORCHELASTIC_RUN_ID", "job7", 1);
    CHECK(rankenv_detect(&e) == RS_OK && !e.agent_store);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
    CHECK(rankenv_detect(&e) == RS_OK && e.agent_store && !strcmp(e.source, "torchrun") && e.port == 29500);
    CHECK_MSG(!strcmp(e.store_key, "ringside/job7/attempt_3/world_2/ctrl"), "%s", e.store_key);
    setenv("TORCHELASTIC_RESTART_COUNT", "x", 1);
    CHECK(rankenv_detect(&e) == RS_ERR_INPUT && strstr(rs_errmsg(), "TORCHELASTIC_RESTART_COUNT"));
    clear_env();
}

/* Open MPI with every rank on this host and no MASTER_ADDR: rank 0 is here, 127.0.0.1; with
 * ranks on several hosts the address is still required. */
static void test_rankenv_openmpi_local(void) {
    RankEnv e;
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    setenv("MASTER_PORT", "29504", 1);
    CHECK_MSG(rankenv_detect(&e) == RS_OK && !strcmp(e.addr, "127.0.0.1") && !strcmp(e.bind, "127.0.0.1"), "%s",
              rs_errmsg());
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    CHECK(rankenv_detect(&e) == RS_ERR_INPUT && strstr(rs_errmsg(), "needs MASTER_ADDR"));
    setenv("MASTER_ADDR", "localhost", 1);
    CHECK(rankenv_detect(&e) == RS_OK && !strcmp(e.addr, "localhost"));
    clear_env();
}

/* The error file torchrun's agent reads: its JSON shape, whole or not at all. */
static void test_error_file(void) {
    char dir[] = "/tmp/ringside-errfile-XXXXXX", path[256], bad[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/error.json", dir);
    CHECK(elastic_error_write(path, "ringside: MNIST directory /x: \"quoted\"\nline", 1700000000LL) == RS_OK);
    FILE *f = fopen(path, "r");
    char text[4096] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    cJSON *root = cJSON_Parse(text), *msg = cJSON_GetObjectItem(root, "message");
    cJSON *extra = cJSON_GetObjectItem(msg, "extraInfo");
    CHECK_MSG(cJSON_IsString(cJSON_GetObjectItem(msg, "message")) &&
                  !strcmp(cJSON_GetObjectItem(msg, "message")->valuestring, "ringside: MNIST directory /x: \"quoted\"\nline"),
              "%s", text);
    CHECK(cJSON_IsString(cJSON_GetObjectItem(extra, "timestamp")) &&
          !strcmp(cJSON_GetObjectItem(extra, "timestamp")->valuestring, "1700000000"));
    CHECK(cJSON_IsString(cJSON_GetObjectItem(extra, "py_callstack")) &&
          strstr(cJSON_GetObjectItem(extra, "py_callstack")->valuestring, "MNIST directory"));
    cJSON_Delete(root);
    /* a directory that is not there: an error naming the path, and nothing left behind */
    snprintf(bad, sizeof bad, "%s/gone/error.json", dir);
    CHECK(elastic_error_write(bad, "x", 1) == RS_ERR_RUNTIME && strstr(rs_errmsg(), "gone"));
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *de; d && (de = readdir(d));) entries += de->d_name[0] != '.';
    if (d) closedir(d);
    CHECK_MSG(entries == 1, "%d entries in %s (only error.json expected)", entries, dir);
    unlink(path);
    rmdir(dir);
}

/* ---- A tiny TCPStore (PyTorch's c10d protocol: VALIDATE, SET, GET, CHECK, WAIT), a thread per connection ---- */
typedef struct {
    int lfd, port, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char key[4][200], val[4][300];
    int n, refused; /* refused: connections that did not open with VALIDATE and the magic */
    int active;     /* connection threads still running: fake_stop waits for none, so that no thread
                     * of a finished test outlives it (a later test's fork would copy it) */
} FakeStore;

typedef struct {
    FakeStore *st;
    int fd;
} FakeConn;

static int fake_read(int fd, void *p, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int fake_str(int fd, char *out, size_t cap) {
    uint64_t l;
    if (fake_read(fd, &l, sizeof l) || l >= cap || fake_read(fd, out, (size_t)l)) return -1;
    out[l] = 0;
    return 0;
}

static int fake_find(FakeStore *st, const char *k) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->key[i], k)) return i;
    return -1;
}

static void *fake_conn(void *arg) {
    FakeConn *c = arg;
    FakeStore *st = c->st;
    unsigned char t;
    uint32_t magic = 0;
    if (fake_read(c->fd, &t, 1) || t != 0 || fake_read(c->fd, &magic, 4) || magic != 0x3C85F7CEu) {
        pthread_mutex_lock(&st->mu);
        st->refused++;
        pthread_mutex_unlock(&st->mu);
        goto done;
    }
    while (fake_read(c->fd, &t, 1) == 0) {
        char k[200], v[300];
        uint64_t nk = 1;
        if (t == 1) { /* SET key value */
            if (fake_str(c->fd, k, sizeof k) || fake_str(c->fd, v, sizeof v)) break;
            pthread_mutex_lock(&st->mu);
            int i = fake_find(st, k);
            if (i < 0 && st->n < 4) i = st->n++;
            if (i >= 0) snprintf(st->key[i], sizeof st->key[i], "%s", k), snprintf(st->val[i], sizeof st->val[i], "%s", v);
            pthread_cond_broadcast(&st->cv);
            pthread_mutex_unlock(&st->mu);
        } else if (t == 3) { /* GET key: its length and bytes */
            if (fake_str(c->fd, k, sizeof k)) break;
            pthread_mutex_lock(&st->mu);
            int i = fake_find(st, k);
            snprintf(v, sizeof v, "%s", i >= 0 ? st->val[i] : "");
            pthread_mutex_unlock(&st->mu);
            uint64_t l = strlen(v);
            if (send(c->fd, &l, sizeof l, MSG_NOSIGNAL) < 0 || send(c->fd, v, l, MSG_NOSIGNAL) < 0) break;
        } else if (t == 5 || t == 6) { /* CHECK or WAIT, one key: READY / STOP_WAITING is 0 */
            if (fake_read(c->fd, &nk, sizeof nk) || nk != 1 || fake_str(c->fd, k, sizeof k)) break;
            pthread_mutex_lock(&st->mu);
            while (t == 6 && fake_find(st, k) < 0 && !st->stop) pthread_cond_wait(&st->cv, &st->mu);
            unsigned char a = fake_find(st, k) >= 0 ? 0 : 1;
            pthread_mutex_unlock(&st->mu);
            if (t == 6 && a) break; /* stopped */
            if (send(c->fd, &a, 1, MSG_NOSIGNAL) < 0) break;
        } else {
            break;
        }
    }
done:
    close(c->fd);
    free(c);
    pthread_mutex_lock(&st->mu);
    st->active--;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

static void *fake_accept(void *arg) {
    FakeStore *st = arg;
    for (;;) {
        int fd = accept(st->lfd, NULL, NULL);
        if (fd < 0) return NULL; /* the listening socket was shut down */
        FakeConn *c = malloc(sizeof *c);
        c->st = st;
        c->fd = fd;
        pthread_t t;
        pthread_mutex_lock(&st->mu);
        st->active++;
        pthread_mutex_unlock(&st->mu);
        if (pthread_create(&t, NULL, fake_conn, c) != 0) {
            pthread_mutex_lock(&st->mu);
            st->active--;
            pthread_mutex_unlock(&st->mu);
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(t);
    }
}

static pthread_t fake_start(FakeStore *st) {
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    bind(st->lfd, (struct sockaddr *)&a, sizeof a);
    listen(st->lfd, 16);
    getsockname(st->lfd, (struct sockaddr *)&a, &al);
    st->port = ntohs(a.sin_port);
    pthread_t t;
    pthread_create(&t, NULL, fake_accept, st);
    return t;
}

static void fake_stop(FakeStore *st, pthread_t t) {
    shutdown(st->lfd, SHUT_RDWR);
    pthread_join(t, NULL);
    close(st->lfd);
    pthread_mutex_lock(&st->mu);
    st->stop = 1;
    pthread_cond_broadcast(&st->cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10; /* the connection threads see stop, or their peer's close, and leave */
    while (st->active > 0 && pthread_cond_timedwait(&st->cv, &st->mu, &until) == 0) {
    }
    int left = st->active;
    pthread_mutex_unlock(&st->mu);
    if (left) fprintf(stderr, "  fake store: %d connection threads still running after 10 s\n", left);
}

typedef struct {
    int port, rc;
    char got[300];
} StoreGet;

static void *store_get_thread(void *arg) {
    StoreGet *g = arg;
    g->rc = elastic_store_get("127.0.0.1", g->port, "ringside/k", g->got, sizeof g->got, 5);
    return NULL;
}

/* The store client: a get waits for a later set; a missing key times out naming it; no store,
 * a value too long: errors naming the store. */
static void test_store_client(void) {
    FakeStore st;
    pthread_t acc = fake_start(&st);
    StoreGet g = {.port = st.port, .rc = -1};
    pthread_t t;
    pthread_create(&t, NULL, store_get_thread, &g);
    usleep(200000);
    CHECK_MSG(elastic_store_set("127.0.0.1", st.port, "ringside/k", "tcp://127.0.0.1:4242", 5) == RS_OK, "%s", rs_errmsg());
    pthread_join(t, NULL);
    CHECK_MSG(g.rc == RS_OK && !strcmp(g.got, "tcp://127.0.0.1:4242"), "rc %d '%s'", g.rc, g.got);
    char small[8], out[300];
    CHECK(elastic_store_get("127.0.0.1", st.port, "ringside/k", small, sizeof small, 2) == RS_ERR_PEER &&
          strstr(rs_errmsg(), "more than the 7") && !small[0]);
    double t0 = clock_now();
    CHECK(elastic_store_get("127.0.0.1", st.port, "ringside/missing", out, sizeof out, 0.3) == RS_ERR_PEER &&
          strstr(rs_errmsg(), "ringside/missing") && strstr(rs_errmsg(), "timed out"));
    CHECK(clock_now() - t0 < 2);
    CHECK(st.refused == 0);
    int port = st.port;
    fake_stop(&st, acc);
    t0 = clock_now();
    CHECK(elastic_store_set("127.0.0.1", port, "k", "v", 0.3) == RS_ERR_PEER && strstr(rs_errmsg(), "MASTER_PORT") &&
          strstr(rs_errmsg(), "cannot connect"));
    CHECK(clock_now() - t0 < 2);
}

/* Joins as one rank of a job under torchrun's agent store (the fake at arg's port): nobody binds
 * MASTER_PORT, rank 0 publishes its own. */
static int member_agent_store(int member, int world, int port, void *arg) {
    (void)port;
    RankEnv e;
    char canon[8192];
    env_for(&e, member, world, *(int *)arg, "00112233445566778899aabbccddeeff");
    snprintf(e.bind, sizeof e.bind, "127.0.0.1");
    e.agent_store = 1;
    snprintf(e.store_key, sizeof e.store_key, "ringside/job7/attempt_0/world_%d/ctrl", world);
    void *z = zmq_ctx_new();
    Ctrl *c = NULL;
    int rc = ctrl_join(&c, &e, z, canon_default(canon, sizeof canon, 64), "ep", 10);
    if (rc == RS_OK) rc = ctrl_barrier(c);
    if (rc != RS_OK) fprintf(stderr, "member %d: %s\n", member, rs_errmsg());
    if (c) ctrl_close(c);
    zmq_ctx_term(z);
    return rc;
}

static void test_join_through_agent_store(void) {
#ifdef RS_TSAN
    /* the store's threads run in this process while the members are forked from it, and a child of
     * a threaded process may start no thread under ThreadSanitizer (the plain build runs this) */
    SKIP("ThreadSanitizer: forked members cannot start threads beside the fake store's");
    return;
#endif
    FakeStore st;
    pthread_t acc = fake_start(&st);
    int st_port = st.port, status[16];
    run_members(3, member_agent_store, &st_port, status);
    for (int i = 0; i < 3; i++) CHECK_MSG(status[i] == 0, "member %d exit %d", i, status[i]);
    CHECK(st.n == 1 && !strcmp(st.key[0], "ringside/job7/attempt_0/world_3/ctrl") &&
          !strncmp(st.val[0], "tcp://127.0.0.1:", 16) && atoi(st.val[0] + 16) != st_port);
    fake_stop(&st, acc);
}

static void test_config_diff(void) {
    char a[8192], b[8192], d[700];
    canon_default(a, sizeof a, 64);
    canon_default(b, sizeof b, 64);
    CHECK(config_diff(a, b, d, sizeof d) == 0);
    canon_default(b, sizeof b, 32);
    CHECK(config_diff(a, b, d, sizeof d) == 1 && strstr(d, "--batch (64 here, 32 on rank 0)"));
    CHECK(config_hash(a) != config_hash(b));
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(test_config_diff);
    RUN(test_rankenv);
    RUN(test_rankenv_torchrun);
    RUN(test_rankenv_openmpi_local);
    RUN(test_error_file);
    RUN(test_store_client);
    RUN(test_join_through_agent_store);
    RUN(test_join_barrier_gather);
    RUN(test_workers_only);
    RUN(test_mismatch_refused);
    RUN(test_wrong_token_refused);
    RUN(test_squatter_does_not_block);
    RUN(test_joined_twice);
    RUN(test_frame_bound);
    RUN(test_ctrl_bound);
    RUN(test_dead_member_named);
    RUN(test_end_reaches_members);
    return test_summary("test_ctrl");
}
