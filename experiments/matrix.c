/* matrix.c - `ringside matrix`: runs every cell of a matrix file as a child `ringside train`, summarises */
#include "matrix.h"
#include "backends.h"
#include "fit.h"
#include "matrix_row.h"
#include "matrix_spec.h"
#include "proc.h"
#include "train.h"
#include "../base/clock.h"
#include "../base/err.h"
#include "../net/launch.h"
#include "../base/log.h"
#include "../engine/report.h"
#include "../engine/config_check.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MATRIX_GRACE_S 5.0   /* SIGTERM to SIGKILL, for a timed-out or interrupted run */
#define MATRIX_SLURM_MAX 48  /* words of --slurm-args */
#define MATRIX_SCHEMA "ringside.matrix/1"
#define MATRIX_LOCK ".lock"  /* in --out: flock'ed for the run, holding the driver's pid */
#define MATRIX_LOCK_WAIT_S 15.0 /* how long a lock left by a dead driver's last run may take to go */

static volatile sig_atomic_t matrix_stop = 0;

static void matrix_on_signal(int sig) { matrix_stop = sig; }

/* ---- options --------------------------------------------------------------------------------- */

typedef struct {
    const char *file, *out, *only;
    char bin[PATH_MAX];
    int resume, dry_run;
    int slurm;                          /* --launcher slurm: each run a job step */
    char srun[PATH_MAX];                /* srun's path, found on the PATH */
    char slurm_buf[2048];               /* --slurm-args, split in place into slurm_args */
    char *slurm_args[MATRIX_SLURM_MAX];
    int nslurm;
} MatrixOpts;

#define MATRIX_USAGE \
    "usage: ringside matrix FILE.json --out DIR [--resume] [--dry-run] [--only k=v,...] [--bin PATH]\n" \
    "                       [--launcher local|slurm] [--slurm-args \"...\"]\n"

static void matrix_usage(FILE *f) {
    fprintf(f,
            MATRIX_USAGE
            "\n"
            "Runs every cell of an experiment matrix (the cartesian product of its axes, minus its\n"
            "exclusions) x its repeats, each as `ringside train ... --report DIR/<cell>-r<k>.json`, and\n"
            "writes DIR/summary.json and DIR/summary.csv (one row per run). A failing or timed-out run is\n"
            "recorded with its error and the matrix goes on. Ctrl-C (or SIGTERM, SIGHUP) stops the running\n"
            "cell and keeps the finished ones; --resume runs the rest. DIR is locked for the run (DIR/.lock):\n"
            "a second driver on it is refused. Matrix files: experiments/matrices/*.json; format: docs/matrix.md.\n"
            "\n"
            "  --out DIR        where reports, logs and the summary go (created)\n"
            "  --resume         keep every run whose report exists, parses and was made with its cell's\n"
            "                   options (the report's config against the cell's, all but report, quiet,\n"
            "                   verbose, timeout); run the rest again, saying how many and why. A kept\n"
            "                   diverged run, or one whose replicas differ, keeps that status\n"
            "  --dry-run        list the runs and their command lines, and check every cell by starting\n"
            "                   it for one step (in a temporary folder); exit 2 when one is refused\n"
            "  --only k=v,...   run only the cells with these values (e.g. sync=ps,ranks=4)\n"
            "  --bin PATH       the ringside binary to run (default: this one)\n"
            "  --launcher L     local (default): each run starts its ranks here; slurm: each run is a\n"
            "                   Slurm job step, `srun --ntasks=T` (T = ranks + dedicated servers)\n"
            "  --slurm-args S   more srun options for every run (split at spaces), e.g.\n"
            "                   \"--partition=gpu --gpus-per-task=1\" (with --launcher slurm)\n"
            "\n"
            "exit status: 0 all runs ok, 1 a run failed, timed out, diverged (its loss stopped being finite)\n"
            "or ended with ranks holding different parameters (train's exit 7),\n"
            "2 bad matrix or option, 5 DIR in use by another driver, 130 interrupted\n");
}

/* Finds name on the PATH: its path into out (len bytes), 1; 0 when no executable of that name is there. */
static int matrix_which(const char *name, char *out, size_t len) {
    const char *path = getenv("PATH");
    if (!path || !*path) return 0;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if ((size_t)snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", name) < len && access(out, X_OK) == 0) return 1;
        p += n + (p[n] == ':');
    }
    out[0] = 0;
    return 0;
}

/* --launcher and --slurm-args, once every option is read: the launcher's name, srun on the PATH,
 * the extra words (split at spaces; none may set the task count, which each run's cell decides). */
static int matrix_parse_launcher(MatrixOpts *o, const char *launcher, const char *slurm_args) {
    if (launcher && strcmp(launcher, "local") && strcmp(launcher, "slurm"))
        return rs_error(RS_ERR_INPUT, "--launcher '%s': expected local or slurm", launcher);
    o->slurm = launcher && !strcmp(launcher, "slurm");
    if (slurm_args && !o->slurm) return rs_error(RS_ERR_INPUT, "--slurm-args applies to --launcher slurm only");
    if (!o->slurm) return RS_OK;
    if (!matrix_which("srun", o->srun, sizeof o->srun))
        return rs_error(RS_ERR_INPUT, "--launcher slurm: srun is not on the PATH (install Slurm's client, slurm-client on "
                                      "Debian, or run the matrix where Slurm is)");
    if (!slurm_args) return RS_OK;
    if (strlen(slurm_args) >= sizeof o->slurm_buf) return rs_error(RS_ERR_INPUT, "--slurm-args: longer than %zu characters", sizeof o->slurm_buf - 1);
    snprintf(o->slurm_buf, sizeof o->slurm_buf, "%s", slurm_args);
    for (char *save = NULL, *w = strtok_r(o->slurm_buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        if (o->nslurm == MATRIX_SLURM_MAX) return rs_error(RS_ERR_INPUT, "--slurm-args: more than %d words", MATRIX_SLURM_MAX);
        if (!strncmp(w, "-n", 2) || (!strncmp(w, "--ntasks", 8) && (w[8] == 0 || w[8] == '=')))
            return rs_error(RS_ERR_INPUT, "--slurm-args '%s': the task count comes from each cell (ranks + dedicated servers)", w);
        o->slurm_args[o->nslurm++] = w;
    }
    return RS_OK;
}

static int matrix_parse_args(int argc, char **argv, MatrixOpts *o, int *help) {
    memset(o, 0, sizeof *o);
    *help = 0;
    const char *launcher = NULL, *slurm_args = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = 1;
            return RS_OK;
        }
        if (!strcmp(a, "--resume")) o->resume = 1;
        else if (!strcmp(a, "--dry-run")) o->dry_run = 1;
        else if (!strcmp(a, "--out") || !strcmp(a, "--only") || !strcmp(a, "--bin") || !strcmp(a, "--launcher") ||
                 !strcmp(a, "--slurm-args")) {
            if (i + 1 >= argc) return rs_error(RS_ERR_INPUT, "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--out")) o->out = v;
            else if (!strcmp(a, "--only")) o->only = v;
            else if (!strcmp(a, "--launcher")) launcher = v;
            else if (!strcmp(a, "--slurm-args")) slurm_args = v;
            else snprintf(o->bin, sizeof o->bin, "%s", v);
        } else if (a[0] == '-') return rs_error(RS_ERR_INPUT, "unknown option '%s'", a);
        else if (o->file) return rs_error(RS_ERR_INPUT, "unexpected argument '%s' (one matrix file)", a);
        else o->file = a;
    }
    if (!o->file) return rs_error(RS_ERR_INPUT, "missing the matrix file");
    if (!o->out && !o->dry_run) return rs_error(RS_ERR_INPUT, "missing --out DIR");
    if (o->out && strlen(o->out) > 900) return rs_error(RS_ERR_INPUT, "--out: path too long");
    RS_TRY(matrix_parse_launcher(o, launcher, slurm_args));
    if (!o->bin[0]) {
        ssize_t n = readlink("/proc/self/exe", o->bin, sizeof o->bin - 1);
        if (n <= 0) return rs_error(RS_ERR_RUNTIME, "cannot find this binary (/proc/self/exe): %s; use --bin", strerror(errno));
        o->bin[n] = 0;
    } else if (access(o->bin, X_OK) != 0) {
        return rs_error(RS_ERR_INPUT, "--bin %s: not an executable file", o->bin);
    }
    return RS_OK;
}

