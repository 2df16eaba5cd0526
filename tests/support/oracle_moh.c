#include "oracle_moh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "oracle.h"

static const mh_moh_config* mcfg(const mh_layer_config* c) { return c->variant_config; }

/* out = scale * softmax(l[0..n)) */
static void softmax_scaled(const double* l, int n, double scale, double* out) {
    double mx = l[0], sum = 0.0;
    for (int i = 1; i < n; i++) mx = fmax(mx, l[i]);
    for (int i = 0; i < n; i++) sum += out[i] = exp(l[i] - mx);
    for (int i = 0; i < n; i++) out[i] = out[i] / sum * scale;
}

/* sel[i] = 1 for the k largest v[i]; a stable descending sort's first k (ties: lower index). */
static void top_k(const double* v, int n, int k, unsigned char* sel) {
    if (n <= 0) return;
    memset(sel, 0, (size_t)n);
    for (int pick = 0; pick < k; pick++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!sel[i] && (best < 0 || v[i] > v[best])) best = i;
        sel[best] = 1;
    }
}

static void gates_learned(const mh_layer_config* c, const mh_layer_weights* w, const float* x,
                          double* g, unsigned char* sel) {
    const int H = c->n_heads, hs = mcfg(c)->shared_heads, K = mcfg(c)->top_k, E = H - hs, d = c->d_model;
    double* l = malloc(sizeof(double) * (size_t)(H + 2));
    double* p = malloc(sizeof(double) * (size_t)(H + 2));
    memset(sel, 1, (size_t)H);
    if (K == 0) { /* every head shared: softmax(x W_s) * h_s (1 for a single head) */
        if (hs > 1) {
            oracle_linear(x, 1, d, ((const mh_moh_weights*)w->variant_weights)->w_shared, NULL, hs, l);
            softmax_scaled(l, hs, hs, g);
        } else {
            g[0] = 1.0;
        }
        free(l), free(p);
        return;
    }
    oracle_linear(x, 1, d, ((const mh_moh_weights*)w->variant_weights)->w_router, NULL, E, l);
    softmax_scaled(l, E, 1.0, p); /* probabilities over all E routed heads */
    top_k(p, E, K, sel + hs);
    double kept = 0.0;
    for (int i = 0; i < E; i++) kept += sel[hs + i] ? p[i] : 0.0;
    for (int i = 0; i < E; i++) g[hs + i] = sel[hs + i] ? p[i] / kept * K : 0.0;
    if (hs > 0) {
        double a[2];
        oracle_linear(x, 1, d, ((const mh_moh_weights*)w->variant_weights)->w_stage, NULL, 2, l);
        softmax_scaled(l, 2, 2.0, a);
        if (hs > 1) {
            oracle_linear(x, 1, d, ((const mh_moh_weights*)w->variant_weights)->w_shared, NULL, hs, l);
            softmax_scaled(l, hs, hs, g);
        } else {
            g[0] = 1.0;
        }
        for (int h = 0; h < hs; h++) g[h] *= a[0];
        for (int i = 0; i < E; i++) g[hs + i] *= a[1];
    }
    free(l), free(p);
}

static void gates_norm(const mh_layer_config* c, const mh_layer_weights* w, const float* x,
                       double* g, unsigned char* sel) {
    const int H = c->n_heads, hs = mcfg(c)->shared_heads, E = H - hs, D = c->head_dim;
    double* q = malloc(sizeof(double) * (size_t)H * D);
    double* nrm = malloc(sizeof(double) * (size_t)(E ? E : 1));
    oracle_linear(x, 1, c->d_model, w->w_q, w->b_q, H * D, q);
    for (int i = 0; i < E; i++) {
        double s = 0.0;
        for (int j = 0; j < D; j++) s += q[(size_t)(hs + i) * D + j] * q[(size_t)(hs + i) * D + j];
        nrm[i] = sqrt(s);
    }
    memset(sel, 1, (size_t)hs);
    top_k(nrm, E, mcfg(c)->top_k, sel + hs);
    for (int h = 0; h < H; h++) g[h] = sel[h] ? 1.0 : 0.0;
    free(q), free(nrm);
}

void oracle_moh_gates(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x,
                      int rows, double* g, unsigned char* sel) {
    const size_t H = (size_t)cfg->n_heads, d = (size_t)cfg->d_model;
    for (int r = 0; r < rows; r++) {
        if (mcfg(cfg)->router == MH_MOH_ROUTER_LEARNED) gates_learned(cfg, w, x + r * d, g + r * H, sel + r * H);
        else gates_norm(cfg, w, x + r * d, g + r * H, sel + r * H);
    }
}

