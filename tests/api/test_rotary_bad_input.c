/*
 * Rotary and QK-norm configs (include/multihead.h "positions", docs/api.md): every bad value
 * gets its status and creates nothing (the output pointer untouched); overlapping heads and
 * CollabHead refuse them with MH_ERR_UNSUPPORTED; the resolved config (defaults filled, the
 * table pointer cleared) and the bytes the copies add to mh_layer_weights_bytes.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"

enum { D_MODEL = 16, H = 4, D = 8 };

static mh_layer_config base(void) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = D_MODEL, c.n_heads = H, c.n_kv_heads = 2, c.head_dim = D;
    return c;
}

static void bad_configs(const mh_context* ctx, const layer_fixture* f) {
    const float norm[D] = {1, 1, 1, 1, 1, 1, 1, 1};
    const float bad_inv[3][D / 2] = {{1, NAN, 1, 1}, {1, 1, -0.5f, 1}, {1, 1, 1, INFINITY}};
    mh_layer_config c;
    mh_layer_weights w;
    mh_layer* const L = (mh_layer*)&c; /* a sentinel: must stay untouched */
#define EXPECT(what, edit, status) \
    do { \
        c = base(), w = f->w, c.rotary.layout = MH_ROTARY_HALF; \
        edit; \
        mh_layer* out = L; \
        check_status(what, mh_layer_create(ctx, &c, &w, &out), status); \
        check_true(what " leaves the output pointer alone", out == L); \
    } while (0)
    EXPECT("rotary_dim odd", c.rotary.rotary_dim = 3, MH_ERR_INVALID_ARGUMENT);
    EXPECT("rotary_dim > head_dim", c.rotary.rotary_dim = D + 2, MH_ERR_INVALID_ARGUMENT);
    EXPECT("rotary_dim negative", c.rotary.rotary_dim = -2, MH_ERR_INVALID_ARGUMENT);
    EXPECT("theta negative", c.rotary.theta = -1.0f, MH_ERR_INVALID_ARGUMENT);
    EXPECT("theta NaN", c.rotary.theta = NAN, MH_ERR_INVALID_ARGUMENT);
    EXPECT("theta inf", c.rotary.theta = INFINITY, MH_ERR_INVALID_ARGUMENT);
    EXPECT("layout 3", c.rotary.layout = (mh_rotary_layout)3, MH_ERR_INVALID_ARGUMENT);
    EXPECT("layout -1", c.rotary.layout = (mh_rotary_layout)-1, MH_ERR_INVALID_ARGUMENT);
    EXPECT("inv_freq with NaN", c.rotary.inv_freq = bad_inv[0], MH_ERR_INVALID_ARGUMENT);
    EXPECT("inv_freq negative", c.rotary.inv_freq = bad_inv[1], MH_ERR_INVALID_ARGUMENT);
    EXPECT("inv_freq inf", c.rotary.inv_freq = bad_inv[2], MH_ERR_INVALID_ARGUMENT);
    EXPECT("qk_norm 2", (c.qk_norm = 2, w.q_norm = w.k_norm = norm), MH_ERR_INVALID_ARGUMENT);
    EXPECT("qk_norm_eps negative", (c.qk_norm = 1, c.qk_norm_eps = -1e-6f, w.q_norm = w.k_norm = norm),
           MH_ERR_INVALID_ARGUMENT);
    EXPECT("qk_norm_eps NaN", (c.qk_norm = 1, c.qk_norm_eps = NAN, w.q_norm = w.k_norm = norm),
           MH_ERR_INVALID_ARGUMENT);
    EXPECT("qk_norm without q_norm", (c.qk_norm = 1, w.k_norm = norm), MH_ERR_INVALID_ARGUMENT);
    EXPECT("qk_norm without k_norm", (c.qk_norm = 1, w.q_norm = norm), MH_ERR_INVALID_ARGUMENT);
    EXPECT("norm weights without qk_norm", (w.q_norm = w.k_norm = norm), MH_ERR_INVALID_ARGUMENT);
#undef EXPECT
    /* the layout NONE reads no other rotary field */
    c = base(), c.rotary.rotary_dim = 3, c.rotary.theta = NAN;
    mh_layer* out = NULL;
    check_status("no rotary: rotary_dim and theta not read", mh_layer_create(ctx, &c, &f->w, &out), MH_OK);
    mh_layer_destroy(out);
}

