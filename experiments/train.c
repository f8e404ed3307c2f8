/* train.c - one rank's training run: data, model, the step loop and per-step timing (its report: train_report.c) */
#include "train.h"
#include "train_run.h"
#include "../engine/checkpoint.h"
#include "backends.h"
#include "../ps/ps.h"
#include "fits.h"
#include "../base/atomicfile.h"
#include "../base/clock.h"
#include "../base/config.h"
#include "../net/launch.h"
#include "../engine/engine.h"
#include "../data/data.h"
#include "../kernels/device.h"
#include "../base/err.h"
#include "../net/link.h"
#include "../net/msg.h"
#include "../net/node.h"
#include "../net/zendpoint.h"
#include "../base/log.h"
#include "../model/model.h"
#include "../engine/report.h"
#include "../engine/sync.h"
#include "../engine/trace.h"
#include "../engine/zctx.h"
#include "../engine/config_check.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* ---- data ---------------------------------------------------------------------------------- */

static int run_load_data(Run *r) { return model_load_data(&r->cfg, &r->data); }

/* Micro-batch mi's global size and this rank's [lo, lo+len) slice of the sampler's order
 * (DataParallel's step: rank 0's slice is the whole global batch, the others' empty). A step
 * is --accum-steps micro-batches (mi = step x K + k); without accumulation, one. */
static void run_step_slice(const Run *r, long long mi, int *global, int *lo, int *len) {
    const Config *c = &r->cfg;
    int i = (int)(mi % r->micro_per_epoch);
    if (c->global_batch > 0) {
        int n = r->sampler.per_rank, per = c->global_batch / c->accum_steps;
        int a = i * per, b = a + per;
        if (b > n) b = n;
        int clo, clen;
        scatter_chunk(b - a, r->world, r->rank, &clo, &clen);
        if (r->driver && r->driver->scatter) clo = 0, clen = r->rank == 0 ? b - a : 0;
        *global = b - a;
        *lo = a + clo;
        *len = clen;
    } else {
        int n = r->sampler.per_rank;
        int a = i * c->batch, b = a + c->batch;
        if (b > n) b = n;
        *global = (b - a) * r->world;
        *lo = a;
        *len = b - a;
    }
}

/* Stages micro-batch k of step `step` (its rows in *len, the global batch's in *global). */
static int run_stage_batch(Run *r, int step, int k, int *len_out, int *global_out) {
    int global, lo, len;
    long long mi = (long long)step * r->cfg.accum_steps + k;
    if (mi % r->micro_per_epoch == 0) sampler_set_epoch(&r->sampler, (int)(mi / r->micro_per_epoch));
    run_step_slice(r, mi, &global, &lo, &len);
    int dim = r->data.train.dim, yl = dataset_ylen(&r->data.train);
    for (int i = 0; i < len; i++) {
        int idx = r->cfg.global_batch > 0 ? sampler_global_index(&r->sampler, lo + i)
                                          : sampler_index(&r->sampler, lo + i);
        memcpy(r->hx + (size_t)i * dim, r->data.train.x + (size_t)idx * dim, (size_t)dim * sizeof(float));
        memcpy(r->hy + (size_t)i * yl, r->data.train.y + (size_t)idx * yl, (size_t)yl * sizeof(int));
    }
    *len_out = len;
    *global_out = global;
    if (len == 0 || (r->driver && r->driver->scatter)) return RS_OK; /* DataParallel: the driver scatters it */
    RS_TRY(device_h2d(&r->dev, r->model.act[0], r->hx, (size_t)len * dim * sizeof(float)));
    return device_h2d(&r->dev, r->model.labels, r->hy, (size_t)len * yl * sizeof(int));
}

/* ---- the step ------------------------------------------------------------------------------- */

/* One step: the batch staged, then the engine's step (forward, backward, exchange, optimizer);
 * under --accum-steps K, K-1 micro-batches accumulated first, each staged in turn. */
