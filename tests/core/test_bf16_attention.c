/*
 * The bf16 compute mode (mh_attn_options.compute = MH_COMPUTE_BF16) of mh_attention against
 * the double oracle run on the bf16-rounded operands (tests/support/oracle.c rounds the
 * pre-scaled Q, K and V when opt->compute is BF16), on every ISA that has the mode; skipped
 * (exit 77) where the ISA lacks it. Prefill and decode shapes, GQA/MQA, odd head dims and key
 * counts, f32/f16/bf16/int8 K/V, causal, windows, ragged kv_len, sinks; NaN V on keys no
 * row keeps; 1 and 2 threads bitwise equal; and the same call in f32 is bitwise what it was
 * without the mode's field; decode of one or two rows per K/V head on f32/f16/int8 storage
 * bitwise the same decode on a bf16 cache of the rounded values.
 *
 * Tolerance. The oracle rounds Q, K and V as the kernels do, and P as the online softmax
 * holds it (each key tile's exp(s - m) relative to the running max, on the call's grid of
 * key tiles from key 0: mh_core_attention_kv_tile). What remains is f32 accumulation (about 1e-7) and rare flips: an exp that the f32
 * path and the double oracle put on the two sides of a bf16 rounding boundary (their scores
 * differ by about 1e-6) moves that p by one bf16 ulp (2^-8 relative); with a dominant p that
 * reaches 1e-5 of the row. Measured: 5e-8 without a flip, 1e-5 to 3e-5 with one;
 * rel-L2 <= 1e-4 is asserted, 20x below what rounding P differently gives (1.5e-3, measured
 * with an oracle that leaves P exact). Split-KV decode (M >= 2048 keys, one query tile) runs
 * each key chunk's online softmax from its own max, a grid the oracle does not model: there
 * P's rounding is only bounded by 2^-9 per key, which averages in o = sum p v / l to about
 * 2^-9 / sqrt(3): rel-L2 <= 2e-3. Against the plain double oracle (nothing rounded) the
 * mode's whole error is reported (about 2e-3).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_gemm_choice.h"
#include "check.h"
#include "core/attention.h"
#include "dispatch/dispatch.h"
#include "oracle.h"
#include "problem.h"

/* The oracle's grid of P's rounding: the key tile the library uses for the call (mh_attention
 * sizes its workspace knowing M: prepack allowed). */
static void oracle_grid(const mh_context* ctx, const mh_attn_problem* p) {
    oracle_bf16_key_tile = (int)mh_core_attention_kv_tile(mh_dispatch_table(mh_context_isa(ctx)), p, 1);
}

static double worst_rounded = 0, worst_plain = 0;

