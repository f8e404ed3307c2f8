/* nccl_rules.c - the nccl back end's decisions from versions and environment text (allreduce/nccl_rules.h) */
#include "nccl_rules.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- Helpers ---- */

/* Copies [b, e) into out (len bytes) without the blanks around it. */
static void rules_trim(const char *b, const char *e, char *out, size_t len) {
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    size_t n = (size_t)(e - b) < len - 1 ? (size_t)(e - b) : len - 1;
    memcpy(out, b, n);
    out[n] = '\0';
}

/* The all-reduce's entry of a per-collective NCCL_ALGO ("allreduce:tree;broadcast:ring"):
 * its list into out, or "auto" when no entry names allreduce. */
static void rules_allreduce_entry(const char *text, char *out, size_t len) {
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ';');
        if (!end) end = p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon) {
            char func[32];
            rules_trim(p, colon, func, sizeof func);
            if (!strcasecmp(func, "allreduce")) {
                rules_trim(colon + 1, end, out, len);
                return;
            }
        }
        p = *end ? end + 1 : end;
    }
    snprintf(out, len, "auto");
}

/* ---- Public ---- */

void nccl_algo_decide(const char *opt, const char *user, NcclAlgo *out) {
    memset(out, 0, sizeof *out);
    if (!user || !*user) {
        snprintf(out->set, sizeof out->set, "%s", opt && !strcmp(opt, "tree") ? "Tree" : "Ring");
        snprintf(out->allreduce, sizeof out->allreduce, "%s", out->set);
    } else if (strchr(user, ':')) {
        rules_allreduce_entry(user, out->allreduce, sizeof out->allreduce);
    } else {
        rules_trim(user, user + strlen(user), out->allreduce, sizeof out->allreduce);
    }
    out->tree = !strcasecmp(out->allreduce, "tree");
}

int nccl_fp8_native(int built, int loaded, int cc_major) {
    int v = NCCL_RULES_CODE(2, 24, 0);
    return built >= v && loaded >= v && cc_major >= 9;
}

const char *nccl_shared_gpu_missing(int loaded, const char *multi_rank, const char *hostid) {
    if (loaded >= NCCL_RULES_CODE(2, 30, 0)) return multi_rank ? NULL : "NCCL_MULTI_RANK_GPU_ENABLE=1";
    return hostid ? NULL : "a distinct NCCL_HOSTID per rank with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1";
}

void nccl_version_text(int v, char *buf, size_t len) {
    if (v >= 10000) snprintf(buf, len, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else snprintf(buf, len, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}
