/*
 * mh_attention with head_gates [B, N, H] against the double oracle: the dense oracle output
 * of every (token, head) times its gate, and exactly zero where the gate is 0. Random shapes
 * (GQA groupings, Dqk != Dv, f32/f16/bf16 K/V, three layouts), random options (causal,
 * q_offset, window, kv_len, soft-cap, ALiBi, sinks), gate densities from none to all active,
 * negative gates, prefill-sized problems (prepacked K/V over gathered rows); results bitwise
 * equal on 1 and 2 threads; bad gates rejected with the output untouched.
 *
 * Tolerance: test_attention_oracle's bound, 4 * eps32 * amp * (Dqk + M + 16), times the
 * largest |gate| (the gate multiplies an f32 result once more: one more rounding).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"
#include "problem.h"

typedef struct gated_opts {
    mh_attn_options opt;
    int32_t kv_len[4];
    float slopes[32];
    float sinks[32];
    float* gates;
} gated_opts;

/* Gates: 0 with probability p_skip, else uniform in [-1, 2] away from 0. */
static void random_gates(test_rng* r, size_t n, float p_skip, float* g) {
    for (size_t i = 0; i < n; i++) {
        if (rng_uniform(r, 0.0f, 1.0f) < p_skip) {
            g[i] = 0.0f;
            continue;
        }
        const float v = rng_uniform(r, -1.0f, 2.0f);
        g[i] = fabsf(v) < 0.05f ? 0.5f : v;
    }
}

static void random_options(test_rng* r, const mh_attn_problem* p, gated_opts* c) {
    const int B = p->batch, M = p->n_kv, H = p->n_heads;
    c->opt = mh_attn_options_default();
    c->opt.causal = rng_int(r, 0, 1);
    if (rng_int(r, 0, 3) == 0) c->opt.q_offset = rng_int(r, 0, M);
    if (rng_int(r, 0, 3) == 0) c->opt.window = rng_int(r, 1, M);
    if (rng_int(r, 0, 2) == 0) {
        for (int b = 0; b < B; b++) c->kv_len[b] = rng_int(r, 0, M);
        c->kv_len[0] = M;
        c->opt.kv_len = c->kv_len;
    }
    random_score_options(r, H, &c->opt, c->slopes, c->sinks);
}

static void run_case(const mh_context* ctx1, const mh_context* ctx2, test_rng* r, int B, int N,
                     int M, int H, int Hkv, int Dqk, int Dv, mh_dtype dt, float p_skip, int id) {
    test_problem t;
    problem_make(&t, r, B, N, M, H, Hkv, Dqk, Dv, dt, (test_layout)rng_int(r, 0, 2), 1.0f);
    gated_opts c;
    memset(&c, 0, sizeof c);
    random_options(r, &t.p, &c);
    const size_t rows = (size_t)B * N * (size_t)H, n = rows * (size_t)Dv;
    c.gates = malloc(rows * sizeof(float));
    random_gates(r, rows, p_skip, c.gates);
    c.opt.head_gates = c.gates;
    char what[200];
    snprintf(what, sizeof what, "case %d: B%d N%d M%d H%d Hkv%d Dqk%d Dv%d dt%d skip%.2f causal%d win%d kvlen%d",
             id, B, N, M, H, Hkv, Dqk, Dv, (int)dt, (double)p_skip, c.opt.causal, c.opt.window,
             c.opt.kv_len != NULL);
    for (size_t i = 0; i < t.o_elems; i++) t.o[i] = 7.0f; /* zero rows must be written */
    float* got = malloc(n * sizeof(float));
    float* got2 = malloc(n * sizeof(float));
    double* want = malloc(n * sizeof(double));
    if (check_status(what, run_attention(ctx1, &t.p, &c.opt), MH_OK)) {
        problem_gather_o(&t, got);
        mh_attn_options dense = c.opt;
        dense.head_gates = NULL;
        oracle_attention(&t.p, &dense, want, NULL);
        double gmax = 0;
        for (size_t i = 0; i < rows; i++) {
            if (fabs(c.gates[i]) > gmax) gmax = fabs(c.gates[i]);
            for (int d = 0; d < Dv; d++) want[i * (size_t)Dv + (size_t)d] *= c.gates[i];
        }
        check_close(what, got, want, n, 4.0 * FLT_EPSILON * (Dqk + M + 16) * (gmax > 1 ? gmax : 1), 1e-6);
        int zeros_ok = 1;
        for (size_t i = 0; i < rows; i++)
            if (c.gates[i] == 0.0f)
                for (int d = 0; d < Dv; d++) zeros_ok &= got[i * (size_t)Dv + (size_t)d] == 0.0f;
        check_true(what, zeros_ok);
        if (check_status(what, run_attention(ctx2, &t.p, &c.opt), MH_OK)) {
            problem_gather_o(&t, got2);
            check_bitwise(what, got2, got, n);
        }
    }
    free(got), free(got2), free(want), free(c.gates);
    problem_free(&t);
}