/* mkdir -p dir. 0 or RS_ERR_INPUT naming what is in the way. */
static int matrix_mkdirs(const char *dir) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c == '/' || c == 0) {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return rs_error(RS_ERR_INPUT, "--out %s: cannot create %s: %s", dir, p, strerror(errno));
            *s = c;
        }
        if (!c) break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return rs_error(RS_ERR_INPUT, "--out %s: not a directory", dir);
    if (access(dir, W_OK) != 0) return rs_error(RS_ERR_INPUT, "--out %s: not writable", dir);
    return RS_OK;
}

/* ---- the folder's lock ------------------------------------------------------------------------ */

/* The pid written in the lock file open at fd, 0 when there is none yet. */
static long matrix_lock_holder(int fd) {
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    long pid = strtol(buf, NULL, 10);
    return pid > 0 ? pid : 0;
}

/* 1 when process pid exists. */
static int matrix_pid_alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

/* Locks out for this run: an exclusive flock on out/.lock, which then holds this driver's pid.
 * The descriptor is not close-on-exec, so every process of a run (the cell's launcher, its ranks)
 * holds the lock too, and the kernel releases it when the last of them is gone: a dead driver
 * leaves no stale lock, and a cell still stopping after its driver was killed keeps the next
 * driver out until it has. Where the lock's recorded driver is alive, the call is refused at once;
 * where it is gone, it waits up to MATRIX_LOCK_WAIT_S for its last run to end. Nothing in out is
 * changed unless the lock is taken. Returns 0 with *fd set (the caller's; closing it releases),
 * MATRIX_ERR_BUSY naming the holder, RS_ERR_INPUT/RS_ERR_RUNTIME when the file cannot be opened
 * or locked (a lock file that is a symbolic link, not a regular file, or has another name is
 * refused, never followed or truncated), RS_ERR_INTERRUPTED when a signal stops the wait. */
static int matrix_lock(const char *out, int *fd) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" MATRIX_LOCK, out);
    /* not O_CLOEXEC: see above; never through a link, and never a FIFO's open that blocks */
    int f = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (f < 0)
        return rs_error(RS_ERR_INPUT, "--out %s: cannot open its lock file %s: %s%s", out, path, strerror(errno),
                        errno == ELOOP ? " (a symbolic link: remove it)" : "");
    struct stat st;
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) { /* a planted FIFO, device or hard link */
        close(f);
        return rs_error(RS_ERR_INPUT, "--out %s: its lock file %s is not a plain file of its own (%s): remove it", out,
                        path, S_ISREG(st.st_mode) ? "a hard link to another name" : "not a regular file");
    }
    double end = clock_now() + MATRIX_LOCK_WAIT_S;
    int said = 0;
    long holder = 0;
    while (flock(f, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) {
            int e = errno;
            close(f);
            return rs_error(RS_ERR_RUNTIME, "--out %s: cannot lock %s: %s", out, path, strerror(e));
        }
        holder = matrix_lock_holder(f);
        if (matrix_pid_alive(holder)) {
            close(f);
            return rs_error(MATRIX_ERR_BUSY,
                            "--out %s is in use by another matrix driver, pid %ld (it holds %s): wait for it to end, "
                            "or give another --out; nothing was run or changed", out, holder, path);
        }
        if (holder && !said) {
            printf("# --out %s: its last driver, pid %ld, is gone; waiting up to %.0f s for the run it left to stop\n", out, holder,
                   MATRIX_LOCK_WAIT_S);
            fflush(stdout);
            said = 1;
        }
        if (matrix_stop) {
            close(f);
            return RS_ERR_INTERRUPTED;
        }
        if (clock_now() > end) {
            close(f);
            return rs_error(MATRIX_ERR_BUSY,
                            "--out %s: %s is still locked %.0f s after its driver (pid %ld%s) ended: a process of its last run "
                            "holds it (`fuser %s` names it)", out, path, MATRIX_LOCK_WAIT_S, holder, holder ? "" : " unknown", path);
        }
        usleep(50000);
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, pid, (size_t)n, 0) != n) {
        int e = errno;
        close(f);
        return rs_error(RS_ERR_RUNTIME, "--out %s: cannot write its lock file %s: %s", out, path, strerror(e));
    }
    *fd = f;
    return RS_OK;
}

/* ---- progress -------------------------------------------------------------------------------- */

typedef struct {
    int tty, total, done, ran, ok, failed, skipped;
    int diverged;              /* of the failed, those whose loss stopped being finite */
    double t0, ran_s;          /* start; seconds spent in runs actually executed */
    char current[600];         /* "sync=ps,ranks=4 r1" */
    char last[900];            /* the last result, short */
} Progress;

static void progress_clock(double s, char *out, size_t len) {
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(out, len, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, len, "%d:%02d", t / 60, t % 60);
}

/* The single updating line on a terminal (truncated to its width, so \r can redraw it). */
static void progress_draw(Progress *p, double run_elapsed) {
    if (!p->tty) return;
    char el[32], eta[32] = "?", line[2048];
    double now = clock_now();
    progress_clock(now - p->t0, el, sizeof el);
    int left = p->total - p->done;
    if (p->ran > 0) {
        double per = p->ran_s / p->ran, rest = left * per - run_elapsed;
        progress_clock(rest > 0 ? rest : 0, eta, sizeof eta);
    }
    snprintf(line, sizeof line, "# [%d/%d] %s  elapsed %s  ETA %s  last: %s", p->done + (left > 0), p->total,
             left > 0 ? p->current : "done", el, eta, p->last[0] ? p->last : "-");
    struct winsize ws;
    int cols = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10 ? ws.ws_col : 100;
    if ((int)strlen(line) >= cols) line[cols - 1] = 0;
    printf("\r\033[K%s", line);
    fflush(stdout);
}

static void progress_tick(void *arg, double elapsed) { progress_draw(arg, elapsed); }

/* Records one finished run and prints its line (a permanent line for failures on a terminal). */
static void progress_done(Progress *p, const char *status, const char *error, double wall_s, int ran,
                          const cJSON *row) {
    p->done++;
    if (ran) {
        p->ran++;
        p->ran_s += wall_s;
    }
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(row, "throughput_samples_per_s");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(row, "step_time_median_s");
    char figs[200] = "";
    if (cJSON_IsNumber(tp) && cJSON_IsNumber(st))
        snprintf(figs, sizeof figs, "%.0f samples/s, step %.2f ms", tp->valuedouble, st->valuedouble * 1e3);
    int bad = strcmp(status, "ok") != 0;
    if (bad) snprintf(p->last, sizeof p->last, "%s %s", p->current, status);
    else snprintf(p->last, sizeof p->last, "%s %s", p->current, figs);
    if (p->tty && !bad) return;  /* the next run's line shows it */
    if (p->tty) printf("\r\033[K");
    if (bad) printf("# [%d/%d] %s: %s (exit %d) after %.1f s%s: %s\n", p->done, p->total, p->current,
                    !strcmp(status, "timeout") ? "TIMEOUT" : !strcmp(status, "diverged") ? "DIVERGED"
                    : !strcmp(status, "differ") ? "REPLICAS DIFFER" : "FAILED",
                    cJSON_GetObjectItemCaseSensitive(row, "exit_code")->valueint, wall_s, ran ? "" : " (report kept)", error);
    else if (!ran) printf("# [%d/%d] %s: kept (report exists), %s\n", p->done, p->total, p->current, figs);
    else printf("# [%d/%d] %s: ok in %.1f s, %s\n", p->done, p->total, p->current, wall_s, figs);
    fflush(stdout);
}

