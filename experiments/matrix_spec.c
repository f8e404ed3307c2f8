/* matrix_spec.c - reads a matrix file, checks every option with train's own parser, builds the cells */
#include "matrix_spec.h"
#include "fit.h"
#include "predict.h"
#include "../base/err.h"
#include "../engine/report.h"
#include "backends.h"
#include "../engine/config_check.h"

#include <cJSON.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const spec_keys[] = {"name", "description", "base", "axes", "repeats", "timeout_s",
                                        "exclude", "alpha_s", "beta_s_per_byte", "bench", "links", NULL};

#define SPEC_DEFAULT_TIMEOUT_S 600.0
#define SPEC_MAX_CELLS 10000

/* ---- option values -------------------------------------------------------------------------- */

static void spec_number_text(double x, char *out, size_t len, int exact) {
    if (x == floor(x) && fabs(x) < 1e15) snprintf(out, len, "%.0f", x);
    else snprintf(out, len, exact ? "%.17g" : "%g", x);
}

/* Copies s with ',' -> '-' and anything outside [A-Za-z0-9._+-] -> '_'. */
static void spec_clean_text(const char *s, char *out, size_t len) {
    size_t k = 0;
    for (; *s && k + 1 < len; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '+' || c == '-';
        out[k++] = c == ',' ? '-' : ok ? c : '_';
    }
    out[k] = 0;
}

void matrix_spec_value_text(const cJSON *v, char *out, size_t len) {
    out[0] = 0;
    if (cJSON_IsBool(v)) snprintf(out, len, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v)) spec_number_text(v->valuedouble, out, len, 0);
    else if (cJSON_IsString(v)) spec_clean_text(v->valuestring, out, len);
    else if (cJSON_IsArray(v)) {
        size_t k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            char one[64];
            matrix_spec_value_text(e, one, sizeof one);
            int w = snprintf(out + k, len - k, "%s%s", k ? "-" : "", one);
            if (w < 0 || (size_t)w >= len - k) break;
            k += (size_t)w;
        }
    }
}

/* A growable list of owned strings (a cell's argv). */
typedef struct {
    char **v;
    int n, cap;
} SpecArgs;

static int spec_args_add(SpecArgs *a, const char *s) {
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        char **nv = realloc(a->v, (size_t)cap * sizeof *nv);
        if (!nv) return rs_error(RS_ERR_RUNTIME, "out of memory");
        a->v = nv;
        a->cap = cap;
    }
    if (!(a->v[a->n] = strdup(s))) return rs_error(RS_ERR_RUNTIME, "out of memory");
    a->n++;
    return RS_OK;
}

static void spec_args_free(SpecArgs *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* 1 when "--name" alone parses as a flag of train's. */
static int spec_is_flag(const char *name) {
    Config c;
    config_defaults(&c);
    char opt[80];
    snprintf(opt, sizeof opt, "--%s", name);
    char *argv[1] = {opt};
    int help;
    return config_parse(&c, 1, argv, &help) == RS_OK;
}

/* Checks one option's name and type (against train's defaults) and appends its argv form to a
 * (when a is not NULL). where names it in errors ("base.batch"). 0 or RS_ERR_INPUT. */
static int spec_option(const MatrixSpec *m, const char *where, const char *key, const cJSON *v,
                       SpecArgs *a) {
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(m->defaults, key);
    if (!strcmp(key, "report"))
        return rs_error(RS_ERR_INPUT, "%s: %s: the driver sets --report (OUT/<cell>-r<k>.json)", m->path, where);
    if (!def)
        return rs_error(RS_ERR_INPUT, "%s: %s: unknown option '%s' (ringside train --help lists them)", m->path, where, key);
    char text[1024], flag[80];
    SpecArgs tmp = {0};
    if (!a) a = &tmp;
    int base_n = a->n, rc = RS_OK;
    if (cJSON_IsBool(def)) {
        if (!cJSON_IsBool(v)) {
            rc = rs_error(RS_ERR_INPUT, "%s: %s: expected true or false", m->path, where);
            goto out;
        }
        if (spec_is_flag(key)) {
            snprintf(flag, sizeof flag, "--%s", key);
            if (cJSON_IsTrue(v)) rc = spec_args_add(a, flag);
        } else {
            snprintf(flag, sizeof flag, "--no-%s", key);
            if (cJSON_IsFalse(v)) rc = spec_args_add(a, flag);
        }
        goto out;
    }
    if (cJSON_IsNumber(def)) {
        if (!cJSON_IsNumber(v)) {
            rc = rs_error(RS_ERR_INPUT, "%s: %s: expected a number", m->path, where);
            goto out;
        }
        spec_number_text(v->valuedouble, text, sizeof text, 1);
    } else if (cJSON_IsArray(def)) { /* layers: "784,256,10" or [784, 256, 10] */
        if (cJSON_IsString(v)) snprintf(text, sizeof text, "%s", v->valuestring);
        else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) {
            size_t k = 0;
            const cJSON *e;
            text[0] = 0;
            cJSON_ArrayForEach(e, v) {
                if (!cJSON_IsNumber(e)) {
                    rc = rs_error(RS_ERR_INPUT, "%s: %s: expected a list of integers", m->path, where);
                    goto out;
                }
                char one[40];
                spec_number_text(e->valuedouble, one, sizeof one, 1);
                k += (size_t)snprintf(text + k, sizeof text - k, "%s%s", k ? "," : "", one);
                if (k >= sizeof text) break;
            }
        } else {
            rc = rs_error(RS_ERR_INPUT, "%s: %s: expected a string \"784,256,10\" or a list of integers", m->path, where);
            goto out;
        }
    } else {
        if (!cJSON_IsString(v)) {
            rc = rs_error(RS_ERR_INPUT, "%s: %s: expected a string", m->path, where);
            goto out;
        }
        snprintf(text, sizeof text, "%s", v->valuestring);
    }
    snprintf(flag, sizeof flag, "--%s", key);
    if ((rc = spec_args_add(a, flag)) == RS_OK) rc = spec_args_add(a, text);
out:
    if (rc == RS_OK && a->n > base_n) { /* train's own parser checks the value */
        Config c;
        config_defaults(&c);
        int help;
        if (config_parse(&c, a->n - base_n, a->v + base_n, &help) != RS_OK) {
            char why[1024];
            snprintf(why, sizeof why, "%s", rs_errmsg());
            rc = rs_error(RS_ERR_INPUT, "%s: %s: %s", m->path, where, why);
        }
    }
    spec_args_free(&tmp);
    return rc;
}

