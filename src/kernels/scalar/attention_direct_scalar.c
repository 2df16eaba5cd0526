/* Direct Q.K^T and P.V for a few query rows (decode): K/V rows are read in place, widened a
 * chunk at a time, and each is used by every query row of the block. int8 rows take their
 * scales through kernels/i8_rows.h. */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/scalar/simd_scalar.h"

#define CHUNK 64

/* n elements of a K or V row as f32: an f32 row in place, any other dtype widened into buf. */
static inline const float* row_f32(const void* row, mh_dtype dtype, size_t n, float* buf) {
    if (dtype == MH_DTYPE_F32) return row;
    mh_load_row_f32__scalar(row, dtype, n, buf);
    return buf;
}

void MH_KNAME(qk_direct)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* k,
                         float* s, size_t lds) {
    float buf[CHUNK];
    const mh_dtype dtype = k->dtype;
    for (size_t c = 0; c < cols; c++) {
        const void* krow = mh_dtype_at(k->data, dtype, (ptrdiff_t)c * k->ld);
        for (size_t r = 0; r < rows; r++) s[r * lds + c] = 0.0f;
        for (size_t d0 = 0; d0 < d; d0 += CHUNK) {
            const size_t n = d - d0 < CHUNK ? d - d0 : CHUNK;
            const float* x = row_f32(mh_dtype_at(krow, dtype, (ptrdiff_t)d0), dtype, n, buf);
            for (size_t r = 0; r < rows; r++) {
                float acc = 0.0f;
                for (size_t i = 0; i < n; i++) acc += q[r * ldq + d0 + i] * x[i];
                s[r * lds + c] += acc;
            }
        }
    }
    if (dtype == MH_DTYPE_I8) mh_i8_scale_scores(rows, cols, k, s, lds);
}

#define PV_ROWS 8 /* rows of one pass: each widened V chunk serves all of them */

/* o = alpha * o + P.V, the sum in groups of MH_PV_GROUP keys (kernels.h), a chunk of columns
 * and up to PV_ROWS rows at a time: each group's sums from -0 in acc, then added to o. */
static void pv_any(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const void* v, ptrdiff_t ldv,
                   mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    float buf[CHUNK], acc[PV_ROWS][CHUNK];
    for (size_t r0 = 0; r0 < rows; r0 += PV_ROWS) {
        const size_t nr = rows - r0 < PV_ROWS ? rows - r0 : PV_ROWS;
        for (size_t d0 = 0; d0 < dv; d0 += CHUNK) {
            const size_t n = dv - d0 < CHUNK ? dv - d0 : CHUNK;
            size_t c = 0;
            do { /* at least once, so alpha applies even with no key */
                const int lead = c == 0;
                const size_t end = mh_pv_group_end(c, cols);
                for (size_t r = 0; r < nr; r++)
                    for (size_t i = 0; i < n; i++) acc[r][i] = -0.0f;
                for (; c < end; c++) {
                    const float* x = row_f32(mh_dtype_at(v, dtype, (ptrdiff_t)c * ldv + (ptrdiff_t)d0), dtype, n, buf);
                    for (size_t r = 0; r < nr; r++) {
                        const float pc = p[(r0 + r) * ldp + c];
                        for (size_t i = 0; i < n; i++) acc[r][i] += pc * x[i];
                    }
                }
                for (size_t r = 0; r < nr; r++) {
                    const float al = lead ? alpha[r0 + r] : 1.0f;
                    float* orow = o + (r0 + r) * ldo + d0;
                    for (size_t i = 0; i < n; i++) orow[i] = al * orow[i] + acc[r][i];
                }
            } while (c < cols);
        }
    }
}

#include "kernels/direct_entries_each.h"
