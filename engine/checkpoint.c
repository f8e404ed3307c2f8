/* checkpoint.c - checkpoint part files, the manifest rank 0 writes last, the resume's checks and the folder's upkeep */
#define _GNU_SOURCE
#include "checkpoint.h"
#include "../base/atomicfile.h"
#include "../base/clock.h"
#include "../base/config.h"
#include "../base/err.h"
#include "../base/hash.h"
#include "../kernels/device.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CKPT_MAGIC "RSCKPT01"
#define CKPT_HEAD (8 + 4 + 4 + 8 + 8)
#define CKPT_KEEP_NAME "MANIFEST"
#define CKPT_MANIFEST_MAX (16 << 20) /* bytes: the options (8 KiB) and ~100 a part */
#define CKPT_LOCK_NAME ".lock"              /* in DIR: flock'ed for the job's life, holding "PID HOST" */
#define CKPT_LOCK_ENV "RINGSIDE_CKPT_LOCK_FD" /* the launcher's lock descriptor, inherited by its ranks */

#ifndef RS_GIT
#define RS_GIT "unknown"
#endif

/* ---- writing a part ------------------------------------------------------------------------ */

void ckpt_writer_init(CkptWriter *w) { memset(w, 0, sizeof *w); }

void ckpt_writer_free(CkptWriter *w) {
    free(w->buf);
    memset(w, 0, sizeof *w);
}

static void ckpt_append(CkptWriter *w, const void *data, size_t n) {
    if (w->oom) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        unsigned char *b = realloc(w->buf, cap);
        if (!b) {
            w->oom = 1;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    if (n && data) memcpy(w->buf + w->len, data, n);
    w->len += n;
}

void ckpt_put(CkptWriter *w, const char *tag, const void *data, size_t bytes) {
    char t[CKPT_TAG] = {0};
    snprintf(t, sizeof t, "%s", tag);
    uint64_t n = bytes;
    ckpt_append(w, t, sizeof t);
    ckpt_append(w, &n, sizeof n);
    ckpt_append(w, data, bytes);
    w->nsec++;
}

int ckpt_put_device(CkptWriter *w, Device *d, const char *tag, const void *src, size_t bytes) {
    ckpt_put(w, tag, NULL, bytes); /* the section's room, filled from the device in place */
    if (w->oom) return rs_error(RS_ERR_RUNTIME, "out of memory for the checkpoint's '%s' (%zu bytes)", tag, bytes);
    int rc = bytes ? device_d2h(d, w->buf + w->len - bytes, src, bytes) : RS_OK;
    if (rc != RS_OK) w->oom = 1; /* the part is not whole: its commit fails */
    return rc;
}

void ckpt_step_dir(const char *dir, long step, char *out, size_t len) { snprintf(out, len, "%s/step-%06ld", dir, step); }

uint64_t ckpt_job_hash(const char *token) { return hash_text(HASH_FNV_INIT, token); }

/* fsync of a folder, so that the names renamed into it last. */
static void ckpt_sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Makes a step folder where missing; one that is a symbolic link is refused, never followed. */
static int ckpt_mkdir(const char *dir) {
    if (mkdir(dir, 0755) == 0 || errno == EEXIST) {
        struct stat st;
        if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return RS_OK;
        if (S_ISLNK(st.st_mode))
            return rs_error(RS_ERR_INPUT, "%s: a symbolic link, not a folder (a checkpoint folder's steps are never "
                                          "followed through links): remove the link", dir);
        return rs_error(RS_ERR_INPUT, "%s: exists and is not a folder", dir);
    }
    return rs_error(RS_ERR_RUNTIME, "%s: cannot make the folder: %s", dir, strerror(errno));
}

int ckpt_commit(CkptWriter *w, const char *dir, long step, const char *name, uint64_t job) {
    char sd[1024], path[1100];
    int rc = RS_OK;
    ckpt_step_dir(dir, step, sd, sizeof sd);
    snprintf(path, sizeof path, "%s/%s", sd, name);
    unsigned char head[CKPT_HEAD];
    uint32_t schema = CKPT_SCHEMA, nsec = w->nsec;
    int64_t st = step;
    memcpy(head, CKPT_MAGIC, 8);
    memcpy(head + 8, &schema, 4);
    memcpy(head + 12, &nsec, 4);
    memcpy(head + 16, &st, 8);
    memcpy(head + 24, &job, 8);
    if (w->oom) {
        rc = rs_error(RS_ERR_RUNTIME, "%s: out of memory building the checkpoint", path);
        goto out;
    }
    if ((rc = ckpt_mkdir(sd)) != RS_OK) goto out;
    uint64_t sum = hash_bytes(hash_bytes(HASH_FNV_INIT, head, sizeof head), w->buf, w->len);
    AtomicFile af;
    if ((rc = atomicfile_open(&af, path, 0644)) != RS_OK) goto out;
    if (fwrite(head, 1, sizeof head, af.f) != sizeof head || (w->len && fwrite(w->buf, 1, w->len, af.f) != w->len) ||
        fwrite(&sum, 1, sizeof sum, af.f) != sizeof sum) {
        int e = errno;
        atomicfile_abort(&af);
        rc = rs_error(RS_ERR_RUNTIME, "%s: %s", path, strerror(e));
        goto out;
    }
    const char *pause = getenv("RINGSIDE_CKPT_TEST_PAUSE");
    if (pause && *pause) { /* the tests' hook: a kill while a part is being written */
        char mark[1200];
        snprintf(mark, sizeof mark, "%s.writing", path);
        FILE *f = fopen(mark, "w");
        if (f) fclose(f);
        long ms = atol(pause);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        unlink(mark);
    }
    if ((rc = atomicfile_commit(&af)) != RS_OK) goto out;
    ckpt_sync_dir(sd);
out:
    ckpt_writer_free(w);
    return rc;
}

/* ---- reading a part ------------------------------------------------------------------------ */

/* A FIFO's, socket's or device's name for a message. */
static const char *ckpt_kind(mode_t m) {
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m) ? "a symbolic link" : "a special file";
}

