/*
 * Overlapping heads (MOHSA): each head also reads o dims of each neighbour's Q, K and V.
 *
 * A layer of H = 4 heads of D = 8 with halo o = 2 (MH_VARIANT_OVERLAP, mh_overlap_config):
 * head h attends with the window [last o dims of head h-1 | head h | first o dims of head h+1]
 * of Q, K and V (zeros past either end), D + 2o = 12 wide, and W' [d_model, H*(D + 2o)] mixes
 * the enlarged heads (docs/variants.md, "Overlapping heads"). The program checks:
 *   1. it equals an MHA layer of head width D + 2o whose Q/K/V projection rows for head h are
 *      the window's rows of W_Q, W_K, W_V (zero rows past the ends) and whose W_O is W', to
 *      1e-5 times the largest output magnitude (a construction independent of the halo code);
 *   2. its KV cache keeps 2 (H*D + 2o) values per token (one padded K and one padded V row),
 *      not MHA's 2 H*D, and not the overlapped form's 2 H (D + 2o).
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

enum { D_MODEL = 32, H = 4, D = 8, O = 2, DW = D + 2 * O, N = 10 };

/* The window rows: big [H*DW, D_MODEL] row h*DW + r = w row h*D - O + r, or zero past the ends
 * (bias the same way). */
static void windows(const float* w, const float* b, float* big, float* big_b) {
    for (int h = 0; h < H; h++)
        for (int r = 0; r < DW; r++) {
            const int src = h * D - O + r, dst = h * DW + r;
            const int in = src >= 0 && src < H * D;
            for (int i = 0; i < D_MODEL; i++) big[dst * D_MODEL + i] = in ? w[src * D_MODEL + i] : 0.0f;
            big_b[dst] = in ? b[src] : 0.0f;
        }
}

int main(void) {
    seed(4242);
    static float wq[H * D * D_MODEL], wk[H * D * D_MODEL], wv[H * D * D_MODEL], bq[H * D], bk[H * D], bv[H * D];
    static float wo[D_MODEL * H * DW], bo[D_MODEL], x[N * D_MODEL], y[N * D_MODEL], ref[N * D_MODEL];
    const float a = 1.0f / sqrtf((float)D_MODEL);
    fill(wq, sizeof wq / sizeof *wq, a), fill(wk, sizeof wk / sizeof *wk, a), fill(wv, sizeof wv / sizeof *wv, a);
    fill(bq, H * D, a), fill(bk, H * D, a), fill(bv, H * D, a);
    fill(wo, sizeof wo / sizeof *wo, 1.0f / sqrtf((float)(H * DW))), fill(bo, D_MODEL, a);
    fill(x, sizeof x / sizeof *x, 1.0f);

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    if (mh_context_create(&cc, &ctx) != MH_OK) return puts("FAIL: context"), 1;

    /* The overlapping-heads layer: MHA's Q/K/V weights, W' as w_o, the halo in its config. */
    mh_overlap_config ov = mh_overlap_config_default();
    ov.overlap = O;
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_OVERLAP, cfg.variant_config = &ov;
    cfg.d_model = D_MODEL, cfg.n_heads = H, cfg.head_dim = D, cfg.bias = 1;
    mh_layer_weights w = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo, .b_q = bq, .b_k = bk, .b_v = bv, .b_o = bo};
    mh_layer* overlap;
    mh_status st = mh_layer_create(ctx, &cfg, &w, &overlap);
    if (st != MH_OK) return printf("FAIL: overlap layer: %s\n", mh_status_string(st)), 1;

    /* The same computation spelled as MHA with head width D + 2o (same default scale). */
    static float bwq[H * DW * D_MODEL], bwk[H * DW * D_MODEL], bwv[H * DW * D_MODEL];
    static float bbq[H * DW], bbk[H * DW], bbv[H * DW];
    windows(wq, bq, bwq, bbq), windows(wk, bk, bwk, bbk), windows(wv, bv, bwv, bbv);
    mh_layer_config mcfg = mh_layer_config_default();
    mcfg.variant = MH_VARIANT_MHA;
    mcfg.d_model = D_MODEL, mcfg.n_heads = H, mcfg.head_dim = DW, mcfg.bias = 1;
    mh_layer_weights mw = {.w_q = bwq, .w_k = bwk, .w_v = bwv, .w_o = wo, .b_q = bbq, .b_k = bbk, .b_v = bbv, .b_o = bo};
    mh_layer* mha;
    st = mh_layer_create(ctx, &mcfg, &mw, &mha);
    if (st != MH_OK) return printf("FAIL: MHA layer: %s\n", mh_status_string(st)), 1;

    st = causal_forward(overlap, N, x, y);
    const mh_status st_ref = causal_forward(mha, N, x, ref);
    float diff, mag;
    compare(y, ref, N * D_MODEL, &diff, &mag);
    printf("      max |overlap - window MHA| %.3g, tolerance %.3g\n", diff, 1e-5f * mag);
    check(st == MH_OK && st_ref == MH_OK && mag > 0 && diff <= 1e-5f * mag,
          "overlapping heads == MHA over the explicit windows (1e-5 x max|y|)");

    mh_kv_cache* cache;
    size_t per_token = 0;
    if (mh_kv_cache_create(overlap, 1, N, MH_DTYPE_F16, &cache) == MH_OK) {
        per_token = mh_kv_cache_bytes_per_token(cache);
        mh_kv_cache_destroy(cache);
    }
    printf("      f16 KV cache: %zu bytes per token (MHA at D: %d)\n", per_token, 2 * H * D * 2);
    check(per_token == 2 * (H * D + 2 * O) * sizeof(uint16_t), "KV cache: 2 (H*D + 2o) values per token");

    mh_layer_destroy(mha);
    mh_layer_destroy(overlap);
    mh_context_destroy(ctx);
    return failures ? 1 : 0;
}
