/* model.h - the MLP: parameters, gradients and momentum in one flat buffer each, with per-layer views */
#ifndef RS_MODEL_H
#define RS_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "device.h"

/* ---- Types ---- */

/* Called by model_backward as soon as layer l's gradients are complete (last layer first). */
typedef int (*LayerDoneFn)(void *arg, int layer);

typedef struct {
    Device *dev;
    int nlayers;                        /* weight layers = sizes - 1 */
    int sizes[CONFIG_MAX_LAYERS];
    size_t nparams;
    size_t off[CONFIG_MAX_LAYERS];      /* layer l's W [in x out] starts at off[l]; its b follows */
    float *params, *grads, *mom;        /* device, nparams each (params, grads, optimizer tags) */
    float *act[CONFIG_MAX_LAYERS + 1];  /* act[0] input [max_batch x in]; act[l+1] layer l's output */
    float *dbuf[2];                     /* backward scratch [max_batch x max width] */
    int *labels;                        /* device [max_batch] */
    float *stats;                       /* device [2]: summed loss, correct count */
    int max_batch;
    size_t act_bytes, dbuf_bytes;
} Model;

/* ---- Prototypes ---- */

/* Allocates the model on dev for batches of up to max_batch and initialises the parameters from
 * seed as PyTorch's nn.Linear does (uniform in +-1/sqrt(fan_in)), momentum zero. 0, or
 * RS_ERR_RUNTIME when the device is out of memory (the model is then freed). */
int model_init(Model *m, Device *dev, const int *sizes, int nsizes, int max_batch, uint64_t seed);
void model_free(Model *m);

/* Index of the layer whose parameters hold flat element i. */
int model_layer_of(const Model *m, size_t i);

/* Forward on B rows already in m->act[0] (device); logits end in m->act[nlayers]. */
int model_forward(Model *m, int B);

/* Loss of the B rows of logits against m->labels: writes the output gradient (of the summed loss)
 * into m->dbuf[0] and adds the summed loss and correct count to m->stats. */
void model_loss(Model *m, int B);

/* Backward from the output gradient in m->dbuf[0]; gradients of the summed loss go into m->grads,
 * overwritten. done(arg, l) is called when layer l is complete (l = nlayers-1 down to 0); a
 * non-zero return stops backward and is returned. B == 0 zeroes the gradients and reports every
 * layer done. */
int model_backward(Model *m, int B, LayerDoneFn done, void *arg);

/* Local optimizer step over elements [lo, hi): grads scaled by grad_scale (1 / global samples). */
void model_sgd(Model *m, size_t lo, size_t hi, const Config *c, float grad_scale);

/* Evaluates on n host samples (x, y) in batches; returns accuracy and mean loss. */
int model_evaluate(Model *m, const float *x, const int *y, int n, double *acc, double *loss);

#endif
