/*
 * MoH (docs/variants.md, "MoH"; spec 3.7) on the forced ISA:
 *  - both routers against the double oracle (dense heads times gates): every edge case of the
 *    learned router (h_s = 0, h_s = 1, K = 0 with h_s = H, K = E), the norm router on GQA
 *    bases including the MoH-LLaMA3 shape (H 32, Hkv 8, h_s 16, K 8), causal, padding,
 *    window/ALiBi/sinks and cross-attention; the routing record (heads, gates, load);
 *  - the invariants: reductions to MHA, the routed-gate formula and sums, top-K invariance,
 *    binary mode as GQA without the unselected heads, permutation of routed heads, routing
 *    per token, decode == prefill (f32, f16, bf16 caches) with the same routing;
 *  - bitwise equality for 1 and 2 threads; bad configs, weights and arguments.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "layer_fixture.h"
#include "oracle_moh.h"
#include "problem.h"

typedef struct moh_case {
    layer_fixture f;     /* the weights, and f.layer: the GQA/MHA layer on the same weights */
    float *wr, *ws, *wh; /* router weights, NULL where unused */
    mh_layer_config cfg; /* the MoH config, resolved; variant_config points at mcfg */
    mh_moh_config mcfg;
    mh_moh_weights mw;   /* the router weights wr, ws, wh */
    mh_layer_weights w;  /* scratch of moh_weights */
    mh_layer* moh;
} moh_case;

/* The MoH layer's weights: f.w (as it is now) plus the router weights mw. */
static const mh_layer_weights* moh_weights(moh_case* m) {
    m->w = m->f.w;
    m->w.variant_weights = &m->mw;
    return &m->w;
}

static const mh_moh_config* moh_of(const mh_layer_config* c) { return c->variant_config; }

typedef struct spec {
    mh_moh_router router;
    int H, Hkv, hs, K, D, d, bias;
} spec;

static float* rand_or_null(test_rng* r, int use, size_t n, float amp) {
    if (!use) return NULL;
    float* m = malloc(sizeof(float) * n);
    rng_fill(r, m, n, -amp, amp);
    return m;
}

static mh_status moh_make(moh_case* m, const mh_context* ctx, const spec* s, test_rng* r,
                          float amp, float router_amp) {
    memset(m, 0, sizeof *m);
    mh_layer_config c = mh_layer_config_default();
    c.variant = MH_VARIANT_GQA, c.d_model = s->d, c.n_heads = s->H, c.n_kv_heads = s->Hkv;
    c.head_dim = s->D, c.bias = s->bias;
    mh_status st = fixture_make(&m->f, ctx, &c, r, amp);
    if (st != MH_OK) return st;
    const int E = s->H - s->hs, learned = s->router == MH_MOH_ROUTER_LEARNED;
    m->wr = rand_or_null(r, learned && s->K > 0, (size_t)E * s->d, router_amp);
    m->ws = rand_or_null(r, learned && s->hs > 1, (size_t)s->hs * s->d, router_amp);
    m->wh = rand_or_null(r, learned && s->K > 0 && s->hs > 0, 2 * (size_t)s->d, router_amp);
    m->mw = mh_moh_weights_default();
    m->mw.w_router = m->wr, m->mw.w_shared = m->ws, m->mw.w_stage = m->wh;
    m->mcfg = mh_moh_config_default();
    m->mcfg.router = s->router, m->mcfg.shared_heads = s->hs, m->mcfg.top_k = s->K;
    m->cfg = m->f.cfg;
    m->cfg.variant = MH_VARIANT_MOH, m->cfg.variant_config = &m->mcfg;
    m->cfg.scale = 1.0f / sqrtf((float)s->D);
    return mh_layer_create(ctx, &m->cfg, moh_weights(m), &m->moh);
}

static void moh_free(moh_case* m) {
    mh_layer_destroy(m->moh);
    free(m->wr), free(m->ws), free(m->wh);
    fixture_free(&m->f);
}

/* A routing record with room for rows tokens. */
typedef struct record {
    mh_routing_record r;
    int A;
} record;

static void record_alloc(record* rec, const mh_layer_config* c, size_t rows) {
    rec->A = moh_of(c)->shared_heads + moh_of(c)->top_k;
    rec->r.heads = malloc(sizeof(int32_t) * rows * (size_t)rec->A);
    rec->r.gates = malloc(sizeof(float) * rows * (size_t)rec->A);
    rec->r.load = malloc(sizeof(int64_t) * (size_t)c->n_heads);
}

static void record_free(record* rec) { free(rec->r.heads), free(rec->r.gates), free(rec->r.load); }

