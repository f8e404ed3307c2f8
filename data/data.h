/* data.h - datasets (MNIST IDX files, raw or .gz, synthetic class clusters, text and synthetic token sequences) and the sampler */
#ifndef RS_DATA_H
#define RS_DATA_H

#include <stddef.h>
#include <stdint.h>

/* ---- Types ---- */

/* A dataset in host memory: n samples of dim 32-bit values (row-major) with ylen labels each.
 * Images: dim floats in [0,1] and one label. Token sequences: dim int32 token ids stored
 * bit for bit in the float array (read them through dataset_tokens), and ylen = dim labels,
 * the next token at every position. Copies move the values without looking at them. */
typedef struct {
    int n;
    int dim;
    int classes;      /* number of classes (or the vocabulary) the labels range over */
    float *x;         /* n * dim, owned */
    int *y;           /* n * ylen, owned */
    int ylen;         /* labels per sample (0 means 1) */
} Dataset;

/* A train/eval pair and a sentence saying where it came from. */
typedef struct {
    Dataset train;
    Dataset eval;
    char source[256];
} DataPair;

/* DistributedSampler semantics over a dataset of n samples for world ranks. */
typedef struct {
    int n;            /* dataset size */
    int world;
    int rank;
    int shuffle;      /* 1: permute by seed and epoch (as DistributedSampler) */
    int drop_last;    /* 1: drop the tail; 0: pad by wrapping to a multiple of world */
    uint64_t seed;
    int per_rank;     /* samples per rank per epoch */
    int epoch;        /* epoch of perm */
    int *perm;        /* this epoch's global order, padded: world * per_rank entries, owned */
} Sampler;

/* ---- Prototypes: datasets ---- */

/* Reads one IDX file (raw, or gzip when the name ends in .gz). For images (magic 0x00000803)
 * *out_x gets n*rows*cols floats scaled to [0,1], *dim = rows*cols; for labels (0x00000801)
 * *out_y gets n ints, *dim = 1. Exactly one of out_x/out_y must be non-NULL and match the
 * file's kind. Returns 0, or RS_ERR_INPUT with rs_errmsg() naming the file and the problem
 * (missing, wrong magic, truncated, corrupt gzip). The caller frees the array. */
int idx_read(const char *path, float **out_x, int **out_y, int *n, int *dim);

/* idx_read for an images file, keeping the image shape (rows x cols) for messages. Same
 * returns; the caller frees *out_x. */
int idx_read_images(const char *path, float **out_x, int *n, int *rows, int *cols);

/* Loads MNIST from dir: train-images/labels-idx?-ubyte[.gz] to train and t10k-* to evaluate;
 * with only the t10k pair, the first 8000 train and the rest evaluate (8000 or fewer: 80/20),
 * as out->source says.
 * Checks image/label counts agree, labels < classes, dim == want_dim. 0 or RS_ERR_INPUT. */
int data_load_mnist(const char *dir, int want_dim, int classes, DataPair *out);

/* Deterministic learnable synthetic data: `classes` cluster centres in [0,1]^dim drawn from
 * seed, each sample a centre plus noise, clipped to [0,1]. n_train + n_eval samples.
 * 0, or RS_ERR_INPUT on non-positive sizes. */
int data_make_synthetic(int dim, int classes, int n_train, int n_eval, uint64_t seed,
                        DataPair *out);

/* Text as tokens (--data text:FILE): every byte a token (vocabulary 256); the last 10% of the
 * file (at least one sequence) evaluates, the rest trains; samples are the file's consecutive
 * windows of seq_len + 1 bytes, seq_len apart (inputs the first seq_len, labels the last).
 * 0, or RS_ERR_INPUT naming the file or --seq-len: unreadable or empty file, seq_len longer
 * than the text, a text shorter than two sequences (one to train, one to evaluate). */
int data_load_text(const char *path, int seq_len, DataPair *out);

/* Deterministic learnable token sequences over vocab tokens (--data synthetic with --model gpt):
 * each token has four successors drawn from seed, taken with probabilities 1/2, 1/4, 1/8, 1/8,
 * so a model can learn the table (a loss floor of 1.75 bits). n_train + n_eval sequences of
 * seq_len inputs and labels. 0, or RS_ERR_INPUT on non-positive sizes. */
int data_make_tokens(int vocab, int seq_len, int n_train, int n_eval, uint64_t seed, DataPair *out);

/* Free the arrays and zero the struct; safe on a zeroed or already freed one. */
void dataset_free(Dataset *d);
void datapair_free(DataPair *p);

/* ---- Prototypes: sampler ---- */

/* Prepares a sampler (no epoch chosen yet). 0, or RS_ERR_INPUT when n < 1, world < 1,
 * rank outside [0, world), or drop_last leaves no sample per rank. */
int sampler_init(Sampler *s, int n, int world, int rank, int shuffle, int drop_last, uint64_t seed);

/* Computes epoch's order (idempotent for the same epoch). */
void sampler_set_epoch(Sampler *s, int epoch);

/* The i-th sample index of this rank in the current epoch (0 <= i < per_rank):
 * perm[rank + i * world], the DistributedSampler's interleaving. */
static inline int sampler_index(const Sampler *s, int i) {
    return s->perm[s->rank + (size_t)i * s->world];
}

/* The i-th index of the global (undistributed) order of the epoch: for --global-batch. */
static inline int sampler_global_index(const Sampler *s, int i) {
    return s->perm[i];
}

void sampler_free(Sampler *s);

/* Labels per sample of d (1 for images). */
static inline int dataset_ylen(const Dataset *d) { return d->ylen > 0 ? d->ylen : 1; }

/* Sample i's values as int32 token ids (token datasets). */
static inline const int *dataset_tokens(const Dataset *d, int i) {
    return (const int *)(const void *)(d->x + (size_t)i * (size_t)d->dim);
}

/* DataParallel's scatter: the slice [*lo, *lo + *len) of a global batch B that rank gets out of
 * world, in chunks of ceil(B/world) (later ranks may get fewer or none). */
static inline void scatter_chunk(int B, int world, int rank, int *lo, int *len) {
    int chunk = (B + world - 1) / world;
    int a = rank * chunk, b = a + chunk;
    if (a > B) a = B;
    if (b > B) b = B;
    *lo = a;
    *len = b - a;
}

#endif
