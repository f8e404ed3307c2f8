/* test_checkpoint.c - checkpoint parts and manifests: round trip, damaged and truncated parts refused, the manifest's checks, pruning */
#include "../engine/checkpoint.h"
#include "../base/err.h"
#include "test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir_[64];

static const CkptMeta meta_ = {.model = "mlp", .nparams = 4, .world = 1, .servers = 0, .options = "lr=0.1\nsteps=9\n"};

/* Writes rank-0.bin of step into dir with params {step, 1, 2, 3}. */
static int write_part_in(const char *dir, long step, uint64_t job) {
    CkptWriter w;
    float p[4] = {(float)step, 1, 2, 3};
    ckpt_writer_init(&w);
    ckpt_put(&w, "params", p, sizeof p);
    ckpt_put(&w, "note", "hello", 5);
    return ckpt_commit(&w, dir, step, "rank-0.bin", job);
}

/* The same into dir_. */
static int write_part(long step, uint64_t job) { return write_part_in(dir_, step, job); }

static void part_path(long step, char *out, size_t len) {
    char sd[1024];
    ckpt_step_dir(dir_, step, sd, sizeof sd);
    snprintf(out, len, "%s/rank-0.bin", sd);
}

static void test_round_trip(void) {
    char path[1100];
    CHECK(write_part(3, 42) == RS_OK);
    part_path(3, path, sizeof path);
    CkptPart p;
    CHECK(ckpt_part_load(&p, path) == RS_OK);
    CHECK(p.step == 3 && p.job == 42);
    float got[4];
    CHECK(ckpt_get(&p, "params", got, sizeof got) == RS_OK);
    CHECK(got[0] == 3 && got[3] == 3);
    size_t n;
    const char *note = ckpt_find(&p, "note", &n);
    CHECK(note && n == 5 && !memcmp(note, "hello", 5));
    CHECK(ckpt_get(&p, "params", got, 8) == RS_ERR_INPUT); /* another size */
    CHECK(strstr(rs_errmsg(), "'params' holds 16 bytes") != NULL);
    CHECK(ckpt_get(&p, "mom", got, sizeof got) == RS_ERR_INPUT); /* missing */
    CHECK(strstr(rs_errmsg(), "no section 'mom'") != NULL);
    ckpt_part_free(&p);
}

static void test_damage_refused(void) {
    char path[1100];
    CkptPart p;
    CHECK(write_part(4, 42) == RS_OK);
    part_path(4, path, sizeof path);
    FILE *f = fopen(path, "r+b"); /* one byte of the parameters changed */
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, 60, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    CHECK(ckpt_part_load(&p, path) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "checksum mismatch") != NULL && strstr(rs_errmsg(), path) != NULL);
    CHECK(p.buf == NULL);
    CHECK(write_part(4, 42) == RS_OK);
    CHECK(truncate(path, 50) == 0);
    CHECK(ckpt_part_load(&p, path) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "checksum mismatch") != NULL);
    CHECK(truncate(path, 10) == 0);
    CHECK(ckpt_part_load(&p, path) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "truncated") != NULL);
    char other[1100];
    snprintf(other, sizeof other, "%s/none.bin", dir_);
    CHECK(ckpt_part_load(&p, other) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "none.bin") != NULL);
}

static void test_manifest_and_resume(void) {
    long step = -1;
    size_t bytes;
    CkptPart p;
    CHECK(ckpt_resume_check(dir_, &meta_, 9, &step) == RS_ERR_INPUT); /* parts but no manifest yet */
    CHECK(strstr(rs_errmsg(), "no complete checkpoint") != NULL);
    CHECK(write_part(5, 7) == RS_OK);
    CHECK(ckpt_manifest_write(dir_, 5, &meta_, 8, 0.05, &bytes) == RS_ERR_PEER); /* another job's part is not awaited forever */
    CHECK(strstr(rs_errmsg(), "rank-0.bin did not arrive") != NULL);
    CHECK(ckpt_manifest_write(dir_, 5, &meta_, 7, 1, &bytes) == RS_OK);
    CHECK(bytes == 32 + 2 * 24 + 16 + 5 + 8); /* header, two section heads, their bytes, the checksum */
    CHECK(ckpt_resume_check(dir_, &meta_, 9, &step) == RS_OK && step == 5);
    CHECK(ckpt_resume_check(dir_, &meta_, 4, &step) == RS_ERR_INPUT); /* fewer steps than the checkpoint's */
    CkptMeta other = meta_;
    other.options = "lr=0.2\nsteps=9\n";
    CHECK(ckpt_resume_check(dir_, &other, 9, &step) == RS_ERR_INPUT);
    other = meta_;
    other.world = 2;
    CHECK(ckpt_resume_check(dir_, &other, 9, &step) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "another world size") != NULL);
    CHECK(ckpt_resume_load(dir_, "rank-0.bin", &p) == RS_OK);
    float got[4];
    CHECK(ckpt_get(&p, "params", got, sizeof got) == RS_OK && got[0] == 5);
    ckpt_part_free(&p);
    CHECK(ckpt_resume_load(dir_, "server-0.bin", &p) == RS_ERR_INPUT); /* the manifest names no such part */
    /* a part rewritten after its manifest (another run's) no longer matches the manifest's checksum */
    CHECK(write_part(5, 9) == RS_OK);
    CHECK(ckpt_resume_load(dir_, "rank-0.bin", &p) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "not the manifest's") != NULL);
}