/* ---- one run --------------------------------------------------------------------------------- */

/* Reads path as a report of this schema; NULL when absent, unreadable or of another schema
 * (why gets the reason). */
static cJSON *matrix_read_report(const char *path, char *why, size_t len) {
    cJSON *r = report_read(path);
    if (!r) {
        snprintf(why, len, "%s", rs_errmsg());
        return NULL;
    }
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "schema");
    if (!cJSON_IsString(s) || strcmp(s->valuestring, REPORT_SCHEMA)) {
        snprintf(why, len, "%s: schema %s, expected %s", path, cJSON_IsString(s) ? s->valuestring : "(none)", REPORT_SCHEMA);
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

/* Why a run that failed left no message in its log: the log cannot be written (a full disk eats
 * every rank's error). Appends a line saying how the run ended; when that fails, "its log LOG
 * could not be written: <errno's text>" in out, else "". */
static void matrix_log_unwritable(const char *log_path, int code, char *out, size_t len) {
    out[0] = 0;
    FILE *f = fopen(log_path, "a");
    int e = f ? 0 : errno;
    if (f) {
        fprintf(f, "# ringside matrix: the run exited with status %d and no message\n", code);
        if (fflush(f) != 0) e = errno;
        if (fclose(f) != 0 && !e) e = errno;
    }
    if (e) snprintf(out, len, "its log %.900s could not be written: %s", log_path, strerror(e));
}

/* The line of log_path that says why a failed run failed: the first error line of the rank the
 * launcher names last ("rank K failed first ... marked [rank K]"), else the log's first error line
 * (a single process; under Slurm, one of srun's own only when no task wrote one), else its last
 * line; "" for an empty log. Where srun says a node failed, " (srun: Node failure on NODE)" is
 * added: the rank's error is a symptom, the node the cause. */
static void matrix_first_error(const char *log_path, char *out, size_t len) {
    out[0] = 0;
    FILE *f = fopen(log_path, "r");
    if (!f) return;
    char line[1400], tag[48] = "", first_err[1400] = "", first_srun[1400] = "", lost[200] = "";
    int rank = -1;
    while (fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "failed first (");
        const char *nf = strstr(line, "Node failure on "); /* srun's word for a node lost mid-step */
        if (nf && !lost[0]) {
            snprintf(lost, sizeof lost, "%s", nf);
            lost[strcspn(lost, "\r\n")] = 0;
        }
        if (m && (m = strstr(m, "marked [rank ")) && sscanf(m, "marked [rank %d]", &rank) == 1)
            snprintf(tag, sizeof tag, "[rank %d] error:", rank);
        if (!strstr(line, "error:")) continue;
        if (!strncmp(line, "srun: ", 6)) {
            if (!first_srun[0]) snprintf(first_srun, sizeof first_srun, "%s", line);
        } else if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", line);
    }
    if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", first_srun);
    if (tag[0]) { /* that rank's first error line */
        rewind(f);
        while (fgets(line, sizeof line, f))
            if (strstr(line, tag)) {
                snprintf(first_err, sizeof first_err, "%s", line);
                break;
            }
    }
    fclose(f);
    first_err[strcspn(first_err, "\r\n")] = 0;
    if (first_err[0]) snprintf(out, len, "%s", first_err);
    else proc_last_line(log_path, out, len);
    size_t k = strlen(out); /* the node a rank's error is a symptom of, named */
    if (lost[0] && !strstr(out, lost) && k + 16 < len) snprintf(out + k, len - k, " (srun: %s)", lost);
}

/* Options that never make a report stand for another run: the option table's "changes no
 * result" column (base/config.h). */
static int matrix_noise_option(const char *key) { return config_changes_no_result(key); }

/* 1 when report was made with options other than cell c's (every resolved option but the noise
 * above, both ways: an option the report lacks, or one this build does not know, differs too);
 * why gets the first difference, as "steps (4 in the report, 6 in the cell)". 0 when they agree. */
static int matrix_config_differs(const MatrixCell *c, const cJSON *report, char *why, size_t len) {
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(report, "config"), *e;
    cJSON *want = config_json(&c->cfg);
    int differs = 0;
    why[0] = 0;
    if (!cJSON_IsObject(have)) {
        snprintf(why, len, "the report has no config");
        cJSON_Delete(want);
        return 1;
    }
    cJSON_ArrayForEach(e, want) {
        if (matrix_noise_option(e->string)) continue;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(have, e->string);
        if (h && cJSON_Compare(h, e, 1)) continue;
        char *a = h ? cJSON_PrintUnformatted(h) : NULL, *b = cJSON_PrintUnformatted(e);
        snprintf(why, len, "%s (%s in the report, %s in the cell)", e->string, a ? a : "absent", b ? b : "?");
        cJSON_free(a);
        cJSON_free(b);
        differs = 1;
        break;
    }
    if (!differs)
        cJSON_ArrayForEach(e, have) {
            if (matrix_noise_option(e->string) || cJSON_GetObjectItemCaseSensitive(want, e->string)) continue;
            snprintf(why, len, "%s (in the report, unknown to this build)", e->string);
            differs = 1;
            break;
        }
    cJSON_Delete(want);
    return differs;
}

/* Reads the report of a finished run at path for cell c when --resume may keep it: NULL when it is
 * absent, unreadable, of another schema or made with other options (stale gets 1 and why the
 * difference then). */
static cJSON *matrix_keepable(const MatrixCell *c, const char *path, int *stale, char *why, size_t len) {
    *stale = 0;
    cJSON *r = matrix_read_report(path, why, len);
    if (r && matrix_config_differs(c, r, why, len)) {
        *stale = 1;
        cJSON_Delete(r);
        r = NULL;
    }
    return r;
}

/* Puts the alpha-beta prediction into the report's summary (rewritten atomically) unless it is
 * there with the same figures. */
static void matrix_add_prediction(const MatrixSpec *m, const MatrixCell *c, cJSON *rep, const char *path) {
    MatrixLink used, *l = &used;
    const char *how = matrix_row_transport(rep);
    double pred = matrix_row_predict(m, c, how, &used);
    cJSON *sum = cJSON_GetObjectItemCaseSensitive(rep, "summary");
    if (pred < 0 || !cJSON_IsObject(sum)) return;
    const char *link = how[0] ? how : "default";
    char source[1200];
    snprintf(source, sizeof source, "%s%s", l->source, l->transport[0] || l->emulated ? "" : ", the default link");
    const cJSON *old = cJSON_GetObjectItemCaseSensitive(sum, "prediction");
    const cJSON *os = cJSON_GetObjectItemCaseSensitive(old, "step_comm_s");
    const cJSON *oa = cJSON_GetObjectItemCaseSensitive(old, "alpha_s");
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(old, "beta_s_per_byte");
    const cJSON *ol = cJSON_GetObjectItemCaseSensitive(old, "link");
    const cJSON *oe = cJSON_GetObjectItemCaseSensitive(old, "from_emulated_link");
    if (cJSON_IsNumber(os) && os->valuedouble == pred && cJSON_IsNumber(oa) && oa->valuedouble == l->alpha_s &&
        cJSON_IsNumber(ob) && ob->valuedouble == l->beta_s_per_byte && cJSON_IsString(ol) && !strcmp(ol->valuestring, link) &&
        cJSON_IsBool(oe) && cJSON_IsTrue(oe) == l->emulated)
        return;
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "model", "alpha-beta");
    cJSON_AddStringToObject(p, "link", link);
    cJSON_AddNumberToObject(p, "alpha_s", l->alpha_s);
    cJSON_AddNumberToObject(p, "beta_s_per_byte", l->beta_s_per_byte);
    cJSON_AddNumberToObject(p, "step_comm_s", pred);
    cJSON_AddStringToObject(p, "source", source);
    cJSON_AddBoolToObject(p, "from_emulated_link", l->emulated);
    if (old) cJSON_ReplaceItemInObjectCaseSensitive(sum, "prediction", p);
    else cJSON_AddItemToObject(sum, "prediction", p);
    if (report_write_atomic(path, rep) != RS_OK) log_warn("%s", rs_errmsg());
}