/* ---- the file -------------------------------------------------------------------------------- */

/* The top-level number key: 1 with *out set, 0 when absent, -1 (rs_errmsg() naming it) when it is
 * not a finite number >= lo. */
static int spec_number_key(const MatrixSpec *m, const char *key, double lo, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m->root, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) || !isfinite(v->valuedouble)) {
        rs_error(RS_ERR_INPUT, "%s: %s: expected a number >= %g", m->path, key, lo);
        return -1; /* rs_error's status is positive: the callers test < 0 */
    }
    *out = v->valuedouble;
    return 1;
}

/* Finds, depth first, an object holding numbers "alpha_s" and "beta_s_per_byte". */
static const cJSON *spec_find_fit(const cJSON *o) {
    if (!cJSON_IsObject(o) && !cJSON_IsArray(o)) return NULL;
    if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "alpha_s")) &&
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "beta_s_per_byte")))
        return o;
    const cJSON *e, *f;
    cJSON_ArrayForEach(e, o) if ((f = spec_find_fit(e))) return f;
    return NULL;
}

/* Fits alpha/beta to a bench report's sweep: config {sync, ranks}, rows [{size_bytes, time_us}]. */
static int spec_fit_rows(const cJSON *b, double *alpha, double *beta) {
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(b, "config"), *row;
    const cJSON *sync = cJSON_GetObjectItemCaseSensitive(cfg, "sync"), *ranks = cJSON_GetObjectItemCaseSensitive(cfg, "ranks");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(b, "rows");
    int n = cJSON_GetArraySize(rows), k = 0;
    if (!cJSON_IsString(sync) || !cJSON_IsNumber(ranks) || n < 2) return RS_ERR_INPUT;
    double *sz = calloc((size_t)n, sizeof *sz), *t = calloc((size_t)n, sizeof *t);
    int rc = RS_ERR_INPUT;
    if (sz && t) {
        cJSON_ArrayForEach(row, rows) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(row, "size_bytes"), *y = cJSON_GetObjectItemCaseSensitive(row, "time_us");
            if (cJSON_IsNumber(x) && cJSON_IsNumber(y) && y->valuedouble > 0) {
                sz[k] = x->valuedouble;
                t[k++] = y->valuedouble * 1e-6;
            }
        }
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(cfg, "ps_partition_keys"); /* partitions: pipelined */
        int pipelined = cJSON_IsNumber(pk) && pk->valuedouble > 0;
        if (predict_fit(fit_bench_arch(b), 1, ranks->valueint, pipelined, sz, t, k, alpha, beta, NULL) == 0)
            rc = RS_OK;
    }
    free(sz);
    free(t);
    return rc;
}

