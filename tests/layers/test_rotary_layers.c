/*
 * Rotary and QK-norm in the layers against the double oracle and invariants:
 *  - random MHA/GQA/MQA layers with rotary (both layouts, full and partial rotary_dim, the
 *    default table at a random theta or a caller's table), QK-norm or both, biases, Dv != D,
 *    self- and cross-attention, causal or not, q_offset END with key lengths or a given
 *    q_offset == an oracle that projects in double, applies QK-norm and the rotation (cos/sin
 *    in double of the f32 angle fl32(pos * inv_freq[i])), then runs the attention oracle and
 *    the output projection in double. Tolerance: test_layer_oracle's (f32 GEMM rounding of
 *    the three projections around the attention) plus 16 eps32 per rotated element;
 *  - QK-norm without biases is scale-free: out(c x) == c out(x) (q and k are normalised, V
 *    and W_O are linear), up to the eps inside the norm and f32 rounding;
 *  - decode (a prompt chunk, then one token at a time, and chunks of 3) == the causal forward
 *    for GQA, MoH with the learned router (q rotated on gathered rows in forward, dense in
 *    decode) and the norm router, and DCMHA, each with rotary and QK-norm;
 *  - DCMHA with zero dynamic weights == the MHA layer with the same rotary and QK-norm;
 *  - 1 and 2 threads give the same bits (enough q rows that the positions pass forks).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dcmha_fixture.h"
#include "layer_fixture.h"
#include "oracle.h"

/* The library's default table, as its contract states it (f32). */
static float default_inv(const mh_rotary_config* r, int i) {
    return 1.0f / powf(r->theta == 0.0f ? 10000.0f : r->theta, (float)(2 * i) / (float)r->rotary_dim);
}

/* QK-norm and rotary in double of one head x [D] at position pos (cfg resolved). */
static void oracle_position(const mh_layer_config* c, const float* norm, double pos, double* x) {
    const int D = c->head_dim, r = c->rotary.rotary_dim, half = r / 2;
    if (c->qk_norm) {
        double ss = 0;
        for (int j = 0; j < D; j++) ss += x[j] * x[j];
        const double s = 1.0 / sqrt(ss / D + c->qk_norm_eps);
        for (int j = 0; j < D; j++) x[j] *= s * norm[j];
    }
    for (int i = 0; c->rotary.layout != MH_ROTARY_NONE && i < half; i++) {
        const float inv = c->rotary.inv_freq ? c->rotary.inv_freq[i] : default_inv(&c->rotary, i);
        const double a = (double)((float)pos * inv), cs = cos(a), sn = sin(a);
        const int jx = c->rotary.layout == MH_ROTARY_INTERLEAVED ? 2 * i : i;
        const int jy = c->rotary.layout == MH_ROTARY_INTERLEAVED ? 2 * i + 1 : i + half;
        const double xv = x[jx], yv = x[jy];
        x[jx] = xv * cs - yv * sn, x[jy] = xv * sn + yv * cs;
    }
}

/* rows x [rows, in] projected by W [heads*D, in] in double, each head positioned at
 * pos(row), rounded to f32 into y [rows, heads*D]. */
static void project_positioned(const mh_layer_config* c, const float* x, int rows, int in,
                               const float* w, const float* b, int heads, const float* norm,
                               const int64_t* pos, float* y) {
    const int D = c->head_dim;
    double* t = malloc(sizeof(double) * (size_t)rows * heads * D);
    oracle_linear(x, rows, in, w, b, heads * D, t);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++) oracle_position(c, norm, (double)pos[r], t + ((size_t)r * heads + h) * D);
    for (size_t i = 0; i < (size_t)rows * heads * D; i++) y[i] = (float)t[i];
    free(t);
}