/* ---- how a run starts: here, or as a Slurm job step ------------------------------------------- */

#define MATRIX_EXTRA_ARGS 14 /* the binary, "train", the driver's options after the cell's, NULL */
#define MATRIX_STEP_ARGS (8 + MATRIX_SLURM_MAX) /* srun, its options and the user's, the task's shell */

/* What a run's processes get besides its command line. */
typedef struct {
    int tasks, servers;      /* processes (ranks + dedicated servers), and those servers */
    char ntasks[32], port[40], token[64], nservers[40];
    char *env[4];            /* "NAME=VALUE" for the step's tasks, NULL-terminated (none for a local run) */
} MatrixStep;

/* The shell every task of a Slurm step runs before it execs ringside (argv after it): the last
 * RINGSIDE_SERVERS tasks are the dedicated servers and the others the workers, with torchrun's
 * variables for the worker count; MASTER_ADDR, unless given, is the step's first node, where task
 * 0 runs. experiments/slurm/task.sh is the same for srun by hand: change both together. */
static const char matrix_task_sh[] =
    "w=$((SLURM_NTASKS - ${RINGSIDE_SERVERS:-0})); "
    "if [ -z \"${MASTER_ADDR:-}\" ]; then first=$(scontrol show hostnames \"$SLURM_STEP_NODELIST\" | head -n 1); "
    "MASTER_ADDR=$(scontrol show node -o \"$first\" 2>/dev/null | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p'); "
    "MASTER_ADDR=${MASTER_ADDR:-$first}; fi; "
    "export MASTER_ADDR; unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE; "
    "if [ \"$SLURM_PROCID\" -ge \"$w\" ]; then "
    "export RINGSIDE_ROLE=server RINGSIDE_SERVER_ID=$((SLURM_PROCID - w)) WORLD_SIZE=$w; "
    "elif [ \"$w\" -lt \"$SLURM_NTASKS\" ]; then "
    "export RINGSIDE_ROLE=worker RANK=$SLURM_PROCID WORLD_SIZE=$w LOCAL_RANK=$SLURM_LOCALID; fi; "
    "exec \"$@\"";

/* Whether a run of g communicates at all (a back end other than none, on 2 ranks or more). */
static int matrix_talks(const Config *g) {
    BackendShape s;
    return g->nranks >= 2 && backend_shape(g, &s) == RS_OK && s.arch != ARCH_NONE;
}

/* The server processes a run of g starts beside its ranks (train's: its back end's shape). */
static int matrix_servers(const Config *g) { return backend_servers(g); }

/* 128 random bits as 32 hex digits into out (at least 33 bytes). */
static int matrix_token(char *out) {
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b) : -1;
    if (fd >= 0) close(fd);
    if (n != (ssize_t)sizeof b) return rs_error(RS_ERR_RUNTIME, "cannot read /dev/urandom for a job token: %s", strerror(errno));
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
    return RS_OK;
}

/* Prepares a run of tasks processes, servers of them dedicated servers: for Slurm, a job token
 * of its own, MASTER_PORT (a port free here, unless the environment sets one) and the server count
 * for its tasks. 0, or RS_ERR_RUNTIME (no random source, no free port). */
static int matrix_step_prepare(const MatrixOpts *o, int tasks, int servers, MatrixStep *s) {
    memset(s, 0, sizeof *s);
    s->tasks = tasks;
    s->servers = servers;
    if (!o->slurm) return RS_OK;
    int k = 0;
    snprintf(s->ntasks, sizeof s->ntasks, "--ntasks=%d", tasks);
    char tok[40];
    RS_TRY(matrix_token(tok));
    snprintf(s->token, sizeof s->token, "RINGSIDE_JOB_TOKEN=%s", tok);
    s->env[k++] = s->token;
    snprintf(s->nservers, sizeof s->nservers, "RINGSIDE_SERVERS=%d", servers);
    s->env[k++] = s->nservers;
    const char *given = getenv("MASTER_PORT");
    if (!given || !*given) {
        int port = launch_free_port("127.0.0.1");
        if (!port) return rs_error(RS_ERR_RUNTIME, "cannot find a free TCP port for MASTER_PORT");
        snprintf(s->port, sizeof s->port, "MASTER_PORT=%d", port);
        s->env[k++] = s->port;
    }
    s->env[k] = NULL;
    return RS_OK;
}

/* Writes the words that start a run before its ringside command line into argv (room for
 * MATRIX_STEP_ARGS): none for a local run; srun, the task count, the user's --slurm-args and the
 * task's shell for Slurm. Returns how many. */
static int matrix_step_argv(const MatrixOpts *o, MatrixStep *s, char **argv) {
    if (!o->slurm) return 0;
    int k = 0;
    argv[k++] = (char *)o->srun;
    argv[k++] = s->ntasks;
    argv[k++] = "--kill-on-bad-exit=1";  /* one task failing stops the others, as the local launcher does */
    for (int i = 0; i < o->nslurm; i++) argv[k++] = o->slurm_args[i];
    argv[k++] = "/bin/sh";
    argv[k++] = "-c";
    argv[k++] = (char *)matrix_task_sh;
    argv[k++] = "ringside-task";  /* $0 of that shell */
    return k;
}

/* Fills argv (room for c->nargs + MATRIX_EXTRA_ARGS + MATRIX_STEP_ARGS) with the command line of
 * a run of cell c writing its report to report, started as s says (matrix_step_prepare); probe
 * adds what makes it a one-step check (--dry-run). */
static void matrix_argv(const MatrixOpts *o, MatrixStep *s, const MatrixCell *c, char *report, int probe, char **argv) {
    int k = matrix_step_argv(o, s, argv);
    argv[k++] = (char *)o->bin;
    argv[k++] = "train";
    for (int i = 0; i < c->nargs; i++) argv[k++] = c->args[i];
    if (probe) {
        static char *const one_step[] = {"--steps", "1", "--warmup", "0", "--eval-every", "0", NULL};
        for (int i = 0; one_step[i]; i++) argv[k++] = one_step[i];
    }
    argv[k++] = "--report";
    argv[k++] = report;
    argv[k++] = "--quiet";
    argv[k] = NULL;
}

/* matrix_step_prepare for a run of cell c. */
static int matrix_cell_step(const MatrixOpts *o, const MatrixCell *c, MatrixStep *s) {
    int servers = matrix_servers(&c->cfg);
    return matrix_step_prepare(o, c->cfg.nranks + servers, servers, s);
}

/* What a run's report says of it beside its exit status, in one place for a report kept and one
 * just written: "diverged" (its loss stopped being finite), "differ" (replicas that should agree
 * do not) or "ok"; *code gets the exit status train gives such a run (0 for ok), err why. */
static const char *matrix_report_status(const cJSON *rep, int *code, char *err, size_t len) {
    int at;
    *code = 0;
    if (matrix_row_diverged(rep, &at)) {
        *code = TRAIN_ERR_DIVERGED;
        snprintf(err, len, "its report says the loss stopped being finite at step %d", at);
        return "diverged";
    }
    if (matrix_row_differ(rep, err, len)) {
        *code = TRAIN_ERR_REPLICAS;
        return "differ";
    }
    return "ok";
}