/* The record equals the oracle's selection and gates, and its load counts them. */
static void check_record(const char* what, const record* rec, const mh_layer_config* c,
                         size_t rows, const double* g, const unsigned char* sel) {
    const int H = c->n_heads;
    int heads_ok = 1, load_ok = 1;
    double gate_err = 0.0;
    for (int h = 0; h < H; h++) {
        int64_t n = 0;
        for (size_t r = 0; r < rows; r++) n += sel[r * H + h];
        load_ok &= n == rec->r.load[h];
    }
    for (size_t r = 0; r < rows; r++) {
        int a = 0;
        for (int h = 0; h < H; h++) {
            if (!sel[r * H + h]) continue;
            heads_ok &= rec->r.heads[r * rec->A + a] == h;
            gate_err = fmax(gate_err, fabs(rec->r.gates[r * rec->A + a] - g[r * H + h]));
            a++;
        }
        heads_ok &= a == rec->A;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "%s: routed heads == oracle", what);
    check_true(msg, heads_ok);
    snprintf(msg, sizeof msg, "%s: load == oracle counts", what);
    check_true(msg, load_ok);
    snprintf(msg, sizeof msg, "%s: gates == oracle (max err %.2e)", what, gate_err);
    check_true(msg, gate_err <= 1e-5 * (moh_of(c)->top_k + moh_of(c)->shared_heads + 1));
}

/* Forward tolerance: the layer oracle's bound, times the largest possible gate (2 max(h_s, K)). */
static double tol(const mh_layer_config* c, int M) {
    const int gmax = 2 * (moh_of(c)->shared_heads > moh_of(c)->top_k ? moh_of(c)->shared_heads : moh_of(c)->top_k);
    return 8 * FLT_EPSILON * (c->d_model + c->n_heads * c->head_dim_v + M + 64) * (gmax > 1 ? gmax : 1);
}

typedef struct call_opts {
    int causal, padding, layer_opts, cross;
} call_opts;

static void against_oracle(const mh_context* ctx, test_rng* rng, const spec* s, call_opts o) {
    enum { B = 2, N = 9, M_CROSS = 7 };
    char what[160];
    snprintf(what, sizeof what, "%s H%d Hkv%d hs%d K%d causal%d pad%d opts%d cross%d",
             s->router == MH_MOH_ROUTER_LEARNED ? "learned" : "norm", s->H, s->Hkv, s->hs, s->K,
             o.causal, o.padding, o.layer_opts, o.cross);
    moh_case m;
    spec sp = *s;
    float slopes[64], sinks[64];
    if (o.layer_opts || o.cross) { /* config-level fields: set through a fresh create below */
        if (!check_status(what, moh_make(&m, ctx, &sp, rng, 0.5f, 1.5f), MH_OK)) return;
        mh_layer_destroy(m.moh), m.moh = NULL;
        if (o.layer_opts) {
            for (int h = 0; h < s->H; h++) slopes[h] = 0.2f / (float)(h + 1), sinks[h] = 0.3f * (float)(h % 3);
            m.cfg.window = 4, m.cfg.softcap = 6.0f, m.cfg.alibi_slopes = slopes, m.cfg.sinks = sinks;
        }
        if (o.cross) { /* new K/V weights of other input widths */
            m.cfg.kdim = 5, m.cfg.vdim = 6;
            free(m.f.wk), free(m.f.wv);
            m.f.wk = rand_or_null(rng, 1, (size_t)s->Hkv * s->D * 5, 0.5f);
            m.f.wv = rand_or_null(rng, 1, (size_t)s->Hkv * s->D * 6, 0.5f);
            m.f.w.w_k = m.f.wk, m.f.w.w_v = m.f.wv;
        }
        if (!check_status(what, mh_layer_create(ctx, &m.cfg, moh_weights(&m), &m.moh), MH_OK)) {
            moh_free(&m);
            return;
        }
    } else if (!check_status(what, moh_make(&m, ctx, &sp, rng, 0.5f, 1.5f), MH_OK)) {
        return;
    }
    const int d = s->d, M = o.cross ? M_CROSS : N;
    const size_t rows = (size_t)B * N;
    float* x = malloc(sizeof(float) * rows * d);
    float* xk = malloc(sizeof(float) * B * M * 5);
    float* xv = malloc(sizeof(float) * B * M * 6);
    float* out = malloc(sizeof(float) * rows * d);
    double* want = malloc(sizeof(double) * rows * d);
    double* g = malloc(sizeof(double) * rows * s->H);
    unsigned char* sel = malloc(rows * s->H);
    rng_fill(rng, x, rows * d, -1, 1);
    rng_fill(rng, xk, (size_t)B * M * 5, -1, 1);
    rng_fill(rng, xv, (size_t)B * M * 6, -1, 1);
    int32_t kv_len[B] = {M, M - 3};
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = o.causal;
    if (o.padding) opt.kv_len = kv_len;
    record rec;
    record_alloc(&rec, &m.cfg, rows);
    mh_forward_args a = {B, N, M, x, o.cross ? xk : NULL, o.cross ? xv : NULL, out, &opt, &rec.r};
    if (check_status(what, run_forward(m.moh, &a), MH_OK)) {
        mh_layer_config oc = m.cfg;
        oc.alibi_slopes = o.layer_opts ? slopes : NULL, oc.sinks = o.layer_opts ? sinks : NULL;
        oracle_moh_forward(&oc, moh_weights(&m), &a, want, g, sel);
        check_close(what, out, want, rows * d, tol(&m.cfg, M), 2e-6);
        check_record(what, &rec, &m.cfg, rows, g, sel);
    }
    record_free(&rec);
    free(x), free(xk), free(xv), free(out), free(want), free(g), free(sel);
    moh_free(&m);
}

