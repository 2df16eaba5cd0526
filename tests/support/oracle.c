#include "oracle.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double half_to_double(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 0) v = ldexp(man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexp(man + 1024, exp - 25);
    return sign ? -v : v;
}

static double bf16_to_double(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

double oracle_load(const void* base, mh_dtype dtype, ptrdiff_t index) {
    switch (dtype) {
    case MH_DTYPE_F16: return half_to_double(((const uint16_t*)base)[index]);
    case MH_DTYPE_BF16: return bf16_to_double(((const uint16_t*)base)[index]);
    case MH_DTYPE_I8: return ((const int8_t*)base)[index];
    default: return ((const float*)base)[index];
    }
}

double oracle_kv(const mh_tensor* t, mh_dtype dtype, int b, int j, int h, int d) {
    const double x = oracle_load(t->data, dtype, b * t->stride_batch + j * t->stride_token + h * t->stride_head + d);
    if (dtype != MH_DTYPE_I8) return x;
    return (double)t->scale[b * t->scale_stride_batch + j * t->scale_stride_token + h * t->scale_stride_head] * x;
}

float oracle_round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

void oracle_round_bf16_all(float* x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = oracle_round_bf16(x[i]);
}

/* An operand of the products: as stored, or, in bf16 compute, its f32 value rounded to bf16. */
static double operand(double x, int bf16) { return bf16 ? oracle_round_bf16((float)x) : x; }

/* bf16 compute rounds P as the online softmax holds it: key j's exp(s_j - m_t), relative to
 * the running max m_t over the kept scores of the key tiles up to its own (tiles of
 * oracle_bf16_key_tile keys from key 0: the call's key tile, oracle.h; no split-KV), rounded
 * to f32 then bf16; the sums l stay unrounded. w[j]: that rounded value rescaled to the final
 * max m. */
int oracle_bf16_key_tile = 64;

static void rounded_weights(const double* s, int M, double m, double* w) {
    double run = -INFINITY;
    for (int j0 = 0; j0 < M; j0 += oracle_bf16_key_tile) {
        const int j1 = j0 + oracle_bf16_key_tile < M ? j0 + oracle_bf16_key_tile : M;
        for (int j = j0; j < j1; j++) run = s[j] > run ? s[j] : run;
        for (int j = j0; j < j1; j++) /* exp(s_j - m) with exp(s_j - run) rounded */
            w[j] = s[j] == -INFINITY ? 0.0 : oracle_round_bf16((float)exp(s[j] - run)) * exp(run - m);
    }
}

static int key_kept(const mh_attn_options* opt, int64_t p, int64_t j, int64_t kv_len) {
    if (j >= kv_len) return 0;
    if (opt->causal && j > p) return 0;
    if (opt->window > 0) {
        if (p - j >= opt->window) return 0;
        if (!opt->causal && j - p >= opt->window) return 0;
    }
    return 1;
}

void oracle_attention(const mh_attn_problem* p, const mh_attn_options* opt_in, double* o,
                      double* probs) {
    mh_attn_options opt = opt_in ? *opt_in : mh_attn_options_default();
    const int B = p->batch, N = p->n_q, M = p->n_kv, H = p->n_heads, Hkv = p->n_kv_heads;
    const int Dqk = p->head_dim_qk, Dv = p->head_dim_v, g = H / Hkv;
    /* bf16 compute rounds the pre-scaled query fl32(q * scale) with the f32 scale, so the
     * score is the dot itself; f32 compute scales the exact dot */
    const int bf16 = opt.compute == MH_COMPUTE_BF16;
    const float fscale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)Dqk);
    const double scale = bf16 ? 1.0 : p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)Dqk);
    double* s = malloc(sizeof(double) * (size_t)M);
    double* w = malloc(sizeof(double) * (size_t)M); /* bf16: the rounded weights */
    const float* q = p->q.data;
    for (int b = 0; b < B; b++) {
        int64_t kv_len = opt.kv_len ? opt.kv_len[b] : M;
        int64_t q0 = opt.q_offset == MH_Q_OFFSET_END ? kv_len - N : opt.q_offset;
        for (int h = 0; h < H; h++) {
            int kh = h / g;
            for (int i = 0; i < N; i++) {
                int64_t pos = q0 + i;
                double mx = -INFINITY;
                for (int j = 0; j < M; j++) {
                    if (!key_kept(&opt, pos, j, kv_len)) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    double dot = 0;
                    for (int d = 0; d < Dqk; d++) {
                        const float qf = q[b * p->q.stride_batch + i * p->q.stride_token +
                                           h * p->q.stride_head + d];
                        double qv = bf16 ? oracle_round_bf16(qf * fscale) : qf;
                        double kv = operand(oracle_kv(&p->k, p->k_dtype, b, j, kh, d), bf16);
                        dot += qv * kv;
                    }
                    double x = dot * scale;
                    if (opt.softcap > 0) x = opt.softcap * tanh(x / opt.softcap);
                    if (opt.alibi_slopes) x += (double)opt.alibi_slopes[h] * (double)(j - pos);
                    if (opt.mask)
                        x += opt.mask[b * opt.mask_stride_batch + h * opt.mask_stride_head +
                                      i * opt.mask_stride_row + j];
                    s[j] = x;
                    if (x > mx) mx = x;
                }
                double sink = opt.sinks ? opt.sinks[h] : -INFINITY;
                double* orow = o + (((size_t)b * N + i) * H + h) * Dv;
                double* prow = probs ? probs + (((size_t)b * H + h) * N + i) * M : NULL;
                if (mx == -INFINITY) { /* no kept key: zeros by definition */
                    for (int d = 0; d < Dv; d++) orow[d] = 0;
                    for (int j = 0; prow && j < M; j++) prow[j] = 0;
                    continue;
                }
                double m = sink > mx ? sink : mx;
                double l = opt.sinks ? exp(sink - m) : 0.0;
                if (bf16) rounded_weights(s, M, m, w);
                for (int j = 0; j < M; j++) {
                    s[j] = s[j] == -INFINITY ? 0.0 : exp(s[j] - m);
                    l += s[j];
                }
                for (int d = 0; d < Dv; d++) orow[d] = 0;
                for (int j = 0; j < M; j++) {
                    double pj = s[j] / l;
                    if (prow) prow[j] = pj;
                    if (pj == 0.0) continue;
                    pj = bf16 ? w[j] / l : pj;
                    for (int d = 0; d < Dv; d++)
                        orow[d] += pj * operand(oracle_kv(&p->v, p->v_dtype, b, j, kh, d), bf16);
                }
            }
        }
    }
    free(s);
    free(w);
}

