/*
 * Every slot of the kernel list (src/kernels/kernel_list.h) in the active ISA's table (MH_ISA
 * selects it) against naive references, on shapes generated from that table's own tile sizes:
 * 1, tile - 1, tile, tile + 1, primes.
 *  - pack_kt / pack_v: pure data movement, so bitwise equal to a naive layout, zero padding
 *    included; f16/bf16 sources widened exactly, int8 ones to scale * q (one f32 rounding);
 *  - every K/V slot on every storage dtype, int8 included (rows with scales ld_scale apart),
 *    against the dequantised values;
 *  - qk_direct / pv_direct: against double dot products, tolerance eps32 * reduction length;
 *    qk_direct's scores of a key bitwise the same wherever it sits in the call (each key alone);
 *    pv_direct split into two calls at each multiple of MH_PV_GROUP bitwise one call, and no
 *    key leaving alpha * o bitwise;
 *  - qk_heads / pv_heads: on token-major rows of up to 13 heads, bitwise qk_direct / pv_direct
 *    on each head alone (one query row), qk_heads also against double; no key, scratch
 *    contents that must not matter, nothing written past cols / dv;
 *  - gemm / gemm_acc: with and without a bias / the rescale-and-accumulate epilogue, against
 *    double; write nothing outside the m x n corner; with a fetch, the same bits, and the
 *    fetch advanced by one line per MH_FETCH_EVERY values of k, or per value of k with
 *    MH_FETCH_DENSE (to its end, not past it);
 *  - scale_row: x * a bitwise (one product per element), in place, nothing past n;
 *  - add_row: y + x bitwise (one sum per element), nothing past n;
 *  - v_nonfinite: 0 on finite blocks; 1 for a NaN, +inf or -inf (int8: in a row's scale) at
 *    every position inside the block, 0 for one just outside it (rows and columns), every dtype;
 *  - softmax_tile: against a double online-softmax step, including -inf entries, all -inf
 *    rows, and rows whose running max is still -inf; a NaN score at any position and width
 *    leaves a NaN state (l NaN, m not -inf); its exp (exp(s - 0) on a row whose max is 0)
 *    within 1 ulp of double exp on a sweep of the floats in [-105, 0], subnormal results
 *    included, and exactly 0 below;
 *  - head_mix: against double sums of the contract, with and without the per-head input
 *    scale and the static matrix; an all-zero key column (masked probabilities) composes to
 *    exactly 0; nothing is written past `cols`;
 *  - f32_to_f16 / f32_to_bf16: bitwise equal to the scalar round-to-nearest-even, including
 *    ties, subnormals, overflow, infinities and NaN;
 *  - rope: against a double QK-norm and rotation by the cos/sin of the same f32 angle, both
 *    layouts, partial and full rotary, with and without norm, pair counts around the vector
 *    length and the kernel's cos/sin chunk; dims past rot bitwise untouched without norm;
 *    nothing written between rows (ldx > heads * d);
 *  - f32_to_i8: scale = max|x| / 127 and q = x / scale rounded to nearest even, bitwise; the
 *    round trip |x - scale * q| <= scale / 2; zero rows, rows with NaN / inf at any position;
 *    nothing written past n.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fetch_check.h"
#include "dispatch/dispatch.h"
#include "kernels/scalar/convert_scalar.h"
#include "oracle.h"
#include "rng.h"
#include "util/dtype.h"

static const mh_kernels* K;
static test_rng R;

#define LD_SCALE 3 /* floats between int8 row scales, so ld_scale is honoured */

/* A K/V-like source [rows][ld] in dtype, with its exact (dequantised) f32 values in `exact`
 * and its rows as the kernels read them in *rows_out (int8: scales in [0.005, 0.02], LD_SCALE
 * apart, whose buffer the caller frees with the source: it follows the data). */
static void* source(mh_dtype dt, size_t rows, size_t ld, float* exact, mh_rows* rows_out) {
    const size_t data_bytes = (rows * ld + 1) * 4;
    unsigned char* buf = malloc(data_bytes + rows * LD_SCALE * sizeof(float));
    float* scale = dt == MH_DTYPE_I8 ? (float*)(void*)(buf + data_bytes) : NULL;
    for (size_t r = 0; scale && r < rows; r++) scale[r * LD_SCALE] = rng_uniform(&R, 0.005f, 0.02f);
    for (size_t i = 0; i < rows * ld; i++) {
        const float x = rng_uniform(&R, -2, 2);
        if (dt == MH_DTYPE_F32) ((float*)(void*)buf)[i] = x, exact[i] = x;
        else if (dt == MH_DTYPE_I8) {
            const int8_t q = (int8_t)rng_int(&R, -127, 127);
            ((int8_t*)buf)[i] = q;
            exact[i] = (float)((double)scale[i / ld * LD_SCALE] * q); /* exact in double, one rounding */
        } else {
            const uint16_t h = dt == MH_DTYPE_F16 ? mh_f32_to_f16_rne(x) : mh_f32_to_bf16_rne(x);
            ((uint16_t*)(void*)buf)[i] = h;
            exact[i] = (float)oracle_load(buf, dt, (ptrdiff_t)i);
        }
    }
    *rows_out = (mh_rows){.data = buf, .ld = (ptrdiff_t)ld, .dtype = dt, .scale = scale, .ld_scale = LD_SCALE};
    return buf;
}

/* pack_kt (v = 0) or pack_v (v = 1) of a cols x d tile, and 16 floats after it untouched. */
static void pack(int v, size_t cols, size_t d, mh_dtype dt) {
    const size_t nr = K->gemm_nr, ld = d + 3;
    const size_t n = v ? (d + nr - 1) / nr * cols * nr : (cols + nr - 1) / nr * d * nr;
    float* exact = malloc(sizeof(float) * cols * ld);
    mh_rows rows;
    void* src = source(dt, cols, ld, exact, &rows);
    float *got = malloc(sizeof(float) * (n + 16)), *want = calloc(n + 16, sizeof(float));
    for (size_t i = 0; i < n + 16; i++) got[i] = 1234.5f;
    for (size_t c = 0; c < cols; c++)
        for (size_t dd = 0; dd < d; dd++)
            want[v ? ((dd / nr) * cols + c) * nr + dd % nr : ((c / nr) * d + dd) * nr + c % nr] = exact[c * ld + dd];
    for (size_t i = n; i < n + 16; i++) want[i] = 1234.5f; /* must stay untouched */
    if (v) K->pack_v(cols, d, &rows, got);
    else K->pack_kt(cols, d, &rows, got);
    char what[96];
    snprintf(what, sizeof what, "%s cols %zu d %zu dtype %d", v ? "pack_v" : "pack_kt", cols, d, (int)dt);
    check_bitwise(what, got, want, n + 16);
    free(exact), free(src), free(got), free(want);
}