static int run_step(Run *r, int step) {
    int K = r->cfg.accum_steps, rows = 0, global = 0, len, g;
    engine_step_begin(r->engine, step);
    for (int k = 0; k < K - 1; k++) {
        RS_TRY(run_stage_batch(r, step, k, &len, &g));
        RS_TRY(engine_accumulate(r->engine, step, len));
        rows += len, global += g;
    }
    RS_TRY(run_stage_batch(r, step, K - 1, &len, &g));
    global += g;
    int local = len;
    const int scatters = engine_scatters(r->engine);
    RS_TRY(engine_step(r->engine, step, scatters ? r->hx : NULL, scatters ? r->hy : NULL, len, global, &local));
    r->samples[step] = rows + local;
    r->global_samples[step] = global;
    float stats[2];
    RS_TRY(device_d2h(&r->dev, stats, r->model.stats, sizeof stats));
    double per = model_out_rows(&r->model, 1); /* per sample: a gpt sample's loss is its positions' mean */
    r->loss_sum[step] = stats[0] / per;
    r->correct[step] = stats[1] / per;
    return RS_OK;
}

static int run_eval(Run *r, int step) {
    double acc, loss;
    RS_TRY(model_evaluate(&r->model, r->data.eval.x, r->data.eval.y, r->data.eval.n, &acc, &loss));
    r->final_acc = acc;
    r->final_eval_loss = loss;
    cJSON *pt = cJSON_CreateArray();
    cJSON_AddItemToArray(pt, cJSON_CreateNumber(step));
    cJSON_AddItemToArray(pt, report_number(acc)); /* NaN parameters evaluate to a NaN loss */
    cJSON_AddItemToArray(pt, report_number(loss));
    cJSON_AddItemToArray(r->eval_curve, pt);
    log_info("# eval  step %5d  accuracy %.4f  loss %.4f", step, acc, loss);
    return RS_OK;
}

/* ---- set-up and tear-down ------------------------------------------------------------------- */

static void run_free(Run *r) {
    engine_free(r->engine);
    zctx_close(r->zctx);
    model_free(&r->model);
    if (r->dev.ops) device_close(&r->dev);
    sampler_free(&r->sampler);
    datapair_free(&r->data);
    free(r->loss_sum);
    free(r->correct);
    free(r->samples);
    free(r->global_samples);
    free(r->pulled);
    free(r->applied);
    free(r->stale);
    free(r->hx);
    free(r->hy);
    cJSON_Delete(r->eval_curve);
    trace_free(r->trace);
}

/* Checks --report and --trace can be written, before any work. */
static int run_check_outputs(const Config *c) {
    if (report_check_writable(c->report)) return rs_error(RS_ERR_INPUT, "--report %s", rs_errmsg());
    if (c->trace[0] && report_check_writable(c->trace)) return rs_error(RS_ERR_INPUT, "--trace %s", rs_errmsg());
    if (c->save_params[0] && report_check_writable(c->save_params))
        return rs_error(RS_ERR_INPUT, "--save-params %s", rs_errmsg());
    const char *name[3] = {"--report", "--trace", "--save-params"}, *path[3] = {c->report, c->trace, c->save_params};
    for (int i = 0; i < 3; i++) /* one file written twice would keep only the last */
        for (int j = i + 1; j < 3; j++)
            if (path[i][0] && path[j][0] && atomicfile_same_path(path[i], path[j]))
                return rs_error(RS_ERR_INPUT, "%s %s and %s %s: the same file (each needs its own)", name[i], path[i],
                                name[j], path[j]);
    return RS_OK;
}

