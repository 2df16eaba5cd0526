/*
 * Invariants of the GQA family (docs/variants.md, section 2):
 *  1. GQA with Hkv = H is MHA: bitwise equal (same code path, group size 1).
 *  2. GQA with Hkv = 1 is MQA: bitwise equal.
 *  3. GQA equals MHA whose K/V weights are the GQA ones repeat-interleaved
 *     (W_K^{MHA,h} = W_K^{GQA,h/g}): same math, different grouping, so equal to rounding.
 *  4. Causality: perturbing the input at tokens > t leaves outputs <= t bitwise unchanged.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"

enum { B = 2, N = 37, D_MODEL = 48, H = 6, D = 8 };

static float* forward(const mh_layer* L, const float* x, int causal) {
    float* out = malloc(sizeof(float) * B * N * D_MODEL);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = causal;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = out, .opt = &opt};
    check_status("forward", run_forward(L, &a), MH_OK);
    return out;
}

static mh_layer_config config(mh_variant v, int n_kv) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = v, c.d_model = D_MODEL, c.n_heads = H, c.n_kv_heads = n_kv, c.head_dim = D, c.bias = 1;
    return c;
}

/* Same weights, different variant label: the outputs must be bitwise equal. */
static void same_path(const mh_context* ctx, test_rng* r, const float* x, mh_variant a, mh_variant b,
                      int n_kv, const char* what) {
    layer_fixture f;
    mh_layer_config ca = config(a, n_kv), cb = config(b, b == MH_VARIANT_GQA ? n_kv : 0);
    mh_layer* lb = NULL;
    if (!check_status(what, fixture_make(&f, ctx, &ca, r, 0.5f), MH_OK)) return;
    if (check_status(what, fixture_recreate(&f, ctx, &cb, &lb), MH_OK)) {
        float *ya = forward(f.layer, x, 1), *yb = forward(lb, x, 1);
        check_bitwise(what, ya, yb, (size_t)B * N * D_MODEL);
        free(ya), free(yb);
    }
    mh_layer_destroy(lb);
    fixture_free(&f);
}

static void repeat_interleave(const mh_context* ctx, test_rng* r, const float* x, int n_kv) {
    const int g = H / n_kv;
    layer_fixture f;
    mh_layer_config cg = config(MH_VARIANT_GQA, n_kv);
    if (!check_status("gqa create", fixture_make(&f, ctx, &cg, r, 0.5f), MH_OK)) return;
    /* MHA weights: head h of K/V is GQA kv head h / g */
    float* wk = malloc(sizeof(float) * H * D * D_MODEL);
    float* wv = malloc(sizeof(float) * H * D * D_MODEL);
    float* bk = malloc(sizeof(float) * H * D);
    float* bv = malloc(sizeof(float) * H * D);
    for (int h = 0; h < H; h++) {
        memcpy(wk + (size_t)h * D * D_MODEL, f.wk + (size_t)(h / g) * D * D_MODEL, sizeof(float) * D * D_MODEL);
        memcpy(wv + (size_t)h * D * D_MODEL, f.wv + (size_t)(h / g) * D * D_MODEL, sizeof(float) * D * D_MODEL);
        memcpy(bk + h * D, f.bk + (h / g) * D, sizeof(float) * D);
        memcpy(bv + h * D, f.bv + (h / g) * D, sizeof(float) * D);
    }
    mh_layer_weights w = {.w_q = f.wq, .w_k = wk, .w_v = wv, .w_o = f.wo, .b_q = f.bq, .b_k = bk,
                          .b_v = bv, .b_o = f.bo};
    mh_layer_config cm = config(MH_VARIANT_MHA, 0);
    mh_layer* mha = NULL;
    if (check_status("mha create", mh_layer_create(ctx, &cm, &w, &mha), MH_OK)) {
        float *yg = forward(f.layer, x, 0), *ym = forward(mha, x, 0);
        check_close_f32("GQA == MHA with repeat-interleaved K/V weights", yg, ym,
                        (size_t)B * N * D_MODEL, 16 * FLT_EPSILON * (D_MODEL + H * D));
        free(yg), free(ym);
    }
    mh_layer_destroy(mha);
    free(wk), free(wv), free(bk), free(bv);
    fixture_free(&f);
}

static void causality(const mh_context* ctx, test_rng* r, const float* x) {
    layer_fixture f;
    mh_layer_config c = config(MH_VARIANT_GQA, 2);
    if (!check_status("causal create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    float* x2 = malloc(sizeof(float) * B * N * D_MODEL);
    float* y = forward(f.layer, x, 1);
    for (int t = 0; t < N - 1; t += 9) {
        memcpy(x2, x, sizeof(float) * B * N * D_MODEL);
        for (int b = 0; b < B; b++)
            for (int s = t + 1; s < N; s++)
                for (int d = 0; d < D_MODEL; d++) x2[((size_t)b * N + s) * D_MODEL + d] += 3.0f;
        float* y2 = forward(f.layer, x2, 1);
        int same = 1, changed = 0;
        for (int b = 0; b < B; b++) {
            const size_t keep = (size_t)(t + 1) * D_MODEL, base = (size_t)b * N * D_MODEL;
            same &= memcmp(y + base, y2 + base, keep * sizeof(float)) == 0;
            changed |= memcmp(y + base + keep, y2 + base + keep, (N * D_MODEL - keep) * sizeof(float)) != 0;
        }
        check_true("causal: outputs up to t unchanged", same);
        check_true("causal: later outputs do change (the perturbation is real)", changed);
        free(y2);
    }
    free(x2), free(y);
    fixture_free(&f);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 5);
    float* x = malloc(sizeof(float) * B * N * D_MODEL);
    rng_fill(&r, x, (size_t)B * N * D_MODEL, -1, 1);
    same_path(ctx, &r, x, MH_VARIANT_GQA, MH_VARIANT_MHA, H, "GQA(Hkv = H) == MHA bitwise");
    same_path(ctx, &r, x, MH_VARIANT_GQA, MH_VARIANT_MQA, 1, "GQA(Hkv = 1) == MQA bitwise");
    repeat_interleave(ctx, &r, x, 2);
    repeat_interleave(ctx, &r, x, 3);
    repeat_interleave(ctx, &r, x, 1);
    causality(ctx, &r, x);
    free(x);
    mh_context_destroy(ctx);
    return test_exit_code("test_gqa_invariants");
}