/* A link's alpha/beta from a bench report at value (a path as given, or relative to the matrix
 * file): an object in it holding alpha_s and beta_s_per_byte, else its sweep, fitted. Where the
 * report names its transport and want is not NULL, they must agree. */
static int spec_link_bench(MatrixSpec *m, const char *where, const cJSON *bench, const char *want, MatrixLink *l) {
    if (!cJSON_IsString(bench) || !bench->valuestring[0])
        return rs_error(RS_ERR_INPUT, "%s: %s: expected the path of a bench report", m->path, where);
    char path[1100], dir[1024];
    snprintf(path, sizeof path, "%s", bench->valuestring);
    FILE *f = fopen(path, "r");
    if (!f && bench->valuestring[0] != '/') { /* relative to the matrix file */
        snprintf(dir, sizeof dir, "%s", m->path);
        snprintf(path, sizeof path, "%s/%s", dirname(dir), bench->valuestring);
        f = fopen(path, "r");
    }
    if (!f) return rs_error(RS_ERR_INPUT, "%s: %s: cannot open %s", m->path, where, bench->valuestring);
    fclose(f);
    cJSON *b = report_read(path);
    if (!b) {
        char why[1200];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        return rs_error(RS_ERR_INPUT, "%s: %s: %s", m->path, where, why);
    }
    const cJSON *how = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "config"), "transport");
    if (want && cJSON_IsString(how) && how->valuestring[0] && strcmp(how->valuestring, want)) {
        rs_error(RS_ERR_INPUT, "%s: %s: %s measured the %s transport, not %s", m->path, where, path, how->valuestring, want);
        cJSON_Delete(b);
        return RS_ERR_INPUT;
    }
    int have = 0;
    const cJSON *fit = spec_find_fit(b), *schema = cJSON_GetObjectItemCaseSensitive(b, "schema");
    if (cJSON_IsString(schema) && !strcmp(schema->valuestring, FIT_SCHEMA)) { /* `ringside fit --report`: one link per transport */
        const cJSON *all = cJSON_GetObjectItemCaseSensitive(b, "links"), *one;
        fit = want ? cJSON_GetObjectItemCaseSensitive(all, want) : cJSON_GetArraySize(all) == 1 ? all->child : NULL;
        if (!fit || !spec_find_fit(fit)) {
            char names[200] = "";
            cJSON_ArrayForEach(one, all) snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", one->string);
            rs_error(RS_ERR_INPUT, "%s: %s: %s holds no fit for %s (it has: %s)", m->path, where, path,
                     want ? want : "the default link (name the transport in links)", names[0] ? names : "none");
            cJSON_Delete(b);
            return RS_ERR_INPUT;
        }
    }
    if (fit) {
        have = 1;
        l->alpha_s = cJSON_GetObjectItemCaseSensitive(fit, "alpha_s")->valuedouble;
        l->beta_s_per_byte = cJSON_GetObjectItemCaseSensitive(fit, "beta_s_per_byte")->valuedouble;
        snprintf(l->source, sizeof l->source, "%s", path);
    } else if (spec_fit_rows(b, &l->alpha_s, &l->beta_s_per_byte) == RS_OK) {
        have = 1;
        snprintf(l->source, sizeof l->source, "%.1000s (fitted)", path);
    }
    cJSON_Delete(b);
    if (!have)
        return rs_error(RS_ERR_INPUT, "%s: %s: %s holds no fit (an object with alpha_s and beta_s_per_byte) and no sweep to fit (config.sync, config.ranks >= 2, rows[] of size_bytes and time_us)", m->path, where, path);
    if (!(l->alpha_s >= 0 && l->beta_s_per_byte >= 0))
        return rs_error(RS_ERR_INPUT, "%s: %s: %s: alpha_s and beta_s_per_byte must be >= 0", m->path, where, path);
    return RS_OK;
}

/* A link's alpha/beta as numbers in o ("alpha_s", "beta_s_per_byte", both >= 0). */
static int spec_link_numbers(MatrixSpec *m, const char *where, const cJSON *o, MatrixLink *l) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "alpha_s"), *b = cJSON_GetObjectItemCaseSensitive(o, "beta_s_per_byte"), *e;
    cJSON_ArrayForEach(e, o)
        if (strcmp(e->string, "alpha_s") && strcmp(e->string, "beta_s_per_byte"))
            return rs_error(RS_ERR_INPUT, "%s: %s: unknown key '%s' (expected alpha_s, beta_s_per_byte)", m->path, where, e->string);
    if (!a || !b) return rs_error(RS_ERR_INPUT, "%s: %s: give alpha_s and beta_s_per_byte together", m->path, where);
    if (!cJSON_IsNumber(a) || !(a->valuedouble >= 0) || !isfinite(a->valuedouble))
        return rs_error(RS_ERR_INPUT, "%s: %s.alpha_s: expected a number >= 0", m->path, where);
    if (!cJSON_IsNumber(b) || !(b->valuedouble >= 0) || !isfinite(b->valuedouble))
        return rs_error(RS_ERR_INPUT, "%s: %s.beta_s_per_byte: expected a number >= 0", m->path, where);
    l->alpha_s = a->valuedouble;
    l->beta_s_per_byte = b->valuedouble;
    snprintf(l->source, sizeof l->source, "matrix file");
    return RS_OK;
}

