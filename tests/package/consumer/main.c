/* A program outside the project that uses the installed multihead: creates a GQA layer, runs
 * one causal forward, and checks the status, that every output is finite and not all zero,
 * and that the header and the linked library agree on the version. Exit 0 on success. */
#include <math.h>
#include <multihead.h>
#include <stdio.h>
#include <stdlib.h>

enum { D = 32, H = 4, HKV = 2, HD = 8, B = 2, T = 7 };

int main(void) {
    if (mh_version_number() != MH_VERSION_NUMBER) {
        fprintf(stderr, "header %d, library %u (%s)\n", MH_VERSION_NUMBER, mh_version_number(),
                mh_version_string());
        return 1;
    }
    static float wq[H * HD * D], wk[HKV * HD * D], wv[HKV * HD * D], wo[D * H * HD];
    static float x[B * T * D], y[B * T * D];
    for (int i = 0; i < H * HD * D; i++) wq[i] = wo[i] = (float)((i * 7) % 13 - 6) / 50.0f;
    for (int i = 0; i < HKV * HD * D; i++) wk[i] = wv[i] = (float)((i * 5) % 11 - 5) / 40.0f;
    for (int i = 0; i < B * T * D; i++) x[i] = (float)((i * 3) % 17 - 8) / 8.0f;

    mh_context_config cc = mh_context_config_default();
    cc.num_threads = 2;
    mh_context* ctx = NULL;
    mh_status st = mh_context_create(&cc, &ctx);
    if (st != MH_OK) return fprintf(stderr, "context: %s\n", mh_status_string(st)), 1;

    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_GQA;
    cfg.d_model = D, cfg.n_heads = H, cfg.n_kv_heads = HKV, cfg.head_dim = HD;
    mh_layer_weights w = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo};
    mh_layer* layer = NULL;
    st = mh_layer_create(ctx, &cfg, &w, &layer);
    if (st != MH_OK) return fprintf(stderr, "layer: %s\n", mh_status_string(st)), 1;

    size_t bytes = 0;
    st = mh_layer_forward_workspace_size(layer, B, T, T, &bytes);
    void* ws = st == MH_OK ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    if (!ws) return fprintf(stderr, "workspace: %s\n", mh_status_string(st)), 1;
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args args = {.batch = B, .n_q = T, .n_kv = T, .query = x, .out = y, .opt = &opt};
    st = mh_layer_forward(layer, &args, ws, bytes);

    int finite = 1, nonzero = 0;
    for (int i = 0; i < B * T * D; i++) finite &= isfinite(y[i]) != 0, nonzero |= y[i] != 0.0f;
    printf("multihead %s (%s): forward %s, outputs %s%s\n", mh_version_string(),
           mh_isa_name(mh_context_isa(ctx)), mh_status_string(st), finite ? "finite" : "NOT FINITE",
           nonzero ? "" : ", ALL ZERO");
    free(ws);
    mh_layer_destroy(layer);
    mh_context_destroy(ctx);
    return st == MH_OK && finite && nonzero ? 0 : 1;
}
