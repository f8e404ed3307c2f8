/* test.h - the tiny test harness: CHECK macros, a runner, and the closing "N passed, N failed" line */
#ifndef RS_TEST_H
#define RS_TEST_H

#include <stdio.h>
#include <string.h>
#include <math.h>

static int test_passed_, test_failed_, test_skipped_, test_cur_failed_;

/* Fails the current test (and goes on) when cond is false, saying where. */
#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            test_cur_failed_ = 1;                                                          \
        }                                                                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                                               \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            test_cur_failed_ = 1;                                                          \
        }                                                                                  \
    } while (0)

/* Marks the current test skipped with a reason; the test function should return after it. */
#define SKIP(...)                                                                          \
    do {                                                                                   \
        printf("  SKIP: ");                                                                \
        printf(__VA_ARGS__);                                                               \
        printf("\n");                                                                      \
        test_cur_failed_ = -1;                                                             \
    } while (0)

/* Runs one test function and records its outcome. */
#define RUN(fn)                                                                            \
    do {                                                                                   \
        test_cur_failed_ = 0;                                                              \
        printf("- %s\n", #fn);                                                             \
        fflush(stdout);                                                                    \
        fn();                                                                              \
        if (test_cur_failed_ > 0) test_failed_++;                                          \
        else if (test_cur_failed_ < 0) test_skipped_++;                                    \
        else test_passed_++;                                                               \
    } while (0)

/* Prints the closing line and returns the process exit status (non-zero on any failure). */
static inline int test_summary(const char *suite) {
    printf("%s: %d passed, %d failed, %d skipped\n", suite, test_passed_, test_failed_,
           test_skipped_);
    return test_failed_ ? 1 : 0;
}

/* Max relative error |a-b| / max(|b|, floor) over n elements. */
static inline double test_max_rel_err(const float *a, const float *b, size_t n, double floor) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double s = fabs((double)b[i]);
        double r = d / (s > floor ? s : floor);
        if (r > m) m = r;
    }
    return m;
}

#endif
