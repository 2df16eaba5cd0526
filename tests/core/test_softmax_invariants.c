/*
 * Softmax invariants of the core, each with its own exact expectation:
 *  - adding +-1e4 to every score of a row (through the additive mask) changes nothing beyond
 *    the rounding of s + 1e4 in f32 (half an ulp of 1e4 per logit);
 *  - one key gives exactly V; Q = 0 gives the mean of the kept V rows;
 *  - a fully masked row (all -inf, kv_len 0, causal before the first key) gives zeros, never
 *    NaN, also with sinks;
 *  - large logits (+-80 after scaling) do not overflow; all-equal scores give the mean.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"
#include "problem.h"

static mh_context* ctx;

static void output(const test_problem* t, float* dst) { problem_gather_o(t, dst); }

static void shift_invariance(test_rng* r) {
    test_problem t;
    const int N = 9, M = 70, H = 2, D = 16;
    problem_make(&t, r, 1, N, M, H, 1, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    const size_t n = (size_t)N * H * D;
    float* mask = calloc((size_t)N * M, sizeof(float));
    float *base = malloc(n * sizeof(float)), *shifted = malloc(n * sizeof(float));
    mh_attn_options opt = mh_attn_options_default();
    opt.mask = mask, opt.mask_stride_row = M;
    check_status("shift: base", run_attention(ctx, &t.p, &opt), MH_OK);
    output(&t, base);
    for (int sign = -1; sign <= 1; sign += 2) {
        for (size_t i = 0; i < (size_t)N * M; i++) mask[i] = (float)sign * 1e4f;
        check_status("shift: shifted", run_attention(ctx, &t.p, &opt), MH_OK);
        output(&t, shifted);
        /* |s| <= 4 here, so s + 1e4 is rounded by at most ulp(1e4)/2 = 2^-11 per logit; that
         * moves each probability by a factor within exp(+-2 * 2^-11), and the output (a convex
         * combination of |v| <= 1) by at most 2 * (exp(2^-10) - 1) */
        const double bound = 2.0 * (exp(ldexp(1.0, -10)) - 1.0);
        int finite = 1;
        for (size_t i = 0; i < n; i++) finite &= isfinite(shifted[i]);
        check_true(sign > 0 ? "shift +1e4: finite" : "shift -1e4: finite", finite);
        check_close_f32(sign > 0 ? "shift +1e4: unchanged" : "shift -1e4: unchanged", shifted, base,
                        n, bound);
    }
    free(mask), free(base), free(shifted);
    problem_free(&t);
}

static void one_key_gives_v(test_rng* r) {
    test_problem t;
    problem_make(&t, r, 2, 5, 1, 4, 2, 8, 12, MH_DTYPE_F32, LAYOUT_PADDED, 3.0f);
    check_status("one key: run", run_attention(ctx, &t.p, NULL), MH_OK);
    int exact = 1;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 5; i++)
            for (int h = 0; h < 4; h++) {
                const float* o = t.o + b * t.p.o.stride_batch + i * t.p.o.stride_token + h * t.p.o.stride_head;
                const float* v = (const float*)t.v + b * t.p.v.stride_batch + (h / 2) * t.p.v.stride_head;
                exact &= memcmp(o, v, 12 * sizeof(float)) == 0;
            }
    check_true("one key gives exactly V", exact);
    problem_free(&t);
}

static void zero_q_gives_mean(test_rng* r) {
    test_problem t;
    const int M = 37, D = 8;
    problem_make(&t, r, 1, 3, M, 1, 1, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    memset(t.q, 0, sizeof(float) * 3 * D);
    int32_t kv_len = 30; /* the mean over the kept rows only */
    mh_attn_options opt = mh_attn_options_default();
    opt.kv_len = &kv_len;
    check_status("zero q: run", run_attention(ctx, &t.p, &opt), MH_OK);
    double mean[8] = {0};
    for (int j = 0; j < kv_len; j++)
        for (int d = 0; d < D; d++) mean[d] += ((const float*)t.v)[j * D + d] / (double)kv_len;
    for (int i = 0; i < 3; i++)
        check_close("zero q gives the mean of kept V", t.o + i * D, mean, D, 4 * FLT_EPSILON * kv_len, 1e-6);
    problem_free(&t);
}

static int all_zero(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f || signbit(x[i])) return 0;
    return 1;
}