static void qk_direct(size_t rows, size_t cols, size_t d, mh_dtype dt) {
    const size_t ld = d + 1, lds = cols + 2;
    float* exact = malloc(sizeof(float) * cols * ld);
    mh_rows kr;
    void* src = source(dt, cols, ld, exact, &kr);
    float* q = malloc(sizeof(float) * rows * d);
    rng_fill(&R, q, rows * d, -1, 1);
    float* s = malloc(sizeof(float) * rows * lds);
    double* want = malloc(sizeof(double) * rows * cols);
    float* got = malloc(sizeof(float) * rows * cols);
    K->qk_direct(rows, cols, d, q, d, &kr, s, lds);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            double acc = 0;
            for (size_t dd = 0; dd < d; dd++) acc += (double)q[r * d + dd] * exact[c * ld + dd];
            want[r * cols + c] = acc, got[r * cols + c] = s[r * lds + c];
        }
    char what[96];
    snprintf(what, sizeof what, "qk_direct rows %zu cols %zu d %zu dtype %d", rows, cols, d, (int)dt);
    check_close(what, got, want, rows * cols, 4 * FLT_EPSILON * 2 * (double)d, INFINITY);
    /* A key's scores do not depend on where it sits in the call (the driver scores a tile in
     * one call or in chunks and relies on the same bits): each key alone gives them. */
    float* alone = malloc(sizeof(float) * rows * cols);
    for (size_t c = 0; c < cols; c++) {
        mh_rows one = kr;
        one.data = mh_dtype_at(kr.data, dt, (ptrdiff_t)(c * ld));
        if (one.scale) one.scale += c * LD_SCALE;
        float sc[8]; /* rows < attn_direct_rows (at most 6) */
        K->qk_direct(rows, 1, d, q, d, &one, sc, 1);
        for (size_t r = 0; r < rows; r++) alone[r * cols + c] = sc[r];
    }
    snprintf(what, sizeof what, "qk_direct rows %zu cols %zu d %zu dtype %d: each key alone", rows, cols, d, (int)dt);
    check_bitwise(what, alone, got, rows * cols);
    free(exact), free(src), free(q), free(s), free(want), free(got), free(alone);
}

/* pv_direct: o = alpha * o + P.V, P in [0, 1) */
static void pv_direct(size_t rows, size_t cols, size_t d, mh_dtype dt) {
    const size_t ld = d + 1, lds = cols + 2, ldo = d + 5;
    float* exact = malloc(sizeof(float) * cols * ld);
    mh_rows vr;
    void* src = source(dt, cols, ld, exact, &vr);
    float* p = malloc(sizeof(float) * rows * lds);
    float* o = malloc(sizeof(float) * rows * ldo);
    float alpha[8];
    rng_fill(&R, p, rows * lds, 0, 1);
    rng_fill(&R, o, rows * ldo, -1, 1);
    rng_fill(&R, alpha, 8, 0, 1);
    double* wo = malloc(sizeof(double) * rows * ldo);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < ldo; j++) {
            double acc = (double)o[r * ldo + j];
            if (j < d) {
                acc *= alpha[r];
                for (size_t c = 0; c < cols; c++) acc += (double)p[r * lds + c] * exact[c * ld + j];
            }
            wo[r * ldo + j] = acc; /* columns past d must be untouched */
        }
    float* before = malloc(sizeof(float) * rows * ldo);
    memcpy(before, o, sizeof(float) * rows * ldo);
    K->pv_direct(rows, cols, d, p, lds, &vr, alpha, o, ldo);
    char what[112];
    snprintf(what, sizeof what, "pv_direct rows %zu cols %zu dv %zu dtype %d", rows, cols, d, (int)dt);
    check_close(what, o, wo, rows * ldo, 4 * FLT_EPSILON * 2 * (double)(cols + 1), INFINITY);
    /* The contract's groups (MH_PV_GROUP keys from the first): the keys split into two calls at
     * any multiple of the group, the second with alpha 1, give the same bits as one call (the
     * driver's turns, chunks and cuts rely on it); no key at all leaves alpha * o. */
    static const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float* split = malloc(sizeof(float) * rows * ldo);
    for (size_t at = MH_PV_GROUP; at < cols; at += MH_PV_GROUP) {
        memcpy(split, before, sizeof(float) * rows * ldo);
        mh_rows rest = vr;
        rest.data = mh_dtype_at(vr.data, dt, (ptrdiff_t)(at * ld));
        if (rest.scale) rest.scale += at * LD_SCALE;
        K->pv_direct(rows, at, d, p, lds, &vr, alpha, split, ldo);
        K->pv_direct(rows, cols - at, d, p + at, lds, &rest, ones, split, ldo);
        snprintf(what, sizeof what, "pv_direct rows %zu cols %zu dv %zu dtype %d: split at key %zu", rows, cols, d,
                 (int)dt, at);
        check_bitwise(what, split, o, rows * ldo);
    }
    memcpy(split, before, sizeof(float) * rows * ldo);
    K->pv_direct(rows, 0, d, p, lds, &vr, alpha, split, ldo);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < d; j++) before[r * ldo + j] *= alpha[r];
    snprintf(what, sizeof what, "pv_direct rows %zu dv %zu dtype %d: no key leaves alpha * o", rows, d, (int)dt);
    check_bitwise(what, split, before, rows * ldo);
    free(exact), free(src), free(p), free(o), free(wo), free(before), free(split);
}

/* The rows of `heads` heads laid out token-major, as an engine's cache: key c of head h is
 * source row c * heads + h; heads[h] describes head h's rows (and scales). */