void oracle_linear(const float* x, int rows, int in, const float* w, const float* b, int out,
                   double* y) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < out; c++) {
            double acc = b ? b[c] : 0.0;
            for (int k = 0; k < in; k++) acc += (double)x[(size_t)r * in + k] * w[(size_t)c * in + k];
            y[(size_t)r * out + c] = acc;
        }
}

/* Rounds a double buffer to float so it can feed the f32-typed attention oracle. The oracle's
 * inner math stays in double; only the projected Q/K/V are stored as f32 in between, which is
 * an error of one f32 rounding per element, far below the tolerances used. */
static float* to_f32(const double* x, size_t n) {
    float* y = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    return y;
}

void oracle_layer_heads(const mh_layer_config* cfg, const mh_layer_weights* w,
                        const mh_forward_args* a, double* o) {
    const int B = a->batch, N = a->n_q;
    const int self = a->key == NULL;
    const int M = self ? N : a->n_kv;
    const int H = cfg->n_heads, Hkv = cfg->n_kv_heads, D = cfg->head_dim, Dv = cfg->head_dim_v;
    const float* xk = self ? a->query : a->key;
    const float* xv = self ? a->query : a->value;
    const int kdim = self ? cfg->d_model : cfg->kdim, vdim = self ? cfg->d_model : cfg->vdim;
    size_t nq = (size_t)B * N * H * D, nk = (size_t)B * M * Hkv * D, nv = (size_t)B * M * Hkv * Dv;
    double* q = malloc(sizeof(double) * nq);
    double* k = malloc(sizeof(double) * nk);
    double* v = malloc(sizeof(double) * nv);
    oracle_linear(a->query, B * N, cfg->d_model, w->w_q, w->b_q, H * D, q);
    oracle_linear(xk, B * M, kdim, w->w_k, w->b_k, Hkv * D, k);
    oracle_linear(xv, B * M, vdim, w->w_v, w->b_v, Hkv * Dv, v);
    float *qf = to_f32(q, nq), *kf = to_f32(k, nk), *vf = to_f32(v, nv);

    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = H, p.n_kv_heads = Hkv;
    p.head_dim_qk = D, p.head_dim_v = Dv, p.scale = cfg->scale;
    p.q = (mh_tensor){.data = qf, .stride_batch = (ptrdiff_t)N * H * D, .stride_token = (ptrdiff_t)H * D, .stride_head = D};
    p.k = (mh_tensor){.data = kf, .stride_batch = (ptrdiff_t)M * Hkv * D, .stride_token = (ptrdiff_t)Hkv * D, .stride_head = D};
    p.v = (mh_tensor){.data = vf, .stride_batch = (ptrdiff_t)M * Hkv * Dv, .stride_token = (ptrdiff_t)Hkv * Dv, .stride_head = Dv};
    mh_attn_options opt = a->opt ? *a->opt : mh_attn_options_default();
    opt.window = cfg->window, opt.softcap = cfg->softcap;
    opt.alibi_slopes = cfg->alibi_slopes, opt.sinks = cfg->sinks, opt.probs = NULL;
    oracle_attention(&p, &opt, o, NULL);
    free(q), free(k), free(v), free(qf), free(kf), free(vf);
}

void oracle_layer_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                          const mh_forward_args* a, double* out) {
    const size_t rows = (size_t)a->batch * (size_t)a->n_q;
    const size_t hdv = (size_t)cfg->n_heads * (size_t)cfg->head_dim_v;
    double* o = malloc(sizeof(double) * rows * hdv);
    oracle_layer_heads(cfg, w, a, o);
    float* of = to_f32(o, rows * hdv);
    oracle_linear(of, (int)rows, (int)hdv, w->w_o, w->b_o, cfg->d_model, out);
    free(o), free(of);
}
