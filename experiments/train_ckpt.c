/* train_ckpt.c - a training run's checkpoints: the checks before it starts, each rank's part, rank 0's manifest, the resume */
#include "train_run.h"
#include "../base/clock.h"
#include "../base/config.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../engine/checkpoint.h"
#include "../engine/config_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the manifest says of this run: its model, workers, server parts and options. */
static void ckpt_meta(const Config *c, int world, int servers, char *opts, size_t len, CkptMeta *m) {
    config_resume_text(c, opts, len);
    *m = (CkptMeta){.model = c->model, .nparams = config_param_count(c), .world = world, .servers = servers,
                    .options = opts, .every = c->checkpoint_every};
}

int train_ckpt_prepare(const Config *c, int world, int clean, long *step) {
    *step = -1;
    if (c->resume[0]) {
        char opts[8192];
        CkptMeta m;
        ckpt_meta(c, world, -1, opts, sizeof opts, &m); /* the servers: the options say how many */
        long steps = c->steps > 0 ? c->steps : -1; /* --epochs: checked by each rank once it knows the epoch's steps */
        RS_TRY(ckpt_resume_check(c->resume, &m, steps < 0 ? 0x7fffffffL : steps, step));
    }
    int lock; /* held for the process's life: the kernel releases it with the job's last process */
    if (c->checkpoint[0]) RS_TRY(ckpt_dir_prepare(c->checkpoint, c->resume, clean, &lock));
    return RS_OK;
}

/* The part's name of worker rank. */

int train_ckpt_save(Run *r, int step) {
    Model *m = &r->model;
    double t0 = clock_now();
    size_t bytes = m->nparams * sizeof(float);
    CkptWriter w;
    ckpt_writer_init(&w);
    int64_t st = step, mi = (int64_t)step * r->cfg.accum_steps;
    int32_t epoch = (int32_t)(mi / r->micro_per_epoch);
    ckpt_put(&w, "step", &st, sizeof st);
    ckpt_put(&w, "epoch", &epoch, sizeof epoch);
    ckpt_put(&w, "position", &mi, sizeof mi); /* the next micro-batch of the sampler's order */
    int rc = ckpt_put_device(&w, &r->dev, "params", m->params, bytes);
    if (rc == RS_OK && m->mom) rc = ckpt_put_device(&w, &r->dev, "mom", m->mom, bytes);
    if (rc == RS_OK && m->mom2) rc = ckpt_put_device(&w, &r->dev, "mom2", m->mom2, bytes);
    /* the per-step records the report's loss curve is built from, so that it is the whole run's */
    ckpt_put(&w, "loss_sum", r->loss_sum, (size_t)step * sizeof *r->loss_sum);
    ckpt_put(&w, "correct", r->correct, (size_t)step * sizeof *r->correct);
    ckpt_put(&w, "samples", r->samples, (size_t)step * sizeof *r->samples);
    ckpt_put(&w, "global_samples", r->global_samples, (size_t)step * sizeof *r->global_samples);
    if (r->rank == 0 && r->eval_curve) {
        char *text = cJSON_PrintUnformatted(r->eval_curve);
        if (!text) rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        else ckpt_put(&w, "eval_curve", text, strlen(text));
        free(text);
    }
    if (rc != RS_OK) {
        ckpt_writer_free(&w);
        return rc;
    }
    char name[32];
    ckpt_part_file(0, r->rank, name, sizeof name);
    uint64_t job = ckpt_job_hash(r->env.token);
    RS_TRY(ckpt_commit(&w, r->cfg.checkpoint, step, name, job));
    if (r->rank != 0) return RS_OK;
    char opts[8192];
    CkptMeta meta;
    ckpt_meta(&r->cfg, r->world, engine_checkpoint_servers(r->engine), opts, sizeof opts, &meta);
    size_t total;
    RS_TRY(ckpt_manifest_write(r->cfg.checkpoint, step, &meta, job, r->cfg.timeout, &total));
    log_info("# checkpoint: step %d in %s, %d parts, %.3f MB, %.2f ms", step, r->cfg.checkpoint,
             meta.world + meta.servers, total / 1e6, (clock_now() - t0) * 1e3);
    return RS_OK;
}

