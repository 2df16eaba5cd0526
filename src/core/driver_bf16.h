/*
 * The bf16 compute mode in the driver (mh_drv_stage.compute == MH_COMPUTE_BF16):
 * Q (pre-scaled, once per task) and P (per tile) are rounded to bf16 into the worker's qb/pb,
 * K/V tiles are packed into bf16 k-pair panels (pack_kt_bf16 / pack_v_bf16, in the room of
 * the f32 panels, which is at least twice what they need), and both products run on the
 * table's bf16 GEMMs, accumulating in f32. Scores, softmax, the running statistics and the
 * output stay f32. A decode task (few rows per K/V head) runs the f32 direct kernels instead,
 * as f32 decode does: their operands are then bf16 values (q and P rounded, then widened back
 * into sc->q / sc->s; K or V as stored when bf16), so every product is exact and the sums are
 * f32, the mode's arithmetic in another order of addition. On f32, f16 or int8 storage a
 * one-pass task of at most MH_DRV_BF16_ROUND_ROWS rows does the same on each tile's rows
 * rounded as the packs round them, into the worker's idle panel buffers (mh_drv_bf16_rows):
 * the operand values of a cache holding them in bf16, so that cache's bits
 * (tests/core/test_bf16_attention.c); the other tasks pack, as prefill does.
 * The two-pass stage (DCMHA) uses the same pieces on its own tiles: Q rounded by
 * mh_drv_load_q, its composed probabilities by mh_drv_bf16_round_row, the packs and the
 * scores' GEMM below.
 */
#ifndef MH_CORE_DRIVER_BF16_H
#define MH_CORE_DRIVER_BF16_H
#include "core/driver.h"

/* The most rows of a one-pass direct task for which other storage's K/V tiles are rounded into
 * rows for the direct kernels rather than packed: the rounding is a pass of its own over the tile,
 * which one or two query rows per K/V row (memory-bound) hide and grouped heads (bound by the
 * core) do not. bf16 decode on an f16 cache, 32K keys, Zen 5, against the packs: MHA 0.61-0.70x
 * the time, two rows (GQA-16) 0.73x, four (GQA-8) 1.20-1.32x. */
#define MH_DRV_BF16_ROUND_ROWS 2

/* 1 if the call computes in bf16. */
static inline int mh_drv_bf16(const mh_drv_stage* st) { return st->compute == MH_COMPUTE_BF16; }

/* Elements between the rows of sc->qb: dqk rounded up to even (the kernels read pairs). */
static inline size_t mh_drv_bf16_ldq(size_t dqk) { return (dqk + 1) / 2 * 2; }

/* Panel p of a packed tile (base: f32 panels, or bf16 ones with bf16) whose panels each span
 * len rows of NR columns (K: len = dqk; V: len = the packed keys). */
static inline const void* mh_drv_panel(const void* base, int bf16, size_t p, size_t len, size_t nr) {
    return bf16 ? (const void*)((const uint16_t*)base + p * mh_drv_bf16_ldq(len) * nr)
                : (const void*)((const float*)base + p * len * nr);
}

/* 1 if keys [lo, hi) of a packed V panel (nw <= NR columns) hold a NaN or inf: in bf16 the
 * pairs holding those keys (their neighbour in a pair too: a superset, which only sends P.V
 * row by row more often). */
static inline int mh_drv_panel_nonfinite(const mh_drv_stage* st, const void* panel, size_t lo, size_t hi, size_t nw) {
    const size_t nr = st->k->gemm_nr;
    if (!mh_drv_bf16(st)) {
        const mh_rows r = {.data = panel, .ld = (ptrdiff_t)nr, .dtype = MH_DTYPE_F32};
        return st->k->v_nonfinite(lo, hi, 0, nw, &r);
    }
    const mh_rows r = {.data = panel, .ld = (ptrdiff_t)(2 * nr), .dtype = MH_DTYPE_BF16};
    return st->k->v_nonfinite(lo / 2, (hi + 1) / 2, 0, 2 * nw, &r);
}

/* K (pack_kt) or V (pack_v) tile of nc keys into dst, in the call's compute mode's panels. */
static inline void mh_drv_pack_k(const mh_drv_stage* st, size_t nc, const mh_rows* kr, float* dst) {
    if (mh_drv_bf16(st))
        st->k->pack_kt_bf16(nc, st->dqk, kr, (uint16_t*)(void*)dst);
    else
        st->k->pack_kt(nc, st->dqk, kr, dst);
}

