/* fuzz_checkpoint.c - libFuzzer harness: a resume from a fuzzed checkpoint folder (the manifest's reader and checks, a part's loader, in engine/checkpoint.c) */
#include "fuzz.h"
#include "../../engine/checkpoint.h"
#include "../../base/err.h"

/* What this harness's resumes say of their run (the seeds' manifests are written for it). */
static const CkptMeta fz_meta = {.model = "mlp", .nparams = 4, .world = 1, .servers = 0, .options = "lr=0.1\nsteps=9\n"};

/* The input is a manifest and a part, separated by the first NUL byte: they become
 * DIR/step-000003/MANIFEST and DIR/step-000003/rank-0.bin, and the folder is resumed from as the
 * launcher and a rank do (ckpt_resume_check, ckpt_resume_period, ckpt_resume_load, then the
 * part's sections read). Only RS_OK and RS_ERR_INPUT may come back; a part that loads must hold
 * its sections within its bytes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t plen[2];
    int n = fz_split(data, size, 0, part, plen, 2);
    char dir[512], sd[600], path[700];
    fz_path(dir, sizeof dir, "ck");
    snprintf(sd, sizeof sd, "%s/step-000003", dir);
    mkdir(dir, 0700);
    mkdir(sd, 0700);
    snprintf(path, sizeof path, "%s/MANIFEST", sd);
    fz_write(path, part[0], plen[0]);
    snprintf(path, sizeof path, "%s/rank-0.bin", sd);
    if (n > 1) fz_write(path, part[1], plen[1]);
    else unlink(path);
    long step = -1;
    int every = -1, rc = ckpt_resume_check(dir, &fz_meta, 9, &step);
    if (rc != RS_OK && rc != RS_ERR_INPUT) abort();
    if (rc == RS_OK && step != 3) abort(); /* the folder's step, never the manifest's say alone */
    rc = ckpt_resume_period(dir, &every);
    if ((rc != RS_OK && rc != RS_ERR_INPUT) || every < 0) abort();
    CkptPart p;
    rc = ckpt_resume_load(dir, "rank-0.bin", &p);
    if (rc != RS_OK && rc != RS_ERR_INPUT) abort();
    if (rc == RS_OK) {
        float params[4];
        size_t bytes;
        const unsigned char *s = ckpt_find(&p, "params", &bytes);
        if (s && (s < p.buf || s + bytes > p.buf + p.len)) abort();
        rc = ckpt_get(&p, "params", params, sizeof params);
        if (rc != RS_OK && rc != RS_ERR_INPUT) abort();
        ckpt_part_free(&p);
    }
    return 0;
}
