/*
 * DCMHA (docs/variants.md, "DCMHA") against the double oracle and its invariants:
 *  - random configs (rank, groups, hidden, GELU kind, static W_b, biases, causal or not, odd
 *    lengths) == the oracle; the oracle's low-rank and dense compositions agree;
 *  - zero dynamic weights and no W_b == the MHA layer over the same projections (to rounding);
 *  - causality: changing the last token leaves every earlier output bit-identical (masked
 *    probabilities stay exactly 0 through post-composition, and key-side factors of future keys
 *    never reach the past);
 *  - each branch alone (gates only) acts on its own side: 0 scales q, 1 scales k, 2 scales the
 *    head output, 3 scales v, per token and head, checked against the plain attention oracle;
 *  - W_b = P - I (P a 3-cycle) permutes the heads' attention maps as out[n] = sum_m in[m] W[m, n];
 *  - groups compose block-diagonally;
 *  - decode (token by token, in chunks, a long chunk whose pass 2 recomputes the scores, and a
 *    long split-KV decode whose pass 2 reads them back) == the forward; f16/bf16
 *    caches with exactly representable K/V give the f32 cache's bits;
 *  - 1 and 2 threads give the same bits (forward and split decode; natively only: under an
 *    emulator the 1-thread runs over 2600 tokens took half of the test's 62 s).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dcmha_fixture.h"
#include "oracle.h"
#include "oracle_dcmha.h"
#include "problem.h"

/* A DCMHA config whose own parameters live in *dc (defaults; kept alive by the caller). */
static mh_layer_config dcmha_config(mh_dcmha_config* dc, int d, int H, int D, int bias) {
    mh_layer_config c = mh_layer_config_default();
    *dc = mh_dcmha_config_default();
    c.variant = MH_VARIANT_DCMHA, c.d_model = d, c.n_heads = H, c.head_dim = D, c.bias = bias;
    c.variant_config = dc;
    return c;
}

static float* random_input(test_rng* r, size_t n) {
    float* x = malloc(n * sizeof(float));
    rng_fill(r, x, n, -1, 1);
    return x;
}

static void forward(const mh_layer* L, int B, int N, const float* x, int causal, float* y) {
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = causal;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = y, .opt = &opt};
    check_status("forward", run_forward(L, &a), MH_OK);
}

static double tolerance(const mh_layer_config* c, int N) {
    return 8 * FLT_EPSILON * (c->d_model + c->n_heads * c->head_dim + N + 64);
}

/* ---- the oracle, over random configs */
static void against_oracle(const mh_context* ctx, test_rng* r) {
    for (int it = 0; it < 10; it++) {
        const int H = it % 3 == 0 ? 6 : 4, D = 3 + it % 5, B = 1 + it % 2, N = 5 + 3 * it;
        mh_dcmha_config dc;
        mh_layer_config c = dcmha_config(&dc, 16 + it, H, D, it % 2);
        dc.rank = 1 + it % 3;
        dc.groups = it % 4 == 1 ? 2 : it % 4 == 3 ? H : 1;
        dc.hidden = it % 5 == 2 ? 7 : 0;
        dc.gelu = it % 2 ? MH_GELU_TANH : MH_GELU_ERF;
        dc.static_weights = it % 3 == 1;
        dcmha_fixture f;
        if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.5f, 0), MH_OK)) continue;
        const size_t n = (size_t)B * N * c.d_model;
        float *x = random_input(r, n), *y = malloc(n * sizeof(float));
        double *want = malloc(n * sizeof(double)), *dense = malloc(n * sizeof(double));
        const int causal = it % 4 != 2;
        forward(f.layer, B, N, x, causal, y);
        mh_attn_options opt = mh_attn_options_default();
        opt.causal = causal;
        mh_forward_args a = {.batch = B, .n_q = N, .query = x, .opt = &opt};
        oracle_dcmha_forward(&f.cfg, &f.w, &a, ORACLE_COMPOSE_LOWRANK, want);
        oracle_dcmha_forward(&f.cfg, &f.w, &a, ORACLE_COMPOSE_DENSE, dense);
        double worst = 0.0;
        for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(want[i] - dense[i]) / (1.0 + fabs(want[i])));
        check_true("oracle: low-rank compose == dense per-pair compose", worst < 1e-12);
        char what[96];
        snprintf(what, sizeof what, "forward == oracle (it %d, R %d, G %d, causal %d)", it, dc.rank,
                 dc.groups, causal);
        check_close(what, y, want, n, tolerance(&c, N), 4e-6);
        free(x), free(y), free(want), free(dense);
        dcmha_fixture_free(&f);
    }
}

