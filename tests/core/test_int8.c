/*
 * mh_attention on MH_DTYPE_I8 K and/or V views against the double-precision oracle run on the
 * dequantised values (scale * q in double), on the active ISA (MH_ISA):
 *  - decode-shaped calls (1-4 query rows: the direct kernels, split-KV past 1024 keys, up to
 *    40000 keys) and prefill-shaped ones (packed K/V panels, several query tiles);
 *  - MHA, GQA and MQA groupings; head-major, token-major and padded views, whose scales are
 *    strided in the same layout (tests/support/problem.c);
 *  - K int8 with V f16, K bf16 with V int8, both int8; causal, windows and key lengths;
 *  - the gated path (head_gates: MoH's per-head gathered rows);
 *  - thread counts 1 and 2 give the same bits;
 *  - a NaN row scale (an int8 cache's non-finite row) makes NaN exactly the rows keeping it;
 *  - bad views: int8 with scale NULL or a negative scale stride is MH_ERR_INVALID_ARGUMENT, a
 *    scale span past PTRDIFF_MAX is MH_ERR_SIZE_OVERFLOW, and the output stays untouched.
 *
 * Tolerance: as test_attention_oracle (the same f32 arithmetic on exact int8 values, plus one
 * rounding of each scale product): rel-L2 <= 1e-6 and max_abs <= 4 eps32 amp (Dqk + M + 16).
 * One exception, measured rather than assumed: over tens of thousands of random keys the
 * softmax is nearly flat, the output is a cancelling mean of size ~ 1/sqrt(M), and the f32
 * accumulation itself reaches ~1.3e-6 whatever the storage. So calls of LONG_KEYS keys or more
 * also run with K/V stored as f32 holding the same dequantised values, and the int8 call must
 * be within 1e-6 or within 5% of that f32 floor, whichever is larger (int8 adds no error of
 * its own). The program prints the worst of both.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"
#include "problem.h"

static mh_context *ctx1, *ctx2;
static double worst_rel = 0, worst_floor = 0;
/* An emulator (qemu): shorter shapes, and no 2-thread runs (its OpenMP threads on a shared
 * host made them take many minutes); the native runs compare 1 and 2 threads. */
static int slow;

typedef struct shape {
    int B, N, M, H, Hkv, Dqk, Dv;
} shape;

#define LONG_KEYS 1000 /* calls from this many keys also measure the f32 floor */

/* o (the oracle's, gated) of problem p into want [B, N, H, Dv]. */
static void oracle_o(const mh_attn_problem* p, const mh_attn_options* opt, const float* gates, double* want) {
    const size_t n = (size_t)p->batch * p->n_q * p->n_heads * p->head_dim_v;
    oracle_attention(p, opt, want, NULL);
    if (gates) /* the gated output is gate * attention, exactly 0 where the gate is 0 */
        for (size_t i = 0; i < n; i++) want[i] *= gates[i / (size_t)p->head_dim_v];
}

/* The rel-L2 error of the same call with K/V stored as f32 holding the same dequantised
 * values (scale * q rounded once to f32, exactly what the int8 kernels multiply out). */
static double f32_floor(const test_problem* t, const shape* s, const mh_attn_options* opt, const float* gates) {
    mh_attn_problem p = t->p;
    float* bufs[2];
    for (int v = 0; v < 2; v++) {
        mh_tensor* x = v ? &p.v : &p.k;
        const mh_dtype dt = v ? p.v_dtype : p.k_dtype;
        const int d = v ? s->Dv : s->Dqk;
        float* buf = malloc(sizeof(float) * (size_t)s->B * s->M * s->Hkv * d);
        for (int b = 0; b < s->B; b++)
            for (int j = 0; j < s->M; j++)
                for (int h = 0; h < s->Hkv; h++)
                    for (int e = 0; e < d; e++)
                        buf[(((size_t)b * s->M + j) * s->Hkv + h) * d + e] = (float)oracle_kv(x, dt, b, j, h, e);
        *x = (mh_tensor){.data = buf, .stride_batch = (ptrdiff_t)s->M * s->Hkv * d, .stride_token = (ptrdiff_t)s->Hkv * d,
                         .stride_head = d};
        bufs[v] = buf;
    }
    p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    const size_t n = (size_t)s->B * s->N * s->H * s->Dv;
    float* got = malloc(n * sizeof(float));
    double* want = malloc(n * sizeof(double));
    check_status("f32 floor call", run_attention(ctx1, &p, opt), MH_OK);
    problem_gather_o(t, got);
    oracle_o(&p, opt, gates, want);
    const double rel = err_f32_f64(got, want, n).rel_l2;
    free(bufs[0]), free(bufs[1]), free(got), free(want);
    return rel;
}