static void oracle_suite(const mh_context* ctx, test_rng* rng) {
    const mh_moh_router L = MH_MOH_ROUTER_LEARNED, Nr = MH_MOH_ROUTER_NORM;
    const spec specs[] = {
        {L, 6, 6, 2, 2, 8, 24, 1},  {L, 6, 6, 0, 3, 8, 24, 0},  {L, 6, 6, 1, 2, 8, 24, 1},
        {L, 6, 6, 6, 0, 8, 24, 1},  {L, 1, 1, 1, 0, 8, 16, 0},  {L, 6, 6, 2, 4, 8, 24, 1},
        {L, 8, 2, 3, 2, 8, 24, 1},  {L, 5, 5, 0, 5, 4, 12, 0},  {Nr, 8, 2, 4, 2, 8, 24, 1},
        {Nr, 32, 8, 16, 8, 4, 32, 0}, {Nr, 6, 6, 6, 0, 8, 24, 0}, {Nr, 6, 3, 0, 4, 8, 24, 1},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        against_oracle(ctx, rng, &specs[i], (call_opts){0, 0, 0, 0});
        against_oracle(ctx, rng, &specs[i], (call_opts){1, 1, 0, 0});
    }
    against_oracle(ctx, rng, &specs[0], (call_opts){1, 0, 1, 0});
    against_oracle(ctx, rng, &specs[8], (call_opts){1, 1, 1, 0});
    against_oracle(ctx, rng, &specs[0], (call_opts){0, 1, 0, 1});
    against_oracle(ctx, rng, &specs[9], (call_opts){0, 0, 0, 1});
}

/* One self-attention forward of layer over x [B, N, d] (routing optional). */
static void forward(const mh_layer* layer, int B, int N, const float* x, float* out, int causal,
                    mh_routing_record* rec) {
    mh_attn_options opt = mh_attn_options_default();
    opt.causal = causal;
    mh_forward_args a = {B, N, N, x, NULL, NULL, out, &opt, rec};
    check_status("forward", run_forward(layer, &a), MH_OK);
}

/* 3.7.1 and 3.7.2: zero routers make every gate 1 and MoH equal MHA. */
static void reduces_to_mha(const mh_context* ctx, test_rng* rng) {
    enum { B = 2, N = 11 };
    const spec specs[] = {{MH_MOH_ROUTER_LEARNED, 6, 6, 6, 0, 8, 24, 1},
                          {MH_MOH_ROUTER_LEARNED, 6, 6, 2, 4, 8, 24, 1},
                          {MH_MOH_ROUTER_LEARNED, 6, 6, 0, 6, 8, 24, 0}};
    for (size_t i = 0; i < 3; i++) {
        moh_case m;
        if (!check_status("create", moh_make(&m, ctx, &specs[i], rng, 0.5f, 0.0f), MH_OK)) continue;
        const size_t n = (size_t)B * N * 24;
        float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *y_mha = malloc(sizeof(float) * n);
        rng_fill(rng, x, n, -1, 1);
        record rec;
        record_alloc(&rec, &m.cfg, (size_t)B * N);
        forward(m.moh, B, N, x, y, 1, &rec.r);
        forward(m.f.layer, B, N, x, y_mha, 1, NULL);
        int ones = 1;
        for (size_t j = 0; j < (size_t)B * N * rec.A; j++) ones &= rec.r.gates[j] == 1.0f;
        check_true("zero router: every gate is exactly 1", ones);
        check_close_f32("zero router: MoH == MHA", y, y_mha, n, 1e-5);
        record_free(&rec);
        free(x), free(y), free(y_mha);
        moh_free(&m);
    }
}