/* The links: the default from alpha_s/beta_s_per_byte or bench, one per transport from links. */
static int spec_alpha_beta(MatrixSpec *m) {
    static const char *const transports[] = {"tcp", "ipc", "shm", "inproc", "nccl", NULL};
    double al = 0, be = 0;
    int ha = spec_number_key(m, "alpha_s", 0, &al), hb = spec_number_key(m, "beta_s_per_byte", 0, &be);
    if (ha < 0 || hb < 0) return RS_ERR_INPUT;
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(m->root, "bench");
    if (ha != hb) return rs_error(RS_ERR_INPUT, "%s: %s: give alpha_s and beta_s_per_byte together", m->path, ha ? "beta_s_per_byte" : "alpha_s");
    if (ha && bench) return rs_error(RS_ERR_INPUT, "%s: bench: give alpha_s/beta_s_per_byte or a bench report, not both", m->path);
    if (ha) {
        MatrixLink *l = &m->links[m->nlinks++];
        l->alpha_s = al;
        l->beta_s_per_byte = be;
        snprintf(l->source, sizeof l->source, "matrix file");
    } else if (bench) {
        RS_TRY(spec_link_bench(m, "bench", bench, NULL, &m->links[m->nlinks]));
        m->nlinks++;
    }
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(m->root, "links"), *e;
    if (cJSON_IsString(links) && !strcmp(links->valuestring, "auto")) {
        m->links_auto = 1;
        return RS_OK;
    }
    if (links && !cJSON_IsObject(links))
        return rs_error(RS_ERR_INPUT, "%s: links: expected \"auto\" or an object {transport: {alpha_s, beta_s_per_byte} or a bench report's path}", m->path);
    cJSON_ArrayForEach(e, links) {
        int known = 0;
        for (int i = 0; transports[i]; i++) known |= !strcmp(e->string, transports[i]);
        if (!known)
            return rs_error(RS_ERR_INPUT, "%s: links: unknown transport '%s' (expected tcp, ipc, shm, inproc or nccl)", m->path, e->string);
        for (int i = 0; i < m->nlinks; i++)
            if (!strcmp(m->links[i].transport, e->string)) return rs_error(RS_ERR_INPUT, "%s: links: '%s' given twice", m->path, e->string);
        char where[64];
        snprintf(where, sizeof where, "links.%s", e->string);
        MatrixLink *l = &m->links[m->nlinks];
        snprintf(l->transport, sizeof l->transport, "%s", e->string);
        if (cJSON_IsString(e)) RS_TRY(spec_link_bench(m, where, e, e->string, l));
        else if (cJSON_IsObject(e)) RS_TRY(spec_link_numbers(m, where, e, l));
        else return rs_error(RS_ERR_INPUT, "%s: %s: expected {alpha_s, beta_s_per_byte} or a bench report's path", m->path, where);
        m->nlinks++;
    }
    return RS_OK;
}

const MatrixLink *matrix_spec_link(const MatrixSpec *m, const char *transport) {
    const MatrixLink *fallback = NULL;
    for (int i = 0; i < m->nlinks; i++) {
        if (transport && transport[0] && !strcmp(m->links[i].transport, transport)) return &m->links[i];
        if (!m->links[i].transport[0]) fallback = &m->links[i];
    }
    return fallback;
}

/* The variants axis v (in axes): an object of named option sets, each name made of
 * [A-Za-z0-9._+-], each set an object of train options that are not axes themselves. */