void oracle_moh_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                        const mh_forward_args* a, double* out, double* g_out,
                        unsigned char* sel_out) {
    const int B = a->batch, N = a->n_q, rows = B * N, d = cfg->d_model;
    const int H = cfg->n_heads, Dv = cfg->head_dim_v;
    double* g = malloc(sizeof(double) * (size_t)rows * H);
    unsigned char* sel = malloc((size_t)rows * H);
    oracle_moh_gates(cfg, w, a->query, rows, g, sel);
    const size_t hdv = (size_t)H * Dv;
    double* o = malloc(sizeof(double) * (size_t)rows * hdv);
    oracle_layer_heads(cfg, w, a, o); /* every head, densely */
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < d; j++) {
            double s = w->b_o ? w->b_o[j] : 0.0;
            for (int h = 0; h < H; h++) {
                const double gh = g[(size_t)r * H + h];
                if (gh == 0.0) continue;
                for (int e = 0; e < Dv; e++)
                    s += gh * o[(size_t)r * hdv + (size_t)h * Dv + e] * w->w_o[(size_t)j * hdv + (size_t)h * Dv + e];
            }
            out[(size_t)r * d + j] = s;
        }
    if (g_out) memcpy(g_out, g, sizeof(double) * (size_t)rows * H);
    if (sel_out) memcpy(sel_out, sel, (size_t)rows * H);
    free(g), free(sel), free(o);
}

void oracle_moh_rows(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x,
                     const float* xkv, int m, int causal, const int* rows, int n_rows,
                     int n, double* out) {
    const int H = cfg->n_heads, Hkv = cfg->n_kv_heads, D = cfg->head_dim, Dv = cfg->head_dim_v;
    const int d = cfg->d_model, group = H / Hkv;
    const double scale = cfg->scale != 0.0f ? cfg->scale : 1.0 / sqrt((double)D);
    double* k = malloc(sizeof(double) * (size_t)m * Hkv * D);
    double* v = malloc(sizeof(double) * (size_t)m * Hkv * Dv);
    double* q = malloc(sizeof(double) * (size_t)H * D);
    double* o = malloc(sizeof(double) * (size_t)H * Dv);
    double* s = malloc(sizeof(double) * (size_t)m);
    double* g = malloc(sizeof(double) * (size_t)H);
    unsigned char* sel = malloc((size_t)H);
    oracle_linear(xkv, m, cfg->kdim, w->w_k, w->b_k, Hkv * D, k);
    oracle_linear(xkv, m, cfg->vdim, w->w_v, w->b_v, Hkv * Dv, v);
    for (int ri = 0; ri < n_rows; ri++) {
        const int i = rows[ri], keys = causal ? m - n + i + 1 : m;
        const float* xi = x + (size_t)i * d;
        oracle_moh_gates(cfg, w, xi, 1, g, sel);
        oracle_linear(xi, 1, d, w->w_q, w->b_q, H * D, q);
        for (int h = 0; h < H; h++) { /* softmax(q_h K^T * scale) V, over the kept keys */
            const double* kh = k + (size_t)(h / group) * D;
            const double* vh = v + (size_t)(h / group) * Dv;
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j < keys; j++) {
                double dot = 0.0;
                for (int e = 0; e < D; e++) dot += q[(size_t)h * D + e] * kh[(size_t)j * Hkv * D + e];
                s[j] = dot * scale;
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j < keys; j++) sum += s[j] = exp(s[j] - mx);
            for (int e = 0; e < Dv; e++) {
                double acc = 0.0;
                for (int j = 0; j < keys; j++) acc += s[j] * vh[(size_t)j * Hkv * Dv + e];
                o[(size_t)h * Dv + e] = acc / sum;
            }
        }
        for (int j = 0; j < d; j++) {
            double acc = w->b_o ? w->b_o[j] : 0.0;
            for (int h = 0; h < H; h++)
                for (int e = 0; e < Dv; e++)
                    acc += g[h] * o[(size_t)h * Dv + e] * w->w_o[(size_t)j * H * Dv + (size_t)h * Dv + e];
            out[(size_t)ri * d + j] = acc;
        }
    }
    free(k), free(v), free(q), free(o), free(s), free(g), free(sel);
}
