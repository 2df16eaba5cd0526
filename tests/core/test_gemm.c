/*
 * The packed projection GEMM (white box) against the double oracle on shapes generated from
 * the micro-tile: rows and outputs in {1, MR-1, MR, MR+1, ..., NR+1, 2NR+1}, reduction lengths
 * 1, primes and 300; with and without bias; input leading dimension padded; 1 and 2 threads.
 * Tolerance: the standard dot-product bound, |err| <= k * eps32 * max|x| * max|w| per output
 * (inputs in [-1, 1]), times 2. A relative (rel-L2) bound is not used: a single output whose
 * terms cancel has a large relative error that says nothing about the kernel.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "core/gemm.h"
#include "dispatch/dispatch.h"
#include "oracle.h"
#include "rng.h"

static void one(const mh_kernels* k, test_rng* r, size_t rows, size_t n_out, size_t kin, int bias,
                int threads) {
    const size_t ldx = kin + 3, ldy = n_out + 2;
    float* x = malloc(sizeof(float) * rows * ldx);
    float* xd = malloc(sizeof(float) * rows * kin);
    float* w = malloc(sizeof(float) * n_out * kin);
    float* b = malloc(sizeof(float) * n_out);
    float* y = malloc(sizeof(float) * rows * ldy);
    double* want = malloc(sizeof(double) * rows * n_out);
    float* got = malloc(sizeof(float) * rows * n_out);
    rng_fill(r, x, rows * ldx, -1, 1);
    rng_fill(r, w, n_out * kin, -1, 1);
    rng_fill(r, b, n_out, -1, 1);
    for (size_t i = 0; i < rows * ldy; i++) y[i] = 777.0f;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < kin; j++) xd[i * kin + j] = x[i * ldx + j];
    mh_packed_matrix pm;
    char what[128];
    snprintf(what, sizeof what, "gemm rows %zu out %zu k %zu bias %d threads %d", rows, n_out, kin, bias, threads);
    if (check_status(what, mh_pack_matrix(k, w, bias ? b : NULL, (int)n_out, (int)kin, &pm), MH_OK)) {
        mh_gemm_packed(k, threads, rows, x, ldx, &pm, y, ldy);
        oracle_linear(xd, (int)rows, (int)kin, w, bias ? b : NULL, (int)n_out, want);
        int pad_ok = 1;
        for (size_t i = 0; i < rows; i++) {
            for (size_t j = 0; j < n_out; j++) got[i * n_out + j] = y[i * ldy + j];
            pad_ok &= y[i * ldy + n_out] == 777.0f && y[i * ldy + n_out + 1] == 777.0f;
        }
        check_close(what, got, want, rows * n_out, 2 * FLT_EPSILON * (double)(kin + 1), INFINITY);
        check_true("gemm writes nothing past n_out", pad_ok);
        mh_packed_matrix_free(&pm);
    }
    free(x), free(xd), free(w), free(b), free(y), free(want), free(got);
}

int main(void) {
    mh_isa isa;
    const mh_status st = mh_isa_default(&isa);
    if (st == MH_ERR_ISA_UNAVAILABLE) return 77; /* MH_ISA names an ISA this machine lacks */
    if (st != MH_OK) return 1;
    const mh_kernels* k = mh_dispatch_table(isa);
    printf("test_gemm on %s\n", mh_isa_name(isa));
    test_rng r;
    rng_seed(&r, 1);
    const size_t mr = k->gemm_mr, nr = k->gemm_nr;
    const size_t rows[] = {1, mr - 1, mr, mr + 1, 2 * mr + 1, 49, 97};
    const size_t outs[] = {1, nr - 1, nr, nr + 1, 2 * nr + 1};
    const size_t ks[] = {1, 7, 31, 300};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        for (size_t j = 0; j < sizeof outs / sizeof *outs; j++)
            for (size_t l = 0; l < sizeof ks / sizeof *ks; l++)
                if (rows[i] > 0) one(k, &r, rows[i], outs[j], ks[l], (int)((i + j + l) % 2), 1 + (int)(l % 2));
    return test_exit_code("test_gemm");
}