/* ---- zero dynamic weights, no W_b: MHA */
static void zero_is_mha(const mh_context* ctx, test_rng* r) {
    mh_dcmha_config dc;
    mh_layer_config c = dcmha_config(&dc, 32, 4, 8, 1);
    dcmha_fixture f;
    if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.0f, 0), MH_OK)) return;
    const int B = 2, N = 37;
    const size_t n = (size_t)B * N * c.d_model;
    float *x = random_input(r, n), *y = malloc(n * sizeof(float)), *y_mha = malloc(n * sizeof(float));
    for (int causal = 0; causal < 2; causal++) {
        forward(f.layer, B, N, x, causal, y);
        forward(f.base.layer, B, N, x, causal, y_mha);
        check_close_f32(causal ? "zero dynamic weights == MHA (causal)" : "zero dynamic weights == MHA", y, y_mha,
                        n, 32 * FLT_EPSILON);
    }
    free(x), free(y), free(y_mha);
    dcmha_fixture_free(&f);
}

/* ---- causality */
static void causality(const mh_context* ctx, test_rng* r) {
    mh_dcmha_config dc;
    mh_layer_config c = dcmha_config(&dc, 20, 4, 6, 1);
    dc.static_weights = 1;
    dcmha_fixture f;
    if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.8f, 0), MH_OK)) return;
    const int N = 300; /* more than one key tile */
    const size_t n = (size_t)N * c.d_model;
    float *x = random_input(r, n), *y = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
    forward(f.layer, 1, N, x, 1, y);
    for (int i = 0; i < c.d_model; i++) x[n - c.d_model + i] += 3.0f;
    forward(f.layer, 1, N, x, 1, y2);
    check_bitwise("causal: earlier outputs ignore the last token", y, y2, n - c.d_model);
    check_true("causal: the last output changes", memcmp(y + n - c.d_model, y2 + n - c.d_model, c.d_model * sizeof(float)) != 0);
    free(x), free(y), free(y2);
    dcmha_fixture_free(&f);
}

/* The plain attention oracle on Q/K/V scaled per (token, head), then the output projection
 * with head outputs scaled per (token, head). s* are [N][H] factors or NULL. */
static void scaled_mha(const layer_fixture* b, const float* x, int N, int causal, const double* sq, const double* sk,
                       const double* so, const double* sv, double* out) {
    const mh_layer_config* c = &b->cfg;
    const int H = c->n_heads, D = c->head_dim, d = c->d_model, hd = H * D;
    double* t = malloc((size_t)N * hd * sizeof(double));
    float *q = malloc((size_t)N * hd * sizeof(float)), *k = malloc((size_t)N * hd * sizeof(float));
    float* v = malloc((size_t)N * hd * sizeof(float));
    double* o = malloc((size_t)N * hd * sizeof(double));
    const float* w[3] = {b->wq, b->wk, b->wv};
    const float* bias[3] = {b->bq, b->bk, b->bv};
    float* dst[3] = {q, k, v};
    const double* sc[3] = {sq, sk, sv};
    for (int p = 0; p < 3; p++) {
        oracle_linear(x, N, d, w[p], bias[p], hd, t);
        for (int i = 0; i < N * hd; i++) dst[p][i] = (float)(t[i] * (sc[p] ? sc[p][i / D] : 1.0));
    }
    mh_attn_problem pr = {.batch = 1, .n_q = N, .n_kv = N, .n_heads = H, .n_kv_heads = H, .head_dim_qk = D,
                          .head_dim_v = D, .scale = c->scale};
    pr.q = (mh_tensor){.data = q, .stride_batch = N * hd, .stride_token = hd, .stride_head = D}, pr.k = (mh_tensor){.data = k, .stride_batch = N * hd, .stride_token = hd, .stride_head = D}, pr.v = (mh_tensor){.data = v, .stride_batch = N * hd, .stride_token = hd, .stride_head = D};
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = causal;
    oracle_attention(&pr, &opt, o, NULL);
    for (int i = 0; so && i < N * hd; i++) o[i] *= so[i / D];
    for (int tk = 0; tk < N; tk++)
        for (int j = 0; j < d; j++) {
            double acc = b->bo ? b->bo[j] : 0.0;
            for (int e = 0; e < hd; e++) acc += o[(size_t)tk * hd + e] * b->wo[(size_t)j * hd + e];
            out[(size_t)tk * d + j] = acc;
        }
    free(t), free(q), free(k), free(v), free(o);
}

