/* fuzz_idx.c - libFuzzer harness: the IDX reader (raw, gzip made from the input, the input as gzip) and the MNIST pair loader */
#include "fuzz.h"
#include "../../data/data.h"
#include "../../base/err.h"

#include <zlib.h>

/* Byte 0 chooses: bit 0 images/labels; bits 1-2 raw file, the rest gzip-compressed by the harness
 * (so the IDX parser sees arbitrary bytes behind a valid gzip layer), the rest as a .gz file
 * (zlib's own checks), or an MNIST folder (t10k images + labels, split at a 2-byte length). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512], lpath[512];
    if (size < 1) return 0;
    int images = data[0] & 1, how = (data[0] >> 1) & 3;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    float *x = NULL;
    int *y = NULL, count = 0, dim = 0, rows = 0, cols = 0;

    if (how == 0 || how == 2) {
        fz_path(path, sizeof path, how == 0 ? "in-idx3-ubyte" : "in-idx3-ubyte.gz");
        fz_write(path, p, n);
    } else if (how == 1) {
        fz_path(path, sizeof path, "in-idx3-ubyte.gz");
        gzFile gz = gzopen(path, "wb1");
        if (!gz || (n && gzwrite(gz, p, (unsigned)n) != (int)n) || gzclose(gz) != Z_OK) abort();
    } else { /* an MNIST folder holding only the t10k pair */
        if (n < 2) return 0;
        size_t ilen = (size_t)p[0] << 8 | p[1];
        p += 2, n -= 2;
        if (ilen > n) ilen = n;
        char dir[512];
        fz_path(dir, sizeof dir, "mnist");
        mkdir(dir, 0700);
        snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", dir);
        snprintf(lpath, sizeof lpath, "%s/t10k-labels-idx1-ubyte", dir);
        fz_write(path, p, ilen);
        fz_write(lpath, p + ilen, n - ilen);
        DataPair dp;
        memset(&dp, 0, sizeof dp);
        int want_dim = images ? 4 : 784;
        rs_error(RS_OK, "%s", "");
        if (data_load_mnist(dir, want_dim, 10, &dp) == RS_OK) {
            if (dp.train.n < 1 || dp.train.dim != want_dim) abort();
            for (int i = 0; i < dp.train.n; i++)
                if (dp.train.y[i] < 0 || dp.train.y[i] >= 10) abort();
        } else if (!rs_errmsg()[0]) {
            abort();
        }
        datapair_free(&dp);
        return 0;
    }

    int rc;
    rs_error(RS_OK, "%s", "");
    if (images && (data[0] & 8)) rc = idx_read_images(path, &x, &count, &rows, &cols);
    else rc = idx_read(path, images ? &x : NULL, images ? NULL : &y, &count, &dim);
    if (rc == RS_OK) { /* what the reader promises: n >= 1 values in [0,1], labels 0..255 */
        if (count < 1) abort();
        if (images) {
            size_t total = (size_t)count * (size_t)(dim ? dim : rows * cols);
            for (size_t i = 0; i < total; i++)
                if (!(x[i] >= 0.0f && x[i] <= 1.0f)) abort();
        } else {
            for (int i = 0; i < count; i++)
                if (y[i] < 0 || y[i] > 255) abort();
        }
    } else if (!rs_errmsg()[0]) {
        abort(); /* every failure says why */
    }
    free(x);
    free(y);
    return 0;
}
