/* idx.c - reads MNIST's IDX files, raw or gzip, and says exactly what is wrong with a bad one */
#include "data.h"
#include "../base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAX_VALUES (1ULL << 31)   /* 8 GiB of floats: anything larger is a broken header */
#define IDX_CHUNK 65536

/* One open input: a plain file descriptor, or a zlib stream over it. */
typedef struct {
    const char *path;
    int fd;           /* -1 once handed to zlib */
    gzFile gz;        /* NULL for raw files */
    char why[160];    /* the reason of the last failed in_read */
    long long size;   /* bytes of a regular file, -1 for anything else (pipes, devices) */
} IdxIn;

static int path_is_gz(const char *path) {
    size_t len = strlen(path);
    return len >= 3 && strcmp(path + len - 3, ".gz") == 0;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Opens path (gzip when it ends in .gz). 0, or RS_ERR_INPUT naming the file and errno's reason. */
static int in_open(IdxIn *in, const char *path) {
    struct stat st;
    memset(in, 0, sizeof *in);
    in->path = path;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) /* a FIFO would block the open */
        return rs_error(RS_ERR_INPUT, "%s: cannot read: not a regular file (a %s)", path,
                        S_ISFIFO(st.st_mode) ? "FIFO" : S_ISCHR(st.st_mode) ? "character device" : "special file");
    in->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (in->fd < 0)
        return rs_error(RS_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    int have_st = fstat(in->fd, &st) == 0;
    in->size = have_st && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
    if (have_st && S_ISDIR(st.st_mode)) {
        close(in->fd);
        in->fd = -1;
        return rs_error(RS_ERR_INPUT, "%s: cannot read: is a directory, not an IDX file", path);
    }
    if (path_is_gz(path)) {
        in->gz = gzdopen(in->fd, "rb");
        if (!in->gz) {
            close(in->fd);
            in->fd = -1;
            return rs_error(RS_ERR_INPUT, "%s: cannot open the gzip stream (out of memory?)", path);
        }
        in->fd = -1;                 /* zlib owns it now and closes it in gzclose */
        gzbuffer(in->gz, 1 << 17);
    }
    return RS_OK;
}

static void in_close(IdxIn *in) {
    if (in->gz) gzclose(in->gz);
    if (in->fd >= 0) close(in->fd);
    in->gz = NULL;
    in->fd = -1;
}

/* Reads up to len bytes into buf, *got of them, fewer only at the end of the data. 0, or -1 with
 * in->why saying what went wrong (an I/O error, corrupt or truncated gzip, a .gz that is not gzip). */
static int in_read(IdxIn *in, uint8_t *buf, size_t len, size_t *got) {
    *got = 0;
    while (*got < len) {
        size_t want = len - *got;
        if (want > (1u << 30)) want = 1u << 30;
        if (in->gz) {
            int errnum = Z_OK;
            int k = gzread(in->gz, buf + *got, (unsigned)want);
            if (k > 0 && gzdirect(in->gz)) {
                snprintf(in->why, sizeof in->why,
                         "is named .gz but is not gzip data (no gzip header)");
                return -1;
            }
            if (k > 0) {
                *got += (size_t)k;
                continue;
            }
            const char *zmsg = gzerror(in->gz, &errnum);
            if (zmsg && strncmp(zmsg, "<fd:", 4) == 0 && strstr(zmsg, ": "))
                zmsg = strstr(zmsg, ": ") + 2;             /* zlib's "<fd:N>: " prefix */
            if (errnum == Z_OK)
                return 0;                                  /* a clean end of the stream */
            if (errnum == Z_BUF_ERROR)
                snprintf(in->why, sizeof in->why,
                         "gzip stream truncated (unexpected end of file)");
            else if (errnum == Z_ERRNO)
                snprintf(in->why, sizeof in->why, "read error: %s", strerror(errno));
            else
                snprintf(in->why, sizeof in->why, "corrupt gzip data (%s)",
                         zmsg && *zmsg ? zmsg : "zlib error");
            return -1;
        } else {
            ssize_t k = read(in->fd, buf + *got, want);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) {
                snprintf(in->why, sizeof in->why, "read error: %s", strerror(errno));
                return -1;
            }
            if (k == 0) return 0;
            *got += (size_t)k;
        }
    }
    return 0;
}

