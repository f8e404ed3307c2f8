/* model.h - the models the engine trains (mlp, lenet, gpt): one table of functions each, parameters, gradients and optimizer state in one flat buffer each, with per-layer views */
#ifndef RS_MODEL_H
#define RS_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "../base/config.h"
#include "../data/data.h"
#include "../kernels/device.h"
#include "../base/rng.h"

/* ---- Types ---- */

/* The most layers (parameter groups) a model may have. */
#define MODEL_MAX_LAYERS 64

/* Called by model_backward as soon as layer l's gradients are complete (last layer first). */
typedef int (*LayerDoneFn)(void *arg, int layer);

/* Sharded parameters' hook (zero's stage 3, FSDP's FULL_SHARD): called before a forward or
 * backward pass reads layer l's parameters (every layer, in the pass's order, even one whose
 * gradient needs none of them), and with l = -1 once a pass is done. 0 or RS_ERR_*. */
typedef int (*ParamNeedFn)(void *arg, int layer);

typedef struct Model Model;

/* What one model is: a struct of functions (one file each: model/model_<name>.c). Every
 * function returns 0 or RS_ERR_* with rs_errmsg() set, unless said otherwise. */
typedef struct ModelOps {
    const char *name;  /* "mlp", "lenet", "gpt" */
    /* Whether the options fit the model (RS_ERR_INPUT naming the option), before any work. */
    int (*check)(const Config *c);
    /* The parameter count for the options. */
    size_t (*count)(const Config *c);
    /* Loads or makes the model's data for the options: 0, or RS_ERR_INPUT naming the option or
     * file. out is zeroed on failure. */
    int (*load_data)(const Config *c, DataPair *out);
    /* Sets the shapes (nlayers, off[], nparams, in_width, out_per_sample, out_width), calls
     * model_alloc_common, then takes its own buffers with model_scratch (act[0], out, dbuf[0]
     * among them) and keeps its state in impl. */
    int (*setup)(Model *m, const Config *c);
    /* Writes the initial parameters, drawn from r, into the host array h (nparams floats). */
    void (*init)(const Model *m, float *h, Rng *r);
    /* Forward on B samples in act[0] (labels not read); the logits end in m->out. */
    int (*forward)(Model *m, int B);
    /* Backward from the output gradient in dbuf[0] (of the summed loss over out rows): every
     * gradient is overwritten; done(arg, l) as layer l completes, nlayers - 1 down to 0. */
    int (*backward)(Model *m, int B, LayerDoneFn done, void *arg);
    /* Frees impl (its buffers are model_scratch's, freed by model_free); may be NULL. */
    void (*release)(Model *m);
} ModelOps;

struct Model {
    const ModelOps *ops;
    Device *dev;
    int nlayers;                        /* layers = parameter groups, in flat-buffer order */
    size_t nparams;
    size_t off[MODEL_MAX_LAYERS + 1];   /* layer l's parameters start at off[l]; off[nlayers] = nparams */
    float *params, *grads;              /* device, nparams each (params, grads tags) */
    float *mom, *mom2;                  /* optimizer state (optimizer tag), NULL where a server holds it:
                                         * SGD's momentum, or AdamW's first (mom) and second (mom2) moments */
    int adamw;                          /* the optimizer: 0 SGD with momentum, 1 AdamW */
    int no_optimizer;                   /* 1: no optimizer state here (a server holds it) */
    int grads_paged;                    /* 1: grads is paged host memory (base/mem.h's mem_pages_alloc) that the
                                         * back end gives back page by page and counts as resident (ZeRO-2 and -3):
                                         * not counted here */
    int params_paged;                   /* 1: params too (ZeRO-3): only the back end's shard stays resident */
    ParamNeedFn param_need;             /* NULL, or the hook the passes call (model_need) */
    void *param_arg;
    uint64_t keep_gathered;             /* layers a pass reads at both ends (gpt's tied embedding, bit 0): a sharding
                                         * back end keeps them gathered for the whole step, as FSDP keeps its root's */
    int max_batch;                      /* samples */
    int in_width;                       /* 32-bit values per sample in act[0] (floats, or int32 tokens) */
    int out_per_sample;                 /* output rows (and labels) per sample: 1, or the sequence length */
    int out_width;                      /* classes, or the vocabulary */
    float *act[CONFIG_MAX_LAYERS + 1];  /* act[0] the input [max_batch x in_width]; the MLP: act[l+1] layer l's output */
    float *out;                         /* the logits [max_batch * out_per_sample x out_width] */
    float *dbuf[2];                     /* dbuf[0] the output gradient (like out); the MLP's backward scratch */
    int *labels;                        /* device [max_batch * out_per_sample] */
    float *stats;                       /* device [2]: summed loss, correct count over output rows */
    size_t dbuf_bytes;
    int sizes[CONFIG_MAX_LAYERS];       /* the MLP's widths, input first */
    void *impl;                         /* the model's own state (lenet, gpt) */
    void **scratch;                     /* model_scratch's buffers and their sizes */
    size_t *scratch_bytes;
    int nscratch, cap_scratch;
    int sizing;                         /* 1: model_estimate's dry run: buffers are counted, not allocated */
    size_t sized_bytes;                 /* what the dry run would have allocated */
};

/* ---- Prototypes: the table ---- */

