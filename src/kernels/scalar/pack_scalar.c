/* Packing K/V tiles of any storage dtype into f32 GEMM panels of MH_SCALAR_GEMM_NR columns. */
#include <string.h>

#include "kernels/scalar/kernels_scalar.h"

#define NR MH_SCALAR_GEMM_NR

void mh_pack_kt_8__scalar(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype,
                           float* dst) {
    const size_t n_panels = (cols + NR - 1) / NR;
    float row[NR];
    memset(dst, 0, n_panels * d * NR * sizeof(float)); /* zero the keys past cols */
    for (size_t c = 0; c < cols; c++) {
        float* panel = dst + (c / NR) * d * NR + c % NR;
        const void* src = mh_dtype_at(k, dtype, (ptrdiff_t)c * ldk);
        for (size_t d0 = 0; d0 < d; d0 += NR) { /* widen a chunk, then scatter it down the panel */
            const size_t n = d - d0 < NR ? d - d0 : NR;
            mh_load_row_f32__scalar(mh_dtype_at(src, dtype, (ptrdiff_t)d0), dtype, n, row);
            for (size_t i = 0; i < n; i++) panel[(d0 + i) * NR] = row[i];
        }
    }
}

void mh_pack_v_8__scalar(size_t cols, size_t dv, const void* v, ptrdiff_t ldv, mh_dtype dtype,
                          float* dst) {
    const size_t n_panels = (dv + NR - 1) / NR;
    for (size_t c = 0; c < cols; c++) {
        const void* src = mh_dtype_at(v, dtype, (ptrdiff_t)c * ldv);
        for (size_t p = 0; p < n_panels; p++) {
            float* out = dst + (p * cols + c) * NR;
            const size_t n = dv - p * NR < NR ? dv - p * NR : NR;
            mh_load_row_f32__scalar(mh_dtype_at(src, dtype, (ptrdiff_t)(p * NR)), dtype, n, out);
            for (size_t j = n; j < NR; j++) out[j] = 0.0f;
        }
    }
}
