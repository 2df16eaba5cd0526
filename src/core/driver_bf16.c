/* The bf16 compute mode's operand rounding in the one-pass driver (see driver_bf16.h). */
#include "core/driver_bf16.h"

#include "kernels/scalar/convert_scalar.h"

void mh_drv_bf16_carve(const mh_drv_stage* st, size_t rows, mh_ws* ws, mh_drv_scratch* sc) {
    sc->qb = mh_ws_take(ws, rows, mh_drv_bf16_ldq(st->dqk), sizeof(uint16_t));
    sc->pb = mh_ws_take(ws, rows, st->tk, sizeof(uint16_t));
}

/* y[i] = the f32 value of bf16 x[i] (exact). */
static void widen_bf16(size_t n, const uint16_t* x, float* y) {
    for (size_t i = 0; i < n; i++) y[i] = mh_bf16_to_f32(x[i]);
}

void mh_drv_load_q(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc) {
    st->load_q(st, t, sc);
    if (!mh_drv_bf16(st)) return;
    const size_t dqk = st->dqk, ldq = mh_drv_bf16_ldq(dqk);
    for (size_t r = 0; r < t->rows; r++) {
        st->k->round_bf16(dqk, sc->q + r * dqk, sc->qb + r * ldq);
        if (ldq > dqk) sc->qb[r * ldq + dqk] = 0;
        if (t->direct_qk) widen_bf16(dqk, sc->qb + r * ldq, sc->q + r * dqk);
    }
}

void mh_drv_bf16_probs(const mh_drv_stage* st, const mh_drv_task* t, size_t r0, size_t r1, size_t nc,
                       mh_drv_scratch* sc) {
    for (size_t r = r0; r < r1; r++) {
        st->k->round_bf16(nc, sc->s + r * st->tk, sc->pb + r * st->tk);
        if (t->direct_pv) widen_bf16(nc, sc->pb + r * st->tk, sc->s + r * st->tk);
    }
}
