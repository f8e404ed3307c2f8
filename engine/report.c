/* report.c - writes and reads the JSON reports (cJSON), atomically, with the environment block */
#include "report.h"
#include "../base/atomicfile.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "sync.h"

#include <cJSON.h>
#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>
#include <zlib.h>

int report_check_writable(const char *path) {
    struct stat st;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *d = dirname(dir);
    if (stat(d, &st) != 0)
        return rs_error(RS_ERR_INPUT, "%s: directory %s does not exist", path, d);
    if (!S_ISDIR(st.st_mode)) return rs_error(RS_ERR_INPUT, "%s: %s is not a directory", path, d);
    if (access(d, W_OK) != 0)
        return rs_error(RS_ERR_INPUT, "%s: directory %s is not writable", path, d);
    RS_TRY(atomicfile_check_name(path));
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return rs_error(RS_ERR_INPUT, "%s: is a directory", path);
        if (access(path, W_OK) != 0) return rs_error(RS_ERR_INPUT, "%s: file is not writable", path);
    }
    return RS_OK;
}

int report_write_atomic(const char *path, cJSON *root) {
    report_encode_nonfinite(root);
    char *text = cJSON_Print(root);
    if (!text) return rs_error(RS_ERR_RUNTIME, "report %s: out of memory while printing JSON", path);
    size_t len = strlen(text);
    char *line = realloc(text, len + 2); /* the file ends with a newline */
    if (!line) {
        free(text);
        return rs_error(RS_ERR_RUNTIME, "report %s: out of memory while printing JSON", path);
    }
    line[len] = '\n';
    line[len + 1] = 0;
    int rc = atomicfile_write(path, line, len + 1, 0644);
    free(line);
    if (rc != RS_OK) {
        char why[1200];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        return rs_error(rc, "report %s", why);
    }
    return RS_OK;
}

cJSON *report_run_json(double started_wall, const char *cmdline, int with_id) {
    cJSON *run = cJSON_CreateObject();
    if (!run) return NULL;
    char id[96], started[64], host[256] = "";
    time_t now = (time_t)started_wall;
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    gethostname(host, sizeof host - 1);
    if (with_id) {
        snprintf(id, sizeof id, "%s-%d", started, (int)getpid());
        cJSON_AddStringToObject(run, "id", id);
    }
    cJSON_AddStringToObject(run, "started", started);
    cJSON_AddStringToObject(run, "git", RS_GIT);
    cJSON_AddStringToObject(run, "host", host);
    cJSON_AddStringToObject(run, "cmdline", cmdline);
    return run;
}