static int spec_check_variants(MatrixSpec *m, const cJSON *axes, const cJSON *v) {
    if (!cJSON_IsObject(v) || !v->child)
        return rs_error(RS_ERR_INPUT, "%s: axes.%s: expected a non-empty object {name: {option: value, ...}, ...}", m->path, MATRIX_VARIANTS_KEY);
    if (m->variant_axis >= 0) return rs_error(RS_ERR_INPUT, "%s: axes.%s: given twice", m->path, MATRIX_VARIANTS_KEY);
    if (cJSON_GetObjectItemCaseSensitive(axes, MATRIX_VARIANT_AXIS))
        return rs_error(RS_ERR_INPUT, "%s: axes.%s: the variants axis is already called '%s'", m->path, MATRIX_VARIANT_AXIS, MATRIX_VARIANT_AXIS);
    m->variant_names = cJSON_CreateArray();
    if (!m->variant_names) return rs_error(RS_ERR_RUNTIME, "out of memory");
    const cJSON *set, *o;
    char where[400], clean[128];
    cJSON_ArrayForEach(set, v) {
        spec_clean_text(set->string, clean, sizeof clean);
        if (!set->string[0] || strcmp(clean, set->string) || strlen(set->string) > 64)
            return rs_error(RS_ERR_INPUT, "%s: axes.%s: variant name '%s': use 1 to 64 of A-Z a-z 0-9 . _ + -", m->path,
                            MATRIX_VARIANTS_KEY, set->string);
        if (!cJSON_IsObject(set))
            return rs_error(RS_ERR_INPUT, "%s: axes.%s.%s: expected an object of train options", m->path, MATRIX_VARIANTS_KEY, set->string);
        cJSON_ArrayForEach(o, set) {
            snprintf(where, sizeof where, "axes.%s.%s.%s", MATRIX_VARIANTS_KEY, set->string, o->string);
            if (cJSON_GetObjectItemCaseSensitive(axes, o->string))
                return rs_error(RS_ERR_INPUT, "%s: %s: '%s' is also an axis: give it in one place", m->path, where, o->string);
            RS_TRY(spec_option(m, where, o->string, o, NULL));
        }
        cJSON_AddItemToArray(m->variant_names, cJSON_CreateString(set->string));
    }
    m->variant_axis = m->naxes;
    m->axis_name[m->naxes++] = MATRIX_VARIANT_AXIS;
    return RS_OK;
}

/* Top-level keys, name, repeats, timeout_s, base, axes and exclude entries, types only. */
static int spec_check_shape(MatrixSpec *m) {
    const cJSON *e;
    if (!cJSON_IsObject(m->root)) return rs_error(RS_ERR_INPUT, "%s: expected a JSON object at the top", m->path);
    cJSON_ArrayForEach(e, m->root) {
        int known = 0;
        for (int i = 0; spec_keys[i]; i++) known |= !strcmp(e->string, spec_keys[i]);
        if (!known)
            return rs_error(RS_ERR_INPUT, "%s: unknown key '%s' (expected name, description, base, axes, repeats, timeout_s, exclude, alpha_s, beta_s_per_byte, bench, links)", m->path, e->string);
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(m->root, "name");
    if (name && !cJSON_IsString(name)) return rs_error(RS_ERR_INPUT, "%s: name: expected a string", m->path);
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(m->root, "description");
    if (desc && !cJSON_IsString(desc)) return rs_error(RS_ERR_INPUT, "%s: description: expected a string", m->path);
    if (name) snprintf(m->name, sizeof m->name, "%s", name->valuestring);
    else {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", m->path);
        char *b = basename(tmp), *dot = strrchr(b, '.');
        if (dot) *dot = 0;
        snprintf(m->name, sizeof m->name, "%s", b);
    }
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(m->root, "repeats");
    m->repeats = 1;
    if (rep) {
        if (!cJSON_IsNumber(rep) || rep->valuedouble != floor(rep->valuedouble) || rep->valuedouble < 1 || rep->valuedouble > 1000)
            return rs_error(RS_ERR_INPUT, "%s: repeats: expected an integer in 1..1000", m->path);
        m->repeats = rep->valueint;
    }
    m->timeout_s = SPEC_DEFAULT_TIMEOUT_S;
    if (spec_number_key(m, "timeout_s", 0, &m->timeout_s) < 0) return RS_ERR_INPUT;
    if (!(m->timeout_s > 0)) return rs_error(RS_ERR_INPUT, "%s: timeout_s: expected a number > 0", m->path);
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(m->root, "base");
    if (base && !cJSON_IsObject(base)) return rs_error(RS_ERR_INPUT, "%s: base: expected an object of train options", m->path);
    char where[300];
    cJSON_ArrayForEach(e, base) {
        snprintf(where, sizeof where, "base.%s", e->string);
        RS_TRY(spec_option(m, where, e->string, e, NULL));
    }
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(m->root, "axes");
    if (axes && !cJSON_IsObject(axes)) return rs_error(RS_ERR_INPUT, "%s: axes: expected an object {option: [values...]}", m->path);
    cJSON_ArrayForEach(e, axes) {
        if (m->naxes == MATRIX_MAX_AXES) return rs_error(RS_ERR_INPUT, "%s: axes: at most %d axes", m->path, MATRIX_MAX_AXES);
        if (!strcmp(e->string, MATRIX_VARIANTS_KEY)) {
            RS_TRY(spec_check_variants(m, axes, e));
            continue;
        }
        if (!cJSON_IsArray(e)) return rs_error(RS_ERR_INPUT, "%s: axes.%s: expected a list of values", m->path, e->string);
        if (cJSON_GetArraySize(e) == 0) return rs_error(RS_ERR_INPUT, "%s: axes.%s: empty list of values", m->path, e->string);
        const cJSON *v;
        int i = 0;
        cJSON_ArrayForEach(v, e) {
            snprintf(where, sizeof where, "axes.%s[%d]", e->string, i++);
            RS_TRY(spec_option(m, where, e->string, v, NULL));
        }
        m->axis_name[m->naxes++] = e->string;
    }
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(m->root, "exclude");
    if (ex && !cJSON_IsArray(ex)) return rs_error(RS_ERR_INPUT, "%s: exclude: expected a list of {option: value} objects", m->path);
    int i = 0;
    cJSON_ArrayForEach(e, ex) {
        if (!cJSON_IsObject(e) || !e->child)
            return rs_error(RS_ERR_INPUT, "%s: exclude[%d]: expected a non-empty {option: value} object", m->path, i);
        const cJSON *v;
        cJSON_ArrayForEach(v, e) {
            snprintf(where, sizeof where, "exclude[%d].%s", i, v->string);
            if (m->variant_axis >= 0 && !strcmp(v->string, MATRIX_VARIANT_AXIS)) {
                const cJSON *vn;
                int known = 0;
                cJSON_ArrayForEach(vn, m->variant_names) known |= cJSON_IsString(v) && !strcmp(vn->valuestring, v->valuestring);
                if (!known) return rs_error(RS_ERR_INPUT, "%s: %s: expected the name of a variant", m->path, where);
            } else RS_TRY(spec_option(m, where, v->string, v, NULL));
        }
        i++;
    }
    return RS_OK;
}

/* ---- cells ----------------------------------------------------------------------------------- */

/* The option set of the variant a cell with axis values idx has; NULL without a variants axis. */
static const cJSON *spec_variant(const MatrixSpec *m, const int *idx) {
    if (m->variant_axis < 0) return NULL;
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(m->root, "axes");
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(axes, MATRIX_VARIANTS_KEY), idx[m->variant_axis]);
}

