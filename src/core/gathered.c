#include "core/gathered.h"

#include "core/score.h"
#include "util/checked.h"
#include "util/dtype.h"

/* The core's view of one head of one sequence with n gathered rows (data pointers unset). */
static mh_attn_problem one_head(const mh_attn_problem* p, int n) {
    mh_attn_problem q = *p;
    const ptrdiff_t dqk = p->head_dim_qk, dv = p->head_dim_v;
    q.batch = 1, q.n_q = n, q.n_heads = 1, q.n_kv_heads = 1;
    q.q = (mh_tensor){.data = NULL, .stride_batch = n * dqk, .stride_token = dqk, .stride_head = dqk};
    q.o = (mh_tensor_out){NULL, n * dv, dv, dv};
    return q;
}

/* x (K or V, storage dtype dt) moved to batch s, head h: its data and, for int8, its scales. */
static void move_to_head(mh_tensor* x, mh_dtype dt, ptrdiff_t s, ptrdiff_t h) {
    x->data = mh_dtype_at(x->data, dt, s * x->stride_batch + h * x->stride_head);
    if (dt == MH_DTYPE_I8) x->scale += s * x->scale_stride_batch + h * x->scale_stride_head;
}

void mh_gathered_carve_plan(const mh_attn_problem* p, mh_ws* ws, mh_gathered* g) {
    const size_t B = (size_t)p->batch, H = (size_t)p->n_heads;
    size_t rows = 0;
    if (!mh_mul3_size(B, (size_t)p->n_q, H, &rows)) ws->overflow = 1;
    g->seg = mh_ws_take(ws, H * B + 1, 1, sizeof(int64_t));
    g->row = mh_ws_take(ws, rows, 1, sizeof(int32_t));
    g->tok = mh_ws_take(ws, rows, 1, sizeof(int32_t));
    g->pos = mh_ws_take(ws, rows, 1, sizeof(int64_t));
    g->gate = mh_ws_take(ws, rows, 1, sizeof(float));
    g->attn = NULL;
}

void mh_gathered_carve(const mh_kernels* k, int threads, const mh_attn_problem* p,
                       int prepack_ok, mh_ws* ws, mh_gathered* g) {
    mh_gathered_carve_plan(p, ws, g);
    const mh_attn_problem q = one_head(p, p->n_q);
    g->attn = mh_core_attention_carve_upto(k, threads, &q, prepack_ok, ws);
}

void mh_gathered_plan(const mh_attn_problem* p, const mh_attn_options* opt, const float* gate,
                      mh_gathered* g) {
    const int B = p->batch, N = p->n_q, H = p->n_heads;
    int64_t e = 0;
    for (int h = 0; h < H; h++)
        for (int s = 0; s < B; s++) {
            const int64_t q0 = mh_score_first_query(opt, s, N, p->n_kv);
            g->seg[h * B + s] = e;
            for (int t = 0; t < N; t++) {
                const int32_t r = s * N + t;
                const float gt = gate[(size_t)r * (size_t)H + (size_t)h];
                if (gt == 0.0f) continue;
                g->row[e] = r;
                g->tok[e] = t;
                g->pos[e] = q0 + t;
                g->gate[e] = gt;
                e++;
            }
        }
    g->seg[H * B] = e;
}

/* The K and V views of the first call after item i (items h * B + s) that has rows: 1, or 0 if
 * none follows. */
static int next_item(const mh_attn_problem* p, const mh_gathered* g, int i, mh_tensor* k, mh_tensor* v) {
    const int B = p->batch, group = p->n_heads / p->n_kv_heads;
    for (int j = i + 1; j < p->n_heads * B; j++) {
        if (g->seg[j + 1] == g->seg[j]) continue;
        *k = p->k, *v = p->v;
        move_to_head(k, p->k_dtype, j % B, (j / B) / group);
        move_to_head(v, p->v_dtype, j % B, (j / B) / group);
        return 1;
    }
    return 0;
}

void mh_gathered_attend(const mh_kernels* k, int threads, const mh_attn_problem* p,
                        const mh_attn_options* opt, int prepack_ok, const mh_gathered* g,
                        const float* qg, float* og) {
    const int B = p->batch, group = p->n_heads / p->n_kv_heads;
    const size_t dqk = (size_t)p->head_dim_qk, dv = (size_t)p->head_dim_v;
    for (int h = 0; h < p->n_heads; h++)
        for (int s = 0; s < B; s++) {
            const int64_t e0 = g->seg[h * B + s], n = g->seg[h * B + s + 1] - e0;
            if (n == 0) continue;
            const ptrdiff_t kvh = h / group;
            mh_attn_problem q = one_head(p, (int)n);
            move_to_head(&q.k, p->k_dtype, s, kvh);
            move_to_head(&q.v, p->v_dtype, s, kvh);
            if (qg) {
                q.q.data = qg + (size_t)e0 * dqk;
                q.o.data = og + (size_t)e0 * dv;
            } else { /* in place: the token rows of p->q and p->o at (s, h) */
                q.q = p->q;
                q.q.data = (const float*)p->q.data + s * p->q.stride_batch + h * p->q.stride_head;
                q.o = p->o;
                q.o.data = p->o.data + s * p->o.stride_batch + h * p->o.stride_head;
            }
            mh_attn_options o = *opt;
            o.kv_len = opt->kv_len ? opt->kv_len + s : NULL;
            o.alibi_slopes = opt->alibi_slopes ? opt->alibi_slopes + h : NULL;
            o.sinks = opt->sinks ? opt->sinks + h : NULL;
            o.mask = NULL, o.probs = NULL, o.head_gates = NULL;
            /* lse [B, H, N] (in place only, from mh_attention): row (s, h), its tokens at q_row */
            o.lse = opt->lse ? opt->lse + ((size_t)s * (size_t)p->n_heads + (size_t)h) * (size_t)p->n_q : NULL;
            mh_tensor next_k, next_v; /* for the call's last task to request (mh_core_extra) */
            const int more = next_item(p, g, h * B + s, &next_k, &next_v);
            const mh_core_extra ex = {g->pos + e0, NULL, qg ? NULL : g->tok + e0, g->gate + e0, NULL,
                                      more ? &next_k : NULL, more ? &next_v : NULL};
            mh_core_attention_ex(k, threads, &q, &o, prepack_ok, g->attn, &ex);
        }
}

void mh_gathered_scale(const mh_attn_problem* p, const mh_gathered* g, float* og) {
    const size_t dv = (size_t)p->head_dim_v;
    for (int64_t e = 0; e < g->seg[(size_t)p->batch * (size_t)p->n_heads]; e++)
        for (size_t j = 0; j < dv; j++) og[(size_t)e * dv + j] *= g->gate[e];
}
