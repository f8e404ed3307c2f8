/* report_entry.c - the report's per-member entries (workers, servers, bench) and the phases every back end is measured by */
#include "report.h"
#include "../base/err.h"
#include "../net/link.h"
#include "../net/node.h"
#include "../base/mem.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* One interface as {"text", "bandwidth_bytes_per_s", "latency_s"}, or a JSON null. */
static cJSON *report_one_link(const LinkSpec *l) {
    if (!(l->bytes_per_s > 0)) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "text", l->text);
    cJSON_AddNumberToObject(o, "bandwidth_bytes_per_s", l->bytes_per_s);
    cJSON_AddNumberToObject(o, "latency_s", l->latency_s);
    return o;
}

cJSON *report_link_json(void) {
    const NodePlace *p = node_get();
    cJSON *o = report_one_link(link_get());
    if (p->nodes > 0 && cJSON_IsObject(o)) { /* the node's one NIC, and the fabric inside the node */
        cJSON_AddStringToObject(o, "per", "node");
        cJSON_AddNumberToObject(o, "ranks_per_node", p->per_node);
        cJSON_AddItemToObject(o, "intra", report_one_link(link_get_intra()));
    }
    return o;
}

cJSON *report_traffic_json(const SyncTraffic *tr) {
    cJSON *t = cJSON_CreateObject();
    SyncTraffic none = {.transport = ""};
    if (!tr) tr = &none;
    cJSON_AddNumberToObject(t, "bytes_sent", (double)tr->bytes_sent);
    cJSON_AddNumberToObject(t, "bytes_received", (double)tr->bytes_received);
    cJSON_AddNumberToObject(t, "messages", (double)(tr->messages_sent + tr->messages_received));
    cJSON_AddNumberToObject(t, "messages_sent", (double)tr->messages_sent);
    cJSON_AddNumberToObject(t, "messages_received", (double)tr->messages_received);
    cJSON_AddNumberToObject(t, "dropped", (double)tr->dropped);
    cJSON_AddStringToObject(t, "transport", tr->transport ? tr->transport : "");
    cJSON_AddBoolToObject(t, "measured", !tr->derived);
    if (tr->algorithm[0]) cJSON_AddStringToObject(t, "algorithm", tr->algorithm);
    if (tr->wire_collective[0]) cJSON_AddStringToObject(t, "wire_collective", tr->wire_collective);
    if (tr->broadcast[0]) cJSON_AddStringToObject(t, "broadcast", tr->broadcast);
    if (tr->split) { /* the bytes by the links they took: inside this node, across the network */
        cJSON *by = cJSON_AddObjectToObject(t, "by_link"), *node = cJSON_AddObjectToObject(by, "node"),
              *net = cJSON_AddObjectToObject(by, "network");
        cJSON_AddNumberToObject(node, "bytes_sent", (double)tr->node_sent);
        cJSON_AddNumberToObject(node, "bytes_received", (double)tr->node_received);
        cJSON_AddNumberToObject(net, "bytes_sent", (double)(tr->bytes_sent - tr->node_sent));
        cJSON_AddNumberToObject(net, "bytes_received", (double)(tr->bytes_received - tr->node_received));
    }
    if (link_get()->bytes_per_s > 0) { /* the process's emulated interface, the whole run */
        double tx, rx;
        link_busy(&tx, &rx);
        cJSON *b = cJSON_AddObjectToObject(t, "link_busy_s");
        cJSON_AddNumberToObject(b, "tx", tx);
        cJSON_AddNumberToObject(b, "rx", rx);
    }
    return t;
}