/* The model called name, or NULL with rs_errmsg() naming --model and the choices. */
const ModelOps *model_find(const char *name);

/* Names of every model, "mlp | lenet | gpt", for help texts. */
const char *model_names(void);

/* --model's checks (RS_ERR_INPUT naming the option), its parameter count (0 for an unknown
 * model), and its data (model_load_data: see ModelOps.load_data). */
int model_check(const Config *c);
size_t model_param_count(const Config *c);
int model_load_data(const Config *c, DataPair *out);

/* ---- Prototypes: one model ---- */

/* model_create's flags. */
enum {
    MODEL_OPTIMIZER = 1,   /* the optimizer's state here (not where a server or a shard runs the optimizer) */
    MODEL_GRADS_PAGED = 2, /* the gradients in paged host memory (Model.grads_paged; a host-visible device only) */
    MODEL_PARAMS_PAGED = 4, /* the parameters too (Model.params_paged) */
};

/* Creates c->model on dev for batches of up to max_batch samples, parameters from c->seed
 * (rank 0's are broadcast later), the optimizer's state (c->optimizer) only with
 * MODEL_OPTIMIZER in flags, the gradients paged with MODEL_GRADS_PAGED. 0, or RS_ERR_INPUT (bad
 * options, paged gradients on a device whose memory the host cannot see), RS_ERR_RUNTIME (out
 * of memory); the model is then freed. */
int model_create(Model *m, Device *dev, const Config *c, int max_batch, int flags);

/* The MLP of sizes[0..nsizes) with SGD's momentum, parameters from seed as PyTorch's nn.Linear
 * (uniform in +-1/sqrt(fan_in)). 0, or RS_ERR_RUNTIME (the model is then freed). */
int model_init(Model *m, Device *dev, const int *sizes, int nsizes, int max_batch, uint64_t seed);

/* The bytes model_create(c, max_batch, with_optimizer) would allocate on its device (parameters,
 * gradients, optimizer state, activations and scratch) plus its transient host copy of the
 * parameters, counted by running the model's setup without allocating anything; also its
 * parameter count and the 32-bit values of one input sample. 0 with the three set, or
 * RS_ERR_INPUT for options model_check refuses. */
int model_estimate(const Config *c, int max_batch, int with_optimizer, size_t *bytes, size_t *nparams,
                   int *in_width);

/* Frees everything; safe on a zeroed or freed model. */
void model_free(Model *m);

/* Index of the layer whose parameters hold flat element i. */
int model_layer_of(const Model *m, size_t i);

/* Shapes the engine and drivers need, whatever the model: input values per sample, output rows
 * for B samples (B for mlp and lenet, B x seq-len for gpt), output width (classes or vocabulary),
 * and the logits' device buffer. */
static inline int model_in_width(const Model *m) { return m->in_width; }
static inline int model_out_rows(const Model *m, int B) { return B * m->out_per_sample; }
static inline int model_out_width(const Model *m) { return m->out_width; }
static inline float *model_logits(const Model *m) { return m->out; }

/* The parameter hook before a pass reads layer l (l = -1: the pass is done); 0 without one. */
static inline int model_need(Model *m, int l) { return m->param_need ? m->param_need(m->param_arg, l) : 0; }

/* Forward on B samples already in act[0]; logits in model_logits(m). */
int model_forward(Model *m, int B);

/* Softmax cross-entropy of the B samples' logits against labels: writes the output gradient into
 * dbuf[0] and adds the summed loss and correct count over model_out_rows(m, B) rows to stats. */
void model_loss(Model *m, int B);

/* Backward from dbuf[0]; gradients of the summed loss (per sample: a gpt sample's loss is the
 * mean over its positions) overwrite grads. done(arg, l) as layer l completes (nlayers - 1 down
 * to 0); a non-zero return stops backward and is returned. B == 0 zeroes the gradients and
 * reports every layer done. */
int model_backward(Model *m, int B, LayerDoneFn done, void *arg);

/* The optimizer step over elements [lo, hi) (grads scaled by grad_scale = 1 / global samples),
 * step t >= 1 (AdamW's bias correction). A model without optimizer state does nothing. */
void model_optimize(Model *m, size_t lo, size_t hi, const Config *c, float grad_scale, int t);

/* Zeroes the optimizer state (after the start-up broadcast). */
void model_optimizer_reset(Model *m);

/* Evaluates on n host samples (x, y as the model's Dataset lays them out) in batches; returns
 * the accuracy and mean loss per output row. */
int model_evaluate(Model *m, const float *x, const int *y, int n, double *acc, double *loss);

/* ---- Prototypes: for the model files ---- */

/* Allocates params, grads, the optimizer state (unless m->no_optimizer), labels and stats from
 * the shapes setup has set. 0 or RS_ERR_RUNTIME. */
int model_alloc_common(Model *m);

/* A device buffer of bytes under the activations tag, remembered for release; NULL on failure
 * (rs_errmsg() set). Freed by model_free. */
void *model_scratch(Model *m, size_t bytes);

/* Fills h[0..n) uniformly in [-bound, bound] from r, or from a normal N(0, sd^2). */
void model_fill_uniform(float *h, size_t n, float bound, Rng *r);
void model_fill_normal(float *h, size_t n, float sd, Rng *r);

#endif
