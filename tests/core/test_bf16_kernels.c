/*
 * The bf16 compute slots (MH_KERNEL_LIST_BF16) of the active ISA's table (MH_ISA selects it),
 * against naive references; skipped (exit 77) where the ISA has no bf16 kernels or the CPU
 * lacks the instructions.
 *  - pack_kt_bf16 / pack_v_bf16 / rows_bf16: bitwise the naive k-pair layout (rows_bf16: the
 *    rows, row-major) of the source's f32 values (f16 widened, int8 scale * q in f32) rounded
 *    to nearest even, bf16 storage copied (a signalling NaN too); zero pads (keys past cols, an odd d's or cols' pad
 *    element, columns past dv); nothing written past the packed extent; f32 sources hold
 *    rounding ties, subnormals, infinities and NaNs among their values;
 *  - round_bf16: bitwise the scalar round-to-nearest-even (subnormals rounded, NaN quieted)
 *    at every length up to 300, with special values in some vectors and not in others;
 *    nothing written past n;
 *  - softmax_tile_bf16: s, m, l and alpha bitwise the f32 slot's (softmax_tile), and pb bitwise
 *    their P rounded by the scalar round-to-nearest-even, for rows across the step's chunk of
 *    rows, widths across vectors, dropped keys (-inf), rows of only -inf and a NaN score;
 *    nothing written to pb past each row's cols;
 *  - gemm_bf16 / gemm_acc_bf16: against double sums of the bf16 operands (each product exact,
 *    f32 accumulation: |err| <= eps32 * k * sum |a b|), m = 1..gemm_mr_bf16, n around NR, odd and even k;
 *    with odd k a NaN in A's and the panel's pad element changes nothing; only the m x n
 *    corner of c is written; with a fetch, the same bits, and the fetch advanced by one line
 *    per k-pair (to its end, not past it).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_gemm_choice.h"
#include "check.h"
#include "fetch_check.h"
#include "dispatch/dispatch.h"
#include "kernels/scalar/convert_scalar.h"
#include "rng.h"

static const mh_kernels* K;
static test_rng R;

#define POISON 0xabcdu
#define GUARD 64 /* elements past the packed extent that must stay POISON */

/* Values whose rounding to bf16 takes care: ties (to even, down and up), subnormals (one
 * rounding up to the smallest normal, a tie, the smallest), the largest finite (to inf),
 * infinities and NaNs (quiet, signalling, with a payload, negative). */
static const uint32_t SPECIAL[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0xbf808001u, 0x007fc000u,
                                   0x00008000u, 0x00018000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu,
                                   0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0x7fa12345u, 0xffc00000u};
#define N_SPECIAL (sizeof SPECIAL / sizeof SPECIAL[0])

static float special(size_t i) {
    float x;
    memcpy(&x, &SPECIAL[i % N_SPECIAL], sizeof x);
    return x;
}

/* rows x ld elements of dtype with their f32 values in exact; int8 scales one per row; every
 * 13th f32 value a special one, and every 13th bf16 one the top half of one (a signalling NaN
 * among them, which bf16 storage must keep as it is). */
static void* source(mh_dtype dt, size_t rows, size_t ld, float* exact, float* scale) {
    void* buf = malloc(rows * ld * 4 + 4);
    for (size_t r = 0; r < rows; r++) scale[r] = rng_uniform(&R, 0.005f, 0.02f);
    for (size_t i = 0; i < rows * ld; i++) {
        const int sp = (dt == MH_DTYPE_F32 || dt == MH_DTYPE_BF16) && i % 13 == 5;
        const float x = sp ? special(i / 13) : rng_uniform(&R, -2, 2);
        switch (dt) {
        case MH_DTYPE_F16: ((uint16_t*)buf)[i] = mh_f32_to_f16_rne(x), exact[i] = mh_f16_to_f32(((uint16_t*)buf)[i]); break;
        case MH_DTYPE_BF16:
            ((uint16_t*)buf)[i] = sp ? (uint16_t)(SPECIAL[i / 13 % N_SPECIAL] >> 16) : mh_f32_to_bf16_rne(x);
            exact[i] = mh_bf16_to_f32(((uint16_t*)buf)[i]);
            break;
        case MH_DTYPE_I8: ((int8_t*)buf)[i] = (int8_t)rng_int(&R, -127, 127), exact[i] = scale[i / ld] * (float)((int8_t*)buf)[i]; break;
        default: ((float*)buf)[i] = x, exact[i] = x;
        }
    }
    return buf;
}