/* Runs (or, with --resume, keeps) run rep of cell c; returns its summary row (NULL when the run
 * was interrupted: it did not finish). *failed is set when it failed, timed out or diverged (its
 * loss stopped being finite: train's TRAIN_ERR_DIVERGED, the report kept and marked so). */
static cJSON *matrix_one(const MatrixSpec *m, const MatrixOpts *o, const MatrixCell *c, int rep,
                         Progress *p, int *failed) {
    char name[700], path[PATH_MAX], logp[PATH_MAX], why[1200] = "", err[1400] = "";
    snprintf(name, sizeof name, "%s-r%d.json", c->id, rep);
    snprintf(path, sizeof path, "%s/%s", o->out, name);
    snprintf(logp, sizeof logp, "%s/%s-r%d.log", o->out, c->id, rep);
    snprintf(p->current, sizeof p->current, "%s r%d", c->id, rep);
    MatrixOutcome out = {.status = "ok", .report = name, .error = ""};
    cJSON *rep_json = NULL, *row;
    *failed = 0;
    int stale = 0;
    if (o->resume && (rep_json = matrix_keepable(c, path, &stale, why, sizeof why))) {
        out.resumed = 1;
        /* kept as what it is: running it again diverges again, and an all-reduce that drifts drifts again */
        out.status = matrix_report_status(rep_json, &out.exit_code, err, sizeof err);
        if (strcmp(out.status, "ok")) {
            out.error = err;
            *failed = 1;
        }
        matrix_add_prediction(m, c, rep_json, path);
        row = matrix_row_make(m, c, rep, &out, rep_json);
        cJSON_Delete(rep_json);
        progress_done(p, out.status, err, 0, 0, row);
        return row;
    }
    if (stale) {
        if (p->tty) printf("\r\033[K");
        printf("# %s r%d: its report was made with other options, run again: %s\n", c->id, rep, why);
        fflush(stdout);
    }
    unlink(path);  /* a stale report must not stand for this run */
    unlink(logp);
    char *argv[c->nargs + MATRIX_EXTRA_ARGS + MATRIX_STEP_ARGS];
    MatrixStep step;
    int prc = matrix_cell_step(o, c, &step);
    if (prc == RS_OK) matrix_argv(o, &step, c, path, 0, argv);
    progress_draw(p, 0);
    ProcResult pr;
    int code;
    if (prc != RS_OK ||
        proc_run(argv, logp, step.env, m->timeout_s, MATRIX_GRACE_S, &matrix_stop, progress_tick, p, 0.5, &pr) != RS_OK) {
        snprintf(err, sizeof err, "%s", rs_errmsg());
        out.status = "failed";
        out.exit_code = RS_ERR_RUNTIME;
    } else if (pr.outcome == PROC_STOPPED) {
        unlink(path);
        return NULL;
    } else {
        out.exit_code = pr.exit_code;
        out.wall_s = pr.wall_s;
        if (pr.outcome == PROC_TIMED_OUT) proc_last_line(logp, why, sizeof why);
        else matrix_first_error(logp, why, sizeof why);
        if (pr.outcome == PROC_TIMED_OUT) {
            out.status = "timeout";
            snprintf(err, sizeof err, "timed out after %.0f s%s%s", m->timeout_s, why[0] ? ": " : "", why);
            unlink(path);
        } else if ((pr.exit_code == TRAIN_ERR_DIVERGED || pr.exit_code == TRAIN_ERR_REPLICAS) &&
                   (rep_json = matrix_read_report(path, err, sizeof err)) &&
                   matrix_report_status(rep_json, &code, err, sizeof err) && code == pr.exit_code) {
            /* a result, not a crash: its report stays, marked, beside the others (differ: it says which ranks) */
            out.status = code == TRAIN_ERR_DIVERGED ? "diverged" : "differ";
            if (why[0]) snprintf(err, sizeof err, "%s", why);
        } else if (pr.exit_code != 0) {
            cJSON_Delete(rep_json);
            rep_json = NULL;
            out.status = "failed";
            if (!why[0]) matrix_log_unwritable(logp, pr.exit_code, why, sizeof why);
            snprintf(err, sizeof err, "%s%s", why[0] && strstr(why, "could not be written") ? "exited without a message: " : "",
                     why[0] ? why : "exited without a message");
            unlink(path);
        } else if (!(rep_json = matrix_read_report(path, why, sizeof why))) {
            out.status = "failed";
            snprintf(err, sizeof err, "exit 0 but no readable report: %s", why);
        }
    }
    *failed = strcmp(out.status, "ok") != 0;
    out.error = err;
    if (rep_json) matrix_add_prediction(m, c, rep_json, path);
    row = matrix_row_make(m, c, rep, &out, rep_json);
    cJSON_Delete(rep_json);
    progress_done(p, out.status, err, out.wall_s, 1, row);
    return row;
}

/* ---- the summary ----------------------------------------------------------------------------- */

/* The runs of the matrix in order (repeat-major), one slot each: the row of a run done now, one
 * kept from the summary already in OUT (--only), or NULL. */
typedef struct {
    cJSON **row;   /* repeats x ncells, owned */
    int n;
} MatrixRows;

static cJSON **matrix_slot(const MatrixSpec *m, MatrixRows *rows, int rep, int cell) {
    return &rows->row[(size_t)(rep - 1) * (size_t)m->ncells + (size_t)cell];
}

/* --only: takes into rows every run of the summary already in OUT whose cell is in the matrix but
 * not selected now, so that the new runs merge into it. A row whose report is gone, or was made
 * with other options than its cell's, is left out; so is a row of a cell the matrix no longer has.
 * Prints what it kept and left out. */
static void matrix_merge_old(const MatrixSpec *m, const MatrixOpts *o, MatrixRows *rows) {
    char path[PATH_MAX], why[1200];
    snprintf(path, sizeof path, "%s/summary.json", o->out);
    if (access(path, F_OK) != 0) return;
    cJSON *old = report_read(path);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(old, "schema"), *r;
    if (!cJSON_IsString(schema) || strcmp(schema->valuestring, MATRIX_SCHEMA)) {
        printf("# --only: %s is not a %s summary: it is replaced, not merged into\n", path, MATRIX_SCHEMA);
        cJSON_Delete(old);
        return;
    }
    int kept = 0, stale = 0, gone = 0;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(old, "runs")) {
        const cJSON *cell = cJSON_GetObjectItemCaseSensitive(r, "cell"), *rep = cJSON_GetObjectItemCaseSensitive(r, "repeat");
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(r, "report");
        int i = 0;
        while (cJSON_IsString(cell) && i < m->ncells && strcmp(m->cells[i].id, cell->valuestring)) i++;
        if (!cJSON_IsString(cell) || i == m->ncells || !cJSON_IsNumber(rep) || rep->valueint < 1 || rep->valueint > m->repeats) {
            gone++;
            continue;
        }
        if (m->cells[i].selected || *matrix_slot(m, rows, rep->valueint, i)) continue;
        if (cJSON_IsString(file) && file->valuestring[0]) {
            int differs;
            snprintf(path, sizeof path, "%s/%s", o->out, file->valuestring);
            cJSON *j = matrix_keepable(&m->cells[i], path, &differs, why, sizeof why);
            cJSON_Delete(j);
            if (!j) {
                stale++;
                continue;
            }
        }
        *matrix_slot(m, rows, rep->valueint, i) = cJSON_Duplicate(r, 1);
        kept++;
    }
    cJSON_Delete(old);
    printf("# --only: merging into %s/summary.json: %d row%s of other cells kept", o->out, kept, kept == 1 ? "" : "s");
    if (stale) printf(", %d left out (report missing or made with other options)", stale);
    if (gone) printf(", %d of cells this matrix does not have left out", gone);
    printf("\n");
    fflush(stdout);
}