static void run_case(const mh_context* c1, const mh_context* c2, test_rng* r, int B, int N, int M, int H,
                     int Hkv, int Dqk, int Dv, mh_dtype dt, int causal, int window, int ragged, int sinks,
                     double tol) {
    test_problem t;
    problem_make(&t, r, B, N, M, H, Hkv, Dqk, Dv, dt, (test_layout)rng_int(r, 0, 2), 1.0f);
    mh_attn_options opt = mh_attn_options_default();
    int32_t kv_len[4] = {M, M, M, M};
    float sink[64];
    opt.causal = causal, opt.window = window;
    if (ragged)
        for (int b = 1; b < B; b++) kv_len[b] = rng_int(r, N, M);
    opt.kv_len = ragged ? kv_len : NULL;
    if (sinks) {
        for (int h = 0; h < H; h++) sink[h] = rng_uniform(r, -1.0f, 1.0f);
        opt.sinks = sink;
    }
    char what[200];
    snprintf(what, sizeof what, "B%d N%d M%d H%d Hkv%d Dqk%d Dv%d dt%d causal%d win%d ragged%d sinks%d", B, N, M, H,
             Hkv, Dqk, Dv, (int)dt, causal, window, ragged, sinks);
    const size_t n = (size_t)B * N * H * Dv;
    float* f32_before = malloc(n * sizeof(float));
    float* got = malloc(n * sizeof(float));
    float* got2 = malloc(n * sizeof(float));
    double* want = malloc(n * sizeof(double));
    double* plain = malloc(n * sizeof(double));
    /* f32: the mode's field set explicitly gives the bits of the default */
    check_status(what, run_attention(c1, &t.p, &opt), MH_OK);
    problem_gather_o(&t, f32_before);
    opt.compute = MH_COMPUTE_F32;
    check_status(what, run_attention(c1, &t.p, &opt), MH_OK);
    problem_gather_o(&t, got);
    check_bitwise(what, got, f32_before, n);
    /* bf16 on 1 and 2 threads */
    opt.compute = MH_COMPUTE_BF16;
    check_status(what, run_attention(c1, &t.p, &opt), MH_OK);
    problem_gather_o(&t, got);
    check_status(what, run_attention(c2, &t.p, &opt), MH_OK);
    problem_gather_o(&t, got2);
    check_bitwise(what, got2, got, n);
    oracle_grid(c1, &t.p);
    oracle_attention(&t.p, &opt, want, NULL);
    opt.compute = MH_COMPUTE_F32;
    oracle_attention(&t.p, &opt, plain, NULL);
    const err_stats e = err_f32_f64(got, want, n), ep = err_f32_f64(got, plain, n);
    if (tol <= 1e-4 && e.rel_l2 > worst_rounded) worst_rounded = e.rel_l2;
    if (ep.rel_l2 > worst_plain) worst_plain = ep.rel_l2;
    printf("%-70s rel-L2 %.2e (rounded oracle) %.2e (plain)\n", what, e.rel_l2, ep.rel_l2);
    check_close(what, got, want, n, 1e30, tol);
    free(f32_before), free(got), free(got2), free(want), free(plain);
    problem_free(&t);
}

/* bf16 compute rounds f32, f16 and int8 K/V as the packs do; a decode task of one or two rows
 * per K/V head then runs the direct kernels on the rounded rows (core/driver_bf16.h), which
 * must give bitwise what the same call gives on a cache that holds those values in bf16 (u:
 * the same shape and layout, t's queries, K/V the bf16 roundings of t's values). */
static void rounded_storage_case(const mh_context* ctx, test_rng* r, int N, int M, int H, int Hkv, int D, mh_dtype dt,
                                 test_layout layout) {
    test_problem t, u;
    problem_make(&t, r, 1, N, M, H, Hkv, D, D, dt, layout, 1.0f);
    problem_make(&u, r, 1, N, M, H, Hkv, D, D, MH_DTYPE_BF16, layout, 1.0f);
    u.p.q = t.p.q;
    for (int kv = 0; kv < 2; kv++) {
        const mh_tensor *from = kv ? &t.p.v : &t.p.k, *to = kv ? &u.p.v : &u.p.k;
        uint16_t* dst = kv ? u.v : u.k;
        for (int j = 0; j < M; j++)
            for (int h = 0; h < Hkv; h++)
                for (int d = 0; d < D; d++) {
                    const float x = oracle_round_bf16((float)oracle_kv(from, dt, 0, j, h, d));
                    uint32_t bits;
                    memcpy(&bits, &x, sizeof bits);
                    dst[j * to->stride_token + h * to->stride_head + d] = (uint16_t)(bits >> 16);
                }
    }
    mh_attn_options opt = mh_attn_options_default();
    opt.compute = MH_COMPUTE_BF16;
    const size_t n = (size_t)N * H * D;
    float* got = malloc(n * sizeof(float));
    float* want = malloc(n * sizeof(float));
    char what[160];
    snprintf(what, sizeof what, "N%d M%d H%d Hkv%d D%d dt%d layout%d: bf16 compute == on the values rounded into a bf16 cache",
             N, M, H, Hkv, D, (int)dt, (int)layout);
    check_status(what, run_attention(ctx, &t.p, &opt), MH_OK);
    problem_gather_o(&t, got);
    check_status(what, run_attention(ctx, &u.p, &opt), MH_OK);
    problem_gather_o(&u, want);
    check_bitwise(what, got, want, n);
    free(got), free(want);
    problem_free(&t), problem_free(&u);
}

/* Causal prefill, queries 0..98 (q_offset 0) against 101 keys whose last two V rows are NaN:
 * no row keeps them, so the output is finite and the oracle's. The last key tile holds 37 keys
 * and row 98 keeps 35 of them: its odd last pair's partner is the NaN key 99, which the bf16
 * GEMM must ignore. */
