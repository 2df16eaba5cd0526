/*
 * DCMHA's rules (docs/api.md, docs/variants.md "DCMHA"): every bad config, missing or extra
 * weight and unsupported call gets its status and writes nothing; the resolved config and the
 * cache size per token.
 */
#include <string.h>

#include "check.h"
#include "dcmha_fixture.h"
#include "problem.h"

enum { D_MODEL = 16, H = 4, D = 4, N = 7 };

static mh_layer_config base(void) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_DCMHA, c.d_model = D_MODEL, c.n_heads = H, c.head_dim = D;
    return c;
}

static void bad_configs(const mh_context* ctx, const dcmha_fixture* f) {
    mh_layer_config c;
    mh_dcmha_config d;
    mh_layer* const L = (mh_layer*)&c; /* a sentinel: must stay untouched */
#define EXPECT(what, edit, status) \
    do { \
        c = base(), d = mh_dcmha_config_default(), c.variant_config = &d; \
        edit; \
        mh_layer* out = L; \
        check_status(what, mh_layer_create(ctx, &c, &f->w, &out), status); \
        check_true(what " leaves the output pointer alone", out == L); \
    } while (0)
    EXPECT("rank 9", d.rank = MH_DCMHA_MAX_RANK + 1, MH_ERR_INVALID_ARGUMENT);
    EXPECT("rank -1", d.rank = -1, MH_ERR_INVALID_ARGUMENT);
    EXPECT("groups 3 with 4 heads", d.groups = 3, MH_ERR_INVALID_ARGUMENT);
    EXPECT("groups -1", d.groups = -1, MH_ERR_INVALID_ARGUMENT);
    EXPECT("hidden -1", d.hidden = -1, MH_ERR_INVALID_ARGUMENT);
    EXPECT("gelu 2", d.gelu = (mh_gelu)2, MH_ERR_INVALID_ARGUMENT);
    EXPECT("static_weights 2", d.static_weights = 2, MH_ERR_INVALID_ARGUMENT);
    EXPECT("2 K/V heads (DCMHA is MHA-based)", c.n_kv_heads = 2, MH_ERR_INVALID_ARGUMENT);
    EXPECT("kdim != d_model (no cross-attention)", c.kdim = 8, MH_ERR_INVALID_ARGUMENT);
    EXPECT("window", c.window = 4, MH_ERR_INVALID_ARGUMENT);
    EXPECT("softcap", c.softcap = 5.0f, MH_ERR_INVALID_ARGUMENT);
#undef EXPECT
}

static void bad_weights(const mh_context* ctx, dcmha_fixture* f) {
    mh_layer_config c = base();
    mh_dcmha_config d = mh_dcmha_config_default();
    c.variant_config = &d;
    mh_layer_weights w = f->w;
    mh_dcmha_weights dw = f->dw;
    w.variant_weights = &dw;
    mh_layer* out = NULL;
    dw.w1 = NULL;
    check_status("missing W1", mh_layer_create(ctx, &c, &w, &out), MH_ERR_INVALID_ARGUMENT);
    dw = f->dw, dw.w2 = NULL;
    check_status("missing W2", mh_layer_create(ctx, &c, &w, &out), MH_ERR_INVALID_ARGUMENT);
    dw = f->dw, dw.wd = NULL;
    check_status("missing Wd", mh_layer_create(ctx, &c, &w, &out), MH_ERR_INVALID_ARGUMENT);
    dw = f->dw, dw.wb_pre = f->w1;
    check_status("W_b without static_weights", mh_layer_create(ctx, &c, &w, &out), MH_ERR_INVALID_ARGUMENT);
    d.static_weights = 1, dw = f->dw, dw.wb_pre = f->w1;
    check_status("static_weights without W_b post", mh_layer_create(ctx, &c, &w, &out), MH_ERR_INVALID_ARGUMENT);
    check_true("failed creates leave no layer", out == NULL);
}

