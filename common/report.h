/* report.h - the JSON report: environment, per-rank metrics, summary, written atomically */
#ifndef RS_REPORT_H
#define RS_REPORT_H

#include <stddef.h>

struct cJSON;

#define REPORT_SCHEMA "ringside.report/1"

/* ---- Prototypes ---- */

/* Checks, before any work, that path can be written: its directory exists and is writable and
 * path itself is not a directory or a read-only file. 0 or RS_ERR_INPUT naming the path. */
int report_check_writable(const char *path);

/* Writes root as indented JSON to path through an atomic file (common/atomicfile.h), so readers
 * see the old file or the whole new one, never a part, and a writer killed part-way leaves
 * nothing. 0 or RS_ERR_RUNTIME. Does not take ownership of root. */
int report_write_atomic(const char *path, const struct cJSON *root);

/* {"devices": [...], "cuda", "nccl", "zeromq", "cjson", "blas"}: what this build and machine have.
 * Caller owns the result. */
struct cJSON *report_env_json(void);

/* {"median","p95","min","max","mean"} of x[0..n) (all 0 when n == 0). Sorts a copy. */
struct cJSON *report_dist_json(const double *x, int n);

/* p-th percentile (0..100, nearest-rank on a sorted copy) of x[0..n); 0 when n == 0. */
double report_percentile(const double *x, int n, double p);

/* Reads a whole JSON file. NULL with rs_errmsg() naming the file, line and column on failure.
 * Caller frees with cJSON_Delete. */
struct cJSON *report_read(const char *path);

#endif