/* Non-finite gates, and gates with a mask or probabilities, are refused before anything is
 * written. */
static void bad_input(const mh_context* ctx, test_rng* r) {
    test_problem t;
    problem_make(&t, r, 2, 5, 9, 4, 2, 16, 16, MH_DTYPE_F32, LAYOUT_TOKEN_MAJOR, 1.0f);
    float gates[2 * 5 * 4], mask[9], probs[2 * 4 * 5 * 9];
    random_gates(r, 40, 0.3f, gates);
    memset(mask, 0, sizeof mask);
    mh_attn_options opt = mh_attn_options_default();
    opt.head_gates = gates;
    for (size_t i = 0; i < t.o_elems; i++) t.o[i] = 7.0f;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        gates[17] = bad[i];
        check_status("non-finite gate", run_attention(ctx, &t.p, &opt), MH_ERR_INVALID_ARGUMENT);
    }
    gates[17] = 1.0f;
    opt.mask = mask;
    check_status("gates with a mask", run_attention(ctx, &t.p, &opt), MH_ERR_UNSUPPORTED);
    opt.mask = NULL, opt.probs = probs;
    check_status("gates with probs", run_attention(ctx, &t.p, &opt), MH_ERR_UNSUPPORTED);
    int untouched = 1;
    for (size_t i = 0; i < t.o_elems; i++) untouched &= t.o[i] == 7.0f;
    check_true("output untouched by refused calls", untouched);
    problem_free(&t);
}

int main(void) {
    mh_context* ctx1 = test_context(1);
    mh_context* ctx2 = test_context(2);
    test_rng r;
    rng_seed(&r, 20260517);
    static const int dims[] = {1, 3, 8, 16, 31, 32, 64, 65};
    static const float skips[] = {0.0f, 0.25f, 0.5f, 0.9f, 1.0f};
    int id = 0;
    for (int i = 0; i < 80; i++, id++) {
        const int Hkv = rng_int(&r, 1, 3), g = rng_int(&r, 1, 4);
        const int Dqk = dims[rng_int(&r, 0, 7)], Dv = rng_int(&r, 0, 1) ? Dqk : dims[rng_int(&r, 0, 7)];
        const int N = rng_int(&r, 1, 40), M = rng_int(&r, 0, 1) ? N : rng_int(&r, 1, 150);
        run_case(ctx1, ctx2, &r, rng_int(&r, 1, 3), N, M, Hkv * g, Hkv, Dqk, Dv,
                 (mh_dtype)rng_int(&r, 0, 2), skips[i % 5], id);
    }
    /* prefill-sized: several query tiles of gathered rows per head, K/V prepacked */
    static const int pre_n[] = {200, 301, 390};
    for (int i = 0; i < 3; i++, id++)
        run_case(ctx1, ctx2, &r, 1 + i % 2, pre_n[i], pre_n[i], 4, 2 - i % 2, 64, 48, (mh_dtype)i,
                 0.5f, id);
    bad_input(ctx1, &r);
    mh_context_destroy(ctx1);
    mh_context_destroy(ctx2);
    return test_exit_code("test_gated_attention");
}
