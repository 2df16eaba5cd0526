/*
 * Choosing a variant: the trade-off table for MHA, GQA and MQA of one model shape.
 *
 * Fewer KV heads shrink the KV cache (the bytes every decode step streams) and the K/V
 * projections, and cost quality. This program starts from an MHA layer (d_model 256, 8 heads of
 * 32) and derives GQA (4 and 2 KV heads) and MQA (1) layers the way the GQA paper converts a
 * checkpoint: the K and V projection heads of each group are mean-pooled,
 *     W_K^{GQA, j} = mean over h in group j of W_K^{MHA, h}     (the same for W_V and biases),
 * keeping W_Q and W_O. For each it reports
 *     parameters, packed weight bytes (mh_layer_weights_bytes: includes the kernel's panel
 *     padding), KV cache bytes per token (f16 and f32), forward workspace bytes for 32 tokens,
 *     decode workspace bytes for one token, and the relative L2 distance of a 32-token causal
 *     forward from MHA's.
 * The synthetic MHA weights are built with a head hierarchy (heads 2k and 2k+1 are close, heads
 * 4k..4k+3 less so) so that pooling loses more as groups widen; with a real checkpoint the
 * distances are your model's. For speed, bench/run.sh compares the variants at the same shape
 * (the layer and decode_layer rows of its table); decode time follows the KV bytes per token
 * once the cache is long.
 *
 * Checks: every call returns MH_OK and every output is finite; KV bytes per token are
 * 2 * Hkv * head_dim * sizeof(dtype); parameters fall strictly with Hkv; GQA with Hkv = H built
 * from the pooled weights is bitwise MHA; distances rise from GQA-4 to GQA-2 to MQA.
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <multihead.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

enum { D_MODEL = 256, HEADS = 8, HEAD_DIM = 32, N = 32 };
enum { QD = HEADS * HEAD_DIM };

/* Mean-pools the H heads of w [H*HEAD_DIM, cols] into Hkv heads: out [Hkv*HEAD_DIM, cols]. */
static void pool_heads(const float* w, int cols, int hkv, float* out) {
    const int g = HEADS / hkv;
    for (int j = 0; j < hkv; j++)
        for (int r = 0; r < HEAD_DIM; r++)
            for (int c = 0; c < cols; c++) {
                float s = w[((size_t)j * g * HEAD_DIM + r) * cols + c];
                for (int h = j * g + 1; h < (j + 1) * g; h++) s += w[((size_t)h * HEAD_DIM + r) * cols + c];
                out[((size_t)j * HEAD_DIM + r) * cols + c] = s / (float)g;
            }
}

/* The MHA K or V projection with a head hierarchy: head h = A + B[h/4] + C[h/2] + E[h]. */
static void hierarchical_heads(float* w, float* b, float amp) {
    static float level[4][HEADS][HEAD_DIM * (D_MODEL + 1)];
    static const float weight[4] = {1.0f, 0.5f, 0.3f, 0.15f}; /* A, B, C, E */
    static const int div[4] = {HEADS, 4, 2, 1};
    for (int l = 0; l < 4; l++) fill(&level[l][0][0], sizeof level[l] / sizeof(float), amp);
    for (int h = 0; h < HEADS; h++)
        for (int r = 0; r < HEAD_DIM; r++)
            for (int c = 0; c <= D_MODEL; c++) { /* column D_MODEL is the bias */
                float s = 0;
                for (int l = 0; l < 4; l++) s += weight[l] * level[l][h / div[l]][r * (D_MODEL + 1) + c];
                if (c < D_MODEL) w[((size_t)h * HEAD_DIM + r) * D_MODEL + c] = s;
                else b[h * HEAD_DIM + r] = s;
            }
}

typedef struct row {
    const char* name;
    mh_variant variant;
    int hkv;
    long params;
    size_t packed, kv16, kv32, ws_fwd, ws_dec;
    double dist;
    int ok;
} row;