/* The layer forward in double with positions (cfg resolved, GQA family). */
static void oracle_forward(const mh_layer_config* c, const mh_layer_weights* w,
                           const mh_forward_args* a, double* out) {
    const int B = a->batch, N = a->n_q, self = a->key == NULL, M = self ? N : a->n_kv;
    const int H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim, Dv = c->head_dim_v, d = c->d_model;
    const mh_attn_options* o = a->opt;
    int64_t *qp = malloc(sizeof(int64_t) * B * N), *kp = malloc(sizeof(int64_t) * B * M);
    for (int b = 0; b < B; b++) {
        const int64_t len = o && o->kv_len ? o->kv_len[b] : M;
        const int64_t q0 = !o || o->q_offset == MH_Q_OFFSET_END ? len - N : o->q_offset;
        for (int i = 0; i < N; i++) qp[b * N + i] = q0 + i;
        for (int j = 0; j < M; j++) kp[b * M + j] = j;
    }
    float *q = malloc(sizeof(float) * B * N * H * D), *k = malloc(sizeof(float) * B * M * Hkv * D);
    float* v = malloc(sizeof(float) * B * M * Hkv * Dv);
    double *vd = malloc(sizeof(double) * B * M * Hkv * Dv), *oh = malloc(sizeof(double) * B * N * H * Dv);
    project_positioned(c, a->query, B * N, d, w->w_q, w->b_q, H, w->q_norm, qp, q);
    project_positioned(c, self ? a->query : a->key, B * M, c->kdim, w->w_k, w->b_k, Hkv, w->k_norm, kp, k);
    oracle_linear(self ? a->query : a->value, B * M, c->vdim, w->w_v, w->b_v, Hkv * Dv, vd);
    for (size_t i = 0; i < (size_t)B * M * Hkv * Dv; i++) v[i] = (float)vd[i];
    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = H, p.n_kv_heads = Hkv;
    p.head_dim_qk = D, p.head_dim_v = Dv, p.scale = c->scale, p.k_dtype = p.v_dtype = MH_DTYPE_F32;
    p.q = (mh_tensor){.data = q, .stride_batch = (ptrdiff_t)N * H * D, .stride_token = H * D, .stride_head = D};
    p.k = (mh_tensor){.data = k, .stride_batch = (ptrdiff_t)M * Hkv * D, .stride_token = Hkv * D, .stride_head = D};
    p.v = (mh_tensor){.data = v, .stride_batch = (ptrdiff_t)M * Hkv * Dv, .stride_token = Hkv * Dv, .stride_head = Dv};
    oracle_attention(&p, o, oh, NULL);
    for (int r = 0; r < B * N; r++)
        for (int j = 0; j < d; j++) {
            double s = w->b_o ? w->b_o[j] : 0.0;
            for (int i = 0; i < H * Dv; i++) s += oh[(size_t)r * H * Dv + i] * w->w_o[(size_t)j * H * Dv + i];
            out[(size_t)r * d + j] = s;
        }
    free(qp), free(kp), free(q), free(k), free(v), free(vd), free(oh);
}

static float* random_input(test_rng* r, size_t n) {
    float* x = malloc(n * sizeof(float));
    rng_fill(r, x, n, -1, 1);
    return x;
}

/* A random rotary/QK-norm setting of c (inv [64] holds a caller's table when chosen). */
static void random_positions(test_rng* r, mh_layer_config* c, float* inv) {
    const int kind = rng_int(r, 0, 3); /* 0 rotary, 1 QK-norm, 2-3 both */
    if (kind != 1) {
        c->rotary.layout = rng_int(r, 0, 1) ? MH_ROTARY_INTERLEAVED : MH_ROTARY_HALF;
        c->rotary.rotary_dim = rng_int(r, 0, 1) ? 0 : 2 * rng_int(r, 1, c->head_dim / 2);
        c->rotary.theta = rng_int(r, 0, 1) ? 0.0f : rng_uniform(r, 50.0f, 1e6f);
        const int rd = c->rotary.rotary_dim ? c->rotary.rotary_dim : c->head_dim;
        if (rng_int(r, 0, 3) == 0) {
            for (int i = 0; i < rd / 2; i++) inv[i] = rng_uniform(r, 0.0f, 1.2f);
            c->rotary.inv_freq = inv;
        }
    }
    if (kind != 0) c->qk_norm = 1, c->qk_norm_eps = rng_int(r, 0, 1) ? 0.0f : 1e-3f;
}

