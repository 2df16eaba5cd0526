#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int g_failures;
static int g_checks;

static err_stats finish(double max_abs, double diff2, double ref2) {
    err_stats e;
    e.max_abs = max_abs;
    e.rel_l2 = sqrt(diff2) / (ref2 > 1e-300 ? sqrt(ref2) : 1.0);
    return e;
}

err_stats err_f32_f64(const float* got, const double* want, size_t n) {
    double max_abs = 0, diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        if (!(fabs(d) <= max_abs)) max_abs = isnan(d) ? INFINITY : fabs(d);
        diff2 += d * d;
        ref2 += want[i] * want[i];
    }
    return finish(max_abs, diff2, ref2);
}

err_stats err_f32_f32(const float* got, const float* want, size_t n) {
    double max_abs = 0, diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        if (!(fabs(d) <= max_abs)) max_abs = isnan(d) ? INFINITY : fabs(d);
        diff2 += d * d;
        ref2 += (double)want[i] * want[i];
    }
    return finish(max_abs, diff2, ref2);
}

static int record(const char* what, int ok) {
    g_checks++;
    if (!ok) {
        g_failures++;
        fprintf(stderr, "FAIL: %s\n", what);
    }
    return ok;
}

int check_close(const char* what, const float* got, const double* want, size_t n, double max_abs,
                double rel_l2) {
    err_stats e = err_f32_f64(got, want, n);
    int ok = e.max_abs <= max_abs && e.rel_l2 <= rel_l2;
    if (!ok)
        fprintf(stderr, "  %s: max_abs %.3g (tol %.3g), rel_l2 %.3g (tol %.3g)\n", what, e.max_abs,
                max_abs, e.rel_l2, rel_l2);
    return record(what, ok);
}

int check_close_f32(const char* what, const float* got, const float* want, size_t n,
                    double max_abs) {
    err_stats e = err_f32_f32(got, want, n);
    int ok = e.max_abs <= max_abs;
    if (!ok) fprintf(stderr, "  %s: max_abs %.3g (tol %.3g)\n", what, e.max_abs, max_abs);
    return record(what, ok);
}

int check_bitwise(const char* what, const float* got, const float* want, size_t n) {
    int ok = memcmp(got, want, n * sizeof(float)) == 0;
    if (!ok) {
        err_stats e = err_f32_f32(got, want, n);
        fprintf(stderr, "  %s: not bitwise equal, max_abs %.3g\n", what, e.max_abs);
    }
    return record(what, ok);
}

int check_true(const char* what, int cond) { return record(what, cond != 0); }

int check_status(const char* what, int got, int want) {
    int ok = got == want;
    if (!ok) fprintf(stderr, "  %s: status %d, expected %d\n", what, got, want);
    return record(what, ok);
}

int all_bytes(const void* buf, size_t n, unsigned char byte) {
    const unsigned char* p = (const unsigned char*)buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte) return 0;
    return 1;
}

int test_failures(void) { return g_failures; }

int test_emulated(void) {
    if (!getenv("MH_TEST_EMULATED")) return 0;
    printf("emulator (MH_TEST_EMULATED): reduced shapes\n");
    return 1;
}

int test_exit_code(const char* test_name) {
    printf("%s: %d checks, %d failed\n", test_name, g_checks, g_failures);
    if (g_checks == 0) {
        fprintf(stderr, "%s: no check ran\n", test_name);
        return 1;
    }
    return g_failures ? 1 : 0;
}
