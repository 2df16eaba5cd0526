/* Comparison helpers: every check prints what failed and counts it; main returns
 * test_exit_code(). */
#ifndef MH_TEST_CHECK_H
#define MH_TEST_CHECK_H
#include <stddef.h>
#include <stdio.h>

typedef struct err_stats {
    double max_abs; /* max |got - want| */
    double rel_l2;  /* ||got - want|| / max(||want||, tiny) */
} err_stats;

err_stats err_f32_f64(const float* got, const double* want, size_t n);
err_stats err_f32_f32(const float* got, const float* want, size_t n);

/* Each returns 1 on success; on failure prints `what` and the numbers and counts a failure. */
int check_close(const char* what, const float* got, const double* want, size_t n, double max_abs,
                double rel_l2);
int check_close_f32(const char* what, const float* got, const float* want, size_t n,
                    double max_abs);
int check_bitwise(const char* what, const float* got, const float* want, size_t n);
int check_true(const char* what, int cond);
int check_status(const char* what, int got, int want);
/* 1 if every byte of buf equals `byte`. */
int all_bytes(const void* buf, size_t n, unsigned char byte);

/* 1 (and says so) under an emulator: MH_TEST_EMULATED, which tests/CMakeLists.txt sets for a
 * cross build's tests; the tests then run smaller shapes (problem.h, slow_machine). */
int test_emulated(void);

int test_failures(void);
/* Prints a one-line summary and returns 0 (all passed) or 1. */
int test_exit_code(const char* test_name);

#endif
