/* Helpers shared by the variant modules (declared in variant.h). */
#include "variant.h"

void mh_variant_free_projections(mh_layer* L) {
    mh_packed_matrix_free(&L->wq);
    mh_packed_matrix_free(&L->wk);
    mh_packed_matrix_free(&L->wv);
    mh_packed_matrix_free(&L->wo);
}

mh_attn_options mh_variant_options(const mh_layer* L, const mh_attn_options* call) {
    mh_attn_options o = call ? *call : mh_attn_options_default();
    o.window = L->cfg.window, o.softcap = L->cfg.softcap;
    o.alibi_slopes = L->alibi, o.sinks = L->sinks;
    return o;
}

void mh_variant_out_projection(const mh_layer* L, size_t rows, const float* o, float* out) {
    mh_gemm_packed(L->kernels, L->threads, rows, o, (size_t)L->wo.k_in, &L->wo, out,
                   (size_t)L->cfg.d_model);
}