int train_ckpt_restore(Run *r) {
    Model *m = &r->model;
    char name[32];
    CkptPart p;
    ckpt_part_file(0, r->rank, name, sizeof name);
    RS_TRY(ckpt_resume_load(r->cfg.resume, name, &p));
    size_t bytes = m->nparams * sizeof(float);
    float *h = malloc(bytes ? bytes : 1);
    int64_t st = 0, mi = 0;
    int32_t epoch = 0;
    int rc = h ? RS_OK : rs_error(RS_ERR_RUNTIME, "out of memory");
    if (rc == RS_OK) rc = ckpt_get(&p, "step", &st, sizeof st);
    if (rc == RS_OK && (st < 1 || st > r->steps))
        rc = rs_error(RS_ERR_INPUT, "--resume: %s is of step %lld, this run takes %d steps (--steps must be at least "
                      "the checkpoint's)", p.path, (long long)st, r->steps);
    if (rc == RS_OK) rc = ckpt_get(&p, "epoch", &epoch, sizeof epoch);
    if (rc == RS_OK) rc = ckpt_get(&p, "position", &mi, sizeof mi);
    if (rc == RS_OK && (mi != st * r->cfg.accum_steps || epoch != (int32_t)(mi / r->micro_per_epoch)))
        rc = rs_error(RS_ERR_INPUT, "--resume: %s: the sampler at epoch %d, micro-batch %lld, not where step %lld "
                      "leaves it", p.path, epoch, (long long)mi, (long long)st);
    if (rc == RS_OK) rc = ckpt_get(&p, "params", h, bytes);
    if (rc == RS_OK) rc = device_h2d(&r->dev, m->params, h, bytes);
    if (rc == RS_OK && m->mom && (rc = ckpt_get(&p, "mom", h, bytes)) == RS_OK) rc = device_h2d(&r->dev, m->mom, h, bytes);
    if (rc == RS_OK && m->mom2 && (rc = ckpt_get(&p, "mom2", h, bytes)) == RS_OK)
        rc = device_h2d(&r->dev, m->mom2, h, bytes);
    free(h);
    size_t n = (size_t)st;
    if (rc == RS_OK) rc = ckpt_get(&p, "loss_sum", r->loss_sum, n * sizeof *r->loss_sum);
    if (rc == RS_OK) rc = ckpt_get(&p, "correct", r->correct, n * sizeof *r->correct);
    if (rc == RS_OK) rc = ckpt_get(&p, "samples", r->samples, n * sizeof *r->samples);
    if (rc == RS_OK) rc = ckpt_get(&p, "global_samples", r->global_samples, n * sizeof *r->global_samples);
    if (rc == RS_OK && r->rank == 0) {
        size_t len;
        const char *text = ckpt_find(&p, "eval_curve", &len);
        char *z = text ? malloc(len + 1) : NULL;
        cJSON *ev = NULL;
        if (z) {
            memcpy(z, text, len);
            z[len] = 0;
            ev = cJSON_Parse(z);
            free(z);
        }
        if (!cJSON_IsArray(ev)) {
            cJSON_Delete(ev);
            rc = rs_error(RS_ERR_INPUT, "--resume: %s: no evaluation curve", p.path);
        } else {
            cJSON_Delete(r->eval_curve);
            r->eval_curve = ev;
        }
    }
    ckpt_part_free(&p);
    if (rc != RS_OK) return rc;
    sampler_set_epoch(&r->sampler, epoch);
    r->first = r->done = (int)st;
    engine_resume_at(r->engine, (int)st);
    log_info("# resumed from %s at step %d", r->cfg.resume, r->first);
    return RS_OK;
}
