/*
 * The DCMHA stage of the driver (core/driver.h): tasks are (batch, head group, query tile).
 * Post-composition mixes the normalised probabilities of heads with different normalisers,
 * so the online softmax does not apply; the driver's two-pass modes run, key tile by key tile:
 *   pass 1 (exp_tile): Q.K^T for all Hg heads of the group, pre-composition across heads
 *           (kernel head_mix), the mask, then softmax_tile: the tile becomes
 *           exp(s - running max) and the running max/sum advance;
 *   pass 2 (out_tile): with each row's final max m and sum l, the tile's exponentials times
 *           exp(running max - m) / l (the composition's per-row input scale) are
 *           post-composed and accumulated as P'.V per head.
 * Prefill materialises pass 1's tiles per worker and prepacks K/V; decode keeps them in the
 * driver's fixed-size store or recomputes them, and splits its keys.
 */
#include "core/dcmha_attention.h"

#include <math.h>
#include <string.h>

#include "core/driver.h"
#include "core/driver_bf16.h"
#include "core/split_kv.h"
#include "util/checked.h"
#include "util/dtype.h"

/* Keys per compute tile, rounded to a multiple of the GEMM's NR. Prefill: a tile of all Hg
 * heads' scores of a task (tq rows of tk keys per head), raw and composed, stays in L2.
 * Two-pass: as many keys as TWO_PASS_TILE_FLOATS allow over the task's rows, so each head's K/V
 * is read in long runs (a run restarts the prefetchers), at most TWO_PASS_MAX_KEYS. */
#define PREFILL_TILE_KEYS 64
#define TWO_PASS_TILE_FLOATS ((size_t)65536)
#define TWO_PASS_MAX_KEYS ((size_t)1024)
/* Query rows per task: up to MAX_ROW_BLOCKS GEMM row blocks, so each K/V tile a task packs or
 * streams serves that many rows; a materialised task's kept tiles stay within SCORE_BUDGET
 * bytes unless one row block alone needs more. */
#define MAX_ROW_BLOCKS 16
#define SCORE_BUDGET ((size_t)32 << 20)

void mh_dcmha_store_key(const mh_dcmha_key_factors* kf, int b, size_t pos, const float* pre, const float* post) {
    const size_t tk = MH_DCMHA_KEY_TILE, j0 = pos / tk * tk, n = mh_min_size(tk, kf->cols - j0), c = pos - j0;
    float* tile = kf->data + (ptrdiff_t)b * kf->stride_batch + j0 * 2 * kf->branch;
    for (size_t r = 0; r < kf->branch; r++) tile[r * n + c] = pre[r], tile[(kf->branch + r) * n + c] = post[r];
}

/* A score tile holds head h's tq rows of tk keys at h * hs. The composition reads one row of
 * every head at a time: one cache line more than tq * tk puts the heads' rows in different L1
 * sets (tq * tk floats is a multiple of 4 KiB for most shapes, so they would all share one). */
#define TILE_PAD 16 /* floats */

/* n rounded to a multiple of NR, at least NR. */
static size_t panel_keys(const mh_kernels* k, size_t n) { return n < k->gemm_nr ? k->gemm_nr : n / k->gemm_nr * k->gemm_nr; }

/* The stage of p (hooks and geometry): hg heads per task, tq queries, tk keys per tile. */
static mh_drv_stage make_stage(const mh_kernels* k, const mh_dcmha_problem* p, int materialise) {
    mh_drv_stage st = {0};
    const size_t hg = (size_t)(p->n_heads / p->groups), dv = (size_t)p->head_dim_v;
    size_t blocks = MAX_ROW_BLOCKS, tk = 0;
    if (materialise) {
        tk = panel_keys(k, PREFILL_TILE_KEYS);
        /* the worker's kept tiles for tq rows: hg * tq * (m_pad + n_tiles) floats plus the
         * tiles' padding, TILE_PAD * hg * n_tiles */
        const size_t n_tiles = ((size_t)p->n_kv + tk - 1) / tk;
        const size_t padding = TILE_PAD * hg * n_tiles * sizeof(float);
        const size_t per_block = hg * k->gemm_mr * (n_tiles * tk + n_tiles) * sizeof(float);
        blocks = SCORE_BUDGET > padding ? (SCORE_BUDGET - padding) / per_block : 1;
        blocks = blocks < 1 ? 1 : blocks > MAX_ROW_BLOCKS ? MAX_ROW_BLOCKS : blocks;
    }
    st.tq = mh_min_size(blocks * k->gemm_mr, (size_t)p->n_q);
    if (!materialise) tk = panel_keys(k, mh_min_size(TWO_PASS_TILE_FLOATS / (hg * st.tq), TWO_PASS_MAX_KEYS));
    st.k = k, st.mode = materialise ? MH_DRV_MATERIALISED : MH_DRV_TWO_PASS, st.ctx = p;
    st.batch = p->batch, st.streams = p->groups, st.n_q = p->n_q, st.n_kv = p->n_kv;
    st.hg = hg, st.tk = tk, st.dqk = (size_t)p->head_dim_qk, st.dv = dv;
    st.scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_dim_qk);
    st.key = p->k, st.value = p->v, st.k_dtype = p->k_dtype, st.v_dtype = p->v_dtype;
    const ptrdiff_t H = p->n_heads;
    st.o = (mh_tensor_out){p->o, (ptrdiff_t)p->n_q * H * (ptrdiff_t)dv, H * (ptrdiff_t)dv, (ptrdiff_t)dv};
    st.prepack = materialise, st.pack_heads = p->n_heads, st.compute = p->compute;
    st.tile_floats = hg * (st.tq * tk + TILE_PAD);
    return st;
}

