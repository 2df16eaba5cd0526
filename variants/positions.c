/* Positions of q and k rows: config resolution, the layer's copies, positions, application
 * (declared in positions.h). */
#include "positions.h"

#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "core/score.h"
#include "util/alloc.h"

mh_status mh_positions_resolve(mh_layer_config* c, unsigned caps) {
    mh_rotary_config* r = &c->rotary;
    const int rotary = r->layout != MH_ROTARY_NONE;
    if (r->layout != MH_ROTARY_NONE && r->layout != MH_ROTARY_HALF && r->layout != MH_ROTARY_INTERLEAVED)
        return MH_ERR_INVALID_ARGUMENT;
    if (rotary) {
        if (r->rotary_dim == 0) r->rotary_dim = c->head_dim;
        if (r->theta == 0.0f) r->theta = 10000.0f;
        if (r->rotary_dim < 2 || r->rotary_dim > c->head_dim || r->rotary_dim % 2 != 0 ||
            !isfinite(r->theta) || !(r->theta > 0.0f))
            return MH_ERR_INVALID_ARGUMENT;
        for (int i = 0; r->inv_freq && i < r->rotary_dim / 2; i++)
            if (!isfinite(r->inv_freq[i]) || !(r->inv_freq[i] >= 0.0f)) return MH_ERR_INVALID_ARGUMENT;
    } else {
        *r = (mh_rotary_config){MH_ROTARY_NONE, 0, 0.0f, NULL}; /* nothing else is read */
    }
    if (c->qk_norm != 0 && c->qk_norm != 1) return MH_ERR_INVALID_ARGUMENT;
    if (c->qk_norm) {
        if (c->qk_norm_eps == 0.0f) c->qk_norm_eps = 1e-6f;
        if (!isfinite(c->qk_norm_eps) || !(c->qk_norm_eps > 0.0f)) return MH_ERR_INVALID_ARGUMENT;
    } else {
        c->qk_norm_eps = 0.0f;
    }
    if ((rotary || c->qk_norm) && !(caps & MH_CAP_POSITIONS)) return MH_ERR_UNSUPPORTED;
    return MH_OK;
}

mh_status mh_positions_check_weights(const mh_layer_config* c, const mh_layer_weights* w) {
    const int given = w->q_norm != NULL, k_given = w->k_norm != NULL;
    return given == c->qk_norm && k_given == c->qk_norm ? MH_OK : MH_ERR_INVALID_ARGUMENT;
}

/* A new copy of n floats (NULL src: NULL and success). */
static int copy(const float* src, size_t n, float** dst) {
    *dst = NULL;
    if (!src) return 1;
    *dst = mh_alloc(n * sizeof(float));
    if (*dst) memcpy(*dst, src, n * sizeof(float));
    return *dst != NULL;
}

mh_status mh_positions_create(mh_layer* L, const mh_layer_weights* w) {
    mh_layer_config* c = &L->cfg;
    const size_t D = (size_t)c->head_dim, half = (size_t)c->rotary.rotary_dim / 2;
    int ok = copy(w->q_norm, D, &L->q_norm) && copy(w->k_norm, D, &L->k_norm);
    if (ok && c->rotary.layout != MH_ROTARY_NONE) {
        ok = (L->inv_freq = mh_alloc(half * sizeof(float))) != NULL;
        if (ok && c->rotary.inv_freq) {
            memcpy(L->inv_freq, c->rotary.inv_freq, half * sizeof(float));
        } else if (ok) { /* HF transformers' default table, in f32: 1 / theta^(fl32(2i / r)) */
            const float r = (float)c->rotary.rotary_dim;
            for (size_t i = 0; i < half; i++) L->inv_freq[i] = 1.0f / powf(c->rotary.theta, (float)(2 * i) / r);
        }
    }
    if (!ok) {
        mh_positions_free(L);
        return MH_ERR_OUT_OF_MEMORY;
    }
    c->rotary.inv_freq = L->inv_freq;
    return MH_OK;
}

void mh_positions_free(mh_layer* L) {
    mh_free(L->inv_freq), mh_free(L->q_norm), mh_free(L->k_norm);
    L->inv_freq = L->q_norm = L->k_norm = NULL;
}

size_t mh_positions_bytes(const mh_layer* L) {
    const size_t D = (size_t)L->cfg.head_dim, half = (size_t)L->cfg.rotary.rotary_dim / 2;
    return ((L->inv_freq ? half : 0) + (L->q_norm ? D : 0) + (L->k_norm ? D : 0)) * sizeof(float);
}

int mh_positions_on(const mh_layer* L) { return L->inv_freq || L->q_norm; }

int64_t* mh_positions_take(const mh_layer* L, size_t rows, mh_ws* ws) {
    return mh_positions_on(L) ? mh_ws_take(ws, rows, 1, sizeof(int64_t)) : NULL;
}

void mh_positions_queries(const mh_attn_options* opt, int B, int N, int M, int64_t* pos) {
    const mh_attn_options dflt = mh_attn_options_default();
    for (int b = 0; b < B; b++) {
        const int64_t q0 = mh_score_first_query(opt ? opt : &dflt, b, N, M);
        for (int i = 0; i < N; i++) pos[(size_t)b * (size_t)N + (size_t)i] = q0 + i;
    }
}

void mh_positions_from(int64_t first, int B, int n, int64_t* pos) {
    for (size_t r = 0; r < (size_t)B * (size_t)n; r++) pos[r] = first + (int64_t)(r % (size_t)n);
}

/* One worker's share of mh_positions_apply: a contiguous block of rows. */
typedef struct apply_job {
    const mh_kernels* k;
    mh_rope_args a;
    size_t rows, ldx;
    const int64_t* pos;
    float* x;
} apply_job;

static void apply_worker(void* arg, int tid, int nth) {
    const apply_job* j = arg;
    const size_t r0 = j->rows * (size_t)tid / (size_t)nth, r1 = j->rows * (size_t)(tid + 1) / (size_t)nth;
    if (r1 > r0) j->k->rope(&j->a, r1 - r0, j->pos + r0, j->x + r0 * j->ldx, j->ldx);
}

void mh_positions_apply(const mh_layer* L, int k, size_t rows, size_t heads, const int64_t* pos,
                        float* x, size_t ldx) {
    if (!mh_positions_on(L) || rows == 0) return;
    const mh_layer_config* c = &L->cfg;
    const size_t D = (size_t)c->head_dim;
    apply_job j = {L->kernels,
                   {heads, D, L->inv_freq ? (size_t)c->rotary.rotary_dim : 0,
                    c->rotary.layout == MH_ROTARY_INTERLEAVED, L->inv_freq, k ? L->k_norm : L->q_norm,
                    c->qk_norm_eps},
                   rows, ldx, pos, x};
    /* about 8 flops per element and a sincos per pair of a row */
    const int nw = mh_workers(L->threads, rows, 8.0 * (double)rows * (double)(heads * D));
    mh_parallel(nw, apply_worker, &j);
}
