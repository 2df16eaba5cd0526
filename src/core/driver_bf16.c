/* The bf16 compute mode's operand rounding in the driver (see driver_bf16.h). */
#include "core/driver_bf16.h"

#include "core/driver_layout.h"
#include "kernels/scalar/convert_scalar.h"

void mh_drv_bf16_carve(const mh_drv_stage* st, size_t rows, mh_ws* ws, mh_drv_scratch* sc) {
    sc->qb = mh_ws_take(ws, rows, mh_drv_bf16_ldq(st->dqk), sizeof(uint16_t));
    sc->pb = st->mode == MH_DRV_ONE_PASS ? mh_ws_take(ws, rows, st->tk, sizeof(uint16_t))
                                         : mh_ws_take(ws, st->tile_floats, 1, sizeof(uint16_t));
}

void mh_drv_bf16_round_row(const mh_drv_stage* st, int widen, size_t n, float* x, uint16_t* xb) {
    st->k->round_bf16(n, x, xb);
    for (size_t i = 0; widen && i < n; i++) x[i] = mh_bf16_to_f32(xb[i]); /* exact */
}

void mh_drv_load_q(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc) {
    st->load_q(st, t, sc);
    if (!mh_drv_bf16(st)) return;
    const size_t dqk = st->dqk, ldq = mh_drv_bf16_ldq(dqk);
    const size_t rows = st->mode == MH_DRV_ONE_PASS ? t->rows : block_rows(st);
    for (size_t r = 0; r < rows; r++) {
        mh_drv_bf16_round_row(st, t->direct_qk, dqk, sc->q + r * dqk, sc->qb + r * ldq);
        if (ldq > dqk) sc->qb[r * ldq + dqk] = 0;
    }
}

void mh_drv_bf16_probs(const mh_drv_stage* st, const mh_drv_task* t, size_t r0, size_t r1, size_t from, size_t nc,
                       mh_drv_scratch* sc) {
    for (size_t r = r0; r < r1; r++)
        mh_drv_bf16_round_row(st, t->direct_pv, nc - from, sc->s + r * st->tk + from, sc->pb + r * st->tk + from);
}
