/*
 * DCMHA's dynamic-weight generator, per token x (docs/variants.md, "DCMHA"):
 *   z = x [W1 | Wd]                      one packed GEMM (the official merge_weights)
 *   h = GELU(z[:4GC])                    erf or tanh, per config
 *   [w1 | w2] = h[g, c] W2[g, c]         one small packed GEMM per (group, branch)
 *   w1 = w1 / sqrt(mean_m w1^2 + 1e-6)   per (branch, group, r), over the Hg heads
 *   dd = tanh(z[4GC:])
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcmha.h"
#include "util/alloc.h"

dcmha_dims mh_dcmha_dims(const mh_layer_config* c) {
    dcmha_dims d;
    d.H = c->n_heads, d.G = mh_dcmha_cfg(c)->groups, d.R = mh_dcmha_cfg(c)->rank, d.C = mh_dcmha_cfg(c)->hidden;
    d.hg = d.H / d.G;
    d.branch = (size_t)d.G * (size_t)(2 * d.R + 1) * (size_t)d.hg;
    d.row = 4 * d.branch;
    d.z = 4 * (size_t)d.G * (size_t)d.C + 4 * (size_t)d.H;
    return d;
}

void mh_dcmha_generator_destroy(dcmha_state* s) {
    mh_packed_matrix_free(&s->w1d);
    if (s->w2)
        for (int i = 0; s->w2[i].panels; i++) mh_packed_matrix_free(&s->w2[i]);
    free(s->w2);
    mh_free(s->wb);
    memset(s, 0, sizeof *s);
}

/* [4GC + 4H, d] nn.Linear layout from W1 [d, G, 4, C] and Wd [d, G, 4, Hg]: both transposed. */
static float* merged_w1d(const mh_layer_config* c, const dcmha_dims* d, const float* w1, const float* wd) {
    const size_t dm = (size_t)c->d_model, n1 = 4 * (size_t)d->G * (size_t)d->C, n = d->z;
    float* t = mh_alloc(n * dm * sizeof(float));
    if (!t) return NULL;
    for (size_t i = 0; i < dm; i++) {
        for (size_t o = 0; o < n1; o++) t[o * dm + i] = w1[i * n1 + o];
        for (size_t o = 0; o < 4 * (size_t)d->H; o++) t[(n1 + o) * dm + i] = wd[i * 4 * (size_t)d->H + o];
    }
    return t;
}

/* W2[g][c] as [2R*Hg, C] from qkw [G, 4, C, 2R, Hg]. */
static void w2_block(const dcmha_dims* d, const float* qkw, size_t gc, float* t) {
    const size_t C = (size_t)d->C, out = 2 * (size_t)d->R * (size_t)d->hg;
    const float* src = qkw + gc * C * out;
    for (size_t k = 0; k < C; k++)
        for (size_t o = 0; o < out; o++) t[o * C + k] = src[k * out + o];
}

mh_status mh_dcmha_generator_create(const mh_layer* L, const mh_dcmha_weights* w, dcmha_state* s) {
    const mh_layer_config* c = &L->cfg;
    const dcmha_dims d = mh_dcmha_dims(c);
    memset(s, 0, sizeof *s);
    float* t = merged_w1d(c, &d, w->w1, w->wd);
    if (!t) return MH_ERR_OUT_OF_MEMORY;
    mh_status st = mh_variant_pack(L, t, NULL, (int)d.z, c->d_model, &s->w1d);
    mh_free(t);
    const size_t n2 = 2 * (size_t)d.R * (size_t)d.hg;
    s->w2 = st == MH_OK ? calloc(4 * (size_t)d.G + 1, sizeof *s->w2) : NULL; /* zeroed sentinel at the end */
    t = s->w2 ? mh_alloc(n2 * (size_t)d.C * sizeof(float)) : NULL;
    if (st == MH_OK && !t) st = MH_ERR_OUT_OF_MEMORY;
    for (size_t gc = 0; st == MH_OK && gc < 4 * (size_t)d.G; gc++) {
        w2_block(&d, w->w2, gc, t);
        st = mh_variant_pack(L, t, NULL, (int)n2, d.C, &s->w2[gc]);
    }
    mh_free(t);
    if (st == MH_OK && mh_dcmha_cfg(c)->static_weights) {
        const size_t per = (size_t)d.G * (size_t)d.hg * (size_t)d.hg;
        s->wb = mh_alloc(2 * per * sizeof(float));
        if (!s->wb) st = MH_ERR_OUT_OF_MEMORY;
        else {
            memcpy(s->wb, w->wb_pre, per * sizeof(float));
            memcpy(s->wb + per, w->wb_post, per * sizeof(float));
        }
    }
    if (st != MH_OK) mh_dcmha_generator_destroy(s);
    return st;
}

size_t mh_dcmha_generator_bytes(const mh_layer* L) {
    const dcmha_state* s = L->ext;
    const dcmha_dims d = mh_dcmha_dims(&L->cfg);
    size_t bytes = s->w1d.bytes;
    for (int i = 0; s->w2[i].panels; i++) bytes += s->w2[i].bytes;
    if (s->wb) bytes += 2 * (size_t)d.G * (size_t)d.hg * (size_t)d.hg * sizeof(float);
    return bytes;
}

static float gelu(float x, mh_gelu kind) {
    if (kind == MH_GELU_TANH)
        return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}

void mh_dcmha_generate(const mh_layer* L, size_t rows, const float* x, float* z, float* f) {
    const mh_layer_config* c = &L->cfg;
    const dcmha_state* s = L->ext;
    const dcmha_dims d = mh_dcmha_dims(c);
    const size_t hg = (size_t)d.hg, R = (size_t)d.R, C = (size_t)d.C, G = (size_t)d.G;
    const size_t fb = (2 * R + 1) * hg, n1 = 4 * G * C;
    mh_gemm_packed(L->kernels, L->threads, rows, x, (size_t)c->d_model, &s->w1d, z, d.z);
    for (size_t t = 0; t < rows; t++)
        for (size_t i = 0; i < n1; i++) z[t * d.z + i] = gelu(z[t * d.z + i], mh_dcmha_cfg(c)->gelu);
    for (size_t g = 0; g < G; g++)
        for (size_t br = 0; br < 4; br++)
            mh_gemm_packed(L->kernels, L->threads, rows, z + (g * 4 + br) * C, d.z, &s->w2[g * 4 + br],
                           f + br * d.branch + g * fb, d.row);
    for (size_t t = 0; t < rows; t++)
        for (size_t br = 0; br < 4; br++)
            for (size_t g = 0; g < G; g++) {
                float* blk = f + t * d.row + br * d.branch + g * fb;
                for (size_t r = 0; r < R; r++) { /* RMS-normalise w1[r, :] over the heads */
                    float* w1 = blk + r * hg;
                    float ss = 0.0f;
                    for (size_t m = 0; m < hg; m++) ss += w1[m] * w1[m];
                    const float inv = 1.0f / sqrtf(ss / (float)hg + 1e-6f);
                    for (size_t m = 0; m < hg; m++) w1[m] *= inv;
                }
                const float* zd = z + t * d.z + n1 + (g * 4 + br) * hg;
                for (size_t m = 0; m < hg; m++) blk[2 * R * hg + m] = tanhf(zd[m]);
            }
}