/* One call on 1 and 2 threads (bitwise equal) against the oracle. gated: random head gates
 * (a quarter of them 0). */
static void run_case(test_rng* r, const shape* s, mh_dtype kd, mh_dtype vd, test_layout layout, int gated,
                     const char* name) {
    const float amp = 1.0f;
    test_problem t;
    problem_make(&t, r, s->B, s->N, s->M, s->H, s->Hkv, s->Dqk, s->Dv, kd, layout, amp);
    if (vd != kd) problem_set_kv(&t, r, 1, vd, layout, amp);
    mh_attn_options opt = mh_attn_options_default();
    int32_t kv_len[4] = {s->M, s->M, s->M, s->M};
    opt.causal = rng_int(r, 0, 1);
    if (rng_int(r, 0, 3) == 0) opt.window = rng_int(r, 1, s->M);
    if (s->B > 1 && rng_int(r, 0, 1)) kv_len[1] = rng_int(r, s->N, s->M), opt.kv_len = kv_len;
    const size_t n = (size_t)s->B * s->N * s->H * s->Dv, ng = (size_t)s->B * s->N * s->H;
    float* gates = malloc(ng * sizeof(float));
    for (size_t i = 0; i < ng; i++) gates[i] = rng_int(r, 0, 3) ? rng_uniform(r, 0.1f, 1.0f) : 0.0f;
    if (gated) opt.head_gates = gates;
    char what[256];
    snprintf(what, sizeof what, "%s: B%d N%d M%d H%d Hkv%d D%d/%d K dt%d V dt%d layout %d causal %d win %d kvlen %d gated %d",
             name, s->B, s->N, s->M, s->H, s->Hkv, s->Dqk, s->Dv, (int)kd, (int)vd, (int)layout, opt.causal, opt.window,
             opt.kv_len != NULL, gated);
    float *got1 = malloc(n * sizeof(float)), *got2 = malloc(n * sizeof(float));
    const mh_status st1 = run_attention(ctx1, &t.p, &opt);
    problem_gather_o(&t, got1);
    const mh_status st2 = slow ? MH_OK : run_attention(ctx2, &t.p, &opt);
    problem_gather_o(&t, got2);
    if (check_status(what, st1, MH_OK) && check_status(what, st2, MH_OK)) {
        if (!slow) check_bitwise("1 and 2 threads: the same bits", got1, got2, n);
        double* want = malloc(n * sizeof(double));
        oracle_o(&t.p, &opt, gated ? gates : NULL, want);
        const err_stats e = err_f32_f64(got1, want, n);
        if (e.rel_l2 > worst_rel) worst_rel = e.rel_l2;
        double rel_tol = 1e-6;
        if (s->M >= LONG_KEYS) { /* int8 adds nothing to the f32 floor of the same values */
            const double floor = f32_floor(&t, s, &opt, gated ? gates : NULL);
            if (floor > worst_floor) worst_floor = floor;
            if (1.05 * floor > rel_tol) rel_tol = 1.05 * floor;
        }
        check_close(what, got1, want, n, 4.0 * FLT_EPSILON * amp * (s->Dqk + s->M + 16), rel_tol);
        free(want);
    }
    free(got1), free(got2), free(gates);
    problem_free(&t);
}

/* A bad int8 view: the status, and the output left as it was. */
static void expect_refused(const char* what, const test_problem* t, const mh_attn_problem* p, mh_status want) {
    const size_t n = t->o_elems;
    float* before = malloc(n * sizeof(float));
    memcpy(before, t->o, n * sizeof(float));
    check_status(what, run_attention(ctx1, p, NULL), want);
    char w[160];
    snprintf(w, sizeof w, "%s: output untouched", what);
    check_true(w, memcmp(before, t->o, n * sizeof(float)) == 0);
    free(before);
}

