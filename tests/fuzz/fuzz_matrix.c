/* fuzz_matrix.c - libFuzzer harness: the matrix file parser (matrix_spec_load: JSON, keys, every cell through train's options) and --only */
#include "fuzz.h"
#include "../../base/err.h"
#include "../../experiments/matrix_spec.h"

/* The input is the matrix file, then (after a NUL byte, when there is one) an --only filter. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t plen[2];
    int n = fz_split(data, size, 0, part, plen, 2);
    char path[512];
    fz_path(path, sizeof path, "matrix.json");
    fz_write(path, part[0], plen[0]);
    MatrixSpec m;
    rs_error(RS_OK, "%s", "");
    if (matrix_spec_load(&m, path) != RS_OK) {
        if (!rs_errmsg()[0] || m.root || m.cells) abort(); /* a reason, and nothing left allocated */
        return 0;
    }
    if (m.ncells < 1) abort();
    for (int c = 0; c < m.ncells; c++) {
        if (!m.cells[c].selected || !m.cells[c].id[0]) abort();
        for (int i = 0; i < m.cells[c].nargs; i++)
            if (!m.cells[c].args[i]) abort();
    }
    if (n == 2) {
        char *only = fz_strndup(part[1], plen[1]);
        if (matrix_spec_select(&m, only) == RS_OK && *only) {
            int kept = 0;
            for (int c = 0; c < m.ncells; c++) kept += m.cells[c].selected;
            if (kept < 1) abort();
        }
        free(only);
    }
    matrix_spec_free(&m);
    return 0;
}
