/* The DCMHA oracle (oracle_dcmha.h). Index names follow docs/variants.md: t query token,
 * s key token, m input head, n output head, r rank, c branch, g group. */
#include "oracle_dcmha.h"

#include <math.h>
#include <stdlib.h>

#include "oracle.h"

static const mh_dcmha_config* dcfg(const mh_layer_config* c) { return c->variant_config; }
static const mh_dcmha_weights* dweights(const mh_layer_weights* w) { return w->variant_weights; }

static double gelu(double x, mh_gelu kind) {
    if (kind == MH_GELU_TANH) return 0.5 * x * (1.0 + tanh(sqrt(2.0 / acos(-1.0)) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

void oracle_dcmha_factors(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x,
                          int rows, double* w1, double* w2, double* dd) {
    const int d = cfg->d_model, G = dcfg(cfg)->groups, R = dcfg(cfg)->rank, C = dcfg(cfg)->hidden;
    const int hg = cfg->n_heads / G;
    double* hid = malloc((size_t)C * sizeof(double));
    for (int t = 0; t < rows; t++)
        for (int c = 0; c < 4; c++)
            for (int g = 0; g < G; g++) {
                for (int k = 0; k < C; k++) { /* W1 [d, G, 4, C] */
                    double acc = 0.0;
                    for (int i = 0; i < d; i++) acc += (double)x[(size_t)t * d + i] * dweights(w)->w1[(((size_t)i * G + g) * 4 + c) * C + k];
                    hid[k] = gelu(acc, dcfg(cfg)->gelu);
                }
                for (int rr = 0; rr < 2 * R; rr++) /* W2 [G, 4, C, 2R, Hg]: rows 0..R-1 are w1, R..2R-1 w2 */
                    for (int m = 0; m < hg; m++) {
                        double acc = 0.0;
                        for (int k = 0; k < C; k++)
                            acc += hid[k] * dweights(w)->w2[((((size_t)g * 4 + c) * C + k) * 2 * R + rr) * hg + m];
                        double* dst = rr < R ? w1 : w2;
                        dst[((((size_t)t * 4 + c) * G + g) * R + rr % R) * hg + m] = acc;
                    }
                for (int r = 0; r < R; r++) { /* RMS norm without scale over the heads, eps 1e-6 */
                    double* v = w1 + ((((size_t)t * 4 + c) * G + g) * R + r) * hg;
                    double ss = 0.0;
                    for (int m = 0; m < hg; m++) ss += v[m] * v[m];
                    const double inv = 1.0 / sqrt(ss / hg + 1e-6);
                    for (int m = 0; m < hg; m++) v[m] *= inv;
                }
                for (int m = 0; m < hg; m++) { /* Wd [d, G, 4, Hg] */
                    double acc = 0.0;
                    for (int i = 0; i < d; i++) acc += (double)x[(size_t)t * d + i] * dweights(w)->wd[(((size_t)i * G + g) * 4 + c) * hg + m];
                    dd[(((size_t)t * 4 + c) * G + g) * hg + m] = tanh(acc);
                }
            }
    free(hid);
}

typedef struct factors {
    int G, R, hg;
    const double *w1, *w2, *dd; /* of one sequence */
    const float* wb;            /* [G][Hg][Hg] or NULL */
} factors;

static const double* f_w(const factors* f, const double* base, int tok, int c, int g, int r) {
    return base + ((((size_t)tok * 4 + c) * f->G + g) * f->R + r) * f->hg;
}

static const double* f_dd(const factors* f, int tok, int c, int g) {
    return f->dd + (((size_t)tok * 4 + c) * f->G + g) * f->hg;
}

/* Compose(a) over group g at pair (t, s), branches cq (query side) and cq + 1 (key side). */
static void compose(const factors* f, int cq, int g, int t, int s, oracle_compose form, const double* a,
                    double* out) {
    const int hg = f->hg, R = f->R;
    const float* wb = f->wb ? f->wb + (size_t)g * hg * hg : NULL;
    const double *qdd = f_dd(f, t, cq, g), *kdd = f_dd(f, s, cq + 1, g);
    for (int n = 0; n < hg; n++) {
        double acc = 0.0;
        if (form == ORACLE_COMPOSE_DENSE) {
            for (int m = 0; m < hg; m++) {
                double W = (m == n) * (1.0 + qdd[n] + kdd[n]) + (wb ? wb[m * hg + n] : 0.0);
                for (int r = 0; r < R; r++)
                    W += f_w(f, f->w1, t, cq, g, r)[m] * f_w(f, f->w2, t, cq, g, r)[n] +
                         f_w(f, f->w1, s, cq + 1, g, r)[m] * f_w(f, f->w2, s, cq + 1, g, r)[n];
                acc += a[m] * W;
            }
        } else {
            acc = a[n] + a[n] * (qdd[n] + kdd[n]);
            for (int m = 0; wb && m < hg; m++) acc += a[m] * wb[m * hg + n];
            for (int r = 0; r < R; r++) {
                double hq = 0.0, hk = 0.0;
                for (int m = 0; m < hg; m++) {
                    hq += a[m] * f_w(f, f->w1, t, cq, g, r)[m];
                    hk += a[m] * f_w(f, f->w1, s, cq + 1, g, r)[m];
                }
                acc += hq * f_w(f, f->w2, t, cq, g, r)[n] + hk * f_w(f, f->w2, s, cq + 1, g, r)[n];
            }
        }
        out[n] = acc;
    }
}

void oracle_dcmha_rows(const mh_layer_config* cfg, const mh_layer_weights* w, const float* x, int M,
                       int causal, const int* rows, int n_rows, oracle_compose form, double* out) {
    const int d = cfg->d_model, H = cfg->n_heads, D = cfg->head_dim, Dv = cfg->head_dim_v;
    const int G = dcfg(cfg)->groups, R = dcfg(cfg)->rank, hg = H / G;
    const double scale = cfg->scale != 0.0f ? cfg->scale : 1.0 / sqrt((double)D);
    const size_t nf = (size_t)M * 4 * G * R * hg;
    double *q = malloc((size_t)H * D * sizeof(double)), *k = malloc((size_t)M * H * D * sizeof(double));
    double *v = malloc((size_t)M * H * Dv * sizeof(double)), *o = malloc((size_t)H * Dv * sizeof(double));
    double *w1 = malloc(nf * sizeof(double)), *w2 = malloc(nf * sizeof(double));
    double* dd = malloc((size_t)M * 4 * H * sizeof(double));
    double* S = malloc((size_t)H * M * sizeof(double)); /* [h][s] of one query */
    double *a = malloc((size_t)hg * sizeof(double)), *ca = malloc((size_t)hg * sizeof(double));
    oracle_linear(x, M, d, w->w_k, w->b_k, H * D, k);
    oracle_linear(x, M, d, w->w_v, w->b_v, H * Dv, v);
    oracle_dcmha_factors(cfg, w, x, M, w1, w2, dd);
    factors f = {G, R, hg, w1, w2, dd, NULL};
    for (int ri = 0; ri < n_rows; ri++) {
        const int t = rows[ri];
        oracle_linear(x + (size_t)t * d, 1, d, w->w_q, w->b_q, H * D, q);
        for (int h = 0; h < H; h++)
            for (int s = 0; s < M; s++) {
                double acc = 0.0;
                for (int e = 0; e < D; e++) acc += q[h * D + e] * k[((size_t)s * H + h) * D + e];
                S[(size_t)h * M + s] = acc * scale;
            }
        for (int pass = 0; pass < 2; pass++) { /* 0: pre-compose, mask, softmax; 1: post-compose */
            f.wb = dcfg(cfg)->static_weights ? (pass ? dweights(w)->wb_post : dweights(w)->wb_pre) : NULL;
            for (int g = 0; g < G; g++)
                for (int s = 0; s < M; s++) {
                    for (int m = 0; m < hg; m++) a[m] = S[(size_t)(g * hg + m) * M + s];
                    compose(&f, 2 * pass, g, t, s, form, a, ca);
                    for (int n = 0; n < hg; n++)
                        S[(size_t)(g * hg + n) * M + s] = pass == 0 && causal && s > t ? -INFINITY : ca[n];
                }
            for (int h = 0; pass == 0 && h < H; h++) {
                double *row = S + (size_t)h * M, mx = -INFINITY, sum = 0.0;
                for (int s = 0; s < M; s++) mx = row[s] > mx ? row[s] : mx;
                for (int s = 0; s < M; s++) sum += (row[s] = exp(row[s] - mx));
                for (int s = 0; s < M; s++) row[s] /= sum;
            }
        }
        for (int h = 0; h < H; h++)
            for (int e = 0; e < Dv; e++) {
                double acc = 0.0;
                for (int s = 0; s < M; s++) acc += S[(size_t)h * M + s] * v[((size_t)s * H + h) * Dv + e];
                o[h * Dv + e] = acc;
            }
        for (int c = 0; c < d; c++) {
            double acc = w->b_o ? w->b_o[c] : 0.0;
            for (int e = 0; e < H * Dv; e++) acc += o[e] * w->w_o[(size_t)c * H * Dv + e];
            out[(size_t)ri * d + c] = acc;
        }
    }
    free(q), free(k), free(v), free(o), free(w1), free(w2), free(dd), free(S), free(a), free(ca);
}

void oracle_dcmha_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                          const mh_forward_args* args, oracle_compose form, double* out) {
    const int N = args->n_q, d = cfg->d_model;
    int* rows = malloc((size_t)N * sizeof(int));
    for (int t = 0; t < N; t++) rows[t] = t;
    for (int b = 0; b < args->batch; b++)
        oracle_dcmha_rows(cfg, w, args->query + (size_t)b * N * d, N, args->opt && args->opt->causal, rows, N, form,
                          out + (size_t)b * N * d);
    free(rows);
}