static void test_prune_keeps_two(void) {
    size_t bytes;
    for (long s = 6; s <= 8; s++) {
        CHECK(write_part(s, 7) == RS_OK);
        CHECK(ckpt_manifest_write(dir_, s, &meta_, 7, 1, &bytes) == RS_OK);
    }
    char sd[1024];
    struct stat st;
    for (long s = 3; s <= 8; s++) {
        ckpt_step_dir(dir_, s, sd, sizeof sd);
        CHECK_MSG((stat(sd, &st) == 0) == (s >= 7), "step %ld", s);
    }
    int lock;
    CHECK(ckpt_dir_prepare(dir_, "", 0, &lock) == RS_ERR_INPUT); /* a fresh run into it */
    close(lock);
    CHECK(ckpt_dir_prepare(dir_, dir_, 1, &lock) == RS_OK); /* its resume */
    close(lock);
}

/* A step that is a symbolic link: its target's files survive the start-up clean-up and the
 * pruning, the folder is refused naming it, and no part is written through it. */
static void test_step_link_never_followed(void) {
    char ck[128], victim[128], keep[160], link[160], vman[160];
    size_t bytes;
    struct stat st;
    snprintf(ck, sizeof ck, "%s/links", dir_);
    snprintf(victim, sizeof victim, "%s/victim", dir_);
    snprintf(keep, sizeof keep, "%s/keep", victim);
    snprintf(vman, sizeof vman, "%s/MANIFEST", victim);
    CHECK(mkdir(ck, 0755) == 0 && mkdir(victim, 0755) == 0);
    FILE *f = fopen(keep, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    snprintf(link, sizeof link, "%s/step-000001", ck);
    CHECK(symlink(victim, link) == 0);
    int lock;
    CHECK(ckpt_dir_prepare(ck, "", 1, &lock) == RS_ERR_INPUT); /* refused, naming the link */
    close(lock);
    CHECK(strstr(rs_errmsg(), "step-000001 is a symbolic link") != NULL);
    CHECK(stat(keep, &st) == 0);
    /* a link planted while the job runs: the pruning after each save passes it by */
    CHECK(write_part_in(ck, 3, 7) == RS_OK);
    CHECK(ckpt_manifest_write(ck, 3, &meta_, 7, 1, &bytes) == RS_OK);
    CHECK(write_part_in(ck, 6, 7) == RS_OK);
    CHECK(ckpt_manifest_write(ck, 6, &meta_, 7, 1, &bytes) == RS_OK);
    CHECK(stat(keep, &st) == 0 && lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    f = fopen(vman, "w"); /* a link to a folder that looks complete is still not resumed from */
    if (f) fclose(f);
    long step = -1;
    CHECK(ckpt_resume_check(ck, &meta_, 9, &step) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "step-000001 is a symbolic link") != NULL);
    CHECK(stat(keep, &st) == 0);
    /* a part is not written through a step that is a link */
    char link9[160];
    snprintf(link9, sizeof link9, "%s/step-000009", ck);
    CHECK(symlink(victim, link9) == 0);
    CHECK(write_part_in(ck, 9, 7) == RS_ERR_INPUT);
    CHECK(strstr(rs_errmsg(), "a symbolic link") != NULL);
    snprintf(keep, sizeof keep, "%s/rank-0.bin", victim);
    CHECK(stat(keep, &st) != 0);
}

/* Two jobs on one folder: the second is refused while the first holds it, naming the first's pid
 * and host, and nothing in the folder is changed; the folder is free again once the first is gone. */
static void test_two_jobs_one_folder(void) {
    char ck[128], sd[1024];
    struct stat st;
    int pipefd[2], lock = -1;
    snprintf(ck, sizeof ck, "%s/busy", dir_);
    CHECK(mkdir(ck, 0755) == 0 && pipe(pipefd) == 0);
    ckpt_step_dir(ck, 4, sd, sizeof sd); /* an unfinished step the second job must not clean up */
    CHECK(mkdir(sd, 0755) == 0);
    unsetenv("RINGSIDE_CKPT_LOCK_FD");
    pid_t first = fork();
    if (first == 0) { /* the first job: locks the folder, says so, and runs until killed */
        close(pipefd[0]);
        int fd;
        char ok = ckpt_dir_lock(ck, &fd) == RS_OK ? '1' : '0';
        if (write(pipefd[1], &ok, 1) != 1) _exit(1);
        for (;;) pause();
    }
    close(pipefd[1]);
    char ok = 0;
    CHECK(read(pipefd[0], &ok, 1) == 1 && ok == '1');
    close(pipefd[0]);
    char want[64];
    snprintf(want, sizeof want, "pid %ld on host ", (long)first);
    CHECK(ckpt_dir_prepare(ck, "", 1, &lock) == CKPT_ERR_BUSY);
    CHECK_MSG(strstr(rs_errmsg(), want) && strstr(rs_errmsg(), "in use by another job"), "%s", rs_errmsg());
    CHECK(stat(sd, &st) == 0); /* its unfinished step left to it */
    kill(first, SIGKILL);
    waitpid(first, NULL, 0);
    CHECK(ckpt_dir_prepare(ck, "", 1, &lock) == RS_OK); /* free once the first is gone */
    CHECK(stat(sd, &st) != 0);
    /* the launcher's lock, inherited by its ranks: rank 0 takes it as its own */
    pid_t rank0 = fork();
    if (rank0 == 0) {
        int fd;
        _exit(ckpt_dir_prepare(ck, "", 1, &fd) == RS_OK && fd == lock ? 0 : 1);
    }
    int status = -1;
    waitpid(rank0, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(lock);
}

/* Files planted where the folder's lock and write probe go: a link is never followed (its target
 * keeps its bytes), a FIFO never blocks, and the lock that is not a plain file is refused, named. */
static void test_planted_lock_and_probe(void) {
    char ck[128], victim[128], p[200];
    struct stat st;
    int lock = -1;
    snprintf(ck, sizeof ck, "%s/planted", dir_);
    snprintf(victim, sizeof victim, "%s/precious", dir_);
    CHECK(mkdir(ck, 0755) == 0);
    FILE *f = fopen(victim, "w");
    if (f) {
        fputs("precious", f);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/.probe.%d", ck, (int)getpid()); /* the probe's old, predictable name */
    CHECK(symlink(victim, p) == 0);
    unsetenv("RINGSIDE_CKPT_LOCK_FD");
    CHECK(ckpt_dir_prepare(ck, "", 1, &lock) == RS_OK);
    close(lock);
    CHECK(stat(victim, &st) == 0 && st.st_size == 8);
    CHECK(unlink(p) == 0);
    snprintf(p, sizeof p, "%s/.lock", ck);
    CHECK(unlink(p) == 0 && symlink(victim, p) == 0);
    CHECK(ckpt_dir_prepare(ck, "", 1, &lock) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "lock file") && strstr(rs_errmsg(), "symbolic link"), "%s", rs_errmsg());
    CHECK(stat(victim, &st) == 0 && st.st_size == 8);
    CHECK(unlink(p) == 0 && mkfifo(p, 0644) == 0);
    CHECK(ckpt_dir_prepare(ck, "", 1, &lock) == RS_ERR_INPUT); /* at once, not blocked in open */
    CHECK_MSG(strstr(rs_errmsg(), "not a regular file"), "%s", rs_errmsg());
    CHECK(unlink(p) == 0 && link(victim, p) == 0);
    CHECK(ckpt_dir_prepare(ck, "", 1, &lock) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "a hard link"), "%s", rs_errmsg());
    CHECK(stat(victim, &st) == 0 && st.st_size == 8);
}

/* A FIFO in place of a manifest or a part is refused at once, naming it, never waited on (an
 * alarm ends the test, failed, should any call block). */
static void test_fifo_never_waited(void) {
    char ck[128], sd[1024], p[1100];
    size_t bytes;
    long step;
    CkptPart part;
    snprintf(ck, sizeof ck, "%s/fifo", dir_);
    CHECK(mkdir(ck, 0755) == 0);
    CHECK(write_part_in(ck, 3, 7) == RS_OK && ckpt_manifest_write(ck, 3, &meta_, 7, 1, &bytes) == RS_OK);
    ckpt_step_dir(ck, 3, sd, sizeof sd);
    alarm(10);
    snprintf(p, sizeof p, "%s/MANIFEST", sd);
    CHECK(unlink(p) == 0 && mkfifo(p, 0644) == 0);
    CHECK(ckpt_resume_check(ck, &meta_, 9, &step) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "MANIFEST: not a regular file (a FIFO)"), "%s", rs_errmsg());
    CHECK(ckpt_resume_load(ck, "rank-0.bin", &part) == RS_ERR_INPUT);
    snprintf(p, sizeof p, "%s/rank-0.bin", sd);
    CHECK(unlink(p) == 0 && mkfifo(p, 0644) == 0);
    CHECK(ckpt_part_load(&part, p) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "rank-0.bin: not a regular file (a FIFO)"), "%s", rs_errmsg());
    CHECK(ckpt_manifest_write(ck, 3, &meta_, 7, 0.05, &bytes) == RS_ERR_PEER); /* rank 0 waits --timeout, no more */
    alarm(0);
}

