/*
 * An MHA layer as a CollabHead layer, exactly (docs/variants.md, "CollabHead"; the epfml
 * swap.py reparametrisation at D~ = H*D):
 *   W~_Q = W_Q, W~_K = W_K                      (the caller's arrays, reused)
 *   M[h, h*D .. h*D + D - 1] = 1, else 0         (block one-hot mixing)
 *   C[h, :] = sum_d b_Q[h*D + d] * W_K[h*D + d, :] = W_K^h^T b_Q^h   (the content bias)
 *   b_K is dropped: it adds a per-query constant to every score, which the softmax ignores.
 *   W_V, b_V, W_O, b_O unchanged.
 */
#include <limits.h>
#include <string.h>

#include "multihead.h"
#include "util/checked.h"

static mh_status check(const mh_layer_config* c, const mh_layer_weights* w) {
    const int mha = c->variant == MH_VARIANT_MHA ||
                    ((c->variant == MH_VARIANT_GQA || c->variant == MH_VARIANT_MQA) &&
                     c->n_kv_heads == c->n_heads);
    if (!mha || c->d_model <= 0 || c->n_heads <= 0 || c->head_dim <= 0 || c->kdim < 0 ||
        (c->n_kv_heads != 0 && c->n_kv_heads != c->n_heads) || (c->bias != 0 && c->bias != 1) ||
        c->variant_config || w->variant_weights) /* MHA has no variant config or weights */
        return MH_ERR_INVALID_ARGUMENT;
    if (!w->w_q || !w->w_k || !w->w_v || !w->w_o || (c->bias && (!w->b_q || !w->b_v || !w->b_o)))
        return MH_ERR_INVALID_ARGUMENT;
    const int kdim = c->kdim ? c->kdim : c->d_model;
    size_t hd, mix, content;
    if (!mh_mul_size((size_t)c->n_heads, (size_t)c->head_dim, &hd) || hd > INT_MAX ||
        !mh_mul3_size((size_t)c->n_heads, hd, sizeof(float), &mix) ||
        !mh_mul3_size((size_t)c->n_heads, (size_t)kdim, sizeof(float), &content))
        return MH_ERR_SIZE_OVERFLOW;
    return MH_OK;
}

mh_status mh_convert_mha_to_collab(const mh_layer_config* mha,
                                   const mh_layer_weights* mha_weights, float* mix, float* content,
                                   mh_layer_config* collab, mh_collab_config* collab_cfg,
                                   mh_layer_weights* collab_weights,
                                   mh_collab_weights* collab_mixing) {
    if (!mha || !mha_weights || !mix || !content || !collab || !collab_cfg || !collab_weights ||
        !collab_mixing)
        return MH_ERR_INVALID_ARGUMENT;
    const mh_status st = check(mha, mha_weights);
    if (st != MH_OK) return st;
    const mh_layer_config c = *mha;
    const mh_layer_weights w = *mha_weights; /* the outputs may alias the inputs */
    const size_t H = (size_t)c.n_heads, D = (size_t)c.head_dim, Dt = H * D;
    const size_t kdim = (size_t)(c.kdim ? c.kdim : c.d_model);

    memset(mix, 0, H * Dt * sizeof(float));
    for (size_t h = 0; h < H; h++)
        for (size_t d = 0; d < D; d++) mix[h * Dt + h * D + d] = 1.0f;
    for (size_t h = 0; h < H; h++)
        for (size_t j = 0; j < kdim; j++) {
            double acc = 0.0; /* one rounding per element */
            for (size_t d = 0; c.bias && d < D; d++)
                acc += (double)w.b_q[h * D + d] * (double)w.w_k[(h * D + d) * kdim + j];
            content[h * kdim + j] = (float)acc;
        }

    *collab = c;
    collab->variant = MH_VARIANT_COLLAB;
    collab->n_kv_heads = 0;
    *collab_cfg = mh_collab_config_default();
    collab_cfg->collab_dim = (int)Dt;
    collab->variant_config = collab_cfg;
    memset(collab_weights, 0, sizeof *collab_weights);
    collab_weights->w_q = w.w_q, collab_weights->w_k = w.w_k;
    collab_weights->w_v = w.w_v, collab_weights->w_o = w.w_o;
    collab_weights->b_v = c.bias ? w.b_v : NULL, collab_weights->b_o = c.bias ? w.b_o : NULL;
    *collab_mixing = mh_collab_weights_default();
    collab_mixing->mix = mix, collab_mixing->content = content;
    collab_weights->variant_weights = collab_mixing;
    return MH_OK;
}
