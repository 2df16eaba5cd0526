/*
 * CollabHead's rules: every bad config, weight set, cache or conversion input gets its status,
 * and nothing the caller can see is written.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "problem.h"

enum { D_MODEL = 16, H = 4, D = 4, DT = 8 };

static const mh_collab_config collab_dt = {MH_VARIANT_COLLAB, DT};

static mh_layer_config config(void) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_COLLAB, c.d_model = D_MODEL, c.n_heads = H, c.head_dim = D;
    c.variant_config = &collab_dt, c.bias = 1;
    return c;
}

static void expect_create(const mh_context* ctx, const char* what, const mh_layer_config* c,
                          const mh_layer_weights* w, mh_status want) {
    mh_layer* L = (mh_layer*)&L; /* a sentinel: must stay as it is */
    mh_layer* const before = L;
    check_status(what, mh_layer_create(ctx, c, w, &L), want);
    check_true(what, L == before);
}

static void bad_create(const mh_context* ctx, const layer_fixture* f) {
    mh_layer_config c = config();
    mh_collab_config cc = mh_collab_config_default(); /* collab_dim 0 */
    c.variant_config = &cc;
    expect_create(ctx, "collab_dim 0", &c, &f->w, MH_ERR_INVALID_ARGUMENT);
    c.variant_config = NULL;
    expect_create(ctx, "no CollabHead config (collab_dim 0)", &c, &f->w, MH_ERR_INVALID_ARGUMENT);
    cc.collab_dim = -3, c.variant_config = &cc;
    expect_create(ctx, "collab_dim < 0", &c, &f->w, MH_ERR_INVALID_ARGUMENT);
    c = config(), c.n_kv_heads = H;
    expect_create(ctx, "n_kv_heads set", &c, &f->w, MH_ERR_INVALID_ARGUMENT);
    c = config();
    mh_layer_weights w = f->w;
    mh_collab_weights cw = f->collab_w;
    w.variant_weights = &cw, cw.mix = NULL;
    expect_create(ctx, "no mixing matrix", &c, &w, MH_ERR_INVALID_ARGUMENT);
    cw = f->collab_w, cw.content = NULL;
    expect_create(ctx, "no content bias weight", &c, &w, MH_ERR_INVALID_ARGUMENT);
    w.variant_weights = NULL;
    expect_create(ctx, "no CollabHead weights", &c, &w, MH_ERR_INVALID_ARGUMENT);
    w = f->w, w.b_q = f->bv;
    expect_create(ctx, "b_q given", &c, &w, MH_ERR_INVALID_ARGUMENT);
    w = f->w, w.b_k = f->bv;
    expect_create(ctx, "b_k given", &c, &w, MH_ERR_INVALID_ARGUMENT);
    w = f->w, w.b_v = NULL;
    expect_create(ctx, "bias 1 without b_v", &c, &w, MH_ERR_INVALID_ARGUMENT);
    c.bias = 0;
    expect_create(ctx, "bias 0 with b_v, b_o", &c, &f->w, MH_ERR_INVALID_ARGUMENT);
    c = config(), w = f->w, w.w_k = NULL;
    expect_create(ctx, "no W~_K", &c, &w, MH_ERR_INVALID_ARGUMENT);
}

static void bad_cache(const mh_context* ctx, const layer_fixture* f, test_rng* r) {
    mh_layer_config cm = mh_layer_config_default();
    cm.d_model = D_MODEL, cm.n_heads = H, cm.head_dim = D, cm.bias = 1;
    layer_fixture m;
    if (!check_status("mha create", fixture_make(&m, ctx, &cm, r, 0.5f), MH_OK)) return;
    mh_kv_cache *mha_cache = NULL, *cache = NULL;
    check_status("mha cache", mh_kv_cache_create(m.layer, 1, 8, MH_DTYPE_F32, &mha_cache), MH_OK);
    check_status("collab cache", mh_kv_cache_create(f->layer, 1, 8, MH_DTYPE_F32, &cache), MH_OK);
    check_true("collab cache holds D~ + H + H*Dv floats per token",
               mh_kv_cache_bytes_per_token(cache) == 4 * (DT + H + H * D));
    float x[D_MODEL] = {0}, out[D_MODEL];
    memset(out, 0x5a, sizeof out);
    check_status("MHA cache for a CollabHead layer", run_decode(f->layer, mha_cache, 1, 1, x, out),
                 MH_ERR_SHAPE_MISMATCH);
    check_status("CollabHead cache for an MHA layer", run_decode(m.layer, cache, 1, 1, x, out),
                 MH_ERR_SHAPE_MISMATCH);
    check_true("out untouched", all_bytes(out, sizeof out, 0x5a));
    check_true("caches untouched", mh_kv_cache_length(cache) == 0 && mh_kv_cache_length(mha_cache) == 0);
    mh_kv_cache_destroy(mha_cache), mh_kv_cache_destroy(cache);
    fixture_free(&m);
}