static void oracle_cases(const mh_context* ctx, test_rng* r) {
    static const mh_variant vs[3] = {MH_VARIANT_MHA, MH_VARIANT_GQA, MH_VARIANT_MQA};
    for (int it = 0; it < 36; it++) {
        float inv[64];
        mh_layer_config c = mh_layer_config_default();
        c.variant = vs[it % 3];
        c.n_heads = 4, c.n_kv_heads = c.variant == MH_VARIANT_GQA ? 2 : 0;
        c.head_dim = 2 * rng_int(r, 1, 12), c.head_dim_v = rng_int(r, 0, 1) ? 0 : rng_int(r, 2, 9);
        c.d_model = rng_int(r, 8, 24), c.bias = it % 2;
        const int cross = it % 4 == 3;
        if (cross) c.kdim = rng_int(r, 5, 20), c.vdim = rng_int(r, 5, 20);
        random_positions(r, &c, inv);
        layer_fixture f;
        if (!check_status("create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) continue;
        mh_layer_config rc;
        mh_layer_get_config(f.layer, &rc);
        rc.rotary.inv_freq = c.rotary.inv_freq; /* the oracle reads the caller's table */
        const int B = 2, N = rng_int(r, 1, 11), M = cross ? rng_int(r, 1, 13) : N;
        int32_t kv_len[2] = {M, rng_int(r, 1, M)};
        mh_attn_options opt = mh_attn_options_default();
        opt.causal = rng_int(r, 0, 1);
        if (rng_int(r, 0, 1)) opt.q_offset = rng_int(r, 0, 40);
        else if (rng_int(r, 0, 1)) opt.kv_len = kv_len;
        float *x = random_input(r, (size_t)B * N * c.d_model), *out = malloc(sizeof(float) * B * N * c.d_model);
        float *kx = cross ? random_input(r, (size_t)B * M * rc.kdim) : NULL;
        float *vx = cross ? random_input(r, (size_t)B * M * rc.vdim) : NULL;
        double* want = malloc(sizeof(double) * B * N * c.d_model);
        mh_forward_args a = {.batch = B, .n_q = N, .n_kv = M, .query = x, .key = kx, .value = vx, .out = out, .opt = &opt};
        char what[160];
        snprintf(what, sizeof what, "rotary oracle case %d (layout %d r %d qk_norm %d cross %d)", it,
                 (int)rc.rotary.layout, rc.rotary.rotary_dim, rc.qk_norm, cross);
        if (check_status(what, run_forward(f.layer, &a), MH_OK)) {
            oracle_forward(&rc, &f.w, &a, want);
            const int hdv = rc.n_heads * rc.head_dim_v;
            check_close(what, out, want, (size_t)B * N * c.d_model,
                        8 * FLT_EPSILON * (c.d_model + hdv + M + 64) + 16 * FLT_EPSILON, 2e-6);
        }
        free(x), free(out), free(kx), free(vx), free(want);
        fixture_free(&f);
    }
}

static void forward_causal(const mh_layer* L, int B, int N, const float* x, float* y) {
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = 1;
    const mh_forward_args a = {.batch = B, .n_q = N, .n_kv = N, .query = x, .out = y, .opt = &opt};
    check_status("forward", run_forward(L, &a), MH_OK);
}

/* QK-norm without biases: out(c x) == c out(x). */
static void qk_norm_scale_free(const mh_context* ctx, test_rng* r) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = 24, c.n_heads = 6, c.n_kv_heads = 2, c.head_dim = 8;
    c.qk_norm = 1, c.rotary.layout = MH_ROTARY_HALF;
    layer_fixture f;
    if (!check_status("create (QK-norm)", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK)) return;
    const int B = 2, N = 9;
    const size_t n = (size_t)B * N * c.d_model;
    float *x = random_input(r, n), *xs = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *ys = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) xs[i] = 4.0f * x[i];
    forward_causal(f.layer, B, N, x, y);
    forward_causal(f.layer, B, N, xs, ys);
    for (size_t i = 0; i < n; i++) y[i] *= 4.0f; /* exact */
    check_close_f32("QK-norm: out(4x) == 4 out(x)", ys, y, n, 64 * FLT_EPSILON * 4);
    free(x), free(xs), free(y), free(ys);
    fixture_free(&f);
}

