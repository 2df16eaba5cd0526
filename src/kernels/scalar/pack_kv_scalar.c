/* Packing K/V tiles from any storage dtype into f32 tiles. */
#include "kernels/scalar/convert_scalar.h"
#include "kernels/scalar/f32_attention_scalar.h"

/* Element `i` of a row of `dtype`, widened to f32. */
static inline float load_elem(const void* row, mh_dtype dtype, size_t i) {
    switch (dtype) {
    case MH_DTYPE_F16: return mh_f16_to_f32(((const uint16_t*)row)[i]);
    case MH_DTYPE_BF16: return mh_bf16_to_f32(((const uint16_t*)row)[i]);
    default: return ((const float*)row)[i];
    }
}

static inline const void* row_at(const void* base, mh_dtype dtype, ptrdiff_t index) {
    if (dtype == MH_DTYPE_F32) return (const float*)base + index;
    return (const uint16_t*)base + index;
}

void mh_pack_k_scalar(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype,
                      float* kt) {
    for (size_t c = 0; c < cols; c++) {
        const void* row = row_at(k, dtype, (ptrdiff_t)c * ldk);
        for (size_t dd = 0; dd < d; dd++) kt[dd * MH_SCALAR_KV_TILE + c] = load_elem(row, dtype, dd);
    }
}

void mh_pack_v_scalar(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype,
                      float* vt) {
    for (size_t c = 0; c < cols; c++) {
        const void* row = row_at(v, dtype, (ptrdiff_t)c * ldv);
        for (size_t dd = 0; dd < dv; dd++) vt[c * dv + dd] = load_elem(row, dtype, dd);
    }
}

void mh_f32_to_f16__scalar(size_t n, const float* x, uint16_t* y) {
    for (size_t i = 0; i < n; i++) y[i] = mh_f32_to_f16_rne(x[i]);
}

void mh_f32_to_bf16__scalar(size_t n, const float* x, uint16_t* y) {
    for (size_t i = 0; i < n; i++) y[i] = mh_f32_to_bf16_rne(x[i]);
}