static int matrix_write_summary(const MatrixSpec *m, const MatrixOpts *o, const MatrixRows *slots, int interrupted) {
    char path[PATH_MAX], when[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON *rows = cJSON_CreateArray();
    int done = 0, failed = 0, diverged = 0;
    for (int i = 0; i < slots->n; i++) {
        const cJSON *r = slots->row[i];
        if (!r) continue;
        cJSON_AddItemReferenceToArray(rows, (cJSON *)r);
        done++;
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
        failed += !cJSON_IsString(st) || strcmp(st->valuestring, "ok");
        diverged += cJSON_IsString(st) && !strcmp(st->valuestring, "diverged");
    }
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "schema", MATRIX_SCHEMA);
    cJSON_AddStringToObject(s, "name", m->name);
    cJSON_AddStringToObject(s, "matrix", m->path);
    cJSON_AddStringToObject(s, "written", when);
    cJSON_AddBoolToObject(s, "complete", !interrupted && done == slots->n);
    cJSON_AddBoolToObject(s, "interrupted", interrupted);
    if (o->only) cJSON_AddStringToObject(s, "only", o->only);
    cJSON_AddNumberToObject(s, "runs_planned", slots->n);
    cJSON_AddNumberToObject(s, "runs_done", done);
    cJSON_AddNumberToObject(s, "runs_failed", failed);
    cJSON_AddNumberToObject(s, "runs_diverged", diverged);
    cJSON_AddNumberToObject(s, "timeout_s", m->timeout_s);
    cJSON_AddStringToObject(s, "launcher", o->slurm ? "slurm" : "local");
    if (o->slurm) {
        cJSON *sa = cJSON_AddArrayToObject(s, "slurm_args");
        for (int i = 0; i < o->nslurm; i++) cJSON_AddItemToArray(sa, cJSON_CreateString(o->slurm_args[i]));
    }
    if (m->nlinks) {
        cJSON *pr = cJSON_AddObjectToObject(s, "prediction");
        cJSON_AddStringToObject(pr, "model", "alpha-beta");
        cJSON *links = cJSON_AddObjectToObject(pr, "links");
        for (int i = 0; i < m->nlinks; i++) {
            const MatrixLink *l = &m->links[i];
            cJSON *lo = cJSON_AddObjectToObject(links, l->transport[0] ? l->transport : "default");
            cJSON_AddNumberToObject(lo, "alpha_s", l->alpha_s);
            cJSON_AddNumberToObject(lo, "beta_s_per_byte", l->beta_s_per_byte);
            cJSON_AddStringToObject(lo, "source", l->source);
            if (l->fitted) {
                cJSON_AddNumberToObject(lo, "r2", l->r2);
                cJSON_AddNumberToObject(lo, "worst_relative_residual", l->worst_rel);
            }
        }
    } else {
        cJSON_AddNullToObject(s, "prediction");
    }
    cJSON *axes = cJSON_AddArrayToObject(s, "axes");
    for (int a = 0; a < m->naxes; a++) cJSON_AddItemToArray(axes, cJSON_CreateString(m->axis_name[a]));
    cJSON_AddItemToObject(s, "runs", rows);
    snprintf(path, sizeof path, "%s/summary.json", o->out);
    int rc = report_write_atomic(path, s);
    snprintf(path, sizeof path, "%s/summary.csv", o->out);
    if (rc == RS_OK) rc = matrix_row_write_csv(m, rows, path);
    cJSON_Delete(s);
    if (rc != RS_OK) log_error("%s", rs_errmsg());
    return rc;
}

/* --resume: counts the runs whose report would be kept and those whose report was made with
 * other options, and prints how many and why (each distinct first difference once, with its count). */
static void matrix_resume_scan(const MatrixSpec *m, const MatrixOpts *o) {
    enum { MAX_WHY = 8 };
    char whys[MAX_WHY][300], why[1200], path[PATH_MAX];
    int counts[MAX_WHY] = {0}, nwhy = 0, kept = 0, stale_runs = 0;
    for (int r = 1; r <= m->repeats; r++)
        for (int i = 0; i < m->ncells; i++) {
            const MatrixCell *c = &m->cells[i];
            if (!c->selected) continue;
            snprintf(path, sizeof path, "%s/%s-r%d.json", o->out, c->id, r);
            int stale;
            cJSON *j = matrix_keepable(c, path, &stale, why, sizeof why);
            kept += j != NULL;
            cJSON_Delete(j);
            if (!stale) continue;
            stale_runs++;
            int k = 0;
            while (k < nwhy && strcmp(whys[k], why)) k++;
            if (k == nwhy && nwhy < MAX_WHY) snprintf(whys[nwhy++], sizeof whys[0], "%.290s", why);
            if (k < nwhy) counts[k]++;
        }
    printf("# resume: %d report%s kept; %d made with other options, run again%s\n", kept, kept == 1 ? "" : "s", stale_runs,
           stale_runs ? ":" : "");
    for (int k = 0; k < nwhy; k++) printf("#   %d x %s\n", counts[k], whys[k]);
    fflush(stdout);
}

/* ---- "links": "auto" ------------------------------------------------------------------------ */

#define MATRIX_AUTO_MIN_BYTES 1024.0
#define MATRIX_AUTO_MIN_TOP   65536.0 /* the sweep's largest size is at least this */

/* The sweep's largest size: the first 1 KiB x 4^k at or above every selected cell's largest
 * bucket, so that no prediction extrapolates beyond the sizes fitted. */
static double matrix_auto_top(const MatrixSpec *m) {
    double want = MATRIX_AUTO_MIN_TOP, top = MATRIX_AUTO_MIN_BYTES;
    for (int i = 0; i < m->ncells; i++) {
        const Config *g = &m->cells[i].cfg;
        if (!m->cells[i].selected || !matrix_talks(g)) continue;
        double grad = 4.0 * (double)config_param_count(g), bucket = g->bucket_mb * 1048576.0;
        want = fmax(want, fmin(grad, bucket));
    }
    while (top < want) top *= 4;
    return top;
}

/* Runs `ringside bench` of back end sync on 2 ranks (device, 1 KiB to top by 4) into path, or with
 * --resume keeps the report there when it is that back end's and covers top. Returns the report
 * (the caller's), or NULL with why saying what failed (*interrupted set on Ctrl-C). */
static cJSON *matrix_auto_bench(const MatrixSpec *m, const MatrixOpts *o, const char *sync, const char *device, double top,
                                const char *path, const char *logp, char *why, size_t len, int *interrupted) {
    cJSON *b = NULL;
    if (o->resume && (b = report_read(path))) {
        const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(b, "config");
        const cJSON *sy = cJSON_GetObjectItemCaseSensitive(cfg, "sync"), *mx = cJSON_GetObjectItemCaseSensitive(cfg, "max_bytes");
        if (cJSON_IsString(sy) && !strcmp(sy->valuestring, sync) && cJSON_IsNumber(mx) && mx->valuedouble >= top) {
            printf("# links: auto: kept %s\n", path);
            return b;
        }
        cJSON_Delete(b);
    }
    char topt[32];
    snprintf(topt, sizeof topt, "%.0f", top);
    char *bench[] = {(char *)o->bin, "bench", "-n", "2", "--sync", (char *)sync, "--device", (char *)device, "-b", "1K", "-e", topt,
                     "-f", "4", "-w", "2", "-i", "10", "--report", (char *)path, NULL};
    char *argv[sizeof bench / sizeof bench[0] + MATRIX_STEP_ARGS];
    MatrixStep step;
    why[0] = 0;
    if (matrix_step_prepare(o, 2, 0, &step) != RS_OK) {
        snprintf(why, len, "%s", rs_errmsg());
        return NULL;
    }
    int k = matrix_step_argv(o, &step, argv);
    memcpy(argv + k, bench, sizeof bench);
    printf("# links: auto: ringside bench -n 2 --sync %s --device %s -b 1K -e %s -f 4 -w 2 -i 10\n", sync, device, topt);
    fflush(stdout);
    unlink(path);
    ProcResult pr;
    if (proc_run(argv, logp, step.env, m->timeout_s, MATRIX_GRACE_S, &matrix_stop, NULL, NULL, 0.5, &pr) != RS_OK)
        snprintf(why, len, "%s", rs_errmsg());
    else if (pr.outcome == PROC_STOPPED) *interrupted = 1;
    else if (pr.outcome == PROC_TIMED_OUT) snprintf(why, len, "timed out after %.0f s", m->timeout_s);
    else if (pr.exit_code) matrix_first_error(logp, why, len);
    else if (!(b = report_read(path))) snprintf(why, len, "%s", rs_errmsg());
    return b;
}