static void* heads_source(mh_dtype dt, size_t heads, size_t cols, size_t ld, float* exact, mh_rows* rows) {
    mh_rows all;
    void* buf = source(dt, cols * heads + 1, ld, exact, &all); /* + 1: cols 0 still has a buffer */
    for (size_t h = 0; h < heads; h++) {
        rows[h] = all;
        rows[h].data = mh_dtype_at(all.data, dt, (ptrdiff_t)(h * ld));
        rows[h].ld = (ptrdiff_t)(heads * ld);
        if (all.scale) rows[h].scale = all.scale + h * LD_SCALE, rows[h].ld_scale = (ptrdiff_t)(heads * LD_SCALE);
    }
    return buf;
}

#define MAX_HEADS 13

/* qk_heads: bitwise qk_direct on each head alone (one query row), and against double. */
static void qk_heads(size_t heads, size_t cols, size_t d, mh_dtype dt) {
    const size_t ld = d + 1, lds = cols + 2;
    float* exact = malloc(sizeof(float) * (cols * heads + 1) * ld);
    mh_rows kr[MAX_HEADS];
    void* src = heads_source(dt, heads, cols, ld, exact, kr);
    float* q = malloc(sizeof(float) * heads * d);
    rng_fill(&R, q, heads * d, -1, 1);
    float *got = malloc(sizeof(float) * heads * lds + 1), *want = malloc(sizeof(float) * heads * lds + 1);
    double* exact_s = malloc(sizeof(double) * heads * cols + 1);
    float* got_s = malloc(sizeof(float) * heads * cols + 1);
    for (size_t i = 0; i < heads * lds; i++) got[i] = want[i] = 1234.5f; /* columns past cols untouched */
    K->qk_heads(heads, cols, d, q, d, kr, got, lds);
    for (size_t h = 0; h < heads; h++) {
        K->qk_direct(1, cols, d, q + h * d, d, &kr[h], want + h * lds, lds);
        for (size_t c = 0; c < cols; c++) {
            double acc = 0;
            for (size_t dd = 0; dd < d; dd++) acc += (double)q[h * d + dd] * exact[(c * heads + h) * ld + dd];
            exact_s[h * cols + c] = acc, got_s[h * cols + c] = got[h * lds + c];
        }
    }
    char what[112];
    snprintf(what, sizeof what, "qk_heads heads %zu cols %zu d %zu dtype %d", heads, cols, d, (int)dt);
    check_bitwise(what, got, want, heads * lds);
    check_close(what, got_s, exact_s, heads * cols, 4 * FLT_EPSILON * 2 * (double)d, INFINITY);
    free(exact), free(src), free(q), free(got), free(want), free(exact_s), free(got_s);
}

/* pv_heads: bitwise pv_direct on each head alone (one row), columns past dv untouched. */
static void pv_heads(size_t heads, size_t cols, size_t d, mh_dtype dt) {
    const size_t ld = d + 1, ldp = cols + 2, ldo = d + 5;
    float* exact = malloc(sizeof(float) * (cols * heads + 1) * ld);
    mh_rows vr[MAX_HEADS];
    void* src = heads_source(dt, heads, cols, ld, exact, vr);
    float *p = malloc(sizeof(float) * heads * ldp), alpha[MAX_HEADS];
    float *got = malloc(sizeof(float) * heads * ldo), *want = malloc(sizeof(float) * heads * ldo);
    float* acc = malloc(sizeof(float) * heads * d);
    rng_fill(&R, p, heads * ldp, 0, 1);
    rng_fill(&R, got, heads * ldo, -1, 1);
    rng_fill(&R, alpha, MAX_HEADS, 0, 1);
    rng_fill(&R, acc, heads * d, -1e30f, 1e30f); /* the scratch's contents mean nothing */
    memcpy(want, got, sizeof(float) * heads * ldo);
    K->pv_heads(heads, cols, d, p, ldp, vr, alpha, got, ldo, acc);
    for (size_t h = 0; h < heads; h++) K->pv_direct(1, cols, d, p + h * ldp, ldp, &vr[h], alpha + h, want + h * ldo, ldo);
    char what[112];
    snprintf(what, sizeof what, "pv_heads heads %zu cols %zu dv %zu dtype %d", heads, cols, d, (int)dt);
    check_bitwise(what, got, want, heads * ldo);
    free(exact), free(src), free(p), free(got), free(want), free(acc);
}

/* gemm (acc = 0: c = A.panel + bias, with and without a bias) or gemm_acc (acc = 1: the
 * rescale-and-accumulate epilogue), against double; nothing written outside the m x n corner. */