static double softmax_at(const double* l, int n, int i) {
    double mx = l[0], s = 0.0;
    for (int j = 1; j < n; j++) mx = fmax(mx, l[j]);
    for (int j = 0; j < n; j++) s += exp(l[j] - mx);
    return exp(l[i] - mx) / s;
}

/* 3.7.3: routed gates = K softmax(selected logits) 2 alpha2; sums 2 alpha2 K and 2 alpha1 h_s.
 * 3.7.4: the selection is unchanged by a constant added to or a positive factor on the routed
 * logits (x[:, 0] = 1 makes column 0 of W_r a per-head constant). */
static void gate_formula_and_topk(const mh_context* ctx, test_rng* rng) {
    enum { B = 1, N = 13, H = 8, HS = 3, K = 3, E = H - HS, D = 4, DM = 16 };
    const spec s = {MH_MOH_ROUTER_LEARNED, H, H, HS, K, D, DM, 0};
    moh_case m;
    if (!check_status("create", moh_make(&m, ctx, &s, rng, 0.5f, 1.0f), MH_OK)) return;
    float x[N * DM], y[N * DM];
    rng_fill(rng, x, sizeof x / sizeof x[0], -1, 1);
    for (int t = 0; t < N; t++) x[t * DM] = 1.0f;
    record rec, rec2;
    record_alloc(&rec, &m.cfg, N), record_alloc(&rec2, &m.cfg, N);
    forward(m.moh, B, N, x, y, 0, &rec.r);
    double worst = 0.0;
    for (int t = 0; t < N; t++) {
        double lr[E], lh[2], sel_l[K];
        for (int e = 0; e < E; e++) {
            lr[e] = 0.0;
            for (int j = 0; j < DM; j++) lr[e] += (double)x[t * DM + j] * m.wr[e * DM + j];
        }
        for (int e = 0; e < 2; e++) {
            lh[e] = 0.0;
            for (int j = 0; j < DM; j++) lh[e] += (double)x[t * DM + j] * m.wh[e * DM + j];
        }
        const double a1 = softmax_at(lh, 2, 0), a2 = softmax_at(lh, 2, 1);
        const float* gt = rec.r.gates + t * rec.A;
        for (int k = 0; k < K; k++) sel_l[k] = lr[rec.r.heads[t * rec.A + HS + k] - HS];
        double sum_r = 0.0, sum_s = 0.0;
        for (int k = 0; k < K; k++) {
            worst = fmax(worst, fabs(gt[HS + k] - K * softmax_at(sel_l, K, k) * 2 * a2));
            sum_r += gt[HS + k];
        }
        for (int h = 0; h < HS; h++) sum_s += gt[h];
        worst = fmax(worst, fmax(fabs(sum_r - 2 * a2 * K), fabs(sum_s - 2 * a1 * HS)));
        for (int k = 0; k < K; k++) /* the selected are the K largest logits */
            for (int e = 0; e < E; e++) {
                int chosen = 0;
                for (int kk = 0; kk < K; kk++) chosen |= rec.r.heads[t * rec.A + HS + kk] - HS == e;
                if (!chosen && lr[e] > sel_l[k]) worst = INFINITY;
            }
    }
    check_true("routed gates == K softmax(selected) 2 alpha2, sums 2 alpha K", worst < 2e-5);
    const float shifts[][2] = {{3.0f, 1.0f}, {-2.5f, 1.0f}, {0.0f, 4.0f}, {1.5f, 0.25f}};
    for (size_t i = 0; i < 4; i++) {
        moh_case m2 = m;
        float wr2[E * DM];
        for (int e = 0; e < E; e++)
            for (int j = 0; j < DM; j++) wr2[e * DM + j] = m.wr[e * DM + j] * shifts[i][1] + (j == 0 ? shifts[i][0] : 0.0f);
        m2.mw.w_router = wr2;
        mh_layer* L2;
        if (!check_status("create shifted", mh_layer_create(ctx, &m.cfg, moh_weights(&m2), &L2), MH_OK)) continue;
        forward(L2, B, N, x, y, 0, &rec2.r);
        check_true("top-K unchanged by a constant or a positive factor on the logits",
                   memcmp(rec.r.heads, rec2.r.heads, sizeof(int32_t) * N * rec.A) == 0);
        mh_layer_destroy(L2);
    }
    record_free(&rec), record_free(&rec2);
    moh_free(&m);
}

/* 3.7.6: with the routed heads' W_O blocks zeroed, the norm-router layer is the GQA layer with
 * the same W_O (routing cannot matter): binary gates are exactly masks. */