/* ---- each branch alone: with only Wd's branch c non-zero, the composition is the gate
 * 1 + dd_c on its side (pre/post, query/key). */
static void branch_sides(const mh_context* ctx, test_rng* r) {
    mh_dcmha_config dc;
    mh_layer_config c = dcmha_config(&dc, 24, 4, 6, 1);
    const int N = 19, H = 4;
    for (int br = 0; br < 4; br++) {
        dcmha_fixture f;
        if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.0f, 0), MH_OK)) return;
        for (int i = 0; i < c.d_model; i++) /* Wd [d, G=1, 4, H]: branch br only */
            for (int h = 0; h < H; h++) f.wd[((size_t)i * 4 + br) * H + h] = rng_uniform(r, -0.4f, 0.4f);
        check_status("rebuild", dcmha_fixture_rebuild(&f, ctx), MH_OK);
        const size_t n = (size_t)N * c.d_model;
        float *x = random_input(r, n), *y = malloc(n * sizeof(float));
        double *want = malloc(n * sizeof(double)), *gate = malloc((size_t)N * H * sizeof(double));
        double *w1 = malloc((size_t)N * 4 * 2 * H * sizeof(double)), *w2 = malloc((size_t)N * 4 * 2 * H * sizeof(double));
        double* dd = malloc((size_t)N * 4 * H * sizeof(double));
        oracle_dcmha_factors(&f.cfg, &f.w, x, N, w1, w2, dd);
        for (int t = 0; t < N; t++)
            for (int h = 0; h < H; h++) gate[t * H + h] = 1.0 + dd[((size_t)t * 4 + br) * H + h];
        forward(f.layer, 1, N, x, 1, y);
        scaled_mha(&f.base, x, N, 1, br == 0 ? gate : NULL, br == 1 ? gate : NULL, br == 2 ? gate : NULL,
                   br == 3 ? gate : NULL, want);
        char what[64];
        snprintf(what, sizeof what, "branch %d alone acts on its own side", br);
        check_close(what, y, want, n, tolerance(&c, N), 4e-6);
        free(x), free(y), free(want), free(gate), free(w1), free(w2), free(dd);
        dcmha_fixture_free(&f);
    }
}

/* ---- W_b = P - I with P[m][pi(m)] = 1, pi = (0 1 2): composition gives head n the map of
 * head pi^-1(n) per step, i.e. an MHA whose query/key heads are permuted by pi^-1 (pre only)
 * or pi^-2 = pi (pre and post). */
static void static_permutation(const mh_context* ctx, test_rng* r) {
    static const int pi[4] = {1, 2, 0, 3}, inv[4] = {2, 0, 1, 3};
    const int H = 4, D = 5, N = 23;
    for (int both = 0; both < 2; both++) {
        mh_dcmha_config dc;
        mh_layer_config c = dcmha_config(&dc, 20, H, D, 1);
        dc.static_weights = 1;
        dcmha_fixture f;
        if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.0f, 0), MH_OK)) return;
        for (int m = 0; m < H; m++) {
            f.wb_pre[m * H + pi[m]] += 1.0f, f.wb_pre[m * H + m] -= 1.0f;
            if (both) f.wb_post[m * H + pi[m]] += 1.0f, f.wb_post[m * H + m] -= 1.0f;
        }
        check_status("rebuild", dcmha_fixture_rebuild(&f, ctx), MH_OK);
        /* MHA with head n's q/k taken from head src(n) */
        layer_fixture* b = &f.base;
        const size_t hd = (size_t)H * D, dm = (size_t)c.d_model;
        float *wq = malloc(hd * dm * sizeof(float)), *wk = malloc(hd * dm * sizeof(float));
        float *bq = malloc(hd * sizeof(float)), *bk = malloc(hd * sizeof(float));
        for (int n = 0; n < H; n++) {
            const int src = both ? pi[n] : inv[n];
            memcpy(wq + n * D * dm, b->wq + src * D * dm, D * dm * sizeof(float));
            memcpy(wk + n * D * dm, b->wk + src * D * dm, D * dm * sizeof(float));
            memcpy(bq + n * D, b->bq + src * D, D * sizeof(float));
            memcpy(bk + n * D, b->bk + src * D, D * sizeof(float));
        }
        mh_layer_weights pw = b->w;
        pw.w_q = wq, pw.w_k = wk, pw.b_q = bq, pw.b_k = bk;
        mh_layer_config mc = b->cfg;
        mh_layer* mha = NULL;
        check_status("permuted MHA", mh_layer_create(ctx, &mc, &pw, &mha), MH_OK);
        const size_t n = (size_t)N * dm;
        float *x = random_input(r, n), *y = malloc(n * sizeof(float)), *y_mha = malloc(n * sizeof(float));
        forward(f.layer, 1, N, x, 1, y);
        forward(mha, 1, N, x, 1, y_mha);
        check_close_f32(both ? "W_b pre and post = P - I: heads permuted twice" : "W_b pre = P - I: heads permuted",
                        y, y_mha, n, 64 * FLT_EPSILON);
        mh_layer_destroy(mha);
        free(wq), free(wk), free(bq), free(bk), free(x), free(y), free(y_mha);
        dcmha_fixture_free(&f);
    }
}

