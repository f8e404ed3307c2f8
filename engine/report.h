/* report.h - the JSON report: environment, per-rank metrics, summary, written atomically */
#ifndef RS_REPORT_H
#define RS_REPORT_H

#include <stddef.h>
#include "engine.h"
#include "sync.h"

struct cJSON;

#define REPORT_SCHEMA "ringside.report/1"
/* The largest JSON file report_read takes (bytes): a 10^6-step report is a few tens of MB. */
#define REPORT_MAX_BYTES (256 << 20)

/* ---- Prototypes ---- */

/* Checks, before any work, that path can be written: its directory exists and is writable and
 * path itself is not a directory or a read-only file. 0 or RS_ERR_INPUT naming the path. */
int report_check_writable(const char *path);

/* Writes root as indented JSON to path through an atomic file (base/atomicfile.h), so readers
 * see the old file or the whole new one, never a part, and a writer killed part-way leaves
 * nothing. Every non-finite number in root is first turned into its string (report_encode_nonfinite,
 * which changes root). 0 or RS_ERR_RUNTIME. Does not take ownership of root. */
int report_write_atomic(const char *path, struct cJSON *root);

/* ---- Non-finite numbers: JSON has no NaN or infinity (cJSON prints them as null), so a report
 * writes them as the strings "nan", "inf" and "-inf" (docs/report-schema.md) ---- */

/* x as a report holds it: a JSON number when finite, else the string "nan", "inf" or "-inf".
 * Caller owns it; NULL on OOM. */
struct cJSON *report_number(double x);

/* An array of report_number(x[i]), i < n. Caller owns it; NULL on OOM. */
struct cJSON *report_number_array(const double *x, int n);

/* Reads a value report_number wrote: a JSON number, or one of its three strings. 1 with *x set
 * when item is one, else 0 (*x untouched: null, another string, an object, NULL). */
int report_value(const struct cJSON *item, double *x);

/* Replaces every non-finite number in the tree under root by its string, in place, so that the
 * printed JSON loses none (a null would read as a value that is not there). Returns how many. */
int report_encode_nonfinite(struct cJSON *root);

/* The report's "run" header, one writer for train and bench: {"id" (with_id: "<started>-<pid>"),
 * "started" (UTC, from started_wall, clock_wall seconds), "git", "host", "cmdline"}. Caller owns
 * it; NULL when out of memory. */
struct cJSON *report_run_json(double started_wall, const char *cmdline, int with_id);

/* {"devices": [...], "cuda", "zeromq", "cjson", "blas", ...}: what this build and machine have
 * below the back ends (experiments' backend_env_json adds the NCCL library, which lives on the
 * all-reduce floor). Caller owns the result. */
struct cJSON *report_env_json(void);

/* {"median","p95","min","max","mean"} of x[0..n) (all 0 when n == 0). Sorts a copy. */
struct cJSON *report_dist_json(const double *x, int n);

/* p-th percentile (0..100, nearest-rank on a sorted copy) of x[0..n); 0 when n == 0. */
double report_percentile(const double *x, int n, double p);

/* ---- Rank entries: one shape for workers (train), servers and bench (engine/report_entry.c) ---- */


/* A member's entry of the report's "ranks" array: rank, role ("worker" or "server"), device,
 * samples, memory (this process's accounted peaks per tag, what the device says, this
 * process's device bytes from NVML or null, host peak RSS) and traffic (report_traffic_json).
 * traffic may be NULL (no data plane). Caller owns it; NULL on OOM. */
struct cJSON *report_entry(int rank, const char *role, Device *dev, long long samples, const SyncTraffic *traffic);

/* {"bytes_sent", "bytes_received", "messages", "messages_sent", "messages_received", "dropped",
 * "transport", "measured"[, "algorithm"]} of a SyncTraffic (engine/sync.h). */
struct cJSON *report_traffic_json(const SyncTraffic *traffic);

/* Rank 0, once every entry is in: each entry's traffic.transport_received, what the member
 * received over (its "transport" names what it sent over: a ring rank's right-hand link). "tcp"
 * where any byte came over the network (by_link.network); where all came on its node, its own
 * transport unless that is tcp, else the transport its node's members sent on the node with (a
 * ring rank whose right neighbour is on another node hears from its left one over shared
 * memory); without by_link, its transport (its links carry both ways: a ps worker's server, a
 * tree's edges); "" where it received nothing. A node is a host (ranks[].host), and under
 * --nodes an emulated node (ranks[].node). */
void report_transport_received(struct cJSON *ranks);

/* Adds a worker's per-step timeline (StepTimes[0..n), engine/engine.h) to its entry as
 * "_timeline", which report_phases turns into time_s on rank 0; wall_offset maps its clock to
 * the wall clock (trace spans). server_busy_s and server_steps: a server it hosts (0, 0: none). */
void report_entry_timeline(struct cJSON *entry, const StepTimes *times, int n, double wall_offset, double server_busy_s,
                           long long server_steps);

/* Rank 0, once every entry is in: for every worker's "_timeline", idle per step is the time
 * from its arrival at the step's synchronisation to the last worker's (arrivals mapped to rank
 * 0's clock with offset[rank], seconds: member clock minus rank 0's; NULL: all 0), at most the
 * time it was blocked; comm_exposed the rest of that blocked time; other what the phases leave
 * of the step. Writes "time_s" ({"step": dist, "phases": {data, forward, backward, optimizer,
 * comm_exposed, idle, other, comm_total}, "busy", "timed_steps", "server_busy"}) over the steps
 * from warmup on, appends idle spans to the entry's "_trace" if it has one, and removes
 * "_timeline". Returns the number of worker entries done. */
int report_phases(struct cJSON *ranks, int warmup, const double *offset, int noffset);

/* This process's emulated link (net/link.h) as {"text", "bandwidth_bytes_per_s",
 * "latency_s"}, or a JSON null without one; under --nodes also "per": "node", "ranks_per_node"
 * (the ranks that share it) and "intra" (the node's fabric, --intra-link, the same three fields, or
 * null: unpaced). Caller owns it. */
struct cJSON *report_link_json(void);

/* Reads a whole JSON file: a regular file (a FIFO is refused, never waited on) of at most
 * REPORT_MAX_BYTES. NULL with rs_errmsg() naming the file (its size, or the line and column of
 * malformed JSON) on failure. Caller frees with cJSON_Delete. */
struct cJSON *report_read(const char *path);

#endif