/* Decode (prompt then single tokens; chunks of 3) == the causal forward, for layer L. */
static void decode_is_forward(const char* name, const mh_layer* L, int d, test_rng* r, double tol) {
    const int B = 2, T = 11;
    const size_t n = (size_t)B * T * d;
    float *x = random_input(r, n), *y = malloc(sizeof(float) * n), *yd = malloc(sizeof(float) * n);
    forward_causal(L, B, T, x, y);
    const int prompt[16] = {4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int threes[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    const int* chunks[2] = {prompt, threes};
    for (int k = 0; k < 2; k++) {
        mh_kv_cache* cache = NULL;
        char what[128];
        snprintf(what, sizeof what, "%s: decode %s == forward", name, k ? "in chunks of 3" : "prompt, then tokens");
        if (!check_status("cache", mh_kv_cache_create(L, B, T, MH_DTYPE_F32, &cache), MH_OK)) continue;
        decode_in_chunks(L, cache, B, T, d, x, yd, chunks[k]);
        check_close_f32(what, yd, y, n, tol);
        mh_kv_cache_destroy(cache);
    }
    free(x), free(y), free(yd);
}

static void decode_cases(const mh_context* ctx, test_rng* r) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = 24, c.n_heads = 6, c.n_kv_heads = 3, c.head_dim = 10, c.bias = 1;
    c.rotary.layout = MH_ROTARY_INTERLEAVED, c.rotary.rotary_dim = 6, c.qk_norm = 1;
    layer_fixture f;
    if (check_status("create GQA", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK))
        decode_is_forward("GQA rotary + QK-norm", f.layer, c.d_model, r, 1e-5);
    fixture_free(&f);
    for (int router = 0; router < 2; router++) { /* MoH on the same projections */
        mh_moh_config mc = mh_moh_config_default();
        mc.router = router ? MH_MOH_ROUTER_NORM : MH_MOH_ROUTER_LEARNED, mc.shared_heads = 2, mc.top_k = 2;
        mh_layer_config m = c;
        m.variant = MH_VARIANT_MOH, m.variant_config = &mc;
        m.rotary.layout = MH_ROTARY_HALF, m.rotary.rotary_dim = 0;
        const int E = m.n_heads - mc.shared_heads;
        float *wr = random_input(r, (size_t)E * m.d_model), *wst = random_input(r, (size_t)2 * m.d_model);
        float* wsh = random_input(r, (size_t)mc.shared_heads * m.d_model);
        mh_moh_weights mw = mh_moh_weights_default();
        if (!router) mw.w_router = wr, mw.w_stage = wst, mw.w_shared = wsh;
        layer_fixture g;
        mh_layer* L = NULL;
        if (check_status("base", fixture_make(&g, ctx, &c, r, 0.5f), MH_OK)) {
            mh_layer_weights w = g.w;
            w.variant_weights = &mw;
            if (check_status("create MoH", mh_layer_create(ctx, &m, &w, &L), MH_OK))
                decode_is_forward(router ? "MoH norm router, rotary + QK-norm" : "MoH learned router, rotary + QK-norm",
                                  L, m.d_model, r, 1e-5);
        }
        mh_layer_destroy(L);
        fixture_free(&g);
        free(wr), free(wst), free(wsh);
    }
}

/* DCMHA with rotary and QK-norm: zero dynamic weights == the MHA layer with the same
 * positions; decode == forward with random dynamic weights. */
static void dcmha_cases(const mh_context* ctx, test_rng* r) {
    for (int zero = 1; zero >= 0; zero--) {
        mh_dcmha_config dc = mh_dcmha_config_default();
        mh_layer_config c = mh_layer_config_default();
        c.variant = MH_VARIANT_DCMHA, c.d_model = 32, c.n_heads = 4, c.head_dim = 8, c.bias = 1;
        c.variant_config = &dc, c.rotary.layout = MH_ROTARY_HALF, c.rotary.rotary_dim = 4, c.qk_norm = 1;
        dcmha_fixture f;
        if (!check_status("create DCMHA", dcmha_fixture_make(&f, ctx, &c, r, 0.5f, zero ? 0.0f : 0.5f, 0), MH_OK))
            continue;
        if (zero) {
            const int B = 2, N = 13;
            const size_t n = (size_t)B * N * c.d_model;
            float *x = random_input(r, n), *y = malloc(n * sizeof(float)), *y_mha = malloc(n * sizeof(float));
            forward_causal(f.layer, B, N, x, y);
            forward_causal(f.base.layer, B, N, x, y_mha);
            check_close_f32("DCMHA zero dynamic weights == MHA, rotary + QK-norm", y, y_mha, n, 32 * FLT_EPSILON);
            free(x), free(y), free(y_mha);
        } else {
            decode_is_forward("DCMHA rotary + QK-norm", f.layer, c.d_model, r, 1e-5);
        }
        dcmha_fixture_free(&f);
    }
}

/* Bitwise equal outputs with 1 and 2 threads: 600 query rows of 16 heads x 256 (the positions
 * pass splits rows over workers above 8 MFLOP), cross-attention over 3 keys to stay cheap. */
static void threads_bitwise(test_rng* r) {
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = 16, c.n_heads = 16, c.n_kv_heads = 4, c.head_dim = 256;
    c.rotary.layout = MH_ROTARY_INTERLEAVED, c.rotary.rotary_dim = 200, c.qk_norm = 1;
    const int N = 600, M = 3;
    float *x = random_input(r, (size_t)N * 16), *kv = random_input(r, (size_t)M * 16);
    float *y[2] = {malloc(sizeof(float) * N * 16), malloc(sizeof(float) * N * 16)};
    layer_fixture f;
    for (int t = 0; t < 2; t++) {
        mh_context_config cc = mh_context_config_default();
        cc.num_threads = t + 1;
        mh_context* ctx = NULL;
        mh_layer* L = NULL;
        check_status("context", mh_context_create(&cc, &ctx), MH_OK);
        if (t == 0) check_status("create", fixture_make(&f, ctx, &c, r, 0.5f), MH_OK);
        else check_status("create (2 threads)", fixture_recreate(&f, ctx, &c, &L), MH_OK);
        const mh_forward_args a = {.batch = 1, .n_q = N, .n_kv = M, .query = x, .key = kv, .value = kv, .out = y[t]};
        check_status("forward", run_forward(t ? L : f.layer, &a), MH_OK);
        mh_layer_destroy(L);
        mh_context_destroy(ctx);
    }
    check_bitwise("rotary + QK-norm: 1 and 2 threads give the same bits", y[1], y[0], (size_t)N * 16);
    fixture_free(&f);
    free(x), free(kv), free(y[0]), free(y[1]);
}

int main(void) {
    mh_isa isa;
    if (mh_isa_default(&isa) == MH_ERR_ISA_UNAVAILABLE) return 77;
    mh_context_config cc = mh_context_config_default();
    cc.num_threads = 2;
    mh_context* ctx = NULL;
    if (!check_status("context", mh_context_create(&cc, &ctx), MH_OK)) return test_exit_code("test_rotary_layers");
    test_rng r;
    rng_seed(&r, 16);
    oracle_cases(ctx, &r);
    qk_norm_scale_free(ctx, &r);
    decode_cases(ctx, &r);
    dcmha_cases(ctx, &r);
    threads_bitwise(&r);
    mh_context_destroy(ctx);
    return test_exit_code("test_rotary_layers");
}