static void* ws_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

/* Builds the variant from the pooled weights, fills its row, and leaves its forward output
 * in y [N, D_MODEL]. */
static void measure(const mh_context* ctx, row* r, const float* wq, const float* wk,
                    const float* wv, const float* wo, const float* bq, const float* bk,
                    const float* bv, const float* bo, const float* x, float* y) {
    static float pk[QD * D_MODEL], pv[QD * D_MODEL], pbk[QD], pbv[QD];
    pool_heads(wk, D_MODEL, r->hkv, pk), pool_heads(wv, D_MODEL, r->hkv, pv);
    pool_heads(bk, 1, r->hkv, pbk), pool_heads(bv, 1, r->hkv, pbv);
    if (r->variant == MH_VARIANT_MHA) /* the original model, not pooled */
        memcpy(pk, wk, sizeof pk), memcpy(pv, wv, sizeof pv), memcpy(pbk, bk, sizeof pbk), memcpy(pbv, bv, sizeof pbv);

    mh_layer_config cfg = mh_layer_config_default();
    cfg.variant = r->variant;
    cfg.d_model = D_MODEL, cfg.n_heads = HEADS, cfg.n_kv_heads = r->hkv, cfg.head_dim = HEAD_DIM;
    cfg.bias = 1;
    mh_layer_weights w = {.w_q = wq, .w_k = pk, .w_v = pv, .w_o = wo, .b_q = bq, .b_k = pbk,
                          .b_v = pbv, .b_o = bo};
    mh_layer* layer;
    r->ok = mh_layer_create(ctx, &cfg, &w, &layer) == MH_OK;
    if (!r->ok) return;
    r->params = (long)(QD + 2 * r->hkv * HEAD_DIM) * (D_MODEL + 1) + (long)D_MODEL * (QD + 1);
    r->packed = mh_layer_weights_bytes(layer);

    mh_kv_cache *c16 = NULL, *c32 = NULL;
    r->ok &= mh_kv_cache_create(layer, 1, 1, MH_DTYPE_F16, &c16) == MH_OK;
    r->ok &= mh_kv_cache_create(layer, 1, 1, MH_DTYPE_F32, &c32) == MH_OK;
    r->kv16 = mh_kv_cache_bytes_per_token(c16);
    r->kv32 = mh_kv_cache_bytes_per_token(c32);
    r->ok &= mh_layer_forward_workspace_size(layer, 1, N, N, &r->ws_fwd) == MH_OK;
    r->ok &= mh_layer_decode_workspace_size(layer, 1, 1, &r->ws_dec) == MH_OK;

    /* The quality probe: a causal forward over N tokens. */
    void* ws = ws_alloc(r->ws_fwd);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args args = {.batch = 1, .n_q = N, .n_kv = N, .query = x, .out = y, .opt = &opt};
    r->ok &= ws && mh_layer_forward(layer, &args, ws, r->ws_fwd) == MH_OK;
    for (size_t i = 0; i < (size_t)N * D_MODEL; i++) r->ok &= isfinite(y[i]) != 0;
    free(ws);
    mh_kv_cache_destroy(c16), mh_kv_cache_destroy(c32);
    mh_layer_destroy(layer);
}