/* Opens path for reading without ever blocking or following a link (O_NONBLOCK | O_NOFOLLOW: a
 * FIFO planted there is neither waited on nor read) and checks it is a regular file: the
 * descriptor (blocking again), st filled; or -1 with *why set (errno's text, or what it is). */
static int ckpt_open_read(const char *path, struct stat *st, const char **why) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *why = errno == ELOOP ? "a symbolic link (never followed)" : strerror(errno);
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        static __thread char buf[64];
        snprintf(buf, sizeof buf, "not a regular file (%s)", ckpt_kind(st->st_mode));
        *why = buf;
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

void ckpt_part_free(CkptPart *p) {
    free(p->buf);
    p->buf = NULL;
    p->len = 0;
}

int ckpt_part_load(CkptPart *p, const char *path) {
    memset(p, 0, sizeof *p);
    snprintf(p->path, sizeof p->path, "%s", path);
    struct stat st;
    const char *bad;
    int fd = ckpt_open_read(path, &st, &bad);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return rs_error(RS_ERR_INPUT, "checkpoint part %s: %s", path, fd >= 0 ? strerror(errno) : bad);
    }
    size_t n = (size_t)st.st_size;
    p->buf = malloc(n ? n : 1);
    if (!p->buf) {
        fclose(f);
        return rs_error(RS_ERR_RUNTIME, "checkpoint part %s: out of memory for %zu bytes", path, n);
    }
    size_t got = fread(p->buf, 1, n, f);
    fclose(f);
    p->len = got;
    const char *why = NULL;
    uint32_t schema = 0, nsec = 0;
    if (got != n) why = "cannot be read whole";
    else if (n < CKPT_HEAD + 8) why = "truncated (shorter than its header)";
    else if (memcmp(p->buf, CKPT_MAGIC, 8)) why = "not a ringside checkpoint part";
    if (!why) {
        memcpy(&schema, p->buf + 8, 4);
        memcpy(&nsec, p->buf + 12, 4);
        if (schema != CKPT_SCHEMA) {
            ckpt_part_free(p);
            return rs_error(RS_ERR_INPUT, "checkpoint part %s: schema %u, this build reads schema %d", path, schema,
                            CKPT_SCHEMA);
        }
        uint64_t sum;
        memcpy(&sum, p->buf + n - 8, 8);
        if (hash_bytes(HASH_FNV_INIT, p->buf, n - 8) != sum) why = "checksum mismatch (truncated or damaged)";
        p->sum = sum;
    }
    if (!why) { /* the sections must tile the file exactly */
        size_t at = CKPT_HEAD;
        for (uint32_t i = 0; i < nsec && !why; i++) {
            uint64_t b;
            if (at + CKPT_TAG + 8 > n - 8) why = "a section past the end";
            else {
                memcpy(&b, p->buf + at + CKPT_TAG, 8);
                if (b > n - 8 - at - CKPT_TAG - 8) why = "a section past the end";
                at += CKPT_TAG + 8 + (size_t)b;
            }
        }
        if (!why && at != n - 8) why = "bytes after its last section";
    }
    if (why) {
        ckpt_part_free(p);
        return rs_error(RS_ERR_INPUT, "checkpoint part %s: %s", path, why);
    }
    int64_t s;
    memcpy(&s, p->buf + 16, 8);
    memcpy(&p->job, p->buf + 24, 8);
    p->step = (long)s;
    return RS_OK;
}