static inline void mh_drv_pack_v(const mh_drv_stage* st, size_t nc, const mh_rows* vr, float* dst) {
    if (mh_drv_bf16(st))
        st->k->pack_v_bf16(nc, st->dv, vr, (uint16_t*)(void*)dst);
    else
        st->k->pack_v(nc, st->dv, vr, dst);
}

/* Scores of rows [r, r + m) of the task against n <= NR keys of a K panel into s (ld tk). */
static inline void mh_drv_gemm_scores(const mh_drv_stage* st, size_t m, size_t n, size_t r, const void* panel,
                                      float* s, mh_drv_scratch* sc) {
    const size_t dqk = st->dqk, ldq = mh_drv_bf16_ldq(dqk);
    if (mh_drv_bf16(st))
        st->k->gemm_bf16(m, n, dqk, sc->qb + r * ldq, ldq, (const uint16_t*)panel, s, st->tk, &sc->fetch);
    else
        st->k->gemm(m, n, dqk, sc->q + r * dqk, dqk, (const float*)panel, NULL, s, st->tk, &sc->fetch);
}

/* o = alpha * o + P.V for rows [r, r + m), keys [0, n), nw <= NR columns of a V panel. */
static inline void mh_drv_gemm_pv(const mh_drv_stage* st, size_t m, size_t nw, size_t f, size_t n, size_t r,
                                  const void* panel, float* o, mh_drv_scratch* sc) {
    const size_t nr = st->k->gemm_nr;
    if (mh_drv_bf16(st)) {
        f &= ~(size_t)1; /* panels hold key pairs: from the pair holding key f */
        st->k->gemm_acc_bf16(m, nw, n - f, sc->pb + r * st->tk + f, st->tk, (const uint16_t*)panel + f * nr,
                             sc->alpha + r, o, st->dv, &sc->fetch);
    } else {
        st->k->gemm_acc(m, nw, n - f, sc->s + r * st->tk + f, st->tk, (const float*)panel + f * nr, sc->alpha + r, o,
                        st->dv, &sc->fetch);
    }
}

/* Carves (or measures) a worker's sc->qb and sc->pb for rows rows: always, since the
 * workspace size depends on the shapes alone (never on the compute mode). */
void mh_drv_bf16_carve(const mh_drv_stage* st, size_t rows, mh_ws* ws, mh_drv_scratch* sc);

/* The stage's load_q into sc->q, then in bf16 compute sc->q [rows][dqk] rounded into sc->qb
 * (with a zero pad element for odd dqk) and, for a direct Q.K^T, back into sc->q. rows: the
 * task's (one-pass) or its block's, hg * tq (two-pass). */
void mh_drv_load_q(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc);

/* x [n] rounded to bf16 into xb and, with widen (a direct kernel's operand), back into x. */
void mh_drv_bf16_round_row(const mh_drv_stage* st, int widen, size_t n, float* x, uint16_t* xb);

/* The rows the direct kernels read for n rows of x (width elements each): x itself unless the
 * call computes in bf16 on other storage; then the rows rounded to bf16 into buf (n * width
 * elements: a worker's sc->kt or sc->vt, which direct tasks leave idle), described in *view.
 * (A pointer, not a copy: a copied view cost f32 MHA decode 8% in stalled stack reloads.) */
static inline const mh_rows* mh_drv_bf16_rows(const mh_drv_stage* st, const mh_rows* x, size_t n, size_t width,
                                              void* buf, mh_rows* view) {
    if (!mh_drv_bf16(st) || x->dtype == MH_DTYPE_BF16) return x;
    st->k->rows_bf16(n, width, x, (uint16_t*)buf);
    const mh_rows r = {.data = buf, .ld = (ptrdiff_t)width, .dtype = MH_DTYPE_BF16, .prefetch = x->prefetch};
    *view = r;
    return view;
}

/* Probabilities of keys [from, nc) of rows [r0, r1) of sc->s rounded into sc->pb and, for a
 * direct P.V, back into sc->s (write_probs recomputes its exact ones). A one-pass block whose
 * P.V is a GEMM gets sc->pb from softmax_tile_bf16 instead, in the softmax's own pass. */
void mh_drv_bf16_probs(const mh_drv_stage* st, const mh_drv_task* t, size_t r0, size_t r1, size_t from, size_t nc,
                       mh_drv_scratch* sc);

#endif
