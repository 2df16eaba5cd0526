/* MHA -> GQA/MQA weights by mean-pooling each group's K/V projection heads (Ainslie et al.
 * 2023, docs/variants.md "MHA to GQA by mean-pooling"). */
#include <stddef.h>

#include "util/checked.h"
#include "variant.h"

/* dst rows [j*dim, (j+1)*dim) = the mean of src rows [h*dim, (h+1)*dim) over the g heads
 * h = j*g .. j*g + g - 1, summed in double in head order.
 *   src [kv*g*dim, cols]   dst [kv*dim, cols] */
static void pool_rows(const float* src, int kv, int g, int dim, size_t cols, float* dst) {
    for (size_t j = 0; j < (size_t)kv; j++)
        for (size_t r = 0; r < (size_t)dim; r++)
            for (size_t c = 0; c < cols; c++) {
                double acc = 0.0;
                for (size_t h = j * (size_t)g; h < (j + 1) * (size_t)g; h++)
                    acc += src[(h * (size_t)dim + r) * cols + c];
                dst[(j * (size_t)dim + r) * cols + c] = (float)(acc / g);
            }
}

mh_status mh_convert_mha_to_gqa(const mh_layer_config* src, const mh_layer_weights* w,
                                int n_kv_heads, float* w_k, float* w_v, float* b_k, float* b_v) {
    if (!src || !w || !w->w_k || !w->w_v || !w_k || !w_v) return MH_ERR_INVALID_ARGUMENT;
    if (src->variant != MH_VARIANT_MHA && src->variant != MH_VARIANT_GQA &&
        src->variant != MH_VARIANT_MQA)
        return MH_ERR_INVALID_ARGUMENT;
    if (src->d_model <= 0 || src->n_heads <= 0 || src->head_dim <= 0 || src->n_kv_heads < 0 ||
        src->head_dim_v < 0 || src->kdim < 0 || src->vdim < 0 || (src->bias != 0 && src->bias != 1))
        return MH_ERR_INVALID_ARGUMENT;
    mh_layer_config c = *src; /* the library's own defaults (n_kv_heads, head_dim_v, kdim, vdim) */
    if (mh_variant_resolve(mh_variant_lookup(c.variant), &c, w, NULL) != MH_OK)
        return MH_ERR_INVALID_ARGUMENT;
    if (n_kv_heads <= 0 || c.n_kv_heads % n_kv_heads != 0) return MH_ERR_INVALID_ARGUMENT;
    if (c.bias ? !(w->b_k && w->b_v && b_k && b_v) : (w->b_k || w->b_v))
        return MH_ERR_INVALID_ARGUMENT;
    size_t nk, nv;
    if (!mh_mul3_size((size_t)c.n_kv_heads, (size_t)c.head_dim, (size_t)c.kdim, &nk) ||
        !mh_mul3_size((size_t)c.n_kv_heads, (size_t)c.head_dim_v, (size_t)c.vdim, &nv) ||
        nk > PTRDIFF_MAX / sizeof(float) || nv > PTRDIFF_MAX / sizeof(float))
        return MH_ERR_SIZE_OVERFLOW;
    const int g = c.n_kv_heads / n_kv_heads;
    pool_rows(w->w_k, n_kv_heads, g, c.head_dim, (size_t)c.kdim, w_k);
    pool_rows(w->w_v, n_kv_heads, g, c.head_dim_v, (size_t)c.vdim, w_v);
    if (c.bias) {
        pool_rows(w->b_k, n_kv_heads, g, c.head_dim, 1, b_k);
        pool_rows(w->b_v, n_kv_heads, g, c.head_dim_v, 1, b_v);
    }
    return MH_OK;
}
