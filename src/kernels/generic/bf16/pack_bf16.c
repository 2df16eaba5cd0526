/*
 * Packing K/V tiles of any storage dtype into the bf16 compute mode's panels (contract in
 * kernels.h, "bf16 compute"), written once for the ISAs with bf16 kernels. Each row is turned
 * into bf16 a chunk at a time (bf16 storage copied as it is; the others widened through the
 * ISA's vocabulary, int8 times the row's scale, then rounded to nearest even by the ISA's
 * f32_to_bf16), and scattered into the k-pair layout [pairs][NR][2].
 */
#include <string.h>

#include "kernels/generic/simd.h"

/* Elements per chunk: a multiple of every MH_VL of an ISA with bf16 kernels, and even. */
#define CHUNK 64

/* Elements [d0, d0 + n) (n <= CHUNK) of row c of x as bf16 into out. */
MH_INLINE void row_bf16(const mh_dtype dtype, const mh_rows* x, size_t c, size_t d0, size_t n, uint16_t* out) {
    const void* src = mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld + (ptrdiff_t)d0);
    if (dtype == MH_DTYPE_BF16) {
        memcpy(out, src, n * sizeof(uint16_t));
        return;
    }
    const mh_vf sc = mh_vset1(dtype == MH_DTYPE_I8 ? x->scale[(ptrdiff_t)c * x->ld_scale] : 1.0f);
    float f[CHUNK];
    for (size_t j = 0; j < n; j += MH_VL) {
        const void* p = mh_dtype_at(src, dtype, (ptrdiff_t)j);
        mh_vf v = j + MH_VL <= n ? mh_vload_dt(p, dtype) : mh_vload_dt_n(p, dtype, n - j);
        if (dtype == MH_DTYPE_I8) v = mh_vmul(v, sc);
        mh_vstore(f + j, v);
    }
    MH_KNAME(f32_to_bf16)(n, f, out);
}

/* dst[pair][j][2] of a panel whose pairs run over d: key j of the panel, element dd. */
MH_INLINE void pack_kt_bf16(const mh_dtype dtype, size_t cols, size_t d, const mh_rows* kr, uint16_t* dst) {
    const size_t nr = MH_GEMM_NR, pairs = (d + 1) / 2, padded = (cols + nr - 1) / nr * nr;
    uint16_t buf[CHUNK];
    for (size_t c = 0; c < padded; c++) {
        uint16_t* col = dst + ((c / nr) * pairs * nr + c % nr) * 2; /* element dd at col[(dd/2) * nr * 2 + dd % 2] */
        for (size_t d0 = 0; d0 < 2 * pairs; d0 += CHUNK) {
            const size_t n = d - d0 < CHUNK ? d - d0 : CHUNK, span = 2 * pairs - d0 < CHUNK ? 2 * pairs - d0 : CHUNK;
            if (c < cols) row_bf16(dtype, kr, c, d0, n, buf);
            for (size_t e = 0; e < span; e++)
                col[((d0 + e) / 2) * nr * 2 + (d0 + e) % 2] = c < cols && e < n ? buf[e] : 0;
        }
    }
}

/* dst[pair][j][2] of a panel whose pairs run over keys: column j of the panel, key c. */
MH_INLINE void pack_v_bf16(const mh_dtype dtype, size_t cols, size_t dv, const mh_rows* v, uint16_t* dst) {
    const size_t nr = MH_GEMM_NR, pairs = (cols + 1) / 2, width = (dv + nr - 1) / nr * nr;
    uint16_t buf[CHUNK];
    for (size_t c = 0; c < 2 * pairs; c++)
        for (size_t d0 = 0; d0 < width; d0 += CHUNK) {
            const size_t n = d0 >= dv ? 0 : dv - d0 < CHUNK ? dv - d0 : CHUNK;
            if (c < cols && n) row_bf16(dtype, v, c, d0, n, buf);
            for (size_t e = 0; e < CHUNK && d0 + e < width; e++) {
                const size_t col = d0 + e;
                dst[(((col / nr) * pairs + c / 2) * nr + col % nr) * 2 + c % 2] = c < cols && e < n ? buf[e] : 0;
            }
        }
}

void MH_KNAME(pack_kt_bf16)(size_t cols, size_t d, const mh_rows* kr, uint16_t* dst) {
    MH_WITH_DTYPE(kr->dtype, pack_kt_bf16, cols, d, kr, dst)
}

void MH_KNAME(pack_v_bf16)(size_t cols, size_t dv, const mh_rows* v, uint16_t* dst) {
    MH_WITH_DTYPE(v->dtype, pack_v_bf16, cols, dv, v, dst)
}