static void gemm_case(int acc_mode, int with_bias, size_t m, size_t n, size_t k) {
    const size_t nr = K->gemm_nr, lda = k + 1, ldc = n + 3;
    float* a = malloc(sizeof(float) * m * lda);
    float* panel = calloc(k * nr, sizeof(float));
    float* c = malloc(sizeof(float) * m * ldc);
    float alpha[16], *bias = malloc(sizeof(float) * nr);
    double* want = malloc(sizeof(double) * m * ldc);
    rng_fill(&R, a, m * lda, -1, 1);
    for (size_t kk = 0; kk < k; kk++) rng_fill(&R, panel + kk * nr, n, -1, 1); /* zero past n */
    rng_fill(&R, c, m * ldc, -1, 1);
    rng_fill(&R, alpha, 16, 0, 1);
    rng_fill(&R, bias, nr, -1, 1);
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < ldc; j++) {
            double acc = c[r * ldc + j];
            if (j < n) {
                acc = acc_mode ? acc * alpha[r] : (with_bias ? bias[j] : 0.0);
                for (size_t kk = 0; kk < k; kk++) acc += (double)a[r * lda + kk] * panel[kk * nr + j];
            }
            want[r * ldc + j] = acc;
        }
    float* c2 = malloc(sizeof(float) * m * ldc);
    memcpy(c2, c, sizeof(float) * m * ldc);
    if (acc_mode) K->gemm_acc(m, n, k, a, lda, panel, alpha, c, ldc, NULL);
    else K->gemm(m, n, k, a, lda, panel, with_bias ? bias : NULL, c, ldc, NULL);
    char what[120];
    snprintf(what, sizeof what, "%s m %zu n %zu k %zu bias %d", acc_mode ? "gemm_acc" : "gemm", m, n, k, with_bias);
    check_close(what, c, want, m * ldc, 4 * FLT_EPSILON * (double)(k + 2), INFINITY);
    /* with a fetch (of fewer lines than the call requests, when k is large): the same bits,
     * and the fetch one line on per MH_FETCH_EVERY values of kk, or per value when dense; an
     * empty one (the kernels' copy of the loop without requests) left as it was */
    static char lines[64 * FETCH_STRIDE];
    for (int mode = 0; mode < 3; mode++) { /* 0: every MH_FETCH_EVERY, 1: dense, 2: empty */
        const size_t rows = mode == 2 ? 0 : k > 40 ? 4 : 64;
        float* c3 = malloc(sizeof(float) * m * ldc);
        memcpy(c3, c2, sizeof(float) * m * ldc);
        mh_fetch f = test_fetch(lines, rows);
        if (mode == 1) f.how |= MH_FETCH_DENSE;
        if (acc_mode) K->gemm_acc(m, n, k, a, lda, panel, alpha, c3, ldc, &f);
        else K->gemm(m, n, k, a, lda, panel, with_bias ? bias : NULL, c3, ldc, &f);
        const size_t every = mode == 1 ? 1 : MH_FETCH_EVERY;
        snprintf(what, sizeof what,
                 "%s m %zu n %zu k %zu bias %d: a fetch of %zu rows keeps the bits, advances k / %zu",
                 acc_mode ? "gemm_acc" : "gemm", m, n, k, with_bias, rows, every);
        check_true(what, memcmp(c, c3, sizeof(float) * m * ldc) == 0 &&
                             fetch_advanced(&f, lines, rows, (k + every - 1) / every));
        free(c3);
    }
    free(a), free(panel), free(c), free(c2), free(bias), free(want);
}

static void softmax(size_t rows, size_t cols) {
    const size_t lds = cols + 1;
    float* s = malloc(sizeof(float) * rows * lds);
    float m[8], l[8], alpha[8];
    double wm[8], wl[8], wa[8];
    double* ws = malloc(sizeof(double) * rows * lds);
    float* s_in = malloc(sizeof(float) * rows * lds);
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < lds; c++) {
            const int kind = rng_int(&R, 0, 5);
            s[r * lds + c] = r == 2 ? -INFINITY : kind == 0 ? -INFINITY : rng_uniform(&R, -80, 80);
        }
        m[r] = r % 3 == 1 ? -INFINITY : rng_uniform(&R, -10, 10); /* some rows still empty */
        l[r] = m[r] == -INFINITY ? 0.0f : rng_uniform(&R, 0.5f, 3);
        double mx = m[r];
        for (size_t c = 0; c < cols; c++) mx = s[r * lds + c] > mx ? s[r * lds + c] : mx;
        if (mx == -INFINITY) {
            wm[r] = m[r], wl[r] = l[r], wa[r] = 1;
            for (size_t c = 0; c < cols; c++) ws[r * lds + c] = 0;
        } else {
            double sum = 0;
            for (size_t c = 0; c < cols; c++) sum += ws[r * lds + c] = exp(s[r * lds + c] - mx);
            wa[r] = exp(m[r] - mx), wl[r] = l[r] * wa[r] + sum, wm[r] = mx;
        }
        ws[r * lds + cols] = s[r * lds + cols]; /* past cols: untouched */
    }
    memcpy(s_in, s, sizeof(float) * rows * lds);
    K->softmax_tile(rows, cols, s, lds, m, l, alpha);
    char what[96];
    snprintf(what, sizeof what, "softmax_tile rows %zu cols %zu", rows, cols);
    int state_ok = 1;
    for (size_t r = 0; r < rows; r++) {
        state_ok &= m[r] == (float)wm[r];
        state_ok &= fabs(l[r] - wl[r]) <= 4 * FLT_EPSILON * (fabs(wl[r]) + cols) &&
                    fabs(alpha[r] - wa[r]) <= 4 * FLT_EPSILON;
        for (size_t c = 0; c <= cols; c++) {
            const double w = ws[r * lds + c];
            if (c == cols) state_ok &= (isinf(w) && isinf(s[r * lds + c])) || s[r * lds + c] == (float)w;
            /* the kernel forms s - m in f32 (rounding |s - m| * eps) before a 1-ulp exp */
            else if (w == 0.0) state_ok &= s[r * lds + c] == 0.0f; /* dropped keys: exactly 0 */
            else state_ok &= fabs(s[r * lds + c] - w) <= 4 * FLT_EPSILON * w * (1 + fabs(s_in[r * lds + c] - wm[r])) + 1e-38;
        }
    }
    check_true(what, state_ok);
    free(s), free(ws), free(s_in);
}

/* f32_to_f16 (bf16 = 0) or f32_to_bf16 (bf16 = 1) against the scalar RNE, bitwise. */
static void conversions(int bf16) {
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e6f,
                                    -1e6f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f, 1e-40f, 3.0e38f,
                                    1.00048828125f, 1.00146484375f, 1.0039062f, 1.01171875f};
    const size_t n = 1000 + sizeof special / sizeof special[0] + 3;
    float* x = malloc(sizeof(float) * n);
    size_t i = 0;
    for (; i < sizeof special / sizeof special[0]; i++) x[i] = special[i];
    x[i++] = INFINITY, x[i++] = -INFINITY, x[i++] = NAN;
    for (; i < n; i++) x[i] = ldexpf(rng_uniform(&R, -1, 1), rng_int(&R, -30, 20));
    uint16_t *h = malloc(2 * (n + 1)), *wh = malloc(2 * n);
    h[n] = 0xBEEF;
    for (size_t j = 0; j < n; j++) wh[j] = bf16 ? mh_f32_to_bf16_rne(x[j]) : mh_f32_to_f16_rne(x[j]);
    const char* what = bf16 ? "f32_to_bf16 equals scalar RNE bitwise" : "f32_to_f16 equals scalar RNE bitwise";
    for (size_t len = 1; len <= n; len += len < 40 ? 1 : 97) {
        (bf16 ? K->f32_to_bf16 : K->f32_to_f16)(len, x, h);
        if (!check_true(what, memcmp(h, wh, 2 * len) == 0)) break;
    }
    check_true(bf16 ? "f32_to_bf16 writes nothing past n" : "f32_to_f16 writes nothing past n", h[n] == 0xBEEF);
    free(x), free(h), free(wh);
}