cJSON *report_env_json(void) {
    cJSON *env = cJSON_CreateObject();
    cJSON *devs = cJSON_AddArrayToObject(env, "devices");
    char buf[256];
    device_cpu_ops()->describe(0, buf, sizeof buf);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "name", "cpu");
    cJSON_AddStringToObject(d, "description", buf);
    cJSON_AddItemToArray(devs, d);
    const DeviceOps *cu = device_cuda_ops();
    int ngpu = cu ? cu->count() : 0;
    for (int i = 0; i < ngpu; i++) {
        cu->describe(i, buf, sizeof buf);
        char name[32];
        snprintf(name, sizeof name, "cuda:%d", i);
        d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "name", name);
        cJSON_AddStringToObject(d, "description", buf);
        cJSON_AddItemToArray(devs, d);
    }
    int maj, min, pat;
    zmq_version(&maj, &min, &pat);
    snprintf(buf, sizeof buf, "%d.%d.%d", maj, min, pat);
    cJSON_AddStringToObject(env, "zeromq", buf);
    cJSON_AddStringToObject(env, "cjson", cJSON_Version());
    cJSON_AddStringToObject(env, "zlib", zlibVersion());
    cJSON_AddNumberToObject(env, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON_AddStringToObject(env, "cpu_kernels_isa", kernels_cpu_isa);
#ifdef OPENBLAS_VERSION
    const char *blas = OPENBLAS_VERSION; /* " OpenBLAS 0.3.21 ": trim the spaces */
    while (*blas == ' ') blas++;
    snprintf(buf, sizeof buf, "%s", blas);
    for (size_t k = strlen(buf); k > 0 && buf[k - 1] == ' ';) buf[--k] = 0;
    cJSON_AddStringToObject(env, "blas", buf);
#else
    cJSON_AddStringToObject(env, "blas", "cblas");
#endif
    cJSON_AddBoolToObject(env, "cuda_build", cu != NULL);
    return env;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double report_percentile(const double *x, int n, double p) {
    if (n <= 0) return 0;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return 0;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double r;
    if (p == 50) r = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    else {
        int k = (int)(p / 100.0 * n + 0.999999) - 1;
        if (k < 0) k = 0;
        if (k >= n) k = n - 1;
        r = s[k];
    }
    free(s);
    return r;
}

cJSON *report_dist_json(const double *x, int n) {
    cJSON *o = cJSON_CreateObject();
    double mn = n ? x[0] : 0, mx = n ? x[0] : 0, sum = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum += x[i];
    }
    cJSON_AddNumberToObject(o, "median", report_percentile(x, n, 50));
    cJSON_AddNumberToObject(o, "p95", report_percentile(x, n, 95));
    cJSON_AddNumberToObject(o, "min", mn);
    cJSON_AddNumberToObject(o, "max", mx);
    cJSON_AddNumberToObject(o, "mean", n ? sum / n : 0);
    return o;
}

cJSON *report_read(const char *path) {
    /* never blocked on a FIFO, never read past REPORT_MAX_BYTES (a report is outside input) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        rs_error(RS_ERR_INPUT, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > REPORT_MAX_BYTES) {
        if (S_ISREG(st.st_mode))
            rs_error(RS_ERR_INPUT, "%s: %.1f MB, more than a report may be (%d MiB): not a report ringside wrote", path,
                     st.st_size / 1e6, REPORT_MAX_BYTES >> 20);
        else rs_error(RS_ERR_INPUT, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        rs_error(RS_ERR_RUNTIME, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        rs_error(RS_ERR_RUNTIME, "%s: out of memory", path);
        return NULL;
    }
    buf[len] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(buf, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= buf && at <= buf + len ? (size_t)(at - buf) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (buf[i] == '\n') { line++; col = 1; } else col++;
        }
        rs_error(RS_ERR_INPUT, "%s:%d:%d: malformed JSON", path, line, col);
    }
    free(buf);
    return root;
}

cJSON *report_number(double x) {
    if (isfinite(x)) return cJSON_CreateNumber(x);
    return cJSON_CreateString(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

cJSON *report_number_array(const double *x, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *v = report_number(x[i]);
        if (!v) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, v);
    }
    return a;
}

int report_value(const cJSON *item, double *x) {
    if (cJSON_IsNumber(item)) {
        *x = item->valuedouble;
        return 1;
    }
    if (!cJSON_IsString(item) || !item->valuestring) return 0;
    const char *s = item->valuestring;
    if (!strcmp(s, "nan")) *x = NAN;
    else if (!strcmp(s, "inf")) *x = INFINITY;
    else if (!strcmp(s, "-inf")) *x = -INFINITY;
    else return 0;
    return 1;
}

int report_encode_nonfinite(cJSON *root) {
    int n = 0;
    for (cJSON *it = root ? root->child : NULL, *next; it; it = next) {
        next = it->next;
        if (!cJSON_IsNumber(it) || isfinite(it->valuedouble)) {
            n += report_encode_nonfinite(it);
            continue;
        }
        cJSON *s = report_number(it->valuedouble);
        if (!s) continue; /* out of memory: this one prints as null */
        s->string = it->string; /* an object member keeps its key (the replaced item gives it up) */
        s->type |= it->type & cJSON_StringIsConst;
        it->string = NULL;
        if (cJSON_ReplaceItemViaPointer(root, it, s)) n++;
    }
    return n;
}
