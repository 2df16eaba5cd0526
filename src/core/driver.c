/*
 * The one attention driver (see driver.h for the stage contract): its tasks and the one-pass
 * mode. Tiled attention where the N x M score matrix is never formed, over (batch, stream,
 * query tile) tasks that the workers (core/driver_run.c) take dynamically; each task's
 * arithmetic is independent of which thread runs it, so results are bitwise identical for
 * every thread count.
 */
#include "core/driver_call.h"

#include <math.h>
#include <string.h>

#include "core/driver_bf16.h"
#include "kernels/decode_prefetch.h"
#include "util/checked.h"
#include "util/dtype.h"

/* The index of the prepacked tile holding key j0 of prepack head h of batch b (mh_drv_packed). */
static size_t packed_tile(const mh_drv_call* c, const mh_drv_scratch* sc, size_t b, size_t h, int64_t j0) {
    const size_t slot = c->cw.per_worker ? sc->pack_slot : b * (size_t)c->st.pack_heads + h;
    return slot * n_kv_tiles(&c->st) + (size_t)j0 / c->st.tk;
}

const float* mh_drv_packed(const mh_drv_stage* st, const mh_drv_scratch* sc, int kv, size_t b, size_t h,
                           int64_t j0) {
    const mh_drv_call* c = (const mh_drv_call*)st;
    if (!c->cw.kt_all) return NULL;
    const size_t tile = packed_tile(c, sc, b, h, j0);
    return kv ? c->cw.vt_all + tile * v_heads(st) * vt_floats(st) : c->cw.kt_all + tile * kt_floats(st);
}

/* The flags [v_heads] of that tile's packed V (cw.vt_bad), or NULL when the call does not prepack. */
static const unsigned char* packed_v_bad(const mh_drv_stage* st, const mh_drv_scratch* sc, size_t b, size_t h,
                                         int64_t j0) {
    const mh_drv_call* c = (const mh_drv_call*)st;
    return c->cw.kt_all ? c->cw.vt_bad + packed_tile(c, sc, b, h, j0) * v_heads(st) : NULL;
}

void mh_drv_block(const mh_drv_stage* st, const mh_attn_options* opt, const int64_t* pos, mh_drv_task* t) {
    const int64_t kv_len = opt->kv_len ? opt->kv_len[t->b] : st->n_kv;
    const int64_t q0 = mh_score_first_query(opt, t->b, st->n_q, st->n_kv);
    mh_score_block blk = {t->nq, st->hg, q0 + (int64_t)t->i0, opt->causal, opt->window, opt->softcap,
                          opt->alibi_slopes ? opt->alibi_slopes + t->h0 : NULL, NULL,
                          opt->mask_stride_head, opt->mask_stride_row, NULL};
    if (pos) {
        blk.pos = pos;
        blk.p_first = pos[0];
    }
    if (opt->mask)
        blk.mask = opt->mask + t->b * opt->mask_stride_batch + (ptrdiff_t)t->h0 * opt->mask_stride_head +
                   (ptrdiff_t)t->i0 * opt->mask_stride_row;
    t->blk = blk;
    mh_score_key_range(&blk, kv_len, &t->j_begin, &t->j_end);
}

mh_drv_task mh_drv_make_task(const mh_drv_call* c, size_t ti) {
    const mh_drv_stage* st = &c->st;
    const size_t n_qt = mh_drv_query_tiles(st);
    mh_drv_task t;
    memset(&t, 0, sizeof t);
    t.s = (int)((ti / n_qt) % (size_t)st->streams);
    t.b = (int)(ti / (n_qt * (size_t)st->streams));
    t.i0 = (ti % n_qt) * st->tq;
    t.nq = mh_min_size(st->tq, (size_t)st->n_q - t.i0);
    t.rows = st->hg * t.nq;
    t.h0 = (size_t)t.s * st->hg;
    t.active = 1;
    st->task(st, &t);
    if (mh_drv_bf16(st)) { /* the direct kernels are f32: exact on bf16 operands only (driver_bf16.h) */
        const int rounds = st->mode == MH_DRV_ONE_PASS && t.rows <= MH_DRV_BF16_ROUND_ROWS;
        t.direct_qk &= st->k_dtype == MH_DTYPE_BF16 || rounds;
        t.direct_pv &= st->v_dtype == MH_DTYPE_BF16 || rounds;
    }
    return t;
}

