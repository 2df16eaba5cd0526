/*
 * Encoder self-attention over a padded batch.
 *
 * An encoder (BERT-style) block attends over the whole sequence: no causal mask. Sequences of
 * different lengths are padded to the longest one, and the padding keys are dropped with
 * mh_attn_options.kv_len (PyTorch: key_padding_mask). This program builds a GQA layer with
 * biases (8 query heads sharing 2 KV heads), runs one forward over a batch of 3 sequences of
 * lengths 16, 11 and 4, and checks:
 *   1. every call returns MH_OK and every output row of a real token is finite;
 *   2. padding is invisible: changing what the padded positions hold leaves every real row
 *      bitwise unchanged;
 *   3. each sequence's real rows equal a forward over that sequence alone, unpadded (batch 1,
 *      n_q = its length), to 1e-5 times the largest output magnitude (the two calls tile the
 *      work differently, so the last bits may differ).
 * Rows of padded queries are computed too (they attend to the real keys); ignore them.
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

enum { D_MODEL = 64, HEADS = 8, KV_HEADS = 2, HEAD_DIM = 8, BATCH = 3, T = 16 };
static const int32_t lengths[BATCH] = {16, 11, 4};

/* One self-attention forward of batch x n tokens. */
static mh_status forward(const mh_layer* layer, int batch, int n, const float* x, float* y,
                         const mh_attn_options* opt) {
    const mh_forward_args args = {.batch = batch, .n_q = n, .n_kv = n, .query = x, .out = y, .opt = opt};
    return forward_args(layer, &args);
}

int main(void) {
    seed(12345);
    /* nn.Linear-style weights [out, in], uniform in +-1/sqrt(in), and biases. */
    static float wq[HEADS * HEAD_DIM * D_MODEL], wk[KV_HEADS * HEAD_DIM * D_MODEL];
    static float wv[KV_HEADS * HEAD_DIM * D_MODEL], wo[D_MODEL * HEADS * HEAD_DIM];
    static float bq[HEADS * HEAD_DIM], bk[KV_HEADS * HEAD_DIM], bv[KV_HEADS * HEAD_DIM], bo[D_MODEL];
    const float a = 1.0f / sqrtf((float)D_MODEL);
    fill(wq, sizeof wq / sizeof *wq, a), fill(wk, sizeof wk / sizeof *wk, a);
    fill(wv, sizeof wv / sizeof *wv, a), fill(wo, sizeof wo / sizeof *wo, a);
    fill(bq, HEADS * HEAD_DIM, a), fill(bk, KV_HEADS * HEAD_DIM, a);
    fill(bv, KV_HEADS * HEAD_DIM, a), fill(bo, D_MODEL, a);

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    mh_status st = mh_context_create(&cc, &ctx);
    check(st == MH_OK, "context");
    if (st != MH_OK) return 1;

    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_GQA;
    cfg.d_model = D_MODEL, cfg.n_heads = HEADS, cfg.n_kv_heads = KV_HEADS, cfg.head_dim = HEAD_DIM;
    cfg.bias = 1;
    mh_layer_weights w = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo, .b_q = bq, .b_k = bk,
                          .b_v = bv, .b_o = bo};
    mh_layer* layer;
    st = mh_layer_create(ctx, &cfg, &w, &layer);
    check(st == MH_OK, "layer create");
    if (st != MH_OK) return 1;

    /* The padded batch [BATCH, T, D_MODEL]: real tokens, then padding (here: zeros). */
    static float x[BATCH][T][D_MODEL], y[BATCH][T][D_MODEL];
    for (int b = 0; b < BATCH; b++)
        for (int t = 0; t < lengths[b]; t++) fill(x[b][t], D_MODEL, 1.0f);

    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 0;        /* an encoder sees the whole sequence */
    opt.kv_len = lengths;  /* keys at positions >= lengths[b] are dropped */
    st = forward(layer, BATCH, T, &x[0][0][0], &y[0][0][0], &opt);
    check(st == MH_OK, "padded forward");

    int finite = 1;
    float max_abs = 0;
    for (int b = 0; b < BATCH; b++)
        for (int t = 0; t < lengths[b]; t++)
            for (int i = 0; i < D_MODEL; i++) {
                finite &= isfinite(y[b][t][i]) != 0;
                if (fabsf(y[b][t][i]) > max_abs) max_abs = fabsf(y[b][t][i]);
            }
    check(st == MH_OK && finite && max_abs > 0, "real rows finite and not all zero");

    /* 2. Garbage in the padding changes nothing in the real rows. */
    static float x2[BATCH][T][D_MODEL], y2[BATCH][T][D_MODEL];
    memcpy(x2, x, sizeof x);
    for (int b = 0; b < BATCH; b++)
        for (int t = lengths[b]; t < T; t++) fill(x2[b][t], D_MODEL, 100.0f);
    st = forward(layer, BATCH, T, &x2[0][0][0], &y2[0][0][0], &opt);
    int same = st == MH_OK;
    for (int b = 0; b < BATCH; b++)
        same &= memcmp(y[b], y2[b], sizeof(float) * (size_t)lengths[b] * D_MODEL) == 0;
    check(same, "padding content does not reach real rows (bitwise)");

    /* 3. Each sequence alone, unpadded, gives the same real rows. */
    const float tol = 1e-5f * max_abs;
    float worst = 0;
    for (int b = 0; b < BATCH; b++) {
        static float ys[T][D_MODEL];
        st = forward(layer, 1, lengths[b], &x[b][0][0], &ys[0][0], NULL);
        if (st != MH_OK) worst = INFINITY;
        for (int t = 0; t < lengths[b]; t++)
            for (int i = 0; i < D_MODEL; i++) {
                const float d = fabsf(ys[t][i] - y[b][t][i]);
                if (!(d <= worst)) worst = d; /* also catches NaN */
            }
    }
    printf("      padded vs unpadded: max |diff| %.3g, tolerance %.3g\n", worst, tol);
    check(worst <= tol, "padded batch == each sequence alone");

    printf("ISA %s, %d threads, y[2][3][0] = %.6f\n", mh_isa_name(mh_context_isa(ctx)),
           mh_context_num_threads(ctx), y[2][3][0]);
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return failures ? 1 : 0;
}