/* f32_to_i8 of one row of n against the contract computed here (f32 divisions, nearest
 * even), bitwise; the round trip bound; nothing written past n. */
static int quantise_row(size_t n, const float* x) {
    int8_t q[300];
    float scale = -1.0f;
    memset(q, 0x5a, sizeof q);
    K->f32_to_i8(n, x, q, &scale);
    float mx = 0.0f;
    int finite = 1;
    for (size_t i = 0; i < n; i++) finite &= isfinite(x[i]) != 0, mx = fmaxf(mx, fabsf(x[i]));
    const float want = finite ? mx / 127.0f : NAN;
    int ok = finite ? scale == want : isnan(scale) != 0;
    for (size_t i = 0; i < n; i++) {
        const float r = finite && want > 0.0f ? fminf(fmaxf(nearbyintf(x[i] / want), -127.0f), 127.0f) : 0.0f;
        ok &= q[i] == (int8_t)r;
        /* the round trip, in double: half a step, and the f32 division's rounding of x / scale */
        if (finite) ok &= fabs((double)x[i] - (double)scale * q[i]) <= (double)scale * (0.5 + 128 * FLT_EPSILON);
    }
    for (size_t i = n; i < sizeof q; i++) ok &= q[i] == 0x5a;
    return ok;
}

static void test_f32_to_i8(void) {
    float x[256];
    const size_t ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 131, 256};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        const size_t n = ns[k];
        char what[64];
        int ok = 1;
        for (int rep = 0; rep < 20; rep++) { /* random magnitudes, values on exact ties included */
            const float amp = ldexpf(1.0f, rng_int(&R, -20, 20));
            for (size_t i = 0; i < n; i++) x[i] = rng_uniform(&R, -amp, amp);
            if (rep % 4 == 1) /* the max is 127 steps of a power of two, the others half-steps: ties */
                for (size_t i = 0; i < n; i++) x[i] = ldexpf(i == n / 2 ? 127.0f : (float)rng_int(&R, -126, 126) + 0.5f, -3);
            ok &= quantise_row(n, x);
        }
        memset(x, 0, sizeof x);
        ok &= quantise_row(n, x); /* all zero: scale 0, q 0 */
        for (size_t at = 0; at < n; at++) /* one NaN or inf anywhere: scale NaN, q 0 */
            for (int kind = 0; kind < 3; kind++) {
                for (size_t i = 0; i < n; i++) x[i] = rng_uniform(&R, -1, 1);
                x[at] = kind == 0 ? NAN : kind == 1 ? INFINITY : -INFINITY;
                ok &= quantise_row(n, x);
            }
        snprintf(what, sizeof what, "f32_to_i8 n %zu: contract, round trip, bounds", n);
        check_true(what, ok);
    }
}

static float* randoms(size_t n) {
    float* x = malloc(n * sizeof(float));
    rng_fill(&R, x, n, -1, 1);
    return x;
}

static void compose(size_t g, size_t rank, size_t cols, int scaled, int with_wb) {
    const size_t lda = cols + 3, ldk = cols + 5, ldo = cols + 2, zc = cols / 2;
    float *a = randoms(g * lda), *qw1 = randoms(rank * g), *qw2 = randoms(rank * g), *qdd = randoms(g);
    float *kw1 = randoms(rank * g * ldk), *kw2 = randoms(rank * g * ldk), *kdd = randoms(g * ldk);
    float *wb = randoms(g * g), *ascale = randoms(g), *out = malloc(g * ldo * sizeof(float));
    for (size_t m = 0; m < g; m++) a[m * lda + zc] = 0.0f;
    for (size_t i = 0; i < g * ldo; i++) out[i] = 1234.5f;
    const mh_head_mix_factors f = {g, rank, qw1, qw2, qdd, with_wb ? wb : NULL, kw1, kw2, kdd, ldk};
    K->head_mix(&f, cols, a, lda, scaled ? ascale : NULL, out, ldo);
    int ok = 1, zero = 1, tail = 1;
    for (size_t c = 0; c < cols; c++) {
        double am[64], hq[MH_HEAD_MIX_MAX_RANK] = {0}, hk[MH_HEAD_MIX_MAX_RANK] = {0}, mq[MH_HEAD_MIX_MAX_RANK] = {0},
                                              mk[MH_HEAD_MIX_MAX_RANK] = {0};
        for (size_t m = 0; m < g; m++) am[m] = (double)a[m * lda + c] * (scaled ? ascale[m] : 1.0);
        for (size_t r = 0; r < rank; r++)
            for (size_t m = 0; m < g; m++) {
                hq[r] += qw1[r * g + m] * am[m], mq[r] += fabs(qw1[r * g + m] * am[m]);
                hk[r] += kw1[(r * g + m) * ldk + c] * am[m], mk[r] += fabs(kw1[(r * g + m) * ldk + c] * am[m]);
            }
        for (size_t n = 0; n < g; n++) {
            double want = am[n] * ((1.0 + qdd[n]) + kdd[n * ldk + c]), mag = fabs(want) + fabs(am[n]) * 3;
            for (size_t r = 0; r < rank; r++) {
                want += qw2[r * g + n] * hq[r] + kw2[(r * g + n) * ldk + c] * hk[r];
                mag += fabs(qw2[r * g + n]) * mq[r] + fabs(kw2[(r * g + n) * ldk + c]) * mk[r];
            }
            for (size_t m = 0; with_wb && m < g; m++) want += wb[m * g + n] * am[m], mag += fabs(wb[m * g + n] * am[m]);
            const float got = out[n * ldo + c];
            if (fabs(got - want) > 4 * FLT_EPSILON * (double)(2 * g + 2 * rank + 4) * mag) ok = 0;
            if (c == zc && got != 0.0f) zero = 0;
        }
    }
    for (size_t n = 0; n < g; n++)
        for (size_t c = cols; c < ldo; c++) tail = tail && out[n * ldo + c] == 1234.5f;
    char what[96];
    snprintf(what, sizeof what, "head_mix g %zu R %zu cols %zu scale %d wb %d", g, rank, cols, scaled, with_wb);
    check_true(what, ok);
    check_true("head_mix: a zero key column composes to exactly 0", zero);
    check_true("head_mix writes nothing past cols", tail);
    free(a), free(qw1), free(qw2), free(qdd), free(kw1), free(kw2), free(kdd), free(wb), free(ascale), free(out);
}

