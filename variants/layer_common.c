#include "layer_common.h"

mh_attn_options mh_layer_options(const mh_layer* L, const mh_attn_options* call) {
    mh_attn_options o = call ? *call : mh_attn_options_default();
    o.window = L->cfg.window, o.softcap = L->cfg.softcap;
    o.alibi_slopes = L->alibi, o.sinks = L->sinks;
    return o;
}

void mh_layer_out_projection(const mh_layer* L, size_t rows, const float* o, float* out) {
    const size_t hdv = (size_t)L->cfg.n_heads * (size_t)L->cfg.head_dim_v;
    mh_gemm_packed(L->kernels, L->threads, rows, o, hdv, &L->wo, out, (size_t)L->cfg.d_model);
}