static void nan_case(const mh_context* ctx, test_rng* r) {
    test_problem t;
    problem_make(&t, r, 1, 99, 101, 2, 1, 32, 32, MH_DTYPE_F32, LAYOUT_HEAD_MAJOR, 1.0f);
    float* v = t.v;
    for (int j = 99; j < 101; j++)
        for (int d = 0; d < 32; d++) v[j * t.p.v.stride_token + d] = NAN;
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1, opt.q_offset = 0, opt.compute = MH_COMPUTE_BF16;
    const size_t n = (size_t)99 * 2 * 32;
    float* got = malloc(n * sizeof(float));
    double* want = malloc(n * sizeof(double));
    check_status("NaN V past every row's keys", run_attention(ctx, &t.p, &opt), MH_OK);
    problem_gather_o(&t, got);
    oracle_grid(ctx, &t.p);
    oracle_attention(&t.p, &opt, want, NULL);
    check_close("NaN V past every row's keys", got, want, n, 1e30, 1e-4);
    free(got), free(want);
    problem_free(&t);
}

int main(void) {
    if (mh_test_bf16_gemm_skip()) return 77;
    mh_context* c1 = test_context(1);
    mh_context* c2 = test_context(2);
    const mh_isa isa = mh_context_isa(c1);
    if (!mh_compute_supported(isa, MH_COMPUTE_BF16)) {
        printf("skipped: %s has no bf16 compute on this CPU\n", mh_isa_name(isa));
        mh_context_destroy(c1);
        mh_context_destroy(c2);
        return 77;
    }
    test_rng r;
    rng_seed(&r, 17);
    const mh_dtype dts[] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16, MH_DTYPE_I8};
    for (int i = 0; i < 4; i++) {
        run_case(c1, c2, &r, 2, 130, 130, 4, 2, 64, 64, dts[i], 1, 0, 0, 0, 1e-4); /* prefill, GQA */
        run_case(c1, c2, &r, 2, 1, 300, 4, 1, 64, 64, dts[i], 0, 0, 1, 0, 1e-4);   /* decode, MQA */
    }
    run_case(c1, c2, &r, 1, 200, 333, 2, 2, 33, 71, MH_DTYPE_F32, 1, 0, 0, 1, 1e-4); /* odd dims */
    run_case(c1, c2, &r, 2, 97, 257, 3, 3, 128, 128, MH_DTYPE_F16, 0, 40, 1, 0, 1e-4);
    run_case(c1, c2, &r, 1, 3, 3000, 8, 2, 128, 128, MH_DTYPE_BF16, 0, 0, 0, 1, 2e-3); /* split-KV decode */
    run_case(c1, c2, &r, 1, 256, 256, 2, 1, 128, 128, MH_DTYPE_F32, 1, 0, 0, 0, 1e-4);
    /* keys across several prefill tiles, where the cases above fit in one or two (x86's 512) */
    const int tile = (int)mh_dispatch_table(isa)->attn_prefill_kv_tile;
    if (tile > 128) run_case(c1, c2, &r, 2, 160, 2 * tile + 76, 4, 2, 64, 64, MH_DTYPE_F16, 1, 0, 1, 0, 1e-4);
    nan_case(c1, &r);
    for (int i = 0; i < 4; i++) {
        if (dts[i] == MH_DTYPE_BF16) continue;
        rounded_storage_case(c1, &r, 1, 300, 4, 4, 64, dts[i], LAYOUT_HEAD_MAJOR); /* MHA, several tiles */
        rounded_storage_case(c1, &r, 1, 131, 4, 2, 72, dts[i], LAYOUT_TOKEN_MAJOR); /* two rows per K/V head */
        rounded_storage_case(c1, &r, 2, 2100, 3, 3, 40, dts[i], LAYOUT_PADDED);     /* two queries, split keys */
    }
    printf("worst rel-L2: %.2e against the rounded-operand oracle (its tile grid), %.2e against the plain one\n", worst_rounded,
           worst_plain);
    mh_context_destroy(c1);
    mh_context_destroy(c2);
    return test_exit_code("test_bf16_attention");
}