static void fully_masked_rows(test_rng* r) {
    test_problem t;
    const int N = 4, M = 20, H = 2, D = 8;
    problem_make(&t, r, 2, N, M, H, H, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    const size_t per_batch = (size_t)N * H * D;
    float sinks[2] = {0.5f, 5.0f};
    float* probs = malloc(sizeof(float) * 2 * H * N * M);

    /* kv_len 0 for batch 1, with sinks and probabilities requested */
    int32_t kv_len[2] = {M, 0};
    mh_attn_options opt = mh_attn_options_default();
    opt.kv_len = kv_len, opt.sinks = sinks, opt.probs = probs;
    for (size_t i = 0; i < (size_t)2 * H * N * M; i++) probs[i] = NAN;
    check_status("kv_len 0: run", run_attention(ctx, &t.p, &opt), MH_OK);
    check_true("kv_len 0: zero output", all_zero(t.o + per_batch, per_batch));
    check_true("kv_len 0: zero probabilities", all_zero(probs + (size_t)H * N * M, (size_t)H * N * M));

    /* an all -inf additive mask row */
    float* mask = calloc((size_t)N * M, sizeof(float));
    for (int j = 0; j < M; j++) mask[2 * M + j] = -INFINITY;
    opt = mh_attn_options_default();
    opt.mask = mask, opt.mask_stride_row = M;
    check_status("-inf mask: run", run_attention(ctx, &t.p, &opt), MH_OK);
    for (int b = 0; b < 2; b++)
        check_true("-inf mask row: zeros", all_zero(t.o + b * per_batch + 2 * H * D, (size_t)H * D));

    /* causal with queries placed before every key: q_offset 0 and kv_len ... position -k */
    opt = mh_attn_options_default();
    opt.causal = 1, opt.q_offset = MH_Q_OFFSET_END;
    int32_t short_len[2] = {2, 1}; /* N = 4 queries at positions len-4 .. len-1: some negative */
    opt.kv_len = short_len;
    check_status("causal before keys: run", run_attention(ctx, &t.p, &opt), MH_OK);
    check_true("causal before keys: zeros (batch 0, rows 0-1)", all_zero(t.o, 2 * (size_t)H * D));
    check_true("causal before keys: zeros (batch 1, rows 0-2)", all_zero(t.o + per_batch, 3 * (size_t)H * D));
    double* want = malloc(sizeof(double) * 2 * per_batch);
    float* got = malloc(sizeof(float) * 2 * per_batch);
    oracle_attention(&t.p, &opt, want, NULL);
    problem_gather_o(&t, got);
    check_close("causal before keys: the rest matches the oracle", got, want, 2 * per_batch, 1e-6, 1e-6);
    free(want), free(got), free(mask), free(probs);
    problem_free(&t);
}

static void large_and_equal_logits(test_rng* r) {
    test_problem t;
    const int N = 6, M = 90, D = 4;
    problem_make(&t, r, 1, N, M, 1, 1, D, D, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    /* q = (+-40, 0, ...), k = (+-1 or +-2, ...), scale 1: scores reach +-80 */
    for (int i = 0; i < N; i++) {
        t.q[i * D] = i % 2 ? 40.0f : -40.0f;
        for (int d = 1; d < D; d++) t.q[i * D + d] = 0.0f;
    }
    float* k = t.k;
    for (int j = 0; j < M; j++) k[j * D] = (float)(j % 4 - 2) * 1.0f;
    t.p.scale = 1.0f;
    const size_t n = (size_t)N * D;
    double* want = malloc(n * sizeof(double));
    check_status("large logits: run", run_attention(ctx, &t.p, NULL), MH_OK);
    oracle_attention(&t.p, NULL, want, NULL);
    check_close("large logits (+-80) match the oracle", t.o, want, n, 4 * FLT_EPSILON * (D + M), 1e-6);
    /* all-equal scores: q = 0 on the first dim too, so every score is 0 */
    memset(t.q, 0, n * sizeof(float));
    check_status("equal scores: run", run_attention(ctx, &t.p, NULL), MH_OK);
    oracle_attention(&t.p, NULL, want, NULL);
    check_close("all-equal scores give the mean", t.o, want, n, 4 * FLT_EPSILON * M, 1e-6);
    free(want);
    problem_free(&t);
}

int main(void) {
    ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 7);
    shift_invariance(&r);
    one_key_gives_v(&r);
    zero_q_gives_mean(&r);
    fully_masked_rows(&r);
    large_and_equal_logits(&r);
    mh_context_destroy(ctx);
    return test_exit_code("test_softmax_invariants");
}