/* The value of one axis (a variant: its name) at index i. */
static const cJSON *spec_axis_value(const MatrixSpec *m, int a, int i) {
    if (a == m->variant_axis) return cJSON_GetArrayItem(m->variant_names, i);
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(m->root, "axes");
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(axes, m->axis_name[a]), i);
}

/* The value option key takes in a cell with axis values idx: axis, else its variant's, else base,
 * else default ("variant": the variant's name). */
static const cJSON *spec_effective(const MatrixSpec *m, const int *idx, const char *key) {
    for (int a = 0; a < m->naxes; a++)
        if (!strcmp(m->axis_name[a], key)) return spec_axis_value(m, a, idx[a]);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec_variant(m, idx), key);
    if (!v) v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m->root, "base"), key);
    return v ? v : cJSON_GetObjectItemCaseSensitive(m->defaults, key);
}

/* 1 when value texts a and b name the same value (numerically when both are numbers). */
static int spec_same_text(const char *a, const char *b) {
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (*a && *b && !*ea && !*eb) return x == y;
    return !strcmp(a, b);
}

static int spec_excluded(const MatrixSpec *m, const int *idx) {
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(m->root, "exclude"), *e, *v;
    cJSON_ArrayForEach(e, ex) {
        int all = 1;
        cJSON_ArrayForEach(v, e) {
            char want[512], have[512];
            matrix_spec_value_text(v, want, sizeof want);
            matrix_spec_value_text(spec_effective(m, idx, v->string), have, sizeof have);
            if (!spec_same_text(want, have)) all = 0;
        }
        if (all) return 1;
    }
    return 0;
}

/* Which back ends an option applies to: options beginning with prefix are the named back ends'
 * own; every other option applies to every back end. */
static const struct {
    const char *prefix, *backends;
} spec_scope[] = {{"ps-", " ps byteps "}};

/* Refuses an option of c's set (given at where) that does not apply to its back end. */
static int spec_applies(const MatrixSpec *m, const MatrixCell *c, const char *where, const char *key) {
    char pad[40];
    snprintf(pad, sizeof pad, " %s ", c->cfg.sync);
    for (size_t i = 0; i < sizeof spec_scope / sizeof spec_scope[0]; i++)
        if (!strncmp(key, spec_scope[i].prefix, strlen(spec_scope[i].prefix)) && !strstr(spec_scope[i].backends, pad))
            return rs_error(RS_ERR_INPUT, "%s: %s: option '%s' does not apply to --sync %s (cell %s); give it only to the cells it applies to (a variant, or an exclude)",
                            m->path, where, key, c->cfg.sync, c->id);
    return RS_OK;
}

