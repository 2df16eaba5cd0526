/*
 * Causal self-attention over a right-padded batch: PyTorch's key_padding_mask + causal mask.
 *
 * A decoder-style batch of 3 sequences (lengths 12, 7, 3) padded to 12 tokens. PyTorch gives
 * nn.MultiheadAttention a key_padding_mask (True at the padding) and a causal attn_mask (or
 * is_causal): query i sees keys j <= i that are not padding. Here that is
 *     causal = 1, kv_len[b] = length of sequence b, q_offset = 0
 * (q_offset = 0: query i sits at position i; the default, MH_Q_OFFSET_END, would put the N
 * queries at the LAST N positions kv_len[b] - N + i, a shifted diagonal). The program checks:
 *   1. every call returns MH_OK;
 *   2. each sequence's real rows equal a causal forward over that sequence alone, unpadded,
 *      to 1e-5 times the largest output magnitude (the calls tile the work differently);
 *   3. a padding query row i >= length sees every real key (as in PyTorch, where j <= i holds
 *      for all of them): it equals a non-causal cross-attention of that one row over the real
 *      tokens, to the same tolerance;
 *   4. the default q_offset gives other rows for the shorter sequences (the mapping matters).
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_util.h"

enum { D_MODEL = 64, HEADS = 8, KV_HEADS = 2, HEAD_DIM = 8, BATCH = 3, T = 12 };
static const int32_t lengths[BATCH] = {12, 7, 3};

int main(void) {
    seed(777);
    static float wq[HEADS * HEAD_DIM * D_MODEL], wk[KV_HEADS * HEAD_DIM * D_MODEL];
    static float wv[KV_HEADS * HEAD_DIM * D_MODEL], wo[D_MODEL * HEADS * HEAD_DIM];
    const float a = 1.0f / sqrtf((float)D_MODEL), ao = 1.0f / sqrtf((float)(HEADS * HEAD_DIM));
    fill(wq, sizeof wq / sizeof *wq, a), fill(wk, sizeof wk / sizeof *wk, a);
    fill(wv, sizeof wv / sizeof *wv, a), fill(wo, sizeof wo / sizeof *wo, ao);

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    if (mh_context_create(&cc, &ctx) != MH_OK) return puts("FAIL: context"), 1;
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_GQA;
    cfg.d_model = D_MODEL, cfg.n_heads = HEADS, cfg.n_kv_heads = KV_HEADS, cfg.head_dim = HEAD_DIM;
    mh_layer_weights w = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo};
    mh_layer* layer;
    mh_status st = mh_layer_create(ctx, &cfg, &w, &layer);
    if (st != MH_OK) return printf("FAIL: layer: %s\n", mh_status_string(st)), 1;

    static float x[BATCH][T][D_MODEL], y[BATCH][T][D_MODEL], y_default[BATCH][T][D_MODEL];
    fill(&x[0][0][0], sizeof x / sizeof(float), 1.0f); /* padding holds numbers too */

    /* The padded batch: PyTorch's key_padding_mask + causal. */
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1, opt.kv_len = lengths, opt.q_offset = 0;
    mh_forward_args args = {.batch = BATCH, .n_q = T, .query = &x[0][0][0], .out = &y[0][0][0], .opt = &opt};
    st = forward_args(layer, &args);
    mh_attn_options dflt = opt;
    dflt.q_offset = MH_Q_OFFSET_END;
    mh_forward_args args_default = args;
    args_default.out = &y_default[0][0][0], args_default.opt = &dflt;
    const mh_status st_default = forward_args(layer, &args_default);
    check(st == MH_OK && st_default == MH_OK, "padded batch: MH_OK with q_offset 0 and the default");

    float mag = 0;
    for (const float* p = &y[0][0][0]; p < &y[0][0][0] + sizeof y / sizeof(float); p++) mag = fmaxf(mag, fabsf(*p));
    const float tol = 1e-5f * mag;
    float worst_real = 0, worst_pad = 0, default_gap = 0;
    int ok = st == MH_OK && mag > 0;
    for (int b = 0; b < BATCH && ok; b++) {
        const int len = lengths[b];
        /* 2: the real rows against the sequence alone, causal, unpadded */
        static float alone[T][D_MODEL];
        mh_attn_options causal = mh_attn_options_default();
        causal.causal = 1;
        mh_forward_args one = {.batch = 1, .n_q = len, .query = &x[b][0][0], .out = &alone[0][0], .opt = &causal};
        ok &= forward_args(layer, &one) == MH_OK;
        float d, unused;
        compare(&y[b][0][0], &alone[0][0], (size_t)len * D_MODEL, &d, &unused);
        worst_real = fmaxf(worst_real, d);
        /* 3: each padding row against one query over the real tokens, no mask */
        for (int i = len; i < T; i++) {
            float row[D_MODEL];
            mh_forward_args cross = {.batch = 1, .n_q = 1, .n_kv = len, .query = &x[b][i][0],
                                     .key = &x[b][0][0], .value = &x[b][0][0], .out = row};
            ok &= forward_args(layer, &cross) == MH_OK;
            compare(&y[b][i][0], row, D_MODEL, &d, &unused);
            worst_pad = fmaxf(worst_pad, d);
        }
        compare(&y[b][0][0], &y_default[b][0][0], (size_t)len * D_MODEL, &d, &unused);
        if (len < T) default_gap = fmaxf(default_gap, d);
    }
    printf("      max |padded - alone| %.3g, max |padding row - cross| %.3g, tolerance %.3g\n",
           worst_real, worst_pad, tol);
    check(ok && worst_real <= tol, "real rows == each sequence alone, causal (1e-5 x max|y|)");
    check(ok && worst_pad <= tol, "padding rows see every real key, as in PyTorch");
    printf("      default q_offset: max |difference| on the shorter sequences %.3g\n", default_gap);
    check(default_gap > 100 * tol, "the default q_offset (last N positions) is not this mapping");

    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return failures ? 1 : 0;
}