static void binary_is_masked_gqa(const mh_context* ctx, test_rng* rng) {
    enum { B = 2, N = 10 };
    const spec s = {MH_MOH_ROUTER_NORM, 8, 2, 4, 2, 8, 24, 1};
    moh_case m;
    if (!check_status("create", moh_make(&m, ctx, &s, rng, 0.5f, 0.0f), MH_OK)) return;
    mh_layer_destroy(m.moh), mh_layer_destroy(m.f.layer);
    for (int r = 0; r < 24; r++) memset(m.f.wo + r * 64 + 4 * 8, 0, sizeof(float) * 4 * 8);
    check_status("moh", mh_layer_create(ctx, &m.cfg, moh_weights(&m), &m.moh), MH_OK);
    mh_layer_config gc = m.f.cfg;
    check_status("gqa", mh_layer_create(ctx, &gc, &m.f.w, &m.f.layer), MH_OK);
    const size_t n = (size_t)B * N * 24;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *y_gqa = malloc(sizeof(float) * n);
    rng_fill(rng, x, n, -1, 1);
    forward(m.moh, B, N, x, y, 1, NULL);
    forward(m.f.layer, B, N, x, y_gqa, 1, NULL);
    check_close_f32("norm router, routed W_O zero: MoH == GQA", y, y_gqa, n, 1e-5);
    free(x), free(y), free(y_gqa);
    moh_free(&m);
}

/* 3.7.7: permuting routed heads with their router rows, Q/K/V rows and W_O columns. */
static void permutation(const mh_context* ctx, test_rng* rng) {
    enum { B = 1, N = 12, H = 6, HS = 2, K = 2, D = 4, DM = 16 };
    const spec s = {MH_MOH_ROUTER_LEARNED, H, H, HS, K, D, DM, 1};
    moh_case m;
    if (!check_status("create", moh_make(&m, ctx, &s, rng, 0.5f, 1.0f), MH_OK)) return;
    const int perm[H] = {0, 1, 4, 2, 5, 3}; /* new head h is old head perm[h] */
    float wq[H * D * DM], wk[H * D * DM], wv[H * D * DM], wo[DM * H * D], bq[H * D], bk[H * D], bv[H * D];
    float wr[(H - HS) * DM];
    for (int h = 0; h < H; h++) {
        const int o = perm[h];
        memcpy(wq + h * D * DM, m.f.wq + o * D * DM, sizeof(float) * D * DM);
        memcpy(wk + h * D * DM, m.f.wk + o * D * DM, sizeof(float) * D * DM);
        memcpy(wv + h * D * DM, m.f.wv + o * D * DM, sizeof(float) * D * DM);
        memcpy(bq + h * D, m.f.bq + o * D, sizeof(float) * D);
        memcpy(bk + h * D, m.f.bk + o * D, sizeof(float) * D);
        memcpy(bv + h * D, m.f.bv + o * D, sizeof(float) * D);
        for (int r = 0; r < DM; r++) memcpy(wo + r * H * D + h * D, m.f.wo + r * H * D + o * D, sizeof(float) * D);
        if (h >= HS) memcpy(wr + (h - HS) * DM, m.wr + (o - HS) * DM, sizeof(float) * DM);
    }
    mh_layer_weights w = *moh_weights(&m);
    mh_moh_weights pw = m.mw;
    pw.w_router = wr;
    w.w_q = wq, w.w_k = wk, w.w_v = wv, w.w_o = wo, w.b_q = bq, w.b_k = bk, w.b_v = bv, w.variant_weights = &pw;
    mh_layer* P;
    if (check_status("create permuted", mh_layer_create(ctx, &m.cfg, &w, &P), MH_OK)) {
        float x[N * DM], y[N * DM], yp[N * DM];
        rng_fill(rng, x, N * DM, -1, 1);
        forward(m.moh, B, N, x, y, 1, NULL);
        forward(P, B, N, x, yp, 1, NULL);
        check_close_f32("permuted routed heads: same output", yp, y, N * DM, 1e-5);
        mh_layer_destroy(P);
    }
    moh_free(&m);
}

