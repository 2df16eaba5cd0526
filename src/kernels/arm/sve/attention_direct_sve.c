/*
 * Direct Q.K^T and P.V for blocks of fewer than 6 query rows (decode), vector-length
 * agnostic: K/V rows are read in place in their storage dtype and widened on load, so each
 * byte of the cache is read once per KV head, whatever the number of query heads sharing it.
 * Register budgets (32 z registers): qk keeps R x 4 accumulators (4 keys per step, <= 20),
 * 4 K vectors and 1 Q vector (<= 25); pv keeps R x 4 accumulators (4 vectors of output
 * columns), 4 V vectors and 1 broadcast probability (<= 25). SVE vectors cannot form C arrays,
 * so accumulators are named a<row><j> by macros and rows >= R compile away.
 * Tails: every d / dv step is predicated with svwhilelt (nothing read or written past it).
 */
#include "kernels/i8_rows.h"
#include "kernels/kernel_protos.h"
#include "kernels/arm/sve/simd_sve.h"

#define FOR_ROWS(F) F(0) F(1) F(2) F(3) F(4) /* rows < attn_direct_rows = 6 */

#define DECLARE_ROW(r)                                                            \
    svfloat32_t a##r##0 = svdup_n_f32(0.0f), a##r##1 = svdup_n_f32(0.0f),         \
                a##r##2 = svdup_n_f32(0.0f), a##r##3 = svdup_n_f32(0.0f);

/* ---- Q.K^T: J (4 or 1) keys at a time */
#define QK_FMA(r, j) \
    if (J > j) a##r##j = svmla_f32_m(pg, a##r##j, qv, k##j);

#define QK_ROW(r)                                                                 \
    if (R > r) {                                                                  \
        const svfloat32_t qv = svld1_f32(pg, q + (size_t)r * ldq + d0);           \
        QK_FMA(r, 0) QK_FMA(r, 1) QK_FMA(r, 2) QK_FMA(r, 3)                       \
    }

