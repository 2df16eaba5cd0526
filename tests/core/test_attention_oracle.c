/*
 * mh_attention against the double-precision oracle on random problems: shapes with 1, odd
 * and prime sizes, Dqk != Dv, N != M, GQA/MQA groupings, batches with different key lengths,
 * three tensor layouts, f32/f16/bf16 K/V, every mask kind, soft-cap, ALiBi, sinks and the
 * probabilities output, on 1 and 2 threads.
 *
 * Tolerance: an f32 result differs from the exact one by rounding in the Q.K dot products
 * (about eps * Dqk relative to |q||k|), in exp (a few ulp), and in the P.V sums (about eps * M
 * relative to max|v|). So max_abs <= 4 * eps32 * amp * (Dqk + M + 16) with amp the input
 * amplitude, and rel_l2 <= 1e-6. f16/bf16 K/V are compared with the oracle run on the same
 * stored (rounded) values, so the same bound applies.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "oracle.h"
#include "problem.h"

typedef struct case_opts {
    mh_attn_options opt;
    int32_t kv_len[8];
    float* mask;
    float slopes[64];
    float sinks[64];
    float* probs;
} case_opts;

static void random_options(test_rng* r, const mh_attn_problem* p, case_opts* c) {
    memset(c, 0, sizeof *c);
    c->opt = mh_attn_options_default();
    const int B = p->batch, N = p->n_q, M = p->n_kv, H = p->n_heads;
    c->opt.causal = rng_int(r, 0, 1);
    if (rng_int(r, 0, 3) == 0) c->opt.q_offset = rng_int(r, 0, M);
    if (rng_int(r, 0, 3) == 0) c->opt.window = rng_int(r, 1, M);
    if (rng_int(r, 0, 2) == 0) {
        for (int b = 0; b < B; b++) c->kv_len[b] = rng_int(r, 0, M);
        c->kv_len[0] = M; /* keep one full sequence */
        c->opt.kv_len = c->kv_len;
    }
    if (rng_int(r, 0, 2) == 0) {
        const int per_head = rng_int(r, 0, 1), per_batch = rng_int(r, 0, 1);
        c->opt.mask_stride_row = M + rng_int(r, 0, 3);
        c->opt.mask_stride_head = per_head ? (ptrdiff_t)N * c->opt.mask_stride_row : 0;
        c->opt.mask_stride_batch = per_batch ? (ptrdiff_t)(per_head ? H : 1) * N * c->opt.mask_stride_row : 0;
        size_t n = (size_t)(per_batch ? B : 1) * (per_head ? H : 1) * N * c->opt.mask_stride_row;
        c->mask = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            c->mask[i] = rng_int(r, 0, 9) == 0 ? -INFINITY : rng_uniform(r, -2.0f, 2.0f);
        c->opt.mask = c->mask;
    }
    random_score_options(r, H, &c->opt, c->slopes, c->sinks);
    if (rng_int(r, 0, 3) == 0) {
        c->probs = malloc(sizeof(float) * (size_t)B * H * N * M);
        c->opt.probs = c->probs;
    }
}

static double worst_rel = 0;