/* 3.7.8: changing token t' changes no other token's routing, but does change outputs. */
static void per_token(const mh_context* ctx, test_rng* rng) {
    enum { B = 1, N = 10, DM = 24 };
    const spec specs[] = {{MH_MOH_ROUTER_LEARNED, 6, 6, 2, 2, 8, DM, 1}, {MH_MOH_ROUTER_NORM, 8, 2, 4, 2, 8, DM, 1}};
    for (int i = 0; i < 2; i++) {
        moh_case m;
        if (!check_status("create", moh_make(&m, ctx, &specs[i], rng, 0.5f, 1.5f), MH_OK)) continue;
        float x[N * DM], y[N * DM], y2[N * DM];
        rng_fill(rng, x, N * DM, -1, 1);
        record r1, r2;
        record_alloc(&r1, &m.cfg, N), record_alloc(&r2, &m.cfg, N);
        forward(m.moh, B, N, x, y, 0, &r1.r);
        for (int j = 0; j < DM; j++) x[4 * DM + j] = -x[4 * DM + j] * 2.0f;
        forward(m.moh, B, N, x, y2, 0, &r2.r);
        int same = 1;
        for (int t = 0; t < N; t++) {
            if (t == 4) continue;
            same &= memcmp(r1.r.heads + t * r1.A, r2.r.heads + t * r1.A, sizeof(int32_t) * r1.A) == 0;
            same &= memcmp(r1.r.gates + t * r1.A, r2.r.gates + t * r1.A, sizeof(float) * r1.A) == 0;
        }
        check_true("routing of other tokens unchanged (bitwise)", same);
        check_true("other tokens' outputs still change (through K/V)", memcmp(y, y2, sizeof(float) * DM) != 0);
        record_free(&r1), record_free(&r2);
        moh_free(&m);
    }
}

/* 3.7.9: decode token by token and in chunks == the causal forward, with the same routing;
 * f16/bf16 caches within their rounding of the f32 cache's result. */
static void decode_equals_prefill(const mh_context* ctx, test_rng* rng) {
    enum { B = 2, T = 17, DM = 24 };
    const spec specs[] = {{MH_MOH_ROUTER_LEARNED, 6, 6, 2, 2, 8, DM, 1},
                          {MH_MOH_ROUTER_NORM, 8, 2, 4, 2, 8, DM, 1},
                          {MH_MOH_ROUTER_LEARNED, 6, 3, 0, 3, 8, DM, 0}};
    const mh_dtype dtypes[] = {MH_DTYPE_F32, MH_DTYPE_F16, MH_DTYPE_BF16};
    const double rel[] = {0.0, 4e-3, 3e-2}; /* ~8 ulp of the storage format, relative L2 */
    for (int i = 0; i < 3; i++) {
        moh_case m;
        if (!check_status("create", moh_make(&m, ctx, &specs[i], rng, 0.5f, 1.5f), MH_OK)) continue;
        const size_t n = (size_t)B * T * DM;
        float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *y32 = malloc(sizeof(float) * n);
        float *yd = malloc(sizeof(float) * n), *xc = malloc(sizeof(float) * n), *yc = malloc(sizeof(float) * n);
        rng_fill(rng, x, n, -1, 1);
        record rf, rd;
        record_alloc(&rf, &m.cfg, (size_t)B * T), record_alloc(&rd, &m.cfg, (size_t)B * T);
        forward(m.moh, B, T, x, y, 1, &rf.r);
        for (int di = 0; di < 3; di++)
            for (int chunked = 0; chunked < 2; chunked++) {
                mh_kv_cache* cache;
                if (!check_status("cache", mh_kv_cache_create(m.moh, B, T, dtypes[di], &cache), MH_OK)) continue;
                size_t ws_bytes;
                check_status("ws", mh_layer_decode_workspace_size(m.moh, B, 5, &ws_bytes), MH_OK);
                void* ws = aligned_alloc(64, (ws_bytes + 63) / 64 * 64);
                int same_routing = 1;
                for (int t = 0; t < T;) {
                    int c = chunked ? 5 : 1;
                    if (c > T - t) c = T - t;
                    for (int b = 0; b < B; b++) memcpy(xc + (size_t)b * c * DM, x + ((size_t)b * T + t) * DM, sizeof(float) * c * DM);
                    mh_layer_decode_workspace_size(m.moh, B, c, &ws_bytes);
                    check_status("decode", mh_layer_decode(m.moh, cache, &(mh_decode_args){.batch = B, .n_new = c, .x = xc, .out = yc, .routing = &rd.r}, ws, ws_bytes), MH_OK);
                    for (int b = 0; b < B; b++) {
                        memcpy(yd + ((size_t)b * T + t) * DM, yc + (size_t)b * c * DM, sizeof(float) * c * DM);
                        for (int k = 0; k < c; k++)
                            same_routing &= memcmp(rd.r.heads + ((size_t)b * c + k) * rd.A,
                                                   rf.r.heads + ((size_t)b * T + t + k) * rf.A, sizeof(int32_t) * rd.A) == 0;
                    }
                    t += c;
                }
                check_true("decode routing == forward routing", same_routing);
                if (di == 0) {
                    check_close_f32(chunked ? "chunked decode == forward" : "decode == forward", yd, y, n, 2e-5);
                    memcpy(y32, yd, sizeof(float) * n);
                } else {
                    const err_stats e = err_f32_f32(yd, y32, n);
                    char msg[120];
                    snprintf(msg, sizeof msg, "%s cache decode ~ f32 cache (rel %.2e)", di == 1 ? "f16" : "bf16", e.rel_l2);
                    check_true(msg, e.rel_l2 <= rel[di] && e.rel_l2 > 0.0);
                }
                free(ws);
                mh_kv_cache_destroy(cache);
            }
        record_free(&rf), record_free(&rd);
        free(x), free(y), free(y32), free(yd), free(xc), free(yc);
        moh_free(&m);
    }
}

