/* fuzz_config.c - libFuzzer harness: the option parser (config_parse on argv split from the input), validation, canonical text, JSON */
#include "fuzz.h"
#include "../../base/config.h"
#include "../../base/err.h"
#include "../../engine/config_check.h"
#include "../../experiments/backends.h"

#include <cJSON.h>

#define FZ_MAX_ARGS 64

/* The input is argv: arguments separated by NUL bytes. A run that parses and validates must
 * give a canonical text that config_diff finds equal to itself and a JSON object. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[FZ_MAX_ARGS];
    size_t plen[FZ_MAX_ARGS];
    char *argv[FZ_MAX_ARGS];
    int argc = fz_split(data, size, 0, part, plen, FZ_MAX_ARGS);
    if (size == 0) argc = 0;
    for (int i = 0; i < argc; i++) argv[i] = fz_strndup(part[i], plen[i]);

    Config c;
    config_defaults(&c);
    int help = 0;
    rs_error(RS_OK, "%s", "");
    int rc = config_parse(&c, argc, argv, &help);
    if (rc != RS_OK && !rs_errmsg()[0]) abort();
    if (rc == RS_OK && !help && backend_validate(&c) == RS_OK) {
        char canon[8192], diff[700];
        size_t need = config_canonical(&c, canon, sizeof canon);
        if (need >= sizeof canon) abort();
        if (config_diff(canon, canon, diff, sizeof diff) != 0) abort();
        Config d;
        config_defaults(&d);
        char dcanon[8192];
        config_canonical(&d, dcanon, sizeof dcanon);
        config_diff(canon, dcanon, diff, sizeof diff);
        cJSON *j = config_json(&c);
        if (!j) abort();
        cJSON_Delete(j);
        (void)config_param_count(&c);
    }
    for (int i = 0; i < argc; i++) free(argv[i]);
    return 0;
}
