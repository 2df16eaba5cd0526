/*
 * Packing K/V tiles of any storage dtype into f32 panels of NR = 4 * svcntw() columns.
 * K^T: each panel row (one dimension dd, NR keys) is 4 gathers down the key rows, lanes past
 * `cols` predicated off (read nothing, packed as 0); the gather indices are 32-bit (lane j at
 * j * ldk), so a K stride too large for them takes a scalar path instead.
 * V: each packed row is 4 contiguous predicated loads, columns past dv packed as 0.
 * Register budget: the 4 index/predicate pairs and one data vector per gather.
 */
#include <stdint.h>

#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/arm/sve/simd_sve.h"
#include "kernels/scalar/convert_scalar.h"

/* Element i of a `dtype` array, widened (the scalar path). */
static float load_one(const void* p, mh_dtype dtype, ptrdiff_t i) {
    switch (dtype) {
    case MH_DTYPE_F16: return mh_f16_to_f32(((const uint16_t*)p)[i]);
    case MH_DTYPE_BF16: return mh_bf16_to_f32(((const uint16_t*)p)[i]);
    case MH_DTYPE_I8: return (float)((const int8_t*)p)[i];
    default: return ((const float*)p)[i];
    }
}

static void pack_any(size_t cols, size_t d, const void* k, ptrdiff_t ldk, mh_dtype dtype, float* dst) {
    const size_t vl = svcntw(), nr = MH_SVE_GEMM_NV * vl, n_panels = (cols + nr - 1) / nr;
    const svbool_t all = svptrue_b32();
    const ptrdiff_t max_ldk = INT32_MAX / (ptrdiff_t)(vl - 1);
    if (ldk > max_ldk || ldk < -max_ldk) { /* (vl - 1) * ldk does not fit an index: scalar */
        for (size_t p = 0; p < n_panels; p++)
            for (size_t dd = 0; dd < d; dd++)
                for (size_t j = 0; j < nr; j++) {
                    const size_t c = p * nr + j;
                    dst[(p * d + dd) * nr + j] =
                        c < cols ? load_one(k, dtype, (ptrdiff_t)c * ldk + (ptrdiff_t)dd) : 0.0f;
                }
        return;
    }
    const svint32_t idx = svindex_s32(0, (int32_t)ldk);
    for (size_t p = 0; p < n_panels; p++) {
        const size_t c0 = p * nr;
        const svbool_t m0 = mh_pred(c0, cols), m1 = mh_pred(c0 + vl, cols);
        const svbool_t m2 = mh_pred(c0 + 2 * vl, cols), m3 = mh_pred(c0 + 3 * vl, cols);
        /* first key of each vector (only formed for vectors holding a key) */
        const void* k0 = mh_dtype_at(k, dtype, (ptrdiff_t)c0 * ldk);
        const void* k1 = c0 + vl < cols ? mh_dtype_at(k, dtype, (ptrdiff_t)(c0 + vl) * ldk) : k0;
        const void* k2 = c0 + 2 * vl < cols ? mh_dtype_at(k, dtype, (ptrdiff_t)(c0 + 2 * vl) * ldk) : k0;
        const void* k3 = c0 + 3 * vl < cols ? mh_dtype_at(k, dtype, (ptrdiff_t)(c0 + 3 * vl) * ldk) : k0;
        float* out = dst + p * d * nr;
        for (size_t dd = 0; dd < d; dd++, out += nr) {
            const ptrdiff_t o = (ptrdiff_t)dd;
            svst1_vnum_f32(all, out, 0, mh_gather(m0, mh_dtype_at(k0, dtype, o), idx, dtype));
            svst1_vnum_f32(all, out, 1, mh_gather(m1, mh_dtype_at(k1, dtype, o), idx, dtype));
            svst1_vnum_f32(all, out, 2, mh_gather(m2, mh_dtype_at(k2, dtype, o), idx, dtype));
            svst1_vnum_f32(all, out, 3, mh_gather(m3, mh_dtype_at(k3, dtype, o), idx, dtype));
        }
    }
}

void MH_KNAME(pack_kt)(size_t cols, size_t d, const mh_rows* k, float* dst) {
    pack_any(cols, d, k->data, k->ld, k->dtype, dst);
    if (k->dtype == MH_DTYPE_I8) mh_i8_scale_kt(cols, d, MH_GEMM_NR, k, dst);
}
