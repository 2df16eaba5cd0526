/*
 * Decoding with a KV cache equals the full causal forward:
 *  - token by token, and in uneven chunks (chunked prefill then single tokens), for MHA, GQA
 *    and MQA with layer options (window, soft-cap, ALiBi, sinks), batch 3;
 *  - a cache filled exactly to capacity works, and reset starts over;
 *  - f16 and bf16 caches: with inputs and weights chosen so every K/V value is exactly
 *    representable in the storage type, the decode output is bitwise that of the f32 cache.
 * The comparison with the forward uses the layer-oracle tolerance (they tile differently).
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"

enum { B = 3, T = 29 };

static void decode_equals_forward(const mh_context* ctx, test_rng* r, mh_variant v, int n_kv, int opts) {
    float slopes[8], sinks[8];
    mh_layer_config c = mh_layer_config_default();
    c.variant = v, c.d_model = 40, c.n_heads = 4, c.n_kv_heads = n_kv, c.head_dim = 12, c.bias = 1;
    if (opts) {
        for (int h = 0; h < 4; h++) slopes[h] = 0.25f / (float)(h + 1), sinks[h] = 0.5f * (float)h;
        c.window = 7, c.softcap = 5.0f, c.alibi_slopes = slopes, c.sinks = sinks;
    }
    layer_fixture f;
    if (!check_status("create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    const size_t n = (size_t)B * T * c.d_model;
    float *x = malloc(sizeof(float) * n), *y_full = malloc(sizeof(float) * n), *y_dec = malloc(sizeof(float) * n);
    rng_fill(r, x, n, -1, 1);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    mh_forward_args a = {.batch = B, .n_q = T, .query = x, .out = y_full, .opt = &opt};
    check_status("forward", run_forward(f.layer, &a), MH_OK);

    mh_kv_cache* cache = NULL;
    check_status("cache", mh_kv_cache_create(f.layer, B, T, MH_DTYPE_F32, &cache), MH_OK);
    static const int chunks[] = {11, 1, 5, 1, 1, 10};
    const double tol = 8 * FLT_EPSILON * (c.d_model + c.n_heads * c.head_dim + T + 64);
    decode_in_chunks(f.layer, cache, B, T, c.d_model, x, y_dec, NULL);
    check_close_f32("token-by-token decode == forward", y_dec, y_full, n, tol);
    mh_kv_cache_reset(cache);
    decode_in_chunks(f.layer, cache, B, T, c.d_model, x, y_dec, chunks);
    check_close_f32("chunked decode == forward", y_dec, y_full, n, tol);
    mh_kv_cache_destroy(cache);
    free(x), free(y_full), free(y_dec);
    fixture_free(&f);
}

/* Values k/8 with |k| <= 8 (weights, biases) and j/4 (inputs): every K/V entry is a multiple
 * of 1/32 below 2^6 in magnitude, exact in f16 (11 bits) and bf16 (8 bits). */
static void low_precision_cache(const mh_context* ctx, test_rng* r, mh_dtype dt) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = 8, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 4, c.bias = 1;
    layer_fixture f;
    if (!check_status("create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    fill_dyadic(r, f.wk, 8 * 8, 0.125f, 4);
    fill_dyadic(r, f.wv, 8 * 8, 0.125f, 4);
    fill_dyadic(r, f.bk, 8, 0.125f, 4);
    fill_dyadic(r, f.bv, 8, 0.125f, 4);
    mh_layer_destroy(f.layer);
    check_status("recreate", fixture_recreate(&f, ctx, &c, &f.layer), MH_OK);
    const size_t n = (size_t)B * T * 8;
    float *x = malloc(sizeof(float) * n), *y32 = malloc(sizeof(float) * n), *ylp = malloc(sizeof(float) * n);
    fill_dyadic(r, x, n, 0.25f, 4);
    mh_kv_cache *c32 = NULL, *clp = NULL;
    check_status("cache f32", mh_kv_cache_create(f.layer, B, T, MH_DTYPE_F32, &c32), MH_OK);
    check_status("cache low", mh_kv_cache_create(f.layer, B, T, dt, &clp), MH_OK);
    check_true("bytes per token halve", 2 * mh_kv_cache_bytes_per_token(clp) == mh_kv_cache_bytes_per_token(c32));
    static const int chunks[] = {4, 1, 1, 3, 20};
    decode_in_chunks(f.layer, c32, B, T, 8, x, y32, chunks);
    decode_in_chunks(f.layer, clp, B, T, 8, x, ylp, chunks);
    check_bitwise(dt == MH_DTYPE_F16 ? "f16 cache == f32 cache on exact values" : "bf16 cache == f32 cache on exact values",
                  ylp, y32, n);
    mh_kv_cache_destroy(c32), mh_kv_cache_destroy(clp);
    free(x), free(y32), free(ylp);
    fixture_free(&f);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 11);
    decode_equals_forward(ctx, &r, MH_VARIANT_MHA, 0, 0);
    decode_equals_forward(ctx, &r, MH_VARIANT_GQA, 2, 0);
    decode_equals_forward(ctx, &r, MH_VARIANT_MQA, 0, 0);
    decode_equals_forward(ctx, &r, MH_VARIANT_GQA, 2, 1);
    low_precision_cache(ctx, &r, MH_DTYPE_F16);
    low_precision_cache(ctx, &r, MH_DTYPE_BF16);
    mh_context_destroy(ctx);
    return test_exit_code("test_decode");
}
