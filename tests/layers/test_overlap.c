/*
 * Overlapping heads (MOHSA, docs/variants.md "Overlapping heads"):
 *  - random configs (o from 0 to D, D + 2o not a multiple of any vector width, biases, cross
 *    attention, masks, kv_len, window, soft-cap, ALiBi, sinks) against the double oracle,
 *    which copies every window out of the padded rows (the library reads them in place);
 *  - o = 0 is MHA with W' = W_O, bitwise: the same GEMMs and the same core problem run;
 *  - H = 1: the 2o halo columns of W' have no effect (bitwise), and the layer equals one-head
 *    MHA through the middle D columns of W' at the same scale (to rounding);
 *  - head 0's left halo and head H-1's right halo are zero: with W' reading only those columns
 *    the output is exactly zero (and reading head 0's right halo instead it is not);
 *  - changing head j's Q/K/V weight slices changes heads j-1..j+1 only (W' routes each head's
 *    window to its own output column);
 *  - decode equals the causal forward (token by token and in chunks); f16/bf16 caches equal the
 *    f32 cache bitwise on exactly representable K/V; bytes per token 2*(H*D + 2o)*elt;
 *  - the same bits for 1, 2 and 3 threads (forward and decode);
 *  - the resolved config (scale 1/sqrt(D + 2o)) and every bad config, weight set and cache,
 *    with nothing written on error.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "oracle_overlap.h"
#include "problem.h"

/* An overlapping-heads config whose o lives in *oc (kept alive by the caller). */
static mh_layer_config config(mh_overlap_config* oc, int d, int H, int D, int o, int bias) {
    mh_layer_config c = mh_layer_config_default();
    *oc = mh_overlap_config_default();
    oc->overlap = o;
    c.variant = MH_VARIANT_OVERLAP, c.d_model = d, c.n_heads = H, c.head_dim = D;
    c.variant_config = oc;
    c.bias = bias;
    return c;
}

static float* forward(const mh_layer* L, int B, int N, int d, const float* x, int causal) {
    float* y = malloc(sizeof(float) * (size_t)B * N * d);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = causal;
    mh_forward_args a = {.batch = B, .n_q = N, .query = x, .out = y, .opt = &opt};
    check_status("forward", run_forward(L, &a), MH_OK);
    return y;
}

static float* random_input(test_rng* r, size_t n) {
    float* x = malloc(sizeof(float) * n);
    rng_fill(r, x, n, -1, 1);
    return x;
}