static void bad_conversion(const mh_context* ctx, test_rng* r) {
    mh_layer_config cm = mh_layer_config_default();
    cm.d_model = D_MODEL, cm.n_heads = H, cm.head_dim = D, cm.bias = 1;
    layer_fixture m;
    if (!check_status("mha create", fixture_make(&m, ctx, &cm, r, 0.5f), MH_OK)) return;
    float mix[H * H * D], content[H * D_MODEL];
    mh_layer_config out_c;
    mh_collab_config out_cc;
    mh_layer_weights out_w;
    mh_collab_weights out_cw;
    memset(mix, 0x5a, sizeof mix), memset(content, 0x5a, sizeof content);
    memset(&out_c, 0x5a, sizeof out_c), memset(&out_w, 0x5a, sizeof out_w);
    memset(&out_cc, 0x5a, sizeof out_cc), memset(&out_cw, 0x5a, sizeof out_cw);
    mh_layer_config c = cm;
    mh_layer_weights w = m.w;
    check_status("convert: NULL mix", mh_convert_mha_to_collab(&c, &w, NULL, content, &out_c, &out_cc, &out_w, &out_cw), MH_ERR_INVALID_ARGUMENT);
    check_status("convert: NULL config", mh_convert_mha_to_collab(NULL, &w, mix, content, &out_c, &out_cc, &out_w, &out_cw), MH_ERR_INVALID_ARGUMENT);
    c.variant = MH_VARIANT_GQA, c.n_kv_heads = 2;
    check_status("convert: GQA with Hkv < H", mh_convert_mha_to_collab(&c, &w, mix, content, &out_c, &out_cc, &out_w, &out_cw), MH_ERR_INVALID_ARGUMENT);
    c = cm, c.variant = MH_VARIANT_COLLAB;
    check_status("convert: not MHA", mh_convert_mha_to_collab(&c, &w, mix, content, &out_c, &out_cc, &out_w, &out_cw), MH_ERR_INVALID_ARGUMENT);
    c = cm, w.b_q = NULL;
    check_status("convert: bias 1 without b_q", mh_convert_mha_to_collab(&c, &w, mix, content, &out_c, &out_cc, &out_w, &out_cw), MH_ERR_INVALID_ARGUMENT);
    w = m.w, w.w_k = NULL;
    check_status("convert: no W_K", mh_convert_mha_to_collab(&c, &w, mix, content, &out_c, &out_cc, &out_w, &out_cw), MH_ERR_INVALID_ARGUMENT);
    w = m.w, c.n_heads = 1 << 20, c.head_dim = 1 << 20;
    check_status("convert: H*D overflows", mh_convert_mha_to_collab(&c, &w, mix, content, &out_c, &out_cc, &out_w, &out_cw), MH_ERR_SIZE_OVERFLOW);
    check_true("convert: nothing written on error",
               all_bytes(mix, sizeof mix, 0x5a) && all_bytes(content, sizeof content, 0x5a) &&
                   all_bytes(&out_c, sizeof out_c, 0x5a) && all_bytes(&out_w, sizeof out_w, 0x5a) &&
                   all_bytes(&out_cc, sizeof out_cc, 0x5a) && all_bytes(&out_cw, sizeof out_cw, 0x5a));
    c = cm;
    check_status("convert: valid", mh_convert_mha_to_collab(&c, &m.w, mix, content, &out_c, &out_cc, &out_w, &out_cw), MH_OK);
    fixture_free(&m);
}

int main(void) {
    mh_context* ctx = test_context(1);
    test_rng r;
    rng_seed(&r, 6);
    mh_layer_config c = config();
    layer_fixture f;
    if (check_status("valid create", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) {
        mh_layer_config got;
        mh_layer_get_config(f.layer, &got);
        check_true("resolved: Dv = D, kdim = vdim = d_model, scale 1/sqrt(D), n_kv_heads 0",
                   got.head_dim_v == D && got.kdim == D_MODEL && got.vdim == D_MODEL &&
                       got.scale == 0.5f && got.n_kv_heads == 0);
        mh_collab_config got_c = mh_collab_config_default();
        check_status("resolved CollabHead config", mh_layer_get_variant_config(f.layer, &got_c), MH_OK);
        check_true("resolved: collab_dim kept", got_c.collab_dim == DT);
        bad_create(ctx, &f);
        bad_cache(ctx, &f, &r);
        fixture_free(&f);
    }
    bad_conversion(ctx, &r);
    mh_context_destroy(ctx);
    return test_exit_code("test_collab_bad_input");
}
