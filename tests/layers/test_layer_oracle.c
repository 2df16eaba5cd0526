/*
 * Whole layers (projections, attention, output projection) against the double-precision
 * oracle: MHA, GQA and MQA; self- and cross-attention with kdim/vdim; biases on and off;
 * Dv != D; H*D != d_model; per-call options (causal, key lengths, additive mask, probs) and
 * layer options (window, soft-cap, ALiBi, sinks); batch > 1.
 *
 * Tolerance: three f32 GEMMs of reduction length d_model / H*Dv around the attention add
 * about eps * reduction * |x||w| each; with amplitudes 1 (inputs) and 0.5 (weights) we allow
 * max_abs <= 8 * eps32 * (d + H*Dv + M + 64) and rel_l2 <= 2e-6.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "oracle.h"
#include "problem.h"

static void run_case(const mh_context* ctx, test_rng* r, mh_layer_config cfg, int B, int N, int M,
                     int cross, int id) {
    float slopes[32], sinks[32];
    if (rng_int(r, 0, 3) == 0) cfg.window = rng_int(r, 1, 12);
    if (rng_int(r, 0, 3) == 0) cfg.softcap = rng_uniform(r, 1.0f, 20.0f);
    if (rng_int(r, 0, 3) == 0) {
        for (int h = 0; h < cfg.n_heads; h++) slopes[h] = 0.5f / (float)(h + 1);
        cfg.alibi_slopes = slopes;
    }
    if (rng_int(r, 0, 3) == 0) {
        for (int h = 0; h < cfg.n_heads; h++) sinks[h] = rng_uniform(r, -1.0f, 2.0f);
        cfg.sinks = sinks;
    }
    layer_fixture f;
    char what[200];
    snprintf(what, sizeof what, "case %d: variant %d d%d H%d Hkv%d D%d Dv%d k%d v%d bias%d B%d N%d M%d cross%d",
             id, (int)cfg.variant, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
             cfg.head_dim_v, cfg.kdim, cfg.vdim, cfg.bias, B, N, M, cross);
    if (!check_status(what, fixture_make(&f, ctx, &cfg, r, 0.5f), MH_OK)) return;
    f.cfg.window = cfg.window, f.cfg.softcap = cfg.softcap;
    f.cfg.alibi_slopes = cfg.alibi_slopes, f.cfg.sinks = cfg.sinks;
    const int d = cfg.d_model;
    float* xq = malloc(sizeof(float) * (size_t)B * N * d);
    float* xk = malloc(sizeof(float) * (size_t)B * M * f.cfg.kdim);
    float* xv = malloc(sizeof(float) * (size_t)B * M * f.cfg.vdim);
    rng_fill(r, xq, (size_t)B * N * d, -1, 1);
    rng_fill(r, xk, (size_t)B * M * f.cfg.kdim, -1, 1);
    rng_fill(r, xv, (size_t)B * M * f.cfg.vdim, -1, 1);
    const int Mk = cross ? M : N;
    mh_attn_options opt = mh_attn_options_default();
    int32_t kv_len[4];
    float* mask = NULL;
    opt.causal = rng_int(r, 0, 1);
    if (rng_int(r, 0, 2) == 0) {
        for (int b = 0; b < B; b++) kv_len[b] = rng_int(r, 1, Mk);
        opt.kv_len = kv_len;
    }
    if (rng_int(r, 0, 2) == 0) {
        mask = malloc(sizeof(float) * (size_t)N * Mk);
        rng_fill(r, mask, (size_t)N * Mk, -1, 1);
        opt.mask = mask, opt.mask_stride_row = Mk;
    }
    float* out = malloc(sizeof(float) * (size_t)B * N * d);
    mh_forward_args a = {.batch = B, .n_q = N, .n_kv = M, .query = xq, .key = cross ? xk : NULL,
                         .value = cross ? xv : NULL, .out = out, .opt = &opt};
    if (check_status(what, run_forward(f.layer, &a), MH_OK)) {
        double* want = malloc(sizeof(double) * (size_t)B * N * d);
        oracle_layer_forward(&f.cfg, &f.w, &a, want);
        const int hdv = cfg.n_heads * f.cfg.head_dim_v;
        check_close(what, out, want, (size_t)B * N * d, 8 * FLT_EPSILON * (d + hdv + Mk + 64), 2e-6);
        free(want);
    }
    free(xq), free(xk), free(xv), free(out), free(mask);
    fixture_free(&f);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 99);
    int id = 0;
    for (int i = 0; i < 60; i++, id++) {
        mh_layer_config c = mh_layer_config_default();
        c.variant = (mh_variant)rng_int(&r, 0, 2);
        const int Hkv = rng_int(&r, 1, 3), g = rng_int(&r, 1, 3);
        c.n_heads = c.variant == MH_VARIANT_MQA ? g : Hkv * g;
        c.n_kv_heads = c.variant == MH_VARIANT_GQA ? Hkv : 0;
        c.head_dim = rng_int(&r, 1, 20);
        c.head_dim_v = rng_int(&r, 0, 1) ? 0 : rng_int(&r, 1, 20);
        c.d_model = rng_int(&r, 1, 40);
        c.bias = rng_int(&r, 0, 1);
        const int cross = rng_int(&r, 0, 2) == 0;
        if (cross) c.kdim = rng_int(&r, 1, 30), c.vdim = rng_int(&r, 1, 30);
        run_case(ctx, &r, c, rng_int(&r, 1, 3), rng_int(&r, 1, 30), rng_int(&r, 1, 40), cross, id);
    }
    /* a realistic shape: d 256, 8 heads of 32, GQA 2, causal */
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = 256, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 32, c.bias = 1;
    run_case(ctx, &r, c, 2, 77, 77, 0, id++);
    mh_context_destroy(ctx);
    return test_exit_code("test_layer_oracle");
}