/* Head stride of a score tile [Hg][hs], rows tk apart. */
static size_t head_stride(const mh_drv_stage* st) { return st->tq * st->tk + TILE_PAD; }

/* Packed tiles (prepacked per call, or packed here per head for a two-pass task of enough
 * rows) feed the GEMM micro-kernels; a task of few rows (decode) reads K/V in place with the
 * direct kernels (in bf16 compute on bf16 storage only: mh_drv_make_task). */
static void task_hook(const mh_drv_stage* st, mh_drv_task* t) {
    const mh_dcmha_problem* p = st->ctx;
    t->j_begin = 0;
    t->j_end = p->n_kv;
    const int64_t last = p->q_pos + (int64_t)(t->i0 + t->nq) - 1;
    if (p->causal && last + 1 < t->j_end) t->j_end = last + 1;
    t->direct_qk = t->direct_pv = !st->prepack && t->nq < st->k->attn_direct_rows;
}

/* Gathers the task's queries (pre-scaled) into sc->q, rows head-major; rows past t->nq (the
 * last, short query tile) are zero, and so is the score tile t1 (for the GEMMs). */
static void load_q(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc) {
    const mh_dcmha_problem* p = st->ctx;
    const size_t d = st->dqk, tq = st->tq;
    const float* q = (const float*)p->q.data;
    memset(sc->t1, 0, st->tile_floats * sizeof(float));
    for (size_t h = 0; h < st->hg; h++)
        for (size_t i = 0; i < tq; i++) {
            float* dst = sc->q + (h * tq + i) * d;
            if (i >= t->nq) {
                memset(dst, 0, d * sizeof(float));
                continue;
            }
            const float* src = q + (ptrdiff_t)t->b * p->q.stride_batch +
                               (ptrdiff_t)(t->i0 + i) * p->q.stride_token +
                               (ptrdiff_t)(t->h0 + h) * p->q.stride_head;
            for (size_t dd = 0; dd < d; dd++) dst[dd] = src[dd] * st->scale;
        }
}

/* K (or V) rows of head h of the task from key j0, in the storage dtype. */
static mh_rows kv_rows(const mh_drv_stage* st, const mh_tensor* x, mh_dtype dt, const mh_drv_task* t, size_t h,
                       int64_t j0) {
    return mh_drv_rows(st, x, NULL, dt, (size_t)t->b, t->h0 + h, j0);
}

/* Keys of [j0, j0 + nc) that query row i of the task may keep (a prefix: causality drops the
 * rest); for a block of rows, its last row's count covers them all. */
static size_t kept(const mh_drv_stage* st, const mh_drv_task* t, size_t i, int64_t j0, size_t nc) {
    const mh_dcmha_problem* p = st->ctx;
    if (!p->causal) return nc;
    const int64_t n = p->q_pos + (int64_t)(t->i0 + i) + 1 - j0;
    return n <= 0 ? 0 : (size_t)n < nc ? (size_t)n : nc;
}

/* P.V runs over key chunks of this many so the V panel stays in L1 across the row blocks. */
#define PV_KEYS 64