/* The same results with 1 and 2 threads, forward and decode. */
static void threads_bitwise(mh_isa isa, test_rng* rng) {
    enum { B = 2, N = 96, DM = 64 };
    const spec specs[] = {{MH_MOH_ROUTER_LEARNED, 8, 8, 2, 3, 16, DM, 1}, {MH_MOH_ROUTER_NORM, 8, 2, 4, 2, 16, DM, 1}};
    mh_context *c1, *c2;
    mh_context_config cc = {.num_threads = 1, .isa = isa};
    if (!check_status("ctx1", mh_context_create(&cc, &c1), MH_OK)) return;
    cc.num_threads = 2;
    if (!check_status("ctx2", mh_context_create(&cc, &c2), MH_OK)) {
        mh_context_destroy(c1);
        return;
    }
    for (int i = 0; i < 2; i++) {
        moh_case m;
        if (!check_status("create", moh_make(&m, c1, &specs[i], rng, 0.5f, 1.5f), MH_OK)) continue;
        mh_layer* L2;
        check_status("create 2 threads", mh_layer_create(c2, &m.cfg, moh_weights(&m), &L2), MH_OK);
        const size_t n = (size_t)B * N * DM;
        float *x = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n), *y2 = malloc(sizeof(float) * n);
        rng_fill(rng, x, n, -1, 1);
        forward(m.moh, B, N, x, y1, 1, NULL);
        forward(L2, B, N, x, y2, 1, NULL);
        check_bitwise("forward: 1 thread == 2 threads", y1, y2, n);
        mh_kv_cache *k1, *k2;
        mh_kv_cache_create(m.moh, B, N, MH_DTYPE_F32, &k1), mh_kv_cache_create(L2, B, N, MH_DTYPE_F32, &k2);
        check_status("decode 1", run_decode(m.moh, k1, B, N, x, y1), MH_OK);
        check_status("decode 2", run_decode(L2, k2, B, N, x, y2), MH_OK);
        check_bitwise("decode: 1 thread == 2 threads", y1, y2, n);
        mh_kv_cache_destroy(k1), mh_kv_cache_destroy(k2);
        free(x), free(y1), free(y2);
        mh_layer_destroy(L2);
        moh_free(&m);
    }
    mh_context_destroy(c1), mh_context_destroy(c2);
}