/* Element i of a source as its bf16: bf16 storage as stored, the others' values rounded. */
static uint16_t want_bf16(mh_dtype dt, const void* src, const float* exact, size_t i) {
    return dt == MH_DTYPE_BF16 ? ((const uint16_t*)src)[i] : mh_f32_to_bf16_rne(exact[i]);
}

static void test_packs(mh_dtype dt, size_t cols, size_t d) {
    const size_t nr = K->gemm_nr, ld = d + 3, panels_k = (cols + nr - 1) / nr, dpairs = (d + 1) / 2;
    const size_t panels_v = (d + nr - 1) / nr, cpairs = (cols + 1) / 2;
    float* exact = malloc(cols * ld * sizeof(float));
    float* scale = malloc(cols * sizeof(float));
    void* src = source(dt, cols, ld, exact, scale);
    const mh_rows rows = {.data = src, .ld = (ptrdiff_t)ld, .dtype = dt, .scale = dt == MH_DTYPE_I8 ? scale : NULL, .ld_scale = 1};
    const size_t nk = panels_k * dpairs * nr * 2, nv = panels_v * cpairs * nr * 2, nrows = cols * d;
    const size_t most = nk > nv ? (nk > nrows ? nk : nrows) : (nv > nrows ? nv : nrows);
    uint16_t* got = malloc((most + GUARD) * sizeof(uint16_t));
    char what[120];
    for (size_t i = 0; i < nrows + GUARD; i++) got[i] = POISON;
    K->rows_bf16(cols, d, &rows, got);
    int rows_ok = 1;
    for (size_t i = 0; i < nrows; i++) rows_ok &= got[i] == want_bf16(dt, src, exact, i / d * ld + i % d);
    for (size_t i = nrows; i < nrows + GUARD; i++) rows_ok &= got[i] == POISON;
    snprintf(what, sizeof what, "rows_bf16 dt%d cols %zu d %zu", (int)dt, cols, d);
    check_true(what, rows_ok);
    for (int v = 0; v < 2; v++) {
        const size_t n = v ? nv : nk;
        for (size_t i = 0; i < n + GUARD; i++) got[i] = POISON;
        if (v) K->pack_v_bf16(cols, d, &rows, got);
        else K->pack_kt_bf16(cols, d, &rows, got);
        int ok = 1;
        for (size_t i = 0; i < n; i++) {
            const size_t pair = i / 2 % (nr * (v ? cpairs : dpairs)) / nr, j = i / 2 % nr, p = i / 2 / (nr * (v ? cpairs : dpairs));
            const size_t key = v ? 2 * pair + i % 2 : p * nr + j, dd = v ? p * nr + j : 2 * pair + i % 2;
            const uint16_t want = key < cols && dd < d ? want_bf16(dt, src, exact, key * ld + dd) : 0;
            ok &= got[i] == want;
        }
        for (size_t i = n; i < n + GUARD; i++) ok &= got[i] == POISON;
        snprintf(what, sizeof what, "%s dt%d cols %zu d %zu", v ? "pack_v_bf16" : "pack_kt_bf16", (int)dt, cols, d);
        check_true(what, ok);
    }
    free(exact), free(scale), free(src), free(got);
}

/* round_bf16 of the first len of x (normal values, a special one at every 37th: vectors of
 * 32 with and without one) against the scalar RNE, bitwise, for every len. */
static void test_round(void) {
    enum { N = 300 };
    float x[N];
    uint16_t want[N], got[N + 1];
    for (size_t i = 0; i < N; i++) {
        x[i] = i % 37 == 3 ? special(i / 37) : ldexpf(rng_uniform(&R, -1, 1), rng_int(&R, -20, 5));
        want[i] = mh_f32_to_bf16_rne(x[i]);
    }
    int ok = 1, tail_ok = 1;
    for (size_t len = 1; len <= N; len++) {
        for (size_t i = 0; i <= N; i++) got[i] = POISON;
        K->round_bf16(len, x, got);
        ok &= memcmp(got, want, len * sizeof(uint16_t)) == 0;
        for (size_t i = len; i <= N; i++) tail_ok &= got[i] == POISON;
    }
    check_true("round_bf16 equals scalar RNE bitwise", ok);
    check_true("round_bf16 writes nothing past n", tail_ok);
    uint16_t all[N_SPECIAL];
    float xs[N_SPECIAL];
    for (size_t i = 0; i < N_SPECIAL; i++) xs[i] = special(i);
    K->round_bf16(N_SPECIAL, xs, all);
    int sp_ok = 1;
    for (size_t i = 0; i < N_SPECIAL; i++) sp_ok &= all[i] == mh_f32_to_bf16_rne(xs[i]);
    check_true("round_bf16 of the special values in one vector", sp_ok);
}