/* A part's header and trailer alone (its step, job, checksum and size), for the manifest: a part
 * in place is whole (renamed there only once written and fsynced; its own checksum is checked
 * when it is loaded). 0, or RS_ERR_INPUT (missing, not a part of this schema). */
static int ckpt_part_peek(const char *path, long *step, uint64_t *job, uint64_t *sum, size_t *len) {
    struct stat sb;
    const char *bad;
    int fd = ckpt_open_read(path, &sb, &bad); /* a FIFO in its place is not waited on */
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return RS_ERR_INPUT;
    }
    unsigned char head[CKPT_HEAD];
    uint32_t schema = 0;
    int64_t st = 0;
    int ok = sb.st_size >= CKPT_HEAD + 8 && fread(head, 1, sizeof head, f) == sizeof head &&
             !memcmp(head, CKPT_MAGIC, 8) && fseeko(f, sb.st_size - 8, SEEK_SET) == 0 && fread(sum, 1, 8, f) == 8;
    fclose(f);
    if (!ok) return RS_ERR_INPUT;
    memcpy(&schema, head + 8, 4);
    memcpy(&st, head + 16, 8);
    memcpy(job, head + 24, 8);
    *step = (long)st;
    *len = (size_t)sb.st_size;
    return schema == CKPT_SCHEMA ? RS_OK : RS_ERR_INPUT;
}

const void *ckpt_find(const CkptPart *p, const char *tag, size_t *bytes) {
    uint32_t nsec;
    memcpy(&nsec, p->buf + 12, 4);
    size_t at = CKPT_HEAD;
    for (uint32_t i = 0; i < nsec; i++) {
        uint64_t b;
        memcpy(&b, p->buf + at + CKPT_TAG, 8);
        if (!strncmp((const char *)p->buf + at, tag, CKPT_TAG)) {
            *bytes = (size_t)b;
            return p->buf + at + CKPT_TAG + 8;
        }
        at += CKPT_TAG + 8 + (size_t)b;
    }
    *bytes = 0;
    return NULL;
}

int ckpt_get(const CkptPart *p, const char *tag, void *dst, size_t bytes) {
    size_t n;
    const void *src = ckpt_find(p, tag, &n);
    if (!src) return rs_error(RS_ERR_INPUT, "checkpoint part %s: no section '%s'", p->path, tag);
    if (n != bytes)
        return rs_error(RS_ERR_INPUT, "checkpoint part %s: section '%s' holds %zu bytes, this run needs %zu", p->path,
                        tag, n, bytes);
    if (n) memcpy(dst, src, n);
    return RS_OK;
}

/* ---- the folder ------------------------------------------------------------------------------ */

/* The step of a "step-NNNNNN" name, or -1. */
static long ckpt_name_step(const char *name) {
    if (strncmp(name, "step-", 5) || !name[5]) return -1;
    char *end;
    long s = strtol(name + 5, &end, 10);
    return *end || s < 0 ? -1 : s;
}

/* 1 when dir's entry name is a symbolic link (never followed: its target is not the run's). */
static int ckpt_is_link(const char *dir, const char *name) {
    char p[1400];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
}