void mh_drv_empty_rows(const mh_drv_stage* st, size_t rows, float* m, float* l, float* o) {
    for (size_t r = 0; r < rows; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(o, 0, rows * st->dv * sizeof(float));
}

void mh_drv_start_rows(const mh_drv_stage* st, const mh_drv_task* t, size_t rows, mh_drv_scratch* sc) {
    mh_drv_load_q(st, t, sc);
    mh_drv_empty_rows(st, rows, sc->m, sc->l, sc->o);
}

/* ---- one-pass mode ---- */

/* A decode-shaped task that packs its tiles (many query rows on one K/V head: MQA) is bound
 * by the core, not memory: the rows of its next tile (keys [j0 + tk, ...) of K or V, below the
 * task's last key) are requested while this tile is multiplied, by the GEMM micro-kernels
 * themselves, a line every MH_FETCH_EVERY steps of their reduction (sc->fetch,
 * kernels/fetch.h). Issued at once, a whole tile's prefetches queue for the core's miss
 * buffers and the loads of the tile being packed wait behind them (MQA f16 decode at 32K keys,
 * Zen 4: 7.7 ms with them at once, 7.9 ms without any, 6.4 ms in slices before each block of
 * GEMM rows); on Zen 5 even the slices held the core (8% of MQA's samples), and the
 * micro-kernels' trickle took MQA decode at 32K keys to 0.93-0.97x the time of the slices with
 * f16, 0.89-0.92x with f32, 0.98x with int8. Into L2, or into L1 under the table's L1 rule (Zen 5,
 * whose prefetches into L2 stall on the miss buffers; kernels/decode_prefetch.h). Where the
 * next tile has more lines than the tile's GEMMs request at that rate (f32 rows on AVX-512: 512
 * lines of K against 6 blocks x 64 requests for MQA's 32 rows), they request one at every step
 * (MH_FETCH_DENSE, mh_fetch_spread), so the whole tile arrives (Zen 5, MQA f32 decode at 32K
 * keys: 0.88-0.91x the time of the usual rate, which left a quarter of each tile to the pack).
 * `steps`: the values of k the tile's GEMM calls run through. The fetch of kv = 0 (K) or 1 (V) for the tile after
 * the one at j0, or none. */
static mh_fetch next_tile_fetch(const mh_drv_stage* st, const mh_drv_task* t, int kv, int64_t j0, size_t steps) {
    mh_fetch f = mh_fetch_begin(NULL);
    const int64_t j1 = j0 + (int64_t)st->tk;
    if (j1 >= t->j_end || mh_drv_query_tiles(st) != 1) return f;
    const mh_dtype dt = kv ? st->v_dtype : st->k_dtype;
    const mh_rows x = mh_drv_kv_rows(st, kv, (size_t)t->b, (size_t)t->s, j1);
    f.p = (const char*)x.data;
    f.row_bytes = (kv ? st->dv : st->dqk) * mh_dtype_size(dt);
    f.stride = x.ld * (ptrdiff_t)mh_dtype_size(dt);
    f.rows = mh_drv_block_keys(st, j1, mh_min_size(st->tk, (size_t)(t->j_end - j1)));
    f.how = x.prefetch != MH_PREFETCH_L1 ? MH_FETCH_L2 : 0;
    if (!mh_drv_bf16(st)) mh_fetch_spread(&f, steps); /* the bf16 kernels keep their rate (fetch.h) */
    return f;
}

/* pv_direct for rows [i, i + rows) of the task over keys [a, b) of the tile, V read in place
 * from v, the rows of key a. */
static void pv_direct_keys(const mh_drv_stage* st, const mh_rows* v, size_t rows, size_t i, size_t a, size_t b,
                           const float* alpha, mh_drv_scratch* sc) {
    st->k->pv_direct(rows, b - a, st->dv, sc->s + i * st->tk + a, st->tk, v, alpha, sc->o + i * st->dv, st->dv);
}

/* The rows of keys [j0 + c0, ...) of K (kv = 0) or V (kv = 1) of head `head`, whose rows from
 * j0 are src: src itself at c0 = 0, else read again (a paged cache's block may change), with
 * what the kernels prefetch beside them (src.next) moved along. */
static mh_rows rows_at(const mh_drv_stage* st, const mh_drv_task* t, int kv, size_t head, const mh_rows* src,
                       int64_t j0, size_t c0) {
    if (c0 == 0) return *src;
    mh_rows x = mh_drv_kv_rows(st, kv, (size_t)t->b, head, j0 + (int64_t)c0);
    x.interleaved = src->interleaved;
    if (src->next)
        x.next = mh_dtype_at(src->next, x.dtype, (ptrdiff_t)c0 * (src->next_ld ? src->next_ld : src->ld)),
        x.next_ld = src->next_ld;
    return x;
}

void mh_drv_qk_run(const mh_drv_stage* st, const mh_drv_task* t, const mh_rows* ksrc, int64_t j0, size_t c0,
                   size_t n, mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    const size_t dqk = st->dqk, tk = st->tk;
    mh_rows kr = rows_at(st, t, 0, (size_t)t->s, ksrc, j0, c0), view;
    const mh_rows* kd = mh_drv_bf16_rows(st, &kr, n, dqk, sc->kt, &view);
    for (size_t r = 0, m; r < t->rows; r += m) {
        m = mh_drv_direct_len(k, t->rows, r);
        k->qk_direct(m, n, dqk, sc->q + r * dqk, dqk, kd, sc->s + r * tk + c0, tk);
    }
}

void mh_drv_pv_run(const mh_drv_stage* st, const mh_drv_task* t, const mh_rows* vsrc, size_t head, int64_t j0,
                   size_t c0, size_t n, size_t r0, size_t per, mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    mh_rows vr = rows_at(st, t, 1, head, vsrc, j0, c0), view;
    const mh_rows* vd = mh_drv_bf16_rows(st, &vr, n, st->dv, sc->vt, &view);
    for (size_t r = r0, m; r < r0 + per; r += m) {
        m = mh_drv_direct_len(k, per, r - r0);
        pv_direct_keys(st, vd, m, r, c0, c0 + n, c0 ? sc->ones + r : sc->alpha + r, sc);
    }
}

/* Keys [j0, j0 + nc) of K (kv = 0) or V (kv = 1) of head `head` packed into dst for the GEMMs:
 * at once from src (the rows from j0), or, where a paged cache's block ends inside the tile
 * (a grouped decode's wider tile, f32 compute only), one block's piece at a time, each in its
 * place in the tile's panels: pack_kt's panels of NR keys (blocks start on multiples of NR),
 * pack_v's column panels one at a time. Packing moves values exactly: the same panels either
 * way. */
static void pack_tile(const mh_drv_stage* st, const mh_drv_task* t, int kv, size_t head, int64_t j0, size_t nc,
                      const mh_rows* src, float* dst) {
    const mh_kernels* k = st->k;
    const size_t nr = k->gemm_nr, d = kv ? st->dv : st->dqk;
    if (mh_drv_block_keys(st, j0, nc) == nc) {
        if (kv) mh_drv_pack_v(st, nc, src, dst);
        else mh_drv_pack_k(st, nc, src, dst);
        return;
    }
    for (size_t c = 0, n; c < nc; c += n) {
        n = mh_drv_block_keys(st, j0 + (int64_t)c, nc - c);
        const mh_rows x = mh_drv_kv_rows(st, kv, (size_t)t->b, head, j0 + (int64_t)c);
        if (!kv) {
            k->pack_kt(n, d, &x, dst + c / nr * d * nr);
            continue;
        }
        for (size_t d0 = 0; d0 < d; d0 += nr) {
            mh_rows cols = x;
            cols.data = mh_dtype_at(x.data, x.dtype, (ptrdiff_t)d0);
            k->pack_v(n, mh_min_size(nr, d - d0), &cols, dst + (d0 / nr * nc + c) * nr);
        }
    }
}

/* Rows [r, r + m), columns [from, nc) of the task's score tile through the score step and,
 * with softmax, the online-softmax step (their m, l, alpha) and, in bf16 compute, the rounding
 * of P. Columns before `from` hold no score: every one of these rows drops those keys. */
static void step_rows(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t from, size_t nc, size_t r,
                      size_t m, int softmax, mh_drv_scratch* sc) {
    const size_t tk = st->tk;
    float* s = sc->s + from;
    mh_score_rows(&t->blk, s, tk, j0 + (int64_t)from, nc - from, r, r + m);
    if (!softmax) return;
    if (mh_drv_bf16(st) && !t->direct_pv) { /* P rounded for the P.V GEMM in the same pass */
        st->k->softmax_tile_bf16(m, nc - from, s + r * tk, tk, sc->pb + r * tk + from, sc->m + r, sc->l + r,
                                 sc->alpha + r);
        return;
    }
    st->k->softmax_tile(m, nc - from, s + r * tk, tk, sc->m + r, sc->l + r, sc->alpha + r);
    if (mh_drv_bf16(st)) mh_drv_bf16_probs(st, t, r, r + m, from, nc, sc);
}

void mh_drv_tile_softmax(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, mh_drv_scratch* sc) {
    step_rows(st, t, j0, 0, nc, 0, t->rows, 1, sc);
}

/* Finished scores (Q.K^T, the stage's bias, the score step) of keys [j0, j0 + nc) into sc->s
 * and, with softmax, their probabilities (in bf16 compute also rounded into sc->pb). Direct
 * tasks read K in place; the others pack the tile (unless prepacked) for the GEMM and take it
 * a block of MR rows at a time, each block through the score and softmax steps right after
 * its GEMMs, while it is in L1 (unless the stage's bias hook needs the whole tile first). */
static void score_tile(const mh_drv_stage* st, const mh_drv_task* t, const float* kt_pre, int64_t j0,
                       size_t nc, const mh_drv_next_tile* nx, int softmax, mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    const size_t dqk = st->dqk, tk = st->tk, mr = mh_kernels_gemm_mr(k, st->compute), nr = k->gemm_nr, rows = t->rows;
    mh_rows ksrc = mh_drv_kv_rows(st, 0, (size_t)t->b, (size_t)t->s, j0);
    if (nx) ksrc.next = nx->k, ksrc.next_ld = nx->k_ld;
    if (t->direct_qk) { /* chunks the kernel takes, run by run (mh_drv_qk_run) */
        for (size_t c0 = 0, n; c0 < nc; c0 += n) {
            n = mh_min_size(k->attn_kv_tile, nc - c0);
            mh_drv_qk_run(st, t, &ksrc, j0, c0, n, sc);
        }
        if (st->bias) st->bias(st, t, j0, nc, sc->s, tk);
        step_rows(st, t, j0, 0, nc, 0, rows, softmax, sc);
        return;
    }
    const float* kt = kt_pre;
    if (!kt) {
        pack_tile(st, t, 0, (size_t)t->s, j0, nc, &ksrc, sc->kt);
        kt = sc->kt;
    }
    const int by_block = !st->bias;
    /* Where the score step only drops keys (and P is wanted: the probabilities' pass reads
     * every column), a block's columns stop after the last key one of its rows keeps and start
     * at the panel holding the first (a window's lower edge): its GEMMs, score step and softmax
     * skip the rest, which P.V never reads (it takes each row's kept keys: pv_rows). */
    const int trim = softmax && by_block && mh_score_only_drops(&t->blk) && mh_score_tile_partial(&t->blk, j0, nc);
    sc->fetch = kt_pre ? sc->ahead_k
                       : next_tile_fetch(st, t, 0, j0, (rows + mr - 1) / mr * ((nc + nr - 1) / nr) * dqk);
    for (size_t r = 0, m; r < rows; r += m) {
        m = mh_drv_block_len(rows, mr, r);
        const int dropped = !trim && mh_score_rows_dropped(&t->blk, r, m, j0); /* before the diagonal: all -inf */
        size_t kept = trim ? 0 : nc, from = trim ? nc : 0;
        for (size_t i = r; i < r + m && kept < nc; i++) {
            const size_t n = mh_score_row_cols(&t->blk, i, j0, nc);
            kept = n > kept ? n : kept;
        }
        for (size_t i = r; i < r + m && from > 0; i++) {
            const size_t f = mh_score_row_first(&t->blk, i, j0, nc);
            from = f < from ? f : from;
        }
        from = from < kept ? from / nr * nr : 0; /* a panel's first key (even: bf16 key pairs) */
        for (size_t c0 = from; c0 < kept; c0 += nr) {
            const size_t n = mh_min_size(nr, kept - c0);
            float* srow = sc->s + r * tk + c0;
            if (dropped)
                for (size_t i = 0; i < m; i++)
                    for (size_t j = 0; j < n; j++) srow[i * tk + j] = -INFINITY;
            else
                mh_drv_gemm_scores(st, m, n, r, mh_drv_panel(kt, mh_drv_bf16(st), c0 / nr, dqk, nr), srow, sc);
        }
        if (by_block) step_rows(st, t, j0, from, kept, r, m, softmax, sc);
    }
    if (kt_pre) sc->ahead_k = sc->fetch;
    if (by_block) return;
    st->bias(st, t, j0, nc, sc->s, tk);
    step_rows(st, t, j0, 0, nc, 0, rows, softmax, sc);
}

/* Rows x from key c0 on. */
static mh_rows rows_from(mh_rows x, size_t c0) {
    x.data = mh_dtype_at(x.data, x.dtype, (ptrdiff_t)c0 * x.ld);
    if (x.scale) x.scale += (ptrdiff_t)c0 * x.ld_scale;
    return x;
}

/* 1 if keys [lo, hi) of V, columns [d0, d0 + nw), hold a NaN or inf: read from the packed
 * panel when there is one (in cache, unlike V). */
static int v_keys_nonfinite(const mh_drv_stage* st, const void* panel, const mh_rows* vsrc, size_t lo, size_t hi,
                            size_t d0, size_t nw) {
    if (lo >= hi) return 0;
    return panel ? mh_drv_panel_nonfinite(st, panel, lo, hi, nw) : st->k->v_nonfinite(lo, hi, d0, d0 + nw, vsrc);
}

/* P.V into rows [r, r + m), columns [d0, d0 + nw) of o, from one V source: direct (vt NULL,
 * all columns) or the GEMM panel at d0 of a V tile packed for cols keys (finite: known to hold
 * no NaN or inf, which skips the checks below). Each row uses only
 * the keys it keeps, one interval (its causal or window end, its window start), so a NaN or
 * inf in a dropped key's V adds nothing (its P is 0, but 0 * NaN = NaN). The rows share one
 * call over the keys any of them keeps, which leaves finite results bitwise unchanged (a P = 0
 * term adds an exact zero; pv_direct's groups of MH_PV_GROUP keys stay on the same keys of the
 * tile, a call from an unaligned key taking the keys up to the next multiple first); only when
 * V is not finite on keys some of the rows drop do they go one by one. (bf16 panels hold key
 * pairs: from an odd first key, the call also takes the key before it, with P = 0.) */
static void pv_rows(const mh_drv_stage* st, const mh_drv_task* t, const mh_rows* vsrc, const float* vt, size_t cols,
                    int finite, size_t r, size_t m, size_t d0, size_t nw, int64_t j0, size_t nc, int inside,
                    mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    const size_t dv = st->dv;
    /* rows keep [f, n) each: f in [f_lo, f_hi], n in [lo, hi]; inside the band all nc keys */
    size_t f_lo = inside ? 0 : nc, f_hi = 0, lo = nc, hi = inside ? nc : 0;
    int some_empty = 0;
    for (size_t i = r; !inside && i < r + m; i++) {
        const size_t f = mh_score_row_first(&t->blk, i, j0, nc), n = mh_score_row_cols(&t->blk, i, j0, nc);
        if (n <= f) {
            some_empty = 1;
            continue;
        }
        f_lo = f < f_lo ? f : f_lo, f_hi = f > f_hi ? f : f_hi;
        lo = n < lo ? n : lo, hi = n > hi ? n : hi;
    }
    if (hi == 0) return; /* every key dropped: P = 0 and alpha = 1 */
    const void* panel = vt ? mh_drv_panel(vt, mh_drv_bf16(st), d0 / k->gemm_nr, cols, k->gemm_nr) : NULL;
    /* the keys some rows drop: all the shared ones when a row keeps none, else the two ends */
    const int by_row = finite       ? 0
                       : some_empty ? v_keys_nonfinite(st, panel, vsrc, f_lo, hi, d0, nw)
                                    : v_keys_nonfinite(st, panel, vsrc, f_lo, f_hi, d0, nw) ||
                                          v_keys_nonfinite(st, panel, vsrc, lo, hi, d0, nw);
    for (size_t i = r; i < r + m; i += by_row ? 1 : m) {
        const size_t rows = by_row ? 1 : m;
        const size_t f = by_row ? mh_score_row_first(&t->blk, i, j0, nc) : f_lo;
        const size_t n = by_row ? mh_score_row_cols(&t->blk, i, j0, nc) : hi;
        if (n <= f) continue; /* the row keeps none of these keys: P = 0 and alpha = 1 */
        if (vt) {
            mh_drv_gemm_pv(st, rows, nw, f, n, i, panel, sc->o + i * dv + d0, sc);
        } else { /* pv_direct's groups on the tile's multiples of MH_PV_GROUP, wherever the call starts */
            const size_t cut = mh_min_size(n, (f + MH_PV_GROUP - 1) / MH_PV_GROUP * MH_PV_GROUP);
            const mh_rows vf = rows_from(*vsrc, f), vc = rows_from(*vsrc, cut);
            if (cut > f) pv_direct_keys(st, &vf, rows, i, f, cut, sc->alpha + i, sc);
            if (n > cut) pv_direct_keys(st, &vc, rows, i, cut, n, cut > f ? sc->ones + i : sc->alpha + i, sc);
        }
    }
}

/* o = alpha * o + P.V for keys [j0, j0 + nc), against the stream's V (all rows) or each
 * head's V (its nq rows). vt_pre, if given, is the tile packed for vt_cols (>= nc) keys from j0,
 * vt_bad its V heads' flags (cw.vt_bad). */
static void accumulate_pv(const mh_drv_stage* st, const mh_drv_task* t, const float* vt_pre,
                          const unsigned char* vt_bad, size_t vt_cols, int64_t j0, size_t nc,
                          const mh_drv_next_tile* nx,
                          mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    const size_t dv = st->dv, mr = mh_kernels_gemm_mr(k, st->compute), nr = k->gemm_nr;
    const size_t n_v = v_heads(st), per = t->rows / n_v;
    const int inside = !mh_score_tile_partial(&t->blk, j0, nc); /* no per-row key counts needed */
    for (size_t hv = 0; hv < n_v; hv++) {
        const size_t r0 = hv * per, r1 = r0 + per;
        const size_t head = st->v_per_head ? t->h0 + hv : (size_t)t->s;
        mh_rows vsrc = mh_drv_kv_rows(st, 1, (size_t)t->b, head, j0);
        vsrc.interleaved = n_v > 1;
        if (nx && n_v == 1) vsrc.next = nx->v, vsrc.next_ld = nx->v_ld;
        if (t->direct_pv && inside) { /* run by run (mh_drv_pv_run) */
            for (size_t c0 = 0, n; c0 < nc; c0 += n) {
                n = mh_min_size(k->attn_kv_tile, nc - c0);
                mh_drv_pv_run(st, t, &vsrc, head, j0, c0, n, r0, per, sc);
            }
            continue;
        }
        if (t->direct_pv) { /* rows keeping different keys: several queries per head, whose stages
                               keep tiles of attn_kv_tile keys (core/attention.c), in one block */
            mh_rows view;
            const mh_rows* vd = mh_drv_bf16_rows(st, &vsrc, nc, dv, sc->vt, &view);
            for (size_t r = r0, m; r < r1; r += m) {
                m = mh_drv_direct_len(k, per, r - r0);
                pv_rows(st, t, vd, NULL, 0, 0, r, m, 0, dv, j0, nc, inside, sc);
            }
            continue;
        }
        const float* vt = vt_pre ? vt_pre + hv * vt_floats(st) : NULL;
        size_t cols = vt_cols;
        if (!vt) {
            pack_tile(st, t, 1, head, j0, nc, &vsrc, sc->vt);
            vt = sc->vt, cols = nc;
        }
        sc->fetch = vt_pre  ? sc->ahead_v
                    : n_v > 1 ? mh_fetch_begin(NULL)
                              : next_tile_fetch(st, t, 1, j0, (per + mr - 1) / mr * ((dv + nr - 1) / nr) * nc);
        for (size_t d0 = 0; d0 < dv; d0 += nr)
            for (size_t r = r0, m; r < r1; r += m) {
                m = mh_drv_block_len(per, mr, r - r0);
                pv_rows(st, t, &vsrc, vt, cols, vt_bad && !vt_bad[hv], r, m, d0, mh_min_size(nr, dv - d0), j0, nc,
                        inside, sc);
            }
        if (vt_pre) sc->ahead_v = sc->fetch;
    }
}

void mh_drv_attend_tile(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc,
                        const mh_drv_next_tile* nx, mh_drv_scratch* sc) {
    const size_t tk = st->tk;
    const float* kt = mh_drv_packed(st, sc, 0, (size_t)t->b, (size_t)t->s, j0);
    const float* vt = mh_drv_packed(st, sc, 1, (size_t)t->b, (size_t)t->s, j0);
    const unsigned char* vt_bad = packed_v_bad(st, sc, (size_t)t->b, (size_t)t->s, j0);
    score_tile(st, t, kt, j0, nc, nx, 1, sc);
    accumulate_pv(st, t, vt, vt_bad, vt ? mh_min_size(tk, (size_t)st->n_kv - (size_t)j0) : 0, j0, nc, nx, sc);
}

/* Keys per turn of a pipelined tile (attend_pipelined) of `rows` query rows per K/V row: one
 * or two rows (MHA, pairs of heads) take about PIPE_ELEMS elements of each K (and V) row set, in
 * whole groups of pv_direct's sum (MH_PV_GROUP keys, so a turn splits P.V only between groups:
 * the same bits as a whole tile), at least one group: 16 keys above 64 dims, 32 at 43-64, 64 at
 * 26-32. Each turn costs two kernel calls and P.V's load, rescale and store of the rows'
 * outputs, which a narrow head's 16 keys do not amortise. Zen 5, MHA at 32K keys, 1 thread,
 * mh_ab against 16 keys a turn: 64 dims with 32 keys 0.91-0.95x the time (f16, H16; 0.92x at
 * 4K keys, 0.91x in cache, 0.75-0.91x on 2 threads, AVX2 0.96x), int8 0.88-0.91x (0.98x at 4K
 * keys), f32 0.86x, bf16 0.96x, two rows per K/V row 0.98x; 32 dims with 64 keys f16 0.90x,
 * int8 0.99x. Wider heads keep 16: at 80 dims 32 keys took 0.99x, at 96 dims 1.03-1.07x, at
 * 128 dims 1.05x (f16; int8 0.98-0.99x); on Zen 4, 128 dims, 8 keys did as well as 16 and 32
 * worse; on Zen 5, 128 dims, 8 keys 1.10-1.17x, 64 keys 1.09-1.28x. Grouped heads (from
 * MH_NEAR_PREFETCH_ROWS rows, whose rows the prefetch rules fetch ahead) keep 16 at every
 * width: at 64 dims 32 keys took 1.01-1.07x with three to five rows (f16; int8 0.97x), and 32
 * or 64 keys 1.06-1.10x at 128 dims (docs/kernels.md, "Decode kernels"). */
#define PIPE_ELEMS 2048
static size_t pipe_keys(const mh_drv_stage* st, size_t rows) {
    const size_t d = st->dqk > st->dv ? st->dqk : st->dv;
    const size_t keys = PIPE_ELEMS / d / MH_PV_GROUP * MH_PV_GROUP;
    return rows < MH_NEAR_PREFETCH_ROWS && keys > MH_PV_GROUP ? keys : MH_PV_GROUP;
}

/* Whether attend_pipelined takes the task: a task on the direct kernels (fewer query rows than
 * attn_direct_rows: MHA, and grouped heads whose group fits), one V per stream, no bias hook. */
static int pipelined(const mh_drv_stage* st, const mh_drv_task* t) {
    return t->direct_qk && t->direct_pv && !st->bias && !st->v_per_head && t->rows < st->k->attn_direct_rows;
}

/* Whether a pipelined decode's turns prefetch each other's rows (MH_PREFETCH_TURN,
 * kernels/decode_prefetch.h): K and V rows alike (dtype, ld, width) and a turn of K rows
 * spanning MH_TURN_PREFETCH_BYTES or more. */
static int turns_prefetch(const mh_drv_stage* st, const mh_rows* ks, const mh_rows* vs, size_t turn) {
    return ks->prefetch == MH_PREFETCH_TURN && ks->dtype == vs->dtype && ks->ld == vs->ld && st->dqk == st->dv &&
           turn * st->dqk * mh_dtype_size(ks->dtype) >= MH_TURN_PREFETCH_BYTES;
}

/* attend on the direct kernels (decode): each tile's P.V runs one tile late, in turns of
 * pipe_keys() keys with the next tile's Q.K^T, so K and V stream from memory together instead
 * of in alternate phases of a whole tile each (f16 decode at 32K keys, Zen 4: MHA, the kernels
 * alone, 17-19 ms in phases, 16 ms in turns; GQA with four query rows per K/V head, 8.0 ms in
 * phases, 7.0 ms in turns; docs/kernels.md, "Decode kernels"). A tile whose
 * rows keep different key counts (mh_score_tile_partial) gets its whole P.V from
 * accumulate_pv before the next tile. The arithmetic is the unpipelined one's: a tile's first
 * turn of P.V rescales o by its alpha, the later turns by 1, which is exact. Under
 * MH_PREFETCH_TURN each turn's kernel names the other stream's next turn in mh_rows.next. */
static void attend_pipelined(const mh_drv_stage* st, const mh_drv_task* t, int64_t j_lo, int64_t j_hi,
                             mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    const size_t tk = st->tk, dqk = st->dqk, dv = st->dv, rows = t->rows, turn = pipe_keys(st, rows);
    mh_drv_scratch cur = *sc, prev = *sc; /* the tile being scored, the tile whose P.V is owed */
    prev.s = sc->s_prev, prev.alpha = sc->alpha_prev;
    int64_t pj0 = 0;
    size_t pnc = 0; /* keys of the owed tile, 0: none */
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += (int64_t)tk) {
        const size_t nc = mh_min_size(tk, (size_t)(j_hi - j0));
        if (pnc && mh_score_tile_partial(&t->blk, pj0, pnc)) {
            accumulate_pv(st, t, NULL, NULL, 0, pj0, pnc, NULL, &prev);
            pnc = 0;
        }
        const mh_rows ks = mh_drv_kv_rows(st, 0, (size_t)t->b, (size_t)t->s, j0);
        const mh_rows vs = mh_drv_kv_rows(st, 1, (size_t)t->b, (size_t)t->s, pnc ? pj0 : j0);
        const int across = turns_prefetch(st, &ks, &vs, turn);
        for (size_t c0 = 0; c0 < nc || c0 < pnc; c0 += turn) {
            if (c0 < nc) { /* bf16 compute on other storage: the turn's rows rounded (driver_bf16.h) */
                const size_t n = mh_min_size(turn, nc - c0);
                mh_rows kc = rows_from(ks, c0);
                if (across && c0 < pnc) kc.next = rows_from(vs, c0).data; /* this turn's P.V */
                mh_rows view;
                k->qk_direct(rows, n, dqk, sc->q, dqk, mh_drv_bf16_rows(st, &kc, n, dqk, sc->kt, &view), cur.s + c0, tk);
            }
            if (c0 < pnc) {
                const size_t n = mh_min_size(turn, pnc - c0);
                mh_rows vc = rows_from(vs, c0);
                if (across && c0 + turn < nc) vc.next = rows_from(ks, c0 + turn).data; /* the next Q.K^T */
                mh_rows view;
                k->pv_direct(rows, n, dv, prev.s + c0, tk, mh_drv_bf16_rows(st, &vc, n, dv, sc->vt, &view),
                             c0 ? sc->ones : prev.alpha, sc->o, dv);
            }
        }
        step_rows(st, t, j0, 0, nc, 0, rows, 1, &cur);
        float *s = cur.s, *alpha = cur.alpha; /* this tile's P.V is now the owed one */
        cur.s = prev.s, cur.alpha = prev.alpha;
        prev.s = s, prev.alpha = alpha;
        pj0 = j0, pnc = nc;
    }
    if (pnc) accumulate_pv(st, t, NULL, NULL, 0, pj0, pnc, NULL, &prev);
}