/* softmax_tile_bf16 against softmax_tile on a copy, its P rounded (header). */
static void test_softmax(size_t rows, size_t cols) {
    const size_t lds = cols + 5;
    float* s = malloc(rows * lds * sizeof(float));
    float* s2 = malloc(rows * lds * sizeof(float));
    uint16_t* pb = malloc(rows * lds * sizeof(uint16_t));
    float m[40], l[40], a[40], m2[40], l2[40], a2[40];
    for (size_t r = 0; r < rows; r++) {
        m[r] = r % 3 == 0 ? -INFINITY : rng_uniform(&R, -2, 2), l[r] = rng_uniform(&R, 0.5f, 3), a[r] = 0;
        for (size_t c = 0; c < lds; c++) {
            const int dropped = r % 5 == 1 || (r % 4 == 2 && c % 3 == 0);
            s[r * lds + c] = dropped ? -INFINITY : rng_uniform(&R, -8, 8);
        }
        if (r == 7 && cols > 2) s[r * lds + cols / 2] = NAN;
    }
    memcpy(s2, s, rows * lds * sizeof(float));
    memcpy(m2, m, sizeof m), memcpy(l2, l, sizeof l), memcpy(a2, a, sizeof a);
    for (size_t i = 0; i < rows * lds; i++) pb[i] = POISON;
    K->softmax_tile(rows, cols, s2, lds, m2, l2, a2);
    K->softmax_tile_bf16(rows, cols, s, lds, pb, m, l, a);
    int same = memcmp(s, s2, rows * lds * sizeof(float)) == 0, pb_ok = 1, past_ok = 1;
    for (size_t r = 0; r < rows; r++) {
        same &= memcmp(&m[r], &m2[r], sizeof(float)) == 0 && memcmp(&l[r], &l2[r], sizeof(float)) == 0 &&
                memcmp(&a[r], &a2[r], sizeof(float)) == 0;
        for (size_t c = 0; c < lds; c++)
            if (c < cols) pb_ok &= pb[r * lds + c] == mh_f32_to_bf16_rne(s2[r * lds + c]);
            else past_ok &= pb[r * lds + c] == POISON;
    }
    char what[96];
    snprintf(what, sizeof what, "softmax_tile_bf16 rows %zu cols %zu: the f32 step's bits", rows, cols);
    check_true(what, same);
    snprintf(what, sizeof what, "softmax_tile_bf16 rows %zu cols %zu: P rounded into pb", rows, cols);
    check_true(what, pb_ok && past_ok);
    free(s), free(s2), free(pb);
}

static float bf16_value(uint16_t* b) {
    *b = mh_f32_to_bf16_rne(rng_uniform(&R, -2, 2));
    return mh_bf16_to_f32(*b);
}

