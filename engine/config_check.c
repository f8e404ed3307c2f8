/* config_check.c - the run's options checked together, once parsed: the rules that need the models, the links and the back ends */
#include "config_check.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../model/model.h"
#include "../net/link.h"
#include "../net/msg.h"
#include "../net/zendpoint.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int config_partition_check(const Config *c, size_t nparams) {
    if (strcmp(c->ps_partition, "auto") && strcmp(c->ps_partition, "off")) {
        char *end;
        errno = 0;
        double kb = strtod(c->ps_partition, &end);
        if (end == c->ps_partition || *end || errno || !(kb > 0) || !isfinite(kb))
            return rs_error(RS_ERR_INPUT, "--ps-partition-kb '%s': expected a positive number of KiB, auto or off",
                            c->ps_partition);
        CodecType wt = CODEC_F32;
        codec_parse(c->wire, &wt);
        double el = (double)codec_elem_bytes(wt), bucket_kb = c->bucket_mb * 1024 * el / sizeof(float);
        if (kb * 1024 < el + (double)codec_head_bytes(wt)) /* FP8: a partition's scale, then its keys */
            return rs_error(RS_ERR_INPUT, "--ps-partition-kb %s: less than one parameter on the wire (%g bytes%s)",
                            c->ps_partition, el + (double)codec_head_bytes(wt),
                            codec_head_bytes(wt) ? " with an FP8 message's 4-byte scale" : "");
        if (kb > bucket_kb)
            return rs_error(RS_ERR_INPUT, "--ps-partition-kb %s: larger than a bucket (--bucket-mb %g = %g KiB on the "
                                          "wire): partitions cut buckets (off: whole buckets)",
                            c->ps_partition, c->bucket_mb, bucket_kb);
        size_t np = nparams / (size_t)(kb * 1024 / el) + 1;
        if (np > 0xfffffffeu)
            return rs_error(RS_ERR_INPUT, "--ps-partition-kb %s: %zu partitions, more than the wire header addresses",
                            c->ps_partition, np);
    }
    return RS_OK;
}

int config_layer_check(const Config *c) {
    MsgLayer layer;
    RS_TRY(msg_layer_parse(c->msg_layer, &layer));
    if (layer == MSG_DIRECT && c->secure[0])
        return rs_error(RS_ERR_INPUT, "--msg-layer direct with --secure: the direct sockets have no CURVE (use --msg-layer zeromq)");
    return RS_OK;
}

int config_nodes_check(const Config *c) {
    ZepWant want = ZEP_AUTO;
    LinkSpec intra;
    RS_TRY(zep_parse(c->transport, &want));
    if (link_parse(c->intra_link, &intra) != RS_OK) {
        const char *why = strstr(rs_errmsg(), "': ");
        return rs_error(RS_ERR_INPUT, "--intra-link '%s': %s", c->intra_link, why ? why + 3 : rs_errmsg());
    }
    if (!c->nodes) {
        if (intra.bytes_per_s > 0)
            return rs_error(RS_ERR_INPUT, "--intra-link %s without --nodes: a fabric joins the ranks of one node; say how many "
                                          "nodes the ranks are (--nodes M)", c->intra_link);
        return RS_OK;
    }
    if (c->nranks > 1 && (c->nodes > c->nranks || c->nranks % c->nodes))
        return rs_error(RS_ERR_INPUT, "--nodes %d: does not divide -n %d (every node holds as many ranks)", c->nodes, c->nranks);
    if (!strcmp(c->ps_mode, "dataparallel"))
        return rs_error(RS_ERR_INPUT, "--nodes %d with --ps-mode dataparallel: DataParallel is one process driving the GPUs "
                                      "of one machine; it cannot span nodes (DistributedDataParallel can: --ps-mode push, or "
                                      "--sync ring)", c->nodes);
    if (want != ZEP_AUTO) /* the back ends tell a node's peers from the transport they reach them by */
        return rs_error(RS_ERR_INPUT, "--nodes %d with --transport %s: ranks of two nodes are two machines apart and talk "
                                      "over TCP, and inside a node each back end takes its fastest (leave --transport auto)",
                        c->nodes, c->transport);
    return RS_OK;
}