static const char *entry_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double entry_num(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* 1 when entries a and b ran on one node: the same host and, under --nodes, the same node. */
static int entry_same_node(const cJSON *a, const cJSON *b) {
    const cJSON *na = cJSON_GetObjectItemCaseSensitive(a, "node"), *nb = cJSON_GetObjectItemCaseSensitive(b, "node");
    if (strcmp(entry_str(a, "host"), entry_str(b, "host"))) return 0;
    return !na || !nb || (cJSON_IsNumber(na) && cJSON_IsNumber(nb) && na->valuedouble == nb->valuedouble);
}

void report_transport_received(cJSON *ranks) {
    cJSON *e;
    cJSON_ArrayForEach(e, ranks) {
        cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "traffic");
        if (!cJSON_IsObject(t) || cJSON_GetObjectItemCaseSensitive(t, "transport_received")) continue;
        const char *sent = entry_str(t, "transport"), *got = sent;
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(t, "by_link"), *rx = cJSON_GetObjectItemCaseSensitive(t, "bytes_received");
        if (!cJSON_IsNumber(rx) || rx->valuedouble == 0)
            got = "";
        else if (by && entry_num(by, "network", "bytes_received") > 0)
            got = "tcp";
        else if (by && !strcmp(sent, "tcp")) { /* all on its node, though it sends across: how its node sends inside */
            const cJSON *o;
            got = "";
            cJSON_ArrayForEach(o, ranks) {
                const cJSON *ot = cJSON_GetObjectItemCaseSensitive(o, "traffic");
                const char *how = entry_str(ot, "transport");
                if (o != e && entry_same_node(o, e) && strcmp(how, "tcp") &&
                    entry_num(cJSON_GetObjectItemCaseSensitive(ot, "by_link"), "node", "bytes_sent") > 0)
                    got = sync_transport_slower(got, how);
            }
            if (!got[0]) got = sent;
        }
        cJSON_AddStringToObject(t, "transport_received", got);
    }
}