/* 1 when DIR/step-NNNNNN is a folder itself (not a link) holding a MANIFEST. */
static int ckpt_has_manifest(const char *dir, long step) {
    char p[1100], sd[1024];
    struct stat st;
    ckpt_step_dir(dir, step, sd, sizeof sd);
    if (lstat(sd, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    snprintf(p, sizeof p, "%s/" CKPT_KEEP_NAME, sd);
    return lstat(p, &st) == 0;
}

/* The highest complete step in dir (-1: none); *partial counts step folders without a manifest
 * (links not among them: they are never removed). */
static long ckpt_newest(const char *dir, int *partial) {
    DIR *d = opendir(dir);
    long best = -1;
    if (partial) *partial = 0;
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s = ckpt_name_step(e->d_name);
        if (s < 0 || ckpt_is_link(dir, e->d_name)) continue;
        if (ckpt_has_manifest(dir, s)) {
            if (s > best) best = s;
        } else if (partial) {
            (*partial)++;
        }
    }
    closedir(d);
    return best;
}

/* Refuses a folder whose step entries are symbolic links, naming them (what: "--checkpoint",
 * "--resume"): ringside removes step folders, and a link's target is not its to remove. */
static int ckpt_refuse_links(const char *what, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return RS_OK;
    char names[400] = "";
    size_t k = 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (ckpt_name_step(e->d_name) >= 0 && ckpt_is_link(dir, e->d_name)) {
            if (n++ < 4 && k < sizeof names) k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", n > 1 ? ", " : "", e->d_name);
        }
    closedir(d);
    if (!n) return RS_OK;
    return rs_error(RS_ERR_INPUT, "%s %s: %s%s %s a symbolic link%s: a checkpoint's steps must be folders of their own "
                                  "(ringside never follows a link there, nor removes what one points to): remove %s",
                    what, dir, names, n > 4 ? ", ..." : "", n > 1 ? "are" : "is", n > 1 ? "s" : "", n > 1 ? "them" : "it");
}

/* Removes a step folder and the files in it, never through a link: the folder is opened with
 * O_NOFOLLOW (a step that is a link, or not a folder, is left as it is) and its entries are
 * unlinked relative to it (a link inside goes, not its target; a folder inside stays). */
static void ckpt_remove_step(const char *dir, long step) {
    char name[32];
    snprintf(name, sizeof name, "step-%06ld", step);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    int sfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0) {
        close(dfd);
        return;
    }
    /* the manifest first: a folder half removed is never taken for a complete checkpoint */
    unlinkat(sfd, CKPT_KEEP_NAME, 0);
    int lfd = dup(sfd);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d && lfd >= 0) close(lfd);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        unlinkat(sfd, e->d_name, 0);
    }
    if (d) closedir(d);
    close(sfd);
    unlinkat(dfd, name, AT_REMOVEDIR);
    close(dfd);
}

/* Rank 0 after manifest step: every step folder before it goes but the newest complete one. */
static void ckpt_prune(const char *dir, long step) {
    DIR *d = opendir(dir);
    if (!d) return;
    long keep = -1, *all = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s = ckpt_name_step(e->d_name);
        if (s < 0 || s >= step || ckpt_is_link(dir, e->d_name)) continue;
        if (n == cap) {
            long *a = realloc(all, (cap = cap ? cap * 2 : 16) * sizeof *a);
            if (!a) break;
            all = a;
        }
        all[n++] = s;
        if (s > keep && ckpt_has_manifest(dir, s)) keep = s;
    }
    closedir(d);
    for (size_t i = 0; i < n; i++)
        if (all[i] != keep) ckpt_remove_step(dir, all[i]);
    free(all);
    ckpt_sync_dir(dir);
}

/* "PID HOST" of the lock file open at fd into pid, host ("" and 0 when it holds none yet). */
static void ckpt_lock_holder(int fd, long *pid, char *host, size_t len) {
    char buf[320] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    *pid = 0;
    host[0] = 0;
    char h[300] = "";
    if (sscanf(buf, "%ld %299s", pid, h) < 1 || *pid < 0) *pid = 0;
    size_t k = len ? strnlen(h, len - 1) : 0; /* a longer name is cut to host's size */
    if (len) {
        memcpy(host, h, k);
        host[k] = 0;
    }
}

