/* matrix_spec.h - a matrix file: reading, validation against train's options, cells and filters */
#ifndef RS_MATRIX_SPEC_H
#define RS_MATRIX_SPEC_H

#include "../base/config.h"

#include <stddef.h>

struct cJSON;

#define MATRIX_MAX_AXES 16
#define MATRIX_MAX_LINKS 6 /* the default and one per transport */

/* ---- Types ---- */

/* The alpha-beta constants of one transport's link (the predictions' t = alpha*a + beta*b). */
typedef struct {
    char transport[8];      /* "tcp", "ipc", "shm", "inproc", "nccl"; "" for every transport not named */
    double alpha_s;         /* seconds per message */
    double beta_s_per_byte; /* seconds per byte */
    char source[1100];      /* "matrix file", or the bench report's path */
    int fitted;             /* 1: fitted on this machine before the cells ("links": "auto") */
    double r2, worst_rel;   /* that fit's R^2 and worst relative residual */
    int emulated;           /* 1: made from a run's --link itself, where the file gives no link for its transport */
} MatrixLink;

/* The axis of named option sets: "axes": {"variants": {"ring": {"sync": "ring"}, ...}} in the file,
 * "variant" (the set's name) in cell ids, rows, the CSV, exclude and --only. */
#define MATRIX_VARIANTS_KEY "variants"
#define MATRIX_VARIANT_AXIS "variant"

/* One point of the cartesian product: the train options it runs with. */
typedef struct {
    char id[512];                                   /* "sync=ps,ranks=4" (axis order) or "base" */
    const char *variant;                            /* its variant's name, NULL without a variants axis */
    char **args;                                    /* train's options (no --report, --quiet) */
    int nargs;
    const struct cJSON *axis_val[MATRIX_MAX_AXES];  /* borrowed from the spec (a variant: its name) */
    int axis_idx[MATRIX_MAX_AXES];                  /* index of each value in its axis */
    Config cfg;                                     /* the options, parsed and validated */
    int selected;                                   /* 1 unless --only left it out */
} MatrixCell;

typedef struct {
    char path[1024];
    struct cJSON *root;                             /* the matrix file (owned) */
    struct cJSON *defaults;                         /* train's defaults as JSON (owned) */
    char name[128];
    int naxes;
    const char *axis_name[MATRIX_MAX_AXES];         /* borrowed from root; "variant" for the variants axis */
    int variant_axis;                               /* index of the variants axis, -1 when none */
    struct cJSON *variant_names;                    /* its names as strings, in file order (owned) */
    int repeats;
    double timeout_s;                               /* per run */
    MatrixLink links[MATRIX_MAX_LINKS];             /* what each transport costs; none: no predictions */
    int nlinks;
    int links_auto;                                 /* "links": "auto": bench and fit before the cells */
    MatrixCell *cells;                              /* the product minus exclusions */
    int ncells;
} MatrixSpec;

/* ---- Prototypes ---- */

/* Reads and validates the matrix file at path (keys, types, every option of every cell through
 * train's own parser and checks, options that do not apply to a cell's back end, the bench
 * report) and builds its cells, all selected. 0, or
 * RS_ERR_INPUT with rs_errmsg() naming the file and key ("FILE:LINE:COL: malformed JSON" for a
 * parse error); *m is then empty. */
int matrix_spec_load(MatrixSpec *m, const char *path);

/* Keeps only the cells whose values match every k=v of only ("sync=ps,ranks=4"; a layers value
 * may be written 784,256,10 or 784-256-10). 0, or RS_ERR_INPUT for an unknown option, a bad item
 * or a filter that matches no cell. */
int matrix_spec_select(MatrixSpec *m, const char *only);

/* The readable text of an option value as cell ids use it: numbers as %g, layers and lists
 * joined by '-', strings with characters other than [A-Za-z0-9._+-] replaced by '_'. */
void matrix_spec_value_text(const struct cJSON *v, char *out, size_t len);

/* The link a run over transport (a report's summary.transport) is predicted with: the one named
 * for it in the file's links, else the default (alpha_s/beta_s_per_byte or bench), else NULL. */
const MatrixLink *matrix_spec_link(const MatrixSpec *m, const char *transport);

/* Releases everything load allocated; safe on an empty spec. */
void matrix_spec_free(MatrixSpec *m);

#endif
