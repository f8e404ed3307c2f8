/* test_files.c - atomic files: whole or absent, nothing left behind by a writer that dies, errors that name the path */
#include "../base/atomicfile.h"
#include "../base/err.h"
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir_[64];

/* Entries of the test directory, . and .. aside. */
static int dir_entries(void) {
    DIR *d = opendir(dir_);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static int file_is(const char *path, const char *want) {
    char got[256] = "";
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = 0;
    return !strcmp(got, want);
}

/* Puts text in dir_/name (plainly) and opens an atomic file over it. */
static int old_then_open(char *path, size_t len, const char *name, const char *text, AtomicFile *af) {
    snprintf(path, len, "%s/%s", dir_, name);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    fclose(f);
    return atomicfile_open(af, path, 0644);
}

static void test_commit_replaces_whole(void) {
    char path[128];
    AtomicFile af;
    CHECK(old_then_open(path, sizeof path, "a.json", "old\n", &af) == RS_OK);
    fputs("new\n", af.f);
    fflush(af.f);
    CHECK(file_is(path, "old\n")); /* until commit a reader sees the old file */
    CHECK(atomicfile_commit(&af) == RS_OK);
    CHECK(file_is(path, "new\n"));
    CHECK_MSG(dir_entries() == 1, "%d entries: a temporary was left behind", dir_entries());
    unlink(path);
}

static void test_abort_leaves_old(void) {
    char path[128];
    AtomicFile af;
    CHECK(old_then_open(path, sizeof path, "b.json", "kept\n", &af) == RS_OK);
    fputs("half", af.f);
    atomicfile_abort(&af);
    atomicfile_abort(&af); /* twice is harmless */
    CHECK(file_is(path, "kept\n"));
    CHECK(dir_entries() == 1);
    unlink(path);
}

/* A writer SIGKILLed between open and commit: no file, no temporary. */
static void test_killed_writer_leaves_nothing(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/c.json", dir_);
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        AtomicFile af;
        char unnamed = '?';
        if (atomicfile_open(&af, path, 0644) == RS_OK) {
            fputs("{\"partial\": ", af.f);
            fflush(af.f);
            unnamed = af.unnamed ? 'u' : 'n';
        }
        if (write(fds[1], &unnamed, 1) != 1) _exit(2);
        pause(); /* killed here, mid-write */
        _exit(0);
    }
    char how = 0;
    close(fds[1]);
    CHECK(read(fds[0], &how, 1) == 1);
    close(fds[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (how == 'n') {
        SKIP("this filesystem has no O_TMPFILE: a named temporary is used, and a killed writer leaves it");
        unlink(path);
        char tmp[160];
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)pid);
        unlink(tmp);
        return;
    }
    CHECK(how == 'u');
    CHECK(access(path, F_OK) != 0);
    CHECK_MSG(dir_entries() == 0, "%d entries after the writer was killed", dir_entries());
}

static void test_errors_name_the_path(void) {
    AtomicFile af;
    CHECK(atomicfile_open(&af, "/nonexistent-dir/x.json", 0644) == RS_ERR_RUNTIME);
    CHECK(strstr(rs_errmsg(), "/nonexistent-dir/x.json") != NULL);
    CHECK(af.f == NULL);
    atomicfile_abort(&af);
    /* the destination is a directory: the rename fails at commit, and the temporary goes */
    char path[128];
    snprintf(path, sizeof path, "%s/sub", dir_);
    CHECK(mkdir(path, 0755) == 0);
    char inner[160];
    snprintf(inner, sizeof inner, "%s/f", path);
    FILE *f = fopen(inner, "w");
    fclose(f);
    CHECK(atomicfile_open(&af, path, 0644) == RS_OK);
    fputs("x", af.f);
    CHECK(atomicfile_commit(&af) == RS_ERR_RUNTIME);
    CHECK(strstr(rs_errmsg(), path) != NULL);
    CHECK(dir_entries() == 1); /* sub only */
    unlink(inner);
    rmdir(path);
}

int main(void) {
    snprintf(dir_, sizeof dir_, "/tmp/ringside-test-files-XXXXXX");
    if (!mkdtemp(dir_)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_commit_replaces_whole);
    RUN(test_abort_leaves_old);
    RUN(test_killed_writer_leaves_nothing);
    RUN(test_errors_name_the_path);
    rmdir(dir_);
    return test_summary("test_files");
}