/* Appends to a every option of o (base, or a variant's set) but those an axis gives, and for base
 * those the cell's variant gives; where_pfx ("base.") names each one in errors. */
static int spec_add_set(const MatrixSpec *m, const cJSON *o, const char *where_pfx, const int *idx, int is_base, SpecArgs *a) {
    const cJSON *e;
    const cJSON *variant = spec_variant(m, idx);
    cJSON_ArrayForEach(e, o) {
        int skip = 0;
        for (int k = 0; k < m->naxes; k++) skip |= !strcmp(m->axis_name[k], e->string);
        if (is_base && cJSON_GetObjectItemCaseSensitive(variant, e->string)) skip = 1;
        if (skip) continue;
        char where[400];
        snprintf(where, sizeof where, "%s%s", where_pfx, e->string);
        RS_TRY(spec_option(m, where, e->string, e, a));
    }
    return RS_OK;
}

/* The options c sets and where each comes from, checked against c's back end. */
static int spec_check_scope(const MatrixSpec *m, const MatrixCell *c, const int *idx) {
    const cJSON *e, *variant = spec_variant(m, idx);
    char where[400];
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m->root, "base")) {
        snprintf(where, sizeof where, "base.%s", e->string);
        if (spec_effective(m, idx, e->string) == e) RS_TRY(spec_applies(m, c, where, e->string));
    }
    cJSON_ArrayForEach(e, variant) {
        snprintf(where, sizeof where, "axes.%s.%s.%s", MATRIX_VARIANTS_KEY, variant->string, e->string);
        RS_TRY(spec_applies(m, c, where, e->string));
    }
    for (int x = 0; x < m->naxes; x++) {
        if (x == m->variant_axis) continue;
        snprintf(where, sizeof where, "axes.%s", m->axis_name[x]);
        RS_TRY(spec_applies(m, c, where, m->axis_name[x]));
    }
    return RS_OK;
}

/* Builds cell c for axis indices idx: argv (base options neither the axes nor the variant
 * override, then the axes in order, a variant's options in its place), id, and the parsed,
 * validated Config. */
static int spec_make_cell(const MatrixSpec *m, const int *idx, MatrixCell *c) {
    SpecArgs a = {0};
    const cJSON *variant = spec_variant(m, idx);
    int rc = spec_add_set(m, cJSON_GetObjectItemCaseSensitive(m->root, "base"), "base.", idx, 1, &a);
    if (rc != RS_OK) goto err;
    size_t k = 0;
    c->id[0] = 0;
    c->variant = variant ? variant->string : NULL;
    for (int x = 0; x < m->naxes; x++) {
        const cJSON *v = spec_axis_value(m, x, idx[x]);
        c->axis_val[x] = v;
        c->axis_idx[x] = idx[x];
        if (x == m->variant_axis) {
            char pfx[200];
            snprintf(pfx, sizeof pfx, "axes.%s.%s.", MATRIX_VARIANTS_KEY, variant->string);
            if ((rc = spec_add_set(m, variant, pfx, idx, 0, &a)) != RS_OK) goto err;
        } else if ((rc = spec_option(m, m->axis_name[x], m->axis_name[x], v, &a)) != RS_OK) goto err;
        char text[256];
        matrix_spec_value_text(v, text, sizeof text);
        k += (size_t)snprintf(c->id + k, sizeof c->id - (k < sizeof c->id ? k : sizeof c->id), "%s%s=%s", x ? "," : "", m->axis_name[x], text);
        if (k >= sizeof c->id) {
            rc = rs_error(RS_ERR_INPUT, "%s: a cell id is longer than %zu characters", m->path, sizeof c->id - 1);
            goto err;
        }
    }
    if (!m->naxes) snprintf(c->id, sizeof c->id, "base");
    config_defaults(&c->cfg);
    int help;
    if (config_parse(&c->cfg, a.n, a.v, &help) != RS_OK || backend_validate(&c->cfg) != RS_OK ||
        !sync_find(c->cfg.sync)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        rc = rs_error(RS_ERR_INPUT, "%s: cell %s: %s", m->path, c->id, why);
        goto err;
    }
    if ((rc = spec_check_scope(m, c, idx)) != RS_OK) goto err;
    c->args = a.v;
    c->nargs = a.n;
    c->selected = 1;
    return RS_OK;
err:
    spec_args_free(&a);
    return rc;
}

