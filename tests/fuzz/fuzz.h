/* fuzz.h - helpers the libFuzzer harnesses share: a private scratch folder, file writes, input splitting */
#ifndef RS_FUZZ_H
#define RS_FUZZ_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the scratch folder: one per process, emptied and removed at exit ---- */

static char fz_dir_[256];

static void fz_dir_remove(void) {
    char cmd[300];
    if (!fz_dir_[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fz_dir_);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fz_dir_);
}

/* The process's scratch folder (created on first use, in /dev/shm when it exists: no disk I/O). */
static inline const char *fz_dir(void) {
    if (fz_dir_[0]) return fz_dir_;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(fz_dir_, sizeof fz_dir_, "%s/ringside-fuzz-XXXXXX", base);
    if (!mkdtemp(fz_dir_)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(fz_dir_remove);
    return fz_dir_;
}

/* dir/name into out. */
static inline const char *fz_path(char *out, size_t len, const char *name) {
    snprintf(out, len, "%s/%s", fz_dir(), name);
    return out;
}

/* Writes len bytes to path (replacing it); aborts on failure, which is the harness's, not the target's. */
static inline void fz_write(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const char *p = data;
    if (fd < 0) {
        perror(path);
        abort();
    }
    while (len > 0) {
        ssize_t k = write(fd, p, len);
        if (k <= 0) {
            perror(path);
            abort();
        }
        p += k;
        len -= (size_t)k;
    }
    close(fd);
}

/* ---- splitting one input into parts ---- */

/* Cuts data at each occurrence of the byte sep into at most max parts (the last keeps the rest).
 * part[i]/plen[i] point into data. Returns the number of parts (at least 1). */
static inline int fz_split(const uint8_t *data, size_t size, uint8_t sep, const uint8_t **part, size_t *plen, int max) {
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i < size && n + 1 < max; i++)
        if (data[i] == sep) {
            part[n] = data + start;
            plen[n++] = i - start;
            start = i + 1;
        }
    part[n] = data + start;
    plen[n++] = size - start;
    return n;
}

/* Reads a 2-byte big-endian length and that many bytes (fewer at the end of the input). */
static inline const uint8_t *fz_take(const uint8_t **p, size_t *left, size_t *len) {
    size_t n = 0;
    if (*left >= 2) n = (size_t)(*p)[0] << 8 | (*p)[1], *p += 2, *left -= 2;
    else *p += *left, *left = 0;
    if (n > *left) n = *left;
    const uint8_t *out = *p;
    *p += n, *left -= n, *len = n;
    return out;
}

/* A malloc'd NUL-terminated copy of len bytes (the target sees exactly those bytes, then NUL). */
static inline char *fz_strndup(const uint8_t *p, size_t len) {
    char *s = malloc(len + 1);
    if (!s) abort();
    if (len) memcpy(s, p, len);
    s[len] = 0;
    return s;
}

#endif
