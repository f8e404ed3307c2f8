/* checkpoint.h - checkpoints that resume bit for bit: one part file per process, then a manifest by rank 0 (docs/reliability.md) */
#ifndef RS_CHECKPOINT_H
#define RS_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/config.h"

struct Device;

/* Layout of --checkpoint DIR:
 *
 *   DIR/step-000120/rank-0.bin ... rank-{N-1}.bin   each worker's part
 *   DIR/step-000120/server-0.bin ...                each parameter server's part (colocated,
 *                                                   dedicated, sharded or byteps: by server id)
 *   DIR/step-000120/MANIFEST                        written last, by rank 0, once every part is
 *                                                   in place: the checkpoint is complete
 *
 * A part file: "RSCKPT01", the schema (u32), its section count (u32), the step (i64), the job's
 * hash (u64: the job token's, so that a part left by another run is never taken for this run's),
 * then sections of {tag (16 bytes, NUL-padded), byte count (u64), bytes}, then the FNV-1a of
 * everything before it (u64). Every file is written whole or not at all (base/atomicfile.h: fsync,
 * then rename), and its folder fsynced after. */

#define CKPT_SCHEMA 1
/* The exit status of a job refused because another one holds its --checkpoint folder (as a
 * matrix driver refused on a busy --out). */
#define CKPT_ERR_BUSY 5
#define CKPT_TAG 16

/* ---- Types ---- */

/* A part being built in memory; errors latch (the commit reports them). */
typedef struct {
    unsigned char *buf;
    size_t len, cap;
    uint32_t nsec;
    int oom;
} CkptWriter;

/* A part read and checked. */
typedef struct {
    unsigned char *buf;
    size_t len;
    long step;
    uint64_t job, sum; /* the job's hash; the file's checksum (its trailer) */
    char path[1100];
} CkptPart;

/* What a manifest says of the run that wrote it, and what a resume compares. */
typedef struct {
    const char *model;      /* --model */
    size_t nparams;
    int world;              /* workers */
    int servers;            /* server parts (0: none; ckpt_resume_check: -1, not compared) */
    const char *options;    /* config_resume_text */
    int every;              /* --checkpoint-every (0: not written) */
} CkptMeta;

/* ---- Prototypes ---- */

/* An empty writer. */
void ckpt_writer_init(CkptWriter *w);

/* Appends a section of bytes bytes at data (tag: at most CKPT_TAG - 1 characters). */
void ckpt_put(CkptWriter *w, const char *tag, const void *data, size_t bytes);

/* Appends a section of bytes bytes copied from src, device memory of d, straight into the
 * writer's buffer (no host copy of its own): what the trainer and every server put through the
 * host. 0, or RS_ERR_* (out of memory, the device's copy failed); after a failure the writer's
 * commit fails too. */
int ckpt_put_device(CkptWriter *w, struct Device *d, const char *tag, const void *src, size_t bytes);

/* Writes the part as DIR/step-NNNNNN/name (the folder made where missing), atomically and
 * durably, for step step of the job whose hash is job; frees the writer's memory. 0, or
 * RS_ERR_RUNTIME naming the file and the reason (nothing left behind). */
int ckpt_commit(CkptWriter *w, const char *dir, long step, const char *name, uint64_t job);

/* Frees the writer's memory (after a failure before the commit). */
void ckpt_writer_free(CkptWriter *w);

/* Reads and checks the part at path (magic, schema, checksum, sections within the file).
 * 0, or RS_ERR_INPUT naming the file and what is wrong (missing, truncated, checksum mismatch,
 * another schema); p is then empty. The caller frees p with ckpt_part_free. */
int ckpt_part_load(CkptPart *p, const char *path);

/* Copies section tag into dst, which must be exactly bytes long. 0, or RS_ERR_INPUT naming the
 * file and the section (missing, or of another size). */
int ckpt_get(const CkptPart *p, const char *tag, void *dst, size_t bytes);