/* Names the kind a magic number stands for, for messages. */
static const char *magic_kind(uint32_t magic) {
    return magic == IDX_MAGIC_IMAGES ? "images" : magic == IDX_MAGIC_LABELS ? "labels" : NULL;
}

/* Reads the header and checks it is the wanted kind with sane sizes. Fills n, rows, cols
 * (rows = cols = 1 for labels). 0 or RS_ERR_INPUT. */
static int idx_read_header(IdxIn *in, int want_images, uint32_t *n, uint32_t *rows, uint32_t *cols) {
    const char *path = in->path;
    uint32_t want = want_images ? IDX_MAGIC_IMAGES : IDX_MAGIC_LABELS;
    size_t hlen = want_images ? 16 : 8, got;
    uint8_t h[16];

    if (in_read(in, h, 4, &got) != 0)
        return rs_error(RS_ERR_INPUT, "%s: %s", path, in->why);
    if (got < 4)
        return rs_error(RS_ERR_INPUT, "%s: header truncated: %zu of %zu bytes%s", path, got, hlen,
                        got == 0 ? " (the file is empty)" : "");
    uint32_t magic = be32(h);
    if (magic != want) {
        const char *kind = magic_kind(magic);
        if (kind)
            return rs_error(RS_ERR_INPUT,
                            "%s: holds %s (magic 0x%08x) but %s (magic 0x%08x) were asked for",
                            path, kind, magic, want_images ? "images" : "labels", want);
        if (h[0] == 0x1f && h[1] == 0x8b)
            return rs_error(RS_ERR_INPUT,
                            "%s: bad magic 0x%08x, expected 0x%08x (IDX %s): the file looks "
                            "gzip-compressed; name it *.gz", path, magic, want,
                            want_images ? "images" : "labels");
        return rs_error(RS_ERR_INPUT, "%s: bad magic 0x%08x, expected 0x%08x (IDX %s)", path, magic,
                        want, want_images ? "images" : "labels");
    }
    if (in_read(in, h + 4, hlen - 4, &got) != 0)
        return rs_error(RS_ERR_INPUT, "%s: %s", path, in->why);
    if (got < hlen - 4)
        return rs_error(RS_ERR_INPUT, "%s: header truncated: %zu of %zu bytes", path, 4 + got, hlen);

    *n = be32(h + 4);
    *rows = want_images ? be32(h + 8) : 1;
    *cols = want_images ? be32(h + 12) : 1;
    uint64_t dim = (uint64_t)*rows * *cols;
    if (*n == 0 || *rows == 0 || *cols == 0)
        return want_images
            ? rs_error(RS_ERR_INPUT, "%s: absurd size in header: %u images of %ux%u", path, *n,
                       *rows, *cols)
            : rs_error(RS_ERR_INPUT, "%s: absurd size in header: 0 labels", path);
    if (*n > INT_MAX || dim > INT_MAX || (uint64_t)*n * dim > IDX_MAX_VALUES)
        return want_images
            ? rs_error(RS_ERR_INPUT,
                       "%s: absurd size in header: %u images of %ux%u (more than 2^31 values)",
                       path, *n, *rows, *cols)
            : rs_error(RS_ERR_INPUT, "%s: absurd size in header: %u labels (more than 2^31-1)",
                       path, *n);
    return RS_OK;
}