/* ---- one test per slot of the kernel list (src/kernels/kernel_list.h): a kernel added to
 * the list does not compile here until it has its test, which then runs on every ISA. */
static const size_t dims[] = {1, 7, 15, 16, 17, 31, 48, 64, 65, 120, 128, 131, 259};

/* The K/V tile shapes: cols from the table's tile sizes, every dtype. */
static void kv_shapes(void (*fn)(size_t rows, size_t cols, size_t d, mh_dtype dt), int per_row) {
    const size_t nr = K->gemm_nr, tk = K->attn_kv_tile;
    const size_t cols[] = {1, nr - 1, nr, nr + 1, tk - 1, tk, 13};
    for (int dt = 0; dt <= MH_DTYPE_I8; dt++)
        for (size_t i = 0; i < sizeof cols / sizeof *cols; i++)
            for (size_t j = 0; j < sizeof dims / sizeof *dims; j += dt == MH_DTYPE_I8 ? 1 : 1 + (size_t)dt)
                for (size_t rows = 1; rows < (per_row ? K->attn_direct_rows : 2); rows++)
                    fn(rows, cols[i], dims[j], (mh_dtype)dt);
}

static void pack_kt_shape(size_t rows, size_t cols, size_t d, mh_dtype dt) { (void)rows, pack(0, cols, d, dt); }
static void pack_v_shape(size_t rows, size_t cols, size_t d, mh_dtype dt) { (void)rows, pack(1, cols, d, dt); }

static void gemm_shapes(int acc_mode) {
    const size_t mr = K->gemm_mr, nr = K->gemm_nr;
    /* n = NR / 2 and one more: the last width of a half-width body (gemm_switch.h) and the first past it */
    const size_t ms[] = {1, mr - 1, mr}, ns[] = {1, nr / 2, nr / 2 + 1, nr - 1, nr}, ks[] = {1, 7, 64, 67};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 5; j++)
            for (size_t l = 0; l < 4; l++)
                for (int b = 0; b <= !acc_mode; b++)
                    if (ms[i] > 0 && ns[j] > 0) gemm_case(acc_mode, b, ms[i], ns[j], ks[l]);
}

static void test_gemm(void) { gemm_shapes(0); }
static void test_gemm_acc(void) { gemm_shapes(1); }
static void test_pack_kt(void) { kv_shapes(pack_kt_shape, 0); }
static void test_pack_v(void) { kv_shapes(pack_v_shape, 0); }
static void test_qk_direct(void) { kv_shapes(qk_direct, 1); }
static void test_pv_direct(void) { kv_shapes(pv_direct, 1); }

/* The kernels across heads: head counts around the x86 kernels' groups of 4 and 8 heads, keys
 * around pv's groups (MH_PV_GROUP), no key, every width and dtype. */
static void heads_shapes(void (*fn)(size_t heads, size_t cols, size_t d, mh_dtype dt)) {
    const size_t heads[] = {1, 3, 4, 5, 8, 9, MAX_HEADS}, cols[] = {0, 1, 13, MH_PV_GROUP + 1, K->attn_kv_tile};
    for (int dt = 0; dt <= MH_DTYPE_I8; dt++)
        for (size_t i = 0; i < sizeof heads / sizeof *heads; i++)
            for (size_t j = 0; j < sizeof cols / sizeof *cols; j++)
                for (size_t l = 0; l < sizeof dims / sizeof *dims; l++) fn(heads[i], cols[j], dims[l], (mh_dtype)dt);
}

static void test_qk_heads(void) { heads_shapes(qk_heads); }
static void test_pv_heads(void) { heads_shapes(pv_heads); }

/* v_nonfinite on block [c_lo, c_hi) x [d_lo, d_hi) of a cols x d source: each bad value
 * (NaN, +inf, -inf, or in an int8 row's scale) at each position of five rows (the block's
 * first and last, the middle one, the rows just outside) and of five columns (the same), all
 * inside the block or on its border, against whether the position is inside. Every column's
 * lane and every row's step are tested that way; each position of the whole block (a scan
 * per position) made this test most of the kernel suite's time under qemu (55 of 70 s at
 * 512-bit SVE). */
static int on_line(size_t x, size_t lo, size_t hi) {
    return x + 1 == lo || x == lo || x == lo + (hi - lo) / 2 || x + 1 == hi || x == hi;
}

static void v_nonfinite_shape(size_t rows, size_t cols, size_t d, mh_dtype dt) {
    (void)rows;
    const size_t ld = d + 2, c_lo = cols / 3, c_hi = cols - cols / 4, d_lo = d / 5, d_hi = d - d / 6;
    float* exact = malloc(sizeof(float) * cols * ld);
    mh_rows v;
    void* src = source(dt, cols, ld, exact, &v);
    int ok = K->v_nonfinite(c_lo, c_hi, d_lo, d_hi, &v) == 0;
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    const size_t c_end = c_hi < cols ? c_hi + 1 : cols, d_end = dt == MH_DTYPE_I8 ? d_lo + 1 : d_hi < ld ? d_hi + 1 : ld;
    for (size_t c = c_lo ? c_lo - 1 : 0; c < c_end; c++)
        for (size_t dd = d_lo ? d_lo - 1 : 0; dd < d_end; dd++)
            for (size_t b = 0; b < 3 && (on_line(c, c_lo, c_hi) || on_line(dd, d_lo, d_hi)); b++) {
                const int inside = c >= c_lo && c < c_hi && (dt == MH_DTYPE_I8 || (dd >= d_lo && dd < d_hi));
                unsigned char* at = (unsigned char*)src + (size_t)mh_dtype_size(dt) * (c * ld + dd);
                float* sc = dt == MH_DTYPE_I8 ? (float*)&v.scale[c * LD_SCALE] : NULL;
                unsigned char keep[4];
                const float keep_scale = sc ? *sc : 0.0f;
                memcpy(keep, at, (size_t)mh_dtype_size(dt));
                if (sc) *sc = bad[b];
                else if (dt == MH_DTYPE_F32) memcpy(at, &bad[b], sizeof(float));
                else {
                    const uint16_t h = dt == MH_DTYPE_F16 ? mh_f32_to_f16_rne(bad[b]) : mh_f32_to_bf16_rne(bad[b]);
                    memcpy(at, &h, sizeof h);
                }
                ok &= K->v_nonfinite(c_lo, c_hi, d_lo, d_hi, &v) == inside;
                memcpy(at, keep, (size_t)mh_dtype_size(dt));
                if (sc) *sc = keep_scale;
            }
    char what[96];
    snprintf(what, sizeof what, "v_nonfinite cols %zu d %zu dtype %d: inside the block only", cols, d, (int)dt);
    check_true(what, ok);
    free(exact), free(src);
}