/* Online softmax over keys [j_lo, j_hi) of the task into sc->m, sc->l, sc->o (unnormalised).
 * With prepacked tiles, tiles are the call's fixed grid of tk keys: the range starts at the
 * tile holding j_lo, and keys before j_lo in it are dropped by the score step. */
static void attend(const mh_drv_call* c, const mh_drv_task* t, int64_t j_lo, int64_t j_hi, mh_drv_scratch* sc) {
    const mh_drv_stage* st = &c->st;
    const size_t tk = st->tk;
    mh_drv_start_rows(st, t, t->rows, sc);
    if (pipelined(st, t)) {
        attend_pipelined(st, t, j_lo, j_hi, sc);
        return;
    }
    if (c->cw.kt_all && j_lo > 0) j_lo -= j_lo % (int64_t)tk;
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += (int64_t)tk)
        mh_drv_attend_tile(st, t, j0, mh_min_size(tk, (size_t)(j_hi - j0)), NULL, sc);
}

float* mh_drv_out_row(const mh_drv_stage* st, const mh_drv_task* t, size_t hh, size_t ii) {
    const ptrdiff_t tok = t->q_row ? (ptrdiff_t)t->q_row[ii] : (ptrdiff_t)(t->i0 + ii);
    return st->o.data + t->b * st->o.stride_batch + tok * st->o.stride_token +
           (ptrdiff_t)(t->h0 + hh) * st->o.stride_head;
}