/* Raw scores of keys [j0, j0 + nc) for every head of the task into the score tile sc->t1. */
static void qk_tile(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    const mh_dcmha_problem* p = st->ctx;
    const size_t d = (size_t)p->head_dim_qk, tq = st->tq, tk = st->tk, nr = k->gemm_nr, mr = k->gemm_mr;
    for (size_t h = 0; h < st->hg; h++) {
        const float* qh = sc->q + h * tq * d;
        float* s = sc->t1 + h * head_stride(st);
        const mh_rows ks = kv_rows(st, &p->k, p->k_dtype, t, h, j0);
        if (!t->direct_qk) {
            const float* kt = mh_drv_packed(st, sc, 0, (size_t)t->b, t->h0 + h, j0);
            if (!kt) {
                mh_drv_pack_k(st, nc, &ks, sc->kt);
                kt = sc->kt;
            }
            for (size_t c0 = 0; c0 < nc; c0 += nr)
                for (size_t r = 0; r < t->nq; r += mr) {
                    const size_t m = mh_min_size(mr, t->nq - r);
                    if (c0 < kept(st, t, r + m - 1, j0, nc)) /* else: all dropped, never read */
                        mh_drv_gemm_scores(st, m, mh_min_size(nr, nc - c0), h * tq + r,
                                           mh_drv_panel(kt, mh_drv_bf16(st), c0 / nr, d, nr), s + r * tk + c0, sc);
                }
        } else {
            const size_t step = k->attn_direct_rows - 1;
            for (size_t r = 0; r < t->nq; r += step)
                k->qk_direct(mh_min_size(step, t->nq - r), nc, d, qh + r * d, d, &ks, s + r * tk, tk);
        }
    }
}

/* o [rows][dv] += P' [rows][n keys from k0] . V for nw columns of a V panel (f32: P' of head
 * h in sc->t1; bf16: rounded in sc->pb, the panel in k-pairs, k0 even). */
static void pv_gemm(const mh_drv_stage* st, size_t rows, size_t nw, size_t n, size_t h, size_t i, size_t k0,
                    const void* panel, float* o, mh_drv_scratch* sc) {
    const size_t tk = st->tk, nr = st->k->gemm_nr, at = h * head_stride(st) + i * tk + k0;
    if (mh_drv_bf16(st))
        st->k->gemm_acc_bf16(rows, nw, n, sc->pb + at, tk, (const uint16_t*)panel + k0 * nr, sc->ones, o, st->dv,
                             NULL);
    else
        st->k->gemm_acc(rows, nw, n, sc->t1 + at, tk, (const float*)panel + k0 * nr, sc->ones, o, st->dv, NULL);
}

/* o += P'.V for keys [j0, j0 + nc), P' in sc->t1 (bf16: also rounded in sc->pb). Each block of
 * rows runs over the keys its last row keeps; when V is not finite on keys an earlier row of
 * the block drops, the rows go one by one over their own keys (P' = 0 times NaN would still
 * give NaN; bf16 panels hold key pairs, so from an odd count the next key comes along). */
static void pv_tile(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, mh_drv_scratch* sc) {
    const mh_kernels* k = st->k;
    const mh_dcmha_problem* p = st->ctx;
    const size_t dv = (size_t)p->head_dim_v, tq = st->tq, tk = st->tk, nr = k->gemm_nr;
    const int gemm = !t->direct_pv;
    const size_t mr = gemm ? k->gemm_mr : k->attn_direct_rows - 1;
    for (size_t h = 0; h < st->hg; h++) {
        const float* ph = sc->t1 + h * head_stride(st);
        float* oh = sc->o + h * tq * dv;
        const mh_rows vs = kv_rows(st, &p->v, p->v_dtype, t, h, j0);
        const float* vt = NULL;
        size_t vt_cols = 0;
        if (gemm) {
            vt = mh_drv_packed(st, sc, 1, (size_t)t->b, t->h0 + h, j0);
            vt_cols = mh_min_size(tk, (size_t)p->n_kv - (size_t)j0); /* keys the packed tile holds */
            if (!vt) {
                mh_drv_pack_v(st, nc, &vs, sc->vt);
                vt = sc->vt, vt_cols = nc;
            }
        }
        for (size_t d0 = 0; d0 < dv; d0 += gemm ? nr : dv) {
            const size_t nw = gemm ? mh_min_size(nr, dv - d0) : dv;
            for (size_t k0 = 0; k0 < nc; k0 += gemm ? PV_KEYS : nc)
                for (size_t r = 0; r < t->nq; r += mr) {
                    const size_t m = mh_min_size(mr, t->nq - r), kb = kept(st, t, r + m - 1, j0, nc);
                    const size_t ka = kept(st, t, r, j0, nc);
                    const int by_row =
                        ka < kb && k->v_nonfinite(ka, kb, d0, d0 + nw, &vs);
                    for (size_t i = r; i < r + m; i += by_row ? 1 : m) {
                        const size_t rows = by_row ? 1 : m, ki = by_row ? kept(st, t, i, j0, nc) : kb;
                        if (k0 >= ki) continue; /* P' is 0 past ki */
                        if (gemm)
                            pv_gemm(st, rows, nw, mh_min_size(PV_KEYS, ki - k0), h, i, k0,
                                    mh_drv_panel(vt, mh_drv_bf16(st), d0 / nr, vt_cols, nr), oh + i * dv + d0, sc);
                        else
                            k->pv_direct(rows, ki, dv, ph + i * tk, tk, &vs, sc->ones, oh + i * dv, dv);
                    }
                }
        }
    }
}

