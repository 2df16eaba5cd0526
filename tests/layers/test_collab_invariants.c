/*
 * Invariants of CollabHead (docs/variants.md, "CollabHead"):
 *  1. mh_convert_mha_to_collab: the converted layer (D~ = H*D) equals the MHA layer with biases.
 *  2. Any b_K of the MHA leaves its output unchanged: the converted layer (which has none)
 *     matches the MHA oracle for a different random b_K.
 *  3. Mixing on the query == mixing on the key (oracle forms), and the layer matches both.
 *  4. Identical mixing (and content) rows give identical attention maps for all heads.
 *  5. H = 1, m = 1, C = 0 is single-head attention of width D~ (an MHA layer, q/k bias 0).
 *  6. Decode == causal forward, token by token and in chunks; f16/bf16 caches on exactly
 *     representable values are bitwise the f32 cache; the cache holds D~ + H + H*Dv per token.
 *  7. Results are bitwise identical for 1, 2 and 3 threads (prefill, split decode, probs);
 *     natively only (under an emulator the three 2300-token runs took 29 of the test's 33 s).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "oracle.h"
#include "oracle_collab.h"
#include "problem.h"

enum { B = 2, N = 23, D_MODEL = 24, H = 4, D = 6 };
#define TOL(hd, m) (8 * FLT_EPSILON * (D_MODEL + (hd) + (m) + 64))

static float* forward(const mh_layer* L, const float* x, int batch, int n, int causal, float* probs) {
    float* out = malloc(sizeof(float) * (size_t)batch * n * D_MODEL);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = causal, opt.probs = probs;
    mh_forward_args a = {.batch = batch, .n_q = n, .query = x, .out = out, .opt = &opt};
    check_status("forward", run_forward(L, &a), MH_OK);
    return out;
}

/* A CollabHead config whose D~ lives in *cc (kept alive by the caller). */
static mh_layer_config collab_config(mh_collab_config* cc, int heads, int dt) {
    mh_layer_config c = mh_layer_config_default();
    *cc = mh_collab_config_default();
    cc->collab_dim = dt;
    c.variant = MH_VARIANT_COLLAB, c.d_model = D_MODEL, c.n_heads = heads, c.head_dim = D;
    c.variant_config = cc, c.bias = 1;
    return c;
}

/* 1 and 2 */
static void conversion(const mh_context* ctx, test_rng* r, const float* x) {
    mh_layer_config cm = mh_layer_config_default();
    cm.d_model = D_MODEL, cm.n_heads = H, cm.head_dim = D, cm.bias = 1;
    layer_fixture f;
    if (!check_status("mha create", fixture_make(&f, ctx, &cm, r, 0.5f), MH_OK)) return;
    float* mix = malloc(sizeof(float) * H * H * D);
    float* content = malloc(sizeof(float) * H * D_MODEL);
    mh_layer_config cc;
    mh_collab_config ccc;
    mh_layer_weights wc;
    mh_collab_weights cw;
    mh_layer* lc = NULL;
    check_status("convert", mh_convert_mha_to_collab(&cm, &f.w, mix, content, &cc, &ccc, &wc, &cw), MH_OK);
    check_true("converted: D~ = H*D, weights reused",
               cc.variant == MH_VARIANT_COLLAB && cc.variant_config == &ccc &&
                   ccc.variant == MH_VARIANT_COLLAB && ccc.collab_dim == H * D && wc.w_q == f.wq &&
                   wc.w_k == f.wk && !wc.b_q && !wc.b_k && wc.b_v == f.bv &&
                   wc.variant_weights == &cw && cw.mix == mix && cw.content == content);
    if (check_status("collab create", mh_layer_create(ctx, &cc, &wc, &lc), MH_OK)) {
        float *ym = forward(f.layer, x, B, N, 1, NULL), *yc = forward(lc, x, B, N, 1, NULL);
        mh_forward_args a = {.batch = B, .n_q = N, .query = x};
        mh_attn_options opt = mh_attn_options_default();
        opt.causal = 1, a.opt = &opt;
        double* want = malloc(sizeof(double) * B * N * D_MODEL);
        oracle_layer_forward(&f.cfg, &f.w, &a, want);
        const size_t n = (size_t)B * N * D_MODEL;
        check_close("converted CollabHead == MHA oracle", yc, want, n, TOL(H * D, N), 2e-6);
        check_close_f32("converted CollabHead == MHA layer", yc, ym, n, 2 * TOL(H * D, N));
        rng_fill(r, f.bk, H * D, -2, 2); /* another b_K: the MHA output must not change */
        oracle_layer_forward(&f.cfg, &f.w, &a, want);
        check_close("MHA with another b_K == converted CollabHead", yc, want, n, TOL(H * D, N), 2e-6);
        free(ym), free(yc), free(want);
    }
    mh_layer_destroy(lc);
    free(mix), free(content);
    fixture_free(&f);
}