/* Folds in the sink logit, normalises and writes the task's output rows from (m, l, acc) (acc
 * rows dv apart) and their log-sum-exps; leaves the final m and l for the probabilities. A row
 * that kept no key (m = -inf) gets zeros (log-sum-exp: the sink, or -inf). Rows are requested
 * MH_DRV_ROWS_AHEAD rows before they are written. */
static void finish(const mh_drv_stage* st, const mh_drv_task* t, float* m, float* l,
                   const float* acc_base) {
    const size_t dv = st->dv, H = st->hg * (size_t)st->streams;
    const float* sinks = st->opt->sinks ? st->opt->sinks + t->h0 : NULL;
    const size_t bytes = dv * sizeof(float);
    for (size_t r = 0; r < t->rows && r < MH_DRV_ROWS_AHEAD; r++) mh_drv_prefetch(mh_drv_out_row(st, t, r / t->nq, r % t->nq), bytes, 1);
    for (size_t r = 0; r < t->rows; r++) {
        const size_t ra = r + MH_DRV_ROWS_AHEAD;
        if (ra < t->rows) mh_drv_prefetch(mh_drv_out_row(st, t, ra / t->nq, ra % t->nq), bytes, 1);
        const size_t hh = r / t->nq, ii = r % t->nq, tok = t->q_row ? (size_t)t->q_row[ii] : t->i0 + ii;
        float* dst = mh_drv_out_row(st, t, hh, ii);
        const float* acc = acc_base + r * dv;
        /* lse [B, H, N] (a gathered call's starts at its head and sequence, rows at their tokens) */
        float* lse = st->opt->lse ? st->opt->lse + ((size_t)t->b * H + t->h0 + hh) * (size_t)st->n_q + tok : NULL;
        if (m[r] == -INFINITY) {
            memset(dst, 0, dv * sizeof(float));
            if (lse) *lse = sinks ? sinks[hh] : -INFINITY;
            continue;
        }
        const float a = sinks ? mh_fold_sink(&m[r], &l[r], sinks[hh]) : 1.0f;
        if (lse) *lse = m[r] + logf(l[r]);
        st->k->scale_row(dv, acc, st->fused_norm ? a / l[r] : a * (1.0f / l[r]), dst);
        if (t->o_scale) st->k->scale_row(dv, dst, t->o_scale[ii], dst);
    }
}

