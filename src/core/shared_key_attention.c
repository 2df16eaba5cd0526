/*
 * The CollabHead stage of the driver (core/driver.h): attention over one key stream shared
 * by all heads.
 *
 * A task is (batch, query tile) and holds the rows of ALL heads for its queries, head-major
 * (r = h * tq + i), each row the query mixed with its head's row, q~_i * m_h, pre-scaled. The
 * scores of every head are then one GEMM (or one direct pass for decode) against the shared
 * key tile, so each K tile is read once for all heads; the content bias bias[j][h] is added
 * per (head, key); P.V runs per head on that head's values.
 */
#include "core/shared_key_attention.h"

#include "core/driver.h"
#include "core/split_kv.h"
#include "util/checked.h"

/* Decode's H rows share every key: packing the tile once (converted to f32) and one GEMM
 * beat the direct kernel, which reconverts each key for every chunk of rows it takes; P.V
 * runs per head, direct while a head has few rows. */
static void task_hook(const mh_drv_stage* st, mh_drv_task* t) {
    mh_drv_block(st, st->opt, NULL, t);
    t->direct_qk = t->rows < st->k->attn_direct_rows;
    t->direct_pv = t->nq < st->k->attn_direct_rows;
}

/* q^_{i,h} = q~_i * m_h * scale, rows head-major. */
static void load_q(const mh_drv_stage* st, const mh_drv_task* t, mh_drv_scratch* sc) {
    const mh_shared_key_problem* p = st->ctx;
    const size_t dqk = st->dqk;
    for (size_t r = 0; r < t->rows; r++) {
        const float* q = p->q + ((size_t)t->b * (size_t)p->n_q + t->i0 + r % t->nq) * dqk;
        const float* mix = p->mix + (r / t->nq) * dqk;
        for (size_t d = 0; d < dqk; d++) sc->q[r * dqk + d] = q[d] * mix[d] * p->scale;
    }
}

/* Keys whose bias a head gathers at once (bias_hook). */
#define BIAS_KEYS 256

/* The content bias bias[j][h], scaled like the dot product. Each head's column (H floats apart
 * in bias) is gathered once into a contiguous run that its nq rows then add as vectors (the
 * same sums as adding the column to each row: collab layer prefill N = M = 512 H16, Zen 5,
 * 3.8% of the samples in bf16 compute before). */
static void bias_hook(const mh_drv_stage* st, const mh_drv_task* t, int64_t j0, size_t nc, float* s,
                      size_t lds) {
    const mh_shared_key_problem* p = st->ctx;
    const size_t H = (size_t)p->n_heads;
    const float* bias = p->bias + t->b * p->bias_stride_batch + j0 * (int64_t)H;
    float col[BIAS_KEYS];
    for (size_t h = 0; h < H; h++)
        for (size_t c0 = 0; c0 < nc; c0 += BIAS_KEYS) {
            const size_t n = mh_min_size(BIAS_KEYS, nc - c0);
            for (size_t j = 0; j < n; j++) col[j] = p->scale * bias[(c0 + j) * H + h];
            for (size_t i = 0; i < t->nq; i++) {
                float* srow = s + (h * t->nq + i) * lds + c0;
                for (size_t j = 0; j < n; j++) srow[j] += col[j];
            }
        }
}

/* The stage of p (options unset): a task is (batch, query tile) with all H heads; the H heads
 * together fill about attn_block_rows rows. With several query tiles (prefill) and a workspace
 * sized knowing M (prepack_ok), the shared K tiles and every head's V tiles are packed once per
 * call instead of once per query tile. */
static mh_drv_stage make_stage(const mh_kernels* k, const mh_shared_key_problem* p, int prepack_ok) {
    mh_drv_stage st = {0};
    const size_t H = (size_t)p->n_heads, per_head = k->attn_block_rows / H;
    const ptrdiff_t dqk = p->dim_qk, dv = p->head_dim_v;
    st.k = k, st.mode = MH_DRV_ONE_PASS, st.ctx = p;
    st.batch = p->batch, st.streams = 1, st.n_q = p->n_q, st.n_kv = p->n_kv;
    st.hg = H, st.tq = mh_min_size(per_head ? per_head : 1, (size_t)p->n_q), st.tk = k->attn_kv_tile;
    st.dqk = (size_t)dqk, st.dv = (size_t)dv, st.scale = p->scale;
    st.key = (mh_tensor){.data = p->k, .stride_batch = p->k_stride_batch, .stride_token = dqk, .stride_head = 0};
    st.value = p->v, st.v_per_head = 1;
    st.k_dtype = p->k_dtype, st.v_dtype = p->v_dtype;
    st.o = (mh_tensor_out){p->o, (ptrdiff_t)p->n_q * (ptrdiff_t)H * dv, (ptrdiff_t)H * dv, dv};
    st.fused_norm = 1;
    st.pack_heads = 1;
    mh_drv_plan_prepack(&st, prepack_ok);
    st.task = task_hook, st.load_q = load_q, st.bias = bias_hook;
    return st;
}

void* mh_shared_key_attention_carve(const mh_kernels* k, int threads, const mh_shared_key_problem* p,
                                    int prepack_ok, mh_ws* ws) {
    const mh_drv_stage st = make_stage(k, p, prepack_ok);
    return mh_drv_carve(&st, threads, ws);
}

/* As for the GQA family (mh_core_attention_carve_upto): the largest layout for any n_q' <= n_q
 * is the one at n_q or at one full query tile (which reserves the split-KV partials). */
void* mh_shared_key_attention_carve_upto(const mh_kernels* k, int threads,
                                         const mh_shared_key_problem* p, mh_ws* ws) {
    const mh_drv_stage all = make_stage(k, p, 0);
    mh_shared_key_problem one_tile = *p;
    one_tile.n_q = (int)all.tq;
    const mh_drv_stage both[] = {all, make_stage(k, &one_tile, 0)};
    return mh_drv_carve_largest(both, 2, threads, ws);
}

void mh_shared_key_attention(const mh_kernels* k, int threads, const mh_shared_key_problem* p,
                             const mh_attn_options* opt, int prepack_ok, void* ws) {
    mh_drv_stage st = make_stage(k, p, prepack_ok);
    st.opt = opt, st.compute = opt->compute;
    st.split_count = mh_split_count(mh_drv_query_tiles(&st), opt, p->n_kv);
    st.flops = 2.0 * (double)p->batch * p->n_q * p->n_kv * p->n_heads *
               (p->dim_qk + p->head_dim_v); /* upper bound (ignores masks) */
    mh_drv_run(&st, threads, ws);
}
