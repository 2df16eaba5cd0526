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

enum { D_MODEL = 32, H = 4, D = 8, R = 2, C = 4 * H, N = 12, PROMPT = 5 };

static uint64_t rng_state = 31337;
static float uniform(float amp) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return amp * ((float)(rng_state >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}
static void fill(float* x, size_t n, float amp) {
    for (size_t i = 0; i < n; i++) x[i] = uniform(amp);
}

static int failures;
static void check(int ok, const char* what) {
    printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

static mh_status causal_forward(const mh_layer* layer, const float* x, float* y) {
    size_t bytes;
    mh_status st = mh_layer_forward_workspace_size(layer, 1, N, N, &bytes);
    if (st != MH_OK) return st;
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = 1, .n_q = N, .query = x, .out = y, .opt = &opt};
    st = ws ? mh_layer_forward(layer, &a, ws, bytes) : MH_ERR_OUT_OF_MEMORY;
    free(ws);
    return st;
}

/* Prefill PROMPT tokens in one call, then one token per call (f32 cache). */
static mh_status decode_all(const mh_layer* layer, const float* x, float* y, size_t* per_token) {
    mh_kv_cache* cache;
    mh_status st = mh_kv_cache_create(layer, 1, N, MH_DTYPE_F32, &cache);
    if (st != MH_OK) return st;
    *per_token = mh_kv_cache_bytes_per_token(cache);
    size_t a, b; /* the workspace for every n_new used: PROMPT and 1 */
    mh_layer_decode_workspace_size(layer, 1, PROMPT, &a);
    mh_layer_decode_workspace_size(layer, 1, 1, &b);
    const size_t bytes = a > b ? a : b;
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    st = ws ? MH_OK : MH_ERR_OUT_OF_MEMORY;
    for (int t = 0; t < N && st == MH_OK;) {
        const int n = t == 0 ? PROMPT : 1;
        st = mh_layer_decode(layer, cache, &(mh_decode_args){1, n, x + t * D_MODEL, y + t * D_MODEL, NULL}, ws, bytes);
        t += n;
    }
    free(ws);
    mh_kv_cache_destroy(cache);
    return st;
}

/* max |y - ref| (NaN: INFINITY), max |ref| and the relative L2 distance ||y - ref|| / ||ref||. */
static void compare(const float* y, const float* ref, float* diff, float* mag, double* rel) {
    double num = 0, den = 0;
    *diff = 0, *mag = 0;
    for (int i = 0; i < N * D_MODEL; i++) {
        const float e = fabsf(y[i] - ref[i]);
        *diff = e <= *diff ? *diff : isnan(e) ? INFINITY : e;
        *mag = fmaxf(*mag, fabsf(ref[i]));
        num += (double)e * e, den += (double)ref[i] * ref[i];
    }
    *rel = sqrt(num / den);
}

int main(void) {
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
    double rel;
    st = causal_forward(mha, x, y_mha);
    mh_status st2 = causal_forward(zero, x, y_zero);
    compare(y_zero, y_mha, &diff, &mag, &rel);
    printf("      zero generator: max |DCMHA - MHA| %.3g, tolerance %.3g\n", diff, 1e-5f * mag);
    check(st == MH_OK && st2 == MH_OK && mag > 0 && diff <= 1e-5f * mag,
          "zero generator weights: DCMHA == MHA (1e-5 x max|y|)");

    st = causal_forward(live, x, y_live);
    compare(y_live, y_mha, &diff, &mag, &rel);
    printf("      seeded generator: relative L2 distance from MHA %.4f\n", rel);
    check(st == MH_OK && rel > 1e-3, "seeded generator weights: the composition moves the output");

    size_t per_token = 0;
    st = decode_all(live, x, y_dec, &per_token);
    compare(y_dec, y_live, &diff, &mag, &rel);
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