static int run_setup(Run *r) {
    Config *c = &r->cfg;
    long resume_step;
    if (r->rank == 0) RS_TRY(run_check_outputs(c));
    if (r->rank == 0) RS_TRY(train_ckpt_prepare(c, r->world, 1, &resume_step));
    if (c->trace[0]) {
        char label[32];
        snprintf(label, sizeof label, "rank %d", r->rank);
        r->trace = trace_new(r->rank, label);
        r->wall_offset = clock_wall() - clock_now();
    }
    RS_TRY(run_load_data(r));
    log_info("# data: %s (%d train, %d eval, %d values, %d classes)", r->data.source, r->data.train.n,
             r->data.eval.n, r->data.train.dim, r->data.train.classes);
    int sampler_world = c->global_batch > 0 ? 1 : r->world;
    int sampler_rank = c->global_batch > 0 ? 0 : r->rank;
    RS_TRY(sampler_init(&r->sampler, r->data.train.n, sampler_world, sampler_rank, c->shuffle, c->drop_last,
                        (uint64_t)c->seed));
    int per_micro = c->global_batch > 0 ? c->global_batch / c->accum_steps : c->batch;
    r->micro_per_epoch = (r->sampler.per_rank + per_micro - 1) / per_micro;
    r->steps_per_epoch = (r->micro_per_epoch + c->accum_steps - 1) / c->accum_steps;
    r->steps = c->steps > 0 ? c->steps : c->epochs > 0 ? c->epochs * r->steps_per_epoch : 100;

    int fell_back = 0;
    RS_TRY(device_open(&r->dev, c->device, r->local_rank, &fell_back));
    if (fell_back) log_info("# --device auto: no usable GPU, running on the CPU");
    if (r->dev.kind == DEV_CPU) {
        int th = c->threads;
        if (th == 0) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            th = (int)(cores / (r->local_world > 0 ? r->local_world : 1));
            if (th < 1) th = 1;
        }
        kernels_cpu_set_threads(th);
    }
    /* the back end (--sync) and the step driver (DataParallel's for --ps-mode dataparallel) */
    BackendShape shape;
    RS_TRY(backend_shape(c, &shape));
    r->backend = shape.row;
    r->ops = shape.ops;
    r->driver = shape.driver;
    for (int i = 0; i < c->nstragglers; i++)
        if (c->straggler_rank[i] >= r->world)
            return rs_error(RS_ERR_INPUT, "--straggler %d:%g: rank %d does not exist in a job of %d ranks",
                            c->straggler_rank[i], c->straggler_ms[i], c->straggler_rank[i], r->world);
    int max_batch = c->global_batch > 0 ? (c->global_batch / c->accum_steps + r->world - 1) / r->world : c->batch;
    /* DataParallel: rank 0 stages the whole global batch on the host */
    int staged = r->driver && r->driver->scatter && r->rank == 0 && c->global_batch > 0 ? c->global_batch : max_batch;
    /* the optimizer's state lives where the update runs: here, unless a server returns parameters */
    if (shape.host_only && !r->dev.host_visible)
        return rs_error(RS_ERR_INPUT, "--sync %s on %s: its form on GPUs (NCCL's reduce-scatter and all-gather) is not "
                                      "built yet; the host form runs with --device cpu", c->sync, r->dev.ops->name);
    RS_TRY(model_create(&r->model, &r->dev, c, max_batch, (r->ops->result == SYNC_SUMS ? MODEL_OPTIMIZER : 0) | shape.model_flags));
    if (model_in_width(&r->model) != r->data.train.dim)
        return rs_error(RS_ERR_INPUT, "--data %s: samples of %d values, --model %s takes %d", c->data, r->data.train.dim,
                        c->model, model_in_width(&r->model));

    /* under async and ssp --steps counts the server's updates (N pushes each): a worker alone
     * could take N times as many */
    r->lockstep = config_lockstep(c);
    r->maxsteps = r->lockstep ? r->steps : r->steps * r->world;
    int S = r->maxsteps;
    r->pulled = r->lockstep ? NULL : calloc((size_t)S, sizeof *r->pulled);
    r->applied = r->lockstep ? NULL : calloc((size_t)S, sizeof *r->applied);
    r->stale = r->lockstep ? NULL : calloc((size_t)S, sizeof *r->stale);
    if (!r->lockstep && (!r->pulled || !r->applied || !r->stale))
        return rs_error(RS_ERR_RUNTIME, "out of host memory for %d steps", S);
    r->loss_sum = calloc((size_t)S, sizeof *r->loss_sum);
    r->correct = calloc((size_t)S, sizeof *r->correct);
    r->samples = calloc((size_t)S, sizeof *r->samples);
    r->global_samples = calloc((size_t)S, sizeof *r->global_samples);
    r->hx = malloc((size_t)staged * r->data.train.dim * sizeof(float));
    r->hy = malloc((size_t)staged * dataset_ylen(&r->data.train) * sizeof(int));
    r->eval_curve = cJSON_CreateArray();
    if (!r->loss_sum || !r->correct || !r->samples || !r->global_samples ||
        !r->hx || !r->hy || !r->eval_curve)
        return rs_error(RS_ERR_RUNTIME, "out of host memory for %d steps", S);

    RS_TRY(zctx_open(&r->zctx, c, &r->env));
    EngineArgs ea = {.cfg = c, .model = &r->model, .dev = &r->dev, .env = &r->env, .rank = r->rank,
                     .world = r->world, .local_rank = r->local_rank, .local_world = r->local_world,
                     .zctx = r->zctx, .trace = r->trace, .wall_offset = r->wall_offset,
                     .ops = r->ops, .driver = r->driver, .steps = S, .layer_buckets = shape.layer_buckets};
    RS_TRY(engine_create(&r->engine, &ea));
    return c->resume[0] ? train_ckpt_restore(r) : RS_OK;
}

