/* fuzz_predict.c - libFuzzer harness: `ringside predict` from a fuzzed fit file and a fuzzed train report (--links, --model: experiments/forecast.c) */
#include "fuzz.h"
#include "../../experiments/forecast.h"
#include "../../base/err.h"
#include "../../base/log.h"

/* The input is a fit file and a train report, separated by the first NUL byte (without one, the
 * fit alone with --grad-bytes and --compute-ms). predict reads them as `ringside predict --links
 * FIT --model REPORT --ranks 2..64 --report OUT --csv CSV` does; whatever it decides, only the
 * documented statuses may come back (0, or 2 for a file it refuses; 1 for a write that failed). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t plen[2];
    int n = fz_split(data, size, 0, part, plen, 2);
    char fit[512], model[512], out[512], csv[512];
    fz_write(fz_path(fit, sizeof fit, "fit.json"), part[0], plen[0]);
    fz_path(model, sizeof model, "report.json");
    fz_path(out, sizeof out, "predict.json");
    fz_path(csv, sizeof csv, "predict.csv");
    if (n > 1) fz_write(model, part[1], plen[1]);
    log_set_quiet(1);
    char *with_model[] = {"--links", fit, "--model", model, "--ranks", "2..64", "--report", out, "--csv", csv, "-q"};
    char *without[] = {"--links", fit, "--grad-bytes", "4000000", "--compute-ms", "10", "--ranks", "2..64", "--report", out,
                       "-q"};
    int rc = n > 1 ? forecast_main((int)(sizeof with_model / sizeof *with_model), with_model)
                   : forecast_main((int)(sizeof without / sizeof *without), without);
    if (rc != RS_OK && rc != RS_ERR_INPUT && rc != RS_ERR_RUNTIME) abort();
    return 0;
}