/* ---- groups: with the output projection blind to group 1's heads, changing group 1's
 * queries cannot reach the output when G = 2, and does when G = 1. */
static void groups_block_diagonal(const mh_context* ctx, test_rng* r) {
    const int H = 4, D = 4, N = 21;
    for (int G = 1; G <= 2; G++) {
        mh_dcmha_config dc;
        mh_layer_config c = dcmha_config(&dc, 16, H, D, 0);
        dc.groups = G;
        dc.static_weights = 1;
        dcmha_fixture f;
        if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.6f, 0), MH_OK)) return;
        layer_fixture* b = &f.base;
        for (int j = 0; j < c.d_model; j++) memset(b->wo + (size_t)j * H * D + 2 * D, 0, 2 * D * sizeof(float));
        check_status("rebuild", dcmha_fixture_rebuild(&f, ctx), MH_OK);
        const size_t n = (size_t)N * c.d_model;
        float *x = random_input(r, n), *y = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
        forward(f.layer, 1, N, x, 1, y);
        for (size_t i = 2 * D * (size_t)c.d_model; i < (size_t)H * D * c.d_model; i++) b->wq[i] *= -1.5f;
        check_status("rebuild", dcmha_fixture_rebuild(&f, ctx), MH_OK);
        forward(f.layer, 1, N, x, 1, y2);
        if (G == 2) check_bitwise("G = 2: group 1 never reaches group 0", y, y2, n);
        else check_true("G = 1: every head reaches every head", memcmp(y, y2, n * sizeof(float)) != 0);
        free(x), free(y), free(y2);
        dcmha_fixture_free(&f);
    }
}

/* Decodes T tokens of x [B, T, d] in the given chunk sizes into y. */
static void decode_all(const mh_layer* L, mh_kv_cache* cache, int B, int T, int d, const float* x, float* y,
                       const int* chunks, int n_chunks) {
    float *xc = malloc(sizeof(float) * B * T * d), *yc = malloc(sizeof(float) * B * T * d);
    for (int ci = 0, t = 0; t < T; ci++) {
        const int n = ci < n_chunks && chunks[ci] < T - t ? chunks[ci] : ci < n_chunks ? T - t : 1;
        for (int b = 0; b < B; b++) memcpy(xc + (size_t)b * n * d, x + ((size_t)b * T + t) * d, sizeof(float) * n * d);
        check_status("decode", run_decode(L, cache, B, n, xc, yc), MH_OK);
        for (int b = 0; b < B; b++) memcpy(y + ((size_t)b * T + t) * d, yc + (size_t)b * n * d, sizeof(float) * n * d);
        t += n;
    }
    free(xc), free(yc);
}

