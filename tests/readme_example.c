/* The README's example, compiled and run as a test: a causal GQA self-attention layer. */
#include <multihead.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    enum { D_MODEL = 64, HEADS = 8, KV_HEADS = 2, HEAD_DIM = 8, BATCH = 2, TOKENS = 10 };
    /* PyTorch nn.Linear layout: W[out_features, in_features] */
    static float wq[HEADS * HEAD_DIM][D_MODEL], wk[KV_HEADS * HEAD_DIM][D_MODEL];
    static float wv[KV_HEADS * HEAD_DIM][D_MODEL], wo[D_MODEL][HEADS * HEAD_DIM];
    static float x[BATCH][TOKENS][D_MODEL], y[BATCH][TOKENS][D_MODEL];
    for (int i = 0; i < D_MODEL; i++) { /* some deterministic weights and inputs */
        for (int o = 0; o < HEADS * HEAD_DIM; o++) wq[o][i] = wo[i][o] = (float)((o * 7 + i * 3) % 11 - 5) / 40;
        for (int o = 0; o < KV_HEADS * HEAD_DIM; o++) wk[o][i] = wv[o][i] = (float)((o + i * 5) % 7 - 3) / 30;
        for (int b = 0; b < BATCH; b++)
            for (int t = 0; t < TOKENS; t++) x[b][t][i] = (float)((b + t * i) % 5) / 4;
    }

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default(); /* all cores, best ISA (or MH_ISA) */
    if (mh_context_create(&cc, &ctx) != MH_OK) return 1;

    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_GQA;
    cfg.d_model = D_MODEL, cfg.n_heads = HEADS, cfg.n_kv_heads = KV_HEADS, cfg.head_dim = HEAD_DIM;
    mh_layer_weights w = {.w_q = &wq[0][0], .w_k = &wk[0][0], .w_v = &wv[0][0], .w_o = &wo[0][0]};
    mh_layer* layer;
    mh_status st = mh_layer_create(ctx, &cfg, &w, &layer); /* packs the weights */
    if (st != MH_OK) {
        fprintf(stderr, "create: %s\n", mh_status_string(st));
        return 1;
    }

    size_t bytes;
    mh_layer_forward_workspace_size(layer, BATCH, TOKENS, TOKENS, &bytes);
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64); /* forward itself never allocates */

    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args args = {.batch = BATCH, .n_q = TOKENS, .query = &x[0][0][0], .out = &y[0][0][0],
                            .opt = &opt};
    st = mh_layer_forward(layer, &args, ws, bytes);
    printf("forward: %s on %s, y[1][9][0] = %.6f\n", mh_status_string(st),
           mh_isa_name(mh_context_isa(ctx)), y[1][9][0]);

    free(ws);
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return st == MH_OK ? 0 : 1;
}
