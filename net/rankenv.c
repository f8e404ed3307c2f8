/* rankenv.c - where this process stands in the job, read from ringside's, torchrun's, srun's or mpirun's environment */
#include "ctrl.h"
#include "../base/err.h"
#include "../base/hash.h"
#include "../base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads integer variable name into *out. 1 found, 0 absent, -1 malformed (error set). */
static int env_int(const char *name, int *out) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || errno || x < 0 || x > 1000000) {
        rs_error(RS_ERR_INPUT, "environment %s='%s': not a non-negative integer", name, v);
        return -1;
    }
    *out = (int)x;
    return 1;
}

/* The first launcher convention whose rank variable is set. */
static int rankenv_launcher(RankEnv *e) {
    static const struct {
        const char *source, *rank, *size, *local_rank, *local_size;
    } conv[] = {
        {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
        {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
        {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE"},
    };
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
        int rank, size, r;
        if ((r = env_int(conv[i].rank, &rank)) < 0) return RS_ERR_INPUT;
        if (r == 0) continue;
        if ((r = env_int(conv[i].size, &size)) <= 0)
            return r < 0 ? RS_ERR_INPUT : rs_error(RS_ERR_INPUT, "environment: %s is set but %s is not", conv[i].rank, conv[i].size);
        if (size < 1 || rank >= size)
            return rs_error(RS_ERR_INPUT, "environment: %s=%d outside %s=%d", conv[i].rank, rank, conv[i].size, size);
        e->member = rank;
        e->world = size;
        e->local_rank = rank;
        e->local_world = size;
        if (env_int(conv[i].local_rank, &e->local_rank) < 0) return RS_ERR_INPUT;
        const char *ls = getenv(conv[i].local_size); /* srun writes forms such as "4(x2)" */
        if (ls && atoi(ls) > 0) e->local_world = atoi(ls);
        if (e->local_world < 1) e->local_world = 1;
        snprintf(e->source, sizeof e->source, "%s", getenv("RINGSIDE_LAUNCHER") ? "ringside" : conv[i].source);
        e->launched = 1;
        return RS_OK;
    }
    return RS_OK;
}

/* torchrun's agent: with TORCHELASTIC_USE_AGENT_STORE=True, MASTER_PORT is its TCPStore (rank 0
 * must not bind it); the key rank 0 publishes its control plane under is per run, restart and size. */
static int rankenv_torchrun(RankEnv *e) {
    const char *use = getenv("TORCHELASTIC_USE_AGENT_STORE"), *run = getenv("TORCHELASTIC_RUN_ID");
    if (strcmp(e->source, "torchrun") || !use || strcmp(use, "True")) return RS_OK;
    int restart = 0;
    if (env_int("TORCHELASTIC_RESTART_COUNT", &restart) < 0) return RS_ERR_INPUT;
    if (run && strlen(run) > 100)
        return rs_error(RS_ERR_INPUT, "environment TORCHELASTIC_RUN_ID: %zu characters, more than the 100 a run id may have here",
                        strlen(run));
    e->agent_store = 1;
    snprintf(e->store_key, sizeof e->store_key, "ringside/%s/attempt_%d/world_%d/ctrl", run && *run ? run : "none", restart,
             e->world);
    return RS_OK;
}

int rankenv_route_addr(const char *host, char *out, size_t len) {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    int g = getaddrinfo(host, "9", &hints, &res);
    if (g != 0 || !res) return rs_error(RS_ERR_INPUT, "MASTER_ADDR '%s': cannot resolve: %s", host, gai_strerror(g));
    int fd = socket(AF_INET, SOCK_DGRAM, 0), rc = RS_ERR_INPUT;
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&me, &ml) == 0 && inet_ntop(AF_INET, &me.sin_addr, out, (socklen_t)len))
        rc = RS_OK;
    else
        rs_error(RS_ERR_INPUT, "MASTER_ADDR '%s': no route from this host: %s", host, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return rc;
}

int rankenv_token_check(const char *tok) {
    size_t n = strlen(tok);
    _Static_assert(RANKENV_TOKEN_MAX < sizeof ((RankEnv *)0)->token, "RankEnv.token holds the longest token");
    if (strspn(tok, "0123456789abcdefABCDEF") != n)
        return rs_error(RS_ERR_INPUT, "environment RINGSIDE_JOB_TOKEN: not hex digits (expected %d to %d of 0-9a-f)",
                        RANKENV_TOKEN_MIN, RANKENV_TOKEN_MAX);
    if (n > RANKENV_TOKEN_MAX)
        return rs_error(RS_ERR_INPUT, "environment RINGSIDE_JOB_TOKEN: %zu hex digits, more than the %d a token may have",
                        n, RANKENV_TOKEN_MAX);
    if (n >= RANKENV_TOKEN_MIN && strspn(tok, (char[]){tok[0], (char)(tok[0] ^ 0x20), 0}) == n)
        return rs_error(RS_ERR_INPUT, "environment RINGSIDE_JOB_TOKEN: one digit %zu times, too weak to keep anyone out "
                        "(random hex digits; unset, the launcher makes its own)", n);
    if (n < RANKENV_TOKEN_MIN)
        return rs_error(RS_ERR_INPUT, "environment RINGSIDE_JOB_TOKEN: %zu hex digit%s, too weak to keep anyone out "
                        "(at least %d, 64 bits; unset, the launcher makes one of 32)", n, n == 1 ? "" : "s", RANKENV_TOKEN_MIN);
    return RS_OK;
}

int rankenv_detect(RankEnv *e) {
    memset(e, 0, sizeof *e);
    e->world = 1;
    e->local_world = 1;
    snprintf(e->addr, sizeof e->addr, "127.0.0.1");
    snprintf(e->bind, sizeof e->bind, "127.0.0.1");
    snprintf(e->source, sizeof e->source, "none");
    RS_TRY(rankenv_launcher(e));

    const char *role = getenv("RINGSIDE_ROLE");
    if (role && *role && strcmp(role, "worker")) {
        if (strcmp(role, "server")) return rs_error(RS_ERR_INPUT, "environment RINGSIDE_ROLE='%s': expected worker or server", role);
        int id = -1, ws = 0;
        if (env_int("RINGSIDE_SERVER_ID", &id) <= 0)
            return rs_error(RS_ERR_INPUT, "environment: RINGSIDE_ROLE=server needs RINGSIDE_SERVER_ID");
        if (env_int("WORLD_SIZE", &ws) <= 0 || ws < 1)
            return rs_error(RS_ERR_INPUT, "environment: RINGSIDE_ROLE=server needs WORLD_SIZE (the worker count)");
        e->world = ws;
        e->member = ws + id;
        e->local_rank = 0;
        e->local_world = 1;
        e->launched = 1;
        snprintf(e->source, sizeof e->source, "%s", getenv("RINGSIDE_LAUNCHER") ? "ringside" : "external");
    }
    if (env_int("RINGSIDE_SERVERS", &e->servers) < 0) return RS_ERR_INPUT;
    if (!e->launched) return RS_OK;

    const char *addr = getenv("MASTER_ADDR");
    int port = 0, r = env_int("MASTER_PORT", &port);
    if (r < 0) return RS_ERR_INPUT;
    int ompi_size = 0, ompi_local = 0;
    if ((!addr || !*addr) && !strcmp(e->source, "openmpi") && env_int("OMPI_COMM_WORLD_SIZE", &ompi_size) > 0 &&
        env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &ompi_local) > 0 && ompi_local == ompi_size) {
        addr = "127.0.0.1"; /* every rank on this host: rank 0 is here */
        if (e->member == 0)
            log_info("# openmpi: all %d ranks on this host and no MASTER_ADDR: rank 0 listens on 127.0.0.1", ompi_size);
    }
    RS_TRY(rankenv_torchrun(e));
    if (e->world > 1 || e->servers > 0) {
        if (!addr || !*addr) return rs_error(RS_ERR_INPUT, "environment: %s rank %d of %d needs MASTER_ADDR", e->source, e->member, e->world);
        if (r == 0 || port < 1 || port > 65535)
            return rs_error(RS_ERR_INPUT, "environment: %s rank %d of %d needs MASTER_PORT (1-65535)", e->source, e->member, e->world);
    }
    if (addr && *addr) snprintf(e->addr, sizeof e->addr, "%s", addr);
    e->port = port;
    RS_TRY(rankenv_route_addr(e->addr, e->bind, sizeof e->bind));
    const char *tok = getenv("RINGSIDE_JOB_TOKEN");
    if (tok && *tok) {
        RS_TRY(rankenv_token_check(tok));
        snprintf(e->token, sizeof e->token, "%s", tok);
    } else {
        /* external launchers without a token: derive one all ranks agree on (weak: document it) */
        char seed[300];
        snprintf(seed, sizeof seed, "%s:%d", e->addr, e->port);
        snprintf(e->token, sizeof e->token, "%016llx", (unsigned long long)hash_text(HASH_FNV_INIT, seed));
    }
    return RS_OK;
}