/* Overlapping heads and CollabHead: no definition of rotary or QK-norm in their papers' code. */
static void unsupported(const mh_context* ctx, test_rng* r) {
    static const float norm[D] = {1, 1, 1, 1, 1, 1, 1, 1};
    mh_overlap_config oc = mh_overlap_config_default();
    oc.overlap = 1;
    mh_collab_config cc = mh_collab_config_default();
    cc.collab_dim = 8;
    for (int v = 0; v < 2; v++) {
        mh_layer_config c = mh_layer_config_default();
        c.variant = v ? MH_VARIANT_COLLAB : MH_VARIANT_OVERLAP;
        c.variant_config = v ? (const void*)&cc : (const void*)&oc;
        c.d_model = D_MODEL, c.n_heads = H, c.head_dim = D;
        layer_fixture f;
        if (!check_status(v ? "collab base" : "overlap base", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) continue;
        for (int k = 0; k < 2; k++) {
            mh_layer_config e = f.cfg;
            mh_layer_weights w = f.w;
            if (k) e.qk_norm = 1, w.q_norm = w.k_norm = norm;
            else e.rotary.layout = MH_ROTARY_INTERLEAVED;
            mh_layer* out = (mh_layer*)&e;
            char what[96];
            snprintf(what, sizeof what, "%s with %s", v ? "CollabHead" : "overlapping heads", k ? "QK-norm" : "rotary");
            check_status(what, mh_layer_create(ctx, &e, &w, &out), MH_ERR_UNSUPPORTED);
            check_true("nothing created", out == (mh_layer*)&e);
        }
        fixture_free(&f);
    }
}

/* Defaults resolved, pointer cleared, the copies counted; the caller's table is copied. */
static void resolved(const mh_context* ctx, test_rng* r) {
    float inv[D / 2] = {1.0f, 0.5f, 0.25f, 0.125f};
    mh_layer_config c = base();
    layer_fixture plain;
    if (!check_status("plain layer", fixture_make(&plain, ctx, &c, r, 0.5f), MH_OK)) return;
    mh_layer_config got;
    mh_layer_get_config(plain.layer, &got);
    check_true("no positions: resolved fields stay 0", got.rotary.layout == MH_ROTARY_NONE &&
                                                           got.rotary.rotary_dim == 0 && got.qk_norm == 0 &&
                                                           got.qk_norm_eps == 0.0f);
    c.rotary.layout = MH_ROTARY_HALF, c.qk_norm = 1;
    layer_fixture f;
    if (check_status("rotary + QK-norm layer", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) {
        mh_layer_get_config(f.layer, &got);
        check_true("rotary_dim 0 -> head_dim", got.rotary.rotary_dim == D);
        check_true("theta 0 -> 10000", got.rotary.theta == 10000.0f);
        check_true("qk_norm_eps 0 -> 1e-6", got.qk_norm_eps == 1e-6f);
        check_true("inv_freq cleared", got.rotary.inv_freq == NULL);
        const size_t extra = mh_layer_weights_bytes(f.layer) - mh_layer_weights_bytes(plain.layer);
        check_true("weights bytes count the table [D/2] and both norms [D]", extra == (D / 2 + 2 * D) * sizeof(float));
        mh_layer_destroy(f.layer);
        f.layer = NULL;
        c.rotary.rotary_dim = 4, c.rotary.inv_freq = inv;
        check_status("caller's table", fixture_recreate(&f, ctx, &c, &f.layer), MH_OK);
        inv[0] = NAN; /* copied at create: the layer keeps working */
        mh_layer_get_config(f.layer, &got);
        check_true("partial rotary_dim kept", got.rotary.rotary_dim == 4 && got.rotary.inv_freq == NULL);
        check_true("weights bytes: table [2]", mh_layer_weights_bytes(f.layer) - mh_layer_weights_bytes(plain.layer) ==
                                                   (2 + 2 * D) * sizeof(float));
        float x[2 * D_MODEL], y[2 * D_MODEL];
        for (int i = 0; i < 2 * D_MODEL; i++) x[i] = (float)(i % 7) - 3.0f;
        const mh_forward_args a = {.batch = 1, .n_q = 2, .n_kv = 2, .query = x, .out = y};
        check_status("forward after the table was changed", run_forward(f.layer, &a), MH_OK);
        int finite = 1;
        for (int i = 0; i < 2 * D_MODEL; i++) finite &= isfinite(y[i]) != 0;
        check_true("the layer's copy is used (finite outputs)", finite);
    }
    fixture_free(&f);
    fixture_free(&plain);
}

int main(void) {
    mh_context* ctx = NULL;
    const mh_context_config cc = mh_context_config_default();
    if (!check_status("context", mh_context_create(&cc, &ctx), MH_OK)) return test_exit_code("test_rotary_bad_input");
    test_rng r;
    rng_seed(&r, 3);
    layer_fixture f;
    mh_layer_config c = base();
    if (check_status("fixture", fixture_make(&f, ctx, &c, &r, 0.5f), MH_OK)) bad_configs(ctx, &f);
    fixture_free(&f);
    unsupported(ctx, &r);
    resolved(ctx, &r);
    mh_context_destroy(ctx);
    return test_exit_code("test_rotary_bad_input");
}
