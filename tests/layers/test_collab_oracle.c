/*
 * CollabHead layers against the double oracle (tests/support/oracle_collab.c): random shapes
 * (D~ any width, not tied to H*D), biases, cross-attention, causal/q_offset/kv_len/mask per
 * call, the model-level options (window, soft-cap, ALiBi, sinks) and the probabilities; a
 * prefill-sized case (GEMM path) and a long single-query case (split over the keys).
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "oracle_collab.h"
#include "problem.h"

static int collab_dim(const mh_layer_config* c) {
    return ((const mh_collab_config*)c->variant_config)->collab_dim;
}

static void run_case(const mh_context* ctx, test_rng* r, mh_layer_config cfg, int B, int N, int M,
                     int cross, int opts, int id) {
    char what[96];
    snprintf(what, sizeof what, "case %d (H %d D~ %d Dv %d B %d N %d M %d cross %d opts %d)", id,
             cfg.n_heads, collab_dim(&cfg), cfg.head_dim_v, B, N, M, cross, opts);
    float slopes[8], sinks[8];
    if (opts) {
        for (int h = 0; h < cfg.n_heads; h++) slopes[h] = 0.3f / (float)(h + 1), sinks[h] = rng_uniform(r, -1, 1);
        cfg.window = rng_int(r, 0, 1) ? rng_int(r, 1, 12) : 0, cfg.softcap = rng_int(r, 0, 1) ? 3.0f : 0.0f;
        cfg.alibi_slopes = rng_int(r, 0, 1) ? slopes : NULL, cfg.sinks = rng_int(r, 0, 1) ? sinks : NULL;
    }
    layer_fixture f;
    if (!check_status(what, fixture_make(&f, ctx, &cfg, r, 0.5f), MH_OK)) return;
    const int d = cfg.d_model, Mk = cross ? M : N, H = cfg.n_heads;
    float* xq = malloc(sizeof(float) * (size_t)B * N * d);
    float* xk = malloc(sizeof(float) * (size_t)B * M * f.cfg.kdim);
    float* xv = malloc(sizeof(float) * (size_t)B * M * f.cfg.vdim);
    rng_fill(r, xq, (size_t)B * N * d, -1, 1);
    rng_fill(r, xk, (size_t)B * M * f.cfg.kdim, -1, 1);
    rng_fill(r, xv, (size_t)B * M * f.cfg.vdim, -1, 1);
    mh_attn_options opt = mh_attn_options_default();
    int32_t kv_len[4];
    float* mask = NULL;
    const size_t n_probs = (size_t)B * H * N * Mk;
    float* probs = malloc(sizeof(float) * n_probs);
    if (opts) {
        opt.causal = rng_int(r, 0, 1);
        if (rng_int(r, 0, 1)) opt.q_offset = rng_int(r, 0, Mk);
        if (rng_int(r, 0, 1)) {
            for (int b = 0; b < B; b++) kv_len[b] = rng_int(r, 0, Mk);
            opt.kv_len = kv_len;
        }
        if (rng_int(r, 0, 1)) {
            mask = malloc(sizeof(float) * (size_t)H * N * Mk);
            rng_fill(r, mask, (size_t)H * N * Mk, -1, 1);
            opt.mask = mask, opt.mask_stride_head = (ptrdiff_t)N * Mk, opt.mask_stride_row = Mk;
        }
        opt.probs = probs;
    }
    float* out = malloc(sizeof(float) * (size_t)B * N * d);
    mh_forward_args a = {.batch = B, .n_q = N, .n_kv = M, .query = xq, .key = cross ? xk : NULL,
                         .value = cross ? xv : NULL, .out = out, .opt = &opt};
    if (check_status(what, run_forward(f.layer, &a), MH_OK)) {
        double* want = malloc(sizeof(double) * (size_t)B * N * d);
        double* want_p = malloc(sizeof(double) * n_probs);
        oracle_collab_forward(&f.cfg, &f.w, &a, ORACLE_MIX_QUERY, want, want_p);
        const int hdv = H * f.cfg.head_dim_v;
        check_close(what, out, want, (size_t)B * N * d,
                    8 * FLT_EPSILON * (d + hdv + collab_dim(&cfg) + Mk + 64), 2e-6);
        if (opts) check_close("probabilities", probs, want_p, n_probs, 64 * FLT_EPSILON, 1e-5);
        free(want), free(want_p);
    }
    free(xq), free(xk), free(xv), free(out), free(mask), free(probs);
    fixture_free(&f);
}

/* D~ goes to *cc (kept alive by the caller). */
static mh_layer_config random_config(test_rng* r, mh_collab_config* cc) {
    mh_layer_config c = mh_layer_config_default();
    *cc = mh_collab_config_default();
    c.variant = MH_VARIANT_COLLAB, c.variant_config = cc;
    c.n_heads = rng_int(r, 1, 6);
    c.head_dim = rng_int(r, 1, 16);
    cc->collab_dim = rng_int(r, 1, 40);
    c.head_dim_v = rng_int(r, 0, 1) ? 0 : rng_int(r, 1, 20);
    c.d_model = rng_int(r, 1, 40);
    c.bias = rng_int(r, 0, 1);
    if (rng_int(r, 0, 3) == 0) c.scale = rng_uniform(r, 0.05f, 0.5f);
    return c;
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 606);
    int id = 0;
    mh_collab_config cc;
    for (int i = 0; i < 60; i++, id++) {
        mh_layer_config c = random_config(&r, &cc);
        const int cross = rng_int(&r, 0, 2) == 0;
        if (cross) c.kdim = rng_int(&r, 1, 30), c.vdim = rng_int(&r, 1, 30);
        run_case(ctx, &r, c, rng_int(&r, 1, 3), rng_int(&r, 1, 30), rng_int(&r, 1, 40), cross,
                 rng_int(&r, 0, 1), id);
    }
    mh_layer_config c = mh_layer_config_default();
    cc = mh_collab_config_default(), cc.collab_dim = 32;
    c.variant = MH_VARIANT_COLLAB, c.d_model = 128, c.n_heads = 8, c.head_dim = 16, c.bias = 1;
    c.variant_config = &cc;
    run_case(ctx, &r, c, 2, 77, 77, 0, 0, id++);        /* prefill: several query tiles, GEMM */
    run_case(ctx, &r, c, 1, 1, 2500, 1, 0, id++);       /* one query, 2500 keys: split */
    c.n_heads = 20;                                     /* decode, 20 rows: packed K, GEMM */
    run_case(ctx, &r, c, 2, 1, 300, 1, 0, id++);
    mh_context_destroy(ctx);
    return test_exit_code("test_collab_oracle");
}
