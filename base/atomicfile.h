/* atomicfile.h - files that appear whole or not at all: written unnamed (O_TMPFILE), then linked into place */
#ifndef RS_ATOMICFILE_H
#define RS_ATOMICFILE_H

#include <stdio.h>

typedef struct {
    FILE *f;             /* the stream to write; NULL once committed or aborted */
    int unnamed;         /* 1: an O_TMPFILE, invisible until commit (and gone if the process dies) */
    char path[1024];     /* the destination */
    char tmp[1100];      /* the named temporary (path.tmp.PID), when there is one */
} AtomicFile;

/* Opens a temporary file for path in path's directory with permissions mode (0644, 0600): unnamed
 * where the filesystem supports O_TMPFILE, else path.tmp.PID. af->f is the stream to write.
 * 0, or RS_ERR_RUNTIME with rs_errmsg() naming the directory and the system's reason. */
int atomicfile_open(AtomicFile *af, const char *path, int mode);

/* Flushes and fsyncs the stream, then puts the file in place of path (a reader sees the old file
 * or the whole new one, never a part); closes the stream. A named temporary exists only for the
 * two system calls of the final link and rename, so a process killed while writing leaves nothing.
 * On failure path is untouched and the temporary removed. 0, or RS_ERR_RUNTIME with rs_errmsg()
 * naming path and the system's reason. */
int atomicfile_commit(AtomicFile *af);

/* Closes and removes the temporary without touching path; safe after commit or a failed open. */
void atomicfile_abort(AtomicFile *af);

/* open, write len bytes of data, commit (abort on a failed write): the whole file in one call.
 * 0, or RS_ERR_RUNTIME with rs_errmsg() naming path and the reason; path untouched then. */
int atomicfile_write(const char *path, const void *data, size_t len, int mode);

/* Checks that path can be written by atomicfile_open/commit: the path fits the buffers above and
 * the temporary name (the final name plus ".tmp." and up to 7 digits of PID) fits the directory's
 * NAME_MAX, so a long name fails at start-up, not when the file is done. 0, or RS_ERR_INPUT naming
 * path and the limit. */
int atomicfile_check_name(const char *path);

/* 1 when a and b name the same file (the same directory entry, whether or not it exists yet:
 * compared as the real path of the directory plus the base name), else 0. */
int atomicfile_same_path(const char *a, const char *b);

#endif