/* "links": "auto": before the cells, a short bench on 2 ranks of every back end the selected
 * cells use (on their device), from 1 KiB up to their largest bucket by factors of 4, each report
 * kept as OUT/links-bench-<sync>.json, then one fit per transport the benches moved over (as
 * `ringside fit`), which become the matrix's links (a transport the file names keeps its link). A
 * bench that fails is reported and leaves its transport without a prediction. Returns 0, or 130
 * when interrupted. */
static int matrix_links_auto(MatrixSpec *m, const MatrixOpts *o) {
    const char *done[16];
    int ndone = 0, interrupted = 0;
    double top = matrix_auto_top(m);
    char path[PATH_MAX], logp[PATH_MAX], why[1400];
    FitSet set = {0};
    for (int i = 0; i < m->ncells && !interrupted && !matrix_stop; i++) {
        const Config *g = &m->cells[i].cfg;
        if (!m->cells[i].selected || !matrix_talks(g)) continue;
        int seen = 0;
        for (int k = 0; k < ndone; k++) seen |= !strcmp(done[k], g->sync);
        if (seen || ndone == 16) continue;
        done[ndone++] = g->sync;
        snprintf(path, sizeof path, "%s/links-bench-%s.json", o->out, g->sync);
        snprintf(logp, sizeof logp, "%s/links-bench-%s.log", o->out, g->sync);
        cJSON *b = matrix_auto_bench(m, o, g->sync, g->device, top, path, logp, why, sizeof why, &interrupted);
        if (!b) {
            if (!interrupted) printf("# links: auto: the bench of --sync %s failed (%s; log %s): its runs get no prediction\n", g->sync, why, logp);
            continue;
        }
        if (fit_add(&set, b, path) != RS_OK) printf("# links: auto: %s\n", rs_errmsg());
        cJSON_Delete(b);
    }
    if (interrupted || matrix_stop) {
        fit_free(&set);
        return RS_ERR_INTERRUPTED;
    }
    if (set.n && fit_solve(&set) != RS_OK) printf("# links: auto: %s\n", rs_errmsg());
    else
        for (int i = 0; i < set.n && m->nlinks < MATRIX_MAX_LINKS; i++) {
            const FitLink *f = fit_link(&set, i);
            const MatrixLink *named = matrix_spec_link(m, f->transport);
            if (!f->transport[0] || (named && named->transport[0])) continue;
            MatrixLink *l = &m->links[m->nlinks++];
            snprintf(l->transport, sizeof l->transport, "%.7s", f->transport);
            l->alpha_s = f->alpha_s;
            l->beta_s_per_byte = f->beta_s_per_byte;
            l->fitted = 1;
            l->r2 = f->r2;
            l->worst_rel = f->worst_rel;
            snprintf(l->source, sizeof l->source, "auto: fitted on this machine to %.900s (R^2 %.4f, worst residual %+.1f%% at %.0f bytes)",
                     f->worst_source, f->r2, 100 * f->worst_rel, f->worst_bytes);
            printf("# links: auto: %s alpha %.3g s, beta %.3g s/byte, R^2 %.4f, worst residual %+.1f%% at %.0f bytes, %d sizes to %.0f bytes\n",
                   l->transport, l->alpha_s, l->beta_s_per_byte, f->r2, 100 * f->worst_rel, f->worst_bytes, f->points, f->max_bytes);
        }
    fflush(stdout);
    fit_free(&set);
    return RS_OK;
}

/* ---- the command ----------------------------------------------------------------------------- */

/* --dry-run's check of cell c: starts it for one step (--steps 1, no warm-up, no periodic eval)
 * with its report and log in dir, so that every check its ranks make (a back end's refusals, the
 * data, the device) is made. 0, or 1 with why holding the first error line of the rank that
 * failed first; 130 when interrupted. */
static int matrix_probe(const MatrixSpec *m, const MatrixOpts *o, const MatrixCell *c, const char *dir, char *why, size_t len) {
    char report[PATH_MAX], logp[PATH_MAX];
    snprintf(report, sizeof report, "%.4000s/probe.json", dir);
    snprintf(logp, sizeof logp, "%.4000s/probe.log", dir);
    unlink(logp);
    char *argv[c->nargs + MATRIX_EXTRA_ARGS + MATRIX_STEP_ARGS];
    MatrixStep step;
    ProcResult pr = {0};
    int rc = matrix_cell_step(o, c, &step);
    if (rc == RS_OK) {
        matrix_argv(o, &step, c, report, 1, argv);
        rc = proc_run(argv, logp, step.env, m->timeout_s, MATRIX_GRACE_S, &matrix_stop, NULL, NULL, 0.5, &pr);
    }
    unlink(report);
    why[0] = 0;
    if (rc != RS_OK) snprintf(why, len, "%s", rs_errmsg());
    else if (pr.outcome == PROC_STOPPED) rc = RS_ERR_INTERRUPTED;
    else if (pr.outcome == PROC_TIMED_OUT) snprintf(why, len, "one step did not finish in timeout_s (%.0f s)", m->timeout_s);
    else if (pr.exit_code != 0 && pr.exit_code != TRAIN_ERR_DIVERGED && pr.exit_code != TRAIN_ERR_REPLICAS)
        matrix_first_error(logp, why, len);
    unlink(logp);
    if (rc == RS_ERR_INTERRUPTED) return rc;
    /* a step that diverged, or whose replicas differ, started */
    return why[0] || (pr.exit_code != 0 && pr.exit_code != TRAIN_ERR_DIVERGED && pr.exit_code != TRAIN_ERR_REPLICAS) ? 1 : 0;
}

/* --dry-run: lists every run and its command line, and checks every selected cell by starting it
 * for one step in a temporary folder (nothing is written in OUT). Returns 0, RS_ERR_INPUT when a
 * cell is refused (each one named with its rank's error), 130 when interrupted. */
