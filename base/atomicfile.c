/* atomicfile.c - files that appear whole or not at all: written unnamed (O_TMPFILE), then linked into place */
#define _GNU_SOURCE
#include "atomicfile.h"
#include "err.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

int atomicfile_open(AtomicFile *af, const char *path, int mode) {
    memset(af, 0, sizeof *af);
    if (snprintf(af->path, sizeof af->path, "%s", path) >= (int)sizeof af->path)
        return rs_error(RS_ERR_RUNTIME, "%.64s...: path too long", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%d", path, (int)getpid());
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    int fd = open(dirname(dir), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
    af->unnamed = fd >= 0;
    if (fd < 0) { /* a filesystem without O_TMPFILE: a named temporary beside path */
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0) return rs_error(RS_ERR_RUNTIME, "%s: cannot create a temporary file: %s", path, strerror(errno));
    }
    af->f = fdopen(fd, "w");
    if (!af->f) {
        int err = errno;
        close(fd);
        if (!af->unnamed) unlink(af->tmp);
        return rs_error(RS_ERR_RUNTIME, "%s: %s", path, strerror(err));
    }
    return RS_OK;
}

int atomicfile_commit(AtomicFile *af) {
    if (!af->f) return rs_error(RS_ERR_RUNTIME, "%s: not open", af->path);
    int bad = fflush(af->f) != 0 || fsync(fileno(af->f)) != 0;
    int err = errno;
    if (!bad && af->unnamed) { /* give the unnamed file the temporary name, then rename over path */
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fileno(af->f));
        unlink(af->tmp); /* a leftover of a process with our PID */
        bad = linkat(AT_FDCWD, self, AT_FDCWD, af->tmp, AT_SYMLINK_FOLLOW) != 0;
        err = errno;
    }
    if (fclose(af->f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    af->f = NULL;
    if (!bad && rename(af->tmp, af->path) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        unlink(af->tmp);
        return rs_error(RS_ERR_RUNTIME, "%s: write failed: %s", af->path, strerror(err));
    }
    return RS_OK;
}

void atomicfile_abort(AtomicFile *af) {
    if (!af->f) return;
    fclose(af->f);
    af->f = NULL;
    if (!af->unnamed) unlink(af->tmp);
}

int atomicfile_write(const char *path, const void *data, size_t len, int mode) {
    AtomicFile af;
    RS_TRY(atomicfile_open(&af, path, mode));
    if (fwrite(data, 1, len, af.f) != len) {
        int err = errno;
        atomicfile_abort(&af);
        return rs_error(RS_ERR_RUNTIME, "%s: write failed: %s", path, strerror(err));
    }
    return atomicfile_commit(&af);
}

int atomicfile_check_name(const char *path) {
    AtomicFile af;
    if (strlen(path) + 12 >= sizeof af.path) /* and so the temporary fits af.tmp */
        return rs_error(RS_ERR_INPUT, "%.64s...: path too long (%zu characters, at most %zu)", path, strlen(path),
                        sizeof af.path - 13);
    char dir[1024], base[1024];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(base, sizeof base, "%s", path);
    const char *d = dirname(dir), *b = basename(base);
    long name_max = pathconf(d, _PC_NAME_MAX);
    if (name_max <= 0) name_max = NAME_MAX;
    size_t need = strlen(b) + strlen(".tmp.") + 7; /* a PID has at most 7 digits (pid_max <= 4194304) */
    if ((long)need > name_max)
        return rs_error(RS_ERR_INPUT, "%s: the file name is %zu characters; its temporary name while it is written "
                                      "(NAME.tmp.PID) needs up to %zu, more than the %ld this directory allows",
                        path, strlen(b), need, name_max);
    return RS_OK;
}

/* The real path of path's directory, then "/" and its base name, into out. 0, or -1 when the
 * directory cannot be resolved. */
static int canonical_entry(const char *path, char *out, size_t len) {
    char dir[1024], base[1024], real[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(base, sizeof base, "%s", path);
    if (!realpath(dirname(dir), real)) return -1;
    return snprintf(out, len, "%s/%s", real, basename(base)) < (int)len ? 0 : -1;
}

int atomicfile_same_path(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
    if (canonical_entry(a, ca, sizeof ca) || canonical_entry(b, cb, sizeof cb)) return !strcmp(a, b);
    return !strcmp(ca, cb);
}