static void test_gemm(size_t m, size_t n, size_t k, int acc) {
    const size_t nr = K->gemm_nr, lda = (k + 1) / 2 * 2 + 2, pairs = (k + 1) / 2, ldc = nr + 3;
    uint16_t* a = malloc(m * lda * sizeof(uint16_t));
    uint16_t* panel = malloc(pairs * nr * 2 * sizeof(uint16_t));
    float* av = malloc(m * lda * sizeof(float));
    float* bv = malloc(pairs * 2 * nr * sizeof(float));
    for (size_t i = 0; i < m * lda; i++) av[i] = bf16_value(&a[i]);
    for (size_t kk = 0; kk < 2 * pairs; kk++)
        for (size_t j = 0; j < nr; j++) bv[kk * nr + j] = bf16_value(&panel[((kk / 2) * nr + j) * 2 + kk % 2]);
    if (k % 2) { /* the pad elements: ignored even as NaN */
        for (size_t r = 0; r < m; r++) a[r * lda + k] = 0x7fc0;
        for (size_t j = 0; j < nr; j++) panel[((k / 2) * nr + j) * 2 + 1] = 0x7fc0;
    }
    enum { ROWS = MH_GEMM_MR_MAX + 1 };
    float c[ROWS * 80], alpha[ROWS]; /* room for (MR + 1) rows of NR + 3 with NR < 77 */
    if (!check_true("the test's c fits the tile", m < ROWS && ldc <= 80)) return;
    const float sentinel = -12345.0f;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) c[i] = i < (m + 1) * ldc ? rng_uniform(&R, -1, 1) : sentinel;
    for (size_t r = 0; r < m; r++) alpha[r] = rng_uniform(&R, 0.5f, 1.0f);
    float before[ROWS * 80], c2[ROWS * 80];
    memcpy(before, c, sizeof c);
    memcpy(c2, c, sizeof c);
    if (acc) K->gemm_acc_bf16(m, n, k, a, lda, panel, alpha, c, ldc, NULL);
    else K->gemm_bf16(m, n, k, a, lda, panel, c, ldc, NULL);
    /* with a fetch: the same bits, and the fetch one line on per k-pair (dense or not) */
    static char lines[64 * FETCH_STRIDE];
    const size_t rows = k > 40 ? 4 : 64;
    mh_fetch f = test_fetch(lines, rows);
    f.how |= k % 2 ? MH_FETCH_DENSE : 0;
    if (acc) K->gemm_acc_bf16(m, n, k, a, lda, panel, alpha, c2, ldc, &f);
    else K->gemm_bf16(m, n, k, a, lda, panel, c2, ldc, &f);
    const int fetch_ok = memcmp(c, c2, sizeof c) == 0 && fetch_advanced(&f, lines, rows, (k + 1) / 2);
    int ok = 1;
    for (size_t r = 0; r < m + 1; r++)
        for (size_t j = 0; j < ldc; j++) {
            const size_t i = r * ldc + j;
            if (r >= m || j >= n) {
                ok &= memcmp(&c[i], &before[i], sizeof(float)) == 0;
                continue;
            }
            double want = acc ? (double)alpha[r] * before[i] : 0.0, mag = fabs(want);
            for (size_t kk = 0; kk < k; kk++) {
                want += (double)av[r * lda + kk] * bv[kk * nr + j];
                mag += fabs((double)av[r * lda + kk] * bv[kk * nr + j]);
            }
            ok &= fabs(c[i] - want) <= 2 * FLT_EPSILON * (double)(k + 2) * mag + 1e-30;
        }
    char what[160];
    snprintf(what, sizeof what, "%s m %zu n %zu k %zu", acc ? "gemm_acc_bf16" : "gemm_bf16", m, n, k);
    check_true(what, ok);
    snprintf(what, sizeof what, "%s m %zu n %zu k %zu: a fetch changes no bit and advances a line per k-pair",
             acc ? "gemm_acc_bf16" : "gemm_bf16", m, n, k);
    check_true(what, fetch_ok);
    free(a), free(panel), free(av), free(bv);
}

int main(void) {
    if (mh_test_bf16_gemm_skip()) return 77;
    mh_isa isa;
    if (mh_isa_default(&isa) != MH_OK) return 77;
    K = mh_dispatch_table(isa);
    if (!K || !mh_compute_supported(isa, MH_COMPUTE_BF16)) {
        printf("skipped: %s has no bf16 compute here\n", mh_isa_name(isa));
        return 77;
    }
    rng_seed(&R, 41);
    const size_t nr = K->gemm_nr, tk = K->attn_kv_tile, tkp = K->attn_prefill_kv_tile;
    const mh_dtype dts[] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16, MH_DTYPE_I8};
    const size_t cols[] = {1, nr - 1 ? nr - 1 : 1, nr, nr + 1, tk - 1, tk, tkp + 1}, ds[] = {1, 2, 7, 31, 33, 64, 65, 129};
    test_round();
    const size_t srows[] = {1, 6, 32, 33, 40}, scols[] = {1, 3, 16, 17, 64, 65, 130, 513};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 8; j++) test_softmax(srows[i], scols[j]);
    for (int t = 0; t < 4; t++)
        for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
            for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) test_packs(dts[t], cols[ci], ds[di]);
    /* n = NR / 2 and one more: the last width of a half-width body (gemm_switch.h) and the first past it */
    const size_t ns[] = {1, nr / 2 ? nr / 2 : 1, nr / 2 + 1, nr - 1 ? nr - 1 : 1, nr}, ks[] = {1, 2, 3, 64, 127, 128};
    for (size_t m = 1; m <= K->gemm_mr_bf16; m++)
        for (size_t ni = 0; ni < 5; ni++)
            for (size_t ki = 0; ki < 6; ki++)
                for (int acc = 0; acc < 2; acc++) test_gemm(m, ns[ni], ks[ki], acc);
    return test_exit_code("test_bf16_kernels");
}
