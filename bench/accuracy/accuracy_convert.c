/*
 * The conversions train.py makes in PyTorch, checked against the library's own
 * (accuracy.h): a model converted from MHA and not trained since must hold what
 * mh_convert_mha_to_gqa / mh_convert_mha_to_collab make of the MHA model's layers.
 */
#include "accuracy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Relative to the largest |b|: the pooled means round differently in torch and in the library. */
#define POOL_TOL 1e-6f

/* max |a - b| <= tol * max |b| over n values; tol 0: bitwise equal. */
static int same(const float* a, const float* b, size_t n, float tol) {
    if (tol == 0) return !memcmp(a, b, sizeof(float) * n);
    float diff = 0, mag = 0;
    for (size_t i = 0; i < n; i++) diff = fmaxf(diff, fabsf(a[i] - b[i])), mag = fmaxf(mag, fabsf(b[i]));
    return diff <= tol * mag;
}

/* The tensor "<l>.<name>" of f with n values, or NULL. */
static const float* tensor(const st_file* f, int l, const char* name, int64_t n) {
    char full[64];
    snprintf(full, sizeof full, "%d.%s", l, name);
    return st_numel(f, full) == n ? st_get(f, full, ST_F32, 0, NULL) : NULL;
}

/* Layer l of the converted model against the library's conversion of the source's layer l. */
static int layer_converted(const st_file* src, const st_file* conv, const td_config* c, int l, float* k, float* v,
                           float* mix, float* content) {
    const int64_t d = c->d_model, H = c->n_heads, D = c->head_dim, Hkv = c->n_kv_heads;
    mh_layer_config mha = mh_layer_config_default();
    mha.d_model = c->d_model, mha.n_heads = c->n_heads, mha.head_dim = c->head_dim;
    const mh_layer_weights w = {.w_q = tensor(src, l, "w_q", H * D * d), .w_k = tensor(src, l, "w_k", H * D * d),
                                .w_v = tensor(src, l, "w_v", H * D * d), .w_o = tensor(src, l, "w_o", d * H * D)};
    if (!w.w_q || !w.w_k || !w.w_v || !w.w_o) return 0;
    if (c->variant == MH_VARIANT_COLLAB) {
        mh_layer_config collab;
        mh_collab_config cc;
        mh_layer_weights cw;
        mh_collab_weights cm;
        const float* file_mix = tensor(conv, l, "collab_mix", H * H * D);
        const float* file_content = tensor(conv, l, "collab_content", H * d);
        return mh_convert_mha_to_collab(&mha, &w, mix, content, &collab, &cc, &cw, &cm) == MH_OK &&
               cc.collab_dim == H * D && file_mix && file_content && same(file_mix, mix, (size_t)(H * H * D), 0) &&
               same(file_content, content, (size_t)(H * d), 0);
    }
    const float* file_k = tensor(conv, l, "w_k", Hkv * D * d);
    const float* file_v = tensor(conv, l, "w_v", Hkv * D * d);
    return mh_convert_mha_to_gqa(&mha, &w, c->n_kv_heads, k, v, NULL, NULL) == MH_OK && file_k && file_v &&
           same(file_k, k, (size_t)(Hkv * D * d), POOL_TOL) && same(file_v, v, (size_t)(Hkv * D * d), POOL_TOL);
}

/* Is tensor `name` one the conversion of the variant rewrites? */
static int converted_name(const char* name) {
    const char* dot = strchr(name, '.');
    const char* base = dot ? dot + 1 : name;
    return !strcmp(base, "w_k") || !strcmp(base, "w_v") || !strcmp(base, "collab_mix") ||
           !strcmp(base, "collab_content");
}

int acc_check_conversion(const td_model* m, const char* src_path) {
    const td_config* c = &m->cfg;
    st_file src;
    if (st_open(src_path, &src)) return 0;
    const size_t kv = (size_t)c->n_kv_heads * c->head_dim * c->d_model;
    const size_t hd = (size_t)c->n_heads * c->head_dim;
    float* k = malloc(sizeof(float) * (kv ? kv : 1));
    float* v = malloc(sizeof(float) * (kv ? kv : 1));
    float* mix = malloc(sizeof(float) * (size_t)c->n_heads * hd);
    float* content = malloc(sizeof(float) * (size_t)c->n_heads * c->d_model);
    int ok = k && v && mix && content && (c->variant == MH_VARIANT_GQA || c->variant == MH_VARIANT_COLLAB);
    for (int l = 0; ok && l < c->layers; l++) ok = layer_converted(&src, &m->file, c, l, k, v, mix, content);
    /* every other tensor (W_Q, W_O, norms, MLP, embeddings) is the source's, bit for bit */
    for (int i = 0; ok && i < m->file.n_tensors; i++) {
        const st_tensor* t = &m->file.tensors[i];
        const int64_t n = st_numel(&m->file, t->name);
        if (converted_name(t->name)) continue;
        ok = st_numel(&src, t->name) == n && t->dtype == ST_F32 &&
             same(t->data, st_get(&src, t->name, ST_F32, 0, NULL), (size_t)n, 0);
    }
    free(k), free(v), free(mix), free(content);
    st_close(&src);
    return ok;
}