static int spec_build_cells(MatrixSpec *m) {
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(m->root, "axes");
    long total = 1;
    int len[MATRIX_MAX_AXES], idx[MATRIX_MAX_AXES] = {0};
    for (int a = 0; a < m->naxes; a++) {
        len[a] = a == m->variant_axis ? cJSON_GetArraySize(m->variant_names)
                                      : cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(axes, m->axis_name[a]));
        total *= len[a];
        if (total > SPEC_MAX_CELLS) return rs_error(RS_ERR_INPUT, "%s: axes: more than %d cells", m->path, SPEC_MAX_CELLS);
    }
    m->cells = calloc((size_t)total, sizeof *m->cells);
    if (!m->cells) return rs_error(RS_ERR_RUNTIME, "out of memory");
    for (long n = 0; n < total; n++) {
        /* the last axis varies fastest */
        long r = n;
        for (int a = m->naxes - 1; a >= 0; a--) {
            idx[a] = (int)(r % len[a]);
            r /= len[a];
        }
        if (spec_excluded(m, idx)) continue;
        MatrixCell *c = &m->cells[m->ncells];
        RS_TRY(spec_make_cell(m, idx, c));
        m->ncells++;
        for (int j = 0; j < m->ncells - 1; j++)
            if (!strcmp(m->cells[j].id, c->id))
                return rs_error(RS_ERR_INPUT, "%s: axes: two cells share the id '%s' (repeated axis values?)", m->path, c->id);
    }
    if (m->ncells == 0) return rs_error(RS_ERR_INPUT, "%s: exclude: every cell is excluded", m->path);
    return RS_OK;
}

int matrix_spec_load(MatrixSpec *m, const char *path) {
    memset(m, 0, sizeof *m);
    m->variant_axis = -1;
    snprintf(m->path, sizeof m->path, "%s", path);
    m->root = report_read(path);
    if (!m->root) return RS_ERR_INPUT;
    Config d;
    config_defaults(&d);
    m->defaults = config_json(&d);
    if (!m->defaults) {
        matrix_spec_free(m);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    int rc = spec_check_shape(m);
    if (rc == RS_OK) rc = spec_alpha_beta(m);
    if (rc == RS_OK) rc = spec_build_cells(m);
    if (rc != RS_OK) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", rs_errmsg());
        matrix_spec_free(m);
        rs_error(rc, "%s", msg);
    }
    return rc;
}

int matrix_spec_select(MatrixSpec *m, const char *only) {
    if (!only || !*only) return RS_OK;
    /* split at commas; an item without '=' continues the previous value (layers=784,256,10) */
    char buf[1024], keys[32][64], vals[32][512];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", only);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) {
            if (!n) return rs_error(RS_ERR_INPUT, "--only '%s': expected option=value items", only);
            size_t l = strlen(vals[n - 1]);
            snprintf(vals[n - 1] + l, sizeof vals[0] - l, ",%s", t);
            continue;
        }
        if (n == 32) return rs_error(RS_ERR_INPUT, "--only: at most 32 items");
        *eq = 0;
        snprintf(keys[n], sizeof keys[0], "%s", t);
        snprintf(vals[n], sizeof vals[0], "%s", eq + 1);
        if (!cJSON_GetObjectItemCaseSensitive(m->defaults, keys[n]) && !(m->variant_axis >= 0 && !strcmp(keys[n], MATRIX_VARIANT_AXIS)))
            return rs_error(RS_ERR_INPUT, "--only: unknown option '%s'", keys[n]);
        n++;
    }
    int kept = 0;
    for (int c = 0; c < m->ncells; c++) {
        const int *idx = m->cells[c].axis_idx;
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            char have[512], want[512];
            matrix_spec_value_text(spec_effective(m, idx, keys[i]), have, sizeof have);
            spec_clean_text(vals[i], want, sizeof want);
            ok = spec_same_text(have, want);
        }
        m->cells[c].selected = ok;
        kept += ok;
    }
    if (!kept) return rs_error(RS_ERR_INPUT, "--only '%s': matches none of the %d cells", only, m->ncells);
    return RS_OK;
}

void matrix_spec_free(MatrixSpec *m) {
    for (int c = 0; c < m->ncells; c++) {
        for (int i = 0; i < m->cells[c].nargs; i++) free(m->cells[c].args[i]);
        free(m->cells[c].args);
    }
    free(m->cells);
    cJSON_Delete(m->root);
    cJSON_Delete(m->defaults);
    cJSON_Delete(m->variant_names);
    memset(m, 0, sizeof *m);
    m->variant_axis = -1;
}