/* ---- decode == forward; low-precision caches; split-KV decode; threads */
static void decode_matches(const mh_context* ctx, const mh_context* ctx1, test_rng* r) {
    mh_dcmha_config dc;
    mh_layer_config c = dcmha_config(&dc, 24, 4, 8, 1);
    dc.groups = 2;
    dc.static_weights = 1;
    dcmha_fixture f;
    if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, 0.5f, 1), MH_OK)) return;
    const int B = 2, T = 31, d = c.d_model;
    const size_t n = (size_t)B * T * d;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *y_dec = malloc(n * sizeof(float));
    float* y_low = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = 0.25f * (float)rng_int(r, -4, 4); /* dyadic: K/V exact in f16/bf16 */
    forward(f.layer, B, T, x, 1, y);
    mh_kv_cache* cache = NULL;
    check_status("cache", mh_kv_cache_create(f.layer, B, T, MH_DTYPE_F32, &cache), MH_OK);
    static const int chunks[] = {9, 1, 6, 1, 1, 13};
    decode_all(f.layer, cache, B, T, d, x, y_dec, NULL, 0);
    check_close_f32("token-by-token decode == forward", y_dec, y, n, tolerance(&c, T));
    mh_kv_cache_reset(cache);
    decode_all(f.layer, cache, B, T, d, x, y_dec, chunks, 6);
    check_close_f32("chunked decode == forward", y_dec, y, n, tolerance(&c, T));
    mh_kv_cache_destroy(cache);
    for (mh_dtype dt = MH_DTYPE_F16; dt <= MH_DTYPE_BF16; dt++) {
        check_status("cache", mh_kv_cache_create(f.layer, B, T, dt, &cache), MH_OK);
        decode_all(f.layer, cache, B, T, d, x, y_low, chunks, 6);
        check_bitwise(dt == MH_DTYPE_F16 ? "f16 cache == f32 cache (exact K/V)" : "bf16 cache == f32 cache (exact K/V)",
                      y_low, y_dec, n);
        mh_kv_cache_destroy(cache);
    }
    free(x), free(y), free(y_dec), free(y_low);

    /* a long cache: the decode splits its keys into chunks and merges them */
    const int L = 2600;
    const size_t nl = (size_t)L * d;
    float *xl = random_input(r, nl), *yl = malloc(nl * sizeof(float)), *yd = malloc(nl * sizeof(float));
    float* yd1 = malloc(nl * sizeof(float));
    forward(f.layer, 1, L, xl, 1, yl);
    const int threads1 = !test_emulated();
    if (!threads1) printf("emulator: the 1 vs 2 threads comparisons run natively only\n");
    mh_layer* one = NULL;
    if (threads1) {
        check_status("1-thread layer", mh_layer_create(ctx1, &f.cfg, &f.w, &one), MH_OK);
        forward(one, 1, L, xl, 1, yd1);
        check_bitwise("forward: 1 thread == 2 threads", yd1, yl, nl);
    }
    static const int long_chunks[] = {2597, 1, 1, 1};
    for (int th = 0; th < 1 + threads1; th++) {
        const mh_layer* lay = th ? one : f.layer;
        check_status("cache", mh_kv_cache_create(lay, 1, L, MH_DTYPE_F32, &cache), MH_OK);
        decode_all(lay, cache, 1, L, d, xl, th ? yd1 : yd, long_chunks, 4);
        mh_kv_cache_destroy(cache);
    }
    /* 2597 rows in one chunk: too many rows to keep their scores, pass 2 recomputes them */
    check_close_f32("long chunked decode (recomputing pass 2) == forward", yd, yl, nl - 3 * (size_t)d, tolerance(&c, L));
    check_close_f32("split-KV decode (stored scores) == forward", yd + nl - 3 * d, yl + nl - 3 * d, 3 * (size_t)d,
                    tolerance(&c, L));
    if (threads1) check_bitwise("decode: 1 thread == 2 threads", yd1, yd, nl);
    mh_layer_destroy(one);
    free(xl), free(yl), free(yd), free(yd1);
    dcmha_fixture_free(&f);
}

int main(void) {
    mh_context* ctx = test_context(2);
    mh_context* ctx1 = test_context(1);
    test_rng r;
    rng_seed(&r, 7);
    against_oracle(ctx, &r);
    zero_is_mha(ctx, &r);
    causality(ctx, &r);
    branch_sides(ctx, &r);
    static_permutation(ctx, &r);
    groups_block_diagonal(ctx, &r);
    decode_matches(ctx, ctx1, &r);
    mh_context_destroy(ctx);
    mh_context_destroy(ctx1);
    return test_exit_code("test_dcmha");
}