static void oracle_case(const mh_context* ctx, test_rng* r, int id) {
    const int H = rng_int(r, 1, 5), D = rng_int(r, 1, 21), o = rng_int(r, 0, D);
    const int d = rng_int(r, 3, 40), B = rng_int(r, 1, 3), N = rng_int(r, 1, 40);
    const int cross = rng_int(r, 0, 3) == 0, M = cross ? rng_int(r, 1, 40) : N;
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, d, H, D, o, rng_int(r, 0, 1));
    if (cross) c.kdim = rng_int(r, 2, 30), c.vdim = rng_int(r, 2, 30);
    float slopes[5], sinks[5];
    if (rng_int(r, 0, 3) == 0) c.window = rng_int(r, 1, 12);
    if (rng_int(r, 0, 3) == 0) c.softcap = rng_uniform(r, 1.0f, 20.0f);
    if (rng_int(r, 0, 3) == 0) {
        for (int h = 0; h < H; h++) slopes[h] = 0.5f / (float)(h + 1);
        c.alibi_slopes = slopes;
    }
    if (rng_int(r, 0, 3) == 0) {
        for (int h = 0; h < H; h++) sinks[h] = rng_uniform(r, -1.0f, 2.0f);
        c.sinks = sinks;
    }
    if (rng_int(r, 0, 3) == 0) c.scale = rng_uniform(r, 0.05f, 0.5f);
    char what[200];
    snprintf(what, sizeof what, "oracle case %d: d%d H%d D%d o%d bias%d B%d N%d M%d cross%d", id, d,
             H, D, o, c.bias, B, N, M, cross);
    layer_fixture f;
    if (!check_status(what, fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    mh_layer_get_config(f.layer, &f.cfg);
    f.cfg.variant_config = &f.vcfg; /* cleared by mh_layer_get_config */
    f.cfg.alibi_slopes = c.alibi_slopes, f.cfg.sinks = c.sinks;
    float *xq = random_input(r, (size_t)B * N * d), *xk = random_input(r, (size_t)B * M * f.cfg.kdim);
    float* xv = random_input(r, (size_t)B * M * f.cfg.vdim);
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = rng_int(r, 0, 1);
    int32_t kv_len[3];
    float* mask = NULL;
    if (rng_int(r, 0, 2) == 0) {
        for (int b = 0; b < B; b++) kv_len[b] = rng_int(r, 1, M);
        opt.kv_len = kv_len;
    }
    if (rng_int(r, 0, 2) == 0) {
        mask = random_input(r, (size_t)N * M);
        opt.mask = mask, opt.mask_stride_row = M;
    }
    float* out = malloc(sizeof(float) * (size_t)B * N * d);
    mh_forward_args a = {.batch = B, .n_q = N, .n_kv = M, .query = xq, .key = cross ? xk : NULL,
                         .value = cross ? xv : NULL, .out = out, .opt = &opt};
    if (check_status(what, run_forward(f.layer, &a), MH_OK)) {
        double* want = malloc(sizeof(double) * (size_t)B * N * d);
        oracle_overlap_forward(&f.cfg, &f.w, &a, want);
        check_close(what, out, want, (size_t)B * N * d, 8 * FLT_EPSILON * (d + H * (D + 2 * o) + M + 64), 2e-6);
        free(want);
    }
    free(xq), free(xk), free(xv), free(mask), free(out);
    fixture_free(&f);
}

enum { B = 2, N = 23, DM = 24, H = 5, D = 12 };

static void zero_overlap_is_mha(const mh_context* ctx, test_rng* r, const float* x) {
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, H, D, 0, 1), m = c;
    m.variant = MH_VARIANT_MHA, m.variant_config = NULL;
    layer_fixture f;
    mh_layer* mha = NULL;
    if (!check_status("o = 0 create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    check_status("mha create", fixture_recreate(&f, ctx, &m, &mha), MH_OK);
    for (int causal = 0; causal < 2; causal++) {
        float *y = forward(f.layer, B, N, DM, x, causal), *ym = forward(mha, B, N, DM, x, causal);
        check_bitwise("o = 0 equals MHA with W' = W_O, bitwise", y, ym, (size_t)B * N * DM);
        free(y), free(ym);
    }
    mh_layer_destroy(mha);
    fixture_free(&f);
}

/* H = 1: the padded dims are zero, so the halo columns of W' multiply exact zeros. */
static void one_head(const mh_context* ctx, test_rng* r, const float* x, int o) {
    const int dw = D + 2 * o;
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, 1, D, o, 1);
    layer_fixture f;
    if (!check_status("H = 1 create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    float* y = forward(f.layer, B, N, DM, x, 1);
    float* wo2 = malloc(sizeof(float) * DM * dw);
    float* wmid = malloc(sizeof(float) * DM * D);
    memcpy(wo2, f.wo, sizeof(float) * DM * dw);
    for (int row = 0; row < DM; row++) {
        for (int j = 0; j < dw; j++)
            if (j < o || j >= o + D) wo2[row * dw + j] = rng_uniform(r, -4, 4);
        memcpy(wmid + row * D, f.wo + row * dw + o, sizeof(float) * D);
    }
    mh_layer_weights w = f.w;
    w.w_o = wo2;
    mh_layer* L2 = NULL;
    if (check_status("H = 1 other halo rows", mh_layer_create(ctx, &c, &w, &L2), MH_OK)) {
        float* y2 = forward(L2, B, N, DM, x, 1);
        check_bitwise("H = 1: the halo rows of W' have no effect", y2, y, (size_t)B * N * DM);
        free(y2);
    }
    mh_overlap_config om;
    mh_layer_config m = config(&om, DM, 1, D, 0, 1);
    m.variant = MH_VARIANT_MHA, m.variant_config = NULL, m.scale = 1.0f / sqrtf((float)dw);
    w.w_o = wmid;
    mh_layer* mha = NULL;
    if (check_status("H = 1 mha", mh_layer_create(ctx, &m, &w, &mha), MH_OK)) {
        float* ym = forward(mha, B, N, DM, x, 1);
        check_close_f32("H = 1 equals one-head MHA through the middle D columns of W'", y, ym,
                        (size_t)B * N * DM, 16 * FLT_EPSILON * (DM + dw + N));
        free(ym);
    }
    mh_layer_destroy(L2), mh_layer_destroy(mha);
    free(y), free(wo2), free(wmid);
    fixture_free(&f);
}

/* The layer with W' nonzero only on the listed column ranges [lo, hi), and no output bias. */
static float* output_through(const mh_context* ctx, const layer_fixture* f, const mh_layer_config* c,
                             const int (*cols)[2], int n_ranges, const float* x) {
    const int wide = c->n_heads * (c->head_dim + 2 * config_overlap(c));
    float* wo = calloc((size_t)c->d_model * wide, sizeof(float));
    float* bo = calloc((size_t)c->d_model, sizeof(float));
    for (int row = 0; row < c->d_model; row++)
        for (int k = 0; k < n_ranges; k++)
            for (int j = cols[k][0]; j < cols[k][1]; j++) wo[row * wide + j] = f->wo[row * wide + j];
    mh_layer_weights w = f->w;
    w.w_o = wo, w.b_o = c->bias ? bo : NULL;
    mh_layer* L = NULL;
    float* y = NULL;
    if (check_status("create (selected W' columns)", mh_layer_create(ctx, c, &w, &L), MH_OK))
        y = forward(L, B, N, c->d_model, x, 0);
    mh_layer_destroy(L);
    free(wo), free(bo);
    return y;
}

static void boundary_halos(const mh_context* ctx, test_rng* r, const float* x, int o) {
    const int dw = D + 2 * o, n = B * N * DM;
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, H, D, o, 1);
    layer_fixture f;
    if (!check_status("boundary create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    const int outer[2][2] = {{0, o}, {H * dw - o, H * dw}};
    const int inner[1][2] = {{D + o, dw}}; /* head 0's right halo: head 1's first o dims */
    float* y = output_through(ctx, &f, &c, outer, 2, x);
    float* y_in = output_through(ctx, &f, &c, inner, 1, x);
    if (y && y_in) {
        check_true("head 0's left halo and head H-1's right halo are exactly zero", all_bytes(y, sizeof(float) * n, 0));
        float m = 0;
        for (int i = 0; i < n; i++) m = fmaxf(m, fabsf(y_in[i]));
        check_true("an inner halo is not zero (the selection is real)", m > 1e-3f);
    }
    free(y), free(y_in);
    fixture_free(&f);
}

/* Output column h reads only head h's window: W'[h, h*dw + j] = 1 / dw, every other entry 0. */
static float* per_head(const mh_context* ctx, const mh_layer_config* c, const mh_layer_weights* w0,
                       const float* x) {
    const int dw = c->head_dim + 2 * config_overlap(c), wide = c->n_heads * dw;
    float* wo = calloc((size_t)c->d_model * wide, sizeof(float));
    for (int h = 0; h < c->n_heads; h++)
        for (int j = 0; j < dw; j++) wo[h * wide + h * dw + j] = 1.0f / (float)dw;
    mh_layer_weights w = *w0;
    w.w_o = wo, w.b_o = NULL;
    mh_layer_config cb = *c;
    cb.bias = 0, w.b_q = w.b_k = w.b_v = NULL;
    mh_layer* L = NULL;
    float* y = NULL;
    if (check_status("create (per-head W')", mh_layer_create(ctx, &cb, &w, &L), MH_OK))
        y = forward(L, B, N, c->d_model, x, 1);
    mh_layer_destroy(L);
    free(wo);
    return y;
}

static void locality(const mh_context* ctx, test_rng* r, const float* x, int o, int j) {
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, H, D, o, 0);
    layer_fixture f;
    if (!check_status("locality create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    float* ya = per_head(ctx, &c, &f.w, x);
    /* new Q/K/V rows for head j only */
    rng_fill(r, f.wq + (size_t)j * D * DM, (size_t)D * DM, -0.5f, 0.5f);
    rng_fill(r, f.wk + (size_t)j * D * DM, (size_t)D * DM, -0.5f, 0.5f);
    rng_fill(r, f.wv + (size_t)j * D * DM, (size_t)D * DM, -0.5f, 0.5f);
    float* yb = per_head(ctx, &c, &f.w, x);
    char what[160];
    for (int h = 0; h < H && ya && yb; h++) {
        int same = 1;
        for (int t = 0; t < B * N; t++) same &= memcmp(&ya[t * DM + h], &yb[t * DM + h], sizeof(float)) == 0;
        const int near = h >= j - 1 && h <= j + 1 && (o > 0 || h == j);
        snprintf(what, sizeof what, "o = %d, head %d changed: head %d %s", o, j, h,
                 near ? "changes" : "is bitwise unchanged");
        check_true(what, near ? !same : same);
    }
    free(ya), free(yb);
    fixture_free(&f);
}

static void decode_equals_forward(const mh_context* ctx, test_rng* r, const float* x, int o) {
    static const int chunks[] = {7, 1, 4, 1, 20};
    float slopes[H], sinks[H];
    for (int h = 0; h < H; h++) slopes[h] = 0.25f / (float)(h + 1), sinks[h] = 0.5f * (float)h;
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, H, D, o, 1);
    c.window = 9, c.softcap = 6.0f, c.alibi_slopes = slopes, c.sinks = sinks;
    layer_fixture f;
    if (!check_status("decode create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    const size_t n = (size_t)B * N * DM;
    float *y = forward(f.layer, B, N, DM, x, 1), *yd = malloc(sizeof(float) * n);
    mh_kv_cache* cache = NULL;
    check_status("cache", mh_kv_cache_create(f.layer, B, N, MH_DTYPE_F32, &cache), MH_OK);
    check_true("cache bytes per token: 2*(H*D + 2o) f32",
               mh_kv_cache_bytes_per_token(cache) == 2 * (size_t)(H * D + 2 * o) * sizeof(float));
    const double tol = 8 * FLT_EPSILON * (DM + H * (D + 2 * o) + N + 64);
    decode_in_chunks(f.layer, cache, B, N, DM, x, yd, NULL);
    check_close_f32("token-by-token decode == causal forward", yd, y, n, tol);
    mh_kv_cache_reset(cache);
    decode_in_chunks(f.layer, cache, B, N, DM, x, yd, chunks);
    check_close_f32("chunked decode == causal forward", yd, y, n, tol);
    mh_kv_cache_destroy(cache);

    /* exactly representable K/V (multiples of 1/32 below 2^6): low-precision caches lose nothing */
    float* xe = malloc(sizeof(float) * n);
    fill_dyadic(r, xe, n, 0.25f, 4);
    fill_dyadic(r, f.wk, (size_t)H * D * DM, 0.125f, 1);
    fill_dyadic(r, f.wv, (size_t)H * D * DM, 0.125f, 1);
    fill_dyadic(r, f.bk, (size_t)H * D, 0.125f, 4);
    fill_dyadic(r, f.bv, (size_t)H * D, 0.125f, 4);
    mh_layer_destroy(f.layer);
    check_status("recreate", fixture_recreate(&f, ctx, &c, &f.layer), MH_OK);
    float* y32 = malloc(sizeof(float) * n);
    check_status("cache f32", mh_kv_cache_create(f.layer, B, N, MH_DTYPE_F32, &cache), MH_OK);
    decode_in_chunks(f.layer, cache, B, N, DM, xe, y32, chunks);
    mh_kv_cache_destroy(cache);
    for (int dt = MH_DTYPE_F16; dt <= MH_DTYPE_BF16; dt++) {
        check_status("cache low", mh_kv_cache_create(f.layer, B, N, (mh_dtype)dt, &cache), MH_OK);
        decode_in_chunks(f.layer, cache, B, N, DM, xe, yd, chunks);
        check_bitwise(dt == MH_DTYPE_F16 ? "f16 cache == f32 cache on exact K/V" : "bf16 cache == f32 cache on exact K/V",
                      yd, y32, n);
        mh_kv_cache_destroy(cache);
    }
    free(y), free(yd), free(xe), free(y32);
    fixture_free(&f);
}

static void threads_bitwise(test_rng* r, const float* x) {
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, H, D, 5, 1);
    mh_context* c1 = test_context(1);
    layer_fixture f;
    if (!check_status("threads create", fixture_make(&f, c1, &c, r, 0.5f), MH_OK)) return;
    const size_t n = (size_t)B * N * DM;
    float* ref = NULL;
    for (int t = 1; t <= 3; t++) {
        mh_context* ctx = test_context(t);
        mh_layer* L = NULL;
        check_status("create", fixture_recreate(&f, ctx, &c, &L), MH_OK);
        float* y = malloc(sizeof(float) * 2 * n);
        float* yf = forward(L, B, N, DM, x, 1);
        memcpy(y, yf, sizeof(float) * n);
        mh_kv_cache* cache = NULL;
        check_status("cache", mh_kv_cache_create(L, B, N, MH_DTYPE_F32, &cache), MH_OK);
        check_status("decode", run_decode(L, cache, B, N, x, y + n), MH_OK);
        if (ref) check_bitwise("forward + decode: same bits on any thread count", y, ref, 2 * n), free(y);
        else ref = y;
        mh_kv_cache_destroy(cache), mh_layer_destroy(L), free(yf), mh_context_destroy(ctx);
    }
    free(ref);
    fixture_free(&f);
    mh_context_destroy(c1);
}

static void resolved_config(const mh_context* ctx, test_rng* r) {
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, H, D, 3, 0);
    layer_fixture f;
    if (!check_status("resolve create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    mh_layer_config got;
    mh_layer_get_config(f.layer, &got);
    check_true("default scale 1/sqrt(D + 2o)", got.scale == 1.0f / sqrtf((float)(D + 6)));
    check_true("resolved n_kv_heads = H, head_dim_v = D, overlap kept",
               got.n_kv_heads == H && got.head_dim_v == D);
    mh_overlap_config got_o = mh_overlap_config_default();
    check_status("resolved overlap config", mh_layer_get_variant_config(f.layer, &got_o), MH_OK);
    check_true("overlap kept", got_o.overlap == 3);
    check_true("weights bytes count W' [d, H*(D + 2o)]",
               mh_layer_weights_bytes(f.layer) >= sizeof(float) * (size_t)(3 * H * D * DM + DM * H * (D + 6)));
    fixture_free(&f);
}

static void bad_input(const mh_context* ctx, test_rng* r, const float* x) {
    mh_overlap_config oc;
    mh_layer_config c = config(&oc, DM, H, D, 2, 1);
    layer_fixture f;
    if (!check_status("bad-input create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    struct {
        const char* what;
        mh_layer_config c;
    } bad[10];
    int nb = 0;
    const mh_layer_config ok = c;
    mh_overlap_config neg = oc, wide = oc;
    neg.overlap = -1, wide.overlap = D + 1;
    mh_collab_config collab = mh_collab_config_default();
    mh_moh_config moh = mh_moh_config_default();
    mh_dcmha_config dcmha = mh_dcmha_config_default();
    collab.collab_dim = 4, moh.top_k = 1, dcmha.rank = 2;
    bad[nb].what = "o < 0", bad[nb].c = ok, bad[nb++].c.variant_config = &neg;
    bad[nb].what = "o > D", bad[nb].c = ok, bad[nb++].c.variant_config = &wide;
    bad[nb].what = "overlap on an MHA layer", bad[nb].c = ok, bad[nb++].c.variant = MH_VARIANT_MHA;
    bad[nb].what = "overlap on a GQA layer", bad[nb].c = ok, bad[nb].c.variant = MH_VARIANT_GQA, bad[nb++].c.n_kv_heads = 1;
    bad[nb].what = "n_kv_heads != H", bad[nb].c = ok, bad[nb++].c.n_kv_heads = 1;
    bad[nb].what = "head_dim_v != head_dim", bad[nb].c = ok, bad[nb++].c.head_dim_v = D / 2;
    bad[nb].what = "a CollabHead config", bad[nb].c = ok, bad[nb++].c.variant_config = &collab;
    bad[nb].what = "a MoH config", bad[nb].c = ok, bad[nb++].c.variant_config = &moh;
    bad[nb].what = "a DCMHA config", bad[nb].c = ok, bad[nb++].c.variant_config = &dcmha;
    for (int i = 0; i < nb; i++) {
        mh_layer* L = (mh_layer*)&f; /* must stay untouched */
        check_status(bad[i].what, mh_layer_create(ctx, &bad[i].c, &f.w, &L), MH_ERR_INVALID_ARGUMENT);
        check_true("nothing written on a bad config", L == (mh_layer*)&f);
    }
    mh_layer_config big = ok; /* H*(D + 2o) past INT_MAX (H*D fits): refused before any read */
    mh_overlap_config big_o = oc;
    big_o.overlap = 1 << 14;
    big.n_heads = 1 << 16, big.head_dim = 1 << 14, big.variant_config = &big_o;
    mh_layer* Lb = NULL;
    check_status("H*(D + 2o) overflows int", mh_layer_create(ctx, &big, &f.w, &Lb), MH_ERR_SIZE_OVERFLOW);
    mh_layer_weights w = f.w;
    const float mix[1] = {0};
    mh_collab_weights cw = mh_collab_weights_default();
    cw.mix = cw.content = mix;
    w.variant_weights = &cw;
    mh_layer* L = NULL;
    check_status("a foreign weight (CollabHead's)", mh_layer_create(ctx, &ok, &w, &L), MH_ERR_INVALID_ARGUMENT);
    w = f.w, w.w_o = NULL;
    check_status("missing W'", mh_layer_create(ctx, &ok, &w, &L), MH_ERR_INVALID_ARGUMENT);
    w = f.w, w.b_v = NULL;
    check_status("a missing bias", mh_layer_create(ctx, &ok, &w, &L), MH_ERR_INVALID_ARGUMENT);
    check_true("no layer from bad weights", L == NULL);

    /* a cache of the same shape but another variant (MHA: 2*H*D per token) is refused */
    mh_layer_config m = ok;
    m.variant = MH_VARIANT_MHA, m.variant_config = NULL;
    mh_layer_weights wm = f.w;
    float* wo_mha = malloc(sizeof(float) * DM * H * D);
    rng_fill(r, wo_mha, (size_t)DM * H * D, -1, 1);
    wm.w_o = wo_mha;
    mh_layer* mha = NULL;
    mh_kv_cache* cache = NULL;
    check_status("mha create", mh_layer_create(ctx, &m, &wm, &mha), MH_OK);
    check_status("mha cache", mh_kv_cache_create(mha, B, N, MH_DTYPE_F32, &cache), MH_OK);
    float* y = malloc(sizeof(float) * B * DM);
    memset(y, 0x5a, sizeof(float) * B * DM);
    check_status("decode into another variant's cache", run_decode(f.layer, cache, B, 1, x, y),
                 MH_ERR_SHAPE_MISMATCH);
    check_true("nothing written, cache length unchanged", all_bytes(y, sizeof(float) * B * DM, 0x5a) &&
                                                              mh_kv_cache_length(cache) == 0);
    mh_kv_cache_destroy(cache);
    mh_layer_destroy(mha);
    free(wo_mha), free(y);
    fixture_free(&f);
}

int main(void) {
    mh_context* ctx = test_context(2);
    test_rng r;
    rng_seed(&r, 46);
    for (int i = 0; i < 40; i++) oracle_case(ctx, &r, i);
    float* x = random_input(&r, (size_t)B * N * DM);
    zero_overlap_is_mha(ctx, &r, x);
    one_head(ctx, &r, x, 3);
    one_head(ctx, &r, x, D);
    boundary_halos(ctx, &r, x, 1);
    boundary_halos(ctx, &r, x, 7);
    boundary_halos(ctx, &r, x, D);
    locality(ctx, &r, x, 0, 2);
    locality(ctx, &r, x, 5, 2);
    locality(ctx, &r, x, D, 2);
    locality(ctx, &r, x, 4, 0);
    locality(ctx, &r, x, 4, H - 1);
    decode_equals_forward(ctx, &r, x, 0);
    decode_equals_forward(ctx, &r, x, 5);
    decode_equals_forward(ctx, &r, x, D);
    threads_bitwise(&r, x);
    resolved_config(ctx, &r);
    bad_input(ctx, &r, x);
    free(x);
    mh_context_destroy(ctx);
    return test_exit_code("test_overlap");
}