/* Section tag's bytes (inside p) and their count, or NULL where the part has none. */
const void *ckpt_find(const CkptPart *p, const char *tag, size_t *bytes);

void ckpt_part_free(CkptPart *p);

/* The path of DIR/step-NNNNNN (into out). */
void ckpt_step_dir(const char *dir, long step, char *out, size_t len);

/* A member's part's name: "rank-R.bin" for worker id, "server-K.bin" for server id (server 1). */
void ckpt_part_file(int server, int id, char *out, size_t len);

/* 1 when the step that ends with step done (1, 2, ...) is one c checkpoints (--checkpoint given,
 * done a multiple of --checkpoint-every): what the trainer and every server decide alike. */
int ckpt_due(const Config *c, long done);

/* The 64-bit hash of a job token, the job's mark in every part it writes. */
uint64_t ckpt_job_hash(const char *token);

/* Rank 0, after its own part of step step: waits (up to timeout seconds, polling) until every
 * part (rank-0..world-1, server-0..servers-1) of this job and step is in DIR/step-NNNNNN (its
 * header and trailer read: a part is renamed into place only whole and durable),
 * then writes the MANIFEST (the schema, build, model, world, servers, the options and their hash,
 * the step, each part's size and checksum), and removes older checkpoints but the newest
 * complete one before it; *bytes gets the parts' bytes in all. 0, or RS_ERR_PEER naming the
 * missing part, RS_ERR_RUNTIME. */
int ckpt_manifest_write(const char *dir, long step, const CkptMeta *m, uint64_t job, double timeout, size_t *bytes);

/* The newest complete checkpoint in dir (the highest step with a MANIFEST) checked against this
 * run (m, and steps: this run's total, which must not be less): *step its step. 0, or
 * RS_ERR_INPUT naming why not (dir missing, no complete checkpoint, another schema, model, world
 * size, server count, or the first option that differs). */
int ckpt_resume_check(const char *dir, const CkptMeta *m, long steps, long *step);

/* The checkpoint period (--checkpoint-every) of the job that wrote dir's newest complete
 * checkpoint, into *every (0 where its manifest has none, as before it was written there). 0, or
 * RS_ERR_INPUT naming why the manifest cannot be read (ckpt_resume_check's refusals). */
int ckpt_resume_period(const char *dir, int *every);

/* Loads this process's part name (rank-R.bin, server-K.bin) of dir's newest complete
 * checkpoint, checked against the manifest's size and checksum. 0, or RS_ERR_INPUT naming the
 * file and what is wrong. */
int ckpt_resume_load(const char *dir, const char *name, CkptPart *p);

/* Locks dir for this job's life: an exclusive flock on DIR/.lock (opened O_NOFOLLOW; a link, a
 * FIFO or a file with another name is refused), which then holds "PID HOST" of the process that
 * took it. The descriptor is not close-on-exec, and its number goes into the environment
 * (RINGSIDE_CKPT_LOCK_FD): the processes a launcher starts inherit the lock, rank 0 takes it as
 * its own, and the kernel releases it when the job's last process is gone. 0 with *fd set (never
 * to be closed while the job runs), CKPT_ERR_BUSY naming the holder's pid and host (nothing in dir
 * changed), RS_ERR_INPUT/RS_ERR_RUNTIME when the file cannot be opened or locked. */
int ckpt_dir_lock(const char *dir, int *fd);

/* Before training (the launcher, and rank 0): makes dir where missing (its parent must exist),
 * locks it (ckpt_dir_lock: *lock, -1 for no dir), refuses step entries that are symbolic links,
 * checks it can be written, refuses a folder that holds a complete checkpoint unless it is the
 * one the run resumes from (resume: --resume, "" for a fresh run), and, on rank 0 (clean),
 * removes what a killed run left unfinished (step folders without a manifest). 0, or
 * RS_ERR_INPUT naming why, CKPT_ERR_BUSY when another job holds it. */
int ckpt_dir_prepare(const char *dir, const char *resume, int clean, int *lock);

#endif