/* scale_row: y = x * a, bitwise (one f32 product per element), in place too; nothing written
 * past n. */
static void test_scale_row(void) {
    enum { MAXN = 300 };
    float x[MAXN], y[MAXN + 1];
    rng_fill(&R, x, MAXN, -4, 4);
    x[3] = INFINITY, x[5] = NAN, x[7] = -0.0f;
    int ok = 1;
    for (size_t n = 1; n <= MAXN; n += n < 40 ? 1 : 37) {
        const float a = rng_uniform(&R, -2, 2);
        y[n] = 1234.5f;
        K->scale_row(n, x, a, y);
        for (size_t i = 0; i < n; i++) {
            const float w = x[i] * a;
            ok &= memcmp(&y[i], &w, sizeof w) == 0 || (w != w && y[i] != y[i]);
        }
        ok &= y[n] == 1234.5f;
        K->scale_row(n, y, 0.5f, y); /* in place */
        for (size_t i = 0; i < n; i++) {
            const float w = x[i] * a * 0.5f;
            ok &= memcmp(&y[i], &w, sizeof w) == 0 || (w != w && y[i] != y[i]);
        }
    }
    check_true("scale_row: x * a bitwise, in place too, nothing past n", ok);
}

/* add_row: y = y + x, bitwise (one f32 sum per element, infinities and NaN included); nothing
 * written past n. */
static void test_add_row(void) {
    enum { MAXN = 300 };
    float x[MAXN], y0[MAXN], y[MAXN + 1];
    rng_fill(&R, x, MAXN, -4, 4);
    rng_fill(&R, y0, MAXN, -4, 4);
    x[3] = INFINITY, x[5] = NAN, x[7] = -0.0f, y0[7] = -0.0f, y0[11] = -INFINITY;
    int ok = 1;
    for (size_t n = 1; n <= MAXN; n += n < 40 ? 1 : 37) {
        memcpy(y, y0, n * sizeof(float));
        y[n] = 1234.5f;
        K->add_row(n, x, y);
        for (size_t i = 0; i < n; i++) {
            const float w = y0[i] + x[i];
            ok &= memcmp(&y[i], &w, sizeof w) == 0 || (w != w && y[i] != y[i]);
        }
        ok &= y[n] == 1234.5f;
    }
    check_true("add_row: y + x bitwise, nothing past n", ok);
}

static void test_v_nonfinite(void) { kv_shapes(v_nonfinite_shape, 0); }

/* A row whose tile holds a NaN among -inf or finite scores (at every position, with the state
 * empty or not) leaves a NaN state: l is NaN, so the row's output is NaN, never "no key kept". */
static void softmax_nan(size_t cols) {
    float s[300], m, l, alpha;
    int ok = 1;
    for (size_t at = 0; at < cols; at++)
        for (int kind = 0; kind < 4; kind++) { /* others -inf / finite, state empty / not */
            for (size_t c = 0; c < cols; c++) s[c] = kind & 1 ? (float)c * 0.25f : -INFINITY;
            s[at] = NAN;
            m = kind & 2 ? 1.0f : -INFINITY, l = kind & 2 ? 2.0f : 0.0f;
            K->softmax_tile(1, cols, s, cols, &m, &l, &alpha);
            ok &= isnan(l) && m != -INFINITY;
        }
    char what[64];
    snprintf(what, sizeof what, "softmax_tile NaN score, cols %zu: NaN state", cols);
    check_true(what, ok);
}

/* The ulps between f (an f32 result) and w (exact): in units of the f32 spacing at w, the
 * subnormal spacing below FLT_MIN. */
static double ulp_error(float f, double w) {
    const double spacing = w < FLT_MIN ? ldexp(1.0, -149) : ldexp(1.0, ilogb(w) - 23);
    return fabs((double)f - w) / spacing;
}

/* softmax_tile's exp: a first tile (m = -inf) whose max is 0 gives P = exp(s) with s - 0
 * exact, so each P is checked against double exp. The scores step through the float bits
 * of [-105, 0] (every 2039th float: all binades, subnormal results included). */
static void softmax_exp(void) {
    enum { COLS = 4096 };
    float* s = malloc(sizeof(float) * COLS);
    float* x = malloc(sizeof(float) * COLS);
    uint32_t bits = 0x80000000u; /* -0 */
    double worst = 0;
    int ok = 1;
    while (bits <= 0xC2D20000u) { /* -105 */
        size_t n = 0;
        x[n++] = 0.0f; /* the row's max */
        for (; n < COLS && bits <= 0xC2D20000u; n++, bits += 2039u) memcpy(&x[n], &bits, sizeof(float));
        memcpy(s, x, n * sizeof(float));
        float m = -INFINITY, l = 0.0f, alpha;
        K->softmax_tile(1, n, s, n, &m, &l, &alpha);
        for (size_t c = 0; c < n; c++) {
            const double w = exp((double)x[c]), e = ulp_error(s[c], w);
            worst = e > worst ? e : worst;
            ok &= e <= 1.0 && (w >= 0x1p-150 || s[c] == 0.0f);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "softmax_tile exp within 1 ulp of double exp on [-105, 0] (worst %.3f)", worst);
    check_true(what, ok);
    free(s), free(x);
}

static void test_softmax_tile(void) {
    const size_t nr = K->gemm_nr, tk = K->attn_kv_tile;
    const size_t cols[] = {1, nr - 1, nr, nr + 1, tk - 1, tk, 13};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) softmax(7, cols[c]);
    for (size_t c = 1; c <= 70; c++) softmax_nan(c);
    for (size_t c = 72; c <= 256; c += 8) softmax_nan(c);
    softmax_exp();
}