int config_validate(const Config *c) {
    if (strcmp(c->device, "auto") && strcmp(c->device, "cpu") && strcmp(c->device, "cuda") && strcmp(c->device, "cpu-async"))
        return rs_error(RS_ERR_INPUT, "--device '%s': expected auto, cpu, cuda or cpu-async", c->device);
    if (c->batch <= 0) return rs_error(RS_ERR_INPUT, "--batch %d: must be at least 1", c->batch);
    if (c->global_batch < 0) return rs_error(RS_ERR_INPUT, "--global-batch %d: must be at least 1 (or 0: off)", c->global_batch);
    if (c->accum_steps < 1)
        return rs_error(RS_ERR_INPUT, "--accum-steps %d: must be at least 1 (1: synchronise every micro-batch)", c->accum_steps);
    if (c->accum_steps > CONFIG_MAX_ACCUM) /* one step is K micro-batches: --time-budget is checked between steps */
        return rs_error(RS_ERR_INPUT, "--accum-steps %d: at most %d micro-batches a step (a step is never cut short: "
                                      "--time-budget and the ranks' stop are checked between steps)", c->accum_steps,
                        CONFIG_MAX_ACCUM);
    if (c->global_batch > 0 && c->global_batch % c->accum_steps)
        return rs_error(RS_ERR_INPUT, "--accum-steps %d with --global-batch %d: the global batch must split into %d equal "
                                      "micro-batches", c->accum_steps, c->global_batch, c->accum_steps);
    if (c->steps < 0) return rs_error(RS_ERR_INPUT, "--steps %d: must be at least 1", c->steps);
    if (c->epochs < 0) return rs_error(RS_ERR_INPUT, "--epochs %d: must be at least 1", c->epochs);
    if (!(c->lr >= 0)) return rs_error(RS_ERR_INPUT, "--lr %g: must be a finite number >= 0", c->lr);
    if (!(c->momentum >= 0 && c->momentum < 1)) return rs_error(RS_ERR_INPUT, "--momentum %g: must be in [0, 1)", c->momentum);
    if (!(c->weight_decay >= 0)) return rs_error(RS_ERR_INPUT, "--weight-decay %g: must be >= 0", c->weight_decay);
    if (c->eval_every < 0) return rs_error(RS_ERR_INPUT, "--eval-every %d: must be >= 0", c->eval_every);
    if (c->warmup < 0) return rs_error(RS_ERR_INPUT, "--warmup %d: must be >= 0", c->warmup);
    if (c->train_samples < 1) return rs_error(RS_ERR_INPUT, "--train-samples %d: must be at least 1", c->train_samples);
    if (c->eval_samples < 1) return rs_error(RS_ERR_INPUT, "--eval-samples %d: must be at least 1", c->eval_samples);
    if (c->nranks < 1) return rs_error(RS_ERR_INPUT, "-n/--ranks %d: must be at least 1", c->nranks);
    if (c->nranks > 256) return rs_error(RS_ERR_INPUT, "-n/--ranks %d: at most 256 local ranks", c->nranks);
    if (!(c->bucket_mb > 0)) return rs_error(RS_ERR_INPUT, "--bucket-mb %g: must be > 0", c->bucket_mb);
    if (!(c->timeout > 0)) return rs_error(RS_ERR_INPUT, "--timeout %g: must be > 0 seconds", c->timeout);
    if (c->timeout > 1e6) /* the sockets' waits take int milliseconds: 24.8 days at most */
        return rs_error(RS_ERR_INPUT, "--timeout %g: at most 1e6 seconds (11.6 days; a socket's wait is an int of "
                                      "milliseconds)", c->timeout);
    RS_TRY(config_partition_check(c, config_param_count(c)));
    if (strcmp(c->ps_placement, "colocated") && strcmp(c->ps_placement, "dedicated") && strcmp(c->ps_placement, "sharded"))
        return rs_error(RS_ERR_INPUT, "--ps-placement '%s': expected colocated, dedicated or sharded", c->ps_placement);
    if (strcmp(c->ps_mode, "push") && strcmp(c->ps_mode, "dataparallel"))
        return rs_error(RS_ERR_INPUT, "--ps-mode '%s': expected push or dataparallel", c->ps_mode);
    if (c->threads < 0) return rs_error(RS_ERR_INPUT, "--threads %d: must be >= 0", c->threads);
    if (!c->report[0]) return rs_error(RS_ERR_INPUT, "--report: empty path");
    ZepWant want;
    if (strcmp(c->nccl_algo, "ring") && strcmp(c->nccl_algo, "tree"))
        return rs_error(RS_ERR_INPUT, "--nccl-algo '%s': expected ring or tree", c->nccl_algo);
    RS_TRY(zep_parse(c->transport, &want));
    RS_TRY(config_layer_check(c));
    LinkSpec link;
    RS_TRY(link_parse(c->link, &link));
    RS_TRY(config_nodes_check(c));
    if (!(c->beta1 >= 0 && c->beta1 < 1)) return rs_error(RS_ERR_INPUT, "--beta1 %g: must be in [0, 1)", c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1)) return rs_error(RS_ERR_INPUT, "--beta2 %g: must be in [0, 1)", c->beta2);
    if (!(c->eps > 0)) return rs_error(RS_ERR_INPUT, "--eps %g: must be > 0", c->eps);
    RS_TRY(model_check(c)); /* --model, --optimizer and the model's own options */
    CodecType wire;
    if (codec_parse(c->wire, &wire) != 0)
        return rs_error(RS_ERR_INPUT, "--wire '%s': expected fp32, bf16, fp16, fp8e4m3 or fp8e5m2", c->wire);
    int exp2;
    if (!(c->loss_scale > 0) || !isfinite(c->loss_scale) || frexp(c->loss_scale, &exp2) != 0.5 || exp2 < -60 || exp2 > 61)
        return rs_error(RS_ERR_INPUT, "--loss-scale %g: must be a power of two between 2^-60 and 2^60 (scaling and "
                                      "unscaling are then exact)", c->loss_scale);
    if (c->loss_scale != 1 && codec_is_fp8(wire))
        return rs_error(RS_ERR_INPUT, "--loss-scale %g with --wire %s: an FP8 message carries its own scale, chosen "
                                      "from its largest magnitude, so a static loss scale has no meaning (leave "
                                      "--loss-scale out)", c->loss_scale, c->wire);
    if (c->loss_scale != 1 && wire == CODEC_F32)
        return rs_error(RS_ERR_INPUT, "--loss-scale %g with --wire fp32: the scale only protects 16-bit gradients "
                                      "(--wire fp16 or bf16)", c->loss_scale);
    if (c->checkpoint_every < 1)
        return rs_error(RS_ERR_INPUT, "--checkpoint-every %d: must be at least 1 step", c->checkpoint_every);
    if ((c->checkpoint[0] || c->resume[0]) && !config_lockstep(c))
        return rs_error(RS_ERR_INPUT, "--%s with --ps-consistency %s: checkpoints need a step every worker and server "
                                      "has finished (a consistent cut); asynchronous workers never share one (use "
                                      "--ps-consistency sync)", c->checkpoint[0] ? "checkpoint" : "resume",
                        c->ps_consistency);
    if ((c->checkpoint[0] || c->resume[0]) && !strcmp(c->ps_mode, "dataparallel"))
        return rs_error(RS_ERR_INPUT, "--%s with --ps-mode dataparallel: DataParallel's driver has no checkpoint (its "
                                      "ranks but 0 hold no state of their own to restore it from); use --ps-mode push",
                        c->checkpoint[0] ? "checkpoint" : "resume");
    if (!(c->time_budget >= 0)) return rs_error(RS_ERR_INPUT, "--time-budget %g: must be >= 0 seconds", c->time_budget);
    for (int i = 0; i < c->nstragglers; i++) {
        if (c->nranks > 1 && c->straggler_rank[i] >= c->nranks)
            return rs_error(RS_ERR_INPUT, "--straggler %d:%g: rank %d does not exist with -n %d", c->straggler_rank[i],
                            c->straggler_ms[i], c->straggler_rank[i], c->nranks);
        if (config_lockstep(c) && config_straggler_ms(c, c->straggler_rank[i]) >= c->timeout * 1e3) /* in lockstep the others
                                                                                                   * would time out waiting */
            return rs_error(RS_ERR_INPUT, "--straggler %d:%g: rank %d sleeps %g ms a step, not less than --timeout %g s: "
                                          "every other rank's wait for it would end the job", c->straggler_rank[i],
                            c->straggler_ms[i], c->straggler_rank[i], config_straggler_ms(c, c->straggler_rank[i]),
                            c->timeout);
    }
    if (link.bytes_per_s > 0) { /* the emulated link's waits sleep: one bucket must cross within the timeout */
        double eb = (double)codec_elem_bytes(wire), n = (double)config_param_count(c) * eb;
        double bucket = fmin(c->bucket_mb * 1048576.0 * eb / 4, n), secs = bucket / link.bytes_per_s;
        if (secs >= c->timeout)
            return rs_error(RS_ERR_INPUT, "--link %s: one bucket of %.3g MB takes %.3g s on it, not less than --timeout "
                                          "%g s: the job would time out on the emulated wire (a faster link, smaller "
                                          "--bucket-mb, or a longer --timeout)", c->link, bucket / 1e6, secs, c->timeout);
    }
    return RS_OK;
}

size_t config_param_count(const Config *c) { return model_param_count(c); }

size_t config_partition_keys(const Config *c) {
    if (!strcmp(c->ps_partition, "off")) return 0;
    double bytes;
    if (!strcmp(c->ps_partition, "auto")) {
        LinkSpec link;
        if (link_parse(c->link, &link) || !(link.bytes_per_s > 0)) return 0;
        bytes = link.bytes_per_s * 0.002;
        bytes = bytes < 65536 ? 65536 : bytes > 4194304 ? 4194304 : bytes;
    } else {
        bytes = strtod(c->ps_partition, NULL) * 1024;
    }
    CodecType wt = CODEC_F32; /* the bytes are the wire's: 2 a key on a 16-bit wire, 1 on FP8 */
    codec_parse(c->wire, &wt);
    double k = (bytes - (double)codec_head_bytes(wt)) / (double)codec_elem_bytes(wt); /* FP8: less its scale */
    return k < 1 ? 1 : (size_t)k;
}