static int run_train(Run *r) {
    Device *d = &r->dev;
    int rc = RS_OK, nb;
    char name[64];
    engine_buckets(r->engine, &nb);
    log_info("# train: %d steps of %s on %s, %d rank%s, sync %s, %zu parameters, %d bucket%s", r->steps,
             r->cfg.global_batch > 0 ? "a global batch" : "a per-rank batch", device_name(d, name, sizeof name),
             r->world, r->world > 1 ? "s" : "", r->cfg.sync, r->model.nparams, nb, nb > 1 ? "s" : "");
    int every = r->steps >= 10 ? r->steps / 10 : 1;
    long long pulled = 0; /* async: the server's pushes applied when this rank's parameters left it */
    int stale = 0;
    const int warm = train_warm(r, r->steps);
    /* --resume from the last step of a shorter run: the evaluation an uninterrupted run makes
     * after that step (its last, so not in its checkpoint) */
    cJSON *last = r->first > 0 ? cJSON_GetArrayItem(r->eval_curve, cJSON_GetArraySize(r->eval_curve) - 1) : NULL;
    if (r->first > 0 && r->rank == 0 && r->cfg.eval_every > 0 && r->first % r->cfg.eval_every == 0 &&
        r->first < r->steps && !(last && cJSON_GetArrayItem(last, 0) && cJSON_GetArrayItem(last, 0)->valueint == r->first))
        rc = run_eval(r, r->first);
    for (int s = r->first; s < r->maxsteps && rc == RS_OK; s++) {
        if (s == warm) r->gemm_s0 = kernels_cpu_gemm_seconds();
        if (!r->lockstep) r->pulled[s] = pulled, r->stale[s] = stale;
        rc = run_step(r, s);
        if (rc) break;
        r->done = s + 1;
        int spent = s + 1 >= r->steps, stop = spent;
        if (!r->lockstep) {
            engine_progress(r->engine, &pulled, &stale);
            r->applied[s] = pulled;
            spent = pulled >= (long long)r->steps * r->world;
        }
        if (!r->lockstep || r->cfg.time_budget > 0) rc = engine_should_stop(r->engine, spent, &stop);
        if (rc) break;
        int eval = r->cfg.eval_every > 0 && (s + 1) % r->cfg.eval_every == 0 && s + 1 < r->steps && !stop;
        if ((eval || ckpt_due(&r->cfg, (long)s + 1)) && (rc = engine_params_full(r->engine))) break; /* sharded: whole */
        if (r->rank == 0 && eval) {
            double g0 = kernels_cpu_gemm_seconds();
            rc = run_eval(r, s + 1);
            if (s >= warm) r->gemm_eval += kernels_cpu_gemm_seconds() - g0;
        }
        if (rc == RS_OK && ckpt_due(&r->cfg, (long)s + 1))
            rc = train_ckpt_save(r, s + 1); /* after the step's evaluation, which its part keeps */
        if (rc) break;
        /* rank 0's loss sum covers the global batch under DataParallel's step */
        int n = r->driver && r->driver->loss ? r->global_samples[s] : r->samples[s];
        if ((s + 1) % every == 0 || s + 1 == r->steps || stop)
            log_info("step %5d/%d  loss %.4f  (rank-local)  %.1f ms/step", s + 1, r->steps,
                     n ? r->loss_sum[s] / n : 0.0, engine_times(r->engine, &nb)[s].step * 1e3);
        if (stop) break;
    }
    r->gemm_s1 = kernels_cpu_gemm_seconds();
    if (rc == RS_OK) rc = engine_params_full(r->engine); /* sharded parameters made whole, on every rank */
    if (rc == RS_OK && r->rank == 0) rc = run_eval(r, r->steps); /* parameters are equal on every rank */
    return rc;
}