/* probs[b, h, i, :] for the task, from the final max m and sum l (zeros where dropped). */
static void write_probs(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc) {
    const size_t tk = st->tk, M = (size_t)st->n_kv, N = (size_t)st->n_q, H = st->hg * (size_t)st->streams;
    float* probs = st->opt->probs;
    for (size_t r = 0; r < t->rows; r++) {
        const size_t h = t->h0 + r / t->nq, i = t->i0 + r % t->nq;
        memset(probs + (((size_t)t->b * H + h) * N + i) * M, 0, M * sizeof(float));
    }
    for (int64_t j0 = t->j_begin; j0 < t->j_end; j0 += (int64_t)tk) {
        const size_t nc = mh_min_size(tk, (size_t)(t->j_end - j0));
        score_tile(st, t, NULL, j0, nc, NULL, 0, sc);
        for (size_t r = 0; r < t->rows; r++) {
            if (sc->m[r] == -INFINITY) continue;
            const size_t h = t->h0 + r / t->nq, i = t->i0 + r % t->nq;
            float* prow = probs + (((size_t)t->b * H + h) * N + i) * M + j0;
            const float inv_l = 1.0f / sc->l[r];
            for (size_t j = 0; j < nc; j++) prow[j] = expf(sc->s[r * tk + j] - sc->m[r]) * inv_l;
        }
    }
}