/* The factors of branch `post` (0 = pre, 1 = post) for query row i of the task and the keys
 * of the layout tile starting at jt, from key jt + off. */
static mh_head_mix_factors factors(const mh_drv_stage* st, const mh_drv_task* t, int post, size_t i,
                                   size_t jt, size_t off) {
    const mh_dcmha_problem* p = st->ctx;
    const size_t hg = st->hg, R = (size_t)p->rank, fb = (2 * R + 1) * hg, br = p->kf.branch;
    const float* qrow = p->qf.data + (ptrdiff_t)t->b * p->qf.stride_batch +
                        (ptrdiff_t)(t->i0 + i) * p->qf.stride_token + (post ? p->qf.post : p->qf.pre) +
                        (ptrdiff_t)((size_t)t->s * fb);
    const size_t n = mh_min_size(MH_DCMHA_KEY_TILE, p->kf.cols - jt);
    const float* kw = p->kf.data + (ptrdiff_t)t->b * p->kf.stride_batch + jt * 2 * br +
                      ((post ? br : 0) + (size_t)t->s * fb) * n + off;
    mh_head_mix_factors f = {hg, R, qrow, qrow + R * hg, qrow + 2 * R * hg, NULL,
                            kw, kw + R * hg * n, kw + 2 * R * hg * n, n};
    if (p->wb) f.wb = p->wb + ((size_t)post * (size_t)p->groups + (size_t)t->s) * hg * hg;
    return f;
}

/* Composes query row i of the task over keys [j0, j0 + nc) of branch `post`: a and out point
 * at key j0 of head 0's row (heads lda, ldo apart). One kernel call per layout tile of the
 * key factors (MH_DCMHA_KEY_TILE keys, read row by row, in order). */
static void compose_row(const mh_drv_stage* st, const mh_drv_task* t, int post, size_t i, int64_t j0,
                        size_t nc, const float* a, size_t lda, const float* ascale, float* out, size_t ldo) {
    for (size_t done = 0; done < nc;) {
        const size_t j = (size_t)j0 + done, jt = j / MH_DCMHA_KEY_TILE * MH_DCMHA_KEY_TILE;
        const size_t len = mh_min_size(jt + MH_DCMHA_KEY_TILE - j, nc - done);
        const mh_head_mix_factors f = factors(st, t, post, i, jt, j - jt);
        st->k->head_mix(&f, len, a + done, lda, ascale, out + done, ldo);
        done += len;
    }
}

/* Pre-composed, masked scores of keys [j0, j0 + nc) into the score tile dst. */
static void composed_scores(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, float* dst,
                            mh_drv_scratch* sc) {
    const size_t tk = st->tk, hs = head_stride(st);
    qk_tile(st, t, j0, nc, sc);
    for (size_t i = 0; i < t->nq; i++) {
        const size_t keep = kept(st, t, i, j0, nc);
        compose_row(st, t, 0, i, j0, keep, sc->t1 + i * tk, hs, NULL, dst + i * tk, hs);
        for (size_t h = 0; h < st->hg; h++) /* the mask, after composing: same for every head */
            for (size_t j = keep; j < nc; j++) dst[h * hs + i * tk + j] = -INFINITY;
    }
}

/* The exp_tile hook: the pre-composed scores of keys [j0, j0 + nc) become exponentials in
 * the score tile e (softmax_tile per head; rows past nq of a short tile are skipped), with
 * running max m and sum l per row. */
static void exp_tile(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, float* e, float* m,
                     float* l, mh_drv_scratch* sc) {
    const size_t tq = st->tq;
    composed_scores(st, t, j0, nc, e, sc);
    for (size_t h = 0; h < st->hg; h++)
        st->k->softmax_tile(t->nq, nc, e + h * head_stride(st), st->tk, m + h * tq, l + h * tq, sc->alpha);
}