cJSON *report_entry(int rank, const char *role, Device *dev, long long samples, const SyncTraffic *traffic) {
    cJSON *o = cJSON_CreateObject();
    char buf[64];
    cJSON_AddNumberToObject(o, "rank", rank);
    cJSON_AddStringToObject(o, "role", role);
    cJSON_AddStringToObject(o, "device", device_name(dev, buf, sizeof buf));
    char host[256] = ""; /* the machine (a cluster's node) this process ran on */
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(o, "host", host);
    if (node_get()->nodes > 0) cJSON_AddNumberToObject(o, "node", node_get()->node); /* --nodes: its node */
    cJSON_AddNumberToObject(o, "samples", (double)samples);
    MemStats ms;
    mem_snapshot(&ms);
    cJSON *mem = cJSON_AddObjectToObject(o, "memory");
    cJSON_AddNumberToObject(mem, "peak_bytes", (double)ms.peak_total);
    cJSON *tags = cJSON_AddObjectToObject(mem, "by_tag");
    for (int t = 0; t < MEM_NTAGS; t++) cJSON_AddNumberToObject(tags, mem_tag_name(t), (double)ms.peak[t]);
    size_t fr = 0, tot = 0;
    dev->ops->mem_info(dev, &fr, &tot);
    cJSON_AddNumberToObject(mem, "device_used_bytes", (double)(tot - fr));
    unsigned long long pb = 0;
    if (dev->ops->process_bytes && dev->ops->process_bytes(dev, &pb) == 0)
        cJSON_AddNumberToObject(mem, "process_device_bytes", (double)pb);
    else
        cJSON_AddNullToObject(mem, "process_device_bytes"); /* no NVML, or the CPU: unknown, not 0 */
    cJSON_AddNumberToObject(mem, "host_peak_rss_bytes", (double)mem_host_peak_rss());
    cJSON_AddItemToObject(o, "traffic", report_traffic_json(traffic));
    struct rusage ru; /* the process's CPU, its every thread, up to now (the run's end) */
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        cJSON_AddNumberToObject(o, "cpu_s", (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
                                                (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
    return o;
}

/* The timeline's fields, in StepTimes' order. */
static const char *const tl_fields[] = {"start", "step", "data", "forward", "backward", "optimizer", "blocked",
                                        "arrival", "comm_total"};
#define TL_N (int)(sizeof tl_fields / sizeof *tl_fields)

static double tl_get(const StepTimes *t, int f) {
    const double v[TL_N] = {t->start, t->step, t->data, t->forward, t->backward, t->optimizer, t->blocked,
                            t->arrival, t->comm_total};
    return v[f];
}

void report_entry_timeline(cJSON *entry, const StepTimes *times, int n, double wall_offset, double server_busy_s,
                           long long server_steps) {
    cJSON *tl = cJSON_AddObjectToObject(entry, "_timeline");
    double *col = malloc((size_t)(n > 0 ? n : 1) * sizeof *col);
    for (int f = 0; col && f < TL_N; f++) {
        for (int s = 0; s < n; s++) col[s] = tl_get(&times[s], f);
        cJSON_AddItemToObject(tl, tl_fields[f], cJSON_CreateDoubleArray(col, n));
    }
    free(col);
    cJSON_AddNumberToObject(tl, "wall_offset", wall_offset);
    cJSON_AddNumberToObject(tl, "server_busy_s", server_busy_s);
    cJSON_AddNumberToObject(tl, "server_steps", (double)server_steps);
}

/* The first S values of the timeline's array f into out, walking the list once (cJSON's indexed
 * access walks it from the head each time); 0 where missing or not finite (a member's entry is
 * outside input). */
static void tl_column(const cJSON *tl, const char *f, int S, double *out) {
    int s = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(tl, f)) {
        if (s >= S) break;
        out[s++] = cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : 0;
    }
    while (s < S) out[s++] = 0;
}

static int tl_len(const cJSON *tl) {
    int n = -1;
    for (int f = 0; f < TL_N; f++) {
        const cJSON *a = cJSON_GetObjectItem(tl, tl_fields[f]);
        int k = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
        if (n < 0 || k < n) n = k;
    }
    return n < 0 ? 0 : n;
}

/* An idle span for Perfetto on the member's compute track. */
static void phases_trace_idle(cJSON *entry, int rank, double t0, double dur) {
    cJSON *tr = cJSON_GetObjectItem(entry, "_trace");
    if (!cJSON_IsArray(tr) || dur <= 0) return;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", "idle");
    cJSON_AddStringToObject(e, "cat", "idle");
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "ts", t0 * 1e6);
    cJSON_AddNumberToObject(e, "dur", dur * 1e6);
    cJSON_AddNumberToObject(e, "pid", rank);
    cJSON_AddNumberToObject(e, "tid", 0);
    cJSON_AddItemToArray(tr, e);
}

enum { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_EXPOSED, PH_IDLE, PH_OTHER, PH_TOTAL, PH_N };
static const char *const ph_names[PH_N] = {"data", "forward", "backward", "optimizer", "comm_exposed", "idle", "other",
                                           "comm_total"};

int report_phases(cJSON *ranks, int warmup, const double *offset, int noffset) {
    int nw = 0, S = -1;
    cJSON *it;
    cJSON_ArrayForEach(it, ranks) {
        const cJSON *tl = cJSON_GetObjectItem(it, "_timeline");
        if (!cJSON_IsObject(tl)) continue;
        int k = tl_len(tl);
        if (S < 0 || k < S) S = k;
        nw++;
    }
    if (nw == 0) return 0;
    /* the last arrival of each step, on rank 0's clock */
    enum { C_STEP, C_BLOCKED, C_ARRIVAL, C_DATA, C_FORWARD, C_BACKWARD, C_OPTIMIZER, C_TOTAL, C_N };
    static const char *const cname[C_N] = {"step", "blocked", "arrival", "data", "forward", "backward", "optimizer",
                                           "comm_total"};
    size_t S1 = (size_t)(S > 0 ? S : 1);
    double *last = calloc(S1, sizeof *last);
    double *step = malloc(S1 * sizeof *step);
    double *col = malloc(C_N * S1 * sizeof *col); /* one member's columns at a time */
    if (!last || !step || !col) {
        free(last);
        free(step);
        free(col);
        return 0;
    }
    for (int s = 0; s < S; s++) last[s] = -INFINITY;
    cJSON_ArrayForEach(it, ranks) {
        const cJSON *tl = cJSON_GetObjectItem(it, "_timeline");
        if (!cJSON_IsObject(tl)) continue;
        int r = cJSON_GetObjectItem(it, "rank") ? cJSON_GetObjectItem(it, "rank")->valueint : 0;
        double off = offset && r >= 0 && r < noffset ? offset[r] : 0;
        tl_column(tl, "arrival", S, col);
        for (int s = 0; s < S; s++)
            if (col[s] - off > last[s]) last[s] = col[s] - off;
    }
    int w = warmup < S ? warmup : 0, n = S - w;
    cJSON_ArrayForEach(it, ranks) {
        cJSON *tl = cJSON_GetObjectItem(it, "_timeline");
        if (!cJSON_IsObject(tl)) continue;
        int r = cJSON_GetObjectItem(it, "rank") ? cJSON_GetObjectItem(it, "rank")->valueint : 0;
        double off = offset && r >= 0 && r < noffset ? offset[r] : 0, wall = 0;
        const cJSON *wo = cJSON_GetObjectItem(tl, "wall_offset");
        if (cJSON_IsNumber(wo)) wall = wo->valuedouble;
        double sum[PH_N] = {0};
        for (int c = 0; c < C_N; c++) tl_column(tl, cname[c], S, col + (size_t)c * S1);
        for (int s = 0; s < S; s++) {
#define COL(c) col[(size_t)(c) * S1 + (size_t)s]
            double st = COL(C_STEP), blocked = COL(C_BLOCKED), arrival = COL(C_ARRIVAL);
            double p[PH_N] = {0};
            p[PH_DATA] = COL(C_DATA);
            p[PH_FORWARD] = COL(C_FORWARD);
            p[PH_BACKWARD] = COL(C_BACKWARD);
            p[PH_OPTIMIZER] = COL(C_OPTIMIZER);
            p[PH_TOTAL] = COL(C_TOTAL);
#undef COL
            double idle = last[s] - (arrival - off);
            if (idle > blocked) idle = blocked;
            if (idle < 0) idle = 0;
            /* what the measured phases leave of the step: on the CPU every phase is an interval
             * of the compute thread, so rest >= blocked; on a GPU forward and backward are device
             * times a host wait may overlap, so the exposed part is capped by what is left */
            double rest = st - p[PH_DATA] - p[PH_FORWARD] - p[PH_BACKWARD] - p[PH_OPTIMIZER] - idle;
            double exposed = blocked - idle;
            if (exposed > rest) exposed = rest;
            if (exposed < 0) exposed = 0;
            p[PH_IDLE] = idle;
            p[PH_EXPOSED] = exposed;
            p[PH_OTHER] = rest - exposed > 0 ? rest - exposed : 0;
            if (idle > 0) phases_trace_idle(it, r, arrival + wall, idle);
            step[s] = st;
            if (s < w) continue;
            for (int k = 0; k < PH_N; k++) sum[k] += p[k];
        }
        cJSON *ts = cJSON_GetObjectItem(it, "time_s");
        if (!ts) ts = cJSON_AddObjectToObject(it, "time_s");
        cJSON_AddItemToObject(ts, "step", report_dist_json(step + w, n));
        cJSON *ph = cJSON_AddObjectToObject(ts, "phases");
        double busy = 0;
        for (int k = 0; k < PH_N; k++) {
            double m = n ? sum[k] / n : 0;
            cJSON_AddNumberToObject(ph, ph_names[k], m);
            if (k <= PH_OPTIMIZER) busy += m;
        }
        cJSON_AddNumberToObject(ts, "busy", busy);
        cJSON_AddNumberToObject(ts, "timed_steps", n);
        const cJSON *sbs = cJSON_GetObjectItem(tl, "server_busy_s"), *sst = cJSON_GetObjectItem(tl, "server_steps");
        if (cJSON_IsNumber(sbs) && cJSON_IsNumber(sst) && sst->valuedouble > 0) {
            /* per step, over the whole run */
            cJSON_AddNumberToObject(ts, "server_busy", sbs->valuedouble / sst->valuedouble);
        }
        cJSON_DeleteItemFromObject(it, "_timeline");
    }
    free(last);
    free(step);
    free(col);
    return nw;
}