static int matrix_dry_run(const MatrixSpec *m, const MatrixOpts *o, int total) {
    printf("# matrix %s: %d run%s (%d repeat%s per cell, timeout %.0f s each)\n", m->name, total, total == 1 ? "" : "s",
           m->repeats, m->repeats == 1 ? "" : "s", m->timeout_s);
    for (int i = 0; i < m->nlinks; i++)
        printf("# alpha-beta, %s: alpha %.3g s, beta %.3g s/byte (%s)\n", m->links[i].transport[0] ? m->links[i].transport : "default",
               m->links[i].alpha_s, m->links[i].beta_s_per_byte, m->links[i].source);
    if (m->links_auto)
        printf("# links: auto: before the cells, a bench on 2 ranks of each back end the cells use (1K to %.0f bytes by 4), fitted per transport\n",
               matrix_auto_top(m));
    for (int r = 1; r <= m->repeats; r++)
        for (int i = 0; i < m->ncells; i++) {
            const MatrixCell *c = &m->cells[i];
            if (!c->selected) continue;
            char path[PATH_MAX], why[1200];
            snprintf(path, sizeof path, "%s/%s-r%d.json", o->out ? o->out : "OUT", c->id, r);
            int have = 0, stale = 0;
            if (o->out && o->resume) {
                cJSON *j = matrix_keepable(c, path, &stale, why, sizeof why);
                have = j != NULL;
                cJSON_Delete(j);
            }
            printf("%s r%d%s\t", c->id, r, have ? " (kept: report exists)" : stale ? " (run again: report made with other options)" : "");
            if (o->slurm) {
                printf("srun --ntasks=%d", c->cfg.nranks + matrix_servers(&c->cfg));
                for (int a = 0; a < o->nslurm; a++) printf(" %s", o->slurm_args[a]);
                printf(" ");
            }
            printf("ringside train");
            for (int a = 0; a < c->nargs; a++) printf(" %s", c->args[a]);
            printf(" --report %s --quiet\n", path);
        }
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/ringside-dry-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        log_error("--dry-run: cannot make a temporary folder %s: %s", dir, strerror(errno));
        return RS_ERR_RUNTIME;
    }
    int cells = 0, refused = 0, rc = RS_OK;
    for (int i = 0; i < m->ncells && rc == RS_OK; i++) cells += m->cells[i].selected;
    printf("# checking the %d cell%s: each starts for one step, as its ranks would\n", cells, cells == 1 ? "" : "s");
    fflush(stdout);
    for (int i = 0; i < m->ncells && rc == RS_OK; i++) {
        const MatrixCell *c = &m->cells[i];
        if (!c->selected) continue;
        char why[1400];
        int st = matrix_probe(m, o, c, dir, why, sizeof why);
        if (st == RS_ERR_INTERRUPTED) rc = st;
        else if (st) {
            refused++;
            printf("# REFUSED %s: %s\n", c->id, why);
            fflush(stdout);
        }
    }
    rmdir(dir);
    if (rc == RS_ERR_INTERRUPTED) {
        printf("# interrupted by %s\n", launch_signal_name(matrix_stop));
        return rc;
    }
    if (refused) {
        printf("# dry run: %d of %d cell%s refused (above); nothing was run or written\n", refused, cells, cells == 1 ? "" : "s");
        return RS_ERR_INPUT;
    }
    printf("# dry run: every cell passed its ranks' checks\n");
    return RS_OK;
}

int matrix_main(int argc, char **argv) {
    MatrixOpts o;
    int help, rc = matrix_parse_args(argc, argv, &o, &help);
    if (help) {
        matrix_usage(stdout);
        return RS_OK;
    }
    if (rc != RS_OK) {
        log_error("matrix: %s", rs_errmsg());
        fprintf(stderr, MATRIX_USAGE);
        return rc;
    }
    MatrixSpec m;
    if ((rc = matrix_spec_load(&m, o.file)) != RS_OK || (rc = matrix_spec_select(&m, o.only)) != RS_OK) {
        log_error("%s", rs_errmsg());
        matrix_spec_free(&m);
        return rc;
    }
    int selected = 0;
    for (int i = 0; i < m.ncells; i++) selected += m.cells[i].selected;
    Progress p = {.tty = isatty(STDOUT_FILENO), .total = selected * m.repeats, .t0 = clock_now()};
    LaunchSignals old;
    launch_catch_stops(matrix_on_signal, &old); /* SIGINT, SIGTERM, SIGHUP: stop the running cell, keep the rest */
    if (o.dry_run) {
        rc = matrix_dry_run(&m, &o, p.total);
        launch_restore_stops(&old);
        matrix_spec_free(&m);
        return rc;
    }
    int lock = -1;
    if ((rc = matrix_mkdirs(o.out)) != RS_OK || (rc = matrix_lock(o.out, &lock)) != RS_OK) {
        if (rc == RS_ERR_INTERRUPTED) printf("# interrupted by %s while waiting for --out %s\n", launch_signal_name(matrix_stop), o.out);
        else log_error("matrix: %s", rs_errmsg());
        launch_restore_stops(&old);
        matrix_spec_free(&m);
        return rc;
    }
    printf("# matrix %s: %d cell%s x %d repeat%s = %d run%s -> %s%s%s\n", m.name, selected, selected == 1 ? "" : "s",
           m.repeats, m.repeats == 1 ? "" : "s", p.total, p.total == 1 ? "" : "s", o.out, o.resume ? " (resume)" : "",
           o.slurm ? ", each a Slurm job step (srun)" : "");
    fflush(stdout);
    if (m.links_auto && matrix_links_auto(&m, &o) == RS_ERR_INTERRUPTED) {
        printf("# interrupted by %s before the cells, in the links' benches\n", launch_signal_name(matrix_stop));
        launch_restore_stops(&old);
        close(lock);
        matrix_spec_free(&m);
        return RS_ERR_INTERRUPTED;
    }
    if (o.resume) matrix_resume_scan(&m, &o);
    MatrixRows rows = {.n = m.repeats * m.ncells};
    rows.row = calloc((size_t)rows.n, sizeof *rows.row);
    if (!rows.row) {
        log_error("out of memory");
        launch_restore_stops(&old);
        close(lock);
        matrix_spec_free(&m);
        return RS_ERR_RUNTIME;
    }
    if (o.only) matrix_merge_old(&m, &o, &rows);
    /* repeat-major: every cell once, then again, so that drift touches every cell alike */
    char stopped[sizeof p.current] = ""; /* the run a signal stopped */
    for (int r = 1; r <= m.repeats && !matrix_stop; r++)
        for (int i = 0; i < m.ncells && !matrix_stop; i++) {
            if (!m.cells[i].selected) continue;
            int failed;
            cJSON *row = matrix_one(&m, &o, &m.cells[i], r, &p, &failed);
            if (!row) {
                snprintf(stopped, sizeof stopped, "%s", p.current);
                break;
            }
            *matrix_slot(&m, &rows, r, i) = row;
            p.failed += failed;
            p.ok += !failed;
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(row, "status");
            p.diverged += cJSON_IsString(st) && !strcmp(st->valuestring, "diverged");
            matrix_write_summary(&m, &o, &rows, 0);
        }
    int interrupted = matrix_stop != 0;
    if (p.tty) printf("\r\033[K");
    int wrc = matrix_write_summary(&m, &o, &rows, interrupted);
    char el[32], sum[2 * PATH_MAX + 1200]; /* never a summary that was not written */
    if (wrc == RS_OK) snprintf(sum, sizeof sum, "summary: %s/summary.json, %s/summary.csv", o.out, o.out);
    else snprintf(sum, sizeof sum, "NO summary written (%s)", rs_errmsg());
    progress_clock(clock_now() - p.t0, el, sizeof el);
    char div[48] = "";
    if (p.diverged) snprintf(div, sizeof div, " (%d diverged)", p.diverged);
    if (interrupted && stopped[0])
        printf("# interrupted by %s: the run of %s was stopped (its report is not kept; --resume runs it again); "
               "%d of %d runs finished (%d failed) in %s; %s\n",
               launch_signal_name(matrix_stop), stopped, p.done, p.total, p.failed, el, sum);
    else if (interrupted)
        printf("# interrupted by %s between runs: %d of %d runs finished (%d failed) in %s; %s\n",
               launch_signal_name(matrix_stop), p.done, p.total, p.failed, el, sum);
    else
        printf("# done: %d run%s, %d ok, %d failed%s in %s; %s\n", p.done, p.done == 1 ? "" : "s",
               p.ok, p.failed, div, el, sum);
    fflush(stdout);
    launch_restore_stops(&old);
    close(lock);
    for (int i = 0; i < rows.n; i++) cJSON_Delete(rows.row[i]);
    free(rows.row);
    matrix_spec_free(&m);
    if (interrupted) return RS_ERR_INTERRUPTED;
    if (wrc != RS_OK) return wrc;
    return p.failed ? RS_ERR_RUNTIME : RS_OK;
}
