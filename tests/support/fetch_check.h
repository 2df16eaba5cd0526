/* The GEMM slots' fetch (kernels/fetch.h) in the kernel tests: a fetch over rows of three
 * cache lines, 256 bytes apart, and whether a kernel left it exactly `lines` lines on. */
#ifndef MH_TEST_FETCH_CHECK_H
#define MH_TEST_FETCH_CHECK_H
#include "kernels/fetch.h"

#define FETCH_ROW_BYTES 192
#define FETCH_STRIDE 256

static inline mh_fetch test_fetch(const char* base, size_t rows) {
    mh_fetch f = {base, 0, FETCH_ROW_BYTES, FETCH_STRIDE, rows, 0};
    return f;
}

/* 1 if f is test_fetch(base, rows) advanced by `lines` lines (at most every line of it). */
static inline int fetch_advanced(const mh_fetch* f, const char* base, size_t rows, size_t lines) {
    const size_t per_row = FETCH_ROW_BYTES / 64, total = rows * per_row, n = lines < total ? lines : total;
    return f->p == base + n / per_row * FETCH_STRIDE && f->off == n % per_row * 64 && f->rows == rows - n / per_row &&
           f->row_bytes == FETCH_ROW_BYTES && f->stride == FETCH_STRIDE;
}

#endif