/* Replaces the first from in file path with to (same length or not); 0 on success. */
static int edit_file(const char *path, const char *from, const char *to) {
    char buf[8192];
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *at = strstr(buf, from);
    if (!at) return -1;
    f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(buf, 1, (size_t)(at - buf), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    return fclose(f);
}

/* A manifest whose options line was edited (to resume under other options) is refused, not obeyed. */
static void test_edited_manifest(void) {
    char ck[128], sd[1024], p[1100];
    size_t bytes;
    long step;
    snprintf(ck, sizeof ck, "%s/edited", dir_);
    CHECK(mkdir(ck, 0755) == 0);
    CHECK(write_part_in(ck, 3, 7) == RS_OK && ckpt_manifest_write(ck, 3, &meta_, 7, 1, &bytes) == RS_OK);
    ckpt_step_dir(ck, 3, sd, sizeof sd);
    snprintf(p, sizeof p, "%s/MANIFEST", sd);
    CHECK(edit_file(p, "lr=0.1", "lr=0.2") == 0);
    CkptMeta other = meta_;
    other.options = "lr=0.2\nsteps=9\n";
    CHECK(ckpt_resume_check(ck, &other, 9, &step) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "the manifest was edited"), "%s", rs_errmsg());
    CkptPart part;
    CHECK(ckpt_resume_load(ck, "rank-0.bin", &part) == RS_ERR_INPUT);
    CHECK(edit_file(p, "lr=0.2", "lr=0.1") == 0); /* put back: resumes */
    CHECK(ckpt_resume_check(ck, &meta_, 9, &step) == RS_OK && step == 3);
}

