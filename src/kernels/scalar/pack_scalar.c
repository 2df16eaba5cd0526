/* Packing K tiles of any storage dtype into f32 GEMM panels of MH_GEMM_NR columns. */
#include <string.h>

#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/scalar/simd_scalar.h"

#define NR MH_GEMM_NR

void MH_KNAME(pack_kt)(size_t cols, size_t d, const mh_rows* k, float* dst) {
    const size_t n_panels = (cols + NR - 1) / NR;
    const mh_dtype dtype = k->dtype;
    float row[NR];
    memset(dst, 0, n_panels * d * NR * sizeof(float)); /* zero the keys past cols */
    for (size_t c = 0; c < cols; c++) {
        float* panel = dst + (c / NR) * d * NR + c % NR;
        const void* src = mh_dtype_at(k->data, dtype, (ptrdiff_t)c * k->ld);
        for (size_t d0 = 0; d0 < d; d0 += NR) { /* widen a chunk, then scatter it down the panel */
            const size_t n = d - d0 < NR ? d - d0 : NR;
            mh_load_row_f32__scalar(mh_dtype_at(src, dtype, (ptrdiff_t)d0), dtype, n, row);
            for (size_t i = 0; i < n; i++) panel[(d0 + i) * NR] = row[i];
        }
    }
    if (dtype == MH_DTYPE_I8) mh_i8_scale_kt(cols, d, NR, k, dst);
}