int ckpt_dir_lock(const char *dir, int *fd) {
    char path[1100], me[256] = "";
    struct stat st, held;
    *fd = -1;
    snprintf(path, sizeof path, "%s/" CKPT_LOCK_NAME, dir);
    const char *inh = getenv(CKPT_LOCK_ENV); /* the launcher's lock, inherited: this job's already */
    if (inh && *inh) {
        char *end;
        long f = strtol(inh, &end, 10);
        if (!*end && f >= 0 && f < 1 << 20 && fstat((int)f, &held) == 0 && lstat(path, &st) == 0 &&
            held.st_dev == st.st_dev && held.st_ino == st.st_ino && flock((int)f, LOCK_EX | LOCK_NB) == 0) {
            *fd = (int)f;
            return RS_OK;
        }
    }
    /* not O_CLOEXEC: every process the launcher starts holds the lock too */
    int f = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (f < 0)
        return rs_error(RS_ERR_INPUT, "--checkpoint %s: cannot open its lock file %s: %s%s", dir, path, strerror(errno),
                        errno == ELOOP ? " (a symbolic link: remove it)" : "");
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(f);
        return rs_error(RS_ERR_INPUT, "--checkpoint %s: its lock file %s is not a plain file of its own (%s): remove it",
                        dir, path, S_ISREG(st.st_mode) ? "a hard link to another name" : "not a regular file");
    }
    while (flock(f, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        int e = errno;
        if (e != EWOULDBLOCK) {
            close(f);
            return rs_error(RS_ERR_RUNTIME, "--checkpoint %s: cannot lock %s: %s", dir, path, strerror(e));
        }
        long pid;
        char host[256];
        ckpt_lock_holder(f, &pid, host, sizeof host);
        close(f);
        gethostname(me, sizeof me - 1);
        int here = host[0] && !strcmp(host, me);
        if (here && pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            return rs_error(CKPT_ERR_BUSY, "--checkpoint %s is locked by a job whose first process, pid %ld on %s, is gone: "
                                           "a process of that job still holds %s (`fuser %s` names it); nothing was "
                                           "changed", dir, pid, host, path, path);
        return rs_error(CKPT_ERR_BUSY, "--checkpoint %s is in use by another job: pid %ld on host %s holds %s: wait for it "
                                       "to end, or give another folder; nothing was changed", dir, pid,
                        host[0] ? host : "unknown", path);
    }
    gethostname(me, sizeof me - 1);
    char text[320];
    int n = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), me[0] ? me : "unknown");
    if (ftruncate(f, 0) != 0 || pwrite(f, text, (size_t)n, 0) != n) {
        int e = errno;
        close(f);
        return rs_error(RS_ERR_RUNTIME, "--checkpoint %s: cannot write its lock file %s: %s", dir, path, strerror(e));
    }
    char num[16];
    snprintf(num, sizeof num, "%d", f);
    setenv(CKPT_LOCK_ENV, num, 1);
    *fd = f;
    return RS_OK;
}

int ckpt_dir_prepare(const char *dir, const char *resume, int clean, int *lock) {
    *lock = -1;
    if (!dir[0]) return RS_OK;
    char probe[1100];
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT) return rs_error(RS_ERR_INPUT, "--checkpoint %s: %s", dir, strerror(errno));
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return rs_error(RS_ERR_INPUT, "--checkpoint %s: cannot make the folder: %s", dir, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        return rs_error(RS_ERR_INPUT, "--checkpoint %s: not a folder", dir);
    }
    RS_TRY(ckpt_dir_lock(dir, lock));
    RS_TRY(ckpt_refuse_links("--checkpoint", dir));
    /* a name of its own (mkstemp: O_CREAT | O_EXCL, so nothing planted there is followed or truncated) */
    snprintf(probe, sizeof probe, "%s/.probe.XXXXXX", dir);
    int fd = mkostemp(probe, O_CLOEXEC);
    if (fd < 0) return rs_error(RS_ERR_INPUT, "--checkpoint %s: the folder cannot be written: %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    char deep[1024];
    ckpt_step_dir(dir, 999999999L, deep, sizeof deep);
    snprintf(probe, sizeof probe, "%s/" CKPT_KEEP_NAME, deep);
    RS_TRY(atomicfile_check_name(probe));
    int partial;
    long newest = ckpt_newest(dir, &partial);
    int same = resume[0] && atomicfile_same_path(dir, resume);
    if (newest >= 0 && !same)
        return rs_error(RS_ERR_INPUT, "--checkpoint %s: holds another run's checkpoint (step %ld): resume it (--resume %s) "
                                      "or give an empty folder", dir, newest, dir);
    if (clean && partial) { /* what a killed run left unfinished */
        DIR *d = opendir(dir);
        struct dirent *e;
        long *drop = calloc((size_t)partial, sizeof *drop);
        int k = 0;
        while (d && drop && (e = readdir(d)) && k < partial) {
            long s = ckpt_name_step(e->d_name);
            if (s >= 0 && !ckpt_is_link(dir, e->d_name) && !ckpt_has_manifest(dir, s)) drop[k++] = s;
        }
        if (d) closedir(d);
        for (int i = 0; i < k; i++) ckpt_remove_step(dir, drop[i]);
        free(drop);
    }
    return RS_OK;
}