static void bad_views(test_rng* r) {
    test_problem t;
    problem_make(&t, r, 2, 3, 40, 4, 2, 16, 16, MH_DTYPE_I8, LAYOUT_TOKEN_MAJOR, 1.0f);
    for (int v = 0; v < 2; v++) {
        char what[128];
        mh_attn_problem p = t.p;
        mh_tensor* x = v ? &p.v : &p.k;
        const char* name = v ? "V" : "K";
        x->scale = NULL;
        snprintf(what, sizeof what, "int8 %s with scale NULL", name);
        expect_refused(what, &t, &p, MH_ERR_INVALID_ARGUMENT);
        static const char* const which[3] = {"batch", "token", "head"};
        for (int s = 0; s < 3; s++) {
            p = t.p, x = v ? &p.v : &p.k;
            ptrdiff_t* stride = s == 0 ? &x->scale_stride_batch : s == 1 ? &x->scale_stride_token : &x->scale_stride_head;
            *stride = -1;
            snprintf(what, sizeof what, "int8 %s with scale_stride_%s -1", name, which[s]);
            expect_refused(what, &t, &p, MH_ERR_INVALID_ARGUMENT);
            *stride = PTRDIFF_MAX / 2;
            snprintf(what, sizeof what, "int8 %s with scale_stride_%s PTRDIFF_MAX/2", name, which[s]);
            expect_refused(what, &t, &p, MH_ERR_SIZE_OVERFLOW);
        }
    }
    /* f32 K/V never read their scale fields: garbage there changes nothing */
    test_problem f;
    problem_make(&f, r, 1, 2, 20, 2, 1, 8, 8, MH_DTYPE_F32, LAYOUT_HEAD_MAJOR, 1.0f);
    f.p.k.scale = f.p.v.scale = (const float*)(uintptr_t)0x10, f.p.k.scale_stride_token = -7;
    check_status("f32 K/V with junk scale fields", run_attention(ctx1, &f.p, NULL), MH_OK);
    problem_free(&f);
    problem_free(&t);
}

/* A NaN row scale (what an int8 cache keeps for a row that held a NaN or an inf) poisons
 * exactly the query rows that keep that key: causal rows before it stay finite and match the
 * oracle, in the packed (prefill-shaped) and the direct (decode-shaped) P.V. */
static void nan_scale(test_rng* r) {
    static const int ns[2] = {40, 3};
    for (int i = 0; i < 2; i++) {
        const int N = ns[i], M = 40, bad = 20;
        test_problem t;
        problem_make(&t, r, 1, N, M, 4, 2, 16, 16, MH_DTYPE_I8, LAYOUT_HEAD_MAJOR, 1.0f);
        for (int h = 0; h < 2; h++) t.v_scale[bad * t.p.v.scale_stride_token + h * t.p.v.scale_stride_head] = NAN;
        mh_attn_options opt = mh_attn_options_default();
        opt.causal = 1, opt.q_offset = i ? bad - 1 : 0; /* decode-shaped: rows at 19, 20, 21 */
        const size_t n = (size_t)N * 4 * 16;
        float* got = malloc(n * sizeof(float));
        double* want = malloc(n * sizeof(double));
        check_status("NaN scale call", run_attention(ctx1, &t.p, &opt), MH_OK);
        problem_gather_o(&t, got);
        oracle_attention(&t.p, &opt, want, NULL);
        int same_nan = 1, some_nan = 0, some_finite = 0;
        for (size_t e = 0; e < n; e++) {
            same_nan &= (isnan(got[e]) != 0) == (isnan(want[e]) != 0);
            some_nan |= isnan(want[e]) != 0, some_finite |= !isnan(want[e]);
            if (isnan(want[e])) got[e] = 0.0f, want[e] = 0.0;
        }
        char what[96];
        snprintf(what, sizeof what, "NaN V scale, %s: NaN exactly in the rows keeping the key", i ? "direct" : "packed");
        check_true(what, same_nan && some_nan && some_finite);
        check_close(what, got, want, n, 4.0 * FLT_EPSILON * (16 + M + 16), 1e-6);
        free(got), free(want);
        problem_free(&t);
    }
}

