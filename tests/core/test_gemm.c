/*
 * The packed projection GEMM (white box) against the double oracle on shapes generated from
 * the micro-tile: rows in {1, MR-1, MR, MR+1, 2MR+1, 49, 97, 250 (two row blocks)} (under an
 * emulator up to 49: 97 and 250 took 40 of the 72 s at 512-bit SVE; the 1000-row case still
 * crosses row blocks there), outputs in
 * {1, NR-1, NR, NR+1, 2NR+1, 5NR+1 (two bf16 panel groups)}, reduction lengths
 * 1, primes, 300 and 513 (three reduction blocks, the last odd), and 1000 rows of 2100 (x past
 * the budget of a super-block of row blocks); with and without bias; input
 * leading dimension padded; 1 and 2 threads. In f32 and, where the ISA has bf16 kernels, on
 * weights packed in bf16: the oracle then takes x and W rounded to bf16 (their products are
 * exact in f32 and accumulate in f32, so the bound below holds; a GEMM that skipped either
 * rounding would be about 2^-9 relative off), and there also on rows rounded once
 * (mh_round_rows, mh_gemm_packed_rounded), bitwise the plain call. Tolerance: the standard dot-product bound,
 * |err| <= k * eps32 * max|x| * max|w| per output (inputs in [-1, 1]), times 2. A relative (rel-L2) bound is not used: a single output whose
 * terms cancel has a large relative error that says nothing about the kernel.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_gemm_choice.h"
#include "check.h"
#include "core/gemm.h"
#include "dispatch/dispatch.h"
#include "oracle.h"
#include "rng.h"

/* The same GEMM on x rounded once by mh_round_rows (rows ldxr apart, past each row's values
 * and its odd pad a bf16 NaN the GEMM must not read): y_plain's bits, nothing past n_out. */
static void rounded_rows(const mh_kernels* k, int threads, const float* x, size_t ldx, size_t rows, size_t kin,
                         const mh_packed_matrix* pm, const float* y_plain, size_t ldy) {
    const size_t ldxr = (kin + 1) / 2 * 2 + 4;
    uint16_t* xr = malloc(sizeof(uint16_t) * rows * ldxr);
    float* y = malloc(sizeof(float) * rows * ldy);
    for (size_t i = 0; i < rows * ldxr; i++) xr[i] = 0x7fc0u;
    for (size_t i = 0; i < rows * ldy; i++) y[i] = 777.0f;
    mh_round_rows(k, rows, kin, x, ldx, xr, ldxr);
    mh_gemm_packed_rounded(k, threads, rows, xr, ldxr, pm, y, ldy);
    int same = 1;
    for (size_t i = 0; i < rows * ldy; i++) same &= memcmp(&y[i], &y_plain[i], sizeof(float)) == 0;
    char what[128];
    snprintf(what, sizeof what, "gemm on rounded rows %zu k %zu threads %d: the bits of the f32 rows' call", rows, kin,
             threads);
    check_true(what, same);
    free(xr), free(y);
}

static void one(const mh_kernels* k, mh_compute compute, test_rng* r, size_t rows, size_t n_out, size_t kin,
                int bias, int threads) {
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
    char what[160];
    snprintf(what, sizeof what, "gemm %s rows %zu out %zu k %zu bias %d threads %d", mh_compute_name(compute), rows,
             n_out, kin, bias, threads);
    if (check_status(what, mh_pack_matrix(k, compute, w, bias ? b : NULL, (int)n_out, (int)kin, &pm), MH_OK)) {
        mh_gemm_packed(k, threads, rows, x, ldx, &pm, y, ldy);
        if (compute == MH_COMPUTE_BF16) { /* the operands the bf16 products take */
            oracle_round_bf16_all(xd, rows * kin);
            oracle_round_bf16_all(w, n_out * kin);
        }
        oracle_linear(xd, (int)rows, (int)kin, w, bias ? b : NULL, (int)n_out, want);
        int pad_ok = 1;
        for (size_t i = 0; i < rows; i++) {
            for (size_t j = 0; j < n_out; j++) got[i * n_out + j] = y[i * ldy + j];
            pad_ok &= y[i * ldy + n_out] == 777.0f && y[i * ldy + n_out + 1] == 777.0f;
        }
        check_close(what, got, want, rows * n_out, 2 * FLT_EPSILON * (double)(kin + 1), INFINITY);
        check_true("gemm writes nothing past n_out", pad_ok);
        if (compute == MH_COMPUTE_BF16) rounded_rows(k, threads, x, ldx, rows, kin, &pm, y, ldy);
        mh_packed_matrix_free(&pm);
    }
    free(x), free(xd), free(w), free(b), free(y), free(want), free(got);
}

int main(void) {
    if (mh_test_bf16_gemm_skip()) return 77;
    mh_isa isa;
    const mh_status st = mh_isa_default(&isa);
    if (st == MH_ERR_ISA_UNAVAILABLE) return 77; /* MH_ISA names an ISA this machine lacks */
    if (st != MH_OK) return 1;
    const mh_kernels* k = mh_dispatch_table(isa);
    printf("test_gemm on %s\n", mh_isa_name(isa));
    test_rng r;
    rng_seed(&r, 1);
    const size_t nr = k->gemm_nr;
    const size_t outs[] = {1, nr - 1, nr, nr + 1, 2 * nr + 1, 5 * nr + 1};
    const size_t ks[] = {1, 7, 31, 300, 513};
    const mh_compute modes[] = {MH_COMPUTE_F32, MH_COMPUTE_BF16};
    const int emulated = test_emulated();
    for (size_t c = 0; c < 2; c++) {
        if (!mh_compute_supported(isa, modes[c])) {
            printf("bf16: %s has no bf16 compute here, f32 only\n", mh_isa_name(isa));
            continue;
        }
        const size_t mr = mh_kernels_gemm_mr(k, modes[c]);
        const size_t rows[] = {1, mr - 1, mr, mr + 1, 2 * mr + 1, 49, 97, 250};
        for (size_t i = 0; i < (emulated ? 6 : sizeof rows / sizeof *rows); i++) /* emulated: up to 49 */
            for (size_t j = 0; j < sizeof outs / sizeof *outs; j++)
                for (size_t l = 0; l < sizeof ks / sizeof *ks; l++)
                    if (rows[i] > 0)
                        one(k, modes[c], &r, rows[i], outs[j], ks[l], (int)((i + j + l) % 2), 1 + (int)(l % 2));
        /* 8.4 MB of x, past GEMM_X_BUDGET: five row blocks in two super-blocks, the last short */
        one(k, modes[c], &r, 1000, nr + 1, 2100, 1, 2);
    }
    return test_exit_code("test_gemm");
}