static void run_case(const mh_context* ctx, test_rng* r, int B, int N, int M, int H, int Hkv,
                     int Dqk, int Dv, mh_dtype dt, int case_id) {
    test_problem t;
    const float amp = 1.0f;
    problem_make(&t, r, B, N, M, H, Hkv, Dqk, Dv, dt, (test_layout)rng_int(r, 0, 2), amp);
    if (rng_int(r, 0, 4) == 0) t.p.scale = rng_uniform(r, 0.05f, 0.5f);
    case_opts c;
    random_options(r, &t.p, &c);
    char what[256];
    snprintf(what, sizeof what,
             "case %d: B%d N%d M%d H%d Hkv%d Dqk%d Dv%d dt%d causal%d off%lld win%d kvlen%d mask%d "
             "cap%.1f alibi%d sinks%d probs%d",
             case_id, B, N, M, H, Hkv, Dqk, Dv, (int)dt, c.opt.causal,
             (long long)(c.opt.q_offset == MH_Q_OFFSET_END ? -1 : c.opt.q_offset), c.opt.window,
             c.opt.kv_len != NULL, c.opt.mask != NULL, (double)c.opt.softcap,
             c.opt.alibi_slopes != NULL, c.opt.sinks != NULL, c.opt.probs != NULL);
    mh_status st = run_attention(ctx, &t.p, &c.opt);
    if (check_status(what, st, MH_OK)) {
        size_t n = (size_t)B * N * H * Dv;
        double* want = malloc(n * sizeof(double));
        double* want_p = c.probs ? malloc(sizeof(double) * (size_t)B * H * N * M) : NULL;
        float* got = malloc(n * sizeof(float));
        oracle_attention(&t.p, &c.opt, want, want_p);
        problem_gather_o(&t, got);
        const double tol = 4.0 * FLT_EPSILON * amp * (Dqk + M + 16);
        err_stats e = err_f32_f64(got, want, n);
        if (e.rel_l2 > worst_rel) worst_rel = e.rel_l2;
        check_close(what, got, want, n, tol, 1e-6);
        if (want_p) {
            /* probabilities: relative rounding of a few ulp per entry, entries <= 1 */
            check_close(what, c.probs, want_p, (size_t)B * H * N * M, 4.0 * FLT_EPSILON * (Dqk + 16), 1e-6);
        }
        free(want), free(want_p), free(got);
    }
    free(c.mask), free(c.probs);
    problem_free(&t);
}

int main(void) {
    mh_context* ctx1 = test_context(1);
    mh_context* ctx2 = test_context(2);
    test_rng r;
    rng_seed(&r, 20261122);
    static const int dims[] = {1, 2, 3, 7, 8, 13, 16, 31, 32, 33, 64, 65, 128};
    static const int groups[] = {1, 2, 3, 4};
    int id = 0;
    for (int i = 0; i < 160; i++, id++) {
        const int Hkv = rng_int(&r, 1, 3), g = groups[rng_int(&r, 0, 3)];
        const int Dqk = dims[rng_int(&r, 0, 12)];
        const int Dv = rng_int(&r, 0, 2) ? Dqk : dims[rng_int(&r, 0, 12)];
        const int N = rng_int(&r, 1, 40), M = rng_int(&r, 0, 1) ? N : rng_int(&r, 1, 150);
        const mh_dtype dt = (mh_dtype)rng_int(&r, 0, 2);
        run_case(i % 2 ? ctx2 : ctx1, &r, rng_int(&r, 1, 3), N, M, Hkv * g, Hkv, Dqk, Dv, dt, id);
    }
    /* tile edges: the scalar tiles are 16 query rows x 64 keys */
    static const int edges[] = {1, 15, 16, 17, 63, 64, 65, 127, 128, 129};
    for (int i = 0; i < 10; i++, id++)
        run_case(ctx2, &r, 2, edges[i], edges[9 - i], 4, 2, 64, 48, MH_DTYPE_F32, id);
    /* prefill-sized (several query tiles per head): K/V packed once per call, tiles on a fixed
     * grid (windows and key lengths cut into them); the last two span several of x86's 512-key
     * prefill tiles. An emulator runs NEON and SVE, whose 64-key prefill tiles the first four
     * span already: it runs those four. */
    const int slow = slow_machine(ctx1, 10.0), n_pre = slow ? 4 : 6;
    if (slow) printf("emulator: the two prefill cases over 1100+ keys run natively only\n");
    static const int pre_n[] = {200, 301, 257, 390, 130, 260}, pre_m[] = {200, 308, 271, 411, 1100, 1541};
    for (int i = 0; i < n_pre; i++, id++)
        run_case(i % 2 ? ctx2 : ctx1, &r, 1 + i % 2, pre_n[i], pre_m[i], 4, 1 + i % 2, 48, 40, (mh_dtype)(i % 3), id);
    /* decode-shaped (one query tile) with long key ranges: the split-KV path, merged with
     * log-sum-exp rescaling */
    static const int long_m[] = {2048, 2100, 4097, 9000};
    for (int i = 0; i < 4; i++, id++)
        run_case(i % 2 ? ctx2 : ctx1, &r, 2, 1 + i % 3, long_m[i], 4 * (1 + i % 2), 1 + i % 2, 64, 32,
                 (mh_dtype)(i % 3), id);
    printf("worst rel_l2 %.3g\n", worst_rel);
    mh_context_destroy(ctx1);
    mh_context_destroy(ctx2);
    return test_exit_code("test_attention_oracle");
}