/* ---- the manifest ---------------------------------------------------------------------------- */

static void ckpt_hex(uint64_t v, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)v); }

void ckpt_part_file(int server, int id, char *out, size_t len) { snprintf(out, len, server ? "server-%d.bin" : "rank-%d.bin", id); }

int ckpt_due(const Config *c, long done) {
    return c->checkpoint[0] && c->checkpoint_every > 0 && done > 0 && done % c->checkpoint_every == 0;
}

/* Part i's name: rank-i.bin for the workers, then server-(i - world).bin. */
static void ckpt_part_name(const CkptMeta *m, int i, char *out, size_t len) {
    ckpt_part_file(i >= m->world, i < m->world ? i : i - m->world, out, len);
}

int ckpt_manifest_write(const char *dir, long step, const CkptMeta *m, uint64_t job, double timeout, size_t *bytes) {
    char sd[1024], path[1100], name[64], hex[17];
    ckpt_step_dir(dir, step, sd, sizeof sd);
    cJSON *root = cJSON_CreateObject(), *parts = cJSON_CreateArray();
    if (!root || !parts) {
        cJSON_Delete(root);
        cJSON_Delete(parts);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    int nparts = m->world + m->servers, rc = RS_OK;
    *bytes = 0;
    double t0 = clock_now();
    for (int i = 0; i < nparts && rc == RS_OK; i++) {
        ckpt_part_name(m, i, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", sd, name);
        for (;;) { /* a part is in place once renamed there, whole and durable */
            long pstep;
            uint64_t pjob, sum;
            size_t len;
            if (ckpt_part_peek(path, &pstep, &pjob, &sum, &len) == RS_OK) {
                if (pjob == job && pstep == step) {
                    *bytes += len;
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddStringToObject(o, "name", name);
                    cJSON_AddNumberToObject(o, "bytes", (double)len);
                    ckpt_hex(sum, hex);
                    cJSON_AddStringToObject(o, "fnv1a64", hex);
                    cJSON_AddItemToArray(parts, o);
                    break;
                }
            }
            if (clock_now() - t0 > timeout) {
                rc = rs_error(RS_ERR_PEER, "checkpoint of step %ld: %s did not arrive within %g s", step, path, timeout);
                break;
            }
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (rc != RS_OK) {
        cJSON_Delete(root);
        cJSON_Delete(parts);
        return rc;
    }
    cJSON_AddNumberToObject(root, "schema", CKPT_SCHEMA);
    cJSON_AddStringToObject(root, "build", RS_GIT);
    cJSON_AddNumberToObject(root, "step", (double)step);
    cJSON_AddStringToObject(root, "model", m->model);
    cJSON_AddNumberToObject(root, "params", (double)m->nparams);
    cJSON_AddNumberToObject(root, "world", m->world);
    cJSON_AddNumberToObject(root, "servers", m->servers);
    ckpt_hex(hash_text(HASH_FNV_INIT, m->options), hex);
    cJSON_AddStringToObject(root, "options_hash", hex);
    cJSON_AddStringToObject(root, "options", m->options);
    if (m->every > 0) cJSON_AddNumberToObject(root, "checkpoint_every", m->every);
    cJSON_AddItemToObject(root, "parts", parts);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return rs_error(RS_ERR_RUNTIME, "out of memory");
    snprintf(path, sizeof path, "%s/" CKPT_KEEP_NAME, sd);
    rc = atomicfile_write(path, text, strlen(text), 0644);
    free(text);
    if (rc != RS_OK) return rc;
    ckpt_sync_dir(sd);
    ckpt_prune(dir, step);
    return RS_OK;
}

/* ", and step-NNNNNN is complete: remove step-SSSSSS to resume from it" where dir holds a complete
 * checkpoint older than step (never taken silently: the newest one's damage is the user's to see),
 * else "" (into out). */
static void ckpt_older_hint(const char *dir, long step, char *out, size_t len) {
    DIR *d = opendir(dir);
    long best = -1;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        long s = ckpt_name_step(e->d_name);
        if (s >= 0 && s < step && s > best && !ckpt_is_link(dir, e->d_name) && ckpt_has_manifest(dir, s)) best = s;
    }
    if (d) closedir(d);
    out[0] = 0;
    if (best >= 0)
        snprintf(out, len, "; step-%06ld is complete: remove step-%06ld to resume from it", best, step);
}

/* Reads dir's newest complete manifest: *step, and the parsed JSON (caller deletes). */
static int ckpt_manifest_read(const char *dir, long *step, cJSON **out) {
    struct stat st;
    *out = NULL;
    if (stat(dir, &st) != 0) return rs_error(RS_ERR_INPUT, "--resume %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return rs_error(RS_ERR_INPUT, "--resume %s: not a folder", dir);
    RS_TRY(ckpt_refuse_links("--resume", dir));
    int partial;
    long s = ckpt_newest(dir, &partial);
    if (s < 0)
        return rs_error(RS_ERR_INPUT, "--resume %s: no complete checkpoint (no step folder with a MANIFEST%s)", dir,
                        partial ? "; the ones there are incomplete" : "");
    char sd[1024], path[1100], hint[128];
    ckpt_step_dir(dir, s, sd, sizeof sd);
    ckpt_older_hint(dir, s, hint, sizeof hint);
    snprintf(path, sizeof path, "%s/" CKPT_KEEP_NAME, sd);
    struct stat fst;
    const char *bad;
    int fd = ckpt_open_read(path, &fst, &bad);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return rs_error(RS_ERR_INPUT, "--resume %s: %s%s", path, fd >= 0 ? strerror(errno) : bad, hint);
    }
    if (fst.st_size > CKPT_MANIFEST_MAX) {
        fclose(f);
        return rs_error(RS_ERR_INPUT, "--resume %s: %lld bytes, more than a manifest holds (%d at most)%s", path,
                        (long long)fst.st_size, CKPT_MANIFEST_MAX, hint);
    }
    char *text = NULL;
    size_t len = 0, cap = 0, got;
    char chunk[4096];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got + 1 > cap) {
            char *t = realloc(text, cap = (len + got + 1) * 2);
            if (!t) break;
            text = t;
        }
        memcpy(text + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (text) text[len] = 0;
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return rs_error(RS_ERR_INPUT, "--resume %s: not a manifest (unreadable JSON)%s", path, hint);
    }
    cJSON *sc = cJSON_GetObjectItem(j, "schema"), *st2 = cJSON_GetObjectItem(j, "step");
    /* numbers are compared as doubles, never cast before they are known in range (1e300 is no long) */
    if (!cJSON_IsNumber(sc) || sc->valuedouble != CKPT_SCHEMA) {
        int v = cJSON_IsNumber(sc) ? sc->valueint : -1;
        cJSON_Delete(j);
        return rs_error(RS_ERR_INPUT, "--resume %s: schema %d, this build reads schema %d (a checkpoint of another "
                                      "build)", path, v, CKPT_SCHEMA);
    }
    if (!cJSON_IsNumber(st2) || st2->valuedouble != (double)s) {
        cJSON_Delete(j);
        return rs_error(RS_ERR_INPUT, "--resume %s: its step is not its folder's (%ld)%s", path, s, hint);
    }
    /* the options line is what a resume is compared against: an edit to it is refused, not obeyed */
    cJSON *opt = cJSON_GetObjectItem(j, "options"), *oh = cJSON_GetObjectItem(j, "options_hash");
    char hex[17];
    if (cJSON_IsString(opt)) ckpt_hex(hash_text(HASH_FNV_INIT, opt->valuestring), hex);
    if (!cJSON_IsString(opt) || !cJSON_IsString(oh) || strcmp(oh->valuestring, hex)) {
        cJSON_Delete(j);
        return rs_error(RS_ERR_INPUT, "--resume %s: the manifest was edited: its options %s (a checkpoint resumes only "
                                      "under the options it was written with)%s", path,
                        !cJSON_IsString(opt) ? "are missing" : !cJSON_IsString(oh) ? "have no options_hash"
                                                                                     : "do not hash to its options_hash",
                        hint);
    }
    *step = s;
    *out = j;
    return RS_OK;
}

int ckpt_resume_check(const char *dir, const CkptMeta *m, long steps, long *step) {
    cJSON *j;
    RS_TRY(ckpt_manifest_read(dir, step, &j));
    char why[700] = "";
    cJSON *model = cJSON_GetObjectItem(j, "model"), *np = cJSON_GetObjectItem(j, "params"),
          *world = cJSON_GetObjectItem(j, "world"), *sv = cJSON_GetObjectItem(j, "servers"),
          *opt = cJSON_GetObjectItem(j, "options");
    if (!cJSON_IsString(model) || strcmp(model->valuestring, m->model))
        snprintf(why, sizeof why, "another model (--model %s there, %s here)",
                 cJSON_IsString(model) ? model->valuestring : "?", m->model);
    else if (!cJSON_IsNumber(np) || np->valuedouble != (double)m->nparams)
        snprintf(why, sizeof why, "another model size (%.17g parameters there, %zu here)",
                 cJSON_IsNumber(np) ? np->valuedouble : -1.0, m->nparams);
    else if (!cJSON_IsNumber(world) || world->valuedouble != m->world)
        snprintf(why, sizeof why, "another world size (%.17g workers there, %d here)",
                 cJSON_IsNumber(world) ? world->valuedouble : -1.0, m->world);
    else if (m->servers >= 0 && (!cJSON_IsNumber(sv) || sv->valuedouble != m->servers))
        snprintf(why, sizeof why, "another number of parameter servers (%.17g there, %d here)",
                 cJSON_IsNumber(sv) ? sv->valuedouble : -1.0, m->servers);
    else if (!cJSON_IsString(opt))
        snprintf(why, sizeof why, "no options in its manifest");
    else if (steps < *step)
        snprintf(why, sizeof why, "this run's %ld steps end before it (--steps must be at least %ld)", steps, *step);
    if (!why[0] && cJSON_IsString(opt)) {
        char d[600];
        if (config_resume_diff(m->options, opt->valuestring, d, sizeof d))
            snprintf(why, sizeof why, "another value of %s", d);
    }
    cJSON_Delete(j);
    if (why[0])
        return rs_error(RS_ERR_INPUT, "--resume %s: its checkpoint of step %ld does not fit this run: %s", dir, *step, why);
    return RS_OK;
}

int ckpt_resume_load(const char *dir, const char *name, CkptPart *p) {
    long step;
    cJSON *j;
    memset(p, 0, sizeof *p);
    RS_TRY(ckpt_manifest_read(dir, &step, &j));
    char sd[1024], path[1100], hex[17];
    ckpt_step_dir(dir, step, sd, sizeof sd);
    snprintf(path, sizeof path, "%s/%s", sd, name);
    cJSON *it, *want = NULL;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "parts")) {
        cJSON *n = cJSON_GetObjectItem(it, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) want = it;
    }
    if (!want) {
        cJSON_Delete(j);
        return rs_error(RS_ERR_INPUT, "--resume %s: its manifest of step %ld names no part %s (another placement or "
                                      "world size?)", dir, step, name);
    }
    cJSON *sum = cJSON_GetObjectItem(want, "fnv1a64");
    int rc = ckpt_part_load(p, path);
    if (rc == RS_OK) {
        ckpt_hex(p->sum, hex);
        if (!cJSON_IsString(sum) || strcmp(sum->valuestring, hex))
            rc = rs_error(RS_ERR_INPUT, "checkpoint part %s: its checksum %s is not the manifest's %s", path, hex,
                          cJSON_IsString(sum) ? sum->valuestring : "?");
        else if (p->step != step)
            rc = rs_error(RS_ERR_INPUT, "checkpoint part %s: of step %ld in the folder of step %ld", path, p->step, step);
    }
    if (rc != RS_OK) {
        ckpt_part_free(p);
        char hint[128];
        ckpt_older_hint(dir, step, hint, sizeof hint);
        if (hint[0]) rc = rs_error(rc, "%s%s", rs_errmsg(), hint);
    }
    cJSON_Delete(j);
    return rc;
}

int ckpt_resume_period(const char *dir, int *every) {
    long step;
    cJSON *j;
    *every = 0;
    RS_TRY(ckpt_manifest_read(dir, &step, &j));
    cJSON *e = cJSON_GetObjectItem(j, "checkpoint_every");
    if (cJSON_IsNumber(e) && e->valuedouble >= 1 && e->valuedouble <= 0x7fffffff) *every = (int)e->valuedouble;
    cJSON_Delete(j);
    return RS_OK;
}
