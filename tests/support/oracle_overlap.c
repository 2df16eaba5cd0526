#include "oracle_overlap.h"

#include <stdlib.h>
#include <string.h>

#include "oracle.h"

/* Windows of every head, materialised: dst [rows, H, D + 2o] (f32, see oracle.c's to_f32 on
 * the one rounding) from projected rows src [rows, H*D] in double. */
static float* windows(const double* src, size_t rows, int H, int D, int o) {
    const int dw = D + 2 * o, width = H * D;
    float* dst = malloc(sizeof(float) * rows * (size_t)H * (size_t)dw);
    for (size_t r = 0; r < rows; r++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < dw; d++) {
                const int col = h * D - o + d; /* column of the unpadded row */
                dst[(r * (size_t)H + (size_t)h) * (size_t)dw + (size_t)d] =
                    col < 0 || col >= width ? 0.0f : (float)src[r * (size_t)width + (size_t)col];
            }
    return dst;
}

void oracle_overlap_forward(const mh_layer_config* cfg, const mh_layer_weights* w,
                            const mh_forward_args* a, double* out) {
    const int B = a->batch, N = a->n_q, self = a->key == NULL, M = self ? N : a->n_kv;
    const int H = cfg->n_heads, D = cfg->head_dim, o = ((const mh_overlap_config*)cfg->variant_config)->overlap, dw = D + 2 * o;
    const int kdim = self ? cfg->d_model : cfg->kdim, vdim = self ? cfg->d_model : cfg->vdim;
    const size_t rq = (size_t)B * (size_t)N, rkv = (size_t)B * (size_t)M;
    double* q = malloc(sizeof(double) * rq * (size_t)(H * D));
    double* k = malloc(sizeof(double) * rkv * (size_t)(H * D));
    double* v = malloc(sizeof(double) * rkv * (size_t)(H * D));
    oracle_linear(a->query, (int)rq, cfg->d_model, w->w_q, w->b_q, H * D, q);
    oracle_linear(self ? a->query : a->key, (int)rkv, kdim, w->w_k, w->b_k, H * D, k);
    oracle_linear(self ? a->query : a->value, (int)rkv, vdim, w->w_v, w->b_v, H * D, v);
    float *qw = windows(q, rq, H, D, o), *kw = windows(k, rkv, H, D, o), *vw = windows(v, rkv, H, D, o);

    mh_attn_problem p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.n_q = N, p.n_kv = M, p.n_heads = p.n_kv_heads = H;
    p.head_dim_qk = p.head_dim_v = dw, p.scale = cfg->scale;
    p.q = (mh_tensor){.data = qw, .stride_batch = (ptrdiff_t)N * H * dw, .stride_token = (ptrdiff_t)H * dw, .stride_head = dw};
    p.k = (mh_tensor){.data = kw, .stride_batch = (ptrdiff_t)M * H * dw, .stride_token = (ptrdiff_t)H * dw, .stride_head = dw};
    p.v = (mh_tensor){.data = vw, .stride_batch = (ptrdiff_t)M * H * dw, .stride_token = (ptrdiff_t)H * dw, .stride_head = dw};
    mh_attn_options opt = a->opt ? *a->opt : mh_attn_options_default();
    opt.window = cfg->window, opt.softcap = cfg->softcap;
    opt.alibi_slopes = cfg->alibi_slopes, opt.sinks = cfg->sinks, opt.probs = NULL;
    double* heads = malloc(sizeof(double) * rq * (size_t)(H * dw));
    oracle_attention(&p, &opt, heads, NULL);
    float* hf = malloc(sizeof(float) * rq * (size_t)(H * dw));
    for (size_t i = 0; i < rq * (size_t)(H * dw); i++) hf[i] = (float)heads[i];
    oracle_linear(hf, (int)rq, H * dw, w->w_o, w->b_o, cfg->d_model, out);
    free(q), free(k), free(v), free(qw), free(kw), free(vw), free(heads), free(hf);
}