/* Reads the body: total bytes into xs (as x/255) or ys, then checks nothing follows. */
static int idx_read_body(IdxIn *in, int images, size_t total, float *xs, int *ys) {
    const char *what = images ? "image" : "label";
    uint8_t buf[IDX_CHUNK];
    size_t done = 0, got;

    while (done < total) {
        size_t want = total - done < IDX_CHUNK ? total - done : IDX_CHUNK;
        int rc = in_read(in, buf, want, &got);
        if (images)
            for (size_t i = 0; i < got; i++) xs[done + i] = (float)buf[i] * (1.0f / 255.0f);
        else
            for (size_t i = 0; i < got; i++) ys[done + i] = buf[i];
        done += got;
        if (rc != 0)
            return rs_error(RS_ERR_INPUT, "%s: %s: expected %zu bytes of %s data, found %zu",
                            in->path, in->why, total, what, done);
        if (got < want)
            return rs_error(RS_ERR_INPUT, "%s: data truncated: expected %zu bytes of %s data, "
                            "found %zu", in->path, total, what, done);
    }
    /* Read to the end: zlib checks the gzip trailer's CRC only there, and extra bytes mean the
     * header's count is wrong. */
    size_t extra = 0;
    do {
        if (in_read(in, buf, IDX_CHUNK, &got) != 0)
            return rs_error(RS_ERR_INPUT, "%s: %s, after the %zu bytes of %s data", in->path,
                            in->why, total, what);
        extra += got;
    } while (got == IDX_CHUNK);
    if (extra)
        return rs_error(RS_ERR_INPUT, "%s: %zu extra bytes after the %zu bytes of %s data the "
                        "header announces (wrong count in the header?)", in->path, extra, total,
                        what);
    return RS_OK;
}

/* The reader behind idx_read and idx_read_images. */
static int idx_load(const char *path, float **out_x, int **out_y, int *n, int *rows, int *cols) {
    IdxIn in;
    uint32_t hn = 0, hr = 0, hc = 0;
    float *xs = NULL;
    int *ys = NULL;
    int rc;

    if ((out_x == NULL) == (out_y == NULL))
        return rs_error(RS_ERR_INPUT, "%s: idx_read needs exactly one of images or labels", path);
    if ((rc = in_open(&in, path)) != RS_OK) return rc;
    if ((rc = idx_read_header(&in, out_x != NULL, &hn, &hr, &hc)) != RS_OK) goto err;

    size_t total = (size_t)hn * hr * hc;
    /* The header's count is only a claim: allocate no more than the file can hold (a raw file its
     * size, a gzip one at most 1032 bytes per compressed byte, deflate's limit), so that a short
     * file cannot make the reader ask for gigabytes. */
    size_t hlen = out_x ? 16 : 8, room = in.size > (long long)hlen ? (size_t)in.size - hlen : 0;
    if (in.size >= 0 && !in.gz && total > room) {
        rc = rs_error(RS_ERR_INPUT, "%s: data truncated: expected %zu bytes of %s data, found %zu", path, total,
                      out_x ? "image" : "label", room);
        goto err;
    }
    if (in.size >= 0 && in.gz && total / 1032 > (size_t)in.size) {
        rc = rs_error(RS_ERR_INPUT, "%s: gzip stream truncated: the header announces %zu bytes of %s data, more "
                      "than its %lld compressed bytes can hold", path, total, out_x ? "image" : "label", in.size);
        goto err;
    }
    if (out_x) xs = malloc(total * sizeof *xs);
    else ys = malloc(total * sizeof *ys);
    if (!xs && !ys) {
        rc = rs_error(RS_ERR_RUNTIME, "%s: out of memory for %zu values", path, total);
        goto err;
    }
    if ((rc = idx_read_body(&in, out_x != NULL, total, xs, ys)) != RS_OK) goto err;

    in_close(&in);
    if (out_x) *out_x = xs;
    else *out_y = ys;
    *n = (int)hn;
    if (rows) *rows = (int)hr;
    if (cols) *cols = (int)hc;
    return RS_OK;

err:
    in_close(&in);
    free(xs);
    free(ys);
    return rc;
}

/* See data.h. */
int idx_read(const char *path, float **out_x, int **out_y, int *n, int *dim) {
    int rows = 1, cols = 1;
    int rc = idx_load(path, out_x, out_y, n, &rows, &cols);
    if (rc == RS_OK) *dim = rows * cols;
    return rc;
}

/* See data.h. */
int idx_read_images(const char *path, float **out_x, int *n, int *rows, int *cols) {
    if (!out_x)
        return rs_error(RS_ERR_INPUT, "%s: idx_read_images needs somewhere to put the images", path);
    return idx_load(path, out_x, NULL, n, rows, cols);
}
