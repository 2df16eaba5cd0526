/*
 * CollabHead from an MHA layer (mh_convert_mha_to_collab).
 *
 * CollabHead shares one query/key projection of width D~ across the heads and gives each head
 * a mixing vector over it (docs/variants.md, "CollabHead"). Any MHA layer converts to it
 * exactly at D~ = H*D: the conversion writes the one-hot mixing M [H, H*D] and the content
 * bias C [H, d_model] (W_K^h^T b_Q^h) and points the rest at the MHA weights. The program
 * converts an MHA layer with biases (H = 4, D = 8) and checks:
 *   1. the CollabHead layer's causal forward equals the MHA layer's to 1e-5 times the largest
 *      output magnitude (b_K is dropped: its terms are constant along the keys, so the
 *      softmax removes them; the rest is reassociated sums);
 *   2. the same through decode: a prompt prefill plus single-token steps on a CollabHead KV
 *      cache equals the MHA forward to the same tolerance;
 *   3. its f32 KV cache keeps D~ shared-key values, H*Dv values and H key biases per token.
 * A compressed D~ < H*D (the paper's CP decomposition and fine-tuning) is not provided.
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_util.h"

enum { D_MODEL = 32, H = 4, D = 8, N = 12, PROMPT = 5 };

static int close_to(const float* y, const float* ref, const char* what) {
    float diff, mag;
    compare(y, ref, N * D_MODEL, &diff, &mag);
    printf("      %s: max |collab - MHA| %.3g, tolerance %.3g\n", what, diff, 1e-5f * mag);
    return mag > 0 && diff <= 1e-5f * mag;
}

int main(void) {
    seed(99);
    static float wq[H * D * D_MODEL], wk[H * D * D_MODEL], wv[H * D * D_MODEL], wo[D_MODEL * H * D];
    static float bq[H * D], bk[H * D], bv[H * D], bo[D_MODEL], x[N * D_MODEL];
    static float y_mha[N * D_MODEL], y_collab[N * D_MODEL], y_decode[N * D_MODEL];
    const float a = 1.0f / sqrtf((float)D_MODEL);
    fill(wq, sizeof wq / sizeof *wq, a), fill(wk, sizeof wk / sizeof *wk, a), fill(wv, sizeof wv / sizeof *wv, a);
    fill(wo, sizeof wo / sizeof *wo, a), fill(bq, H * D, a), fill(bk, H * D, a), fill(bv, H * D, a);
    fill(bo, D_MODEL, a), fill(x, sizeof x / sizeof *x, 1.0f);

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    if (mh_context_create(&cc, &ctx) != MH_OK) return puts("FAIL: context"), 1;
    mh_layer_config mcfg = mh_layer_config_default();
    mcfg.variant = MH_VARIANT_MHA;
    mcfg.d_model = D_MODEL, mcfg.n_heads = H, mcfg.head_dim = D, mcfg.bias = 1;
    mh_layer_weights mw = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo, .b_q = bq, .b_k = bk, .b_v = bv, .b_o = bo};
    mh_layer* mha;
    mh_status st = mh_layer_create(ctx, &mcfg, &mw, &mha);
    if (st != MH_OK) return printf("FAIL: MHA layer: %s\n", mh_status_string(st)), 1;

    /* The conversion: nothing allocated; mix and content are ours, the rest points at mw. */
    static float mix[H * H * D], content[H * D_MODEL];
    mh_layer_config ccfg;
    mh_collab_config collab_cfg;
    mh_layer_weights cw;
    mh_collab_weights collab_mixing;
    st = mh_convert_mha_to_collab(&mcfg, &mw, mix, content, &ccfg, &collab_cfg, &cw, &collab_mixing);
    mh_layer* collab = NULL;
    if (st == MH_OK) st = mh_layer_create(ctx, &ccfg, &cw, &collab);
    check(st == MH_OK && collab_cfg.collab_dim == H * D, "mh_convert_mha_to_collab: D~ = H*D, layer created");
    if (st != MH_OK) return printf("      %s\n", mh_status_string(st)), 1;

    st = causal_forward(mha, N, x, y_mha);
    const mh_status st_collab = causal_forward(collab, N, x, y_collab);
    check(st == MH_OK && st_collab == MH_OK && close_to(y_collab, y_mha, "forward"),
          "CollabHead forward == MHA forward (1e-5 x max|y|)");
    size_t per_token = 0;
    st = decode_all(collab, N, PROMPT, D_MODEL, x, y_decode, &per_token);
    check(st == MH_OK && close_to(y_decode, y_mha, "decode"),
          "CollabHead prefill + steps == MHA forward (1e-5 x max|y|)");
    printf("      f32 KV cache: %zu bytes per token (MHA: %d)\n", per_token, 2 * H * D * 4);
    check(per_token == (size_t)(H * D + H * D + H) * sizeof(float),
          "KV cache: D~ keys + H*Dv values + H key biases per token");

    mh_layer_destroy(collab);
    mh_layer_destroy(mha);
    mh_context_destroy(ctx);
    return failures ? 1 : 0;
}