static void run_cmdline(Run *r, int argc, char **argv) {
    size_t k = snprintf(r->cmdline, sizeof r->cmdline, "ringside train");
    for (int i = 0; i < argc && k < sizeof r->cmdline; i++)
        k += (size_t)snprintf(r->cmdline + k, sizeof r->cmdline - k, " %s", argv[i]);
}

/* This process's node (--nodes) and its emulated interfaces (--link, --intra-link): every process
 * of the job, ranks and dedicated servers, paces through them. 0 or RS_ERR_INPUT (--nodes and the
 * launcher disagree). */
static int train_place(Run *r) { return node_link_open(&r->env, &r->cfg); }

/* The launcher's side of `train -n N`: checks what can be checked once, then starts the ranks. */
static int train_launch(const Config *c, int servers, int argc, char **argv) {
    long resume_step;
    int rc = run_check_outputs(c);
    if (rc == RS_OK) rc = train_ckpt_prepare(c, c->nranks, 1, &resume_step);
    if (rc == RS_OK && !sync_find(c->sync)) rc = RS_ERR_INPUT;
    if (rc != RS_OK) {
        log_error("%s", rs_errmsg());
        return rc;
    }
    return launch_command("train", c->nranks, servers, c->nodes, argc, argv);
}

int train_main(int argc, char **argv) {
    Run *r = calloc(1, sizeof *r);
    if (!r) return rs_error(RS_ERR_RUNTIME, "out of memory");
    config_defaults(&r->cfg);
    int help = 0, rc = config_parse(&r->cfg, argc, argv, &help);
    if (help) {
        printf("usage: ringside train [options]\n\nTrains a model (--model); with -n N, on N local ranks.\n\n");
        config_usage(stdout);
        backend_usage(stdout);
        free(r);
        return RS_OK;
    }
    if (rc == RS_OK) rc = backend_validate(&r->cfg);
    if (rc != RS_OK) {
        log_error("%s", rs_errmsg());
        fprintf(stderr, "usage: ringside train [options]   (ringside train --help lists them)\n");
        free(r);
        return rc;
    }
    ZepWant want; /* validated above */
    zep_parse(r->cfg.transport, &want);
    zep_set(want);
    MsgLayer layer; /* validated above */
    msg_layer_parse(r->cfg.msg_layer, &layer);
    msg_layer_set(layer);
    log_set_quiet(r->cfg.quiet);
    log_set_verbose(r->cfg.verbose);
    if ((rc = rankenv_detect(&r->env)) != RS_OK) {
        log_error("%s", rs_errmsg());
        free(r);
        return rc;
    }
    /* a resume without --checkpoint-every keeps the interrupted job's period (every process reads
     * it: the servers save on it too); an unreadable manifest is refused by the checks below */
    int every = 0;
    if (r->cfg.resume[0] && r->cfg.checkpoint[0] && !r->cfg.checkpoint_every_given &&
        ckpt_resume_period(r->cfg.resume, &every) == RS_OK && every > 0) {
        r->cfg.checkpoint_every = every;
        if (!r->env.launched || (r->env.member == 0 && strcmp(r->env.source, "ringside")))
            log_info("# --resume %s: a checkpoint every %d steps, the interrupted job's period (--checkpoint-every "
                     "sets another)", r->cfg.resume, every);
    }
    BackendShape shape; /* ps dedicated, byteps: server processes of their own */
    if ((rc = backend_shape(&r->cfg, &shape)) != RS_OK) {
        log_error("%s", rs_errmsg());
        free(r);
        return rc;
    }
    int servers = shape.servers;
    /* a job that cannot fit is refused before it starts, not OOM-killed in the middle: by the
     * launcher (or a lone process) for the whole job, by local rank 0 under srun/torchrun/mpirun */
    int fit_workers = !r->env.launched ? r->cfg.nranks : strcmp(r->env.source, "ringside") && r->env.local_rank == 0 &&
                      r->env.member < r->env.world ? r->env.local_world : 0;
    if (fit_workers > 0 && (rc = fits_check(&r->cfg, fit_workers, r->env.launched ? 0 : servers)) != RS_OK) {
        log_error("%s", rs_errmsg());
        free(r);
        return rc;
    }
    if (!r->env.launched && (r->cfg.nranks > 1 || servers > 0)) {
        rc = train_launch(&r->cfg, servers, argc, argv);
        free(r);
        return rc;
    }
    if (r->env.launched) {
        /* srun / mpirun start workers and dedicated servers alike: the last `servers` tasks serve */
        if (servers > 0 && !getenv("RINGSIDE_ROLE") && (!strcmp(r->env.source, "slurm") || !strcmp(r->env.source, "openmpi"))) {
            if (r->env.world <= servers) {
                log_error("--ps-servers %d: the job has %d tasks, none left to train (start workers + servers tasks)",
                          servers, r->env.world);
                free(r);
                return RS_ERR_INPUT;
            }
            r->env.world -= servers;
        }
        r->env.servers = servers;
        r->cfg.nranks = r->env.world;
        log_set_rank(r->env.member);
    }
    if ((rc = train_place(r)) != RS_OK) {
        log_error("%s", rs_errmsg());
        free(r);
        return rc;
    }
    if (r->env.member >= r->env.world) {
        if (!shape.server_main) {
            log_error("member %d of a job of %d workers: --sync %s starts no server processes", r->env.member, r->env.world,
                      r->cfg.sync);
            free(r);
            return RS_ERR_INPUT;
        }
        rc = shape.server_main(&r->cfg, &r->env, PS_MODEL_KEYS, NULL);
        free(r);
        return rc;
    }
    run_cmdline(r, argc, argv);
    r->rank = r->env.member;
    r->world = r->env.world;
    r->local_rank = r->env.local_rank;
    r->local_world = r->env.local_world;
    r->t_start = clock_wall();
    rc = run_setup(r);
    link_share_release(); /* every process of the job has joined: the node's NIC is mapped by all */
    if (rc == RS_OK) rc = run_train(r);
    r->t_end = clock_wall();
    if (rc == RS_OK) rc = train_hash_params(r);
    if (rc == RS_OK) rc = engine_close(r->engine); /* goodbye, before the gather */
    if (rc != RS_OK) log_error("%s", rs_errmsg());
    else rc = train_report(r); /* logs its own failures */
    run_free(r);
    free(r);
    link_unshare();
    return rc;
}
