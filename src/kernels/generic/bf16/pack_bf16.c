/*
 * Packing K/V tiles of any storage dtype into the bf16 compute mode's panels, or into bf16
 * rows (contract in kernels.h, "bf16 compute"), written once for the ISAs with bf16 kernels.
 * Each row is turned into bf16 a chunk at a time (bf16 storage copied as it is; the others
 * widened through the ISA's vocabulary, int8 times the row's scale, then rounded to nearest
 * even by the ISA's f32_to_bf16), and scattered into the k-pair layout [pairs][NR][2] or
 * stored row-major (rows_bf16).
 */
#include <string.h>

#include "kernels/generic/simd.h"

/* Elements per chunk: even (pairs never straddle two chunks). */
#define CHUNK 64

/* Elements [d0, d0 + n) (n <= CHUNK) of row c of x as bf16 into out. */
MH_INLINE void row_bf16(const mh_dtype dtype, const mh_rows* x, size_t c, size_t d0, size_t n, uint16_t* out) {
    const void* src = mh_dtype_at(x->data, dtype, (ptrdiff_t)c * x->ld + (ptrdiff_t)d0);
    if (dtype == MH_DTYPE_BF16) {
        memcpy(out, src, n * sizeof(uint16_t));
        return;
    }
    const mh_vf sc = mh_vset1(dtype == MH_DTYPE_I8 ? x->scale[(ptrdiff_t)c * x->ld_scale] : 1.0f);
    float f[CHUNK + 64]; /* whole vectors: up to MH_VL - 1 (< 64 on every ISA) past n */
    for (size_t j = 0; j < n; j += MH_VL) {
        const void* p = mh_dtype_at(src, dtype, (ptrdiff_t)j);
        mh_vf v = j + MH_VL <= n ? mh_vload_dt(p, dtype) : mh_vload_dt_n(p, dtype, n - j);
        if (dtype == MH_DTYPE_I8) v = mh_vmul(v, sc);
        mh_vstore(f + j, v);
    }
    MH_KNAME(f32_to_bf16)(n, f, out);
}

/* Key c of panel c / NR: its row in bf16, a pair (two elements, one 32-bit store) at a time
 * into column c % NR of each pair row ([pairs][NR][2]); keys past cols and the pad of an odd
 * d are zero. */
MH_INLINE void pack_kt_bf16(const mh_dtype dtype, size_t cols, size_t d, const mh_rows* kr, uint16_t* dst) {
    const size_t nr = MH_GEMM_NR, pairs = (d + 1) / 2, padded = (cols + nr - 1) / nr * nr;
    uint16_t buf[CHUNK];
    for (size_t c = 0; c < padded; c++) {
        uint16_t* col = dst + ((c / nr) * pairs * nr + c % nr) * 2;
        for (size_t d0 = 0; d0 < 2 * pairs; d0 += CHUNK) {
            const size_t n = d - d0 < CHUNK ? d - d0 : CHUNK, span = 2 * pairs - d0 < CHUNK ? 2 * pairs - d0 : CHUNK;
            memset(buf, 0, sizeof buf);
            if (c < cols) row_bf16(dtype, kr, c, d0, n, buf);
            for (size_t e = 0; e < span; e += 2) memcpy(col + (d0 + e) * nr, buf + e, 2 * sizeof(uint16_t));
        }
    }
}

/* Panel p's pair of keys (c, c + 1): the two rows' columns [p*NR, p*NR + NR) interleaved
 * (key c first), zero past dv and for a key at cols (the pad of an odd cols). */
MH_INLINE void pack_v_bf16(const mh_dtype dtype, size_t cols, size_t dv, const mh_rows* v, uint16_t* dst) {
    const size_t nr = MH_GEMM_NR, pairs = (cols + 1) / 2, n_panels = (dv + nr - 1) / nr;
    uint16_t b0[CHUNK], b1[CHUNK];
    for (size_t p = 0; p < n_panels; p++)
        for (size_t c = 0; c < cols; c += 2) {
            uint16_t* out = dst + ((p * pairs + c / 2) * nr) * 2;
            for (size_t d0 = 0; d0 < nr; d0 += CHUNK) { /* NR is at most CHUNK or a multiple of it */
                const size_t col = p * nr + d0, n = col >= dv ? 0 : dv - col < CHUNK ? dv - col : CHUNK;
                memset(b0, 0, sizeof b0), memset(b1, 0, sizeof b1);
                if (n) row_bf16(dtype, v, c, col, n, b0);
                if (n && c + 1 < cols) row_bf16(dtype, v, c + 1, col, n, b1);
                const size_t w = nr - d0 < CHUNK ? nr - d0 : CHUNK;
                for (size_t j = 0; j < w; j++) out[2 * (d0 + j)] = b0[j], out[2 * (d0 + j) + 1] = b1[j];
            }
        }
}

/* Rows [0, cols) of x in bf16, row c at dst + c * width. */
MH_INLINE void rows_bf16(const mh_dtype dtype, size_t cols, size_t width, const mh_rows* x, uint16_t* dst) {
    for (size_t c = 0; c < cols; c++)
        for (size_t d0 = 0; d0 < width; d0 += CHUNK)
            row_bf16(dtype, x, c, d0, width - d0 < CHUNK ? width - d0 : CHUNK, dst + c * width + d0);
}

void MH_KNAME(pack_kt_bf16)(size_t cols, size_t d, const mh_rows* kr, uint16_t* dst) {
    MH_WITH_DTYPE(kr->dtype, pack_kt_bf16, cols, d, kr, dst)
}

void MH_KNAME(pack_v_bf16)(size_t cols, size_t dv, const mh_rows* v, uint16_t* dst) {
    MH_WITH_DTYPE(v->dtype, pack_v_bf16, cols, dv, v, dst)
}

void MH_KNAME(rows_bf16)(size_t cols, size_t width, const mh_rows* x, uint16_t* dst) {
    MH_WITH_DTYPE(x->dtype, rows_bf16, cols, width, x, dst)
}
