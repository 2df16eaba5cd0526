/*
 * DCMHA: cross-head composition of the scores and probabilities, with per-token weights.
 *
 * A DCMHA layer is MHA plus a small generator that turns each token into composition weights
 * (docs/variants.md, "DCMHA"). The program builds one (H = 4 heads of 8, rank R = 2, the
 * default hidden width C = 4H, one group) and checks:
 *   1. with all generator weights zero (W1, W2, Wd) every composition is the identity, and the
 *      layer equals an MHA layer with the same projections to 1e-5 times the largest output
 *      magnitude;
 *   2. with seeded non-zero generator weights the output moves away from MHA (relative L2
 *      distance > 1e-3): the composition is live;
 *   3. decode (a prefill then single-token steps) equals the causal forward to 1e-5 times the
 *      largest magnitude, with the key-side factors kept in the cache;
 *   4. its f32 KV cache keeps MHA's 2 H D values plus 2 (2RH + H) key factors per token.
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_util.h"

enum { D_MODEL = 32, H = 4, D = 8, R = 2, C = 4 * H, N = 12, PROMPT = 5 };

/* The relative L2 distance ||y - ref|| / ||ref|| over N x D_MODEL values. */
static double distance(const float* y, const float* ref) {
    double num = 0, den = 0;
    for (int i = 0; i < N * D_MODEL; i++) {
        const double e = (double)y[i] - ref[i];
        num += e * e, den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

int main(void) {
    seed(31337);
    static float wq[H * D * D_MODEL], wk[H * D * D_MODEL], wv[H * D * D_MODEL], wo[D_MODEL * H * D];
    static float w1[D_MODEL * 4 * C], w2[4 * C * 2 * R * H], wd[D_MODEL * 4 * H], zero1[D_MODEL * 4 * C];
    static float zero2[4 * C * 2 * R * H], zerod[D_MODEL * 4 * H], x[N * D_MODEL];
    static float y_mha[N * D_MODEL], y_zero[N * D_MODEL], y_live[N * D_MODEL], y_dec[N * D_MODEL];
    const float a = 1.0f / sqrtf((float)D_MODEL);
    fill(wq, sizeof wq / sizeof *wq, a), fill(wk, sizeof wk / sizeof *wk, a), fill(wv, sizeof wv / sizeof *wv, a);
    fill(wo, sizeof wo / sizeof *wo, a), fill(x, sizeof x / sizeof *x, 1.0f);
    fill(w1, sizeof w1 / sizeof *w1, a), fill(w2, sizeof w2 / sizeof *w2, 1.0f / sqrtf((float)C));
    fill(wd, sizeof wd / sizeof *wd, a);

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    if (mh_context_create(&cc, &ctx) != MH_OK) return puts("FAIL: context"), 1;
    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = MH_VARIANT_MHA;
    cfg.d_model = D_MODEL, cfg.n_heads = H, cfg.head_dim = D;
    mh_layer_weights w = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo};
    mh_layer *mha, *zero = NULL, *live = NULL;
    mh_status st = mh_layer_create(ctx, &cfg, &w, &mha);
    if (st != MH_OK) return printf("FAIL: MHA layer: %s\n", mh_status_string(st)), 1;

    /* The same projections with a DCMHA generator: zero, then seeded. */
    mh_dcmha_config dc = mh_dcmha_config_default(); /* R 2, C 4H, G 1, erf GELU */
    mh_dcmha_weights dw = mh_dcmha_weights_default();
    cfg.variant = MH_VARIANT_DCMHA, cfg.variant_config = &dc, w.variant_weights = &dw;
    dw.w1 = zero1, dw.w2 = zero2, dw.wd = zerod;
    st = mh_layer_create(ctx, &cfg, &w, &zero);
    dw.w1 = w1, dw.w2 = w2, dw.wd = wd;
    if (st == MH_OK) st = mh_layer_create(ctx, &cfg, &w, &live);
    if (st != MH_OK) return printf("FAIL: DCMHA layer: %s\n", mh_status_string(st)), 1;

    float diff, mag;
    st = causal_forward(mha, N, x, y_mha);
    mh_status st2 = causal_forward(zero, N, x, y_zero);
    compare(y_zero, y_mha, N * D_MODEL, &diff, &mag);
    printf("      zero generator: max |DCMHA - MHA| %.3g, tolerance %.3g\n", diff, 1e-5f * mag);
    check(st == MH_OK && st2 == MH_OK && mag > 0 && diff <= 1e-5f * mag,
          "zero generator weights: DCMHA == MHA (1e-5 x max|y|)");

    st = causal_forward(live, N, x, y_live);
    const double rel = distance(y_live, y_mha);
    printf("      seeded generator: relative L2 distance from MHA %.4f\n", rel);
    check(st == MH_OK && rel > 1e-3, "seeded generator weights: the composition moves the output");

    size_t per_token = 0;
    st = decode_all(live, N, PROMPT, D_MODEL, x, y_dec, &per_token);
    compare(y_dec, y_live, N * D_MODEL, &diff, &mag);
    printf("      decode: max |decode - forward| %.3g, tolerance %.3g\n", diff, 1e-5f * mag);
    check(st == MH_OK && mag > 0 && diff <= 1e-5f * mag, "prefill + steps == causal forward (1e-5 x max|y|)");
    printf("      f32 KV cache: %zu bytes per token (MHA: %d)\n", per_token, 2 * H * D * 4);
    check(per_token == (size_t)(2 * H * D + 2 * (2 * R * H + H)) * sizeof(float),
          "KV cache: 2 H D values + 2 (2RH + H) key factors per token");

    mh_layer_destroy(live);
    mh_layer_destroy(zero);
    mh_layer_destroy(mha);
    mh_context_destroy(ctx);
    return failures ? 1 : 0;
}