int main(void) {
    seed(7);
    static float wq[QD * D_MODEL], wk[QD * D_MODEL], wv[QD * D_MODEL], wo[D_MODEL * QD];
    static float bq[QD], bk[QD], bv[QD], bo[D_MODEL];
    static float x[N * D_MODEL];
    const float a = 1.0f / sqrtf((float)D_MODEL);
    fill(wq, sizeof wq / sizeof *wq, a), fill(bq, QD, a);
    fill(wo, sizeof wo / sizeof *wo, 1.0f / sqrtf((float)QD)), fill(bo, D_MODEL, 1.0f / sqrtf((float)QD));
    hierarchical_heads(wk, bk, a);
    hierarchical_heads(wv, bv, a);
    fill(x, sizeof x / sizeof *x, 1.0f);

    mh_context* ctx;
    mh_context_config cc = mh_context_config_default();
    cc.num_threads = 1; /* the workspace size depends on the thread count: report it for one */
    if (mh_context_create(&cc, &ctx) != MH_OK) return puts("FAIL: context"), 1;

    row rows[] = {{"MHA", MH_VARIANT_MHA, 8, 0, 0, 0, 0, 0, 0, 0, 0},
                  {"GQA-8", MH_VARIANT_GQA, 8, 0, 0, 0, 0, 0, 0, 0, 0},
                  {"GQA-4", MH_VARIANT_GQA, 4, 0, 0, 0, 0, 0, 0, 0, 0},
                  {"GQA-2", MH_VARIANT_GQA, 2, 0, 0, 0, 0, 0, 0, 0, 0},
                  {"MQA", MH_VARIANT_MQA, 1, 0, 0, 0, 0, 0, 0, 0, 0}};
    enum { ROWS = sizeof rows / sizeof rows[0] };
    static float y[ROWS][N * D_MODEL];
    for (int i = 0; i < ROWS; i++) {
        measure(ctx, &rows[i], wq, wk, wv, wo, bq, bk, bv, bo, x, y[i]);
        double d2 = 0, r2 = 0;
        for (size_t k = 0; k < (size_t)N * D_MODEL; k++) {
            const double d = (double)y[i][k] - y[0][k];
            d2 += d * d, r2 += (double)y[0][k] * y[0][k];
        }
        rows[i].dist = sqrt(d2 / r2);
    }

    printf("d_model %d, %d heads of %d, %s, 1 thread; workspaces for %d tokens (forward) and 1 "
           "(decode)\n", D_MODEL, HEADS, HEAD_DIM, mh_isa_name(mh_context_isa(ctx)), N);
    printf("%-6s %4s %9s %12s %11s %11s %10s %10s %12s\n", "layer", "Hkv", "params", "packed B",
           "KV B/tok16", "KV B/tok32", "fwd ws B", "dec ws B", "dist to MHA");
    for (int i = 0; i < ROWS; i++) {
        const row* r = &rows[i];
        printf("%-6s %4d %9ld %12zu %11zu %11zu %10zu %10zu %12.4f%s\n", r->name, r->hkv,
               r->params, r->packed, r->kv16, r->kv32, r->ws_fwd, r->ws_dec, r->dist,
               r->ok ? "" : "  FAILED");
    }
    printf("(GQA-8 is GQA with Hkv = H, built from the pooled weights)\n");

    int ok = 1, kv = 1, params = 1;
    for (int i = 0; i < ROWS; i++) {
        ok &= rows[i].ok;
        kv &= rows[i].kv16 == (size_t)2 * rows[i].hkv * HEAD_DIM * 2 &&
              rows[i].kv32 == (size_t)2 * rows[i].hkv * HEAD_DIM * 4;
        params &= rows[i].packed >= sizeof(float) * (size_t)rows[i].params;
        if (i >= 2) params &= rows[i].params < rows[i - 1].params;
    }
    check(ok, "every call MH_OK, every output finite");
    check(kv, "KV bytes per token = 2 * Hkv * head_dim * sizeof(dtype)");
    check(params, "parameters fall with Hkv; packed bytes >= 4 * parameters");
    check(memcmp(y[1], y[0], sizeof y[0]) == 0, "GQA with Hkv = H from the pooled weights == MHA (bitwise)");
    check(rows[2].dist > 0 && rows[2].dist < rows[3].dist && rows[3].dist < rows[4].dist,
          "distance to MHA rises as KV heads are pooled: GQA-4 < GQA-2 < MQA");
    mh_context_destroy(ctx);
    return failures ? 1 : 0;
}