/* A resume keeps the interrupted job's period, and a damaged newest checkpoint names the older
 * complete one (never taken silently in its place). */
static void test_period_and_older(void) {
    char ck[128], sd[1024], p[1100];
    size_t bytes;
    int every = -1;
    CkptMeta m = meta_;
    m.every = 3;
    snprintf(ck, sizeof ck, "%s/older", dir_);
    CHECK(mkdir(ck, 0755) == 0);
    for (long s = 3; s <= 6; s += 3)
        CHECK(write_part_in(ck, s, 7) == RS_OK && ckpt_manifest_write(ck, s, &m, 7, 1, &bytes) == RS_OK);
    CHECK(ckpt_resume_period(ck, &every) == RS_OK && every == 3);
    ckpt_step_dir(ck, 6, sd, sizeof sd);
    snprintf(p, sizeof p, "%s/rank-0.bin", sd);
    CHECK(truncate(p, 40) == 0);
    CkptPart part;
    CHECK(ckpt_resume_load(ck, "rank-0.bin", &part) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "rank-0.bin: checksum mismatch") &&
              strstr(rs_errmsg(), "step-000003 is complete: remove step-000006 to resume from it"), "%s", rs_errmsg());
    snprintf(p, sizeof p, "%s/MANIFEST", sd);
    CHECK(edit_file(p, "lr=0.1", "lr=0.3") == 0);
    long step;
    CHECK(ckpt_resume_check(ck, &meta_, 9, &step) == RS_ERR_INPUT);
    CHECK_MSG(strstr(rs_errmsg(), "step-000003 is complete: remove step-000006"), "%s", rs_errmsg());
}

int main(void) {
    snprintf(dir_, sizeof dir_, "/tmp/ringside-test-ckpt-XXXXXX");
    if (!mkdtemp(dir_)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_round_trip);
    RUN(test_damage_refused);
    RUN(test_manifest_and_resume);
    RUN(test_prune_keeps_two);
    RUN(test_step_link_never_followed);
    RUN(test_two_jobs_one_folder);
    RUN(test_planted_lock_and_probe);
    RUN(test_fifo_never_waited);
    RUN(test_edited_manifest);
    RUN(test_period_and_older);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir_);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir_);
    return test_summary("test_checkpoint");
}