/* 3 */
static void mixing_side(const mh_context* ctx, test_rng* r, const float* x) {
    mh_collab_config c_cc;
    mh_layer_config c = collab_config(&c_cc, H, 10);
    layer_fixture f;
    if (!check_status("collab create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .opt = &opt};
    const size_t n = (size_t)B * N * D_MODEL;
    double *wq = malloc(sizeof(double) * n), *wk = malloc(sizeof(double) * n);
    oracle_collab_forward(&f.cfg, &f.w, &a, ORACLE_MIX_QUERY, wq, NULL);
    oracle_collab_forward(&f.cfg, &f.w, &a, ORACLE_MIX_KEY, wk, NULL);
    double diff = 0;
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs(wq[i] - wk[i]));
    check_true("mixing on query == mixing on key (oracle)", diff < 1e-5);
    float* y = forward(f.layer, x, B, N, 1, NULL);
    check_close("layer == key-mixed oracle", y, wk, n, TOL(H * D, N), 2e-6);
    free(wq), free(wk), free(y);
    fixture_free(&f);
}

/* 4 */
static void identical_rows(const mh_context* ctx, test_rng* r, const float* x) {
    mh_collab_config c_cc;
    mh_layer_config c = collab_config(&c_cc, H, 9);
    layer_fixture f;
    if (!check_status("collab create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    for (int h = 1; h < H; h++) {
        memcpy(f.mix + h * 9, f.mix, sizeof(float) * 9);
        memcpy(f.content + h * D_MODEL, f.content, sizeof(float) * D_MODEL);
    }
    mh_layer_destroy(f.layer);
    check_status("recreate", mh_layer_create(ctx, &c, &f.w, &f.layer), MH_OK);
    const size_t per_head = (size_t)N * N;
    float* probs = malloc(sizeof(float) * B * H * per_head);
    free(forward(f.layer, x, B, N, 0, probs));
    for (int b = 0; b < B; b++)
        for (int h = 1; h < H; h++)
            check_close_f32("identical mixing rows: identical maps", probs + (b * H + h) * per_head,
                            probs + b * H * per_head, per_head, 1e-6);
    free(probs);
    fixture_free(&f);
}

/* 5 */
static void single_head(const mh_context* ctx, test_rng* r, const float* x) {
    enum { DT = 11 };
    mh_collab_config c_cc;
    mh_layer_config c = collab_config(&c_cc, 1, DT);
    c.head_dim = DT; /* default scale 1/sqrt(D~) on both sides */
    layer_fixture f;
    if (!check_status("collab create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    for (int i = 0; i < DT; i++) f.mix[i] = 1.0f;
    memset(f.content, 0, sizeof(float) * D_MODEL);
    mh_layer_destroy(f.layer);
    check_status("recreate", mh_layer_create(ctx, &c, &f.w, &f.layer), MH_OK);
    float zeros[DT] = {0};
    mh_layer_config cm = mh_layer_config_default();
    cm.d_model = D_MODEL, cm.n_heads = 1, cm.head_dim = DT, cm.bias = 1;
    mh_layer_weights wm = {.w_q = f.wq, .w_k = f.wk, .w_v = f.wv, .w_o = f.wo,
                           .b_q = zeros, .b_k = zeros, .b_v = f.bv, .b_o = f.bo};
    mh_layer* lm = NULL;
    if (check_status("mha create", mh_layer_create(ctx, &cm, &wm, &lm), MH_OK)) {
        float *yc = forward(f.layer, x, B, N, 1, NULL), *ym = forward(lm, x, B, N, 1, NULL);
        check_close_f32("H = 1, m = 1 == single-head attention of width D~", yc, ym,
                        (size_t)B * N * D_MODEL, 2 * TOL(DT, N));
        free(yc), free(ym);
    }
    mh_layer_destroy(lm);
    fixture_free(&f);
}

/* 6 */
static void decode_equals_prefill(const mh_context* ctx, test_rng* r) {
    float slopes[H] = {0.5f, 0.25f, 0.125f, 0.0625f}, sinks[H] = {0.1f, -0.3f, 0.7f, 0.0f};
    mh_collab_config c_cc;
    mh_layer_config c = collab_config(&c_cc, H, 7);
    c.head_dim_v = 5, c.window = 9, c.softcap = 4.0f, c.alibi_slopes = slopes, c.sinks = sinks;
    layer_fixture f;
    if (!check_status("collab create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    /* exact in f16/bf16: k~ and V are multiples of 1/32 below 2^3 */
    fill_dyadic(r, f.wk, 7 * D_MODEL, 0.125f, 2);
    fill_dyadic(r, f.wv, (size_t)H * 5 * D_MODEL, 0.125f, 2);
    fill_dyadic(r, f.bv, (size_t)H * 5, 0.125f, 4);
    mh_layer_destroy(f.layer);
    check_status("recreate", mh_layer_create(ctx, &c, &f.w, &f.layer), MH_OK);
    const size_t n = (size_t)B * N * D_MODEL;
    float* x = malloc(sizeof(float) * n);
    fill_dyadic(r, x, n, 0.25f, 4);
    float* y_full = forward(f.layer, x, B, N, 1, NULL);
    float *y32 = malloc(sizeof(float) * n), *ylp = malloc(sizeof(float) * n);
    static const int chunks[] = {9, 1, 4, 1, 1, 10};
    mh_kv_cache* c32 = NULL;
    check_status("cache", mh_kv_cache_create(f.layer, B, N, MH_DTYPE_F32, &c32), MH_OK);
    check_true("cache bytes per token = 4 (D~ + H + H*Dv)",
               mh_kv_cache_bytes_per_token(c32) == 4 * (7 + H + H * 5));
    decode_in_chunks(f.layer, c32, B, N, D_MODEL, x, y32, NULL);
    check_close_f32("token-by-token decode == forward", y32, y_full, n, TOL(H * 7, N));
    mh_kv_cache_reset(c32);
    decode_in_chunks(f.layer, c32, B, N, D_MODEL, x, y32, chunks);
    check_close_f32("chunked decode == forward", y32, y_full, n, TOL(H * 7, N));
    for (int dt = MH_DTYPE_F16; dt <= MH_DTYPE_BF16; dt++) {
        mh_kv_cache* clp = NULL;
        check_status("cache low", mh_kv_cache_create(f.layer, B, N, (mh_dtype)dt, &clp), MH_OK);
        check_true("low-precision bytes per token", mh_kv_cache_bytes_per_token(clp) == 2 * (7 + H * 5) + 4 * H);
        decode_in_chunks(f.layer, clp, B, N, D_MODEL, x, ylp, chunks);
        check_bitwise(dt == MH_DTYPE_F16 ? "f16 cache == f32 cache" : "bf16 cache == f32 cache", ylp, y32, n);
        mh_kv_cache_destroy(clp);
    }
    mh_kv_cache_destroy(c32);
    free(x), free(y_full), free(y32), free(ylp);
    fixture_free(&f);
}

/* 7: forward with probabilities, a chunked prefill into a bf16 cache, then one token over
 * 2300 keys (split over the keys), for 1, 2 and 3 threads. */
enum { NL = 70, ML = 2300, HT = 8 };

static void run_threads(int threads, const layer_fixture* f, const float* x, float* y, float* probs, float* dec) {
    mh_context* ctx = test_context(threads);
    mh_layer* L = NULL;
    if (!check_status("threads create", mh_layer_create(ctx, &f->cfg, &f->w, &L), MH_OK)) return;
    float* yf = forward(L, x, 1, NL, 1, probs);
    memcpy(y, yf, sizeof(float) * NL * D_MODEL);
    mh_kv_cache* cache = NULL;
    float* scratch = malloc(sizeof(float) * ML * D_MODEL);
    check_status("cache", mh_kv_cache_create(L, 1, ML, MH_DTYPE_BF16, &cache), MH_OK);
    check_status("long prefill", run_decode(L, cache, 1, ML - 1, x, scratch), MH_OK);
    check_status("split decode", run_decode(L, cache, 1, 1, x + (size_t)(ML - 1) * D_MODEL, dec), MH_OK);
    mh_kv_cache_destroy(cache);
    mh_layer_destroy(L);
    mh_context_destroy(ctx);
    free(yf), free(scratch);
}

static void threads_bitwise(test_rng* r) {
    if (test_emulated()) {
        printf("emulator: the thread-count comparison runs natively only\n");
        return;
    }
    mh_context* ctx = test_context(1);
    mh_collab_config c_cc;
    mh_layer_config c = collab_config(&c_cc, HT, 16);
    layer_fixture f;
    if (!check_status("collab create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    float* x = malloc(sizeof(float) * ML * D_MODEL);
    rng_fill(r, x, (size_t)ML * D_MODEL, -1, 1);
    const size_t np = (size_t)HT * NL * NL;
    float *y[2], *p[2], *d[2];
    for (int i = 0; i < 2; i++)
        y[i] = malloc(sizeof(float) * NL * D_MODEL), p[i] = malloc(sizeof(float) * np), d[i] = malloc(sizeof(float) * D_MODEL);
    run_threads(1, &f, x, y[0], p[0], d[0]);
    for (int t = 2; t <= 3; t++) {
        run_threads(t, &f, x, y[1], p[1], d[1]);
        check_bitwise("forward: any thread count", y[1], y[0], (size_t)NL * D_MODEL);
        check_bitwise("probabilities: any thread count", p[1], p[0], np);
        check_bitwise("split decode: any thread count", d[1], d[0], D_MODEL);
    }
    for (int i = 0; i < 2; i++) free(y[i]), free(p[i]), free(d[i]);
    free(x);
    fixture_free(&f);
    mh_context_destroy(ctx);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 66);
    float* x = malloc(sizeof(float) * B * N * D_MODEL);
    rng_fill(&r, x, (size_t)B * N * D_MODEL, -1, 1);
    conversion(ctx, &r, x);
    mixing_side(ctx, &r, x);
    identical_rows(ctx, &r, x);
    single_head(ctx, &r, x);
    decode_equals_prefill(ctx, &r);
    threads_bitwise(&r);
    free(x);
    mh_context_destroy(ctx);
    return test_exit_code("test_collab_invariants");
}