/* scale[i][h] = exp(mt - max) / sum of row (h, i): turns exponentials relative to the tile's
 * max mt into probabilities (0 where the row had kept no key yet). */
static void tile_scales(const mh_drv_stage* st, const mh_drv_task* t, const float* mt, mh_drv_scratch* sc) {
    const size_t tq = st->tq, hg = st->hg;
    for (size_t h = 0; h < hg; h++)
        for (size_t i = 0; i < t->nq; i++) {
            const size_t r = h * tq + i;
            sc->scale[i * hg + h] = mt[r] == -INFINITY ? 0.0f : expf(mt[r] - sc->m[r]) / sc->l[r];
        }
}


/* The out_tile hook: the probabilities (the exponentials e scaled by tile_scales) are
 * post-composed into sc->t1 and accumulated as P'.V into sc->o. */
static void out_tile(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, const float* e,
                     const float* mt, mh_drv_scratch* sc) {
    const size_t tk = st->tk, hs = head_stride(st);
    tile_scales(st, t, mt, sc);
    for (size_t i = 0; i < t->nq; i++) {
        const size_t keep = kept(st, t, i, j0, nc); /* masked probabilities are 0 and stay 0 */
        float* dst = sc->t1 + i * tk;
        compose_row(st, t, 1, i, j0, keep, e + i * tk, hs, sc->scale + i * st->hg, dst, hs);
        for (size_t h = 0; h < st->hg; h++) {
            memset(dst + h * hs + keep, 0, (nc - keep) * sizeof(float));
            if (mh_drv_bf16(st)) mh_drv_bf16_round_row(st, t->direct_pv, nc, dst + h * hs, sc->pb + h * hs + i * tk);
        }
    }
    pv_tile(st, t, j0, nc, sc);
}

void* mh_dcmha_attention_carve(const mh_kernels* k, int threads, const mh_dcmha_problem* p,
                               int materialise, mh_ws* ws) {
    const mh_drv_stage st = make_stage(k, p, materialise);
    return mh_drv_carve(&st, threads, ws);
}

/* Two-pass layouts grow with the query count except where the key tile shrinks (tk follows the
 * rows of a task up to one full query tile): the largest layout for any n_q' <= n_q is at n_q
 * or at the largest n_q' of some key tile, which these candidates cover. */
void* mh_dcmha_attention_carve_upto(const mh_kernels* k, int threads, const mh_dcmha_problem* p,
                                    mh_ws* ws) {
    mh_dcmha_problem q = *p;
    const size_t full = mh_min_size(MAX_ROW_BLOCKS * k->gemm_mr, (size_t)p->n_q);
    size_t most = 0;
    q.n_q = 1;
    mh_drv_stage last = make_stage(k, &q, 0); /* the stage at n - 1 */
    for (size_t n = 2; n <= full + 1; n++) {
        q.n_q = (int)n;
        const mh_drv_stage st = n <= full ? make_stage(k, &q, 0) : make_stage(k, p, 0);
        if (n > full || st.tk != last.tk) { /* n - 1 is the largest count of its key tile */
            mh_ws m = mh_ws_begin(NULL);
            mh_drv_carve(&last, threads, &m);
            if (m.overflow) ws->overflow = 1;
            most = m.used > most ? m.used : most;
        }
        last = st;
    }
    mh_ws m = mh_ws_begin(NULL); /* last is now the stage at n_q */
    mh_drv_carve(&last, threads, &m);
    if (m.overflow) ws->overflow = 1;
    return mh_ws_take(ws, m.used > most ? m.used : most, 1, 1);
}

void mh_dcmha_attention(const mh_kernels* k, int threads, const mh_dcmha_problem* p, int materialise,
                        void* ws) {
    mh_drv_stage st = make_stage(k, p, materialise);
    st.task = task_hook, st.load_q = load_q, st.exp_tile = exp_tile, st.out_tile = out_tile;
    /* decode shape: split the keys (by the shapes only) */
    st.split_count = materialise ? 1 : mh_split_count(mh_drv_query_tiles(&st), NULL, p->n_kv);
    st.flops = 2.0 * (double)p->batch * p->n_q * p->n_kv * p->n_heads *
               (p->head_dim_qk + p->head_dim_v + 4.0 * p->rank + 2.0);
    mh_drv_run(&st, threads, ws);
}