static void resolved(const dcmha_fixture* f) {
    mh_layer_config c;
    mh_dcmha_config d = mh_dcmha_config_default();
    check_status("get_config", mh_layer_get_config(f->layer, &c), MH_OK);
    check_status("get_variant_config", mh_layer_get_variant_config(f->layer, &d), MH_OK);
    check_true("defaults: R 2, G 1, C 4H, H K/V heads",
               d.rank == 2 && d.groups == 1 && d.hidden == 4 * H && c.n_kv_heads == H);
    mh_kv_cache* cache = NULL;
    check_status("cache", mh_kv_cache_create(f->layer, 1, 8, MH_DTYPE_F16, &cache), MH_OK);
    check_true("cache bytes per token: K/V in f16 + 2 (2RH + H) f32 factors",
               mh_kv_cache_bytes_per_token(cache) == (size_t)2 * H * D * 2 + (size_t)2 * (2 * 2 * H + H) * 4);
    mh_kv_cache_destroy(cache);
}

static void bad_calls(const mh_context* ctx, const dcmha_fixture* f, test_rng* r) {
    float x[N * D_MODEL], kv[N * D_MODEL], y[N * D_MODEL];
    rng_fill(r, x, N * D_MODEL, -1, 1), rng_fill(r, kv, N * D_MODEL, -1, 1);
    memset(y, 0x5a, sizeof y);
    float mask[N * N] = {0}, probs[H * N * N];
    int32_t kv_len[1] = {N};
    mh_attn_options o = mh_attn_options_default();
    mh_forward_args a = {.batch = 1, .n_q = N, .n_kv = N, .query = x, .key = kv, .value = kv, .out = y};
    check_status("cross-attention", run_forward(f->layer, &a), MH_ERR_UNSUPPORTED);
    a.key = a.value = NULL, a.opt = &o;
    o.mask = mask, o.mask_stride_row = N;
    check_status("mask", run_forward(f->layer, &a), MH_ERR_UNSUPPORTED);
    o = mh_attn_options_default(), o.kv_len = kv_len;
    check_status("kv_len", run_forward(f->layer, &a), MH_ERR_UNSUPPORTED);
    o = mh_attn_options_default(), o.probs = probs;
    check_status("probs", run_forward(f->layer, &a), MH_ERR_UNSUPPORTED);
    o = mh_attn_options_default(), o.q_offset = 3;
    check_status("q_offset", run_forward(f->layer, &a), MH_ERR_UNSUPPORTED);
    check_true("failed forwards write nothing", all_bytes(y, sizeof y, 0x5a));
    o = mh_attn_options_default(), o.q_offset = 0, o.causal = 1;
    check_status("q_offset 0 is the default position", run_forward(f->layer, &a), MH_OK);

    /* a cache made for the MHA layer of the same shape lacks the key factors */
    mh_kv_cache* cache = NULL;
    check_status("mha cache", mh_kv_cache_create(f->base.layer, 1, 8, MH_DTYPE_F32, &cache), MH_OK);
    memset(y, 0x5a, sizeof y);
    check_status("decode into an MHA cache", run_decode(f->layer, cache, 1, 1, x, y), MH_ERR_SHAPE_MISMATCH);
    check_true("... writes nothing", all_bytes(y, sizeof y, 0x5a) && mh_kv_cache_length(cache) == 0);
    mh_kv_cache_destroy(cache);
    (void)ctx;
}

int main(void) {
    mh_context* ctx = test_context(1);
    test_rng r;
    rng_seed(&r, 3);
    mh_layer_config c = base();
    dcmha_fixture f;
    if (!check_status("create", dcmha_fixture_make(&f, ctx, &c, &r, 0.5f, 0.5f, 0), MH_OK)) return 1;
    bad_configs(ctx, &f);
    bad_weights(ctx, &f);
    resolved(&f);
    bad_calls(ctx, &f, &r);
    dcmha_fixture_free(&f);
    mh_context_destroy(ctx);
    return test_exit_code("test_dcmha_bad_input");
}
