/* fuzz_claims.c - libFuzzer harness: `ringside claims` on a folder of fuzzed reports (claims_load's reader, the six verdicts, claims.json) */
#include "fuzz.h"
#include "../../experiments/claims.h"

static const char *const fz_names[] = {"a-r0.json", "summary.json", "a-r1.json", "b-r0.json"};
#define FZ_FILES (int)(sizeof fz_names / sizeof fz_names[0])

/* The input is up to four files of a result folder, separated by NUL bytes: a report, the
 * matrix summary, a repeat of the first configuration, another report. claims_main reads them
 * as `ringside claims DIR` does; whatever it decides, it must not crash or leak. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[FZ_FILES];
    size_t plen[FZ_FILES];
    int n = fz_split(data, size, 0, part, plen, FZ_FILES);
    char dir[512], path[600];
    fz_path(dir, sizeof dir, "results");
    mkdir(dir, 0700);
    for (int i = 0; i < FZ_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, fz_names[i]);
        if (i < n) fz_write(path, part[i], plen[i]);
        else unlink(path);
    }
    snprintf(path, sizeof path, "%s/claims.json", dir);
    unlink(path);
    char *argv[1] = {dir};
    int rc = claims_main(1, argv);
    if (rc != 0 && rc != 2 && rc != 4 && rc != 1) abort(); /* the documented statuses */
    return 0;
}