int main(void) {
    ctx1 = test_context(1);
    ctx2 = test_context(2);
    test_rng r;
    rng_seed(&r, 8);
    slow = slow_machine(ctx1, 10.0);
    if (slow) printf("emulator: 1-thread runs only (1 vs 2 threads is checked natively), no prefill over 1100 keys\n");
    static const mh_dtype kvd[3][2] = {{MH_DTYPE_I8, MH_DTYPE_I8}, {MH_DTYPE_I8, MH_DTYPE_F16}, {MH_DTYPE_BF16, MH_DTYPE_I8}};
    static const int groups[3][2] = {{4, 4}, {8, 2}, {8, 1}}; /* MHA, GQA, MQA: H, Hkv */
    static const int dims[] = {1, 7, 16, 33, 64, 128};
    /* decode-shaped: 1-4 query rows, keys below and above the split-KV threshold */
    static const int dec_m[] = {1, 17, 300, 1500, 3000};
    /* an emulator: split-KV still, shorter */
    static const int dec_m_slow[] = {1, 17, 300, 1100, 1300};
    for (int i = 0; i < 5; i++)
        for (int g = 0; g < 3; g++)
            for (int d = 0; d < 3; d++) {
                if (slow && d != (i + g) % 3) continue; /* an emulator: one dtype pair per shape */
                const int D = dims[(i + g + d) % 6];
                const int N = 1 + (g + i) % 4, M = slow ? dec_m_slow[i] : dec_m[i];
                const shape s = {1 + (i + d) % 2, N < M ? N : M, M, groups[g][0], groups[g][1], D, D};
                run_case(&r, &s, kvd[d][0], kvd[d][1], (test_layout)((i + g) % 3), 0, "decode");
            }
    /* prefill-shaped: several query tiles per head, K/V packed once per call */
    static const int pre_n[] = {40, 130, 200};
    for (int i = 0; i < 3; i++)
        for (int g = 0; g < 3; g++) {
            const shape s = {1 + i % 2, slow ? pre_n[i] / 4 : pre_n[i], pre_n[i] + 11 * i, groups[g][0], groups[g][1],
                             dims[2 + i], dims[1 + g]};
            run_case(&r, &s, kvd[(i + g) % 3][0], kvd[(i + g) % 3][1], (test_layout)(g % 3), 0, "prefill");
        }
    if (!slow) { /* keys across several of x86's 512-key prefill tiles (an emulator's ISAs have
                    64-key ones, which the cases above span) */
        const shape s = {1, 150, 1100, 8, 2, 64, 64};
        run_case(&r, &s, MH_DTYPE_I8, MH_DTYPE_I8, LAYOUT_TOKEN_MAJOR, 0, "prefill");
    }
    /* the gated path (MoH's per-head rows), decode- and prefill-shaped */
    for (int i = 0; i < 4; i++) {
        const shape s = {2, i < 2 ? 1 : 50, i < 2 ? (slow ? 1100 : 2100) : 90, 8, 2, 32, 32};
        run_case(&r, &s, kvd[i % 3][0], kvd[i % 3][1], (test_layout)(i % 2), 1, "gated");
    }
    /* long caches: split-KV over 40000 keys (MQA and GQA) */
    const shape longs[2] = {{1, 1, slow ? 4100 : 40000, 8, 1, 64, 64}, {1, 2, slow ? 3000 : 40000, 8, 2, 128, 128}};
    run_case(&r, &longs[0], MH_DTYPE_I8, MH_DTYPE_I8, LAYOUT_HEAD_MAJOR, 0, "long");
    run_case(&r, &longs[1], MH_DTYPE_I8, MH_DTYPE_F16, LAYOUT_TOKEN_MAJOR, 0, "long");
    bad_views(&r);
    nan_scale(&r);
    printf("worst rel_l2 %.3g (worst f32 floor of the same values %.3g)\n", worst_rel, worst_floor);
    mh_context_destroy(ctx1);
    mh_context_destroy(ctx2);
    return test_exit_code("test_int8");
}