#define QK_SUM(r, j) \
    if (J > j) s[(size_t)r * lds + c + j] = svaddv_f32(all, a##r##j);

#define QK_STORE(r) \
    if (R > r) { QK_SUM(r, 0) QK_SUM(r, 1) QK_SUM(r, 2) QK_SUM(r, 3) }

#define QK_LOAD(j)                                                                \
    const svfloat32_t k##j =                                                      \
        J > j ? mh_load(pg, mh_dtype_at(k, dtype, (ptrdiff_t)(c + j) * ldk + (ptrdiff_t)d0), dtype) : zero;

/* s[r][c .. c + J) for R rows. */
MH_INLINE void qk_keys(const int R, const int J, size_t c, size_t d, const float* q, size_t ldq,
                       const void* k, ptrdiff_t ldk, mh_dtype dtype, float* s, size_t lds) {
    const svbool_t all = svptrue_b32();
    const svfloat32_t zero = svdup_n_f32(0.0f);
    const size_t vl = svcntw();
    FOR_ROWS(DECLARE_ROW)
    for (size_t d0 = 0; d0 < d; d0 += vl) {
        const svbool_t pg = mh_pred(d0, d);
        QK_LOAD(0) QK_LOAD(1) QK_LOAD(2) QK_LOAD(3)
        FOR_ROWS(QK_ROW)
    }
    FOR_ROWS(QK_STORE)
}

MH_INLINE void qk_rows(const int R, size_t cols, size_t d, const float* q, size_t ldq, const void* k,
                       ptrdiff_t ldk, mh_dtype dtype, float* s, size_t lds) {
    size_t c = 0;
    for (; c + 4 <= cols; c += 4) qk_keys(R, 4, c, d, q, ldq, k, ldk, dtype, s, lds);
    for (; c < cols; c++) qk_keys(R, 1, c, d, q, ldq, k, ldk, dtype, s, lds);
}

MH_ROWS_FNS(qk_rows, (size_t cols, size_t d, const float* q, size_t ldq, const void* k, ptrdiff_t ldk, mh_dtype dtype,
             float* s, size_t lds),
            (cols, d, q, ldq, k, ldk, dtype, s, lds))

void MH_KNAME(qk_direct)(size_t rows, size_t cols, size_t d, const float* q, size_t ldq, const mh_rows* kr,
                         float* s, size_t lds) {
    const void* k = kr->data;
    const ptrdiff_t ldk = kr->ld;
    const mh_dtype dtype = kr->dtype;
    MH_WITH_ROWS(rows, qk_rows, cols, d, q, ldq, k, ldk, dtype, s, lds)
    if (dtype == MH_DTYPE_I8) mh_i8_scale_scores(rows, cols, kr, s, lds);
}

/* ---- P.V: output columns [d0, d0 + 4 vl) */
/* a group's sums start from -0, so a group with no key leaves alpha * o exactly */
#define PV_INIT(r) \
    if (R > r) a##r##0 = a##r##1 = a##r##2 = a##r##3 = svdup_n_f32(-0.0f);

#define PV_LOAD(j) \
    const svfloat32_t v##j = live##j ? mh_load(p##j, mh_dtype_at(row, dtype, (ptrdiff_t)(j * vl)), dtype) : zero;

#define PV_FMA(r)                                                                 \
    if (R > r) {                                                                  \
        const svfloat32_t pr = svdup_n_f32(p[(size_t)r * ldp + c]);               \
        a##r##0 = svmla_f32_x(all, a##r##0, pr, v0);                              \
        if (live1) a##r##1 = svmla_f32_x(all, a##r##1, pr, v1);                   \
        if (live2) a##r##2 = svmla_f32_x(all, a##r##2, pr, v2);                   \
        if (live3) a##r##3 = svmla_f32_x(all, a##r##3, pr, v3);                   \
    }

/* o = alpha * o + the group's sum (alpha 1 after the first group) */
#define PV_STORE_ONE(r, j)                                                        \
    if (live##j) {                                                                \
        float* oj = o + (size_t)r * ldo + d0 + j * vl;                            \
        svst1_f32(p##j, oj, svmla_n_f32_x(all, a##r##j, svld1_f32(p##j, oj), lead ? alpha[r] : 1.0f)); \
    }

#define PV_STORE(r) \
    if (R > r) { PV_STORE_ONE(r, 0) PV_STORE_ONE(r, 1) PV_STORE_ONE(r, 2) PV_STORE_ONE(r, 3) }

MH_INLINE void pv_chunk(const int R, size_t d0, size_t cols, size_t dv, const float* p, size_t ldp,
                        const void* v, ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o,
                        size_t ldo) {
    const svbool_t all = svptrue_b32();
    const svfloat32_t zero = svdup_n_f32(0.0f);
    const size_t vl = svcntw();
    const svbool_t p0 = mh_pred(d0, dv), p1 = mh_pred(d0 + vl, dv);
    const svbool_t p2 = mh_pred(d0 + 2 * vl, dv), p3 = mh_pred(d0 + 3 * vl, dv);
    const int live0 = 1, live1 = d0 + vl < dv, live2 = d0 + 2 * vl < dv, live3 = d0 + 3 * vl < dv;
    FOR_ROWS(DECLARE_ROW)
    size_t c = 0;
    do { /* groups of MH_PV_GROUP keys (kernels.h); at least once, so alpha applies with no key */
        const int lead = c == 0;
        const size_t end = mh_pv_group_end(c, cols);
        FOR_ROWS(PV_INIT)
        for (; c < end; c++) {
            const void* row = mh_dtype_at(v, dtype, (ptrdiff_t)c * ldv + (ptrdiff_t)d0);
            PV_LOAD(0) PV_LOAD(1) PV_LOAD(2) PV_LOAD(3)
            FOR_ROWS(PV_FMA)
        }
        FOR_ROWS(PV_STORE)
    } while (c < cols);
}

MH_INLINE void pv_rows(const int R, size_t cols, size_t dv, const float* p, size_t ldp, const void* v,
                       ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    const size_t step = MH_SVE_GEMM_NV * svcntw();
    for (size_t d0 = 0; d0 < dv; d0 += step) pv_chunk(R, d0, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo);
}

MH_ROWS_FNS(pv_rows, (size_t cols, size_t dv, const float* p, size_t ldp, const void* v, ptrdiff_t ldv, mh_dtype dtype,
             const float* alpha, float* o, size_t ldo),
            (cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo))

static void pv_any(size_t rows, size_t cols, size_t dv, const float* p, size_t ldp, const void* v,
                   ptrdiff_t ldv, mh_dtype dtype, const float* alpha, float* o, size_t ldo) {
    MH_WITH_ROWS(rows, pv_rows, cols, dv, p, ldp, v, ldv, dtype, alpha, o, ldo)
}

#include "kernels/direct_entries_each.h"