void mh_drv_one_pass_item(const mh_drv_call* c, size_t item, mh_drv_scratch* sc) {
    const size_t ti = item / c->split.n_split, ci = item % c->split.n_split;
    const mh_drv_task t = mh_drv_make_task(c, ti);
    if (!t.active) return;
    if (c->split.n_split == 1) {
        attend(c, &t, t.j_begin, t.j_end, sc);
        finish(&c->st, &t, sc->m, sc->l, sc->o);
        if (c->st.opt->probs) write_probs(&c->st, &t, sc);
        return;
    }
    int64_t lo, hi;
    mh_split_chunk(&c->split, ci, t.j_begin, t.j_end, c->st.tk, &lo, &hi);
    attend(c, &t, lo, hi, sc);
    mh_split_store(&c->split, ti, ci, sc->m, sc->l, sc->o);
}

void mh_drv_one_pass_merge(const mh_drv_call* c, int tid, int nth) {
    for (size_t ti = (size_t)tid; ti < c->n_tasks; ti += (size_t)nth) {
        const mh_drv_task t = mh_drv_make_task(c, ti);
        if (!t.active) continue;
        float* base = mh_split_merge(&c->split, ti);
        finish(&c->st, &t, base, base + t.rows, base + 2 * t.rows);
    }
}