/* Bad configs and weights are refused at create; bad calls write nothing. */
static void bad_input(const mh_context* ctx, test_rng* rng) {
    const mh_moh_router L = MH_MOH_ROUTER_LEARNED;
    moh_case m;
    const spec s = {L, 6, 6, 2, 2, 8, 24, 0};
    if (!check_status("create", moh_make(&m, ctx, &s, rng, 0.5f, 1.0f), MH_OK)) return;
    const mh_variant V = MH_VARIANT_MOH;
    const mh_moh_config bad[] = {{V, L, -1, 2}, {V, L, 7, 0}, {V, L, 2, 5}, {V, L, 2, -1}, {V, L, 3, 0},
                                 {V, (mh_moh_router)2, 2, 2}, {MH_VARIANT_GQA, L, 2, 2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mh_layer_config c = m.cfg;
        c.variant_config = &bad[i];
        mh_layer* out = NULL;
        check_status("bad MoH config", mh_layer_create(ctx, &c, moh_weights(&m), &out), MH_ERR_INVALID_ARGUMENT);
        check_true("no layer on error", out == NULL);
    }
    mh_layer_config c = m.cfg;
    c.n_kv_heads = 4; /* 6 % 4 != 0 */
    mh_layer* out = NULL;
    check_status("bad n_kv_heads", mh_layer_create(ctx, &c, moh_weights(&m), &out), MH_ERR_INVALID_ARGUMENT);
    float extra[6 * 24] = {0};
    struct { mh_moh_config moh; int drop_r, drop_s, drop_h, add_r, add_s, add_h; } wcases[] = {
        {{V, L, 2, 2}, 1, 0, 0, 0, 0, 0}, {{V, L, 2, 2}, 0, 1, 0, 0, 0, 0}, {{V, L, 2, 2}, 0, 0, 1, 0, 0, 0},
        {{V, L, 1, 2}, 0, 0, 0, 0, 0, 0}, /* h_s = 1: W_s given but unused */
        {{V, L, 0, 2}, 0, 1, 0, 0, 0, 0}, /* h_s = 0: W_h given but unused */
        {{V, L, 6, 0}, 0, 0, 1, 0, 0, 0}, /* K = 0: W_r given but unused */
        {{V, MH_MOH_ROUTER_NORM, 2, 2}, 0, 1, 1, 0, 0, 0}, /* norm router: W_r given */
        {{V, L, 6, 0}, 1, 0, 1, 0, 1, 0}, /* K = 0, h_s = H: only W_s [H, d] -> valid */
    };
    for (size_t i = 0; i < sizeof wcases / sizeof wcases[0]; i++) {
        mh_layer_config wc = m.cfg;
        wc.variant_config = &wcases[i].moh;
        mh_layer_weights w = *moh_weights(&m);
        mh_moh_weights mw = m.mw;
        w.variant_weights = &mw;
        if (wcases[i].drop_r) mw.w_router = NULL;
        if (wcases[i].drop_s) mw.w_shared = NULL;
        if (wcases[i].drop_h) mw.w_stage = NULL;
        if (wcases[i].add_s) mw.w_shared = extra;
        mh_layer* o = NULL;
        const mh_status want = i + 1 == sizeof wcases / sizeof wcases[0] ? MH_OK : MH_ERR_INVALID_ARGUMENT;
        check_status("router weights present iff used", mh_layer_create(ctx, &wc, &w, &o), want);
        mh_layer_destroy(o);
    }
    /* per-call: masks and probabilities are unsupported; routing only for MoH */
    enum { N = 4 };
    float x[N * 24], y[N * 24], mask[6 * N * N] = {0}, probs[6 * N * N];
    rng_fill(rng, x, N * 24, -1, 1);
    memset(y, 0x7f, sizeof y);
    mh_attn_options opt = mh_attn_options_default();
    opt.mask = mask, opt.mask_stride_head = N * N, opt.mask_stride_row = N;
    mh_forward_args a = {1, N, N, x, NULL, NULL, y, &opt, NULL};
    check_status("MoH with a mask", run_forward(m.moh, &a), MH_ERR_UNSUPPORTED);
    opt = mh_attn_options_default(), opt.probs = probs;
    check_status("MoH with probs", run_forward(m.moh, &a), MH_ERR_UNSUPPORTED);
    check_true("nothing written", all_bytes(y, sizeof y, 0x7f));
    record rec;
    record_alloc(&rec, &m.cfg, N);
    a.opt = NULL, a.routing = &rec.r;
    check_status("routing on a GQA layer", run_forward(m.f.layer, &a), MH_ERR_INVALID_ARGUMENT);
    mh_kv_cache* cache;
    mh_kv_cache_create(m.f.layer, 1, 8, MH_DTYPE_F32, &cache);
    size_t bytes;
    mh_layer_decode_workspace_size(m.f.layer, 1, N, &bytes);
    void* ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    check_status("decode_routed on a GQA layer",
                 mh_layer_decode(m.f.layer, cache, &(mh_decode_args){.batch = 1, .n_new = N, .x = x, .out = y, .routing = &rec.r}, ws, bytes), MH_ERR_INVALID_ARGUMENT);
    check_true("cache untouched", mh_kv_cache_length(cache) == 0 && all_bytes(y, sizeof y, 0x7f));
    free(ws);
    mh_kv_cache_destroy(cache);
    record_free(&rec);
    moh_free(&m);
}

int main(void) {
    mh_context* ctx = test_context(2); /* exits 77 (skipped) when MH_ISA is not on this CPU */
    test_rng rng;
    rng_seed(&rng, 0x30e5);
    oracle_suite(ctx, &rng);
    reduces_to_mha(ctx, &rng);
    gate_formula_and_topk(ctx, &rng);
    binary_is_masked_gqa(ctx, &rng);
    permutation(ctx, &rng);
    per_token(ctx, &rng);
    decode_equals_prefill(ctx, &rng);
    threads_bitwise(mh_context_isa(ctx), &rng);
    bad_input(ctx, &rng);
    mh_context_destroy(ctx);
    return test_exit_code("test_moh");
}
