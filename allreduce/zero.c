/* zero.c - the "zero" back end: ZeRO's stages 1-3 (the optimizer state, then the gradients, then the parameters sharded) on the host ring's reduce-scatter and all-gather */
#include "allreduce.h"
#include "ring.h"
#include "zero_gather.h"
#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/config.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "../engine/checkpoint.h"
#include "../engine/sync.h"
#include "../engine/trace.h"
#include "../kernels/device.h"
#include "../model/model.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ZeRO (Rajbhandari et al., SC'20) divides the model states over the N ranks. Here every bucket
 * is cut into the ring's N chunks, and rank r owns chunk (r + 1) % N of every bucket: the chunk
 * the ring's reduce-scatter leaves summed on it. Its shard is those chunks, about 1/N of the
 * parameters (the chunks differ by one element at most per bucket: no padding, every rank's exact
 * count is in its memory figures).
 *
 * A step: as backward completes each bucket, the engine hands it over and it is reduce-scattered
 * (ring_reduce_scatter: the ring's chunks, segments and order, so the sums are the ring's bits).
 * Once the last bucket is in, each rank runs the optimizer on its shard only, with its shard of
 * the optimizer state (SGD's momentum, AdamW's two moments: 4 or 8 bytes an element, 1/N of
 * them).
 *
 *   stage 1  the optimizer state sharded; every bucket's parameters are then all-gathered
 *            (ring_all_gather, in fp32 whatever --wire: parameters leave their owner exact, so
 *            every rank holds the same bits), as ZeRO all-gathers after its optimizer step; every
 *            rank keeps the whole gradient (4 bytes an element under grads). The parameters are
 *            those of the ring's run, bit for bit: the same sums, the same elementwise update.
 *   stage 2  the gradients too: the gradient buffer is paged host memory (model.h's
 *            grads_paged), and once a bucket is reduce-scattered every page of it outside this
 *            rank's chunk goes back to the kernel; after the optimizer step the shard's pages go
 *            too. The memory figures count what is resident, page by page (mincore), sampled
 *            after every gather and before every release (the only moments the count can have
 *            peaked): pages of this rank's chunks under grads (the shard, 4/N bytes an element,
 *            plus the pages a chunk shares with its neighbours), the rest, the buckets in flight,
 *            under comm (ZeRO's reduce buckets, which it counts apart from the model states).
 *   stage 3  the parameters too (FSDP's FULL_SHARD): the parameter buffer is paged as well, and
 *            only the rank's chunks stay resident (under params). The buckets are the layers
 *            (BackendShape.layer_buckets: FSDP's per-layer units), and the model's passes call
 *            param_need before they read a layer: the layer is all-gathered (on a second ring of
 *            its own, asked for by the compute thread and run by a gather thread in that order,
 *            zero_gather.h, while the first ring carries the reduce-scatters on the communication
 *            thread: each ring's collectives then come in one program order on every rank); the
 *            pass's next layer is asked for as soon as this one is in, so that it is gathered
 *            while this one computes (FSDP's forward and backward prefetch, and after the forward
 *            the backward's first layer; RINGSIDE_ZERO_PREFETCH=0 turns it off, to measure it);
 *            the layers gathered before are given back, and at a pass's end
 *            every gathered layer is, but those the model keeps gathered for the whole step
 *            (Model.keep_gathered: gpt's tied embedding, FSDP's root). So every layer is gathered
 *            before its forward and again before its backward and reduce-scattered after it:
 *            1.5x the ring's bytes (less the kept layers' second gather). The gathered layers
 *            count under comm. There is no all-gather after the update: the next step's gathers
 *            fetch it. Between steps params_full gathers every layer (an evaluation, a
 *            checkpoint, the end: FSDP's summon_full_params) outside the memory figures, and the
 *            next step gives them back.
 *
 * Bytes: the reduce-scatter moves (N-1)/N of the gradient in --wire's type, each all-gather
 * (N-1)/N of the parameters in fp32: under fp32, stages 1 and 2 move the ring's 2(N-1)/N a step,
 * exactly its messages. The optimizer's time runs inside the last bucket's interval (the engine's
 * optimizer phase is 0 here, as for a server's update); a trace shows it as "shard update" on
 * tid 2. */

typedef struct {
    SyncJob job;
    Ring *ring;               /* the reduce-scatters (and stage 1 and 2's all-gathers), the broadcast */
    Ring *pring;              /* stage 3: the parameters' gathers, on the compute thread */
    int stage, adamw;
    size_t *own_lo, *own_hi;  /* [nbuckets]: this rank's chunk of each bucket, bucket-relative */
    size_t *soff;             /* [nbuckets]: where that chunk's state starts in mom, mom2 */
    size_t shard;             /* elements of the shard */
    float *mom, *mom2;        /* the shard's optimizer state (MEM_OPTIMIZER) */
    float **out;              /* [nbuckets]: where each bucket's parameters are (the step's) */
    int global_samples;
    /* stages 2 and 3: the paged buffers, page by page (the parameters' and the gradients' pages
     * line up: both are nparams floats from a page boundary) */
    size_t gbytes, npages, pg;
    unsigned char *res, *own_page; /* [npages]: resident now; a page this rank's chunks touch */
    size_t charged_params, charged_grads, charged_comm;
    pthread_mutex_t count_mu;      /* the counts: the compute thread's gathers, the communication thread's releases */
    /* stage 3 (the compute thread's) */
    ZeroGather *gath;              /* the gathers, on their own thread and pring */
    unsigned char *wanted;         /* [nbuckets]: asked for ahead of the pass and not yet read */
    int pass;                      /* 0 forward, 1 backward: which way the next layer lies */
    int prefetch;                  /* ask for the pass's next layer ahead (RINGSIDE_ZERO_PREFETCH=0: not, to measure it) */
    int full;                      /* every layer is whole (the start, params_full): param_need has nothing to do */
    double wall_offset;            /* clock_wall() - clock_now(), for the trace */
} Zero;

/* ---- memory: what is resident of the paged buffers --------------------------------------------- */

/* The resident pages of buffer base: those of this rank's chunks into *own, the others into *other. */
static void zero_tally(Zero *z, const float *base, size_t *own, size_t *other) {
    if (mem_pages_resident(base, z->gbytes, z->res) != 0) return;
    for (size_t i = 0; i < z->npages; i++)
        if (z->res[i]) z->own_page[i] ? (*own)++ : (*other)++;
}

/* Counts what is resident now and moves the params, grads and comm figures to it. */
static void zero_recount(Zero *z) {
    if (!z->res) return;
    pthread_mutex_lock(&z->count_mu);
    size_t pown = 0, gown = 0, other = 0;
    zero_tally(z, z->job.model->grads, &gown, &other);
    if (z->stage >= 3) zero_tally(z, z->job.model->params, &pown, &other);
    pown *= z->pg, gown *= z->pg, other *= z->pg;
    if (z->stage >= 3) mem_account(MEM_PARAMS, (long long)pown - (long long)z->charged_params);
    mem_account(MEM_GRADS, (long long)gown - (long long)z->charged_grads);
    mem_account(MEM_COMM, (long long)other - (long long)z->charged_comm);
    z->charged_params = pown, z->charged_grads = gown, z->charged_comm = other;
    pthread_mutex_unlock(&z->count_mu);
}

/* Gives back every page of bucket b's slice of base (the gradients or the parameters) outside
 * this rank's chunk (the pages the chunk touches stay). */
static void zero_release_others(Zero *z, int b, float *base) {
    const Bucket *bk = &z->job.buckets[b];
    float *slice = base + bk->lo;
    mem_pages_release(slice, z->own_lo[b] * sizeof(float));
    mem_pages_release(slice + z->own_hi[b], (bk->hi - bk->lo - z->own_hi[b]) * sizeof(float));
}

static int zero_paging_init(Zero *z) {
    z->pg = mem_page_bytes();
    z->gbytes = z->job.nparams * sizeof(float);
    z->npages = (z->gbytes + z->pg - 1) / z->pg;
    if (!(z->res = calloc(z->npages ? z->npages : 1, 1)) || !(z->own_page = calloc(z->npages ? z->npages : 1, 1)))
        return rs_error(RS_ERR_RUNTIME, "zero: out of memory for %zu pages' bookkeeping", z->npages);
    for (int b = 0; b < z->job.nbuckets; b++) {
        size_t lo = (z->job.buckets[b].lo + z->own_lo[b]) * sizeof(float), hi = (z->job.buckets[b].lo + z->own_hi[b]) * sizeof(float);
        if (hi > lo)
            for (size_t p = lo / z->pg; p <= (hi - 1) / z->pg; p++) z->own_page[p] = 1;
    }
    mem_pages_release(z->job.model->grads, z->gbytes); /* the model's zeros: none resident before backward */
    zero_recount(z);
    return RS_OK;
}

/* ---- stage 3: the parameters, gathered layer by layer ----------------------------------------- */

/* Whether bucket b's layer is one the model keeps gathered for the whole step. */
static int zero_kept(const Zero *z, int b) {
    int l = z->job.nbuckets - 1 - b;
    return l < 64 && (z->job.model->keep_gathered >> l & 1);
}

/* Gives back every whole layer's pages outside this rank's chunks but bucket except's and those
 * asked for ahead and not yet read (wanted); with keep, not the layers the model keeps gathered;
 * without, every layer (the start of a step: full or kept, all go). */
static void zero_reshard(Zero *z, int keep, int except) {
    zero_recount(z); /* the peak: everything gathered so far */
    for (int b = 0; b < z->job.nbuckets; b++) {
        if (b == except || (keep && (z->wanted[b] || zero_kept(z, b)))) continue;
        if (!z->full && !zgather_whole(z->gath, b)) continue;
        zero_release_others(z, b, z->job.model->params);
        zgather_forget(z->gath, b);
        if (!keep) z->wanted[b] = 0;
    }
    if (!keep) z->full = 0;
    zero_recount(z);
}

/* Layer l's parameters whole here (a collective: every rank asks for the same layers in the same
 * order, its passes' program order, and the gather thread runs them in that order); then the next
 * layer of the pass is asked for, to be gathered while this one computes, and the layers before
 * are given back. l = -1: a pass is done: every gathered layer goes back but the kept ones, and
 * after a forward pass the backward's first layer (the last) is asked for. The model's hook, on
 * the compute thread. */
static int zero_param_need(void *state, int l) {
    Zero *z = state;
    if (z->stage < 3 || z->full) return RS_OK;
    int nb = z->job.nbuckets, b = nb - 1 - l;
    if (!z->gath) return rs_error(RS_ERR_RUNTIME, "zero: stage 3 before connect");
    if (l < 0) {
        zero_reshard(z, 1, -1);
        if ((z->pass = !z->pass) && z->prefetch && !zero_kept(z, 0)) { /* forward done: the backward begins with the last layer */
            zgather_ask(z->gath, 0);
            z->wanted[0] = 1;
        }
        return RS_OK;
    }
    if (b < 0 || b >= nb) return rs_error(RS_ERR_RUNTIME, "zero: layer %d of %d", l, nb);
    zgather_ask(z->gath, b);
    RS_TRY(zgather_wait(z->gath, b));
    z->wanted[b] = 0;
    int next = z->pass ? l - 1 : l + 1;
    if (z->prefetch && next >= 0 && next < nb && !zgather_whole(z->gath, nb - 1 - next)) {
        zgather_ask(z->gath, nb - 1 - next);
        z->wanted[nb - 1 - next] = 1;
    }
    zero_reshard(z, 1, b);
    return RS_OK;
}

/* Every layer whole on every rank (between steps; not in the memory figures: FSDP's summon_full_params). */
static int zero_params_full(void *state) {
    Zero *z = state;
    if (z->stage < 3 || z->full || !z->gath) return RS_OK;
    RS_TRY(zgather_idle(z->gath));
    for (int b = 0; b < z->job.nbuckets; b++) { /* a layer kept gathered holds the last step's values: again */
        zgather_forget(z->gath, b);
        zgather_ask(z->gath, b);
    }
    RS_TRY(zgather_idle(z->gath));
    memset(z->wanted, 0, (size_t)z->job.nbuckets);
    z->full = 1;
    return RS_OK;
}

/* The step's gathers run on their own thread: their intervals for comm_total, and the trace's. */
static int zero_comm_spans(void *state, double (*out)[2], int max) {
    Zero *z = state;
    int n = z->gath ? zgather_spans(z->gath, out, max) : 0;
    for (int i = 0; i < n && z->job.trace; i++)
        trace_span(z->job.trace, "gather", 2, out[i][0] + z->wall_offset, out[i][1] + z->wall_offset);
    return n;
}

/* After each gather, on the gather thread: the memory count. */
static void zero_gathered(void *arg) { zero_recount(arg); }

/* ---- checkpoints: each rank's shard of the optimizer state is a server part of its own -------- */

static int zero_checkpoint(Zero *z, long step) {
    CkptWriter w;
    ckpt_writer_init(&w);
    uint64_t shard = z->shard;
    size_t bytes = z->shard * sizeof(float);
    ckpt_put(&w, "shard", &shard, sizeof shard);
    int rc = ckpt_put_device(&w, z->job.dev, "mom", z->mom, bytes);
    if (rc == RS_OK && z->mom2) rc = ckpt_put_device(&w, z->job.dev, "mom2", z->mom2, bytes);
    if (rc != RS_OK) {
        ckpt_writer_free(&w);
        return rs_error(rc, "zero: rank %d's checkpoint of step %ld: %s", z->job.rank, step, rs_errmsg());
    }
    char name[32];
    ckpt_part_file(1, z->job.rank, name, sizeof name);
    return ckpt_commit(&w, z->job.cfg->checkpoint, step, name, ckpt_job_hash(z->job.token));
}

static int zero_resume(Zero *z) {
    char name[32];
    CkptPart p;
    uint64_t shard = 0;
    size_t bytes = z->shard * sizeof(float);
    ckpt_part_file(1, z->job.rank, name, sizeof name);
    RS_TRY(ckpt_resume_load(z->job.cfg->resume, name, &p));
    int rc = ckpt_get(&p, "shard", &shard, sizeof shard);
    if (rc == RS_OK && shard != z->shard)
        rc = rs_error(RS_ERR_INPUT, "checkpoint part %s: a shard of %llu elements, rank %d holds %zu", p.path,
                      (unsigned long long)shard, z->job.rank, z->shard);
    if (rc == RS_OK) rc = ckpt_get(&p, "mom", z->mom, bytes); /* host-visible device: straight in */
    if (rc == RS_OK && z->mom2) rc = ckpt_get(&p, "mom2", z->mom2, bytes);
    ckpt_part_free(&p);
    return rc;
}

/* ---- the back end ------------------------------------------------------------------------------ */

static void zero_destroy(void *state) {
    Zero *z = state;
    if (!z) return;
    zgather_destroy(z->gath); /* before its ring */
    ring_destroy(z->ring);
    ring_destroy(z->pring);
    size_t bytes = z->shard * sizeof(float);
    if (z->mom) device_free(z->job.dev, z->mom, bytes ? bytes : 4, MEM_OPTIMIZER);
    if (z->mom2) device_free(z->job.dev, z->mom2, bytes ? bytes : 4, MEM_OPTIMIZER);
    mem_account(MEM_PARAMS, -(long long)z->charged_params);
    mem_account(MEM_GRADS, -(long long)z->charged_grads);
    mem_account(MEM_COMM, -(long long)z->charged_comm);
    pthread_mutex_destroy(&z->count_mu);
    free(z->own_lo), free(z->own_hi), free(z->soff), free(z->out), free(z->res), free(z->own_page), free(z->wanted);
    free(z);
}

/* What the paged buffers need: the model's, paged as the stage shards them, and stage 3's buckets
 * the layers. 0 or RS_ERR_RUNTIME naming what is missing. */
static int zero_check_model(const Zero *z) {
    const Model *m = z->job.model;
    if (!m || !m->grads_paged || (z->stage >= 3 && !m->params_paged))
        return rs_error(RS_ERR_RUNTIME, "zero: stage %d needs the model's %s in paged memory (model.h)", z->stage,
                        z->stage >= 3 ? "parameters and gradients" : "gradients");
    if (z->stage < 3) return RS_OK;
    int n = m->nlayers, one = z->job.nbuckets == n; /* bucket b is layer n-1-b (engine's layer plan) */
    for (int b = 0; one && b < n; b++) one = z->job.buckets[b].lo == m->off[n - 1 - b] && z->job.buckets[b].hi == m->off[n - b];
    if (!one)
        return rs_error(RS_ERR_RUNTIME, "zero: stage 3 needs one bucket a layer (%d buckets, %d layers)", z->job.nbuckets, n);
    return RS_OK;
}

static int zero_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    *state = NULL;
    if (len) endpoint[0] = 0;
    if (!job->dev) return rs_error(RS_ERR_INPUT, "zero: no device");
    if (!job->dev->host_visible)
        return rs_error(RS_ERR_INPUT, "--sync zero on %s: its form on GPUs (NCCL's reduce-scatter and all-gather) is not "
                                      "built yet; the host form runs with --device cpu", job->dev->ops->name);
    const Config *c = job->cfg;
    Zero *z = calloc(1, sizeof *z);
    if (!z) return rs_error(RS_ERR_RUNTIME, "zero: out of memory");
    z->job = *job;
    z->stage = c->zero_stage;
    z->adamw = !strcmp(c->optimizer, "adamw");
    z->full = 1; /* the model's initial parameters, then the broadcast's, are whole */
    z->wall_offset = clock_wall() - clock_now();
    const char *pf = getenv("RINGSIDE_ZERO_PREFETCH");
    z->prefetch = !(pf && !strcmp(pf, "0"));
    pthread_mutex_init(&z->count_mu, NULL);
    int nb = job->nbuckets, rc = RS_OK;
    if (nb > 0 && (!(z->own_lo = calloc((size_t)nb, sizeof *z->own_lo)) || !(z->own_hi = calloc((size_t)nb, sizeof *z->own_hi)) ||
                   !(z->soff = calloc((size_t)nb, sizeof *z->soff)) || !(z->out = calloc((size_t)nb, sizeof *z->out)) ||
                   !(z->wanted = calloc((size_t)nb, 1))))
        rc = rs_error(RS_ERR_RUNTIME, "zero: out of memory");
    for (int b = 0; rc == RS_OK && b < nb; b++) {
        ring_chunk(job->buckets[b].hi - job->buckets[b].lo, job->world, (job->rank + 1) % job->world, &z->own_lo[b], &z->own_hi[b]);
        z->soff[b] = z->shard;
        z->shard += z->own_hi[b] - z->own_lo[b];
    }
    size_t bytes = z->shard * sizeof(float);
    if (rc == RS_OK && nb > 0) { /* the shard's optimizer state, zeroed (training only) */
        if (!(z->mom = device_alloc(job->dev, bytes ? bytes : 4, MEM_OPTIMIZER)) ||
            (z->adamw && !(z->mom2 = device_alloc(job->dev, bytes ? bytes : 4, MEM_OPTIMIZER))))
            rc = rs_error(RS_ERR_RUNTIME, "zero: the optimizer's shard of %zu elements: %s", z->shard, rs_errmsg());
        else {
            memset(z->mom, 0, bytes);
            if (z->mom2) memset(z->mom2, 0, bytes);
        }
    }
    if (rc == RS_OK && nb > 0 && z->stage >= 2 && (rc = zero_check_model(z)) == RS_OK) rc = zero_paging_init(z);
    if (rc == RS_OK && nb > 0 && c->resume[0]) rc = zero_resume(z);
    if (rc == RS_OK && job->world > 1) rc = ring_job_create(job, &z->ring, endpoint, len); /* lanes sized to the job */
    if (rc == RS_OK && job->world > 1 && z->stage >= 3 && nb > 0) { /* the gathers' ring: "RING^PRING" */
        size_t k = strlen(endpoint);
        if (k + 2 >= len) rc = rs_error(RS_ERR_RUNTIME, "zero: no room for a second endpoint");
        else {
            endpoint[k] = '^';
            rc = ring_job_create(job, &z->pring, endpoint + k + 1, len - k - 1);
        }
    }
    if (rc != RS_OK) {
        zero_destroy(z);
        return rc;
    }
    *state = z;
    return RS_OK;
}

/* Connects the ring (and stage 3's second: each member's text is "RING^PRING"), then starts
 * stage 3's gathers. */
static int zero_connect_rings(Zero *z, char *const *endpoints, int nmembers);

static int zero_connect(void *state, char *const *endpoints, int nmembers) {
    Zero *z = state;
    RS_TRY(zero_connect_rings(z, endpoints, nmembers));
    if (z->stage < 3 || z->job.nbuckets == 0) return RS_OK;
    return zgather_create(&z->gath, z->pring, z->job.model->params, z->job.buckets, z->job.nbuckets, z->job.timeout,
                          zero_gathered, z);
}

static int zero_connect_rings(Zero *z, char *const *endpoints, int nmembers) {
    int world = z->job.world, rc = RS_OK;
    if (world == 1) return RS_OK;
    if (nmembers < world) return rs_error(RS_ERR_INPUT, "zero: %d endpoints for %d ranks", nmembers, world);
    if (!z->pring) return ring_connect(z->ring, endpoints);
    char **one = calloc((size_t)world, sizeof *one), **two = calloc((size_t)world, sizeof *two);
    for (int i = 0; one && two && i < world && rc == RS_OK; i++) {
        const char *cut = strchr(endpoints[i], '^');
        if (!cut) rc = rs_error(RS_ERR_INPUT, "zero: rank %d's endpoint has no second ring (stage 3 on every rank?)", i);
        else if (!(one[i] = strndup(endpoints[i], (size_t)(cut - endpoints[i]))) || !(two[i] = strdup(cut + 1)))
            rc = rs_error(RS_ERR_RUNTIME, "zero: out of memory");
    }
    if (!one || !two) rc = rs_error(RS_ERR_RUNTIME, "zero: out of memory");
    if (rc == RS_OK) rc = ring_connect(z->ring, one);
    if (rc == RS_OK) rc = ring_connect(z->pring, two);
    for (int i = 0; i < world; i++) {
        if (one) free(one[i]);
        if (two) free(two[i]);
    }
    free(one), free(two);
    return rc;
}

static int zero_broadcast(void *state, float *buf, size_t count) {
    Zero *z = state;
    return z->job.world == 1 ? RS_OK : ring_broadcast(z->ring, buf, count);
}

/* The step's sample count for the update; stage 3: the parameters made whole since (the start,
 * params_full) or kept gathered through the last step go back to their shards. */
static int zero_begin_step(void *state, int step, int global_samples) {
    (void)step;
    Zero *z = state;
    z->global_samples = global_samples;
    if (z->stage < 3 || !z->gath) return RS_OK;
    RS_TRY(zgather_idle(z->gath)); /* a layer asked for ahead and never read is in before it goes */
    zero_reshard(z, 0, -1);
    zgather_spans(z->gath, NULL, 0); /* the gathers between steps are not the step's */
    z->pass = 0;
    return RS_OK;
}

/* This rank's shard of every bucket through the optimizer: the summed gradients in the model's,
 * the parameters where the step's buckets put them, t = step + 1 for AdamW's bias correction. */
static void zero_update(Zero *z, int step) {
    const Config *c = z->job.cfg;
    Device *d = z->job.dev;
    float scale = z->global_samples > 0 ? 1.0f / (float)z->global_samples : 0.0f;
    for (int b = 0; b < z->job.nbuckets; b++) {
        size_t lo = z->own_lo[b], n = z->own_hi[b] - lo;
        float *p = z->out[b] + lo, *m = z->mom + z->soff[b];
        const float *g = z->job.model->grads + z->job.buckets[b].lo + lo;
        if (!n) continue;
        if (z->adamw)
            d->k->adamw_step(d->kctx, p, g, m, z->mom2 + z->soff[b], n, (float)c->lr, (float)c->beta1, (float)c->beta2,
                             (float)c->eps, (float)c->weight_decay, scale, step + 1);
        else
            d->k->sgd_step(d->kctx, p, g, m, n, (float)c->lr, (float)c->momentum, (float)c->weight_decay, scale);
    }
}

/* Bucket b: reduce-scattered; after the last one, the shard's update and (stages 1 and 2) every
 * bucket's all-gather (the head comment). */
static int zero_start(void *state, int step, int b, float *grad, float *out) {
    Zero *z = state;
    const Bucket *bk = &z->job.buckets[b];
    size_t n = bk->hi - bk->lo, lo = 0, hi = n;
    if (z->job.world > 1) RS_TRY(ring_reduce_scatter(z->ring, grad, n, &lo, &hi));
    if (lo != z->own_lo[b] || hi != z->own_hi[b])
        return rs_error(RS_ERR_RUNTIME, "zero: bucket %d: the ring left chunk [%zu, %zu), the shard is [%zu, %zu)", b, lo, hi,
                        z->own_lo[b], z->own_hi[b]);
    z->out[b] = out;
    if (z->res) { /* stages 2 and 3: the peak is now; then the others' part of the bucket goes */
        zero_recount(z);
        zero_release_others(z, b, z->job.model->grads);
    }
    if (b < z->job.nbuckets - 1) return RS_OK;
    double t0 = clock_now();
    zero_update(z, step);
    double t1 = clock_now();
    if (z->job.trace) trace_span(z->job.trace, "shard update", 2, t0, t1);
    for (int i = 0; i < z->job.nbuckets && z->job.world > 1 && z->stage < 3; i++)
        RS_TRY(ring_all_gather(z->ring, z->out[i], z->job.buckets[i].hi - z->job.buckets[i].lo));
    if (z->res) { /* the shard's gradients are spent */
        zero_recount(z);
        mem_pages_release(z->job.model->grads, z->gbytes);
        zero_recount(z);
    }
    if (z->job.cfg->checkpoint[0] && ckpt_due(z->job.cfg, (long)step + 1)) RS_TRY(zero_checkpoint(z, (long)step + 1));
    return RS_OK;
}

/* Synchronous in-place sum (bench): the two phases, the owners' chunks passed round in fp32. */
static int zero_allreduce(void *state, float *buf, size_t count) {
    Zero *z = state;
    size_t lo, hi;
    if (z->job.world == 1) return RS_OK;
    RS_TRY(ring_reduce_scatter(z->ring, buf, count, &lo, &hi));
    return ring_all_gather(z->ring, buf, count);
}

static void zero_traffic(void *state, SyncTraffic *out) {
    Zero *z = state;
    ring_traffic_fill(z ? z->ring : NULL, out); /* the ring's messages, counted as the ring counts them */
    if (z && z->pring) { /* and stage 3's gathers */
        SyncTraffic more = {0};
        ring_traffic_fill(z->pring, &more);
        sync_traffic_add(out, &more);
    }
}

/* Every rank's shard of the optimizer state is a part of its own (server-R.bin, R the rank). */
static int zero_checkpoint_servers(void *state) {
    Zero *z = state;
    return z->job.nbuckets > 0 ? z->job.world : 0;
}

static const SyncOps zero_ops = {
    .name = "zero",
    .place = SYNC_ON_HOST,
    .result = SYNC_UPDATES,
    .init = zero_init,
    .connect = zero_connect,
    .broadcast = zero_broadcast,
    .start = zero_start,
    .begin_step = zero_begin_step,
    .allreduce = zero_allreduce,
    .traffic = zero_traffic,
    .destroy = zero_destroy,
    .checkpoint_servers = zero_checkpoint_servers,
    .param_need = zero_param_need,
    .params_full = zero_params_full,
    .comm_spans = zero_comm_spans,
};

/* The "zero" back end (never NULL: it needs only ZeroMQ and the host). */
const SyncOps *sync_zero(void) { return &zero_ops; }
