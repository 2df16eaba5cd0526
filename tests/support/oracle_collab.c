/*
 * CollabHead as a plain H-head attention with per-head queries and keys of D~ + 1 dims:
 *   query head h:  [q~_t * m_h, 1]      key head h:  [k~_s, x_s . C[h, :]]
 * so the attention oracle's scaled dot product is exactly
 *   scale * (sum_r q~_t[r] m_h[r] k~_s[r] + x_s . C[h, :]),
 * the content bias added before scaling and before the soft-cap, ALiBi and mask. With
 * ORACLE_MIX_KEY the mixing goes to the key side instead: [q~_t, 1] and [k~_s * m_h, c_s[h]].
 */
#include "oracle_collab.h"

#include <stdlib.h>
#include <string.h>

#include "oracle.h"

void oracle_collab_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                           const mh_forward_args* a, oracle_collab_mixing mixing, double* out,
                           double* probs) {
    const int B = a->batch, N = a->n_q, self = a->key == NULL, M = self ? N : a->n_kv;
    const int H = cfg->n_heads, Dt = ((const mh_collab_config*)cfg->variant_config)->collab_dim, Dv = cfg->head_dim_v, Da = Dt + 1;
    const float* xk = self ? a->query : a->key;
    const float* xv = self ? a->query : a->value;
    const int kdim = self ? cfg->d_model : cfg->kdim, vdim = self ? cfg->d_model : cfg->vdim;
    double* q = malloc(sizeof(double) * (size_t)B * N * Dt);
    double* k = malloc(sizeof(double) * (size_t)B * M * Dt);
    double* cb = malloc(sizeof(double) * (size_t)B * M * H);
    double* v = malloc(sizeof(double) * (size_t)B * M * H * Dv);
    double* o = malloc(sizeof(double) * (size_t)B * N * H * Dv);
    float* qa = malloc(sizeof(float) * (size_t)B * N * H * Da);
    float* ka = malloc(sizeof(float) * (size_t)B * M * H * Da);
    float* vf = malloc(sizeof(float) * (size_t)B * M * H * Dv);
    float* of = malloc(sizeof(float) * (size_t)B * N * H * Dv);
    oracle_linear(a->query, B * N, cfg->d_model, w->w_q, NULL, Dt, q);
    oracle_linear(xk, B * M, kdim, w->w_k, NULL, Dt, k);
    oracle_linear(xk, B * M, kdim, ((const mh_collab_weights*)w->variant_weights)->content, NULL, H, cb);
    oracle_linear(xv, B * M, vdim, w->w_v, w->b_v, H * Dv, v);
    for (size_t t = 0; t < (size_t)B * N; t++)
        for (int h = 0; h < H; h++) {
            float* dst = qa + (t * H + (size_t)h) * Da;
            for (int r = 0; r < Dt; r++)
                dst[r] = (float)(mixing == ORACLE_MIX_QUERY ? q[t * Dt + r] * ((const mh_collab_weights*)w->variant_weights)->mix[(size_t)h * Dt + r]
                                                            : q[t * Dt + r]);
            dst[Dt] = 1.0f;
        }
    for (size_t s = 0; s < (size_t)B * M; s++)
        for (int h = 0; h < H; h++) {
            float* dst = ka + (s * H + (size_t)h) * Da;
            for (int r = 0; r < Dt; r++)
                dst[r] = (float)(mixing == ORACLE_MIX_KEY ? k[s * Dt + r] * ((const mh_collab_weights*)w->variant_weights)->mix[(size_t)h * Dt + r]
                                                          : k[s * Dt + r]);
            dst[Dt] = (float)cb[s * H + h];
        }
    for (size_t i = 0; i < (size_t)B * M * H * Dv; i++) vf[i] = (float)v[i];

    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = H, p.n_kv_heads = H;
    p.head_dim_qk = Da, p.head_dim_v = Dv, p.scale = cfg->scale;
    p.q = (mh_tensor){.data = qa, .stride_batch = (ptrdiff_t)N * H * Da, .stride_token = (ptrdiff_t)H * Da, .stride_head = Da};
    p.k = (mh_tensor){.data = ka, .stride_batch = (ptrdiff_t)M * H * Da, .stride_token = (ptrdiff_t)H * Da, .stride_head = Da};
    p.v = (mh_tensor){.data = vf, .stride_batch = (ptrdiff_t)M * H * Dv, .stride_token = (ptrdiff_t)H * Dv, .stride_head = Dv};
    mh_attn_options opt = a->opt ? *a->opt : mh_attn_options_default();
    opt.window = cfg->window, opt.softcap = cfg->softcap;
    opt.alibi_slopes = cfg->alibi_slopes, opt.sinks = cfg->sinks, opt.probs = NULL;
    oracle_attention(&p, &opt, o, probs);
    for (size_t i = 0; i < (size_t)B * N * H * Dv; i++) of[i] = (float)o[i];
    oracle_linear(of, B * N, H * Dv, w->w_o, w->b_o, cfg->d_model, out);
    free(q), free(k), free(cb), free(v), free(o), free(qa), free(ka), free(vf), free(of);
}
