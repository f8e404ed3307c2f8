/* fuzz_gather.c - libFuzzer harness: rank 0's handling of the members' metrics (GATHER texts) into the report, in train_report.c */
#include "fuzz.h"

/* run_write_trace and run_report_json are static: include the report's room itself, so that the
 * code under test is what ringside runs (experiments/train_report.o is then not linked). */
#include "../../experiments/train_report.c"

#define FZ_MAX_MEMBERS 4

/* Byte 0: the run's steps (1-8) and warm-up (0-3); then each member's report entry as its GATHER
 * text, separated by NUL bytes. They are parsed as run_gather does, their timelines turned into
 * phases (report_phases), then merged into the report as rank 0 does. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *part[FZ_MAX_MEMBERS];
    size_t plen[FZ_MAX_MEMBERS];
    int n = fz_split(data + 1, size - 1, 0, part, plen, FZ_MAX_MEMBERS);
    Run *r = calloc(1, sizeof *r);
    if (!r) abort();
    config_defaults(&r->cfg);
    r->steps = 1 + (data[0] & 7);
    r->world = n;
    r->cfg.warmup = (data[0] >> 3) & 3;
    snprintf(r->cmdline, sizeof r->cmdline, "ringside train (fuzz)");
    /* run_gather's part on rank 0: every text must parse, else the job fails naming the member */
    cJSON *ranks = cJSON_CreateArray();
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        char *text = fz_strndup(part[i], plen[i]);
        cJSON *e = cJSON_Parse(text);
        free(text);
        if (!e) ok = 0;
        else cJSON_AddItemToArray(ranks, e);
    }
    if (ok) report_phases(ranks, r->cfg.warmup, NULL, 0);
    if (ok && run_write_trace(r, ranks) == RS_OK) {
        cJSON *root = run_report_json(r, ranks);
        if (!root) abort();
        char *out = cJSON_PrintUnformatted(root); /* what report_write_atomic writes */
        free(out);
        cJSON_Delete(root);
    } else {
        cJSON_Delete(ranks);
    }
    free(r);
    return 0;
}