static void test_head_mix(void) {
    const size_t gs[] = {1, 3, 4, 8, 32}, ranks[] = {1, 2, MH_HEAD_MIX_MAX_RANK};
    const size_t ccols[] = {1, 3, 7, 15, 16, 17, 63, 64, 65, 257};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t c = 0; c < sizeof ccols / sizeof *ccols; c++)
                compose(gs[i], ranks[j], ccols[c], (int)((i + c) % 2), (int)((j + c) % 3 == 0));
}

/* One rope call on rows x heads x d (ldx = heads * d + 3) against double; tolerance 16 eps32
 * times |x| + |y| of the pair (norm in f32, 1-ulp cos/sin, two rounded products and a sum). */
static void rope_shape(size_t rows, size_t heads, size_t d, size_t rot, int inter, int norm) {
    const size_t ldx = heads * d + 3, half = rot / 2;
    float *x = malloc(sizeof(float) * rows * ldx), *x0 = malloc(sizeof(float) * rows * ldx);
    float *w = malloc(sizeof(float) * d), *inv = malloc(sizeof(float) * (half + 1));
    double* want = malloc(sizeof(double) * d);
    int64_t* pos = malloc(sizeof(int64_t) * rows);
    for (size_t i = 0; i < rows * ldx; i++) x[i] = x0[i] = rng_uniform(&R, -2, 2);
    for (size_t j = 0; j < d; j++) w[j] = rng_uniform(&R, 0.5f, 1.5f);
    for (size_t i = 0; i < half; i++) inv[i] = powf(10000.0f, -(float)(2 * i) / (float)rot);
    for (size_t r = 0; r < rows; r++) pos[r] = (int64_t)(r * 977 % 5000) + (r == 1 ? 100000 : 0);
    const mh_rope_args a = {heads, d, rot, inter, inv, norm ? w : NULL, 1e-6f};
    K->rope(&a, rows, pos, x, ldx);
    int ok = 1, pass = 1, pad = 1;
    for (size_t r = 0; r < rows; r++) {
        for (size_t h = 0; h < heads; h++) {
            const float* in = x0 + r * ldx + h * d;
            const float* got = x + r * ldx + h * d;
            double ss = 0;
            for (size_t j = 0; j < d; j++) ss += (double)in[j] * in[j];
            const double sc = norm ? 1.0 / sqrt(ss / (double)d + 1e-6) : 1.0;
            for (size_t j = 0; j < d; j++) want[j] = in[j] * sc * (norm ? w[j] : 1.0);
            for (size_t j = rot; j < d; j++) {
                ok &= fabs(got[j] - want[j]) <= 16 * FLT_EPSILON * fabs(want[j]);
                pass &= norm || got[j] == in[j];
            }
            for (size_t i = 0; i < half; i++) {
                const size_t jx = inter ? 2 * i : i, jy = inter ? 2 * i + 1 : i + half;
                const double ang = (double)((float)pos[r] * inv[i]), c = cos(ang), s = sin(ang);
                const double tol = 16 * FLT_EPSILON * (fabs(want[jx]) + fabs(want[jy]));
                ok &= fabs(got[jx] - (want[jx] * c - want[jy] * s)) <= tol;
                ok &= fabs(got[jy] - (want[jx] * s + want[jy] * c)) <= tol;
            }
        }
        for (size_t j = heads * d; j < ldx; j++) pad &= x[r * ldx + j] == x0[r * ldx + j];
    }
    char what[128];
    snprintf(what, sizeof what, "rope rows %zu heads %zu d %zu rot %zu %s norm %d", rows, heads, d, rot,
             inter ? "interleaved" : "half", norm);
    check_true(what, ok);
    check_true("rope: dims past rot untouched without norm", pass);
    check_true("rope writes nothing between rows", pad);
    free(x), free(x0), free(w), free(inv), free(want), free(pos);
}

static void test_rope(void) {
    const size_t vl = K->gemm_nr / (K->gemm_nr >= 16 ? 2 : 1); /* a multiple of the vector length */
    const size_t ds[] = {2, 6, 8, 16, 64, 128, 2 * vl - 2, 2 * vl + 2, 2 * 67, 2 * 130 + 6};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
        for (int v = 0; v < 8; v++) {
            const size_t d = ds[i], rot = v & 4 ? (d / 4 < 2 ? 2 : d / 4 / 2 * 2) : d;
            rope_shape(v & 1 ? 5 : 2, i % 2 ? 3 : 1, d, rot, (v >> 1) & 1, (int)((v + i) % 2));
        }
    const mh_rope_args none = {2, 8, 0, 0, NULL, NULL, 0}; /* neither: nothing changes */
    float x[16], x0[16];
    const int64_t pos = 7;
    for (int i = 0; i < 16; i++) x[i] = x0[i] = (float)i - 3.5f;
    K->rope(&none, 1, &pos, x, 16);
    check_true("rope with neither norm nor rotary leaves the row", memcmp(x, x0, sizeof x) == 0);
}

static void test_f32_to_f16(void) { conversions(0); }
static void test_f32_to_bf16(void) { conversions(1); }

int main(void) {
    mh_isa isa;
    const mh_status st = mh_isa_default(&isa);
    if (st == MH_ERR_ISA_UNAVAILABLE) return 77; /* MH_ISA names an ISA this machine lacks */
    if (st != MH_OK) return 1;
    K = mh_dispatch_table(isa);
    printf("test_kernels on %s\n", mh_isa_name(isa));
    rng_seed(&R, 42);
#define RUN_SLOT_TEST(slot, ret, params) test_##slot();
    MH_KERNEL_LIST(RUN_SLOT_TEST)
#undef RUN_SLOT_TEST
    return test_exit_code("test_kernels");
}
